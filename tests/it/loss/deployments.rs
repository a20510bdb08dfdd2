//! Redis loss on both deployments, one Redis and a 3-master cluster (`on_both!`): a flushed
//! namespace and graph threads come back from SQLite after the namespace is lost.

use std::collections::BTreeSet;
use std::time::Duration;

use agentstate::*;
use serde_json::json;

use crate::support::*;

on_both!(a_flushed_namespace_comes_back_after_a_loss);

async fn a_flushed_namespace_comes_back_after_a_loss(d: Deployed) {
    let s = &d.store;
    let sids = d.sessions(5).await;
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

on_both!(graph_threads_put_list_copy_and_come_back_after_a_loss);

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
