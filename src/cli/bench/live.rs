//! W1 append, W2 load and W3 state: our library under 8 concurrent workers, and the raw
//! commands (our own scripts by EVALSHA with the same arguments) redis-benchmark runs to
//! compare.

use std::future::Future;
use std::time::{Duration, Instant};

use serde_json::json;

use super::measure::{Latencies, Row, CONTENT_CHARS};
use super::sizes::Sizes;
use crate::scripts::{self, LoadMode};
use crate::NewSession;
use crate::Store;
use crate::{Error, Result};
use crate::{MessageQuery, NewMessage};

/// Distinct contents each W1 worker cycles through.
const CONTENT_POOL: usize = 16;

/// `CONTENT_CHARS` random printable ASCII characters.
pub fn random_content() -> String {
    (0..CONTENT_CHARS)
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

/// W1: `sizes.sessions` sessions (ids `<name>_<i>`) × `sizes.messages` messages, role
/// alternating, 256 random chars each; `sizes.workers` workers each owning an equal share of
/// the sessions, one append at a time. Returns the row and the session ids.
pub async fn w1_append(store: &Store, name: &str, sizes: Sizes) -> Result<(Row, Vec<String>)> {
    let mut sessions = Vec::new();
    for i in 0..sizes.sessions {
        let sid = format!("{name}_{i}");
        store
            .create_session(&NewSession::new().id(&sid).user("bench"))
            .await?;
        sessions.push(sid);
    }
    let started = Instant::now();
    let per = sizes.messages;
    let (lat, msgs) = on_workers(
        store,
        &sessions,
        sizes.workers,
        move |store, mine| async move {
            // Contents made before the loop, as redis-benchmark's are: drawing 256 random
            // characters per message cost 12.9k instructions, against 34.6k for the whole
            // append (callgrind, 8 tasks x 1,000 appends): the harness' work, not the store's.
            let contents: Vec<String> = (0..CONTENT_POOL).map(|_| random_content()).collect();
            let mut lat = Latencies::default();
            for sid in &mine {
                for m in 0..per {
                    let role = if m % 2 == 0 { "user" } else { "assistant" };
                    let content = contents[m % CONTENT_POOL].clone();
                    let msg = NewMessage::new(role).content(content);
                    let t = Instant::now();
                    store.append(sid, &msg).await?;
                    lat.record(t);
                }
            }
            Ok((lat, (mine.len() * per) as u64))
        },
    )
    .await?;
    Ok((
        row("W1 append", "msgs", msgs, started.elapsed(), lat),
        sessions,
    ))
}

/// W2: each worker loads the full active history of each of its sessions `sizes.loads` times.
pub async fn w2_load(store: &Store, sessions: &[String], sizes: Sizes) -> Result<Row> {
    let started = Instant::now();
    let loads = sizes.loads;
    let (lat, msgs) = on_workers(
        store,
        sessions,
        sizes.workers,
        move |store, mine| async move {
            let mut lat = Latencies::default();
            let mut count = 0u64;
            for _ in 0..loads {
                for sid in &mine {
                    let t = Instant::now();
                    count += store.messages(sid, MessageQuery::active()).await?.len() as u64;
                    lat.record(t);
                }
            }
            Ok((lat, count))
        },
    )
    .await?;
    Ok(row("W2 load", "msgs", msgs, started.elapsed(), lat))
}

/// W3: `sizes.state_sessions` sessions × `sizes.rounds` rounds; each round saves a ~4 KB JSON
/// state then reads the latest back. Latency is of the save.
pub async fn w3_state(store: &Store, sizes: Sizes) -> Result<Row> {
    let docs: Vec<serde_json::Value> = (0..8).map(state_doc).collect();
    let sessions: Vec<String> = (0..sizes.state_sessions)
        .map(|s| format!("w3s{s}"))
        .collect();
    let started = Instant::now();
    let rounds = sizes.rounds;
    let (lat, saves) = on_workers(store, &sessions, sizes.workers, move |store, mine| {
        let docs = docs.clone();
        async move {
            let mut lat = Latencies::default();
            for session in &mine {
                for r in 0..rounds {
                    let t = Instant::now();
                    store
                        .save_state("bench", &docs[r % docs.len()], Some(session), None)
                        .await?;
                    lat.record(t);
                    store.export_state("bench", Some(session), None).await?;
                }
            }
            Ok((lat, (mine.len() * rounds) as u64))
        }
    })
    .await?;
    Ok(row("W3 state", "saves", saves, started.elapsed(), lat))
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
        // The very calls the library makes, as redis-benchmark arguments.
        let ns = store.keys();
        let body = serde_json::to_string(&NewMessage::new("user").content(random_content()))?;
        let limits = store.config().limits;
        let append = scripts::append_item(
            ns.session(raw_sid),
            raw_sid,
            &body,
            None,
            None,
            limits.message,
            None,
        )
        .call()
        .argv();
        let all = LoadMode::Active {
            after: 0,
            last: None,
        };
        let load = scripts::load_messages(&ns.session(load_session), load_session, all).argv();
        let state = state_doc(0).to_string();
        let save =
            scripts::save_round(ns, "benchraw", "default", None, &state, limits.state).argv();
        let read = scripts::read_round(ns, "benchraw", "default", None).argv();
        Ok(RawCommands {
            append,
            load,
            save,
            read,
        })
    }
}

/// Runs `work` on `workers` tasks at once, worker `w` owning every `workers`-th item from
/// `w`; merges the latencies and sums the counts the workers return.
async fn on_workers<F, Fut>(
    store: &Store,
    items: &[String],
    workers: usize,
    work: F,
) -> Result<(Latencies, u64)>
where
    F: Fn(Store, Vec<String>) -> Fut,
    Fut: Future<Output = Result<(Latencies, u64)>> + Send + 'static,
{
    let done = spawn_workers(store, items, workers, |store, mine, _| work(store, mine)).await?;
    let mut all = (Latencies::default(), 0);
    for (lat, count) in done {
        all.0.extend(lat);
        all.1 += count;
    }
    Ok(all)
}

/// Runs `work` on `workers` tasks at once, worker `w` (its index, the last argument)
/// owning every `workers`-th item from `w`; returns what each worker returned, in order.
pub(super) async fn spawn_workers<F, Fut, T>(
    store: &Store,
    items: &[String],
    workers: usize,
    work: F,
) -> Result<Vec<T>>
where
    F: Fn(Store, Vec<String>, usize) -> Fut,
    Fut: Future<Output = Result<T>> + Send + 'static,
    T: Send + 'static,
{
    let tasks: Vec<_> = (0..workers)
        .map(|w| {
            let mine = items.iter().skip(w).step_by(workers).cloned().collect();
            tokio::spawn(work(store.clone(), mine, w))
        })
        .collect();
    let mut out = Vec::with_capacity(workers);
    for t in tasks {
        out.push(t.await.map_err(|e| Error::io(e.to_string()))??);
    }
    Ok(out)
}

/// A table row of `ops` operations (counted in `unit`) made in `elapsed`, with their
/// latencies.
pub(super) fn row(name: &str, unit: &str, ops: u64, elapsed: Duration, mut lat: Latencies) -> Row {
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

/// Bytes of the message elements stored in `sessions` (the JSON Redis holds per message).
pub async fn stored_bytes(store: &Store, sessions: &[String]) -> Result<u64> {
    let mut conn = store.conn().await?;
    let mut total = 0;
    for sid in sessions {
        let elements: Vec<Vec<u8>> = redis::cmd("LRANGE")
            .arg(store.keys().session(sid).msgs)
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await?;
        total += elements.iter().map(|e| e.len() as u64).sum::<u64>();
    }
    Ok(total)
}
