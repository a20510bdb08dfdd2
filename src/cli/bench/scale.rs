//! W9 at scale: the W8 population (1,000,000 sessions by default) live, flushed and trimmed,
//! then what an operator and an agent wait for at that size: a `session list` page (the
//! first and one in the middle), a new daemon's start after Redis restarted empty (binding,
//! re-seeding the session indexes from SQLite), the walk of every listing page after it, and
//! a session Redis lost read by an agent (restored on demand through a running daemon).

use std::time::{Duration, Instant};

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::measure::Latencies;
use super::memory::{w8_memory, W8Report, W8Sizes};
use super::spill::wait_owned;
use crate::redis_server::RedisServer;
use crate::{MessageQuery, Result, SessionListing, SpillConfig, SpillDaemon, Store};

/// Listing pages timed at each place.
const PAGE_REPS: usize = 50;

/// Ids of a listing page.
const PAGE: usize = 100;

/// Sessions read after the loss, each restored on demand.
const RESTORES: usize = 200;

/// What W9 measured.
#[derive(Debug, Clone, Serialize)]
pub struct W9Report {
    /// W8 at this population: memory per live session before and after the trim.
    pub w8: W8Report,
    /// Median latency of the first `session list` page of [`PAGE`] ids, microseconds.
    pub first_page_p50_us: Option<u64>,
    /// Median latency of a page from the middle of the ids, microseconds.
    pub middle_page_p50_us: Option<u64>,
    /// From a new daemon's open to the end of its first pass (binding, re-seeding every
    /// partition's session index from SQLite) after Redis restarted empty, seconds.
    pub reseed_secs: f64,
    /// Ids listed by walking every page after the re-seed.
    pub listed: usize,
    /// That walk, seconds.
    pub walk_secs: f64,
    /// From a running daemon's start (after the re-seed) to its holding every partition,
    /// seconds.
    pub takeover_secs: f64,
    /// Median latency of reading a session Redis lost (restored on demand), milliseconds.
    pub restore_p50_ms: Option<f64>,
    /// Its 99th percentile, milliseconds.
    pub restore_p99_ms: Option<f64>,
}

/// W9 on `store`, the only client of `server` (which it restarts empty), SQLite at `db_path`.
pub async fn w9_scale(
    store: &Store,
    server: &mut RedisServer,
    sizes: W8Sizes,
    db_path: &std::path::Path,
) -> Result<W9Report> {
    super::harness::checked_by_a_daemon(store, db_path).await?;
    let w8 = w8_memory(store, sizes, super::measure::WORKERS, db_path).await?;
    let middle = format!("mem_{}", sizes.sessions / 2);
    let first_page_p50_us = page_p50(store, None).await?;
    let middle_page_p50_us = page_p50(store, Some(middle)).await?;

    tokio::task::block_in_place(|| server.restart_empty())?;
    let config = SpillConfig::new(db_path)
        .interval(Duration::from_millis(5))
        .lease_ttl(Duration::from_millis(1000));
    let started = Instant::now();
    SpillDaemon::open(store.clone(), config.clone())
        .await?
        .run_once()
        .await?;
    let reseed_secs = started.elapsed().as_secs_f64();

    let started = Instant::now();
    let mut listing = SessionListing::new(crate::MAX_PAGE);
    let mut listed = 0;
    loop {
        let page = store.list_sessions_page(&listing).await?;
        listed += page.ids.len();
        match page.next {
            Some(next) => listing.after = Some(next),
            None => break,
        }
    }
    let walk_secs = started.elapsed().as_secs_f64();

    let cancel = CancellationToken::new();
    let mut daemon = tokio::spawn(
        SpillDaemon::open(store.clone(), config)
            .await?
            .run(cancel.clone().cancelled_owned()),
    );
    let mut lat = Latencies::default();
    let mut outcome = Ok(());
    let started = Instant::now();
    for p in 0..store.keys().partitions() {
        // A daemon that stopped takes nothing: its error, not the wait's, is the outcome.
        let owned = tokio::select! {
            owned = wait_owned(store, p, Duration::from_secs(600)) => owned,
            stopped = &mut daemon => {
                return Err(match stopped {
                    Ok(Err(e)) => e,
                    Ok(Ok(())) => crate::Error::io("the spill daemon stopped before taking every partition"),
                    Err(e) => crate::Error::io(format!("the spill daemon panicked: {e}")),
                })
            }
        };
        if let Err(e) = owned {
            outcome = Err(e);
            break;
        }
    }
    let takeover_secs = started.elapsed().as_secs_f64();
    if outcome.is_ok() {
        let step = (sizes.sessions / RESTORES).max(1);
        for i in (0..sizes.sessions).step_by(step).take(RESTORES) {
            let started = Instant::now();
            if let Err(e) = store
                .messages(&format!("mem_{i}"), MessageQuery::default())
                .await
            {
                outcome = Err(e);
                break;
            }
            lat.record(started);
        }
    }
    cancel.cancel();
    let _ = daemon.await;
    outcome?;
    let ms = |us: Option<u64>| us.map(|us| us as f64 / 1000.0);
    Ok(W9Report {
        w8,
        first_page_p50_us,
        middle_page_p50_us,
        reseed_secs,
        listed,
        walk_secs,
        takeover_secs,
        restore_p50_ms: ms(lat.quantile(0.5)),
        restore_p99_ms: ms(lat.quantile(0.99)),
    })
}

/// The median latency of a [`PAGE`]-id listing page after `after`, microseconds.
async fn page_p50(store: &Store, after: Option<String>) -> Result<Option<u64>> {
    let mut listing = SessionListing::new(PAGE);
    listing.after = after;
    let mut lat = Latencies::default();
    for _ in 0..PAGE_REPS {
        let started = Instant::now();
        store.list_sessions_page(&listing).await?;
        lat.record(started);
    }
    Ok(lat.quantile(0.5))
}
