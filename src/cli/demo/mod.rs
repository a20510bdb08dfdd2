//! `agentstate demo`: the main job. Plays a multi-agent scenario end to end on the embedded
//! default and narrates it; every step checks what it claims, and the command exits 0 only
//! if all checks held.

mod narrator;
mod observe;
mod steps;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use agentstate::redis_server::RedisServer;
use agentstate::spill::{SpillConfig, SpillDaemon};
use agentstate::{Config, Error, Result, Store};
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
    /// The demo's SQLite file.
    db: PathBuf,
    /// The demo's key prefix.
    prefix: String,
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
    println!("agentstate demo — a planner agent and two worker sub-agents share a live session in Redis;");
    println!(
        "a spill daemon keeps it durable in SQLite, and restores it when Redis loses everything."
    );
    match &redis {
        DemoRedis::Private(s) => println!(
            "Redis:  private redis-server on {} (nothing answered on 127.0.0.1:6379)",
            s.url()
        ),
        DemoRedis::Shared(url) => {
            println!(
                "Redis:  {url}, namespace `{}` (wiped to play the loss of Redis)",
                store.keys().namespace_pattern()
            );
            wipe_namespace(&store).await?;
        }
    }
    println!("SQLite: {}", db.display());

    let cancel = CancellationToken::new();
    let daemon = SpillDaemon::open(
        store.clone(),
        SpillConfig::new(&db).interval(Duration::from_millis(20)),
    )
    .await?;
    let daemon_task = tokio::spawn(daemon.run(cancel.clone()));

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
    let mut n = Narrator::new(8);
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
    look_for_yourself(&sc, &redis);
    n.finish(started)
}

/// The `sqlite3`, `redis-cli` and `agentstate` commands to look at what the demo left.
fn look_for_yourself(sc: &Scenario, redis: &DemoRedis) {
    let Scenario {
        store,
        planner,
        db,
        prefix,
        ..
    } = sc;
    let db = db.display();
    let keys = store.keys();
    let session = keys.session(planner);
    println!("\nLook for yourself:");
    println!("  sqlite3 {db} \"SELECT seq, json_extract(element,'$.state'), json_extract(element,'$.content') FROM messages WHERE session_id='{planner}' ORDER BY seq\"");
    println!("  sqlite3 {db} \"SELECT id, decision, outcome FROM decisions WHERE session_id='{planner}'\"");
    if let DemoRedis::Private(_) = redis {
        println!("  (the private redis-server stops with the demo; run `docker compose up -d redis` or a local");
        println!("   redis-server on 6379 and run the demo again to keep the live keys, then:)");
    }
    println!("  redis-cli HGETALL '{}'", session.meta);
    println!("  redis-cli LRANGE '{}' 0 -1", session.msgs);
    println!(
        "  redis-cli XINFO GROUPS '{}'",
        keys.decisions(session.partition)
    );
    println!("  redis-cli TTL '{}'", session.meta);
    println!("  agentstate --prefix {prefix} --db {db} session show {planner}");
}

/// The embedded default, for the demo: `--redis` or 127.0.0.1:6379 when something answers
/// (shared: the demo works in its own namespace), else a private redis-server.
async fn demo_redis(global: &Global) -> Result<DemoRedis> {
    Ok(match super::embedded_default(global).await? {
        (_, Some(server)) => DemoRedis::Private(server),
        (url, None) => DemoRedis::Shared(url),
    })
}

/// Deletes every key of the store's namespace (SCAN on every master, then UNLINK each):
/// "Redis lost" on a shared server or cluster.
async fn wipe_namespace(store: &Store) -> Result<()> {
    let keys = store.scan_namespace().await?;
    for chunk in keys.chunks(1000) {
        let unlinks = chunk
            .iter()
            .map(|k| {
                let mut cmd = redis::cmd("UNLINK");
                cmd.arg(k);
                cmd
            })
            .collect();
        let _: Vec<i64> = store.fan_out(unlinks).await?;
    }
    Ok(())
}
