//! Decisions: the write-ahead decision log. A decision goes to its session's partition
//! `decisions` stream (read by consumer groups and the flusher) and stays in the partition's
//! open set until an outcome is recorded, so crash recovery can list incomplete decisions.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{within_limit, Error, Result};
use crate::records::{parse_stream_id, Stream};
use crate::scripts;
use crate::store::Store;

/// A decision to record.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct NewDecision {
    /// What was decided.
    pub decision: String,
    /// Why.
    pub rationale: String,
    /// What the agent plans to do about it.
    pub planned_action: Option<String>,
    /// Free-form metadata (JSON object).
    pub meta: Option<Value>,
}

impl NewDecision {
    /// A decision with its rationale.
    pub fn new(decision: impl Into<String>, rationale: impl Into<String>) -> Self {
        NewDecision {
            decision: decision.into(),
            rationale: rationale.into(),
            ..Default::default()
        }
    }
    /// Sets the planned action.
    pub fn action(mut self, action: impl Into<String>) -> Self {
        self.planned_action = Some(action.into());
        self
    }
    /// Sets the metadata.
    pub fn meta(mut self, meta: Value) -> Self {
        self.meta = Some(meta);
        self
    }
}

/// A recorded decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// `<partition>:<stream entry id>`.
    pub id: String,
    /// The session that decided.
    pub session_id: String,
    /// What was decided.
    pub decision: String,
    /// Why.
    pub rationale: String,
    /// What the agent planned to do.
    pub planned_action: Option<String>,
    /// Metadata.
    #[serde(default)]
    pub meta: Value,
    /// The outcome, once recorded.
    pub outcome: Option<String>,
    /// When, ms since the epoch (Redis clock).
    pub created_at: i64,
}

/// A parsed decision id: partition and stream entry id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionId {
    /// Partition of the session.
    pub partition: u32,
    /// Entry id in that partition's decisions stream.
    pub entry: String,
}

impl DecisionId {
    /// Parses `<partition>:<ms>-<seq>`.
    pub fn parse(id: &str, partitions: u32) -> Result<DecisionId> {
        let bad = || {
            Error::InvalidInput(format!(
                "decision id {id:?}: expected <partition>:<ms>-<seq>"
            ))
        };
        let (p, entry) = id.split_once(':').ok_or_else(bad)?;
        let partition: u32 = p.parse().map_err(|_| bad())?;
        if partition >= partitions || parse_stream_id(entry).is_none() {
            return Err(bad());
        }
        Ok(DecisionId {
            partition,
            entry: entry.to_string(),
        })
    }
}

impl Store {
    /// Records a decision; returns its id (`<partition>:<stream entry id>`).
    pub async fn record_decision(&self, sid: &str, d: &NewDecision) -> Result<String> {
        let keys = self.session_keys(sid)?;
        let meta = match &d.meta {
            None => "{}".to_string(),
            Some(v @ Value::Object(_)) => v.to_string(),
            Some(_) => {
                return Err(Error::InvalidInput(
                    "decision meta must be a JSON object".into(),
                ))
            }
        };
        let size = d.decision.len()
            + d.rationale.len()
            + meta.len()
            + d.planned_action.as_ref().map_or(0, String::len);
        within_limit("decision", size, self.config().limits.message)?;
        let p = keys.partition;
        let args = scripts::DecisionArgs {
            decision: &d.decision,
            rationale: &d.rationale,
            planned_action: d.planned_action.as_deref().unwrap_or(""),
            meta: &meta,
        };
        let item = scripts::record_decision(self.keys(), keys, sid, &args);
        let id: String = self.invoke_grouped(sid, item).await?;
        let entry = id.split_once(':').map(|(_, e)| e).unwrap_or_default();
        self.settle_stream(p, Stream::Decisions, entry).await?;
        Ok(id)
    }

    /// Records the outcome of a decision. Returns `false` (and writes nothing) when the decision
    /// is no longer open: it already had an outcome, or its session was closed. A decision id
    /// that the stream never held (or trimmed) is [`Error::InvalidInput`].
    pub async fn record_outcome(&self, decision_id: &str, outcome: &str) -> Result<bool> {
        let id = DecisionId::parse(decision_id, self.keys().partitions())?;
        within_limit("outcome", outcome.len(), self.config().limits.message)?;
        let call =
            scripts::record_outcome(self.keys(), id.partition, decision_id, &id.entry, outcome);
        let (recorded, entry): (u8, String) = self.invoke(&call).await?;
        if recorded == 1 {
            self.settle_stream(id.partition, Stream::Decisions, &entry)
                .await?;
        }
        Ok(recorded == 1)
    }

    /// Decisions without an outcome (all sessions, or one), oldest first — for crash recovery.
    pub async fn incomplete_decisions(&self, sid: Option<&str>) -> Result<Vec<Decision>> {
        let partitions: Vec<u32> = match sid {
            Some(s) => vec![self.session_keys(s)?.partition],
            None => (0..self.keys().partitions()).collect(),
        };
        let cmds = partitions
            .iter()
            .map(|p| {
                let mut cmd = redis::cmd("HGETALL");
                cmd.arg(self.keys().open_decisions(*p));
                cmd
            })
            .collect();
        let maps: Vec<HashMap<String, String>> = self.fan_out(cmds).await?;
        let mut out = Vec::new();
        for text in maps.into_iter().flat_map(|m| m.into_values()) {
            let d: Decision = serde_json::from_str(&text)?;
            if sid.is_none_or(|s| s == d.session_id) {
                out.push(d);
            }
        }
        out.sort_by_key(|d| (d.created_at, d.id.clone()));
        Ok(out)
    }
}
