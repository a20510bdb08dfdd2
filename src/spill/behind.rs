//! The write-behind window: how long an acknowledged write waits for the durable tier, from
//! its wal entry's id (the Redis clock when the write was acknowledged) to the publication of
//! the commit that holds it (the same clock). It is what an acknowledged write can lose when
//! Redis loses its data. The daemon records it per committed wal entry into fixed buckets,
//! exports it as a Prometheus histogram and publishes each partition's last window's buckets
//! in `<prefix>:{p}:spill` (field `behind`), which `agentstate stats` reads.

use serde::Serialize;

/// Upper bounds of the buckets, ms (the Prometheus histogram's); a last bucket holds
/// everything above.
pub const BOUNDS_MS: &[u64] = super::metrics::WRITE_BEHIND_BOUNDS_MS;

/// Entries counted per bucket ([`BOUNDS_MS`], then one for above the last bound).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Histogram {
    /// Count per bucket, `BOUNDS_MS.len() + 1` of them.
    pub counts: Vec<u64>,
}

impl Histogram {
    /// Counts one window of `ms`.
    pub fn add(&mut self, ms: u64) {
        if self.counts.is_empty() {
            self.counts = vec![0; BOUNDS_MS.len() + 1];
        }
        let bucket = BOUNDS_MS.partition_point(|&b| b < ms);
        self.counts[bucket] += 1;
    }

    /// Entries counted.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Adds `other`'s counts (partitions into one namespace figure).
    pub fn merge(&mut self, other: &Histogram) {
        if self.counts.is_empty() {
            self.counts = vec![0; BOUNDS_MS.len() + 1];
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
    }

    /// The bucket bound at or below which `q` (0..=1) of the entries fell, ms; `None` when
    /// empty or when the quantile lies above the last bound.
    pub fn quantile_ms(&self, q: f64) -> Option<u64> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let rank = ((q * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return BOUNDS_MS.get(i).copied();
            }
        }
        None
    }

    /// The `behind` field's text: the counts, comma-separated.
    pub fn to_field(&self) -> String {
        self.counts
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Parses the `behind` field; `None` when it is not one count per bucket.
    pub fn from_field(text: &str) -> Option<Histogram> {
        let counts = text
            .split(',')
            .map(|c| c.parse().ok())
            .collect::<Option<Vec<u64>>>()?;
        (counts.len() == BOUNDS_MS.len() + 1).then_some(Histogram { counts })
    }
}

/// Records into `window` and the Prometheus histogram the windows of the wal entries
/// acknowledged at `acked` (ms, their ids' Redis clock) whose commit was published at
/// `published_at` (ms, the same clock).
pub(crate) fn record(window: &mut Histogram, published_at: u64, acked: &[u64]) {
    for &ms in acked {
        let behind = published_at.saturating_sub(ms);
        window.add(behind);
        super::metrics::write_behind(behind);
    }
}

#[cfg(test)]
mod tests {
    use super::Histogram;

    #[test]
    fn quantiles_are_bucket_bounds() {
        let mut h = Histogram::default();
        for ms in [0, 1, 1, 2, 3, 4, 9, 30, 700, 9000] {
            h.add(ms);
        }
        assert_eq!(h.total(), 10);
        assert_eq!(h.quantile_ms(0.5), Some(5));
        assert_eq!(h.quantile_ms(0.3), Some(1));
        assert_eq!(h.quantile_ms(0.99), None);
        assert_eq!(Histogram::from_field(&h.to_field()), Some(h));
        assert_eq!(Histogram::from_field("1,2"), None);
    }
}
