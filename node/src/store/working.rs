//! Working state: versioned values with compare-and-set.

use super::*;

/// `working`'s result.
#[napi(object)]
pub struct Working {
    /// The session's working-state version.
    pub version: i64,
    /// Every value, by key.
    pub values: Value,
}

#[napi]
impl NativeStore {
    /// Sets a working-state value (JSON); with `ifVersion`, only if the session's version
    /// is still that (else `Conflict`). Resolves to the new version.
    #[napi]
    pub async fn set_working(
        &self,
        sid: String,
        key: String,
        value: Value,
        if_version: Option<f64>,
    ) -> Result<i64> {
        let r = match if_version {
            Some(v) => {
                let v = whole("ifVersion", v)?;
                self.store
                    .set_working_if_version(&sid, &key, &value, v)
                    .await
            }
            None => self.store.set_working(&sid, &key, &value).await,
        };
        r.map(num).map_err(|e| self.fail(e))
    }

    /// One working-state value, or null.
    #[napi]
    pub async fn get_working(&self, sid: String, key: String) -> Result<Option<Value>> {
        self.store
            .get_working(&sid, &key)
            .await
            .map_err(|e| self.fail(e))
    }

    /// All working state: `{ version, values }`.
    #[napi]
    pub async fn working(&self, sid: String) -> Result<Working> {
        let w = self.store.working(&sid).await.map_err(|e| self.fail(e))?;
        Ok(Working {
            version: num(w.version),
            values: Value::Object(w.values),
        })
    }

    /// Deletes a working-state key; resolves to the new version.
    #[napi]
    pub async fn delete_working(&self, sid: String, key: String) -> Result<i64> {
        self.store
            .delete_working(&sid, &key)
            .await
            .map(num)
            .map_err(|e| self.fail(e))
    }

    /// Clears all working state; resolves to the new version.
    #[napi]
    pub async fn clear_working(&self, sid: String) -> Result<i64> {
        self.store
            .clear_working(&sid)
            .await
            .map(num)
            .map_err(|e| self.fail(e))
    }
}
