//! `agentstate.Store`: the Python face of `agentstate::Store`. Every capability comes as a
//! sync method (`append`) and an async twin (`aappend`). Both build the same Rust future
//! (one `*_fut` helper per capability); the sync one runs it on the shared tokio runtime with
//! the GIL released, the async one hands it to that runtime and returns an asyncio awaitable
//! bound to the caller's running loop, so one `Store` serves any number of threads and loops.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use agentstate::advice::{Front, Situation};
use agentstate::{
    AppendOptions, Compaction, Config, ConsumerOptions, Durability, Lifecycle, MessageQuery,
    NewDecision, NewMessage, NewSession, StartFrom, Usage,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use serde_json::Value;

use crate::bridge::{awaitable, block};
use crate::consumer::PyConsumer;
use crate::convert::{py_to_json, to_json, Dicts, Json, OptDict, OptJson};
use crate::errors;
use crate::graph;

fn secs(what: &str, s: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(s).map_err(|_| {
        PyValueError::new_err(format!("{what} must be a non-negative number of seconds"))
    })
}

/// A JSON object argument (`filter`), or None.
fn json_object(
    what: &str,
    v: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<serde_json::Map<String, Value>>> {
    match opt_json(v)? {
        None => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(_) => Err(PyValueError::new_err(format!("{what} must be a dict"))),
    }
}

fn opt_json(v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Value>> {
    v.filter(|o| !o.is_none()).map(py_to_json).transpose()
}

/// A client of one agentstate namespace in one Redis: cheap to share between threads, tasks
/// and event loops (all calls share one connection pool and one tokio runtime).
///
/// Build it with ``Store(url, ...)`` (connects now, blocking) or ``await Store.aconnect(url, ...)``.
#[pyclass(frozen, name = "Store", module = "agentstate")]
pub struct PyStore {
    pub(crate) store: agentstate::Store,
    /// Where this store's calls run, for the wording of their errors.
    pub(crate) at: Arc<Situation>,
}

/// The connection settings both constructors take. `url` and `prefix` fall back to
/// `AGENTSTATE_REDIS_URL` / `AGENTSTATE_PREFIX`, then to the defaults (the CLI's precedence).
#[derive(Debug)]
struct Settings {
    url: Option<String>,
    prefix: Option<String>,
    partitions: u32,
    session_ttl: Option<f64>,
    pool_size: Option<usize>,
    daemon_wait: Option<f64>,
    max_message_bytes: Option<usize>,
    max_working_value_bytes: Option<usize>,
    max_state_bytes: Option<usize>,
}

/// The Redis URL and key prefix a front end uses: the arguments, else `AGENTSTATE_REDIS_URL` /
/// `AGENTSTATE_PREFIX`, else the defaults (the adapters resolve theirs with it).
#[pyfunction]
#[pyo3(signature = (url = None, prefix = None))]
pub fn resolved(url: Option<String>, prefix: Option<String>) -> (String, String) {
    use agentstate::config::{env, DEFAULT_PREFIX, DEFAULT_REDIS_URL};
    (
        env::resolve(url, env::REDIS_URL, DEFAULT_REDIS_URL),
        env::resolve(prefix, env::PREFIX, DEFAULT_PREFIX),
    )
}

impl Settings {
    /// The core configuration, and the situation its errors are worded for. A URL that is
    /// not a Redis URL is refused here, naming where it came from.
    fn config(self) -> PyResult<(Config, Arc<Situation>)> {
        use agentstate::config::{env, DEFAULT_DB, DEFAULT_PREFIX, DEFAULT_REDIS_URL};
        let source = if self.url.is_some() {
            "Store url"
        } else {
            env::REDIS_URL
        };
        let url = env::resolve(self.url, env::REDIS_URL, DEFAULT_REDIS_URL);
        let prefix = env::resolve(self.prefix, env::PREFIX, DEFAULT_PREFIX);
        let at = Arc::new(Situation {
            front: Front::Python,
            url: Some(url.clone()),
            prefix: prefix.clone(),
            db: env::resolve(None, env::DB, DEFAULT_DB).into(),
            ..Situation::default()
        });
        if let Err(why) = agentstate::address::check(&url) {
            return Err(PyValueError::new_err(format!(
                "{source} {} is not a Redis URL: {why} — {}",
                agentstate::address::redacted(&url),
                agentstate::advice::URL_FORMS
            )));
        }
        let mut c = Config::new(url).prefix(prefix).partitions(self.partitions);
        if let Some(t) = self.session_ttl {
            c = c.session_ttl(secs("session_ttl", t)?);
        }
        if let Some(n) = self.pool_size {
            c.pool_size = n.max(1);
        }
        if let Some(w) = self.daemon_wait {
            c = c.daemon_wait(secs("daemon_wait", w)?);
        }
        let mut limits = c.limits;
        for (name, given, limit) in [
            (
                "max_message_bytes",
                self.max_message_bytes,
                &mut limits.message,
            ),
            (
                "max_working_value_bytes",
                self.max_working_value_bytes,
                &mut limits.working_value,
            ),
            ("max_state_bytes", self.max_state_bytes, &mut limits.state),
        ] {
            match given {
                Some(0) => {
                    return Err(PyValueError::new_err(format!(
                        "{name} must be a positive number of bytes"
                    )))
                }
                Some(n) => *limit = n,
                None => {}
            }
        }
        Ok((c.limits(limits), at))
    }
}

fn durability(durable: bool) -> Durability {
    if durable {
        Durability::Durable
    } else {
        Durability::Live
    }
}

#[allow(clippy::too_many_arguments)]
fn new_session(
    id: Option<String>,
    user: Option<String>,
    parent: Option<String>,
    lifecycle: &str,
    ttl: Option<f64>,
    model: Option<String>,
    system_prompt: Option<String>,
    config: Option<Value>,
    metadata: Option<Value>,
) -> PyResult<NewSession> {
    let mut n = NewSession::new();
    if let Some(id) = id {
        n = n.id(id);
    }
    if let Some(u) = user {
        n = n.user(u);
    }
    if let Some(p) = parent {
        let lc: Lifecycle = lifecycle
            .parse()
            .map_err(|e| errors::to_py(e, &errors::python()))?;
        n = n.parent(p, lc);
    }
    if let Some(t) = ttl {
        n = n.ttl(secs("ttl", t)?);
    }
    if let Some(m) = model {
        n = n.model(m);
    }
    if let Some(s) = system_prompt {
        n = n.system_prompt(s);
    }
    if let Some(c) = config {
        n = n.config(c);
    }
    if let Some(m) = metadata {
        n = n.metadata(m);
    }
    Ok(n)
}

/// Reads one message dict (`role` required; `content`, `name`, `tool_calls`,
/// `tool_call_id`, `round_index`, `meta` optional).
pub fn message_from_py(obj: &Bound<'_, PyAny>) -> PyResult<NewMessage> {
    serde_json::from_value(py_to_json(obj)?)
        .map_err(|e| errors::InvalidInput::new_err(format!("message: {e}")))
}

#[allow(clippy::too_many_arguments)]
fn new_message(
    role: String,
    content: Option<String>,
    name: Option<String>,
    tool_calls: Option<Value>,
    tool_call_id: Option<String>,
    round_index: Option<i64>,
    meta: Option<Value>,
) -> NewMessage {
    let mut m = NewMessage::new(role);
    m.content = content;
    m.name = name;
    m.tool_calls = tool_calls;
    m.tool_call_id = tool_call_id;
    m.round_index = round_index;
    m.meta = meta;
    m
}

fn query(all: bool, after: Option<u64>, last: Option<usize>) -> MessageQuery {
    let mut q = if all {
        MessageQuery::all()
    } else {
        MessageQuery::active()
    };
    if let Some(a) = after {
        q = q.after(a);
    }
    if let Some(n) = last {
        q = q.last(n);
    }
    q
}

// The futures behind each sync/async pair. Each takes owned arguments (extracted under the
// GIL) and a clone of the store, so it is `Send + 'static`.
impl PyStore {
    fn s(&self) -> agentstate::Store {
        self.store.clone()
    }

    fn append_fut(
        &self,
        sid: String,
        m: NewMessage,
        idempotency_key: Option<String>,
        expect_seq: Option<u64>,
    ) -> impl Future<Output = agentstate::Result<u64>> + Send + 'static {
        let s = self.s();
        async move {
            let mut o = AppendOptions::new();
            if let Some(k) = idempotency_key {
                o = o.idempotency_key(k);
            }
            if let Some(e) = expect_seq {
                o = o.expect_seq(e);
            }
            s.append_with(&sid, &m, &o).await
        }
    }

    /// Appends in order with consecutive seqs in one atomic step; returns the seqs.
    fn append_many_fut(
        &self,
        sid: String,
        ms: Vec<NewMessage>,
        expect_seq: Option<u64>,
    ) -> impl Future<Output = agentstate::Result<Vec<u64>>> + Send + 'static {
        let s = self.s();
        async move { s.append_many(&sid, &ms, expect_seq).await }
    }

    /// The session's meta (restored when Redis lost it), or None when it exists nowhere.
    fn session_fut(
        &self,
        sid: String,
    ) -> impl Future<Output = agentstate::Result<Option<Json>>> + Send + 'static {
        let s = self.s();
        async move {
            match s.require_session(&sid).await {
                Ok(meta) => Ok(Some(to_json(&meta))),
                Err(agentstate::Error::UnknownSession(_)) => Ok(None),
                Err(e) => Err(e),
            }
        }
    }

    fn pop_fut(
        &self,
        sid: String,
    ) -> impl Future<Output = agentstate::Result<OptJson>> + Send + 'static {
        let s = self.s();
        async move { Ok(OptJson(s.pop_message(&sid).await?.map(|m| to_json(&m).0))) }
    }

    fn contents_fut(
        &self,
        sid: String,
        q: MessageQuery,
    ) -> impl Future<Output = agentstate::Result<Vec<Option<String>>>> + Send + 'static {
        let s = self.s();
        async move {
            let ms = s.messages(&sid, q).await?;
            Ok(ms.into_iter().map(|m| m.content).collect())
        }
    }

    fn messages_fut(
        &self,
        sid: String,
        q: MessageQuery,
    ) -> impl Future<Output = agentstate::Result<Dicts<agentstate::Message>>> + Send + 'static {
        let s = self.s();
        async move { s.messages(&sid, q).await.map(Dicts) }
    }
}

#[pymethods]
impl PyStore {
    /// Connects (blocking) to `url` and checks the namespace (`prefix`, `partitions`).
    /// `url` defaults to `AGENTSTATE_REDIS_URL`, else redis://127.0.0.1:6379; `prefix` to
    /// `AGENTSTATE_PREFIX`, else "as". The `max_*_bytes` limits bound payloads (message
    /// 1 MiB, working value 512 KiB, state 16 MiB by default).
    #[new]
    #[pyo3(signature = (url = None, *, prefix = None, partitions = 16, session_ttl = None, pool_size = None, daemon_wait = None, durable = false, max_message_bytes = None, max_working_value_bytes = None, max_state_bytes = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        url: Option<String>,
        prefix: Option<String>,
        partitions: u32,
        session_ttl: Option<f64>,
        pool_size: Option<usize>,
        daemon_wait: Option<f64>,
        durable: bool,
        max_message_bytes: Option<usize>,
        max_working_value_bytes: Option<usize>,
        max_state_bytes: Option<usize>,
    ) -> PyResult<Self> {
        let (c, at) = Settings {
            url,
            prefix,
            partitions,
            session_ttl,
            pool_size,
            daemon_wait,
            max_message_bytes,
            max_working_value_bytes,
            max_state_bytes,
        }
        .config()?;
        let store = block(py, &at, agentstate::Store::connect(c))?;
        Ok(PyStore {
            store: store.with_durability(durability(durable)),
            at,
        })
    }

    /// Connects without blocking the event loop; same arguments as the constructor.
    #[staticmethod]
    #[pyo3(signature = (url = None, *, prefix = None, partitions = 16, session_ttl = None, pool_size = None, daemon_wait = None, durable = false, max_message_bytes = None, max_working_value_bytes = None, max_state_bytes = None))]
    #[allow(clippy::too_many_arguments)]
    fn aconnect<'py>(
        py: Python<'py>,
        url: Option<String>,
        prefix: Option<String>,
        partitions: u32,
        session_ttl: Option<f64>,
        pool_size: Option<usize>,
        daemon_wait: Option<f64>,
        durable: bool,
        max_message_bytes: Option<usize>,
        max_working_value_bytes: Option<usize>,
        max_state_bytes: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (c, at) = Settings {
            url,
            prefix,
            partitions,
            session_ttl,
            pool_size,
            daemon_wait,
            max_message_bytes,
            max_working_value_bytes,
            max_state_bytes,
        }
        .config()?;
        let kept = Arc::clone(&at);
        awaitable(py, &at, async move {
            let store = agentstate::Store::connect(c).await?;
            Ok(PyStore {
                store: store.with_durability(durability(durable)),
                at: kept,
            })
        })
    }

    /// A store sharing this one's pool whose writes return once Redis has them
    /// (`durable=False`) or once SQLite committed them (`durable=True`).
    fn with_durability(&self, durable: bool) -> PyStore {
        PyStore {
            store: self.store.with_durability(durability(durable)),
            at: Arc::clone(&self.at),
        }
    }

    /// True when writes wait for SQLite.
    #[getter]
    fn durable(&self) -> bool {
        self.store.durability() == Durability::Durable
    }

    /// The namespace prefix.
    #[getter]
    fn prefix(&self) -> String {
        self.store.keys().prefix().to_string()
    }

    /// The namespace's partition count.
    #[getter]
    fn partitions(&self) -> u32 {
        self.store.keys().partitions()
    }

    /// The Redis URL this store connected to (any password shown as `***`).
    #[getter]
    fn url(&self) -> String {
        agentstate::address::redacted(&self.store.config().redis_url)
    }

    /// The limits on payload sizes in bytes: `{"message", "working_value", "state"}`.
    #[getter]
    fn limits(&self) -> std::collections::HashMap<&'static str, usize> {
        let l = self.store.config().limits;
        [
            ("message", l.message),
            ("working_value", l.working_value),
            ("state", l.state),
        ]
        .into_iter()
        .collect()
    }

    fn __repr__(&self) -> String {
        format!(
            "Store(url='{}', prefix='{}', partitions={}, durable={})",
            self.url(),
            self.store.keys().prefix(),
            self.store.keys().partitions(),
            if self.durable() { "True" } else { "False" }
        )
    }

    // ---- sessions -------------------------------------------------------------------------

    /// Creates a session (id generated when None) and returns its id.
    #[pyo3(signature = (id = None, *, user = None, parent = None, lifecycle = "ephemeral", ttl = None, model = None, system_prompt = None, config = None, metadata = None))]
    #[allow(clippy::too_many_arguments)]
    fn create_session(
        &self,
        py: Python<'_>,
        id: Option<String>,
        user: Option<String>,
        parent: Option<String>,
        lifecycle: &str,
        ttl: Option<f64>,
        model: Option<String>,
        system_prompt: Option<String>,
        config: Option<Bound<'_, PyAny>>,
        metadata: Option<Bound<'_, PyAny>>,
    ) -> PyResult<String> {
        let n = new_session(
            id,
            user,
            parent,
            lifecycle,
            ttl,
            model,
            system_prompt,
            opt_json(config.as_ref())?,
            opt_json(metadata.as_ref())?,
        )?;
        let s = self.s();
        block(py, &self.at, async move { s.create_session(&n).await })
    }

    /// Async twin of `create_session`.
    #[pyo3(signature = (id = None, *, user = None, parent = None, lifecycle = "ephemeral", ttl = None, model = None, system_prompt = None, config = None, metadata = None))]
    #[allow(clippy::too_many_arguments)]
    fn acreate_session<'py>(
        &self,
        py: Python<'py>,
        id: Option<String>,
        user: Option<String>,
        parent: Option<String>,
        lifecycle: &str,
        ttl: Option<f64>,
        model: Option<String>,
        system_prompt: Option<String>,
        config: Option<Bound<'py, PyAny>>,
        metadata: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let n = new_session(
            id,
            user,
            parent,
            lifecycle,
            ttl,
            model,
            system_prompt,
            opt_json(config.as_ref())?,
            opt_json(metadata.as_ref())?,
        )?;
        let s = self.s();
        awaitable(py, &self.at, async move { s.create_session(&n).await })
    }

    /// The session's meta as a dict, or None when the session exists nowhere. Like every
    /// other read it restores a session Redis lost (or that expired) from SQLite through the
    /// spill daemon first; `NotLive` when no daemon restored it in time.
    fn session(&self, py: Python<'_>, sid: String) -> PyResult<Option<Json>> {
        block(py, &self.at, self.session_fut(sid))
    }

    /// Async twin of `session`.
    fn asession<'py>(&self, py: Python<'py>, sid: String) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, &self.at, self.session_fut(sid))
    }

    /// The session's meta, restoring it from SQLite through the spill daemon when Redis lost
    /// it; `UnknownSession` when it exists nowhere, `NotLive` when no daemon restored it in time.
    fn require_session(&self, py: Python<'_>, sid: String) -> PyResult<Json> {
        let s = self.s();
        block(py, &self.at, async move {
            s.require_session(&sid).await.map(|x| to_json(&x))
        })
    }

    /// Async twin of `require_session`.
    fn arequire_session<'py>(&self, py: Python<'py>, sid: String) -> PyResult<Bound<'py, PyAny>> {
        let s = self.s();
        awaitable(py, &self.at, async move {
            s.require_session(&sid).await.map(|x| to_json(&x))
        })
    }

    /// Session ids, all or one user's (live and restorable).
    #[pyo3(signature = (user = None))]
    fn list_sessions(&self, py: Python<'_>, user: Option<String>) -> PyResult<Vec<String>> {
        let s = self.s();
        block(py, &self.at, async move {
            s.list_sessions(user.as_deref()).await
        })
    }

    /// Async twin of `list_sessions`.
    #[pyo3(signature = (user = None))]
    fn alist_sessions<'py>(
        &self,
        py: Python<'py>,
        user: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let s = self.s();
        awaitable(py, &self.at, async move {
            s.list_sessions(user.as_deref()).await
        })
    }

    /// Sub-agent session ids of `sid`.
    fn children(&self, py: Python<'_>, sid: String) -> PyResult<Vec<String>> {
        let s = self.s();
        block(py, &self.at, async move { s.children(&sid).await })
    }

    /// Async twin of `children`.
    fn achildren<'py>(&self, py: Python<'py>, sid: String) -> PyResult<Bound<'py, PyAny>> {
        let s = self.s();
        awaitable(py, &self.at, async move { s.children(&sid).await })
    }

    /// Heartbeat: refreshes the session's idle TTL.
    fn touch(&self, py: Python<'_>, sid: String) -> PyResult<()> {
        let s = self.s();
        block(py, &self.at, async move { s.touch(&sid).await })
    }

    /// Async twin of `touch`.
    fn atouch<'py>(&self, py: Python<'py>, sid: String) -> PyResult<Bound<'py, PyAny>> {
        let s = self.s();
        awaitable(py, &self.at, async move { s.touch(&sid).await })
    }

    /// Marks the session archived.
    fn archive(&self, py: Python<'_>, sid: String) -> PyResult<()> {
        let s = self.s();
        block(py, &self.at, async move { s.archive(&sid).await })
    }

    /// Async twin of `archive`.
    fn aarchive<'py>(&self, py: Python<'py>, sid: String) -> PyResult<Bound<'py, PyAny>> {
        let s = self.s();
        awaitable(py, &self.at, async move { s.archive(&sid).await })
    }

    /// Puts checkpoint `checkpoint_id` of namespace `ns` into graph thread `thread` (created
    /// on its first put): `checkpoint` is the document without channel values, `metadata` a
    /// JSON object, `channels` the (channel, version) pairs it holds, `blobs` the (channel,
    /// version, value) triples new in it. One script call, logged to the wal.
    #[pyo3(signature = (thread, ns, checkpoint_id, parent_id, checkpoint, metadata, channels, blobs))]
    #[allow(clippy::too_many_arguments)]
    fn graph_put(
        &self,
        py: Python<'_>,
        thread: String,
        ns: String,
        checkpoint_id: String,
        parent_id: Option<String>,
        checkpoint: Bound<'_, PyAny>,
        metadata: Bound<'_, PyAny>,
        channels: Vec<(String, String)>,
        blobs: Vec<(String, String, String)>,
    ) -> PyResult<()> {
        let a = graph::PutArgs::new(
            thread,
            ns,
            checkpoint_id,
            parent_id,
            py_to_json(&checkpoint)?,
            py_to_json(&metadata)?,
            channels,
            blobs,
        );
        block(py, &self.at, graph::put(self.s(), a))
    }

    /// Async twin of `graph_put`.
    #[pyo3(signature = (thread, ns, checkpoint_id, parent_id, checkpoint, metadata, channels, blobs))]
    #[allow(clippy::too_many_arguments)]
    fn agraph_put<'py>(
        &self,
        py: Python<'py>,
        thread: String,
        ns: String,
        checkpoint_id: String,
        parent_id: Option<String>,
        checkpoint: Bound<'py, PyAny>,
        metadata: Bound<'py, PyAny>,
        channels: Vec<(String, String)>,
        blobs: Vec<(String, String, String)>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let a = graph::PutArgs::new(
            thread,
            ns,
            checkpoint_id,
            parent_id,
            py_to_json(&checkpoint)?,
            py_to_json(&metadata)?,
            channels,
            blobs,
        );
        awaitable(py, &self.at, graph::put(self.s(), a))
    }

    /// Stores task `task_id`'s pending writes, (idx, channel, value) triples, for checkpoint
    /// `checkpoint_id` of `ns`: a repeated (task, idx) is kept, a negative idx overwrites.
    #[allow(clippy::too_many_arguments)]
    fn graph_put_writes(
        &self,
        py: Python<'_>,
        thread: String,
        ns: String,
        checkpoint_id: String,
        task_id: String,
        task_path: String,
        writes: Vec<(i64, String, String)>,
    ) -> PyResult<()> {
        let at = (thread, ns, checkpoint_id, task_id, task_path);
        block(py, &self.at, graph::put_writes(self.s(), at, writes))
    }

    /// Async twin of `graph_put_writes`.
    #[allow(clippy::too_many_arguments)]
    fn agraph_put_writes<'py>(
        &self,
        py: Python<'py>,
        thread: String,
        ns: String,
        checkpoint_id: String,
        task_id: String,
        task_path: String,
        writes: Vec<(i64, String, String)>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let at = (thread, ns, checkpoint_id, task_id, task_path);
        awaitable(py, &self.at, graph::put_writes(self.s(), at, writes))
    }

    /// Checkpoint `checkpoint_id` of `ns` (the greatest id when None) as a tuple dict with its
    /// values and writes; None when there is no such checkpoint or thread. One round trip.
    #[pyo3(signature = (thread, ns, checkpoint_id = None))]
    fn graph_get(
        &self,
        py: Python<'_>,
        thread: String,
        ns: String,
        checkpoint_id: Option<String>,
    ) -> PyResult<OptDict<agentstate::GraphTuple>> {
        block(
            py,
            &self.at,
            graph::get(self.s(), thread, ns, checkpoint_id),
        )
    }

    /// Async twin of `graph_get`.
    #[pyo3(signature = (thread, ns, checkpoint_id = None))]
    fn agraph_get<'py>(
        &self,
        py: Python<'py>,
        thread: String,
        ns: String,
        checkpoint_id: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        awaitable(
            py,
            &self.at,
            graph::get(self.s(), thread, ns, checkpoint_id),
        )
    }

    /// Tuple dicts newest first: of `ns` (every namespace when None), below checkpoint
    /// `before`, whose metadata has every key of `filter`, at most `limit`. One round trip per
    /// page of checkpoints read.
    #[pyo3(signature = (thread, ns = None, before = None, filter = None, limit = None))]
    fn graph_list(
        &self,
        py: Python<'_>,
        thread: String,
        ns: Option<String>,
        before: Option<String>,
        filter: Option<Bound<'_, PyAny>>,
        limit: Option<usize>,
    ) -> PyResult<Dicts<agentstate::GraphTuple>> {
        let filter = json_object("filter", filter.as_ref())?;
        block(
            py,
            &self.at,
            graph::list(self.s(), thread, ns, before, filter, limit),
        )
    }

    /// Async twin of `graph_list`.
    #[pyo3(signature = (thread, ns = None, before = None, filter = None, limit = None))]
    fn agraph_list<'py>(
        &self,
        py: Python<'py>,
        thread: String,
        ns: Option<String>,
        before: Option<String>,
        filter: Option<Bound<'py, PyAny>>,
        limit: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let filter = json_object("filter", filter.as_ref())?;
        awaitable(
            py,
            &self.at,
            graph::list(self.s(), thread, ns, before, filter, limit),
        )
    }

    /// Deletes graph thread `thread` (every namespace) in Redis and SQLite; False when it
    /// did not exist.
    fn graph_delete(&self, py: Python<'_>, thread: String) -> PyResult<bool> {
        block(py, &self.at, graph::delete(self.s(), thread))
    }

    /// Async twin of `graph_delete`.
    fn agraph_delete<'py>(&self, py: Python<'py>, thread: String) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, &self.at, graph::delete(self.s(), thread))
    }

    /// Keeps the latest checkpoint of each namespace (`keep_latest`) or none; returns the
    /// number of checkpoints removed.
    fn graph_prune(&self, py: Python<'_>, thread: String, keep_latest: bool) -> PyResult<u64> {
        block(py, &self.at, graph::prune(self.s(), thread, keep_latest))
    }

    /// Async twin of `graph_prune`.
    fn agraph_prune<'py>(
        &self,
        py: Python<'py>,
        thread: String,
        keep_latest: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, &self.at, graph::prune(self.s(), thread, keep_latest))
    }

    /// Removes every checkpoint whose metadata `run_id` is listed, in every thread; returns
    /// the number removed.
    fn graph_delete_runs(&self, py: Python<'_>, run_ids: Vec<String>) -> PyResult<u64> {
        block(py, &self.at, graph::delete_runs(self.s(), run_ids))
    }

    /// Async twin of `graph_delete_runs`.
    fn agraph_delete_runs<'py>(
        &self,
        py: Python<'py>,
        run_ids: Vec<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, &self.at, graph::delete_runs(self.s(), run_ids))
    }

    /// Copies every checkpoint, value and write of thread `source` into `target` (a fork);
    /// returns the number of checkpoints copied.
    fn graph_copy(&self, py: Python<'_>, source: String, target: String) -> PyResult<u64> {
        block(py, &self.at, graph::copy(self.s(), source, target))
    }

    /// Async twin of `graph_copy`.
    fn agraph_copy<'py>(
        &self,
        py: Python<'py>,
        source: String,
        target: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, &self.at, graph::copy(self.s(), source, target))
    }

    /// Deletes the session everywhere (Redis and SQLite); with `cascade` its linked and
    /// ephemeral descendants too. Returns how many sessions were removed.
    #[pyo3(signature = (sid, cascade = true))]
    fn close_session(&self, py: Python<'_>, sid: String, cascade: bool) -> PyResult<u64> {
        let s = self.s();
        block(
            py,
            &self.at,
            async move { s.close_session(&sid, cascade).await },
        )
    }

    /// Async twin of `close_session`.
    #[pyo3(signature = (sid, cascade = true))]
    fn aclose_session<'py>(
        &self,
        py: Python<'py>,
        sid: String,
        cascade: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let s = self.s();
        awaitable(
            py,
            &self.at,
            async move { s.close_session(&sid, cascade).await },
        )
    }

    /// Sets (or, with None, clears) the pending tool calls.
    fn set_pending(
        &self,
        py: Python<'_>,
        sid: String,
        pending: Option<Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let v = opt_json(pending.as_ref())?;
        let s = self.s();
        block(py, &self.at, async move {
            s.set_pending(&sid, v.as_ref()).await
        })
    }

    /// Async twin of `set_pending`.
    fn aset_pending<'py>(
        &self,
        py: Python<'py>,
        sid: String,
        pending: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let v = opt_json(pending.as_ref())?;
        let s = self.s();
        awaitable(py, &self.at, async move {
            s.set_pending(&sid, v.as_ref()).await
        })
    }

    /// The pending tool calls, or None.
    fn pending(&self, py: Python<'_>, sid: String) -> PyResult<OptJson> {
        let s = self.s();
        block(
            py,
            &self.at,
            async move { s.pending(&sid).await.map(OptJson) },
        )
    }

    /// Async twin of `pending`.
    fn apending<'py>(&self, py: Python<'py>, sid: String) -> PyResult<Bound<'py, PyAny>> {
        let s = self.s();
        awaitable(
            py,
            &self.at,
            async move { s.pending(&sid).await.map(OptJson) },
        )
    }

    // ---- messages -------------------------------------------------------------------------

    /// Appends one message and returns its seq. `idempotency_key`: a repeat returns the
    /// original seq and writes nothing; `expect_seq`: the seq the caller believes comes next
    /// (else `Conflict`).
    #[pyo3(signature = (sid, role, content = None, *, name = None, tool_calls = None, tool_call_id = None, round_index = None, meta = None, idempotency_key = None, expect_seq = None))]
    #[allow(clippy::too_many_arguments)]
    fn append(
        &self,
        py: Python<'_>,
        sid: String,
        role: String,
        content: Option<String>,
        name: Option<String>,
        tool_calls: Option<Bound<'_, PyAny>>,
        tool_call_id: Option<String>,
        round_index: Option<i64>,
        meta: Option<Bound<'_, PyAny>>,
        idempotency_key: Option<String>,
        expect_seq: Option<u64>,
    ) -> PyResult<u64> {
        let m = new_message(
            role,
            content,
            name,
            opt_json(tool_calls.as_ref())?,
            tool_call_id,
            round_index,
            opt_json(meta.as_ref())?,
        );
        block(
            py,
            &self.at,
            self.append_fut(sid, m, idempotency_key, expect_seq),
        )
    }

    /// Async twin of `append`.
    #[pyo3(signature = (sid, role, content = None, *, name = None, tool_calls = None, tool_call_id = None, round_index = None, meta = None, idempotency_key = None, expect_seq = None))]
    #[allow(clippy::too_many_arguments)]
    fn aappend<'py>(
        &self,
        py: Python<'py>,
        sid: String,
        role: String,
        content: Option<String>,
        name: Option<String>,
        tool_calls: Option<Bound<'py, PyAny>>,
        tool_call_id: Option<String>,
        round_index: Option<i64>,
        meta: Option<Bound<'py, PyAny>>,
        idempotency_key: Option<String>,
        expect_seq: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let m = new_message(
            role,
            content,
            name,
            opt_json(tool_calls.as_ref())?,
            tool_call_id,
            round_index,
            opt_json(meta.as_ref())?,
        );
        awaitable(
            py,
            &self.at,
            self.append_fut(sid, m, idempotency_key, expect_seq),
        )
    }

    /// Appends message dicts (``role`` required; ``content``, ``name``, ``tool_calls``,
    /// ``tool_call_id``, ``round_index``, ``meta`` optional) in one atomic step — consecutive
    /// seqs, no other writer in between — and returns their seqs.
    #[pyo3(signature = (sid, messages, *, expect_seq = None))]
    fn append_many(
        &self,
        py: Python<'_>,
        sid: String,
        messages: Vec<Bound<'_, PyAny>>,
        expect_seq: Option<u64>,
    ) -> PyResult<Vec<u64>> {
        let ms = messages
            .iter()
            .map(message_from_py)
            .collect::<PyResult<Vec<_>>>()?;
        block(py, &self.at, self.append_many_fut(sid, ms, expect_seq))
    }

    /// Async twin of `append_many`.
    #[pyo3(signature = (sid, messages, *, expect_seq = None))]
    fn aappend_many<'py>(
        &self,
        py: Python<'py>,
        sid: String,
        messages: Vec<Bound<'py, PyAny>>,
        expect_seq: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let ms = messages
            .iter()
            .map(message_from_py)
            .collect::<PyResult<Vec<_>>>()?;
        awaitable(py, &self.at, self.append_many_fut(sid, ms, expect_seq))
    }

    /// Removes the newest message and returns it (None when there is none); the next append
    /// gets its seq again. `InvalidInput` when it is the note of the latest compaction.
    fn pop_message(&self, py: Python<'_>, sid: String) -> PyResult<OptJson> {
        block(py, &self.at, self.pop_fut(sid))
    }

    /// Async twin of `pop_message`.
    fn apop_message<'py>(&self, py: Python<'py>, sid: String) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, &self.at, self.pop_fut(sid))
    }

    /// Replaces active message `seq` with the message dict `message` (a redaction, an edit);
    /// seq, state and `created_at` stay. `InvalidInput` when there is no such message or it
    /// is compacted out.
    fn replace_message(
        &self,
        py: Python<'_>,
        sid: String,
        seq: u64,
        message: Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let m = message_from_py(&message)?;
        let s = self.s();
        block(py, &self.at, async move {
            s.replace_message(&sid, seq, &m).await
        })
    }

    /// Async twin of `replace_message`.
    fn areplace_message<'py>(
        &self,
        py: Python<'py>,
        sid: String,
        seq: u64,
        message: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let m = message_from_py(&message)?;
        let s = self.s();
        awaitable(py, &self.at, async move {
            s.replace_message(&sid, seq, &m).await
        })
    }

    /// Messages in seq order: active ones (or `all`), only seqs after `after`, only the
    /// `last` n — one round trip. Each is a dict with `seq`, `state`, `created_at`, `role`
    /// and the optional fields that were set.
    #[pyo3(signature = (sid, *, all = false, after = None, last = None))]
    fn messages(
        &self,
        py: Python<'_>,
        sid: String,
        all: bool,
        after: Option<u64>,
        last: Option<usize>,
    ) -> PyResult<Dicts<agentstate::Message>> {
        block(
            py,
            &self.at,
            self.messages_fut(sid, query(all, after, last)),
        )
    }

    /// Async twin of `messages`.
    #[pyo3(signature = (sid, *, all = false, after = None, last = None))]
    fn amessages<'py>(
        &self,
        py: Python<'py>,
        sid: String,
        all: bool,
        after: Option<u64>,
        last: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        awaitable(
            py,
            &self.at,
            self.messages_fut(sid, query(all, after, last)),
        )
    }

    /// Only the contents (str, or None for a message without content) of the messages
    /// `messages(sid, all=..., after=..., last=...)` returns, in seq order: the cheap read
    /// for adapters that keep a whole item as a message's content.
    #[pyo3(signature = (sid, *, all = false, after = None, last = None))]
    fn contents(
        &self,
        py: Python<'_>,
        sid: String,
        all: bool,
        after: Option<u64>,
        last: Option<usize>,
    ) -> PyResult<Vec<Option<String>>> {
        block(
            py,
            &self.at,
            self.contents_fut(sid, query(all, after, last)),
        )
    }

    /// Async twin of `contents`.
    #[pyo3(signature = (sid, *, all = false, after = None, last = None))]
    fn acontents<'py>(
        &self,
        py: Python<'py>,
        sid: String,
        all: bool,
        after: Option<u64>,
        last: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        awaitable(
            py,
            &self.at,
            self.contents_fut(sid, query(all, after, last)),
        )
    }

    /// The message with `seq` (any state), or None.
    fn message(&self, py: Python<'_>, sid: String, seq: u64) -> PyResult<OptJson> {
        let s = self.s();
        block(py, &self.at, async move {
            Ok(OptJson(s.message(&sid, seq).await?.map(|m| to_json(&m).0)))
        })
    }

    /// Async twin of `message`.
    fn amessage<'py>(&self, py: Python<'py>, sid: String, seq: u64) -> PyResult<Bound<'py, PyAny>> {
        let s = self.s();
        awaitable(py, &self.at, async move {
            Ok(OptJson(s.message(&sid, seq).await?.map(|m| to_json(&m).0)))
        })
    }

    /// Compacts `[from_seq, to_seq]` into a system `compact_note`; returns
    /// `(compact_seq, note_seq)`.
    #[pyo3(signature = (sid, from_seq, to_seq, note, *, before_tokens = None, after_tokens = None, round_index = None))]
    #[allow(clippy::too_many_arguments)]
    fn compact(
        &self,
        py: Python<'_>,
        sid: String,
        from_seq: u64,
        to_seq: u64,
        note: String,
        before_tokens: Option<i64>,
        after_tokens: Option<i64>,
        round_index: Option<i64>,
    ) -> PyResult<(u64, u64)> {
        let c = compaction(
            from_seq,
            to_seq,
            note,
            before_tokens,
            after_tokens,
            round_index,
        );
        let s = self.s();
        block(py, &self.at, async move { s.compact(&sid, &c).await })
    }

    /// Async twin of `compact`.
    #[pyo3(signature = (sid, from_seq, to_seq, note, *, before_tokens = None, after_tokens = None, round_index = None))]
    #[allow(clippy::too_many_arguments)]
    fn acompact<'py>(
        &self,
        py: Python<'py>,
        sid: String,
        from_seq: u64,
        to_seq: u64,
        note: String,
        before_tokens: Option<i64>,
        after_tokens: Option<i64>,
        round_index: Option<i64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let c = compaction(
            from_seq,
            to_seq,
            note,
            before_tokens,
            after_tokens,
            round_index,
        );
        let s = self.s();
        awaitable(py, &self.at, async move { s.compact(&sid, &c).await })
    }

    /// The compaction audit.
    fn compactions(&self, py: Python<'_>, sid: String) -> PyResult<Json> {
        let s = self.s();
        block(py, &self.at, async move {
            s.compactions(&sid).await.map(|v| to_json(&v))
        })
    }

    /// Async twin of `compactions`.
    fn acompactions<'py>(&self, py: Python<'py>, sid: String) -> PyResult<Bound<'py, PyAny>> {
        let s = self.s();
        awaitable(py, &self.at, async move {
            s.compactions(&sid).await.map(|v| to_json(&v))
        })
    }

    /// Upserts the token usage of a round.
    #[pyo3(signature = (sid, round_index, prompt_tokens, completion_tokens, *, total_tokens = None, model = None))]
    #[allow(clippy::too_many_arguments)]
    fn record_usage(
        &self,
        py: Python<'_>,
        sid: String,
        round_index: i64,
        prompt_tokens: i64,
        completion_tokens: i64,
        total_tokens: Option<i64>,
        model: Option<String>,
    ) -> PyResult<()> {
        let u = usage(
            round_index,
            prompt_tokens,
            completion_tokens,
            total_tokens,
            model,
        );
        let s = self.s();
        block(py, &self.at, async move { s.record_usage(&sid, &u).await })
    }

    /// Async twin of `record_usage`.
    #[pyo3(signature = (sid, round_index, prompt_tokens, completion_tokens, *, total_tokens = None, model = None))]
    #[allow(clippy::too_many_arguments)]
    fn arecord_usage<'py>(
        &self,
        py: Python<'py>,
        sid: String,
        round_index: i64,
        prompt_tokens: i64,
        completion_tokens: i64,
        total_tokens: Option<i64>,
        model: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let u = usage(
            round_index,
            prompt_tokens,
            completion_tokens,
            total_tokens,
            model,
        );
        let s = self.s();
        awaitable(py, &self.at, async move { s.record_usage(&sid, &u).await })
    }

    /// Usage per round.
    fn usage(&self, py: Python<'_>, sid: String) -> PyResult<Json> {
        let s = self.s();
        block(py, &self.at, async move {
            s.usage(&sid).await.map(|v| to_json(&v))
        })
    }

    /// Async twin of `usage`.
    fn ausage<'py>(&self, py: Python<'py>, sid: String) -> PyResult<Bound<'py, PyAny>> {
        let s = self.s();
        awaitable(py, &self.at, async move {
            s.usage(&sid).await.map(|v| to_json(&v))
        })
    }

    // ---- working state --------------------------------------------------------------------

    /// Sets a working-state value (JSON); with `if_version`, only if the session's version is
    /// still that (else `Conflict`). Returns the new version.
    #[pyo3(signature = (sid, key, value, *, if_version = None))]
    fn set_working(
        &self,
        py: Python<'_>,
        sid: String,
        key: String,
        value: Bound<'_, PyAny>,
        if_version: Option<u64>,
    ) -> PyResult<u64> {
        let v = py_to_json(&value)?;
        let s = self.s();
        block(py, &self.at, async move {
            set_working(&s, &sid, &key, &v, if_version).await
        })
    }

    /// Async twin of `set_working`.
    #[pyo3(signature = (sid, key, value, *, if_version = None))]
    fn aset_working<'py>(
        &self,
        py: Python<'py>,
        sid: String,
        key: String,
        value: Bound<'py, PyAny>,
        if_version: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let v = py_to_json(&value)?;
        let s = self.s();
        awaitable(py, &self.at, async move {
            set_working(&s, &sid, &key, &v, if_version).await
        })
    }

    /// One working-state value, or None.
    fn get_working(&self, py: Python<'_>, sid: String, key: String) -> PyResult<OptJson> {
        let s = self.s();
        block(py, &self.at, async move {
            s.get_working(&sid, &key).await.map(OptJson)
        })
    }

    /// Async twin of `get_working`.
    fn aget_working<'py>(
        &self,
        py: Python<'py>,
        sid: String,
        key: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let s = self.s();
        awaitable(py, &self.at, async move {
            s.get_working(&sid, &key).await.map(OptJson)
        })
    }

    /// All working state: `{"version": n, "values": {...}}`.
    fn working(&self, py: Python<'_>, sid: String) -> PyResult<Json> {
        let s = self.s();
        block(py, &self.at, async move {
            s.working(&sid).await.map(working_json)
        })
    }

    /// Async twin of `working`.
    fn aworking<'py>(&self, py: Python<'py>, sid: String) -> PyResult<Bound<'py, PyAny>> {
        let s = self.s();
        awaitable(py, &self.at, async move {
            s.working(&sid).await.map(working_json)
        })
    }

    /// Deletes a working-state key; returns the new version.
    fn delete_working(&self, py: Python<'_>, sid: String, key: String) -> PyResult<u64> {
        let s = self.s();
        block(
            py,
            &self.at,
            async move { s.delete_working(&sid, &key).await },
        )
    }

    /// Async twin of `delete_working`.
    fn adelete_working<'py>(
        &self,
        py: Python<'py>,
        sid: String,
        key: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let s = self.s();
        awaitable(
            py,
            &self.at,
            async move { s.delete_working(&sid, &key).await },
        )
    }

    /// Clears all working state; returns the new version.
    fn clear_working(&self, py: Python<'_>, sid: String) -> PyResult<u64> {
        let s = self.s();
        block(py, &self.at, async move { s.clear_working(&sid).await })
    }

    /// Async twin of `clear_working`.
    fn aclear_working<'py>(&self, py: Python<'py>, sid: String) -> PyResult<Bound<'py, PyAny>> {
        let s = self.s();
        awaitable(py, &self.at, async move { s.clear_working(&sid).await })
    }

    // ---- checkpoints ----------------------------------------------------------------------

    /// Promotes working state (all of it, or `include_keys`) to a durable checkpoint; returns
    /// its id.
    #[pyo3(signature = (sid, label, include_keys = None))]
    fn checkpoint(
        &self,
        py: Python<'_>,
        sid: String,
        label: String,
        include_keys: Option<Vec<String>>,
    ) -> PyResult<String> {
        let s = self.s();
        block(py, &self.at, async move {
            checkpoint(&s, &sid, &label, include_keys).await
        })
    }

    /// Async twin of `checkpoint`.
    #[pyo3(signature = (sid, label, include_keys = None))]
    fn acheckpoint<'py>(
        &self,
        py: Python<'py>,
        sid: String,
        label: String,
        include_keys: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let s = self.s();
        awaitable(py, &self.at, async move {
            checkpoint(&s, &sid, &label, include_keys).await
        })
    }

    /// Stores a checkpoint of `label` with the given `payload` (a dict) instead of a
    /// snapshot of working state; returns its id. Durable and restored like every checkpoint.
    fn put_checkpoint(
        &self,
        py: Python<'_>,
        sid: String,
        label: String,
        payload: Bound<'_, PyAny>,
    ) -> PyResult<String> {
        let v = py_to_json(&payload)?;
        let s = self.s();
        block(py, &self.at, async move {
            s.put_checkpoint(&sid, &label, &v).await
        })
    }

    /// Async twin of `put_checkpoint`.
    fn aput_checkpoint<'py>(
        &self,
        py: Python<'py>,
        sid: String,
        label: String,
        payload: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let v = py_to_json(&payload)?;
        let s = self.s();
        awaitable(py, &self.at, async move {
            s.put_checkpoint(&sid, &label, &v).await
        })
    }

    /// The latest checkpoint with `label` (`id`, `session_id`, `label`, `created_at`,
    /// `payload`), or None.
    fn checkpoint_latest(&self, py: Python<'_>, sid: String, label: String) -> PyResult<OptJson> {
        let s = self.s();
        block(py, &self.at, async move {
            Ok(OptJson(
                s.checkpoint_latest(&sid, &label)
                    .await?
                    .map(|c| to_json(&c).0),
            ))
        })
    }

    /// Async twin of `checkpoint_latest`.
    fn acheckpoint_latest<'py>(
        &self,
        py: Python<'py>,
        sid: String,
        label: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let s = self.s();
        awaitable(py, &self.at, async move {
            Ok(OptJson(
                s.checkpoint_latest(&sid, &label)
                    .await?
                    .map(|c| to_json(&c).0),
            ))
        })
    }

    /// The latest checkpoint of every label.
    fn checkpoints(&self, py: Python<'_>, sid: String) -> PyResult<Json> {
        let s = self.s();
        block(py, &self.at, async move {
            s.checkpoints(&sid).await.map(|v| to_json(&v))
        })
    }

    /// Async twin of `checkpoints`.
    fn acheckpoints<'py>(&self, py: Python<'py>, sid: String) -> PyResult<Bound<'py, PyAny>> {
        let s = self.s();
        awaitable(py, &self.at, async move {
            s.checkpoints(&sid).await.map(|v| to_json(&v))
        })
    }

    // ---- rounds (StateService) ------------------------------------------------------------

    /// Saves `state` for `user_id` in `session_id` (default `"default"`): no `round_id`
    /// appends max + 1 (1 when empty), an explicit one overwrites. Returns the round id.
    #[pyo3(signature = (user_id, state, session_id = None, round_id = None))]
    fn save_state(
        &self,
        py: Python<'_>,
        user_id: String,
        state: Bound<'_, PyAny>,
        session_id: Option<String>,
        round_id: Option<u64>,
    ) -> PyResult<u64> {
        let v = py_to_json(&state)?;
        let s = self.s();
        block(py, &self.at, async move {
            s.save_state(&user_id, &v, session_id.as_deref(), round_id)
                .await
        })
    }

    /// Async twin of `save_state`.
    #[pyo3(signature = (user_id, state, session_id = None, round_id = None))]
    fn asave_state<'py>(
        &self,
        py: Python<'py>,
        user_id: String,
        state: Bound<'py, PyAny>,
        session_id: Option<String>,
        round_id: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let v = py_to_json(&state)?;
        let s = self.s();
        awaitable(py, &self.at, async move {
            s.save_state(&user_id, &v, session_id.as_deref(), round_id)
                .await
        })
    }

    /// The state of `round_id` (the latest when None), or None when absent.
    #[pyo3(signature = (user_id, session_id = None, round_id = None))]
    fn export_state(
        &self,
        py: Python<'_>,
        user_id: String,
        session_id: Option<String>,
        round_id: Option<u64>,
    ) -> PyResult<OptJson> {
        let s = self.s();
        block(py, &self.at, async move {
            s.export_state(&user_id, session_id.as_deref(), round_id)
                .await
                .map(OptJson)
        })
    }

    /// Async twin of `export_state`.
    #[pyo3(signature = (user_id, session_id = None, round_id = None))]
    fn aexport_state<'py>(
        &self,
        py: Python<'py>,
        user_id: String,
        session_id: Option<String>,
        round_id: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let s = self.s();
        awaitable(py, &self.at, async move {
            s.export_state(&user_id, session_id.as_deref(), round_id)
                .await
                .map(OptJson)
        })
    }

    // ---- decisions ------------------------------------------------------------------------

    /// Records a decision in the write-ahead decision log; returns its id.
    #[pyo3(signature = (sid, decision, rationale, *, action = None, meta = None))]
    fn record_decision(
        &self,
        py: Python<'_>,
        sid: String,
        decision: String,
        rationale: String,
        action: Option<String>,
        meta: Option<Bound<'_, PyAny>>,
    ) -> PyResult<String> {
        let d = new_decision(decision, rationale, action, opt_json(meta.as_ref())?);
        let s = self.s();
        block(
            py,
            &self.at,
            async move { s.record_decision(&sid, &d).await },
        )
    }

    /// Async twin of `record_decision`.
    #[pyo3(signature = (sid, decision, rationale, *, action = None, meta = None))]
    fn arecord_decision<'py>(
        &self,
        py: Python<'py>,
        sid: String,
        decision: String,
        rationale: String,
        action: Option<String>,
        meta: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let d = new_decision(decision, rationale, action, opt_json(meta.as_ref())?);
        let s = self.s();
        awaitable(
            py,
            &self.at,
            async move { s.record_decision(&sid, &d).await },
        )
    }

    /// Records the outcome of a decision; False when it had one already.
    fn record_outcome(
        &self,
        py: Python<'_>,
        decision_id: String,
        outcome: String,
    ) -> PyResult<bool> {
        let s = self.s();
        block(py, &self.at, async move {
            s.record_outcome(&decision_id, &outcome).await
        })
    }

    /// Async twin of `record_outcome`.
    fn arecord_outcome<'py>(
        &self,
        py: Python<'py>,
        decision_id: String,
        outcome: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let s = self.s();
        awaitable(py, &self.at, async move {
            s.record_outcome(&decision_id, &outcome).await
        })
    }

    /// Decisions without an outcome (all sessions, or one), oldest first.
    #[pyo3(signature = (sid = None))]
    fn incomplete_decisions(&self, py: Python<'_>, sid: Option<String>) -> PyResult<Json> {
        let s = self.s();
        block(py, &self.at, async move {
            s.incomplete_decisions(sid.as_deref())
                .await
                .map(|v| to_json(&v))
        })
    }

    /// Async twin of `incomplete_decisions`.
    #[pyo3(signature = (sid = None))]
    fn aincomplete_decisions<'py>(
        &self,
        py: Python<'py>,
        sid: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let s = self.s();
        awaitable(py, &self.at, async move {
            s.incomplete_decisions(sid.as_deref())
                .await
                .map(|v| to_json(&v))
        })
    }

    /// Joins consumer group `group` as `name` on every partition's decisions stream.
    /// `from_start`: a group created now starts from the oldest retained entry. Times are
    /// seconds.
    #[pyo3(signature = (group, name, *, from_start = false, min_idle = 30.0, max_deliveries = 5, block = 2.0, count = 100))]
    #[allow(clippy::too_many_arguments)]
    fn consumer(
        &self,
        py: Python<'_>,
        group: String,
        name: String,
        from_start: bool,
        min_idle: f64,
        max_deliveries: u32,
        block: f64,
        count: usize,
    ) -> PyResult<PyConsumer> {
        let o = consumer_options(from_start, min_idle, max_deliveries, block, count)?;
        let s = self.s();
        let c = self::block(
            py,
            &self.at,
            async move { s.consumer(&group, &name, o).await },
        )?;
        Ok(PyConsumer::new(c, Arc::clone(&self.at)))
    }

    /// Async twin of `consumer`.
    #[pyo3(signature = (group, name, *, from_start = false, min_idle = 30.0, max_deliveries = 5, block = 2.0, count = 100))]
    #[allow(clippy::too_many_arguments)]
    fn aconsumer<'py>(
        &self,
        py: Python<'py>,
        group: String,
        name: String,
        from_start: bool,
        min_idle: f64,
        max_deliveries: u32,
        block: f64,
        count: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let o = consumer_options(from_start, min_idle, max_deliveries, block, count)?;
        let s = self.s();
        let at = Arc::clone(&self.at);
        awaitable(py, &self.at, async move {
            s.consumer(&group, &name, o)
                .await
                .map(|c| PyConsumer::new(c, at))
        })
    }

    /// Up to `count` dead letters per partition.
    #[pyo3(signature = (count = 100))]
    fn dead_letters(&self, py: Python<'_>, count: usize) -> PyResult<Json> {
        let s = self.s();
        block(py, &self.at, async move {
            s.dead_letters(count).await.map(|v| to_json(&v))
        })
    }

    /// Async twin of `dead_letters`.
    #[pyo3(signature = (count = 100))]
    fn adead_letters<'py>(&self, py: Python<'py>, count: usize) -> PyResult<Bound<'py, PyAny>> {
        let s = self.s();
        awaitable(py, &self.at, async move {
            s.dead_letters(count).await.map(|v| to_json(&v))
        })
    }

    // ---- user data ------------------------------------------------------------------------

    /// Stores a user-attributed value (JSON).
    fn set_user_value(
        &self,
        py: Python<'_>,
        user: String,
        key: String,
        value: Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let v = py_to_json(&value)?;
        let s = self.s();
        block(py, &self.at, async move {
            s.set_user_value(&user, &key, &v).await
        })
    }

    /// Async twin of `set_user_value`.
    fn aset_user_value<'py>(
        &self,
        py: Python<'py>,
        user: String,
        key: String,
        value: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let v = py_to_json(&value)?;
        let s = self.s();
        awaitable(py, &self.at, async move {
            s.set_user_value(&user, &key, &v).await
        })
    }

    /// A user-attributed value, or None.
    fn user_value(&self, py: Python<'_>, user: String, key: String) -> PyResult<OptJson> {
        let s = self.s();
        block(py, &self.at, async move {
            s.user_value(&user, &key).await.map(OptJson)
        })
    }

    /// Async twin of `user_value`.
    fn auser_value<'py>(
        &self,
        py: Python<'py>,
        user: String,
        key: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let s = self.s();
        awaitable(py, &self.at, async move {
            s.user_value(&user, &key).await.map(OptJson)
        })
    }

    /// Deletes one user value; False when there was none.
    fn delete_user_value(&self, py: Python<'_>, user: String, key: String) -> PyResult<bool> {
        let s = self.s();
        block(py, &self.at, async move {
            s.delete_user_value(&user, &key).await
        })
    }

    /// Async twin of `delete_user_value`.
    fn adelete_user_value<'py>(
        &self,
        py: Python<'py>,
        user: String,
        key: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let s = self.s();
        awaitable(py, &self.at, async move {
            s.delete_user_value(&user, &key).await
        })
    }

    /// Erases everything stored for the user (Redis now, SQLite at the next flush); returns
    /// the receipt.
    fn forget_user(&self, py: Python<'_>, user: String) -> PyResult<Json> {
        let s = self.s();
        block(py, &self.at, async move {
            s.forget_user(&user).await.map(|r| to_json(&r))
        })
    }

    /// Async twin of `forget_user`.
    fn aforget_user<'py>(&self, py: Python<'py>, user: String) -> PyResult<Bound<'py, PyAny>> {
        let s = self.s();
        awaitable(py, &self.at, async move {
            s.forget_user(&user).await.map(|r| to_json(&r))
        })
    }
}

fn compaction(
    from: u64,
    to: u64,
    note: String,
    before: Option<i64>,
    after: Option<i64>,
    round: Option<i64>,
) -> Compaction {
    let mut c = Compaction::new(from, to, note);
    c.before_tokens = before;
    c.after_tokens = after;
    c.round_index = round;
    c
}

fn usage(
    round: i64,
    prompt: i64,
    completion: i64,
    total: Option<i64>,
    model: Option<String>,
) -> Usage {
    let mut u = Usage::new(round, prompt, completion);
    if let Some(t) = total {
        u = u.total(t);
    }
    if let Some(m) = model {
        u = u.model(m);
    }
    u
}

fn new_decision(
    decision: String,
    rationale: String,
    action: Option<String>,
    meta: Option<Value>,
) -> NewDecision {
    let mut d = NewDecision::new(decision, rationale);
    if let Some(a) = action {
        d = d.action(a);
    }
    if let Some(m) = meta {
        d = d.meta(m);
    }
    d
}

fn consumer_options(
    from_start: bool,
    min_idle: f64,
    max_deliveries: u32,
    block: f64,
    count: usize,
) -> PyResult<ConsumerOptions> {
    Ok(ConsumerOptions::new()
        .start(if from_start {
            StartFrom::Beginning
        } else {
            StartFrom::Now
        })
        .min_idle(secs("min_idle", min_idle)?)
        .max_deliveries(max_deliveries)
        .block(secs("block", block)?)
        .count(count))
}

async fn set_working(
    s: &agentstate::Store,
    sid: &str,
    key: &str,
    v: &Value,
    if_version: Option<u64>,
) -> agentstate::Result<u64> {
    match if_version {
        Some(ver) => s.set_working_if_version(sid, key, v, ver).await,
        None => s.set_working(sid, key, v).await,
    }
}

async fn checkpoint(
    s: &agentstate::Store,
    sid: &str,
    label: &str,
    keys: Option<Vec<String>>,
) -> agentstate::Result<String> {
    let refs: Option<Vec<&str>> = keys
        .as_ref()
        .map(|k| k.iter().map(String::as_str).collect());
    s.checkpoint(sid, label, refs.as_deref()).await
}

fn working_json(w: agentstate::WorkingState) -> Json {
    Json(serde_json::json!({"version": w.version, "values": Value::Object(w.values)}))
}
