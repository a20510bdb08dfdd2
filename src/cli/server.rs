//! `agentstate server`: a long-lived local Redis for people trying agentstate without Docker
//! or a system Redis — `redis-server` with AOF in a data directory, so sessions outlive each
//! command and the server itself. Prints the URL to export (the only thing on stdout);
//! `--detach` leaves it running in the background, `--stop` shuts that one down.

use std::path::{Path, PathBuf};

use crate::redis_server::{self, redis_server_available, RedisServer};
use crate::{Error, Result};
use clap::Args;
use serde_json::json;

use super::{print_json, Global};

/// Arguments of `agentstate server`.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Data directory: the AOF, `redis.log`, and `server.url` (how `--stop` finds it).
    #[arg(long, default_value = "./agentstate-redis", value_name = "DIR")]
    dir: PathBuf,
    /// Loopback port to listen on (0: a free one). On 6379, commands find it without
    /// AGENTSTATE_REDIS_URL.
    #[arg(long, default_value_t = 6379)]
    port: u16,
    /// Start it in the background and exit; prints the URL (`export
    /// AGENTSTATE_REDIS_URL=$(agentstate server --detach)`). Prints the running one's URL if
    /// the directory's server already runs.
    #[arg(long, conflicts_with = "stop")]
    detach: bool,
    /// Stop the server running from --dir (gracefully: its AOF is flushed).
    #[arg(long)]
    stop: bool,
}

/// The file in the data directory that records the running server's URL.
const URL_FILE: &str = "server.url";

/// Runs `agentstate server` (a CLI process doing only this: blocking calls are fine here).
pub async fn run(global: &Global, args: ServerArgs) -> Result<()> {
    serve(global.json(), args).await
}

/// The URL recorded in `dir`, when a server recorded there still answers.
fn running(dir: &Path) -> Option<String> {
    let url = std::fs::read_to_string(dir.join(URL_FILE)).ok()?;
    let url = url.trim().to_string();
    redis_server::ping(&url).then_some(url)
}

async fn serve(json: bool, args: ServerArgs) -> Result<()> {
    let dir = &args.dir;
    if args.stop {
        return stop(json, dir);
    }
    if let Some(url) = running(dir) {
        if args.detach {
            return announce(json, &url, dir, None, true);
        }
        return Err(Error::InvalidInput(format!(
            "a server already runs from {} on {url} — use it (export AGENTSTATE_REDIS_URL={url}), or stop it with `agentstate server --stop --dir {}`",
            dir.display(),
            dir.display()
        )));
    }
    if args.port != 0 {
        let url = format!("redis://127.0.0.1:{}", args.port);
        if redis_server::ping(&url) {
            return Err(Error::InvalidInput(format!(
                "a Redis already answers on 127.0.0.1:{} (commands use it{}) — pass --port N (or --port 0 for a free one) to run another",
                args.port,
                if args.port == 6379 { " by default" } else { " with --redis" }
            )));
        }
    }
    if !redis_server_available() {
        return Err(Error::unavailable(super::NO_REDIS_HELP));
    }
    if args.detach {
        let (port, pid) = redis_server::start_detached(dir, args.port)?;
        let url = format!("redis://127.0.0.1:{port}");
        std::fs::write(dir.join(URL_FILE), format!("{url}\n"))?;
        return announce(json, &url, dir, Some(pid), true);
    }
    // Handlers first: a signal that arrives right after the URL is printed must still stop
    // the redis-server child rather than orphan it.
    let signals = Signals::install()?;
    let mut server = RedisServer::start_persistent(dir, args.port)?;
    let url = server.url();
    std::fs::write(dir.join(URL_FILE), format!("{url}\n"))?;
    announce(json, &url, dir, server.pid(), false)?;
    signals.wait().await;
    server.stop();
    let _ = std::fs::remove_file(dir.join(URL_FILE));
    eprintln!(
        "agentstate: redis-server stopped; its data stay in {} (start it again with `agentstate server --dir {}`)",
        dir.display(),
        dir.display()
    );
    Ok(())
}

/// Prints the URL on stdout (the value) and, on stderr, what it is and how to use it.
fn announce(json: bool, url: &str, dir: &Path, pid: Option<u32>, detached: bool) -> Result<()> {
    let abs = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    if json {
        print_json(&json!({
            "url": url,
            "dir": abs,
            "pid": pid,
            "detached": detached,
        }))?;
    } else {
        println!("{url}");
    }
    let stop = if detached {
        format!(
            "stop it with `agentstate server --stop --dir {}`",
            dir.display()
        )
    } else {
        "Ctrl-C stops it".to_string()
    };
    eprintln!(
        "agentstate: redis-server on {url} keeps its data in {} (AOF, fsync every second); {stop}. \
In other shells: export AGENTSTATE_REDIS_URL={url} — and run `agentstate spill` beside it to keep SQLite up to date.",
        abs.display()
    );
    use std::io::Write;
    std::io::stdout().flush()?;
    Ok(())
}

/// `--stop`: SHUTDOWN to the server recorded in `dir` (Redis flushes its AOF first).
fn stop(json: bool, dir: &Path) -> Result<()> {
    let Some(url) = running(dir) else {
        return Err(Error::InvalidInput(format!(
            "no agentstate server runs from {} — start one with `agentstate server --detach --dir {}`",
            dir.display(),
            dir.display()
        )));
    };
    let mut conn = redis::Client::open(url.as_str())
        .and_then(|c| c.get_connection())
        .map_err(Error::from_redis)?;
    // The server closes the connection as it exits: no reply is expected.
    let _ = redis::cmd("SHUTDOWN").query::<()>(&mut conn);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while redis_server::ping(&url) {
        if std::time::Instant::now() > deadline {
            return Err(Error::io(format!(
                "redis-server on {url} did not stop within 10 s"
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = std::fs::remove_file(dir.join(URL_FILE));
    if json {
        print_json(&json!({ "stopped": url }))
    } else {
        println!("stopped");
        Ok(())
    }
}

/// SIGINT and SIGTERM, caught from the moment they are installed.
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
        })
    }

    /// Waits for either.
    async fn wait(mut self) {
        tokio::select! {
            _ = self.int.recv() => {}
            _ = self.term.recv() => {}
        }
    }
}
