//! Durable writes: a [`Durability::Durable`] call returns only once SQLite committed it. The
//! spill daemon publishes, per partition, the last stream id it committed in
//! `<prefix>:{p}:committed` ([`crate::records::committed`]); a durable caller polls that hash,
//! so it needs no SQLite access.

use crate::backoff::Backoff;
pub use crate::config::Durability;
use crate::error::{Error, Result};
use crate::records::{parse_stream_id, Stream};
use crate::store::Store;

impl Store {
    /// Waits, for a `Durable` store, until the daemon committed `wal_id` of partition `p`'s wal.
    pub(crate) async fn settle(&self, p: u32, wal_id: &str) -> Result<()> {
        self.settle_stream(p, Stream::Wal, wal_id).await
    }

    /// Waits, for a `Durable` store, until the daemon committed entry `id` of `stream` of
    /// partition `p`. Each poll reads the committed id and whether the entry is still in
    /// its stream (one pipeline, one slot): the daemon trims only below what it committed,
    /// so an entry that is gone while the committed id is still below it was lost with
    /// Redis' data ([`Error::WriteLost`]), not merely slow ([`Error::DurabilityTimeout`]).
    /// (Were the stream rebuilt and committed past `id` between two polls, 20 ms at most
    /// apart, the write would read as committed: the one case this cannot tell.)
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
        let mut poll = redis::pipe();
        poll.cmd("HGET")
            .arg(keys.committed(p))
            .arg(stream.committed_field())
            .cmd("XRANGE")
            .arg(&stream_key)
            .arg(id)
            .arg(id);
        let wait = self.config().durable_wait;
        let mut backoff = Backoff::new(wait);
        let mut conn = self.conn().await?;
        loop {
            let (committed, entry): (Option<String>, Vec<redis::Value>) =
                poll.query_async(&mut conn).await?;
            if committed.as_deref().and_then(parse_stream_id) >= Some(wanted) {
                return Ok(());
            }
            if entry.is_empty() {
                return Err(Error::WriteLost(format!("entry {id} of {stream_key}")));
            }
            if !backoff.pause().await {
                return Err(Error::DurabilityTimeout(wait));
            }
        }
    }
}
