//! Run leases: one run at a time per session, across processes and machines. A process
//! acquires a session's lease for a while and gets a fencing token; it renews the lease while
//! its run works and releases it at the end. A write that carries the token
//! ([`Store::with_fence`]) is refused in its script once another process acquired the lease,
//! so a paused process that wakes up cannot interleave with its successor. [`RunLease`] does
//! the renewing in the background.
//!
//! Leases live in Redis only (three fields of the session's meta hash): a Redis that lost its
//! data lost its leases, and the next acquire's token is still larger than any before it (it
//! starts from the Redis clock in ms).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::scripts;
use crate::store::Store;

/// A session's run lease as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// Who holds it.
    pub owner: String,
    /// Its fencing token: larger after every change of holder.
    pub token: u64,
    /// When it expires unless renewed, ms since the epoch (Redis clock).
    pub expires_at: i64,
}

/// The lease TTL in whole milliseconds, at least 1.
fn ttl_ms(ttl: Duration) -> Result<u64> {
    let ms = ttl.as_millis();
    if ms == 0 || ms > 1 << 40 {
        return Err(Error::InvalidInput(format!(
            "lease TTL {ttl:?} must be from 1 ms to 2^40 ms"
        )));
    }
    Ok(ms as u64)
}

/// An owner names a process (or a run): 1-200 characters without spaces.
fn check_owner(owner: &str) -> Result<()> {
    if owner.is_empty() || owner.len() > 200 || owner.chars().any(char::is_whitespace) {
        return Err(Error::InvalidInput(format!(
            "lease owner {owner:?} must be 1-200 characters without spaces (name the process, e.g. host:pid)"
        )));
    }
    Ok(())
}

impl Store {
    /// Takes session `sid`'s run lease for `owner` for `ttl`, if it is free, expired, or
    /// `owner`'s already (which keeps its token and extends it). Fails with
    /// [`Error::Leased`], naming the holder, while another owner's lease runs.
    pub async fn acquire_lease(&self, sid: &str, owner: &str, ttl: Duration) -> Result<Lease> {
        let keys = self.session_keys(sid)?;
        check_owner(owner)?;
        let call = scripts::lease_acquire(&keys, sid, owner, ttl_ms(ttl)?);
        let (token, expires_at): (u64, i64) = self.invoke_session(sid, &call).await?;
        Ok(Lease {
            owner: owner.to_string(),
            token,
            expires_at,
        })
    }

    /// Extends the lease for `ttl` from now while `owner` still holds it with `token`
    /// (nobody acquired it since, and it was not released). `false`: it does not, and the
    /// run must stop.
    pub async fn renew_lease(
        &self,
        sid: &str,
        owner: &str,
        token: u64,
        ttl: Duration,
    ) -> Result<bool> {
        let keys = self.session_keys(sid)?;
        let call = scripts::lease_renew(&keys, sid, owner, token, ttl_ms(ttl)?);
        let expires: String = self.invoke_session(sid, &call).await?;
        Ok(!expires.is_empty())
    }

    /// Drops the lease if `owner` holds it with `token`; `false` when it did not.
    pub async fn release_lease(&self, sid: &str, owner: &str, token: u64) -> Result<bool> {
        let keys = self.session_keys(sid)?;
        let call = scripts::lease_release(&keys, sid, owner, token);
        let released: i64 = self.invoke_session(sid, &call).await?;
        Ok(released == 1)
    }

    /// Who holds session `sid`'s run lease and until when; `None` when nobody does (never
    /// taken, released, or expired).
    pub async fn lease_holder(&self, sid: &str) -> Result<Option<Lease>> {
        let keys = self.session_keys(sid)?;
        let (owner, token, until): (Option<String>, Option<u64>, Option<i64>) = self
            .read_live(
                sid,
                redis::cmd("HMGET").arg(&keys.meta).arg(&[
                    "lease_owner",
                    "lease_token",
                    "lease_until",
                ]),
            )
            .await?;
        let now = self.redis_time_ms().await?;
        Ok(match (owner, token, until) {
            (Some(owner), Some(token), Some(expires_at))
                if !owner.is_empty() && expires_at > now =>
            {
                Some(Lease {
                    owner,
                    token,
                    expires_at,
                })
            }
            _ => None,
        })
    }

    /// Acquires session `sid`'s run lease for `owner` and keeps it while the run works:
    /// a background task renews it every third of `ttl`. See [`RunLease`].
    pub async fn run_lease(&self, sid: &str, owner: &str, ttl: Duration) -> Result<RunLease> {
        let lease = self.acquire_lease(sid, owner, ttl).await?;
        let lost = CancellationToken::new();
        let renewer = tokio::spawn(renew_until_lost(
            self.clone(),
            sid.to_string(),
            lease.clone(),
            ttl,
            lost.clone(),
        ));
        Ok(RunLease {
            store: self.with_fence(Some(lease.token)),
            session: sid.to_string(),
            lease,
            lost,
            renewer,
        })
    }

    /// Redis' clock, ms since the epoch (the clock leases are kept by).
    async fn redis_time_ms(&self) -> Result<i64> {
        let (secs, micros): (i64, i64) = self
            .retrying(true, || async {
                Ok(redis::cmd("TIME")
                    .query_async(&mut self.conn().await?)
                    .await?)
            })
            .await?;
        Ok(secs * 1000 + micros / 1000)
    }
}

/// Renews `lease` every third of `ttl` until `lost` is cancelled (by the guard) or the lease
/// is gone: renewal answered `false`, or failed until the lease had surely expired. Then
/// cancels `lost`.
async fn renew_until_lost(
    store: Store,
    sid: String,
    lease: Lease,
    ttl: Duration,
    lost: CancellationToken,
) {
    let every = ttl / 3;
    let mut held_until = tokio::time::Instant::now() + ttl;
    loop {
        tokio::select! {
            _ = lost.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        let asked = tokio::time::Instant::now();
        match store
            .renew_lease(&sid, &lease.owner, lease.token, ttl)
            .await
        {
            Ok(true) => held_until = asked + ttl,
            Ok(false) => break,
            Err(e) if tokio::time::Instant::now() < held_until => {
                tracing::warn!(session = %sid, error = %e, "renewing the run lease failed; retrying");
            }
            Err(e) => {
                tracing::warn!(session = %sid, error = %e, "the run lease expired while it could not be renewed");
                break;
            }
        }
    }
    lost.cancel();
}

/// A held run lease, renewed in the background until it is released or dropped.
///
/// Write through [`RunLease::store`]: its writes carry the lease's token, so once another
/// process takes the session over they are refused ([`Error::Fenced`]) with nothing written.
/// [`RunLease::lost`] resolves when renewal fails (another owner took the lease, or Redis
/// could not be reached until it expired): stop the run then. Dropping the guard stops the
/// renewal; [`RunLease::release`] also frees the lease for the next run at once.
///
/// ```no_run
/// # async fn demo(store: agentstate::Store) -> agentstate::Result<()> {
/// use std::time::Duration;
/// use agentstate::NewMessage;
/// let run = store.run_lease("s1", "worker-7", Duration::from_secs(30)).await?;
/// run.store().append("s1", &NewMessage::new("assistant").content("on it")).await?;
/// run.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct RunLease {
    store: Store,
    session: String,
    lease: Lease,
    lost: CancellationToken,
    renewer: tokio::task::JoinHandle<()>,
}

impl RunLease {
    /// The lease as acquired (owner, token, first expiry).
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The fencing token.
    pub fn token(&self) -> u64 {
        self.lease.token
    }

    /// A handle on the same store whose writes carry this lease's token.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Resolves once the lease is lost (renewal refused, or failing until it expired).
    pub async fn lost(&self) {
        self.lost.cancelled().await
    }

    /// Whether the lease is lost.
    pub fn is_lost(&self) -> bool {
        self.lost.is_cancelled()
    }

    /// Stops renewing and releases the lease; `false` when it was no longer this owner's.
    pub async fn release(self) -> Result<bool> {
        let was_lost = self.lost.is_cancelled();
        self.lost.cancel();
        self.renewer.abort();
        let released = self
            .store
            .release_lease(&self.session, &self.lease.owner, self.lease.token)
            .await?;
        Ok(released && !was_lost)
    }
}

impl Drop for RunLease {
    fn drop(&mut self) {
        self.lost.cancel();
        self.renewer.abort();
    }
}
