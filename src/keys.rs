//! The key protocol: every Redis key agentstate writes, named in one place, the partition
//! function and id validation. Public because operators rely on it with `redis-cli` (which
//! keys a session holds, where its `wal` stream is) and services read the streams by name.
//!
//! Every key of one partition carries the hash tag `{p}`, so each Lua script touches a
//! single slot and runs unchanged on Redis Cluster. The full table is in
//! docs/architecture-key-protocol.md.
//!
//! ```
//! use agentstate::keys::Keys;
//! let keys = Keys::new("as", 16);
//! let p = keys.partition("s1");
//! assert_eq!(keys.session("s1").meta, format!("as:{{{p}}}:s:s1"));
//! assert_eq!(keys.wal(p), format!("as:{{{p}}}:wal"));
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};

/// 32-bit FNV-1a of `bytes`: the partition function of the key protocol.
pub fn fnv1a_32(bytes: &[u8]) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for b in bytes {
        hash ^= u32::from(*b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

/// Checks that `id` is 1–128 characters of `[A-Za-z0-9._@+-]`.
pub fn validate_id(what: &'static str, id: &str) -> Result<()> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'@' | b'+' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidId {
            what,
            id: id.chars().take(200).collect(),
        })
    }
}

/// Formats key names for one namespace.
#[derive(Debug, Clone)]
pub struct Keys {
    prefix: String,
    partitions: u32,
}

/// The keys of one session, in the order every session script receives them as KEYS[1..9].
#[derive(Debug, Clone)]
pub struct SessionKeys {
    /// Partition of the session id.
    pub partition: u32,
    /// `<prefix>:{p}:s:<sid>` — meta hash.
    pub meta: String,
    /// `<prefix>:{p}:s:<sid>:work` — working state hash.
    pub work: String,
    /// `<prefix>:{p}:s:<sid>:msgs` — message list in seq order.
    pub msgs: String,
    /// `<prefix>:{p}:s:<sid>:ckpt` — label → latest checkpoint.
    pub ckpt: String,
    /// `<prefix>:{p}:s:<sid>:idem` — idempotency key → seq.
    pub idem: String,
    /// `<prefix>:{p}:s:<sid>:compactions` — compaction audit list.
    pub compactions: String,
    /// `<prefix>:{p}:s:<sid>:usage` — round → usage.
    pub usage: String,
    /// `<prefix>:{p}:s:<sid>:children` — ids of sub-agent sessions.
    pub children: String,
    /// `<prefix>:{p}:wal` — the partition's write-ahead log stream.
    pub wal: String,
    /// `<prefix>:{p}:committed` — the partition's commit marker, whose `history` every
    /// write script checks (`unchecked` in `lua/_prelude.lua`): the last of its KEYS.
    pub committed: String,
    /// `<prefix>:{p}:s:<sid>:graph` — the graph checkpoint log's values (a LangGraph
    /// thread: checkpoints, channel blobs, pending writes; see `crate::graphs`). Not one of
    /// the nine script keys: graph scripts and close/restore receive it after them.
    pub graph: String,
    /// `<prefix>:{p}:s:<sid>:glog` — the graph log's index (sorted set, lexicographic).
    pub glog: String,
    /// `<prefix>:{p}:s:<sid>:inbox` — the session's inbox: item id → item (see
    /// `crate::inbox`). Not one of the nine script keys: the run scripts (leases, inbox,
    /// effects) and close/restore receive it after them.
    pub inbox: String,
    /// `<prefix>:{p}:s:<sid>:effects` — the session's tool-effect ledger: tool call id →
    /// record (see `crate::effects`).
    pub effects: String,
}

/// The keys of the sessions a `Store` used lately, each built once: the hot path wants a
/// session's keys on every call, and building them is twelve allocations (about 14 % of a
/// batched append's instructions in this process, callgrind). Bounded: emptied when full.
#[derive(Debug, Default)]
pub(crate) struct SessionKeysCache(Mutex<HashMap<String, Arc<SessionKeys>>>);

impl SessionKeysCache {
    /// Most sessions kept (about 1 KB each).
    const CAPACITY: usize = 4096;

    /// The keys of session `sid` in namespace `keys` (always the same namespace for one
    /// cache: a `Store`'s).
    pub(crate) fn get(&self, keys: &Keys, sid: &str) -> Arc<SessionKeys> {
        // A panic while holding the lock cannot leave the map half-updated (each step is
        // one map call), so a poisoned lock is used as is.
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(found) = map.get(sid) {
            return found.clone();
        }
        if map.len() >= Self::CAPACITY {
            map.clear();
        }
        let built = Arc::new(keys.session(sid));
        map.insert(sid.to_string(), built.clone());
        built
    }
}

impl SessionKeys {
    /// The nine keys in script order (KEYS[1..9]).
    pub fn as_array(&self) -> [&str; 9] {
        [
            &self.meta,
            &self.work,
            &self.msgs,
            &self.ckpt,
            &self.idem,
            &self.compactions,
            &self.usage,
            &self.children,
            &self.wal,
        ]
    }

    /// The nine keys, then the inbox and the effect ledger: what every run script (leases,
    /// inbox, effects) receives as KEYS[1..11].
    pub fn with_run(&self) -> [&str; 11] {
        let [a, b, c, d, e, f, g, h, i] = self.as_array();
        [a, b, c, d, e, f, g, h, i, &self.inbox, &self.effects]
    }

    /// The nine keys, then the partition's commit marker: the KEYS of a write script on one
    /// session.
    pub fn gated(&self) -> [&str; 10] {
        let [a, b, c, d, e, f, g, h, i] = self.as_array();
        [a, b, c, d, e, f, g, h, i, &self.committed]
    }

    /// [`SessionKeys::with_run`], then the partition's commit marker: the KEYS of a run
    /// script that writes (inbox, effects).
    pub fn with_run_gated(&self) -> [&str; 12] {
        let [a, b, c, d, e, f, g, h, i] = self.as_array();
        [
            a,
            b,
            c,
            d,
            e,
            f,
            g,
            h,
            i,
            &self.inbox,
            &self.effects,
            &self.committed,
        ]
    }

    /// The session's own keys (without the shared wal), e.g. for `agentstate keys`.
    pub fn own(&self) -> [&str; 12] {
        let a = self.as_array();
        [
            a[0],
            a[1],
            a[2],
            a[3],
            a[4],
            a[5],
            a[6],
            a[7],
            &self.graph,
            &self.glog,
            &self.inbox,
            &self.effects,
        ]
    }
}

impl Keys {
    /// Key formatter for `prefix` with `partitions` partitions.
    pub fn new(prefix: &str, partitions: u32) -> Self {
        Keys {
            prefix: prefix.to_string(),
            partitions: partitions.max(1),
        }
    }

    /// Number of partitions.
    pub fn partitions(&self) -> u32 {
        self.partitions
    }

    /// Key prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Partition of a session or user id: `fnv1a_32(id) % partitions`.
    pub fn partition(&self, id: &str) -> u32 {
        fnv1a_32(id.as_bytes()) % self.partitions
    }

    /// `<prefix>:*` — the SCAN/KEYS match pattern of every key of the namespace.
    pub fn namespace_pattern(&self) -> String {
        format!("{}:*", self.prefix)
    }

    /// `<prefix>:config` — the namespace record (partitions).
    pub fn config(&self) -> String {
        format!("{}:config", self.prefix)
    }

    /// All keys of session `sid`.
    pub fn session(&self, sid: &str) -> SessionKeys {
        let p = self.partition(sid);
        let base = format!("{}:{{{p}}}:s:{sid}", self.prefix);
        // One exact allocation each, no fmt (a `Store` builds them once per session: see
        // SessionKeysCache).
        let key = |suffix: &str| [base.as_str(), suffix].concat();
        SessionKeys {
            partition: p,
            work: key(":work"),
            msgs: key(":msgs"),
            ckpt: key(":ckpt"),
            idem: key(":idem"),
            compactions: key(":compactions"),
            usage: key(":usage"),
            children: key(":children"),
            graph: key(":graph"),
            glog: key(":glog"),
            inbox: key(":inbox"),
            effects: key(":effects"),
            wal: self.wal(p),
            committed: self.committed(p),
            meta: base,
        }
    }

    /// `<prefix>:{p}:g_run:<run_id>` — the graph threads (session ids) of partition `p` that
    /// hold checkpoints of LangGraph run `run_id` (for `delete_for_runs`). Any string is a
    /// valid run id: it follows the hash tag, so it cannot change the slot.
    pub fn graph_run(&self, p: u32, run_id: &str) -> String {
        format!("{}:{{{p}}}:g_run:{run_id}", self.prefix)
    }

    /// `<prefix>:{p}:wal` — write-ahead log stream of partition `p`.
    pub fn wal(&self, p: u32) -> String {
        format!("{}:{{{p}}}:wal", self.prefix)
    }

    /// `<prefix>:{p}:committed` — last stream ids the spill daemon committed to SQLite
    /// (fields `wal`, `decisions`).
    pub fn committed(&self, p: u32) -> String {
        format!("{}:{{{p}}}:committed", self.prefix)
    }

    /// `<prefix>:{p}:commit_bell` — a one-entry stream the spill daemon adds to after every
    /// publication of `committed`, its entry the pairs just published: durable callers block
    /// on it (`XREAD BLOCK`) instead of polling.
    pub fn commit_bell(&self, p: u32) -> String {
        format!("{}:{{{p}}}:commit_bell", self.prefix)
    }

    /// `<prefix>:{p}:restore_bell` — a one-entry stream an agent adds to with each restore
    /// request: the spill daemon blocks on it beside the partition's streams, so a request
    /// wakes it.
    pub fn restore_bell(&self, p: u32) -> String {
        format!("{}:{{{p}}}:restore_bell", self.prefix)
    }

    /// `<prefix>:{p}:lease` — the spill daemon's lease on partition `p`: `"<owner> <token>"`
    /// with a millisecond expiry.
    pub fn lease(&self, p: u32) -> String {
        format!("{}:{{{p}}}:lease", self.prefix)
    }

    /// `<prefix>:{p}:lease_token` — counter of leases granted on partition `p` (the fencing
    /// token).
    pub fn lease_token(&self, p: u32) -> String {
        format!("{}:{{{p}}}:lease_token", self.prefix)
    }

    /// `<prefix>:{p}:restore` — list of session ids of partition `p` waiting to be restored
    /// from SQLite by the spill daemon.
    pub fn restore_requests(&self, p: u32) -> String {
        format!("{}:{{{p}}}:restore", self.prefix)
    }

    /// `<prefix>:{p}:restore:<sid>` — the daemon's answer to a restore request
    /// (`restored` or `unknown`), short-lived.
    pub fn restore_reply(&self, sid: &str) -> String {
        format!("{}:{{{}}}:restore:{sid}", self.prefix, self.partition(sid))
    }

    /// `<prefix>:daemons` — the running spill daemons: sorted set of owner ids scored by
    /// when their heartbeat lapses (ms). Each takes about partitions / members of them.
    pub fn daemons(&self) -> String {
        format!("{}:daemons", self.prefix)
    }

    /// `<prefix>:{p}:spill` — the spill daemon's figures for partition `p` (owner, flushed,
    /// rate, at).
    pub fn spill_stats(&self, p: u32) -> String {
        format!("{}:{{{p}}}:spill", self.prefix)
    }

    /// `<prefix>:{p}:decisions` — decisions and outcomes of partition `p`.
    pub fn decisions(&self, p: u32) -> String {
        format!("{}:{{{p}}}:decisions", self.prefix)
    }

    /// `<prefix>:{p}:decisions:dead` — dead-letter stream of partition `p`.
    pub fn dead_letters(&self, p: u32) -> String {
        format!("{}:{{{p}}}:decisions:dead", self.prefix)
    }

    /// `<prefix>:{0}:bench:set` — the string `agentstate bench` SETs for its redis-benchmark
    /// SET baseline (deleted when the benchmark ends).
    pub fn bench_set(&self) -> String {
        format!("{}:{{0}}:bench:set", self.prefix)
    }

    /// `<prefix>:{0}:bench:decisions` — scratch stream of the consumer benchmark's raw
    /// XADD/XREADGROUP baseline (deleted when the benchmark ends).
    pub fn bench_stream(&self) -> String {
        format!("{}:{{0}}:bench:decisions", self.prefix)
    }

    /// `<prefix>:{p}:bench:naive:<i>`, p = `i % partitions` — session `i` of the naive store
    /// `agentstate bench` measures memory against (one list per session; deleted once
    /// measured).
    pub fn bench_naive(&self, i: usize) -> String {
        let p = i % self.partitions as usize;
        format!("{}:{{{p}}}:bench:naive:{i}", self.prefix)
    }

    /// `<prefix>:{p}:open_decisions` — decision id → decision JSON, for decisions without outcome.
    pub fn open_decisions(&self, p: u32) -> String {
        format!("{}:{{{p}}}:open_decisions", self.prefix)
    }

    /// `<prefix>:{p}:sessions` — set of the session ids that live in partition `p`.
    pub fn sessions_index(&self, p: u32) -> String {
        format!("{}:{{{p}}}:sessions", self.prefix)
    }

    /// `<prefix>:{p}:by_user:<uid>` — the user's sessions that live in partition `p`
    /// (the partition of the *session*, so creating a session touches one slot).
    pub fn user_sessions(&self, p: u32, uid: &str) -> String {
        format!("{}:{{{p}}}:by_user:{uid}", self.prefix)
    }

    /// `<index>:buckets` — the ids of session index `index` (one of the two above), which
    /// itself holds the bounds of these buckets (see `lua/_prelude.lua::index_add`).
    pub fn index_buckets(index: &str) -> String {
        format!("{index}:buckets")
    }

    /// `<prefix>:{p}:u:<uid>` — user-attributed data, in the partition of the user id.
    pub fn user(&self, uid: &str) -> String {
        format!("{}:{{{}}}:u:{uid}", self.prefix, self.partition(uid))
    }

    /// The SCAN pattern of partition `p`'s user hashes (and their tombstones).
    pub fn users_pattern(&self, p: u32) -> String {
        format!("{}:{{{p}}}:u:*", self.prefix)
    }

    /// The SCAN pattern of partition `p`'s StateService rounds hashes.
    pub fn rounds_pattern(&self, p: u32) -> String {
        format!("{}:{{{p}}}:r:*", self.prefix)
    }

    /// `<prefix>:{p}:u:<uid>:forgotten` — set by `forget_user` for a day: the re-seed after
    /// a Redis loss skips the user, so values SQLite still holds until the flush are not put
    /// back.
    pub fn user_forgotten(&self, uid: &str) -> String {
        format!("{}:forgotten", self.user(uid))
    }

    /// The partition of a long-term memory namespace (its labels joined by `.`, see
    /// `crate::long_term`): the partition of that text.
    pub fn memory_partition(&self, namespace: &str) -> u32 {
        self.partition(namespace)
    }

    /// `<prefix>:{p}:m:<namespace>` — a long-term memory namespace's items (field: the item's
    /// key; value: its record), in the partition of the namespace.
    pub fn memory(&self, namespace: &str) -> String {
        format!(
            "{}:{{{}}}:m:{namespace}",
            self.prefix,
            self.memory_partition(namespace)
        )
    }

    /// `<prefix>:{p}:memory_namespaces` — the long-term memory namespaces of partition `p`
    /// that hold items (a set).
    pub fn memory_namespaces(&self, p: u32) -> String {
        format!("{}:{{{p}}}:memory_namespaces", self.prefix)
    }

    /// `<prefix>:{p}:memory_expiry` — partition `p`'s memory items that have a TTL, by the
    /// moment they expire (a sorted set; member `<namespace>\n<key>`, score in ms).
    pub fn memory_expiry(&self, p: u32) -> String {
        format!("{}:{{{p}}}:memory_expiry", self.prefix)
    }

    /// `<prefix>:{p}:r:<uid>:<session>` — StateService rounds of a user's session, in the
    /// partition of the user id.
    pub fn rounds(&self, uid: &str, session: &str) -> String {
        format!(
            "{}:{{{}}}:r:{uid}:{session}",
            self.prefix,
            self.partition(uid)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_reference_vectors() {
        assert_eq!(fnv1a_32(b""), 0x811c9dc5);
        assert_eq!(fnv1a_32(b"a"), 0xe40c292c);
        assert_eq!(fnv1a_32(b"foobar"), 0xbf9cf968);
    }

    #[test]
    fn the_cache_gives_each_session_its_own_keys_and_stays_bounded() {
        let keys = Keys::new("as", 16);
        let cache = SessionKeysCache::default();
        let first = cache.get(&keys, "s0");
        assert!(
            Arc::ptr_eq(&first, &cache.get(&keys, "s0")),
            "a hit is the built keys"
        );
        for i in 0..SessionKeysCache::CAPACITY * 2 + 5 {
            let sid = format!("s{i}");
            let got = cache.get(&keys, &sid);
            let want = keys.session(&sid);
            assert_eq!(
                (got.partition, &got.meta, &got.wal),
                (want.partition, &want.meta, &want.wal)
            );
            assert_eq!(got.as_array(), want.as_array());
            assert_eq!((&got.graph, &got.glog), (&want.graph, &want.glog));
            assert!(cache.0.lock().unwrap().len() <= SessionKeysCache::CAPACITY);
        }
    }

    #[test]
    fn session_keys_share_one_hash_tag() {
        let keys = Keys::new("as", 16);
        let s = keys.session("sess_1");
        let tag = format!("{{{}}}", s.partition);
        for k in s.as_array() {
            assert!(k.contains(&tag), "{k} lacks {tag}");
        }
        assert_eq!(s.meta, format!("as:{tag}:s:sess_1"));
        assert_eq!(s.msgs, format!("as:{tag}:s:sess_1:msgs"));
    }

    #[test]
    fn ids_are_validated() {
        assert!(validate_id("session", "a.b_c@d+e-f9").is_ok());
        assert!(validate_id("session", "").is_err());
        assert!(validate_id("session", "has space").is_err());
        assert!(validate_id("session", "a:b").is_err());
        assert!(validate_id("session", &"x".repeat(129)).is_err());
        assert!(validate_id("session", &"x".repeat(128)).is_ok());
    }
}
