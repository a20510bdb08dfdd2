//! The operator's and newcomer's path, through the real binary: one JSON contract
//! on every verb, payloads from stdin and files, help grouped with examples, URL errors
//! that say what to do.

use serde_json::{json, Value};

use crate::support::{env, json_lines, TestEnv};

/// `agentstate --json <args>` must succeed and print one JSON document.
fn doc(t: &TestEnv, args: &[&str]) -> Value {
    let db = t.db();
    let out = t.cli_ok(&[&["--json", "--db", db.to_str().unwrap()], args].concat());
    assert_eq!(out.lines().count(), 1, "{args:?}: {out}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

/// `agentstate --json <args>` must succeed and print JSON lines.
fn lines(t: &TestEnv, args: &[&str]) -> Vec<Value> {
    let db = t.db();
    json_lines(&t.cli_ok(&[&["--json", "--db", db.to_str().unwrap()], args].concat()))
}

#[tokio::test]
async fn every_verb_prints_one_json_document_or_json_lines_with_json() {
    let t = env().await;
    assert_eq!(
        doc(&t, &["session", "create", "--id", "p", "--user", "ann"]),
        json!({"id": "p"})
    );
    let child = ["session", "create", "--id", "w", "--parent", "p"];
    assert_eq!(
        doc(&t, &[&child[..], &["--lifecycle", "linked"]].concat()),
        json!({"id": "w"})
    );
    doc(&t, &["session", "create", "--id", "w2", "--parent", "w"]);
    for (i, text) in ["a", "b", "c"].iter().enumerate() {
        assert_eq!(
            doc(
                &t,
                &["msg", "append", "p", "--role", "user", "--content", text]
            ),
            json!({"seq": i + 1})
        );
    }
    assert_eq!(
        doc(
            &t,
            &["compact", "p", "--from", "1", "--to", "2", "--note", "n"]
        ),
        json!({"compact_seq": 1, "note_seq": 4})
    );
    let usage = [
        "usage",
        "p",
        "--round",
        "1",
        "--prompt",
        "3",
        "--completion",
        "4",
    ];
    assert_eq!(
        doc(&t, &usage),
        json!({"round_index": 1, "prompt_tokens": 3, "completion_tokens": 4,
               "total_tokens": 7, "model": null})
    );
    assert_eq!(t.cli_ok(&usage), "7\n", "plain: the total recorded");
    assert_eq!(
        doc(&t, &["work", "set", "p", "plan", r#"{"step":1}"#]),
        json!({"version": 1})
    );
    assert_eq!(doc(&t, &["work", "get", "p", "plan"]), json!({"step": 1}));
    doc(&t, &["work", "set", "p", "tmp", "1"]);
    assert_eq!(doc(&t, &["work", "del", "p", "tmp"]), json!({"version": 3}));
    let ckpt = doc(&t, &["checkpoint", "create", "p", "cp"]);
    assert!(ckpt["id"].as_str().unwrap().starts_with("ckpt_"), "{ckpt}");
    assert_eq!(
        doc(&t, &["checkpoint", "get", "p", "cp"]),
        json!({"plan": {"step": 1}})
    );
    assert_eq!(
        doc(&t, &["state", "save", "ann", r#"{"r":1}"#]),
        json!({"round": 1})
    );
    assert_eq!(doc(&t, &["state", "export", "ann"]), json!({"r": 1}));
    let decide = ["decide", "p", "--decision", "ship", "--rationale", "green"];
    let d1 = doc(&t, &decide)["id"].as_str().unwrap().to_string();
    let d2 = doc(&t, &[&decide[..], &["--action", "deploy"]].concat())["id"]
        .as_str()
        .unwrap()
        .to_string();
    let outcome = ["outcome", &d1, "--outcome", "shipped"];
    assert_eq!(doc(&t, &outcome), json!({"recorded": true}));
    assert_eq!(doc(&t, &outcome), json!({"recorded": false}));
    assert_eq!(
        doc(&t, &["user", "set", "ann", "tz", r#""UTC""#]),
        json!({"user_id": "ann", "key": "tz", "redis_key": t.store.keys().user("ann")})
    );
    assert_eq!(doc(&t, &["user", "get", "ann", "tz"]), json!("UTC"));
    assert_eq!(
        doc(&t, &["session", "archive", "w"]),
        json!({"id": "w", "status": "archived"})
    );
    assert_eq!(
        doc(&t, &["session", "touch", "p"]),
        json!({"id": "p", "ttl": 3600})
    );

    let k = t.store.keys().session("p");
    let keys = lines(&t, &["keys", "p"]);
    let want: Vec<(&str, &str)> = vec![
        (&k.meta, "hash"),
        (&k.work, "hash"),
        (&k.msgs, "list"),
        (&k.ckpt, "hash"),
        (&k.compactions, "list"),
        (&k.usage, "hash"),
        (&k.children, "set"),
    ];
    let got: Vec<(&str, &str)> = keys
        .iter()
        .map(|l| (l["key"].as_str().unwrap(), l["type"].as_str().unwrap()))
        .collect();
    assert_eq!(got, want);
    for l in &keys {
        let ttl = l["ttl"].as_i64().unwrap();
        assert!(ttl > 3500 && ttl <= 3600, "{l}");
    }

    let listed = lines(&t, &["session", "list"]);
    let ids: Vec<&str> = listed.iter().map(|l| l["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["p", "w", "w2"]);
    assert_eq!(
        (
            &listed[0]["live"],
            &listed[0]["messages"],
            &listed[0]["user_id"]
        ),
        (&json!(true), &json!(4), &json!("ann"))
    );
    assert_eq!(
        (
            &listed[1]["parent"],
            &listed[1]["lifecycle"],
            &listed[1]["status"]
        ),
        (&json!("p"), &json!("linked"), &json!("archived"))
    );

    // `session show`: the document carries what the terminal view shows — the sub-agent
    // tree and the pending decisions too — and piped output is that same document.
    let show = doc(&t, &["session", "show", "p"]);
    assert_eq!(t.cli_ok(&["session", "show", "p"]), format!("{show}\n"));
    assert_eq!(
        show["sub_agents"],
        json!([{"id": "w", "live": true, "lifecycle": "linked", "spawn_depth": 1, "messages": 0,
                "sub_agents": [{"id": "w2", "live": true, "lifecycle": "ephemeral",
                                "spawn_depth": 2, "messages": 0, "sub_agents": []}]}])
    );
    let pending: Vec<&str> = show["pending_decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert_eq!(pending, [d2.as_str()]);
    assert_eq!(show["pending_decisions"][0]["planned_action"], "deploy");
    assert_eq!(show["working"], json!({"plan": {"step": 1}}));
    assert_eq!(show["session"]["version"], 3);
    assert_eq!(show["checkpoints"]["cp"]["id"], ckpt["id"]);
    let seqs: Vec<u64> = show["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [3, 4]);
    let screen = t.cli_on_terminal(&["session", "show", "p"]);
    for shown in [
        "sub-agents:",
        "└── w (linked, depth 1, 0 msgs)",
        "    └── w2 (ephemeral, depth 2, 0 msgs)",
        "working state (version 3):",
        "plan = {\"step\":1}",
        "pending decisions:",
        &format!("{d2}  ship — green (action: deploy)"),
    ] {
        assert!(screen.contains(shown), "{shown:?} not in:\n{screen}");
    }

    let incomplete = lines(&t, &["decisions", "incomplete"]);
    assert_eq!(incomplete.len(), 1);
    assert_eq!(incomplete[0]["id"], d2.as_str());
    let tailed = lines(
        &t,
        &[
            "tail",
            "--group",
            "g",
            "--consumer",
            "c",
            "--from-start",
            "--count",
            "1",
        ],
    );
    assert_eq!(tailed.len(), 1);
    assert_eq!(tailed[0]["type"], "decision");
    assert_eq!(
        doc(&t, &["spill", "--once"])
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["decisions", "partitions", "restored", "wal"]
    );
    let stats = lines(&t, &["stats"]);
    assert_eq!(stats.len(), 16);
    assert!(stats.iter().all(|s| s["lag_ms"] == 0 && s["at"].is_u64()));
    let exported = lines(&t, &["export", "p"]);
    assert_eq!(exported[0]["type"], "session");
    assert_eq!(
        lines(&t, &["restore", "p", "w"]),
        [
            json!({"id": "p", "state": "live"}),
            json!({"id": "w", "state": "live"})
        ]
    );
    let forget = doc(&t, &["user", "forget", "ann"]);
    assert_eq!(forget["removed_keys"], json!(["tz"]));
    assert_eq!(doc(&t, &["session", "close", "p"]), json!({"removed": 3}));
}

#[tokio::test]
async fn keys_of_a_session_that_is_not_live_says_how_to_bring_it_back() {
    let t = env().await;
    crate::support::create(&t, "gone", None, None).await;
    t.expire_session("gone");
    assert_eq!(
        t.cli_rejected(&["keys", "gone"]),
        "error: session gone has no keys in Redis: it is not live (it expired or Redis lost \
         it; SQLite may hold it) — `agentstate restore gone` brings it back"
    );
}

/// 200 KiB: over Linux's 128 KiB limit on one argument, so only stdin or a file can carry it.
fn big_text() -> String {
    let line = "the quick brown fox jumps over the lazy dog, again and again; ";
    let mut text = line.repeat(200 * 1024 / line.len() + 1);
    text.push_str("\nlast line, no newline after it");
    text
}

#[tokio::test]
async fn payload_arguments_read_stdin_and_files_byte_for_byte() {
    let t = env().await;
    let dir = t.server.dir();
    let big = big_text();
    let content_of = |seq: &str| -> Value {
        json_lines(&t.cli_ok(&["msg", "list", "s", "--after", seq, "--last", "1"]))[0]["content"]
            .clone()
    };
    // Session metadata from a file, system prompt from stdin.
    std::fs::write(dir.join("meta.json"), r#"{"team":"blue"}"#).unwrap();
    let create = [
        "session",
        "create",
        "--id",
        "s",
        "--metadata",
        "@meta.json",
        "--system-prompt",
        "-",
    ];
    let out = t.cli_stdin(&create, b"You are a planner.\n");
    assert_eq!((out.code, out.stdout.as_str()), (0, "s\n"), "{out:?}");
    let session = t.store.require_session("s").await.unwrap();
    assert_eq!(session.metadata, json!({"team": "blue"}));
    assert_eq!(
        session.system_prompt.as_deref(),
        Some("You are a planner.\n")
    );

    // Message content from stdin and from a file, each 200 KiB, stored exactly.
    let append = ["msg", "append", "s", "--role", "user", "--content"];
    let out = t.cli_stdin(&[&append[..], &["-"]].concat(), big.as_bytes());
    assert_eq!((out.code, out.stdout.as_str()), (0, "1\n"), "{out:?}");
    assert_eq!(content_of("0"), json!(big));
    std::fs::write(dir.join("answer.md"), format!("file: {big}")).unwrap();
    assert_eq!(t.cli_ok(&[&append[..], &["@answer.md"]].concat()), "2\n");
    assert_eq!(content_of("1"), json!(format!("file: {big}")));
    // `@@` is text that starts with `@`.
    t.cli_ok(&[&append[..], &["@@alice, look"]].concat());
    assert_eq!(content_of("2"), json!("@alice, look"));
    // Tool calls and meta from files, the content from stdin.
    std::fs::write(dir.join("calls.json"), r#"[{"id":"c1","name":"search"}]"#).unwrap();
    std::fs::write(dir.join("m.json"), r#"{"source":"file"}"#).unwrap();
    let tool = [
        "msg",
        "append",
        "s",
        "--role",
        "assistant",
        "--tool-calls",
        "@calls.json",
        "--meta",
        "@m.json",
        "--content",
        "-",
    ];
    assert_eq!(t.cli_stdin(&tool, b"calling").stdout, "4\n");
    let m = &json_lines(&t.cli_ok(&["msg", "list", "s", "--last", "1"]))[0];
    assert_eq!(
        (&m["content"], &m["tool_calls"], &m["meta"]),
        (
            &json!("calling"),
            &json!([{"id": "c1", "name": "search"}]),
            &json!({"source": "file"})
        )
    );

    // JSON values: working state from stdin (over the argument limit too), state and user
    // data from files.
    let value = json!({"notes": big});
    let out = t.cli_stdin(
        &["work", "set", "s", "notes", "-"],
        value.to_string().as_bytes(),
    );
    assert_eq!((out.code, out.stdout.as_str()), (0, "1\n"), "{out:?}");
    assert_eq!(
        t.store.get_working("s", "notes").await.unwrap(),
        Some(value)
    );
    std::fs::write(dir.join("state.json"), r#"{"turn":7}"#).unwrap();
    assert_eq!(t.cli_ok(&["state", "save", "ann", "@state.json"]), "1\n");
    assert_eq!(t.cli_ok(&["state", "export", "ann"]), "{\"turn\":7}\n");
    assert_eq!(
        t.cli_ok(&["user", "set", "ann", "profile", "@meta.json"]),
        format!("{}\n", t.store.keys().user("ann"))
    );
    assert_eq!(
        t.cli_ok(&["user", "get", "ann", "profile"]),
        "{\"team\":\"blue\"}\n"
    );
    // A compaction note, a rationale and an outcome from files or stdin.
    std::fs::write(dir.join("note.txt"), "summary of 1-2").unwrap();
    let note = [
        "compact",
        "s",
        "--from",
        "1",
        "--to",
        "2",
        "--note",
        "@note.txt",
    ];
    assert_eq!(t.cli_ok(&note), "1 5\n");
    assert_eq!(content_of("4"), json!("summary of 1-2"));
    let decide = ["decide", "s", "--decision", "ship", "--rationale", "-"];
    let id = t.cli_stdin(&decide, b"tests pass").stdout;
    let open = json_lines(&t.cli_ok(&["decisions", "incomplete"]));
    assert_eq!(
        (&open[0]["id"], &open[0]["rationale"]),
        (&json!(id.trim()), &json!("tests pass"))
    );
    std::fs::write(dir.join("outcome.txt"), "deployed").unwrap();
    assert_eq!(
        t.cli_ok(&["outcome", id.trim(), "--outcome", "@outcome.txt"]),
        "true\n"
    );

    // Mistakes write nothing and say what to do.
    let before = t.snapshot();
    let twice = [
        "msg",
        "append",
        "s",
        "--role",
        "user",
        "--content",
        "-",
        "--meta",
        "-",
    ];
    let out = t.cli_stdin(&twice, b"x");
    assert_eq!(
        out.runtime_error(),
        "error: invalid input: --meta -: stdin was already read by another argument; give \
         this one as @FILE — see `agentstate msg append --help`"
    );
    let out = t.cli(&[&append[..], &["@missing.txt"]].concat());
    assert_eq!(
        out.runtime_error(),
        "error: cannot read --content @missing.txt: No such file or directory (os error 2) — \
         name an existing file, or write @@ for text that starts with @"
    );
    assert_eq!(t.snapshot(), before);
}

/// Every leaf command: `agentstate <verb> --help`.
const VERBS: [&str; 35] = [
    "demo",
    "server",
    "bench",
    "session create",
    "session show",
    "session list",
    "session close",
    "session archive",
    "session touch",
    "keys",
    "work set",
    "work get",
    "work del",
    "msg append",
    "msg list",
    "compact",
    "usage",
    "checkpoint create",
    "checkpoint get",
    "checkpoint list",
    "state save",
    "state export",
    "decide",
    "outcome",
    "decisions incomplete",
    "tail",
    "user set",
    "user get",
    "user forget",
    "spill",
    "restore",
    "export",
    "gc",
    "stats",
    "ui",
];

#[tokio::test]
async fn help_lists_global_options_apart_and_ends_with_examples_of_the_verb() {
    let t = env().await;
    for verb in VERBS {
        let words: Vec<&str> = verb.split(' ').collect();
        let help = t.cli_ok(&[&words[..], &["--help"]].concat());
        let (own, rest) = help
            .split_once("\nGlobal options:\n")
            .unwrap_or_else(|| panic!("{verb}: no Global options heading:\n{help}"));
        // Option names: the first word of each option line.
        let names = |text: &str| -> Vec<String> {
            text.lines()
                .map(str::trim_start)
                .filter(|l| l.starts_with("--"))
                .filter_map(|l| l.split_whitespace().next().map(String::from))
                .collect()
        };
        let (own_names, global_names) = (names(own), names(rest));
        for global in ["--redis", "--db", "--prefix", "--partitions", "--json"] {
            assert!(
                !own_names.iter().any(|n| n == global),
                "{verb}: {global} among its own options"
            );
            assert!(
                global_names.iter().any(|n| n == global),
                "{verb}: {global} missing"
            );
        }
        let examples = rest
            .split_once("\nExamples:\n")
            .unwrap_or_else(|| panic!("{verb}: no examples:\n{help}"))
            .1;
        let runnable: Vec<&str> = examples
            .lines()
            .filter(|l| l.trim_start().starts_with(&format!("agentstate {verb}")))
            .collect();
        assert!(
            !runnable.is_empty(),
            "{verb}: no example of it:\n{examples}"
        );
    }
    // With the URL in the environment, a usage error does not show --redis as required.
    let out = t
        .cli_command()
        .env("AGENTSTATE_REDIS_URL", t.server.url())
        .env_remove("AGENTSTATE_DB")
        .args(["msg", "append", "s"])
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr.contains("usage: agentstate msg append --role <ROLE> --content <TEXT> <SID>;"),
        "{stderr}"
    );
    // `compact`'s two numbers are explained where a user looks.
    assert!(t
        .cli_ok(&["compact", "--help"])
        .contains("Prints `COMPACT_SEQ NOTE_SEQ`: the compaction's number"));
}

#[tokio::test]
async fn a_url_that_is_not_redis_says_which_forms_work() {
    let t = env().await;
    let forms = "use redis://[user:password@]host:port[/db], rediss://... for TLS, a \
                 cluster seed list (redis://h1:p1,redis://h2:p2), or Sentinels \
                 (redis+sentinel://h1:p1,h2:p2/SERVICE)";
    let out = crate::support::cli_at("http://x", t.server.dir(), &["session", "list"]);
    assert_eq!(
        out.runtime_error(),
        format!("error: --redis http://x is not a Redis URL: the scheme http:// is not a Redis scheme — {forms}")
    );
    // A Sentinel URL must name the service the Sentinels monitor.
    let out = crate::support::cli_at(
        "redis+sentinel://127.0.0.1:1",
        t.server.dir(),
        &["session", "list"],
    );
    assert_eq!(
        out.runtime_error(),
        format!("error: --redis redis+sentinel://127.0.0.1:1 is not a Redis URL: no service named (.../SERVICE, the name the Sentinels monitor) — {forms}")
    );
    // The same URL from the environment is named as such.
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_agentstate"));
    cmd.env("AGENTSTATE_REDIS_URL", "localhost:6379")
        .env_remove("AGENTSTATE_LOG")
        .current_dir(t.server.dir())
        .args(["session", "list"]);
    let out = crate::support::cli_output(cmd.output().unwrap());
    assert_eq!(
        out.runtime_error(),
        format!("error: AGENTSTATE_REDIS_URL localhost:6379 is not a Redis URL: it has no scheme (redis://...) — {forms}")
    );
    // The password never shows in an error line.
    let out = crate::support::cli_at(
        "redis://bob:s3cret@127.0.0.1:notaport",
        t.server.dir(),
        &["session", "list"],
    );
    let line = out.runtime_error();
    assert!(
        line.contains("redis://bob:***@127.0.0.1:notaport"),
        "{line}"
    );
    assert!(!line.contains("s3cret"), "{line}");
}

#[tokio::test]
async fn a_durable_tier_opened_under_another_namespace_names_what_differs_and_the_fix() {
    let t = env().await;
    let db = t.db();
    let db = db.to_str().unwrap();
    for (namespace, differs) in [
        (&["--prefix", "other"][..], "the prefix differs"),
        (
            &["--prefix", "third", "--partitions", "8"][..],
            "the prefix and the partition count differ",
        ),
    ] {
        let out = t.cli(&[namespace, &["--db", db, "spill", "--once"]].concat());
        let line = out.runtime_error();
        for said in [
            "records namespace \"as\" with 16 partitions",
            differs,
            "holds the history of one namespace",
            "a durable tier of its own (another --db)",
            "(--prefix, --partitions)",
        ] {
            assert!(line.contains(said), "{said:?} missing: {line}");
        }
    }
}
