//! A private `redis-server` child process on a free loopback port, killed on drop.
//!
//! Used by the CLI's embedded default, by the demo and benchmark, and by every integration
//! test (each test owns its server, so tests never share state and fault tests can stop and
//! restart Redis at will).

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// A `redis-server` this process started; it is killed when the value is dropped.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    extra_args: Vec<String>,
}

/// True when a `redis-server` binary is on `PATH`.
pub fn redis_server_available() -> bool {
    Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// A loopback TCP port that nothing listens on right now, from 20000–22767: below Linux'
/// ephemeral range (32768 and up), so no client connection of a busy machine takes it
/// between this check and the server's bind, and its cluster bus port (port + 10000) stays
/// below that range too. A process never hands the same port out twice (tests start
/// servers concurrently).
pub fn free_port() -> u16 {
    use rand::Rng;
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|p| p.into_inner());
    let mut rng = rand::rng();
    for _ in 0..1000 {
        let port = rng.random_range(20_000..22_768);
        let bus = port + 10_000;
        if !handed_out.contains(&port)
            && TcpListener::bind(("127.0.0.1", port)).is_ok()
            && TcpListener::bind(("127.0.0.1", bus)).is_ok()
        {
            handed_out.push(port);
            return port;
        }
    }
    panic!("no free loopback port in 20000-22767")
}

impl RedisServer {
    /// Starts a server with no persistence (`--save '' --appendonly no`) on a free port.
    pub fn start() -> Result<Self> {
        Self::start_with(&[])
    }

    /// Starts a server with extra `redis-server` arguments (e.g. `["--cluster-enabled", "yes"]`).
    pub fn start_with(extra_args: &[&str]) -> Result<Self> {
        let mut server = RedisServer {
            port: free_port(),
            dir: tempfile::tempdir()?,
            child: None,
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
        };
        server.spawn()?;
        Ok(server)
    }

    fn spawn(&mut self) -> Result<()> {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .args(["--protected-mode", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(["--logfile", "redis.log"])
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                Error::io(format!(
                    "cannot start redis-server ({e}); install it (apt-get install -y redis-server) or run `docker compose up -d redis`"
                ))
            })?;
        self.child = Some(child);
        self.wait_ready()
    }

    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() && self.ping() {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(Error::io(format!(
                        "redis-server exited with {status} on port {}; log:\n{}",
                        self.port,
                        self.log()
                    )));
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(Error::io(format!(
            "redis-server did not answer on port {} within 10 s; log:\n{}",
            self.port,
            self.log()
        )))
    }

    fn ping(&self) -> bool {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(500)))
            .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
            .is_ok()
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The server's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's working directory (holds `redis.log`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default()
    }

    /// A path inside the server's temp dir, handy for a test's SQLite file.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Kills the server (SIGKILL): everything in memory is lost.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the server and starts an empty one on the same port: "Redis lost everything"
    /// (its persistence files, if any, are deleted).
    pub fn restart_empty(&mut self) -> Result<()> {
        self.kill();
        for name in ["appendonlydir", "dump.rdb"] {
            let path = self.dir.path().join(name);
            let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
        }
        self.spawn()
    }

    /// Kills the server (SIGKILL) and starts it again on the same port and directory: with
    /// persistence turned on (`--appendonly yes --appendfsync always` in the extra
    /// arguments) it comes back with every acknowledged write — "Redis restarted".
    pub fn restart(&mut self) -> Result<()> {
        self.kill();
        self.spawn()
    }

    /// Stops the server process (SIGSTOP): connections stay open but nothing is answered,
    /// as when Redis is cut off by a network partition. [`RedisServer::resume`] continues it.
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// Continues a paused server (SIGCONT); it then answers what was sent meanwhile.
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    fn signal(&self, signal: libc::c_int) {
        if let Some(child) = &self.child {
            // SAFETY: sends a signal to our own child process, which has not been reaped.
            unsafe {
                libc::kill(child.id() as libc::pid_t, signal);
            }
        }
    }

    /// A synchronous connection, for tests that inspect keys with plain commands.
    pub fn connection(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("connect to test redis-server")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
