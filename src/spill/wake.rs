//! The daemon's wait between passes. On a single Redis node it is one `XREAD BLOCK` over the
//! wal, decisions and restore-bell streams of the partitions it owns, each from what it has
//! seen (its committed cursors): the read returns at once while anything waits, and otherwise
//! at the first write or restore request, so a write is committed as soon as it is
//! acknowledged and an idle daemon sleeps inside Redis. The read returns the entries
//! themselves, and the partitions' leases are read in the same pipeline right after it, so
//! the wait is also the batch read of the pass it starts ([`Prefetched`]). It blocks on a
//! connection of its own (one per daemon), so the pool's calls never queue behind it.
//!
//! A cluster cannot serve one read over several slots (CROSSSLOT), and a blocking read per
//! partition would take a connection each; there the wait is a 50 ms pause, as before.

use std::collections::HashMap;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::Value;

use super::flusher::Prefetched;
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
    /// entries past their cursors or a restore request not seen yet (none when `max`
    /// passed), and the batches the wait read of those with entries. Partitions whose last
    /// pass failed are left to the next full pass, so an entry the durable tier rejects is
    /// not retried in a loop.
    pub(super) async fn wait_for_work(
        &mut self,
        max: Duration,
    ) -> Result<(Vec<u32>, HashMap<u32, Prefetched>)> {
        // While the durable tier is down, what is not committed stays so: the full passes
        // (which spool) are the only work, and a wake would return at once.
        let down = self.outage.down_since.is_some();
        let watched: Vec<u32> = (0..self.parts.len() as u32)
            .filter(|&p| {
                let part = &self.parts[p as usize];
                part.token > 0 && !part.failed && !down
            })
            .collect();
        if self.store.is_cluster() || self.waker.refused {
            tokio::time::sleep(max.min(CLUSTER_POLL)).await;
            // Nothing rings here: every pass looks for restore requests, as it always did.
            for &p in &watched {
                self.parts[p as usize].restore_due = true;
            }
            return Ok((watched, HashMap::new()));
        }
        if watched.is_empty() {
            tokio::time::sleep(max).await;
            return Ok(Default::default());
        }
        let keys = self.store.keys();
        // A batch per stream, as the pass's own read takes.
        let mut read = redis::cmd("XREAD");
        read.arg("COUNT")
            .arg(self.config.batch_size)
            .arg("BLOCK")
            .arg(max.as_millis().max(1) as u64)
            .arg("STREAMS");
        // Each stream's key with its partition and which of its streams it is, in the order
        // the read names them: the reply is matched against these.
        let streams: Vec<(String, u32, Kind)> = watched
            .iter()
            .flat_map(|&p| {
                [
                    (keys.wal(p), p, Kind::Wal),
                    (keys.decisions(p), p, Kind::Decisions),
                    (keys.restore_bell(p), p, Kind::RestoreBell),
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
            read.arg(part.floor()).arg(&part.decisions).arg(rung);
        }
        // The leases, read after the entries: a lease still held then was held when the
        // entries were read (a Redis that lost its data lost the lease with them).
        let mut pipe = redis::pipe();
        pipe.add_command(read);
        for &p in &watched {
            pipe.cmd("GET").arg(keys.lease(p));
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
        let mut replies: Vec<Value> = match pipe.query_async(&mut conn).await {
            Err(e) if e.code() == Some("NOPERM") => {
                tracing::warn!(
                    error = %e,
                    "the Redis user may not run XREAD: the daemon polls its partitions every 50 ms instead of waking on each write; grant +xread (the ACL line in docs/security.md)"
                );
                self.waker.refused = true;
                return Ok(Default::default());
            }
            other => other?,
        };
        self.waker.conn = Some(conn);
        let leases = replies.split_off(1);
        let read = replies.pop().unwrap_or(Value::Nil);
        let mut woken = Vec::new();
        // Per woken partition: its wal and decisions entries (XRANGE's reply shape).
        let mut entries: HashMap<u32, [Value; 2]> = HashMap::new();
        let read: Vec<(String, Value)> = redis::from_redis_value(read)
            .map_err(|e| crate::error::Error::redis(format!("a wake read: {e}")))?;
        for (key, ids) in read {
            let Some(&(_, p, kind)) = streams.iter().find(|(k, ..)| *k == key) else {
                continue;
            };
            match kind {
                Kind::RestoreBell => {
                    let part = &mut self.parts[p as usize];
                    part.restore_due = true;
                    let rung: Vec<(String, Value)> = redis::from_redis_value(ids)
                        .map_err(|e| crate::error::Error::redis(format!("a wake read: {e}")))?;
                    if let Some((last, _)) = rung.last() {
                        part.rung = last.clone();
                    }
                }
                Kind::Wal | Kind::Decisions => {
                    let slot = entries
                        .entry(p)
                        .or_insert_with(|| [Value::Array(Vec::new()), Value::Array(Vec::new())]);
                    slot[usize::from(kind == Kind::Decisions)] = ids;
                }
            }
            if !woken.contains(&p) {
                woken.push(p);
            }
        }
        // Each batch with where it was read from (the cursors the read named, unchanged
        // since): it serves the pass only while its partition is still read from there.
        let mut prefetched = HashMap::new();
        for (p, lease) in watched.into_iter().zip(leases) {
            if let Some([wal, decisions]) = entries.remove(&p) {
                let reply = vec![lease, wal, decisions];
                let at = self.read_point(p);
                prefetched.insert(p, Prefetched { reply, at });
            }
        }
        Ok((woken, prefetched))
    }

    /// The longest time between two full passes (leases renewed, shares rebalanced, free
    /// partitions claimed): the configured interval, at most a third of the lease time.
    pub(super) fn pass_every(&self) -> Duration {
        self.config.interval.min(self.config.lease_ttl / 3)
    }
}

/// Which of a partition's streams a wake read names.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Wal,
    Decisions,
    RestoreBell,
}
