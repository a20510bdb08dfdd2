//! Sessions: create, read (restoring), list, children, touch, archive, close, the pending marker.

use super::*;
use crate::args::Whole;

twins! {
    impl PyStore;

    /// Creates a session (id generated when None) and returns its id.
    #[pyo3(signature = (id = None, *, user = None, parent = None, lifecycle = "ephemeral", ttl = None, model = None, system_prompt = None, config = None, metadata = None))]
    fn create_session / acreate_session(
        self,
        py,
        id: Option<String>,
        user: Option<String>,
        parent: Option<String>,
        lifecycle: &str,
        ttl: Option<f64>,
        model: Option<String>,
        system_prompt: Option<String>,
        config: Option<Bound<'_, PyAny>>,
        metadata: Option<Bound<'_, PyAny>>,
    ) -> String {
        let (config, metadata) = (opt_json(config.as_ref())?, opt_json(metadata.as_ref())?);
        let mut n = NewSession::new();
        n.id = id;
        n.user_id = user;
        if let Some(p) = parent {
            let lc: Lifecycle = lifecycle
                .parse()
                .map_err(|e| errors::to_py(e, &errors::python()))?;
            n = n.parent(p, lc);
        }
        if let Some(t) = ttl {
            n = n.ttl(secs("ttl", t)?);
        }
        n.model = model;
        n.system_prompt = system_prompt;
        n.config = config;
        n.metadata = metadata;
        let s = self.s(py)?;
        async move { s.create_session(&n).await }
    }

    /// The session's meta as a dict, or None when the session exists nowhere. Like every
    /// other read it restores a session Redis lost (or that expired) from SQLite through the
    /// spill daemon first; `NotLive` when no daemon restored it in time.
    fn session / asession(self, py, sid: String) -> Option<Json> {
        let s = self.s(py)?;
        async move {
            match s.require_session(&sid).await {
                Ok(meta) => Ok(Some(to_json(&meta))),
                Err(agentstate::Error::UnknownSession(_)) => Ok(None),
                Err(e) => Err(e),
            }
        }
    }

    /// The session's meta, restoring it from SQLite through the spill daemon when Redis lost
    /// it; `UnknownSession` when it exists nowhere, `NotLive` when no daemon restored it in time.
    fn require_session / arequire_session(self, py, sid: String) -> Json {
        let s = self.s(py)?;
        async move { s.require_session(&sid).await.map(|x| to_json(&x)) }
    }

    /// Session ids, all or one user's (live and restorable).
    #[pyo3(signature = (user = None))]
    fn list_sessions / alist_sessions(self, py, user: Option<String>) -> Vec<String> {
        let s = self.s(py)?;
        async move { s.list_sessions(user.as_deref()).await }
    }

    /// One page of session ids, ascending: at most `limit`, after the cursor `after`, only
    /// `user`'s and only ids starting with `prefix` when given. Returns `(ids, next)`: `next`
    /// is the cursor of the following page, None on the last. Constant time in the number of
    /// sessions (no scan).
    #[pyo3(signature = (limit, *, user = None, after = None, prefix = None))]
    fn list_sessions_page / alist_sessions_page(
        self,
        py,
        limit: Whole<'_>,
        user: Option<String>,
        after: Option<String>,
        prefix: Option<String>,
    ) -> (Vec<String>, Option<String>) {
        let limit = limit.get("limit")?;
        let s = self.s(py)?;
        async move {
            let mut listing = agentstate::SessionListing::new(limit);
            listing.user = user;
            listing.after = after;
            listing.prefix = prefix;
            let page = s.list_sessions_page(&listing).await?;
            Ok((page.ids, page.next))
        }
    }

    /// Sub-agent session ids of `sid`.
    fn children / achildren(self, py, sid: String) -> Vec<String> {
        let s = self.s(py)?;
        async move { s.children(&sid).await }
    }

    /// Heartbeat: refreshes the session's idle TTL.
    fn touch / atouch(self, py, sid: String) -> () {
        let s = self.s(py)?;
        async move { s.touch(&sid).await }
    }

    /// Marks the session archived.
    fn archive / aarchive(self, py, sid: String) -> () {
        let s = self.s(py)?;
        async move { s.archive(&sid).await }
    }

    /// Deletes the session everywhere (Redis and SQLite); with `cascade` its linked and
    /// ephemeral descendants too. Returns how many sessions were removed.
    #[pyo3(signature = (sid, cascade = true))]
    fn close_session / aclose_session(self, py, sid: String, cascade: bool) -> u64 {
        let s = self.s(py)?;
        async move { s.close_session(&sid, cascade).await }
    }

    /// Sets (or, with None, clears) the pending tool calls.
    fn set_pending / aset_pending(self, py, sid: String, pending: Option<Bound<'_, PyAny>>) -> () {
        let v = opt_json(pending.as_ref())?;
        let s = self.s(py)?;
        async move { s.set_pending(&sid, v.as_ref()).await }
    }

    /// The pending tool calls, or None.
    fn pending / apending(self, py, sid: String) -> OptJson {
        let s = self.s(py)?;
        async move { s.pending(&sid).await.map(OptJson) }
    }
}
