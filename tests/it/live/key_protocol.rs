//! The operator-facing key protocol of SPEC §3, read back with plain Redis commands: key
//! names (partition computed here, independently), types, hash fields, list elements, TTLs.

use std::time::Duration;

use agentstate::*;
use serde_json::json;

use crate::support::{env, env_with, TestEnv};

/// 32-bit FNV-1a, written here from the reference definition (not the library's).
fn fnv1a(text: &str) -> u32 {
    text.bytes().fold(2_166_136_261u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(16_777_619)
    })
}

/// `<prefix>:{p}:<rest>` with `p` the partition of `id`.
fn key(prefix: &str, partitions: u32, id: &str, rest: &str) -> String {
    format!("{prefix}:{{{}}}:{rest}", fnv1a(id) % partitions)
}

fn session_key(sid: &str, suffix: &str) -> String {
    key("as", 16, sid, &format!("s:{sid}{suffix}"))
}

/// The meta fields of SPEC §3 that describe a session (also in its `session_create` record).
const SESSION_DESCRIPTION: [&str; 10] = [
    "user_id",
    "kind",
    "parent",
    "spawn_depth",
    "lifecycle",
    "status",
    "model",
    "system_prompt",
    "config",
    "metadata",
];

const SESSION_SUFFIXES: [&str; 8] = [
    "",
    ":work",
    ":msgs",
    ":ckpt",
    ":idem",
    ":compactions",
    ":usage",
    ":children",
];

/// Writes to every key of session `sid`: working state, messages (one idempotent),
/// a compaction, usage, a checkpoint and a child.
async fn touch_every_key(t: &TestEnv, sid: &str) {
    let s = &t.store;
    s.set_working(sid, "plan", &json!({"step": 1}))
        .await
        .unwrap();
    s.append(sid, &NewMessage::new("user").content("hi"))
        .await
        .unwrap();
    let keyed = AppendOptions::new().idempotency_key("k1");
    s.append_with(sid, &NewMessage::new("assistant").content("yo"), &keyed)
        .await
        .unwrap();
    s.compact(sid, &Compaction::new(1, 1, "sum")).await.unwrap();
    s.record_usage(sid, &Usage::new(1, 3, 4)).await.unwrap();
    s.checkpoint(sid, "cp", None).await.unwrap();
    let child = NewSession::new()
        .id(format!("{sid}-kid"))
        .parent(sid, Lifecycle::Linked);
    s.create_session(&child).await.unwrap();
}

fn assert_ttl_near(t: &TestEnv, key: &str, ttl: i64) {
    let got = t.ttl(key);
    assert!(
        got > ttl - 10 && got <= ttl,
        "{key}: TTL {got}, expected about {ttl}"
    );
}

#[tokio::test]
async fn session_keys_have_the_documented_names_types_and_fields() {
    let t = env().await;
    let s = &t.store;
    s.create_session(
        &NewSession::new()
            .id("alpha")
            .user("ulla")
            .model("m")
            .system_prompt("be brief")
            .metadata(json!({"team": "x"})),
    )
    .await
    .unwrap();
    touch_every_key(&t, "alpha").await;

    let types = [
        "hash", "hash", "list", "hash", "hash", "list", "hash", "set",
    ];
    for (suffix, ty) in SESSION_SUFFIXES.iter().zip(types) {
        let k = session_key("alpha", suffix);
        assert_eq!(t.cmd::<String>(&["TYPE", &k]), ty, "{k}");
    }
    let p = fnv1a("alpha") % 16;
    assert_eq!(
        t.cmd::<String>(&["TYPE", &format!("as:{{{p}}}:wal")]),
        "stream"
    );
    assert_eq!(
        t.cmd::<String>(&["TYPE", &format!("as:{{{p}}}:sessions")]),
        "zset"
    );
    assert_eq!(
        t.cmd::<String>(&["TYPE", &format!("as:{{{p}}}:by_user:ulla")]),
        "zset"
    );
    assert_eq!(t.hash("as:config")["partitions"], "16");

    let meta = t.hash(&session_key("alpha", ""));
    // Fields at their default are absent (docs/architecture-key-protocol.md): a root
    // session, active, with no parent, config, pending calls or round.
    let mut fields: Vec<&str> = meta.keys().map(String::as_str).collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "compacted",
            "created_at",
            "last_compact_seq",
            "metadata",
            "model",
            "next_seq",
            "system_prompt",
            "ttl",
            "ttl_at",
            "updated_at",
            "user_id",
            "version"
        ]
    );
    assert_eq!(meta["user_id"], "ulla");
    assert_eq!(meta["model"], "m");
    assert_eq!(meta["system_prompt"], "be brief");
    assert_eq!(meta["metadata"], r#"{"team":"x"}"#);
    assert_eq!(meta["next_seq"], "4");
    assert_eq!(meta["version"], "1");
    assert_eq!(meta["last_compact_seq"], "1");
    assert_eq!(meta["compacted"], "1-1");
    let created: i64 = meta["created_at"].parse().unwrap();
    let updated: i64 = meta["updated_at"].parse().unwrap();
    assert!(created > 1_600_000_000_000 && updated >= created);
    // Refreshed at the create (TTL 3600 s), next refresh due a tenth of it later: every
    // write since came within that tenth.
    assert_eq!(meta["ttl_at"].parse::<i64>().unwrap(), created + 360_000);

    let kid = t.hash(&session_key("alpha-kid", ""));
    assert_eq!(
        (
            kid["kind"].as_str(),
            kid["parent"].as_str(),
            kid["spawn_depth"].as_str()
        ),
        ("subagent", "alpha", "1")
    );
    assert_eq!(kid["lifecycle"], "linked");
    // The absent fields read as their defaults.
    let read = t.store.session("alpha").await.unwrap().unwrap();
    assert_eq!(
        (
            read.kind.as_str(),
            read.status.as_str(),
            read.parent.as_deref(),
            read.spawn_depth,
            read.lifecycle,
            &read.config,
            &read.pending,
            read.round_index
        ),
        (
            "root",
            "active",
            None,
            0,
            Lifecycle::Ephemeral,
            &json!({}),
            &None,
            0
        )
    );

    // An element is `at` and the appended fields: its seq is its index + 1 and its state is
    // the meta's `compacted` (checked above as "1-1"), so the compacted one is not rewritten.
    let msgs: Vec<String> = t.cmd(&["LRANGE", &session_key("alpha", ":msgs"), "0", "-1"]);
    let at = |i: usize| -> i64 {
        serde_json::from_str::<serde_json::Value>(&msgs[i]).unwrap()["at"]
            .as_i64()
            .unwrap()
    };
    assert_eq!(
        msgs[0],
        format!(r#"{{"at":{},"role":"user","content":"hi"}}"#, at(0))
    );
    assert_eq!(
        msgs[1],
        format!(r#"{{"at":{},"role":"assistant","content":"yo"}}"#, at(1))
    );
    let note: serde_json::Value = serde_json::from_str(&msgs[2]).unwrap();
    assert_eq!(
        (&note["role"], &note["name"], &note["content"]),
        (&json!("system"), &json!("compact_note"), &json!("sum"))
    );
    assert!(at(0) > 0 && at(2) >= at(0), "{msgs:?}");
    assert_eq!(msgs.len(), 3);

    let work = t.hash(&session_key("alpha", ":work"));
    assert_eq!(work["plan"], r#"{"step":1}"#);
    assert_eq!(t.hash(&session_key("alpha", ":idem"))["k1"], "2");
    let ckpt: serde_json::Value =
        serde_json::from_str(&t.hash(&session_key("alpha", ":ckpt"))["cp"]).unwrap();
    assert_eq!(ckpt["payload"], json!({"plan": {"step": 1}}));
    let children: Vec<String> = t.cmd(&["SMEMBERS", &session_key("alpha", ":children")]);
    assert_eq!(children, ["alpha-kid"]);

    let wal: Vec<(String, std::collections::BTreeMap<String, String>)> =
        t.cmd(&["XRANGE", &format!("as:{{{p}}}:wal"), "-", "+"]);
    let first = &wal[0].1;
    assert_eq!(
        (first["op"].as_str(), first["id"].as_str()),
        ("session_create", "alpha")
    );
}

#[tokio::test]
async fn user_rounds_and_decision_keys_live_in_the_partition_of_their_id() {
    let t = env().await;
    let s = &t.store;
    s.create_session(&NewSession::new().id("beta"))
        .await
        .unwrap();
    s.set_user_value("vera", "tz", &json!("UTC")).await.unwrap();
    s.save_state("vera", &json!({"r": 1}), Some("chat"), None)
        .await
        .unwrap();
    let d = s
        .record_decision("beta", &NewDecision::new("d", "r"))
        .await
        .unwrap();

    let user_key = key("as", 16, "vera", "u:vera");
    assert_eq!(t.hash(&user_key)["tz"], r#""UTC""#);
    assert_eq!(t.ttl(&user_key), -1);
    let rounds = key("as", 16, "vera", "r:vera:chat");
    assert_eq!(t.hash(&rounds)["1"], r#"{"r":1}"#);
    // Durable StateService state: no idle TTL, so max_round is never forgotten.
    assert_eq!(t.ttl(&rounds), -1);

    let p = fnv1a("beta") % 16;
    assert!(d.starts_with(&format!("{p}:")), "{d}");
    let decisions = format!("as:{{{p}}}:decisions");
    assert_eq!(t.cmd::<String>(&["TYPE", &decisions]), "stream");
    assert_eq!(t.cmd::<usize>(&["XLEN", &decisions]), 1);
    let open = format!("as:{{{p}}}:open_decisions");
    assert!(t.hash(&open).contains_key(&d));
}

#[tokio::test]
async fn every_session_key_gets_the_default_ttl() {
    let t = env().await;
    t.store
        .create_session(&NewSession::new().id("gamma"))
        .await
        .unwrap();
    touch_every_key(&t, "gamma").await;
    for suffix in SESSION_SUFFIXES {
        assert_ttl_near(&t, &session_key("gamma", suffix), 3600);
    }
    let p = fnv1a("gamma") % 16;
    for shared in ["wal", "sessions"] {
        assert_eq!(t.ttl(&format!("as:{{{p}}}:{shared}")), -1);
    }
    assert_eq!(t.ttl("as:config"), -1);
}

/// The moment (ms, Redis clock) each key of session `sid` expires (missing keys left out),
/// meta first, and the meta's `updated_at`: read in one MULTI, so at one instant.
fn expiries(t: &TestEnv, sid: &str) -> (Vec<(String, i64)>, i64) {
    let keys: Vec<String> = SESSION_SUFFIXES
        .iter()
        .map(|suffix| session_key(sid, suffix))
        .collect();
    let mut pipe = redis::pipe();
    pipe.atomic().cmd("TIME").hget(&keys[0], "updated_at");
    for k in &keys {
        pipe.cmd("PTTL").arg(k);
    }
    let mut c = t.redis();
    let (time, updated_at, pttls): ((i64, i64), i64, Vec<i64>) = {
        let reply: Vec<redis::Value> = pipe.query(&mut c).unwrap();
        let mut it = reply.into_iter();
        let time = redis::from_redis_value(it.next().unwrap()).unwrap();
        let updated = redis::from_redis_value(it.next().unwrap()).unwrap();
        let pttls = it.map(|v| redis::from_redis_value(v).unwrap()).collect();
        (time, updated, pttls)
    };
    let now = time.0 * 1000 + time.1 / 1000;
    let at = keys
        .into_iter()
        .zip(pttls)
        .filter(|(_, pttl)| *pttl != -2)
        .map(|(k, pttl)| {
            assert!(pttl > 0, "{k} has no TTL ({pttl})");
            (k, now + pttl)
        })
        .collect();
    (at, updated_at)
}

/// Every key of `sid` expires within 5 ms of its meta hash (they expire together).
fn assert_expire_together(t: &TestEnv, sid: &str, context: &str) {
    let (all, _) = expiries(t, sid);
    let meta = all[0].1;
    for (k, at) in &all {
        assert!(
            (at - meta).abs() <= 5,
            "{context}: {k} expires at {at}, meta at {meta}"
        );
    }
}

#[tokio::test]
async fn a_session_ttl_applies_to_every_key_and_writes_refresh_it() {
    let t = env().await;
    let s = &t.store;
    s.create_session(&NewSession::new().id("delta").ttl(Duration::from_secs(120)))
        .await
        .unwrap();
    // Every key but the meta hash is created after the create's refresh: each gets the
    // expiry the others have.
    touch_every_key(&t, "delta").await;
    for suffix in SESSION_SUFFIXES {
        assert_ttl_near(&t, &session_key("delta", suffix), 120);
    }
    assert_expire_together(&t, "delta", "keys created after the refresh");
    assert_eq!(t.hash(&session_key("delta", ""))["ttl"], "120");

    for name in [
        "append",
        "set_working",
        "checkpoint",
        "touch",
        "record_decision",
    ] {
        // A refresh is due (its time passed): the write gives every key the full TTL.
        for suffix in SESSION_SUFFIXES {
            let _: i64 = t.cmd(&["EXPIRE", &session_key("delta", suffix), "5"]);
        }
        let _: i64 = t.cmd(&["HSET", &session_key("delta", ""), "ttl_at", "0"]);
        match name {
            "append" => {
                s.append("delta", &NewMessage::new("user").content("m"))
                    .await
                    .unwrap();
            }
            "set_working" => {
                s.set_working("delta", "k", &json!(2)).await.unwrap();
            }
            "checkpoint" => {
                s.checkpoint("delta", "c2", None).await.unwrap();
            }
            "touch" => s.touch("delta").await.unwrap(),
            _ => {
                s.record_decision("delta", &NewDecision::new("d", "r"))
                    .await
                    .unwrap();
            }
        }
        for suffix in SESSION_SUFFIXES {
            let k = session_key("delta", suffix);
            let got = t.ttl(&k);
            assert!(got > 110 && got <= 120, "after {name}: {k} has TTL {got}");
        }
        let due: i64 = t.hash(&session_key("delta", ""))["ttl_at"].parse().unwrap();
        assert!(due > 1_600_000_000_000, "after {name}: ttl_at {due}");
    }

    // Not due yet: a write leaves the TTLs alone (no EXPIRE on the hot path) ...
    for suffix in SESSION_SUFFIXES {
        let _: i64 = t.cmd(&["EXPIRE", &session_key("delta", suffix), "100"]);
    }
    s.append("delta", &NewMessage::new("user").content("m"))
        .await
        .unwrap();
    for suffix in SESSION_SUFFIXES {
        let k = session_key("delta", suffix);
        assert!(t.ttl(&k) <= 100, "{k} was refreshed before its time");
    }
    // ... but an explicit touch always refreshes.
    s.touch("delta").await.unwrap();
    for suffix in SESSION_SUFFIXES {
        assert_ttl_near(&t, &session_key("delta", suffix), 120);
    }
}

/// Under a steady stream of writes over several slack periods, the TTL every key shows right
/// after a write stays in the documented window [ttl - ttl/10, ttl], the keys expire together,
/// and the eight expiry commands are paid about once per slack, not per write.
#[tokio::test]
async fn busy_session_ttls_stay_in_the_window_and_refresh_once_per_slack() {
    let t = env().await;
    let s = &t.store;
    s.create_session(&NewSession::new().id("busy").ttl(Duration::from_secs(2)))
        .await
        .unwrap();
    let _: String = t.cmd(&["CONFIG", "RESETSTAT"]);
    let meta = t.store.keys().session("busy").meta;
    let ttl_at = |t: &crate::support::TestEnv| -> u64 { t.hash(&meta)["ttl_at"].parse().unwrap() };
    // Every value `ttl_at` took: each is one refresh (eight PEXPIREATs).
    let mut refreshes = vec![ttl_at(&t)];
    let mut writes = 0u64;
    let deadline = std::time::Instant::now() + crate::support::HANG;
    // Until several slack periods have passed (three refreshes) and enough writes came.
    while refreshes.len() < 4 || writes < 60 {
        assert!(std::time::Instant::now() < deadline, "no refresh came");
        match writes % 3 {
            0 => {
                s.append("busy", &NewMessage::new("user").content("m"))
                    .await
                    .unwrap();
            }
            1 => {
                let keyed = AppendOptions::new().idempotency_key(format!("k{writes}"));
                s.append_with("busy", &NewMessage::new("user").content("m"), &keyed)
                    .await
                    .unwrap();
            }
            _ => {
                s.set_working("busy", &format!("w{}", writes % 7), &json!(writes))
                    .await
                    .unwrap();
            }
        }
        writes += 1;
        let due = ttl_at(&t);
        if due != *refreshes.last().unwrap() {
            refreshes.push(due);
        }
        let (at, written) = expiries(&t, "busy");
        for (k, at) in at {
            // The 2000 ms TTL minus at most its 200 ms slack, counted from the write.
            assert!(
                (written + 1_799..=written + 2_002).contains(&at),
                "after write {writes} at {written}: {k} expires at {at}"
            );
        }
        assert_expire_together(&t, "busy", &format!("after write {writes}"));
    }
    let info: String = t.cmd(&["INFO", "commandstats"]);
    let pexpireats = info
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_pexpireat:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse::<u64>().unwrap());
    // A refresh comes only once the last one's slack (200 ms of Redis' clock) has passed.
    for pair in refreshes.windows(2) {
        assert!(
            pair[1] >= pair[0] + 200,
            "refreshed before its time: {refreshes:?}"
        );
    }
    // Eight PEXPIREATs per refresh; between refreshes only keys a write may have created get
    // one: the idempotency hash on each keyed append, the message list once, the
    // working-state hash on its 7 new fields.
    let paid_refreshes = refreshes.len() as u64 - 1;
    let keyed_appends = writes.div_ceil(3);
    let may_create = keyed_appends + 1 + 7;
    assert!(
        pexpireats <= 8 * paid_refreshes + may_create,
        "{pexpireats} PEXPIREATs for {writes} writes and {paid_refreshes} refreshes"
    );
    assert!(
        paid_refreshes < writes,
        "{writes} writes, {paid_refreshes} refreshes: every write refreshed"
    );
}

#[tokio::test]
async fn a_custom_namespace_uses_its_prefix_and_partition_count() {
    let t = env_with(|c| c.prefix("zz").partitions(4)).await;
    t.store
        .create_session(&NewSession::new().id("eps").user("u1"))
        .await
        .unwrap();
    let meta = key("zz", 4, "eps", "s:eps");
    assert_eq!(t.cmd::<String>(&["TYPE", &meta]), "hash");
    assert_eq!(t.hash("zz:config")["partitions"], "4");
    let p = fnv1a("eps") % 4;
    assert_eq!(t.cmd::<usize>(&["XLEN", &format!("zz:{{{p}}}:wal")]), 1);
    assert!(
        t.all_keys().iter().all(|k| k.starts_with("zz:")),
        "{:?}",
        t.all_keys()
    );

    // The CLI in the same namespace sees the session; another prefix is another namespace.
    let ns = ["--prefix", "zz", "--partitions", "4"];
    let keys = t.cli_ok(&[&ns[..], &["keys", "eps"]].concat());
    assert_eq!(keys.trim(), meta);
    let yy = ["--prefix", "yy", "--partitions", "2"];
    t.cli_ok(&[&yy[..], &["--db", "yy.db", "spill", "--once"]].concat());
    t.cli_ok(
        &[
            &yy[..],
            &["--db", "yy.db", "session", "create", "--id", "eps"],
        ]
        .concat(),
    );
    assert_eq!(
        t.cmd::<String>(&["TYPE", &key("yy", 2, "eps", "s:eps")]),
        "hash"
    );

    // A different partition count for a recorded namespace is refused.
    let err = Store::connect(Config::new(t.server.url()).prefix("zz").partitions(8))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NamespaceMismatch(_)), "{err:?}");
    let out = t.cli(&["--prefix", "zz", "--partitions", "16", "session", "list"]);
    assert!(
        out.runtime_error().contains("namespace mismatch"),
        "{out:?}"
    );
    assert_eq!(t.hash("zz:config")["partitions"], "4");
}

#[tokio::test]
async fn every_wal_record_is_json_with_the_documented_fields() {
    let t = env().await;
    let s = &t.store;
    let awkward = "say \"hi\" \\ / é ✓\n\ttab";
    let new = NewSession::new()
        .id("w1")
        .user("wu")
        .model(awkward)
        .system_prompt(awkward)
        .metadata(json!({"k": awkward}));
    s.create_session(&new).await.unwrap();
    s.create_session(&NewSession::new().id("w2").parent("w1", Lifecycle::Detached))
        .await
        .unwrap();
    touch_every_key(&t, "w1").await;
    s.archive("w1").await.unwrap();
    s.set_pending("w1", Some(&json!([awkward]))).await.unwrap();
    s.set_round_index("w1", 4).await.unwrap();
    s.save_state("wu", &json!({"s": awkward}), None, None)
        .await
        .unwrap();
    s.set_user_value("wu", "k", &json!(awkward)).await.unwrap();
    s.delete_user_value("wu", "k").await.unwrap();
    let item = NewMemoryItem {
        value: json!({"k": awkward}).as_object().unwrap().clone(),
        ..NewMemoryItem::default()
    };
    s.put_memory(&["users", "wu"], "k", &item).await.unwrap();
    s.delete_memory(&["users", "wu"], "k").await.unwrap();
    s.forget_user("wu").await.unwrap();
    s.close_session("w1", true).await.unwrap();

    let fields: &[(&str, &[&str])] = &[
        (
            "session_create",
            &[&SESSION_DESCRIPTION[..], &["ttl", "created_at"]].concat(),
        ),
        ("session_update", &["updated_at"]),
        ("session_close", &["cascade"]),
        ("msg", &["at", "role"]),
        (
            "compact",
            &[
                "compact_seq",
                "note_seq",
                "from_seq",
                "to_seq",
                "before_tokens",
                "after_tokens",
                "round_index",
                "created_at",
            ],
        ),
        (
            "usage",
            &[
                "created_at",
                "round_index",
                "prompt_tokens",
                "completion_tokens",
                "total_tokens",
                "model",
            ],
        ),
        (
            "checkpoint",
            &["id", "session_id", "label", "created_at", "payload"],
        ),
        (
            "round",
            &["user_id", "session_id", "round_id", "created_at", "state"],
        ),
        ("user_set", &["key"]),
        ("user_del", &["key"]),
        ("user_forget", &["keys"]),
        ("mem_put", &["key"]),
        ("mem_del", &["key"]),
        ("mem_forget", &["label"]),
    ];
    let mut seen = std::collections::BTreeSet::new();
    for (op, id, d) in t.wal_records() {
        let d: serde_json::Value =
            serde_json::from_str(&d).unwrap_or_else(|e| panic!("{op} {id}: {e}: {d}"));
        let (_, wanted) = fields
            .iter()
            .find(|(o, _)| *o == op)
            .unwrap_or_else(|| panic!("op {op}"));
        for f in *wanted {
            assert!(d.get(*f).is_some(), "{op} record lacks {f}: {d}");
        }
        if op == "session_create" && id == "w1" {
            assert_eq!(
                (&d["model"], &d["system_prompt"]),
                (&json!(awkward), &json!(awkward))
            );
            assert_eq!(d["metadata"], json!({"k": awkward}));
        }
        seen.insert(op);
    }
    let all: std::collections::BTreeSet<String> =
        fields.iter().map(|(o, _)| o.to_string()).collect();
    assert_eq!(seen, all);
    let updates: Vec<serde_json::Value> = t
        .wal_ops("session_update")
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    assert!(updates.iter().any(|d| d["status"] == "archived"));
    assert!(updates.iter().any(|d| d["pending"] == json!([awkward])));
    assert!(updates.iter().any(|d| d["round_index"] == 4));
    assert!(updates
        .iter()
        .any(|d| d.get("parent") == Some(&json!(null))));
}

/// A meta hash holding every field, those at their default included, as builds before the
/// lean meta wrote it (and as such sessions stay in Redis across an upgrade), is read and
/// written as before; a field a write sets back to its default leaves the hash.
#[tokio::test]
async fn a_meta_hash_with_every_field_as_earlier_builds_wrote_it_reads_and_writes_alike() {
    let t = env().await;
    let s = &t.store;
    s.create_session(&NewSession::new().id("old"))
        .await
        .unwrap();
    let lean = s.session("old").await.unwrap().unwrap();
    let k = session_key("old", "");
    let _: i64 = t.cmd(&[
        "HSET",
        &k,
        "version",
        "0",
        "user_id",
        "",
        "kind",
        "root",
        "parent",
        "",
        "spawn_depth",
        "0",
        "lifecycle",
        "ephemeral",
        "status",
        "active",
        "model",
        "",
        "system_prompt",
        "",
        "config",
        "{}",
        "metadata",
        "{}",
        "round_index",
        "0",
        "last_compact_seq",
        "0",
        "pending",
        "",
        "compacted",
        "",
    ]);
    assert_eq!(s.session("old").await.unwrap().unwrap(), lean);

    assert_eq!(s.working("old").await.unwrap().version, 0);
    s.set_working("old", "plan", &json!(1)).await.unwrap();
    assert_eq!(s.working("old").await.unwrap().version, 1);
    for text in ["a", "b", "c"] {
        s.append("old", &NewMessage::new("user").content(text))
            .await
            .unwrap();
    }
    assert_eq!(
        s.messages("old", MessageQuery::active())
            .await
            .unwrap()
            .len(),
        3
    );
    s.compact("old", &Compaction::new(1, 2, "sum"))
        .await
        .unwrap();
    let active = s.messages("old", MessageQuery::active()).await.unwrap();
    assert_eq!(
        active.iter().map(|m| m.seq).collect::<Vec<_>>(),
        [3, 4],
        "the compacted range is left out"
    );
    s.archive("old").await.unwrap();
    s.set_pending("old", Some(&json!(["call"]))).await.unwrap();
    s.set_pending("old", None).await.unwrap();
    let meta = t.hash(&k);
    assert_eq!(meta["status"], "archived");
    assert!(
        !meta.contains_key("pending"),
        "cleared pending leaves: {meta:?}"
    );
    assert_eq!(
        (
            meta["compacted"].as_str(),
            meta["last_compact_seq"].as_str()
        ),
        ("1-2", "1")
    );
}

/// A fresh session's meta holds only the fields every session has and those away from their
/// default; working state, messages and compaction read absent ones as their defaults.
#[tokio::test]
async fn a_lean_meta_hash_reads_absent_fields_as_their_defaults() {
    let t = env().await;
    let s = &t.store;
    s.create_session(&NewSession::new().id("lean"))
        .await
        .unwrap();
    let mut fields: Vec<String> = t.hash(&session_key("lean", "")).into_keys().collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        ["created_at", "next_seq", "ttl", "ttl_at", "updated_at"]
    );
    assert_eq!(s.working("lean").await.unwrap().version, 0);
    assert!(matches!(
        s.set_working_if_version("lean", "k", &json!(1), 1).await,
        Err(Error::Conflict {
            expected: 1,
            current: 0
        })
    ));
    assert_eq!(
        s.set_working_if_version("lean", "k", &json!(1), 0)
            .await
            .unwrap(),
        1
    );
    s.append("lean", &NewMessage::new("user").content("a"))
        .await
        .unwrap();
    assert_eq!(
        s.messages("lean", MessageQuery::active())
            .await
            .unwrap()
            .len(),
        1
    );
    s.compact("lean", &Compaction::new(1, 1, "sum"))
        .await
        .unwrap();
    assert_eq!(
        s.session("lean").await.unwrap().unwrap().last_compact_seq,
        1
    );
}
