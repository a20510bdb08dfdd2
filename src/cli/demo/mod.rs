//! `agentstate demo`: the main job. Plays a multi-agent scenario end to end on the embedded
//! default and narrates it; every step checks what it claims, and the command exits 0 only
//! if all checks held.

mod narrator;
mod observe;
mod steps;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::durable::Location;
use crate::redis_server::RedisServer;
use crate::spill::{SpillConfig, SpillDaemon};
use crate::{Config, Error, Result, Store};
use clap::Args;
use tokio_util::sync::CancellationToken;

use super::Global;
use narrator::Narrator;
use steps::{
    checkpoint, compaction, decisions, messages, redis_lost, sessions, spill, working_state,
};

/// `agentstate demo` takes only the global options.
#[derive(Debug, Args)]
pub struct DemoArgs {}

/// Where the demo's Redis lives, and how "Redis lost" is played.
enum DemoRedis {
    /// A private redis-server: lost by restarting it empty.
    Private(RedisServer),
    /// A Redis someone else runs: lost by wiping the demo's namespace.
    Shared(String),
}

impl DemoRedis {
    /// The URL the demo's store connects to.
    fn url(&self) -> String {
        match self {
            DemoRedis::Private(s) => s.url(),
            DemoRedis::Shared(url) => url.clone(),
        }
    }
}

/// The scenario's cast and where it writes.
struct Scenario {
    /// The store every agent of the demo shares.
    store: Store,
    /// The planner's session id (`demo-<run>-planner`).
    planner: String,
    /// The two workers' session ids: linked and detached sub-agents of the planner.
    workers: [String; 2],
    /// The demo's durable tier: a SQLite file, or a PostgreSQL URL.
    db: PathBuf,
    /// The demo's key prefix.
    prefix: String,
}

impl Scenario {
    /// "SQLite" or "PostgreSQL", for the narration.
    fn tier(&self) -> &'static str {
        Location::of(&self.db).tier()
    }
}

pub async fn run(global: &Global, _args: DemoArgs) -> Result<()> {
    let started = Instant::now();
    let redis = demo_redis(global).await?;
    let prefix = if global.prefix == "as" {
        "asdemo".to_string()
    } else {
        global.prefix.clone()
    };
    let db = global.demo_db();
    if db == std::path::Path::new(super::DEMO_DB) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
        }
    }
    let config = Config::new(redis.url())
        .prefix(&prefix)
        .partitions(global.partitions);
    let store = Store::connect(config).await?;
    let mut n = Narrator::new(8, global.json());
    n.intro("agentstate demo — a planner agent and two worker sub-agents share a live session in Redis;");
    let location = Location::of(&db);
    n.intro(format!(
        "a spill daemon keeps it durable in {}, and restores it when Redis loses everything.",
        location.tier()
    ));
    match &redis {
        DemoRedis::Private(s) => n.intro(format!(
            "Redis:  private redis-server on {} (nothing answered on 127.0.0.1:6379)",
            s.url()
        )),
        DemoRedis::Shared(url) => {
            n.intro(format!(
                "Redis:  {}, namespace `{}` (wiped to play the loss of Redis)",
                crate::address::redacted(url),
                store.keys().namespace_pattern()
            ));
            store.admin().wipe_namespace().await?;
        }
    }
    n.intro(format!("{}: {}", location.tier(), location.display()));

    let cancel = CancellationToken::new();
    let daemon = SpillDaemon::open(
        store.clone(),
        SpillConfig::new(&db).interval(Duration::from_millis(20)),
    )
    .await?;
    let daemon_task = tokio::spawn(daemon.run(cancel.clone().cancelled_owned()));

    let run_id = format!("{:06x}", rand::random::<u32>() >> 8);
    let sc = Scenario {
        store,
        planner: format!("demo-{run_id}-planner"),
        workers: [
            format!("demo-{run_id}-worker-a"),
            format!("demo-{run_id}-worker-b"),
        ],
        db,
        prefix,
    };
    sessions(&sc, &mut n).await?;
    working_state(&sc, &mut n).await?;
    let last_seq = messages(&sc, &mut n).await?;
    let mut consumer = decisions(&sc, &mut n).await?;
    let (note_seq, history) = compaction(&sc, &mut n, last_seq).await?;
    checkpoint(&sc, &mut n).await?;
    spill(&sc, &mut n, history).await?;
    let redis = redis_lost(&sc, &mut n, redis, &mut consumer, note_seq, history).await?;

    cancel.cancel();
    daemon_task.await.map_err(|e| Error::io(e.to_string()))??;
    if let DemoRedis::Shared(_) = &redis {
        let expiring = expire_bookkeeping(&sc.store).await?;
        n.say(format!(
            "the demo's {expiring} bookkeeping keys (`{}`: indexes, streams, markers) expire in {} s, \
             like its sessions, so nothing of it stays in this Redis",
            sc.store.keys().namespace_pattern(),
            DEMO_KEYS_TTL.as_secs()
        ));
    }
    let hints = look_for_yourself(&sc, &redis);
    n.hints("Look for yourself:", hints);
    n.finish(started)
}

/// How long the demo's keys stay in a shared Redis after the run: the session's idle TTL.
const DEMO_KEYS_TTL: Duration = Duration::from_secs(3600);

/// Gives every key of the demo's namespace that has no TTL (indexes, streams, the daemon's
/// markers and leases' counters) the session idle TTL, so a shared Redis is left clean
/// within the hour while the closing hints still work. Returns how many it gave one.
async fn expire_bookkeeping(store: &Store) -> Result<usize> {
    let keys = store.admin().scan_namespace().await?;
    let one_key = |name: &str, key: &String| {
        let mut cmd = redis::cmd(name);
        cmd.arg(key);
        cmd
    };
    // Keys that already expire (the sessions') keep their TTL. (TTL, then EXPIRE:
    // `EXPIRE ... NX` needs Redis 7.) One command per key: on a cluster they span slots.
    let ttls: Vec<i64> = store
        .fan_out(keys.iter().map(|k| one_key("TTL", k)).collect())
        .await?;
    let lasting: Vec<redis::Cmd> = keys
        .iter()
        .zip(ttls)
        .filter(|(_, ttl)| *ttl == -1)
        .map(|(k, _)| {
            let mut cmd = one_key("EXPIRE", k);
            cmd.arg(DEMO_KEYS_TTL.as_secs());
            cmd
        })
        .collect();
    let expiring = lasting.len();
    let _: Vec<i64> = store.fan_out(lasting).await?;
    Ok(expiring)
}

/// How to run this command in a shell: `agentstate` when that is what PATH finds, else its
/// path (relative to the current directory when inside it), so the hints run as printed
/// after `scripts/demo.sh` (which does not install it). Inside another program (the Python
/// wheel's extension, whose process is the interpreter) the program name it was entered
/// with stands for it: a console script's path, or a command line such as
/// `python -m agentstate`, printed as given.
fn program() -> String {
    let exe = std::env::current_exe().and_then(|p| p.canonicalize());
    let entered = super::ENTERED_AS.get().map(String::as_str);
    let me = match exe {
        Ok(exe)
            if exe
                .file_stem()
                .is_some_and(|n| n.to_string_lossy().starts_with("agentstate")) =>
        {
            exe
        }
        _ => match entered {
            Some(e) if e.contains(' ') => return e.to_string(),
            Some(e) => match std::path::Path::new(e).canonicalize() {
                Ok(path) => path,
                Err(_) => return "agentstate".into(),
            },
            None => return "agentstate".into(),
        },
    };
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("agentstate"))
            .find(|p| p.is_file())
    });
    if on_path.and_then(|p| p.canonicalize().ok()).as_ref() == Some(&me) {
        return "agentstate".into();
    }
    let cwd = std::env::current_dir()
        .ok()
        .and_then(|d| d.canonicalize().ok());
    match cwd.and_then(|d| me.strip_prefix(d).ok().map(|r| r.to_path_buf())) {
        Some(rel) => format!("./{}", rel.display()),
        None => me.display().to_string(),
    }
}

/// Single-quotes `text` for a POSIX shell.
fn sh_quote(text: &str) -> String {
    if text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-:@+=,".contains(c))
    {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// The `sqlite3` (or `psql`), `redis-cli` and `agentstate` commands to look at what the demo left,
/// runnable as printed.
fn look_for_yourself(sc: &Scenario, redis: &DemoRedis) -> Vec<String> {
    let Scenario {
        store,
        planner,
        db,
        prefix,
        ..
    } = sc;
    // The shell of the tier, and how it reads a field of a stored message's JSON.
    let (shell, content) = match Location::of(db) {
        Location::Sqlite(_) => ("sqlite3", "json_extract(element,'$.content')"),
        Location::Postgres(_) => ("psql", "element::json->>'content'"),
    };
    let flag = if shell == "psql" { " -c" } else { "" };
    let db = sh_quote(&db.display().to_string());
    let keys = store.keys();
    let session = keys.session(planner);
    let me = program();
    let mut lines = vec![
        format!("{shell} {db}{flag} \"SELECT seq, {content} FROM messages WHERE session_id='{planner}' ORDER BY seq\""),
        format!("{shell} {db}{flag} \"SELECT compact_seq, from_seq, to_seq FROM compactions WHERE session_id='{planner}'\""),
        format!("{shell} {db}{flag} \"SELECT id, decision, outcome FROM decisions WHERE session_id='{planner}'\""),
        format!("{me} --prefix {prefix} --db {db} export {planner}"),
    ];
    match redis {
        DemoRedis::Private(_) => lines.push(format!(
            "# the live keys went with the private redis-server; to look at them with redis-cli, \
             run `{me} server --detach` (or `docker compose up -d redis`), then the demo again"
        )),
        DemoRedis::Shared(url) => {
            let cli = if *url == crate::config::DEFAULT_REDIS_URL {
                "redis-cli".to_string()
            } else {
                format!("redis-cli -u {}", sh_quote(url))
            };
            let redis_opt = if *url == crate::config::DEFAULT_REDIS_URL {
                String::new()
            } else {
                format!(" --redis {}", sh_quote(url))
            };
            lines.extend([
                format!("{cli} HGETALL {}", sh_quote(&session.meta)),
                format!("{cli} LRANGE {} 0 -1", sh_quote(&session.msgs)),
                format!(
                    "{cli} XINFO GROUPS {}",
                    sh_quote(&keys.decisions(session.partition))
                ),
                format!("{cli} TTL {}", sh_quote(&session.meta)),
                format!("{me}{redis_opt} --prefix {prefix} --db {db} session show {planner}"),
            ]);
        }
    }
    lines
}

/// The embedded default, for the demo: `--redis` or 127.0.0.1:6379 when something answers
/// (shared: the demo works in its own namespace), else a private redis-server.
async fn demo_redis(global: &Global) -> Result<DemoRedis> {
    Ok(match super::embedded_default(global).await? {
        (_, Some(server)) => DemoRedis::Private(server),
        (url, None) => DemoRedis::Shared(url),
    })
}
