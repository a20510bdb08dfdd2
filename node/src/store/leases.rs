//! Run leases: acquire, renew, release and read a session's lease; fenced stores.

use agentstate::Lease;

use super::*;

/// A run lease: `{ owner, token, expiresAt }`.
#[napi(object)]
pub struct LeaseInfo {
    /// Who holds it.
    pub owner: String,
    /// Its fencing token.
    pub token: i64,
    /// When it lapses unless renewed, ms since the epoch.
    pub expires_at: i64,
}

fn info(l: Lease) -> LeaseInfo {
    LeaseInfo {
        owner: l.owner,
        token: num(l.token),
        expires_at: l.expires_at,
    }
}

fn ttl(ttl_ms: f64) -> Result<Duration> {
    Ok(Duration::from_millis(whole("ttlMs", ttl_ms)?))
}

#[napi]
impl NativeStore {
    /// Takes the session's run lease for `owner` for `ttlMs` if it is free, expired or
    /// `owner`'s already (which keeps its token). `Leased` while another owner holds it.
    #[napi]
    pub async fn acquire_lease(
        &self,
        sid: String,
        owner: String,
        ttl_ms: f64,
    ) -> Result<LeaseInfo> {
        let l = self
            .store
            .acquire_lease(&sid, &owner, ttl(ttl_ms)?)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(info(l))
    }

    /// Extends the lease for `ttlMs` from now while `owner` holds it with `token`; false
    /// when it does not (the run must stop).
    #[napi]
    pub async fn renew_lease(
        &self,
        sid: String,
        owner: String,
        token: f64,
        ttl_ms: f64,
    ) -> Result<bool> {
        let token = whole("token", token)?;
        self.store
            .renew_lease(&sid, &owner, token, ttl(ttl_ms)?)
            .await
            .map_err(|e| self.fail(e))
    }

    /// Drops the lease if `owner` holds it with `token`; false when it did not.
    #[napi]
    pub async fn release_lease(&self, sid: String, owner: String, token: f64) -> Result<bool> {
        let token = whole("token", token)?;
        self.store
            .release_lease(&sid, &owner, token)
            .await
            .map_err(|e| self.fail(e))
    }

    /// Who holds the session's run lease, or null.
    #[napi]
    pub async fn lease_holder(&self, sid: String) -> Result<Option<LeaseInfo>> {
        let l = self
            .store
            .lease_holder(&sid)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(l.map(info))
    }

    /// A store sharing this one's pool whose transcript and state writes carry run lease
    /// token `token` (null: no fence): once another process took the lease they reject with
    /// `Fenced` and write nothing.
    #[napi]
    pub fn fenced(&self, token: Option<f64>) -> Result<NativeStore> {
        let token = token.map(|t| whole("token", t)).transpose()?;
        Ok(NativeStore {
            store: self.store.with_fence(token),
            at: Arc::clone(&self.at),
        })
    }

    /// The run lease token this store's writes carry, or null.
    #[napi(getter)]
    pub fn fence(&self) -> Option<i64> {
        self.store.fence().map(num)
    }
}
