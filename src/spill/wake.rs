//! The daemon's wait between passes. On a single Redis node it is one `XREAD BLOCK` over the
//! wal, decisions and restore-bell streams of the partitions it owns, each from what it has
//! seen (its committed cursors): the read returns at once while anything waits, and otherwise
//! at the first write or restore request, so a write is committed as soon as it is
//! acknowledged and an idle daemon sleeps inside Redis. It blocks on a connection of its own
//! (one per daemon), so the pool's calls never queue behind it.
//!
//! A cluster cannot serve one read over several slots (CROSSSLOT), and a blocking read per
//! partition would take a connection each; there the wait is a 50 ms pause, as before.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::streams::StreamReadReply;

use super::SpillDaemon;
use crate::error::Result;

/// The pause that stands for the wait on a cluster, or for a Redis user that may not run
/// `XREAD`.
const CLUSTER_POLL: Duration = Duration::from_millis(50);

/// The blocking connection, kept between waits and dropped after an error.
#[derive(Default)]
pub(super) struct Waker {
    /// The connection `XREAD BLOCK` runs on; `None` until the first wait or after an error.
    conn: Option<MultiplexedConnection>,
    /// Redis refused `XREAD` to this user (an ACL from before the wake): the daemon polls.
    refused: bool,
}

impl SpillDaemon {
    /// Waits at most `max` for work in the partitions this daemon owns: returns those with
    /// entries past their cursors or a restore request not seen yet, or none when `max`
    /// passed. Partitions whose last pass failed are left to the next full pass, so an entry
    /// the durable tier rejects is not retried in a loop.
    pub(super) async fn wait_for_work(&mut self, max: Duration) -> Result<Vec<u32>> {
        let watched: Vec<u32> = (0..self.parts.len() as u32)
            .filter(|&p| {
                let part = &self.parts[p as usize];
                part.token > 0 && !part.failed
            })
            .collect();
        if self.store.is_cluster() || self.waker.refused {
            tokio::time::sleep(max.min(CLUSTER_POLL)).await;
            // Nothing rings here: every pass looks for restore requests, as it always did.
            for &p in &watched {
                self.parts[p as usize].restore_due = true;
            }
            return Ok(watched);
        }
        if watched.is_empty() {
            tokio::time::sleep(max).await;
            return Ok(Vec::new());
        }
        let keys = self.store.keys();
        let mut read = redis::cmd("XREAD");
        read.arg("COUNT")
            .arg(1)
            .arg("BLOCK")
            .arg(max.as_millis().max(1) as u64)
            .arg("STREAMS");
        // Each stream's key with its partition and whether it is the restore bell, in the
        // order the read names them: the reply is matched against these.
        let streams: Vec<(String, u32, bool)> = watched
            .iter()
            .flat_map(|&p| {
                [
                    (keys.wal(p), p, false),
                    (keys.decisions(p), p, false),
                    (keys.restore_bell(p), p, true),
                ]
            })
            .collect();
        for (key, ..) in &streams {
            read.arg(key);
        }
        for &p in &watched {
            let part = &self.parts[p as usize];
            let rung = if part.rung.is_empty() {
                "0-0"
            } else {
                &part.rung
            };
            read.arg(&part.wal).arg(&part.decisions).arg(rung);
        }
        let mut conn = match self.waker.conn.take() {
            Some(conn) => conn,
            None => {
                // Its response timeout covers the longest block.
                let timeout = self.pass_every() + self.store.config().response_timeout;
                self.store
                    .dedicated_connection(&keys.wal(0), timeout)
                    .await?
            }
        };
        let reply: Option<StreamReadReply> = match read.query_async(&mut conn).await {
            Err(e) if e.code() == Some("NOPERM") => {
                tracing::warn!(
                    error = %e,
                    "the Redis user may not run XREAD: the daemon polls its partitions every 50 ms instead of waking on each write; grant +xread (the ACL line in docs/security.md)"
                );
                self.waker.refused = true;
                return Ok(Vec::new());
            }
            other => other?,
        };
        self.waker.conn = Some(conn);
        let mut woken = Vec::new();
        for stream in reply.map(|r| r.keys).unwrap_or_default() {
            let Some(&(_, p, bell)) = streams.iter().find(|(key, ..)| *key == stream.key) else {
                continue;
            };
            if bell {
                let part = &mut self.parts[p as usize];
                part.restore_due = true;
                if let Some(last) = stream.ids.last() {
                    part.rung = last.id.clone();
                }
            }
            if !woken.contains(&p) {
                woken.push(p);
            }
        }
        Ok(woken)
    }

    /// The longest time between two full passes (leases renewed, shares rebalanced, free
    /// partitions claimed): the configured interval, at most a third of the lease time.
    pub(super) fn pass_every(&self) -> Duration {
        self.config.interval.min(self.config.lease_ttl / 3)
    }
}
