//! `agentstate bench`: the benchmark workloads, each measured next to the same work done with
//! raw commands on the same Redis at the same concurrency (mostly by `redis-benchmark`).
//! Figures are reported, never asserted.
//!
//! # Layout
//! - this file: the command's arguments and the printed report.
//! - `harness`: rows, latencies, sizes, redis-benchmark, memory, and `run` (everything in
//!   order, one report).
//! - `live`: W1 append, W2 load, W3 state, and the raw commands they are compared with.
//! - `decisions`: W4, decisions recorded, consumed and acked by two consumers.
//! - `spill`: W5 flusher throughput and lag, W6 rehydration after Redis lost a session.
//! - `scaling`: W1 at 1, 8 and 64 workers next to SET and the single-append script, with the
//!   Redis CPU per append.
//! - `tiers`: with `--db postgres://…`, W5 and W6 on PostgreSQL beside SQLite, and one
//!   daemon against two on PostgreSQL.
//! - `leases`: W7, run lease acquire/renew/release cycles, and an append with a fencing
//!   token next to the same append without.
//! - `memory`: W8, Redis memory per live session next to a naive list per session, before
//!   and after the spill daemon's trim, with `MEMORY USAGE` per key kind.
//! - `scale`: W9, W8's population (1,000,000 sessions) listed, lost, re-seeded and restored.
//! - `outage`: W10, writers at a steady rate through a long durable-tier outage: the spool's
//!   size, then its replay rate.

mod decisions;
mod harness;
mod leases;
mod live;
mod measure;
mod memory;
mod outage;
mod scale;
mod scaling;
mod sizes;
mod spill;
mod tiers;

use crate::durable::Location;
use crate::redis_server::RedisServer;
use crate::{Config, Error, Result, Store};
use clap::Args;
use harness::{Options, Report};
use measure::Row;

use super::Global;

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Smaller workloads for a quick smoke run.
    #[arg(long)]
    quick: bool,
    /// Concurrent workers of W1–W3 (and redis-benchmark's -c next to them) [default: 8].
    /// Several, comma-separated (`--workers 1,8,64`): W1 alone at each count, next to SET
    /// and the single-append script at the same -c, with p50/p99 and the Redis and client
    /// CPU per append.
    #[arg(long, value_name = "N[,N...]", value_delimiter = ',',
          value_parser = clap::value_parser!(u16).range(1..))]
    workers: Vec<u16>,
    /// Sessions W1 appends to (and the least the scaling runs use) [default: 64, 16 with --quick].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    sessions: Option<u32>,
    /// With `--db postgres://…`: only the durable tiers' rows (W5 flush, W6 restore on
    /// SQLite and PostgreSQL, one and two daemons), not W1–W6 on Redis.
    #[arg(long)]
    tiers_only: bool,
    /// Only W7: run lease acquire/renew/release cycles, and appends with and without a
    /// fencing token side by side (at the first of `--workers`).
    #[arg(long, conflicts_with = "tiers_only")]
    leases_only: bool,
    /// Only W8: Redis memory per live session (`--sessions` of them, default 20,000; 1,000
    /// with --quick) of 5 messages of 200 characters, before and after the spill daemon's
    /// flush and trim, next to a naive list per session, with the bytes per key kind.
    #[arg(long, conflicts_with_all = ["tiers_only", "leases_only"])]
    memory_only: bool,
    /// Only W9, on a private redis-server it restarts empty: W8 at `--sessions` (default
    /// 1,000,000; 10,000 with --quick), then a `session list` page, a new daemon's start and
    /// re-seed after the loss, the walk of every page, and sessions restored on demand.
    #[arg(long, conflicts_with_all = ["tiers_only", "leases_only", "memory_only"])]
    scale_only: bool,
    /// Only W10: writers at `--rate` appends a second through a durable-tier outage of
    /// `--outage-secs` (SQLite locked by another connection; with `--db postgres://…`, the
    /// daemon's connections cut), then the spool's replay.
    #[arg(long, conflicts_with_all = ["tiers_only", "leases_only", "memory_only", "scale_only"])]
    outage_only: bool,
    /// W10's outage, seconds [default: 600, 20 with --quick].
    #[arg(long, value_name = "SECS", requires = "outage_only")]
    outage_secs: Option<u64>,
    /// W10's appends a second [default: 2000].
    #[arg(
        long,
        value_name = "N",
        default_value_t = 2000,
        requires = "outage_only"
    )]
    rate: u64,
    /// Print the text Redis runs for `lua/NAME.lua` (the prelude helpers it includes
    /// prepended, as the library builds it) and run nothing: the shell benchmarks send it
    /// themselves.
    #[arg(long, value_name = "NAME")]
    print_script: Option<String>,
}

/// Runs on `--redis` when given (prefix `asbench` unless --prefix is set), else on a private
/// redis-server so the figures are not disturbed by other clients.
pub async fn run(global: &Global, args: BenchArgs) -> Result<()> {
    if let Some(name) = &args.print_script {
        let text = crate::scripts::text_of(name)
            .ok_or_else(|| Error::InvalidInput(format!("no script lua/{name}.lua")))?;
        print!("{text}");
        return Ok(());
    }
    let durable = global.db.as_ref().and_then(|db| match Location::of(db) {
        Location::Postgres(url) => Some(url.to_string()),
        Location::Sqlite(_) => None,
    });
    if args.outage_only {
        return run_outage(global, &args, durable.as_deref()).await;
    }
    if args.tiers_only && durable.is_none() {
        return Err(Error::InvalidInput(
            "--tiers-only compares SQLite with PostgreSQL: give --db postgres://… (a role that may CREATE DATABASE)".into(),
        ));
    }
    if !args.tiers_only {
        run_workloads(global, &args).await?;
    }
    if let Some(url) = durable {
        let (entries, messages) = if args.quick {
            (20_000, 2_000)
        } else {
            (200_000, 10_000)
        };
        let rows = tiers::compare(&url, entries, messages).await?;
        if global.json {
            println!("{}", serde_json::to_string(&rows)?);
        } else {
            print_tiers(&rows, messages);
        }
    }
    Ok(())
}

/// W1–W6 on Redis and the spill daemon on SQLite.
async fn run_workloads(global: &Global, args: &BenchArgs) -> Result<()> {
    let (url, mut private) = match &global.redis {
        Some(url) => (url.clone(), None),
        None => {
            let server = tokio::task::spawn_blocking(RedisServer::start)
                .await
                .map_err(|e| Error::io(e.to_string()))??;
            (server.url(), Some(server))
        }
    };
    let prefix = if global.prefix == "as" && global.redis.is_some() {
        "asbench".to_string()
    } else {
        global.prefix.clone()
    };
    let store = Store::connect(
        Config::new(url)
            .prefix(prefix)
            .partitions(global.partitions),
    )
    .await?;
    let db_dir = tempfile::tempdir()?;
    if args.leases_only {
        let workers = args.workers.first().map(|&n| usize::from(n));
        let w7 = harness::run_leases(&store, args.quick, workers, &db_dir.path().join("bench.db"))
            .await?;
        if global.json {
            println!("{}", serde_json::to_string(&w7)?);
        } else {
            print_w7(&w7);
        }
        return Ok(());
    }
    if args.scale_only {
        let Some(server) = private.as_mut() else {
            return Err(Error::InvalidInput(
                "--scale-only restarts its Redis empty: run it without --redis (it starts a private redis-server)".into(),
            ));
        };
        let mut sizes = memory::W8Sizes::new(args.quick);
        sizes.sessions = match args.sessions {
            Some(n) => n as usize,
            None if args.quick => 10_000,
            None => 1_000_000,
        };
        let w9 = scale::w9_scale(&store, server, sizes, &db_dir.path().join("bench.db")).await?;
        if global.json {
            println!("{}", serde_json::to_string(&w9)?);
        } else {
            print_w8(&w9.w8);
            print_w9(&w9);
        }
        return Ok(());
    }
    if args.memory_only {
        let sessions = args.sessions.map(|n| n as usize);
        let w8 = harness::run_memory(
            &store,
            args.quick,
            sessions,
            &db_dir.path().join("bench.db"),
        )
        .await?;
        if global.json {
            println!("{}", serde_json::to_string(&w8)?);
        } else {
            print_w8(&w8);
        }
        return Ok(());
    }
    if args.workers.len() > 1 {
        let mut counts: Vec<usize> = Vec::new();
        for n in args.workers.iter().map(|&n| usize::from(n)) {
            if !counts.contains(&n) {
                counts.push(n); // each count once: its sessions are named by it
            }
        }
        let sizes = args.sessions.map(|n| n as usize);
        let points = harness::run_scaling(
            &store,
            args.quick,
            sizes,
            &counts,
            &db_dir.path().join("bench.db"),
        )
        .await?;
        if global.json {
            println!("{}", serde_json::to_string(&points)?);
        } else {
            print_scaling(&points);
        }
        return Ok(());
    }
    let report = harness::run(
        &store,
        Options {
            quick: args.quick,
            workers: args.workers.first().map(|&n| usize::from(n)),
            sessions: args.sessions.map(|n| n as usize),
            db_path: db_dir.path().join("bench.db"),
            server: private.as_mut(),
            progress: true,
        },
    )
    .await?;
    if global.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print_report(&report);
    }
    Ok(())
}

fn print_tiers(rows: &[tiers::TierRow], messages: usize) {
    println!(
        "{:<10} {:>7} {:>9} {:>7} {:>11} {:>9}  W6 restore of {messages} messages: daemon / direct",
        "durable", "daemons", "entries", "secs", "entries/s", "vs sqlite"
    );
    let base = rows.first().map_or(1.0, |r| r.per_sec);
    for r in rows {
        let w6 = match (r.restore_request_ms, r.restore_direct_ms) {
            (Some(a), Some(b)) => format!("{a:.1} ms / {b:.1} ms"),
            _ => "-".into(),
        };
        println!(
            "{:<10} {:>7} {:>9} {:>7.2} {:>11.0} {:>9.2}  {w6}",
            r.tier,
            r.daemons,
            r.entries,
            r.secs,
            r.per_sec,
            r.per_sec / base
        );
    }
}

fn print_report(report: &Report) {
    let m = &report.machine;
    let load = |l: Option<f64>| l.map_or("?".into(), |l| format!("{l:.2}"));
    println!(
        "{} cores, Redis {}, load {} -> {}{}",
        m.cores,
        m.redis_version,
        load(m.load_start),
        load(m.load_end),
        if report.quick { ", --quick sizes" } else { "" }
    );
    print_table(&report.rows, report.workers);
    println!(
        "W1 cost in Redis: {:.2} EVALSHA and {:.1} commands (inner ones included) per append, {} master(s)",
        report.w1_calls.evalsha_per_append,
        report.w1_calls.commands_per_append,
        m.masters
    );
    let (w4, w5, w6) = (&report.w4, &report.w5, &report.w6);
    println!(
        "W4 latency, record_decision returning -> blocked consumer holding it: p50 {} us, p99 {} us (raw XADD: {} / {} us); W4 p50/p99 above are from calling record_decision",
        w4.agentstate.p50_us, w4.agentstate.p99_us, w4.raw.p50_us, w4.raw.p99_us
    );
    println!(
        "W5 flush: {} wal entries of W1 into SQLite in {:.2} s = {:.0} entries/s; lag from W1's last append to all of it committed: {:.0} ms",
        w5.entries, w5.secs, w5.per_sec, w5.lag_ms
    );
    println!(
        "W6 rehydrate: {} messages after Redis loss ({}): {:.1} ms through the daemon (request -> live), {:.1} ms straight from SQLite",
        w6.messages, w6.loss, w6.request_ms, w6.direct_ms
    );
    print_w7(&report.w7);
    print_w8(&report.w8);
    print_scaling(&report.w1_scaling);
    let mem = &report.memory;
    for (when, f) in [
        ("before the trim (wal holds W1)", &mem.before_trim),
        ("after W5 (flushed, wal trimmed)", &mem.after_trim),
    ] {
        println!(
            "memory after W1, {when}: {:.0} B/message, {:.0} B/session, {:.2}x the content bytes, {:.2}x the stored message JSON",
            f.per_message_bytes, f.per_session_bytes, f.ratio_to_content, f.ratio_to_stored
        );
    }
}

/// W10 on a private redis-server and a temp SQLite file, or a scratch database on the
/// server of `postgres`.
async fn run_outage(global: &Global, args: &BenchArgs, postgres: Option<&str>) -> Result<()> {
    let server = tokio::task::spawn_blocking(RedisServer::start)
        .await
        .map_err(|e| Error::io(e.to_string()))??;
    let store = Store::connect(Config::new(server.url()).partitions(global.partitions)).await?;
    let dir = tempfile::tempdir()?;
    let db = postgres.map_or(dir.path().join("bench.db"), std::path::PathBuf::from);
    let secs = args
        .outage_secs
        .unwrap_or(if args.quick { 20 } else { 600 });
    let w10 = outage::w10_outage(
        &store,
        &db,
        dir.path(),
        args.rate,
        std::time::Duration::from_secs(secs),
    )
    .await?;
    if global.json {
        println!("{}", serde_json::to_string(&w10)?);
    } else {
        println!(
            "W10 {} down {:.0} s under {} appends/s: {} acknowledged, {} refused; then spool {} entries, {:.1} MiB; {} wal entries in Redis, used_memory {:.1} MiB",
            w10.tier,
            w10.outage_secs,
            w10.rate,
            w10.appended,
            w10.refused,
            w10.spool_entries,
            w10.spool_bytes as f64 / 1048576.0,
            w10.wal_pending,
            w10.used_memory as f64 / 1048576.0
        );
        println!(
            "  replay after the tier came back: {:.1} s, {:.0} entries/s",
            w10.replay_secs, w10.replay_per_sec
        );
    }
    Ok(())
}

fn print_w9(w9: &scale::W9Report) {
    let us = |v: Option<u64>| v.map_or("-".into(), |v| v.to_string());
    let ms = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
    println!(
        "W9 at {} sessions: session list page of 100: first p50 {} us, middle p50 {} us",
        w9.w8.sessions,
        us(w9.first_page_p50_us),
        us(w9.middle_page_p50_us)
    );
    println!(
        "  Redis restarted empty: daemon start + re-seed {:.1} s; every page walked: {} ids in {:.1} s",
        w9.reseed_secs, w9.listed, w9.walk_secs
    );
    println!(
        "  a running daemon held every partition after {:.1} s; a lost session read (restored on demand): p50 {} ms, p99 {} ms",
        w9.takeover_secs,
        ms(w9.restore_p50_ms),
        ms(w9.restore_p99_ms)
    );
}

fn print_w8(w8: &memory::W8Report) {
    println!(
        "W8 memory per live session ({} sessions of user bench x {} messages of {} characters; used_memory growth):",
        w8.sessions, w8.messages, w8.content_chars
    );
    println!(
        "  naive list (RPUSH of the {} messages as {{\"role\",\"content\"}}, no TTL, no index): {:.0} B/session",
        w8.messages, w8.naive_per_session
    );
    println!(
        "  agentstate before the trim (wal holds every write): {:.0} B/session = {:.2}x naive",
        w8.before_trim_per_session,
        w8.ratio_before()
    );
    println!(
        "  agentstate after the spill daemon's flush and trim: {:.0} B/session = {:.2}x naive",
        w8.after_trim_per_session,
        w8.ratio_after()
    );
    println!(
        "  {:<36} {:<22} {:>9} {:>10}",
        "key kind (MEMORY USAGE)", "encoding", "keys/sess", "B/session"
    );
    let mut counted = 0.0;
    for k in &w8.breakdown {
        counted += k.bytes_per_session;
        println!(
            "  {:<36} {:<22} {:>9.3} {:>10.1}",
            k.kind, k.encoding, k.keys_per_session, k.bytes_per_session
        );
    }
    println!(
        "  {:<36} {:<22} {:>9} {:>10.1}",
        "rest (expiry entries, dict buckets)",
        "-",
        "-",
        w8.after_trim_per_session - counted
    );
    let wal = &w8.wal_before;
    println!(
        "  {:<36} {:<22} {:>9.3} {:>10.1}  ({} entries, {:.0} B/entry)",
        wal.kind,
        wal.encoding,
        wal.keys_per_session,
        wal.bytes_per_session,
        w8.wal_entries_before,
        wal.bytes_per_session * w8.sessions as f64 / w8.wal_entries_before.max(1) as f64
    );
    let k = &w8.naive_list;
    println!(
        "  {:<36} {:<22} {:>9.3} {:>10.1}",
        k.kind, k.encoding, k.keys_per_session, k.bytes_per_session
    );
    let k = &w8.prompt_meta;
    println!(
        "  {:<36} {:<22} {:>9.3} {:>10.1}  ({} characters; hash-max-listpack-value {})",
        k.kind,
        k.encoding,
        k.keys_per_session,
        k.bytes_per_session,
        memory::PROMPT_CHARS,
        w8.hash_max_listpack_value
            .map_or("unknown".into(), |v| v.to_string())
    );
}

fn print_table(rows: &[Row], workers: usize) {
    println!(
        "{:<12} {:>9} {:>12} {:>8} {:>8} {:>12} {:>6}  raw command (redis-benchmark -c {} -P 1)",
        "workload", "ops", "ours/s", "p50 us", "p99 us", "raw/s", "ratio", workers
    );
    for r in rows {
        let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
        println!(
            "{:<12} {:>9} {:>12.0} {:>8} {:>8} {:>12} {:>6}  {}",
            r.workload,
            r.ops,
            r.per_sec,
            opt(r.p50_us),
            opt(r.p99_us),
            r.raw_per_sec.map_or("-".into(), |v| format!("{v:.0}")),
            r.ratio().map_or("-".into(), |v| format!("{:.2}", v)),
            r.raw_command.as_deref().unwrap_or("-"),
        );
    }
}

fn print_w7(w7: &leases::W7Report) {
    println!(
        "W7 run leases and fencing ({} workers over {} sessions; the plain and fenced appends alternate in passes):",
        w7.workers, w7.sessions
    );
    print_table(
        &[w7.lease.clone(), w7.append.clone(), w7.fenced.clone()],
        w7.workers,
    );
    let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    let ops: Vec<String> = w7
        .per_op
        .iter()
        .map(|o| format!("{} {}/{}", o.op, opt(o.p50_us), opt(o.p99_us)))
        .collect();
    println!("W7 lease p50/p99 us per operation: {}", ops.join(", "));
    for (what, c) in [("plain", &w7.append_calls), ("fenced", &w7.fenced_calls)] {
        println!(
            "W7 {what} append cost in Redis: {:.2} EVALSHA and {:.1} commands (inner ones included) per append",
            c.evalsha_per_append, c.commands_per_append
        );
    }
}

fn print_scaling(points: &[scaling::ScalingPoint]) {
    println!(
        "W1 scaling (redis-benchmark -P 1 at the same -c; cpu = Redis used_cpu_user+sys per call, client = this process' CPU per append, on {} runtime thread(s): --threads):",
        points.first().map_or(0, |p| p.client_threads)
    );
    println!(
        "{:>7} {:>8} {:>9} {:>7} {:>7} {:>8} {:>8} {:>8} {:>8} {:>9} {:>7} {:>8} {:>11} {:>7} {:>8}",
        "workers",
        "sessions",
        "appends/s",
        "p50 us",
        "p99 us",
        "cpu us",
        "client",
        "evalsha",
        "cmds",
        "SET/s",
        "SET cpu",
        "of SET",
        "append_msg/s",
        "cpu",
        "of it"
    );
    for p in points {
        let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
        println!(
            "{:>7} {:>8} {:>9.0} {:>7} {:>7} {:>8.1} {:>8.1} {:>8.2} {:>8.1} {:>9.0} {:>7.1} {:>8.2} {:>11.0} {:>7.1} {:>8.2}",
            p.workers,
            p.sessions,
            p.per_sec,
            opt(p.p50_us),
            opt(p.p99_us),
            p.cpu_us_per_append,
            p.client_cpu_us_per_append,
            p.evalsha_per_append,
            p.commands_per_append,
            p.set_per_sec,
            p.set_cpu_us,
            p.of_set(),
            p.script_per_sec,
            p.script_cpu_us,
            p.of_script()
        );
    }
}
