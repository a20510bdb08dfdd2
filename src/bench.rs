//! The benchmark workloads behind `agentstate bench` (W1 append, W2 load, W3 state, memory),
//! each measured next to `redis-benchmark` running the equivalent raw command on the same
//! Redis at the same concurrency. Figures are reported, never asserted.

use std::process::Command;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use crate::error::{Error, Result};
use crate::messages::{MessageQuery, NewMessage};
use crate::sessions::NewSession;
use crate::store::Store;

/// Concurrent workers in W1–W3 (also redis-benchmark's `-c`).
pub const WORKERS: usize = 8;

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

/// Call latencies of one workload.
#[derive(Debug, Default)]
pub struct Latencies(Vec<u32>);

impl Latencies {
    /// Records one call that started at `start`.
    pub fn record(&mut self, start: Instant) {
        self.0
            .push(start.elapsed().as_micros().min(u32::MAX as u128) as u32);
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

/// Sizes of W1–W3 (`quick` shrinks them for a fast smoke run).
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    /// W1 sessions.
    pub sessions: usize,
    /// W1 messages per session.
    pub messages: usize,
    /// W2 loads of each session.
    pub loads: usize,
    /// W3 sessions.
    pub state_sessions: usize,
    /// W3 rounds per session.
    pub rounds: usize,
    /// Requests per redis-benchmark run.
    pub raw_requests: usize,
}

impl Sizes {
    /// The published workload sizes, or a tenth of them when `quick`.
    pub fn new(quick: bool) -> Sizes {
        if quick {
            Sizes {
                sessions: 16,
                messages: 100,
                loads: 2,
                state_sessions: 8,
                rounds: 40,
                raw_requests: 5_000,
            }
        } else {
            Sizes {
                sessions: 64,
                messages: 500,
                loads: 5,
                state_sessions: 16,
                rounds: 200,
                raw_requests: 50_000,
            }
        }
    }
}

/// 256 random printable ASCII characters.
fn random_content() -> String {
    (0..256)
        .map(|_| char::from(b'a' + rand::random::<u8>() % 26))
        .collect()
}

/// A ~4 KB JSON state for W3.
fn state_doc(round: usize) -> serde_json::Value {
    json!({
        "round": round,
        "plan": (0..16).map(|i| json!({"step": i, "note": random_content()})).collect::<Vec<_>>(),
    })
}

/// W1: `sizes.sessions` sessions × `sizes.messages` messages, role alternating, 256 random
/// chars each; `WORKERS` workers each owning an equal share of the sessions, one append at a
/// time. Returns the row and the session ids.
pub async fn w1_append(store: &Store, sizes: Sizes) -> Result<(Row, Vec<String>)> {
    let mut sessions = Vec::new();
    for i in 0..sizes.sessions {
        let sid = format!("bench_w1_{i}");
        store
            .create_session(&NewSession::new().id(&sid).user("bench"))
            .await?;
        sessions.push(sid);
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..WORKERS {
        let store = store.clone();
        let mine: Vec<String> = sessions.iter().skip(w).step_by(WORKERS).cloned().collect();
        let per = sizes.messages;
        tasks.push(tokio::spawn(async move {
            let mut lat = Latencies::default();
            for sid in &mine {
                for m in 0..per {
                    let role = if m % 2 == 0 { "user" } else { "assistant" };
                    let msg = NewMessage::new(role).content(random_content());
                    let t = Instant::now();
                    store.append(sid, &msg).await?;
                    lat.record(t);
                }
            }
            Ok::<_, Error>(lat)
        }));
    }
    let lat = join(tasks).await?;
    let ops = (sizes.sessions * sizes.messages) as u64;
    Ok((
        row("W1 append", "msgs", ops, started.elapsed(), lat),
        sessions,
    ))
}

/// W2: each worker loads the full active history of each of its sessions `sizes.loads` times.
pub async fn w2_load(store: &Store, sessions: &[String], sizes: Sizes) -> Result<Row> {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..WORKERS {
        let store = store.clone();
        let mine: Vec<String> = sessions.iter().skip(w).step_by(WORKERS).cloned().collect();
        let loads = sizes.loads;
        tasks.push(tokio::spawn(async move {
            let mut lat = Latencies::default();
            let mut count = 0u64;
            for _ in 0..loads {
                for sid in &mine {
                    let t = Instant::now();
                    count += store.messages(sid, MessageQuery::active()).await?.len() as u64;
                    lat.record(t);
                }
            }
            Ok::<_, Error>((lat, count))
        }));
    }
    let mut lat = Latencies::default();
    let mut msgs = 0;
    for t in tasks {
        let (l, c) = t.await.map_err(|e| Error::Io(e.to_string()))??;
        lat.extend(l);
        msgs += c;
    }
    Ok(row("W2 load", "msgs", msgs, started.elapsed(), lat))
}

/// W3: `sizes.state_sessions` sessions × `sizes.rounds` rounds; each round saves a ~4 KB JSON
/// state then reads the latest back. Latency is of the save.
pub async fn w3_state(store: &Store, sizes: Sizes) -> Result<Row> {
    let docs: Vec<serde_json::Value> = (0..8).map(state_doc).collect();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..WORKERS {
        let store = store.clone();
        let docs = docs.clone();
        let mine: Vec<usize> = (0..sizes.state_sessions).skip(w).step_by(WORKERS).collect();
        let rounds = sizes.rounds;
        tasks.push(tokio::spawn(async move {
            let mut lat = Latencies::default();
            for s in &mine {
                let session = format!("w3s{s}");
                for r in 0..rounds {
                    let t = Instant::now();
                    store
                        .save_state("bench", &docs[r % docs.len()], Some(&session), None)
                        .await?;
                    lat.record(t);
                    store.export_state("bench", Some(&session), None).await?;
                }
            }
            Ok::<_, Error>(lat)
        }));
    }
    let lat = join(tasks).await?;
    let ops = (sizes.state_sessions * sizes.rounds) as u64;
    Ok(row("W3 state", "saves", ops, started.elapsed(), lat))
}

async fn join(tasks: Vec<tokio::task::JoinHandle<Result<Latencies>>>) -> Result<Latencies> {
    let mut all = Latencies::default();
    for t in tasks {
        all.extend(t.await.map_err(|e| Error::Io(e.to_string()))??);
    }
    Ok(all)
}

fn row(name: &str, unit: &str, ops: u64, elapsed: Duration, mut lat: Latencies) -> Row {
    Row {
        workload: name.into(),
        ops,
        per_sec: ops as f64 / elapsed.as_secs_f64(),
        unit: unit.into(),
        p50_us: lat.quantile(0.5),
        p99_us: lat.quantile(0.99),
        raw_per_sec: None,
        raw_command: None,
    }
}

/// Runs `redis-benchmark -q -c WORKERS -P 1 -n requests` with one command against `port`
/// and returns its requests per second.
pub fn redis_benchmark(port: u16, requests: usize, command: &[String]) -> Result<f64> {
    let out = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["-c", &WORKERS.to_string(), "-P", "1", "-q"])
        .args(["-n", &requests.to_string()])
        .args(command)
        .output()
        .map_err(|e| Error::Io(format!("cannot run redis-benchmark: {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    // The last line reads "<cmd>: 12345.67 requests per second, p50=..."; earlier
    // lines are progress output separated by carriage returns.
    text.rsplit(['\r', '\n'])
        .find_map(|line| {
            let (_, rest) = line.rsplit_once(": ")?;
            rest.split_whitespace().next()?.parse::<f64>().ok()
        })
        .or_else(|| {
            text.split("requests per second")
                .next()
                .and_then(|s| s.rsplit(' ').find_map(|w| w.trim().parse().ok()))
        })
        .ok_or_else(|| Error::Io(format!("could not read redis-benchmark output: {text}")))
}

/// `used_memory` of the server, bytes.
pub async fn used_memory(store: &Store) -> Result<u64> {
    let mut conn = store.conn().await?;
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut conn)
        .await?;
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| Error::Redis("INFO memory has no used_memory".into()))
}

/// The redis-benchmark command lines equivalent to W1–W3: our own scripts by EVALSHA with the
/// same arguments our library sends (so the ratio shows the cost of the client, not of Lua).
pub struct RawCommands {
    /// `EVALSHA append_message` on one session.
    pub append: Vec<String>,
    /// `EVALSHA load_messages` (active) on one W1 session.
    pub load: Vec<String>,
    /// `EVALSHA save_round` with a ~4 KB state.
    pub save: Vec<String>,
    /// `EVALSHA read_round` (latest).
    pub read: Vec<String>,
}

impl RawCommands {
    /// Builds the commands; creates the session the raw appends go to and loads the scripts.
    pub async fn prepare(store: &Store, load_session: &str) -> Result<RawCommands> {
        store.preload_scripts().await?;
        let raw_sid = "bench_raw_append";
        if store.session(raw_sid).await?.is_none() {
            store.create_session(&NewSession::new().id(raw_sid)).await?;
        }
        let evalsha = |sha: &str, keys: &[&str], args: Vec<String>| -> Vec<String> {
            let mut v = vec![
                "EVALSHA".to_string(),
                sha.to_string(),
                keys.len().to_string(),
            ];
            v.extend(keys.iter().map(|k| k.to_string()));
            v.extend(args);
            v
        };
        let k = store.keys().session(raw_sid);
        let body = serde_json::to_string(&NewMessage::new("user").content(random_content()))?;
        let append = evalsha(
            crate::scripts::APPEND_MESSAGE.get_hash(),
            &k.as_array(),
            vec![
                raw_sid.into(),
                body,
                String::new(),
                String::new(),
                store.config().limits.message.to_string(),
            ],
        );
        let lk = store.keys().session(load_session);
        let load = evalsha(
            crate::scripts::LOAD_MESSAGES.get_hash(),
            &[&lk.meta, &lk.msgs],
            vec!["active".into(), "0".into(), "0".into()],
        );
        let rounds = store.keys().rounds("benchraw", "default");
        let wal = store.keys().wal(store.keys().partition("benchraw"));
        let save = evalsha(
            crate::scripts::SAVE_ROUND.get_hash(),
            &[&rounds, &wal],
            vec![
                "benchraw".into(),
                "default".into(),
                String::new(),
                state_doc(0).to_string(),
                "3600".into(),
                store.config().limits.state.to_string(),
            ],
        );
        let read = evalsha(
            crate::scripts::READ_ROUND.get_hash(),
            &[&rounds],
            vec![String::new()],
        );
        Ok(RawCommands {
            append,
            load,
            save,
            read,
        })
    }
}

/// A short, readable rendering of a raw command for the table (long arguments elided).
pub fn describe(command: &[String]) -> String {
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
