//! User-attributed data: set, get, delete, forget.

use super::*;

twins! {
    impl PyStore;

    /// Stores a user-attributed value (JSON).
    fn set_user_value / aset_user_value(
        self,
        py,
        user: String,
        key: String,
        value: Bound<'_, PyAny>,
    ) -> () {
        let v = py_to_json(&value)?;
        let s = self.s(py)?;
        async move { s.set_user_value(&user, &key, &v).await }
    }

    /// A user-attributed value, or None.
    fn user_value / auser_value(self, py, user: String, key: String) -> OptJson {
        let s = self.s(py)?;
        async move { s.user_value(&user, &key).await.map(OptJson) }
    }

    /// Every value stored for the user, by key (an empty dict when none).
    fn user_values / auser_values(self, py, user: String) -> Json {
        let s = self.s(py)?;
        async move { s.user_values(&user).await.map(|v| to_json(&v)) }
    }

    /// Deletes one user value; False when there was none.
    fn delete_user_value / adelete_user_value(self, py, user: String, key: String) -> bool {
        let s = self.s(py)?;
        async move { s.delete_user_value(&user, &key).await }
    }

    /// Erases everything stored for the user (Redis now, SQLite at the next flush); returns
    /// the receipt.
    fn forget_user / aforget_user(self, py, user: String) -> Json {
        let s = self.s(py)?;
        async move { s.forget_user(&user).await.map(|r| to_json(&r)) }
    }
}
