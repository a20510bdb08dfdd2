//! What every benchmark workload measures with: result rows ([`Row`]) and latencies
//! ([`Latencies`]), `redis-benchmark` runs next to ours ([`redis_benchmark`]), and Redis'
//! own figures (CPU, memory, command counts). Imports no workload.

use std::process::Command;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::{Error, Result, Store};

/// Concurrent workers in W1–W3 (also redis-benchmark's `-c`) unless `--workers` says.
pub const WORKERS: usize = 8;

/// Characters of content in every W1 message.
pub const CONTENT_CHARS: usize = 256;

/// One row of the benchmark table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Workload name (`W1 append`, ...).
    pub workload: String,
    /// Operations measured.
    pub ops: u64,
    /// Our throughput, operations (or the unit named in `unit`) per second.
    pub per_sec: f64,
    /// What `per_sec` counts (`msgs`, `saves`, ...).
    pub unit: String,
    /// Median latency of one call, microseconds.
    pub p50_us: Option<u64>,
    /// 99th percentile latency of one call, microseconds.
    pub p99_us: Option<u64>,
    /// redis-benchmark's throughput for the equivalent raw command, same unit.
    pub raw_per_sec: Option<f64>,
    /// The raw command redis-benchmark ran.
    pub raw_command: Option<String>,
}

impl Row {
    /// `per_sec / raw_per_sec`.
    pub fn ratio(&self) -> Option<f64> {
        self.raw_per_sec.map(|raw| self.per_sec / raw)
    }
}

/// What one append cost Redis in commands during a workload (other clients of the same
/// Redis add to it; the CLI's own reads of the stats are one INFO per master).
#[derive(Debug, Clone, Serialize)]
pub struct CallsPerAppend {
    /// EVALSHA calls per append: 1 for a lone append, less when appends share a batch.
    pub evalsha_per_append: f64,
    /// Every command per append, the scripts' inner ones included.
    pub commands_per_append: f64,
}

impl CallsPerAppend {
    /// The figures for `appends` appends during which Redis counted `(evalsha, commands)`
    /// calls (the difference of two [`command_calls`]).
    pub fn new((evalsha, commands): (u64, u64), appends: u64) -> CallsPerAppend {
        let n = appends.max(1) as f64;
        CallsPerAppend {
            evalsha_per_append: evalsha as f64 / n,
            commands_per_append: commands as f64 / n,
        }
    }
}

/// Call latencies of one workload.
#[derive(Debug, Default)]
pub struct Latencies(Vec<u32>);

impl Latencies {
    /// Records one call that started at `start`.
    pub fn record(&mut self, start: Instant) {
        self.push(start.elapsed());
    }

    /// Records one latency.
    pub fn push(&mut self, latency: Duration) {
        self.0
            .push(latency.as_micros().min(u32::MAX as u128) as u32);
    }

    /// Merges another worker's latencies.
    pub fn extend(&mut self, other: Latencies) {
        self.0.extend(other.0);
    }

    /// The `q` quantile (0..=1), microseconds.
    pub fn quantile(&mut self, q: f64) -> Option<u64> {
        if self.0.is_empty() {
            return None;
        }
        self.0.sort_unstable();
        let i = ((self.0.len() - 1) as f64 * q).round() as usize;
        Some(u64::from(self.0[i]))
    }
}

/// [`redis_benchmark`] with `clients` connections on the node that serves the command's
/// first key (an EVALSHA's `command[3]`): the one Redis, or on a cluster the master holding
/// that slot.
pub async fn benchmark_raw(
    store: &Store,
    clients: usize,
    requests: usize,
    command: &[String],
) -> Result<f64> {
    let key = command.get(3).map_or("", String::as_str);
    benchmark_on(store, key, clients, requests, command).await
}

/// [`redis_benchmark`] with `clients` connections on the node that serves `key`.
pub async fn benchmark_on(
    store: &Store,
    key: &str,
    clients: usize,
    requests: usize,
    command: &[String],
) -> Result<f64> {
    let url = store.node_url_for(key).await?;
    let (host, port) = tcp_address(&url)?;
    redis_benchmark(&host, port, clients, requests, command)
}

/// Host and port of a plain `redis://` URL (redis-benchmark runs beside it).
pub fn tcp_address(url: &str) -> Result<(String, u16)> {
    match redis::IntoConnectionInfo::into_connection_info(url)
        .map_err(Error::from_redis)?
        .addr()
    {
        redis::ConnectionAddr::Tcp(host, port) => Ok((host.clone(), *port)),
        _ => Err(Error::InvalidInput(
            "bench needs a plain redis:// TCP address (redis-benchmark runs beside it)".into(),
        )),
    }
}

/// Runs `redis-benchmark -q -c clients -P 1 -n requests` with one command against the Redis
/// at `host`:`port` and returns its requests per second.
pub fn redis_benchmark(
    host: &str,
    port: u16,
    clients: usize,
    requests: usize,
    command: &[String],
) -> Result<f64> {
    let out = Command::new("redis-benchmark")
        .args(["-h", host, "-p", &port.to_string()])
        .args(["-c", &clients.to_string(), "-P", "1", "-q"])
        .args(["-n", &requests.to_string()])
        .args(command)
        .output()
        .map_err(|e| Error::io(format!("cannot run redis-benchmark: {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    // The last line reads "<cmd>: 12345.67 requests per second, p50=..."; earlier
    // lines are progress output separated by carriage returns.
    text.rsplit(['\r', '\n'])
        .find_map(|line| {
            let (_, rest) = line.rsplit_once(": ")?;
            rest.split_whitespace().next()?.parse::<f64>().ok()
        })
        .ok_or_else(|| Error::io(format!("could not read redis-benchmark output: {text}")))
}

/// A field of `INFO <section>` of every master (one on a single node).
pub async fn info_field(store: &Store, section: &str, field: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for mut conn in store.masters().await? {
        let info: String = redis::cmd("INFO")
            .arg(section)
            .query_async(&mut conn)
            .await?;
        let value = info
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .map(|v| v.trim().to_string())
            .ok_or_else(|| Error::redis(format!("INFO {section} has no {field}")))?;
        out.push(value);
    }
    Ok(out)
}

/// CPU seconds Redis used so far (`used_cpu_user` + `used_cpu_sys` of `INFO cpu`), summed
/// over every master.
pub async fn redis_cpu_secs(store: &Store) -> Result<f64> {
    let mut total = 0.0;
    for field in ["used_cpu_user", "used_cpu_sys"] {
        for v in info_field(store, "cpu", field).await? {
            total += v
                .parse::<f64>()
                .map_err(|e| Error::redis(format!("{field}: {e}")))?;
        }
    }
    Ok(total)
}

/// `used_memory`, bytes, summed over every master.
pub async fn used_memory(store: &Store) -> Result<u64> {
    let mut total = 0;
    for v in info_field(store, "memory", "used_memory").await? {
        total += v
            .parse::<u64>()
            .map_err(|e| Error::redis(format!("used_memory: {e}")))?;
    }
    Ok(total)
}

/// A short, readable rendering of a raw command for the table: `EVALSHA <script> (<n> keys)`
/// for our scripts, other commands with long arguments elided.
pub fn describe(command: &[String]) -> String {
    if let [evalsha, sha, keys, ..] = command {
        if evalsha == "EVALSHA" {
            if let Some(name) = crate::scripts::name_of(sha) {
                return format!("EVALSHA {name} ({keys} keys)");
            }
        }
    }
    command
        .iter()
        .map(|a| {
            if a.len() > 24 {
                format!("<{} bytes>", a.len())
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Calls of EVALSHA and of all commands so far, summed over every master
/// (`INFO commandstats`).
pub async fn command_calls(store: &Store) -> Result<(u64, u64)> {
    let (mut evalsha, mut total) = (0, 0);
    for mut conn in store.masters().await? {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut conn)
            .await?;
        for line in info.lines() {
            let Some((name, stats)) = line.split_once(':') else {
                continue;
            };
            let calls: u64 = stats
                .split(',')
                .find_map(|kv| kv.strip_prefix("calls="))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            total += calls;
            if name == "cmdstat_evalsha" {
                evalsha += calls;
            }
        }
    }
    Ok((evalsha, total))
}
