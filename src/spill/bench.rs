//! Spill benchmarks, reusable by `agentstate bench` and the ignored `spill_bench` test:
//! flusher throughput (wal entries committed to SQLite per second) and the time to
//! rehydrate a large session from SQLite into Redis.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{SpillConfig, SpillDaemon};
use crate::error::Result;
use crate::messages::NewMessage;
use crate::scripts;
use crate::sessions::NewSession;
use crate::store::Store;

/// What [`run`] measured.
#[derive(Debug, Clone, Serialize)]
pub struct SpillBench {
    /// wal entries the flusher committed.
    pub flush_entries: u64,
    /// Seconds the flush took.
    pub flush_secs: f64,
    /// wal entries per second.
    pub flush_rate: f64,
    /// Messages in the rehydrated session.
    pub rehydrate_messages: usize,
    /// Restoring it straight from SQLite (read + one restore script), ms.
    pub rehydrate_direct_ms: f64,
    /// Restoring it through the daemon, as an agent process does (request, wait, live), ms.
    pub rehydrate_request_ms: f64,
}

/// Appends `n` messages to `sid` in pipelines of EVALSHA (scripts preloaded).
async fn fill(store: &Store, sid: &str, n: usize) -> Result<()> {
    store.preload_scripts().await?;
    let keys = store.keys().session(sid);
    let body = serde_json::to_string(
        &NewMessage::new("assistant")
            .content("a typical reply of about a hundred bytes, give or take a few words here"),
    )?;
    let mut conn = store.conn().await?;
    let mut left = n;
    while left > 0 {
        let chunk = left.min(1000);
        let mut pipe = redis::pipe();
        for _ in 0..chunk {
            let mut inv = scripts::APPEND_MESSAGE.prepare_invoke();
            inv.key(&keys.as_array()[..])
                .arg(sid)
                .arg(&body)
                .arg("")
                .arg("")
                .arg(store.config().limits.message);
            pipe.invoke_script(&inv).ignore();
        }
        let _: () = pipe.query_async(&mut conn).await?;
        left -= chunk;
    }
    Ok(())
}

/// Measures the flusher on `entries` wal entries spread over 8 sessions, then the
/// rehydration of a `messages`-message session, writing SQLite to `db_path` (a fresh file).
/// Needs a Redis of its own: it writes sessions `bench-*` and flushes every partition.
pub async fn run(
    store: &Store,
    db_path: &Path,
    entries: usize,
    messages: usize,
) -> Result<SpillBench> {
    let config = SpillConfig::new(db_path).interval(Duration::from_millis(5));
    // Flusher throughput: the backlog is written first, then drained and timed.
    let sessions = 8;
    for i in 0..sessions {
        let sid = format!("bench-flush-{i}");
        store.create_session(&NewSession::new().id(&sid)).await?;
        fill(store, &sid, entries / sessions).await?;
    }
    let daemon = SpillDaemon::open(store.clone(), config.clone()).await?;
    let started = Instant::now();
    let report = daemon.run_once().await?;
    let flush_secs = started.elapsed().as_secs_f64();

    // Rehydration: a large session, flushed, then dropped from Redis.
    let sid = "bench-rehydrate";
    store.create_session(&NewSession::new().id(sid)).await?;
    fill(store, sid, messages).await?;
    SpillDaemon::open(store.clone(), config.clone())
        .await?
        .run_once()
        .await?;
    let drop_live = || async {
        let keys = store.keys().session(sid);
        let mut conn = store.conn().await?;
        let _: () = redis::cmd("DEL")
            .arg(&keys.own()[..])
            .query_async(&mut conn)
            .await?;
        Result::<()>::Ok(())
    };
    drop_live().await?;
    let started = Instant::now();
    let restored = super::rehydrator::restore_direct(store, db_path, sid).await?;
    let rehydrate_direct_ms = started.elapsed().as_secs_f64() * 1000.0;
    drop_live().await?;
    let cancel = tokio_util::sync::CancellationToken::new();
    let daemon = tokio::spawn(
        SpillDaemon::open(store.clone(), config)
            .await?
            .run(cancel.clone()),
    );
    // Let the daemon take its leases first, so the figure is the restore itself.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    store.restore_session(sid).await?;
    let rehydrate_request_ms = started.elapsed().as_secs_f64() * 1000.0;
    cancel.cancel();
    let _ = daemon.await;
    Ok(SpillBench {
        flush_entries: report.wal,
        flush_secs,
        flush_rate: report.wal as f64 / flush_secs,
        rehydrate_messages: restored.unwrap_or(0),
        rehydrate_direct_ms,
        rehydrate_request_ms,
    })
}
