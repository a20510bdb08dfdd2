//! Working state: ephemeral JSON values per session with a per-session version for
//! optimistic concurrency. Never durable by itself (a checkpoint promotes it).

use serde_json::{Map, Value};

use crate::error::{within_limit, Error, Result};
use crate::keys::validate_id;
use crate::scripts;
use crate::store::Store;

/// All working state of a session with the version it was read at.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkingState {
    /// The session's working-state version.
    pub version: u64,
    /// Key → JSON value.
    pub values: Map<String, Value>,
}

enum WriteOp<'a> {
    Set(&'a str, &'a Value),
    Delete(&'a str),
    Clear,
}

impl Store {
    /// Sets `key` to `value`; returns the new version.
    pub async fn set_working(&self, sid: &str, key: &str, value: &Value) -> Result<u64> {
        self.write_working(sid, WriteOp::Set(key, value), None)
            .await
    }

    /// Sets `key` only if the session's version is still `version`; otherwise
    /// [`Error::Conflict`] with the current version. Returns the new version.
    pub async fn set_working_if_version(
        &self,
        sid: &str,
        key: &str,
        value: &Value,
        version: u64,
    ) -> Result<u64> {
        self.write_working(sid, WriteOp::Set(key, value), Some(version))
            .await
    }

    /// Deletes `key`; returns the new version.
    pub async fn delete_working(&self, sid: &str, key: &str) -> Result<u64> {
        self.write_working(sid, WriteOp::Delete(key), None).await
    }

    /// Deletes every key; returns the new version.
    pub async fn clear_working(&self, sid: &str) -> Result<u64> {
        self.write_working(sid, WriteOp::Clear, None).await
    }

    async fn write_working(
        &self,
        sid: &str,
        op: WriteOp<'_>,
        if_version: Option<u64>,
    ) -> Result<u64> {
        let keys = self.session_keys(sid)?;
        let limit = self.config().limits.working_value;
        let (name, key, value) = match op {
            WriteOp::Set(key, value) => {
                validate_id("working-state key", key)?;
                let text = value.to_string();
                within_limit("working value", text.len(), limit)?;
                ("set", key, text)
            }
            WriteOp::Delete(key) => {
                validate_id("working-state key", key)?;
                ("del", key, String::new())
            }
            WriteOp::Clear => ("clear", "", String::new()),
        };
        let item = scripts::write_working(
            keys,
            sid,
            name,
            key,
            &value,
            if_version,
            limit,
            self.fence(),
        );
        self.invoke_grouped(sid, item).await
    }

    /// The value of `key`, or `None` (one EVALSHA; unknown session is an error).
    pub async fn get_working(&self, sid: &str, key: &str) -> Result<Option<Value>> {
        validate_id("working-state key", key)?;
        let keys = self.session_keys(sid)?;
        let call = scripts::read_working(&keys, sid, Some(key));
        let (_version, value): (u64, Option<String>) = self.invoke_session(sid, &call).await?;
        value
            .map(|v| serde_json::from_str(&v).map_err(Error::from))
            .transpose()
    }

    /// Every key with the version (one EVALSHA).
    pub async fn working(&self, sid: &str) -> Result<WorkingState> {
        let keys = self.session_keys(sid)?;
        let call = scripts::read_working(&keys, sid, None);
        let (version, pairs): (u64, Vec<(String, String)>) =
            self.invoke_session(sid, &call).await?;
        let mut values = Map::new();
        for (k, v) in pairs {
            values.insert(k, serde_json::from_str(&v)?);
        }
        Ok(WorkingState { version, values })
    }
}
