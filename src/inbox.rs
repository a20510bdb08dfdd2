//! The inbox: what arrives for a session while a run is in flight. Anyone puts items under
//! ids they choose (a re-sent item is a no-op); the run lease holder claims the pending ones
//! and delivers them, which appends each to the transcript in the same script that marks it
//! delivered. A claim whose holder lost the lease (died, was taken over) is handed out again
//! to the next holder. Items are durable and come back with a restored session; claims are
//! live only (a restored item is pending again unless it was delivered or voided).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::keys::validate_id;
use crate::messages::NewMessage;
use crate::scripts;
use crate::store::Store;

/// Where an inbox item stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InboxState {
    /// Waiting for the lease holder.
    Pending,
    /// Taken by a lease holder (the token says which), not delivered yet.
    Claimed,
    /// In the transcript (the seq says where).
    Delivered,
    /// Dropped; never delivered.
    Void,
}

impl InboxState {
    /// The state's name as stored (`pending`, `claimed`, `delivered`, `void`).
    pub fn as_str(self) -> &'static str {
        match self {
            InboxState::Pending => "pending",
            InboxState::Claimed => "claimed",
            InboxState::Delivered => "delivered",
            InboxState::Void => "void",
        }
    }
}

/// An inbox item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboxItem {
    /// The id its sender chose.
    pub item_id: String,
    /// Its place in arrival order (1, 2, ...).
    pub n: u64,
    /// Where it stands.
    pub state: InboxState,
    /// The lease token it was claimed (or delivered) under.
    pub token: Option<u64>,
    /// Its message's seq once delivered.
    pub seq: Option<u64>,
    /// When it was put, ms since the epoch (Redis clock).
    pub put_at: i64,
    /// The message it becomes.
    pub message: NewMessage,
}

impl Store {
    /// Puts `items` (id, message) into session `sid`'s inbox; per item, `true` when it was
    /// added, `false` when the inbox held that id already (a re-send).
    pub async fn inbox_put(&self, sid: &str, items: &[(&str, &NewMessage)]) -> Result<Vec<bool>> {
        let keys = self.session_keys(sid)?;
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let mut bodies = Vec::with_capacity(items.len());
        for (id, message) in items {
            validate_id("inbox item", id)?;
            bodies.push((*id, self.message_body(message)?));
        }
        let call = scripts::inbox_put(&keys, sid, self.config().limits.message, &bodies);
        let reply: Vec<String> = self.invoke_session(sid, &call).await?;
        let (wal_id, added) = split_reply(reply)?;
        if !wal_id.is_empty() {
            self.settle(keys.partition, &wal_id).await?;
        }
        Ok(added.into_iter().map(|a| a == 1).collect())
    }

    /// The lease holder (`owner` with `token`) takes up to `limit` undelivered items, oldest
    /// first: pending ones, ones claimed under an older token, and ones it claimed already.
    /// [`Error::Fenced`] when it does not hold the lease.
    pub async fn inbox_claim(
        &self,
        sid: &str,
        owner: &str,
        token: u64,
        limit: usize,
    ) -> Result<Vec<InboxItem>> {
        let keys = self.session_keys(sid)?;
        if limit == 0 {
            return Err(Error::InvalidInput("claim limit must be at least 1".into()));
        }
        let call = scripts::inbox_claim(&keys, sid, owner, token, limit);
        let items: Vec<String> = self.invoke_session(sid, &call).await?;
        items.iter().map(|i| parse_item(i)).collect()
    }

    /// The lease holder appends items `ids` to the transcript, in that order, and marks them
    /// delivered in the same atomic step; returns their seqs (an item delivered already
    /// keeps its seq and is not appended again). At most 500 ids a call.
    pub async fn inbox_deliver(
        &self,
        sid: &str,
        owner: &str,
        token: u64,
        ids: &[&str],
    ) -> Result<Vec<u64>> {
        let keys = self.session_keys(sid)?;
        if ids.is_empty() || ids.len() > 500 {
            return Err(Error::InvalidInput(
                "deliver 1 to 500 inbox items at a time".into(),
            ));
        }
        for id in ids {
            validate_id("inbox item", id)?;
        }
        let limit = self.config().limits.message;
        let call = scripts::inbox_deliver(&keys, sid, owner, token, limit, ids);
        let reply: Vec<String> = self.invoke_session(sid, &call).await?;
        let (wal_id, seqs) = split_reply(reply)?;
        if !wal_id.is_empty() {
            self.settle(keys.partition, &wal_id).await?;
        }
        Ok(seqs)
    }

    /// Drops undelivered items `ids` (delivered and unknown ones are left alone); returns
    /// how many it dropped.
    pub async fn inbox_void(&self, sid: &str, ids: &[&str]) -> Result<u64> {
        let keys = self.session_keys(sid)?;
        if ids.is_empty() {
            return Ok(0);
        }
        for id in ids {
            validate_id("inbox item", id)?;
        }
        let call = scripts::inbox_void(&keys, sid, ids);
        let (voided, wal_id): (u64, String) = self.invoke_session(sid, &call).await?;
        if !wal_id.is_empty() {
            self.settle(keys.partition, &wal_id).await?;
        }
        Ok(voided)
    }

    /// Every item of session `sid`'s inbox, in arrival order.
    pub async fn inbox(&self, sid: &str) -> Result<Vec<InboxItem>> {
        let keys = self.session_keys(sid)?;
        let values: Vec<String> = self
            .read_run(sid, redis::cmd("HVALS").arg(&keys.inbox))
            .await?;
        let mut items = values
            .iter()
            .map(|v| parse_item(v))
            .collect::<Result<Vec<_>>>()?;
        items.sort_by_key(|i| i.n);
        Ok(items)
    }
}

/// An item as the scripts store it.
fn parse_item(text: &str) -> Result<InboxItem> {
    serde_json::from_str(text).map_err(|e| Error::MalformedJson {
        what: "stored inbox item",
        detail: e.to_string(),
    })
}

/// A reply `{wal entry id or '', numbers...}`.
fn split_reply(reply: Vec<String>) -> Result<(String, Vec<u64>)> {
    let mut words = reply.into_iter();
    let wal_id = words.next().unwrap_or_default();
    let numbers = words
        .map(|w| {
            w.parse::<u64>()
                .map_err(|_| Error::redis(format!("unexpected script reply {w:?}")))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((wal_id, numbers))
}
