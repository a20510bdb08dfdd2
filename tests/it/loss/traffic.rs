//! Redis lost while agents keep working, as production runs: daemon processes on the
//! namespace's durable tier (started from its directory, `./agentstate.db`), writer processes
//! that have no durable tier of their own (the CLI, from an empty directory) appending
//! durably through FLUSHALL, a Redis restart without persistence and SIGKILLed daemons. The
//! checks: every session comes back within a bound after each loss, never "unknown session";
//! a create of a durable id is refused; every acknowledged durable append is in the durable
//! tier with its seq, once; no session's durable history ever shrinks; no agent creates a
//! durable tier. And `spill --once` drains every partition after its daemons were killed, or
//! names the partitions it could not drain.
//!
//! The soak is the same run, longer and with more of everything:
//! `AGENTSTATE_SOAK_SECS=600 cargo test --locked --test it loss::traffic::soak -- --ignored --nocapture`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentstate::keys::Keys;
use agentstate::test_support::redis_server::RedisServer;

use crate::support::{
    cli_command_at, cli_output, sqlite_messages, wait_until_blocking, CliOutput, HANG,
};

/// How big a run is.
struct Scale {
    /// Sessions the writers append to.
    sessions: usize,
    /// Writer threads, each running one CLI process per append.
    writers: usize,
    /// Rounds of the four faults.
    rounds: usize,
    /// Traffic between two faults.
    between: Duration,
}

/// The CLI as a process in `dir` against the Redis at `url`, with no durable tier named: its
/// `--db` is `./agentstate.db` there.
fn command_in(url: &str, dir: &Path) -> Command {
    let mut cmd = cli_command_at(url, dir);
    cmd.env_remove("AGENTSTATE_DB");
    cmd
}

/// What an agent process knows: the Redis address and its own directory (no durable tier);
/// and, for the test's checks, where the durable tier is.
#[derive(Clone)]
struct Agent {
    url: String,
    dir: PathBuf,
    db: PathBuf,
}

impl Agent {
    /// An agent's command.
    fn run(&self, args: &[&str]) -> CliOutput {
        cli_output(
            command_in(&self.url, &self.dir)
                .args(args)
                .output()
                .unwrap(),
        )
    }

    /// The message count of each session in the durable tier.
    fn durable_counts(&self) -> BTreeMap<String, i64> {
        let conn = rusqlite::Connection::open_with_flags(
            &self.db,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        conn.busy_timeout(Duration::from_secs(5)).unwrap();
        let mut stmt = conn
            .prepare("SELECT session_id, count(*) FROM messages GROUP BY session_id")
            .unwrap();
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        rows.collect::<rusqlite::Result<_>>().unwrap()
    }
}

/// One namespace under traffic: a Redis, the durable tier's directory with its daemons, and
/// an agent's directory with nothing in it.
struct Deployment {
    server: RedisServer,
    /// The durable tier's directory; its daemons run here on `./agentstate.db`.
    durable: PathBuf,
    /// Where agents run: no durable tier, and none may appear.
    agent: PathBuf,
    daemons: Vec<Child>,
    keys: Keys,
}

impl Deployment {
    fn new() -> Deployment {
        let server = RedisServer::start().unwrap();
        let durable = server.path("durable");
        let agent = server.path("agent");
        std::fs::create_dir_all(&durable).unwrap();
        std::fs::create_dir_all(&agent).unwrap();
        Deployment {
            server,
            durable,
            agent,
            daemons: Vec::new(),
            keys: Keys::new("as", 16),
        }
    }

    fn db(&self) -> PathBuf {
        self.durable.join("agentstate.db")
    }

    /// An agent of this deployment.
    fn agent(&self) -> Agent {
        Agent {
            url: self.server.url(),
            dir: self.agent.clone(),
            db: self.db(),
        }
    }

    /// Starts one more daemon on the durable tier, logging to `daemon<n>.log`.
    fn start_daemon(&mut self, lease_ms: u64) {
        let log = self
            .durable
            .join(format!("daemon{}.log", self.daemons.len()));
        let child = command_in(&self.server.url(), &self.durable)
            .args(["spill", "--lease-ms", &lease_ms.to_string()])
            .env("AGENTSTATE_LOG", "agentstate=info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap();
        self.daemons.push(child);
    }

    /// Waits until some daemon checked every partition of this Redis (`committed` exists).
    fn wait_until_checked(&self) -> Duration {
        let started = Instant::now();
        let mut c = self.server.connection();
        wait_until_blocking("a daemon checked this Redis", HANG, || {
            (0..self.keys.partitions()).all(|p| {
                redis::cmd("EXISTS")
                    .arg(self.keys.committed(p))
                    .query::<bool>(&mut c)
                    .unwrap_or(false)
            })
        });
        started.elapsed()
    }

    fn kill_daemon(&mut self, i: usize) {
        let _ = self.daemons[i].kill();
        let _ = self.daemons[i].wait();
    }

    /// Stops every daemon with SIGTERM (they drain and commit) and checks each exited 0.
    fn stop_daemons(&mut self) {
        for d in &mut self.daemons {
            if d.try_wait().unwrap().is_none() {
                unsafe {
                    libc::kill(d.id() as i32, libc::SIGTERM);
                }
                assert!(d.wait().unwrap().success(), "a daemon failed; see its log");
            }
        }
    }

    /// Every daemon log, concatenated.
    fn daemon_logs(&self) -> String {
        (0..self.daemons.len())
            .map(|i| {
                std::fs::read_to_string(self.durable.join(format!("daemon{i}.log")))
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Deployment {
    fn drop(&mut self) {
        for d in &mut self.daemons {
            let _ = d.kill();
            let _ = d.wait();
        }
    }
}

/// What the agents saw.
#[derive(Default)]
struct Seen {
    /// (session, seq) → content of every acknowledged durable append.
    acked: BTreeMap<(String, i64), String>,
    /// Every error line an agent printed, with the command.
    errors: Vec<String>,
}

/// A writer: appends `w<n>-<i>` to the sessions in turn, durably, each with its idempotency
/// key; a failed append is retried with the same key until it is acknowledged.
fn writer(d: &Agent, n: usize, sids: &[String], stop: &AtomicBool, seen: &Mutex<Seen>) {
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        let sid = &sids[(n + i) % sids.len()];
        let content = format!("w{n}-{i}");
        let deadline = Instant::now() + HANG;
        loop {
            let out = d.run(&[
                "msg",
                "append",
                sid,
                "--role",
                "user",
                "--content",
                &content,
                "--durable",
                "--idempotency-key",
                &content,
            ]);
            if out.code == 0 {
                let seq: i64 = out.stdout.trim().parse().unwrap();
                let mut seen = seen.lock().unwrap();
                let before = seen.acked.insert((sid.clone(), seq), content.clone());
                assert!(
                    before.is_none(),
                    "seq {seq} of {sid} acknowledged twice: {before:?} and {content}"
                );
                break;
            }
            seen.lock().unwrap().errors.push(format!(
                "msg append {sid} ({content}): {}",
                out.stderr.trim()
            ));
            assert!(
                Instant::now() < deadline,
                "append {content} to {sid} failed for {HANG:?}: {out:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        i += 1;
    }
}

/// After a fault: every session is reachable again for an agent (`msg list`); returns how
/// long the slowest took. A create of a durable id, racing the daemon, is refused.
fn check_after_loss(d: &Agent, sids: &[String], seen: &Mutex<Seen>) -> Duration {
    let started = Instant::now();
    let created = d.run(&["session", "create", "--id", &sids[0]]);
    assert_eq!(created.code, 1, "a create of a durable id: {created:?}");
    let refusal = created.runtime_error();
    assert!(
        refusal.contains("already exists") || refusal.contains("is not live"),
        "{created:?}"
    );
    for sid in sids {
        loop {
            let out = d.run(&["msg", "list", sid]);
            if out.code == 0 {
                assert!(!out.stdout.is_empty(), "{sid} came back empty");
                break;
            }
            seen.lock()
                .unwrap()
                .errors
                .push(format!("msg list {sid}: {}", out.stderr.trim()));
            assert!(started.elapsed() < HANG, "{sid} did not come back: {out:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    started.elapsed()
}

/// The run: daemons and writers, then `rounds` × (FLUSHALL, a daemon SIGKILLed and replaced,
/// a restart without persistence), each followed by the reachability check, then the checks
/// of the durable tier.
fn run_through_losses(scale: Scale) {
    let mut d = Deployment::new();
    let lease_ms = 1000;
    d.start_daemon(lease_ms);
    d.start_daemon(lease_ms);
    d.wait_until_checked();
    let sids: Vec<String> = (0..scale.sessions).map(|i| format!("s{i}")).collect();
    for sid in &sids {
        let out = d.agent().run(&["session", "create", "--id", sid]);
        assert_eq!(out.code, 0, "{out:?}");
        let out = d.agent().run(&[
            "msg",
            "append",
            sid,
            "--role",
            "system",
            "--content",
            "first",
            "--durable",
        ]);
        assert_eq!(out.code, 0, "{out:?}");
    }

    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let agent = d.agent();
    let writers: Vec<_> = (0..scale.writers)
        .map(|n| {
            let (stop, seen, view, sids) =
                (stop.clone(), seen.clone(), agent.clone(), sids.clone());
            std::thread::spawn(move || writer(&view, n, &sids, &stop, &seen))
        })
        .collect();
    // The durable history of every session, sampled: it never shrinks.
    let monitor = {
        let (stop, view) = (stop.clone(), agent.clone());
        std::thread::spawn(move || {
            let mut last: BTreeMap<String, i64> = BTreeMap::new();
            while !stop.load(Ordering::Relaxed) {
                let now = view.durable_counts();
                for (sid, n) in &last {
                    let m = now.get(sid).copied().unwrap_or(0);
                    assert!(m >= *n, "{sid}'s durable history shrank from {n} to {m}");
                }
                last = now;
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };

    let mut back = Vec::new();
    for round in 0..scale.rounds {
        std::thread::sleep(scale.between);
        let _: () = redis::cmd("FLUSHALL")
            .query(&mut d.server.connection())
            .unwrap();
        back.push(("flushall", check_after_loss(&agent, &sids, &seen)));
        std::thread::sleep(scale.between);
        let oldest = d.daemons.len() - 2;
        d.kill_daemon(oldest);
        d.start_daemon(lease_ms);
        std::thread::sleep(scale.between);
        d.server.restart_empty().unwrap();
        back.push(("restart", check_after_loss(&agent, &sids, &seen)));
        eprintln!("round {round}: every session back after {back:?}");
        back.clear();
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    monitor.join().unwrap();

    d.stop_daemons();
    let seen = seen.lock().unwrap();
    assert!(!seen.acked.is_empty());
    for line in &seen.errors {
        assert!(!line.contains("unknown session"), "{line}");
    }
    assert!(
        !d.agent.join("agentstate.db").exists(),
        "an agent created a durable tier"
    );
    let logs = d.daemon_logs();
    assert!(!logs.contains("spill daemon stopped:"), "{logs}");
    // Every acknowledged durable append is in the durable tier with its seq and content, and
    // each content is there once; every session's history is gapless.
    for sid in &sids {
        let rows = sqlite_messages(&d.db(), sid);
        let seqs: Vec<i64> = rows.iter().map(|(seq, _)| *seq).collect();
        assert_eq!(seqs, (1..=rows.len() as i64).collect::<Vec<_>>(), "{sid}");
        let mut contents = std::collections::BTreeSet::new();
        for (_, element) in &rows {
            let v: serde_json::Value = serde_json::from_str(element).unwrap();
            let content = v["content"].as_str().unwrap().to_string();
            assert!(
                content == "first" || contents.insert(content.clone()),
                "{content} twice in {sid}"
            );
        }
    }
    for ((sid, seq), content) in &seen.acked {
        let rows = sqlite_messages(&d.db(), sid);
        let element = &rows
            .get(*seq as usize - 1)
            .unwrap_or_else(|| panic!("acknowledged seq {seq} of {sid} is not durable"))
            .1;
        assert!(
            element.contains(&format!(r#""content":"{content}""#)),
            "seq {seq} of {sid}: acknowledged {content}, durable {element}"
        );
    }
    eprintln!(
        "{} durable appends acknowledged through {} rounds; {} agent errors on the way",
        seen.acked.len(),
        scale.rounds,
        seen.errors.len()
    );
}

/// The CI-sized run.
#[test]
fn agents_writing_through_redis_losses_lose_no_durable_write_and_every_session_comes_back() {
    run_through_losses(Scale {
        sessions: 8,
        writers: 4,
        rounds: 1,
        between: Duration::from_secs(2),
    });
}

/// The soak: `AGENTSTATE_SOAK_SECS` seconds (default 300) of rounds, 50 sessions, 8 writers.
#[test]
#[ignore = "a soak of minutes: run it with --ignored (see the module doc)"]
fn soak() {
    let secs: u64 = std::env::var("AGENTSTATE_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let between = Duration::from_secs(5);
    run_through_losses(Scale {
        sessions: 50,
        writers: 8,
        rounds: (secs / (3 * between.as_secs())).max(1) as usize,
        between,
    });
}

/// Session ids covering every partition, `per` in each.
fn ids_in_every_partition(keys: &Keys, per: usize) -> Vec<String> {
    let mut count = vec![0; keys.partitions() as usize];
    let mut ids = Vec::new();
    for i in 0.. {
        let id = format!("k{i}");
        let p = keys.partition(&id) as usize;
        if count[p] < per {
            count[p] += 1;
            ids.push(id);
        }
        if count.iter().all(|&c| c == per) {
            return ids;
        }
    }
    unreachable!()
}

/// `spill --once` after every daemon was SIGKILLed with entries still to commit: it waits for
/// their leases to lapse (their heartbeats still count as members meanwhile) and drains every
/// partition, exit 0. A partition a live daemon holds without committing is named, exit 1.
#[test]
fn spill_once_after_killed_daemons_drains_every_partition_or_names_the_rest() {
    let mut d = Deployment::new();
    for _ in 0..4 {
        d.start_daemon(2000);
    }
    d.wait_until_checked();
    let agent = d.agent();
    let ids = ids_in_every_partition(&d.keys, 2);
    for id in &ids {
        assert_eq!(agent.run(&["session", "create", "--id", id]).code, 0);
    }
    // The four share the partitions before they die.
    let mut c = d.server.connection();
    wait_until_blocking("the four daemons share the partitions", HANG, || {
        let owners: std::collections::BTreeSet<String> = (0..d.keys.partitions())
            .filter_map(|p| {
                let v: Option<String> = redis::cmd("GET")
                    .arg(d.keys.lease(p))
                    .query(&mut c)
                    .unwrap();
                v.map(|v| v.split(' ').next().unwrap().to_string())
            })
            .collect();
        if owners.len() == 4 {
            return Ok(());
        }
        Err(format!("owners {owners:?}\n{}", d.daemon_logs()))
    });
    for i in 0..4 {
        d.kill_daemon(i);
    }
    for id in &ids {
        let out = agent.run(&["msg", "append", id, "--role", "user", "--content", "after"]);
        assert_eq!(out.code, 0, "{out:?}");
    }
    let once = || {
        cli_output(
            command_in(&d.server.url(), &d.durable)
                .args(["spill", "--once", "--lease-ms", "2000"])
                .output()
                .unwrap(),
        )
    };
    let out = once();
    assert_eq!(out.code, 0, "{out:?}");
    let report: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(report["partitions"], 16, "{out:?}");
    for id in &ids {
        let rows = sqlite_messages(&d.db(), id);
        assert_eq!(rows.len(), 1, "{id}: {rows:?}");
    }

    // A live holder that commits nothing: named, with its partition, and exit 1.
    let p = d.keys.partition(&ids[0]);
    let stop = Arc::new(AtomicBool::new(false));
    let holder = {
        let (stop, url, lease) = (stop.clone(), d.server.url(), d.keys.lease(p));
        std::thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            while !stop.load(Ordering::Relaxed) {
                let _: () = redis::cmd("SET")
                    .arg(&lease)
                    .arg("stuck-1 999")
                    .arg("PX")
                    .arg(1000)
                    .query(&mut c)
                    .unwrap();
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let out = agent.run(&[
        "msg",
        "append",
        &ids[0],
        "--role",
        "user",
        "--content",
        "held",
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    let out = once();
    let line = out.runtime_error();
    assert!(
        line.contains(&format!("partitions {p} (held by stuck-1)")),
        "{out:?}"
    );
    stop.store(true, Ordering::Relaxed);
    holder.join().unwrap();
    // Once the holder is gone, its lease lapses and the next drain takes the partition.
    let out = once();
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(sqlite_messages(&d.db(), &ids[0]).len(), 2);
}
