//! The inbox: put items for a session, the run lease holder claims and delivers them.

use agentstate::NewMessage;

use super::*;

#[napi]
impl NativeStore {
    /// Puts items (`{ itemId, role, content?, ... }`) into the session's inbox in one atomic
    /// step; per item, true when added, false when the inbox held that id already.
    #[napi]
    pub async fn inbox_put(&self, sid: String, items: Vec<Value>) -> Result<Vec<bool>> {
        let mut parsed: Vec<(String, NewMessage)> = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            let Value::Object(mut fields) = item else {
                return Err(errors::invalid(format!(
                    "items[{i}] must be an object with itemId and a message's fields"
                )));
            };
            let Some(Value::String(id)) = fields.remove("itemId") else {
                return Err(errors::invalid(format!(
                    "items[{i}].itemId (a string) is required"
                )));
            };
            let m = super::messages::message(&format!("items[{i}]"), Value::Object(fields))?;
            parsed.push((id, m));
        }
        let refs: Vec<(&str, &NewMessage)> =
            parsed.iter().map(|(id, m)| (id.as_str(), m)).collect();
        self.store
            .inbox_put(&sid, &refs)
            .await
            .map_err(|e| self.fail(e))
    }

    /// The lease holder (`owner` with `token`) takes up to `limit` (100) undelivered items.
    #[napi]
    pub async fn inbox_claim(
        &self,
        sid: String,
        owner: String,
        token: f64,
        limit: Option<u32>,
    ) -> Result<Vec<Value>> {
        let token = whole("token", token)?;
        let v = self
            .store
            .inbox_claim(&sid, &owner, token, limit.unwrap_or(100) as usize)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(v.iter().map(js).collect())
    }

    /// The lease holder appends items `itemIds` to the transcript in that order, marking them
    /// delivered in the same atomic step; resolves to their seqs.
    #[napi]
    pub async fn inbox_deliver(
        &self,
        sid: String,
        owner: String,
        token: f64,
        item_ids: Vec<String>,
    ) -> Result<Vec<i64>> {
        let token = whole("token", token)?;
        let ids: Vec<&str> = item_ids.iter().map(String::as_str).collect();
        let seqs = self
            .store
            .inbox_deliver(&sid, &owner, token, &ids)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(seqs.into_iter().map(num).collect())
    }

    /// Drops undelivered items `itemIds`; resolves to how many it dropped.
    #[napi]
    pub async fn inbox_void(&self, sid: String, item_ids: Vec<String>) -> Result<i64> {
        let ids: Vec<&str> = item_ids.iter().map(String::as_str).collect();
        self.store
            .inbox_void(&sid, &ids)
            .await
            .map(num)
            .map_err(|e| self.fail(e))
    }

    /// Every item of the session's inbox in arrival order.
    #[napi]
    pub async fn inbox(&self, sid: String) -> Result<Vec<Value>> {
        let v = self.store.inbox(&sid).await.map_err(|e| self.fail(e))?;
        Ok(v.iter().map(js).collect())
    }
}
