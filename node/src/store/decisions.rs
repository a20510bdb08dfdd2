//! Decisions: record, outcomes, the incomplete ones, dead letters.

use agentstate::NewDecision;

use super::*;

/// `recordDecision`'s options.
#[napi(object)]
#[derive(Default)]
pub struct DecisionOptions {
    /// The action taken.
    pub action: Option<String>,
    /// Free-form metadata (JSON).
    pub meta: Option<Value>,
}

#[napi]
impl NativeStore {
    /// Records a decision in the write-ahead decision log; resolves to its id.
    #[napi]
    pub async fn record_decision(
        &self,
        sid: String,
        decision: String,
        rationale: String,
        options: Option<DecisionOptions>,
    ) -> Result<String> {
        let o = options.unwrap_or_default();
        let mut d = NewDecision::new(decision, rationale);
        if let Some(a) = o.action {
            d = d.action(a);
        }
        if let Some(m) = o.meta {
            d = d.meta(m);
        }
        self.store
            .record_decision(&sid, &d)
            .await
            .map_err(|e| self.fail(e))
    }

    /// Records the outcome of a decision; false when it had one already.
    #[napi]
    pub async fn record_outcome(&self, decision_id: String, outcome: String) -> Result<bool> {
        self.store
            .record_outcome(&decision_id, &outcome)
            .await
            .map_err(|e| self.fail(e))
    }

    /// Decisions without an outcome (all sessions, or one), oldest first.
    #[napi]
    pub async fn incomplete_decisions(&self, sid: Option<String>) -> Result<Vec<Value>> {
        let v = self
            .store
            .incomplete_decisions(sid.as_deref())
            .await
            .map_err(|e| self.fail(e))?;
        Ok(v.iter().map(js).collect())
    }

    /// Up to `count` (100) dead letters per partition.
    #[napi]
    pub async fn dead_letters(&self, count: Option<u32>) -> Result<Vec<Value>> {
        let v = self
            .store
            .dead_letters(count.unwrap_or(100) as usize)
            .await
            .map_err(|e| self.fail(e))?;
        Ok(v.iter().map(js).collect())
    }
}
