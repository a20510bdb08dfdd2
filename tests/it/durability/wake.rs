//! The daemon wakes on a write and a durable caller on the commit: a durable write returns
//! only once its row is in the durable tier, the daemon commits and restores with no pass
//! timer running, and a durable write whose entry Redis lost says so while a daemon commits
//! the new timeline.

use std::time::Duration;

use agentstate::*;

use crate::support::{on_both_backends, wait_until, TestEnv};

/// A daemon whose timer would not run a pass for ten minutes, nor renew a lease for thirty:
/// whatever it does within a test, a write or a restore request woke it for.
fn idle_config(t: &TestEnv) -> SpillConfig {
    SpillConfig::new(t.db())
        .spool(t.server.path("."))
        .interval(Duration::from_secs(600))
        .lease_ttl(Duration::from_secs(1800))
}

/// Starts an embedded daemon on `config` and waits until it owns every partition.
async fn start(
    t: &TestEnv,
    config: SpillConfig,
) -> (
    tokio_util::sync::CancellationToken,
    tokio::task::JoinHandle<Result<()>>,
) {
    let daemon = SpillDaemon::open(t.store.clone(), config).await.unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(daemon.run(cancel.clone().cancelled_owned()));
    t.wait_for_daemon().await;
    (cancel, task)
}

on_both_backends!(a_durable_write_returns_only_once_its_row_is_in_the_durable_tier);
async fn a_durable_write_returns_only_once_its_row_is_in_the_durable_tier(t: TestEnv) {
    let (stop, daemon) = start(&t, idle_config(&t)).await;
    let durable = t.store.with_durability(Durability::Durable);
    let sid = durable.create_session(&NewSession::new()).await.unwrap();
    for i in 1..=20u64 {
        let seq = durable
            .append(&sid, &NewMessage::new("user").content(format!("m{i}")))
            .await
            .unwrap();
        assert_eq!(seq, i);
        // Read at once, from the tier itself: the row is there when the call returns.
        let rows = t.durable_messages(&sid);
        assert_eq!(
            rows.len() as u64,
            i,
            "append {i} returned before its commit"
        );
        assert!(rows[i as usize - 1].1.contains(&format!("\"m{i}\"")));
    }
    let batch = durable
        .append_many(
            &sid,
            &[
                NewMessage::new("user").content("a"),
                NewMessage::new("assistant").content("b"),
            ],
            None,
        )
        .await
        .unwrap();
    assert_eq!(batch, vec![21, 22]);
    assert_eq!(t.durable_messages(&sid).len(), 22);
    stop.cancel();
    daemon.await.unwrap().unwrap();
}

on_both_backends!(the_daemon_commits_and_restores_with_no_pass_timer_running);
async fn the_daemon_commits_and_restores_with_no_pass_timer_running(t: TestEnv) {
    let (stop, daemon) = start(&t, idle_config(&t)).await;
    // Write-behind: nothing waits for the commit, the daemon is woken by the entry itself.
    let sid = t.store.create_session(&NewSession::new()).await.unwrap();
    for i in 0..3 {
        t.store
            .append(&sid, &NewMessage::new("user").content(format!("w{i}")))
            .await
            .unwrap();
        wait_until("the write committed", Duration::from_secs(1), || {
            t.durable_messages(&sid).len() > i
        })
        .await;
    }
    // A restore request rings the daemon's bell: the session comes back within the wait.
    t.expire_session(&sid);
    let msgs = t.store.messages(&sid, MessageQuery::all()).await.unwrap();
    assert_eq!(msgs.len(), 3);
    stop.cancel();
    daemon.await.unwrap().unwrap();
}

on_both_backends!(
    a_durable_write_whose_entry_redis_lost_fails_while_a_daemon_commits_the_new_timeline
);
async fn a_durable_write_whose_entry_redis_lost_fails_while_a_daemon_commits_the_new_timeline(
    t: TestEnv,
) {
    let sid = t.store.create_session(&NewSession::new()).await.unwrap();
    let p = t.store.keys().partition(&sid);
    t.flush().await;
    // No daemon: the durable write waits with its entry in the wal alone.
    let wal = t.store.keys().wal(p);
    let before = t.xlen(&wal);
    let durable = t.store.with_durability(Durability::Durable);
    let waiter = {
        let (durable, sid) = (durable.clone(), sid.clone());
        tokio::spawn(async move {
            durable
                .append(&sid, &NewMessage::new("user").content("lost"))
                .await
        })
    };
    wait_until("the write in the wal", Duration::from_secs(5), || {
        t.xlen(&wal) > before
    })
    .await;
    let _: () = redis::cmd("FLUSHALL").query(&mut t.redis()).unwrap();
    // A new timeline: a daemon that takes the partitions of the empty Redis (ringing the
    // commit bell the waiter blocks on), and a write after the loss that it commits, past the
    // lost entry's id.
    let (stop, daemon) = start(&t, t.spill_config()).await;
    let after = (0..)
        .map(|i| format!("after-{i}"))
        .find(|id| t.store.keys().partition(id) == p)
        .unwrap();
    t.store
        .create_session(&NewSession::new().id(&after))
        .await
        .unwrap();
    t.store
        .append(&after, &NewMessage::new("user").content("new timeline"))
        .await
        .unwrap();
    let outcome = waiter.await.unwrap();
    assert!(
        matches!(outcome, Err(Error::WriteLost(_))),
        "a write Redis lost must not read as committed: {outcome:?}"
    );
    assert!(t.durable_messages(&sid).is_empty());
    wait_until(
        "the new timeline committed",
        Duration::from_secs(10),
        || t.durable_messages(&after).len() == 1,
    )
    .await;
    stop.cancel();
    daemon.await.unwrap().unwrap();
}
