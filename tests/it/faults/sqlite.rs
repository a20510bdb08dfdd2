//! SQLite faults under the spill daemon, through the real binary: a read-only directory, a
//! full filesystem, the file removed or corrupt, another writer holding the file. The daemon
//! stops or retries with a clear error, and never trims from Redis what SQLite did not
//! commit: every message lands once the fault is gone.
//!
//! The read-only directory and the full filesystem are real mounts (a tmpfs with `size=`, a
//! read-only bind mount): these tests need root and `mount`; where the machine forbids a
//! mount they say `SKIPPED <test>: <why>` on stderr (not captured), and any other failure to
//! set up the fault fails the test. A directory turning read-only under a running daemon is not tested:
//! Linux refuses a read-only remount while the daemon holds the files open for writing, and
//! a permission change does not affect descriptors already open (root ignores permissions
//! anyway), so the case that happens is a read-only volume at start. A file corrupted under
//! a running daemon is likewise tested at its restart (SQLite may serve cached pages until
//! then).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use agentstate::*;

use crate::support::Daemon;
use crate::support::{env, wait_until_blocking, TestEnv, HANG};

/// A mount point that is unmounted (lazily) when dropped.
struct Mount {
    point: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.point).status();
    }
}

/// Mounts with `mount <args> <point>`. A refusal because the machine forbids mounting (not
/// root, or a container without the capability) skips the test visibly: one `SKIPPED` line
/// on the real stderr, which the test harness does not capture. Any other failure to set
/// up the fault fails the test with the reason: a fault test never passes without its fault.
fn mount(args: &[&str], point: &Path) -> bool {
    let what = format!("mount {} {}", args.join(" "), point.display());
    let out = match Command::new("mount").args(args).arg(point).output() {
        Ok(out) => out,
        Err(e) => return skip(&format!("cannot run `{what}`: {e}")),
    };
    if out.status.success() {
        return true;
    }
    let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
    let forbidden = [
        "superuser",
        "permission denied",
        "not permitted",
        "only root",
    ]
    .iter()
    .any(|w| why.to_lowercase().contains(w));
    assert!(
        forbidden,
        "`{what}` failed, so the fault cannot be set up: {why}"
    );
    skip(&format!("`{what}` refused: {why}"))
}

/// Reports the current test as skipped on the process' real stderr (seen with or without
/// `--nocapture`) and returns false.
fn skip(reason: &str) -> bool {
    use std::io::Write;
    let test = std::thread::current().name().unwrap_or("?").to_string();
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test}: the machine forbids its fault ({reason}); run as root to test it"
    );
    false
}

/// A fresh tmpfs of `size` (e.g. `"2m"`), or `None` (with the reason printed) without root.
fn tmpfs(size: &str) -> Option<Mount> {
    let dir = tempfile::tempdir().unwrap();
    let point = dir.path().join("fs");
    std::fs::create_dir(&point).unwrap();
    let opts = format!("size={size}");
    mount(&["-t", "tmpfs", "-o", &opts, "tmpfs"], &point).then_some(Mount { point, _dir: dir })
}

/// A read-only view of `source` (bind mount, then remounted read-only).
fn read_only_view(source: &Path) -> Option<Mount> {
    let dir = tempfile::tempdir().unwrap();
    let point = dir.path().join("ro");
    std::fs::create_dir(&point).unwrap();
    let src = source.to_str().unwrap();
    if !mount(&["--bind", src], &point) {
        return None;
    }
    let m = Mount { point, _dir: dir };
    mount(&["-o", "remount,bind,ro", src], &m.point).then_some(m)
}

/// `agentstate spill` on the test's Redis and the SQLite file `db`, stderr into `log`. The
/// namespace moves to `db` (these faults are of one file; the binding has its own tests).
fn daemon(t: &TestEnv, db: &Path, log: &Path) -> Daemon {
    t.unbind();
    let log = std::fs::File::create(log).unwrap();
    crate::support::spill_daemon(t, db, &[], false, Stdio::from(log))
}

/// `agentstate spill --once` on `db`: exit code and stderr (the namespace moved to `db`).
fn spill_once(t: &TestEnv, db: &Path) -> crate::support::CliOutput {
    t.unbind();
    let out = Command::new(env!("CARGO_BIN_EXE_agentstate"))
        .env_remove("AGENTSTATE_LOG")
        .arg("--redis")
        .arg(t.server.url())
        .arg("--db")
        .arg(db)
        .args(["spill", "--once"])
        .output()
        .unwrap();
    crate::support::cli_output(out)
}

fn stop(mut daemon: Daemon) {
    daemon.terminate();
}

/// The seqs SQLite at `db` holds for `sid` (none while the file or its schema is missing).
fn sqlite_seqs(db: &Path, sid: &str) -> Vec<i64> {
    let Ok(conn) =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    else {
        return Vec::new();
    };
    let Ok(mut stmt) = conn.prepare("SELECT seq FROM messages WHERE session_id = ?1 ORDER BY seq")
    else {
        return Vec::new();
    };
    stmt.query_map([sid], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

/// Appends `n` messages of `size` bytes to `sid`.
async fn append(t: &TestEnv, sid: &str, n: usize, size: usize) {
    let text = "x".repeat(size);
    for _ in 0..n {
        let m = NewMessage::new("user").content(text.clone());
        t.store.append(sid, &m).await.unwrap();
    }
}

/// The wal entries of `sid`'s partition still in Redis.
fn wal_len(t: &TestEnv, sid: &str) -> usize {
    t.xlen(&t.store.keys().wal(t.store.keys().partition(sid)))
}

/// The wal id SQLite committed for `sid`'s partition, as published in Redis.
fn committed(t: &TestEnv, sid: &str) -> Option<String> {
    let p = t.store.keys().partition(sid);
    t.cmd(&["HGET", &t.store.keys().committed(p), "wal"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_in_a_read_only_directory_is_refused_at_start_with_a_clear_error() {
    let t = env().await;
    let Some(fs) = tmpfs("4m") else { return };
    // An existing database (made writable, then its directory turned read-only) and a file
    // that does not exist yet.
    let existing = fs.point.join("agentstate.db");
    assert_eq!(spill_once(&t, &existing).code, 0);
    let Some(ro) = read_only_view(&fs.point) else {
        return;
    };
    crate::support::create(&t, "ro", None, None).await;
    append(&t, "ro", 3, 10).await;
    let before = wal_len(&t, "ro");
    for db in [ro.point.join("agentstate.db"), ro.point.join("new.db")] {
        let out = spill_once(&t, &db);
        let line = out.runtime_error();
        assert!(
            line.contains(&format!("SQLite file {}", db.display())),
            "{line}"
        );
        assert!(
            line.contains("readonly") || line.contains("unable to open"),
            "{line}"
        );
        assert!(line.contains("writable"), "says what to check: {line}");
    }
    assert_eq!(wal_len(&t, "ro"), before, "nothing trimmed");
    assert_eq!(sqlite_seqs(&existing, "ro").len(), 0);
    let out = spill_once(&t, &existing);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(sqlite_seqs(&existing, "ro").len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_filesystem_stops_commits_trims_nothing_uncommitted_and_catches_up_when_freed() {
    let t = env().await;
    let Some(fs) = tmpfs("3m") else { return };
    let db = fs.point.join("agentstate.db");
    let log = t.server.path("daemon.log");
    let d = daemon(&t, &db, &log);
    crate::support::create(&t, "full", None, None).await;
    append(&t, "full", 5, 100).await;
    wait_until_blocking("the first messages committed", HANG, || {
        sqlite_seqs(&db, "full").len() == 5
    });
    // The daemon publishes what it committed just after the commit: wait for the id of the
    // last wal entry (the fifth append) to be the published one.
    let wal = t.store.keys().wal(t.store.keys().partition("full"));
    let newest: Vec<(String, Vec<(String, String)>)> =
        t.cmd(&["XREVRANGE", &wal, "+", "-", "COUNT", "1"]);
    wait_until_blocking("the commit published", HANG, || {
        committed(&t, "full").as_deref() == Some(newest[0].0.as_str())
    });
    let last_good = committed(&t, "full");
    // Fill the filesystem to the last byte.
    let filler = fs.point.join("filler");
    let _ = std::fs::write(&filler, vec![0u8; 4 << 20]);
    append(&t, "full", 200, 4000).await;
    wait_until_blocking("the daemon reports the full disk", HANG, || {
        std::fs::read_to_string(&log).unwrap().contains("full")
    });
    // The daemon goes on with its passes (it renewed the partition's lease twice since,
    // each renewal a pass that retries the flush), and still commits nothing.
    let lease = t.store.keys().lease(t.store.keys().partition("full"));
    let (mut last, mut renewals) = (i64::MAX, 0);
    wait_until_blocking("two more passes of the daemon", HANG, || {
        let left: i64 = t.cmd(&["PTTL", &lease]);
        renewals += usize::from(left > last);
        last = left;
        renewals >= 2
    });
    assert_eq!(committed(&t, "full"), last_good, "nothing more committed");
    assert!(
        wal_len(&t, "full") >= 200,
        "the uncommitted entries stay in Redis"
    );
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(log_text.contains("database or disk is full"), "{log_text}");
    // Space again: the daemon catches up on its own, every message exactly once.
    std::fs::remove_file(&filler).unwrap();
    wait_until_blocking("the backlog committed", HANG, || {
        sqlite_seqs(&db, "full").len() == 205
    });
    assert_eq!(sqlite_seqs(&db, "full"), (1..=205).collect::<Vec<_>>());
    wait_until_blocking("the wal trimmed", HANG, || wal_len(&t, "full") == 1);
    stop(d);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_removed_under_the_daemon_stops_it_and_redis_keeps_the_backlog() {
    let t = env().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agentstate.db");
    let log = t.server.path("daemon.log");
    let mut d = daemon(&t, &db, &log);
    crate::support::create(&t, "gone", None, None).await;
    append(&t, "gone", 5, 10).await;
    wait_until_blocking("committed", HANG, || sqlite_seqs(&db, "gone").len() == 5);
    let last_good = committed(&t, "gone");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    append(&t, "gone", 10, 10).await;
    // The daemon stops by itself with exit 1 and one error line naming the file.
    let status = wait_until_blocking("the daemon stops", Duration::from_secs(10), || {
        d.0.try_wait().unwrap()
    });
    assert_eq!(status.code(), Some(1));
    let text = std::fs::read_to_string(&log).unwrap();
    let error = text.lines().last().unwrap();
    assert_eq!(
        error,
        format!("error: sqlite file {} was removed while the daemon ran — the daemon stopped and committed nothing more; Redis still holds every entry SQLite has not committed (the streams are trimmed only below the last commit). Put the original file back (or restore it from a backup) and start `agentstate spill` again", db.display())
    );
    assert_eq!(committed(&t, "gone"), last_good);
    assert_eq!(
        wal_len(&t, "gone"),
        11,
        "the last committed entry and the 10 new ones"
    );
    assert!(!db.exists(), "no ghost file was created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_database_is_refused_at_start_and_nothing_is_trimmed() {
    let t = env().await;
    crate::support::create(&t, "bad", None, None).await;
    append(&t, "bad", 3, 10).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agentstate.db");
    assert_eq!(spill_once(&t, &db).code, 0);
    append(&t, "bad", 4, 10).await;
    let before = wal_len(&t, "bad");
    // Garbage over the header and the first pages.
    let mut bytes = std::fs::read(&db).unwrap();
    for b in bytes.iter_mut().take(8192) {
        *b = 0x5a;
    }
    std::fs::write(&db, bytes).unwrap();
    let out = spill_once(&t, &db);
    let line = out.runtime_error();
    assert!(
        line.starts_with(&format!("error: sqlite file {} is corrupt", db.display())),
        "{line}"
    );
    assert!(line.contains("restore it from a backup"), "{line}");
    assert_eq!(wal_len(&t, "bad"), before, "nothing trimmed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_writer_holding_the_file_delays_commits_and_a_second_daemon_stands_by() {
    let t = env().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agentstate.db");
    let (log1, log2) = (t.server.path("d1.log"), t.server.path("d2.log"));
    let d1 = daemon(&t, &db, &log1);
    crate::support::create(&t, "two", None, None).await;
    append(&t, "two", 5, 10).await;
    wait_until_blocking("committed", HANG, || sqlite_seqs(&db, "two").len() == 5);
    // A second daemon on the same file: a standby (the lease holder writes).
    let d2 = daemon(&t, &db, &log2);
    // Another writer takes SQLite's write lock and holds it past the daemon's busy timeout.
    let locker = rusqlite::Connection::open(&db).unwrap();
    locker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let last_good = committed(&t, "two");
    append(&t, "two", 20, 10).await;
    wait_until_blocking("the daemon reports the lock", HANG, || {
        std::fs::read_to_string(&log1)
            .unwrap()
            .contains("database is locked")
            || std::fs::read_to_string(&log2)
                .unwrap()
                .contains("database is locked")
    });
    assert_eq!(committed(&t, "two"), last_good);
    assert!(wal_len(&t, "two") >= 20, "nothing uncommitted trimmed");
    locker.execute_batch("COMMIT").unwrap();
    drop(locker);
    wait_until_blocking("the backlog committed", HANG, || {
        sqlite_seqs(&db, "two").len() == 25
    });
    assert_eq!(
        sqlite_seqs(&db, "two"),
        (1..=25).collect::<Vec<_>>(),
        "each message once"
    );
    stop(d1);
    stop(d2);
}
