//! `agentstate server`: a long-lived local Redis that keeps its data in a
//! directory, so sessions outlive each command and the server itself; and what a command
//! on the embedded default says instead.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use agentstate::test_support::redis_server::{ping, RedisServer};

use crate::support::{cli_at, cli_output, CliOutput};

/// `agentstate <args>` with no Redis configured, in `dir`.
fn agentstate(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentstate"));
    cmd.env_remove("AGENTSTATE_REDIS_URL")
        .env_remove("AGENTSTATE_DB")
        .env_remove("AGENTSTATE_LOG")
        .current_dir(dir)
        .args(args);
    cmd
}

fn run(dir: &Path, args: &[&str]) -> CliOutput {
    cli_output(agentstate(dir, args).output().unwrap())
}

/// A foreground `agentstate server` and the URL it printed.
fn serve(dir: &Path, data: &Path) -> (Child, String) {
    let mut child = agentstate(dir, &["server", "--port", "0", "--dir"])
        .arg(data)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut url = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    (child, url.trim().to_string())
}

/// Stops a foreground server with SIGTERM; returns what it said on stderr.
fn terminate(child: Child) -> String {
    // SAFETY: signals our own child, which has not been reaped yet.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stderr).unwrap()
}

/// Stops a detached server left running by a failed test.
struct StopOnDrop(PathBuf);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = agentstate(&self.0, &["server", "--stop", "--dir", "data"]).output();
    }
}

#[test]
fn the_server_keeps_sessions_across_commands_and_its_own_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (server, url) = serve(dir.path(), &data);
    assert!(url.starts_with("redis://127.0.0.1:"), "{url}");
    // The namespace's daemon binds it to its durable tier first, as README's tour does.
    assert_eq!(cli_at(&url, dir.path(), &["spill", "--once"]).code, 0);
    assert_eq!(
        cli_at(&url, dir.path(), &["session", "create", "--id", "kept"]).stdout,
        "kept\n"
    );
    let append = [
        "msg",
        "append",
        "kept",
        "--role",
        "user",
        "--content",
        "still here",
    ];
    assert_eq!(cli_at(&url, dir.path(), &append).stdout, "1\n");
    let said = terminate(server);
    let data_abs = data.canonicalize().unwrap();
    assert!(
        said.starts_with(&format!(
            "agentstate: redis-server on {url} keeps its data in {} (AOF, fsync every second); \
             Ctrl-C stops it. In other shells: export AGENTSTATE_REDIS_URL={url}",
            data_abs.display()
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "agentstate: redis-server stopped; its data stay in {}",
            data.display()
        )),
        "{said}"
    );
    assert!(!ping(&url), "the redis-server stopped with it");

    // Started again on the same directory: the session is there, nothing to restore.
    let (server, url) = serve(dir.path(), &data);
    let listed = cli_at(&url, dir.path(), &["msg", "list", "kept"]);
    assert_eq!(listed.code, 0, "{listed:?}");
    assert!(
        listed.stdout.contains(r#""content":"still here""#),
        "{listed:?}"
    );
    terminate(server);
}

#[test]
fn a_detached_server_runs_on_until_stopped_and_says_when_it_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let _guard = StopOnDrop(dir.path().to_path_buf());
    let started = run(
        dir.path(),
        &["server", "--detach", "--port", "0", "--dir", "data"],
    );
    assert_eq!(started.code, 0, "{started:?}");
    let url = started.stdout.trim().to_string();
    assert!(ping(&url), "{started:?}");
    assert!(
        started
            .stderr
            .contains("stop it with `agentstate server --stop --dir data`"),
        "{started:?}"
    );
    // Asked again, it prints the running one's URL: `export ...=$(agentstate server --detach)`
    // can be repeated.
    let again = run(dir.path(), &["server", "--detach", "--dir", "data"]);
    assert_eq!((again.code, again.stdout.trim()), (0, url.as_str()));
    let described: serde_json::Value = serde_json::from_str(
        &run(
            dir.path(),
            &["--json", "server", "--detach", "--dir", "data"],
        )
        .stdout,
    )
    .unwrap();
    let data = dir.path().join("data").canonicalize().unwrap();
    assert_eq!(
        (&described["url"], &described["dir"], &described["detached"]),
        (
            &serde_json::json!(url),
            &serde_json::json!(data),
            &serde_json::json!(true)
        )
    );
    assert_eq!(cli_at(&url, dir.path(), &["spill", "--once"]).code, 0);
    assert_eq!(
        cli_at(&url, dir.path(), &["session", "create", "--id", "d"]).stdout,
        "d\n"
    );
    assert_eq!(
        run(dir.path(), &["server", "--stop", "--dir", "data"]).stdout,
        "stopped\n"
    );
    assert!(!ping(&url));
    assert_eq!(
        run(dir.path(), &["server", "--stop", "--dir", "data"]).runtime_error(),
        "error: no agentstate server runs from data — start one with \
         `agentstate server --detach --dir data`"
    );
    // A port where a Redis already answers is refused, naming the way out.
    let other = RedisServer::start().unwrap();
    let port = other.port().to_string();
    let busy = run(dir.path(), &["server", "--port", &port, "--dir", "data2"]);
    assert_eq!(
        busy.runtime_error(),
        format!(
            "error: a Redis already answers on 127.0.0.1:{port} (commands use it with --redis) \
             — pass --port N (or --port 0 for a free one) to run another"
        )
    );
}
