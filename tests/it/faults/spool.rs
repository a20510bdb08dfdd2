//! The spool through a durable-tier outage, with the real binary: SQLite's write lock held by
//! another connection (`BEGIN EXCLUSIVE`) while eight writers append to sixteen sessions on a
//! Redis of `maxmemory 48mb` with `noeviction`. The daemon moves the wal into its spool once
//! the tier has failed for 2 s and trims Redis below what the spool committed; every append
//! is acknowledged, the published ids never run ahead of SQLite, Redis is never trimmed past
//! what SQLite or the spool holds, and once the lock is gone every acknowledged append is in
//! SQLite exactly once. Also with the daemon killed (`kill -9`) while it spools and started
//! again on the same spool, with Redis emptied (FLUSHALL) while it spools, and with a spool
//! that cannot be written (typed `Backpressure` once Redis is full, nothing lost).
//!
//! The default runs hold the lock 12 s; the soak holds it 90 s
//! (`cargo test --locked --test it faults::spool::soak -- --ignored`).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentstate::*;

use super::sqlite_lock::{all_committed, disagreements, writers, Acked, SESSIONS};
use crate::support::*;

/// Each writer's pause between appends: about 2,000 appends a second in all, as in the
/// report this reproduces.
const PAUSE: Duration = Duration::from_millis(4);

/// What happens while the daemon spools.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum During {
    /// Nothing: the lock is released and the spool replayed.
    Nothing,
    /// The daemon is killed with SIGKILL and started again on the same spool.
    Kill,
    /// Redis loses its data once the spool holds every acknowledged append (the writers
    /// stop first): the sessions come back from the durable tier, which the spool is
    /// replayed into before the partition opens to the new Redis.
    FlushAll,
}

/// The daemon's process on `db` with its log in `log` (appended to).
fn daemon(t: &TestEnv, db: &Path, log: &Path) -> Daemon {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    spill_daemon(t, db, &[], false, Stdio::from(log))
}

/// The flow: see the module. `hold`: how long SQLite stays locked.
async fn writers_through_an_outage(hold: Duration, during: During) {
    let t = env().await;
    let _: () = t.cmd(&["CONFIG", "SET", "maxmemory", "48mb"]);
    let _: () = t.cmd(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    let db = t.db();
    keep_ledger(&t);
    let sids = sessions(&t.store, SESSIONS).await;
    t.unbind();
    let log = std::env::var("DEBUG_SPOOL_LOG")
        .map_or_else(|_| t.server.path("daemon.log"), std::path::PathBuf::from);
    let mut running = daemon(&t, &db, &log);
    let (stop, acked): (_, Acked) = (Arc::new(AtomicBool::new(false)), Acked::default());
    let mut tasks = writers(&t, &sids, &stop, &acked, PAUSE);
    let partitions: BTreeSet<u32> = sids.iter().map(|s| t.store.keys().partition(s)).collect();
    wait_until("every partition committed once", HANG, || {
        let held = super::sqlite_lock::sqlite_cursors(&db);
        partitions.iter().all(|p| held.contains_key(p))
    })
    .await;
    let locker = rusqlite::Connection::open(&db).unwrap();
    locker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    // A user value and a memory item written during the outage: the wal carries references
    // only, so the spool keeps what they point at.
    let fact = NewMemoryItem {
        value: serde_json::json!({"fact": "spooled"})
            .as_object()
            .unwrap()
            .clone(),
        ..NewMemoryItem::default()
    };
    t.store
        .put_memory(&["users", "spool"], "fact", &fact)
        .await
        .unwrap();
    t.store
        .set_user_value("spool", "tz", &serde_json::json!("UTC"))
        .await
        .unwrap();
    let until = Instant::now() + hold;
    let (mut seen, mut spooled) = (Vec::new(), BTreeSet::new());
    let mut done = false;
    while Instant::now() < until || (!done && during != During::Nothing) {
        let (disagreed, marked) = disagreements(&t, &db);
        seen.extend(disagreed);
        spooled.extend(marked);
        if !done && !spooled.is_empty() {
            done = true;
            match during {
                During::Nothing => {}
                During::Kill => {
                    // SIGKILL: no drain, no release; the next process takes the spool's
                    // partitions once the leases lapse.
                    running.0.kill().unwrap();
                    running.0.wait().unwrap();
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    running = daemon(&t, &db, &log);
                }
                During::FlushAll => {
                    stop.store(true, Ordering::Relaxed);
                    for task in tasks.drain(..) {
                        task.await.unwrap();
                    }
                    // A loss takes what only Redis holds (the write-behind window): wait
                    // until the spool holds everything, each wal trimmed to the entry it
                    // keeps at its floor.
                    wait_until("every wal spooled", HANG, || {
                        (0..t.store.keys().partitions())
                            .all(|p| t.xlen(&t.store.keys().wal(p)) <= 1)
                    })
                    .await;
                    let _: () = t.cmd(&["FLUSHALL"]);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    locker.execute_batch("ROLLBACK").unwrap();
    drop(locker);
    if during != During::FlushAll {
        // Writers go on while the daemon replays.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    let total: usize = acked.values().map(Vec::len).sum();
    all_committed(&t, &sids, total).await;
    seen.extend(disagreements(&t, &db).0);
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(
        !spooled.is_empty(),
        "the daemon spooled during the outage: {log_text}"
    );
    assert_eq!(
        seen,
        Vec::<String>::new(),
        "published only what SQLite holds, trimmed only what SQLite or the spool holds"
    );
    for sid in &sids {
        let mut want = acked.get(sid).cloned().unwrap_or_default();
        want.sort_unstable();
        let held: Vec<u64> = ledger_seqs(&t, sid).into_iter().map(|s| s as u64).collect();
        assert_eq!(held, want, "{sid}: every acknowledged append, once");
        if during == During::FlushAll {
            // The session comes back from the durable tier, which holds the spool now.
            let live: Vec<u64> = seqs(&t.store.messages(sid, MessageQuery::all()).await.unwrap());
            assert_eq!(live, want, "{sid}: restored whole after the loss");
        }
    }
    assert_eq!(replays(&t), Vec::new(), "no entry applied twice");
    wait_until("the user value and the memory item committed", HANG, || {
        let rows = t.durable_rows(
            "SELECT value FROM user_values WHERE user_id = ?1 UNION ALL
             SELECT record FROM memory_items WHERE namespace = 'users.spool'",
            "spool",
        );
        (rows.len() == 2).then_some(()).ok_or(format!("{rows:?}"))
    })
    .await;
    let item = t
        .store
        .get_memory(&["users", "spool"], "fact", false)
        .await
        .unwrap();
    assert_eq!(item.map(|i| i.value), Some(fact.value), "back in Redis");
    assert_eq!(
        t.store.user_value("spool", "tz").await.unwrap(),
        Some(serde_json::json!("UTC"))
    );
    // Once replayed the spool holds nothing and no partition is marked.
    wait_until("the spool drained", HANG, || {
        (0..t.store.keys().partitions()).all(|p| {
            let mark = t.hash(&t.store.keys().committed(p));
            mark.get("spool").is_none_or(String::is_empty)
        })
    })
    .await;
    running.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_locked_under_eight_writers_on_a_48mb_redis_acknowledges_and_commits_everything_once(
) {
    writers_through_an_outage(Duration::from_secs(12), During::Nothing).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_killed_while_it_spools_and_started_again_on_its_spool_loses_nothing() {
    writers_through_an_outage(Duration::from_secs(12), During::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_emptied_while_the_daemon_spools_gets_every_session_back_from_the_tier_and_spool() {
    writers_through_an_outage(Duration::from_secs(12), During::FlushAll).await;
}

/// The report's outage: SQLite locked 90 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "90 s: cargo test --locked --test it faults::spool::soak -- --ignored"]
async fn soak() {
    writers_through_an_outage(Duration::from_secs(90), During::Nothing).await;
}

/// A tmpfs of `size` mounted on `dir` for as long as it lives (unmounted lazily on drop);
/// `None` where this machine does not let the test mount one (it needs root).
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn mount(dir: &Path, size: &str) -> Option<SmallDisk> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| SmallDisk(dir.to_path_buf()))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// The spool on a disk too small for the outage, SQLite locked, Redis near `maxmemory`: the
/// spool stops taking entries, nothing more is trimmed, Redis fills, and writes fail at once
/// with the typed `Backpressure` (nothing written for them); once SQLite is free again every
/// acknowledged append is in it exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spool_whose_disk_is_full_leads_to_backpressure_and_loses_nothing() {
    let t = env().await;
    let spool_dir = t.server.path("spool-disk");
    let Some(_disk) = SmallDisk::mount(&spool_dir, "128k") else {
        eprintln!("skipped: this machine does not let the test mount a small tmpfs (needs root)");
        return;
    };
    let db = t.db();
    keep_ledger(&t);
    let sids = sessions(&t.store, SESSIONS).await;
    t.unbind();
    let info: String = t.cmd(&["INFO", "memory"]);
    let used: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap();
    let limit = (used + (6 << 20)).to_string();
    let _: () = t.cmd(&["CONFIG", "SET", "maxmemory", &limit]);
    let _: () = t.cmd(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    let log = t.server.path("daemon.log");
    let spool_arg = spool_dir.to_str().unwrap().to_string();
    let mut running = spill_daemon(
        &t,
        &db,
        &["--spool", &spool_arg],
        false,
        Stdio::from(std::fs::File::create(&log).unwrap()),
    );
    let partitions: BTreeSet<u32> = sids.iter().map(|s| t.store.keys().partition(s)).collect();
    wait_until("every partition committed once", HANG, || {
        let held = super::sqlite_lock::sqlite_cursors(&db);
        partitions.iter().all(|p| held.contains_key(p))
    })
    .await;
    let locker = rusqlite::Connection::open(&db).unwrap();
    locker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    // One writer appends 2 KiB messages until Redis refuses once the spool stopped taking
    // entries (a refusal before that, while the daemon still waits out the lock, is retried
    // after a pause); every acknowledged seq is kept.
    let body = "x".repeat(2048);
    let mut acked: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
    let mut seen = Vec::new();
    let spool_full = || {
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("the spool does not take entries")
    };
    let deadline = Instant::now() + HANG;
    let mut i = 0;
    let refused = loop {
        assert!(
            Instant::now() < deadline,
            "no Backpressure after the spool filled: {}",
            std::fs::read_to_string(&log).unwrap()
        );
        let sid = &sids[i % sids.len()];
        i += 1;
        match t
            .store
            .append(sid, &NewMessage::new("user").content(body.clone()))
            .await
        {
            Ok(seq) => acked.entry(sid.clone()).or_default().push(seq),
            Err(err @ Error::Backpressure { .. }) if spool_full() => break err,
            Err(Error::Backpressure { .. }) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(err) => panic!("{err:?}"),
        }
        if i % 100 == 0 {
            seen.extend(disagreements(&t, &db).0);
        }
    };
    assert!(
        refused
            .to_string()
            .starts_with("backpressure: Redis is full"),
        "{refused}"
    );
    seen.extend(disagreements(&t, &db).0);
    locker.execute_batch("ROLLBACK").unwrap();
    drop(locker);
    let total: usize = acked.values().map(Vec::len).sum();
    all_committed(&t, &sids, total).await;
    seen.extend(disagreements(&t, &db).0);
    assert_eq!(
        seen,
        Vec::<String>::new(),
        "trimmed only what SQLite or the spool holds"
    );
    for sid in &sids {
        let want = acked.get(sid).cloned().unwrap_or_default();
        let held: Vec<u64> = ledger_seqs(&t, sid).into_iter().map(|s| s as u64).collect();
        assert_eq!(held, want, "{sid}: every acknowledged append, once");
    }
    assert_eq!(replays(&t), Vec::new(), "no entry applied twice");
    running.terminate();
}
