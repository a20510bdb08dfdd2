//! The tool-effect ledger: record a tool call's intent before it runs and its result after,
//! so a resumed run uses the result instead of running the tool again.

use agentstate::EffectStart;

use super::*;

twins! {
    impl PyStore;

    /// Records the intent to run tool call `call_id` with `args` (JSON) in session `sid`'s
    /// ledger, once. ``{"state": "started", "call_id", "args_digest"}`` for the first caller
    /// (run the tool, then `effect_finish`); for a later one the recorded call, its
    /// ``state`` ``running`` (begun elsewhere, or its process died: reconcile) or ``done``
    /// (use its ``result``). `InvalidInput` when the id was begun with other arguments.
    fn effect_begin / aeffect_begin(
        self,
        py,
        sid: String,
        call_id: String,
        args: Bound<'_, PyAny>,
    ) -> Json {
        let args = py_to_json(&args)?;
        let s = self.s(py)?;
        async move {
            Ok(match s.effect_begin(&sid, &call_id, &args).await? {
                EffectStart::Started => Json(serde_json::json!({
                    "state": "started",
                    "call_id": call_id,
                    "args_digest": agentstate::args_digest(&args),
                })),
                EffectStart::Running(e) | EffectStart::Done(e) => to_json(&e),
            })
        }
    }

    /// Records the `result` (JSON) of tool call `call_id`; False when it had one already
    /// (the first stays). `InvalidInput` when no intent was recorded for it.
    fn effect_finish / aeffect_finish(
        self,
        py,
        sid: String,
        call_id: String,
        result: Bound<'_, PyAny>,
    ) -> bool {
        let result = py_to_json(&result)?;
        let s = self.s(py)?;
        async move { s.effect_finish(&sid, &call_id, &result).await }
    }

    /// Tool call `call_id` as the ledger holds it (``call_id``, ``state``, ``args_digest``,
    /// ``started_at``, ``finished_at``, ``result``), or None.
    fn effect / aeffect(self, py, sid: String, call_id: String) -> OptJson {
        let s = self.s(py)?;
        async move { Ok(OptJson(s.effect(&sid, &call_id).await?.map(|e| to_json(&e).0))) }
    }

    /// Every tool call of session `sid`'s ledger, oldest intent first.
    fn effects / aeffects(self, py, sid: String) -> Json {
        let s = self.s(py)?;
        async move { s.effects(&sid).await.map(|v| to_json(&v)) }
    }

    /// The tool calls begun without a result (their process died mid-tool, or they still
    /// run), oldest first: reconcile each, then `effect_finish`.
    fn unresolved_effects / aunresolved_effects(self, py, sid: String) -> Json {
        let s = self.s(py)?;
        async move { s.unresolved_effects(&sid).await.map(|v| to_json(&v)) }
    }
}
