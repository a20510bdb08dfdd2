//! Rounds: the `StateService` contract — state snapshots by user, session and round id.

use serde_json::Value;

use crate::error::{within_limit, Error, Result};
use crate::keys::validate_id;
use crate::scripts;
use crate::store::Store;

/// The session id `save_state`/`export_state` use when none is given.
pub const DEFAULT_ROUND_SESSION: &str = "default";

/// The largest round id: Lua numbers (doubles) hold integers exactly only up to 2^53 - 1, and
/// the rounds script computes with them.
pub const MAX_ROUND_ID: u64 = (1 << 53) - 1;

fn validate_round(round: Option<u64>) -> Result<()> {
    match round {
        Some(r) if r > MAX_ROUND_ID => Err(Error::InvalidInput(format!(
            "round id {r} is over the maximum {MAX_ROUND_ID}"
        ))),
        _ => Ok(()),
    }
}

impl Store {
    /// Saves `state` for `user` in `session` (default `"default"`): `round = None` appends
    /// `max + 1` (1 when empty), an explicit round overwrites. Returns the round id. The
    /// stored value is a copy: later changes to `state` do not leak in.
    pub async fn save_state(
        &self,
        user: &str,
        state: &Value,
        session: Option<&str>,
        round: Option<u64>,
    ) -> Result<u64> {
        validate_id("user", user)?;
        let session = session.unwrap_or(DEFAULT_ROUND_SESSION);
        validate_id("session", session)?;
        validate_round(round)?;
        let text = state.to_string();
        let limit = self.config().limits.state;
        within_limit("state", text.len(), limit)?;
        let p = self.keys().partition(user);
        let call = scripts::save_round(self.keys(), user, session, round, &text, limit);
        let (round, wal_id): (u64, String) = self.invoke(&call).await?;
        self.settle(p, &wal_id).await?;
        Ok(round)
    }

    /// The state of `round` (the latest when `None`), or `None` when absent.
    pub async fn export_state(
        &self,
        user: &str,
        session: Option<&str>,
        round: Option<u64>,
    ) -> Result<Option<Value>> {
        validate_id("user", user)?;
        let session = session.unwrap_or(DEFAULT_ROUND_SESSION);
        validate_id("session", session)?;
        validate_round(round)?;
        let call = scripts::read_round(self.keys(), user, session, round);
        let text: Option<String> = self.invoke(&call).await?;
        text.map(|t| serde_json::from_str(&t).map_err(Error::from))
            .transpose()
    }
}
