//! Messages: append (one, many), pop, replace, read, compact, usage.

use super::*;
use crate::args::{opt, opt_text, Text, Whole};
use crate::convert::json_array;

twins! {
    impl PyStore;

    /// Appends one message and returns its seq; it needs `content` or `tool_calls` (as the
    /// CLI's `msg append`; `content=""` is an empty one). `idempotency_key`: a repeat returns the
    /// original seq and writes nothing; `expect_seq`: the seq the caller believes comes next
    /// (else `Conflict`).
    #[pyo3(signature = (sid, role, content = None, *, name = None, tool_calls = None, tool_call_id = None, round_index = None, meta = None, idempotency_key = None, expect_seq = None))]
    fn append / aappend(
        self,
        py,
        sid: String,
        role: String,
        content: Option<Text<'_>>,
        name: Option<String>,
        tool_calls: Option<Bound<'_, PyAny>>,
        tool_call_id: Option<String>,
        round_index: Option<Whole<'_>>,
        meta: Option<Bound<'_, PyAny>>,
        idempotency_key: Option<String>,
        expect_seq: Option<Whole<'_>>,
    ) -> u64 {
        let mut m = NewMessage::new(role);
        m.content = opt_text(&content, "content")?;
        m.name = name;
        m.tool_calls = opt_json(tool_calls.as_ref())?;
        m.tool_call_id = tool_call_id;
        m.round_index = opt(&round_index, "round_index")?;
        m.meta = opt_json(meta.as_ref())?;

        let s = self.s(py)?;
        let o = options(idempotency_key, opt(&expect_seq, "expect_seq")?);
        async move { s.append_with(&sid, &m, &o).await }
    }

    /// Appends message dicts (``role`` required; ``content``, ``name``, ``tool_calls``,
    /// ``tool_call_id``, ``round_index``, ``meta`` optional) in one atomic step — consecutive
    /// seqs, no other writer in between — and returns their seqs. `idempotency_key` names
    /// the whole batch: a repeat returns the original seqs and writes nothing.
    #[pyo3(signature = (sid, messages, *, idempotency_key = None, expect_seq = None))]
    fn append_many / aappend_many(
        self,
        py,
        sid: String,
        messages: Vec<Bound<'_, PyAny>>,
        idempotency_key: Option<String>,
        expect_seq: Option<Whole<'_>>,
    ) -> Vec<u64> {
        let ms = messages
            .iter()
            .map(message_from_py)
            .collect::<PyResult<Vec<_>>>()?;

        let s = self.s(py)?;
        let o = options(idempotency_key, opt(&expect_seq, "expect_seq")?);
        async move { s.append_many_with(&sid, &ms, &o).await }
    }

    /// Removes the newest message and returns it (None when there is none); the next append
    /// gets its seq again. `InvalidInput` when it is the note of the latest compaction.
    fn pop_message / apop_message(self, py, sid: String) -> OptJson {
        let s = self.s(py)?;
        async move { Ok(OptJson(s.pop_message(&sid).await?.map(|m| to_json(&m).0))) }
    }

    /// Replaces active message `seq` with the message dict `message` (a redaction, an edit);
    /// seq, state and `created_at` stay. `InvalidInput` when there is no such message or it
    /// is compacted out.
    fn replace_message / areplace_message(
        self,
        py,
        sid: String,
        seq: Whole<'_>,
        message: Bound<'_, PyAny>,
    ) -> () {
        let seq = seq.get("seq")?;
        let m = message_from_py(&message)?;
        let s = self.s(py)?;
        async move { s.replace_message(&sid, seq, &m).await }
    }

    /// Messages in seq order: active ones (or `all`), only seqs after `after`, only the
    /// `last` n — one round trip. Each is a dict with `seq`, `state`, `created_at`, `role`
    /// and the optional fields that were set.
    #[pyo3(signature = (sid, *, all = false, after = None, last = None))]
    fn messages / amessages(
        self,
        py,
        sid: String,
        all: bool,
        after: Option<Whole<'_>>,
        last: Option<Whole<'_>>,
    ) -> Dicts<agentstate::Message> {
        let (s, q) = (self.s(py)?, query(all, &after, &last)?);
        async move { s.messages(&sid, q).await.map(Dicts) }
    }

    /// Only the contents (str, or None for a message without content) of the messages
    /// `messages(sid, all=..., after=..., last=...)` returns, in seq order: the cheap read
    /// for adapters that keep a whole item as a message's content.
    #[pyo3(signature = (sid, *, all = false, after = None, last = None))]
    fn contents / acontents(
        self,
        py,
        sid: String,
        all: bool,
        after: Option<Whole<'_>>,
        last: Option<Whole<'_>>,
    ) -> Vec<Option<String>> {
        let (s, q) = (self.s(py)?, query(all, &after, &last)?);
        async move { s.contents(&sid, q).await }
    }

    /// The contents `contents(sid, all=..., after=..., last=...)` returns, as one JSON array
    /// text ``[c1,c2,...]`` (messages without content left out) when each of them is one
    /// JSON value, else None. ``json.loads`` of it is the list of the parsed contents, built
    /// in one pass of json's C scanner instead of one call per message; the check runs off
    /// the GIL.
    #[pyo3(signature = (sid, *, all = false, after = None, last = None))]
    fn contents_array / acontents_array(
        self,
        py,
        sid: String,
        all: bool,
        after: Option<Whole<'_>>,
        last: Option<Whole<'_>>,
    ) -> Option<String> {
        let (s, q) = (self.s(py)?, query(all, &after, &last)?);
        async move {
            let contents = s.contents(&sid, q).await?;
            Ok(json_array(contents.iter().flatten().map(String::as_str)))
        }
    }

    /// The message with `seq` (any state), or None.
    fn message / amessage(self, py, sid: String, seq: Whole<'_>) -> OptJson {
        let seq = seq.get("seq")?;
        let s = self.s(py)?;
        async move { Ok(OptJson(s.message(&sid, seq).await?.map(|m| to_json(&m).0))) }
    }

    /// Compacts `[from_seq, to_seq]` into a system `compact_note`; returns
    /// `(compact_seq, note_seq)`.
    #[pyo3(signature = (sid, from_seq, to_seq, note, *, before_tokens = None, after_tokens = None, round_index = None))]
    fn compact / acompact(
        self,
        py,
        sid: String,
        from_seq: Whole<'_>,
        to_seq: Whole<'_>,
        note: String,
        before_tokens: Option<Whole<'_>>,
        after_tokens: Option<Whole<'_>>,
        round_index: Option<Whole<'_>>,
    ) -> (u64, u64) {
        let mut c = Compaction::new(from_seq.get("from_seq")?, to_seq.get("to_seq")?, note);
        c.before_tokens = opt(&before_tokens, "before_tokens")?;
        c.after_tokens = opt(&after_tokens, "after_tokens")?;
        c.round_index = opt(&round_index, "round_index")?;
        let s = self.s(py)?;
        async move { s.compact(&sid, &c).await }
    }

    /// The compaction audit.
    fn compactions / acompactions(self, py, sid: String) -> Json {
        let s = self.s(py)?;
        async move { s.compactions(&sid).await.map(|v| to_json(&v)) }
    }

    /// Upserts the token usage of a round.
    #[pyo3(signature = (sid, round_index, prompt_tokens, completion_tokens, *, total_tokens = None, model = None))]
    fn record_usage / arecord_usage(
        self,
        py,
        sid: String,
        round_index: Whole<'_>,
        prompt_tokens: Whole<'_>,
        completion_tokens: Whole<'_>,
        total_tokens: Option<Whole<'_>>,
        model: Option<String>,
    ) -> () {
        let mut u = Usage::new(
            round_index.get("round_index")?,
            prompt_tokens.get("prompt_tokens")?,
            completion_tokens.get("completion_tokens")?,
        );
        u.total_tokens = opt(&total_tokens, "total_tokens")?.or(u.total_tokens); // else the sum
        u.model = model;
        let s = self.s(py)?;
        async move { s.record_usage(&sid, &u).await }
    }

    /// Usage per round.
    fn usage / ausage(self, py, sid: String) -> Json {
        let s = self.s(py)?;
        async move { s.usage(&sid).await.map(|v| to_json(&v)) }
    }
}

/// An append's options from the keyword arguments `append` and `append_many` share.
fn options(idempotency_key: Option<String>, expect_seq: Option<u64>) -> AppendOptions {
    let mut o = AppendOptions::new();
    if let Some(k) = idempotency_key {
        o = o.idempotency_key(k);
    }
    if let Some(e) = expect_seq {
        o = o.expect_seq(e);
    }
    o
}

/// Reads one message dict (`role` required; `content`, `name`, `tool_calls`,
/// `tool_call_id`, `round_index`, `meta` optional).
pub fn message_from_py(obj: &Bound<'_, PyAny>) -> PyResult<NewMessage> {
    serde_json::from_value(py_to_json(obj)?)
        .map_err(|e| errors::InvalidInput::new_err(format!("message: {e}")))
}

fn query(all: bool, after: &Option<Whole<'_>>, last: &Option<Whole<'_>>) -> PyResult<MessageQuery> {
    let mut q = if all {
        MessageQuery::all()
    } else {
        MessageQuery::active()
    };
    if let Some(a) = opt(after, "after")? {
        q = q.after(a);
    }
    if let Some(n) = opt(last, "last")? {
        q = q.last(n);
    }
    Ok(q)
}
