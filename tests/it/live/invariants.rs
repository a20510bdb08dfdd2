//! ARCHITECTURE's invariants that had no test of their own, each checked where it could
//! fail: what every script touches (MONITOR, `COMMAND GETKEYS`), where the times scripts
//! write come from, what a restore writes and in which order, and the graph log's keys
//! expiring with the session's.

use std::collections::{BTreeMap, BTreeSet};

use agentstate::test_support::scripts;
use agentstate::*;
use serde_json::json;

use crate::support::{create, env, Monitor, Monitored, TestEnv};

/// The keys `m` names, as Redis itself reads them (`COMMAND GETKEYS`; none when it has none).
fn keys_of(t: &TestEnv, m: &Monitored) -> Vec<Vec<u8>> {
    let mut cmd = redis::cmd("COMMAND");
    cmd.arg("GETKEYS");
    for w in &m.words {
        cmd.arg(w.as_slice());
    }
    cmd.query(&mut t.redis()).unwrap_or_default()
}

/// One EVALSHA of a MONITOR feed.
#[derive(Debug)]
struct Run {
    /// The script's file name.
    name: &'static str,
    /// Its KEYS.
    declared: BTreeSet<Vec<u8>>,
    /// Its ARGV.
    argv: Vec<Vec<u8>>,
    /// The commands it ran, in order.
    commands: Vec<Monitored>,
}

/// The feed's script calls, each with the commands it ran.
fn script_runs(feed: &[Monitored]) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    let mut in_script = false;
    for m in feed {
        if m.by_lua() {
            if in_script {
                runs.last_mut().unwrap().commands.push(m.clone());
            }
            continue;
        }
        in_script = m.name() == "EVALSHA";
        if in_script {
            let sha = String::from_utf8_lossy(&m.words[1]).into_owned();
            let n: usize = String::from_utf8_lossy(&m.words[2]).parse().unwrap();
            runs.push(Run {
                name: scripts::name_of(&sha).unwrap(),
                declared: m.words[3..3 + n].iter().cloned().collect(),
                argv: m.words[3 + n..].to_vec(),
                commands: Vec::new(),
            });
        }
    }
    runs
}

/// A MONITOR feed of one valid call of every script (the base calls of `generated.rs`) and
/// of a session restored through the library (restore_session, restore_graph,
/// restore_rounds as the daemon sends them); and the names of every script.
async fn every_script_watched(t: &TestEnv, name: &str) -> (Vec<Monitored>, BTreeSet<&'static str>) {
    create(t, "s", Some("u"), None).await;
    for i in 0..3 {
        let m = NewMessage::new("user").content(format!("m{i}"));
        t.store.append("s", &m).await.unwrap();
    }
    let decision = t
        .store
        .record_decision("s", &NewDecision::new("d", "r"))
        .await
        .unwrap();
    let calls = crate::security::generated::base_calls(t, &decision);
    create(t, "r", Some("u"), None).await;
    t.store
        .append("r", &NewMessage::new("user").content("x"))
        .await
        .unwrap();
    t.store
        .save_state("u", &json!({"r": 1}), Some("r"), None)
        .await
        .unwrap();
    t.flush().await;
    let (stop, daemon) = t.start_daemon().await;
    t.expire_session("r");
    let monitor = Monitor::start(t, name).await;
    let mut c = t.redis();
    for call in &calls {
        let words = call.argv();
        let _ = redis::cmd(&words[0])
            .arg(&words[1..])
            .query::<redis::Value>(&mut c);
    }
    let restored = t.store.messages("r", MessageQuery::all()).await.unwrap();
    assert_eq!(restored.len(), 1);
    let feed = monitor.stop().await;
    stop.cancel();
    daemon.await.unwrap().unwrap();
    let every = calls
        .iter()
        .map(|c| scripts::name_of(&c.argv()[1]).unwrap())
        .collect();
    (feed, every)
}

/// True for a command that writes (`COMMAND INFO`'s `write` flag).
fn writes(t: &TestEnv, name: &str, cache: &mut BTreeMap<String, bool>) -> bool {
    *cache.entry(name.to_string()).or_insert_with(|| {
        let info: redis::Value = redis::cmd("COMMAND")
            .arg("INFO")
            .arg(name)
            .query(&mut t.redis())
            .unwrap();
        format!("{info:?}").contains("\"write\"")
    })
}

/// Architecture Invariant: no key name is built inside Lua — every key a script touches
/// arrives in its KEYS. Every script runs, and each command it ran is checked against the
/// keys it declared.
#[tokio::test]
async fn every_key_a_script_touches_arrives_in_its_keys() {
    let t = env().await;
    let (feed, every) = every_script_watched(&t, "keys").await;
    let runs = script_runs(&feed);
    let mut checked = 0;
    for run in &runs {
        for m in &run.commands {
            for key in keys_of(&t, m) {
                assert!(
                    run.declared.contains(&key),
                    "{}: {} touched {:?}, not in its KEYS",
                    run.name,
                    m.name(),
                    String::from_utf8_lossy(&key)
                );
                checked += 1;
            }
        }
    }
    let ran: BTreeSet<&str> = runs.iter().map(|r| r.name).collect();
    assert_eq!(ran, every, "scripts that did not run");
    assert!(checked > 200, "only {checked} keys checked");
}

/// The numbers of 13 digits in `bytes` (epoch milliseconds of this era), stream entry ids
/// (`<ms>-<seq>`, Redis' own clock handed back) left out.
fn millis_in(bytes: &[u8]) -> Vec<i64> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        let stream_id = bytes.get(i) == Some(&b'-');
        if i - start == 13 && !stream_id {
            out.push(
                std::str::from_utf8(&bytes[start..i])
                    .unwrap()
                    .parse()
                    .unwrap(),
            );
        }
        i = i.max(start + 1);
    }
    out
}

/// Architecture Invariant: timestamps come from Redis `TIME` inside the scripts. No script
/// is given the time by its caller (no argument near now, in seconds or milliseconds), and
/// every time a script writes follows its own `TIME` — except what a restore writes back,
/// which is the time SQLite recorded (it arrives in ARGV).
#[tokio::test]
async fn scripts_take_the_time_from_redis_time_not_from_the_caller() {
    let t = env().await;
    let (feed, _) = every_script_watched(&t, "time").await;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let day_ms = 86_400_000;
    let near_now = |n: i64| (n - now_ms).abs() < day_ms || (n - now_ms / 1000).abs() < 86_400;
    let mut cache = BTreeMap::new();
    let mut timed = BTreeSet::new();
    for run in script_runs(&feed) {
        let given: Vec<i64> = run.argv.iter().flat_map(|a| millis_in(a)).collect();
        if !run.name.starts_with("restore_") {
            for a in &run.argv {
                let whole = std::str::from_utf8(a)
                    .ok()
                    .and_then(|a| a.parse::<i64>().ok());
                assert!(
                    !whole.is_some_and(near_now) && !millis_in(a).into_iter().any(near_now),
                    "{} was given a time: {:?}",
                    run.name,
                    String::from_utf8_lossy(a)
                );
            }
        }
        let mut read_time = false;
        for m in &run.commands {
            if m.name() == "TIME" {
                read_time = true;
            } else if writes(&t, &m.name(), &mut cache) {
                for w in &m.words[1..] {
                    for n in millis_in(w).into_iter().filter(|n| near_now(*n)) {
                        assert!(
                            read_time || given.contains(&n),
                            "{}: {} wrote the time {n} before reading TIME",
                            run.name,
                            m.name()
                        );
                        timed.insert(run.name);
                    }
                }
            }
        }
    }
    // The check saw times written by the scripts that write them.
    for name in [
        "append_message",
        "create_session",
        "record_decision",
        "compact",
    ] {
        assert!(timed.contains(name), "no time seen from {name}: {timed:?}");
    }
}

/// Architecture Invariant: a restore writes no wal entry, and the meta key is written last
/// (what makes a session live comes after everything it holds).
#[tokio::test]
async fn a_restore_writes_no_wal_entry_and_the_meta_key_last() {
    let t = env().await;
    let (sid, _) = crate::support::rich_session(&t.store, "rich").await;
    t.flush().await;
    let (stop, daemon) = t.start_daemon().await;
    t.expire_session(&sid);
    let monitor = Monitor::start(&t, "restore").await;
    assert_eq!(
        t.store
            .messages(&sid, MessageQuery::all())
            .await
            .unwrap()
            .len(),
        8
    );
    let feed = monitor.stop().await;
    stop.cancel();
    daemon.await.unwrap().unwrap();
    let meta = t.store.keys().session(&sid).meta.into_bytes();
    let mut cache = BTreeMap::new();
    let runs = script_runs(&feed);
    let restores: Vec<&Run> = runs
        .iter()
        .filter(|r| r.name.starts_with("restore_"))
        .collect();
    assert!(
        restores.iter().any(|r| r.name == "restore_session"),
        "{runs:?}"
    );
    for Run { name, commands, .. } in restores {
        for m in commands {
            assert_ne!(m.name(), "XADD", "{name} wrote a stream entry: {m:?}");
        }
        let write_keys: Vec<(String, Vec<Vec<u8>>)> = commands
            .iter()
            .filter(|m| writes(&t, &m.name(), &mut cache))
            .map(|m| (m.name(), keys_of(&t, m)))
            .collect();
        // After the first write of the meta hash only TTL bookkeeping follows: the meta
        // hash (`ttl_at`) and expiry times.
        if let Some(first) = write_keys.iter().position(|(_, k)| k.contains(&meta)) {
            assert_eq!(*name, "restore_session", "{name} wrote the meta hash");
            for (cmd, keys) in &write_keys[first..] {
                assert!(
                    cmd == "PEXPIREAT" || keys == &vec![meta.clone()],
                    "{name}: {cmd} {keys:?} after the meta hash was written"
                );
            }
        } else {
            assert_ne!(*name, "restore_session", "it never wrote the meta hash");
        }
    }
}

/// The graph log's keys (`:graph`, `:glog`) expire at the moment the session's others do,
/// after a put, after a later put that refreshes, and after a touch.
#[tokio::test]
async fn graph_log_keys_expire_with_the_sessions_keys() {
    let t = env().await;
    let s = &t.store;
    let mut put = GraphPut::new("", "01");
    put.checkpoint = json!({"v": 1, "id": "01"});
    put.metadata = json!({"step": 0});
    put.channels = vec![("a".into(), "1".into())];
    put.blobs = vec![("a".into(), "1".into(), "json:1".into())];
    s.graph_put("t1", &put).await.unwrap();
    let k = s.keys().session("t1");
    let expiry = |key: &str| t.cmd::<i64>(&["PEXPIRETIME", key]);
    let check = |when: &str| {
        let at = expiry(&k.meta);
        assert!(at > 0, "{when}: the meta hash has no expiry");
        for key in [&k.graph, &k.glog, &k.msgs] {
            if t.cmd::<i64>(&["EXISTS", key]) == 1 {
                assert_eq!(expiry(key), at, "{when}: {key}");
            }
        }
    };
    check("after the first put");
    // A refresh is due (ttl_at passed): the next put moves all of them together.
    s.append("t1", &NewMessage::new("user").content("m"))
        .await
        .unwrap();
    let _: i64 = t.cmd(&["HSET", &k.meta, "ttl_at", "0"]);
    let before = expiry(&k.meta);
    put.id = "02".into();
    put.parent = Some("01".into());
    s.graph_put("t1", &put).await.unwrap();
    assert!(expiry(&k.meta) > before, "the put refreshed the TTL");
    check("after a refreshing put");
    let _: i64 = t.cmd(&["HSET", &k.meta, "ttl_at", "0"]);
    s.touch("t1").await.unwrap();
    check("after a touch");
}
