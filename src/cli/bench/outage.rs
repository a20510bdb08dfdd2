//! W10 through a long durable-tier outage: writers append at a steady rate while the tier is
//! down (SQLite: another connection holds its write lock; PostgreSQL: the daemon's
//! connections go through a relay this process cuts, as a network partition would), so the
//! daemon spools; then the tier comes back and the spool is replayed. Reports the spool's
//! size at the end of the outage, what Redis held, and the replay rate.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::live::random_content;
use crate::durable::{postgres, Location};
use crate::spill::inspect;
use crate::{Error, NewMessage, NewSession, Result, SpillConfig, SpillDaemon, Store};

/// Sessions the writers share out.
const SESSIONS: usize = 16;

/// Writers, each appending its share of the rate.
const WRITERS: usize = 8;

/// What W10 measured.
#[derive(Debug, Clone, Serialize)]
pub struct W10Report {
    /// `sqlite` or `postgres`.
    pub tier: &'static str,
    /// Appends a second the writers aimed at.
    pub rate: u64,
    /// How long the tier was down, seconds.
    pub outage_secs: f64,
    /// Appends acknowledged during the outage.
    pub appended: u64,
    /// Appends refused during the outage (`Backpressure` and others).
    pub refused: u64,
    /// wal entries in the spool at the end of the outage.
    pub spool_entries: u64,
    /// Its size on disk then, bytes.
    pub spool_bytes: u64,
    /// wal entries still in Redis then, not committed nor spooled.
    pub wal_pending: u64,
    /// Redis `used_memory` then, bytes.
    pub used_memory: u64,
    /// From the tier's return to the spool replayed and the wal drained, seconds.
    pub replay_secs: f64,
    /// Spooled entries replayed a second.
    pub replay_per_sec: f64,
}

/// W10 on `store` (the only client of its Redis): a daemon on `db` (a SQLite file or a
/// PostgreSQL URL) with its spool in `spool_dir`, `rate` appends a second for `outage`.
pub async fn w10_outage(
    store: &Store,
    db: &Path,
    spool_dir: &Path,
    rate: u64,
    outage: Duration,
) -> Result<W10Report> {
    let (tier, relay) = match Location::of(db) {
        Location::Postgres(url) => ("postgres", Some(Relay::start(url).await?)),
        Location::Sqlite(_) => ("sqlite", None),
    };
    let daemon_db = relay
        .as_ref()
        .map_or(db.to_path_buf(), |r| r.url.clone().into());
    let config = SpillConfig::new(daemon_db)
        .spool(spool_dir)
        .interval(Duration::from_millis(100));
    SpillDaemon::open(store.clone(), config.clone())
        .await?
        .run_once()
        .await?;
    let sids: Vec<String> = (0..SESSIONS).map(|i| format!("outage_{i}")).collect();
    for sid in &sids {
        store.create_session(&NewSession::new().id(sid)).await?;
    }
    let cancel = CancellationToken::new();
    let daemon = tokio::spawn(
        SpillDaemon::open(store.clone(), config)
            .await?
            .run(cancel.clone().cancelled_owned()),
    );
    // The outage starts once the daemon holds every partition: a daemon that starts during
    // one cannot read the cursors it would take them with.
    for p in 0..store.keys().partitions() {
        super::spill::wait_owned(store, p, Duration::from_secs(60)).await?;
    }

    let lock = match (&relay, Location::of(db)) {
        (Some(relay), _) => {
            relay.cut();
            None
        }
        (None, Location::Sqlite(path)) => Some(SqliteLock::take(path)?),
        (None, Location::Postgres(_)) => unreachable!("a PostgreSQL tier has a relay"),
    };
    let started = Instant::now();
    let (appended, refused) = write_at(store, &sids, rate, outage).await;
    let outage_secs = started.elapsed().as_secs_f64();
    let at_end = totals(store).await?;
    let used_memory = super::measure::used_memory(store).await?;

    match (&relay, lock) {
        (Some(relay), _) => relay.mend(),
        (None, Some(lock)) => lock.release(),
        (None, None) => {}
    }
    let started = Instant::now();
    loop {
        let now = totals(store).await?;
        if now.spool_entries == 0 && now.wal_pending == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let replay_secs = started.elapsed().as_secs_f64();
    cancel.cancel();
    daemon.await.map_err(|e| Error::io(e.to_string()))??;
    Ok(W10Report {
        tier,
        rate,
        outage_secs,
        appended,
        refused,
        spool_entries: at_end.spool_entries,
        spool_bytes: at_end.spool_bytes,
        wal_pending: at_end.wal_pending,
        used_memory,
        replay_secs,
        replay_per_sec: at_end.spool_entries as f64 / replay_secs.max(1e-9),
    })
}

/// Appends `rate` a second over `sids` for `how_long` on [`WRITERS`] writers, each ticking
/// every 10 ms; returns (acknowledged, refused).
async fn write_at(store: &Store, sids: &[String], rate: u64, how_long: Duration) -> (u64, u64) {
    let (ok, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let per_tick = rate as f64 / WRITERS as f64 / 100.0;
    let deadline = Instant::now() + how_long;
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (store, ok, refused) = (store.clone(), ok.clone(), refused.clone());
            let sids = sids.to_vec();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_millis(10));
                let (mut owed, mut i) = (0.0, w);
                while Instant::now() < deadline {
                    tick.tick().await;
                    owed += per_tick;
                    while owed >= 1.0 {
                        owed -= 1.0;
                        i += WRITERS;
                        let sid = &sids[i % sids.len()];
                        let m = NewMessage::new("user").content(random_content());
                        let counter = if store.append(sid, &m).await.is_ok() {
                            &ok
                        } else {
                            &refused
                        };
                        counter.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for w in writers {
        let _ = w.await;
    }
    (ok.load(Ordering::Relaxed), refused.load(Ordering::Relaxed))
}

/// The spool and wal figures of every partition, summed.
#[derive(Debug, Default)]
struct Totals {
    spool_entries: u64,
    spool_bytes: u64,
    wal_pending: u64,
}

async fn totals(store: &Store) -> Result<Totals> {
    let mut t = Totals::default();
    for p in inspect::stats(store).await? {
        t.spool_entries += p.spool_entries;
        t.spool_bytes += p.spool_bytes;
        t.wal_pending += p.wal_pending as u64;
    }
    Ok(t)
}

/// SQLite's write lock held by another connection (`BEGIN EXCLUSIVE`) on a thread of its
/// own, until released.
struct SqliteLock {
    release: std::sync::mpsc::Sender<()>,
    holder: std::thread::JoinHandle<()>,
}

impl SqliteLock {
    fn take(path: &Path) -> Result<SqliteLock> {
        let conn = rusqlite::Connection::open(path)?;
        conn.execute_batch("BEGIN EXCLUSIVE")?;
        let (release, released) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let _ = released.recv();
            let _ = conn.execute_batch("ROLLBACK");
        });
        Ok(SqliteLock { release, holder })
    }

    fn release(self) {
        let _ = self.release.send(());
        let _ = self.holder.join();
    }
}

/// A TCP relay in front of a PostgreSQL server, on a loopback port of its own: `cut` drops
/// every relayed connection and refuses new ones until `mend`.
struct Relay {
    /// The PostgreSQL URL through the relay.
    url: String,
    up: Arc<AtomicBool>,
    links: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
    /// The scratch database the bench made (dropped with the relay).
    _db: postgres::ScratchDatabase,
}

impl Relay {
    /// A scratch database on the server of `admin` (a URL whose role may CREATE DATABASE),
    /// and a relay to it.
    async fn start(admin: &str) -> Result<Relay> {
        let db = postgres::ScratchDatabase::create(admin, "agentstate_outage").await?;
        let (head, rest) = db
            .url()
            .split_once("://")
            .ok_or_else(|| Error::InvalidInput(format!("{} is not a URL", db.url())))?;
        let (auth, rest) = rest.rsplit_once('@').map_or(("", rest), |(a, r)| (a, r));
        let (server, path) = rest.split_once('/').unwrap_or((rest, ""));
        let target = if server.contains(':') {
            server.to_string()
        } else {
            format!("{server}:5432")
        };
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let at = if auth.is_empty() {
            String::new()
        } else {
            format!("{auth}@")
        };
        let url = format!("{head}://{at}127.0.0.1:{port}/{path}");
        let up = Arc::new(AtomicBool::new(true));
        let links: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let accept = tokio::spawn({
            let (up, links) = (up.clone(), links.clone());
            async move {
                while let Ok((mut inbound, _)) = listener.accept().await {
                    if !up.load(Ordering::SeqCst) {
                        continue; // dropped: refused
                    }
                    let target = target.clone();
                    let link = tokio::spawn(async move {
                        if let Ok(mut outbound) = TcpStream::connect(&target).await {
                            let _ =
                                tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        }
                    });
                    links.lock().unwrap().push(link);
                }
            }
        });
        Ok(Relay {
            url,
            up,
            links,
            accept,
            _db: db,
        })
    }

    fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        for link in self.links.lock().unwrap().drain(..) {
            link.abort();
        }
    }

    fn mend(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.cut();
        self.accept.abort();
    }
}
