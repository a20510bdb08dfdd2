//! Durable writes: a [`Durability::Durable`] call returns only once the durable tier committed
//! it. The spill daemon publishes, per partition, the last stream id it committed in
//! `<prefix>:{p}:committed` ([`crate::records::committed`]) and then rings
//! `<prefix>:{p}:commit_bell`, a one-entry stream a durable caller blocks on (`XREAD BLOCK`)
//! whose entry names the ids just committed, so the caller learns of its commit from the wake
//! itself and needs no access to the durable tier. (On a
//! cluster, whose connection every caller shares, or for a Redis user that may not run
//! `XREAD`, it polls instead: 1 ms doubling to 20 ms.)
//!
//! A write that does not wait ([`Durability::Live`]) is durable only once a daemon runs. So
//! a store that writes looks for a live daemon heartbeat (`<prefix>:daemons`) on its first
//! write (awaited, one round trip) and then at most every [`DAEMONS_CHECK_EVERY`] in the
//! background, and when there is none the process says so once: a `tracing` warning, and
//! [`take_durability_warning`] for a front end that shows it its own way (Python logs it).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
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

/// How often a store that writes looks again for a running spill daemon.
const DAEMONS_CHECK_EVERY: Duration = Duration::from_secs(30);

/// Set once this process has said that no spill daemon runs: it says so once.
static NO_DAEMON_SAID: AtomicBool = AtomicBool::new(false);

/// That warning's text. (A `OnceLock` and a flag, not a mutex: a process that forks while a
/// runtime thread held a lock would leave the child's callers blocked on it for good.)
static WARNING: OnceLock<String> = OnceLock::new();

/// Set once a front end took [`WARNING`].
static SHOWN: AtomicBool = AtomicBool::new(false);

/// The "no spill daemon runs, writes are not durable" warning, once per process, for a front
/// end that shows it its own way (the Python binding logs it); `None` when there is nothing
/// new to say.
pub fn take_durability_warning() -> Option<String> {
    let warning = WARNING.get()?;
    (!SHOWN.swap(true, Ordering::Relaxed)).then(|| warning.clone())
}

/// The instant a store's last look for a running daemon counts from.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

impl Store {
    /// Waits, for a `Durable` store, until the daemon committed `wal_id` of partition `p`'s wal.
    pub(crate) async fn settle(&self, p: u32, wal_id: &str) -> Result<()> {
        self.settle_stream(p, Stream::Wal, wal_id).await
    }

    /// Waits, for a `Durable` store, after a repeat (an idempotency key seen before: nothing
    /// written, no entry to wait for) until the daemon committed everything partition `p`'s
    /// wal holds now in this Redis history: the original write is among it, or came back
    /// from the durable tier. An earlier attempt's wait may have failed (a failover, a
    /// timeout), so the repeat is what tells the caller it is durable.
    pub(crate) async fn settle_repeat(&self, p: u32) -> Result<()> {
        if self.durability() == Durability::Live {
            return Ok(());
        }
        let keys = self.keys();
        let mut conn = self.conn().await?;
        let (last, history): (Vec<Entry>, Option<String>) = redis::pipe()
            .cmd("XREVRANGE")
            .arg(keys.wal(p))
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(1)
            .cmd("HGET")
            .arg(keys.committed(p))
            .arg("history")
            .query_async(&mut conn)
            .await?;
        match (last.first(), history) {
            (Some((id, _)), Some(history)) => self.settle(p, &format!("{id}/{history}")).await,
            (Some((id, _)), None) => self.settle(p, id).await,
            // Trimmed to nothing: everything it held was committed.
            (None, _) => Ok(()),
        }
    }

    /// Waits, for a `Durable` store, until the daemon committed entry `id` of `stream` of
    /// partition `p`. The caller first blocks on the commit bell from just below `id`'s
    /// millisecond: the commit that covers the entry rings it later, and the bell's entry
    /// names the ids that commit published, so the usual durable write costs this one read.
    /// A wake that does not cover the entry (another commit of the partition) blocks again
    /// from that ring. At least every [`CHECK_EVERY`] the caller checks instead (the committed
    /// id, whether the entry is still in its stream and the bell's last entry, one pipeline)
    /// and blocks again from that bell. The daemon trims only below what it
    /// committed, so an entry that is gone while the committed id is still below it was lost
    /// with Redis' data ([`Error::WriteLost`]), not merely slow
    /// ([`Error::DurabilityTimeout`]). An id of the form `<id>/<replication id prefix>` (a message's,
    /// `tracked_id` in `lua/_prelude.lua`) names the Redis history it was written in, and a
    /// commit counts only when published in that history: after a failover a new master can
    /// hand out the same id to another write. A history that changed while the caller
    /// waited leaves the write's fate unknown ([`Error::RedisUnavailable`], may have been
    /// applied: repeat it with its idempotency key).
    pub(crate) async fn settle_stream(&self, p: u32, stream: Stream, id: &str) -> Result<()> {
        if self.durability() == Durability::Live {
            self.look_for_daemons().await;
            return Ok(());
        }
        let (id, history) = match id.split_once('/') {
            Some((id, history)) => (id, Some(history)),
            None => (id, None),
        };
        // The id carries the first digits of its history's replication id.
        let in_history = |published: Option<&str>| match history {
            None => true,
            Some(h) => published.is_some_and(|p| p.starts_with(h)),
        };
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
            .arg(1)
            .cmd("HGET")
            .arg(keys.committed(p))
            .arg("history");
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
        // The last time the entry was known to be in its stream: the write put it there.
        let mut checked = Instant::now();
        loop {
            if let Some(after) = block_after.take() {
                let left = deadline.saturating_duration_since(Instant::now());
                let until_check = slice.saturating_sub(checked.elapsed());
                let woken: redis::RedisResult<Option<StreamReadReply>> = redis::cmd("XREAD")
                    .arg("BLOCK")
                    .arg(left.min(until_check).as_millis().max(1) as u64)
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
                        let rung: Vec<_> = reply
                            .iter()
                            .flat_map(|r| &r.keys)
                            .flat_map(|k| &k.ids)
                            .collect();
                        if rung.iter().any(|e| {
                            covers(e.get::<String>(field).as_deref())
                                && in_history(e.get::<String>("history").as_deref())
                        }) {
                            return Ok(());
                        }
                        // The commit that covers the entry rings after this ring: wait for
                        // it while no check is due.
                        if let Some(last) = rung.last() {
                            if checked.elapsed() < slice && Instant::now() < deadline {
                                block_after = Some(last.id.clone());
                                continue;
                            }
                        }
                    }
                }
            }
            let (committed, entry, rung, published): (
                Option<String>,
                Vec<redis::Value>,
                Vec<Entry>,
                Option<String>,
            ) = check.query_async(&mut conn).await?;
            checked = Instant::now();
            let same = in_history(published.as_deref());
            if same && covers(committed.as_deref()) {
                return Ok(());
            }
            if entry.is_empty() && !covers(committed.as_deref()) {
                return Err(Error::WriteLost(format!("entry {id} of {stream_key}")));
            }
            if !same {
                return Err(Error::RedisUnavailable {
                    message: format!("Redis failed over while the durable write of entry {id} of {stream_key} waited for its commit"),
                    retry_safe: false,
                    source: None,
                });
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

    /// Looks for a live spill daemon heartbeat on this store's first write (awaited, so even
    /// a one-write process hears it) and then at most every [`DAEMONS_CHECK_EVERY`] (in the
    /// background); when none is live, says once per process that writes are not durable.
    async fn look_for_daemons(&self) {
        if NO_DAEMON_SAID.load(Ordering::Relaxed) {
            return;
        }
        let checked = self.daemons_checked();
        let last = checked.load(Ordering::Relaxed);
        let now = epoch().elapsed().as_millis() as u64 + 1;
        if last != 0 && now - last < DAEMONS_CHECK_EVERY.as_millis() as u64 {
            return;
        }
        if checked
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return; // another write of this store is looking
        }
        let store = self.clone();
        let look = async move {
            if let Ok(false) = store.daemon_alive().await {
                say_no_daemon(store.keys().prefix());
            }
        };
        if last == 0 {
            look.await;
        } else {
            tokio::spawn(look);
        }
    }
}

/// Says (once per process) that no spill daemon of namespace `prefix` runs.
fn say_no_daemon(prefix: &str) {
    if NO_DAEMON_SAID.swap(true, Ordering::Relaxed) {
        return;
    }
    let warning = format!(
        "no spill daemon of namespace {prefix:?} is running: writes stay in Redis only (not durable) until one runs; start one with `agentstate --prefix {prefix} spill` (or a SpillDaemon)"
    );
    tracing::warn!("{warning}");
    let _ = WARNING.set(warning);
}
