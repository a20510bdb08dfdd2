//! W4 decisions, for `agentstate bench`: end-to-end decision
//! throughput (record → consume → ack) with two consumers in one group, and the latency from
//! `record_decision` returning to a blocked consumer receiving the decision — each measured
//! next to the same shape built from raw XADD / XREADGROUP / XACK on one scratch stream of
//! the same Redis. Figures are reported, never asserted.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::streams::{StreamReadOptions, StreamReadReply};
use redis::AsyncCommands;
use serde::Serialize;

use super::measure::{Latencies, Row};
use crate::consumer::{
    blocking_connection, create_group, Consumer, ConsumerOptions, DecisionEvent,
};
use crate::NewDecision;
use crate::NewSession;
use crate::Store;
use crate::{Error, Result};

/// Concurrent writers recording decisions (one call in flight each).
pub const W4_WRITERS: usize = 8;
/// Consumers sharing the group.
pub const W4_CONSUMERS: usize = 2;
/// Sessions the decisions are spread over (so every partition is used).
const W4_SESSIONS: usize = 64;

/// What W4 measures.
#[derive(Debug, Clone, Copy)]
pub struct W4Sizes {
    /// Decisions recorded and consumed in the throughput run (published: 20,000).
    pub decisions: usize,
    /// Decisions recorded one at a time for the latency run (published: 1,000).
    pub latency_samples: usize,
}

impl W4Sizes {
    /// The published sizes, or a tenth of them when `quick`.
    pub fn new(quick: bool) -> W4Sizes {
        let scale = if quick { 10 } else { 1 };
        W4Sizes {
            decisions: 20_000 / scale,
            latency_samples: 1_000 / scale,
        }
    }
}

/// One side of W4 (agentstate, or the raw-command baseline).
#[derive(Debug, Clone, Serialize)]
pub struct W4Figures {
    /// Decisions per second, from the first record to the last ack.
    pub per_sec: f64,
    /// Wall time of the throughput run, ms.
    pub elapsed_ms: u64,
    /// Median time from the write returning to a blocked consumer holding it (0 when the
    /// consumer had it first), µs.
    pub p50_us: u64,
    /// 99th percentile of the same, µs.
    pub p99_us: u64,
    /// Median time from calling the write to the blocked consumer holding it, µs.
    pub from_call_p50_us: u64,
    /// 99th percentile of the same, µs.
    pub from_call_p99_us: u64,
}

/// W4's result: ours and the raw baseline, same Redis, same concurrency.
#[derive(Debug, Clone, Serialize)]
pub struct W4Report {
    /// Decisions in the throughput run.
    pub decisions: usize,
    /// Latency samples.
    pub latency_samples: usize,
    /// `record_decision` (one EVALSHA) → `Consumer::read` over 16 partition streams → `ack`.
    pub agentstate: W4Figures,
    /// XADD of the same fields → XREADGROUP COUNT 100 on one stream → XACK.
    pub raw: W4Figures,
    /// The raw XADD, for `redis-benchmark` on the same Redis.
    pub raw_xadd: Vec<String>,
}

/// Which implementation a run drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Agentstate,
    Raw,
}

/// A consumer of either side that reads a batch, acks it, and names what it got.
enum Reader {
    Ours(Box<Consumer>),
    Raw {
        /// Dedicated connection for XREADGROUP BLOCK.
        conn: MultiplexedConnection,
        /// Acks go through the pool.
        store: Store,
        group: String,
        name: String,
        block: Duration,
    },
}

impl Reader {
    async fn open(
        store: &Store,
        side: Side,
        group: &str,
        name: &str,
        block: Duration,
    ) -> Result<Reader> {
        match side {
            Side::Agentstate => {
                let options = ConsumerOptions::new().block(block);
                Ok(Reader::Ours(Box::new(
                    store.consumer(group, name, options).await?,
                )))
            }
            Side::Raw => {
                let key = store.keys().bench_stream();
                create_group(store, &key, group, "$").await?;
                let conn = blocking_connection(store, block).await?;
                Ok(Reader::Raw {
                    conn,
                    store: store.clone(),
                    group: group.to_string(),
                    name: name.to_string(),
                    block,
                })
            }
        }
    }

    /// Reads one batch (waiting up to the block time), acks it, returns when the read
    /// returned and the decision texts.
    async fn take(&mut self) -> Result<(Instant, Vec<String>)> {
        match self {
            Reader::Ours(c) => {
                let got = c.read().await?;
                let at = Instant::now();
                c.ack(&got).await?;
                let texts = got
                    .into_iter()
                    .filter_map(|d| match d.event {
                        DecisionEvent::Decision(d) => Some(d.decision),
                        _ => None,
                    })
                    .collect();
                Ok((at, texts))
            }
            Reader::Raw {
                conn,
                store,
                group,
                name,
                block,
            } => {
                let key = store.keys().bench_stream();
                let opts = StreamReadOptions::default()
                    .group(&*group, &*name)
                    .count(100)
                    .block(block.as_millis() as usize);
                let reply: Option<StreamReadReply> =
                    conn.xread_options(&[&key], &[">"], &opts).await?;
                let at = Instant::now();
                let entries: Vec<_> = reply
                    .into_iter()
                    .flat_map(|r| r.keys)
                    .flat_map(|k| k.ids)
                    .collect();
                if !entries.is_empty() {
                    let ids: Vec<&str> = entries.iter().map(|e| e.id.as_str()).collect();
                    let mut pool = store.conn().await?;
                    let _: usize = pool.xack(&key, &*group, &ids).await?;
                }
                let texts = entries
                    .iter()
                    .filter_map(|e| e.get::<String>("decision"))
                    .collect();
                Ok((at, texts))
            }
        }
    }
}

/// The raw XADD of one decision with the fields `record_decision` writes.
fn raw_xadd(key: &str, sid: &str, text: &str) -> Vec<String> {
    [
        "XADD",
        key,
        "*",
        "type",
        "decision",
        "session_id",
        sid,
        "decision",
        text,
        "rationale",
        "bench",
        "planned_action",
        "act",
        "meta",
        "{}",
        "created_at",
        "0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Writes one decision on `side`.
async fn write(store: &Store, side: Side, sid: &str, text: &str) -> Result<()> {
    match side {
        Side::Agentstate => {
            store
                .record_decision(sid, &NewDecision::new(text, "bench").action("act"))
                .await?;
        }
        Side::Raw => {
            let mut cmd = redis::Cmd::new();
            for arg in raw_xadd(&store.keys().bench_stream(), sid, text) {
                cmd.arg(arg);
            }
            let mut conn = store.conn().await?;
            let _: String = cmd.query_async(&mut conn).await?;
        }
    }
    Ok(())
}

/// Throughput: `W4_WRITERS` writers record `n` decisions while `W4_CONSUMERS` consumers in
/// one group read and ack them; returns the time from the first write to the last ack.
async fn throughput(
    store: &Store,
    side: Side,
    sids: &[String],
    n: usize,
    run: &str,
) -> Result<Duration> {
    let acked = Arc::new(AtomicUsize::new(0));
    let mut consumers = Vec::new();
    for c in 0..W4_CONSUMERS {
        let mut reader = Reader::open(
            store,
            side,
            &format!("w4-{run}"),
            &format!("c{c}"),
            Duration::from_millis(200),
        )
        .await?;
        let acked = acked.clone();
        consumers.push(tokio::spawn(async move {
            let mut finished = None;
            while acked.load(Ordering::SeqCst) < n {
                let got = reader.take().await?.1.len();
                if acked.fetch_add(got, Ordering::SeqCst) + got >= n && got > 0 {
                    finished = Some(Instant::now());
                }
            }
            Ok::<_, Error>(finished)
        }));
    }
    let started = Instant::now();
    let mut writers = Vec::new();
    for w in 0..W4_WRITERS {
        let store = store.clone();
        let mine: Vec<String> = sids.iter().skip(w).step_by(W4_WRITERS).cloned().collect();
        let share = n / W4_WRITERS + usize::from(w < n % W4_WRITERS);
        writers.push(tokio::spawn(async move {
            for i in 0..share {
                write(&store, side, &mine[i % mine.len()], &format!("w{w}-{i}")).await?;
            }
            Ok::<_, Error>(())
        }));
    }
    for w in writers {
        let written = w
            .await
            .map_err(|e| Error::io(e.to_string()))
            .and_then(|r| r);
        if let Err(e) = written {
            for c in &consumers {
                c.abort();
            }
            return Err(e);
        }
    }
    let mut last = started;
    for c in consumers {
        if let Some(t) = c.await.map_err(|e| Error::io(e.to_string()))?? {
            last = last.max(t);
        }
    }
    Ok(last - started)
}

/// Latency: one decision at a time, each read by a consumer blocked in XREADGROUP; the time
/// from the write returning (and from calling it) to the consumer holding it. Returns
/// (p50, p99, from-call p50, from-call p99) in µs.
async fn latency(
    store: &Store,
    side: Side,
    sid: &str,
    samples: usize,
    run: &str,
) -> Result<[u64; 4]> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
    let mut reader = Reader::open(
        store,
        side,
        &format!("w4lat-{run}"),
        "c0",
        Duration::from_secs(5),
    )
    .await?;
    let task = tokio::spawn(async move {
        loop {
            let (at, texts) = reader.take().await?;
            for text in texts {
                let stop = text == "stop";
                if stop || tx.send((text, at)).is_err() {
                    return Ok::<_, Error>(());
                }
            }
        }
    });
    let mut micros = Latencies::default();
    let mut from_call = Latencies::default();
    for i in 0..samples {
        // Let the consumer get back into its blocking read.
        tokio::time::sleep(Duration::from_millis(1)).await;
        let text = format!("lat-{i}");
        let called = Instant::now();
        write(store, side, sid, &text).await?;
        let returned = Instant::now();
        let (got, at) = rx
            .recv()
            .await
            .ok_or_else(|| Error::io("latency consumer stopped"))?;
        if got != text {
            return Err(Error::io(format!(
                "latency consumer got {got}, expected {text}"
            )));
        }
        micros.push(at.saturating_duration_since(returned));
        from_call.push(at.saturating_duration_since(called));
    }
    write(store, side, sid, "stop").await?;
    task.await.map_err(|e| Error::io(e.to_string()))??;
    Ok([
        micros.quantile(0.5).unwrap_or(0),
        micros.quantile(0.99).unwrap_or(0),
        from_call.quantile(0.5).unwrap_or(0),
        from_call.quantile(0.99).unwrap_or(0),
    ])
}

/// Runs W4 on both sides and removes the raw scratch stream. The decisions recorded stay in
/// the namespace (use a bench prefix).
pub async fn w4_consumers(store: &Store, sizes: W4Sizes) -> Result<W4Report> {
    let mut sids = Vec::with_capacity(W4_SESSIONS);
    for _ in 0..W4_SESSIONS {
        sids.push(
            store
                .create_session(&NewSession::new().user("bench"))
                .await?,
        );
    }
    let run = format!("{:x}", rand::random::<u32>());
    let mut figures = Vec::new();
    for side in [Side::Agentstate, Side::Raw] {
        let elapsed = throughput(store, side, &sids, sizes.decisions, &run).await?;
        let [p50_us, p99_us, from_call_p50_us, from_call_p99_us] =
            latency(store, side, &sids[0], sizes.latency_samples, &run).await?;
        figures.push(W4Figures {
            per_sec: sizes.decisions as f64 / elapsed.as_secs_f64().max(1e-9),
            elapsed_ms: elapsed.as_millis() as u64,
            p50_us,
            p99_us,
            from_call_p50_us,
            from_call_p99_us,
        });
    }
    let key = store.keys().bench_stream();
    let mut conn = store.conn().await?;
    let _: usize = conn.del(&key).await?;
    let raw = figures.pop().expect("two sides");
    let agentstate = figures.pop().expect("two sides");
    Ok(W4Report {
        decisions: sizes.decisions,
        latency_samples: sizes.latency_samples,
        agentstate,
        raw,
        raw_xadd: raw_xadd(&key, &sids[0], "d"),
    })
}

/// W4's row of the table: our throughput and the latency of calling `record_decision` until
/// a blocked consumer holds the decision, next to the raw shape.
pub fn row(report: &W4Report) -> Row {
    Row {
        workload: "W4 decisions".into(),
        ops: report.decisions as u64,
        per_sec: report.agentstate.per_sec,
        unit: "decisions".into(),
        p50_us: Some(report.agentstate.from_call_p50_us),
        p99_us: Some(report.agentstate.from_call_p99_us),
        raw_per_sec: Some(report.raw.per_sec),
        raw_command: Some("XADD + XREADGROUP COUNT 100 + XACK, same shape (in-process)".into()),
    }
}

#[cfg(test)]
mod tests {
    use crate::redis_server::RedisServer;
    use crate::{Config, SpillConfig, SpillDaemon, Store};

    #[tokio::test]
    async fn w4_benchmark_runs_both_sides_and_cleans_its_scratch_stream() {
        let server = RedisServer::start().unwrap();
        let store = Store::connect(Config::new(server.url())).await.unwrap();
        let db = tempfile::tempdir().unwrap();
        SpillDaemon::open(store.clone(), SpillConfig::new(db.path().join("w4.db")))
            .await
            .unwrap()
            .run_once()
            .await
            .unwrap();
        let sizes = super::W4Sizes {
            decisions: 400,
            latency_samples: 20,
        };
        let report = super::w4_consumers(&store, sizes).await.unwrap();
        assert_eq!((report.decisions, report.latency_samples), (400, 20));
        for side in [&report.agentstate, &report.raw] {
            assert!(side.per_sec > 0.0 && side.elapsed_ms > 0, "{report:?}");
            assert!(side.p50_us <= side.p99_us, "{report:?}");
            assert!(side.from_call_p50_us <= side.from_call_p99_us, "{report:?}");
            assert!(side.from_call_p50_us > 0, "a write takes time: {report:?}");
        }
        assert_eq!(
            report.raw_xadd[..3],
            ["XADD", "as:{0}:bench:decisions", "*"]
        );
        let mut conn = server.connection();
        let keys: Vec<String> = redis::cmd("KEYS").arg("as:*").query(&mut conn).unwrap();
        assert!(
            !keys.iter().any(|k| k == "as:{0}:bench:decisions"),
            "{keys:?}"
        );
        let entries: usize = (0..store.keys().partitions())
            .map(|p| {
                redis::cmd("XLEN")
                    .arg(store.keys().decisions(p))
                    .query::<usize>(&mut conn)
                    .unwrap()
            })
            .sum();
        assert_eq!(
            entries,
            400 + 20 + 1,
            "throughput, latency samples, stop marker"
        );
    }
}
