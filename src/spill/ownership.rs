//! Partition ownership: a daemon holds the lease of each partition it owns (`lease`), and
//! taking a partition is where a Redis loss is noticed and recovered from: lost streams
//! rebased, indexes re-seeded, user data re-seeded once the flush drained.

use std::time::Instant;

use super::lease::{claim, release, HeldLease};

use super::flusher;
use super::{Partition, SpillDaemon};
use crate::error::Result;
use crate::records::{committed, Entry};
use crate::store::Store;

impl SpillDaemon {
    /// Acquires or renews the lease of `p`; on a new lease, loads the cursors from SQLite
    /// and republishes them (re-seeding the session indexes if Redis lost them), then opens
    /// the partition to agents' writes in this Redis history (`rollback`).
    pub(super) async fn hold_lease(&mut self, p: u32) -> Result<bool> {
        let ttl = self.config.lease_ttl;
        let part = &self.parts[p as usize];
        if part.token > 0 && part.renewed.is_some_and(|t| t.elapsed() < ttl / 3) {
            return Ok(true);
        }
        // While we hold the lease SQLite's token is at most ours; otherwise ask SQLite, or,
        // when it is out of reach, start from our last token (see `resumed`).
        let prior = part.token.max(part.lapsed);
        let floor = match part.token {
            0 => match self.db.cursors(p).await {
                Ok(cursors) => cursors.token,
                Err(err) if prior > 0 && super::outage::is_outage(&err) => prior,
                Err(err) => return Err(err),
            },
            held => held,
        };
        let claimed_at = Instant::now();
        let Some(token) = claim(&self.store, p, &self.owner, ttl, floor).await? else {
            self.lost_lease(p);
            return Ok(false);
        };
        // Taking a partition may outlast the lease time (the re-seed after a Redis loss at a
        // million sessions): the steps renew it as they go.
        let mut lease = HeldLease::new(&self.store, p, &self.owner, token, ttl, claimed_at);
        let taken = token != self.parts[p as usize].token;
        if taken && self.resumed(p, prior, token).await? {
            return Ok(true);
        }
        if taken {
            let held = self.db.cursors(p).await?;
            let (mut wal, mut decisions) = (held.wal, held.decisions);
            let key = self.store.keys().committed(p);
            let mut conn = self.store.conn().await?;
            let (known, seeded): (u32, bool) = redis::pipe()
                .hlen(&key)
                .hexists(&key, committed::SEEDED)
                .query_async(&mut conn)
                .await?;
            let Some((spooled, marked)) = self
                .take_spooled(p, token, &mut wal, &decisions, known == 0)
                .await?
            else {
                self.lost_lease(p);
                return Ok(false);
            };
            if known == 0 {
                // Nothing is marked or re-seeded for a namespace bound to another tier.
                super::binding::bind(&self.store, &self.binding, &self.config.durable).await?;
                // Redis lost its state (or this is the first run). A stream that no longer
                // holds the committed entry (the trimmer always keeps it) is a new timeline:
                // all of it is uncommitted, even entries whose ids sort below the cursor
                // (a Redis whose clock runs behind).
                let wal_lost = stream_lost(&self.store, &self.store.keys().wal(p), &wal).await?;
                let decisions_lost =
                    stream_lost(&self.store, &self.store.keys().decisions(p), &decisions).await?;
                if wal_lost || decisions_lost {
                    let rebased = self.db.rebase(p, token, wal_lost, decisions_lost).await?;
                    if rebased {
                        self.events.rebased(p);
                        let held = self.db.cursors(p).await?;
                        (wal, decisions) = (held.wal, held.decisions);
                    }
                }
                let Some((sessions, open)) =
                    super::restore::reseed_indexes(&self.store, &self.db, p, &mut lease).await?
                else {
                    self.lost_lease(p);
                    return Ok(false);
                };
                self.events.reseeded_indexes(p, sessions, open);
            }
            let mut ids = vec![
                (committed::WAL, wal.as_str()),
                (committed::DECISIONS, &decisions),
            ];
            // The spool's mark goes back before anything is trimmed past the cursor.
            let identity = self.spool_identity();
            if !spooled.is_empty() {
                ids.push((super::outage::SPOOL_FIELD, &identity));
            } else if marked {
                ids.push((super::outage::SPOOL_FIELD, ""));
            }
            if !lease.keep().await? {
                self.lost_lease(p);
                return Ok(false);
            }
            if flusher::publish_committed(&self.store, p, &lease.value(), &ids)
                .await?
                .is_none()
            {
                // Redis lost its state again while we recovered: start over next pass.
                self.lost_lease(p);
                return Ok(false);
            }
            tracing::debug!(partition = p, token, wal = %wal, decisions = %decisions, "took the partition lease");
            self.events.took(p);
            super::metrics::lease_changed(super::metrics::LeaseChange::Taken);
            let part = &mut self.parts[p as usize];
            *part = Partition {
                wal,
                spooled,
                decisions,
                trim_due: true,
                restore_due: true,
                reseed_due: !seeded,
                ..Partition::default()
            };
        }
        let part = &mut self.parts[p as usize];
        part.token = token;
        part.renewed = Some(lease.renewed());
        if taken {
            // Agents write only once the owner checked this Redis history.
            return self.open_history(p).await;
        }
        Ok(true)
    }

    /// The after-loss step for user data, once the flush drained (so every erasure made in
    /// the new Redis is in SQLite): puts user values and rounds back from SQLite, then marks
    /// the partition `seeded`. A daemon that dies before the mark leaves it to the next owner.
    pub(super) async fn complete_reseed(&mut self, p: u32) -> Result<()> {
        let mut lease = self.held_lease(p);
        let wal = self.parts[p as usize].wal.clone();
        let reseeded =
            super::restore::reseed_user_data(&self.store, &self.db, p, &wal, &mut lease).await?;
        self.parts[p as usize].renewed = Some(lease.renewed());
        let Some((values, rounds)) = reseeded else {
            self.lost_lease(p);
            return Ok(());
        };
        self.events.reseeded_users(p, values, rounds);
        let seeded = [(committed::SEEDED, "1")];
        if flusher::publish_committed(&self.store, p, &lease.value(), &seeded)
            .await?
            .is_none()
        {
            self.lost_lease(p);
            return Ok(());
        }
        self.parts[p as usize].reseed_due = false;
        Ok(())
    }

    /// The lease of `p` as this daemon holds it, for a step that renews it as it goes.
    pub(super) fn held_lease(&self, p: u32) -> HeldLease {
        let part = &self.parts[p as usize];
        HeldLease::new(
            &self.store,
            p,
            &self.owner,
            part.token,
            self.config.lease_ttl,
            part.renewed.unwrap_or_else(Instant::now),
        )
    }

    /// Forgets partition `p` after a fenced write found the lease gone (another owner, or
    /// Redis lost its state): the next pass claims it anew and, after a loss, recovers.
    pub(super) fn lost_lease(&mut self, p: u32) {
        let part = &mut self.parts[p as usize];
        part.lapsed = part.lapsed.max(part.token);
        if self.parts[p as usize].token > 0 {
            self.events.lost(p);
            super::metrics::lease_changed(super::metrics::LeaseChange::Lost);
            // Taking a partition back (and recovering from a Redis loss) is a full pass's
            // work.
            self.full_pass_due = true;
        }
        self.parts[p as usize].token = 0;
    }

    /// Takes `p` back with `token` while the durable tier is down, keeping the cursors this
    /// daemon holds, when nobody held the partition since our lease with token `prior`
    /// lapsed: the counter moved by our claim alone (`token == prior + 1`) and Redis kept its
    /// state (`committed` is there; a Redis that lost it restarts the counter). Only a lease
    /// holder commits, so the tier's cursors are still ours, and the daemon keeps spooling
    /// instead of leaving the wal to fill Redis until the tier answers. Else false: the
    /// partition is taken with the tier's cursors.
    async fn resumed(&mut self, p: u32, prior: i64, token: i64) -> Result<bool> {
        if self.outage.down_since.is_none() || prior == 0 || token != prior + 1 {
            return Ok(false);
        }
        let known: u32 = redis::cmd("HLEN")
            .arg(self.store.keys().committed(p))
            .query_async(&mut self.store.conn().await?)
            .await?;
        if known == 0 {
            return Ok(false);
        }
        let part = &mut self.parts[p as usize];
        part.token = token;
        part.lapsed = 0;
        part.renewed = Some(Instant::now());
        part.trim_due = true;
        tracing::info!(
            partition = p,
            token,
            "took the partition back while the durable tier is down: nobody held it since its lease lapsed"
        );
        self.events.took(p);
        super::metrics::lease_changed(super::metrics::LeaseChange::Taken);
        Ok(true)
    }

    /// Gives up every lease this daemon holds; one warning for those it could not release
    /// (they lapse after the lease time).
    pub(super) async fn release_all(&mut self) {
        let mut failed = Vec::new();
        let mut first: Option<crate::error::Error> = None;
        for p in 0..self.parts.len() as u32 {
            if self.parts[p as usize].token > 0 {
                // Redis out of reach: do not wait out a retry per partition.
                let unreachable = first.as_ref().is_some_and(|e| e.is_unavailable());
                if unreachable {
                    failed.push(p);
                } else if let Err(err) = release(&self.store, p, &self.owner).await {
                    failed.push(p);
                    first.get_or_insert(err);
                }
                self.parts[p as usize].token = 0;
                super::metrics::lease_changed(super::metrics::LeaseChange::Released);
            }
        }
        super::metrics::owned(0);
        self.leave().await;
        if let Some(err) = first {
            tracing::warn!(
                partitions = %super::events::ranges(&failed),
                error = %err,
                "could not release the leases; they lapse after the lease time"
            );
        }
    }
}

/// True when `stream` no longer holds the entry `at` SQLite committed last (never for
/// `0-0`): Redis lost the stream and what it holds now is a new timeline.
async fn stream_lost(store: &Store, stream: &str, at: &str) -> Result<bool> {
    if at == "0-0" {
        return Ok(false);
    }
    let mut conn = store.conn().await?;
    let found: Vec<Entry> = redis::cmd("XRANGE")
        .arg(stream)
        .arg(at)
        .arg(at)
        .query_async(&mut conn)
        .await?;
    Ok(found.is_empty())
}
