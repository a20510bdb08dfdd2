//! The tool-effect ledger: a tool call with a side effect runs once, whatever crashes and
//! resumes. Before the tool runs, its run records the intent ([`Store::effect_begin`]: the
//! tool call id and a digest of its arguments); after, the result
//! ([`Store::effect_finish`]). A resumed run asks first and gets the recorded result instead
//! of running the tool again; an intent without a result (the process died mid-tool) is
//! listed by [`Store::unresolved_effects`] for the caller to reconcile. A run records into
//! the session it writes to: the ledger is per session, keyed by tool call id. Durable, and
//! restored with the session.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::{within_limit, Error, Result};
use crate::keys::validate_id;
use crate::scripts;
use crate::store::Store;

/// Where a recorded tool call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EffectState {
    /// Begun, no result yet: running, or its process died.
    Running,
    /// Finished with a result.
    Done,
}

/// A tool call in the ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    /// The tool call id.
    pub call_id: String,
    /// Where it stands.
    pub state: EffectState,
    /// [`args_digest`] of the arguments it was begun with.
    pub args_digest: String,
    /// When its intent was recorded, ms since the epoch (Redis clock).
    pub started_at: i64,
    /// When its result was recorded.
    pub finished_at: Option<i64>,
    /// Its result, once done.
    pub result: Option<Value>,
}

/// What [`Store::effect_begin`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum EffectStart {
    /// The intent is recorded now: run the tool, then [`Store::effect_finish`].
    Started,
    /// Begun before and not finished: running elsewhere, or its process died (reconcile).
    Running(Effect),
    /// Finished before: use its result instead of running the tool again.
    Done(Effect),
}

/// The digest a ledger keeps of a tool call's arguments: `sha256:` and the hex SHA-256 of
/// their JSON text with object keys sorted (so the same arguments give the same digest in
/// every language).
pub fn args_digest(args: &Value) -> String {
    // serde_json's map is ordered by key (no `preserve_order`): the text is canonical.
    let hash = Sha256::digest(args.to_string().as_bytes());
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for b in hash {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

impl Store {
    /// Records the intent to run tool call `call_id` with `args` in session `sid`'s ledger,
    /// once: the first caller gets [`EffectStart::Started`]; a later one (a resumed run, a
    /// concurrent recorder) what is recorded. The same id with other arguments is
    /// [`Error::InvalidInput`]; on a fenced store ([`Store::with_fence`]) whose token is
    /// stale, [`Error::Fenced`], recording nothing.
    pub async fn effect_begin(
        &self,
        sid: &str,
        call_id: &str,
        args: &Value,
    ) -> Result<EffectStart> {
        let keys = self.session_keys(sid)?;
        validate_id("tool call", call_id)?;
        let call = scripts::effect_begin(&keys, sid, call_id, &args_digest(args), self.fence());
        let (state, record, wal_id): (String, String, String) =
            self.invoke_session(sid, &call).await?;
        if !wal_id.is_empty() {
            self.settle(keys.partition, &wal_id).await?;
        }
        Ok(match state.as_str() {
            "started" => EffectStart::Started,
            "done" => EffectStart::Done(parse_effect(&record)?),
            _ => EffectStart::Running(parse_effect(&record)?),
        })
    }

    /// Records the `result` of tool call `call_id`; `false` when it had one already (the
    /// first stays). [`Error::InvalidInput`] when no intent was recorded for it;
    /// [`Error::Fenced`], recording nothing, on a fenced store whose token is stale.
    pub async fn effect_finish(&self, sid: &str, call_id: &str, result: &Value) -> Result<bool> {
        let keys = self.session_keys(sid)?;
        validate_id("tool call", call_id)?;
        let text = result.to_string();
        let limit = self.config().limits.message;
        within_limit("tool result", text.len(), limit)?;
        let call = scripts::effect_finish(&keys, sid, call_id, &text, limit, self.fence());
        let (recorded, wal_id): (i64, String) = self.invoke_session(sid, &call).await?;
        if !wal_id.is_empty() {
            self.settle(keys.partition, &wal_id).await?;
        }
        Ok(recorded == 1)
    }

    /// Tool call `call_id` as the ledger holds it.
    pub async fn effect(&self, sid: &str, call_id: &str) -> Result<Option<Effect>> {
        let keys = self.session_keys(sid)?;
        validate_id("tool call", call_id)?;
        let record: Option<String> = self
            .read_run(sid, redis::cmd("HGET").arg(&keys.effects).arg(call_id))
            .await?;
        record.as_deref().map(parse_effect).transpose()
    }

    /// Every tool call of session `sid`'s ledger, oldest intent first.
    pub async fn effects(&self, sid: &str) -> Result<Vec<Effect>> {
        let keys = self.session_keys(sid)?;
        let records: Vec<String> = self
            .read_run(sid, redis::cmd("HVALS").arg(&keys.effects))
            .await?;
        let mut effects = records
            .iter()
            .map(|r| parse_effect(r))
            .collect::<Result<Vec<_>>>()?;
        effects.sort_by(|a, b| (a.started_at, &a.call_id).cmp(&(b.started_at, &b.call_id)));
        Ok(effects)
    }

    /// The intents without a result (their process died mid-tool, or they still run), oldest
    /// first: the caller reconciles each (checks the outside world, then
    /// [`Store::effect_finish`]).
    pub async fn unresolved_effects(&self, sid: &str) -> Result<Vec<Effect>> {
        let mut effects = self.effects(sid).await?;
        effects.retain(|e| e.state == EffectState::Running);
        Ok(effects)
    }
}

/// A ledger record as the scripts store it.
fn parse_effect(text: &str) -> Result<Effect> {
    serde_json::from_str(text).map_err(|e| Error::MalformedJson {
        what: "stored tool effect",
        detail: e.to_string(),
    })
}
