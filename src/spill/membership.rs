//! Several daemons share the partitions: each writes a heartbeat into `<prefix>:daemons`
//! (`daemon_heartbeat.lua`: a sorted set scored by when it lapses, Redis' clock) and owns about partitions / live daemons of them
//! (its share). A daemon above its share (one joined) releases its highest partitions; one
//! below it claims free ones; a dead daemon's heartbeat lapses with its leases, so the others'
//! shares grow and they take its partitions within the lease time.

use std::time::Instant;

use super::SpillDaemon;
use crate::error::Result;
use crate::scripts;

/// This daemon's share of `partitions` among `members` live daemons (at least one, itself).
pub(crate) fn share(partitions: u32, members: u32) -> u32 {
    partitions.div_ceil(members.max(1))
}

impl SpillDaemon {
    /// Renews the heartbeat (every lease/3), drops lapsed ones, and recomputes the share;
    /// then releases the partitions above it (the highest first).
    pub(super) async fn rebalance(&mut self) -> Result<()> {
        let ttl = self.config.lease_ttl;
        if self.heartbeat.is_some_and(|t| t.elapsed() < ttl / 3) {
            return Ok(());
        }
        let call = scripts::daemon_heartbeat(
            self.store.keys(),
            &self.owner,
            ttl.as_millis().max(1) as u64,
        );
        let members: u32 = self.store.invoke(&call).await?;
        self.heartbeat = Some(Instant::now());
        let partitions = self.parts.len() as u32;
        self.share = share(partitions, members);
        // A partition the spool holds entries of stays until they are replayed.
        let owned: Vec<u32> = (0..partitions)
            .filter(|p| self.parts[*p as usize].token > 0)
            .filter(|p| self.parts[*p as usize].spooled.is_empty())
            .collect();
        let excess = owned.len().saturating_sub(self.share as usize);
        for &p in owned.iter().rev().take(excess) {
            super::lease::release(&self.store, p, &self.owner).await?;
            self.released_lease(p, members);
        }
        if excess > 0 {
            tracing::debug!(members, share = self.share, released = excess, "rebalanced");
        }
        Ok(())
    }

    /// True when the daemon may claim one more partition (it owns fewer than its share).
    pub(super) fn below_share(&self) -> bool {
        let owned = self.parts.iter().filter(|p| p.token > 0).count();
        owned < self.share as usize
    }

    /// Removes the heartbeat (the daemon stops), so the others' shares grow at once.
    pub(super) async fn leave(&mut self) {
        self.heartbeat = None;
        let call = scripts::daemon_heartbeat(self.store.keys(), &self.owner, 0);
        let _: Result<u32> = self.store.invoke(&call).await;
    }
}

#[cfg(test)]
mod tests {
    use super::share;

    #[test]
    fn shares_cover_every_partition() {
        for p in 1..=64 {
            for n in 1..=8 {
                assert!(share(p, n) * n >= p);
                assert!(share(p, n) <= p.div_ceil(n));
            }
        }
        assert_eq!(share(16, 3), 6);
    }
}
