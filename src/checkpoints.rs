//! Checkpoints: promote a snapshot of working state (all keys or some) to durable process
//! state, or store one with a given payload (`put_checkpoint`); the latest per label stays in
//! Redis, the full history goes to SQLite.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{within_limit, Error, Result};
use crate::keys::validate_id;
use crate::scripts;
use crate::store::Store;

/// A promoted snapshot of working state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// `ckpt_` + 24 hex.
    pub id: String,
    /// The session it belongs to.
    pub session_id: String,
    /// Its label (the latest per label is kept live).
    pub label: String,
    /// When, ms since the epoch (Redis clock).
    pub created_at: i64,
    /// Working-state key → JSON value.
    pub payload: Value,
}

impl Store {
    /// Checkpoints the working state (only `include_keys` when given; listed keys that do not
    /// exist are left out) under `label`; returns the checkpoint id.
    pub async fn checkpoint(
        &self,
        sid: &str,
        label: &str,
        include_keys: Option<&[&str]>,
    ) -> Result<String> {
        let keys = self.session_keys(sid)?;
        validate_id("label", label)?;
        if let Some(list) = include_keys {
            if list.is_empty() {
                return Err(Error::InvalidInput("include_keys is empty".into()));
            }
            for k in list {
                validate_id("working-state key", k)?;
            }
        }
        let id = new_checkpoint_id();
        let limit = self.config().limits.state;
        let call = scripts::create_checkpoint(
            &keys,
            sid,
            &id,
            label,
            limit,
            self.fence(),
            include_keys.unwrap_or(&[]),
        );
        let wal_id: String = self.invoke_session(sid, &call).await?;
        self.settle(keys.partition, &wal_id).await?;
        Ok(id)
    }

    /// Stores a checkpoint of `label` whose payload is `payload` (a JSON object) rather than
    /// a snapshot of working state; it becomes the label's latest, is durable like every
    /// checkpoint and comes back with a restored session. Returns its id.
    pub async fn put_checkpoint(&self, sid: &str, label: &str, payload: &Value) -> Result<String> {
        let keys = self.session_keys(sid)?;
        validate_id("label", label)?;
        if !payload.is_object() {
            return Err(Error::InvalidInput(
                "checkpoint payload must be a JSON object".into(),
            ));
        }
        let text = payload.to_string();
        let limit = self.config().limits.state;
        within_limit("checkpoint", text.len(), limit)?;
        let id = new_checkpoint_id();
        let call = scripts::put_checkpoint(&keys, sid, &id, label, &text, limit, self.fence());
        let wal_id: String = self.invoke_session(sid, &call).await?;
        self.settle(keys.partition, &wal_id).await?;
        Ok(id)
    }

    /// Appends `message` and stores a checkpoint of `label` with `payload` (a JSON object) in
    /// one atomic step (one script): a reader sees both or neither, so a framework's event and
    /// the state it leaves never part. With `expect_seq`, fails with [`Error::Conflict`]
    /// unless the message gets that seq (a writer whose view of the session is stale).
    /// Returns the message's seq and the checkpoint's id.
    pub async fn append_checkpointed(
        &self,
        sid: &str,
        message: &crate::messages::NewMessage,
        expect_seq: Option<u64>,
        label: &str,
        payload: &Value,
    ) -> Result<(u64, String)> {
        let keys = self.session_keys(sid)?;
        validate_id("label", label)?;
        if !payload.is_object() {
            return Err(Error::InvalidInput(
                "checkpoint payload must be a JSON object".into(),
            ));
        }
        let body = self.message_body(message)?;
        let text = payload.to_string();
        let limit = self.config().limits.state;
        within_limit("checkpoint", text.len(), limit)?;
        let id = new_checkpoint_id();
        let call = scripts::append_checkpointed(
            &keys,
            sid,
            &body,
            expect_seq,
            self.config().limits.message,
            (&id, label, &text),
            limit,
            self.fence(),
        );
        let (seq, wal_id): (u64, String) = self.invoke_session(sid, &call).await?;
        self.settle(keys.partition, &wal_id).await?;
        Ok((seq, id))
    }

    /// The latest checkpoint under `label`, if any.
    pub async fn checkpoint_latest(&self, sid: &str, label: &str) -> Result<Option<Checkpoint>> {
        let keys = self.session_keys(sid)?;
        validate_id("label", label)?;
        let text: Option<String> = self
            .read_live(sid, redis::cmd("HGET").arg(&keys.ckpt).arg(label))
            .await?;
        text.map(|t| serde_json::from_str(&t).map_err(Error::from))
            .transpose()
    }

    /// The latest checkpoint under `label` of each session of `sids`, in their order: one
    /// `HGET` per session sent at once (one pipeline on a single node, all in flight on a
    /// cluster), so a listing costs about one round trip, not one per session. A session
    /// whose checkpoint is not in Redis (no such label, or not live) is read as
    /// [`Store::checkpoint_latest`] reads it, restoring it first; an unknown one is `None`.
    pub async fn checkpoints_latest_of(
        &self,
        sids: &[String],
        label: &str,
    ) -> Result<Vec<Option<Checkpoint>>> {
        validate_id("label", label)?;
        let mut cmds = Vec::with_capacity(sids.len());
        for sid in sids {
            let keys = self.session_keys(sid)?;
            let mut cmd = redis::cmd("HGET");
            cmd.arg(&keys.ckpt).arg(label);
            cmds.push(cmd);
        }
        let texts: Vec<Option<String>> = self.fan_out(cmds).await?;
        let mut out = Vec::with_capacity(sids.len());
        for (sid, text) in sids.iter().zip(texts) {
            out.push(match text {
                Some(t) => Some(serde_json::from_str(&t)?),
                None => match self.checkpoint_latest(sid, label).await {
                    Err(Error::UnknownSession(_)) => None,
                    other => other?,
                },
            });
        }
        Ok(out)
    }

    /// The latest checkpoint of every label, oldest first.
    pub async fn checkpoints(&self, sid: &str) -> Result<Vec<Checkpoint>> {
        let keys = self.session_keys(sid)?;
        let mut all: Vec<Checkpoint> = self
            .read_live_json(sid, redis::cmd("HVALS").arg(&keys.ckpt))
            .await?;
        all.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        Ok(all)
    }
}

/// A new checkpoint id: `ckpt_` + 24 hex digits.
fn new_checkpoint_id() -> String {
    format!("ckpt_{:024x}", rand::random::<u128>() >> 32)
}
