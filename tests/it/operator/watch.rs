//! A daemon you can watch: `agentstate spill` says when it starts and stops, in
//! plain text when its log is a file, one line per event however many partitions it spans;
//! `stats` lag is how long the oldest uncommitted entry has waited, and `--watch` repeats.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use agentstate::*;
use serde_json::Value;

use crate::support::{env, on_terminal, wait_until, TestEnv, HANG};

/// Sends SIGINT to a child process (Ctrl-C).
fn interrupt(child: &std::process::Child) {
    // SAFETY: signals our own child, which has not been reaped yet.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
}

/// The `--json stats` line of partition `p`.
fn stats_of(t: &TestEnv, p: u32) -> Value {
    let out = t.cli_ok(&["--json", "stats"]);
    serde_json::from_str(out.lines().nth(p as usize).unwrap()).unwrap()
}

/// Redis' clock, milliseconds (the clock stream ids and `stats` use).
fn redis_ms(t: &TestEnv) -> u64 {
    let (secs, micros): (u64, u64) = t.cmd(&["TIME"]);
    secs * 1000 + micros / 1000
}

/// The milliseconds part of the newest entry id of stream `key`.
fn newest_entry_ms(t: &TestEnv, key: &str) -> u64 {
    let v: redis::streams::StreamRangeReply = t.cmd(&["XREVRANGE", key, "+", "-", "COUNT", "1"]);
    v.ids[0].id.split('-').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn stats_lag_is_how_long_the_oldest_uncommitted_entry_has_waited() {
    let t = env().await;
    crate::support::create(&t, "lagging", None, None).await;
    let p = t.store.keys().partition("lagging");
    let wal = t.store.keys().wal(p);
    t.flush().await;
    assert_eq!(stats_of(&t, p)["lag_ms"], 0, "nothing waits");
    let committed = newest_entry_ms(&t, &wal);
    // An idle spell (800 ms of Redis' clock), then one write: the lag counts from that
    // write — the old "newest minus last committed" would have counted the idle spell.
    wait_until("an idle spell passes", HANG, || {
        redis_ms(&t) >= committed + 800
    })
    .await;
    t.store
        .append("lagging", &NewMessage::new("user").content("after a pause"))
        .await
        .unwrap();
    let written = newest_entry_ms(&t, &wal);
    let fresh = stats_of(&t, p);
    let at = fresh["at"].as_u64().unwrap();
    assert_eq!(fresh["lag_ms"].as_u64().unwrap(), at - written, "{fresh}");
    assert!(written >= committed + 800, "the write came after the spell");
    // Nobody flushes: the lag grows with the wait, so it can be alerted on.
    wait_until("the write waits 600 ms", HANG, || {
        redis_ms(&t) >= written + 600
    })
    .await;
    let waited = stats_of(&t, p);
    let at = waited["at"].as_u64().unwrap();
    assert_eq!(waited["lag_ms"].as_u64().unwrap(), at - written, "{waited}");
    assert!(at - written >= 600, "{waited}");
    assert_eq!(waited["wal_pending"], 1);
    t.flush().await;
    assert_eq!(stats_of(&t, p)["lag_ms"], 0);
}

#[tokio::test]
async fn stats_watch_repeats_until_interrupted_and_redraws_on_a_terminal() {
    let t = env().await;
    let mut watch = t
        .cli_command()
        .args(["--json", "stats", "--watch", "--interval-ms", "50"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(watch.stdout.take().unwrap());
    let mut readings: Vec<Vec<Value>> = Vec::new();
    while readings.len() < 3 {
        let mut reading = Vec::new();
        for _ in 0..16 {
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            reading.push(serde_json::from_str::<Value>(&line).unwrap());
        }
        readings.push(reading);
    }
    interrupt(&watch);
    // Drain what it printed meanwhile, so it is never stuck writing to a full pipe.
    std::io::copy(&mut out, &mut std::io::sink()).unwrap();
    assert!(
        watch.wait().unwrap().success(),
        "Ctrl-C ends the watch with 0"
    );
    let mut last_at = 0;
    for reading in &readings {
        let parts: Vec<u64> = reading
            .iter()
            .map(|r| r["partition"].as_u64().unwrap())
            .collect();
        assert_eq!(parts, (0..16).collect::<Vec<u64>>());
        let at = reading[0]["at"].as_u64().unwrap();
        assert!(at > last_at, "each reading is a new one");
        last_at = at;
    }
    // On a terminal: the screen is cleared and the table redrawn, with a header.
    let mut on_tty = Command::new("timeout");
    on_tty
        .args(["-s", "INT", "0.8", env!("CARGO_BIN_EXE_agentstate")])
        .arg("--redis")
        .arg(t.server.url())
        .args(["stats", "--watch", "--interval-ms", "100"])
        .env_remove("AGENTSTATE_LOG");
    let screen = on_terminal(&on_tty);
    assert!(screen.matches("\x1b[H\x1b[2J").count() >= 2, "{screen:?}");
    let header = format!(
        "agentstate stats — {} every 100 ms (Ctrl-C stops)",
        t.server.url().trim_start_matches("redis://")
    );
    assert!(screen.contains(&header), "{screen:?}");
    assert!(screen.contains("PART  WAL PENDING"), "{screen:?}");
    assert!(screen.contains("\r\nall "), "a total row: {screen:?}");
}

/// Sessions until every partition holds at least one, each with a message.
async fn one_session_per_partition(t: &TestEnv) {
    let mut covered = BTreeSet::new();
    let mut i = 0;
    while covered.len() < 16 {
        let sid = format!("w{i}");
        crate::support::create(t, &sid, None, None).await;
        t.store
            .append(&sid, &NewMessage::new("user").content("x"))
            .await
            .unwrap();
        covered.insert(t.store.keys().partition(&sid));
        i += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_logs_start_and_stop_in_plain_text_and_one_line_per_event() {
    let mut t = env().await;
    one_session_per_partition(&t).await;
    t.flush().await;
    // The pass above released its leases: the daemon below finds every partition free.
    for p in 0..16 {
        let lease = t.cmd::<Option<String>>(&["GET", &t.store.keys().lease(p)]);
        assert_eq!(
            lease, None,
            "the test's own pass left partition {p}'s lease held"
        );
    }
    let log = t.server.path("daemon.log");
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_agentstate"))
        .env_remove("AGENTSTATE_LOG")
        .arg("--redis")
        .arg(t.server.url())
        .arg("--db")
        .arg(t.db())
        .args(["--json", "spill", "--interval-ms", "5", "--lease-ms", "500"])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut events = BufReader::new(daemon.stdout.take().unwrap());
    let mut first = String::new();
    events.read_line(&mut first).unwrap();
    let started: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(started["event"], "started");
    assert_eq!(started["redis"], t.server.url());
    assert_eq!(started["db"], t.db().to_str().unwrap());
    assert_eq!(
        (&started["partitions"], &started["lease_ms"]),
        (&Value::from(16), &Value::from(500))
    );
    // It has started (its start line, written after its first pass, is in the log); then
    // Redis dies and comes back empty. Waiting for the lease keys instead raced the first
    // pass: partition 15's key is set by claim_lease before the pass has finished taking
    // the partition, and a Redis killed in between made the start line say owns=0-14.
    wait_until("the daemon logs its start", HANG, || {
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("spill daemon started")
    })
    .await;
    t.lose_redis().await;
    t.wait_for_daemon().await;
    interrupt(&daemon);
    assert!(daemon.wait().unwrap().success());
    let mut last = String::new();
    events.read_line(&mut last).unwrap();
    let stopped: Value = serde_json::from_str(&last).unwrap();
    assert_eq!(
        (&stopped["event"], &stopped["owner"]),
        (&Value::from("stopped"), &started["owner"])
    );

    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        !text.contains('\x1b'),
        "colour codes in a log file:\n{text}"
    );
    let lines: Vec<&str> = text.lines().collect();
    let start = format!(
        "INFO agentstate::spill: spill daemon started redis={} db={} partitions=16 owns=0-15 lease_ms=500 owner={}",
        t.server.url(),
        t.db().display(),
        started["owner"].as_str().unwrap()
    );
    assert!(lines[0].ends_with(&start), "{text}");
    assert!(
        lines
            .last()
            .unwrap()
            .contains("INFO agentstate::spill: spill daemon stopped; leases released"),
        "{text}"
    );
    // One line per event and pass: the loss of every partition's streams is named in one
    // warning per pass that saw it, each partition once. A loss that lands in the middle of
    // a pass is seen there by the partitions after it and by the others in the next pass
    // (their lease renewal fails first), so at most two lines; no line per partition.
    let warnings: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
        .collect();
    let lost: Vec<&&str> = warnings
        .iter()
        .filter(|l| l.contains("streams were lost with Redis"))
        .collect();
    assert!((1..=2).contains(&lost.len()), "{text}");
    let mut named: Vec<u32> = lost
        .iter()
        .flat_map(|l| partitions_named(l.rsplit_once("partitions=").unwrap().1))
        .collect();
    named.sort_unstable();
    assert_eq!(named, (0..16).collect::<Vec<u32>>(), "{text}");
    // The kinds a loss can bring: leases lost, Redis unreachable, streams lost (at most twice,
    // above), passes work again; each once (`seen` below), never one per partition.
    assert!(warnings.len() <= 5, "more than one line per event:\n{text}");
    assert!(!text.contains(" partition="), "{text}");
    let mut seen = BTreeSet::new();
    for w in &warnings {
        let message = w.split_once("agentstate::spill").map_or(*w, |(_, m)| m);
        assert!(seen.insert(message.to_string()), "repeated: {w}\n{text}");
    }
}

/// The partitions a log line's `partitions=` value names: `0-15`, `1,3,5-7`.
fn partitions_named(ranges: &str) -> Vec<u32> {
    ranges
        .split(',')
        .flat_map(|r| match r.split_once('-') {
            Some((a, b)) => (a.parse().unwrap()..=b.parse().unwrap()).collect::<Vec<u32>>(),
            None => vec![r.parse().unwrap()],
        })
        .collect()
}

/// An `agentstate spill` process of `t` whose stderr goes to the file `log`.
fn daemon_logging_to(t: &TestEnv, log: &std::path::Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_agentstate"))
        .env_remove("AGENTSTATE_LOG")
        .arg("--redis")
        .arg(t.server.url())
        .arg("--db")
        .arg(t.db())
        .args(["spill", "--interval-ms", "5", "--lease-ms", "500"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

/// How many partitions each lease owner (its pid) holds.
fn lease_owners(t: &TestEnv) -> std::collections::BTreeMap<String, usize> {
    let mut owners = std::collections::BTreeMap::new();
    for p in 0..16 {
        if let Some(lease) = t.cmd::<Option<String>>(&["GET", &t.store.keys().lease(p)]) {
            let pid = lease.split('-').next().unwrap().to_string();
            *owners.entry(pid).or_default() += 1;
        }
    }
    owners
}

#[tokio::test]
async fn a_daemon_joining_is_a_routine_rebalance_and_a_lease_taken_over_says_by_whom() {
    let t = env().await;
    let (first_log, second_log) = (t.server.path("first.log"), t.server.path("second.log"));
    let read = |log: &std::path::Path| std::fs::read_to_string(log).unwrap();
    let mut first = daemon_logging_to(&t, &first_log);
    wait_until("the first daemon owns every partition", HANG, || {
        lease_owners(&t) == [(first.id().to_string(), 16)].into()
    })
    .await;
    let mut second = daemon_logging_to(&t, &second_log);
    let halves: std::collections::BTreeMap<String, usize> =
        [(first.id().to_string(), 8), (second.id().to_string(), 8)].into();
    wait_until("the two daemons own 8 partitions each", HANG, || {
        lease_owners(&t) == halves
    })
    .await;
    wait_until("the first daemon logs what it gave up", HANG, || {
        read(&first_log).contains("the partition leases")
    })
    .await;
    // A routine join is news, not trouble: one INFO line naming what was handed over.
    let text = read(&first_log);
    assert!(
        !text.contains(" WARN ") && !text.contains(" ERROR "),
        "{text}"
    );
    let released = text
        .lines()
        .find(|l| l.contains("released the partition leases"))
        .unwrap();
    assert!(released.contains(" INFO "), "{text}");
    assert!(released.contains("partitions=8-15"), "{text}");

    // The first daemon paused past its lease time: the second takes everything, and the
    // first, resumed, warns that its leases went to another daemon, naming it.
    // SAFETY: signals our own child, not reaped yet.
    unsafe { libc::kill(first.id() as libc::pid_t, libc::SIGSTOP) };
    wait_until("the second daemon owns every partition", HANG, || {
        lease_owners(&t) == [(second.id().to_string(), 16)].into()
    })
    .await;
    unsafe { libc::kill(first.id() as libc::pid_t, libc::SIGCONT) };
    wait_until("the resumed daemon warns", HANG, || {
        read(&first_log).contains("lost the partition leases")
    })
    .await;
    let text = read(&first_log);
    let lost: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("lost the partition leases"))
        .collect();
    // (A pass the pause cut in two may name its partitions on two lines.)
    for line in lost {
        assert!(line.contains(" WARN "), "{text}");
        assert!(
            line.contains("lost the partition leases to another daemon"),
            "{text}"
        );
        assert!(line.contains(&format!("owners={}-", second.id())), "{text}");
    }
    for child in [&mut first, &mut second] {
        interrupt(child);
        assert!(child.wait().unwrap().success());
    }
}
