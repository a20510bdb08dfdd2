//! The daemon as a process and its leases: a standby takes over, repeated SIGKILL under a writer, SIGTERM drains and releases.

use std::io::{BufRead, BufReader};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use agentstate::*;
use tokio_util::sync::CancellationToken;

use super::{count, keep_ledger, ledger_seqs, no_lease_held, owned_by, replays, spill_process};
use crate::support::{env, wait_until, TestEnv};

/// An embedded daemon on the test's SQLite file: its owner id and its task.
async fn spawn_daemon(t: &TestEnv) -> (String, tokio::task::JoinHandle<Result<()>>) {
    let daemon = SpillDaemon::open(t.store.clone(), t.spill_config())
        .await
        .unwrap();
    let owner = daemon.owner().to_string();
    let handle = tokio::spawn(daemon.run(CancellationToken::new()));
    (owner, handle)
}

/// The highest seq of `sid` SQLite holds (0 for none).
fn committed_seq(t: &TestEnv, sid: &str) -> i64 {
    count(
        t,
        "SELECT coalesce(max(seq), 0) FROM messages WHERE session_id = ?1",
        sid,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_takes_over_each_time_the_owner_dies_and_nothing_is_lost_or_applied_twice() {
    let t = env().await;
    keep_ledger(&t);
    let sid = t.store.create_session(&NewSession::new()).await.unwrap();
    let written = Arc::new(AtomicI64::new(0));
    let stop = CancellationToken::new();
    let writer = {
        let (s, sid, written, stop) = (t.store.clone(), sid.clone(), written.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.is_cancelled() {
                let seq = s.append(&sid, &NewMessage::new("user")).await.unwrap();
                written.store(seq as i64, Ordering::SeqCst);
                tokio::task::yield_now().await;
            }
        })
    };
    let mut owner = spawn_daemon(&t).await;
    wait_until("the first daemon owns every partition", || {
        owned_by(&t, &owner.0).len() == 16
    })
    .await;
    // Six times: a standby runs beside the owner (finding every lease held), the owner dies
    // abruptly (its task aborted at any await, its leases left to lapse), and the standby
    // takes every partition over and flushes what was written since.
    for death in 1..=6 {
        let standby = spawn_daemon(&t).await;
        let at_start = written.load(Ordering::SeqCst);
        wait_until("the writer writes beside both daemons", || {
            written.load(Ordering::SeqCst) > at_start + 20
        })
        .await;
        let before_death = written.load(Ordering::SeqCst);
        owner.1.abort();
        let _ = owner.1.await;
        wait_until(&format!("standby {death} owns every partition"), || {
            owned_by(&t, &standby.0).len() == 16
        })
        .await;
        let since = written.load(Ordering::SeqCst).max(before_death + 1);
        wait_until(&format!("standby {death} flushed the writes"), || {
            committed_seq(&t, &sid) >= since
        })
        .await;
        owner = standby;
    }
    stop.cancel();
    writer.await.unwrap();
    let last = written.load(Ordering::SeqCst);
    let durable = t.store.with_durability(Durability::Durable);
    let seq = durable
        .append(&sid, &NewMessage::new("user"))
        .await
        .unwrap();
    assert_eq!(seq as i64, last + 1);
    owner.1.abort();
    let _ = owner.1.await;
    assert_eq!(replays(&t), vec![], "entries applied more than once");
    assert_eq!(ledger_seqs(&t, &sid), (1..=last + 1).collect::<Vec<_>>());
    let (n, lo, hi): (i64, i64, i64) = t
        .sqlite()
        .query_row(
            "SELECT count(*), min(seq), max(seq) FROM messages WHERE session_id = ?1",
            [&sid],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!((n, lo, hi), (last + 1, 1, last + 1));
}

#[tokio::test]
async fn repeated_sigkill_of_the_daemon_process_under_a_concurrent_writer_loses_and_duplicates_nothing(
) {
    let t = env().await;
    keep_ledger(&t);
    let sids: Vec<String> = (0..3).map(|i| format!("kill{i}")).collect();
    for sid in &sids {
        t.store
            .create_session(&NewSession::new().id(sid))
            .await
            .unwrap();
    }
    let per_session = 300;
    let writer = {
        let s = t.store.clone();
        let sids = sids.clone();
        tokio::spawn(async move {
            for i in 0..per_session {
                for sid in &sids {
                    s.append(sid, &NewMessage::new("user").content(format!("{i}")))
                        .await
                        .unwrap();
                }
                if i % 20 == 0 {
                    s.record_decision(&sids[0], &NewDecision::new(format!("d{i}"), "r"))
                        .await
                        .unwrap();
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };
    let mut kills = 0;
    while !writer.is_finished() || kills < 3 {
        let mut child = spill_process(
            &t,
            &["--json", "spill", "--interval-ms", "5", "--lease-ms", "200"],
        )
        .spawn()
        .unwrap();
        let mut events = BufReader::new(child.stdout.take().unwrap());
        let mut started = String::new();
        events.read_line(&mut started).unwrap();
        let started: serde_json::Value = serde_json::from_str(&started).unwrap();
        let owner = started["owner"].as_str().unwrap().to_string();
        // Each daemon takes over (the killed one's leases lapse) before it is killed, at a
        // varying instant of its work.
        wait_until(&format!("daemon {kills} owns a partition"), || {
            !owned_by(&t, &owner).is_empty()
        })
        .await;
        tokio::time::sleep(Duration::from_millis(37 * (kills % 5))).await;
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        kills += 1;
    }
    writer.await.unwrap();
    let flushed_by_killed = count(
        &t,
        "SELECT count(*) FROM messages WHERE session_id = ?1",
        &sids[2],
    );
    assert!(flushed_by_killed > 0, "the killed daemons flushed nothing");
    wait_until("the last killed daemon's leases lapse", || {
        no_lease_held(&t)
    })
    .await;
    let out = spill_process(&t, &["spill", "--once"]).output().unwrap();
    assert!(out.status.success());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["partitions"], 16, "{report}");
    assert_eq!(replays(&t), vec![], "entries applied more than once");
    let db = t.sqlite();
    for sid in &sids {
        assert_eq!(
            ledger_seqs(&t, sid),
            (1..=per_session).collect::<Vec<_>>(),
            "{sid} after {kills} kills"
        );
        let (n, lo, hi): (i64, i64, i64) = db
            .query_row(
                "SELECT count(*), min(seq), max(seq) FROM messages WHERE session_id = ?1",
                [sid],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!(
            (n, lo, hi),
            (per_session, 1, per_session),
            "{sid} after {kills} kills"
        );
    }
    assert_eq!(
        count(
            &t,
            "SELECT count(*) FROM decisions WHERE session_id = ?1",
            &sids[0]
        ),
        15
    );
}

#[tokio::test]
async fn sigterm_drains_commits_and_exits_zero() {
    let t = env().await;
    let sid = t.store.create_session(&NewSession::new()).await.unwrap();
    let mut child = spill_process(&t, &["spill", "--interval-ms", "5"])
        .spawn()
        .unwrap();
    for _ in 0..50 {
        t.store
            .append(&sid, &NewMessage::new("user"))
            .await
            .unwrap();
    }
    let durable = t.store.with_durability(Durability::Durable);
    assert_eq!(
        durable
            .append(&sid, &NewMessage::new("user"))
            .await
            .unwrap(),
        51
    );
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert_eq!(
        count(
            &t,
            "SELECT count(*) FROM messages WHERE session_id = ?1",
            &sid
        ),
        51
    );
    // The leases were released: a new daemon takes over at once.
    let mut c = t.redis();
    let lease: Option<String> = redis::cmd("GET")
        .arg(t.store.keys().lease(t.store.keys().partition(&sid)))
        .query(&mut c)
        .unwrap();
    assert_eq!(lease, None);
}
