//! Run leases: acquire, renew, release and read a session's lease; fenced handles; and
//! `Store.run_lease`, a held lease renewed in the background (the core's `RunLease`) as a
//! context manager for `with` and `async with`.

use std::sync::Mutex;

use agentstate::{Error, Lease, RunLease};
use pyo3::exceptions::{PyRuntimeError, PyValueError};

use super::*;
use crate::args::{opt, Whole};
use crate::fork::Local;

/// A lease as Python sees it: `{"owner", "token", "expires_at"}`.
fn lease_json(l: &Lease) -> Json {
    Json(serde_json::json!({"owner": l.owner, "token": l.token, "expires_at": l.expires_at}))
}

/// A lease TTL in ms as the core takes it (the core refuses 0 and absurd values).
fn ttl(ttl_ms: u64) -> Duration {
    Duration::from_millis(ttl_ms)
}

twins! {
    impl PyStore;

    /// Takes session `sid`'s run lease for `owner` for `ttl_ms` if it is free, expired or
    /// `owner`'s already (which keeps its token): `{"owner", "token", "expires_at"}`.
    /// `Leased` while another owner holds it.
    fn acquire_lease / aacquire_lease(
        self,
        py,
        sid: String,
        owner: String,
        ttl_ms: Whole<'_>,
    ) -> Json {
        let ttl = ttl(ttl_ms.get("ttl_ms")?);
        let s = self.s(py)?;
        async move { s.acquire_lease(&sid, &owner, ttl).await.map(|l| lease_json(&l)) }
    }

    /// Extends the lease for `ttl_ms` from now while `owner` still holds it with `token`;
    /// False when it does not (the run must stop).
    fn renew_lease / arenew_lease(
        self,
        py,
        sid: String,
        owner: String,
        token: Whole<'_>,
        ttl_ms: Whole<'_>,
    ) -> bool {
        let (token, ttl) = (token.get("token")?, ttl(ttl_ms.get("ttl_ms")?));
        let s = self.s(py)?;
        async move { s.renew_lease(&sid, &owner, token, ttl).await }
    }

    /// Drops the lease if `owner` holds it with `token`; False when it did not.
    fn release_lease / arelease_lease(
        self,
        py,
        sid: String,
        owner: String,
        token: Whole<'_>,
    ) -> bool {
        let token = token.get("token")?;
        let s = self.s(py)?;
        async move { s.release_lease(&sid, &owner, token).await }
    }

    /// Who holds session `sid`'s run lease (`{"owner", "token", "expires_at"}`), or None.
    fn lease_holder / alease_holder(self, py, sid: String) -> OptJson {
        let s = self.s(py)?;
        async move { Ok(OptJson(s.lease_holder(&sid).await?.map(|l| lease_json(&l).0))) }
    }
}

#[pymethods]
impl PyStore {
    /// A store sharing this one's pool whose appends, history edits, working-state writes,
    /// checkpoints, `compact`, `effect_begin` and `effect_finish` carry run lease token
    /// `token` (None: no fence): once another process took the session's lease they raise
    /// `Fenced` and write nothing.
    #[pyo3(signature = (token))]
    fn fenced(&self, token: Option<Whole<'_>>) -> PyResult<PyStore> {
        Ok(self.derived(self.durability, opt(&token, "token")?))
    }

    /// The run lease token this store's writes carry, or None.
    #[getter]
    fn fence(&self) -> Option<u64> {
        self.fence
    }

    /// Session `sid`'s run lease as a context manager: ``with store.run_lease(sid) as run:``
    /// (or ``async with``) acquires it, renews it in the background every third of `ttl_ms`
    /// (default 30000) and releases it when the block ends. Write through ``run.store``: its
    /// writes carry the lease's token. `owner` defaults to ``host:pid:random``; `wait`
    /// (seconds) keeps trying while another owner holds the lease, else `Leased` at once.
    #[pyo3(signature = (sid, owner = None, ttl_ms = None, *, wait = None))]
    fn run_lease(
        &self,
        py: Python<'_>,
        sid: String,
        owner: Option<String>,
        ttl_ms: Option<Whole<'_>>,
        wait: Option<f64>,
    ) -> PyResult<PyRunLease> {
        let ttl_ms = opt(&ttl_ms, "ttl_ms")?.unwrap_or(30_000);
        let owner = match owner {
            Some(o) => o,
            None => default_owner(py)?,
        };
        Ok(PyRunLease {
            store: self.derived(self.durability, None),
            at: Arc::clone(&self.at),
            sid,
            owner,
            ttl: ttl(ttl_ms),
            wait: wait.map(|w| secs("wait", w)).transpose()?,
            held: Arc::new(Mutex::new(Held::Not)),
        })
    }
}

/// `host:pid:random`: names this process, and the random part tells two leases of one
/// process apart (same owner re-acquiring would share the lease and its token).
fn default_owner(py: Python<'_>) -> PyResult<String> {
    let host: String = py
        .import("socket")?
        .call_method0("gethostname")?
        .extract()?;
    let pid: u32 = py.import("os")?.call_method0("getpid")?.extract()?;
    let random: String = py
        .import("secrets")?
        .call_method1("token_hex", (4,))?
        .extract()?;
    // The core refuses whitespace in an owner; a host name has none, but be sure.
    let host: String = host.chars().filter(|c| !c.is_whitespace()).collect();
    Ok(format!("{host}:{pid}:{random}"))
}

/// Where a `RunLease` object stands: entered once, at most.
enum Held {
    /// Not entered yet.
    Not,
    /// Held: the core's guard renews it (in the process that acquired it: a forked child
    /// leaves it, and its renewal, to the parent).
    Running(Local<RunLease>),
    /// Released (or its release was attempted): the token stays readable.
    Ended { lease: Lease, lost: bool },
}

/// A session's run lease held by this process while a `with` / `async with` block runs
/// (``Store.run_lease``): renewed in the background, released at the block's end.
#[pyclass(frozen, name = "RunLease", module = "agentstate")]
pub struct PyRunLease {
    /// The store it was made from, unfenced: acquires through it; `run.store` is it fenced.
    store: PyStore,
    at: Arc<Situation>,
    sid: String,
    owner: String,
    ttl: Duration,
    /// How long acquiring keeps trying while another owner holds the lease.
    wait: Option<Duration>,
    /// Shared with the acquiring future of `__aenter__`, which fills it in off the GIL.
    held: Arc<Mutex<Held>>,
}

/// Acquires `sid`'s run lease, retrying while another owner holds it until `wait` passed.
async fn acquire(
    s: agentstate::Store,
    sid: String,
    owner: String,
    ttl: Duration,
    wait: Option<Duration>,
    held: Arc<Mutex<Held>>,
) -> agentstate::Result<()> {
    let deadline = wait.map(|w| tokio::time::Instant::now() + w);
    let mut pause = Duration::from_millis(20);
    let run = loop {
        match s.run_lease(&sid, &owner, ttl).await {
            Err(Error::Leased { .. })
                if deadline.is_some_and(|d| tokio::time::Instant::now() < d) =>
            {
                let left = deadline.map_or(pause, |d| {
                    d.saturating_duration_since(tokio::time::Instant::now())
                });
                tokio::time::sleep(pause.min(left)).await;
                pause = (pause * 2).min(Duration::from_millis(500));
            }
            Err(Error::Leased {
                holder,
                token,
                expires_at,
                ..
            }) if wait.is_some() => {
                return Err(Error::Leased {
                    holder,
                    token,
                    expires_at,
                    waited: wait,
                })
            }
            other => break other?,
        }
    };
    *held.lock().unwrap_or_else(|p| p.into_inner()) = Held::Running(Local::new(run));
    Ok(())
}

/// Releases a held lease; the token and fenced store stay readable.
async fn release(held: Arc<Mutex<Held>>) -> agentstate::Result<bool> {
    let taken = {
        let mut h = held.lock().unwrap_or_else(|p| p.into_inner());
        match std::mem::replace(&mut *h, Held::Not) {
            Held::Running(run) => {
                *h = Held::Ended {
                    lease: run.peek().lease().clone(),
                    lost: run.peek().is_lost(),
                };
                // In a forked child the lease is the parent's: left held (and leaked).
                run.take()
            }
            other => {
                *h = other;
                None
            }
        }
    };
    match taken {
        Some(run) => run.release().await,
        None => Ok(false),
    }
}

impl PyRunLease {
    /// Refuses a second entry: a lease object is one run.
    fn check_fresh(&self) -> PyResult<()> {
        match *self.held.lock().unwrap_or_else(|p| p.into_inner()) {
            Held::Not => Ok(()),
            _ => Err(PyRuntimeError::new_err(
                "this RunLease was entered already; call store.run_lease(...) again for another run",
            )),
        }
    }

    /// The future acquiring this lease (for `__enter__` and `__aenter__`).
    fn acquiring(
        &self,
        py: Python<'_>,
    ) -> PyResult<impl std::future::Future<Output = agentstate::Result<()>> + Send + 'static> {
        Ok(acquire(
            self.store.s(py)?,
            self.sid.clone(),
            self.owner.clone(),
            self.ttl,
            self.wait,
            Arc::clone(&self.held),
        ))
    }

    /// Reads the lease (and its fenced store) once acquired.
    fn with_lease<T>(&self, f: impl FnOnce(&Lease, bool) -> T) -> PyResult<T> {
        match &*self.held.lock().unwrap_or_else(|p| p.into_inner()) {
            Held::Running(run) => Ok(f(run.peek().lease(), run.peek().is_lost())),
            Held::Ended { lease, lost } => Ok(f(lease, *lost)),
            Held::Not => Err(PyValueError::new_err(
                "the run lease is not acquired yet: use it in `with` or `async with`",
            )),
        }
    }
}

#[pymethods]
impl PyRunLease {
    /// Acquires the lease (blocking; `wait` as given to `run_lease`) and returns itself.
    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        let me = slf.get();
        me.check_fresh()?;
        block(slf.py(), &me.at, me.acquiring(slf.py())?)?;
        Ok(slf)
    }

    /// Releases the lease; never suppresses the block's exception.
    fn __exit__(
        &self,
        py: Python<'_>,
        _t: Option<Bound<'_, PyAny>>,
        _v: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        block(py, &self.at, release(Arc::clone(&self.held)))?;
        Ok(false)
    }

    /// Acquires the lease without blocking the event loop; resolves to itself.
    fn __aenter__<'py>(slf: Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let me = slf.get();
        me.check_fresh()?;
        let acquiring = me.acquiring(slf.py())?;
        let this = Entered(slf.clone().unbind());
        awaitable(slf.py(), &me.at, async move {
            acquiring.await?;
            Ok(this)
        })
    }

    /// Releases the lease without blocking the event loop; never suppresses the block's
    /// exception.
    fn __aexit__<'py>(
        &self,
        py: Python<'py>,
        _t: Option<Bound<'py, PyAny>>,
        _v: Option<Bound<'py, PyAny>>,
        _tb: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let held = Arc::clone(&self.held);
        awaitable(py, &self.at, async move {
            release(held).await?;
            Ok(false)
        })
    }

    /// The session id.
    #[getter]
    fn sid(&self) -> String {
        self.sid.clone()
    }

    /// Who holds the lease (this process).
    #[getter]
    fn owner(&self) -> String {
        self.owner.clone()
    }

    /// The fencing token.
    #[getter]
    fn token(&self) -> PyResult<u64> {
        self.with_lease(|l, _| l.token)
    }

    /// The lease as acquired: `{"owner", "token", "expires_at"}`.
    #[getter]
    fn lease(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let j = self.with_lease(|l, _| lease_json(l))?;
        Ok(j.into_pyobject(py)?.unbind())
    }

    /// The store whose writes carry this lease's token (`Fenced` once it is lost).
    #[getter]
    fn store(&self) -> PyResult<PyStore> {
        let token = self.with_lease(|l, _| l.token)?;
        Ok(self.store.derived(self.store.durability, Some(token)))
    }

    /// True once renewal failed (another owner took the lease, or Redis stayed unreachable
    /// until it expired): stop the run, its fenced writes are refused.
    #[getter]
    fn lost(&self) -> PyResult<bool> {
        self.with_lease(|_, lost| lost)
    }

    fn __repr__(&self) -> String {
        let token = self
            .with_lease(|l, _| l.token.to_string())
            .unwrap_or_else(|_| "-".into());
        format!(
            "RunLease(sid='{}', owner='{}', token={token})",
            self.sid, self.owner
        )
    }
}

/// The entered `RunLease` on its way back to Python from `__aenter__`'s future.
struct Entered(Py<PyRunLease>);

impl<'py> IntoPyObject<'py> for Entered {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;
    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        Ok(self.0.into_bound(py).into_any())
    }
}
