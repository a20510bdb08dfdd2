//! Memory pressure: what Redis' `maxmemory-policy` means for the namespace's keys, read at
//! the spill daemon's start so an evicting policy is never a surprise.
//!
//! Under `noeviction` (what we recommend) a full Redis refuses writes with `OOM`, which
//! every call returns as [`crate::Error::Backpressure`] with nothing written. An evicting
//! policy instead drops keys silently; [`EvictionRisk`] says which of ours it can drop and
//! what restore brings back.

use crate::error::Result;
use crate::store::Store;

/// Which of the namespace's keys a `maxmemory-policy` lets Redis evict.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EvictionRisk {
    /// `allkeys-*`: any key, streams and daemon bookkeeping included.
    AllKeys {
        /// The policy, e.g. `allkeys-lru`.
        policy: String,
    },
    /// `volatile-*`: only keys with a TTL — the session keys (idle TTL) and restore answers.
    Volatile {
        /// The policy, e.g. `volatile-lru`.
        policy: String,
    },
}

impl EvictionRisk {
    /// The risk of `policy` (the text of `maxmemory_policy`), `None` for `noeviction`.
    pub fn of(policy: &str) -> Option<EvictionRisk> {
        let policy = policy.trim().to_string();
        if policy.starts_with("allkeys-") {
            Some(EvictionRisk::AllKeys { policy })
        } else if policy.starts_with("volatile-") {
            Some(EvictionRisk::Volatile { policy })
        } else {
            None
        }
    }

    /// What an eviction under this policy can lose, and what restore covers (one line).
    pub fn explain(&self) -> String {
        match self {
            EvictionRisk::AllKeys { policy } => format!(
                "Redis maxmemory-policy is {policy}: when memory is full Redis may evict ANY key of the namespace. \
                 Writes not yet flushed to SQLite (wal and decisions stream entries) and working state are lost for good; \
                 an evicted session, user value or index comes back from SQLite (restore on access, or the daemon's re-seed \
                 when its lease or committed marker goes). Use `maxmemory-policy noeviction`: full memory then refuses \
                 writes with a clear OOM error and loses nothing"
            ),
            EvictionRisk::Volatile { policy } => format!(
                "Redis maxmemory-policy is {policy}: when memory is full Redis may evict keys with a TTL, i.e. live \
                 sessions' keys. Their durable part comes back from SQLite on the next access (restore); working state \
                 and any of their messages not yet flushed are lost. Use `maxmemory-policy noeviction` to lose nothing"
            ),
        }
    }
}

impl Store {
    /// The `maxmemory_policy` of every master (from `INFO memory`, which an ACL user with
    /// only our commands may run), and the risk of the first that can evict our keys.
    pub(crate) async fn eviction_risk(&self) -> Result<Option<EvictionRisk>> {
        for mut conn in self.masters().await? {
            let info: String = redis::cmd("INFO")
                .arg("memory")
                .query_async(&mut conn)
                .await?;
            let policy = info
                .lines()
                .find_map(|l| l.strip_prefix("maxmemory_policy:"))
                .unwrap_or("noeviction");
            if let Some(risk) = EvictionRisk::of(policy) {
                return Ok(Some(risk));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::EvictionRisk;

    #[test]
    fn policies_are_classified_by_what_they_may_evict() {
        assert_eq!(EvictionRisk::of("noeviction"), None);
        assert!(matches!(
            EvictionRisk::of("allkeys-lru\r"),
            Some(EvictionRisk::AllKeys { .. })
        ));
        assert!(matches!(
            EvictionRisk::of("volatile-ttl"),
            Some(EvictionRisk::Volatile { .. })
        ));
    }
}
