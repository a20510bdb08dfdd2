//! Decisions: record, outcomes, the incomplete ones, consumers and dead letters.

use super::*;
use crate::args::{opt, Whole};

twins! {
    impl PyStore;

    /// Records a decision in the write-ahead decision log; returns its id.
    #[pyo3(signature = (sid, decision, rationale, *, action = None, meta = None))]
    fn record_decision / arecord_decision(
        self,
        py,
        sid: String,
        decision: String,
        rationale: String,
        action: Option<String>,
        meta: Option<Bound<'_, PyAny>>,
    ) -> String {
        let d = new_decision(decision, rationale, action, opt_json(meta.as_ref())?);
        let s = self.s(py)?;
        async move { s.record_decision(&sid, &d).await }
    }

    /// Records the outcome of a decision; False when it had one already.
    fn record_outcome / arecord_outcome(self, py, decision_id: String, outcome: String) -> bool {
        let s = self.s(py)?;
        async move { s.record_outcome(&decision_id, &outcome).await }
    }

    /// Decisions without an outcome (all sessions, or one), oldest first.
    #[pyo3(signature = (sid = None))]
    fn incomplete_decisions / aincomplete_decisions(self, py, sid: Option<String>) -> Json {
        let s = self.s(py)?;
        async move {
            s.incomplete_decisions(sid.as_deref())
                .await
                .map(|v| to_json(&v))
        }
    }

    /// Joins consumer group `group` as `name` on every partition's decisions stream.
    /// `from_start`: a group created now starts from the oldest retained entry. Times are
    /// seconds; `max_deliveries` (default 5) deliveries before an entry is dead-lettered,
    /// `count` (default 100) entries a read per partition.
    #[pyo3(signature = (group, name, *, from_start = false, min_idle = 30.0, max_deliveries = None, block = 2.0, count = None))]
    fn consumer / aconsumer(
        self,
        py,
        group: String,
        name: String,
        from_start: bool,
        min_idle: f64,
        max_deliveries: Option<Whole<'_>>,
        block: f64,
        count: Option<Whole<'_>>,
    ) -> PyConsumer {
        let max_deliveries = opt(&max_deliveries, "max_deliveries")?;
        let count = opt(&count, "count")?;
        let o = consumer_options(from_start, min_idle, max_deliveries, block, count)?;
        let s = self.s(py)?;
        let store = self.derived(self.durability, self.fence);
        let at = Arc::clone(&self.at);
        async move {
            s.consumer(&group, &name, o.clone())
                .await
                .map(|c| PyConsumer::new(c, Box::new(move |py| store.s(py)), at, o))
        }
    }

    /// Up to `count` (default 100) dead letters per partition.
    #[pyo3(signature = (count = None))]
    fn dead_letters / adead_letters(self, py, count: Option<Whole<'_>>) -> Json {
        let count = opt(&count, "count")?.unwrap_or(100);
        let s = self.s(py)?;
        async move { s.dead_letters(count).await.map(|v| to_json(&v)) }
    }
}

fn new_decision(
    decision: String,
    rationale: String,
    action: Option<String>,
    meta: Option<Value>,
) -> NewDecision {
    let mut d = NewDecision::new(decision, rationale);
    if let Some(a) = action {
        d = d.action(a);
    }
    if let Some(m) = meta {
        d = d.meta(m);
    }
    d
}

/// A consumer's options: `max_deliveries` and `count` keep the core's defaults when not given.
fn consumer_options(
    from_start: bool,
    min_idle: f64,
    max_deliveries: Option<u32>,
    block: f64,
    count: Option<usize>,
) -> PyResult<ConsumerOptions> {
    let mut o = ConsumerOptions::new()
        .start(if from_start {
            StartFrom::Beginning
        } else {
            StartFrom::Now
        })
        .min_idle(secs("min_idle", min_idle)?)
        .block(secs("block", block)?);
    if let Some(n) = max_deliveries {
        o = o.max_deliveries(n);
    }
    if let Some(n) = count {
        o = o.count(n);
    }
    Ok(o)
}
