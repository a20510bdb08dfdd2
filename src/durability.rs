//! Durability levels: `Live` returns when Redis has a write, `Durable` when SQLite has
//! committed it. The spill daemon publishes, per partition, the last stream id it committed
//! in `<prefix>:{p}:committed` (fields `wal` and `decisions`); a durable caller polls that
//! hash, so it needs no SQLite access.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::store::Store;

/// When a write call returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// As soon as Redis holds the write (and its wal record).
    #[default]
    Live,
    /// Only once the spill daemon has committed the write to SQLite; fails with
    /// [`Error::DurabilityTimeout`] after [`crate::Config::durable_wait`].
    Durable,
}

/// A stream entry id `ms-seq`, ordered as Redis orders them.
pub fn parse_stream_id(id: &str) -> Option<(u64, u64)> {
    let (ms, seq) = id.split_once('-')?;
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

/// Pauses between polls of Redis while waiting for the spill daemon: 1 ms, doubling up to
/// 20 ms, until the wait is over.
pub(crate) struct Backoff {
    /// When the wait is over.
    deadline: Instant,
    /// The next pause.
    pause: Duration,
}

impl Backoff {
    /// A wait of `wait` starting now.
    pub(crate) fn new(wait: Duration) -> Self {
        Backoff {
            deadline: Instant::now() + wait,
            pause: Duration::from_millis(1),
        }
    }

    /// Sleeps before the next poll; `false` (without sleeping) once the wait is over.
    pub(crate) async fn pause(&mut self) -> bool {
        if Instant::now() >= self.deadline {
            return false;
        }
        tokio::time::sleep(self.pause).await;
        self.pause = (self.pause * 2).min(Duration::from_millis(20));
        true
    }
}

impl Store {
    /// Waits, for a `Durable` store, until the daemon committed `wal_id` of partition `p`'s wal.
    pub(crate) async fn settle(&self, p: u32, wal_id: &str) -> Result<()> {
        self.settle_stream(p, "wal", wal_id).await
    }

    /// Waits, for a `Durable` store, until the daemon committed entry `id` of stream `field`
    /// (`wal` or `decisions`) of partition `p`.
    pub(crate) async fn settle_stream(&self, p: u32, field: &str, id: &str) -> Result<()> {
        if self.durability() == Durability::Live {
            return Ok(());
        }
        let wanted = parse_stream_id(id)
            .ok_or_else(|| Error::Redis(format!("unexpected stream id {id:?}")))?;
        let key = self.keys().committed(p);
        let wait = self.config().durable_wait;
        let mut backoff = Backoff::new(wait);
        let mut conn = self.conn().await?;
        loop {
            let committed: Option<String> = redis::cmd("HGET")
                .arg(&key)
                .arg(field)
                .query_async(&mut conn)
                .await?;
            if committed.as_deref().and_then(parse_stream_id) >= Some(wanted) {
                return Ok(());
            }
            if !backoff.pause().await {
                return Err(Error::DurabilityTimeout(wait));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_stream_id;

    #[test]
    fn stream_ids_order_numerically() {
        assert!(parse_stream_id("10-0") > parse_stream_id("9-5"));
        assert!(parse_stream_id("10-10") > parse_stream_id("10-9"));
        assert_eq!(parse_stream_id("junk"), None);
    }
}
