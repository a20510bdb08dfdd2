//! Memory pressure: a Redis at `maxmemory` with `noeviction` refuses our writes with a
//! typed error and nothing partial is left (Redis refuses a script only at its first write:
//! it wrote nothing, or it ran to its end); a policy that can evict our keys is warned about
//! when the daemon starts.

use std::io::Read;
use std::process::Stdio;
use std::time::{Duration, Instant};

use agentstate::*;
use serde_json::json;

use crate::support::{env, TestEnv};

/// Sets `maxmemory` on the test's Redis (`1` byte: every write that may grow memory is
/// refused; `0`: no limit).
fn maxmemory(t: &TestEnv, bytes: &str) {
    let _: () = t.cmd(&["CONFIG", "SET", "maxmemory", bytes]);
}

fn oom(err: &Error) {
    assert!(err.is_out_of_memory(), "not an OutOfMemory error: {err:?}");
}

#[tokio::test]
async fn a_full_redis_refuses_every_write_with_a_typed_error_and_writes_nothing() {
    let t = env().await;
    crate::support::create(&t, "full", Some("ann"), None).await;
    let msg = NewMessage::new("user").content("before");
    assert_eq!(t.store.append("full", &msg).await.unwrap(), 1);
    t.store
        .set_working("full", "plan", &json!({"step": 1}))
        .await
        .unwrap();
    maxmemory(&t, "1");

    let s = &t.store;
    oom(&t
        .rejected(s.create_session(&NewSession::new().id("new")))
        .await);
    oom(&t
        .rejected(s.append("full", &NewMessage::new("user").content("x")))
        .await);
    oom(&t
        .rejected(s.set_working("full", "plan", &json!({"step": 2})))
        .await);
    oom(&t
        .rejected(s.record_decision("full", &NewDecision::new("go", "why")))
        .await);
    oom(&t
        .rejected(s.put_checkpoint("full", "cp", &json!({"a": 1})))
        .await);
    oom(&t
        .rejected(s.set_user_value("ann", "tz", &json!("UTC")))
        .await);
    // Reads still work.
    assert_eq!(
        s.working("full").await.unwrap().values["plan"],
        json!({"step": 1})
    );

    // Through the real binary: one error line that says what happened and what to do.
    let line = t.cli_rejected(&["msg", "append", "full", "--role", "user", "--content", "x"]);
    assert!(line.contains("out of memory"), "{line}");
    assert!(line.contains("nothing was written"), "{line}");
    assert!(line.contains("maxmemory"), "{line}");
    let line = t.cli_rejected(&["session", "create", "--id", "other"]);
    assert!(line.contains("out of memory"), "{line}");

    // Memory freed: the next append gets the very next seq (nothing was half-allocated).
    maxmemory(&t, "0");
    assert_eq!(s.append("full", &msg).await.unwrap(), 2);
    let wal_msgs = t.wal_ops("msg").len();
    assert_eq!(wal_msgs, 2, "one wal record per accepted append");
}

#[tokio::test]
async fn the_daemon_warns_at_start_when_redis_may_evict_the_namespace() {
    let t = env().await;
    for (policy, expect) in [
        ("allkeys-lru", Some("may evict ANY key")),
        ("volatile-lru", Some("may evict keys with a TTL")),
        ("noeviction", None),
    ] {
        let _: () = t.cmd(&["CONFIG", "SET", "maxmemory-policy", policy]);
        let log = daemon_start_log(&t);
        match expect {
            Some(text) => {
                assert!(
                    log.contains(&format!("maxmemory-policy is {policy}")),
                    "{log}"
                );
                assert!(log.contains(text), "{log}");
                assert!(
                    log.contains("noeviction"),
                    "the warning names the fix: {log}"
                );
            }
            None => assert!(!log.contains("maxmemory-policy"), "{log}"),
        }
    }
}

/// Runs `agentstate spill` until its start line (and what follows it at start) is logged,
/// stops it with SIGTERM and returns its stderr.
fn daemon_start_log(t: &TestEnv) -> String {
    let mut daemon = super::spill_daemon(t, &t.db(), &[], true, Stdio::piped());
    // The first JSON line on stdout comes before the first pass; wait for a pass to end.
    let deadline = Instant::now() + Duration::from_secs(10);
    while t
        .cmd::<Option<String>>(&["HGET", &t.store.keys().spill_stats(0), "owner"])
        .is_none()
    {
        assert!(Instant::now() < deadline, "the daemon did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(daemon.terminate().success());
    let mut log = String::new();
    daemon
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    let _: () = t.cmd(&["DEL", &t.store.keys().spill_stats(0)]);
    log
}

#[tokio::test]
async fn the_daemon_flushes_and_trims_a_full_redis_so_memory_can_come_back() {
    let t = env().await;
    crate::support::create(&t, "full", Some("ann"), None).await;
    for i in 0..20 {
        let m = NewMessage::new("user").content(format!("m{i}"));
        t.store.append("full", &m).await.unwrap();
    }
    let p = t.store.keys().partition("full");
    let wal = t.store.keys().wal(p);
    assert!(t.xlen(&wal) > 20);
    maxmemory(&t, "1");
    oom(&t
        .rejected(
            t.store
                .append("full", &NewMessage::new("user").content("x")),
        )
        .await);
    // The daemon's lease, committed marker and trims run at maxmemory (`allow-oom`): the
    // backlog reaches SQLite and leaves Redis; agents' writes stay refused meanwhile.
    let report = t.flush().await;
    assert_eq!(report.wal, 21, "{report:?}");
    assert_eq!(crate::support::sqlite_messages(&t.db(), "full").len(), 20);
    assert_eq!(t.xlen(&wal), 1, "trimmed to the last committed entry");
    oom(&t
        .rejected(
            t.store
                .append("full", &NewMessage::new("user").content("x")),
        )
        .await);
}
