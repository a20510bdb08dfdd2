//! Working state: versioned values with compare-and-set.

use super::*;
use crate::args::{opt, Whole};

twins! {
    impl PyStore;

    /// Sets a working-state value (JSON); with `if_version`, only if the session's version is
    /// still that (else `Conflict`). Returns the new version.
    #[pyo3(signature = (sid, key, value, *, if_version = None))]
    fn set_working / aset_working(
        self,
        py,
        sid: String,
        key: String,
        value: Bound<'_, PyAny>,
        if_version: Option<Whole<'_>>,
    ) -> u64 {
        let if_version = opt(&if_version, "if_version")?;
        let v = py_to_json(&value)?;
        let s = self.s(py)?;
        async move { set_working(&s, &sid, &key, &v, if_version).await }
    }

    /// One working-state value, or None.
    fn get_working / aget_working(self, py, sid: String, key: String) -> OptJson {
        let s = self.s(py)?;
        async move { s.get_working(&sid, &key).await.map(OptJson) }
    }

    /// All working state: `{"version": n, "values": {...}}`.
    fn working / aworking(self, py, sid: String) -> Json {
        let s = self.s(py)?;
        async move { s.working(&sid).await.map(working_json) }
    }

    /// Deletes a working-state key; returns the new version.
    fn delete_working / adelete_working(self, py, sid: String, key: String) -> u64 {
        let s = self.s(py)?;
        async move { s.delete_working(&sid, &key).await }
    }

    /// Clears all working state; returns the new version.
    fn clear_working / aclear_working(self, py, sid: String) -> u64 {
        let s = self.s(py)?;
        async move { s.clear_working(&sid).await }
    }
}

fn working_json(w: agentstate::WorkingState) -> Json {
    Json(serde_json::json!({"version": w.version, "values": Value::Object(w.values)}))
}
