//! W1 scaling: W1 at 1, 8 and 64 workers, each next to `redis-benchmark` running
//! a plain SET and the single-append script (`append_message.lua`) at the same `-c`, with
//! the Redis CPU each append cost (`INFO cpu`), this process' CPU per append (getrusage) and
//! the commands it ran (`INFO commandstats`). Group commit shows here: appends in flight
//! together share an EVALSHA.

use serde::Serialize;

use super::live;
use super::measure::{benchmark_on, command_calls, redis_cpu_secs};
use super::sizes::Sizes;
use crate::{NewMessage, Result, Store};

/// The worker counts W1 is measured at.
pub const WORKER_COUNTS: [usize; 3] = [1, 8, 64];

/// W1 at one worker count, and its baselines at the same `-c`.
#[derive(Debug, Clone, Serialize)]
pub struct ScalingPoint {
    /// Concurrent workers (redis-benchmark's `-c`).
    pub workers: usize,
    /// Sessions the workers share out.
    pub sessions: usize,
    /// Appends measured.
    pub appends: u64,
    /// Appends per second.
    pub per_sec: f64,
    /// Median latency of one append, microseconds.
    pub p50_us: Option<u64>,
    /// 99th percentile latency of one append, microseconds.
    pub p99_us: Option<u64>,
    /// Redis CPU (user + sys) per append, microseconds.
    pub cpu_us_per_append: f64,
    /// This process' CPU (user + sys, every thread: the workers, the runtime, the
    /// connection drivers) per append, microseconds.
    pub client_cpu_us_per_append: f64,
    /// EVALSHA calls per append (below 1 when appends were batched).
    pub evalsha_per_append: f64,
    /// Every command Redis ran per append, the scripts' inner ones included.
    pub commands_per_append: f64,
    /// redis-benchmark SET of a W1-sized value, requests per second.
    pub set_per_sec: f64,
    /// Redis CPU per SET, microseconds.
    pub set_cpu_us: f64,
    /// redis-benchmark `EVALSHA append_message` on one session, per second.
    pub script_per_sec: f64,
    /// Redis CPU per `append_message` call, microseconds.
    pub script_cpu_us: f64,
    /// Worker threads of this process' async runtime (`--threads`; redis-benchmark's client
    /// is one thread).
    pub client_threads: usize,
}

impl ScalingPoint {
    /// Our appends/s over SET's.
    pub fn of_set(&self) -> f64 {
        self.per_sec / self.set_per_sec
    }

    /// Our appends/s over the single-append script's.
    pub fn of_script(&self) -> f64 {
        self.per_sec / self.script_per_sec
    }
}

/// CPU this process has used (user + sys, all threads), seconds.
fn process_cpu_secs() -> f64 {
    // SAFETY: getrusage writes the struct it is given and nothing else.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// Runs redis-benchmark with `command` and returns (requests/s, Redis CPU µs per request).
async fn baseline(
    store: &Store,
    key: &str,
    clients: usize,
    requests: usize,
    command: &[String],
) -> Result<(f64, f64)> {
    let cpu = redis_cpu_secs(store).await?;
    let rate = benchmark_on(store, key, clients, requests, command).await?;
    let used = redis_cpu_secs(store).await? - cpu;
    Ok((rate, used * 1e6 / requests as f64))
}

/// W1 at each of `counts` (the report's are [`WORKER_COUNTS`]): `appends` appends over
/// max(`sizes.sessions`, workers) fresh sessions, then the SET and `raw_append` (the
/// single-append script's redis-benchmark command) baselines with as many clients.
pub async fn w1_scaling(
    store: &Store,
    sizes: Sizes,
    appends: usize,
    raw_append: &[String],
    counts: &[usize],
) -> Result<Vec<ScalingPoint>> {
    let set_key = store.keys().bench_set();
    let value = serde_json::to_string(&NewMessage::new("user").content(live::random_content()))?;
    let set = vec!["SET".to_string(), set_key.clone(), value];
    let mut points = Vec::new();
    for &workers in counts {
        let sessions = sizes.sessions.max(workers);
        let point_sizes = Sizes {
            workers,
            sessions,
            messages: appends.div_ceil(sessions),
            ..sizes
        };
        let cpu = redis_cpu_secs(store).await?;
        let calls = command_calls(store).await?;
        let client_cpu = process_cpu_secs();
        let (row, _) =
            live::w1_append(store, &format!("bench_scale{workers}"), point_sizes).await?;
        let client_used = process_cpu_secs() - client_cpu;
        let used = redis_cpu_secs(store).await? - cpu;
        let after = command_calls(store).await?;
        let n = row.ops as f64;
        let (set_per_sec, set_cpu_us) =
            baseline(store, &set_key, workers, sizes.raw_requests, &set).await?;
        let script_key = raw_append.get(3).map_or("", String::as_str);
        let (script_per_sec, script_cpu_us) =
            baseline(store, script_key, workers, sizes.raw_requests, raw_append).await?;
        points.push(ScalingPoint {
            workers,
            sessions,
            appends: row.ops,
            per_sec: row.per_sec,
            p50_us: row.p50_us,
            p99_us: row.p99_us,
            cpu_us_per_append: used * 1e6 / n,
            client_cpu_us_per_append: client_used * 1e6 / n,
            evalsha_per_append: (after.0 - calls.0) as f64 / n,
            commands_per_append: (after.1 - calls.1) as f64 / n,
            set_per_sec,
            set_cpu_us,
            script_per_sec,
            script_cpu_us,
            client_threads: tokio::runtime::Handle::current().metrics().num_workers(),
        });
    }
    let mut conn = store.conn().await?;
    let _: i64 = redis::cmd("DEL")
        .arg(&set_key)
        .query_async(&mut conn)
        .await?;
    Ok(points)
}
