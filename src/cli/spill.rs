//! `agentstate spill | restore | export | stats`: the spill daemon and the durable tier.

use std::time::Duration;

use std::io::IsTerminal;

use crate::spill::inspect;
use crate::{Result, SpillConfig, SpillDaemon};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{print_json, render, Ctx};

/// Arguments of `agentstate spill`.
#[derive(Debug, clap::Args)]
pub struct SpillArgs {
    /// Drain every partition's streams into the durable tier (and serve pending restores),
    /// then exit: 0 once every entry that existed at the start is committed, 1 naming the
    /// partitions a live daemon holds without committing (leases of dead daemons are waited
    /// for).
    #[arg(long)]
    once: bool,
    /// Longest time between full passes (leases renewed, free partitions claimed),
    /// milliseconds, at most a third of --lease-ms. Writes do not wait for it: the daemon
    /// blocks on its partitions' streams and commits each write as it arrives.
    #[arg(long, default_value_t = 1000)]
    interval_ms: u64,
    /// Partition lease time, milliseconds: a standby takes over this long after the owner
    /// died.
    #[arg(long, default_value_t = 3000)]
    lease_ms: u64,
    /// How often the retention policy runs, milliseconds (first at start).
    #[arg(long, default_value_t = 3_600_000, value_name = "MS")]
    gc_interval_ms: u64,
    #[command(flatten)]
    retention: super::gc::RetentionArgs,
    /// Bytes of wal the daemon's partitions may hold in Redis before it moves entries into
    /// its spool (K, M, G: KiB, MiB, GiB). Default: half of what Redis has free under
    /// maxmemory, else 256M. The daemon also spools once the durable tier has failed for 2 s.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    wal_budget: Option<u64>,
    /// Directory of the spool, the local SQLite file that holds wal entries while the
    /// durable tier is down (default: beside the SQLite file; the working directory for
    /// PostgreSQL). Keep it on a disk that survives a restart: restart a daemon on the same
    /// spool to replay what it holds.
    #[arg(long, value_name = "DIR")]
    spool: Option<std::path::PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics, with /healthz and /readyz probes
    /// (e.g. 127.0.0.1:9464, or 0.0.0.0:9464 in a container). Not with --once.
    #[arg(long, env = "AGENTSTATE_METRICS", value_name = "ADDR")]
    metrics: Option<String>,
}

impl SpillArgs {
    /// True for `--once`: drain and exit.
    pub fn once(&self) -> bool {
        self.once
    }
}

/// `--wal-budget`: bytes, with an optional K, M or G (KiB, MiB, GiB) suffix.
fn parse_bytes(text: &str) -> std::result::Result<u64, String> {
    let upper = text.trim().to_ascii_uppercase();
    let digits = upper.trim_end_matches(['B', 'I']);
    let (number, shift) = match digits.chars().last() {
        Some('K') => (&digits[..digits.len() - 1], 10),
        Some('M') => (&digits[..digits.len() - 1], 20),
        Some('G') => (&digits[..digits.len() - 1], 30),
        _ => (digits, 0),
    };
    number
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| {
            format!("{text:?} is not a size: write bytes, or a number with K, M or G (e.g. 512M)")
        })
}

/// Runs the spill daemon until SIGINT/SIGTERM (drains the batch in flight, commits, exits
/// 0), or once with `--once` (prints what it committed as JSON). The daemon logs a line on
/// stderr when it starts and stops; with --json those two are also JSON lines on stdout
/// (`{"event":"started",...}`, `{"event":"stopped",...}`).
pub async fn spill(ctx: &Ctx, args: SpillArgs) -> Result<()> {
    let lease = Duration::from_millis(args.lease_ms.max(1));
    let config = SpillConfig::new(ctx.global.db())
        .interval(Duration::from_millis(args.interval_ms))
        .lease_ttl(lease)
        .retention(args.retention.policy()?)
        .gc_interval(Duration::from_millis(args.gc_interval_ms.max(1)));
    let config = match args.wal_budget {
        Some(bytes) => config.wal_budget(bytes),
        None => config,
    };
    let config = match &args.spool {
        Some(dir) => config.spool(dir),
        None => config,
    };
    let metrics = match &args.metrics {
        Some(addr) if !args.once => {
            let addr = crate::web::parse_listen("--metrics", addr)?;
            Some(crate::web::bind("--metrics", addr).await?)
        }
        _ => None,
    };
    let daemon = SpillDaemon::open(ctx.store.clone(), config).await?;
    if args.once {
        let report = daemon.run_once().await?;
        return print_json(&report);
    }
    let owner = daemon.owner().to_string();
    if ctx.json() {
        print_json(&json!({
            "event": "started",
            "redis": crate::address::redacted(&ctx.store.config().redis_url),
            "db": crate::durable::Location::of(&ctx.global.db()).display(),
            "partitions": ctx.store.keys().partitions(),
            "lease_ms": lease.as_millis() as u64,
            "owner": owner,
        }))?;
    }
    let cancel = CancellationToken::new();
    let server = match metrics {
        Some(listener) => {
            let router =
                crate::web::metrics::router(ctx.store.clone(), &ctx.global.db(), &owner).await?;
            tracing::info!(address = %listener.local_addr()?, "serving /metrics, /healthz, /readyz");
            Some(tokio::spawn(crate::web::serve(
                listener,
                router,
                cancel.clone(),
            )))
        }
        None => None,
    };
    let on_signal = cancel.clone();
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("install the SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        on_signal.cancel();
    });
    let ran = daemon.run(cancel.clone().cancelled_owned()).await;
    cancel.cancel();
    if let Some(server) = server {
        server
            .await
            .map_err(|e| crate::Error::io(e.to_string()))??;
    }
    ran?;
    if ctx.json() {
        print_json(&json!({ "event": "stopped", "owner": owner }))?;
    }
    Ok(())
}

/// Arguments of `agentstate restore`.
#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    /// Session ids.
    sids: Vec<String>,
    /// Every session the index lists (after Redis lost its state: all of SQLite's, once a
    /// daemon re-seeded the index).
    #[arg(long)]
    all: bool,
}

/// `agentstate restore SID... | --all`: makes each session live from SQLite; prints
/// `restored`, or `live` when it was live already (for several sessions `<sid>
/// restored|live` per line, with a progress bar on stderr; with --json one line
/// `{"id","state"}` per session). Works with or without a running
/// daemon: for the length of the command a daemon of this process stands by on `--db`; it
/// takes only partitions no daemon owns (leases), so a partition's owner serves its
/// requests and nothing races it.
pub async fn restore(ctx: &Ctx, args: RestoreArgs) -> Result<()> {
    let config = SpillConfig::new(ctx.global.db());
    let Some(mut standby) =
        SpillDaemon::open_if_holding_tier(ctx.store.clone(), config, true).await?
    else {
        // No durable tier here (an agent's directory): the namespace's daemon restores.
        return restore_through_daemon(ctx, args).await;
    };
    // Its first pass takes the partitions nobody owns and, after a loss, re-seeds their
    // index before `--all` lists it.
    standby.pass().await?;
    let cancel = CancellationToken::new();
    let daemon = tokio::spawn(standby.run(cancel.clone().cancelled_owned()));
    let result = restore_through_daemon(ctx, args).await;
    cancel.cancel();
    daemon
        .await
        .map_err(|e| crate::Error::io(e.to_string()))??;
    result
}

/// Checks this Redis against the durable tier before a command that reads or writes
/// sessions, when no daemon has yet (some partition lacks `<prefix>:{p}:committed` and no
/// daemon holds its lease) and this process holds the tier the namespace is bound to: one
/// daemon pass of this process takes those partitions, re-seeds what Redis lost and
/// publishes the marker. Any other process is an agent: it creates no tier and marks
/// nothing, and its calls wait for the namespace's daemon. On a private Redis (gone with the
/// command) the pass uses a tier beside it. With a daemon running this is one round trip.
pub async fn check_against_sqlite(ctx: &Ctx) -> Result<()> {
    let keys = ctx.store.keys();
    let cmds = (0..keys.partitions())
        .flat_map(|p| {
            let (mut committed, mut lease) = (redis::cmd("EXISTS"), redis::cmd("EXISTS"));
            committed.arg(keys.committed(p));
            lease.arg(keys.lease(p));
            [committed, lease]
        })
        .collect();
    let found: Vec<bool> = ctx.store.fan_out(cmds).await?;
    let undecided = found.chunks(2).any(|pair| !pair[0] && !pair[1]);
    if !undecided {
        return Ok(());
    }
    let daemon = match ctx.private_db() {
        Some(db) => Some(SpillDaemon::open(ctx.store.clone(), SpillConfig::new(db)).await?),
        None => {
            let config = SpillConfig::new(ctx.global.db());
            SpillDaemon::open_if_holding_tier(ctx.store.clone(), config, false).await?
        }
    };
    if let Some(daemon) = daemon {
        daemon.run_until_idle().await?;
    }
    Ok(())
}

async fn restore_through_daemon(ctx: &Ctx, args: RestoreArgs) -> Result<()> {
    let sids = match (args.all, args.sids.is_empty()) {
        (true, true) => ctx.store.list_sessions(None).await?,
        (false, false) => args.sids,
        _ => {
            return Err(crate::Error::InvalidInput(
                "give session ids or --all, not both or neither".into(),
            ))
        }
    };
    let bar = indicatif::ProgressBar::new(sids.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} sessions {msg}")
            .expect("a valid template"),
    );
    if sids.len() < 2 {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    for sid in &sids {
        bar.set_message(sid.clone());
        let restored = ctx.store.admin().restore_session(sid).await?;
        let state = if restored { "restored" } else { "live" };
        if ctx.json() {
            bar.suspend(|| print_json(&json!({ "id": sid, "state": state })))?;
        } else if sids.len() == 1 {
            println!("{state}");
        } else {
            bar.suspend(|| println!("{sid} {state}"));
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(())
}

/// Counts the JSON lines written through it on a spinner on stderr (indicatif hides it when
/// stderr is not a terminal), so a long export shows it is moving.
struct Counted<W> {
    inner: W,
    bar: indicatif::ProgressBar,
}

impl<W: std::io::Write> std::io::Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bar
            .inc(buf[..n].iter().filter(|b| **b == b'\n').count() as u64);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// `agentstate export SID`: the durable history from SQLite as JSON lines.
pub async fn export(ctx: &Ctx, sid: &str) -> Result<()> {
    let bar = indicatif::ProgressBar::new_spinner().with_message(format!("exporting {sid}"));
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg}: {pos} records")
            .expect("a valid template"),
    );
    let mut out = Counted {
        inner: std::io::BufWriter::new(std::io::stdout().lock()),
        bar: bar.clone(),
    };
    let lines = inspect::export_session(&ctx.store, &ctx.global.db(), sid, &mut out).await?;
    std::io::Write::flush(&mut out)?;
    bar.finish_and_clear();
    if lines == 0 {
        return Err(crate::Error::UnknownSession(format!(
            "{sid} (not in {})",
            crate::durable::Location::of(&ctx.global.db()).display()
        )));
    }
    Ok(())
}

/// Arguments of `agentstate stats`.
#[derive(Debug, clap::Args)]
pub struct StatsArgs {
    /// Refresh until Ctrl-C: redraws the table on a terminal; piped, prints each reading
    /// (JSON lines with --json, each carrying `at`).
    #[arg(long)]
    watch: bool,
    /// Time between readings with --watch, milliseconds.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    interval_ms: u64,
}

/// `agentstate stats`: per partition, entries pending, last committed ids, flush rate and
/// lag (JSON lines with `--json`, else a table with a total row); `--watch` repeats it.
pub async fn stats(ctx: &Ctx, args: StatsArgs) -> Result<()> {
    let redraw = args.watch && !ctx.json() && std::io::stdout().is_terminal();
    // Installed once, before the first reading: a Ctrl-C that arrives while a reading is
    // taken or printed is kept, not lost between two waits.
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut first = true;
    loop {
        let stats = inspect::stats(&ctx.store).await?;
        if redraw {
            // Home and clear, then the header line of the watch.
            print!("\x1b[H\x1b[2J");
            println!(
                "agentstate stats — {} every {} ms (Ctrl-C stops)\n",
                crate::address::address(&ctx.store.config().redis_url),
                args.interval_ms
            );
        } else if args.watch && !ctx.json() && !first {
            println!();
        }
        first = false;
        print_stats(ctx, &stats)?;
        if !args.watch {
            return Ok(());
        }
        std::io::Write::flush(&mut std::io::stdout())?;
        tokio::select! {
            _ = interrupt.recv() => return Ok(()),
            _ = tokio::time::sleep(Duration::from_millis(args.interval_ms.max(10))) => {}
        }
    }
}

/// A write-behind quantile as its bucket bound (`≤ 5`), `> 5000` above the last, `-` without
/// commits.
fn behind(h: Option<&inspect::WriteBehind>, q: f64) -> String {
    match h {
        None => "-".into(),
        Some(h) => match h.quantile_ms(q) {
            Some(ms) => format!("≤ {ms}"),
            None => format!("> {}", inspect::WRITE_BEHIND_BOUNDS_MS.last().unwrap_or(&0)),
        },
    }
}

fn print_stats(ctx: &Ctx, stats: &[inspect::PartitionStats]) -> Result<()> {
    if ctx.json() {
        for s in stats {
            print_json(s)?;
        }
        return Ok(());
    }
    let mut rows: Vec<Vec<String>> = stats
        .iter()
        .map(|s| {
            vec![
                s.partition.to_string(),
                s.wal_pending.to_string(),
                s.decisions_pending.to_string(),
                s.wal_committed.clone().unwrap_or_else(|| "-".into()),
                s.decisions_committed.clone().unwrap_or_else(|| "-".into()),
                s.flush_rate.map_or("-".into(), |r| format!("{r:.0}")),
                s.lag_ms.to_string(),
                behind(s.write_behind.as_ref(), 0.5),
                behind(s.write_behind.as_ref(), 0.99),
                s.owner.clone().unwrap_or_else(|| "-".into()),
                match s.writes_open {
                    Some(true) => "open".into(),
                    Some(false) => "waiting".into(),
                    None => "-".into(),
                },
                s.rollbacks.to_string(),
            ]
        })
        .collect();
    let mut all_behind = inspect::WriteBehind::default();
    for h in stats.iter().filter_map(|s| s.write_behind.as_ref()) {
        all_behind.merge(h);
    }
    let all_behind = (all_behind.total() > 0).then_some(all_behind);
    let rates: Vec<f64> = stats.iter().filter_map(|s| s.flush_rate).collect();
    rows.push(vec![
        "all".into(),
        stats
            .iter()
            .map(|s| s.wal_pending)
            .sum::<usize>()
            .to_string(),
        stats
            .iter()
            .map(|s| s.decisions_pending)
            .sum::<usize>()
            .to_string(),
        String::new(),
        String::new(),
        if rates.is_empty() {
            "-".into()
        } else {
            format!("{:.0}", rates.iter().sum::<f64>().max(0.0))
        },
        stats
            .iter()
            .map(|s| s.lag_ms)
            .max()
            .unwrap_or(0)
            .to_string(),
        behind(all_behind.as_ref(), 0.5),
        behind(all_behind.as_ref(), 0.99),
        String::new(),
        String::new(),
        stats.iter().map(|s| s.rollbacks).sum::<u64>().to_string(),
    ]);
    render::table(
        &[
            "part",
            "wal pending",
            "decisions pending",
            "wal committed",
            "decisions committed",
            "rate/s",
            "lag ms",
            "behind p50",
            "behind p99",
            "owner",
            "writes",
            "rollbacks",
        ],
        &rows,
    );
    let spooled: u64 = stats.iter().map(|s| s.spool_entries).sum();
    println!(
        "\nspool: {spooled} entries, {} bytes, oldest {} ms; durable tier down {} ms; wal budget {} bytes",
        stats.iter().map(|s| s.spool_bytes).sum::<u64>(),
        stats.iter().map(|s| s.spool_age_ms).max().unwrap_or(0),
        stats.iter().map(|s| s.durable_down_ms).max().unwrap_or(0),
        stats.iter().map(|s| s.wal_budget).max().unwrap_or(0),
    );
    if let Some(h) = &all_behind {
        println!(
            "\nwrite-behind window (acknowledged write → durable commit), last second of commits:"
        );
        let bounds = inspect::WRITE_BEHIND_BOUNDS_MS;
        let total = h.total() as f64;
        for (i, count) in h.counts.iter().enumerate().filter(|(_, c)| **c > 0) {
            let bucket = match bounds.get(i) {
                Some(b) => format!("≤ {b} ms"),
                None => format!("> {} ms", bounds[bounds.len() - 1]),
            };
            println!(
                "  {bucket:>10}  {count:>7}  {:5.1}%",
                *count as f64 * 100.0 / total
            );
        }
    }
    Ok(())
}
