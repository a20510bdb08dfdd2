//! `agentstate bench`: the benchmark workloads side by side with redis-benchmark.

use agentstate::bench::{self, RawCommands, Row, Sizes};
use agentstate::redis_server::RedisServer;
use agentstate::{Config, Error, Result, Store};
use clap::Args;

use super::Global;

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Smaller workloads for a quick smoke run.
    #[arg(long)]
    quick: bool,
}

/// Runs on `--redis` when given (prefix `asbench` unless --prefix is set), else on a private
/// redis-server so the figures are not disturbed by other clients.
pub async fn run(global: &Global, args: BenchArgs) -> Result<()> {
    let private = match &global.redis {
        Some(_) => None,
        None => Some(
            tokio::task::spawn_blocking(RedisServer::start)
                .await
                .map_err(|e| Error::Io(e.to_string()))??,
        ),
    };
    let url = match (&global.redis, &private) {
        (Some(url), _) => url.clone(),
        (None, Some(server)) => server.url(),
        (None, None) => unreachable!("a private server was started"),
    };
    let port = url
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').split('/').next())
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or(6379);
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
    let sizes = Sizes::new(args.quick);
    let mut rows: Vec<Row> = Vec::new();

    eprintln!(
        "W1 append: {} sessions x {} messages, {} workers...",
        sizes.sessions,
        sizes.messages,
        bench::WORKERS
    );
    let mem_before = bench::used_memory(&store).await?;
    let (mut w1, sessions) = bench::w1_append(&store, sizes).await?;
    let mem_after = bench::used_memory(&store).await?;
    let raw = RawCommands::prepare(&store, &sessions[0]).await?;
    w1.raw_per_sec = Some(bench::redis_benchmark(
        port,
        sizes.raw_requests,
        &raw.append,
    )?);
    w1.raw_command = Some(bench::describe(&raw.append));
    rows.push(w1);

    eprintln!("W2 load: {} loads of each session...", sizes.loads);
    let mut w2 = bench::w2_load(&store, &sessions, sizes).await?;
    let loads = bench::redis_benchmark(port, sizes.raw_requests / 10, &raw.load)?;
    w2.raw_per_sec = Some(loads * sizes.messages as f64);
    w2.raw_command = Some(bench::describe(&raw.load));
    rows.push(w2);

    eprintln!(
        "W3 state: {} sessions x {} rounds...",
        sizes.state_sessions, sizes.rounds
    );
    let mut w3 = bench::w3_state(&store, sizes).await?;
    let save = bench::redis_benchmark(port, sizes.raw_requests / 5, &raw.save)?;
    let read = bench::redis_benchmark(port, sizes.raw_requests / 5, &raw.read)?;
    w3.raw_per_sec = Some(1.0 / (1.0 / save + 1.0 / read));
    w3.raw_command = Some(format!(
        "{} + {}",
        bench::describe(&raw.save),
        bench::describe(&raw.read)
    ));
    rows.push(w3);

    let msgs = (sizes.sessions * sizes.messages) as f64;
    let content_bytes = msgs * 256.0;
    let memory = serde_json::json!({
        "used_memory_growth_bytes": mem_after.saturating_sub(mem_before),
        "per_message_bytes": (mem_after.saturating_sub(mem_before)) as f64 / msgs,
        "per_session_bytes": (mem_after.saturating_sub(mem_before)) as f64 / sizes.sessions as f64,
        "raw_content_bytes": content_bytes,
        "ratio_to_raw": (mem_after.saturating_sub(mem_before)) as f64 / content_bytes,
    });

    if global.json {
        println!(
            "{}",
            serde_json::json!({"rows": rows, "memory_after_w1": memory})
        );
    } else {
        print_table(&rows);
        println!(
            "memory after W1 (wal not yet trimmed): {:.0} B/message, {:.0} B/session, {:.2}x the raw content bytes",
            memory["per_message_bytes"].as_f64().unwrap_or(0.0),
            memory["per_session_bytes"].as_f64().unwrap_or(0.0),
            memory["ratio_to_raw"].as_f64().unwrap_or(0.0),
        );
    }
    Ok(())
}

fn print_table(rows: &[Row]) {
    println!(
        "{:<12} {:>9} {:>12} {:>8} {:>8} {:>12} {:>6}  raw command (redis-benchmark -c {} -P 1)",
        "workload",
        "ops",
        "ours/s",
        "p50 us",
        "p99 us",
        "raw/s",
        "ratio",
        bench::WORKERS
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
