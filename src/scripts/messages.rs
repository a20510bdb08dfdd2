//! Message scripts: append (one, many), pop, replace, load, compact, usage.

use super::*;

/// `append_message.lua`: appends the message `body` (JSON object) with the next seq; with
/// `fence`, only while that run lease token is the session's. A [`BatchItem`]: `.call()` for
/// the lone call.
pub fn append_item(
    s: impl Into<Arc<SessionKeys>>,
    sid: &str,
    body: &str,
    idempotency_key: Option<&str>,
    expect_seq: Option<u64>,
    limit: usize,
    fence: Option<u64>,
) -> BatchItem {
    BatchItem {
        op: "append",
        script: &APPEND_MESSAGE,
        session: s.into(),
        extra_keys: Vec::new(),
        args: vec![
            sid.to_string(),
            body_tail(body).to_string(),
            idempotency_key.unwrap_or("").to_string(),
            opt(expect_seq),
            limit.to_string(),
            opt(fence),
        ],
        idempotent: idempotency_key.is_some(),
    }
}

/// `append_messages.lua`: appends the message `bodies` (JSON objects) with consecutive seqs in
/// one atomic step; `expect_seq` is the seq the caller believes the first one gets; with
/// `fence`, only while that run lease token is the session's; with `idempotency_key`, a
/// repeat returns the original first seq and writes nothing (so it is safe to retry).
pub fn append_messages(
    s: &SessionKeys,
    sid: &str,
    bodies: &[String],
    idempotency_key: Option<&str>,
    expect_seq: Option<u64>,
    limit: usize,
    fence: Option<u64>,
) -> ScriptCall {
    ScriptCall::new(&APPEND_MESSAGES, &s.gated())
        .arg(sid)
        .arg(opt(expect_seq))
        .arg(limit)
        .arg(opt(fence))
        .arg(idempotency_key.unwrap_or(""))
        .arg(bodies.iter().map(|b| body_tail(b)).collect::<Vec<_>>())
        .idempotent(idempotency_key.is_some())
}

/// `pop_message.lua`: removes the newest message of session `sid`; with `fence`, only while
/// that run lease token is the session's.
pub fn pop_message(s: &SessionKeys, sid: &str, fence: Option<u64>) -> ScriptCall {
    ScriptCall::new(&POP_MESSAGE, &s.gated())
        .arg(sid)
        .arg(opt(fence))
}

/// `replace_message.lua`: replaces the body of message `seq` with `body` (JSON object).
/// `append_messages`, `pop_message` and `put_checkpoint` are not idempotent (a repeat would
/// append, pop or record again), so they fail fast while Redis is unreachable.
pub fn replace_message(
    s: &SessionKeys,
    sid: &str,
    seq: u64,
    body: &str,
    limit: usize,
    fence: Option<u64>,
) -> ScriptCall {
    ScriptCall::new(&REPLACE_MESSAGE, &s.gated())
        .arg(sid)
        .arg(seq)
        .arg(body_tail(body))
        .arg(limit)
        .arg(opt(fence))
        // Applying the same replacement twice leaves the same message (and a second,
        // identical wal record): safe to retry while Redis is unreachable.
        .idempotent(true)
}

/// What [`load_messages`] reads.
#[derive(Debug, Clone, Copy)]
pub enum LoadMode {
    /// Active messages after `after`, the last `last` of them.
    Active {
        /// Seq to start after (0 = from the start).
        after: u64,
        /// At most this many, the newest (`None` = all).
        last: Option<u64>,
    },
    /// Every message after `after`, whatever its state, the last `last` of them.
    All {
        /// Seq to start after (0 = from the start).
        after: u64,
        /// At most this many, the newest (`None` = all).
        last: Option<u64>,
    },
    /// The one message with this seq.
    One(u64),
}

/// `load_messages.lua`: reads messages of session `sid` (read-only).
pub fn load_messages(s: &SessionKeys, sid: &str, mode: LoadMode) -> ScriptCall {
    let (name, after, last) = match mode {
        LoadMode::Active { after, last } => ("active", after, last),
        LoadMode::All { after, last } => ("all", after, last),
        LoadMode::One(seq) => ("one", seq, None),
    };
    ScriptCall::new(&LOAD_MESSAGES, &[&s.meta, &s.msgs])
        .arg(sid)
        .arg(name)
        .arg(after)
        .arg(opt(last))
        .idempotent(true)
}

/// `compact.lua`: marks `[from, to]` compacted out and appends the note `body`; with
/// `fence`, only while that run lease token is the session's.
pub fn compact(
    s: &SessionKeys,
    sid: &str,
    range: (u64, u64),
    body: &str,
    tokens: (Option<i64>, Option<i64>),
    round_index: Option<i64>,
    fence: Option<u64>,
) -> ScriptCall {
    ScriptCall::new(&COMPACT, &s.gated())
        .arg(sid)
        .arg(range.0)
        .arg(range.1)
        .arg(body_tail(body))
        .arg(opt(tokens.0))
        .arg(opt(tokens.1))
        .arg(opt(round_index))
        .arg(opt(fence))
}

/// `record_usage.lua`: upserts the usage `body` of one round.
pub fn record_usage(s: &SessionKeys, sid: &str, round_index: i64, body: &str) -> ScriptCall {
    ScriptCall::new(&RECORD_USAGE, &s.gated())
        .arg(sid)
        .arg(round_index)
        .arg(body)
}
