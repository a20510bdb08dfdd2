//! The same flows on both deployments, one Redis and a 3-master Redis Cluster: a
//! [`Deployed`] store on either, and `on_both!` running a flow as `<flow>::single` and
//! `<flow>::cluster` (one suite, not a copy).

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentstate::test_support::redis_server::RedisServer;
use agentstate::*;

use super::cluster as cluster_support;

/// Where a flow runs.
pub enum Deployment {
    /// A private redis-server of the test.
    Single,
    /// The shared 3-master cluster, in a namespace of the test's own.
    Cluster,
}

/// A store on one deployment, a SQLite file, and what keeps them alive.
pub struct Deployed {
    pub store: Store,
    pub db: PathBuf,
    _dir: tempfile::TempDir,
    _server: Option<RedisServer>,
}

impl Deployed {
    /// Connects (on the cluster with a fresh prefix) and runs one daemon pass, as a
    /// deployment's daemon would before agents start.
    pub async fn new(deployment: Deployment) -> Deployed {
        static NAMESPACE: AtomicUsize = AtomicUsize::new(0);
        let (config, server) = match deployment {
            Deployment::Single => {
                let server = RedisServer::start().unwrap();
                (Config::new(server.url()), Some(server))
            }
            Deployment::Cluster => {
                let cluster = tokio::task::block_in_place(cluster_support::shared);
                let n = NAMESPACE.fetch_add(1, Ordering::Relaxed);
                let prefix = format!("t{}x{n}", std::process::id());
                (Config::new(cluster.url()).prefix(prefix), None)
            }
        };
        let store = Store::connect(config).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let deployed = Deployed {
            store,
            db: dir.path().join("spill.db"),
            _dir: dir,
            _server: server,
        };
        deployed.flush().await;
        deployed
    }

    pub fn spill_config(&self) -> SpillConfig {
        SpillConfig::new(&self.db)
            .interval(Duration::from_millis(10))
            .lease_ttl(Duration::from_millis(500))
    }

    /// Drains every stream into SQLite once.
    pub async fn flush(&self) -> PassReport {
        crate::support::daemon_pass(&self.store, self.spill_config()).await
    }

    /// Starts a spill daemon; stop it with the returned token and await the handle.
    pub async fn start_daemon(
        &self,
    ) -> (
        tokio_util::sync::CancellationToken,
        tokio::task::JoinHandle<agentstate::Result<()>>,
    ) {
        let daemon = SpillDaemon::open(self.store.clone(), self.spill_config())
            .await
            .unwrap();
        let cancel = tokio_util::sync::CancellationToken::new();
        let task = tokio::spawn(daemon.run(cancel.clone().cancelled_owned()));
        (cancel, task)
    }

    /// Plays "Redis lost this namespace": deletes every one of its keys on every master.
    pub async fn lose_namespace(&self) {
        assert!(self.store.admin().wipe_namespace().await.unwrap() > 0);
        assert!(self
            .store
            .admin()
            .scan_namespace()
            .await
            .unwrap()
            .is_empty());
    }

    /// `(seq, element)` of every message SQLite holds for `sid`.
    pub fn sqlite_messages(&self, sid: &str) -> Vec<(i64, String)> {
        crate::support::sqlite_messages(&self.db, sid)
    }
}

macro_rules! on_both {
    ($flow:ident) => {
        mod $flow {
            use crate::support::{Deployed, Deployment};

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn single() {
                super::$flow(Deployed::new(Deployment::Single).await).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn cluster() {
                super::$flow(Deployed::new(Deployment::Cluster).await).await
            }
        }
    };
}
pub(crate) use on_both;

impl Deployed {
    /// Sessions spread over the partitions (so over the cluster's masters).
    pub async fn sessions(&self, n: usize) -> Vec<String> {
        let mut out = Vec::new();
        for i in 0..n {
            let sid = format!("s{i}");
            self.store
                .create_session(&NewSession::new().id(&sid).user("alice"))
                .await
                .unwrap();
            out.push(sid);
        }
        out
    }
}
