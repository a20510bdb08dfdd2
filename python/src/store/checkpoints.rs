//! Checkpoints of a session's working state.

use super::*;
use crate::args::{opt, Whole};

twins! {
    impl PyStore;

    /// Promotes working state (all of it, or `include_keys`) to a durable checkpoint; returns
    /// its id.
    #[pyo3(signature = (sid, label, include_keys = None))]
    fn checkpoint / acheckpoint(
        self,
        py,
        sid: String,
        label: String,
        include_keys: Option<Vec<String>>,
    ) -> String {
        let s = self.s(py)?;
        async move { checkpoint(&s, &sid, &label, include_keys).await }
    }

    /// Stores a checkpoint of `label` with the given `payload` (a dict) instead of a
    /// snapshot of working state; returns its id. Durable and restored like every checkpoint.
    fn put_checkpoint / aput_checkpoint(
        self,
        py,
        sid: String,
        label: String,
        payload: Bound<'_, PyAny>,
    ) -> String {
        let v = py_to_json(&payload)?;
        let s = self.s(py)?;
        async move { s.put_checkpoint(&sid, &label, &v).await }
    }

    /// The latest checkpoint with `label` of each session of `sids` (None for one without),
    /// read in about one round trip for them all.
    fn checkpoints_latest_of / acheckpoints_latest_of(
        self,
        py,
        sids: Vec<String>,
        label: String,
    ) -> Vec<OptJson> {
        let s = self.s(py)?;
        async move {
            Ok(s.checkpoints_latest_of(&sids, &label)
                .await?
                .into_iter()
                .map(|c| OptJson(c.map(|c| to_json(&c).0)))
                .collect())
        }
    }

    /// Appends a message (a dict of `append`'s fields: role, content, name, tool_calls,
    /// tool_call_id, round_index, meta) and stores a checkpoint of `label` with `payload` in
    /// one atomic step; with `expect_seq`, only if the message gets that seq (else
    /// `Conflict`). Returns `(seq, checkpoint id)`.
    #[pyo3(signature = (sid, message, label, payload, *, expect_seq = None))]
    fn append_checkpointed / aappend_checkpointed(
        self,
        py,
        sid: String,
        message: Bound<'_, PyAny>,
        label: String,
        payload: Bound<'_, PyAny>,
        expect_seq: Option<Whole<'_>>,
    ) -> (u64, String) {
        let expect_seq = opt(&expect_seq, "expect_seq")?;
        let m = super::messages::message_from_py(&message)?;
        let v = py_to_json(&payload)?;
        let s = self.s(py)?;
        async move {
            s.append_checkpointed(&sid, &m, expect_seq, &label, &v)
                .await
        }
    }

    /// The latest checkpoint with `label` (`id`, `session_id`, `label`, `created_at`,
    /// `payload`), or None.
    fn checkpoint_latest / acheckpoint_latest(self, py, sid: String, label: String) -> OptJson {
        let s = self.s(py)?;
        async move {
            Ok(OptJson(
                s.checkpoint_latest(&sid, &label)
                    .await?
                    .map(|c| to_json(&c).0),
            ))
        }
    }

    /// The latest checkpoint of every label.
    fn checkpoints / acheckpoints(self, py, sid: String) -> Json {
        let s = self.s(py)?;
        async move { s.checkpoints(&sid).await.map(|v| to_json(&v)) }
    }
}
