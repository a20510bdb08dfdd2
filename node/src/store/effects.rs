//! The tool-effect ledger: record a tool call's intent before it runs and its result after,
//! so a resumed run uses the result instead of running the tool again.

use agentstate::EffectStart;

use super::*;

#[napi]
impl NativeStore {
    /// Records the intent to run tool call `callId` with `args` once: `{ state: 'started',
    /// callId, argsDigest }` for the first caller (run the tool, then `effectFinish`); for a
    /// later one the recorded call, its `state` `running` or `done` (use its `result`).
    #[napi]
    pub async fn effect_begin(&self, sid: String, call_id: String, args: Value) -> Result<Value> {
        let started = self
            .store
            .effect_begin(&sid, &call_id, &args)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(match started {
            EffectStart::Started => serde_json::json!({
                "state": "started",
                "callId": call_id,
                "argsDigest": agentstate::args_digest(&args),
            }),
            EffectStart::Running(e) | EffectStart::Done(e) => js(&e),
        })
    }

    /// Records the `result` of tool call `callId`; false when it had one already.
    #[napi]
    pub async fn effect_finish(&self, sid: String, call_id: String, result: Value) -> Result<bool> {
        self.store
            .effect_finish(&sid, &call_id, &result)
            .await
            .map_err(|e| self.fail(e))
    }

    /// Tool call `callId` as the ledger holds it, or null.
    #[napi]
    pub async fn effect(&self, sid: String, call_id: String) -> Result<Option<Value>> {
        let e = self
            .store
            .effect(&sid, &call_id)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(e.map(|e| js(&e)))
    }

    /// Every tool call of the session's ledger, oldest intent first.
    #[napi]
    pub async fn effects(&self, sid: String) -> Result<Vec<Value>> {
        let v = self.store.effects(&sid).await.map_err(|e| self.fail(e))?;
        Ok(v.iter().map(js).collect())
    }

    /// The tool calls begun without a result, oldest first.
    #[napi]
    pub async fn unresolved_effects(&self, sid: String) -> Result<Vec<Value>> {
        let v = self
            .store
            .unresolved_effects(&sid)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(v.iter().map(js).collect())
    }
}
