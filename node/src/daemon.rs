//! `NativeSpillDaemon`: the spill daemon of `agentstate spill`, run in this process on
//! napi's tokio runtime. It takes partitions through the same leases as every other daemon,
//! so it runs beside `agentstate spill` processes and the Python package's daemons.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentstate::config::{env, DEFAULT_DB, DEFAULT_PREFIX, DEFAULT_REDIS_URL};
use agentstate::test_support::advice::Situation;
use agentstate::{Config, SpillConfig};
use napi::Result;
use napi_derive::napi;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::errors;
use crate::store::situation;

/// `new SpillDaemon`'s options (every one optional).
#[napi(object)]
#[derive(Default)]
pub struct DaemonOptions {
    /// Redis URL; default `AGENTSTATE_REDIS_URL`, else redis://127.0.0.1:6379.
    pub url: Option<String>,
    /// The SQLite file (or a postgres:// URL); default `AGENTSTATE_DB`, else ./agentstate.db.
    pub db: Option<String>,
    /// Namespace prefix; default `AGENTSTATE_PREFIX`, else "as".
    pub prefix: Option<String>,
    /// The namespace's partition count (16).
    pub partitions: Option<u32>,
    /// Longest time between full passes, seconds (1).
    pub interval: Option<f64>,
    /// How long after this daemon dies other daemons take its partitions, seconds (3).
    pub lease: Option<f64>,
    /// Wal bytes in Redis past which the daemon moves the wal into its spool (half of
    /// Redis' free memory under maxmemory, else 256 MiB).
    pub wal_budget: Option<f64>,
    /// The spool's directory (beside the SQLite file).
    pub spool: Option<String>,
}

/// A running daemon: how to stop it and the task to wait for.
struct Running {
    cancel: CancellationToken,
    task: JoinHandle<agentstate::Result<()>>,
    owner: String,
}

/// The spill daemon in a background task of this process.
#[napi]
pub struct NativeSpillDaemon {
    config: Config,
    spill: SpillConfig,
    at: Arc<Situation>,
    running: Mutex<Option<Running>>,
    /// Held while `start` or `stop` runs, so two concurrent starts open one daemon.
    turn: tokio::sync::Mutex<()>,
}

fn positive(what: &str, s: Option<f64>, default: f64) -> Result<Duration> {
    let s = s.unwrap_or(default);
    Duration::try_from_secs_f64(s)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| errors::invalid(format!("{what} must be a positive number of seconds")))
}

impl NativeSpillDaemon {
    fn state(&self) -> std::sync::MutexGuard<'_, Option<Running>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[napi]
impl NativeSpillDaemon {
    /// A daemon for namespace `prefix` of the Redis at `url`, writing `db`; nothing runs
    /// until `start()`.
    #[napi(constructor)]
    pub fn new(options: Option<DaemonOptions>) -> Result<Self> {
        let o = options.unwrap_or_default();
        let source = if o.url.is_some() {
            "SpillDaemon url"
        } else {
            env::REDIS_URL
        };
        let url = env::resolve(o.url, env::REDIS_URL, DEFAULT_REDIS_URL);
        let prefix = env::resolve(o.prefix, env::PREFIX, DEFAULT_PREFIX);
        let db: PathBuf = env::resolve(o.db, env::DB, DEFAULT_DB).into();
        let at = situation(source, &url, &prefix, db.clone())?;
        let mut spill = SpillConfig::new(db)
            .interval(positive("interval", o.interval, 1.0)?)
            .lease_ttl(positive("lease", o.lease, 3.0)?);
        if let Some(bytes) = o.wal_budget {
            if !(bytes >= 1.0 && bytes.fract() == 0.0 && bytes <= 2f64.powi(53)) {
                return Err(errors::invalid(
                    "walBudget must be a whole number of bytes from 1".to_string(),
                ));
            }
            spill = spill.wal_budget(bytes as u64);
        }
        if let Some(dir) = o.spool {
            spill = spill.spool(dir);
        }
        Ok(NativeSpillDaemon {
            config: Config::new(url)
                .prefix(prefix)
                .partitions(o.partitions.unwrap_or(16)),
            spill,
            at,
            running: Mutex::new(None),
            turn: tokio::sync::Mutex::new(()),
        })
    }

    /// Starts the daemon (a no-op when it runs): connects, opens SQLite, runs a first pass
    /// (taking the partitions no other daemon holds; creates are allowed from then on), then
    /// keeps running in the background.
    #[napi]
    pub async fn start(&self) -> Result<()> {
        let _turn = self.turn.lock().await;
        if self.state().is_some() {
            return Ok(());
        }
        let (config, spill) = (self.config.clone(), self.spill.clone());
        let opened = async move {
            let store = agentstate::Store::connect(config).await?;
            let mut daemon = agentstate::SpillDaemon::open(store, spill).await?;
            daemon.pass().await?;
            Ok::<_, agentstate::Error>(daemon)
        }
        .await;
        let daemon = opened.map_err(|e| errors::to_napi(e, &self.at))?;
        let cancel = CancellationToken::new();
        let owner = daemon.owner().to_string();
        let task = tokio::spawn(daemon.run(cancel.clone().cancelled_owned()));
        *self.state() = Some(Running {
            cancel,
            task,
            owner,
        });
        Ok(())
    }

    /// Stops the daemon and waits for it: it drains the batch it took, commits it and
    /// releases its leases. Rejects with the error that ended the daemon, if one did.
    #[napi]
    pub async fn stop(&self) -> Result<()> {
        let _turn = self.turn.lock().await;
        let Some(running) = self.state().take() else {
            return Ok(());
        };
        running.cancel.cancel();
        match running.task.await {
            Ok(result) => result.map_err(|e| errors::to_napi(e, &self.at)),
            Err(join) => Err(errors::typed(
                "AgentStateError",
                format!("the spill daemon task failed: {join}"),
                &self.at,
                serde_json::Value::Null,
            )),
        }
    }

    /// True while the daemon runs (started, not stopped, not ended by an error).
    #[napi(getter)]
    pub fn running(&self) -> bool {
        self.state().as_ref().is_some_and(|r| !r.task.is_finished())
    }

    /// This daemon's owner id (as its leases and `agentstate stats` show it), once started.
    #[napi(getter)]
    pub fn owner(&self) -> Option<String> {
        self.state().as_ref().map(|r| r.owner.clone())
    }

    /// The durable tier it writes (the SQLite path or PostgreSQL URL as given).
    #[napi(getter)]
    pub fn db(&self) -> String {
        self.spill.durable.to_string_lossy().into_owned()
    }
}

impl Drop for NativeSpillDaemon {
    /// A daemon collected without `stop()` still drains, commits and releases its leases.
    fn drop(&mut self) {
        if let Some(running) = self.state().take() {
            running.cancel.cancel();
        }
    }
}
