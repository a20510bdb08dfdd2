//! Sessions: create, read (restoring), list, children, touch, archive, close, the pending marker.

use agentstate::{Lifecycle, NewSession, SessionListing};

use super::*;

/// `createSession`'s options.
#[napi(object)]
#[derive(Default)]
pub struct SessionOptions {
    /// The session id (generated when absent).
    pub id: Option<String>,
    /// The user it belongs to.
    pub user: Option<String>,
    /// The parent session of a sub-agent.
    pub parent: Option<String>,
    /// With a parent: "ephemeral" (default) or "linked".
    pub lifecycle: Option<String>,
    /// Idle TTL, seconds.
    pub ttl: Option<f64>,
    /// Model name.
    pub model: Option<String>,
    /// System prompt.
    pub system_prompt: Option<String>,
    /// Free-form config (JSON).
    pub config: Option<Value>,
    /// Free-form metadata (JSON).
    pub metadata: Option<Value>,
}

/// `listSessionsPage`'s result.
#[napi(object)]
pub struct SessionPage {
    /// Session ids, ascending.
    pub ids: Vec<String>,
    /// The cursor of the next page (`after`), absent on the last.
    pub next: Option<String>,
}

#[napi]
impl NativeStore {
    /// Creates a session and resolves to its id.
    #[napi]
    pub async fn create_session(&self, options: Option<SessionOptions>) -> Result<String> {
        let o = options.unwrap_or_default();
        let mut n = NewSession::new();
        n.id = o.id;
        n.user_id = o.user;
        if let Some(p) = o.parent {
            let lc: Lifecycle = o
                .lifecycle
                .as_deref()
                .unwrap_or("ephemeral")
                .parse()
                .map_err(|e| self.fail(e))?;
            n = n.parent(p, lc);
        }
        if let Some(t) = o.ttl {
            n = n.ttl(secs("ttl", t)?);
        }
        n.model = o.model;
        n.system_prompt = o.system_prompt;
        n.config = o.config;
        n.metadata = o.metadata;
        self.store
            .create_session(&n)
            .await
            .map_err(|e| self.fail(e))
    }

    /// The session's meta, or null when it exists nowhere (restored from SQLite through the
    /// spill daemon first when Redis lost it; `NotLive` when no daemon restored it in time).
    #[napi]
    pub async fn session(&self, sid: String) -> Result<Option<Value>> {
        match self.store.require_session(&sid).await {
            Ok(meta) => Ok(Some(js(&meta))),
            Err(agentstate::Error::UnknownSession(_)) => Ok(None),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// The session's meta; `UnknownSession` when it exists nowhere.
    #[napi]
    pub async fn require_session(&self, sid: String) -> Result<Value> {
        let meta = self
            .store
            .require_session(&sid)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(js(&meta))
    }

    /// Session ids, all or one user's (live and restorable).
    #[napi]
    pub async fn list_sessions(&self, user: Option<String>) -> Result<Vec<String>> {
        self.store
            .list_sessions(user.as_deref())
            .await
            .map_err(|e| self.fail(e))
    }

    /// One page of session ids, ascending: at most `limit`, after the cursor `after`, only
    /// `user`'s and only ids starting with `prefix` when given.
    #[napi]
    pub async fn list_sessions_page(
        &self,
        limit: u32,
        user: Option<String>,
        after: Option<String>,
        prefix: Option<String>,
    ) -> Result<SessionPage> {
        let mut listing = SessionListing::new(limit as usize);
        listing.user = user;
        listing.after = after;
        listing.prefix = prefix;
        let page = self
            .store
            .list_sessions_page(&listing)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(SessionPage {
            ids: page.ids,
            next: page.next,
        })
    }

    /// Sub-agent session ids of `sid`.
    #[napi]
    pub async fn children(&self, sid: String) -> Result<Vec<String>> {
        self.store.children(&sid).await.map_err(|e| self.fail(e))
    }

    /// Heartbeat: refreshes the session's idle TTL.
    #[napi]
    pub async fn touch(&self, sid: String) -> Result<()> {
        self.store.touch(&sid).await.map_err(|e| self.fail(e))
    }

    /// Marks the session archived.
    #[napi]
    pub async fn archive(&self, sid: String) -> Result<()> {
        self.store.archive(&sid).await.map_err(|e| self.fail(e))
    }

    /// Deletes the session everywhere (Redis and SQLite); with `cascade` (default) its
    /// linked and ephemeral descendants too. Resolves to how many sessions were removed.
    #[napi]
    pub async fn close_session(&self, sid: String, cascade: Option<bool>) -> Result<i64> {
        self.store
            .close_session(&sid, cascade.unwrap_or(true))
            .await
            .map(num)
            .map_err(|e| self.fail(e))
    }

    /// Sets (or, with null, clears) the pending tool calls.
    #[napi]
    pub async fn set_pending(&self, sid: String, pending: Option<Value>) -> Result<()> {
        let pending = pending.filter(|v| !v.is_null());
        self.store
            .set_pending(&sid, pending.as_ref())
            .await
            .map_err(|e| self.fail(e))
    }

    /// The pending tool calls, or null.
    #[napi]
    pub async fn pending(&self, sid: String) -> Result<Option<Value>> {
        self.store.pending(&sid).await.map_err(|e| self.fail(e))
    }
}
