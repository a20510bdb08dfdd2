//! PostgreSQL fencing without stalls: a daemon SIGSTOPped inside its flush transaction, with
//! its partition's cursor row locked, holds that partition for about a lease time only (the
//! server ends its session), its successor flushes the partition, and when the old owner
//! wakes every entry is in PostgreSQL exactly once, with cursors and tokens that never went
//! back.

use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentstate::*;

use crate::durability::daemon::sessions_over_partitions;
use crate::support::{env_on, wait_until, Backend, Durable, TestEnv, HANG};
use crate::support::{keep_ledger, ledger_seqs, replays, spill_process};

/// The daemons' lease time, ms.
const LEASE_MS: u64 = 1000;

/// An `agentstate spill` process, killed when the test ends however it ends (a failing
/// test leaves no stopped daemon behind).
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `agentstate spill` with a short lease.
fn daemon(t: &TestEnv) -> Daemon {
    let lease = LEASE_MS.to_string();
    Daemon(
        spill_process(t, &["spill", "--interval-ms", "5", "--lease-ms", &lease])
            .spawn()
            .unwrap(),
    )
}

fn signal(daemon: &Daemon, sig: libc::c_int) {
    assert_eq!(unsafe { libc::kill(daemon.0.id() as libc::pid_t, sig) }, 0);
}

/// A connection of the test's own to its database, for pg_stat_activity and the cursors.
async fn watcher(t: &TestEnv) -> tokio_postgres::Client {
    let Durable::Postgres(pg) = &t.durable else {
        unreachable!("a PostgreSQL test env")
    };
    let (client, conn) = tokio_postgres::connect(&pg.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
}

/// Records every update of a cursor row in `test_cursor_log`, in the order the row lock
/// serialised them.
fn log_cursor_updates(t: &TestEnv) {
    let Durable::Postgres(pg) = &t.durable else {
        unreachable!("a PostgreSQL test env")
    };
    pg.rows(
        "CREATE TABLE test_cursor_log (n BIGSERIAL PRIMARY KEY, partition BIGINT NOT NULL,
             wal TEXT NOT NULL, decisions TEXT NOT NULL, token BIGINT NOT NULL);
         CREATE FUNCTION test_cursor_log() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN INSERT INTO test_cursor_log (partition, wal, decisions, token)
                 VALUES (NEW.partition, NEW.wal, NEW.decisions, NEW.token);
             RETURN NULL; END $$;
         CREATE TRIGGER test_cursor_log AFTER UPDATE ON cursors
             FOR EACH ROW EXECUTE FUNCTION test_cursor_log();",
    );
}

/// A cursor row's wal and decisions ids (as [`stream_id`]s) and its token.
type Cursors = ((u64, u64), (u64, u64), i64);

/// A stream id as a number pair, to compare.
fn stream_id(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').unwrap();
    (ms.parse().unwrap(), seq.parse().unwrap())
}

/// Where `daemon`'s backend sits idle inside a transaction that holds a cursor row locked
/// (the row's xmax is its transaction): `(partition, backend pid, xid)`.
async fn inside_transaction(
    pg: &tokio_postgres::Client,
    daemon: &Daemon,
) -> Option<(i64, i32, String)> {
    let app = format!("agentstate (pid {})", daemon.0.id());
    let row = pg
        .query_opt(
            "SELECT c.partition, a.pid, a.backend_xid::text
             FROM cursors c JOIN pg_stat_activity a ON a.backend_xid = c.xmax
             WHERE a.application_name = $1 AND a.state = 'idle in transaction'",
            &[&app],
        )
        .await
        .unwrap()?;
    Some((row.get(0), row.get(1), row.get(2)))
}

/// Appends to every session in turn until `stop`; returns how many each got (all
/// acknowledged).
fn writer(
    t: &TestEnv,
    sids: &[String],
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Vec<i64>> {
    let s = t.store.clone();
    let sids = sids.to_vec();
    tokio::spawn(async move {
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            for sid in &sids {
                s.append(sid, &NewMessage::new("user").content(format!("{n}")))
                    .await
                    .unwrap();
            }
            n += 1;
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        vec![n; sids.len()]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_paused_inside_its_transaction_holds_its_partition_about_a_lease_time() {
    let t = env_on(Backend::Postgres).await;
    keep_ledger(&t);
    log_cursor_updates(&t);
    let sids = sessions_over_partitions(&t, 16).await;
    let (mut old, mut successor) = (daemon(&t), daemon(&t));
    let stop = Arc::new(AtomicBool::new(false));
    let writing = writer(&t, &sids, stop.clone());
    let pg = watcher(&t).await;

    // Catch the old owner between two statements of a flush transaction: stop it, and keep
    // it stopped only when its backend is still in that transaction with the row locked.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (partition, backend, old_token, paused_at) = loop {
        assert!(
            Instant::now() < deadline,
            "never caught inside a transaction"
        );
        let Some(seen) = inside_transaction(&pg, &old).await else {
            tokio::time::sleep(Duration::from_millis(1)).await;
            continue;
        };
        let at = Instant::now();
        signal(&old, libc::SIGSTOP);
        // Its lease on that partition (it renewed it less than a lease time ago).
        let lease: Option<String> = t.cmd(&["GET", &t.store.keys().lease(seen.0 as u32)]);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let held = lease.and_then(|v| {
            let (owner, token) = v.split_once(' ')?;
            owner
                .starts_with(&format!("{}-", old.0.id()))
                .then(|| token.parse::<i64>().unwrap())
        });
        if let Some(token) = held {
            if inside_transaction(&pg, &old).await.as_ref() == Some(&seen) {
                break (seen.0, seen.1, token, at);
            }
        }
        signal(&old, libc::SIGCONT);
    };
    let p = partition as u32;

    // The successor flushes that partition: a commit with a higher token.
    let flushed = loop {
        let row = pg
            .query_one(
                "SELECT token FROM cursors WHERE partition = $1",
                &[&partition],
            )
            .await
            .unwrap();
        if row.get::<_, i64>(0) > old_token {
            break paused_at.elapsed();
        }
        assert!(
            paused_at.elapsed() < Duration::from_millis(10 * LEASE_MS),
            "partition {p} not flushed {:?} after its owner paused inside its transaction",
            paused_at.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    eprintln!(
        "partition {p}: flushed by the successor {:.0} ms ({:.2} lease times) after its owner paused",
        flushed.as_secs_f64() * 1000.0,
        flushed.as_secs_f64() * 1000.0 / LEASE_MS as f64
    );
    // The server ended the paused owner's session (its transaction rolled back).
    let alive = pg
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = $1",
            &[&backend],
        )
        .await
        .unwrap();
    assert_eq!(
        alive.get::<_, i64>(0),
        0,
        "the paused owner's backend lives on"
    );

    // The old owner wakes up; the agents stop; both daemons drain.
    signal(&old, libc::SIGCONT);
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    let counts = writing.await.unwrap();
    for (sid, n) in sids.iter().zip(&counts) {
        wait_until(
            &format!("{n} messages of {sid} in PostgreSQL"),
            HANG,
            || t.durable_ints("SELECT count(*) FROM messages WHERE session_id = ?1", sid)[0] == *n,
        )
        .await;
    }
    for d in [&mut old, &mut successor] {
        signal(d, libc::SIGTERM);
        assert!(d.0.wait().unwrap().success());
    }

    // Exactly once: every acknowledged message, none applied twice.
    assert_eq!(replays(&t), vec![], "entries applied more than once");
    for (sid, n) in sids.iter().zip(&counts) {
        assert_eq!(ledger_seqs(&t, sid), (1..=*n).collect::<Vec<_>>(), "{sid}");
    }
    // Every partition's cursors and token only went forward, commit after commit: nothing
    // was committed with the old token after the successor's.
    let log = t.durable_rows(
        "SELECT partition, wal, decisions, token FROM test_cursor_log ORDER BY n",
        "",
    );
    let mut last = std::collections::HashMap::<String, Cursors>::new();
    for row in &log {
        let now = (
            stream_id(&row[1]),
            stream_id(&row[2]),
            row[3].parse().unwrap(),
        );
        if let Some(before) = last.insert(row[0].clone(), now) {
            assert!(
                now.0 >= before.0 && now.1 >= before.1 && now.2 >= before.2,
                "partition {}: cursors went from {before:?} to {now:?}",
                row[0]
            );
        }
    }
    let tokens: Vec<i64> = log
        .iter()
        .filter(|r| r[0] == partition.to_string())
        .map(|r| r[3].parse().unwrap())
        .collect();
    assert!(
        tokens.iter().any(|t| *t > old_token),
        "partition {p}: tokens {tokens:?}, the old owner's {old_token}"
    );
}
