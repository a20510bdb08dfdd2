//! Messages: append (one, many), pop, replace, read, compact, usage.

use agentstate::{AppendOptions, Compaction, MessageQuery, NewMessage, Usage};

use super::*;

/// `append`'s options: the message's optional fields and the write's conditions.
#[napi(object)]
#[derive(Default)]
pub struct AppendMessageOptions {
    /// Author name.
    pub name: Option<String>,
    /// Tool calls (JSON).
    pub tool_calls: Option<Value>,
    /// The tool call this message answers.
    pub tool_call_id: Option<String>,
    /// The round it belongs to.
    pub round_index: Option<i64>,
    /// Free-form metadata (JSON).
    pub meta: Option<Value>,
    /// A repeat with the same key resolves to the original seq and writes nothing.
    pub idempotency_key: Option<String>,
    /// The seq the caller believes comes next (else `Conflict`).
    pub expect_seq: Option<f64>,
}

/// `loadMessages`' (and `contents`') query.
#[napi(object)]
#[derive(Default)]
pub struct MessageQueryOptions {
    /// Compacted-out messages too.
    pub all: Option<bool>,
    /// Only seqs after this one.
    pub after: Option<f64>,
    /// Only the last n.
    pub last: Option<u32>,
}

/// `compact`'s options.
#[napi(object)]
#[derive(Default)]
pub struct CompactOptions {
    /// Tokens before the compaction.
    pub before_tokens: Option<i64>,
    /// Tokens after it.
    pub after_tokens: Option<i64>,
    /// The round it belongs to.
    pub round_index: Option<i64>,
}

/// `compact`'s result.
#[napi(object)]
pub struct Compacted {
    /// The compaction's seq in the audit.
    pub compact_seq: i64,
    /// The seq of the note message.
    pub note_seq: i64,
}

fn query(o: Option<MessageQueryOptions>) -> Result<MessageQuery> {
    let o = o.unwrap_or_default();
    let mut q = if o.all.unwrap_or(false) {
        MessageQuery::all()
    } else {
        MessageQuery::active()
    };
    if let Some(a) = o.after {
        q = q.after(whole("after", a)?);
    }
    if let Some(n) = o.last {
        q = q.last(n as usize);
    }
    Ok(q)
}

/// A message object (`role` required; `content`, `name`, `toolCalls`, `toolCallId`,
/// `roundIndex`, `meta` optional) as the core's `NewMessage`.
pub(crate) fn message(what: &str, v: Value) -> Result<NewMessage> {
    let Value::Object(m) = v else {
        return Err(errors::invalid(format!(
            "{what} must be an object with a role"
        )));
    };
    let snake: serde_json::Map<String, Value> = m
        .into_iter()
        .map(|(k, v)| {
            let k = match k.as_str() {
                "toolCalls" => "tool_calls".to_string(),
                "toolCallId" => "tool_call_id".to_string(),
                "roundIndex" => "round_index".to_string(),
                _ => k,
            };
            (k, v)
        })
        .collect();
    serde_json::from_value(Value::Object(snake))
        .map_err(|e| errors::invalid(format!("{what}: {e}")))
}

#[napi]
impl NativeStore {
    /// Appends one message and resolves to its seq.
    #[napi]
    pub async fn append(
        &self,
        sid: String,
        role: String,
        content: Option<String>,
        options: Option<AppendMessageOptions>,
    ) -> Result<i64> {
        let o = options.unwrap_or_default();
        let mut m = NewMessage::new(role);
        m.content = content;
        m.name = o.name;
        m.tool_calls = o.tool_calls;
        m.tool_call_id = o.tool_call_id;
        m.round_index = o.round_index;
        m.meta = o.meta;
        let mut opts = AppendOptions::new();
        if let Some(k) = o.idempotency_key {
            opts = opts.idempotency_key(k);
        }
        if let Some(e) = o.expect_seq {
            opts = opts.expect_seq(whole("expectSeq", e)?);
        }
        self.store
            .append_with(&sid, &m, &opts)
            .await
            .map(num)
            .map_err(|e| self.fail(e))
    }

    /// Appends message objects in one atomic step (consecutive seqs, no other writer in
    /// between) and resolves to their seqs.
    #[napi]
    pub async fn append_many(
        &self,
        sid: String,
        messages: Vec<Value>,
        expect_seq: Option<f64>,
    ) -> Result<Vec<i64>> {
        let ms = messages
            .into_iter()
            .enumerate()
            .map(|(i, v)| message(&format!("messages[{i}]"), v))
            .collect::<Result<Vec<_>>>()?;
        let expect = expect_seq.map(|e| whole("expectSeq", e)).transpose()?;
        let seqs = self
            .store
            .append_many(&sid, &ms, expect)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(seqs.into_iter().map(num).collect())
    }

    /// Removes the newest message and resolves to it (null when there is none); the next
    /// append gets its seq again.
    #[napi]
    pub async fn pop_message(&self, sid: String) -> Result<Option<Value>> {
        let m = self
            .store
            .pop_message(&sid)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(m.map(|m| js(&m)))
    }

    /// Replaces active message `seq` with the message object `message`; seq, state and
    /// `createdAt` stay.
    #[napi]
    pub async fn replace_message(&self, sid: String, seq: f64, message: Value) -> Result<()> {
        let m = self::message("message", message)?;
        let seq = whole("seq", seq)?;
        self.store
            .replace_message(&sid, seq, &m)
            .await
            .map_err(|e| self.fail(e))
    }

    /// Messages in seq order (active ones, or `all`; after `after`; the `last` n), each
    /// `{ seq, state, createdAt, role, ... }` with the optional fields that were set.
    #[napi]
    pub async fn load_messages(
        &self,
        sid: String,
        query: Option<MessageQueryOptions>,
    ) -> Result<Vec<Value>> {
        let q = self::query(query)?;
        let ms = self
            .store
            .messages(&sid, q)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(ms.iter().map(js).collect())
    }

    /// Only the contents (a string, or null for a message without content) of the
    /// messages `loadMessages` returns: the cheap read for adapters that keep a whole item
    /// as a message's content.
    #[napi]
    pub async fn contents(
        &self,
        sid: String,
        query: Option<MessageQueryOptions>,
    ) -> Result<Vec<Option<String>>> {
        let q = self::query(query)?;
        self.store.contents(&sid, q).await.map_err(|e| self.fail(e))
    }

    /// The message with `seq` (any state), or null.
    #[napi]
    pub async fn message(&self, sid: String, seq: f64) -> Result<Option<Value>> {
        let seq = whole("seq", seq)?;
        let m = self
            .store
            .message(&sid, seq)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(m.map(|m| js(&m)))
    }

    /// Compacts `[fromSeq, toSeq]` into a system note.
    #[napi]
    pub async fn compact(
        &self,
        sid: String,
        from_seq: f64,
        to_seq: f64,
        note: String,
        options: Option<CompactOptions>,
    ) -> Result<Compacted> {
        let o = options.unwrap_or_default();
        let mut c = Compaction::new(whole("fromSeq", from_seq)?, whole("toSeq", to_seq)?, note);
        c.before_tokens = o.before_tokens;
        c.after_tokens = o.after_tokens;
        c.round_index = o.round_index;
        let (compact_seq, note_seq) = self
            .store
            .compact(&sid, &c)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(Compacted {
            compact_seq: num(compact_seq),
            note_seq: num(note_seq),
        })
    }

    /// The compaction audit.
    #[napi]
    pub async fn compactions(&self, sid: String) -> Result<Vec<Value>> {
        let v = self
            .store
            .compactions(&sid)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(v.iter().map(js).collect())
    }

    /// Upserts the token usage of a round.
    #[napi]
    pub async fn record_usage(
        &self,
        sid: String,
        round_index: i64,
        prompt_tokens: i64,
        completion_tokens: i64,
        total_tokens: Option<i64>,
        model: Option<String>,
    ) -> Result<()> {
        let mut u = Usage::new(round_index, prompt_tokens, completion_tokens);
        u.total_tokens = total_tokens.or(u.total_tokens);
        u.model = model;
        self.store
            .record_usage(&sid, &u)
            .await
            .map_err(|e| self.fail(e))
    }

    /// Usage per round.
    #[napi]
    pub async fn usage(&self, sid: String) -> Result<Vec<Value>> {
        let v = self.store.usage(&sid).await.map_err(|e| self.fail(e))?;
        Ok(v.iter().map(js).collect())
    }
}
