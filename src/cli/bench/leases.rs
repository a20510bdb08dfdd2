//! W7 run leases: a session's run lease acquired, renewed and released in turn by
//! concurrent workers, and an append carrying the lease's fencing token next to the same
//! append without one (the same store and workers, passes alternating), each next to our
//! script run by redis-benchmark at the same concurrency.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::live::{random_content, row, spawn_workers};
use super::measure::{benchmark_raw, command_calls, describe, CallsPerAppend, Latencies, Row};
use super::sizes::W7Sizes;
use crate::scripts;
use crate::{Error, NewMessage, NewSession, Result, Store};

/// How long the cycles' leases last: far longer than a cycle, so none expires mid-cycle.
const CYCLE_TTL: Duration = Duration::from_secs(30);

/// How long the fence passes' leases last: the whole workload, so no renewal runs beside
/// the appends being compared.
const HELD_TTL: Duration = Duration::from_secs(600);

/// Distinct contents each worker cycles through (made before the measured loop, as W1's).
const CONTENT_POOL: usize = 16;

/// The latency of one lease operation.
#[derive(Debug, Clone, Serialize)]
pub struct OpLatency {
    /// `acquire`, `renew` or `release`.
    pub op: &'static str,
    /// Median, µs.
    pub p50_us: Option<u64>,
    /// 99th percentile, µs.
    pub p99_us: Option<u64>,
}

/// W7's figures.
#[derive(Debug, Clone, Serialize)]
pub struct W7Report {
    /// Concurrent workers (redis-benchmark's `-c` too).
    pub workers: usize,
    /// Sessions the workers share.
    pub sessions: usize,
    /// Lease operations (three per cycle) per second; p50/p99 over all three kinds. Raw:
    /// `lease_renew` by redis-benchmark.
    pub lease: Row,
    /// Each kind of lease operation's latency.
    pub per_op: Vec<OpLatency>,
    /// `Store::append`. Raw: `append_message` without a token.
    pub append: Row,
    /// `store.with_fence(Some(token)).append`, same sessions and workers. Raw:
    /// `append_message` with the token.
    pub fenced: Row,
    /// What an unfenced append cost Redis in calls.
    pub append_calls: CallsPerAppend,
    /// What a fenced append cost Redis in calls (the same EVALSHA count: no extra round
    /// trip; the token is checked inside the script).
    pub fenced_calls: CallsPerAppend,
}

/// Runs W7 on `workers` workers with `raw_requests` per redis-benchmark run.
pub async fn w7_leases(
    store: &Store,
    sizes: W7Sizes,
    workers: usize,
    raw_requests: usize,
) -> Result<W7Report> {
    // A worker per session at most: each works on sessions of its own.
    let workers = workers.min(sizes.sessions);
    let mut sessions = Vec::with_capacity(sizes.sessions);
    for i in 0..sizes.sessions {
        let sid = format!("bench_w7_{i}");
        store
            .create_session(&NewSession::new().id(&sid).user("bench"))
            .await?;
        sessions.push(sid);
    }
    let (mut lease, per_op) = lease_cycles(store, &sessions, workers, sizes.cycles).await?;
    let (mut append, mut fenced, append_calls, fenced_calls) =
        fence_passes(store, &sessions, workers, sizes).await?;
    let raw = RawLeaseCommands::prepare(store).await?;
    for (row, command, note) in [
        (&mut lease, &raw.renew, ""),
        (&mut append, &raw.append, ""),
        (&mut fenced, &raw.fenced, " with the token"),
    ] {
        row.raw_per_sec = Some(benchmark_raw(store, workers, raw_requests, command).await?);
        row.raw_command = Some(format!("{}{note}", describe(command)));
    }
    Ok(W7Report {
        workers,
        sessions: sizes.sessions,
        lease,
        per_op,
        append,
        fenced,
        append_calls,
        fenced_calls,
    })
}

/// Each worker acquires, renews and releases the lease of its sessions in turn, `cycles`
/// times, as its own owner. The row counts the three operations.
async fn lease_cycles(
    store: &Store,
    sessions: &[String],
    workers: usize,
    cycles: usize,
) -> Result<(Row, Vec<OpLatency>)> {
    let started = Instant::now();
    let done = spawn_workers(store, sessions, workers, move |store, mine, w| async move {
        let owner = format!("bench-{w}");
        let mut lat: [Latencies; 3] = Default::default();
        for i in 0..cycles {
            let sid = &mine[i % mine.len()];
            let t = Instant::now();
            let lease = store.acquire_lease(sid, &owner, CYCLE_TTL).await?;
            lat[0].record(t);
            let t = Instant::now();
            let renewed = store
                .renew_lease(sid, &owner, lease.token, CYCLE_TTL)
                .await?;
            lat[1].record(t);
            let t = Instant::now();
            let released = store.release_lease(sid, &owner, lease.token).await?;
            lat[2].record(t);
            if !(renewed && released) {
                return Err(Error::io(format!(
                    "{owner} lost the lease of {sid} mid-cycle: another client uses this namespace"
                )));
            }
        }
        Ok(lat)
    })
    .await?;
    let elapsed = started.elapsed();
    let mut by_op: [Latencies; 3] = Default::default();
    for lat in done {
        for (all, one) in by_op.iter_mut().zip(lat) {
            all.extend(one);
        }
    }
    let mut per_op = Vec::new();
    let mut every = Latencies::default();
    for (op, mut lat) in ["acquire", "renew", "release"].into_iter().zip(by_op) {
        per_op.push(OpLatency {
            op,
            p50_us: lat.quantile(0.5),
            p99_us: lat.quantile(0.99),
        });
        every.extend(lat);
    }
    let ops = (3 * cycles * workers) as u64;
    Ok((row("W7 lease", "ops", ops, elapsed, every), per_op))
}

/// Plain and fenced appends to the same sessions, whose leases the workers hold: passes
/// alternate (plain first) so that the host's load drifts over both alike.
async fn fence_passes(
    store: &Store,
    sessions: &[String],
    workers: usize,
    sizes: W7Sizes,
) -> Result<(Row, Row, CallsPerAppend, CallsPerAppend)> {
    let mut tokens = HashMap::new();
    for (i, sid) in sessions.iter().enumerate() {
        // The owner of the worker that will append to it (see `spawn_workers`' sharing).
        let owner = format!("bench-{}", i % workers);
        let lease = store.acquire_lease(sid, &owner, HELD_TTL).await?;
        tokens.insert(sid.clone(), lease.token);
    }
    let appends = sizes.appends;
    let mut sides: [Side; 2] = Default::default();
    for _ in 0..sizes.passes {
        for (fence, side) in sides.iter_mut().enumerate() {
            let tokens = (fence == 1).then(|| tokens.clone());
            let calls_before = command_calls(store).await?;
            let started = Instant::now();
            let done = spawn_workers(store, sessions, workers, move |store, mine, _| {
                let handles: Vec<Store> = mine
                    .iter()
                    .map(|sid| match &tokens {
                        Some(t) => store.with_fence(t.get(sid).copied()),
                        None => store.clone(),
                    })
                    .collect();
                async move {
                    let contents: Vec<String> =
                        (0..CONTENT_POOL).map(|_| random_content()).collect();
                    let mut lat = Latencies::default();
                    for m in 0..appends {
                        let k = m % mine.len();
                        let msg = NewMessage::new("assistant")
                            .content(contents[m % CONTENT_POOL].clone());
                        let t = Instant::now();
                        handles[k].append(&mine[k], &msg).await?;
                        lat.record(t);
                    }
                    Ok(lat)
                }
            })
            .await?;
            side.time += started.elapsed();
            let calls_after = command_calls(store).await?;
            side.evalsha += calls_after.0 - calls_before.0;
            side.commands += calls_after.1 - calls_before.1;
            for lat in done {
                side.lat.extend(lat);
            }
            side.appends += (appends * workers) as u64;
        }
    }
    let [plain, fenced] = sides;
    Ok((
        row("W7 append", "msgs", plain.appends, plain.time, plain.lat),
        row("W7 fenced", "msgs", fenced.appends, fenced.time, fenced.lat),
        CallsPerAppend::new((plain.evalsha, plain.commands), plain.appends),
        CallsPerAppend::new((fenced.evalsha, fenced.commands), fenced.appends),
    ))
}

/// One kind of append over every pass of [`fence_passes`].
#[derive(Default)]
struct Side {
    /// Every append's latency.
    lat: Latencies,
    /// The passes' wall time.
    time: Duration,
    /// Appends made.
    appends: u64,
    /// EVALSHA calls Redis counted during the passes.
    evalsha: u64,
    /// Commands Redis counted during the passes, the scripts' inner ones included.
    commands: u64,
}

/// The redis-benchmark command lines next to W7: our own scripts by EVALSHA with the
/// arguments the library sends.
struct RawLeaseCommands {
    /// `EVALSHA lease_renew` by the holder of a lease that lasts the run.
    renew: Vec<String>,
    /// `EVALSHA append_message` without a token.
    append: Vec<String>,
    /// `EVALSHA append_message` with the holder's token, on the same session.
    fenced: Vec<String>,
}

impl RawLeaseCommands {
    /// Creates the session the raw calls go to, takes its lease and loads the scripts.
    async fn prepare(store: &Store) -> Result<RawLeaseCommands> {
        store.preload_scripts().await?;
        let sid = "bench_raw_lease";
        let owner = "bench-raw";
        if store.session(sid).await?.is_none() {
            store.create_session(&NewSession::new().id(sid)).await?;
        }
        let token = store.acquire_lease(sid, owner, HELD_TTL).await?.token;
        let keys = store.keys().session(sid);
        let renew =
            scripts::lease_renew(&keys, sid, owner, token, HELD_TTL.as_millis() as u64).argv();
        let body = serde_json::to_string(&NewMessage::new("user").content(random_content()))?;
        let limit = store.config().limits.message;
        let append_with = |fence| {
            scripts::append_item(
                store.keys().session(sid),
                sid,
                &body,
                None,
                None,
                limit,
                fence,
            )
            .call()
            .argv()
        };
        Ok(RawLeaseCommands {
            renew,
            append: append_with(None),
            fenced: append_with(Some(token)),
        })
    }
}
