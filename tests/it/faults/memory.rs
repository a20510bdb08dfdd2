//! Memory pressure: a Redis at `maxmemory` with `noeviction` refuses our writes with one
//! typed error, `Error::Backpressure`, alone or in a group commit, and nothing partial is left (Redis refuses a script only at its first write:
//! it wrote nothing, or it ran to its end); a policy that can evict our keys is warned about
//! when the daemon starts.

use std::io::Read;
use std::process::Stdio;
use std::time::Duration;

use agentstate::test_support::scripts;
use agentstate::*;
use serde_json::json;

use crate::support::{env, TestEnv};

/// Sets `maxmemory` on the test's Redis (`1` byte: every write that may grow memory is
/// refused; `0`: no limit).
fn maxmemory(t: &TestEnv, bytes: &str) {
    let _: () = t.cmd(&["CONFIG", "SET", "maxmemory", bytes]);
}

fn oom(err: &Error) {
    assert!(err.is_backpressure(), "not a Backpressure error: {err:?}");
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

    // Concurrent appends share round trips (group commit): a refused batch is the same
    // typed error for each of its callers.
    let before = t.snapshot();
    let appends = (0..32).map(|i| {
        let s = s.clone();
        tokio::spawn(async move {
            s.append("full", &NewMessage::new("user").content(format!("c{i}")))
                .await
        })
    });
    for append in appends {
        oom(&append.await.unwrap().unwrap_err());
    }
    assert_eq!(t.snapshot(), before, "nothing was half-written");

    // Through the real binary: one error line that says what is full and what to do.
    let line = t.cli_rejected(&["msg", "append", "full", "--role", "user", "--content", "x"]);
    assert!(line.contains("backpressure: Redis at"), "{line}");
    assert!(line.contains("is full"), "{line}");
    assert!(line.contains("nothing was written"), "{line}");
    assert!(line.contains("agentstate spill"), "says what to do: {line}");
    let line = t.cli_rejected(&["session", "create", "--id", "other"]);
    assert!(line.contains("backpressure: Redis at"), "{line}");

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
    let mut daemon = crate::support::spill_daemon(t, &t.db(), &[], true, Stdio::piped());
    // The first JSON line on stdout comes before the first pass; wait for a pass to end.
    crate::support::wait_until_blocking("the daemon starts", Duration::from_secs(10), || {
        t.cmd::<Option<String>>(&["HGET", &t.store.keys().spill_stats(0), "owner"])
    });
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

/// `used_memory` of the test's Redis, bytes.
fn used_memory(t: &TestEnv) -> i64 {
    let info: String = t.cmd(&["INFO", "memory"]);
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// A group-commit batch of `n` keyed appends of 4 KiB messages to `sid` (raw EVALSHA
/// words).
fn append_batch(t: &TestEnv, sid: &str, n: usize) -> Vec<String> {
    let s = t.store.keys().session(sid);
    let text = "x".repeat(4096);
    let items: Vec<scripts::BatchItem> = (0..n)
        .map(|i| {
            let body = format!(r#"{{"role":"user","content":"m{i} {text}"}}"#);
            scripts::append_item(
                s.clone(),
                sid,
                &body,
                Some(&format!("k{i}")),
                None,
                1 << 20,
                None,
            )
        })
        .collect();
    scripts::session_batch(&items.iter().collect::<Vec<_>>()).argv()
}

/// Runs raw EVALSHA words.
fn run(t: &TestEnv, words: &[String]) -> redis::RedisResult<String> {
    redis::cmd(&words[0]).arg(&words[1..]).query(&mut t.redis())
}

/// `maxmemory` crossed in the middle of a batch: Redis checks it before a script's first
/// write only, so a batch that starts below the limit runs to its end — every item whole,
/// none half-written — and the next call, now above it, is refused and writes nothing.
#[tokio::test]
async fn a_batch_that_crosses_maxmemory_midway_is_written_whole_and_the_next_is_refused() {
    let t = env().await;
    crate::support::create(&t, "calibrate", None, None).await;
    crate::support::create(&t, "crossing", None, None).await;
    const ITEMS: usize = 40;
    // How much the batch grows memory by (the same batch on a twin session; each message
    // is kept twice, in the list and in the wal), beyond its own arguments, which are freed
    // once it has run.
    let calibrate = append_batch(&t, "calibrate", ITEMS);
    let before = used_memory(&t);
    run(&t, &calibrate).unwrap();
    let growth = used_memory(&t) - before;
    let words = append_batch(&t, "crossing", ITEMS);
    // Redis holds a command's arguments while it runs (a generous 64 B per word on top).
    let args: i64 = words.iter().map(|w| w.len() as i64 + 64).sum();
    assert!(
        args + 50_000 < growth,
        "the batch's arguments ({args} B) must weigh well below its writes ({growth} B)"
    );
    // The limit: above what Redis holds with the arguments in (when Redis checks it, before
    // the first write), below what the batch leaves.
    let limit = used_memory(&t) + (args + growth) / 2;
    maxmemory(&t, &limit.to_string());
    let reply = run(&t, &words).unwrap();
    let lines: Vec<&str> = reply.lines().collect();
    assert_eq!(lines.len(), ITEMS);
    assert!(lines.iter().all(|l| l.starts_with("1 ")), "{reply}");
    assert!(used_memory(&t) > limit, "the batch did not cross the limit");
    let seqs = crate::support::seqs(
        &t.store
            .messages("crossing", MessageQuery::all())
            .await
            .unwrap(),
    );
    assert_eq!(seqs, (1..=ITEMS as u64).collect::<Vec<_>>());
    assert_eq!(
        t.hash(&t.store.keys().session("crossing").idem).len(),
        ITEMS
    );
    // Above the limit now: the next write is refused before its first write.
    let next = NewMessage::new("user").content("after");
    oom(&t.rejected(t.store.append("crossing", &next)).await);
    maxmemory(&t, "0");
}
