//! What happened to partitions during one pass, logged as one line per kind when the pass
//! ends: a Redis loss touches every partition, and an operator wants one line saying
//! "partitions 0-15", not sixteen. A failure that repeats pass after pass is logged once.
//! Giving partitions up to a daemon that joined is routine (info); losing a lease is a
//! warning that says why when Redis can tell (`SpillDaemon::explain_lost`).

use std::collections::BTreeSet;

use super::SpillDaemon;
use crate::error::Error;

/// Why this daemon lost the leases of some partitions, as Redis shows it after the pass.
#[derive(Debug, Default)]
struct LostBy {
    /// The lease key and `<prefix>:{p}:committed` are both gone: Redis lost its state.
    redis_loss: Vec<u32>,
    /// Another daemon holds the lease now, and who.
    other_owner: (Vec<u32>, BTreeSet<String>),
    /// Nobody holds the lease and the committed ids are there: it lapsed (this daemon was
    /// paused or cut off from Redis longer than the lease time).
    lapsed: Vec<u32>,
    /// Anything else (this daemon's own name on the lease, with a newer token elsewhere).
    unclear: Vec<u32>,
}

/// The partitions each kind of event touched in the current pass, with their counts.
#[derive(Debug, Default)]
pub(crate) struct PassEvents {
    /// Partitions whose lease this daemon took (new token).
    took: Vec<u32>,
    /// Partitions whose lease this daemon lost (another owner, or Redis lost its state).
    lost: Vec<u32>,
    /// Why, when the pass could ask Redis (else the warning names both causes).
    lost_by: Option<LostBy>,
    /// Partitions this daemon released to rebalance, and how many daemons share them now.
    released: (Vec<u32>, u32),
    /// Partitions whose streams were lost with Redis (read again from the start).
    rebased: Vec<u32>,
    /// Partitions whose session indexes and open decisions were re-seeded, with the counts.
    reseeded_indexes: (Vec<u32>, usize, usize),
    /// Partitions whose user values and rounds were re-seeded, with the counts.
    reseeded_users: (Vec<u32>, u64, u64),
    /// Partitions whose pass failed, with the error.
    failed: Vec<(u32, String)>,
    /// The failure line logged last, so a failure repeating every pass is logged once.
    last_failure: Option<String>,
    /// Takes are logged at debug level only (the daemon's start line names them).
    quiet_takes: bool,
}

impl PassEvents {
    /// Whether this pass' takes go to the debug level only.
    pub(crate) fn quiet_takes(&mut self, quiet: bool) {
        self.quiet_takes = quiet;
    }
    pub(crate) fn took(&mut self, p: u32) {
        self.took.push(p);
    }
    pub(crate) fn lost(&mut self, p: u32) {
        self.lost.push(p);
    }
    pub(crate) fn released(&mut self, p: u32, members: u32) {
        self.released.0.push(p);
        self.released.1 = members;
    }
    pub(crate) fn rebased(&mut self, p: u32) {
        self.rebased.push(p);
    }
    pub(crate) fn reseeded_indexes(&mut self, p: u32, sessions: usize, open_decisions: usize) {
        let r = &mut self.reseeded_indexes;
        r.0.push(p);
        r.1 += sessions;
        r.2 += open_decisions;
    }
    pub(crate) fn reseeded_users(&mut self, p: u32, values: u64, rounds: u64) {
        let r = &mut self.reseeded_users;
        r.0.push(p);
        r.1 += values;
        r.2 += rounds;
    }
    pub(crate) fn failed(&mut self, p: u32, err: &Error) {
        self.failed.push((p, err.to_string()));
    }

    /// Logs one line per kind of event of the pass, then starts over. `completed`: the pass
    /// as a whole worked, so its partition failures (or their absence) are news; when it
    /// failed, the caller logs that once instead.
    pub(crate) fn emit(&mut self, completed: bool) {
        let taken = std::mem::take(self);
        self.last_failure = taken.last_failure.clone();
        self.quiet_takes = taken.quiet_takes;
        match &taken.lost_by {
            _ if taken.lost.is_empty() => {}
            None => tracing::warn!(
                partitions = %ranges(&taken.lost),
                "lost the partition leases (another owner, or Redis lost its state)"
            ),
            Some(by) => {
                if !by.unclear.is_empty() {
                    tracing::warn!(
                        partitions = %ranges(&by.unclear),
                        "lost the partition leases (another owner, or Redis lost its state)"
                    );
                }
                if !by.redis_loss.is_empty() {
                    tracing::warn!(
                        partitions = %ranges(&by.redis_loss),
                        "lost the partition leases: Redis lost its state (the leases and committed ids are gone)"
                    );
                }
                let (ps, owners) = &by.other_owner;
                if !ps.is_empty() {
                    tracing::warn!(
                        partitions = %ranges(ps),
                        owners = %owners.iter().cloned().collect::<Vec<_>>().join(","),
                        "lost the partition leases to another daemon"
                    );
                }
                if !by.lapsed.is_empty() {
                    tracing::warn!(
                        partitions = %ranges(&by.lapsed),
                        "lost the partition leases: they lapsed (this daemon was paused or cut off from Redis longer than the lease time)"
                    );
                }
            }
        }
        let (ps, members) = &taken.released;
        if !ps.is_empty() {
            tracing::info!(
                partitions = %ranges(ps),
                daemons = members,
                "released the partition leases to rebalance: another daemon shares them now"
            );
        }
        if !taken.rebased.is_empty() {
            tracing::warn!(
                partitions = %ranges(&taken.rebased),
                "streams were lost with Redis; reading them from the start"
            );
        }
        if !taken.took.is_empty() {
            if taken.quiet_takes {
                tracing::debug!(partitions = %ranges(&taken.took), "took the partition leases");
            } else {
                tracing::info!(partitions = %ranges(&taken.took), "took the partition leases");
            }
        }
        // Re-seeds that found nothing to put back (a first run) are not news.
        let (ps, sessions, open) = &taken.reseeded_indexes;
        if !ps.is_empty() && sessions + open > 0 {
            tracing::info!(
                partitions = %ranges(ps),
                sessions,
                open_decisions = open,
                "re-seeded the session indexes and open decisions from SQLite"
            );
        }
        let (ps, values, rounds) = &taken.reseeded_users;
        if !ps.is_empty() && values + rounds > 0 {
            tracing::info!(
                partitions = %ranges(ps),
                values,
                rounds,
                "re-seeded user data from SQLite"
            );
        }
        if !completed {
            return;
        }
        if taken.failed.is_empty() {
            if self.last_failure.take().is_some() {
                tracing::info!("every partition passes again");
            }
            return;
        }
        let ps: Vec<u32> = taken.failed.iter().map(|(p, _)| *p).collect();
        let line = format!("{}: {}", ranges(&ps), taken.failed[0].1);
        if self.last_failure.as_deref() != Some(&line) {
            tracing::error!(
                partitions = %ranges(&ps),
                error = %taken.failed[0].1,
                "partition pass failed; the others go on"
            );
            self.last_failure = Some(line);
        }
    }
}

impl SpillDaemon {
    /// Gives partition `p` up to rebalance among `members` daemons (its lease was released).
    /// A lease not renewed within the lease time had lapsed before (this daemon was paused
    /// or cut off): that is a loss, whoever holds the partition now.
    pub(super) fn released_lease(&mut self, p: u32, members: u32) {
        let part = &self.parts[p as usize];
        if part.token > 0 {
            if part
                .renewed
                .is_some_and(|t| t.elapsed() < self.config.lease_ttl)
            {
                self.events.released(p, members);
                super::metrics::lease_changed(super::metrics::LeaseChange::Released);
                self.parts[p as usize].token = 0;
            } else {
                self.lost_lease(p);
            }
        }
    }

    /// Asks Redis why this pass' lost leases were lost, for the warning: the lease held by
    /// another daemon, or gone with the committed ids (Redis lost its state), or gone alone
    /// (it lapsed). A failed read leaves the warning naming both causes.
    pub(super) async fn explain_lost(&mut self) {
        let lost = self.events.lost.clone();
        if lost.is_empty() {
            return;
        }
        let keys = self.store.keys();
        let gets = lost
            .iter()
            .map(|&p| redis::cmd("GET").arg(keys.lease(p)).clone())
            .collect();
        let lens = lost
            .iter()
            .map(|&p| redis::cmd("HLEN").arg(keys.committed(p)).clone())
            .collect();
        let (Ok(holders), Ok(committed)) = (
            self.store.fan_out::<Option<String>>(gets).await,
            self.store.fan_out::<u64>(lens).await,
        ) else {
            return;
        };
        let mut by = LostBy::default();
        for ((p, holder), committed) in lost.into_iter().zip(holders).zip(committed) {
            // The lease's value is `<owner> <token>` (`lease::value`).
            match holder.as_deref().and_then(|h| h.split(' ').next()) {
                Some(owner) if owner != self.owner => {
                    by.other_owner.0.push(p);
                    by.other_owner.1.insert(owner.to_string());
                }
                Some(_) => by.unclear.push(p),
                None if committed == 0 => by.redis_loss.push(p),
                None => by.lapsed.push(p),
            }
        }
        self.events.lost_by = Some(by);
    }
}

/// `0-15`, `1,3,5-7`: sorted partition numbers with runs collapsed.
pub(crate) fn ranges(ps: &[u32]) -> String {
    let mut sorted = ps.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    #[test]
    fn ranges_collapse_runs() {
        assert_eq!(super::ranges(&[3, 1, 2, 0, 7, 9, 10]), "0-3,7,9-10");
        assert_eq!(super::ranges(&[5]), "5");
    }
}
