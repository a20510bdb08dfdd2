//! The newcomer's path: `agentstate demo` end to end, and the embedded-default decision.

use std::process::{Command, Output};

use agentstate::redis_server::{free_port, RedisServer};
use rusqlite::Connection;

use crate::support::cli_at;

/// The binary with no Redis configured: the embedded default probes `probe` instead of
/// 127.0.0.1:6379 (so the machine's shared Redis is never involved).
fn unconfigured(dir: &std::path::Path, probe: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentstate"));
    cmd.env_remove("AGENTSTATE_REDIS_URL")
        .env_remove("AGENTSTATE_DB")
        .env_remove("AGENTSTATE_LOG")
        .env("AGENTSTATE_DEFAULT_REDIS_URL", probe)
        .current_dir(dir);
    cmd
}

/// A loopback URL where nothing listens.
fn dead_address() -> String {
    format!("redis://127.0.0.1:{}", free_port())
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The planner's id, its messages (seq, state) and its decisions (decision, outcome).
type PlannerRows = (String, Vec<(i64, String)>, Vec<(String, Option<String>)>);

/// Rows the demo's planner left in SQLite: (seq, state) of its messages and
/// (decision, outcome) of its decisions.
fn planner_rows(db: &std::path::Path) -> PlannerRows {
    let c = Connection::open(db).unwrap();
    let sid: String = c
        .query_row(
            "SELECT id FROM sessions WHERE id LIKE 'demo-%-planner'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let mut stmt = c
        .prepare("SELECT seq, json_extract(element, '$.state') FROM messages WHERE session_id = ?1 ORDER BY seq")
        .unwrap();
    let messages = stmt
        .query_map([&sid], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<Vec<_>>>()
        .unwrap();
    let mut stmt = c
        .prepare(
            "SELECT decision, outcome FROM decisions WHERE session_id = ?1 ORDER BY created_at, id",
        )
        .unwrap();
    let decisions = stmt
        .query_map([&sid], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<Vec<_>>>()
        .unwrap();
    (sid, messages, decisions)
}

/// The durable state every successful demo run leaves: 63 messages (1..=50 compacted out),
/// four decisions of which the three acted on have outcomes, one checkpoint, and both
/// workers as sub-agents of the planner.
fn assert_demo_history(db: &std::path::Path) {
    let (sid, messages, decisions) = planner_rows(db);
    let seqs: Vec<i64> = messages.iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs, (1..=63).collect::<Vec<_>>());
    for (seq, state) in &messages {
        let want = if *seq <= 50 {
            "compacted_out"
        } else {
            "active"
        };
        assert_eq!(state, want, "seq {seq}");
    }
    let outcomes: Vec<Option<&str>> = decisions.iter().map(|(_, o)| o.as_deref()).collect();
    assert_eq!(decisions.len(), 4, "{decisions:?}");
    assert!(outcomes[..3]
        .iter()
        .all(|o| o.is_some_and(|o| o.starts_with("done by exec-"))));
    assert_eq!(outcomes[3], None);
    let c = Connection::open(db).unwrap();
    let checkpoints: i64 = c
        .query_row(
            "SELECT count(*) FROM checkpoints WHERE session_id = ?1",
            [&sid],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(checkpoints, 1);
    let children: i64 = c
        .query_row(
            "SELECT count(*) FROM sessions WHERE parent = ?1",
            [&sid],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(children, 2);
}

#[test]
fn demo_on_the_embedded_default_passes_every_check_and_leaves_the_history_in_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let out = unconfigured(dir.path(), &dead_address())
        .arg("demo")
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("private redis-server"), "{stdout}");
    assert!(stdout.contains("all checks passed"), "{stdout}");
    assert!(!stdout.contains('✗'), "{stdout}");
    assert_demo_history(&dir.path().join("agentstate-demo.db"));
}

#[test]
fn demo_on_a_shared_redis_works_in_its_own_namespace_and_leaves_the_session_live() {
    let server = RedisServer::start().unwrap();
    let mut c = server.connection();
    let _: () = redis::cmd("SET")
        .arg("as:someone-elses-key")
        .arg("1")
        .query(&mut c)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("demo.db");
    let out = cli_at(
        &server.url(),
        dir.path(),
        &["--db", db.to_str().unwrap(), "demo"],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_demo_history(&db);
    let (sid, _, _) = planner_rows(&db);
    let p = agentstate::keys::Keys::new("asdemo", 16).partition(&sid);
    let next_seq: String = redis::cmd("HGET")
        .arg(format!("asdemo:{{{p}}}:s:{sid}"))
        .arg("next_seq")
        .query(&mut c)
        .unwrap();
    assert_eq!(next_seq, "64");
    let other: Option<String> = redis::cmd("GET")
        .arg("as:someone-elses-key")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        other.as_deref(),
        Some("1"),
        "the demo touched a key outside its namespace"
    );
}

#[test]
fn with_nothing_on_the_default_address_a_command_starts_a_private_redis() {
    let dir = tempfile::tempdir().unwrap();
    let out = unconfigured(dir.path(), &dead_address())
        .args(["session", "create", "--id", "s1"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stdout, "s1\n");
    assert!(
        stderr.contains("started a private redis-server"),
        "{stderr}"
    );
}

#[test]
fn with_no_redis_anywhere_the_error_names_both_ways_to_get_one() {
    let dir = tempfile::tempdir().unwrap();
    let empty_path = tempfile::tempdir().unwrap();
    let out = unconfigured(dir.path(), &dead_address())
        .env("PATH", empty_path.path())
        .args(["session", "list"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout, "");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains("docker compose up -d redis"), "{stderr}");
    assert!(stderr.contains("redis-server"), "{stderr}");
}
