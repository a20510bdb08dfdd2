//! W5 flush and W6 rehydrate, for `agentstate bench` and the ignored `spill_bench` test:
//! the flusher's throughput (wal entries committed to SQLite per second) on a backlog, and
//! the time to make a large session live again from SQLite after Redis lost it.

use std::time::{Duration, Instant};

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::redis_server::RedisServer;
use crate::scripts;
use crate::spill::restore_from_durable;
use crate::NewMessage;
use crate::NewSession;
use crate::Store;
use crate::{Error, Result};
use crate::{SpillConfig, SpillDaemon};

/// What W5 measured.
#[derive(Debug, Clone, Serialize)]
pub struct FlushFigures {
    /// wal entries the flusher committed.
    pub entries: u64,
    /// Seconds the drain took (every partition flushed to the end and trimmed).
    pub secs: f64,
    /// wal entries per second.
    pub per_sec: f64,
    /// From the last write to all of it committed in SQLite, with a daemon started at the
    /// last write (opening SQLite and taking the leases included), ms.
    pub lag_ms: f64,
}

/// What W6 measured.
#[derive(Debug, Clone, Serialize)]
pub struct RehydrateFigures {
    /// Messages in the rehydrated session.
    pub messages: usize,
    /// How Redis lost the session.
    pub loss: String,
    /// Through the daemon, as an agent process does (request, wait, live), ms.
    pub request_ms: f64,
    /// Straight from SQLite (read + one restore script, no daemon), ms.
    pub direct_ms: f64,
}

/// How W6 makes Redis lose the session.
#[derive(Debug)]
pub enum Loss<'a> {
    /// Kill the private server and start an empty one on the same port.
    Restart(&'a mut RedisServer),
    /// Delete the session's keys (a shared Redis, which must not be restarted).
    DeleteKeys,
}

/// Both spill figures, for the `spill_bench` test.
#[cfg(test)]
#[derive(Debug, Clone, Serialize)]
pub struct SpillBench {
    /// The flusher on a synthetic backlog.
    pub flush: FlushFigures,
    /// Rehydration of a large session.
    pub rehydrate: RehydrateFigures,
}

/// Appends `n` messages to `sid` in pipelines of EVALSHA (scripts preloaded).
pub(super) async fn fill(store: &Store, sid: &str, n: usize) -> Result<()> {
    store.preload_scripts().await?;
    let body = serde_json::to_string(
        &NewMessage::new("assistant")
            .content("a typical reply of about a hundred bytes, give or take a few words here"),
    )?;
    let call = scripts::append_item(
        store.keys().session(sid),
        sid,
        &body,
        None,
        None,
        store.config().limits.message,
        None,
    )
    .call();
    let mut conn = store.conn().await?;
    let mut left = n;
    while left > 0 {
        let chunk = left.min(1000);
        let mut pipe = redis::pipe();
        for _ in 0..chunk {
            pipe.add_command(call.cmd().clone()).ignore();
        }
        let _: () = pipe.query_async(&mut conn).await?;
        left -= chunk;
    }
    Ok(())
}

/// W5: drains the wal backlog into `config.durable` with one daemon (`run_once`: every
/// partition flushed to the end and trimmed). `written` is when the last entry was written.
pub async fn w5_flush(
    store: &Store,
    config: &SpillConfig,
    written: Instant,
) -> Result<FlushFigures> {
    let daemon = SpillDaemon::open(store.clone(), config.clone()).await?;
    let started = Instant::now();
    let report = daemon.run_once().await?;
    let secs = started.elapsed().as_secs_f64();
    Ok(FlushFigures {
        entries: report.wal,
        secs,
        per_sec: report.wal as f64 / secs.max(1e-9),
        lag_ms: written.elapsed().as_secs_f64() * 1000.0,
    })
}

/// Deletes the live keys of `sid`.
async fn drop_live(store: &Store, sid: &str) -> Result<()> {
    let keys = store.keys().session(sid);
    let mut conn = store.conn().await?;
    let _: () = redis::cmd("DEL")
        .arg(&keys.own()[..])
        .query_async(&mut conn)
        .await?;
    Ok(())
}

/// Waits (up to `limit`) until a daemon holds partition `p` and has published its cursors.
pub(super) async fn wait_owned(store: &Store, p: u32, limit: Duration) -> Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        let mut conn = store.conn().await?;
        let (leased, published): (bool, bool) = redis::pipe()
            .exists(store.keys().lease(p))
            .exists(store.keys().committed(p))
            .query_async(&mut conn)
            .await?;
        if leased && published {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Error::io(format!(
                "no spill daemon took partition {p} within {} s",
                limit.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// W6: a `messages`-message session is written and flushed (with everything else pending),
/// Redis loses it (`loss`), then it is restored through a running daemon as an agent would
/// (`Admin::restore_session`), and once more straight from SQLite.
pub async fn w6_rehydrate(
    store: &Store,
    config: &SpillConfig,
    messages: usize,
    loss: Loss<'_>,
) -> Result<RehydrateFigures> {
    let sid = "bench-rehydrate";
    store.create_session(&NewSession::new().id(sid)).await?;
    fill(store, sid, messages).await?;
    SpillDaemon::open(store.clone(), config.clone())
        .await?
        .run_once()
        .await?;
    let loss = match loss {
        Loss::Restart(server) => {
            server.restart_empty()?;
            "redis-server restarted empty"
        }
        Loss::DeleteKeys => {
            drop_live(store, sid).await?;
            "session keys deleted"
        }
    };
    let cancel = CancellationToken::new();
    let daemon = tokio::spawn(
        SpillDaemon::open(store.clone(), config.clone())
            .await?
            .run(cancel.clone().cancelled_owned()),
    );
    // The figure is the restore itself, not the daemon taking its leases.
    let owned = wait_owned(store, store.keys().partition(sid), Duration::from_secs(10)).await;
    let started = Instant::now();
    let restored = match owned {
        Ok(()) => store.admin().restore_session(sid).await,
        Err(e) => Err(e),
    };
    let request_ms = started.elapsed().as_secs_f64() * 1000.0;
    cancel.cancel();
    let _ = daemon.await;
    restored?;

    drop_live(store, sid).await?;
    let started = Instant::now();
    let restored = restore_from_durable(store, &config.durable, sid).await?;
    let direct_ms = started.elapsed().as_secs_f64() * 1000.0;
    Ok(RehydrateFigures {
        messages: restored.unwrap_or(0),
        loss: loss.into(),
        request_ms,
        direct_ms,
    })
}

/// W5 on a synthetic backlog of `entries` wal entries spread over 8 sessions, then W6 on a
/// `messages`-message session (keys deleted), writing SQLite to `db_path` (a fresh file).
/// Needs a Redis of its own: it writes sessions `bench-*` and flushes every partition.
#[cfg(test)]
pub async fn run(
    store: &Store,
    db_path: &std::path::Path,
    entries: usize,
    messages: usize,
) -> Result<SpillBench> {
    let config = SpillConfig::new(db_path).interval(Duration::from_millis(5));
    let sessions = 8;
    for i in 0..sessions {
        let sid = format!("bench-flush-{i}");
        store.create_session(&NewSession::new().id(&sid)).await?;
        fill(store, &sid, entries / sessions).await?;
    }
    let flush = w5_flush(store, &config, Instant::now()).await?;
    let rehydrate = w6_rehydrate(store, &config, messages, Loss::DeleteKeys).await?;
    Ok(SpillBench { flush, rehydrate })
}

#[cfg(test)]
mod tests {
    use crate::redis_server::RedisServer;
    use crate::{Config, Store};

    /// Flusher throughput and rehydration time. Run in release mode:
    /// `cargo test --release --bin agentstate spill_bench -- --ignored --nocapture`
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore]
    async fn spill_bench() {
        let server = RedisServer::start().unwrap();
        let store = Store::connect(Config::new(server.url())).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let figures = super::run(&store, &dir.path().join("bench.db"), 200_000, 10_000)
            .await
            .unwrap();
        println!("{}", serde_json::to_string_pretty(&figures).unwrap());
        assert_eq!(figures.rehydrate.messages, 10_000);
    }
}
