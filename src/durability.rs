//! Durable writes: a [`Durability::Durable`] call returns only once the durable tier committed
//! it. The spill daemon publishes, per partition, the last stream id it committed in
//! `<prefix>:{p}:committed` ([`crate::records::committed`]) and then rings
//! `<prefix>:{p}:commit_bell`, a one-entry stream a durable caller blocks on (`XREAD BLOCK`),
//! so it learns of the commit at once and needs no access to the durable tier. (On a
//! cluster, whose connection every caller shares, or for a Redis user that may not run
//! `XREAD`, it polls instead: 1 ms doubling to 20 ms.)

use std::time::{Duration, Instant};

use crate::backoff::Backoff;
pub use crate::config::Durability;
use crate::error::{Error, Result};
use crate::records::{parse_stream_id, Entry, Stream};
use crate::store::Store;

/// Longest a durable caller blocks on the commit bell before it checks again that its entry
/// is still in its stream: a Redis that lost its data does not ring the bell, and a rebuilt
/// stream committed past the entry must not read as its commit.
const CHECK_EVERY: Duration = Duration::from_millis(20);

impl Store {
    /// Waits, for a `Durable` store, until the daemon committed `wal_id` of partition `p`'s wal.
    pub(crate) async fn settle(&self, p: u32, wal_id: &str) -> Result<()> {
        self.settle_stream(p, Stream::Wal, wal_id).await
    }

    /// Waits, for a `Durable` store, until the daemon committed entry `id` of `stream` of
    /// partition `p`. Each check reads the committed id, whether the entry is still in its
    /// stream and the commit bell's last entry (one pipeline, one slot); then the caller blocks
    /// on the bell until the daemon's next commit on `p`, checking again at least every
    /// [`CHECK_EVERY`]. The daemon trims only below what it committed, so an entry that is
    /// gone while the committed id is still below it was lost with Redis' data
    /// ([`Error::WriteLost`]), not merely slow ([`Error::DurabilityTimeout`]). (Were the
    /// stream rebuilt and committed past `id` within one [`CHECK_EVERY`], the write would
    /// read as committed: the one case this cannot tell.)
    pub(crate) async fn settle_stream(&self, p: u32, stream: Stream, id: &str) -> Result<()> {
        if self.durability() == Durability::Live {
            return Ok(());
        }
        let wanted = parse_stream_id(id)
            .ok_or_else(|| Error::redis(format!("unexpected stream id {id:?}")))?;
        let keys = self.keys();
        let stream_key = match stream {
            Stream::Wal => keys.wal(p),
            Stream::Decisions => keys.decisions(p),
        };
        let bell = keys.commit_bell(p);
        let mut check = redis::pipe();
        check
            .cmd("HGET")
            .arg(keys.committed(p))
            .arg(stream.committed_field())
            .cmd("XRANGE")
            .arg(&stream_key)
            .arg(id)
            .arg(id)
            .cmd("XREVRANGE")
            .arg(&bell)
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(1);
        let wait = self.config().durable_wait;
        let deadline = Instant::now() + wait;
        // A block shorter than the connection's response timeout, which would cut it.
        let slice = CHECK_EVERY.min(self.config().response_timeout / 2);
        // On a cluster a blocking read would hold up the connection every caller shares.
        let mut polling = self.is_cluster();
        let mut poll = Backoff::new(wait);
        let mut conn = self.conn().await?;
        loop {
            let (committed, entry, rung): (Option<String>, Vec<redis::Value>, Vec<Entry>) =
                check.query_async(&mut conn).await?;
            if committed.as_deref().and_then(parse_stream_id) >= Some(wanted) {
                return Ok(());
            }
            if entry.is_empty() {
                return Err(Error::WriteLost(format!("entry {id} of {stream_key}")));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::DurabilityTimeout(wait));
            }
            if polling {
                poll.pause().await;
                continue;
            }
            let after = rung.first().map_or("0-0", |(bell_id, _)| bell_id.as_str());
            let woken: redis::RedisResult<redis::Value> = redis::cmd("XREAD")
                .arg("BLOCK")
                .arg(left.min(slice).as_millis().max(1) as u64)
                .arg("STREAMS")
                .arg(&bell)
                .arg(after)
                .query_async(&mut conn)
                .await;
            match woken {
                // An ACL from before the commit bell (docs/security.md grants +xread).
                Err(e) if e.code() == Some("NOPERM") => polling = true,
                other => {
                    other?;
                }
            }
        }
    }
}
