//! `agentstate spill --metrics`: the Prometheus series move as the daemon works (scraped from
//! the real process over HTTP), and the probes say when it cannot work.

use agentstate::test_support::redis_server::free_port;
use agentstate::*;

use crate::support::spill_process;
use crate::support::{
    env, http_get, http_get_as, metric, metric_values, wait_until, TestEnv, HANG,
};

/// An `agentstate spill --metrics` process of `t` and the port it serves on; waits until
/// `/readyz` says ready.
async fn daemon_with_metrics(t: &TestEnv) -> (std::process::Child, u16) {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let args = [
        "spill",
        "--interval-ms",
        "5",
        "--lease-ms",
        "600",
        "--metrics",
        &addr,
    ];
    let child = spill_process(t, &args).spawn().unwrap();
    wait_until("the daemon is ready", HANG, || {
        http_get(port, "/readyz", &[]).is_some_and(|(status, _)| status == 200)
    })
    .await;
    (child, port)
}

/// One scrape of `/metrics`.
fn scrape(port: u16) -> String {
    let (status, body) = http_get(port, "/metrics", &[]).expect("the daemon answers");
    assert_eq!(status, 200, "{body}");
    body
}

/// Pending wal entries over every partition.
fn pending(body: &str) -> f64 {
    metric_values(body, "agentstate_wal_pending_entries")
        .iter()
        .sum()
}

/// The largest flush lag of any partition.
fn max_lag(body: &str) -> f64 {
    metric_values(body, "agentstate_flush_lag_seconds")
        .into_iter()
        .fold(0.0, f64::max)
}

#[tokio::test]
async fn pending_and_lag_rise_while_the_daemon_cannot_flush_and_fall_to_zero_after() {
    let t = env().await;
    let sid = t.store.create_session(&NewSession::new()).await.unwrap();
    let (mut daemon, port) = daemon_with_metrics(&t).await;
    // The gauge of owned partitions is set at the end of a pass: wait for a whole one.
    wait_until(
        "the session's creation is committed and a pass is done",
        HANG,
        || {
            let body = scrape(port);
            pending(&body) == 0.0 && metric(&body, "agentstate_partitions_owned") == Some(16.0)
        },
    )
    .await;
    // Idle: every partition reported, nothing pending, no lag.
    let idle = scrape(port);
    assert_eq!(
        metric_values(&idle, "agentstate_wal_pending_entries").len(),
        16
    );
    assert_eq!(
        metric_values(&idle, "agentstate_flush_lag_seconds").len(),
        16
    );
    assert_eq!(max_lag(&idle), 0.0);
    assert_eq!(metric(&idle, "agentstate_partitions_owned"), Some(16.0));
    assert_eq!(
        metric(&idle, "agentstate_lease_changes_total{change=\"taken\"}"),
        Some(16.0)
    );
    let flushed_before = metric(&idle, "agentstate_flushed_entries_total").unwrap();

    // Another holder takes every lease: this daemon may not commit anything.
    let keys = t.store.keys();
    for p in 0..keys.partitions() {
        let _: () = t.cmd(&[
            "SET",
            &keys.lease(p),
            "someone-else 999999999",
            "PX",
            "60000",
        ]);
    }
    wait_until("the daemon lets go of its partitions", HANG, || {
        metric(&scrape(port), "agentstate_partitions_owned") == Some(0.0)
    })
    .await;
    for i in 0..7 {
        t.store
            .append(&sid, &NewMessage::new("user").content(format!("m{i}")))
            .await
            .unwrap();
    }
    wait_until(
        "the seven appends are pending and have waited",
        HANG,
        || {
            let body = scrape(port);
            pending(&body) == 7.0 && max_lag(&body) > 0.0
        },
    )
    .await;
    let paused = scrape(port);
    let p = keys.partition(&sid);
    assert_eq!(
        metric(
            &paused,
            &format!("agentstate_wal_pending_entries{{partition=\"{p}\"}}")
        ),
        Some(7.0)
    );
    assert_eq!(
        metric(&paused, "agentstate_lease_changes_total{change=\"lost\"}"),
        Some(16.0)
    );
    assert_eq!(
        metric(&paused, "agentstate_flushed_entries_total"),
        Some(flushed_before)
    );

    // The leases free again: the daemon takes them back and drains.
    for p in 0..keys.partitions() {
        let _: () = t.cmd(&["DEL", &keys.lease(p)]);
    }
    // Every lease taken back too: the partition holding the appends can drain before the
    // daemon's pass has taken the other fifteen.
    wait_until(
        "everything is committed again and every lease retaken",
        HANG,
        || {
            let body = scrape(port);
            pending(&body) == 0.0
                && max_lag(&body) == 0.0
                && metric(&body, "agentstate_lease_changes_total{change=\"taken\"}") >= Some(32.0)
        },
    )
    .await;
    let after = scrape(port);
    assert_eq!(
        metric(&after, "agentstate_flushed_entries_total"),
        Some(flushed_before + 7.0)
    );
    assert_eq!(
        metric(&after, "agentstate_lease_changes_total{change=\"taken\"}"),
        Some(32.0)
    );
    // One observation per transaction, each a duration.
    let batches = metric(&after, "agentstate_flush_batch_seconds_count").unwrap();
    assert!(batches >= 2.0, "{after}");
    assert!(metric(&after, "agentstate_flush_batch_seconds_bucket{le=\"+Inf\"}") == Some(batches));
    daemon.kill().unwrap();
    daemon.wait().unwrap();
}

#[tokio::test]
async fn a_restore_counts_once_however_many_callers_wait_for_it() {
    let t = env().await;
    let sid = t
        .store
        .create_session(&NewSession::new().id("returning"))
        .await
        .unwrap();
    t.store
        .append(&sid, &NewMessage::new("user").content("hi"))
        .await
        .unwrap();
    let (mut daemon, port) = daemon_with_metrics(&t).await;
    wait_until("the session is committed", HANG, || {
        pending(&scrape(port)) == 0.0
    })
    .await;
    t.expire_session(&sid);
    // Four callers open the expired session at once.
    let opens: Vec<_> = (0..4)
        .map(|_| {
            let store = t.store.clone();
            let sid = sid.clone();
            tokio::spawn(async move { store.messages(&sid, MessageQuery::all()).await })
        })
        .collect();
    for open in opens {
        assert_eq!(open.await.unwrap().unwrap().len(), 1);
    }
    let body = scrape(port);
    assert_eq!(
        metric(&body, "agentstate_restores_total{result=\"restored\"}"),
        Some(1.0),
        "{body}"
    );
    assert_eq!(
        metric(&body, "agentstate_restores_total{result=\"unknown\"}"),
        Some(0.0)
    );
    daemon.kill().unwrap();
    daemon.wait().unwrap();
}

#[tokio::test]
async fn readyz_says_503_with_the_reason_when_redis_stops_and_healthz_stays_up() {
    let mut t = env().await;
    let (mut daemon, port) = daemon_with_metrics(&t).await;
    assert_eq!(http_get(port, "/healthz", &[]), Some((200, "ok\n".into())));
    // On loopback the endpoints answer only to requests naming this server (DNS rebinding).
    let (status, body) = http_get_as(port, "attacker.example", "/metrics", &[]).unwrap();
    assert_eq!(status, 403, "{body}");
    t.server.kill();
    wait_until("readyz reports Redis", HANG, || {
        http_get(port, "/readyz", &[])
            .is_some_and(|(status, body)| status == 503 && body.starts_with("not ready: redis"))
    })
    .await;
    assert_eq!(http_get(port, "/healthz", &[]), Some((200, "ok\n".into())));
    // The scrape still answers with the daemon's own series.
    assert!(metric(&scrape(port), "agentstate_partitions_owned").is_some());
    daemon.kill().unwrap();
    daemon.wait().unwrap();
}

#[tokio::test]
async fn consumer_groups_and_dead_letters_are_counted_per_group() {
    let t = env().await;
    let sid = t.store.create_session(&NewSession::new()).await.unwrap();
    for i in 0..3 {
        t.store
            .record_decision(&sid, &NewDecision::new(format!("d{i}"), "r"))
            .await
            .unwrap();
    }
    let options = ConsumerOptions::new()
        .start(StartFrom::Beginning)
        .count(10)
        .max_deliveries(1)
        .min_idle(std::time::Duration::from_millis(1))
        .block(std::time::Duration::from_millis(10));
    let mut billing = t.store.consumer("billing", "w1", options).await.unwrap();
    let got = billing.read().await.unwrap();
    assert_eq!(got.len(), 3);
    billing.ack(&got[..1]).await.unwrap();
    let (mut daemon, port) = daemon_with_metrics(&t).await;
    let body = scrape(port);
    assert_eq!(
        metric(&body, "agentstate_consumer_pending{group=\"billing\"}"),
        Some(2.0),
        "{body}"
    );
    assert_eq!(
        metric(&body, "agentstate_dead_letters{group=\"billing\"}"),
        Some(0.0)
    );
    // Past max_deliveries, the two unacknowledged decisions become dead letters.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert!(billing.claim_stale().await.unwrap().is_empty());
    let body = scrape(port);
    assert_eq!(
        metric(&body, "agentstate_dead_letters{group=\"billing\"}"),
        Some(2.0),
        "{body}"
    );
    assert_eq!(
        metric(&body, "agentstate_consumer_pending{group=\"billing\"}"),
        Some(0.0)
    );
    daemon.kill().unwrap();
    daemon.wait().unwrap();
}
