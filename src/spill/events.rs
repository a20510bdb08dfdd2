//! What happened to partitions during one pass, logged as one line per kind when the pass
//! ends: a Redis loss touches every partition, and an operator wants one line saying
//! "partitions 0-15", not sixteen. A failure that repeats pass after pass is logged once.

use crate::error::Error;

/// The partitions each kind of event touched in the current pass, with their counts.
#[derive(Debug, Default)]
pub(crate) struct PassEvents {
    /// Partitions whose lease this daemon took (new token).
    took: Vec<u32>,
    /// Partitions whose lease this daemon lost (another owner, or Redis lost its state).
    lost: Vec<u32>,
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
        if !taken.lost.is_empty() {
            tracing::warn!(
                partitions = %ranges(&taken.lost),
                "lost the partition leases (another owner, or Redis lost its state)"
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
