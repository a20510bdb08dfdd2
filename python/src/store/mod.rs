//! `agentstate.Store`: the Python face of `agentstate::Store`. Every capability comes as a
//! sync method (`append`) and an async twin (`aappend`). Both build the same Rust future
//! (one `*_fut` helper per capability); the sync one runs it on the shared tokio runtime with
//! the GIL released, the async one hands it to that runtime and returns an asyncio awaitable
//! bound to the caller's running loop, so one `Store` serves any number of threads and loops.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentstate::test_support::advice::{Front, Situation};
use agentstate::{
    AppendOptions, Compaction, Config, ConsumerOptions, Durability, Lifecycle, MessageQuery,
    NewDecision, NewMessage, NewSession, StartFrom, Usage,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use serde_json::Value;

mod checkpoints;
mod decisions;
mod effects;
mod graphs;
mod inbox;
mod leases;
mod memory;
mod messages;
mod rounds;
mod sessions;
mod users;
mod working;

pub use leases::PyRunLease;

use crate::args::{opt, Whole};
use crate::bridge::{awaitable, block};
use crate::consumer::PyConsumer;
use crate::convert::{py_to_json, to_json, Dicts, Json, OptDict, OptJson};
use crate::errors;
use crate::fork::Local;

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
/// and event loops (all calls share one connection pool and one tokio runtime). Safe across
/// `os.fork()`: a forked child's first call reconnects (its own pool and runtime) and the
/// parent's connections are left alone.
///
/// Build it with ``Store(url, ...)`` (connects now, blocking) or ``await Store.aconnect(url, ...)``.
#[pyclass(frozen, name = "Store", module = "agentstate")]
pub struct PyStore {
    core: Arc<Core>,
    /// When this handle's writes return.
    durability: Durability,
    /// The run lease token this handle's writes carry.
    fence: Option<u64>,
    /// Where this store's calls run, for the wording of their errors.
    pub(crate) at: Arc<Situation>,
}

/// The connection pool a `Store` and the stores derived from it (`with_durability`,
/// `fenced`, a run lease's) share: the core store of the current fork generation, rebuilt
/// from `config` on the first call in a forked child.
struct Core {
    config: Config,
    /// Locked only with the GIL held, never across I/O: `os.fork()` holds the GIL, so no
    /// other thread can hold this lock at a fork and leave it locked in the child.
    current: Mutex<Local<agentstate::Store>>,
}

impl Core {
    /// The core store of this process: the one connected here, or (first call after a
    /// fork) a new one connected now with the same configuration. The parent's is leaked.
    fn store(&self, py: Python<'_>, at: &Arc<Situation>) -> PyResult<agentstate::Store> {
        if let Some(s) = self.slot().get() {
            return Ok(s.clone());
        }
        let fresh = block(py, at, agentstate::Store::connect(self.config.clone()))?;
        let mut slot = self.slot();
        if slot.get().is_none() {
            // Replacing drops the parent's `Local`, which leaks it.
            *slot = Local::new(fresh);
        }
        Ok(slot.get().expect("set above in this generation").clone())
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Local<agentstate::Store>> {
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// `Store(...)`, `Store.aconnect(...)` and the [`Settings`] they take from one parameter
/// list: both constructors turn their arguments into the same connecting future
/// ([`Settings::connecting`]); `Store(...)` blocks on it, `aconnect` returns it as an
/// awaitable. (`twins!` cannot write them: PyO3's `#[new]` returns `Self` and neither takes
/// `self`.)
macro_rules! constructors {
    (
        #[pyo3(signature = $sig:tt)]
        ($($arg:ident: $ty:ty),* $(,)?)
    ) => {
        /// The connection settings both constructors take. `url` and `prefix` fall back to
        /// `AGENTSTATE_REDIS_URL` / `AGENTSTATE_PREFIX`, then to the defaults (the CLI's
        /// precedence).
        struct Settings<'py> {
            $($arg: $ty),*
        }

        #[pymethods]
        impl PyStore {
            /// Connects (blocking) to `url` and checks the namespace (`prefix`, `partitions`).
            /// `url` defaults to `AGENTSTATE_REDIS_URL`, else redis://127.0.0.1:6379; `prefix` to
            /// `AGENTSTATE_PREFIX`, else "as"; `partitions` to 16. The `max_*_bytes` limits bound
            /// payloads (message 1 MiB, working value 512 KiB, state 16 MiB by default).
            /// `memory_user_label`: the position of the user id in a memory namespace, which
            /// `forget_user` erases by (default 1, as in `("users", user_id, ...)`).
            #[new]
            #[pyo3(signature = $sig)]
            #[allow(clippy::too_many_arguments)]
            fn new<'py>(py: Python<'py>, $($arg: $ty),*) -> PyResult<Self> {
                let (at, connecting) = Settings { $($arg),* }.connecting()?;
                block(py, &at, connecting)
            }

            /// Connects without blocking the event loop; same arguments as the constructor.
            #[staticmethod]
            #[pyo3(signature = $sig)]
            #[allow(clippy::too_many_arguments)]
            fn aconnect<'py>(py: Python<'py>, $($arg: $ty),*) -> PyResult<Bound<'py, PyAny>> {
                let (at, connecting) = Settings { $($arg),* }.connecting()?;
                awaitable(py, &at, connecting)
            }
        }
    };
}

constructors! {
    #[pyo3(signature = (url = None, *, prefix = None, partitions = None, session_ttl = None, pool_size = None, daemon_wait = None, durable = false, max_message_bytes = None, max_working_value_bytes = None, max_state_bytes = None, memory_user_label = None))]
    (
        url: Option<String>,
        prefix: Option<String>,
        partitions: Option<Whole<'py>>,
        session_ttl: Option<f64>,
        pool_size: Option<Whole<'py>>,
        daemon_wait: Option<f64>,
        durable: bool,
        max_message_bytes: Option<Whole<'py>>,
        max_working_value_bytes: Option<Whole<'py>>,
        max_state_bytes: Option<Whole<'py>>,
        memory_user_label: Option<Whole<'py>>,
    )
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

impl Settings<'_> {
    /// The future that connects (a `PyStore` with the chosen durability), and the situation
    /// its errors are worded for: what both constructors run, one blocking on it.
    fn connecting(
        self,
    ) -> PyResult<(
        Arc<Situation>,
        impl std::future::Future<Output = agentstate::Result<PyStore>> + Send + 'static,
    )> {
        let durable = durability(self.durable);
        let (c, at) = self.config()?;
        let kept = Arc::clone(&at);
        Ok((at, async move {
            let store = agentstate::Store::connect(c.clone()).await?;
            Ok(PyStore {
                core: Arc::new(Core {
                    config: c,
                    current: Mutex::new(Local::new(store)),
                }),
                durability: durable,
                fence: None,
                at: kept,
            })
        }))
    }

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
        if let Err(why) = agentstate::test_support::address::check(&url) {
            return Err(PyValueError::new_err(format!(
                "{source} {} is not a Redis URL: {why} — {}",
                agentstate::test_support::address::redacted(&url),
                agentstate::test_support::advice::URL_FORMS
            )));
        }
        let mut c = Config::new(url).prefix(prefix);
        if let Some(n) = opt(&self.partitions, "partitions")? {
            c = c.partitions(n);
        }
        if let Some(t) = self.session_ttl {
            c = c.session_ttl(secs("session_ttl", t)?);
        }
        if let Some(n) = opt::<usize>(&self.pool_size, "pool_size")? {
            c.pool_size = n.max(1);
        }
        if let Some(w) = self.daemon_wait {
            c = c.daemon_wait(secs("daemon_wait", w)?);
        }
        if let Some(label) = opt(&self.memory_user_label, "memory_user_label")? {
            c = c.memory_user_label(label);
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
            match opt(&given, name)? {
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

impl PyStore {
    /// The core store this handle's calls use, with its durability and fence: may connect
    /// (the first call in a forked child), hence `py` and the `PyResult`.
    pub(crate) fn s(&self, py: Python<'_>) -> PyResult<agentstate::Store> {
        Ok(self
            .core
            .store(py, &self.at)?
            .with_durability(self.durability)
            .with_fence(self.fence))
    }

    /// A handle on this store's pool with other `durability` and `fence`.
    pub(crate) fn derived(&self, durability: Durability, fence: Option<u64>) -> PyStore {
        PyStore {
            core: Arc::clone(&self.core),
            durability,
            fence,
            at: Arc::clone(&self.at),
        }
    }

    /// The configuration this store connects with.
    fn config(&self) -> &Config {
        &self.core.config
    }
}

#[pymethods]
impl PyStore {
    /// A store sharing this one's pool whose writes return once Redis has them
    /// (`durable=False`) or once SQLite committed them (`durable=True`).
    fn with_durability(&self, durable: bool) -> PyStore {
        self.derived(durability(durable), self.fence)
    }

    /// True when writes wait for SQLite.
    #[getter]
    fn durable(&self) -> bool {
        self.durability == Durability::Durable
    }

    /// The namespace prefix.
    #[getter]
    fn prefix(&self) -> String {
        self.config().namespace.prefix.clone()
    }

    /// The namespace's partition count.
    #[getter]
    fn partitions(&self) -> u32 {
        self.config().namespace.partitions
    }

    /// The Redis URL this store connected to (any password shown as `***`).
    #[getter]
    fn url(&self) -> String {
        agentstate::test_support::address::redacted(&self.config().redis_url)
    }

    /// The limits on payload sizes in bytes: `{"message", "working_value", "state"}`.
    #[getter]
    fn limits(&self) -> std::collections::HashMap<&'static str, usize> {
        let l = self.config().limits;
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
            self.prefix(),
            self.partitions(),
            if self.durable() { "True" } else { "False" }
        )
    }
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
