//! [`Admin`]: what operators and tools call on a [`Store`] and agents do not — restore on
//! request, the keys a session holds, every key of the namespace, wiping it. Kept off
//! `Store` so an agent's handle shows only the capabilities it uses; capability modules add
//! their own `impl Admin` blocks (`sessions`, `store::restore`).

use super::Store;
use crate::error::Result;

/// Operator and tooling calls on a [`Store`] (from [`Store::admin`]): the `agentstate` CLI,
/// the demo and tests use them; agents never need them.
///
/// ```no_run
/// # async fn demo(store: agentstate::Store) -> agentstate::Result<()> {
/// let admin = store.admin();
/// let restored = admin.restore_session("s1").await?; // false: it was live already
/// let keys = admin.session_key_names("s1").await?;
/// println!("{restored} {keys:?} of {} keys", admin.scan_namespace().await?.len());
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Admin<'a> {
    pub(crate) store: &'a Store,
}

impl Admin<'_> {
    /// Every key of this namespace (`<prefix>:*`), scanned on every master (SCAN, never
    /// KEYS), sorted. For operators and tools; agents never scan.
    pub async fn scan_namespace(&self) -> Result<Vec<String>> {
        let pattern = self.store.keys().namespace_pattern();
        let mut all = Vec::new();
        for mut conn in self.store.masters().await? {
            let mut cursor: u64 = 0;
            loop {
                let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(&pattern)
                    .arg("COUNT")
                    .arg(1000)
                    .query_async(&mut conn)
                    .await?;
                all.extend(keys);
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        all.sort();
        all.dedup();
        Ok(all)
    }

    /// Deletes every key of this namespace on every master (SCAN, then UNLINK key by key,
    /// as a cluster needs): plays "Redis lost its state" on a shared Redis. Returns how many
    /// keys were deleted. For the demo, tools and tests; never called by the library itself.
    pub async fn wipe_namespace(&self) -> Result<usize> {
        let keys = self.scan_namespace().await?;
        for chunk in keys.chunks(1000) {
            let unlinks = chunk
                .iter()
                .map(|k| {
                    let mut cmd = redis::cmd("UNLINK");
                    cmd.arg(k);
                    cmd
                })
                .collect();
            let _: Vec<i64> = self.store.fan_out(unlinks).await?;
        }
        Ok(keys.len())
    }
}
