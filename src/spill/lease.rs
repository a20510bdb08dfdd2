//! Partition leases: one daemon owns a partition at a time through `<prefix>:{p}:lease` (a
//! Redis key with a millisecond expiry); every new lease gets a fencing token from
//! `<prefix>:{p}:lease_token`, which SQLite keeps with the partition's cursors so a daemon
//! whose lease lapsed cannot commit over its successor. The primitives, Redis only.

use std::time::{Duration, Instant};

use crate::error::Result;
use crate::scripts;
use crate::store::Store;

/// Acquires or renews the lease of partition `p` for `owner`; returns the fencing token, or
/// `None` while another owner holds it. A new token is above `floor`, the highest token
/// SQLite recorded for `p` (Redis may have lost its counter with its memory).
pub(crate) async fn claim(
    store: &Store,
    p: u32,
    owner: &str,
    ttl: Duration,
    floor: i64,
) -> Result<Option<i64>> {
    let token: i64 = invoke(store, p, owner, ttl.as_millis().max(1) as u64, floor).await?;
    Ok((token > 0).then_some(token))
}

/// A lease held through a step that may outlast the lease time (re-seeding a partition's
/// indexes after a Redis loss, the user re-seed, a rollback repair): the step calls
/// [`HeldLease::keep`] between its calls, which renews the lease every third of the lease time,
/// so the marker the step ends by publishing under the lease is never refused because the
/// step itself let the lease lapse.
pub(crate) struct HeldLease {
    store: Store,
    p: u32,
    owner: String,
    token: i64,
    ttl: Duration,
    renewed: Instant,
}

impl HeldLease {
    /// Partition `p`'s lease, held by `owner` with `token` since its claim or renewal at
    /// `renewed`.
    pub(crate) fn new(
        store: &Store,
        p: u32,
        owner: &str,
        token: i64,
        ttl: Duration,
        renewed: Instant,
    ) -> HeldLease {
        HeldLease {
            store: store.clone(),
            p,
            owner: owner.to_string(),
            token,
            ttl,
            renewed,
        }
    }

    /// Renews the lease once a third of its time has passed since the last renewal; false
    /// when it is no longer held with this token (it lapsed, or another daemon took it): the
    /// step stops and a later pass takes the partition anew.
    pub(crate) async fn keep(&mut self) -> Result<bool> {
        if self.renewed.elapsed() < self.ttl / 3 {
            return Ok(true);
        }
        let at = Instant::now();
        // A floor at our token: a lapsed lease is never granted back under it.
        let token = claim(&self.store, self.p, &self.owner, self.ttl, self.token).await?;
        if token != Some(self.token) {
            return Ok(false);
        }
        self.renewed = at;
        Ok(true)
    }

    /// The lease key's value while it is held ([`value`]), which fenced scripts compare.
    pub(crate) fn value(&self) -> String {
        value(&self.owner, self.token)
    }

    /// When the lease was claimed or last renewed.
    pub(crate) fn renewed(&self) -> Instant {
        self.renewed
    }
}

/// The lease key's value while `owner` holds the lease with `token` — the format
/// `claim_lease.lua` writes, which scripts compare to check the caller still owns the
/// partition.
pub(crate) fn value(owner: &str, token: i64) -> String {
    format!("{owner} {token}")
}

/// Gives the lease of partition `p` up (if `owner` holds it), so a standby takes over at once.
pub(crate) async fn release(store: &Store, p: u32, owner: &str) -> Result<()> {
    invoke(store, p, owner, 0, 0).await.map(|_: i64| ())
}

async fn invoke(store: &Store, p: u32, owner: &str, ttl_ms: u64, floor: i64) -> Result<i64> {
    let call = scripts::claim_lease(store.keys(), p, owner, ttl_ms, floor);
    store.invoke(&call).await
}
