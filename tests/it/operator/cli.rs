//! The CLI's output contract: values on stdout, one `error:` line on stderr, exit codes
//! 0 / 1 / 2, `null` for absent values, and the shapes of its documents.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use crate::support::{cli_command_at, env, json_lines};

#[tokio::test]
async fn commands_print_values_and_absent_ones_as_null() {
    let t = env().await;
    assert_eq!(
        t.cli_ok(&["session", "create", "--id", "c1", "--user", "ann"]),
        "c1\n"
    );
    let sub = [
        "session",
        "create",
        "--id",
        "c2",
        "--parent",
        "c1",
        "--lifecycle",
        "linked",
    ];
    assert_eq!(t.cli_ok(&sub), "c2\n");
    for i in 1..=4 {
        let content = format!("m{i}");
        let args = [
            "msg",
            "append",
            "c1",
            "--role",
            "user",
            "--content",
            &content,
        ];
        assert_eq!(t.cli_ok(&args), format!("{i}\n"));
    }
    assert_eq!(
        t.cli_ok(&["compact", "c1", "--from", "1", "--to", "2", "--note", "n"]),
        "1 5\n"
    );
    assert_eq!(
        t.cli_ok(&["work", "set", "c1", "plan", r#"{"a":1}"#]),
        "1\n"
    );
    assert_eq!(
        t.cli_ok(&["work", "set", "c1", "x", "2", "--if-version", "1"]),
        "2\n"
    );
    assert_eq!(t.cli_ok(&["work", "get", "c1", "plan"]), "{\"a\":1}\n");
    assert_eq!(t.cli_ok(&["work", "get", "c1", "missing"]), "null\n");
    assert_eq!(
        t.cli_ok(&["work", "get", "c1"]),
        "{\"plan\":{\"a\":1},\"x\":2}\n"
    );
    assert_eq!(t.cli_ok(&["checkpoint", "get", "c1", "none"]), "null\n");
    let ck = t.cli_ok(&["checkpoint", "create", "c1", "cp", "--keys", "plan"]);
    assert!(ck.starts_with("ckpt_"), "{ck}");
    assert_eq!(
        t.cli_ok(&["checkpoint", "get", "c1", "cp"]),
        "{\"plan\":{\"a\":1}}\n"
    );
    assert_eq!(t.cli_ok(&["state", "export", "ann"]), "null\n");
    assert_eq!(t.cli_ok(&["state", "save", "ann", r#"{"r":1}"#]), "1\n");
    assert_eq!(
        t.cli_ok(&["state", "save", "ann", "[2]", "--round", "9"]),
        "9\n"
    );
    assert_eq!(t.cli_ok(&["state", "export", "ann"]), "[2]\n");
    assert_eq!(
        t.cli_ok(&["state", "export", "ann", "--round", "1"]),
        "{\"r\":1}\n"
    );
    assert_eq!(
        t.cli_ok(&["state", "export", "ann", "--round", "2"]),
        "null\n"
    );
    assert_eq!(t.cli_ok(&["user", "get", "ann", "tz"]), "null\n");
    assert_eq!(
        t.cli_ok(&["user", "set", "ann", "tz", "\"UTC\""]),
        format!("{}\n", t.store.keys().user("ann"))
    );
    assert_eq!(t.cli_ok(&["user", "get", "ann", "tz"]), "\"UTC\"\n");
    assert_eq!(t.cli_ok(&["user", "forget", "ann"]), "1\n");
    t.cli_ok(&["user", "set", "ann", "tz", "1"]);
    let receipt: Value =
        serde_json::from_str(&t.cli_ok(&["--json", "user", "forget", "ann"])).unwrap();
    assert_eq!(receipt["removed_keys"], json!(["tz"]));
    assert_eq!(receipt["redis_key"], t.store.keys().user("ann"));

    let list = |extra: &[&str]| -> Vec<u64> {
        let out = t.cli_ok(&[&["msg", "list", "c1"], extra].concat());
        json_lines(&out)
            .iter()
            .map(|m| m["seq"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(list(&[]), [3, 4, 5]);
    assert_eq!(list(&["--all"]), [1, 2, 3, 4, 5]);
    assert_eq!(list(&["--after", "3"]), [4, 5]);
    assert_eq!(list(&["--last", "2"]), [4, 5]);
    assert_eq!(list(&["--last", "0"]), Vec::<u64>::new());
    assert_eq!(list(&["--all", "--after", "1", "--last", "3"]), [3, 4, 5]);
    let all = json_lines(&t.cli_ok(&["msg", "list", "c1", "--all"]));
    for m in &all {
        for field in ["seq", "role", "state", "created_at"] {
            assert!(m.get(field).is_some(), "{m} lacks {field}");
        }
    }
    assert_eq!(all[0]["state"], "compacted_out");
    assert_eq!(all[0]["content"], "m1");
    assert_eq!(
        (&all[4]["role"], &all[4]["name"]),
        (&json!("system"), &json!("compact_note"))
    );

    let show: Value = serde_json::from_str(&t.cli_ok(&["session", "show", "c1"])).unwrap();
    let top: BTreeSet<&str> = show
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        top,
        BTreeSet::from([
            "session",
            "sub_agents",
            "working",
            "messages",
            "checkpoints",
            "pending_decisions"
        ])
    );
    assert_eq!(show["session"]["id"], "c1");
    assert_eq!(show["session"]["user_id"], "ann");
    assert_eq!(show["working"], json!({"plan": {"a": 1}, "x": 2}));
    let shown: Vec<u64> = show["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(shown, [3, 4, 5]);
    assert_eq!(show["checkpoints"]["cp"]["id"], ck.trim());
    assert_eq!(
        show["checkpoints"]["cp"]["payload"],
        json!({"plan": {"a": 1}})
    );

    let keys: BTreeSet<String> = t
        .cli_ok(&["keys", "c1"])
        .lines()
        .map(String::from)
        .collect();
    let k = t.store.keys().session("c1");
    let want: BTreeSet<String> = [
        &k.meta,
        &k.work,
        &k.msgs,
        &k.ckpt,
        &k.compactions,
        &k.children,
    ]
    .into_iter()
    .cloned()
    .collect();
    assert_eq!(keys, want);

    assert_eq!(t.cli_ok(&["session", "list"]), "c1\nc2\n");
    assert_eq!(t.cli_ok(&["session", "list", "--user", "ann"]), "c1\n");
    let d = t.cli_ok(&["decide", "c1", "--decision", "ship", "--rationale", "green"]);
    let open = json_lines(&t.cli_ok(&["decisions", "incomplete", "--session", "c1"]));
    assert_eq!(open.len(), 1);
    assert_eq!(open[0]["id"], d.trim());
    for field in [
        "session_id",
        "decision",
        "rationale",
        "planned_action",
        "outcome",
        "created_at",
    ] {
        assert!(open[0].get(field).is_some(), "decision lacks {field}");
    }
    assert_eq!(
        t.cli_ok(&["outcome", d.trim(), "--outcome", "shipped"]),
        "true\n"
    );
    assert_eq!(t.cli_ok(&["decisions", "incomplete"]), "");
    assert_eq!(t.cli_ok(&["session", "archive", "c1"]), "archived\n");
    assert_eq!(t.cli_ok(&["session", "touch", "c1"]), "3600\n");
    assert_eq!(t.cli_ok(&["session", "close", "c1"]), "2\n");
    assert_eq!(
        t.cli(&["keys", "c1"]).runtime_error(),
        "error: unknown session c1 — `agentstate session list` lists the sessions; \
         `agentstate session create --id ...` makes one"
    );
    assert_eq!(t.cli_ok(&["session", "list"]), "");
}

#[tokio::test]
async fn runtime_errors_exit_1_with_one_error_line_and_write_nothing() {
    let t = env().await;
    t.cli_ok(&["session", "create", "--id", "e1"]);
    t.cli_ok(&["msg", "append", "e1", "--role", "user", "--content", "hi"]);
    t.cli_ok(&["work", "set", "e1", "k", "1"]);
    // Each line names what failed and, after ` — `, the next step.
    let unknown = "error: unknown session nope — `agentstate session list` lists the sessions; \
                   `agentstate session create --id ...` makes one";
    let cases: [(&[&str], &str); 12] = [
        (
            &["msg", "append", "nope", "--role", "user", "--content", "x"],
            unknown,
        ),
        (&["msg", "list", "nope"], unknown),
        (&["session", "show", "nope"], unknown),
        (&["session", "close", "nope"], unknown),
        (&["keys", "nope"], unknown),
        (
            &["work", "set", "e1", "k", "2", "--if-version", "0"],
            "error: conflict: expected 0, current is 1 — another writer got there first; \
             read the current state and retry against 1",
        ),
        (
            &[
                "msg",
                "append",
                "e1",
                "--role",
                "user",
                "--content",
                "x",
                "--expect-seq",
                "1",
            ],
            "error: conflict: expected 1, current is 2 — another writer got there first; \
             read the current state and retry against 2",
        ),
        (
            &["compact", "e1", "--from", "1", "--to", "2", "--note", "n"],
            "error: bad seq range 1 to 2: must satisfy 1 <= from <= to <= 1 — \
             `agentstate msg list <session> --all` shows the seqs",
        ),
        (
            &["session", "create", "--id", "e1"],
            "error: session e1 already exists — choose another --id, or leave --id out for a \
             generated one",
        ),
        (
            &["work", "get", "bad id"],
            "error: invalid session id \"bad id\": must be 1-128 characters of [A-Za-z0-9._@+-]",
        ),
        (
            &["msg", "append", "e1", "--role", "Boss", "--content", "x"],
            "error: invalid input: role \"Boss\": expected 1-32 lowercase letters (system, user, \
             assistant, tool, ...) — see `agentstate msg append --help`",
        ),
        (
            &["work", "set", "e1", "k", "{bad"],
            "error: malformed JSON in working value: key must be a string at line 1 column 2 — \
             give one JSON value, e.g. '{\"step\":1}' or '\"text\"' (quoted for the shell), or `-` \
             to read it from stdin, `@FILE` from a file",
        ),
    ];
    for (args, want) in cases {
        assert_eq!(t.cli_rejected(args), want, "{args:?}");
    }
}

#[tokio::test]
async fn bad_usage_exits_2_without_touching_redis() {
    let t = env().await;
    let before = t.snapshot();
    // Each usage error is one `error:` line on stderr (README's output contract), naming
    // what is wrong and the verb's `--help`.
    for (args, verb) in [
        (&["msg", "append", "s"][..], "agentstate msg append"),
        // A message needs content (or tool calls).
        (
            &["msg", "append", "s", "--role", "user"],
            "agentstate msg append",
        ),
        (&["frobnicate"], "agentstate"),
        (&[], "agentstate"),
        (
            &["session", "create", "--lifecycle", "forever"],
            "agentstate session create",
        ),
        (
            &["msg", "list", "s", "--after", "minus-one"],
            "agentstate msg list",
        ),
        (
            &["compact", "s", "--from", "1", "--note", "n"],
            "agentstate compact",
        ),
        (
            &["--threads", "0", "session", "list"],
            "agentstate session list",
        ),
        // An unknown flag, a flag without its value, a number that is not one.
        (&["msg", "list", "s", "--frobnicate"], "agentstate msg list"),
        (&["session", "create", "--id"], "agentstate session create"),
        (
            &["--partitions", "many", "session", "list"],
            "agentstate session list",
        ),
        (
            &["--redis", "redis://x", "work", "get", "s", "k", "extra"],
            "agentstate work get",
        ),
    ] {
        let out = t.cli(args);
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        assert_eq!(out.stdout, "", "{args:?}");
        let lines: Vec<&str> = out.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {}", out.stderr);
        assert!(lines[0].starts_with("error: "), "{args:?}: {}", lines[0]);
        assert!(
            lines[0].contains(" — ") && lines[0].ends_with(&format!("see `{verb} --help`")),
            "{args:?}: {}",
            lines[0]
        );
    }
    // What clap adds to its message stays in the line: a tip, the usage.
    let line = t.cli(&["msg", "append", "s", "--rol", "user"]).stderr;
    assert!(
        line.contains(
            "unexpected argument '--rol' found (tip: a similar argument exists: '--role')"
        ),
        "{line}"
    );
    // A verb without its subcommand shows that verb's help (on stderr, exit 2).
    let out = t.cli(&["msg"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("Usage: agentstate msg"), "{out:?}");
    // Help and version are no errors: stdout, exit 0.
    for args in [
        &["--help"][..],
        &["msg", "append", "--help"],
        &["--version"],
    ] {
        let out = t.cli(args);
        assert_eq!(out.code, 0, "{args:?}: {out:?}");
        assert!(
            !out.stdout.is_empty() && out.stderr.is_empty(),
            "{args:?}: {out:?}"
        );
    }
    // A runtime size from the environment is checked as `--threads` is.
    let out = cli_command_at(&t.server.url(), t.server.dir())
        .env("AGENTSTATE_THREADS", "many")
        .args(["session", "list"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "error: AGENTSTATE_THREADS must be a whole number of threads, at least 1 (got \"many\")\n"
    );
    assert_eq!(t.snapshot(), before);
}

#[tokio::test]
async fn session_create_options_and_close_without_cascade() {
    let t = env().await;
    let meta = json!({"team": "blue"}).to_string();
    let args = [
        "session",
        "create",
        "--id",
        "p",
        "--ttl",
        "120",
        "--model",
        "m",
        "--metadata",
        &meta,
    ];
    t.cli_ok(&args);
    let ttl = t.ttl(&t.store.keys().session("p").meta);
    assert!(ttl > 110 && ttl <= 120, "{ttl}");
    let session = t.store.require_session("p").await.unwrap();
    assert_eq!(
        (session.model.as_deref(), &session.metadata),
        (Some("m"), &json!({"team": "blue"}))
    );
    for (id, lifecycle) in [("k1", "linked"), ("k2", "ephemeral")] {
        t.cli_ok(&[
            "session",
            "create",
            "--id",
            id,
            "--parent",
            "p",
            "--lifecycle",
            lifecycle,
        ]);
    }
    assert_eq!(t.cli_ok(&["session", "close", "p", "--no-cascade"]), "1\n");
    for id in ["k1", "k2"] {
        assert_eq!(t.store.require_session(id).await.unwrap().parent, None);
    }
    let line = t.cli_rejected(&[
        "usage",
        "k1",
        "--round",
        "1",
        "--prompt=-1",
        "--completion",
        "2",
    ]);
    assert!(line.starts_with("error: invalid input"), "{line}");
}

/// `bench --quick --json` runs every workload (W1–W6, memory, W1 scaling) on the test's
/// Redis and prints one document with every figure; the figures themselves are not checked.
#[tokio::test]
async fn bench_quick_prints_one_json_document_with_every_workload() {
    let t = env().await;
    let out = t.cli_ok(&[
        "--json",
        "--threads",
        "2",
        "bench",
        "--quick",
        "--workers",
        "4",
        "--sessions",
        "8",
    ]);
    let report: Value = serde_json::from_str(&out).unwrap();
    let rows: Vec<&str> = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["workload"].as_str().unwrap())
        .collect();
    assert_eq!(rows, ["W1 append", "W2 load", "W3 state", "W4 decisions"]);
    assert_eq!(
        report["rows"][0]["raw_command"],
        "EVALSHA append_message (10 keys)"
    );
    assert!(report["w5"]["entries"].as_u64().unwrap() >= 8 * 100);
    assert_eq!(report["w6"]["messages"], 1_000);
    assert_eq!(report["w6"]["loss"], "session keys deleted");
    for when in ["before_trim", "after_trim"] {
        assert!(report["memory"][when]["per_message_bytes"].is_number());
    }
    assert_eq!(report["workers"], 4);
    assert_eq!(report["rows"][0]["ops"], 8 * 100);
    scaling_points_are_whole(report["w1_scaling"].as_array().unwrap(), &[1, 8, 64]);
    for p in report["w1_scaling"].as_array().unwrap() {
        assert_eq!(p["client_threads"], 2, "{p}");
    }
}

/// W1 scaling points at exactly `workers`, in order, each with `--quick`'s appends and every
/// figure (W1's rate and latencies, SET's and the script's beside it, Redis CPU per append).
fn scaling_points_are_whole(points: &[Value], workers: &[u64]) {
    let seen: Vec<u64> = points
        .iter()
        .map(|p| p["workers"].as_u64().unwrap())
        .collect();
    assert_eq!(seen, workers);
    for p in points {
        assert!(p["appends"].as_u64().unwrap() >= 3_000, "{p}");
        for figure in [
            "per_sec",
            "p50_us",
            "p99_us",
            "cpu_us_per_append",
            "set_per_sec",
            "script_per_sec",
        ] {
            assert!(p[figure].is_number(), "{figure} in {p}");
        }
    }
}

/// `bench --workers 1,4,4` is the W1 scaling alone: one JSON array, a point per distinct
/// count in the order given, each with W1's rate and latencies beside SET's at the same `-c`
/// and the Redis CPU per append.
#[tokio::test]
async fn bench_with_several_worker_counts_prints_the_w1_scaling_alone() {
    let t = env().await;
    let out = t.cli_ok(&["--json", "bench", "--quick", "--workers", "1,4,4"]);
    let points: Value = serde_json::from_str(&out).unwrap();
    scaling_points_are_whole(points.as_array().unwrap(), &[1, 4]);
    // bench's client is one runtime thread unless told otherwise, as redis-benchmark's is
    for p in points.as_array().unwrap() {
        assert_eq!(p["client_threads"], 1, "{p}");
    }
}

#[tokio::test]
async fn memory_commands_put_get_search_list_and_delete_items() {
    let t = env().await;
    assert_eq!(
        t.cli_ok(&[
            "memory",
            "put",
            "users.ann.prefs",
            "tz",
            r#"{"tz":"UTC","n":3}"#
        ]),
        "users.ann.prefs tz\n"
    );
    let args = [
        "memory",
        "put",
        "users.ann.facts",
        "f1",
        r#"{"text":"tea","n":5}"#,
        "--ttl",
        "60",
        "--vector",
        "text=[0.1,0.9]",
    ];
    t.cli_ok(&args);
    t.cli_ok(&[
        "memory",
        "put",
        "users.bob.facts",
        "f1",
        r#"{"text":"coffee"}"#,
        "--vector",
        "text=[0.9,0.1]",
    ]);
    let item: Value =
        serde_json::from_str(&t.cli_ok(&["memory", "get", "users.ann.facts", "f1"])).unwrap();
    assert_eq!(item["value"], json!({"text": "tea", "n": 5}));
    assert_eq!(item["ttl_minutes"], 60);
    assert_eq!(
        t.cli_ok(&["memory", "get", "users.ann.facts", "no"]),
        "null\n"
    );
    // Ranked by the query vector; the item without vectors last.
    let ranked = json_lines(&t.cli_ok(&[
        "--json",
        "memory",
        "search",
        "users",
        "--query",
        "[0.2,0.8]",
    ]));
    let keys: Vec<String> = ranked
        .iter()
        .map(|i| {
            format!(
                "{}/{}",
                i["namespace"][1].as_str().unwrap(),
                i["key"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(keys, ["ann/f1", "bob/f1", "ann/tz"]);
    assert!(ranked[0]["score"].as_f64().unwrap() > ranked[1]["score"].as_f64().unwrap());
    let filtered = json_lines(&t.cli_ok(&[
        "--json",
        "memory",
        "search",
        "users.ann",
        "--filter",
        r#"{"n":{"$gte":4}}"#,
    ]));
    assert_eq!(filtered.len(), 1);
    assert_eq!(filtered[0]["key"], "f1");
    assert_eq!(
        t.cli_ok(&["memory", "list"]),
        "users.ann.facts\nusers.ann.prefs\nusers.bob.facts\n"
    );
    assert_eq!(
        t.cli_ok(&["--json", "memory", "list", "users", "--max-depth", "2"]),
        "[\"users\",\"ann\"]\n[\"users\",\"bob\"]\n"
    );
    assert_eq!(
        t.cli_ok(&["memory", "list", "users.*.facts"]),
        "users.ann.facts\nusers.bob.facts\n"
    );
    assert_eq!(
        t.cli_ok(&["memory", "delete", "users.bob.facts", "f1"]),
        "deleted\n"
    );
    assert_eq!(
        t.cli_ok(&["memory", "list", "--suffix", "facts"]),
        "users.ann.facts\n"
    );
    // Bad input: one error line, nothing written.
    for bad in [
        &["memory", "put", "users.ann.x", "k", "[1]"][..],
        &["memory", "put", "users..x", "k", "{}"],
        &[
            "memory",
            "put",
            "users.ann.x",
            "k",
            "{}",
            "--vector",
            "text",
        ],
        &["memory", "search", "--query", "{\"a\":1}"],
    ] {
        let line = t.cli_rejected(bad);
        assert!(line.starts_with("error: invalid input"), "{bad:?}: {line}");
    }
}
