//! The newcomer's path: `agentstate demo` end to end, and the embedded-default decision.

use std::process::{Command, Output};

use agentstate::test_support::redis_server::{free_port, RedisServer};
use rusqlite::Connection;

use crate::support::cli_at;

/// True when `program` is on PATH.
fn on_path(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs each closing hint of the demo in `dir` as printed, with a shell, and checks it
/// works: exit 0 and some output (a `#` line is a comment). `agentstate` is not on PATH
/// (as after `scripts/demo.sh`), and nothing answers on the default address.
fn run_hints(dir: &std::path::Path, hints: &[String], probe: &str) {
    assert!(!hints.is_empty());
    for hint in hints {
        let program = hint.split_whitespace().next().unwrap();
        if program != "#" && !program.contains('/') && !on_path(program) {
            continue; // e.g. no sqlite3 on this machine
        }
        let out = Command::new("sh")
            .args(["-c", hint])
            .current_dir(dir)
            .env_remove("AGENTSTATE_REDIS_URL")
            .env_remove("AGENTSTATE_DB")
            .env("AGENTSTATE_DEFAULT_REDIS_URL", probe)
            .output()
            .unwrap();
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{hint}\n{stderr}");
        assert_eq!(stdout.is_empty(), hint.starts_with('#'), "{hint}\n{stdout}");
    }
}

/// The lines after `Look for yourself:` in the demo's narration.
fn hints_in(stdout: &str) -> Vec<String> {
    stdout
        .split_once("Look for yourself:\n")
        .unwrap()
        .1
        .lines()
        .take_while(|l| l.starts_with("  "))
        .map(|l| l.trim().to_string())
        .collect()
}

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
        .prepare(
            "SELECT seq, CASE WHEN EXISTS (SELECT 1 FROM compactions c
                 WHERE c.session_id = m.session_id AND m.seq BETWEEN c.from_seq AND c.to_seq)
             THEN 'compacted_out' ELSE 'active' END
             FROM messages m WHERE session_id = ?1 ORDER BY seq",
        )
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
    // The closing hints run as printed: SQLite queries, the export (the live keys went with
    // the private Redis, which the last line, a comment, says).
    let hints = hints_in(&stdout);
    assert!(
        hints
            .last()
            .unwrap()
            .starts_with("# the live keys went with"),
        "{hints:?}"
    );
    run_hints(dir.path(), &hints, &dead_address());
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
        &["--db", db.to_str().unwrap(), "--json", "demo"],
    );
    assert_eq!(out.code, 0, "{out:?}");
    // `--json`: one document with every step, its facts and checks, and the verdict.
    let report: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(report["passed"], true, "{report}");
    let steps = report["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 8);
    assert!(steps
        .iter()
        .flat_map(|s| s["checks"].as_array().unwrap())
        .all(|c| c["ok"] == true));
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
    // Nothing of the demo stays in a shared Redis: every key of its namespace expires
    // within the hour (its bookkeeping included), and no other key got a TTL.
    let keys: Vec<String> = redis::cmd("KEYS").arg("asdemo:*").query(&mut c).unwrap();
    assert!(keys.len() > 40, "{keys:?}");
    for key in &keys {
        let ttl: i64 = redis::cmd("TTL").arg(key).query(&mut c).unwrap();
        assert!(ttl > 0 && ttl <= 3600, "{key} has TTL {ttl}");
    }
    let ttl: i64 = redis::cmd("TTL")
        .arg("as:someone-elses-key")
        .query(&mut c)
        .unwrap();
    assert_eq!(ttl, -1);
    // Its closing hints run as printed: redis-cli on this server, the session from the CLI.
    let hints: Vec<String> = report["look_for_yourself"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap().to_string())
        .collect();
    assert!(
        hints
            .iter()
            .any(|h| h.starts_with(&format!("redis-cli -u {} HGETALL", server.url()))),
        "{hints:?}"
    );
    run_hints(dir.path(), &hints, &dead_address());
}

#[test]
fn the_demo_stays_out_of_the_applications_file_and_namespace_named_in_the_environment() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let app_db = dir.path().join("app.db");
    // The binary in an application's environment, as README's "one configuration" has an
    // application export it.
    let run = |args: &[&str]| {
        crate::support::cli_output(
            Command::new(env!("CARGO_BIN_EXE_agentstate"))
                .env_remove("AGENTSTATE_LOG")
                .env("AGENTSTATE_REDIS_URL", server.url())
                .env("AGENTSTATE_DB", &app_db)
                .env("AGENTSTATE_PREFIX", "app")
                .current_dir(dir.path())
                .args(args)
                .output()
                .unwrap(),
        )
    };
    let out = run(&["--json", "demo"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        !app_db.exists(),
        "the demo wrote into the application's file"
    );
    assert_demo_history(&dir.path().join("agentstate-demo.db"));
    let mut c = server.connection();
    let app_keys: Vec<String> = redis::cmd("KEYS").arg("app:*").query(&mut c).unwrap();
    assert_eq!(app_keys, Vec::<String>::new());
    let demo_keys: Vec<String> = redis::cmd("KEYS").arg("asdemo:*").query(&mut c).unwrap();
    assert!(!demo_keys.is_empty());
    // The application's daemon then starts on its own file as if no demo had run.
    let out = run(&["spill", "--once"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(app_db.exists());
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
    // It says plainly that the Redis and its data end with the command, and how to keep them.
    let url = stderr
        .split_once("started a private redis-server on ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("{stderr}"));
    assert_eq!(
        stderr,
        format!(
            "agentstate: nothing answers on 127.0.0.1:6379; started a private redis-server on \
             {url} for this command only: it and its data are gone when the command ends. To \
             keep them between commands, run `agentstate server` (or `docker compose up -d \
             redis`) and export the AGENTSTATE_REDIS_URL it prints.\n"
        )
    );
    // The next command has a fresh one: its error says why the session is unknown.
    let out = unconfigured(dir.path(), &dead_address())
        .args(["session", "show", "s1"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!((out.status.code(), stdout.as_str()), (Some(1), ""));
    assert_eq!(
        stderr.lines().last(),
        Some(
            "error: unknown session s1 — this command ran on a fresh private redis-server that \
             holds nothing from earlier commands; keep one running with `agentstate server` (or \
             `docker compose up -d redis`)"
        )
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

#[test]
fn the_private_redis_goes_with_the_command_even_when_it_is_killed() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = unconfigured(dir.path(), &dead_address());
    let mut watch = cmd
        .args(["stats", "--watch", "--interval-ms", "50"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut notice = String::new();
    std::io::BufReader::new(watch.stderr.take().unwrap())
        .read_line(&mut notice)
        .unwrap();
    let url = notice
        .split_once("started a private redis-server on ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("{notice}"))
        .to_string();
    assert!(agentstate::test_support::redis_server::ping(&url));
    // SIGKILL: no destructor runs; the kernel still takes the redis-server along.
    watch.kill().unwrap();
    watch.wait().unwrap();
    crate::support::wait_until_blocking(
        "the private redis-server goes with its command",
        std::time::Duration::from_secs(5),
        || !agentstate::test_support::redis_server::ping(&url),
    );
}

#[test]
fn demo_on_postgresql_passes_every_check_and_leaves_the_history_there() {
    let server = RedisServer::start().unwrap();
    let pg = crate::support::PgDatabase::create();
    let dir = tempfile::tempdir().unwrap();
    let out = cli_at(
        &server.url(),
        dir.path(),
        &["--db", &pg.url, "--json", "demo"],
    );
    assert_eq!(out.code, 0, "{out:?}");
    let report: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(report["passed"], true, "{report}");
    assert!(
        out.stdout.contains("restores the session from PostgreSQL"),
        "{report}"
    );
    let rows = pg.rows("SELECT count(*) FROM messages WHERE session_id LIKE 'demo-%-planner'");
    assert_eq!(
        rows,
        [[Some("63".to_string())]],
        "62 before the loss, one after"
    );
}
