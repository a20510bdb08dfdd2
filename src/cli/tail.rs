//! `agentstate tail`: a consumer of the decisions streams printing deliveries as JSON lines.

use std::time::Duration;

use crate::{ConsumerOptions, Result, StartFrom};
use clap::Args;

use super::{print_json, Ctx};

#[derive(Debug, Args)]
pub struct TailArgs {
    /// Consumer group (created on first use, on every partition).
    #[arg(long)]
    group: String,
    /// This consumer's name within the group.
    #[arg(long)]
    consumer: String,
    /// Exit after printing N deliveries (or when a read times out with nothing new);
    /// without it, follow until interrupted.
    #[arg(long)]
    count: Option<usize>,
    /// A group created now starts from the oldest retained entry instead of new ones.
    #[arg(long)]
    from_start: bool,
    /// Do not acknowledge: printed entries stay pending and are redelivered after
    /// --min-idle-ms.
    #[arg(long)]
    no_ack: bool,
    /// Claim entries other consumers held unacked for this long.
    #[arg(long, default_value_t = 30_000)]
    min_idle_ms: u64,
    /// How long one read waits for new entries (0: do not block; poll every 100 ms).
    #[arg(long, default_value_t = 2_000)]
    block_ms: u64,
    /// Deliveries allowed per entry before it moves to the dead-letter stream.
    #[arg(long, default_value_t = 5)]
    max_deliveries: u32,
}

/// Reads, prints one JSON line per delivery, and acks what it printed (unless --no-ack).
/// With --count N it never takes more than N entries from the group.
pub async fn run(ctx: &Ctx, a: TailArgs) -> Result<()> {
    let batch = a.count.unwrap_or(100).clamp(1, 100);
    let options = ConsumerOptions::new()
        .start(if a.from_start {
            StartFrom::Beginning
        } else {
            StartFrom::Now
        })
        .min_idle(Duration::from_millis(a.min_idle_ms))
        .block(Duration::from_millis(a.block_ms))
        .max_deliveries(a.max_deliveries)
        .count(batch);
    let mut consumer = ctx.store.consumer(&a.group, &a.consumer, options).await?;
    // Installed once: a Ctrl-C that arrives while entries are printed or acked is kept for
    // the next wait instead of being lost.
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut printed = 0usize;
    loop {
        // A bounded tail takes only what it will print, so consumers sharing a group share
        // the work.
        let read = async {
            match a.count {
                Some(n) => consumer.read_up_to(n - printed).await,
                None => consumer.read().await,
            }
        };
        let got = tokio::select! {
            got = read => got?,
            _ = interrupt.recv() => return Ok(()),
        };
        if got.is_empty() {
            if a.count.is_some() {
                return Ok(());
            }
            if a.block_ms == 0 {
                // Following without a blocking read: poll, do not spin.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            continue;
        }
        for d in &got {
            print_json(d)?;
        }
        printed += got.len();
        if !a.no_ack {
            consumer.ack(&got).await?;
        }
        if a.count == Some(printed) {
            return Ok(());
        }
    }
}
