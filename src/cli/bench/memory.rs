//! W8 memory per live session: Redis' `used_memory` growth per session written through the
//! library (sessions of a few short messages, the shape of a large fleet of live agents),
//! before and after the spill daemon's flush and trim, next to the naive store of the same
//! messages (one list per session), with `MEMORY USAGE` and `OBJECT ENCODING` per key kind.

use serde::Serialize;

use super::live::spawn_workers;
use crate::{NewMessage, NewSession, Result, SpillConfig, SpillDaemon, Store};

/// What W8 writes.
#[derive(Debug, Clone, Copy)]
pub struct W8Sizes {
    /// Sessions created (all of one user, as W1's).
    pub sessions: usize,
    /// Messages appended to each, role alternating from `user`.
    pub messages: usize,
    /// Characters of content in each message.
    pub content_chars: usize,
}

impl W8Sizes {
    /// 20,000 sessions of 5 messages of 200 characters (1,000 sessions when `quick`).
    pub fn new(quick: bool) -> W8Sizes {
        W8Sizes {
            sessions: if quick { 1_000 } else { 20_000 },
            messages: 5,
            content_chars: 200,
        }
    }
}

/// One kind of key a live session costs, averaged per session.
#[derive(Debug, Clone, Serialize)]
pub struct KeyKind {
    /// What it is (`meta hash`, `messages list`, `partition index entry`, ...).
    pub kind: String,
    /// `OBJECT ENCODING` of one such key (`listpack`, `quicklist`, `skiplist`, ...).
    pub encoding: String,
    /// Such keys per session (an index shared by many sessions counts its share).
    pub keys_per_session: f64,
    /// `MEMORY USAGE <key> SAMPLES 0` per session: the value, the key's name and its entry
    /// in the keyspace; not the key's expiry entry nor the keyspace's hash buckets.
    pub bytes_per_session: f64,
}

/// What W8 measured.
#[derive(Debug, Clone, Serialize)]
pub struct W8Report {
    /// Sessions written.
    pub sessions: usize,
    /// Messages per session.
    pub messages: usize,
    /// Characters of content per message.
    pub content_chars: usize,
    /// `used_memory` growth per session of the naive store: per session one list, `RPUSH`
    /// of the same messages as `{"role":…,"content":…}`, no TTL, no index.
    pub naive_per_session: f64,
    /// Growth per session once written, the wal holding every write (before any flush).
    pub before_trim_per_session: f64,
    /// Growth per session once the spill daemon flushed the wal and trimmed it.
    pub after_trim_per_session: f64,
    /// Where the bytes go after the trim, per kind of key.
    pub breakdown: Vec<KeyKind>,
    /// The partitions' wal streams before the trim, per session.
    pub wal_before: KeyKind,
    /// Entries in those streams before the trim (a session's create and its appends, the
    /// appends batched by group commit).
    pub wal_entries_before: u64,
    /// The naive store's list, for comparison.
    pub naive_list: KeyKind,
    /// The meta hash of a session given a [`PROMPT_CHARS`]-character system prompt: a value
    /// over the server's `hash-max-listpack-value` makes it a hashtable.
    pub prompt_meta: KeyKind,
    /// The server's `hash-max-listpack-value` (`None` where `CONFIG GET` is refused).
    pub hash_max_listpack_value: Option<u64>,
}

impl W8Report {
    /// Before the trim, over the naive store.
    pub fn ratio_before(&self) -> f64 {
        self.before_trim_per_session / self.naive_per_session.max(1.0)
    }
    /// After the trim, over the naive store.
    pub fn ratio_after(&self) -> f64 {
        self.after_trim_per_session / self.naive_per_session.max(1.0)
    }
}

/// The message bodies W8 writes: `messages` alternating roles, `content_chars` random
/// lowercase letters each.
fn bodies(sizes: W8Sizes) -> Vec<NewMessage> {
    (0..sizes.messages)
        .map(|m| {
            let role = if m % 2 == 0 { "user" } else { "assistant" };
            let content: String = (0..sizes.content_chars)
                .map(|_| char::from(b'a' + rand::random::<u8>() % 26))
                .collect();
            NewMessage::new(role).content(content)
        })
        .collect()
}

/// Sessions sampled for the per-key figures (each costs one `MEMORY USAGE` per key).
const SAMPLE: usize = 500;

/// Characters of the system prompt of the sessions whose meta hash W8 measures apart.
pub const PROMPT_CHARS: usize = 500;

/// W8 on `store` (a namespace of its own, on a Redis no other client writes to while it
/// runs): the naive store first (written, measured, deleted), then `sizes.sessions` sessions
/// `mem_<i>` of user `bench` through [`Store::create_session`] and [`Store::append`] on
/// `workers` workers, measured, flushed and trimmed by a daemon on `db_path` (`run_once`),
/// measured again.
pub async fn w8_memory(
    store: &Store,
    sizes: W8Sizes,
    workers: usize,
    db_path: &std::path::Path,
) -> Result<W8Report> {
    let messages = bodies(sizes);
    let n = sizes.sessions as f64;

    let naive_keys: Vec<String> = (0..sizes.sessions)
        .map(|i| store.keys().bench_naive(i))
        .collect();
    let elements: Vec<String> = messages
        .iter()
        .map(serde_json::to_string)
        .collect::<std::result::Result<_, _>>()?;
    let before = super::measure::used_memory(store).await?;
    for chunk in naive_keys.chunks(1_000) {
        let cmds = chunk
            .iter()
            .map(|k| {
                let mut cmd = redis::cmd("RPUSH");
                cmd.arg(k).arg(&elements);
                cmd
            })
            .collect();
        let _: Vec<i64> = store.fan_out(cmds).await?;
    }
    let naive_per_session = super::measure::used_memory(store)
        .await?
        .saturating_sub(before) as f64
        / n;
    let naive_list = kind_of(
        store,
        "naive list",
        &naive_keys[..SAMPLE.min(naive_keys.len())],
    )
    .await?;
    for chunk in naive_keys.chunks(1_000) {
        let cmds = chunk
            .iter()
            .map(|k| {
                let mut cmd = redis::cmd("DEL");
                cmd.arg(k);
                cmd
            })
            .collect();
        let _: Vec<i64> = store.fan_out(cmds).await?;
    }

    let before = super::measure::used_memory(store).await?;
    let sids: Vec<String> = (0..sizes.sessions).map(|i| format!("mem_{i}")).collect();
    spawn_workers(store, &sids, workers, |store, mine, _| {
        let messages = messages.clone();
        async move {
            for sid in &mine {
                store
                    .create_session(&NewSession::new().id(sid).user("bench"))
                    .await?;
            }
            for sid in &mine {
                for m in &messages {
                    store.append(sid, m).await?;
                }
            }
            Ok(())
        }
    })
    .await?;
    let before_trim = super::measure::used_memory(store)
        .await?
        .saturating_sub(before) as f64;
    let partitions: Vec<u32> = (0..store.keys().partitions()).collect();
    let wal_keys: Vec<String> = partitions.iter().map(|&p| store.keys().wal(p)).collect();
    let wal_before = shared_kind(store, "wal (before the trim)", &wal_keys, n).await?;
    let lengths: Vec<u64> = store
        .fan_out(
            wal_keys
                .iter()
                .map(|k| {
                    let mut cmd = redis::cmd("XLEN");
                    cmd.arg(k);
                    cmd
                })
                .collect(),
        )
        .await?;

    SpillDaemon::open(store.clone(), SpillConfig::new(db_path))
        .await?
        .run_once()
        .await?;
    let after_trim = super::measure::used_memory(store)
        .await?
        .saturating_sub(before) as f64;

    let sample = &sids[..SAMPLE.min(sids.len())];
    let keys: Vec<_> = sample.iter().map(|sid| store.keys().session(sid)).collect();
    let mut breakdown = Vec::new();
    for (kind, pick) in [
        (
            "meta hash",
            (|k| &k.meta) as fn(&crate::keys::SessionKeys) -> &String,
        ),
        ("messages list", |k| &k.msgs),
        ("working state hash", |k| &k.work),
        ("idempotency hash", |k| &k.idem),
        ("checkpoint hash", |k| &k.ckpt),
    ] {
        let names: Vec<String> = keys.iter().map(|k| pick(k).clone()).collect();
        let found = kind_of(store, kind, &names).await?;
        if found.keys_per_session > 0.0 {
            breakdown.push(found);
        }
    }
    // An index is its bounds and its buckets.
    let with_buckets = |index: String| [crate::keys::Keys::index_buckets(&index), index];
    let index: Vec<String> = partitions
        .iter()
        .flat_map(|&p| with_buckets(store.keys().sessions_index(p)))
        .collect();
    breakdown.push(shared_kind(store, "partition index entry (sessions)", &index, n).await?);
    let by_user: Vec<String> = partitions
        .iter()
        .flat_map(|&p| with_buckets(store.keys().user_sessions(p, "bench")))
        .collect();
    breakdown.push(shared_kind(store, "user index entry (by_user)", &by_user, n).await?);
    breakdown.push(shared_kind(store, "wal (after the trim)", &wal_keys, n).await?);

    // Sessions with a system prompt, measured apart (after the growth figures).
    let prompt = "p".repeat(PROMPT_CHARS);
    let prompted: Vec<String> = (0..sample.len())
        .map(|i| format!("mem_prompt_{i}"))
        .collect();
    for sid in &prompted {
        store
            .create_session(
                &NewSession::new()
                    .id(sid)
                    .user("bench")
                    .system_prompt(&prompt),
            )
            .await?;
    }
    let metas: Vec<String> = prompted
        .iter()
        .map(|sid| store.keys().session(sid).meta)
        .collect();
    let prompt_meta = kind_of(store, "meta hash with a system prompt", &metas).await?;
    let hash_max_listpack_value = hash_max_listpack_value(store).await;

    Ok(W8Report {
        sessions: sizes.sessions,
        messages: sizes.messages,
        content_chars: sizes.content_chars,
        naive_per_session,
        before_trim_per_session: before_trim / n,
        after_trim_per_session: after_trim / n,
        breakdown,
        wal_before,
        wal_entries_before: lengths.iter().sum(),
        naive_list,
        prompt_meta,
        hash_max_listpack_value,
    })
}

/// The server's `hash-max-listpack-value`, or `None` (a managed Redis may refuse `CONFIG`).
async fn hash_max_listpack_value(store: &Store) -> Option<u64> {
    let mut conn = store.conn().await.ok()?;
    let reply: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("hash-max-listpack-value")
        .query_async(&mut conn)
        .await
        .ok()?;
    reply.get(1)?.parse().ok()
}

/// `MEMORY USAGE` and `OBJECT ENCODING` of `keys` (one key of one kind per sampled session;
/// absent ones count 0), averaged per session.
async fn kind_of(store: &Store, kind: &str, keys: &[String]) -> Result<KeyKind> {
    let (usage, encodings) = usage_of(store, keys).await?;
    let present = usage.iter().flatten().count();
    let total: u64 = usage.iter().flatten().sum();
    let per = keys.len().max(1) as f64;
    Ok(KeyKind {
        kind: kind.into(),
        encoding: summarize(encodings),
        keys_per_session: present as f64 / per,
        bytes_per_session: total as f64 / per,
    })
}

/// The same for keys shared by the `sessions` sessions (indexes, streams): their whole
/// usage, divided among the sessions.
async fn shared_kind(store: &Store, kind: &str, keys: &[String], sessions: f64) -> Result<KeyKind> {
    let (usage, encodings) = usage_of(store, keys).await?;
    let present = usage.iter().flatten().count();
    let total: u64 = usage.iter().flatten().sum();
    Ok(KeyKind {
        kind: kind.into(),
        encoding: summarize(encodings),
        keys_per_session: present as f64 / sessions,
        bytes_per_session: total as f64 / sessions,
    })
}

/// `MEMORY USAGE key SAMPLES 0` (exact) and `OBJECT ENCODING` of each key; `None` and
/// nothing for a key that does not exist.
async fn usage_of(store: &Store, keys: &[String]) -> Result<(Vec<Option<u64>>, Vec<String>)> {
    let cmds = keys
        .iter()
        .map(|k| {
            let mut cmd = redis::cmd("MEMORY");
            cmd.arg("USAGE").arg(k).arg("SAMPLES").arg(0);
            cmd
        })
        .collect();
    let usage: Vec<Option<u64>> = store.fan_out(cmds).await?;
    let cmds = keys
        .iter()
        .zip(&usage)
        .filter(|(_, u)| u.is_some())
        .map(|(k, _)| {
            let mut cmd = redis::cmd("OBJECT");
            cmd.arg("ENCODING").arg(k);
            cmd
        })
        .collect();
    let encodings: Vec<Option<String>> = store.fan_out(cmds).await?;
    Ok((usage, encodings.into_iter().flatten().collect()))
}

/// The encodings seen, each once, in the order first seen (`-` for none).
fn summarize(encodings: Vec<String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for e in encodings {
        if !seen.contains(&e) {
            seen.push(e);
        }
    }
    if seen.is_empty() {
        "-".into()
    } else {
        seen.join("+")
    }
}
