//! A private `redis-server` child process on a free loopback port, killed on drop.
//!
//! Used by the CLI's embedded default, by the demo and benchmark, and by every integration
//! test (each test owns its server, so tests never share state and fault tests can stop and
//! restart Redis at will). [`RedisServer::start_persistent`] and [`start_detached`] are the
//! long-lived kind of `agentstate server`: AOF in a directory that outlives the process.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// A `redis-server` this process started; it is killed when the value is dropped.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    dir: Home,
    child: Option<Child>,
    extra_args: Vec<String>,
    /// Killed by the kernel when the thread that started it exits (see
    /// [`RedisServer::start_tied`]).
    tied: bool,
}

/// Where a server keeps its log and persistence files.
#[derive(Debug)]
enum Home {
    /// A temporary directory, deleted with the server (no persistence).
    Temp(tempfile::TempDir),
    /// A directory that outlives the server (`agentstate server`).
    Kept(PathBuf),
}

impl Home {
    fn path(&self) -> &Path {
        match self {
            Home::Temp(t) => t.path(),
            Home::Kept(p) => p,
        }
    }
}

/// The arguments that make a server persistent: AOF, fsync every second, no RDB snapshots.
const PERSISTENT_ARGS: [&str; 4] = ["--appendonly", "yes", "--appendfsync", "everysec"];

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
            dir: Home::Temp(tempfile::tempdir()?),
            child: None,
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
            tied: false,
        };
        server.spawn()?;
        Ok(server)
    }

    /// Like [`RedisServer::start`], and the server also dies when the thread that called
    /// this exits — call it from the main thread and it cannot outlive the process even when
    /// that is killed (Ctrl-C, SIGPIPE) before `Drop` runs. On Linux (`PR_SET_PDEATHSIG`);
    /// elsewhere the same as `start`.
    pub fn start_tied() -> Result<Self> {
        let mut server = RedisServer {
            port: free_port(),
            dir: Home::Temp(tempfile::tempdir()?),
            child: None,
            extra_args: Vec::new(),
            tied: true,
        };
        server.spawn()?;
        Ok(server)
    }

    /// Starts a server that keeps its data in `dir` (created if needed): AOF with fsync
    /// every second, so it comes back with its data when started again on the same
    /// directory. `port` 0 picks a free port. Dropping the value kills it; [`stop`] shuts it
    /// down gracefully (the AOF flushed).
    ///
    /// [`stop`]: RedisServer::stop
    pub fn start_persistent(dir: &Path, port: u16) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        let mut server = RedisServer {
            port: if port == 0 { free_port() } else { port },
            dir: Home::Kept(dir.canonicalize()?),
            child: None,
            extra_args: PERSISTENT_ARGS.iter().map(|s| s.to_string()).collect(),
            tied: false,
        };
        server.spawn()?;
        Ok(server)
    }

    /// Shuts the server down gracefully (SIGTERM: Redis flushes its AOF) and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: signals our own child, which has not been reaped yet.
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
            }
            let _ = child.wait();
        }
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn spawn(&mut self) -> Result<()> {
        let mut command = Command::new("redis-server");
        #[cfg(target_os = "linux")]
        if self.tied {
            use std::os::unix::process::CommandExt;
            // SAFETY: prctl is async-signal-safe; it runs in the child between fork and exec.
            unsafe {
                command.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) == -1 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = command
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
        ping(&self.url())
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The port the server listens on.
    #[cfg(feature = "test-support")]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's working directory (holds `redis.log`).
    #[cfg(feature = "test-support")]
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
    #[cfg(feature = "test-support")]
    pub fn restart(&mut self) -> Result<()> {
        self.kill();
        self.spawn()
    }

    /// Stops the server process (SIGSTOP): connections stay open but nothing is answered,
    /// as when Redis is cut off by a network partition. [`RedisServer::resume`] continues it.
    #[cfg(feature = "test-support")]
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// Continues a paused server (SIGCONT); it then answers what was sent meanwhile.
    #[cfg(feature = "test-support")]
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    #[cfg(feature = "test-support")]
    fn signal(&self, signal: libc::c_int) {
        if let Some(child) = &self.child {
            // SAFETY: sends a signal to our own child process, which has not been reaped.
            unsafe {
                libc::kill(child.id() as libc::pid_t, signal);
            }
        }
    }

    /// A synchronous connection, for tests that inspect keys with plain commands.
    #[cfg(feature = "test-support")]
    pub fn connection(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("connect to test redis-server")
    }
}

/// True when a Redis answers PING at `url` within half a second.
pub fn ping(url: &str) -> bool {
    redis::Client::open(url)
        .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(500)))
        .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
        .is_ok()
}

/// Starts a persistent server (as [`RedisServer::start_persistent`]) that runs on after this
/// process exits (`--daemonize yes`), and waits until it answers. Returns its port and
/// process id (also in `dir/redis.pid`); stop it with SHUTDOWN (`redis-cli -p PORT
/// shutdown`).
pub fn start_detached(dir: &Path, port: u16) -> Result<(u16, u32)> {
    std::fs::create_dir_all(dir)?;
    let dir = dir.canonicalize()?;
    let port = if port == 0 { free_port() } else { port };
    let status = Command::new("redis-server")
        .args(["--port", &port.to_string()])
        .args(["--bind", "127.0.0.1"])
        .args(["--save", ""])
        .args(PERSISTENT_ARGS)
        .arg("--dir")
        .arg(&dir)
        .args(["--logfile", "redis.log", "--pidfile", "redis.pid"])
        .args(["--daemonize", "yes"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| Error::io(format!("cannot start redis-server ({e})")))?;
    let log = || std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
    if !status.success() {
        return Err(Error::io(format!(
            "redis-server exited with {status}; log:\n{}",
            log()
        )));
    }
    let url = format!("redis://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if ping(&url) {
            let pid = std::fs::read_to_string(dir.join("redis.pid"))
                .ok()
                .and_then(|p| p.trim().parse().ok())
                .unwrap_or(0);
            return Ok((port, pid));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(Error::io(format!(
        "redis-server did not answer on port {port} within 10 s; log:\n{}",
        log()
    )))
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
