//! Redis coming back behind its durable tier while agents keep writing: a master killed and
//! a lagging replica promoted, a master paused while its lagging replica is promoted and then
//! rejoining as its replica (what Sentinel does), and a server restarted from an RDB copied
//! earlier. Real redis-servers, the daemon as `agentstate spill` processes on one SQLite file,
//! writers appending throughout (a third of them durably, each append with an idempotency key
//! it repeats until acknowledged). The checks: every acknowledged durable append is in the
//! durable tier exactly once at the seq it was acknowledged with; every message the durable
//! tier held before the fault is still there, unchanged; every append acknowledged after the
//! fault is there once at its seq; after a drain the live transcripts equal the durable tier.
//! What only Redis acknowledged, that the promoted replica never received and no daemon
//! committed, is the documented window: counted and printed, never another message's seq.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentstate::test_support::redis_server::{free_port, RedisServer};
use agentstate::{
    AppendOptions, Config, Durability, NewDecision, NewMemoryItem, NewMessage, NewSession, Store,
};

use crate::support::cluster::Cluster;
use crate::support::{sqlite_messages, wait_until, Daemon, HANG};

/// How Redis goes back behind the durable tier.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    /// The master is killed; its replica, cut off for a while, is promoted.
    MasterKilled,
    /// The master is paused; its lagging replica is promoted; the old master rejoins as the
    /// new master's replica.
    MasterPausedRejoins,
    /// The server is killed and restarted from an RDB copied earlier.
    OldSnapshot,
    /// A cluster shard's master is killed; its replica, cut off for a while, takes over.
    ClusterShard,
}

/// One acknowledged append.
#[derive(Debug, Clone)]
struct Ack {
    sid: String,
    seq: i64,
    content: String,
    durable: bool,
    /// Acknowledged through the front the fault switched to (the new master).
    after: bool,
}

/// The Redis the writers use now and how many times it switched (a switch stands for a
/// moved DNS name or a Sentinel).
type Front = Arc<Mutex<(String, u32)>>;

/// `agentstate spill` on `url` and the SQLite file `db`.
fn daemon(url: &str, db: &Path) -> Daemon {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentstate"));
    cmd.env_remove("AGENTSTATE_LOG")
        .args(["--redis", url, "--db"])
        .arg(db)
        .args(["spill", "--interval-ms", "5", "--lease-ms", "500"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    Daemon(cmd.spawn().unwrap())
}

fn cmd<T: redis::FromRedisValue>(server: &RedisServer, args: &[&str]) -> T {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(&mut server.connection()).unwrap()
}

/// `INFO replication` field `name` of `server`.
fn replication(server: &RedisServer, name: &str) -> String {
    let info: String = cmd(server, &["INFO", "replication"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// A writer: appends to the sessions in turn until `stop`, each append with a key of its
/// own that it repeats until acknowledged (through the fault: connection errors, `NotLive`
/// while the daemon checks the new history), reconnecting when the front moves.
async fn writer(
    id: usize,
    front: Front,
    stop: Arc<AtomicBool>,
    sessions: Vec<String>,
    acks: Arc<Mutex<Vec<Ack>>>,
) {
    let connect = |url: String| async move {
        let config = Config::new(url).daemon_wait(Duration::from_secs(30));
        Store::connect(config).await
    };
    let mut at = front.lock().unwrap().clone();
    let mut store = connect(at.0.clone()).await.unwrap();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let sid = &sessions[(id + n) % sessions.len()];
        let content = format!("w{id}-{n}");
        let durable = n % 3 == 0;
        loop {
            let now = front.lock().unwrap().clone();
            if now != at {
                match connect(now.0.clone()).await {
                    Ok(s) => (store, at) = (s, now),
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                }
            }
            let handle = if durable {
                store.with_durability(Durability::Durable)
            } else {
                store.clone()
            };
            let options = AppendOptions::new().idempotency_key(content.clone());
            let msg = NewMessage::new("user").content(content.clone());
            match handle.append_with(sid, &msg, &options).await {
                Ok(seq) => {
                    acks.lock().unwrap().push(Ack {
                        sid: sid.clone(),
                        seq: seq as i64,
                        content: content.clone(),
                        durable,
                        // An old master may still acknowledge what it received before it
                        // was fenced off: only the new front's acks are of the new history.
                        after: at.1 > 0,
                    });
                    break;
                }
                Err(e) => {
                    assert!(
                        e.is_retry_safe()
                            || e.is_unavailable()
                            || matches!(
                                e,
                                agentstate::Error::NotLive { .. }
                                    | agentstate::Error::WriteLost(_)
                                    | agentstate::Error::DurabilityTimeout(_)
                            ),
                        "writer {id}: {e:?}"
                    );
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
        n += 1;
    }
}

/// Four writers appending to the sessions through a front until stopped.
struct Traffic {
    stop: Arc<AtomicBool>,
    acks: Arc<Mutex<Vec<Ack>>>,
    writers: Vec<tokio::task::JoinHandle<()>>,
}

impl Traffic {
    fn start(front: &Front, sessions: &[String]) -> Traffic {
        let stop = Arc::new(AtomicBool::new(false));
        let acks = Arc::new(Mutex::new(Vec::new()));
        let writers = (0..4)
            .map(|id| {
                tokio::spawn(writer(
                    id,
                    front.clone(),
                    stop.clone(),
                    sessions.to_vec(),
                    acks.clone(),
                ))
            })
            .collect();
        Traffic {
            stop,
            acks,
            writers,
        }
    }

    /// How many appends were acknowledged so far.
    fn acknowledged(&self) -> usize {
        self.acks.lock().unwrap().len()
    }

    /// Waits (`what`) until `n` appends acknowledged after the first `from` are `counted`.
    async fn more(&self, what: &str, from: usize, n: usize, counted: impl Fn(&Ack) -> bool) {
        wait_until(what, HANG, || {
            self.acks
                .lock()
                .unwrap()
                .iter()
                .skip(from)
                .filter(|a| counted(a))
                .count()
                >= n
        })
        .await;
    }

    /// Waits until the master took 20 durable appends since the first `from`: writes the
    /// lagging replica (or the copied snapshot) lacks.
    async fn lagged(&self, from: usize) {
        self.more("the master takes writes the replica lacks", from, 20, |a| {
            a.durable
        })
        .await;
    }

    /// Stops the writers; every acknowledged append.
    async fn stop(self) -> Arc<Mutex<Vec<Ack>>> {
        self.stop.store(true, Ordering::Relaxed);
        for w in self.writers {
            w.await.unwrap();
        }
        self.acks
    }
}

/// What the durable tier holds of each of `sessions` (see [`durable`]).
fn durable_all(db: &Path, sessions: &[String]) -> HashMap<String, BTreeMap<i64, String>> {
    sessions
        .iter()
        .map(|sid| (sid.clone(), durable(db, sid)))
        .collect()
}

/// The content of each message of `sid` in the durable tier, by seq.
fn durable(db: &Path, sid: &str) -> BTreeMap<i64, String> {
    sqlite_messages(db, sid)
        .into_iter()
        .map(|(seq, element)| {
            let v: serde_json::Value = serde_json::from_str(&element).unwrap();
            (seq, v["content"].as_str().unwrap_or_default().to_string())
        })
        .collect()
}

async fn run_through(fault: Fault) {
    let master = RedisServer::start().unwrap();
    let replica =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port().to_string()]).unwrap();
    let mut master = master;
    let db = master.path("agentstate.db");
    let mut d1 = daemon(&master.url(), &db);
    let setup = Store::connect(Config::new(master.url())).await.unwrap();
    let sessions: Vec<String> = (0..6).map(|i| format!("s{i}")).collect();
    create_once_a_daemon_runs(&setup, &sessions).await;
    // Two decisions: one stays open, the other gets its outcome while the replica lags.
    let open = setup
        .record_decision(&sessions[0], &NewDecision::new("keep", "open"))
        .await
        .unwrap();
    let done = setup
        .record_decision(&sessions[1], &NewDecision::new("ship", "decided"))
        .await
        .unwrap();
    // User data: a value changed, a user forgotten and a round saved while the replica lags.
    setup
        .set_user_value("ann", "tz", &serde_json::json!("UTC"))
        .await
        .unwrap();
    setup
        .set_user_value("bob", "ssn", &serde_json::json!("secret"))
        .await
        .unwrap();
    setup
        .save_state("ann", &serde_json::json!({"r": 1}), None, None)
        .await
        .unwrap();
    // Memory items: one replaced, one deleted and one added while the replica lags.
    let facts = ["users", "ann", "facts"];
    let item = |v: serde_json::Value| NewMemoryItem {
        value: v.as_object().unwrap().clone(),
        ..NewMemoryItem::default()
    };
    for (key, v) in [("pet", "cat"), ("old", "x")] {
        setup
            .put_memory(&facts, key, &item(serde_json::json!({ "v": v })))
            .await
            .unwrap();
    }
    wait_until("the replica is in sync", HANG, || {
        replication(&replica, "master_link_status") == "up"
    })
    .await;

    let front: Front = Arc::new(Mutex::new((master.url(), 0)));
    let traffic = Traffic::start(&front, &sessions);
    tokio::time::sleep(Duration::from_millis(800)).await;

    // The lag: the replica (or the snapshot) stops here, the master goes on.
    if fault == Fault::OldSnapshot {
        let _: String = cmd(&master, &["SAVE"]);
        std::fs::copy(master.path("dump.rdb"), master.path("old.rdb")).unwrap();
    } else {
        let _: String = cmd(
            &replica,
            &["REPLICAOF", "127.0.0.1", &free_port().to_string()],
        );
    }
    let lagged_at = traffic.acknowledged();
    let durable_setup = setup.with_durability(Durability::Durable);
    assert!(durable_setup
        .record_outcome(&done, "shipped")
        .await
        .unwrap());
    durable_setup
        .set_user_value("ann", "tz", &serde_json::json!("CET"))
        .await
        .unwrap();
    durable_setup.forget_user("bob").await.unwrap();
    durable_setup
        .save_state("ann", &serde_json::json!({"r": 2}), None, None)
        .await
        .unwrap();
    durable_setup
        .put_memory(&facts, "pet", &item(serde_json::json!({"v": "dog"})))
        .await
        .unwrap();
    durable_setup.delete_memory(&facts, "old").await.unwrap();
    durable_setup
        .put_memory(&facts, "new", &item(serde_json::json!({"v": "y"})))
        .await
        .unwrap();
    traffic.lagged(lagged_at).await;

    // The fault.
    let new_master = match fault {
        Fault::MasterKilled => {
            master.kill();
            drop(d1);
            let _: String = cmd(&replica, &["REPLICAOF", "NO", "ONE"]);
            &replica
        }
        Fault::MasterPausedRejoins => {
            master.pause();
            let _: String = cmd(&replica, &["REPLICAOF", "NO", "ONE"]);
            drop(d1);
            master.resume();
            let _: String = cmd(
                &master,
                &["REPLICAOF", "127.0.0.1", &replica.port().to_string()],
            );
            &replica
        }
        Fault::ClusterShard => unreachable!("cluster_shard_fails_over"),
        Fault::OldSnapshot => {
            master.kill();
            drop(d1);
            std::fs::copy(master.path("old.rdb"), master.path("dump.rdb")).unwrap();
            master.restart().unwrap();
            &master
        }
    };
    // What the durable tier held when the fault struck (its writer is gone).
    let before = durable_all(&db, &sessions);
    *front.lock().unwrap() = (new_master.url(), 1);
    d1 = daemon(&new_master.url(), &db);
    let at_fault = traffic.acknowledged();
    traffic
        .more("writers go on after the fault", at_fault, 60, |a| a.after)
        .await;
    let acks = traffic.stop().await;
    d1.terminate();
    check(fault, &new_master.url(), &db, &sessions, &before, acks).await;
    // The decision decided before the fault is not open again; the open one still is.
    let live = Store::connect(Config::new(new_master.url())).await.unwrap();
    let open_now: Vec<String> = live
        .incomplete_decisions(None)
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.id)
        .collect();
    assert_eq!(
        open_now,
        [open],
        "{fault:?}: {done} was decided before the fault"
    );
    assert_eq!(
        live.user_value("ann", "tz").await.unwrap(),
        Some(serde_json::json!("CET"))
    );
    assert_eq!(
        live.user_value("bob", "ssn").await.unwrap(),
        None,
        "{fault:?}"
    );
    assert_eq!(
        live.export_state("ann", None, None).await.unwrap(),
        Some(serde_json::json!({"r": 2})),
        "{fault:?}"
    );
    let value = |key: &'static str| {
        let live = live.clone();
        async move {
            live.get_memory(&["users", "ann", "facts"], key, false)
                .await
                .unwrap()
                .map(|i| serde_json::Value::Object(i.value))
        }
    };
    assert_eq!(
        (value("pet").await, value("old").await, value("new").await),
        (
            Some(serde_json::json!({"v": "dog"})),
            None,
            Some(serde_json::json!({"v": "y"}))
        ),
        "{fault:?}: the memory items the durable tier committed"
    );
    drop(replica);
}

/// Drains what the new master holds into the durable tier, then checks the outcome (see
/// the module's doc): `before` is what the durable tier held when the fault struck.
async fn check(
    fault: Fault,
    url: &str,
    db: &Path,
    sessions: &[String],
    before: &HashMap<String, BTreeMap<i64, String>>,
    acks: Arc<Mutex<Vec<Ack>>>,
) {
    let drained = Command::new(env!("CARGO_BIN_EXE_agentstate"))
        .args(["--redis", url, "--db"])
        .arg(db)
        .args(["spill", "--once"])
        .output()
        .unwrap();
    assert!(drained.status.success(), "{drained:?}");
    // The operator sees the repair, and writes open again.
    let stats = Command::new(env!("CARGO_BIN_EXE_agentstate"))
        .args(["--redis", url, "--json", "stats"])
        .output()
        .unwrap();
    let stats: Vec<serde_json::Value> = String::from_utf8(stats.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        stats
            .iter()
            .map(|s| s["rollbacks"].as_u64().unwrap())
            .sum::<u64>()
            >= 1,
        "{fault:?}: no rollback shown: {stats:?}"
    );
    // (A cluster's nodes each have a history: `null` there.)
    assert!(
        stats
            .iter()
            .all(|s| s["writes_open"] != serde_json::json!(false)),
        "{fault:?}: {stats:?}"
    );

    // The checks.
    let acks = acks.lock().unwrap().clone();
    let live = Store::connect(Config::new(url)).await.unwrap();
    let mut window = 0;
    for sid in sessions {
        let now = durable(db, sid);
        for (seq, content) in &before[sid] {
            assert_eq!(
                now.get(seq),
                Some(content),
                "{fault:?}: {sid} seq {seq} the durable tier held before the fault changed"
            );
        }
        let mut seen = HashMap::new();
        for (seq, content) in &now {
            assert!(
                seen.insert(content.clone(), *seq).is_none(),
                "{fault:?}: {sid}: {content} twice"
            );
        }
        let messages = live
            .messages(sid, agentstate::MessageQuery::all())
            .await
            .unwrap();
        let live_view: BTreeMap<i64, String> = messages
            .iter()
            .map(|m| (m.seq as i64, m.content.clone().unwrap_or_default()))
            .collect();
        assert_eq!(
            live_view, now,
            "{fault:?}: {sid}: the live view is the durable tier"
        );
        for ack in acks.iter().filter(|a| &a.sid == sid) {
            let held = now.get(&ack.seq);
            if ack.durable || ack.after {
                assert_eq!(
                    held,
                    Some(&ack.content),
                    "{fault:?}: acknowledged {ack:?} is not at its seq"
                );
            } else if held != Some(&ack.content) {
                // Only Redis had it: the documented window. Never in the durable tier before.
                assert!(!before[sid].values().any(|c| c == &ack.content));
                window += 1;
            }
        }
    }
    let durable_acks = acks.iter().filter(|a| a.durable).count();
    let after_acks = acks.iter().filter(|a| a.after).count();
    println!(
        "{fault:?}: {} acknowledged ({durable_acks} durable, {after_acks} after the fault); {window} live-only appends lost with the lagging Redis",
        acks.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_killed_for_a_lagging_replica_erases_nothing_the_durable_tier_committed() {
    run_through(Fault::MasterKilled).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_master_rejoining_its_promoted_lagging_replica_erases_nothing_committed() {
    run_through(Fault::MasterPausedRejoins).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_from_an_older_snapshot_erases_nothing_the_durable_tier_committed() {
    run_through(Fault::OldSnapshot).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_shard_failing_over_to_a_lagging_replica_erases_nothing_committed() {
    let fault = Fault::ClusterShard;
    let mut cluster = Cluster::start();
    let replica = RedisServer::start_with(&crate::support::cluster::NODE_ARGS).unwrap();
    let added = Command::new("redis-cli")
        .args(["--cluster", "add-node"])
        .arg(format!("127.0.0.1:{}", replica.port()))
        .arg(format!("127.0.0.1:{}", cluster.nodes[0].port()))
        .args([
            "--cluster-slave",
            "--cluster-master-id",
            &cluster.node_id(0),
        ])
        .output()
        .unwrap();
    assert!(added.status.success(), "{added:?}");
    wait_until("the replica is in sync", HANG, || {
        replication(&replica, "master_link_status") == "up"
    })
    .await;
    let url = cluster.url();
    let db = replica.path("agentstate.db");
    let mut d = daemon(&url, &db);
    // Sessions whose partitions the failing shard serves.
    let keys = setup_keys();
    let on_shard = |sid: &String| {
        let slot: u16 = cmd(
            &cluster.nodes[0],
            &["CLUSTER", "KEYSLOT", &keys.wal(keys.partition(sid))],
        );
        cluster.owner_of(slot) == 0
    };
    let sessions: Vec<String> = (0..)
        .map(|i| format!("c{i}"))
        .filter(on_shard)
        .take(6)
        .collect();
    let setup = Store::connect(Config::new(url.clone())).await.unwrap();
    create_once_a_daemon_runs(&setup, &sessions).await;
    let front: Front = Arc::new(Mutex::new((url.clone(), 0)));
    let traffic = Traffic::start(&front, &sessions);
    tokio::time::sleep(Duration::from_millis(800)).await;
    // The lag: the replica's link is cut (a cluster node takes no REPLICAOF: it reconnects
    // with a password its master refuses) while the master goes on.
    let _: String = cmd(
        &replica,
        &["CONFIG", "SET", "masterauth", "not-the-password"],
    );
    let _: i64 = cmd(&replica, &["CLIENT", "KILL", "TYPE", "master"]);
    wait_until("the replica's link is down", HANG, || {
        replication(&replica, "master_link_status") == "down"
    })
    .await;
    let lagged_at = traffic.acknowledged();
    traffic.lagged(lagged_at).await;
    cluster.nodes[0].kill();
    let before = durable_all(&db, &sessions);
    let _: String = cmd(&replica, &["CLUSTER", "FAILOVER", "TAKEOVER"]);
    wait_until("the replica took the shard over", HANG, || {
        replication(&replica, "role") == "master"
    })
    .await;
    // Writers connect anew (their acks are of the new history from here on).
    front.lock().unwrap().1 = 1;
    let at_fault = traffic.acknowledged();
    traffic
        .more("writers go on after the fault", at_fault, 60, |a| a.after)
        .await;
    let acks = traffic.stop().await;
    d.terminate();
    let url = format!(
        "redis+cluster://127.0.0.1:{},127.0.0.1:{},127.0.0.1:{}",
        replica.port(),
        cluster.nodes[1].port(),
        cluster.nodes[2].port()
    );
    check(fault, &url, &db, &sessions, &before, acks).await;
}

/// The default namespace's keys.
fn setup_keys() -> agentstate::keys::Keys {
    let ns = agentstate::Namespace::default();
    agentstate::keys::Keys::new(&ns.prefix, ns.partitions)
}

/// Creates `sessions` once the daemon process just started has bound the namespace (until
/// then a create says at once that the namespace has no daemon yet).
async fn create_once_a_daemon_runs(store: &Store, sessions: &[String]) {
    for sid in sessions {
        let new = NewSession::new().id(sid.clone());
        let mut tries = 0;
        loop {
            match store.create_session(&new).await {
                Ok(_) => break,
                Err(agentstate::Error::NotLive { .. }) if tries < 300 => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("create {sid}: {e}"),
            }
        }
    }
}
