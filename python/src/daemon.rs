//! `agentstate.SpillDaemon`: the spill daemon of `agentstate spill`, run in this process on
//! the shared runtime. It takes partitions through the same leases as every other daemon,
//! so it runs beside `agentstate spill` processes and other in-process daemons.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentstate::config::{env, DEFAULT_DB, DEFAULT_PREFIX, DEFAULT_REDIS_URL};
use agentstate::test_support::advice::{Front, Situation};
use agentstate::{Config, SpillConfig};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::args::{opt, Whole};
use crate::bridge::{block, runtime};
use crate::errors;
use crate::fork::Local;

/// A running daemon: how to stop it and the task to wait for.
struct Running {
    cancel: CancellationToken,
    task: JoinHandle<agentstate::Result<()>>,
    owner: String,
}

/// The spill daemon in a background task of this process: flushes the namespace's streams
/// to SQLite, restores sessions Redis lost, trims. ``start()`` returns once its first pass
/// has checked the namespace (creates are allowed from then on); ``stop()`` drains what it
/// took, commits, and releases its leases. Also a context manager. A daemon started before
/// `os.fork()` keeps running in the parent only: in the child it reads as not running, its
/// `stop()` does nothing (the leases and the SQLite handle are the parent's), and `start()`
/// starts the child's own daemon.
#[pyclass(frozen, name = "SpillDaemon", module = "agentstate")]
pub struct PySpillDaemon {
    config: Config,
    spill: SpillConfig,
    at: Arc<Situation>,
    /// Locked only with the GIL held (so never across a fork); a daemon of another
    /// generation is the parent's and leaked here.
    running: Mutex<Option<Local<Running>>>,
}

fn secs(what: &str, s: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(s)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            PyValueError::new_err(format!("{what} must be a positive number of seconds"))
        })
}

impl PySpillDaemon {
    fn state(&self) -> std::sync::MutexGuard<'_, Option<Local<Running>>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads this process's daemon, if it runs one (not the parent's, after a fork).
    fn with_running<T>(&self, f: impl FnOnce(&Running) -> T) -> Option<T> {
        self.state().as_ref().and_then(Local::get).map(f)
    }
}

#[pymethods]
impl PySpillDaemon {
    /// A daemon for namespace `prefix` of the Redis at `url`, writing SQLite file `db`.
    /// `url`, `db` and `prefix` default to `AGENTSTATE_REDIS_URL`, `AGENTSTATE_DB`,
    /// `AGENTSTATE_PREFIX`, then to redis://127.0.0.1:6379, ./agentstate.db and "as" (the
    /// CLI's precedence); `partitions` to 16. `interval`: longest time between full passes
    /// (writes do not wait for it: the daemon wakes on each); `lease`: how long after this
    /// daemon dies the other daemons take its partitions (seconds). `wal_budget` (bytes) and
    /// `spool` (a directory): past the budget, or once the durable tier has failed for 2 s,
    /// the daemon moves the wal into its spool there (defaults: half of Redis' free memory
    /// under maxmemory, else 256 MiB; beside the SQLite file).
    #[new]
    #[pyo3(signature = (url = None, db = None, *, prefix = None, partitions = None, interval = 1.0, lease = 3.0, wal_budget = None, spool = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        url: Option<String>,
        db: Option<PathBuf>,
        prefix: Option<String>,
        partitions: Option<Whole<'_>>,
        interval: f64,
        lease: f64,
        wal_budget: Option<Whole<'_>>,
        spool: Option<PathBuf>,
    ) -> PyResult<Self> {
        let partitions = opt(&partitions, "partitions")?;
        let wal_budget = opt(&wal_budget, "wal_budget")?;
        let url = env::resolve(url, env::REDIS_URL, DEFAULT_REDIS_URL);
        let prefix = env::resolve(prefix, env::PREFIX, DEFAULT_PREFIX);
        let db = db.unwrap_or_else(|| env::resolve(None, env::DB, DEFAULT_DB).into());
        if let Err(why) = agentstate::test_support::address::check(&url) {
            return Err(PyValueError::new_err(format!(
                "SpillDaemon url {} is not a Redis URL: {why} — {}",
                agentstate::test_support::address::redacted(&url),
                agentstate::test_support::advice::URL_FORMS
            )));
        }
        let at = Arc::new(Situation {
            front: Front::Python,
            url: Some(url.clone()),
            prefix: prefix.clone(),
            db: db.clone(),
            ..Situation::default()
        });
        let mut config = Config::new(url).prefix(prefix);
        if let Some(n) = partitions {
            config = config.partitions(n);
        }
        let mut spill = SpillConfig::new(db)
            .interval(secs("interval", interval)?)
            .lease_ttl(secs("lease", lease)?);
        if let Some(bytes) = wal_budget {
            spill = spill.wal_budget(bytes);
        }
        if let Some(dir) = spool {
            spill = spill.spool(dir);
        }
        Ok(PySpillDaemon {
            config,
            spill,
            at,
            running: Mutex::new(None),
        })
    }

    /// Starts the daemon (a no-op when it runs): connects, opens SQLite, runs a first pass
    /// (taking the partitions no other daemon holds), then keeps running in the background.
    /// Returns the daemon, so ``d = SpillDaemon(url, db).start()`` reads naturally.
    fn start(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        let this = slf.get();
        if this.with_running(|_| ()).is_some() {
            return Ok(slf);
        }
        let (config, spill) = (this.config.clone(), this.spill.clone());
        let daemon = block(slf.py(), &this.at, async move {
            let store = agentstate::Store::connect(config).await?;
            let mut daemon = agentstate::SpillDaemon::open(store, spill).await?;
            daemon.pass().await?;
            Ok(daemon)
        })?;
        let cancel = CancellationToken::new();
        let owner = daemon.owner().to_string();
        let task = runtime().spawn(daemon.run(cancel.clone().cancelled_owned()));
        // Replacing a parent's daemon (after a fork) leaks it.
        *this.state() = Some(Local::new(Running {
            cancel,
            task,
            owner,
        }));
        Ok(slf)
    }

    /// Stops the daemon and waits for it: it drains the batch it took, commits it to SQLite
    /// and releases its leases (entries it had not taken stay in Redis for the next daemon;
    /// a `durable=True` write returned only once committed). Raises the error that ended the
    /// daemon, if one did. In a forked child, a daemon the parent started is left to the
    /// parent: nothing happens.
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        let Some(running) = self.state().take().and_then(Local::take) else {
            return Ok(());
        };
        running.cancel.cancel();
        match py.detach(|| runtime().block_on(running.task)) {
            Ok(result) => result.map_err(|e| errors::to_py(e, &self.at)),
            Err(join) => Err(PyRuntimeError::new_err(format!(
                "the spill daemon task failed: {join}"
            ))),
        }
    }

    /// True while the daemon runs in this process (started, not stopped, and not ended by an
    /// error; False in a child forked from a process running it).
    #[getter(running)]
    fn is_running(&self) -> bool {
        self.with_running(|r| !r.task.is_finished())
            .unwrap_or(false)
    }

    /// This daemon's owner id (as its leases and `agentstate stats` show it), once started
    /// (in this process: None in a child forked from a process running it).
    #[getter]
    fn owner(&self) -> Option<String> {
        self.with_running(|r| r.owner.clone())
    }

    /// The durable tier it writes: the SQLite file (a path), or the PostgreSQL URL as given
    /// (a `str`: a path would fold its `//`).
    #[getter]
    fn db<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let db = &self.spill.durable;
        match db
            .to_str()
            .filter(|s| agentstate::test_support::durable::is_url(s))
        {
            Some(url) => Ok(url.into_pyobject(py)?.into_any()),
            None => Ok(db.into_pyobject(py)?.into_any()),
        }
    }

    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        Self::start(slf)
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.stop(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "SpillDaemon(url='{}', db='{}', prefix='{}', running={})",
            agentstate::test_support::address::redacted(&self.config.redis_url),
            self.spill.durable.display(),
            self.config.namespace.prefix,
            if self.is_running() { "True" } else { "False" }
        )
    }
}

impl Drop for PySpillDaemon {
    /// A daemon dropped without `stop()` still drains, commits and releases its leases (in
    /// the background).
    fn drop(&mut self) {
        if let Some(running) = self.state().take().and_then(Local::take) {
            running.cancel.cancel();
        }
    }
}
