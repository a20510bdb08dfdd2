//! What only a cluster does: a busy partition's slot moves to another master while agents
//! append and the daemon flushes (a master restarted empty is in `loss::cluster`). Each test
//! has a cluster of its own (the flows both deployments share are in `deployments`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use agentstate::*;

use crate::support::cluster::Cluster;
use crate::support::{daemon_pass, sqlite_messages, wait_until, HANG};

/// A store on `cluster`, checked against a fresh SQLite file by one daemon pass.
pub(crate) async fn store_on(cluster: &Cluster, db: &std::path::Path) -> (Store, SpillConfig) {
    let config = Config::new(cluster.url()).retry_wait(Duration::from_secs(20));
    let store = Store::connect(config).await.unwrap();
    let spill = SpillConfig::new(db)
        .interval(Duration::from_millis(10))
        .lease_ttl(Duration::from_millis(500));
    daemon_pass(&store, spill.clone()).await;
    (store, spill)
}

/// Every message element of `sid` in Redis, and SQLite's rows for it.
pub(crate) async fn both_copies(
    store: &Store,
    db: &std::path::Path,
    sid: &str,
) -> (Vec<String>, Vec<String>) {
    // Restores the session if it is not live, then reads the stored elements as they are.
    store.require_session(sid).await.unwrap();
    let live: Vec<String> = redis::cmd("LRANGE")
        .arg(store.keys().session(sid).msgs)
        .arg(0)
        .arg(-1)
        .query_async(&mut agentstate::test_support::connection(store).await.unwrap())
        .await
        .unwrap();
    let rows = sqlite_messages(db, sid)
        .into_iter()
        .map(|(_, e)| e)
        .collect();
    (live, rows)
}

/// The slot of partition `p`'s keys (all share the hash tag `{p}`).
pub(crate) fn slot_of(cluster: &Cluster, store: &Store, p: u32) -> u16 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(store.keys().wal(p))
        .query(&mut cluster.nodes[0].connection())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resharding_a_busy_partition_loses_and_duplicates_nothing() {
    let cluster = tokio::task::block_in_place(Cluster::start);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("spill.db");
    let (store, spill) = store_on(&cluster, &db).await;
    store
        .create_session(&NewSession::new().id("busy"))
        .await
        .unwrap();
    let p = store.keys().partition("busy");
    let slot = slot_of(&cluster, &store, p);
    let from = cluster.owner_of(slot);
    let to = (from + 1) % cluster.nodes.len();
    let cancel = tokio_util::sync::CancellationToken::new();
    let daemon = tokio::spawn(
        SpillDaemon::open(store.clone(), spill)
            .await
            .unwrap()
            .run(cancel.clone().cancelled_owned()),
    );
    // Each writer appends the first half of its messages, then waits for the move to have
    // begun and sends the rest while the slot's keys are split between the two nodes; the
    // mover goes on only once every writer has a second-half append in flight. So the move
    // overlaps writes by construction, not by timing.
    let (writers, per_writer) = (4, 150);
    let (moving_tx, moving_rx) = tokio::sync::watch::channel(false);
    let (in_flight_tx, in_flight_rx) = std::sync::mpsc::channel::<()>();
    let done = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let store = store.clone();
            let mut moving = moving_rx.clone();
            let in_flight = in_flight_tx.clone();
            let done = done.clone();
            tokio::spawn(async move {
                for i in 0..per_writer {
                    if i == per_writer / 2 {
                        moving.wait_for(|m| *m).await.unwrap();
                        in_flight.send(()).unwrap();
                    }
                    let m = NewMessage::new("user").content(format!("w{w}-{i}"));
                    let key = AppendOptions::default().idempotency_key(format!("w{w}-k{i}"));
                    loop {
                        match store.append_with("busy", &m, &key).await {
                            Ok(_) => {
                                done.fetch_add(1, Ordering::Relaxed);
                                break;
                            }
                            // A slot in the middle of a move refuses a script whose keys
                            // are split (TRYAGAIN) until the move ends; the store retries
                            // an idempotent call itself, this only outlasts a longer move.
                            Err(e) if e.is_unavailable() => {
                                tokio::time::sleep(Duration::from_millis(10)).await
                            }
                            Err(e) => panic!("w{w}-{i}: {e:?}"),
                        }
                    }
                }
            })
        })
        .collect();
    let first_half = writers * (per_writer / 2);
    // Nothing of the second half went before the move: each writer waits for it.
    wait_until("every writer's first half", HANG, || {
        done.load(Ordering::Relaxed) >= first_half
    })
    .await;
    tokio::task::block_in_place(|| {
        cluster.move_slot(slot, from, to, || {
            // The session's keys are on both nodes now.
            let count = |node: usize| -> u64 {
                redis::cmd("CLUSTER")
                    .arg("COUNTKEYSINSLOT")
                    .arg(slot)
                    .query(&mut cluster.nodes[node].connection())
                    .unwrap()
            };
            assert!(
                count(from) > 0 && count(to) > 0,
                "the slot's keys are split"
            );
            moving_tx.send(true).unwrap();
            for _ in 0..writers {
                in_flight_rx.recv().unwrap();
            }
        })
    });
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(cluster.owner_of(slot), to);
    // The daemon, on the new owner, commits everything.
    let durable = store.with_durability(Durability::Durable);
    durable
        .append("busy", &NewMessage::new("user").content("last"))
        .await
        .unwrap();
    cancel.cancel();
    daemon.await.unwrap().unwrap();
    let (live, rows) = both_copies(&store, &db, "busy").await;
    let n = writers * per_writer + 1;
    assert_eq!(live.len(), n);
    let seqs: Vec<u64> = store
        .messages("busy", MessageQuery::all())
        .await
        .unwrap()
        .iter()
        .map(|m| m.seq)
        .collect();
    assert_eq!(seqs, (1..=n as u64).collect::<Vec<_>>(), "gapless");
    let mut contents: Vec<String> = store
        .messages("busy", MessageQuery::all())
        .await
        .unwrap()
        .into_iter()
        .filter_map(|m| m.content)
        .collect();
    contents.sort();
    contents.dedup();
    assert_eq!(contents.len(), n, "each append once");
    assert_eq!(rows, live, "SQLite holds exactly what Redis holds");
}

/// The CLI on a cluster URL: sessions, messages, decisions through `tail`, `stats`, `keys`,
/// the daemon (`spill --once`) and `restore` after the namespace was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_works_on_a_cluster() {
    let cluster = tokio::task::block_in_place(crate::support::cluster::shared);
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("cli{}", std::process::id());
    let cli = |args: &[&str]| {
        let mut all = vec!["--prefix", prefix.as_str()];
        all.extend_from_slice(args);
        let out = crate::support::cli_at(&cluster.url(), dir.path(), &all);
        assert_eq!(out.code, 0, "{args:?}: {out:?}");
        out.stdout
    };
    // The namespace's daemon first: it creates the durable tier and binds the namespace.
    cli(&["spill", "--once"]);
    assert_eq!(cli(&["session", "create", "--id", "c1"]).trim(), "c1");
    for i in 0..3 {
        cli(&[
            "msg",
            "append",
            "c1",
            "--role",
            "user",
            "--content",
            &format!("m{i}"),
        ]);
        cli(&[
            "decide",
            "c1",
            "--decision",
            &format!("d{i}"),
            "--rationale",
            "r",
        ]);
    }
    assert_eq!(cli(&["msg", "list", "c1"]).lines().count(), 3);
    let tail = cli(&[
        "tail",
        "--group",
        "g",
        "--consumer",
        "a",
        "--count",
        "3",
        "--from-start",
    ]);
    assert_eq!(crate::support::json_lines(&tail).len(), 3);
    let keys = cli(&["keys", "c1"]);
    assert!(keys.lines().any(|k| k.ends_with(":s:c1:msgs")), "{keys}");
    cli(&["spill", "--once"]);
    let stats = cli(&["--json", "stats"]);
    assert_eq!(stats.lines().count(), 16);
    assert!(
        stats.lines().all(|l| l.contains(r#""wal_pending":0"#)),
        "{stats}"
    );

    let store = Store::connect(Config::new(cluster.url()).prefix(&prefix))
        .await
        .unwrap();
    assert!(store.admin().wipe_namespace().await.unwrap() > 0);
    assert_eq!(cli(&["restore", "c1"]).trim(), "restored");
    assert_eq!(cli(&["msg", "list", "c1"]).lines().count(), 3);
}

/// The narrated demo, on the cluster (its "Redis lost" deletes its namespace on every master).
#[test]
fn the_demo_passes_on_a_cluster() {
    let cluster = crate::support::cluster::shared();
    let dir = tempfile::tempdir().unwrap();
    let out = crate::support::cli_at(
        &cluster.url(),
        dir.path(),
        &["--db", dir.path().join("demo.db").to_str().unwrap(), "demo"],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("all checks passed"), "{}", out.stdout);
}

/// With the default 16 partitions on 3 masters (slots split evenly), no master holds more
/// than half of the partitions.
#[test]
fn sixteen_partitions_spread_over_three_masters() {
    let cluster = crate::support::cluster::shared();
    let keys = agentstate::keys::Keys::new("as", 16);
    let mut per_master = [0usize; 3];
    for p in 0..16 {
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(keys.wal(p))
            .query(&mut cluster.nodes[0].connection())
            .unwrap();
        per_master[cluster.owner_of(slot)] += 1;
    }
    assert!(per_master.iter().all(|n| *n <= 8), "{per_master:?}");
    assert_eq!(per_master.iter().sum::<usize>(), 16);
}
