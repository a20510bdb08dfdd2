//! The benchmark workloads behind `agentstate bench`, each measured next to the same work done
//! with raw commands on the same Redis at the same concurrency (mostly by `redis-benchmark`).
//! Figures are reported, never asserted.
//!
//! [`run`] runs every workload in order and returns one [`Report`]; the memory figures are
//! taken here. What the workloads measure with is in `measure`, their sizes in `sizes`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::redis_server::RedisServer;
use crate::{Result, SpillConfig, SpillDaemon, Store};

use super::decisions::{self, W4Report};
use super::leases::{self, W7Report};
use super::live::{self, RawCommands};
use super::measure::{
    benchmark_raw, command_calls, describe, info_field, used_memory, CallsPerAppend, Row,
    CONTENT_CHARS,
};
use super::memory::{self, W8Report, W8Sizes};
use super::scaling::{self, ScalingPoint};
use super::sizes::Sizes;
use super::spill::{self, FlushFigures, Loss, RehydrateFigures};

/// Redis memory taken by W1's sessions, against the bytes they hold.
#[derive(Debug, Clone, Serialize)]
pub struct Memory {
    /// Messages W1 stored.
    pub messages: u64,
    /// Sessions W1 created.
    pub sessions: u64,
    /// Message content: `messages × 256` bytes.
    pub content_bytes: u64,
    /// The stored message elements (JSON with seq, role, state, created_at, content).
    pub stored_bytes: u64,
    /// `used_memory` growth over W1, wal included (not yet flushed).
    pub before_trim: MemoryFigures,
    /// The same once the flusher committed the wal and the trimmer trimmed it (after W5).
    pub after_trim: MemoryFigures,
}

/// `used_memory` growth at one moment, per message and per session.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryFigures {
    /// Growth of `used_memory` since before W1, bytes.
    pub growth_bytes: u64,
    /// Growth per message, bytes.
    pub per_message_bytes: f64,
    /// Growth per session, bytes.
    pub per_session_bytes: f64,
    /// Growth over the content bytes.
    pub ratio_to_content: f64,
    /// Growth over the stored message elements.
    pub ratio_to_stored: f64,
}

impl Memory {
    /// The figures for `messages` W1 messages in `sessions` sessions whose stored elements
    /// take `stored_bytes`, from the growth before and after the trim.
    fn new(messages: u64, sessions: u64, stored_bytes: u64, [before, after]: [u64; 2]) -> Memory {
        let content_bytes = messages * CONTENT_CHARS as u64;
        let figures = |growth: u64| {
            let g = growth as f64;
            MemoryFigures {
                growth_bytes: growth,
                per_message_bytes: g / messages.max(1) as f64,
                per_session_bytes: g / sessions.max(1) as f64,
                ratio_to_content: g / content_bytes.max(1) as f64,
                ratio_to_stored: g / stored_bytes.max(1) as f64,
            }
        };
        Memory {
            messages,
            sessions,
            content_bytes,
            stored_bytes,
            before_trim: figures(before),
            after_trim: figures(after),
        }
    }
}

/// The machine and Redis the figures come from.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// Logical CPUs.
    pub cores: usize,
    /// `redis_version` of the server (of each master, on a cluster).
    pub redis_version: String,
    /// Masters serving the namespace: 1, or the cluster's.
    pub masters: usize,
    /// 1-minute load average when the run started (`/proc/loadavg`; figures taken at a load
    /// above the core count are noisy).
    pub load_start: Option<f64>,
    /// The same when it ended.
    pub load_end: Option<f64>,
}

/// Everything [`run`] measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Whether the sizes were the `--quick` ones.
    pub quick: bool,
    /// Concurrent workers of W1–W3 (and redis-benchmark's `-c` next to them).
    pub workers: usize,
    /// Where it ran.
    pub machine: Machine,
    /// W1–W4, each next to its raw-command baseline.
    pub rows: Vec<Row>,
    /// W4 in full (blocked-read latency, raw side).
    pub w4: W4Report,
    /// W5: flushing W1's wal into SQLite.
    pub w5: FlushFigures,
    /// W6: restoring a large session after Redis lost it.
    pub w6: RehydrateFigures,
    /// Memory after W1, before and after the trim.
    pub memory: Memory,
    /// Commands Redis ran per W1 append (from `INFO commandstats` of every master).
    pub w1_calls: CallsPerAppend,
    /// W1 at 1, 8 and 64 workers next to SET and the single-append script.
    pub w1_scaling: Vec<ScalingPoint>,
    /// W7: run lease cycles, and appends with and without a fencing token.
    pub w7: W7Report,
    /// W8: memory per live session next to the naive list, with its breakdown per key kind.
    pub w8: W8Report,
}

/// How [`run`] runs.
#[derive(Debug)]
pub struct Options<'a> {
    /// The published sizes, or the quick ones.
    pub quick: bool,
    /// `--workers`: W1–W3's concurrency instead of [`WORKERS`].
    pub workers: Option<usize>,
    /// `--sessions`: W1's session count instead of the size's.
    pub sessions: Option<usize>,
    /// A fresh SQLite file for the spill workloads.
    pub db_path: PathBuf,
    /// The private server behind `store`, if any: W6 restarts it empty (a real loss of
    /// Redis); without one, W6 deletes the session's keys instead.
    pub server: Option<&'a mut RedisServer>,
    /// Draw a spinner per workload on stderr (hidden when stderr is not a terminal).
    pub progress: bool,
}

/// A spinner naming the workload in flight, with the time it has run.
fn stage(progress: bool, what: String) -> ProgressBar {
    if !progress {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner().with_message(what);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// 1-minute load average from `/proc/loadavg` (Linux).
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// W1 alone at each of `counts` workers (`bench --workers 1,8,64`), each next to SET and the
/// single-append script at the same `-c` (see [`scaling::w1_scaling`]).
pub async fn run_scaling(
    store: &Store,
    quick: bool,
    sessions: Option<usize>,
    counts: &[usize],
    db_path: &std::path::Path,
) -> Result<Vec<ScalingPoint>> {
    checked_by_a_daemon(store, db_path).await?;
    let mut sizes = Sizes::new(quick);
    sizes.sessions = sessions.unwrap_or(sizes.sessions);
    let raw = RawCommands::prepare(store, "bench_raw_append").await?;
    w1_scaling_stage(store, sizes, quick, &raw, counts, true).await
}

/// W7 alone (`bench --leases-only`): run lease cycles, and appends with and without a
/// fencing token, on `workers` workers (default [`super::measure::WORKERS`]).
pub async fn run_leases(
    store: &Store,
    quick: bool,
    workers: Option<usize>,
    db_path: &std::path::Path,
) -> Result<W7Report> {
    checked_by_a_daemon(store, db_path).await?;
    let mut sizes = Sizes::new(quick);
    sizes.workers = workers.unwrap_or(sizes.workers);
    w7_stage(store, sizes, true).await
}

/// W8 alone (`bench --memory-only`): memory per live session of `sessions` sessions
/// (default [`W8Sizes::new`]'s) next to the naive list.
pub async fn run_memory(
    store: &Store,
    quick: bool,
    sessions: Option<usize>,
    db_path: &std::path::Path,
) -> Result<W8Report> {
    checked_by_a_daemon(store, db_path).await?;
    let mut sizes = W8Sizes::new(quick);
    sizes.sessions = sessions.unwrap_or(sizes.sessions);
    w8_stage(store, sizes, db_path, true).await
}

/// W8 under its spinner.
async fn w8_stage(
    store: &Store,
    sizes: W8Sizes,
    db_path: &std::path::Path,
    progress: bool,
) -> Result<W8Report> {
    let bar = stage(
        progress,
        format!(
            "W8 memory: {} sessions x {} messages of {} characters, naive list next to it",
            sizes.sessions, sizes.messages, sizes.content_chars
        ),
    );
    let report = memory::w8_memory(store, sizes, super::measure::WORKERS, db_path).await?;
    bar.finish_and_clear();
    Ok(report)
}

/// W7 under its spinner.
async fn w7_stage(store: &Store, sizes: Sizes, progress: bool) -> Result<W7Report> {
    let w7 = sizes.w7;
    let bar = stage(
        progress,
        format!(
            "W7 leases: {} acquire/renew/release cycles per worker, then {} x 2 passes of {} appends per worker, plain and fenced",
            w7.cycles, w7.passes, w7.appends
        ),
    );
    let report = leases::w7_leases(store, w7, sizes.workers, sizes.raw_requests).await?;
    bar.finish_and_clear();
    Ok(report)
}

/// One spill pass over `store`'s namespace: like any deployment, a daemon checks this Redis
/// against the durable tier before sessions are made.
pub(super) async fn checked_by_a_daemon(store: &Store, db_path: &std::path::Path) -> Result<()> {
    SpillDaemon::open(store.clone(), SpillConfig::new(db_path))
        .await?
        .run_once()
        .await?;
    Ok(())
}

/// The W1 scaling at `counts` workers (`--quick`: fewer appends), under its spinner.
async fn w1_scaling_stage(
    store: &Store,
    sizes: Sizes,
    quick: bool,
    raw: &RawCommands,
    counts: &[usize],
    progress: bool,
) -> Result<Vec<ScalingPoint>> {
    let appends = if quick { 3_000 } else { 40_000 };
    let bar = stage(
        progress,
        format!(
            "W1 scaling: {appends} appends at {counts:?} workers, SET and append_message next to each"
        ),
    );
    let points = scaling::w1_scaling(store, sizes, appends, &raw.append, counts).await?;
    bar.finish_and_clear();
    Ok(points)
}

/// Runs every workload in order on `store` (a namespace of its own, ideally a private Redis):
/// W8 (memory per live session, first: it needs a Redis nothing else writes to), W1, W5 on
/// the wal W1 produced (and memory before and after the trim), W1's raw baseline, W2, W3, W4,
/// W7, W1 scaling, then W6 (last: it loses Redis' contents).
pub async fn run(store: &Store, options: Options<'_>) -> Result<Report> {
    let Options {
        quick,
        workers,
        sessions,
        db_path,
        server,
        progress,
    } = options;
    checked_by_a_daemon(store, &db_path).await?;
    let mut sizes = Sizes::new(quick);
    sizes.workers = workers.unwrap_or(sizes.workers);
    sizes.sessions = sessions.unwrap_or(sizes.sessions);
    let machine_at_start = Machine {
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        redis_version: info_field(store, "server", "redis_version")
            .await?
            .join(", "),
        masters: store.masters().await?.len(),
        load_start: load_average(),
        load_end: None,
    };
    let spill_config = SpillConfig::new(&db_path).interval(Duration::from_millis(5));
    let w8 = w8_stage(store, W8Sizes::new(quick), &db_path, progress).await?;

    let bar = stage(
        progress,
        format!(
            "W1 append: {} sessions x {} messages, {} workers",
            sizes.sessions, sizes.messages, sizes.workers
        ),
    );
    let mem_before = used_memory(store).await?;
    let calls_before = command_calls(store).await?;
    let (mut w1, sessions) = live::w1_append(store, "bench_w1", sizes).await?;
    let written = Instant::now();
    let calls_w1 = command_calls(store).await?;
    let w1_calls = CallsPerAppend::new(
        (calls_w1.0 - calls_before.0, calls_w1.1 - calls_before.1),
        (sizes.sessions * sizes.messages) as u64,
    );
    let mem_w1 = used_memory(store).await?;
    bar.finish_and_clear();

    let bar = stage(progress, "W5 flush: W1's wal into SQLite".into());
    let w5 = spill::w5_flush(store, &spill_config, written).await?;
    let mem_trimmed = used_memory(store).await?;
    let messages = (sizes.sessions * sizes.messages) as u64;
    let memory = Memory::new(
        messages,
        sizes.sessions as u64,
        live::stored_bytes(store, &sessions).await?,
        [mem_w1, mem_trimmed].map(|m| m.saturating_sub(mem_before)),
    );
    bar.finish_and_clear();

    let bar = stage(progress, "W1 raw: redis-benchmark".into());
    let raw = RawCommands::prepare(store, &sessions[0]).await?;
    w1.raw_per_sec =
        Some(benchmark_raw(store, sizes.workers, sizes.raw_requests, &raw.append).await?);
    w1.raw_command = Some(describe(&raw.append));
    bar.finish_and_clear();

    let bar = stage(
        progress,
        format!("W2 load: {} loads of each session", sizes.loads),
    );
    let mut w2 = live::w2_load(store, &sessions, sizes).await?;
    let loads = benchmark_raw(store, sizes.workers, sizes.raw_requests / 10, &raw.load).await?;
    w2.raw_per_sec = Some(loads * sizes.messages as f64);
    w2.raw_command = Some(describe(&raw.load));
    bar.finish_and_clear();

    let bar = stage(
        progress,
        format!(
            "W3 state: {} sessions x {} rounds",
            sizes.state_sessions, sizes.rounds
        ),
    );
    let mut w3 = live::w3_state(store, sizes).await?;
    let save = benchmark_raw(store, sizes.workers, sizes.raw_requests / 5, &raw.save).await?;
    let read = benchmark_raw(store, sizes.workers, sizes.raw_requests / 5, &raw.read).await?;
    w3.raw_per_sec = Some(1.0 / (1.0 / save + 1.0 / read));
    w3.raw_command = Some(format!("{} + {}", describe(&raw.save), describe(&raw.read)));
    bar.finish_and_clear();

    let bar = stage(
        progress,
        format!(
            "W4 decisions: {} recorded, consumed and acked by 2 consumers",
            sizes.w4.decisions
        ),
    );
    let w4 = decisions::w4_consumers(store, sizes.w4).await?;
    let w4_row = decisions::row(&w4);
    bar.finish_and_clear();

    let w7 = w7_stage(store, sizes, progress).await?;

    let w1_scaling =
        w1_scaling_stage(store, sizes, quick, &raw, &scaling::WORKER_COUNTS, progress).await?;

    let bar = stage(
        progress,
        format!(
            "W6 rehydrate: a {}-message session after Redis loss",
            sizes.rehydrate_messages
        ),
    );
    let loss = match server {
        Some(server) => Loss::Restart(server),
        None => Loss::DeleteKeys,
    };
    let w6 = spill::w6_rehydrate(store, &spill_config, sizes.rehydrate_messages, loss).await?;
    bar.finish_and_clear();

    Ok(Report {
        quick,
        workers: sizes.workers,
        machine: Machine {
            load_end: load_average(),
            ..machine_at_start
        },
        rows: vec![w1, w2, w3, w4_row],
        w4,
        w5,
        w6,
        memory,
        w1_calls,
        w1_scaling,
        w7,
        w8,
    })
}
