//! The spill daemon against a real redis-server and a real SQLite file: flushing exactly
//! once, restoring after Redis loss or expiry, durable writes, trimming, erasure.
//! Fixtures several modules share live here; each module covers one responsibility.

mod cli;
mod daemon;
mod erasure;
mod flush;
mod reseed;
mod restore;
mod trim;
mod watch;

use agentstate::*;
use serde_json::json;

use crate::support::TestEnv;

/// Builds a session with every kind of durable state; returns its id and its child's.
async fn rich_session(s: &Store, sid: &str) -> (String, String) {
    s.create_session(
        &NewSession::new()
            .id(sid)
            .user("alice")
            .model("m1")
            .system_prompt("be brief")
            .metadata(json!({"b": 2, "a": [1, "x/y"]})),
    )
    .await
    .unwrap();
    let kid = s
        .create_session(
            &NewSession::new()
                .id(format!("{sid}.kid"))
                .parent(sid, Lifecycle::Linked),
        )
        .await
        .unwrap();
    for i in 1..=6 {
        let opts = AppendOptions::new().idempotency_key(format!("k{i}"));
        s.append_with(
            sid,
            &NewMessage::new("user").content(format!("m{i} \u{e9}\"q\"")),
            &opts,
        )
        .await
        .unwrap();
    }
    s.compact(
        sid,
        &Compaction::new(2, 3, "sum").tokens(50, 5).round_index(1),
    )
    .await
    .unwrap();
    s.compact(sid, &Compaction::new(4, 4, "sum2"))
        .await
        .unwrap();
    s.record_usage(sid, &Usage::new(1, 10, 20).model("m1"))
        .await
        .unwrap();
    s.record_usage(sid, &Usage::new(1, 11, 21)).await.unwrap();
    s.checkpoint(sid, "a", None).await.unwrap();
    s.checkpoint(sid, "a", None).await.unwrap();
    s.checkpoint(sid, "b", None).await.unwrap();
    s.set_pending(sid, Some(&json!([{"id": "call1"}])))
        .await
        .unwrap();
    s.set_round_index(sid, 3).await.unwrap();
    let done = s
        .record_decision(sid, &NewDecision::new("d1", "r1"))
        .await
        .unwrap();
    s.record_outcome(&done, "ok").await.unwrap();
    s.record_decision(
        sid,
        &NewDecision::new("d2 a/b", "r2")
            .action("act")
            .meta(json!({"z": 1})),
    )
    .await
    .unwrap();
    s.save_state("alice", &json!({"r": 1}), Some(sid), None)
        .await
        .unwrap();
    s.save_state("alice", &json!({"r": 5}), Some(sid), Some(5))
        .await
        .unwrap();
    (sid.to_string(), kid)
}

fn count(t: &TestEnv, sql: &str, sid: &str) -> i64 {
    t.durable_ints(sql, sid)[0]
}

/// Runs the flow `async fn $flow(t: TestEnv)` once per durable tier (`$flow::sqlite`,
/// `$flow::postgres`): the same test on SQLite and on a PostgreSQL database of its own.
macro_rules! on_both_backends {
    ($flow:ident) => {
        mod $flow {
            use crate::support::{env_on, Backend};

            #[tokio::test]
            async fn sqlite() {
                super::$flow(env_on(Backend::Sqlite).await).await
            }

            #[tokio::test]
            async fn postgres() {
                super::$flow(env_on(Backend::Postgres).await).await
            }
        }
    };
}
pub(crate) use on_both_backends;

/// `agentstate spill` as a child process of this test, against the test's Redis and SQLite.
fn spill_process(t: &TestEnv, extra: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_agentstate"));
    cmd.arg("--redis")
        .arg(t.server.url())
        .arg("--db")
        .arg(t.db())
        .arg("spill")
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(
            if std::env::var_os("AGENTSTATE_TEST_DAEMON_LOG").is_some() {
                std::process::Stdio::inherit()
            } else {
                std::process::Stdio::null()
            },
        );
    cmd
}
