//! Graph checkpoint logs after Redis loss: SQLite mirrors the log and a lost Redis gets the
//! thread back.

use serde_json::json;

use crate::live::graphs::{cp, doc, ids};
use crate::support::*;

#[tokio::test]
async fn sqlite_mirrors_the_graph_log_and_a_lost_redis_gets_the_thread_back() {
    let mut t = env().await;
    let s = t.store.clone();
    for i in 0..5 {
        let id = format!("0{i}");
        let parent = (i > 0).then(|| format!("0{}", i - 1));
        let md = json!({"run_id": "run-a", "step": i, "big": 12345678901234567_u64});
        s.graph_put(
            "th",
            &cp(
                "",
                &id,
                parent.as_deref(),
                &[("c", &format!("json:{i}"))],
                md,
            ),
        )
        .await
        .unwrap();
    }
    s.graph_put(
        "th",
        &cp("sub:1", "s1", None, &[("c", "json:\"s\"")], json!({})),
    )
    .await
    .unwrap();
    s.graph_put_writes(
        "th",
        "",
        "04",
        "task",
        "",
        &[
            (0, "c".into(), "json:5".into()),
            (-1, "__error__".into(), "json:\"boom\"".into()),
        ],
    )
    .await
    .unwrap();
    s.graph_prune("th", true).await.unwrap();
    t.flush().await;
    let redis_log: Vec<(String, String)> =
        t.hash(&s.keys().session("th").graph).into_iter().collect();
    assert_eq!(sqlite_graph(&t, "th"), redis_log);
    assert_eq!(
        redis_log
            .iter()
            .filter(|(f, _)| f.starts_with("c|"))
            .count(),
        2
    );

    let before = t.session_dump("th");
    let latest = s.graph_get("th", "", None).await.unwrap().unwrap();
    t.lose_redis().await;
    let (stop, daemon) = t.start_daemon().await;
    let s = t.store.clone();
    assert_eq!(s.graph_get("th", "", None).await.unwrap().unwrap(), latest);
    assert_eq!(t.session_dump("th"), before);
    assert_eq!(doc(&latest.metadata)["big"], json!(12345678901234567_u64));
    // The run index came back with the thread.
    assert_eq!(s.graph_delete_runs(&["run-a"]).await.unwrap(), 1);
    s.graph_put("th", &cp("", "05", Some("04"), &[], json!({})))
        .await
        .unwrap();
    assert_eq!(
        ids(&s.graph_list("th", None, None, None, None).await.unwrap()),
        ["s1", "05"]
    );
    // Deleting the thread deletes its rows.
    assert!(s.graph_delete("th").await.unwrap());
    stop.cancel();
    daemon.await.unwrap().unwrap();
    t.flush().await;
    assert!(sqlite_graph(&t, "th").is_empty());
}

/// SQLite's graph log of `thread`: (field, value) in field order.
fn sqlite_graph(t: &TestEnv, thread: &str) -> Vec<(String, String)> {
    let db = t.sqlite();
    let mut stmt = db
        .prepare("SELECT field, value FROM graph_log WHERE session_id = ?1 ORDER BY field")
        .unwrap();
    stmt.query_map([thread], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}
