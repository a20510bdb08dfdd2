//! `agentstate spill --metrics ADDR`: Prometheus text at `/metrics`, `/healthz` (the process
//! answers) and `/readyz` (Redis and the durable tier answer and this daemon's heartbeat is
//! current, i.e. it owns partitions or stands by for them; 503 with the reason otherwise).
//!
//! The daemon records its counters, histogram and owned-partition gauge itself
//! (`crate::spill::metrics`); the figures Redis holds — pending entries and lag per
//! partition, consumer groups' pending entries, dead letters — are read at each scrape, so
//! every daemon of a namespace reports every partition (aggregate with `max by (partition)`).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::durable::Durable;
use crate::error::{Error, Result};
use crate::spill::{inspect, metrics as series};
use crate::store::Store;

/// Dead letters counted per scrape, per partition, at most.
const DEAD_LETTER_COUNT_CAP: usize = 100_000;

/// How long a readiness check waits for Redis or the durable tier.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// What the endpoints read.
#[derive(Clone)]
pub(crate) struct MetricsState {
    /// The daemon's namespace.
    store: Store,
    /// A reading handle on the daemon's durable tier (for `/readyz`).
    durable: Durable,
    /// The daemon's owner id, whose heartbeat `/readyz` looks for.
    owner: Arc<str>,
    /// The process-wide Prometheus recorder.
    handle: PrometheusHandle,
}

/// The process's Prometheus recorder, installed once (the Python wheel may run the CLI
/// twice in one process).
fn recorder() -> Result<PrometheusHandle> {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    if let Some(h) = HANDLE.get() {
        return Ok(h.clone());
    }
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(series::BATCH_SECONDS.to_string()),
            series::BATCH_BUCKETS,
        )
        .map_err(|e| Error::io(format!("metrics: {e}")))?
        .set_buckets_for_metric(
            Matcher::Full(series::WRITE_BEHIND.to_string()),
            &series::write_behind_bounds(),
        )
        .map_err(|e| Error::io(format!("metrics: {e}")))?
        .install_recorder()
        .map_err(|e| Error::io(format!("metrics: {e}")))?;
    series::describe();
    Ok(HANDLE.get_or_init(|| handle).clone())
}

/// The router of the metrics endpoint for the daemon `owner` of `store`, whose durable tier
/// is at `db`. Installs the Prometheus recorder (so the daemon's calls start recording).
pub(crate) async fn router(store: Store, db: &std::path::Path, owner: &str) -> Result<Router> {
    let handle = recorder()?;
    let durable = Durable::open_reader(db, &store.config().namespace).await?;
    let state = MetricsState {
        store,
        durable,
        owner: owner.into(),
        handle,
    };
    Ok(Router::new()
        .route("/metrics", get(scrape))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .with_state(state))
}

/// `/metrics`: sets the series read from Redis, then renders everything.
async fn scrape(State(state): State<MetricsState>) -> Response {
    // Redis down: the daemon's own series still render; the Redis ones keep their last
    // values (`/readyz` says why).
    if let Err(err) = read_redis_series(&state.store).await {
        tracing::debug!(error = %err, "metrics: could not read the Redis figures");
    }
    state.handle.run_upkeep();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.handle.render(),
    )
        .into_response()
}

/// Sets the gauges whose figures live in Redis: pending and lag per partition (as `agentstate
/// stats`), consumer groups' pending entries and dead letters per group.
async fn read_redis_series(store: &Store) -> Result<()> {
    for s in inspect::stats(store).await? {
        let p = s.partition.to_string();
        metrics::gauge!(series::PENDING, "partition" => p.clone()).set(s.wal_pending as f64);
        metrics::gauge!(series::DECISIONS_PENDING, "partition" => p.clone())
            .set(s.decisions_pending as f64);
        metrics::gauge!(series::LAG, "partition" => p).set(s.lag_ms as f64 / 1000.0);
    }
    let mut pending: BTreeMap<String, u64> = BTreeMap::new();
    for g in consumer_groups(store).await? {
        *pending.entry(g.name).or_default() += g.pending as u64;
    }
    let mut dead: BTreeMap<String, u64> = pending.keys().map(|g| (g.clone(), 0)).collect();
    for d in store.dead_letters(DEAD_LETTER_COUNT_CAP).await? {
        *dead.entry(d.group).or_default() += 1;
    }
    for (group, n) in pending {
        metrics::gauge!(series::CONSUMER_PENDING, "group" => group).set(n as f64);
    }
    for (group, n) in dead {
        metrics::gauge!(series::DEAD_LETTERS, "group" => group).set(n as f64);
    }
    Ok(())
}

/// One consumer group on one partition's decisions stream (`XINFO GROUPS`).
#[derive(Debug, Clone)]
pub(crate) struct GroupInfo {
    /// The partition.
    pub partition: u32,
    /// Group name.
    pub name: String,
    /// Entries delivered and not acknowledged.
    pub pending: usize,
    /// Consumers that joined.
    pub consumers: usize,
    /// Entries not delivered to the group yet, when Redis knows (7.0+).
    pub lag: Option<usize>,
}

/// Every consumer group of every partition's decisions stream (a partition without a
/// stream has none).
pub(crate) async fn consumer_groups(store: &Store) -> Result<Vec<GroupInfo>> {
    let mut out = Vec::new();
    let mut conn = store.conn().await?;
    for p in 0..store.keys().partitions() {
        let key = store.keys().decisions(p);
        let exists: bool = redis::cmd("EXISTS")
            .arg(&key)
            .query_async(&mut conn)
            .await?;
        if !exists {
            continue;
        }
        let reply: redis::streams::StreamInfoGroupsReply = redis::cmd("XINFO")
            .arg("GROUPS")
            .arg(&key)
            .query_async(&mut conn)
            .await?;
        for g in reply.groups {
            out.push(GroupInfo {
                partition: p,
                name: g.name,
                pending: g.pending,
                consumers: g.consumers,
                lag: g.lag,
            });
        }
    }
    Ok(out)
}

/// `/readyz`: 200 `ready` when Redis answers, the durable tier answers and this daemon's
/// heartbeat is current; 200 `degraded: spooling` while the daemon spools (the live tier
/// serves, the durable tier is down or behind: `crate::spill`'s outage); else 503 with the
/// first reason.
async fn ready(State(state): State<MetricsState>) -> Response {
    let spooling = crate::spill::metrics::spooling();
    match readiness(&state, spooling).await {
        Ok(()) if spooling => (
            StatusCode::OK,
            "degraded: spooling (the durable tier is down or behind; the spool holds what it has not committed)\n",
        )
            .into_response(),
        Ok(()) => (StatusCode::OK, "ready\n").into_response(),
        Err(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        )
            .into_response(),
    }
}

/// Why the daemon is not ready, if it is not.
async fn readiness(state: &MetricsState, spooling: bool) -> std::result::Result<(), String> {
    let redis = async {
        let mut conn = state.store.conn().await?;
        let (time, lapses): ((u64, u64), Option<u64>) = redis::pipe()
            .cmd("TIME")
            .zscore(state.store.keys().daemons(), &*state.owner)
            .query_async(&mut conn)
            .await?;
        Ok::<_, Error>((time.0 * 1000 + time.1 / 1000, lapses))
    };
    let (now, lapses) = match tokio::time::timeout(PROBE_TIMEOUT, redis).await {
        Ok(Ok(found)) => found,
        Ok(Err(err)) => return Err(format!("redis: {err}")),
        Err(_) => return Err("redis: no answer within 2 s".into()),
    };
    // Any statement both tiers can run on the schema: a read of no rows.
    let probe = state
        .durable
        .text_rows("SELECT id FROM sessions WHERE id = ?1", "");
    match tokio::time::timeout(PROBE_TIMEOUT, probe).await {
        Ok(Ok(_)) => {}
        // The spool stands in for the tier.
        _ if spooling => {}
        Ok(Err(err)) => return Err(format!("durable tier: {err}")),
        Err(_) => return Err("durable tier: no answer within 2 s".into()),
    }
    match lapses {
        Some(at) if at > now => Ok(()),
        _ => Err(format!(
            "daemon {}: no current heartbeat in {} (its passes are not running)",
            state.owner,
            state.store.keys().daemons()
        )),
    }
}
