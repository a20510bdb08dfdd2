//! Durable writes: a [`Durability::Durable`] call returns only once the durable tier committed
//! it. The spill daemon publishes, per partition, the last stream id it committed in
//! `<prefix>:{p}:committed` ([`crate::records::committed`]) and then rings
//! `<prefix>:{p}:commit_bell`, a one-entry stream a durable caller blocks on (`XREAD BLOCK`)
//! whose entry names the ids just committed, so the caller learns of its commit from the wake
//! itself and needs no access to the durable tier. (On a
//! cluster, whose connection every caller shares, or for a Redis user that may not run
//! `XREAD`, it polls instead: 1 ms doubling to 20 ms.)

use std::time::{Duration, Instant};

use redis::streams::StreamReadReply;

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
    /// partition `p`. The caller first blocks on the commit bell from just below `id`'s
    /// millisecond: the commit that covers the entry rings it later, and the bell's entry
    /// names the ids that commit published, so the usual durable write costs this one read.
    /// A wake that does not cover the entry, or none within [`CHECK_EVERY`], leads to a check
    /// (the committed id, whether the entry is still in its stream and the bell's last entry,
    /// one pipeline) and another block from that bell. The daemon trims only below what it
    /// committed, so an entry that is gone while the committed id is still below it was lost
    /// with Redis' data ([`Error::WriteLost`]), not merely slow
    /// ([`Error::DurabilityTimeout`]). (Were the stream rebuilt and committed past `id`
    /// before a check, the write would read as committed: the one case this cannot tell.)
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
        let field = stream.committed_field();
        let covers = |committed: Option<&str>| committed.and_then(parse_stream_id) >= Some(wanted);
        let bell = keys.commit_bell(p);
        let mut check = redis::pipe();
        check
            .cmd("HGET")
            .arg(keys.committed(p))
            .arg(field)
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
        // Bell ids come from the clock that stamped the entry, so a ring after the entry's
        // write has an id past this one (an earlier ring in the same millisecond wakes the
        // caller for nothing: it checks and blocks again).
        let mut block_after =
            (!polling).then(|| format!("{}-{}", wanted.0.saturating_sub(1), u64::MAX));
        loop {
            if let Some(after) = block_after.take() {
                let left = deadline.saturating_duration_since(Instant::now());
                let woken: redis::RedisResult<Option<StreamReadReply>> = redis::cmd("XREAD")
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
                    Err(e) => return Err(e.into()),
                    Ok(reply) => {
                        let rung = reply.iter().flat_map(|r| &r.keys).flat_map(|k| &k.ids);
                        if rung
                            .filter_map(|e| e.get::<String>(field))
                            .any(|c| covers(Some(&c)))
                        {
                            return Ok(());
                        }
                    }
                }
            }
            let (committed, entry, rung): (Option<String>, Vec<redis::Value>, Vec<Entry>) =
                check.query_async(&mut conn).await?;
            if covers(committed.as_deref()) {
                return Ok(());
            }
            if entry.is_empty() {
                return Err(Error::WriteLost(format!("entry {id} of {stream_key}")));
            }
            if deadline <= Instant::now() {
                return Err(Error::DurabilityTimeout(wait));
            }
            if polling {
                poll.pause().await;
                continue;
            }
            block_after = Some(
                rung.first()
                    .map_or("0-0", |(bell_id, _)| bell_id.as_str())
                    .to_owned(),
            );
        }
    }
}
