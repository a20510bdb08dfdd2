//! Fixtures of the spill daemon's tests: a session with every kind of durable state, the
//! durable tier's counts and ledger, `agentstate spill` as a child process, and
//! `on_both_backends!` (a flow on SQLite and on PostgreSQL).

use agentstate::*;
use serde_json::json;

use super::{Durable, TestEnv};

/// Builds a session with every kind of durable state; returns its id and its child's.
pub async fn rich_session(s: &Store, sid: &str) -> (String, String) {
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

pub fn count(t: &TestEnv, sql: &str, sid: &str) -> i64 {
    t.durable_ints(sql, sid)[0]
}

/// Runs the flow `async fn $flow(t: TestEnv)` once per durable tier (`$flow::sqlite`,
/// `$flow::postgres`): the same test on SQLite and on a PostgreSQL database of its own.
/// Arguments after the name go to `#[tokio::test(...)]` (e.g. `flavor = "multi_thread"`).
macro_rules! on_both_backends {
    ($flow:ident $(, $($test_args:tt)+)?) => {
        mod $flow {
            use crate::support::{env_on, Backend};

            #[tokio::test$(($($test_args)+))?]
            async fn sqlite() {
                super::$flow(env_on(Backend::Sqlite).await).await
            }

            #[tokio::test$(($($test_args)+))?]
            async fn postgres() {
                super::$flow(env_on(Backend::Postgres).await).await
            }
        }
    };
}
pub(crate) use on_both_backends;

/// `agentstate <args>` (e.g. `spill --once`) as a child process of this test, against the
/// test's Redis and SQLite.
pub fn spill_process(t: &TestEnv, args: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_agentstate"));
    // a spool goes to the working directory on PostgreSQL: the test's, not the checkout
    cmd.current_dir(t.server.path("."))
        .arg("--redis")
        .arg(t.server.url())
        .arg("--db")
        .arg(t.db())
        .args(args)
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

/// Starts keeping an applied-entry ledger in the test's durable tier: triggers record every
/// write of a message row (its insert, or the upsert's update) and every decision inserted.
/// The flusher upserts messages, so a replayed wal entry leaves the table as it was; the
/// ledger shows it as a second write of the same row.
pub fn keep_ledger(t: &TestEnv) {
    const TABLE: &str =
        "CREATE TABLE test_ledger (what TEXT NOT NULL, session_id TEXT NOT NULL, item TEXT NOT NULL);";
    match &t.durable {
        Durable::Sqlite => rusqlite::Connection::open(t.db())
            .unwrap()
            .execute_batch(&format!(
                "{TABLE}
                 CREATE TRIGGER test_ledger_msg_insert AFTER INSERT ON messages BEGIN
                     INSERT INTO test_ledger VALUES ('message', new.session_id, new.seq); END;
                 CREATE TRIGGER test_ledger_msg_update AFTER UPDATE ON messages BEGIN
                     INSERT INTO test_ledger VALUES ('message', new.session_id, new.seq); END;
                 CREATE TRIGGER test_ledger_decision AFTER INSERT ON decisions BEGIN
                     INSERT INTO test_ledger VALUES ('decision', new.session_id, new.id); END;"
            ))
            .unwrap(),
        Durable::Postgres(pg) => {
            pg.rows(&format!(
                "{TABLE}
                 CREATE FUNCTION test_ledger_msg() RETURNS trigger LANGUAGE plpgsql AS $$
                     BEGIN INSERT INTO test_ledger VALUES ('message', NEW.session_id, NEW.seq);
                     RETURN NULL; END $$;
                 CREATE FUNCTION test_ledger_decision() RETURNS trigger LANGUAGE plpgsql AS $$
                     BEGIN INSERT INTO test_ledger VALUES ('decision', NEW.session_id, NEW.id);
                     RETURN NULL; END $$;
                 CREATE TRIGGER test_ledger_msg AFTER INSERT OR UPDATE ON messages
                     FOR EACH ROW EXECUTE FUNCTION test_ledger_msg();
                 CREATE TRIGGER test_ledger_decision AFTER INSERT ON decisions
                     FOR EACH ROW EXECUTE FUNCTION test_ledger_decision();"
            ));
        }
    }
}

/// What the ledger saw applied more than once: `(what, session, item, times)`.
pub fn replays(t: &TestEnv) -> Vec<(String, String, String, i64)> {
    t.durable_rows(
        "SELECT what, session_id, item, count(*) FROM test_ledger
         GROUP BY what, session_id, item HAVING count(*) > 1",
        "",
    )
    .into_iter()
    .map(|r| {
        (
            r[0].clone(),
            r[1].clone(),
            r[2].clone(),
            r[3].parse().unwrap(),
        )
    })
    .collect()
}

/// The message seqs of `sid` the ledger saw applied, in order, each once however often.
pub fn ledger_seqs(t: &TestEnv, sid: &str) -> Vec<i64> {
    t.durable_rows(
        "SELECT DISTINCT CAST(item AS INTEGER) AS seq FROM test_ledger
         WHERE what = 'message' AND session_id = ?1 ORDER BY seq",
        sid,
    )
    .into_iter()
    .map(|r| r[0].parse().unwrap())
    .collect()
}

/// The partitions whose lease `owner` holds now.
pub fn owned_by(t: &TestEnv, owner: &str) -> Vec<u32> {
    let keys = t.store.keys();
    (0..keys.partitions())
        .filter(|p| {
            t.cmd::<Option<String>>(&["GET", &keys.lease(*p)])
                .is_some_and(|v| v.split(' ').next() == Some(owner))
        })
        .collect()
}

/// True when no daemon holds any partition's lease.
pub fn no_lease_held(t: &TestEnv) -> bool {
    let keys = t.store.keys();
    (0..keys.partitions()).all(|p| t.cmd::<Option<String>>(&["GET", &keys.lease(p)]).is_none())
}
