//! Restore, the agent side (needs only Redis): a process that needs a session Redis no
//! longer holds asks for it and waits, bounded by [`crate::Config::restore_wait`]. It
//! pushes the id onto `<prefix>:{p}:restore` and polls for the meta key or the daemon's
//! answer in `<prefix>:{p}:restore:<sid>`. Session scripts reach this through
//! [`Store::invoke_session`] (the one place transparent rehydration happens), plain-key
//! reads through [`Store::read_live`] (and [`Store::read_run`], which also brings back a live
//! session's inbox and ledger that expired). The daemon side (feature `spill`) is `crate::spill::restore`.

use std::time::Duration;

use redis::FromRedisValue;

use super::{Admin, Store};
use crate::backoff::Backoff;
use crate::error::{Error, Result};
use crate::scripts::ScriptCall;

/// How far a caller's clock may be from Redis' before a lapsed daemon heartbeat counts as
/// lapsed.
pub(crate) const DAEMON_CLOCK_SKEW: Duration = Duration::from_secs(30);

/// How long a namespace must show neither a binding nor a daemon heartbeat before a create
/// says that it has no spill daemon yet: a running daemon beats again within a third of its
/// lease (a second by default), also after Redis lost its data.
const NO_DAEMON_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

impl Store {
    /// Runs a session-scoped script; when it fails because the session is not live, asks the
    /// spill daemon to restore the session from SQLite and runs it once more. This is the one
    /// place transparent rehydration happens (scripts check before their first write, so a
    /// `NO_SESSION` failure wrote nothing and the retry is safe).
    pub(crate) async fn invoke_session<T: FromRedisValue>(
        &self,
        sid: &str,
        call: &ScriptCall,
    ) -> Result<T> {
        self.restoring(sid, || self.invoke(call)).await
    }

    /// Runs `attempt` on session `sid`; when it fails because the session is not live, asks
    /// the spill daemon to restore it and runs `attempt` once more (see
    /// [`Store::invoke_session`]).
    pub(crate) async fn restoring<T, Fut>(&self, sid: &str, attempt: impl Fn() -> Fut) -> Result<T>
    where
        Fut: std::future::Future<Output = Result<T>>,
    {
        match self.awaiting_check(&attempt).await {
            Err(err) if err.is_unknown_session() => {
                self.request_restore(sid, Want::Session).await?;
                attempt().await
            }
            Err(Error::RunGone(_)) => {
                self.request_restore(sid, Want::RunKeys).await?;
                attempt().await
            }
            other => other,
        }
    }

    /// Runs `attempt` (a write script) again while it is refused because no spill daemon
    /// has checked its partition in this Redis history against the durable tier
    /// (`NOT_DECIDED`, `unchecked` in `lua/_prelude.lua`: Redis lost its state, failed over
    /// to a replica or restarted), until the daemon has repaired what Redis lacks and opened
    /// the partition. Bounded by `restore_wait`, then the retryable [`Error::NotLive`]. A
    /// refused script wrote nothing, so running it again is safe.
    pub(crate) async fn awaiting_check<T, Fut>(&self, attempt: impl Fn() -> Fut) -> Result<T>
    where
        Fut: std::future::Future<Output = Result<T>>,
    {
        let wait = self.config().restore_wait;
        let mut backoff = None;
        loop {
            match attempt().await {
                Err(Error::NotLive {
                    sid,
                    waited,
                    no_daemon_yet: false,
                }) if waited.is_zero() => {
                    if !backoff
                        .get_or_insert_with(|| Backoff::new(wait))
                        .pause()
                        .await
                    {
                        return Err(Error::NotLive {
                            sid,
                            waited: wait,
                            no_daemon_yet: false,
                        });
                    }
                }
                other => return other,
            }
        }
    }

    /// Runs `read` (a plain command on one of `sid`'s keys) in one round trip with an EXISTS
    /// of the meta key — a plain key cannot tell "no session" from "empty" — and, when the
    /// session is not live, restores it through the daemon and reads again.
    pub(crate) async fn read_live<T: redis::FromRedisValue>(
        &self,
        sid: &str,
        read: &redis::Cmd,
    ) -> Result<T> {
        self.read_restoring(sid, read, false).await
    }

    /// [`Store::read_live`] of a read on `sid`'s inbox or ledger, which also, when those two
    /// expired while the session lived (meta `run_keys` set, neither key there: see
    /// `run_gone` in `lua/_prelude.lua`), has the daemon put them back first.
    pub(crate) async fn read_run<T: redis::FromRedisValue>(
        &self,
        sid: &str,
        read: &redis::Cmd,
    ) -> Result<T> {
        self.read_restoring(sid, read, true).await
    }

    /// The one body of [`Store::read_live`] and (`run`) [`Store::read_run`]: the read in one
    /// pipeline with what tells whether the daemon must restore first, asked at most once.
    async fn read_restoring<T: redis::FromRedisValue>(
        &self,
        sid: &str,
        read: &redis::Cmd,
        run: bool,
    ) -> Result<T> {
        let keys = self.session_keys(sid)?;
        let mut asked = false;
        loop {
            let mut replies: Vec<redis::Value> = self
                .retrying(true, || async {
                    let mut pipe = redis::pipe();
                    pipe.exists(&keys.meta);
                    if run {
                        pipe.hexists(&keys.meta, "run_keys")
                            .exists(&[&keys.inbox, &keys.effects]);
                    }
                    Ok(pipe
                        .add_command(read.clone())
                        .query_async(&mut self.conn().await?)
                        .await?)
                })
                .await?;
            let parse = |v: redis::Value| {
                redis::from_redis_value::<i64>(v).map_err(|e| Error::redis(e.to_string()))
            };
            let value = T::from_redis_value(replies.pop().unwrap_or(redis::Value::Nil))
                .map_err(|e| Error::redis(format!("read reply: {e}")))?;
            let mut flags = replies.into_iter();
            let live = parse(flags.next().unwrap_or(redis::Value::Nil))? == 1;
            let run_gone = run && {
                let marked = parse(flags.next().unwrap_or(redis::Value::Nil))? == 1;
                marked && parse(flags.next().unwrap_or(redis::Value::Nil))? == 0
            };
            let want = match (live, run_gone) {
                _ if asked => return Ok(value),
                (false, _) => Want::Session,
                (true, true) => Want::RunKeys,
                (true, false) => return Ok(value),
            };
            self.request_restore(sid, want).await?;
            asked = true;
        }
    }

    /// [`Store::read_live`] of a read that answers JSON texts (`HVALS`, `LRANGE`), each
    /// parsed as a `T`, in the order Redis gave them.
    pub(crate) async fn read_live_json<T: serde::de::DeserializeOwned>(
        &self,
        sid: &str,
        read: &redis::Cmd,
    ) -> Result<Vec<T>> {
        let items: Vec<String> = self.read_live(sid, read).await?;
        items
            .iter()
            .map(|t| serde_json::from_str(t).map_err(Error::from))
            .collect()
    }

    /// Whether `sid` may be restored. The partition's session index keeps an id until the
    /// session is closed, but it only speaks for SQLite once a spill daemon has checked this
    /// Redis against SQLite: the daemon publishes `<prefix>:{p}:committed` after re-seeding
    /// the index, and no agent ever writes that hash, so an emptied Redis cannot re-create it
    /// by itself. With it, an id the index lacks is unknown — answered at once, writing
    /// nothing. Without it (Redis lost its state, or no daemon ever ran) SQLite may hold the
    /// session: this waits for the daemon, bounded by `restore_wait`, then fails with the
    /// retryable [`Error::NotLive`] — never [`Error::UnknownSession`].
    async fn restorable(
        &self,
        sid: &str,
        conn: &mut crate::connection::Connection,
    ) -> Result<bool> {
        let p = self.keys().partition(sid);
        // One round trip for a session the index holds (the usual case).
        if self.is_indexed(sid).await? {
            return Ok(true);
        }
        let decided: bool = redis::cmd("EXISTS")
            .arg(self.keys().committed(p))
            .query_async(conn)
            .await?;
        if !decided {
            self.await_decided(p, sid).await?;
        }
        self.is_indexed(sid).await
    }

    /// Waits, bounded by `restore_wait`, until a spill daemon has checked partition `p` of
    /// this Redis against SQLite (`<prefix>:{p}:committed` exists); [`Error::NotLive`] for
    /// `sid` when none did in time.
    pub(crate) async fn await_decided(&self, p: u32, sid: &str) -> Result<()> {
        let wait = self.config().restore_wait;
        let mut backoff = Backoff::new(wait);
        let mut conn = self.conn().await?;
        loop {
            let decided: bool = redis::cmd("EXISTS")
                .arg(self.keys().committed(p))
                .query_async(&mut conn)
                .await?;
            if decided {
                return Ok(());
            }
            if !backoff.pause().await {
                return Err(Error::NotLive {
                    sid: sid.to_string(),
                    waited: wait,
                    no_daemon_yet: false,
                });
            }
        }
    }

    /// True when no daemon has bound the namespace to a durable tier in this Redis and none
    /// runs, and that stays so for [`NO_DAEMON_GRACE`] (bounded by `restore_wait`): nothing to
    /// wait for. A running daemon whose heartbeat went with Redis' data beats again within it.
    pub(crate) async fn no_daemon_yet(&self) -> Result<bool> {
        let grace = NO_DAEMON_GRACE.min(self.config().restore_wait);
        let mut backoff = Backoff::new(grace);
        loop {
            let bound: bool = redis::cmd("HEXISTS")
                .arg(self.keys().config())
                .arg("durable")
                .query_async(&mut self.conn().await?)
                .await?;
            if bound || self.daemon_alive().await? {
                return Ok(false);
            }
            if !backoff.pause().await {
                return Ok(true);
            }
        }
    }

    /// True when some spill daemon of the namespace has a heartbeat that has not lapsed.
    /// Heartbeats are scored by Redis' clock; this compares with the caller's, allowing
    /// [`DAEMON_CLOCK_SKEW`] (a warning or a quicker answer, never a fence).
    pub(crate) async fn daemon_alive(&self) -> Result<bool> {
        let mut conn = self.conn().await?;
        let last: Vec<(String, f64)> = redis::cmd("ZREVRANGE")
            .arg(self.keys().daemons())
            .arg(0)
            .arg(0)
            .arg("WITHSCORES")
            .query_async(&mut conn)
            .await?;
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis()) as f64;
        let skew = DAEMON_CLOCK_SKEW.as_millis() as f64;
        Ok(last
            .first()
            .is_some_and(|(_, lapses)| *lapses + skew > now_ms))
    }

    /// Asks the daemon to restore `sid` (or only its inbox and ledger: `want`) and waits for
    /// it (see [`Admin::restore_session`](crate::store::Admin::restore_session)).
    pub(crate) async fn request_restore(&self, sid: &str, want: Want) -> Result<()> {
        let keys = self.session_keys(sid)?;
        let mut conn = self.conn().await?;
        if !self.restorable(sid, &mut conn).await? {
            return Err(Error::UnknownSession(sid.to_string()));
        }
        let reply = self.keys().restore_reply(sid);
        let _: () = redis::pipe()
            .atomic()
            .del(&reply)
            .ignore()
            .rpush(self.keys().restore_requests(keys.partition), sid)
            .ignore()
            // Rings the bell the owning daemon blocks on (`spill::wake`).
            .cmd("XADD")
            .arg(self.keys().restore_bell(keys.partition))
            .arg("MAXLEN")
            .arg(1)
            .arg("*")
            .arg("sid")
            .arg(sid)
            .ignore()
            .query_async(&mut conn)
            .await?;
        let wait = self.config().restore_wait;
        let mut backoff = Backoff::new(wait);
        loop {
            // The answer first: the daemon writes it after the meta key, so a `restored`
            // read here means the EXISTS that follows sees the session (unless it vanished).
            let (answer, live): (Option<String>, bool) = redis::pipe()
                .get(&reply)
                .exists(&keys.meta)
                .query_async(&mut conn)
                .await?;
            match answer.as_deref() {
                // A whole session is back once its meta is; a live session's run keys once
                // the daemon answered (were they not in the durable tier, the call meets
                // RUN_GONE again and says so).
                _ if live && want == Want::Session => return Ok(()),
                Some(_) if live => return Ok(()),
                Some("unknown") => return Err(Error::UnknownSession(sid.to_string())),
                // Restored, then gone again at once (closed or expired): report it as unknown.
                Some(_) => return Err(Error::UnknownSession(sid.to_string())),
                None => {}
            }
            if !backoff.pause().await {
                // Withdraw the request: a daemon that comes later should not restore a
                // session nobody waits for any more (one request per waiter, so LREM 1).
                let _: i64 = redis::cmd("LREM")
                    .arg(self.keys().restore_requests(keys.partition))
                    .arg(1)
                    .arg(sid)
                    .query_async(&mut conn)
                    .await?;
                return Err(Error::NotLive {
                    sid: sid.to_string(),
                    waited: wait,
                    no_daemon_yet: false,
                });
            }
        }
    }
}

/// What a restore request asks the daemon for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Want {
    /// The session, which is not live.
    Session,
    /// The inbox and ledger of a live session, which expired while it lived.
    RunKeys,
}

impl Admin<'_> {
    /// Makes session `sid` live again from SQLite through the spill daemon. Returns `false`
    /// when it was live already, `true` when a daemon restored it; [`Error::UnknownSession`]
    /// when SQLite does not know it either; [`Error::NotLive`] when no daemon answered within
    /// [`crate::Config::restore_wait`].
    pub async fn restore_session(&self, sid: &str) -> Result<bool> {
        let keys = self.store.session_keys(sid)?;
        let mut conn = self.store.conn().await?;
        let live: bool = redis::cmd("EXISTS")
            .arg(&keys.meta)
            .query_async(&mut conn)
            .await?;
        if live {
            return Ok(false);
        }
        self.store.request_restore(sid, Want::Session).await?;
        Ok(true)
    }
}
