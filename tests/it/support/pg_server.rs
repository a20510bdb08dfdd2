//! A private PostgreSQL server for the tests that stop, restart or lock it: `initdb` into a
//! temp dir and `pg_ctl` on a free loopback port (as the `postgres` user when the tests run
//! as root, since PostgreSQL refuses to run as root), stopped and removed on drop. Tests
//! that only need a database of their own use the shared test server (`PgDatabase`).

use std::path::{Path, PathBuf};
use std::process::Command;

use agentstate::test_support::redis_server::free_port;

/// A running (or stopped) private PostgreSQL cluster.
pub struct PgServer {
    dir: tempfile::TempDir,
    port: u16,
    /// `user:password@` for a server with password auth, "postgres@" with trust.
    auth: String,
}

/// The newest installed PostgreSQL binary `name` (Debian keeps them off PATH).
fn pg_bin(name: &str) -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|v| v.path().join("bin").join(name))
        .filter(|p| p.exists())
        .collect();
    found.sort_by_key(|p| {
        p.components()
            .nth(4)
            .and_then(|c| c.as_os_str().to_str()?.parse::<u32>().ok())
    });
    found.pop().unwrap_or_else(|| PathBuf::from(name))
}

fn running_as_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

/// `program args…` as the `postgres` user when this process is root.
fn as_postgres(program: &Path) -> Command {
    if running_as_root() {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--"]).arg(program);
        cmd
    } else {
        Command::new(program)
    }
}

fn run(mut cmd: Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl PgServer {
    /// A server with trust auth (any password is accepted).
    pub fn start() -> PgServer {
        PgServer::init(None, None)
    }

    /// A server whose `postgres` user must give `password` (scram-sha-256).
    pub fn start_with_password(password: &str) -> PgServer {
        PgServer::init(Some(password), None)
    }

    /// A server that takes TLS connections only (`hostssl` in pg_hba.conf, trust auth),
    /// presenting the certificate `cert` with its key `key` (PEM files).
    pub fn start_tls(cert: &Path, key: &Path) -> PgServer {
        PgServer::init(None, Some((cert, key)))
    }

    /// Replaces the server's certificate and key and reloads (new connections present it).
    pub fn replace_certificate(&self, cert: &Path, key: &Path) {
        self.install_certificate(cert, key);
        run(self.pg_ctl(&["reload"]), "pg_ctl reload");
        std::thread::sleep(std::time::Duration::from_millis(300));
    }

    fn install_certificate(&self, cert: &Path, key: &Path) {
        let data = self.dir.path().join("data");
        for (from, to) in [(cert, "server.crt"), (key, "server.key")] {
            std::fs::copy(from, data.join(to)).unwrap();
            let mut chmod = Command::new("chmod");
            chmod.arg("600").arg(data.join(to));
            run(chmod, "chmod the server's TLS files");
            if running_as_root() {
                let mut chown = Command::new("chown");
                chown.arg("postgres").arg(data.join(to));
                run(chown, "chown the server's TLS files");
            }
        }
    }

    fn init(password: Option<&str>, tls: Option<(&Path, &Path)>) -> PgServer {
        let dir = tempfile::Builder::new()
            .prefix("agentstate-pg-it")
            .tempdir()
            .unwrap();
        if running_as_root() {
            run(
                {
                    let mut c = Command::new("chown");
                    c.arg("postgres").arg(dir.path());
                    c
                },
                "chown the server dir to postgres",
            );
        }
        let mut initdb = as_postgres(&pg_bin("initdb"));
        initdb
            .arg("-D")
            .arg(dir.path().join("data"))
            .args(["-U", "postgres", "--no-sync"]);
        match password {
            Some(pw) => {
                let file = dir.path().join("pw");
                std::fs::write(&file, pw).unwrap();
                if running_as_root() {
                    run(
                        {
                            let mut c = Command::new("chown");
                            c.arg("postgres").arg(&file);
                            c
                        },
                        "chown the password file",
                    );
                }
                initdb
                    .arg("-A")
                    .arg("scram-sha-256")
                    .arg("--pwfile")
                    .arg(file);
            }
            None => {
                initdb.args(["-A", "trust"]);
            }
        }
        run(initdb, "initdb");
        let server = PgServer {
            port: free_port(),
            auth: match password {
                Some(pw) => format!("postgres:{pw}@"),
                None => "postgres@".into(),
            },
            dir,
        };
        if let Some((cert, key)) = tls {
            server.install_certificate(cert, key);
            let data = server.dir.path().join("data");
            let mut conf = std::fs::OpenOptions::new()
                .append(true)
                .open(data.join("postgresql.conf"))
                .unwrap();
            std::io::Write::write_all(&mut conf, b"\nssl = on\n").unwrap();
            std::fs::write(
                data.join("pg_hba.conf"),
                "local all all trust\nhostssl all all 127.0.0.1/32 trust\n",
            )
            .unwrap();
        }
        server.start_again();
        server
    }

    /// `postgres://…/postgres`, the URL tests create their databases through.
    pub fn admin_url(&self) -> String {
        self.url_of("postgres")
    }

    /// `postgres://…/postgres` through the server's Unix socket (for a TLS-only server,
    /// which the tests' own plain connections reach only this way).
    pub fn socket_admin_url(&self) -> String {
        let dir = self.dir.path().display().to_string().replace('/', "%2F");
        format!("postgres://{}{dir}:{}/postgres", self.auth, self.port)
    }

    /// The URL of database `name` on this server.
    pub fn url_of(&self, name: &str) -> String {
        format!("postgres://{}127.0.0.1:{}/{name}", self.auth, self.port)
    }

    /// The loopback port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    fn pg_ctl(&self, args: &[&str]) -> Command {
        let mut cmd = as_postgres(&pg_bin("pg_ctl"));
        cmd.arg("-D").arg(self.dir.path().join("data")).args(args);
        cmd
    }

    /// Starts the (stopped) server and waits until it accepts connections.
    pub fn start_again(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        let mut cmd = self.pg_ctl(&["-w", "-o", &options, "-l"]);
        cmd.arg(self.dir.path().join("log")).arg("start");
        run(cmd, "pg_ctl start");
    }

    /// `pg_ctl restart -m fast`: every session is disconnected (transactions in flight roll
    /// back) and the server comes back on the same port.
    pub fn restart(&self) {
        let mut cmd = self.pg_ctl(&["-w", "-m", "fast", "-l"]);
        cmd.arg(self.dir.path().join("log")).arg("restart");
        run(cmd, "pg_ctl restart");
    }

    /// `pg_ctl stop -m fast`: the server is down until [`PgServer::start_again`].
    pub fn stop(&self) {
        run(self.pg_ctl(&["-w", "-m", "fast", "stop"]), "pg_ctl stop");
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let _ = self.pg_ctl(&["-m", "immediate", "stop"]).output();
    }
}
