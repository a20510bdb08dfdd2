//! StateService rounds: save and export a user's state.

use super::*;
use crate::args::{opt, Whole};

twins! {
    impl PyStore;

    /// Saves `state` for `user_id` in `session_id` (default `"default"`): no `round_id`
    /// appends max + 1 (1 when empty), an explicit one overwrites. Returns the round id.
    #[pyo3(signature = (user_id, state, session_id = None, round_id = None))]
    fn save_state / asave_state(
        self,
        py,
        user_id: String,
        state: Bound<'_, PyAny>,
        session_id: Option<String>,
        round_id: Option<Whole<'_>>,
    ) -> u64 {
        let round_id = opt(&round_id, "round_id")?;
        let v = py_to_json(&state)?;
        let s = self.s(py)?;
        async move {
            s.save_state(&user_id, &v, session_id.as_deref(), round_id)
                .await
        }
    }

    /// The state of `round_id` (the latest when None), or None when absent.
    #[pyo3(signature = (user_id, session_id = None, round_id = None))]
    fn export_state / aexport_state(
        self,
        py,
        user_id: String,
        session_id: Option<String>,
        round_id: Option<Whole<'_>>,
    ) -> OptJson {
        let round_id = opt(&round_id, "round_id")?;
        let s = self.s(py)?;
        async move {
            s.export_state(&user_id, session_id.as_deref(), round_id)
                .await
                .map(OptJson)
        }
    }
}
