//! The CLI over the durable tier: stats, export, restore (one, several, --all) and the checkpoint history.

use std::time::Duration;

use agentstate::*;
use serde_json::json;

use crate::support::{create, env, json_lines, TestEnv};
use crate::support::{on_both_backends, rich_session, spill_process};

/// Runs `agentstate <args>` against the test's Redis and SQLite; returns (exit code, stdout).
fn cli(t: &TestEnv, args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentstate"))
        .arg("--redis")
        .arg(t.server.url())
        .arg("--db")
        .arg(t.db())
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
    )
}

on_both_backends!(export_lists_messages_in_the_order_of_their_seqs);
async fn export_lists_messages_in_the_order_of_their_seqs(t: TestEnv) {
    t.store
        .create_session(&NewSession::new().id("long"))
        .await
        .unwrap();
    for i in 1..=12 {
        let message = NewMessage::new("user").content(format!("m{i}"));
        t.store.append("long", &message).await.unwrap();
    }
    assert_eq!(cli(&t, &["spill", "--once"]).0, 0);
    let (code, export) = cli(&t, &["export", "long"]);
    assert_eq!(code, 0);
    let seqs: Vec<u64> = json_lines(&export)
        .iter()
        .filter(|l| l["type"] == "message")
        .map(|l| l["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=12).collect::<Vec<u64>>());
}

on_both_backends!(cli_export_stats_and_restore);
async fn cli_export_stats_and_restore(mut t: TestEnv) {
    let (sid, _) = rich_session(&t.store, "cli1").await;
    let (code, stats) = cli(&t, &["--json", "stats"]);
    assert_eq!(code, 0);
    let p = t.store.keys().partition(&sid) as usize;
    let row: serde_json::Value = serde_json::from_str(stats.lines().nth(p).unwrap()).unwrap();
    assert_eq!(row["wal_pending"], t.xlen(&t.store.keys().wal(p as u32)));
    assert_eq!(
        row["wal_committed"], "0-0",
        "the daemon pass of env() committed nothing"
    );

    assert_eq!(cli(&t, &["spill", "--once"]).0, 0);
    let (_, stats) = cli(&t, &["--json", "stats"]);
    let row: serde_json::Value = serde_json::from_str(stats.lines().nth(p).unwrap()).unwrap();
    assert_eq!(
        (row["wal_pending"].as_u64(), row["lag_ms"].as_u64()),
        (Some(0), Some(0))
    );

    let (code, export) = cli(&t, &["export", &sid]);
    assert_eq!(code, 0);
    let kinds: Vec<String> = export
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let n = |k: &str| kinds.iter().filter(|x| *x == k).count();
    assert_eq!(kinds[0], "session");
    assert_eq!(
        (
            n("message"),
            n("compaction"),
            n("usage"),
            n("checkpoint"),
            n("decision"),
            n("round")
        ),
        (8, 2, 1, 3, 2, 2)
    );
    assert_eq!(cli(&t, &["export", "nosuch"]).0, 1);

    t.lose_redis().await;
    let mut daemon = spill_process(&t, &["spill", "--interval-ms", "5"])
        .spawn()
        .unwrap();
    t.wait_for_daemon().await;
    assert_eq!(cli(&t, &["restore", &sid]), (0, "restored\n".into()));
    assert_eq!(cli(&t, &["restore", &sid]), (0, "live\n".into()));
    daemon.kill().unwrap();
    daemon.wait().unwrap();
}

#[tokio::test]
async fn cli_checkpoint_list_shows_the_full_history_and_what_is_not_flushed_yet() {
    let t = env().await;
    let s = &t.store;
    create(&t, "hist", None, None).await;
    // One checkpoint per millisecond at least, so created_at alone orders them.
    let checkpoint = |label: &'static str| async move {
        tokio::time::sleep(Duration::from_millis(2)).await;
        s.checkpoint("hist", label, None).await.unwrap()
    };
    s.set_working("hist", "plan", &json!("p1")).await.unwrap();
    let a1 = checkpoint("a").await;
    s.set_working("hist", "plan", &json!("p2")).await.unwrap();
    let a2 = checkpoint("a").await;
    let b1 = checkpoint("b").await;
    t.flush().await;
    let db = t.db();
    let db = db.to_str().unwrap();
    let list = |db: &str| -> Vec<(String, String)> {
        let lines = json_lines(&t.cli_ok(&["--db", db, "checkpoint", "list", "hist"]));
        let mut created = Vec::new();
        let listed = lines
            .iter()
            .map(|l| {
                let keys: Vec<&String> = l.as_object().unwrap().keys().collect();
                assert_eq!(keys, ["created_at", "id", "label"], "{l}");
                created.push(l["created_at"].as_i64().unwrap());
                (
                    l["id"].as_str().unwrap().to_string(),
                    l["label"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert!(
            created.is_sorted(),
            "not ordered by created_at: {created:?}"
        );
        listed
    };
    let pair = |id: &str, label: &str| (id.to_string(), label.to_string());
    assert_eq!(list(db), [pair(&a1, "a"), pair(&a2, "a"), pair(&b1, "b")]);
    // One more, not flushed: listed from Redis.
    let c1 = checkpoint("c").await;
    assert_eq!(
        list(db),
        [
            pair(&a1, "a"),
            pair(&a2, "a"),
            pair(&b1, "b"),
            pair(&c1, "c")
        ]
    );
    // Without a SQLite file: the latest per label, from Redis.
    let missing = t.server.path("missing.db");
    assert_eq!(
        list(missing.to_str().unwrap()),
        [pair(&a2, "a"), pair(&b1, "b"), pair(&c1, "c")]
    );
    assert!(!missing.exists(), "the CLI created the SQLite file");
    // Get by id reaches the whole history: a1 was replaced in Redis by a2, SQLite has it.
    let get = |args: &[&str]| {
        let mut all = vec!["--db", db, "checkpoint", "get", "hist"];
        all.extend_from_slice(args);
        t.cli_ok(&all)
    };
    assert_eq!(get(&["--id", &a1]), "{\"plan\":\"p1\"}\n");
    assert_eq!(get(&["--id", &c1]), "{\"plan\":\"p2\"}\n");
    assert_eq!(get(&["a"]), "{\"plan\":\"p2\"}\n");
    assert_eq!(get(&["--id", "ckpt_nosuch"]), "null\n");
}

/// Multi-threaded: the in-process daemon serves the restores while the test thread waits for
/// the CLI process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_restore_all_brings_every_indexed_session_back() {
    let mut t = env().await;
    for sid in ["r1", "r2"] {
        create(&t, sid, Some("ann"), None).await;
        t.store
            .append(sid, &NewMessage::new("user").content(sid))
            .await
            .unwrap();
    }
    t.flush().await;
    t.lose_redis().await;
    let (stop, daemon) = t.start_daemon().await;
    assert_eq!(
        cli(&t, &["restore", "--all"]),
        (0, "r1 restored\nr2 restored\n".into())
    );
    assert_eq!(
        cli(&t, &["restore", "r1", "r2"]),
        (0, "r1 live\nr2 live\n".into())
    );
    assert_eq!(cli(&t, &["restore"]).0, 1);
    assert_eq!(
        t.store.messages("r2", MessageQuery::all()).await.unwrap()[0]
            .content
            .as_deref(),
        Some("r2")
    );
    stop.cancel();
    daemon.await.unwrap().unwrap();
}
