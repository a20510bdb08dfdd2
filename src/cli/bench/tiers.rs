//! `agentstate bench --db postgres://…`: W5 (flush) and W6 (restore) on PostgreSQL beside
//! SQLite in one run, and one daemon against two on PostgreSQL. Each row gets a private
//! redis-server and a fresh durable tier (a temp SQLite file, or a database the bench creates
//! on the server of `--db` and drops after), the same backlog (`entries` wal entries over 8
//! sessions) and the same session of `messages` messages to restore.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::spill::{fill, w6_rehydrate, Loss};
use crate::durable::postgres;
use crate::redis_server::RedisServer;
use crate::spill::inspect;
use crate::{Config, Error, NewSession, Result, SpillConfig, SpillDaemon, Store};

/// One tier and daemon count.
#[derive(Debug, Clone, Serialize)]
pub struct TierRow {
    /// `sqlite` or `postgres`.
    pub tier: &'static str,
    /// Daemons flushing together.
    pub daemons: usize,
    /// wal entries of the backlog.
    pub entries: u64,
    /// From the daemons' start to every entry committed, seconds.
    pub secs: f64,
    /// entries / secs.
    pub per_sec: f64,
    /// W6 through a running daemon (request -> live), ms; one-daemon rows only.
    pub restore_request_ms: Option<f64>,
    /// W6 straight from the durable tier (read + one restore script), ms.
    pub restore_direct_ms: Option<f64>,
}

/// Runs the rows: SQLite with one daemon, PostgreSQL with one and with two.
pub async fn compare(url: &str, entries: usize, messages: usize) -> Result<Vec<TierRow>> {
    let dir = tempfile::tempdir()?;
    let mut rows = vec![row("sqlite", &dir.path().join("bench.db"), 1, entries, messages).await?];
    for daemons in [1, 2] {
        let db = postgres::ScratchDatabase::create(url, "agentstate_bench").await?;
        rows.push(row("postgres", Path::new(db.url()), daemons, entries, messages).await?);
    }
    Ok(rows)
}

async fn row(
    tier: &'static str,
    db: &Path,
    daemons: usize,
    entries: usize,
    messages: usize,
) -> Result<TierRow> {
    let server = tokio::task::spawn_blocking(RedisServer::start)
        .await
        .map_err(|e| Error::io(e.to_string()))??;
    let store = Store::connect(Config::new(server.url())).await?;
    let config = SpillConfig::new(db)
        .interval(Duration::from_millis(5))
        .lease_ttl(Duration::from_millis(1000));
    // A first pass publishes the cursors, so sessions can be created.
    SpillDaemon::open(store.clone(), config.clone())
        .await?
        .run_once()
        .await?;
    let sessions = 8;
    for i in 0..sessions {
        let sid = format!("bench-flush-{i}");
        store.create_session(&NewSession::new().id(&sid)).await?;
        fill(&store, &sid, entries / sessions).await?;
    }
    let backlog = pending(&store).await?;
    let cancel = CancellationToken::new();
    let started = Instant::now();
    let mut running = Vec::new();
    for _ in 0..daemons {
        let daemon = SpillDaemon::open(store.clone(), config.clone()).await?;
        running.push(tokio::spawn(daemon.run(cancel.clone().cancelled_owned())));
    }
    while pending(&store).await? > 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let secs = started.elapsed().as_secs_f64();
    cancel.cancel();
    for d in running {
        d.await.map_err(|e| Error::io(e.to_string()))??;
    }
    let (mut restore_request_ms, mut restore_direct_ms) = (None, None);
    if daemons == 1 {
        let w6 = w6_rehydrate(&store, &config, messages, Loss::DeleteKeys).await?;
        restore_request_ms = Some(w6.request_ms);
        restore_direct_ms = Some(w6.direct_ms);
    }
    Ok(TierRow {
        tier,
        daemons,
        entries: backlog,
        secs,
        per_sec: backlog as f64 / secs.max(1e-9),
        restore_request_ms,
        restore_direct_ms,
    })
}

/// wal entries not yet committed, over every partition.
async fn pending(store: &Store) -> Result<u64> {
    Ok(inspect::stats(store)
        .await?
        .iter()
        .map(|p| p.wal_pending as u64)
        .sum())
}
