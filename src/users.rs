//! User-attributed data: values per user in their own hash, erasable with `forget_user` in
//! O(that user's data). The wal carries references (user, key), never the values.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::error::{within_limit, Error, Result};
use crate::keys::validate_id;
use crate::scripts;
use crate::store::Store;

/// How long `forget_user`'s tombstone lives: far longer than the window it closes (a
/// forget after a Redis loss that the daemon has not flushed when it re-seeds user data).
const FORGET_TOMBSTONE_TTL_SECS: u64 = 24 * 3600;

/// What `forget_user` removed, and where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ForgetReceipt {
    /// The user forgotten.
    pub user_id: String,
    /// The Redis key that held the user's values (now deleted).
    pub redis_key: String,
    /// Names of the values removed from Redis.
    pub removed_keys: Vec<String>,
    /// The wal entry that makes the spill daemon erase the user's rows from SQLite.
    pub wal_entry: String,
    /// The long-term memory namespaces erased, those naming the user at label
    /// [`Config::memory_user_label`](crate::Config::memory_user_label).
    pub memory_namespaces: Vec<Vec<String>>,
}

impl Store {
    /// Stores `value` under `key` for `user`.
    pub async fn set_user_value(&self, user: &str, key: &str, value: &Value) -> Result<()> {
        validate_id("user", user)?;
        validate_id("user data key", key)?;
        let text = value.to_string();
        let limit = self.config().limits.state;
        within_limit("user value", text.len(), limit)?;
        let call = scripts::set_user_value(self.keys(), user, key, &text, limit);
        let wal_id: String = self.invoke(&call).await?;
        self.settle(self.keys().partition(user), &wal_id).await
    }

    /// The value under `key` for `user`, if any.
    pub async fn user_value(&self, user: &str, key: &str) -> Result<Option<Value>> {
        validate_id("user", user)?;
        validate_id("user data key", key)?;
        let mut conn = self.conn().await?;
        let text: Option<String> = redis::cmd("HGET")
            .arg(self.keys().user(user))
            .arg(key)
            .query_async(&mut conn)
            .await?;
        text.map(|t| serde_json::from_str(&t).map_err(Error::from))
            .transpose()
    }

    /// Every value stored for `user`, by key (empty when none).
    pub async fn user_values(&self, user: &str) -> Result<BTreeMap<String, Value>> {
        validate_id("user", user)?;
        let mut conn = self.conn().await?;
        let all: Vec<(String, String)> = redis::cmd("HGETALL")
            .arg(self.keys().user(user))
            .query_async(&mut conn)
            .await?;
        all.into_iter()
            .map(|(k, t)| Ok((k, serde_json::from_str(&t)?)))
            .collect()
    }

    /// Deletes one value; `true` when there was one.
    pub async fn delete_user_value(&self, user: &str, key: &str) -> Result<bool> {
        validate_id("user", user)?;
        validate_id("user data key", key)?;
        let call = scripts::delete_user_value(self.keys(), user, key);
        let (removed, wal_id): (u8, String) = self.invoke(&call).await?;
        if removed == 1 {
            self.settle(self.keys().partition(user), &wal_id).await?;
        }
        Ok(removed == 1)
    }

    /// Erases everything stored for `user` (GDPR): the user's values and the long-term memory
    /// namespaces that name the user (see [`Store::forget_user_memory`]), from Redis now,
    /// from the durable tier when the spill daemon applies the wal entries. Touches no
    /// session, checkpoint or decision.
    pub async fn forget_user(&self, user: &str) -> Result<ForgetReceipt> {
        validate_id("user", user)?;
        let p = self.keys().partition(user);
        let redis_key = self.keys().user(user);
        let call = scripts::forget_user(self.keys(), user, FORGET_TOMBSTONE_TTL_SECS);
        let (mut removed_keys, wal_entry): (Vec<String>, String) = self.invoke(&call).await?;
        removed_keys.sort();
        self.settle(p, &wal_entry).await?;
        let memory_namespaces = self
            .forget_user_memory(user, self.config().memory_user_label)
            .await?;
        Ok(ForgetReceipt {
            user_id: user.to_string(),
            redis_key,
            removed_keys,
            wal_entry,
            memory_namespaces,
        })
    }
}
