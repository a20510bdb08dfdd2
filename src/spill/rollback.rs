//! A partition whose Redis went back behind its durable tier: a failover to a lagging
//! replica, a restart from an older AOF or RDB. The durable tier is the authority for what it
//! committed, so such a partition is found before any agent write there is acknowledged and
//! repaired before it opens.
//!
//! Invariant: agents' writes to a partition run only while its commit marker's `history`
//! is the Redis history's replication id (`unchecked` in `lua/_prelude.lua`). Redis starts a
//! new replication id whenever its data may have moved back, and only the partition's owner
//! sets `history`, after checking that the streams hold the entries the durable tier
//! committed last, or after putting back what they lack (`lua/check_history.lua`). So no seq,
//! version or id the durable tier committed is handed out again.

use super::lease;
use super::{metrics, SpillDaemon};
use crate::durable::snapshot::Snapshot;
use crate::error::Result;
use crate::keys::SessionKeys;
use crate::scripts;

/// What a check of a partition's history found.
enum Checked {
    /// Open to agents' writes in this Redis history.
    Open,
    /// Behind its durable tier, under this replication id: to repair.
    Behind(String),
    /// The lease is gone.
    Lost,
}

impl SpillDaemon {
    /// Opens partition `p` to agents' writes in the current Redis history, repairing it
    /// first when it is behind its durable tier. False when the lease was lost meanwhile.
    pub(super) async fn open_history(&mut self, p: u32) -> Result<bool> {
        let part = &self.parts[p as usize];
        // The stream keeps the entry at the floor (the spool's last while it holds some).
        let (wal, decisions) = (part.floor().to_string(), part.decisions.clone());
        let replid = match self.check(p, &wal, &decisions, None).await? {
            Checked::Open => return Ok(true),
            Checked::Lost => return Ok(false),
            Checked::Behind(replid) => replid,
        };
        let mut lease = self.held_lease(p);
        let repaired = self.repair(p, &mut lease).await?;
        self.parts[p as usize].renewed = Some(lease.renewed());
        let Some(records) = repaired else {
            self.lost_lease(p);
            return Ok(false);
        };
        self.publish_cursors(p).await?;
        match self.check(p, &wal, &decisions, Some(&replid)).await? {
            Checked::Open => {
                tracing::warn!(
                    partition = p,
                    records,
                    "Redis came back behind the durable tier (a failover to a lagging replica, or a restart from an older snapshot): put back what it lacked, then opened the partition to writes"
                );
                metrics::rollback_repaired(records);
                let mut conn = self.store.conn().await?;
                let stats = self.store.keys().spill_stats(p);
                let _: () = redis::pipe()
                    .hincr(&stats, "rollbacks", 1)
                    .ignore()
                    .hincr(&stats, "rollback_records", records)
                    .ignore()
                    .query_async(&mut conn)
                    .await?;
                Ok(true)
            }
            Checked::Lost => Ok(false),
            // The history changed again during the repair: the next pass starts over.
            Checked::Behind(_) => Ok(true),
        }
    }

    /// Runs `check_history.lua` for partition `p` with the durable tier's cursors.
    async fn check(
        &mut self,
        p: u32,
        wal: &str,
        decisions: &str,
        repaired: Option<&str>,
    ) -> Result<Checked> {
        let lease = lease::value(&self.owner, self.parts[p as usize].token);
        let call = scripts::check_history(self.store.keys(), p, &lease, wal, decisions, repaired);
        let (state, replid): (String, String) = self.store.invoke(&call).await?;
        Ok(match state.as_str() {
            "open" => Checked::Open,
            "checked" => {
                tracing::debug!(partition = p, history = %replid, "checked the partition against the durable tier in this Redis history");
                Checked::Open
            }
            "behind" => Checked::Behind(replid),
            _ => {
                self.lost_lease(p);
                Checked::Lost
            }
        })
    }

    /// Republishes partition `p`'s cursors in its commit marker, which a Redis behind its
    /// durable tier holds older values of.
    async fn publish_cursors(&mut self, p: u32) -> Result<()> {
        let part = &self.parts[p as usize];
        let lease = lease::value(&self.owner, part.token);
        let ids = [
            (crate::records::committed::WAL, part.wal.as_str()),
            (crate::records::committed::DECISIONS, &part.decisions),
        ];
        if super::flusher::publish_committed(&self.store, p, &lease, &ids)
            .await?
            .is_none()
        {
            self.lost_lease(p);
        }
        Ok(())
    }

    /// Puts back into Redis what the durable tier committed for partition `p` and Redis
    /// lacks: every durable session Redis holds is written anew from its durable copy (a
    /// session Redis does not hold comes back on demand), the session indexes and open
    /// decisions are re-added and the decided ones closed, user values and StateService
    /// rounds are set to the durable ones. Agents cannot
    /// write meanwhile (the partition is not open). Returns the records put back; `None`
    /// when the lease was lost meanwhile (the next owner repairs).
    async fn repair(&mut self, p: u32, lease: &mut lease::HeldLease) -> Result<Option<u64>> {
        let store = self.store.clone();
        let sessions = self.db.partition_sessions(p).await?;
        let mut records = 0;
        for chunk in sessions.chunks(500) {
            if !lease.keep().await? {
                return Ok(None);
            }
            let mut conn = store.conn().await?;
            let mut pipe = redis::pipe();
            for (sid, _) in chunk {
                pipe.exists(store.keys().session(sid).meta);
            }
            let live: Vec<bool> = pipe.query_async(&mut conn).await?;
            for ((sid, _), live) in chunk.iter().zip(live) {
                if !live {
                    continue;
                }
                // Each rewrite is a durable read and several script calls: renew per session.
                if !lease.keep().await? {
                    return Ok(None);
                }
                let Some(snapshot) = self.db.load_snapshot(sid).await? else {
                    continue;
                };
                let keys = store.keys().session(sid);
                let held = evict(&mut conn, &keys).await?;
                super::restore::write_snapshot(&store, sid, &snapshot).await?;
                records += put_back(&held, &snapshot);
            }
        }
        let Some((_, open)) = super::restore::reseed_indexes(&store, &self.db, p, lease).await?
        else {
            return Ok(None);
        };
        records += open as u64;
        records += close_decided(&store, &self.db, p).await?;
        let Some(values) = super::restore::overwrite_user_data(&store, &self.db, p, lease).await?
        else {
            return Ok(None);
        };
        let Some(items) = super::restore::overwrite_memory(&store, &self.db, p, lease).await?
        else {
            return Ok(None);
        };
        Ok(Some(records + values + items))
    }
}

/// Closes in Redis the open decisions of partition `p` that the durable tier holds with an
/// outcome (or no longer holds): Redis came back from before their outcome. Returns how
/// many.
async fn close_decided(
    store: &crate::store::Store,
    db: &crate::durable::Durable,
    p: u32,
) -> Result<u64> {
    let open: std::collections::HashSet<String> = db
        .open_decisions(p)
        .await?
        .into_iter()
        .map(|d| d.id)
        .collect();
    let key = store.keys().open_decisions(p);
    let mut conn = store.conn().await?;
    let live: Vec<String> = redis::cmd("HKEYS").arg(&key).query_async(&mut conn).await?;
    let decided: Vec<&String> = live.iter().filter(|id| !open.contains(*id)).collect();
    if decided.is_empty() {
        return Ok(0);
    }
    let n: u64 = redis::cmd("HDEL")
        .arg(&key)
        .arg(&decided)
        .query_async(&mut conn)
        .await?;
    Ok(n)
}

/// How many records of each kind Redis held for a session before its repair: messages,
/// idempotency keys, compactions, usage rows, checkpoint labels, children, inbox items,
/// ledger entries, graph log values.
type Held = [u64; 9];

/// Deletes session `keys`' keys (it comes back from its durable copy next) in one atomic
/// step and returns what they held. Its working state and run lease go with them, as after a
/// Redis loss: neither is durable.
async fn evict(conn: &mut crate::connection::Connection, keys: &SessionKeys) -> Result<Held> {
    let held: Vec<u64> = redis::pipe()
        .atomic()
        .llen(&keys.msgs)
        .hlen(&keys.idem)
        .llen(&keys.compactions)
        .hlen(&keys.usage)
        .hlen(&keys.ckpt)
        .scard(&keys.children)
        .hlen(&keys.inbox)
        .hlen(&keys.effects)
        .hlen(&keys.graph)
        .del(&[
            &keys.meta,
            &keys.work,
            &keys.msgs,
            &keys.ckpt,
            &keys.idem,
            &keys.compactions,
            &keys.usage,
            &keys.children,
            &keys.graph,
            &keys.glog,
            &keys.inbox,
            &keys.effects,
        ])
        .ignore()
        .query_async(conn)
        .await?;
    let mut out = Held::default();
    for (slot, n) in out.iter_mut().zip(held) {
        *slot = n;
    }
    Ok(out)
}

/// The records `snapshot` holds beyond what Redis `held` before the repair.
fn put_back(held: &Held, snapshot: &Snapshot) -> u64 {
    let image = &snapshot.image;
    let durable = [
        image.messages.len(),
        image.idem.len(),
        image.compactions.len(),
        image.usage.len(),
        image.checkpoints.len(),
        image.children.len(),
        image.inbox.len(),
        image.effects.len(),
        snapshot.graph.len(),
    ];
    durable
        .iter()
        .zip(held)
        .map(|(&d, &h)| (d as u64).saturating_sub(h))
        .sum()
}
