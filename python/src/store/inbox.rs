//! The inbox: put items for a session, the run lease holder claims and delivers them.

use super::*;
use crate::args::{opt, Whole};

twins! {
    impl PyStore;

    /// Puts items (dicts: ``item_id`` and a message — ``role`` required, ``content``,
    /// ``name``, ``tool_calls``, ``tool_call_id``, ``round_index``, ``meta`` optional) into
    /// session `sid`'s inbox in one atomic step; per item, True when it was added, False when
    /// the inbox held that id already (a re-send, a no-op).
    fn inbox_put / ainbox_put(self, py, sid: String, items: Vec<Bound<'_, PyAny>>) -> Vec<bool> {
        let items = items.iter().map(inbox_item).collect::<PyResult<Vec<_>>>()?;
        let s = self.s(py)?;
        async move {
            let refs: Vec<(&str, &NewMessage)> =
                items.iter().map(|(id, m)| (id.as_str(), m)).collect();
            s.inbox_put(&sid, &refs).await
        }
    }

    /// The lease holder (`owner` with `token`) takes up to `limit` (default 100) undelivered items, oldest
    /// first (pending ones, ones claimed under an older token, its own claims): a list of
    /// item dicts. `Fenced` when it does not hold the lease.
    #[pyo3(signature = (sid, owner, token, limit = None))]
    fn inbox_claim / ainbox_claim(
        self,
        py,
        sid: String,
        owner: String,
        token: Whole<'_>,
        limit: Option<Whole<'_>>,
    ) -> Json {
        let (token, limit) = (token.get("token")?, opt(&limit, "limit")?.unwrap_or(100));
        let s = self.s(py)?;
        async move { s.inbox_claim(&sid, &owner, token, limit).await.map(|v| to_json(&v)) }
    }

    /// The lease holder appends items `item_ids` to the transcript, in that order, marking
    /// them delivered in the same atomic step; returns their seqs (an item delivered already
    /// keeps its seq and is not appended again). 1 to 500 ids a call.
    fn inbox_deliver / ainbox_deliver(
        self,
        py,
        sid: String,
        owner: String,
        token: Whole<'_>,
        item_ids: Vec<String>,
    ) -> Vec<u64> {
        let token = token.get("token")?;
        let s = self.s(py)?;
        async move {
            let ids: Vec<&str> = item_ids.iter().map(String::as_str).collect();
            s.inbox_deliver(&sid, &owner, token, &ids).await
        }
    }

    /// Drops undelivered items `item_ids` (delivered and unknown ones are left alone);
    /// returns how many it dropped.
    fn inbox_void / ainbox_void(self, py, sid: String, item_ids: Vec<String>) -> u64 {
        let s = self.s(py)?;
        async move {
            let ids: Vec<&str> = item_ids.iter().map(String::as_str).collect();
            s.inbox_void(&sid, &ids).await
        }
    }

    /// Every item of session `sid`'s inbox in arrival order: dicts with ``item_id``, ``n``,
    /// ``state`` (``pending``, ``claimed``, ``delivered``, ``void``), ``token``, ``seq``,
    /// ``put_at`` and ``message``.
    fn inbox / ainbox(self, py, sid: String) -> Json {
        let s = self.s(py)?;
        async move { s.inbox(&sid).await.map(|v| to_json(&v)) }
    }
}

/// One item of `inbox_put`: its ``item_id`` and the message the rest of the dict is.
fn inbox_item(obj: &Bound<'_, PyAny>) -> PyResult<(String, NewMessage)> {
    let Value::Object(mut fields) = py_to_json(obj)? else {
        return Err(errors::InvalidInput::new_err(
            "inbox item: a dict with item_id and a message's fields",
        ));
    };
    let Some(Value::String(id)) = fields.remove("item_id") else {
        return Err(errors::InvalidInput::new_err(
            "inbox item: item_id (a str) is required",
        ));
    };
    let message = serde_json::from_value(Value::Object(fields))
        .map_err(|e| errors::InvalidInput::new_err(format!("inbox item {id}: {e}")))?;
    Ok((id, message))
}
