//! Messages: atomic gapless seq allocation, retry-safe and stale-writer-safe appends, loading
//! (active, all, one, after a seq, last N — each one round trip), compaction and usage.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{within_limit, Error, Result};
use crate::keys::validate_id;
use crate::scripts::{self, LoadMode};
use crate::store::Store;

/// Whether a message is part of the active history.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageState {
    /// Loaded by `load active`.
    #[default]
    Active,
    /// Replaced by a compact note; kept for `load all` and the audit.
    CompactedOut,
}

impl MessageState {
    /// The state of message `seq` of a session whose compactions covered `compacted` (its
    /// `from_seq..=to_seq` ranges): a stored element does not hold it.
    pub(crate) fn of(seq: u64, compacted: &[(u64, u64)]) -> MessageState {
        if compacted.iter().any(|&(a, b)| (a..=b).contains(&seq)) {
            MessageState::CompactedOut
        } else {
            MessageState::Active
        }
    }
}

/// A message to append. Build with [`NewMessage::new`] and the setters.
///
/// [`Message`] repeats these fields (deliberately, not `#[serde(flatten)]`): a stored message
/// reads as one flat struct (`m.content`), and its JSON is the element Redis stores.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct NewMessage {
    /// `system`, `user`, `assistant`, `tool`, ...
    pub role: String,
    /// Text content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Author name (for a compact note: `compact_note`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Tool calls the assistant asked for (JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Value>,
    /// The tool call this message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Round the message belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_index: Option<i64>,
    /// Free-form metadata (JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

impl NewMessage {
    /// A message with `role` and nothing else.
    pub fn new(role: impl Into<String>) -> Self {
        NewMessage {
            role: role.into(),
            ..Default::default()
        }
    }
    /// Sets the content.
    pub fn content(mut self, content: impl Into<String>) -> Self {
        self.content = Some(content.into());
        self
    }
    /// Sets the name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
    /// Sets the tool calls.
    pub fn tool_calls(mut self, calls: Value) -> Self {
        self.tool_calls = Some(calls);
        self
    }
    /// Sets the tool call id.
    pub fn tool_call_id(mut self, id: impl Into<String>) -> Self {
        self.tool_call_id = Some(id.into());
        self
    }
    /// Sets the round index.
    pub fn round_index(mut self, round: i64) -> Self {
        self.round_index = Some(round);
        self
    }
    /// Sets the metadata.
    pub fn meta(mut self, meta: Value) -> Self {
        self.meta = Some(meta);
        self
    }
}

/// A stored message: the appended fields plus `seq`, `state` and `created_at`.
///
/// The Redis list element (and the durable tier's row) holds the appended fields after `at`,
/// the append time: a message's seq is its position and its state is in the session's
/// compacted ranges, so the reader sets both (an element an earlier build stored holds
/// `seq`, `state` and `created_at`, and reads the same). The fields of [`NewMessage`] are
/// spelled out here rather than `#[serde(flatten)]`ed: flatten makes serde buffer every
/// element before decoding it, and decoding messages is the hot read path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Position in the session, 1-based, gapless.
    #[serde(default)]
    pub seq: u64,
    /// Active or compacted out.
    #[serde(default)]
    pub state: MessageState,
    /// Append time, ms since the epoch (Redis clock); `at` in a stored element.
    #[serde(alias = "at")]
    pub created_at: i64,
    /// `system`, `user`, `assistant`, `tool`, ...
    pub role: String,
    /// Text content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Author name (`compact_note` for a compact note).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Tool calls (JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Value>,
    /// The tool call this message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Round the message belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_index: Option<i64>,
    /// Free-form metadata (JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

/// Retry and concurrency guards for [`Store::append`].
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct AppendOptions {
    /// A repeated append with the same key returns the original seq and writes nothing.
    pub idempotency_key: Option<String>,
    /// The seq the caller believes comes next; otherwise [`Error::Conflict`].
    pub expect_seq: Option<u64>,
}

impl AppendOptions {
    /// No guards.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the idempotency key.
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }
    /// Sets the expected next seq.
    pub fn expect_seq(mut self, seq: u64) -> Self {
        self.expect_seq = Some(seq);
        self
    }
}

/// Which messages to load.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MessageQuery {
    /// Include compacted-out messages.
    pub all: bool,
    /// Only messages with a seq greater than this.
    pub after: Option<u64>,
    /// Only the last N (after the other filters).
    pub last: Option<usize>,
}

impl MessageQuery {
    /// Active messages in seq order.
    pub fn active() -> Self {
        Self::default()
    }
    /// All messages, compacted ones included.
    pub fn all() -> Self {
        MessageQuery {
            all: true,
            ..Self::default()
        }
    }
    /// Only seqs after `seq`.
    pub fn after(mut self, seq: u64) -> Self {
        self.after = Some(seq);
        self
    }
    /// Only the last `n`.
    pub fn last(mut self, n: usize) -> Self {
        self.last = Some(n);
        self
    }
}

/// A compaction request: compact `[from_seq, to_seq]` into a note.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Compaction {
    /// First seq to compact.
    pub from_seq: u64,
    /// Last seq to compact (inclusive).
    pub to_seq: u64,
    /// The summary that replaces them.
    pub note: String,
    /// Tokens of the range before compaction.
    pub before_tokens: Option<i64>,
    /// Tokens of the note.
    pub after_tokens: Option<i64>,
    /// Round in which the compaction happened.
    pub round_index: Option<i64>,
}

impl Compaction {
    /// Compacts `[from_seq, to_seq]` into `note`.
    pub fn new(from_seq: u64, to_seq: u64, note: impl Into<String>) -> Self {
        Compaction {
            from_seq,
            to_seq,
            note: note.into(),
            ..Default::default()
        }
    }
    /// Sets the token counts before and after.
    pub fn tokens(mut self, before: i64, after: i64) -> Self {
        self.before_tokens = Some(before);
        self.after_tokens = Some(after);
        self
    }
    /// Sets the round index.
    pub fn round_index(mut self, round: i64) -> Self {
        self.round_index = Some(round);
        self
    }
}

/// One entry of the compaction audit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionRecord {
    /// 1, 2, 3... per session.
    pub compact_seq: u64,
    /// Seq of the compact note message.
    pub note_seq: u64,
    /// First compacted seq.
    pub from_seq: u64,
    /// Last compacted seq.
    pub to_seq: u64,
    /// Tokens before.
    pub before_tokens: Option<i64>,
    /// Tokens after.
    pub after_tokens: Option<i64>,
    /// Round of the compaction.
    pub round_index: Option<i64>,
    /// When, ms since the epoch.
    pub created_at: i64,
}

/// Token usage of one round (upserted by round index).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Usage {
    /// The round.
    pub round_index: i64,
    /// Prompt tokens.
    pub prompt_tokens: Option<i64>,
    /// Completion tokens.
    pub completion_tokens: Option<i64>,
    /// Total tokens (prompt + completion when not given).
    pub total_tokens: Option<i64>,
    /// Model used.
    pub model: Option<String>,
    /// When it was recorded, ms since the epoch (set by the store).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<i64>,
}

impl Usage {
    /// Usage of `round_index` with prompt and completion tokens; total is their sum (absent
    /// when the sum overflows: set it with [`Usage::total`]).
    pub fn new(round_index: i64, prompt_tokens: i64, completion_tokens: i64) -> Self {
        Usage {
            round_index,
            prompt_tokens: Some(prompt_tokens),
            completion_tokens: Some(completion_tokens),
            total_tokens: prompt_tokens.checked_add(completion_tokens),
            ..Default::default()
        }
    }
    /// Sets the total explicitly.
    pub fn total(mut self, total: i64) -> Self {
        self.total_tokens = Some(total);
        self
    }
    /// Sets the model.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }
}

fn validate_role(role: &str) -> Result<()> {
    if role.is_empty()
        || role.len() > 32
        || !role.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
    {
        return Err(Error::InvalidInput(format!(
            "role {role:?}: expected 1-32 lowercase letters (system, user, assistant, tool, ...)"
        )));
    }
    Ok(())
}

/// Decodes stored message elements (as [`Message`]s, or [`ContentOnly`]) with one
/// deserializer over one JSON array of them, so the buffer it unescapes strings into grows
/// once per load, not once per element (that regrowth was a quarter of a load's CPU in the
/// Python binding, perf). Each element must be exactly one value, as `serde_json::from_str`
/// of it would require; when the array is not one value per element, the first element that
/// does not decode on its own is named (elements that each do always make such an array).
fn decode_elements<T: serde::de::DeserializeOwned>(elements: &[String]) -> Result<Vec<T>> {
    let mut array = String::with_capacity(elements.iter().map(|e| e.len() + 1).sum::<usize>() + 2);
    array.push('[');
    for (i, e) in elements.iter().enumerate() {
        if i > 0 {
            array.push(',');
        }
        array.push_str(e);
    }
    array.push(']');
    match serde_json::from_str::<Vec<T>>(&array) {
        Ok(values) if values.len() == elements.len() => Ok(values),
        _ => Err(Error::MalformedJson {
            what: "stored message",
            detail: elements
                .iter()
                .find_map(|e| {
                    let err = serde_json::from_str::<T>(e).err()?;
                    Some(format!("{err}: {e:?}"))
                })
                .unwrap_or_else(|| "the elements do not read as one value each".to_string()),
        }),
    }
}

/// A `load_messages.lua` reply: the elements, the seqs they have (ascending ranges
/// `a-b,c-d`) and the session's compacted ranges among them (same form).
struct Loaded {
    elements: Vec<String>,
    spans: String,
    compacted: String,
}

impl Loaded {
    /// Splits the reply: the elements, then the spans, then the compacted ranges.
    fn from_reply(mut reply: Vec<String>) -> Result<Loaded> {
        match (reply.pop(), reply.pop()) {
            (Some(compacted), Some(spans)) => Ok(Loaded {
                elements: reply,
                spans,
                compacted,
            }),
            _ => Err(Error::MalformedJson {
                what: "message load reply",
                detail: "the reply lacks the seqs and ranges load_messages.lua ends it with".into(),
            }),
        }
    }

    /// The elements decoded, each given its seq and state.
    fn messages(&self) -> Result<Vec<Message>> {
        let mut messages: Vec<Message> = decode_elements(&self.elements)?;
        let compacted: Vec<(u64, u64)> = ranges(&self.compacted).collect();
        let mut seqs = ranges(&self.spans).flat_map(|(a, b)| a..=b);
        for m in &mut messages {
            m.seq = seqs.next().ok_or_else(|| self.miscounted())?;
            m.state = MessageState::of(m.seq, &compacted);
        }
        if seqs.next().is_some() {
            return Err(self.miscounted());
        }
        Ok(messages)
    }

    fn miscounted(&self) -> Error {
        Error::MalformedJson {
            what: "message load reply",
            detail: format!(
                "{} elements for the seqs {:?}",
                self.elements.len(),
                self.spans
            ),
        }
    }
}

/// The ranges of `a-b,c-d` (malformed parts skipped: the scripts write this form).
fn ranges(text: &str) -> impl Iterator<Item = (u64, u64)> + '_ {
    text.split(',').filter_map(|r| {
        let (a, b) = r.split_once('-')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    })
}

/// A stored message element read for its content alone: serde skips the other fields
/// without building them.
#[derive(Deserialize)]
struct ContentOnly {
    #[serde(default)]
    content: Option<String>,
}

impl Store {
    /// Appends a message and returns its seq (one EVALSHA; concurrent writes of this
    /// process to sessions of one partition share one: group commit). A message needs
    /// content or tool calls ([`Error::InvalidInput`] otherwise; empty content is content).
    ///
    /// ```no_run
    /// # async fn demo(store: agentstate::Store) -> agentstate::Result<()> {
    /// use agentstate::{MessageQuery, NewMessage, NewSession};
    /// let sid = store.create_session(&NewSession::new().user("alice")).await?;
    /// store.append(&sid, &NewMessage::new("user").content("hello")).await?;
    /// store.append(&sid, &NewMessage::new("assistant").content("hi!")).await?;
    /// for m in store.messages(&sid, MessageQuery::active().last(20)).await? {
    ///     println!("{} {}: {}", m.seq, m.role, m.content.unwrap_or_default());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn append(&self, sid: &str, message: &NewMessage) -> Result<u64> {
        self.append_with(sid, message, &AppendOptions::default())
            .await
    }

    /// Appends with retry/concurrency guards; see [`AppendOptions`].
    pub async fn append_with(
        &self,
        sid: &str,
        message: &NewMessage,
        options: &AppendOptions,
    ) -> Result<u64> {
        let keys = self.session_keys(sid)?;
        if let Some(k) = &options.idempotency_key {
            validate_id("idempotency key", k)?;
        }
        let body = self.message_body(message)?;
        let p = keys.partition;
        let item = scripts::append_item(
            keys,
            sid,
            &body,
            options.idempotency_key.as_deref(),
            options.expect_seq,
            self.config().limits.message,
            self.fence(),
        );
        let (seq, wal_id, _repeat): (u64, String, u8) = self.invoke_grouped(sid, item).await?;
        if wal_id.is_empty() {
            self.settle_repeat(p).await?;
        } else {
            self.settle(p, &wal_id).await?;
        }
        Ok(seq)
    }

    /// A message's stored body (JSON object text): role checked, size within the limit.
    pub(crate) fn message_body(&self, message: &NewMessage) -> Result<String> {
        validate_role(&message.role)?;
        if message.content.is_none() && message.tool_calls.is_none() {
            return Err(Error::InvalidInput(
                "a message needs content or tool_calls (got neither); give empty content for an empty message".into(),
            ));
        }
        // Sized for the common message up front: growing from empty reallocated it 4-5 times.
        let guess = 64
            + message.role.len()
            + message
                .content
                .as_ref()
                .map_or(0, |c| c.len() + c.len() / 8);
        let mut bytes = Vec::with_capacity(guess);
        serde_json::to_writer(&mut bytes, message)?;
        // serde_json writes UTF-8 only.
        let body = String::from_utf8(bytes).map_err(|e| Error::InvalidInput(e.to_string()))?;
        within_limit("message", body.len(), self.config().limits.message)?;
        Ok(body)
    }

    /// Appends `messages` in order with consecutive seqs in one atomic step (one EVALSHA:
    /// no other writer's message lands between them; one message goes as
    /// [`Store::append_with`], sharing a round trip with concurrent writes) and returns
    /// their seqs. With
    /// `expect_seq`, fails with [`Error::Conflict`] unless the first one gets that seq.
    /// An empty list writes nothing and returns no seqs.
    pub async fn append_many(
        &self,
        sid: &str,
        messages: &[NewMessage],
        expect_seq: Option<u64>,
    ) -> Result<Vec<u64>> {
        let options = AppendOptions {
            idempotency_key: None,
            expect_seq,
        };
        self.append_many_with(sid, messages, &options).await
    }

    /// [`Store::append_many`] with retry/concurrency guards: `idempotency_key` names the
    /// whole batch (a repeat returns the original seqs and writes nothing, so a call whose
    /// reply was lost can be repeated); `expect_seq` is the seq the first message should get.
    pub async fn append_many_with(
        &self,
        sid: &str,
        messages: &[NewMessage],
        options: &AppendOptions,
    ) -> Result<Vec<u64>> {
        if let [message] = messages {
            // One message is an append: it shares a round trip with concurrent writes
            // (group commit), where append_messages.lua would be a round trip of its own.
            return Ok(vec![self.append_with(sid, message, options).await?]);
        }
        if let Some(k) = &options.idempotency_key {
            validate_id("idempotency key", k)?;
        }
        let keys = self.session_keys(sid)?;
        let bodies = messages
            .iter()
            .map(|m| self.message_body(m))
            .collect::<Result<Vec<_>>>()?;
        if bodies.is_empty() {
            return Ok(Vec::new());
        }
        let limit = self.config().limits.message;
        let call = scripts::append_messages(
            &keys,
            sid,
            &bodies,
            options.idempotency_key.as_deref(),
            options.expect_seq,
            limit,
            self.fence(),
        );
        let (first, wal_id): (u64, String) = self.invoke_session(sid, &call).await?;
        if wal_id.is_empty() {
            self.settle_repeat(keys.partition).await?;
        } else {
            self.settle(keys.partition, &wal_id).await?;
        }
        Ok((first..first + bodies.len() as u64).collect())
    }

    /// Removes the newest message and returns it (`None` when the session has none); the
    /// next append gets its seq again. Idempotency keys that named it are dropped. Fails
    /// with [`Error::BadRange`] when the newest message is the note of the latest compaction.
    pub async fn pop_message(&self, sid: &str) -> Result<Option<Message>> {
        let keys = self.session_keys(sid)?;
        let call = scripts::pop_message(&keys, sid, self.fence());
        let reply: Vec<String> = self.invoke_session(sid, &call).await?;
        let [element, wal_id, seq] = <[String; 3]>::try_from(reply).unwrap_or_default();
        if wal_id.is_empty() {
            return Ok(None);
        }
        self.settle(keys.partition, &wal_id).await?;
        let loaded = Loaded {
            elements: vec![element],
            spans: format!("{seq}-{seq}"),
            compacted: String::new(),
        };
        Ok(loaded.messages()?.pop())
    }

    /// Replaces the content of active message `seq` (a redaction, an edit): role, content,
    /// name, tool calls, tool call id, round and meta all come from `message`; seq, state
    /// and `created_at` stay. Fails with [`Error::BadRange`] when there is no such message
    /// or it is compacted out.
    pub async fn replace_message(&self, sid: &str, seq: u64, message: &NewMessage) -> Result<()> {
        let keys = self.session_keys(sid)?;
        let body = self.message_body(message)?;
        let limit = self.config().limits.message;
        let call = scripts::replace_message(&keys, sid, seq, &body, limit, self.fence());
        let wal_id: String = self.invoke_session(sid, &call).await?;
        self.settle(keys.partition, &wal_id).await
    }

    /// Loads messages in seq order (one EVALSHA); active ones unless `query.all`.
    pub async fn messages(&self, sid: &str, query: MessageQuery) -> Result<Vec<Message>> {
        self.message_elements(sid, query).await?.messages()
    }

    /// The contents of the messages [`Store::messages`] loads (`None` for one without
    /// content), in seq order, one EVALSHA: the read for callers that keep a whole item as a
    /// message's content. Each element is decoded for its content alone (the other fields
    /// are skipped, not built).
    pub async fn contents(&self, sid: &str, query: MessageQuery) -> Result<Vec<Option<String>>> {
        let loaded = self.message_elements(sid, query).await?;
        Ok(decode_elements::<ContentOnly>(&loaded.elements)?
            .into_iter()
            .map(|m| m.content)
            .collect())
    }

    /// The stored elements `query` selects (one EVALSHA).
    async fn message_elements(&self, sid: &str, query: MessageQuery) -> Result<Loaded> {
        let keys = self.session_keys(sid)?;
        let (after, last) = (query.after.unwrap_or(0), query.last.map(|n| n as u64));
        let mode = if query.all {
            LoadMode::All { after, last }
        } else {
            LoadMode::Active { after, last }
        };
        let call = scripts::load_messages(&keys, sid, mode);
        Loaded::from_reply(self.invoke_session(sid, &call).await?)
    }

    /// The message with `seq`, whatever its state; `None` when there is none.
    pub async fn message(&self, sid: &str, seq: u64) -> Result<Option<Message>> {
        let keys = self.session_keys(sid)?;
        let call = scripts::load_messages(&keys, sid, LoadMode::One(seq));
        let reply = self.invoke_session(sid, &call).await?;
        Ok(Loaded::from_reply(reply)?.messages()?.pop())
    }

    /// Marks `[from_seq, to_seq]` compacted out and appends a system `compact_note` in one
    /// atomic step; returns `(compact_seq, note_seq)`.
    pub async fn compact(&self, sid: &str, c: &Compaction) -> Result<(u64, u64)> {
        let keys = self.session_keys(sid)?;
        if c.from_seq < 1 || c.to_seq < c.from_seq {
            return Err(Error::BadRange {
                from: c.from_seq,
                to: c.to_seq,
                detail: "must satisfy 1 <= from <= to".into(),
            });
        }
        let note = NewMessage::new("system")
            .name("compact_note")
            .content(&c.note)
            .meta(serde_json::json!({
                "from_seq": c.from_seq,
                "to_seq": c.to_seq,
                "original_tokens": c.before_tokens,
                "summary_tokens": c.after_tokens,
                "compacted_at_round": c.round_index,
            }));
        let note = NewMessage {
            round_index: c.round_index,
            ..note
        };
        let body = serde_json::to_string(&note)?;
        within_limit("compact note", body.len(), self.config().limits.message)?;
        let call = scripts::compact(
            &keys,
            sid,
            (c.from_seq, c.to_seq),
            &body,
            (c.before_tokens, c.after_tokens),
            c.round_index,
            self.fence(),
        );
        let (compact_seq, note_seq, wal_id): (u64, u64, String) =
            self.invoke_session(sid, &call).await?;
        self.settle(keys.partition, &wal_id).await?;
        Ok((compact_seq, note_seq))
    }

    /// The compaction audit, oldest first.
    pub async fn compactions(&self, sid: &str) -> Result<Vec<CompactionRecord>> {
        let keys = self.session_keys(sid)?;
        self.read_live_json(
            sid,
            redis::cmd("LRANGE").arg(&keys.compactions).arg(0).arg(-1),
        )
        .await
    }

    /// Upserts the usage of one round.
    pub async fn record_usage(&self, sid: &str, usage: &Usage) -> Result<()> {
        let keys = self.session_keys(sid)?;
        if let Some(model) = &usage.model {
            if model.len() > 256 {
                return Err(Error::InvalidInput("model name over 256 bytes".into()));
            }
        }
        let counts = [
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.total_tokens,
        ];
        if counts.iter().flatten().any(|n| *n < 0) {
            return Err(Error::InvalidInput(
                "token counts must not be negative".into(),
            ));
        }
        let body = serde_json::to_string(&Usage {
            created_at: None,
            ..usage.clone()
        })?;
        let call = scripts::record_usage(&keys, sid, usage.round_index, &body);
        let wal_id: String = self.invoke_session(sid, &call).await?;
        self.settle(keys.partition, &wal_id).await
    }

    /// Usage per round, by round index.
    pub async fn usage(&self, sid: &str) -> Result<Vec<Usage>> {
        let keys = self.session_keys(sid)?;
        let mut usage: Vec<Usage> = self
            .read_live_json(sid, redis::cmd("HVALS").arg(&keys.usage))
            .await?;
        usage.sort_by_key(|u| u.round_index);
        Ok(usage)
    }
}

#[cfg(test)]
mod tests {
    use super::{decode_elements, ContentOnly};

    fn contents(elements: &[&str]) -> crate::error::Result<Vec<Option<String>>> {
        let elements: Vec<String> = elements.iter().map(|e| e.to_string()).collect();
        Ok(decode_elements::<ContentOnly>(&elements)?
            .into_iter()
            .map(|m| m.content)
            .collect())
    }

    /// One value per element, whitespace around it allowed; an element holding two values
    /// (even comma-separated, which the joined array would read), none, or a wrong shape fails
    /// the load and is named, instead of shifting the values after it.
    #[test]
    fn each_element_is_exactly_one_value() {
        let (a, b) = (r#"{"content":"a"}"#, r#"{"content":"b"}"#);
        assert_eq!(
            contents(&[a, &format!(" {b} \n")]).unwrap(),
            [Some("a".to_string()), Some("b".to_string())]
        );
        let two = format!("{a},{b}");
        for bad in [two.as_str(), "", " ", r#"{"content":1}"#] {
            let err = contents(&[a, bad]).unwrap_err().to_string();
            assert!(err.contains("stored message"), "{bad:?}: {err}");
            assert!(
                err.contains(&format!("{bad:?}")),
                "{bad:?} not named: {err}"
            );
        }
    }
}
