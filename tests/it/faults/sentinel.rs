//! Redis under Sentinel: clients and the daemon on a `redis+sentinel://` URL find the master
//! through the Sentinels and follow a `SENTINEL FAILOVER` and a killed master; writes after
//! the switch land on the new master, and an ACL user and the Sentinels' own password work.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentstate::*;

use crate::support::sentinel::{Deployment, Shape};
use crate::support::{cli_at, wait_until, HANG};

/// An acknowledged append: session, content, seq, and the switches (0, 1, 2) that had
/// completed when it was sent.
type Ack = (String, String, u64, usize);

/// The messages of `sid` on node `node` of `d`, read from its list: content by seq.
fn contents_on(d: &Deployment, node: usize, store: &Store, sid: &str) -> BTreeMap<u64, String> {
    let elements: Vec<String> = redis::cmd("LRANGE")
        .arg(&store.keys().session(sid).msgs)
        .arg(0)
        .arg(-1)
        .query(&mut d.nodes[node].connection())
        .unwrap();
    elements
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let m: serde_json::Value = serde_json::from_str(e).unwrap();
            (i as u64 + 1, m["content"].as_str().unwrap().to_string())
        })
        .collect()
}

/// Waits until every running replica has the master's replication offset.
fn wait_replicated(d: &Deployment, master: usize) {
    let offset = |i: usize| -> Option<i64> {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut d.nodes[i].connection())
            .ok()?;
        let key = if i == master {
            "master_repl_offset:"
        } else {
            "slave_repl_offset:"
        };
        info.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
    };
    wait_until_blocking_ok(|| {
        let want = offset(master);
        (0..d.nodes.len())
            .filter(|&i| i != master && d.nodes[i].pid().is_some())
            .all(|i| offset(i) == want)
    });
}

fn wait_until_blocking_ok(f: impl FnMut() -> bool) {
    crate::support::wait_until_blocking("the replicas caught up", HANG, f);
}

/// Four writers append on the Sentinel URL while a `SENTINEL FAILOVER` moves the master and
/// then the new master is killed. Each writer retries a failed append with its idempotency
/// key. After each switch: the old master is a replica or gone, every append acknowledged
/// after the switch is on the new master at its seq (none went to a replica, which refuses
/// writes), no seq of a session has two contents, and a durable append (the daemon on the
/// same URL commits and publishes on the new master) succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_and_the_daemon_on_the_sentinel_url_follow_a_failover_and_a_killed_master() {
    let mut d = Deployment::start(Shape {
        replicas: 1,
        sentinels: 3,
        sentinel_password: None,
    });
    let dir = tempfile::tempdir().unwrap();
    let config = Config::new(d.url()).retry_wait(Duration::from_secs(10));
    let store = Store::connect(config).await.unwrap();
    let daemon = SpillDaemon::open(store.clone(), SpillConfig::new(dir.path().join("s.db")))
        .await
        .unwrap();
    let daemon = tokio::spawn(daemon.run(std::future::pending()));

    let sids: Vec<String> = (0..4).map(|i| format!("w{i}")).collect();
    for sid in &sids {
        store
            .create_session(&NewSession::new().id(sid))
            .await
            .unwrap();
    }
    let switches = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let hold = Arc::new(AtomicBool::new(false));
    let acks: Arc<Mutex<Vec<Ack>>> = Arc::default();
    let mut writers = Vec::new();
    for sid in sids.clone() {
        let (store, switches, stop, hold, acks) = (
            store.clone(),
            switches.clone(),
            stop.clone(),
            hold.clone(),
            acks.clone(),
        );
        writers.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) {
                if hold.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                let switch = switches.load(Ordering::SeqCst);
                let content = format!("{sid}-{n}");
                let message = NewMessage::new("user").content(&content);
                let key = AppendOptions::new().idempotency_key(&content);
                match store.append_with(&sid, &message, &key).await {
                    Ok(seq) => {
                        acks.lock()
                            .unwrap()
                            .push((sid.clone(), content, seq, switch));
                        n += 1;
                    }
                    // Retried with the same key: applied once.
                    Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            }
        }));
    }
    let acked_after = |switch: usize| {
        let acks = acks.clone();
        move || {
            acks.lock()
                .unwrap()
                .iter()
                .filter(|a| a.3 == switch)
                .count()
                >= 40
        }
    };
    wait_until("appends before any switch", HANG, acked_after(0)).await;

    // A Sentinel-driven failover: the old master stays up and becomes a replica.
    let old = d.master();
    let new = tokio::task::block_in_place(|| d.failover());
    assert_ne!(old, new);
    switches.store(1, Ordering::SeqCst);
    wait_until("appends after the failover", HANG, acked_after(1)).await;
    hold.store(true, Ordering::SeqCst);
    // Let writes in flight finish, then compare with the new master.
    tokio::time::sleep(Duration::from_millis(200)).await;
    tokio::task::block_in_place(|| wait_replicated(&d, new));
    check_acks(&d, new, &store, &acks.lock().unwrap(), 1);
    assert_eq!(d.role(old), "slave");
    for sid in &sids {
        assert_eq!(
            contents_on(&d, old, &store, sid),
            contents_on(&d, new, &store, sid),
            "{sid}: the replica holds exactly what its master holds"
        );
    }
    let durable = store.with_durability(Durability::Durable);
    let seq = durable
        .append(&sids[0], &NewMessage::new("user").content("durable-1"))
        .await
        .unwrap();
    assert_eq!(
        contents_on(&d, new, &store, &sids[0])
            .get(&seq)
            .map(String::as_str),
        Some("durable-1")
    );
    hold.store(false, Ordering::SeqCst);

    // The new master is killed: the Sentinels agree and promote the old one back.
    let killed = new;
    let newest = tokio::task::block_in_place(|| d.kill_master());
    assert_ne!(newest, killed);
    switches.store(2, Ordering::SeqCst);
    wait_until("appends after the killed master", HANG, acked_after(2)).await;
    stop.store(true, Ordering::SeqCst);
    for w in writers {
        w.await.unwrap();
    }
    check_acks(&d, newest, &store, &acks.lock().unwrap(), 2);
    let seq = durable
        .append(&sids[1], &NewMessage::new("user").content("durable-2"))
        .await
        .unwrap();
    assert_eq!(
        contents_on(&d, newest, &store, &sids[1])
            .get(&seq)
            .map(String::as_str),
        Some("durable-2")
    );
    // The CLI on the same URL reads from the master.
    let out = cli_at(&d.url(), dir.path(), &["msg", "list", &sids[1]]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("durable-2"), "{out:?}");
    daemon.abort();
}

/// Every append acknowledged after switch `switch` is on node `master` at the seq it was
/// acknowledged with, and no seq of a session was acknowledged with two contents.
fn check_acks(d: &Deployment, master: usize, store: &Store, acks: &[Ack], switch: usize) {
    let mut by_seq: BTreeMap<(String, u64), String> = BTreeMap::new();
    let mut checked = 0;
    let mut live: BTreeMap<String, BTreeMap<u64, String>> = BTreeMap::new();
    // Before a switch, the old master may have acknowledged a write the new master never
    // received (the window of asynchronous replication), whose seq is handed out again;
    // from the switch on, a seq is acknowledged once.
    for (sid, content, seq, at) in acks.iter().filter(|a| a.3 >= switch) {
        if let Some(other) = by_seq.insert((sid.clone(), *seq), content.clone()) {
            panic!("{sid} seq {seq} acknowledged as {other} and as {content}");
        }
        if *at != switch {
            continue;
        }
        let on_master = live
            .entry(sid.clone())
            .or_insert_with(|| contents_on(d, master, store, sid));
        assert_eq!(
            on_master.get(seq),
            Some(content),
            "{sid}: acknowledged at seq {seq} after switch {switch}"
        );
        checked += 1;
    }
    assert!(
        checked >= 40,
        "{checked} appends checked after switch {switch}"
    );
}

/// The least-privilege ACL user of docs/security.md (made on every data node: ACL users are
/// per node) works through Sentinels that have a password of their own, given as
/// `sentinel_password`; a wrong Sentinel password fails with a clear error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acl_user_works_through_sentinels_with_their_own_password() {
    let d = Deployment::start(Shape {
        replicas: 1,
        sentinels: 1,
        sentinel_password: Some("sentinel-pw".into()),
    });
    let acl = crate::security::acl::readme_acl_line();
    for node in &d.nodes {
        let _: () = redis::cmd(&acl[0])
            .arg(&acl[1..])
            .query(&mut node.connection())
            .unwrap();
    }
    let password = crate::security::acl::PASSWORD;
    let url = d.url_as(&format!("agentstate:{password}@"));
    let dir = tempfile::tempdir().unwrap();
    let store = Store::connect(Config::new(&url)).await.unwrap();
    // The daemon runs through the failover: it checks the new master's history before
    // writes there are taken.
    let daemon =
        agentstate::SpillDaemon::open(store.clone(), SpillConfig::new(dir.path().join("a.db")))
            .await
            .unwrap();
    let daemon = tokio::spawn(daemon.run(std::future::pending()));
    store
        .create_session(&NewSession::new().id("s"))
        .await
        .unwrap();
    assert_eq!(
        store
            .append("s", &NewMessage::new("user").content("one"))
            .await
            .unwrap(),
        1
    );
    let new = tokio::task::block_in_place(|| d.failover());
    // The store and the CLI reach the new master as the ACL user.
    let two = NewMessage::new("user").content("two");
    let mut second = store
        .append_with("s", &two, &AppendOptions::new().idempotency_key("two"))
        .await;
    while second.as_ref().is_err_and(Error::is_retry_safe) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        second = store
            .append_with("s", &two, &AppendOptions::new().idempotency_key("two"))
            .await;
    }
    assert_eq!(second.unwrap(), 2);
    let out = cli_at(
        &url,
        dir.path(),
        &["msg", "append", "s", "--role", "user", "--content", "three"],
    );
    assert_eq!((out.code, out.stdout.as_str()), (0, "3\n"), "{out:?}");
    let on_new: Vec<String> = redis::cmd("LRANGE")
        .arg(&store.keys().session("s").msgs)
        .arg(0)
        .arg(-1)
        .query(&mut d.nodes[new].connection())
        .unwrap();
    assert_eq!(on_new.len(), 3);
    daemon.abort();

    let wrong = url.replace("sentinel-pw", "nope");
    let err = Store::connect(Config::new(&wrong)).await.err().unwrap();
    assert!(matches!(err, Error::RedisUnavailable { .. }), "{err:?}");
    assert!(err.to_string().contains("Sentinels"), "{err}");
    let out = cli_at(&wrong, dir.path(), &["session", "list"]);
    let line = out.runtime_error();
    assert!(!line.contains("nope"), "the password is not shown: {line}");
}
