//! Retention through the real binary: `gc --dry-run` lists exactly what `gc` then removes
//! (old checkpoints, archived sessions and tombstones past the age, decisions over the cap),
//! and the file shrinks; the daemon applies the same policy by itself.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use agentstate::*;
use serde_json::json;

use crate::support::on_both_backends;
use crate::support::{create, env, Durable, TestEnv};

const DAY_MS: i64 = 86_400_000;

/// Row counts of the history tables.
fn counts(t: &TestEnv) -> Vec<(String, i64)> {
    [
        "sessions",
        "messages",
        "checkpoints",
        "decisions",
        "tombstones",
        "usage",
    ]
    .iter()
    .map(|table| {
        let n = t.durable_ints(&format!("SELECT count(*) FROM {table}"), "")[0];
        (table.to_string(), n)
    })
    .collect()
}

/// The first column of every row of `sql`.
fn column(t: &TestEnv, sql: &str) -> Vec<String> {
    t.durable_rows(sql, "")
        .into_iter()
        .map(|mut r| r.remove(0))
        .collect()
}

/// Bytes on disk of a SQLite durable tier: the file and its `-wal`.
fn disk_bytes(db: &Path) -> u64 {
    let size = |p: String| std::fs::metadata(p).map_or(0, |m| m.len());
    size(db.display().to_string()) + size(format!("{}-wal", db.display()))
}

fn gc(t: &TestEnv, extra: &[&str]) -> crate::support::CliOutput {
    let db = t.db();
    let policy = [
        "--db",
        db.to_str().unwrap(),
        "gc",
        "--keep-checkpoints",
        "2",
        "--drop-closed-after",
        "2",
        "--max-decisions",
        "3",
    ];
    t.cli(&[&policy[..], extra].concat())
}

on_both_backends!(gc_dry_run_lists_exactly_what_gc_removes_and_the_space_is_given_back);
async fn gc_dry_run_lists_exactly_what_gc_removes_and_the_space_is_given_back(t: TestEnv) {
    let big = json!({"blob": "z".repeat(200_000)});
    create(&t, "keep", None, None).await;
    let mut ckpts = Vec::new();
    for _ in 0..5 {
        ckpts.push(t.store.put_checkpoint("keep", "a", &big).await.unwrap());
    }
    let only_b = t.store.put_checkpoint("keep", "b", &big).await.unwrap();
    let mut decisions = Vec::new();
    for i in 0..6 {
        let d = NewDecision::new(format!("d{i}"), "why");
        decisions.push(t.store.record_decision("keep", &d).await.unwrap());
    }
    for i in [0, 1, 2, 4] {
        assert!(t.store.record_outcome(&decisions[i], "done").await.unwrap());
    }
    // An archived session last written three days ago, one archived just now, a session
    // closed three days ago.
    for sid in ["old", "fresh", "closed"] {
        create(&t, sid, None, None).await;
        let m = NewMessage::new("user").content("hello");
        t.store.append(sid, &m).await.unwrap();
        t.store.put_checkpoint(sid, "a", &big).await.unwrap();
    }
    t.store
        .record_decision("old", &NewDecision::new("x", "y"))
        .await
        .unwrap();
    t.store.archive("old").await.unwrap();
    t.store.archive("fresh").await.unwrap();
    t.store.close_session("closed", false).await.unwrap();
    t.flush().await;
    let db = t.db();
    // Three days pass for `old` and `closed` (the rows' times, moved back).
    let days = 3 * DAY_MS;
    t.durable_execute(&format!(
        "UPDATE sessions SET updated_at = updated_at - {days} WHERE id = 'old';
         UPDATE tombstones SET closed_at = closed_at - {days} WHERE session_id = 'closed';"
    ));
    let before = counts(&t);

    let dry = gc(&t, &["--dry-run"]);
    assert_eq!(dry.code, 0, "{dry:?}");
    let expected = [
        "session old".to_string(),
        "tombstone closed".to_string(),
        format!("checkpoint {} session=keep label=a", ckpts[0]),
        format!("checkpoint {} session=keep label=a", ckpts[1]),
        format!("checkpoint {} session=keep label=a", ckpts[2]),
        format!("decision {} session=keep", decisions[0]),
        format!("decision {} session=keep", decisions[1]),
        format!("decision {} session=keep", decisions[2]),
    ];
    assert_eq!(dry.stdout.lines().collect::<Vec<_>>(), expected);
    assert_eq!(counts(&t), before, "a dry run changes nothing");

    let real = gc(&t, &[]);
    assert_eq!(real.code, 0, "{real:?}");
    assert_eq!(
        real.stdout, dry.stdout,
        "gc removes exactly what --dry-run listed"
    );
    assert!(real.stderr.starts_with("removed 8; database "), "{real:?}");
    assert_eq!(
        column(
            &t,
            "SELECT id FROM checkpoints WHERE session_id = 'keep' ORDER BY seq"
        ),
        vec![ckpts[3].clone(), ckpts[4].clone(), only_b]
    );
    assert_eq!(
        column(&t, "SELECT id FROM decisions ORDER BY created_at, id"),
        decisions[3..].to_vec(),
        "the open d3 and d5 stay, and the newest decided one"
    );
    assert_eq!(
        column(&t, "SELECT id FROM sessions ORDER BY id"),
        ["fresh", "keep"]
    );
    assert!(column(
        &t,
        "SELECT session_id FROM messages WHERE session_id = 'old'"
    )
    .is_empty());
    assert!(column(&t, "SELECT session_id FROM tombstones").is_empty());
    // SQLite gives the pages back to the filesystem (incremental vacuum); PostgreSQL keeps
    // them for its own reuse (README: VACUUM FULL) and reports its size before and after.
    let sizes: Vec<u64> = real.stderr["removed 8; database ".len()..]
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let (bytes_before, bytes_after) = (sizes[0], sizes[1]);
    if let Durable::Sqlite = t.durable {
        assert_eq!(bytes_after, disk_bytes(&db));
        assert!(
            bytes_after + 4 * 200_000 <= bytes_before,
            "the file gives the space back: {bytes_before} -> {bytes_after}"
        );
    } else {
        assert!(bytes_after > 0 && bytes_before > 0, "{real:?}");
    }
    // Nothing left to remove.
    let again = gc(&t, &["--dry-run"]);
    assert_eq!((again.code, again.stdout.as_str()), (0, ""));
}

on_both_backends!(
    the_daemon_applies_its_retention_policy,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn the_daemon_applies_its_retention_policy(t: TestEnv) {
    let db = t.db();
    let extra = ["--keep-checkpoints", "1", "--gc-interval-ms", "50"];
    let mut daemon = crate::support::spill_daemon(&t, &db, &extra, false, Stdio::null());
    create(&t, "s", None, None).await;
    let mut last = String::new();
    for i in 0..4 {
        last = t
            .store
            .put_checkpoint("s", "x", &json!({ "i": i }))
            .await
            .unwrap();
    }
    crate::support::wait_until(
        "the daemon removes the old checkpoints",
        Duration::from_secs(20),
        || column(&t, "SELECT id FROM checkpoints WHERE session_id = 's'") == [last.clone()],
    )
    .await;
    assert!(daemon.terminate().success());
}

#[tokio::test]
async fn gc_without_a_policy_is_refused() {
    let t = env().await;
    t.flush().await;
    let db = t.db();
    let out = t.cli(&["--db", db.to_str().unwrap(), "gc"]);
    assert!(out.runtime_error().contains("keeps everything"), "{out:?}");
}

/// Memory items whose TTL ran out leave both tiers in the daemon's next full pass; one put
/// again with a new TTL in between, and one without a TTL, stay.
#[tokio::test]
async fn expired_memory_items_leave_both_tiers_and_a_renewed_one_stays() {
    let t = crate::support::env().await;
    let s = &t.store;
    let ns = ["users", "ann", "notes"];
    let item = |ttl: Option<u64>| agentstate::NewMemoryItem {
        value: serde_json::json!({"v": 1}).as_object().unwrap().clone(),
        ttl_minutes: ttl,
        ..agentstate::NewMemoryItem::default()
    };
    for (key, ttl) in [("gone", Some(1)), ("renewed", Some(1)), ("kept", None)] {
        s.put_memory(&ns, key, &item(ttl)).await.unwrap();
    }
    t.flush().await;
    // Their moments pass (as the clock will): the expiry index says so.
    let p = s.keys().memory_partition("users.ann.notes");
    let expiry = s.keys().memory_expiry(p);
    for key in ["gone", "renewed"] {
        let _: i64 = t.cmd(&["ZADD", &expiry, "1", &format!("users.ann.notes\n{key}")]);
    }
    // "renewed" is put again with a new TTL before the daemon comes round.
    s.put_memory(&ns, "renewed", &item(Some(5))).await.unwrap();
    t.flush().await;
    t.flush().await;
    let held: Vec<String> = t.cmd(&["HKEYS", &s.keys().memory("users.ann.notes")]);
    let mut held = held;
    held.sort();
    assert_eq!(held, ["kept", "renewed"]);
    assert_eq!(
        t.cmd::<Vec<String>>(&["ZRANGE", &expiry, "0", "-1"]),
        ["users.ann.notes\nrenewed"]
    );
    assert_eq!(
        t.durable_rows("SELECT key FROM memory_items ORDER BY key", ""),
        [vec!["kept".to_string()], vec!["renewed".to_string()]]
    );
}
