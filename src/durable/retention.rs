//! Retention: bounds on the durable history. A [`Retention`] policy keeps the last N
//! checkpoints per session and label, drops archived sessions' history and closed sessions'
//! tombstones after an age, and caps the decisions kept. Shared by both backends: the reads a
//! plan makes ([`Retention::queries`], the same SQL on both) and the pure planner
//! ([`plan_from`]); each backend (`sqlite::retention`, `postgres::retention`) runs the reads
//! and executes the removals as changes (`plan::removal_changes`). The daemon applies its
//! policy periodically; `agentstate gc` on demand.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::Serialize;

use super::rows::TextRows;

/// What the durable history keeps; `None` keeps everything of that kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Retention {
    /// Checkpoints kept per session and label (the newest).
    pub keep_checkpoints: Option<u32>,
    /// Archived sessions whose last durable write is older than this lose their whole
    /// history (messages, checkpoints, decisions, usage, rounds); tombstones of sessions
    /// closed longer ago are dropped too (closing already deleted their rows).
    pub drop_closed_after: Option<Duration>,
    /// Most decisions kept; the oldest with an outcome go first, and a decision still
    /// waiting for its outcome is never dropped (a Redis loss re-seeds those from SQLite).
    pub max_decisions: Option<u64>,
}

impl Retention {
    /// Keeps only the newest `n` checkpoints per session and label.
    pub fn keep_checkpoints(mut self, n: u32) -> Self {
        self.keep_checkpoints = Some(n);
        self
    }
    /// Drops archived sessions' history (and closed sessions' tombstones) after `age`.
    pub fn drop_closed_after(mut self, age: Duration) -> Self {
        self.drop_closed_after = Some(age);
        self
    }
    /// Keeps at most `n` decisions.
    pub fn max_decisions(mut self, n: u64) -> Self {
        self.max_decisions = Some(n);
        self
    }
    /// True when the policy keeps everything.
    pub fn keeps_everything(&self) -> bool {
        *self == Retention::default()
    }
}

/// One thing a policy removes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Removal {
    /// An archived session and its whole history.
    Session {
        /// The session id.
        id: String,
    },
    /// The tombstone of a session closed before the age.
    Tombstone {
        /// The session id.
        id: String,
    },
    /// A checkpoint beyond the newest N of its session and label.
    Checkpoint {
        /// The checkpoint id.
        id: String,
        /// Its session.
        session: String,
        /// Its label.
        label: String,
    },
    /// A decision beyond the cap.
    Decision {
        /// The decision id.
        id: String,
        /// Its session.
        session: String,
    },
}

impl std::fmt::Display for Removal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Removal::Session { id } => write!(f, "session {id}"),
            Removal::Tombstone { id } => write!(f, "tombstone {id}"),
            Removal::Checkpoint { id, session, label } => {
                write!(f, "checkpoint {id} session={session} label={label}")
            }
            Removal::Decision { id, session } => write!(f, "decision {id} session={session}"),
        }
    }
}

/// What a gc did (or, dry, would do).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct GcReport {
    /// Everything removed, in the order listed.
    pub removed: Vec<Removal>,
    /// Size of the database file before, bytes.
    pub bytes_before: u64,
    /// Size after (equal to `bytes_before` for a dry run).
    pub bytes_after: u64,
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// One read a plan makes: SQL that is the same text on both backends (`?1` bound as text,
/// cast where a number is meant; every column text) and its argument.
pub(crate) type Query = (&'static str, String);

/// A bound `?1` as a number on either backend (PostgreSQL types the parameter as text).
macro_rules! number {
    () => {
        "CAST(CAST(?1 AS TEXT) AS BIGINT)"
    };
}

/// Archived sessions last written before the cutoff.
const ARCHIVED: &str = concat!(
    "SELECT id FROM sessions WHERE status = 'archived' AND updated_at < ",
    number!(),
    " ORDER BY id"
);
/// Tombstones of sessions closed before the cutoff.
const TOMBSTONES: &str = concat!(
    "SELECT session_id FROM tombstones WHERE closed_at < ",
    number!(),
    " ORDER BY session_id"
);
/// Checkpoints beyond the newest N of their session and label.
const CHECKPOINTS: &str = concat!(
    "SELECT id, session_id, label FROM (
         SELECT id, session_id, label, seq, ROW_NUMBER() OVER (
             PARTITION BY session_id, label ORDER BY seq DESC) AS newer
         FROM checkpoints) AS ranked
     WHERE newer > ",
    number!(),
    " ORDER BY session_id, label, seq"
);
/// How many decisions each session holds.
const DECISIONS_PER_SESSION: &str =
    "SELECT session_id, CAST(count(*) AS TEXT) FROM decisions GROUP BY session_id";
/// Decisions with an outcome, oldest first (the first to go over the cap).
const DECIDED: &str =
    "SELECT id, session_id FROM decisions WHERE outcome IS NOT NULL ORDER BY created_at, id";

impl Retention {
    /// The reads [`plan_from`] needs at time `now` (ms), in its order; `None` for a kind the
    /// policy keeps.
    pub(crate) fn queries(&self, now: i64) -> [Option<Query>; 5] {
        let cutoff = self
            .drop_closed_after
            .map(|age| now.saturating_sub(age.as_millis() as i64).to_string());
        let capped = self.max_decisions.is_some();
        [
            cutoff.clone().map(|c| (ARCHIVED, c)),
            cutoff.map(|c| (TOMBSTONES, c)),
            self.keep_checkpoints.map(|n| (CHECKPOINTS, n.to_string())),
            capped.then(|| (DECISIONS_PER_SESSION, String::new())),
            capped.then(|| (DECIDED, String::new())),
        ]
    }
}

/// What `policy` removes, from the rows of its [`Retention::queries`] (empty for `None`).
/// Pure, so both backends plan alike: an archived session going whole takes its
/// checkpoints and decisions with it (they are not listed again), and the decision cap
/// counts only what stays, dropping the oldest decided ones first.
pub(crate) fn plan_from(policy: &Retention, rows: [TextRows; 5]) -> Vec<Removal> {
    let [archived, tombstones, checkpoints, per_session, decided] = rows;
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    let mut out = Vec::new();
    let dropped: BTreeSet<String> = archived.iter().map(|r| text(&r[0])).collect();
    out.extend(
        archived
            .iter()
            .map(|r| Removal::Session { id: text(&r[0]) }),
    );
    out.extend(
        tombstones
            .iter()
            .map(|r| Removal::Tombstone { id: text(&r[0]) }),
    );
    out.extend(
        checkpoints
            .iter()
            .filter(|r| !dropped.contains(&text(&r[1])))
            .map(|r| Removal::Checkpoint {
                id: text(&r[0]),
                session: text(&r[1]),
                label: text(&r[2]),
            }),
    );
    if let Some(max) = policy.max_decisions {
        let kept: u64 = per_session
            .iter()
            .filter(|r| !dropped.contains(&text(&r[0])))
            .map(|r| text(&r[1]).parse::<u64>().unwrap_or(0))
            .sum();
        let excess = kept.saturating_sub(max) as usize;
        out.extend(
            decided
                .iter()
                .filter(|r| !dropped.contains(&text(&r[1])))
                .take(excess)
                .map(|r| Removal::Decision {
                    id: text(&r[0]),
                    session: text(&r[1]),
                }),
        );
    }
    out
}
