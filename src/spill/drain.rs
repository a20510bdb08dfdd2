//! `spill --once`: commit every partition's entries that existed when it started, whoever
//! owns the partition. The drain claims every free partition (beyond its share), waits for
//! leases of dead owners to lapse (their heartbeats stop counting within the lease time),
//! and counts a partition another live daemon owns as drained once that daemon published a
//! committed id at or past the drain's start. What is left when the wait is over is
//! [`Error::NotDrained`], naming the partitions and their holders.

use std::time::{Duration, Instant};

use super::{PassReport, SpillDaemon};
use crate::error::{Error, Result};
use crate::records::{committed, parse_stream_id};

/// The shortest wait before a drain gives up. With short leases a loaded machine can slow the
/// drain's own passes past them (a lease lapses between passes and is taken again); the wait
/// only bounds a failure, a drain that succeeds returns at once.
const MIN_WAIT: Duration = Duration::from_secs(5);

/// The last entry id of a partition's two streams when the drain started (`None`: empty).
#[derive(Debug, Clone, Default)]
struct Ends {
    wal: Option<String>,
    decisions: Option<String>,
}

impl SpillDaemon {
    /// Drains (see the module): passes until every partition's entries that existed at the
    /// start are committed, then releases its leases. [`Error::NotDrained`] when another
    /// daemon still holds some of them uncommitted after the wait: the longer of its own
    /// lease time and the longest lease left at the start (so a dead owner's lapses), plus
    /// one lease time for a live owner to commit, and at least 5 s.
    pub async fn run_once(mut self) -> Result<PassReport> {
        self.draining = true;
        let result = self.drain().await;
        self.release_all().await;
        result
    }

    async fn drain(&mut self) -> Result<PassReport> {
        let ends = self.stream_ends().await?;
        let wait = (self
            .longest_foreign_lease()
            .await?
            .max(self.config.lease_ttl)
            + self.config.lease_ttl)
            .max(MIN_WAIT);
        let deadline = Instant::now() + wait;
        let mut total = PassReport::default();
        loop {
            let report = self.pass().await?;
            total.add(report);
            if !report.idle() {
                continue;
            }
            let undrained = self.undrained(&ends).await?;
            if undrained.is_empty() {
                return Ok(total);
            }
            if Instant::now() >= deadline {
                return Err(self.not_drained(&undrained, wait).await);
            }
            let pause = self.config.interval.min(Duration::from_millis(100));
            tokio::time::sleep(pause).await;
        }
    }

    /// Each partition's stream ends now.
    async fn stream_ends(&self) -> Result<Vec<Ends>> {
        let keys = self.store.keys();
        let cmds = (0..keys.partitions())
            .flat_map(|p| {
                [keys.wal(p), keys.decisions(p)].map(|stream| {
                    let mut cmd = redis::cmd("XREVRANGE");
                    cmd.arg(stream).arg("+").arg("-").arg("COUNT").arg(1);
                    cmd
                })
            })
            .collect();
        let last: Vec<Vec<crate::records::Entry>> = self.store.fan_out(cmds).await?;
        let mut ids = last
            .into_iter()
            .map(|entries| entries.into_iter().next().map(|(id, _)| id));
        Ok((0..keys.partitions())
            .map(|_| Ends {
                wal: ids.next().flatten(),
                decisions: ids.next().flatten(),
            })
            .collect())
    }

    /// The longest time left on a lease another daemon holds.
    async fn longest_foreign_lease(&self) -> Result<Duration> {
        let keys = self.store.keys();
        let cmds = (0..keys.partitions())
            .map(|p| {
                let mut cmd = redis::cmd("PTTL");
                cmd.arg(keys.lease(p));
                cmd
            })
            .collect();
        let left: Vec<i64> = self.store.fan_out(cmds).await?;
        Ok(Duration::from_millis(
            left.into_iter().max().unwrap_or(0).max(0) as u64,
        ))
    }

    /// The partitions whose committed ids are still below their `ends`.
    async fn undrained(&self, ends: &[Ends]) -> Result<Vec<u32>> {
        let keys = self.store.keys();
        let cmds = (0..keys.partitions())
            .map(|p| {
                let mut cmd = redis::cmd("HMGET");
                cmd.arg(keys.committed(p))
                    .arg(committed::WAL)
                    .arg(committed::DECISIONS);
                cmd
            })
            .collect();
        let published: Vec<(Option<String>, Option<String>)> = self.store.fan_out(cmds).await?;
        let below = |end: &Option<String>, at: &Option<String>| match end {
            None => false,
            Some(end) => at.as_deref().and_then(parse_stream_id) < parse_stream_id(end),
        };
        Ok(published
            .iter()
            .zip(ends)
            .enumerate()
            .filter(|(_, ((wal, dec), end))| below(&end.wal, wal) || below(&end.decisions, dec))
            .map(|(p, _)| p as u32)
            .collect())
    }

    /// The error for the partitions left undrained: each with its lease holder.
    async fn not_drained(&self, undrained: &[u32], waited: Duration) -> Error {
        let keys = self.store.keys();
        let cmds = undrained
            .iter()
            .map(|&p| {
                let mut cmd = redis::cmd("GET");
                cmd.arg(keys.lease(p));
                cmd
            })
            .collect();
        let holders: Vec<Option<String>> = self.store.fan_out(cmds).await.unwrap_or_default();
        let named: Vec<String> = undrained
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let holder = holders.get(i).cloned().flatten();
                match holder.as_deref().and_then(|v| v.split_once(' ')) {
                    Some((owner, _)) => format!("{p} (held by {owner})"),
                    None => format!("{p} (no holder)"),
                }
            })
            .collect();
        Error::NotDrained(format!(
            "spill --once could not drain partitions {} within {:.1} s: their entries are still in Redis only — the holders are live daemons that are not committing (check their logs and their durable tier), or run `agentstate spill --once` again once they stop",
            named.join(", "),
            waited.as_secs_f64()
        ))
    }
}
