//! Checkpoints of a session's working state.

use super::*;

/// `appendCheckpointed`'s result.
#[napi(object)]
pub struct AppendedCheckpoint {
    /// The message's seq.
    pub seq: i64,
    /// The checkpoint's id.
    pub checkpoint: String,
}

#[napi]
impl NativeStore {
    /// Promotes working state (all of it, or `includeKeys`) to a durable checkpoint;
    /// resolves to its id.
    #[napi]
    pub async fn checkpoint(
        &self,
        sid: String,
        label: String,
        include_keys: Option<Vec<String>>,
    ) -> Result<String> {
        let refs: Option<Vec<&str>> = include_keys
            .as_ref()
            .map(|k| k.iter().map(String::as_str).collect());
        self.store
            .checkpoint(&sid, &label, refs.as_deref())
            .await
            .map_err(|e| self.fail(e))
    }

    /// Stores a checkpoint of `label` with the given `payload` instead of a snapshot of
    /// working state; resolves to its id.
    #[napi]
    pub async fn put_checkpoint(
        &self,
        sid: String,
        label: String,
        payload: Value,
    ) -> Result<String> {
        self.store
            .put_checkpoint(&sid, &label, &payload)
            .await
            .map_err(|e| self.fail(e))
    }

    /// The latest checkpoint with `label` of each session of `sids` (null for one without).
    #[napi]
    pub async fn checkpoints_latest_of(
        &self,
        sids: Vec<String>,
        label: String,
    ) -> Result<Vec<Option<Value>>> {
        let v = self
            .store
            .checkpoints_latest_of(&sids, &label)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(v.into_iter().map(|c| c.map(|c| js(&c))).collect())
    }

    /// Appends a message object and stores a checkpoint of `label` with `payload` in one
    /// atomic step; with `expectSeq`, only if the message gets that seq (else `Conflict`).
    #[napi]
    pub async fn append_checkpointed(
        &self,
        sid: String,
        message: Value,
        label: String,
        payload: Value,
        expect_seq: Option<f64>,
    ) -> Result<AppendedCheckpoint> {
        let m = super::messages::message("message", message)?;
        let expect = expect_seq.map(|e| whole("expectSeq", e)).transpose()?;
        let (seq, checkpoint) = self
            .store
            .append_checkpointed(&sid, &m, expect, &label, &payload)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(AppendedCheckpoint {
            seq: num(seq),
            checkpoint,
        })
    }

    /// The latest checkpoint with `label` (`id`, `sessionId`, `label`, `createdAt`,
    /// `payload`), or null.
    #[napi]
    pub async fn checkpoint_latest(&self, sid: String, label: String) -> Result<Option<Value>> {
        let c = self
            .store
            .checkpoint_latest(&sid, &label)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(c.map(|c| js(&c)))
    }

    /// The latest checkpoint of every label.
    #[napi]
    pub async fn checkpoints(&self, sid: String) -> Result<Vec<Value>> {
        let v = self
            .store
            .checkpoints(&sid)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(v.iter().map(js).collect())
    }
}
