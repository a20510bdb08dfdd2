//! Generated inputs from untrusted agents (proptest, stable toolchain), against a real Redis:
//! ids, message content, CLI JSON arguments, and every Lua script's argument checks — a
//! script that rejects its arguments leaves Redis byte for byte unchanged.
//!
//! The default run is bounded (`DEFAULT_CASES` per property, a few seconds each); a longer
//! one: `PROPTEST_CASES=5000 cargo test --locked --test it security::generated`. A failure
//! found becomes a named regression test at the end of this file.

use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestRunner};
use serde_json::{json, Value};

use agentstate::test_support::scripts::{
    self, DecisionArgs, GraphDrop, GraphItems, GraphRead, LoadMode, NewSessionArgs, ScriptCall,
};
use agentstate::*;

use crate::support::{env, TestEnv};

/// Cases per property in the default (CI) run.
const DEFAULT_CASES: u32 = 64;

/// `PROPTEST_CASES` when set, else `DEFAULT_CASES`.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES)
}

/// A runner of `cases` cases; failures are not persisted to files (they become regression
/// tests here).
fn runner_of(cases: u32) -> TestRunner {
    let config = RunnerConfig {
        cases,
        failure_persistence: None,
        ..RunnerConfig::default()
    };
    // The default (CI) run is the same every time; a long run explores new inputs.
    if std::env::var_os("PROPTEST_CASES").is_some() {
        TestRunner::new(config)
    } else {
        let rng = proptest::test_runner::TestRng::deterministic_rng(config.rng_algorithm);
        TestRunner::new_with_rng(config, rng)
    }
}

fn runner() -> TestRunner {
    runner_of(cases())
}

/// A test environment driven from proptest's synchronous runner.
fn sync_env() -> (tokio::runtime::Runtime, TestEnv) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let t = rt.block_on(env());
    (rt, t)
}

/// Text an agent might send: edge cases, near-valid ids, JSON fragments, any Unicode.
fn hostile_text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("0".to_string()),
        Just("-1".to_string()),
        Just("1e309".to_string()),
        Just("nan".to_string()),
        Just("99999999999999999999999".to_string()),
        Just("{".to_string()),
        Just("[]".to_string()),
        Just("null".to_string()),
        Just("{}".to_string()),
        Just("{\"seq\":1}".to_string()),
        Just("\u{0}".to_string()),
        "[A-Za-z0-9._@+-]{1,130}",
        "[ -~]{0,40}",
        any::<String>(),
        any::<i64>().prop_map(|n| n.to_string()),
        (1usize..3000).prop_map(|n| "x".repeat(n)),
    ]
}

#[test]
fn ids_are_accepted_exactly_when_valid_and_a_rejected_one_writes_nothing() {
    let (rt, t) = sync_env();
    let valid = |id: &str| {
        !id.is_empty()
            && id.len() <= 128
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".-_@+".contains(&b))
    };
    runner()
        .run(&hostile_text(), |id| {
            let new = NewSession::new().id(id.clone());
            let before = t.snapshot();
            match rt.block_on(t.store.create_session(&new)) {
                Ok(got) => {
                    prop_assert!(valid(&id), "accepted {id:?}");
                    prop_assert_eq!(got, id.clone());
                    rt.block_on(t.store.close_session(&id, false)).unwrap();
                }
                Err(Error::AlreadyExists(_)) => prop_assert!(valid(&id)),
                Err(err) => {
                    prop_assert!(!valid(&id), "rejected a valid id {id:?}: {err}");
                    prop_assert!(matches!(err, Error::InvalidId { .. }), "{err:?}");
                    prop_assert_eq!(&t.snapshot(), &before);
                }
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn message_fields_round_trip_or_are_rejected_without_a_write() {
    let (rt, t) = sync_env();
    rt.block_on(crate::support::create(&t, "m", None, None));
    let strategy = (
        prop_oneof![
            Just("user".to_string()),
            Just("tool".to_string()),
            hostile_text()
        ],
        hostile_text(),
        proptest::option::of(hostile_text()),
    );
    runner()
        .run(&strategy, |(role, content, name)| {
            let mut m = NewMessage::new(role.clone()).content(content.clone());
            if let Some(n) = &name {
                m = m.name(n.clone());
            }
            let before = t.snapshot();
            match rt.block_on(t.store.append("m", &m)) {
                Ok(seq) => {
                    let got = rt.block_on(t.store.message("m", seq)).unwrap().unwrap();
                    prop_assert_eq!(got.role, role);
                    prop_assert_eq!(got.content, Some(content));
                    prop_assert_eq!(got.name, name);
                }
                Err(err) => {
                    prop_assert!(
                        matches!(err, Error::InvalidInput(_) | Error::TooLarge { .. }),
                        "{err:?}"
                    );
                    prop_assert_eq!(&t.snapshot(), &before);
                }
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn cli_json_arguments_store_the_value_or_fail_cleanly() {
    let (rt, t) = sync_env();
    rt.block_on(crate::support::create(&t, "j", None, None));
    // Fewer cases: each one runs the binary twice.
    let mut runner = runner_of((cases() / 4).max(8));
    let strategy = prop_oneof![
        hostile_text(),
        any::<i32>().prop_map(|n| json!({"n": n, "s": [n]}).to_string()),
        "[ -~]{0,30}".prop_map(|s| serde_json::to_string(&s).unwrap()),
    ];
    runner
        .run(&strategy, |text| {
            if text.starts_with('@') || text == "-" || text.contains('\0') {
                // `-` and `@PATH` read stdin and files; NUL cannot be an argument.
                return Ok(());
            }
            let before = t.snapshot();
            // `--` so a value starting with `-` is not read as a flag (the CLI's documented
            // way; negative numbers work without it, see the regression test below).
            let out = t.cli(&["work", "set", "j", "k", "--", &text]);
            match serde_json::from_str::<Value>(&text) {
                Ok(value) => {
                    prop_assert_eq!(out.code, 0, "{:?}", out);
                    let got = t.cli_ok(&["work", "get", "j", "k"]);
                    prop_assert_eq!(serde_json::from_str::<Value>(&got).unwrap(), value);
                }
                Err(_) => {
                    prop_assert_eq!(out.code, 1, "{:?}", out);
                    prop_assert!(out.stderr.contains("malformed JSON"), "{:?}", out);
                    prop_assert_eq!(&t.snapshot(), &before);
                }
            }
            Ok(())
        })
        .unwrap();
}

/// Everything Redis holds, compared by content (a hash's `DUMP` bytes can change when Redis
/// rehashes it on a mere read): key → type and sorted/ordered contents, leases left out.
fn contents(t: &TestEnv) -> std::collections::BTreeMap<String, String> {
    let mut c = t.redis();
    // Leases expire on their own within milliseconds (generated lease times): left out.
    let keys: Vec<String> = t
        .all_keys()
        .into_iter()
        .filter(|k| !k.ends_with(":lease"))
        .collect();
    // Three round trips whatever the number of keys: the names, their types, their contents.
    let mut types = redis::pipe();
    for key in &keys {
        types.cmd("TYPE").arg(key);
    }
    let kinds: Vec<String> = types.query(&mut c).unwrap();
    let mut reads = redis::pipe();
    for (key, kind) in keys.iter().zip(&kinds) {
        match kind.as_str() {
            "string" => reads.cmd("GET").arg(key),
            "hash" => reads.cmd("HGETALL").arg(key),
            "list" => reads.cmd("LRANGE").arg(key).arg(0).arg(-1),
            "set" => reads.cmd("SMEMBERS").arg(key),
            "stream" => reads.cmd("XRANGE").arg(key).arg("-").arg("+"),
            _ => reads.cmd("TYPE").arg(key),
        };
    }
    let values: Vec<redis::Value> = reads.query(&mut c).unwrap();
    keys.into_iter()
        .zip(kinds)
        .zip(values)
        .map(|((key, kind), value)| {
            let text = match kind.as_str() {
                // A hash's field order and a set's member order change on a mere rehash.
                "hash" => {
                    let m: std::collections::BTreeMap<Vec<u8>, Vec<u8>> =
                        redis::from_redis_value(value).unwrap();
                    format!("{m:?}")
                }
                "set" => {
                    let s: std::collections::BTreeSet<Vec<u8>> =
                        redis::from_redis_value(value).unwrap();
                    format!("{s:?}")
                }
                _ => format!("{value:?}"),
            };
            (key, format!("{kind} {text}"))
        })
        .collect()
}

/// Valid `create_session.lua` arguments: user `u`, an hour's idle TTL.
fn session_args() -> NewSessionArgs<'static> {
    NewSessionArgs {
        user: "u",
        parent: "",
        depth: 0,
        lifecycle: "linked",
        model: "",
        system_prompt: "",
        config: "{}",
        metadata: "{}",
        ttl: 3600,
    }
}

/// One valid call of every script, on a session `s` (user `u`) with messages, a decision and
/// a held lease: the base the generated arguments are written over.
pub(crate) fn base_calls(t: &TestEnv, decision: &str) -> Vec<ScriptCall> {
    let ns = t.store.keys();
    let s = ns.session("s");
    let p = s.partition;
    let up = ns.partition("u");
    let lease = format!("owner-x {}", 7);
    let (dp, entry) = decision.split_once(':').unwrap();
    let dp: u32 = dp.parse().unwrap();
    let session_args = session_args();
    let decision_args = DecisionArgs {
        decision: "d",
        rationale: "r",
        planned_action: "",
        meta: "{}",
    };
    let n = ns.session("n");
    let image = scripts::SessionImage {
        user_id: "u".into(),
        ttl: 3600,
        messages: vec![r#"{"at":1,"role":"user"}"#.into()],
        ..Default::default()
    };
    let body = r#"{"role":"user","content":"hi"}"#;
    let graph_entry = r#"{"fields":"b||c|1","ns":"","id":"1","parent":null,"checkpoint":{},"metadata":{"run_id":"r1"},"channels":[["c","1"]]}"#;
    let graph_items = GraphItems {
        checkpoints: vec![("c||1".into(), "n|".into(), graph_entry.into())],
        blobs: vec![("b||c|1".into(), "json:1".into())],
        writes: vec![("w||1|t|0".into(), false, r#"{"idx":0}"#.into())],
    };
    vec![
        scripts::create_session(ns, &n, "n", &session_args),
        scripts::link_child(&s, "n", true),
        scripts::update_session(
            &s,
            "s",
            r#"{"status":"archived"}"#,
            &[("status", "archived".into())],
        ),
        scripts::close_session(ns, &n, "n", Some("u"), false),
        scripts::append_item(s.clone(), "s", body, Some("idem"), None, 1 << 20, None).call(),
        scripts::append_messages(
            &s,
            "s",
            &[body.to_string(), body.to_string()],
            Some("idem2"),
            None,
            1 << 20,
            None,
        ),
        scripts::pop_message(&s, "s", None),
        scripts::replace_message(&s, "s", 1, body, 1 << 20, None),
        scripts::load_messages(
            &s,
            "s",
            LoadMode::All {
                after: 0,
                last: Some(2),
            },
        ),
        scripts::compact(&s, "s", (1, 2), body, (Some(1), Some(2)), Some(1), None),
        scripts::write_working(s.clone(), "s", "set", "k", "1", None, 1 << 19, None).call(),
        scripts::read_working(&s, "s", Some("k")),
        scripts::record_usage(&s, "s", 1, r#"{"prompt_tokens":1,"completion_tokens":2}"#),
        scripts::create_checkpoint(&s, "s", "ck1", "l", 1 << 24, None, &["k"]),
        scripts::put_checkpoint(&s, "s", "ck2", "l", "{}", 1 << 24, None),
        scripts::save_round(ns, "u", "s", Some(1), "{}", 1 << 24),
        scripts::read_round(ns, "u", "s", None),
        scripts::record_decision(ns, s.clone(), "s", &decision_args).call(),
        scripts::record_outcome(ns, dp, decision, entry, "ok"),
        scripts::dead_letter(ns, dp, "g", "why", &[entry]),
        scripts::set_user_value(ns, "u", "k", "1", 1 << 19),
        scripts::delete_user_value(ns, "u", "k"),
        scripts::forget_user(ns, "u", 60),
        scripts::reseed_user_values(ns, "u", "0-0", &lease, &[("k".into(), "1".into())]),
        scripts::bind_namespace(ns, "0123abcdef", "/srv/agentstate.db"),
        scripts::claim_lease(ns, p, "owner-x", 3000, 0),
        scripts::publish_committed(ns, p, &lease, &[("wal", "0-1")]),
        scripts::trim_stream(ns, up, &ns.wal(up), &lease, "0-1"),
        scripts::restore_session(ns, &n, "n", &image),
        scripts::restore_rounds(ns, "u", "s", &[(1, "{}".into())]),
        scripts::graph_put(ns, &s, "s", &["r1"], true, &graph_items),
        scripts::graph_read(&s, "s", GraphRead::One { ns: "", id: None }),
        scripts::graph_drop(ns, &s, "s", GraphDrop::Runs(&["r1"])),
        scripts::restore_graph(
            ns,
            &n,
            "n",
            true,
            3600,
            &[("c||1".into(), graph_entry.into())],
            &["c||1".into(), "n|".into()],
            &["r1".into()],
        ),
        scripts::lease_acquire(&s, "s", "o1", 30_000),
        scripts::lease_renew(&s, "s", "o1", 1, 30_000),
        scripts::lease_release(&s, "s", "o1", 1),
        scripts::inbox_put(&s, "s", 1 << 20, &[("i1", body.to_string())]),
        scripts::inbox_claim(&s, "s", "o1", 1, 10),
        scripts::inbox_deliver(&s, "s", "o1", 1, 1 << 20, &["i1"]),
        scripts::inbox_void(&s, "s", &["i1"]),
        scripts::effect_begin(&s, "s", "c1", "sha256:00", None),
        scripts::effect_finish(&s, "s", "c1", "{}", 1 << 20, None),
        scripts::session_batch(&[
            &scripts::append_item(s.clone(), "s", body, None, None, 1 << 20, None),
            &scripts::append_item(s.clone(), "s", body, Some("k2"), None, 1 << 20, None),
        ]),
        scripts::index_sessions(
            ns,
            &ns.sessions_index(p),
            p,
            &[("s".into(), "u".into()), ("s2".into(), String::new())],
        ),
        scripts::list_index(&ns.sessions_index(p), b"-", b"+", 0),
        scripts::replace_user_values(ns, "u", &lease, &[("k".into(), "1".into())]),
        scripts::check_history(ns, p, &lease, "0-0", "0-0", None),
    ]
}

/// The words of `call` with ARGV entries replaced (`edits`: position → text, modulo the
/// ARGV length) and its last `drop` ARGV entries removed. The values come from agents; the
/// count is the Rust wrapper's, and a script still checks it before its first write.
fn mutate(call: &ScriptCall, edits: &[(usize, String)], drop: usize) -> Vec<String> {
    let mut words = call.argv();
    let nkeys: usize = words[2].parse().unwrap();
    let first_arg = 3 + nkeys;
    let nargs = words.len() - first_arg;
    if nargs > 0 {
        for (pos, text) in edits {
            words[first_arg + pos % nargs] = text.clone();
        }
    }
    words.truncate(words.len() - drop.min(nargs));
    words
}

/// A runner of `cases` cases for script number `which`: each script explores its own inputs.
fn runner_for_script(cases: u32, which: usize) -> TestRunner {
    let config = RunnerConfig {
        cases,
        failure_persistence: None,
        ..RunnerConfig::default()
    };
    if std::env::var_os("PROPTEST_CASES").is_some() {
        // A long run explores new inputs every time.
        return TestRunner::new(config);
    }
    // The default (CI) run is the same every time, and differs from script to script.
    let seed: Vec<u8> = (0..32u8)
        .map(|i| i.wrapping_mul(31) ^ which as u8)
        .collect();
    let rng = proptest::test_runner::TestRng::from_seed(config.rng_algorithm, &seed);
    TestRunner::new_with_rng(config, rng)
}

/// Generated cases per script in the default run (`PROPTEST_CASES` overrides it).
const CASES_PER_SCRIPT: u32 = 24;

#[test]
fn every_lua_script_that_rejects_its_arguments_writes_nothing() {
    let (rt, t) = sync_env();
    rt.block_on(crate::support::create(&t, "s", Some("u"), None));
    for i in 0..3 {
        let m = NewMessage::new("user").content(format!("m{i}"));
        rt.block_on(t.store.append("s", &m)).unwrap();
    }
    let decision = rt
        .block_on(t.store.record_decision("s", &NewDecision::new("d", "r")))
        .unwrap();
    let calls = base_calls(&t, &decision);
    assert_eq!(calls.len(), 48, "one base call per script in lua/");
    let conn = std::cell::RefCell::new(t.redis());
    // Mostly value edits; one case in four also drops trailing arguments.
    let strategy = (
        proptest::collection::vec((0usize..16, hostile_text()), 1..4),
        prop_oneof![3 => Just(0usize), 1 => 1usize..3],
    );
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CASES_PER_SCRIPT);
    let mut rejected = std::collections::BTreeMap::<&str, u32>::new();
    for (which, call) in calls.iter().enumerate() {
        let name = scripts::name_of(&call.argv()[1]).unwrap();
        let count = std::cell::Cell::new(0u32);
        runner_for_script(cases, which)
            .run(&strategy, |(edits, drop)| {
                let words = mutate(call, &edits, drop);
                let mut cmd = redis::cmd(&words[0]);
                cmd.arg(&words[1..]);
                let before = contents(&t);
                let reply = cmd.query::<redis::Value>(&mut *conn.borrow_mut());
                if let Err(err) = reply {
                    count.set(count.get() + 1);
                    let after = contents(&t);
                    let changed: Vec<&String> = before
                        .keys()
                        .chain(after.keys())
                        .filter(|k| before.get(*k) != after.get(*k))
                        .collect();
                    prop_assert!(
                        changed.is_empty(),
                        "{} rejected {:?} ({}) but wrote {:?}",
                        name,
                        &words[3..],
                        err,
                        changed
                    );
                }
                Ok(())
            })
            .unwrap();
        rejected.insert(name, count.get());
    }
    eprintln!("rejections per script: {rejected:?}");
    let never: Vec<&&str> = rejected
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(s, _)| s)
        .collect();
    assert!(
        never.is_empty(),
        "never rejected (their checks went unexercised): {never:?}"
    );
}

// Regression tests: failures the generated runs found, kept as named cases.

/// `forget_user.lua` deleted the user's values, then failed on a tombstone TTL Redis does
/// not take (`1e309`): a rejected erasure that had half happened. It now checks the TTL
/// before its first write.
#[tokio::test]
async fn forget_user_with_a_ttl_redis_refuses_writes_nothing() {
    let t = env().await;
    t.store.set_user_value("u", "k", &json!(1)).await.unwrap();
    let call = scripts::forget_user(t.store.keys(), "u", 60);
    for ttl in ["1e309", "0", "-1", "1.5", "", "nan"] {
        let words = mutate(&call, &[(1, ttl.to_string())], 0);
        let before = t.snapshot();
        let err = redis::cmd(&words[0])
            .arg(&words[1..])
            .query::<redis::Value>(&mut t.redis())
            .unwrap_err();
        assert_eq!(err.code(), Some("BAD_INPUT"), "{ttl:?}: {err}");
        assert_eq!(t.snapshot(), before, "{ttl:?}");
    }
    assert_eq!(t.store.user_value("u", "k").await.unwrap(), Some(json!(1)));
}

/// `restore_session.lua` walked past ARGV for ever on a section count larger than its
/// arguments (Redis busy until killed), and deleted keys before failing on a bad
/// compaction record. It now checks counts and records before its first write.
#[tokio::test]
async fn restore_session_with_bad_section_counts_writes_nothing_and_returns() {
    let t = env().await;
    let ns = t.store.keys();
    let n = ns.session("n");
    let image = scripts::SessionImage {
        user_id: "u".into(),
        ttl: 3600,
        messages: vec![r#"{"at":1,"role":"user"}"#.into()],
        compactions: vec![r#"{"from_seq":1,"to_seq":1}"#.into()],
        ..Default::default()
    };
    let call = scripts::restore_session(ns, &n, "n", &image);
    let words = call.argv();
    let first_arg = 3 + words[2].parse::<usize>().unwrap();
    // ARGV: sid, user, ttl, meta count (0), messages count (1), the message, idem count
    // (0), compactions count (1), the record, ...
    for (pos, text) in [
        (3, "99999999999999999999999"),
        (4, "7"),
        (4, "-1"),
        (2, "x"),
        (2, "6427051379570608078"),
        (8, "{"),
        (8, "[]"),
    ] {
        let mut words = words.clone();
        words[first_arg + pos] = text.to_string();
        let before = t.snapshot();
        let err = redis::cmd(&words[0])
            .arg(&words[1..])
            .query::<redis::Value>(&mut t.redis())
            .unwrap_err();
        assert_eq!(err.code(), Some("BAD_INPUT"), "ARGV {pos} = {text}: {err}");
        assert_eq!(t.snapshot(), before, "ARGV {pos} = {text}");
    }
}

/// `work set s k -1` was a usage error (clap took the negative number for a flag): a JSON
/// number below zero could not be set without `--`.
#[tokio::test]
async fn cli_work_set_takes_a_negative_number() {
    let t = env().await;
    crate::support::create(&t, "j", None, None).await;
    assert_eq!(t.cli_ok(&["work", "set", "j", "k", "-1"]), "1\n");
    assert_eq!(t.cli_ok(&["work", "get", "j", "k"]), "-1\n");
    t.cli_ok(&["work", "set", "j", "k", "-2.5e3"]);
    assert_eq!(t.cli_ok(&["work", "get", "j", "k"]), "-2500.0\n");
}

/// `session_batch.lua` wrote item 1 (its message, idempotency key, meta and wal entry) and
/// then failed on item 2's size limit (`{`, not a number): a rejected batch that had half
/// happened (found with `PROPTEST_CASES=1500`). It now checks every item's arguments, and
/// that the items fill its KEYS and ARGV, before the first write of any item.
#[tokio::test]
async fn session_batch_with_a_bad_later_item_writes_nothing() {
    let t = env().await;
    crate::support::create(&t, "s", None, None).await;
    let s = t.store.keys().session("s");
    let body = r#"{"role":"user","content":"hi"}"#;
    let first = scripts::append_item(s.clone(), "s", body, Some("k1"), None, 1 << 20, None);
    let second = scripts::append_item(s.clone(), "s", body, Some("k2"), None, 1 << 20, None);
    let working = scripts::write_working(s.clone(), "s", "set", "k", "1", None, 1 << 19, None);
    let batch = scripts::session_batch(&[&first, &second, &working]);
    let words = batch.argv();
    let nkeys: usize = words[2].parse().unwrap();
    // ARGV: 'append' + 6, 'append' + 6, 'working' + 7.
    let argv = 3 + nkeys;
    let (limit2, item3, op3, limit3) = (argv + 12, argv + 14, argv + 16, argv + 20);
    let cases: Vec<(&str, Vec<String>)> = vec![
        ("item 2's limit is not a number", edit(&words, limit2, "{")),
        ("item 2's limit is a float", edit(&words, limit2, "1e309")),
        ("item 3's working op is unknown", edit(&words, op3, "drop")),
        ("item 3's limit is missing", words[..limit3].to_vec()),
        ("item 3's op is not an op", edit(&words, item3, "appendx")),
        ("a key short", {
            let mut w = words.clone();
            w.remove(3 + nkeys - 1);
            w[2] = (nkeys - 1).to_string();
            w
        }),
    ];
    for (what, words) in cases {
        let before = t.snapshot();
        let err = redis::cmd(&words[0])
            .arg(&words[1..])
            .query::<redis::Value>(&mut t.redis())
            .unwrap_err();
        assert_eq!(err.code(), Some("BAD_INPUT"), "{what}: {err}");
        assert_eq!(t.snapshot(), before, "{what}");
    }
    // The same batch as built writes all three.
    let reply: String = redis::cmd(&words[0])
        .arg(&words[1..])
        .query(&mut t.redis())
        .unwrap();
    assert_eq!(
        reply.lines().filter(|l| l.starts_with("1 ")).count(),
        3,
        "{reply}"
    );
}

/// `words` with word `at` replaced by `text`.
fn edit(words: &[String], at: usize, text: &str) -> Vec<String> {
    let mut words = words.to_vec();
    words[at] = text.to_string();
    words
}

/// `claim_lease.lua` bumped the fencing-token counter (`INCR`) before failing on a lease time
/// or token floor Redis does not take: a rejected claim that had half happened, and every
/// later owner's token a step higher. It now checks both before its first write.
#[tokio::test]
async fn claim_lease_with_a_bad_lease_time_or_floor_writes_nothing() {
    let t = env().await;
    let call = scripts::claim_lease(t.store.keys(), 3, "owner-x", 3000, 0);
    // ARGV: owner, lease time (ms), token floor.
    for (pos, text) in [
        (1, "-1"),
        (1, "1.5"),
        (1, "nan"),
        (1, "1e309"),
        (1, ""),
        (1, "2147483648"),
        (2, "x"),
        (2, "0.5"),
        (2, "1e309"),
    ] {
        let words = mutate(&call, &[(pos, text.to_string())], 0);
        let before = t.snapshot();
        let err = redis::cmd(&words[0])
            .arg(&words[1..])
            .query::<redis::Value>(&mut t.redis())
            .unwrap_err();
        assert_eq!(
            err.code(),
            Some("BAD_INPUT"),
            "ARGV {pos} = {text:?}: {err}"
        );
        assert_eq!(t.snapshot(), before, "ARGV {pos} = {text:?}");
    }
}

/// `create_session.lua` wrote the meta hash (the session was live) before failing on an
/// idle TTL Redis does not take. It now checks the TTL before its first write.
#[tokio::test]
async fn create_session_with_a_bad_ttl_writes_nothing() {
    let t = env().await;
    let ns = t.store.keys();
    let n = ns.session("n");
    let args = session_args();
    let call = scripts::create_session(ns, &n, "n", &args);
    // ARGV[11] is the idle TTL (index 10 from 0).
    for ttl in [
        "0",
        "-1",
        "1.5",
        "x",
        "",
        "nan",
        "1e309",
        "99999999999999999999",
    ] {
        let words = mutate(&call, &[(10, ttl.to_string())], 0);
        let before = t.snapshot();
        let err = redis::cmd(&words[0])
            .arg(&words[1..])
            .query::<redis::Value>(&mut t.redis())
            .unwrap_err();
        assert_eq!(err.code(), Some("BAD_INPUT"), "ttl {ttl:?}: {err}");
        assert_eq!(t.snapshot(), before, "ttl {ttl:?}");
    }
    assert_eq!(t.store.session("n").await.unwrap(), None);
}
