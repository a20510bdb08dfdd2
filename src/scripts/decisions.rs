//! Decision scripts: record, outcome, dead letter.

use super::*;

/// The decision `record_decision.lua` records.
#[derive(Debug, Clone)]
pub struct DecisionArgs<'a> {
    /// What was decided.
    pub decision: &'a str,
    /// Why.
    pub rationale: &'a str,
    /// Planned action, `""` for none.
    pub planned_action: &'a str,
    /// Metadata JSON object.
    pub meta: &'a str,
}

/// `record_decision.lua`: appends a decision to the partition's decisions stream and keeps
/// it open until its outcome. A [`BatchItem`]: `.call()` for the lone call.
pub fn record_decision(
    ns: &Keys,
    s: impl Into<Arc<SessionKeys>>,
    sid: &str,
    d: &DecisionArgs,
) -> BatchItem {
    let s = s.into();
    let p = s.partition;
    BatchItem {
        op: "decision",
        script: &RECORD_DECISION,
        session: s,
        extra_keys: vec![ns.decisions(p), ns.open_decisions(p)],
        args: vec![
            sid.to_string(),
            p.to_string(),
            d.decision.to_string(),
            d.rationale.to_string(),
            d.planned_action.to_string(),
            d.meta.to_string(),
        ],
        idempotent: false,
    }
}

/// `record_outcome.lua`: closes decision `decision_id` (entry `entry` of partition `p`).
pub fn record_outcome(
    ns: &Keys,
    p: u32,
    decision_id: &str,
    entry: &str,
    outcome: &str,
) -> ScriptCall {
    ScriptCall::new(
        &RECORD_OUTCOME,
        &[&ns.decisions(p), &ns.open_decisions(p), &ns.committed(p)],
    )
    .arg(decision_id)
    .arg(entry)
    .arg(outcome)
}

/// `dead_letter.lua`: moves entries `ids` of partition `p` to its dead-letter stream and
/// acks them for `group`.
pub fn dead_letter(ns: &Keys, p: u32, group: &str, reason: &str, ids: &[&str]) -> ScriptCall {
    ScriptCall::new(&DEAD_LETTER, &[&ns.decisions(p), &ns.dead_letters(p)])
        .arg(group)
        .arg(reason)
        .arg(ids)
}
