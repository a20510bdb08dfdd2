//! User-attributed data: set, get, delete, forget.

use super::*;

#[napi]
impl NativeStore {
    /// Stores a user-attributed value (JSON).
    #[napi]
    pub async fn set_user_value(&self, user: String, key: String, value: Value) -> Result<()> {
        self.store
            .set_user_value(&user, &key, &value)
            .await
            .map_err(|e| self.fail(e))
    }

    /// A user-attributed value, or null.
    #[napi]
    pub async fn user_value(&self, user: String, key: String) -> Result<Option<Value>> {
        self.store
            .user_value(&user, &key)
            .await
            .map_err(|e| self.fail(e))
    }

    /// Every value stored for the user, by key (an empty object when none).
    #[napi]
    pub async fn user_values(&self, user: String) -> Result<Value> {
        let v = self
            .store
            .user_values(&user)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(serde_json::to_value(v).unwrap_or(Value::Null))
    }

    /// Deletes one user value; false when there was none.
    #[napi]
    pub async fn delete_user_value(&self, user: String, key: String) -> Result<bool> {
        self.store
            .delete_user_value(&user, &key)
            .await
            .map_err(|e| self.fail(e))
    }

    /// Erases everything stored for the user (Redis now, SQLite at the next flush);
    /// resolves to the receipt.
    #[napi]
    pub async fn forget_user(&self, user: String) -> Result<Value> {
        let r = self
            .store
            .forget_user(&user)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(js(&r))
    }
}
