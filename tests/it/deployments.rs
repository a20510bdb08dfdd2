//! The same flows on both deployments, one Redis and a 3-master Redis Cluster: seq
//! allocation under concurrent writers, compaction, CAS, checkpoints, decisions consumed by a
//! group, flush + loss + restore. Each flow is one function over a [`Deployed`]; `on_both!`
//! runs it as `<flow>::single` and `<flow>::cluster` (one suite, not a copy).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentstate::internals::redis_server::RedisServer;
use agentstate::*;
use serde_json::json;

use crate::support::cluster as cluster_support;

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
        let task = tokio::spawn(daemon.run(cancel.clone()));
        (cancel, task)
    }

    /// Plays "Redis lost this namespace": deletes every one of its keys on every master.
    pub async fn lose_namespace(&self) {
        assert!(self.store.wipe_namespace().await.unwrap() > 0);
        assert!(self.store.scan_namespace().await.unwrap().is_empty());
    }

    /// `(seq, element)` of every message SQLite holds for `sid`.
    pub fn sqlite_messages(&self, sid: &str) -> Vec<(i64, String)> {
        crate::support::sqlite_messages(&self.db, sid)
    }
}

macro_rules! on_both {
    ($flow:ident) => {
        mod $flow {
            use super::{Deployed, Deployment};

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

on_both!(seqs_stay_gapless_under_concurrent_writers);
on_both!(compaction_cas_and_checkpoints);
on_both!(decisions_are_consumed_by_a_group);
on_both!(a_flushed_namespace_comes_back_after_a_loss);
on_both!(graph_threads_put_list_copy_and_come_back_after_a_loss);

/// Sessions spread over the partitions (so over the cluster's masters).
async fn sessions(d: &Deployed, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for i in 0..n {
        let sid = format!("s{i}");
        d.store
            .create_session(&NewSession::new().id(&sid).user("alice"))
            .await
            .unwrap();
        out.push(sid);
    }
    out
}

async fn seqs_stay_gapless_under_concurrent_writers(d: Deployed) {
    let sids = sessions(&d, 4).await;
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let (store, sids) = (d.store.clone(), sids.clone());
            tokio::spawn(async move {
                let mut got = Vec::new();
                for i in 0..25 {
                    let sid = &sids[(w + i) % sids.len()];
                    let m = NewMessage::new("user").content(format!("w{w}-{i}"));
                    got.push((sid.clone(), store.append(sid, &m).await.unwrap()));
                }
                got
            })
        })
        .collect();
    let mut seqs: Vec<(String, u64)> = Vec::new();
    for w in writers {
        seqs.extend(w.await.unwrap());
    }
    for sid in &sids {
        let mine: BTreeSet<u64> = seqs.iter().filter(|(s, _)| s == sid).map(|x| x.1).collect();
        let stored = d.store.messages(sid, MessageQuery::all()).await.unwrap();
        assert_eq!(stored.len(), 50, "{sid}");
        assert_eq!(mine, (1..=50).collect(), "{sid}: every seq once, no gap");
    }
    assert_eq!(d.store.list_sessions(Some("alice")).await.unwrap(), sids);
}

async fn compaction_cas_and_checkpoints(d: Deployed) {
    let s = &d.store;
    let sid = &sessions(&d, 1).await[0];
    for i in 0..10 {
        s.append(sid, &NewMessage::new("user").content(format!("m{i}")))
            .await
            .unwrap();
    }
    assert_eq!(
        s.compact(sid, &Compaction::new(2, 6, "summary"))
            .await
            .unwrap(),
        (1, 11)
    );
    let active: Vec<u64> = s
        .messages(sid, MessageQuery::active())
        .await
        .unwrap()
        .iter()
        .map(|m| m.seq)
        .collect();
    assert_eq!(active, [1, 7, 8, 9, 10, 11]);
    let v = s
        .set_working(sid, "plan", &json!({"step": 1}))
        .await
        .unwrap();
    let err = s
        .set_working_if_version(sid, "plan", &json!({"step": 2}), v - 1)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Conflict { current, .. } if current == v),
        "{err:?}"
    );
    assert_eq!(
        s.set_working_if_version(sid, "plan", &json!({"step": 2}), v)
            .await
            .unwrap(),
        v + 1
    );
    s.set_working(sid, "scratch", &json!("x")).await.unwrap();
    let id = s
        .checkpoint(sid, "after-plan", Some(&["plan"]))
        .await
        .unwrap();
    let latest = s
        .checkpoint_latest(sid, "after-plan")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (latest.id, latest.payload),
        (id, json!({"plan": {"step": 2}}))
    );
}

async fn decisions_are_consumed_by_a_group(d: Deployed) {
    let s = &d.store;
    let sids = sessions(&d, 6).await;
    let options = ConsumerOptions::new()
        .start(StartFrom::Beginning)
        .block(Duration::from_millis(200));
    let mut a = s.consumer("svc", "a", options.clone()).await.unwrap();
    let mut b = s.consumer("svc", "b", options).await.unwrap();
    let mut ids = BTreeSet::new();
    for i in 0..30 {
        let decision = NewDecision::new(format!("d{i}"), "because");
        ids.insert(s.record_decision(&sids[i % 6], &decision).await.unwrap());
    }
    let mut seen = Vec::new();
    for _ in 0..20 {
        for c in [&mut a, &mut b] {
            let got = c.read_up_to(4).await.unwrap();
            assert!(got.len() <= 4);
            seen.extend(got.iter().filter_map(|g| match &g.event {
                DecisionEvent::Decision(d) => Some(d.id.clone()),
                _ => None,
            }));
            c.ack(&got).await.unwrap();
        }
        if seen.len() == ids.len() {
            break;
        }
    }
    assert_eq!(seen.len(), ids.len(), "each decision delivered once");
    assert_eq!(seen.into_iter().collect::<BTreeSet<_>>(), ids);
    let first = ids.iter().next().unwrap().clone();
    assert!(s.record_outcome(&first, "done").await.unwrap());
    assert_eq!(s.incomplete_decisions(None).await.unwrap().len(), 29);
}

async fn a_flushed_namespace_comes_back_after_a_loss(d: Deployed) {
    let s = &d.store;
    let sids = sessions(&d, 5).await;
    for sid in &sids {
        for i in 0..4 {
            s.append(sid, &NewMessage::new("user").content(format!("{sid}-{i}")))
                .await
                .unwrap();
        }
    }
    s.set_user_value("alice", "tz", &json!("UTC"))
        .await
        .unwrap();
    d.flush().await;
    let before: Vec<_> = sids.iter().map(|sid| d.sqlite_messages(sid)).collect();
    assert!(before.iter().all(|m| m.len() == 4));
    d.lose_namespace().await;
    let (cancel, task) = d.start_daemon().await;
    // Creates of the lost ids are refused; the sessions come back on first use.
    let err = s
        .create_session(&NewSession::new().id("s0"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::AlreadyExists(_)), "{err:?}");
    for (sid, rows) in sids.iter().zip(&before) {
        let messages = s.messages(sid, MessageQuery::all()).await.unwrap();
        let contents: Vec<String> = messages.iter().filter_map(|m| m.content.clone()).collect();
        assert_eq!(contents.len(), 4, "{sid}");
        assert_eq!(&d.sqlite_messages(sid), rows, "{sid}: SQLite untouched");
    }
    // User values come back with the daemon's re-seed of the partition.
    let mut tz = None;
    for _ in 0..100 {
        tz = s.user_value("alice", "tz").await.unwrap();
        if tz.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(tz, Some(json!("UTC")));
    cancel.cancel();
    task.await.unwrap().unwrap();
}

/// Graph checkpoint logs (LangGraph threads) spread over the masters: puts, pending writes,
/// lists, runs deleted across threads, a fork to a thread on another slot, and every thread
/// back from SQLite after the namespace is lost.
async fn graph_threads_put_list_copy_and_come_back_after_a_loss(d: Deployed) {
    let s = &d.store;
    let threads: Vec<String> = (0..6).map(|i| format!("thread-{i}")).collect();
    for t in &threads {
        for i in 0..3 {
            let mut cp = GraphPut::new(if i == 2 { "sub:1" } else { "" }, format!("0{i}"));
            cp.metadata = json!({"run_id": format!("run-{i}"), "step": i});
            cp.channels = vec![("messages".into(), format!("{i}"))];
            cp.blobs = vec![("messages".into(), format!("{i}"), format!("json:[{i}]"))];
            s.graph_put(t, &cp).await.unwrap();
        }
        s.graph_put_writes(
            t,
            "",
            "01",
            "task",
            "a:1",
            &[(0, "ch".into(), "json:1".into())],
        )
        .await
        .unwrap();
    }
    let spread: BTreeSet<u32> = threads.iter().map(|t| s.keys().partition(t)).collect();
    assert!(
        spread.len() > 3,
        "threads on few partitions only: {spread:?}"
    );
    assert_eq!(s.graph_copy("thread-0", "fork-of-0").await.unwrap(), 3);
    assert_eq!(s.graph_delete_runs(&["run-0"]).await.unwrap(), 7);
    let ids = |list: Vec<GraphTuple>| list.into_iter().map(|t| t.id).collect::<Vec<_>>();
    for t in threads.iter().chain([&"fork-of-0".to_string()]) {
        assert_eq!(
            ids(s.graph_list(t, None, None, None, None).await.unwrap()),
            ["02", "01"],
            "{t}"
        );
    }
    let before = s.graph_get("thread-3", "", None).await.unwrap().unwrap();
    assert_eq!(before.writes.len(), 1);
    d.flush().await;
    d.lose_namespace().await;
    let (cancel, task) = d.start_daemon().await;
    assert_eq!(
        s.graph_get("thread-3", "", None).await.unwrap().unwrap(),
        before
    );
    assert_eq!(
        ids(s
            .graph_list("fork-of-0", None, None, None, None)
            .await
            .unwrap()),
        ["02", "01"]
    );
    cancel.cancel();
    task.await.unwrap().unwrap();
}
