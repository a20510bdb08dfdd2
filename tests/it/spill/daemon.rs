//! The daemon as a process and its leases: a standby takes over, repeated SIGKILL under a writer, SIGTERM drains and releases.

use std::time::Duration;

use agentstate::*;

use super::on_both_backends;
use super::{count, spill_process};
use crate::support::env;
use crate::support::TestEnv;

on_both_backends!(a_standby_takes_over_when_the_owner_dies_and_nothing_is_lost_or_doubled);
async fn a_standby_takes_over_when_the_owner_dies_and_nothing_is_lost_or_doubled(t: TestEnv) {
    let sid = t.store.create_session(&NewSession::new()).await.unwrap();
    let writer = {
        let s = t.store.clone();
        let sid = sid.clone();
        tokio::spawn(async move {
            for _ in 0..400 {
                s.append(&sid, &NewMessage::new("user")).await.unwrap();
            }
        })
    };
    // Owners die abruptly (task aborted at any await) while the writer runs.
    for _ in 0..6 {
        let (_stop, daemon) = t.start_daemon().await;
        tokio::time::sleep(Duration::from_millis(60)).await;
        daemon.abort();
        let _ = daemon.await;
    }
    writer.await.unwrap();
    let (stop, daemon) = t.start_daemon().await;
    let durable = t.store.with_durability(Durability::Durable);
    assert_eq!(
        durable
            .append(&sid, &NewMessage::new("user"))
            .await
            .unwrap(),
        401
    );
    stop.cancel();
    daemon.await.unwrap().unwrap();
    let range = t.durable_ints(
        "SELECT count(*), min(seq), max(seq) FROM messages WHERE session_id = ?1",
        &sid,
    );
    assert_eq!(range, [401, 1, 401]);
}

on_both_backends!(
    repeated_sigkill_of_the_daemon_process_under_a_concurrent_writer_loses_and_duplicates_nothing
);
async fn repeated_sigkill_of_the_daemon_process_under_a_concurrent_writer_loses_and_duplicates_nothing(
    t: TestEnv,
) {
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
        let mut child = spill_process(&t, &["--interval-ms", "5", "--lease-ms", "200"])
            .spawn()
            .unwrap();
        // Long enough to take over the lapsed leases and flush; killed at a varying instant.
        tokio::time::sleep(Duration::from_millis(250 + 37 * (kills % 5))).await;
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
    tokio::time::sleep(Duration::from_millis(250)).await; // the last lease lapses
    let out = spill_process(&t, &["--once"]).output().unwrap();
    assert!(out.status.success());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["partitions"], 16, "{report}");
    for sid in &sids {
        let range = t.durable_ints(
            "SELECT count(*), min(seq), max(seq) FROM messages WHERE session_id = ?1",
            sid,
        );
        assert_eq!(
            range,
            [per_session, 1, per_session],
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
    let mut child = spill_process(&t, &["--interval-ms", "5"]).spawn().unwrap();
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
