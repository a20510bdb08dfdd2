//! Sessions: create (root or sub-agent), read, list (paged) by user without a scan, touch, archive,
//! pending tool calls, and close with cascade over the sub-agent tree.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::keys::{validate_id, SessionKeys};
use crate::scripts;
use crate::store::{Admin, Store};

/// How long a sub-agent's session lives relative to its parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lifecycle {
    /// Meant to be closed right after the sub-agent returns; closed with its parent.
    #[default]
    Ephemeral,
    /// Kept, and closed when its parent is closed (cascade).
    Linked,
    /// Kept, independent of its parent: re-parented to none when the parent is closed.
    Detached,
}

impl Lifecycle {
    /// The wire name (`ephemeral`, `linked`, `detached`).
    pub fn as_str(self) -> &'static str {
        match self {
            Lifecycle::Ephemeral => "ephemeral",
            Lifecycle::Linked => "linked",
            Lifecycle::Detached => "detached",
        }
    }
}

impl std::str::FromStr for Lifecycle {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "ephemeral" => Ok(Lifecycle::Ephemeral),
            "linked" => Ok(Lifecycle::Linked),
            "detached" => Ok(Lifecycle::Detached),
            other => Err(Error::InvalidInput(format!(
                "lifecycle {other:?}: expected ephemeral, linked or detached"
            ))),
        }
    }
}

/// What to create: every field optional; build with the setters.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct NewSession {
    /// Session id; generated (`sess_` + 24 hex) when absent.
    pub id: Option<String>,
    /// The user the session belongs to (indexed for listing by user).
    pub user_id: Option<String>,
    /// Parent session: makes this a sub-agent session.
    pub parent: Option<String>,
    /// Lifecycle relative to the parent.
    pub lifecycle: Lifecycle,
    /// Idle TTL; the store's default when absent.
    pub ttl: Option<Duration>,
    /// Model name.
    pub model: Option<String>,
    /// System prompt.
    pub system_prompt: Option<String>,
    /// Free-form configuration (JSON).
    pub config: Option<Value>,
    /// Free-form metadata (JSON).
    pub metadata: Option<Value>,
}

impl NewSession {
    /// An empty description: generated id, no user, no parent.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the session id.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }
    /// Sets the owning user.
    pub fn user(mut self, user: impl Into<String>) -> Self {
        self.user_id = Some(user.into());
        self
    }
    /// Makes this a sub-agent of `parent` with `lifecycle`.
    pub fn parent(mut self, parent: impl Into<String>, lifecycle: Lifecycle) -> Self {
        self.parent = Some(parent.into());
        self.lifecycle = lifecycle;
        self
    }
    /// Sets the idle TTL.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }
    /// Sets the model.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }
    /// Sets the system prompt.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }
    /// Sets the configuration JSON.
    pub fn config(mut self, config: Value) -> Self {
        self.config = Some(config);
        self
    }
    /// Sets the metadata JSON.
    pub fn metadata(mut self, metadata: Value) -> Self {
        self.metadata = Some(metadata);
        self
    }
}

/// The fields of a session's meta hash `<prefix>:{p}:s:<sid>`, in the order
/// `create_session.lua` writes them (the fields every hot-path write reads or sets first: a
/// small hash is a listpack that HMGET/HSET scan from the front). The one list on the Rust
/// side: a restore's image of the meta is built from it (`compacted` is derived by
/// `restore_session.lua` from the compaction records), [`Session`] shows the ones a caller
/// reads, and unit tests check `create_session.lua` and the `Session` fields against it.
#[cfg(any(feature = "spill", test))]
pub(crate) const META_FIELDS: [&str; 20] = [
    "next_seq",
    "ttl",
    "ttl_at",
    "updated_at",
    "version",
    "user_id",
    "kind",
    "parent",
    "spawn_depth",
    "lifecycle",
    "status",
    "model",
    "system_prompt",
    "config",
    "metadata",
    "created_at",
    "round_index",
    "last_compact_seq",
    "pending",
    "compacted",
];

/// The meta fields a session's hash leaves out while they hold their default, with that
/// default as stored text: a reader takes an absent field as its default. The scripts write
/// through `lua/_prelude.lua::set_meta`, whose `META_DEFAULTS` table a unit test checks
/// against this list. A fresh root session's hash is so five or six fields, not twenty:
/// memory per live session is what a deployment of many agents pays (BENCHMARKS.md, W8).
pub(crate) const META_DEFAULTS: [(&str, &str); 15] = [
    ("version", "0"),
    ("user_id", ""),
    ("kind", "root"),
    ("parent", ""),
    ("spawn_depth", "0"),
    ("lifecycle", "ephemeral"),
    ("status", "active"),
    ("model", ""),
    ("system_prompt", ""),
    ("config", "{}"),
    ("metadata", "{}"),
    ("round_index", "0"),
    ("last_compact_seq", "0"),
    ("pending", ""),
    ("compacted", ""),
];

/// The stored text of meta field `field` in the hash `h`: its value, or its default
/// ([`META_DEFAULTS`]; `""` for a field without one) when absent.
fn meta_field(h: &mut HashMap<String, String>, field: &str) -> String {
    h.remove(field).unwrap_or_else(|| {
        META_DEFAULTS
            .iter()
            .find(|(f, _)| *f == field)
            .map_or_else(String::new, |(_, d)| (*d).to_string())
    })
}

/// A session's meta, as stored in `<prefix>:{p}:s:<sid>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// Session id.
    pub id: String,
    /// Owning user, if any.
    pub user_id: Option<String>,
    /// `root` or `subagent`.
    pub kind: String,
    /// Parent session, if this is a sub-agent that is still attached.
    pub parent: Option<String>,
    /// 0 for a root, parent's depth + 1 for a sub-agent.
    pub spawn_depth: u32,
    /// Lifecycle relative to the parent.
    pub lifecycle: Lifecycle,
    /// `active` or `archived`.
    pub status: String,
    /// Model name.
    pub model: Option<String>,
    /// System prompt.
    pub system_prompt: Option<String>,
    /// Configuration JSON.
    pub config: Value,
    /// Metadata JSON.
    pub metadata: Value,
    /// Creation time, ms since the epoch (Redis clock).
    pub created_at: i64,
    /// Last write, ms since the epoch (Redis clock).
    pub updated_at: i64,
    /// The seq the next message gets.
    pub next_seq: u64,
    /// Current round index.
    pub round_index: i64,
    /// Number of compactions so far.
    pub last_compact_seq: u64,
    /// Pending tool calls, if any.
    pub pending: Option<Value>,
    /// Working-state version (bumped by every working-state write).
    pub version: u64,
    /// Idle TTL, seconds.
    pub ttl: u64,
}

impl Session {
    /// Decodes the meta hash of `id` (as returned by HGETALL; a field at its default may be
    /// absent: [`META_DEFAULTS`]).
    pub(crate) fn from_hash(id: &str, mut h: HashMap<String, String>) -> Result<Session> {
        let mut take = |k: &str| meta_field(&mut h, k);
        let opt = |s: String| if s.is_empty() { None } else { Some(s) };
        let json = |s: String| -> Result<Value> {
            if s.is_empty() {
                Ok(Value::Null)
            } else {
                Ok(serde_json::from_str(&s)?)
            }
        };
        let num = |s: String| s.parse::<i64>().unwrap_or(0);
        Ok(Session {
            id: id.to_string(),
            user_id: opt(take("user_id")),
            kind: take("kind"),
            parent: opt(take("parent")),
            spawn_depth: num(take("spawn_depth")) as u32,
            lifecycle: take("lifecycle").parse().unwrap_or_default(),
            status: take("status"),
            model: opt(take("model")),
            system_prompt: opt(take("system_prompt")),
            config: json(take("config"))?,
            metadata: json(take("metadata"))?,
            created_at: num(take("created_at")),
            updated_at: num(take("updated_at")),
            next_seq: num(take("next_seq")) as u64,
            round_index: num(take("round_index")),
            last_compact_seq: num(take("last_compact_seq")) as u64,
            pending: match json(take("pending"))? {
                Value::Null => None,
                v => Some(v),
            },
            version: num(take("version")) as u64,
            ttl: num(take("ttl")) as u64,
        })
    }
}

/// The largest page [`Store::list_sessions_page`] returns.
pub const MAX_PAGE: usize = 10_000;

/// What [`Store::list_sessions_page`] lists: every session or one user's, optionally only
/// ids starting with a prefix, after a cursor, at most `limit` per page.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SessionListing {
    /// Only this user's sessions (through the per-user index).
    pub user: Option<String>,
    /// Only ids starting with this text (a lexicographic range of the index).
    pub prefix: Option<String>,
    /// The cursor: the `next` of the previous page; ids after it.
    pub after: Option<String>,
    /// Page size, 1 to [`MAX_PAGE`].
    pub limit: usize,
}

impl SessionListing {
    /// Every session, `limit` per page.
    pub fn new(limit: usize) -> Self {
        Self {
            user: None,
            prefix: None,
            after: None,
            limit,
        }
    }
    /// Only `user`'s sessions.
    pub fn user(mut self, user: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self
    }
    /// Only ids starting with `prefix`.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }
    /// Ids after `cursor` (a page's `next`).
    pub fn after(mut self, cursor: impl Into<String>) -> Self {
        self.after = Some(cursor.into());
        self
    }
}

/// One page of [`Store::list_sessions_page`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionPage {
    /// Session ids, ascending.
    pub ids: Vec<String>,
    /// The cursor of the next page; `None` when this is the last.
    pub next: Option<String>,
}

/// Generates a session id: `sess_` + 24 lowercase hex digits.
pub fn generate_session_id() -> String {
    format!("sess_{:024x}", rand::random::<u128>() >> 32)
}

impl Store {
    /// Keys of session `sid` after validating the id.
    pub(crate) fn session_keys(&self, sid: &str) -> Result<Arc<SessionKeys>> {
        validate_id("session", sid)?;
        Ok(self.session_keys_cache().get(self.keys(), sid))
    }

    /// Creates a session and returns its id. A sub-agent's `spawn_depth` is its parent's + 1,
    /// capped by [`crate::Config::max_spawn_depth`].
    pub async fn create_session(&self, new: &NewSession) -> Result<String> {
        let sid = match &new.id {
            Some(id) => id.clone(),
            None => generate_session_id(),
        };
        let keys = self.session_keys(&sid)?;
        if let Some(user) = &new.user_id {
            validate_id("user", user)?;
        }
        let ttl = new.ttl.unwrap_or(self.config().session_ttl).as_secs();
        crate::config::check_ttl(ttl)?;
        let mut depth = 0;
        if let Some(parent) = &new.parent {
            validate_id("parent session", parent)?;
            // A parent that expired from Redis is restored first, like any session it calls.
            depth = self.require_session(parent).await?.spawn_depth + 1;
            if depth > self.config().max_spawn_depth {
                return Err(Error::SpawnDepthExceeded {
                    depth,
                    max: self.config().max_spawn_depth,
                });
            }
        }
        let user = new.user_id.as_deref().unwrap_or("");
        let json_or_empty_object = |v: &Option<Value>| -> String {
            v.as_ref()
                .map_or_else(|| "{}".to_string(), Value::to_string)
        };
        let (config, metadata) = (
            json_or_empty_object(&new.config),
            json_or_empty_object(&new.metadata),
        );
        let args = scripts::NewSessionArgs {
            user,
            parent: new.parent.as_deref().unwrap_or(""),
            depth,
            lifecycle: new.lifecycle.as_str(),
            model: new.model.as_deref().unwrap_or(""),
            system_prompt: new.system_prompt.as_deref().unwrap_or(""),
            config: &config,
            metadata: &metadata,
            ttl,
        };
        let call = scripts::create_session(self.keys(), &keys, &sid, &args);
        let wal_id: String = match self.invoke_once(&call).await {
            // When no daemon ever bound the namespace and none runs, say so at once; else
            // wait while no daemon has vouched for this Redis history yet (`invoke`).
            Err(Error::NotLive { .. }) if self.no_daemon_yet().await? => {
                return Err(Error::NotLive {
                    sid,
                    waited: Duration::ZERO,
                    no_daemon_yet: true,
                });
            }
            Err(Error::NotLive { .. }) => self.invoke(&call).await?,
            other => other?,
        };
        if let Some(parent) = &new.parent {
            if let Err(err) = self.link_child(parent, &sid, true).await {
                // The parent vanished between the depth check and now: undo the child.
                self.close_one(&sid, new.user_id.as_deref(), false).await?;
                return Err(match err {
                    Error::UnknownSession(_) => Error::UnknownSession(parent.clone()),
                    other => other,
                });
            }
        }
        self.settle(keys.partition, &wal_id).await?;
        Ok(sid)
    }

    async fn link_child(&self, parent: &str, child: &str, add: bool) -> Result<()> {
        let pkeys = self.keys().session(parent);
        let _: i64 = self
            .invoke(&scripts::link_child(&pkeys, child, add))
            .await?;
        Ok(())
    }

    /// The session's meta, or `None` when it is not live in Redis.
    pub async fn session(&self, sid: &str) -> Result<Option<Session>> {
        let keys = self.session_keys(sid)?;
        let h: HashMap<String, String> = self
            .retrying(true, || async {
                Ok(redis::cmd("HGETALL")
                    .arg(&keys.meta)
                    .query_async(&mut self.conn().await?)
                    .await?)
            })
            .await?;
        if h.is_empty() {
            return Ok(None);
        }
        Session::from_hash(sid, h).map(Some)
    }

    /// The session's meta, or [`Error::UnknownSession`]. A session that is not live is
    /// restored from SQLite through the spill daemon first (see [`Admin::restore_session`](crate::store::Admin::restore_session)).
    pub async fn require_session(&self, sid: &str) -> Result<Session> {
        if let Some(session) = self.session(sid).await? {
            return Ok(session);
        }
        self.request_restore(sid, crate::store::Want::Session)
            .await?;
        self.session(sid)
            .await?
            .ok_or_else(|| Error::UnknownSession(sid.to_string()))
    }

    /// Ids of the sub-agent sessions of `sid`, sorted.
    pub async fn children(&self, sid: &str) -> Result<Vec<String>> {
        let keys = self.session_keys(sid)?;
        let mut kids: Vec<String> = self
            .read_live(sid, redis::cmd("SMEMBERS").arg(&keys.children))
            .await?;
        kids.sort();
        Ok(kids)
    }

    /// Session ids, sorted: all of them, or those of one user. Reads one index per partition
    /// (one script call each, in one pipeline on a node) — never a keyspace scan.
    /// The index keeps a session until it is closed, so sessions that expired from Redis but
    /// can be restored are listed too. For a bounded read, see [`Store::list_sessions_page`].
    pub async fn list_sessions(&self, user: Option<&str>) -> Result<Vec<String>> {
        if let Some(user) = user {
            validate_id("user", user)?;
        }
        self.read_indexes(user, None, "", 0).await
    }

    /// One page of session ids in ascending order, after the listing's cursor: per
    /// partition, the index buckets that hold its next `limit + 1` ids (one script call per
    /// partition, in one pipeline on a node). The cost grows with the partitions and the page, never with
    /// the number of sessions. `next` is the cursor of the following page (the last id of
    /// this one), `None` on the last page.
    pub async fn list_sessions_page(&self, listing: &SessionListing) -> Result<SessionPage> {
        let user = listing.user.as_deref();
        if let Some(user) = user {
            validate_id("user", user)?;
        }
        if let Some(after) = &listing.after {
            validate_id("cursor", after)?;
        }
        let limit = listing.limit;
        if limit == 0 || limit > MAX_PAGE {
            return Err(Error::InvalidInput(format!(
                "page limit {limit}: expected 1 to {MAX_PAGE}"
            )));
        }
        let prefix = listing.prefix.as_deref().unwrap_or("");
        if !prefix.is_empty() && validate_id("id prefix", prefix).is_err() {
            return Err(Error::InvalidInput(format!(
                "id prefix {prefix:?}: session ids are made of [A-Za-z0-9._@+-]"
            )));
        }
        let mut ids = self
            .read_indexes(user, listing.after.as_deref(), prefix, limit + 1)
            .await?;
        let next = if ids.len() > limit {
            ids.truncate(limit);
            ids.last().cloned()
        } else {
            None
        };
        Ok(SessionPage { ids, next })
    }

    /// Turns the session indexes earlier builds wrote (plain sets, then sorted sets of the
    /// ids themselves) into the bucketed ones of this build, so listings read them whole;
    /// the spill daemon runs it when it opens. Scripts that write an index convert it
    /// themselves (`index_upgrade` in `lua/_prelude.lua`). One SCAN of the namespace's sets
    /// and sorted sets per master, then [`scripts::upgrade_index`] per index found (a
    /// bucketed index is left alone). Returns how many it upgraded.
    #[cfg(feature = "spill")]
    pub(crate) async fn upgrade_session_indexes(&self) -> Result<usize> {
        let pattern = self.keys().namespace_pattern();
        let mut upgraded = 0;
        for mut conn in self.own_master_connections().await? {
            for kind in ["set", "zset"] {
                let mut cursor: u64 = 0;
                loop {
                    let scanned: redis::RedisResult<(u64, Vec<String>)> = redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(&pattern)
                        .arg("COUNT")
                        .arg(1000)
                        .arg("TYPE")
                        .arg(kind)
                        .query_async(&mut conn)
                        .await;
                    // A least-privilege user (README's ACL) may not SCAN: the scripts convert
                    // the indexes they meet.
                    let (next, found) = match scanned {
                        Err(e) if e.code() == Some("NOPERM") => {
                            tracing::debug!("no SCAN permission: session indexes are converted as scripts meet them");
                            return Ok(upgraded);
                        }
                        other => other?,
                    };
                    for key in found.iter().filter(|k| is_session_index(k)) {
                        upgraded += scripts::upgrade_index(key).run::<usize>(&mut conn).await?;
                    }
                    if next == 0 {
                        break;
                    }
                    cursor = next;
                }
            }
        }
        Ok(upgraded)
    }

    /// The session index of partition `p`: every session's, or one user's.
    fn index_key(&self, p: u32, user: Option<&str>) -> String {
        match user {
            Some(u) => self.keys().user_sessions(p, u),
            None => self.keys().sessions_index(p),
        }
    }

    /// Whether the partition index holds `sid`, live or not (one script call).
    pub(crate) async fn is_indexed(&self, sid: &str) -> Result<bool> {
        let index = self.keys().sessions_index(self.keys().partition(sid));
        let bound = format!("[{sid}");
        let lookup = scripts::list_index(&index, bound.as_bytes(), bound.as_bytes(), 1);
        let buckets: Vec<String> = self.invoke(&lookup).await?;
        Ok(buckets
            .iter()
            .any(|b| b.split_whitespace().any(|id| id == sid)))
    }

    /// The first `count` ids (0 = all) after `after` that begin with `prefix`, ascending,
    /// of every partition's index: `list_index.lua` reads the buckets that may hold each
    /// partition's first `count` ([`Store::invoke_all`]: one pipeline on a node), and the
    /// ids are cut out of them here. Each partition's part holds its own first `count`, so
    /// the first `count` of them all are the first `count` overall.
    async fn read_indexes(
        &self,
        user: Option<&str>,
        after: Option<&str>,
        prefix: &str,
        count: usize,
    ) -> Result<Vec<String>> {
        // Lexicographic bounds: after the cursor (exclusive) or from the prefix (inclusive),
        // whichever is later; up to the prefix followed by 0xff (above every id character).
        let min: Vec<u8> = match after {
            Some(after) if after >= prefix => format!("({after}").into_bytes(),
            _ if !prefix.is_empty() => format!("[{prefix}").into_bytes(),
            _ => b"-".to_vec(),
        };
        let max: Vec<u8> = if prefix.is_empty() {
            b"+".to_vec()
        } else {
            let mut max = format!("[{prefix}").into_bytes();
            max.push(0xff);
            max
        };
        let calls: Vec<_> = (0..self.keys().partitions())
            .map(|p| scripts::list_index(&self.index_key(p, user), &min, &max, count))
            .collect();
        let buckets: Vec<Vec<String>> = self.invoke_all(&calls).await?;
        let mut ids: Vec<String> = buckets
            .iter()
            .flatten()
            .flat_map(|b| b.split_whitespace())
            .filter(|id| id.starts_with(prefix) && after.is_none_or(|a| *id > a))
            .map(str::to_string)
            .collect();
        ids.sort_unstable();
        if count > 0 {
            ids.truncate(count);
        }
        Ok(ids)
    }

    /// Sets meta fields through `update_session.lua`; `record` is the wal JSON ('' = touch).
    async fn update_session(
        &self,
        sid: &str,
        record: &str,
        fields: &[(&str, String)],
    ) -> Result<()> {
        let keys = self.session_keys(sid)?;
        let call = scripts::update_session(&keys, sid, record, fields);
        let wal_id: String = self.invoke_session(sid, &call).await?;
        if !wal_id.is_empty() {
            self.settle(keys.partition, &wal_id).await?;
        }
        Ok(())
    }

    /// Heartbeat: refreshes `updated_at` and the idle TTL of every key of the session.
    pub async fn touch(&self, sid: &str) -> Result<()> {
        self.update_session(sid, "", &[]).await
    }

    /// Marks the session archived (it stays readable and writable).
    pub async fn archive(&self, sid: &str) -> Result<()> {
        self.update_session(
            sid,
            r#"{"status":"archived"}"#,
            &[("status", "archived".into())],
        )
        .await
    }

    /// Sets (`Some`) or clears (`None`) the session's pending tool calls.
    pub async fn set_pending(&self, sid: &str, pending: Option<&Value>) -> Result<()> {
        let text = pending.map(Value::to_string).unwrap_or_default();
        let record = format!(
            r#"{{"pending":{}}}"#,
            if text.is_empty() { "null" } else { &text }
        );
        self.update_session(sid, &record, &[("pending", text)])
            .await
    }

    /// The session's pending tool calls, if any.
    pub async fn pending(&self, sid: &str) -> Result<Option<Value>> {
        Ok(self.require_session(sid).await?.pending)
    }

    /// Sets the session's current round index.
    pub async fn set_round_index(&self, sid: &str, round_index: i64) -> Result<()> {
        let record = format!(r#"{{"round_index":{round_index}}}"#);
        self.update_session(sid, &record, &[("round_index", round_index.to_string())])
            .await
    }

    /// Physically deletes the session from Redis (and, through the wal, from SQLite).
    ///
    /// With `cascade`, ephemeral and linked descendants are deleted too and detached ones
    /// are re-parented to none; without it, every direct child is re-parented to none.
    /// Returns the number of live sessions removed. Each session's deletion is atomic; the
    /// tree walk is not, but re-running a close finishes an interrupted one.
    pub async fn close_session(&self, sid: &str, cascade: bool) -> Result<u64> {
        let root = self.require_session(sid).await?;
        let mut doomed = Vec::new();
        self.plan_close(sid, cascade, &mut doomed).await?;
        let mut removed = 0;
        for (child, user) in &doomed {
            removed += self.close_one(child, user.as_deref(), true).await?;
        }
        removed += self
            .close_one(sid, root.user_id.as_deref(), cascade)
            .await?;
        if let Some(parent) = &root.parent {
            self.link_child(parent, sid, false).await?;
        }
        Ok(removed)
    }

    /// Walks the children of `sid`: re-parents the ones that survive, and pushes the ones to
    /// delete in post-order (deepest first) with their user id.
    fn plan_close<'a>(
        &'a self,
        sid: &'a str,
        cascade: bool,
        doomed: &'a mut Vec<(String, Option<String>)>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<()>> + Send + 'a>> {
        Box::pin(async move {
            for child in self.children(sid).await? {
                // A child that expired from Redis is restored first, so its index entries
                // and its own children are handled too; one SQLite no longer knows is gone.
                let meta = match self.require_session(&child).await {
                    Ok(meta) => meta,
                    Err(Error::UnknownSession(_)) => continue,
                    Err(e) => return Err(e),
                };
                if !cascade || meta.lifecycle == Lifecycle::Detached {
                    self.update_session(&child, r#"{"parent":null}"#, &[("parent", String::new())])
                        .await?;
                } else {
                    self.plan_close(&child, true, doomed).await?;
                    doomed.push((child, meta.user_id));
                }
            }
            Ok(())
        })
    }

    /// Deletes one session's keys and index entries; returns 1 if it was live.
    async fn close_one(&self, sid: &str, user: Option<&str>, cascade: bool) -> Result<u64> {
        let keys = self.session_keys(sid)?;
        let call = scripts::close_session(self.keys(), &keys, sid, user, cascade);
        let (existed, wal_id): (u64, String) = self.invoke(&call).await?;
        self.settle(keys.partition, &wal_id).await?;
        Ok(existed)
    }
}

/// True for `<prefix>:{p}:sessions` and `<prefix>:{p}:by_user:<uid>` (not their buckets,
/// `<index>:<bound>`: an id holds no `:`).
#[cfg(feature = "spill")]
fn is_session_index(key: &str) -> bool {
    key.ends_with("}:sessions")
        || key
            .split_once("}:by_user:")
            .is_some_and(|(_, uid)| !uid.contains(':'))
}

impl Admin<'_> {
    /// The session's own Redis keys that exist right now (for operators).
    pub async fn session_key_names(&self, sid: &str) -> Result<Vec<String>> {
        let keys = self.store.session_keys(sid)?;
        let mut pipe = redis::pipe();
        for k in keys.own() {
            pipe.exists(k);
        }
        let mut conn = self.store.conn().await?;
        let exists: Vec<bool> = pipe.query_async(&mut conn).await?;
        Ok(keys
            .own()
            .iter()
            .zip(exists)
            .filter(|(_, e)| *e)
            .map(|(k, _)| k.to_string())
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::{META_DEFAULTS, META_FIELDS};

    /// `create_session.lua` writes exactly the fields of [`META_FIELDS`], in its order
    /// (through `set_meta`, which leaves out those at their default).
    #[test]
    fn create_session_lua_writes_the_meta_fields() {
        let lua = include_str!("../lua/create_session.lua");
        let write = &lua[lua.find("set_meta(KEYS[1], {").expect("the meta write")..];
        let write = &write[..write.find("})\n").expect("the write's end")];
        // Its list after the key alternates field, value; fields are quoted literals.
        let args: Vec<&str> = write
            .split_once("KEYS[1], {")
            .unwrap()
            .1
            .split(',')
            .map(str::trim)
            .collect();
        let fields: Vec<&str> = args
            .iter()
            .step_by(2)
            .map(|f| f.trim_matches('\''))
            .collect();
        assert_eq!(fields, META_FIELDS);
    }

    /// The prelude's `META_DEFAULTS` (what the scripts leave out) is [`META_DEFAULTS`] (what
    /// a reader takes for an absent field), and every such field is a meta field.
    #[test]
    fn the_scripts_and_the_reader_agree_on_the_meta_defaults() {
        let lua = include_str!("../lua/_prelude.lua");
        let table = &lua[lua.find("local META_DEFAULTS = {").expect("the table")..];
        // up to the closing brace on a line of its own (a default may be `'{}'`)
        let table = &table[table.find('{').unwrap() + 1..table.find("\n}").unwrap()];
        let lua_defaults: Vec<(String, String)> = table
            .split(',')
            .map(|pair| {
                let (field, value) = pair.split_once('=').expect("field = 'value'");
                let value = value.trim();
                (
                    field.trim().to_string(),
                    value[1..value.len() - 1].to_string(),
                )
            })
            .collect();
        let rust: Vec<(String, String)> = META_DEFAULTS
            .iter()
            .map(|(f, d)| (f.to_string(), d.to_string()))
            .collect();
        assert_eq!(lua_defaults, rust);
        for (field, _) in META_DEFAULTS {
            assert!(META_FIELDS.contains(&field), "{field}");
        }
    }

    /// A meta hash holding only the fields every session has reads as every other field
    /// at its default, as the full hash an earlier build wrote does.
    #[test]
    fn absent_meta_fields_read_as_their_defaults() {
        let lean: std::collections::HashMap<String, String> = [
            ("next_seq", "3"),
            ("ttl", "60"),
            ("ttl_at", "7"),
            ("updated_at", "5"),
            ("created_at", "4"),
        ]
        .into_iter()
        .map(|(f, v)| (f.to_string(), v.to_string()))
        .collect();
        let mut full = lean.clone();
        for (field, default) in META_DEFAULTS {
            full.insert(field.to_string(), default.to_string());
        }
        let lean = super::Session::from_hash("s", lean).unwrap();
        assert_eq!(lean, super::Session::from_hash("s", full).unwrap());
        assert_eq!(
            (lean.kind.as_str(), lean.status.as_str(), &lean.config),
            ("root", "active", &serde_json::json!({}))
        );
    }

    /// Every field a caller reads in [`super::Session`] (but its id) is a meta field.
    #[test]
    fn the_session_shows_meta_fields_only() {
        let session = super::Session::from_hash("s", Default::default()).unwrap();
        let json = serde_json::to_value(session).unwrap();
        for field in json.as_object().unwrap().keys().filter(|k| *k != "id") {
            assert!(META_FIELDS.contains(&field.as_str()), "{field}");
        }
    }
}
