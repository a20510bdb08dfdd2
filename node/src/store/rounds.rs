//! StateService rounds: save and export a user's state.

use super::*;

#[napi]
impl NativeStore {
    /// Saves `state` for `userId` in `sessionId` (default "default"): no `roundId` appends
    /// max + 1 (1 when empty), an explicit one overwrites. Resolves to the round id.
    #[napi]
    pub async fn save_state(
        &self,
        user_id: String,
        state: Value,
        session_id: Option<String>,
        round_id: Option<f64>,
    ) -> Result<i64> {
        let round = round_id.map(|r| whole("roundId", r)).transpose()?;
        self.store
            .save_state(&user_id, &state, session_id.as_deref(), round)
            .await
            .map(num)
            .map_err(|e| self.fail(e))
    }

    /// The state of `roundId` (the latest when absent), or null.
    #[napi]
    pub async fn export_state(
        &self,
        user_id: String,
        session_id: Option<String>,
        round_id: Option<f64>,
    ) -> Result<Option<Value>> {
        let round = round_id.map(|r| whole("roundId", r)).transpose()?;
        self.store
            .export_state(&user_id, session_id.as_deref(), round)
            .await
            .map_err(|e| self.fail(e))
    }
}
