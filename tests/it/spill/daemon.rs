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

/// The owner id of each partition's lease (`"<pid>-<random> <token>"` → pid), `None` when
/// free.
fn lease_pids(t: &TestEnv) -> Vec<Option<u32>> {
    let keys = t.store.keys();
    (0..keys.partitions())
        .map(|p| {
            t.cmd::<Option<String>>(&["GET", &keys.lease(p)])
                .map(|v| v.split('-').next().unwrap().parse().unwrap())
        })
        .collect()
}

/// Waits until every partition is leased by one of `pids`, each holding between `lo` and
/// `hi` of them; panics with the leases after `within`.
async fn wait_for_spread(t: &TestEnv, pids: &[u32], lo: usize, hi: usize, within: Duration) {
    let deadline = std::time::Instant::now() + within;
    loop {
        let leases = lease_pids(t);
        let counts: Vec<usize> = pids
            .iter()
            .map(|pid| leases.iter().filter(|o| **o == Some(*pid)).count())
            .collect();
        if counts.iter().sum::<usize>() == leases.len()
            && counts.iter().all(|n| (lo..=hi).contains(n))
        {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "leases {leases:?}, daemons {pids:?}: counts {counts:?}, wanted {lo}..={hi} each"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Appends `n` messages to each of `sids` with a short pause between rounds.
fn writer(t: &TestEnv, sids: &[String], n: usize) -> tokio::task::JoinHandle<()> {
    let s = t.store.clone();
    let sids = sids.to_vec();
    tokio::spawn(async move {
        for i in 0..n {
            for sid in &sids {
                s.append(sid, &NewMessage::new("user").content(format!("{i}")))
                    .await
                    .unwrap();
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
}

/// After the daemons are gone: one more drain, then every session holds messages 1..=n
/// exactly once in the durable tier.
async fn assert_exactly_once(t: &TestEnv, sids: &[String], n: i64) {
    tokio::time::sleep(Duration::from_millis(700)).await; // the last leases lapse
    let out = spill_process(t, &["--once"]).output().unwrap();
    assert!(out.status.success());
    for sid in sids {
        let range = t.durable_ints(
            "SELECT count(*), min(seq), max(seq) FROM messages WHERE session_id = ?1",
            sid,
        );
        assert_eq!(range, [n, 1, n], "{sid}");
    }
}

async fn sessions_over_partitions(t: &TestEnv, n: usize) -> Vec<String> {
    let sids: Vec<String> = (0..n).map(|i| format!("share{i}")).collect();
    for sid in &sids {
        t.store
            .create_session(&NewSession::new().id(sid))
            .await
            .unwrap();
    }
    sids
}

on_both_backends!(three_daemons_share_the_partitions_and_two_take_over_a_killed_one);
async fn three_daemons_share_the_partitions_and_two_take_over_a_killed_one(t: TestEnv) {
    let sids = sessions_over_partitions(&t, 8).await;
    let args = ["--interval-ms", "5", "--lease-ms", "600"];
    let mut daemons: Vec<_> = (0..3)
        .map(|_| spill_process(&t, &args).spawn().unwrap())
        .collect();
    let pids: Vec<u32> = daemons.iter().map(|c| c.id()).collect();
    // 16 partitions over 3 daemons: 6, 6 and 4 (each at most its share, 6).
    wait_for_spread(&t, &pids, 4, 6, Duration::from_secs(10)).await;
    let per_session = 200;
    let writing = writer(&t, &sids, per_session);
    tokio::time::sleep(Duration::from_millis(300)).await;
    daemons[0].kill().unwrap(); // SIGKILL while agents append
    daemons[0].wait().unwrap();
    // The two left take its partitions once its leases and heartbeat lapse: 8 each.
    wait_for_spread(&t, &pids[1..], 8, 8, Duration::from_secs(5)).await;
    writing.await.unwrap();
    for d in &mut daemons[1..] {
        d.kill().unwrap();
        d.wait().unwrap();
    }
    assert_exactly_once(&t, &sids, per_session as i64).await;
}

on_both_backends!(a_stopped_owner_resumed_after_its_lease_lapsed_writes_nothing);
async fn a_stopped_owner_resumed_after_its_lease_lapsed_writes_nothing(t: TestEnv) {
    let sids = sessions_over_partitions(&t, 8).await;
    let args = ["--interval-ms", "5", "--lease-ms", "400"];
    let mut old = spill_process(&t, &args).spawn().unwrap();
    wait_for_spread(&t, &[old.id()], 16, 16, Duration::from_secs(10)).await;
    let per_session = 400;
    let writing = writer(&t, &sids, per_session);
    tokio::time::sleep(Duration::from_millis(150)).await;
    let pid = old.id() as libc::pid_t;
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let keys = t.store.keys();
    let token_of = |p: u32| -> i64 {
        let lease: String = t.cmd(&["GET", &keys.lease(p)]);
        lease.split(' ').nth(1).unwrap().parse().unwrap()
    };
    // The tokens the stopped owner holds; once its successor committed, none may come back.
    let stale: Vec<i64> = (0..keys.partitions()).map(token_of).collect();
    let mut new = spill_process(&t, &args).spawn().unwrap();
    wait_for_spread(&t, &[new.id()], 16, 16, Duration::from_secs(5)).await;
    // The durable tier's tokens now are the successor's; the old owner resumes with its
    // stale ones (and whatever batch it had read) while agents keep appending.
    tokio::time::sleep(Duration::from_millis(300)).await;
    unsafe { libc::kill(pid, libc::SIGCONT) };
    writing.await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let busy: std::collections::BTreeSet<u32> = sids.iter().map(|s| keys.partition(s)).collect();
    for p in busy {
        let recorded = t.durable_ints(
            "SELECT token FROM cursors WHERE partition = ?1",
            &p.to_string(),
        )[0];
        assert!(
            recorded > stale[p as usize],
            "partition {p}: the durable tier records token {recorded}, the stopped owner's was {}",
            stale[p as usize]
        );
    }
    old.kill().unwrap();
    new.kill().unwrap();
    old.wait().unwrap();
    new.wait().unwrap();
    assert_exactly_once(&t, &sids, per_session as i64).await;
}
