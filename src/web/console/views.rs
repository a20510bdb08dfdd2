//! What the console's pages show, read without writing anything: the session list (Redis'
//! index and the durable tier's rows), one session (from Redis when live, else its durable
//! history through the durable-tier interface, [`inspect::export_session`], with its inbox
//! and tool-effect ledger read from the same tier), consumer groups and spill figures.
//! Nothing here restores a session: a page never changes what it shows.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use futures_util::{stream, StreamExt};
use serde::Deserialize;
use serde_json::Value;

use crate::checkpoints::Checkpoint;
use crate::consumer::{parse_event, DeadLetter, DecisionEvent};
use crate::decisions::Decision;
use crate::durable::{decision_of, Durable, Location};
use crate::effects::Effect;
use crate::error::{Error, Result};
use crate::inbox::InboxItem;
use crate::leases::Lease;
use crate::messages::{CompactionRecord, Message, MessageQuery, Usage};
use crate::spill::inspect;
use crate::store::Store;
use crate::web::metrics::{consumer_groups, GroupInfo};

/// Sessions per page of the list.
pub(crate) const PAGE_SIZE: usize = 50;

/// Sessions whose meta is read at once while listing.
const META_READS_IN_FLIGHT: usize = 16;

/// Which tier a listed session is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tier {
    /// Redis holds it (its meta is there).
    Live,
    /// Indexed in Redis but its keys are gone (expired, or Redis lost them): restorable.
    Restorable,
    /// Only the durable tier has it (Redis lost even the index entry).
    Durable,
}

impl Tier {
    /// The word the pages show.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Live => "live",
            Tier::Restorable => "expired",
            Tier::Durable => "durable only",
        }
    }
}

/// One row of the session list.
#[derive(Debug, Clone)]
pub(crate) struct SessionRow {
    /// Session id.
    pub id: String,
    /// Owning user, if any.
    pub user: Option<String>,
    /// `active`, `archived`, ...; empty when unknown.
    pub status: String,
    /// Where it lives.
    pub tier: Tier,
    /// Messages so far, when Redis holds it.
    pub messages: Option<u64>,
    /// Last write, ms since the epoch, when known.
    pub updated_at: Option<i64>,
    /// `root` or `subagent`, when known.
    pub kind: String,
}

/// The session list's filters, as the query string gives them.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ListFilter {
    /// Only this user's sessions.
    #[serde(default)]
    pub user: String,
    /// Only sessions with this status (`active`, `archived`).
    #[serde(default)]
    pub status: String,
    /// `live` (Redis holds it), `durable` (only the durable tier), or all.
    #[serde(default)]
    pub tier: String,
    /// Page number, from 1.
    #[serde(default)]
    pub page: Option<usize>,
}

/// A page of the session list and how many matched in all.
pub(crate) struct SessionPage {
    /// The rows of this page, by id.
    pub rows: Vec<SessionRow>,
    /// Rows matching the filter.
    pub total: usize,
    /// This page, from 1.
    pub page: usize,
}

/// Opens the durable tier at `db` for reading, or `None` when there is none yet (a SQLite
/// path without a file).
pub(crate) async fn durable_reader(store: &Store, db: &Path) -> Result<Option<Durable>> {
    if let Location::Sqlite(path) = Location::of(db) {
        if !path.exists() {
            return Ok(None);
        }
    }
    Ok(Some(
        Durable::open_reader(db, &store.config().namespace).await?,
    ))
}

/// The durable tier's sessions: id → (user, status, updated_at, kind).
async fn durable_sessions(
    db: &Durable,
) -> Result<BTreeMap<String, (Option<String>, String, Option<i64>, String)>> {
    let rows = db
        .text_rows(
            "SELECT id, user_id, status, CAST(updated_at AS TEXT), kind FROM sessions WHERE id > ?1",
            "",
        )
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let text = |i: usize| r[i].clone().unwrap_or_default();
            let user = Some(text(1)).filter(|u| !u.is_empty());
            (text(0), (user, text(2), text(3).parse().ok(), text(4)))
        })
        .collect())
}

/// The page of sessions `filter` asks for: Redis' index (live and restorable sessions) and
/// the durable tier's rows, merged by id.
pub(crate) async fn session_page(
    store: &Store,
    db: &Path,
    filter: &ListFilter,
) -> Result<SessionPage> {
    if !matches!(filter.tier.as_str(), "" | "live" | "durable") {
        return Err(Error::InvalidInput(format!(
            "tier {:?}: expected live, durable, or none for both",
            filter.tier
        )));
    }
    let user = Some(filter.user.trim()).filter(|u| !u.is_empty());
    let indexed = store.list_sessions(user).await?;
    let durable = match durable_reader(store, db).await? {
        Some(d) => durable_sessions(&d).await?,
        None => BTreeMap::new(),
    };
    let metas: Vec<_> = stream::iter(indexed.iter().cloned())
        .map(|sid| async move {
            let meta = store.session(&sid).await;
            (sid, meta)
        })
        .buffered(META_READS_IN_FLIGHT)
        .collect()
        .await;
    let mut rows: BTreeMap<String, SessionRow> = BTreeMap::new();
    for (sid, meta) in metas {
        let row = match meta? {
            Some(s) => SessionRow {
                id: sid.clone(),
                user: s.user_id,
                status: s.status,
                tier: Tier::Live,
                messages: Some(s.next_seq.saturating_sub(1)),
                updated_at: Some(s.updated_at),
                kind: s.kind,
            },
            None => {
                let known = durable.get(&sid);
                SessionRow {
                    id: sid.clone(),
                    user: known.and_then(|k| k.0.clone()),
                    status: known.map(|k| k.1.clone()).unwrap_or_default(),
                    tier: Tier::Restorable,
                    messages: None,
                    updated_at: known.and_then(|k| k.2),
                    kind: known.map(|k| k.3.clone()).unwrap_or_default(),
                }
            }
        };
        rows.insert(sid, row);
    }
    for (sid, (u, status, updated, kind)) in durable {
        if rows.contains_key(&sid) || (user.is_some() && u.as_deref() != user) {
            continue;
        }
        rows.insert(
            sid.clone(),
            SessionRow {
                id: sid,
                user: u,
                status,
                tier: Tier::Durable,
                messages: None,
                updated_at: updated,
                kind,
            },
        );
    }
    let status = filter.status.trim();
    let matching: Vec<SessionRow> = rows
        .into_values()
        .filter(|r| status.is_empty() || r.status == status)
        .filter(|r| match filter.tier.as_str() {
            "live" => r.tier == Tier::Live,
            "durable" => r.tier != Tier::Live,
            _ => true,
        })
        .collect();
    let total = matching.len();
    let pages = total.div_ceil(PAGE_SIZE).max(1);
    let page = filter.page.unwrap_or(1).clamp(1, pages);
    let rows = matching
        .into_iter()
        .skip((page - 1) * PAGE_SIZE)
        .take(PAGE_SIZE)
        .collect();
    Ok(SessionPage { rows, total, page })
}

/// A session's head: what its meta (or its durable row) says.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Head {
    /// Owning user.
    #[serde(default)]
    pub user_id: Option<String>,
    /// `root` or `subagent`.
    #[serde(default)]
    pub kind: String,
    /// Parent session.
    #[serde(default)]
    pub parent: Option<String>,
    /// `active`, `archived`.
    #[serde(default)]
    pub status: String,
    /// Model name.
    #[serde(default)]
    pub model: Option<String>,
    /// Creation time, ms.
    #[serde(default)]
    pub created_at: i64,
    /// Last write, ms.
    #[serde(default)]
    pub updated_at: i64,
    /// Idle TTL, seconds.
    #[serde(default)]
    pub ttl: u64,
}

/// One session as the session page shows it.
#[derive(Debug, Default)]
pub(crate) struct SessionView {
    /// Session id.
    pub id: String,
    /// Whether Redis holds it; when not, everything below is the durable history.
    pub live: bool,
    /// The head.
    pub head: Head,
    /// Every message, in seq order (compacted ones included).
    pub messages: Vec<Message>,
    /// The compaction audit.
    pub compactions: Vec<CompactionRecord>,
    /// Usage per round.
    pub usage: Vec<Usage>,
    /// Every checkpoint, oldest first.
    pub checkpoints: Vec<Checkpoint>,
    /// Its decisions with their outcomes, oldest first.
    pub decisions: Vec<Decision>,
    /// Working state (key → value) and its version, when live.
    pub working: Option<(u64, Vec<(String, Value)>)>,
    /// Its sub-agents, depth first: (depth from 1, id).
    pub tree: Vec<(usize, String)>,
    /// Who holds its run lease; always `None` when not live (leases live in Redis only).
    pub lease: Option<Lease>,
    /// Redis' clock when the lease was read, ms (the page counts "expires in" from it, not
    /// from this machine's clock).
    pub now_ms: i64,
    /// Its inbox, in arrival order.
    pub inbox: Vec<InboxItem>,
    /// Its tool-effect ledger, oldest intent first.
    pub effects: Vec<Effect>,
    /// The id of the newest entry of its partition's decisions stream read (the live
    /// updates continue after it).
    pub stream_cursor: String,
}

/// Session `sid` for its page: from Redis when live, else its durable history; `None` when
/// neither knows it.
pub(crate) async fn session_view(
    store: &Store,
    db: &Path,
    sid: &str,
) -> Result<Option<SessionView>> {
    crate::keys::validate_id("session", sid)?;
    let durable = durable_reader(store, db).await?;
    let mut view = match store.session(sid).await? {
        Some(s) => {
            let working = store.working(sid).await?;
            let mut entries: Vec<(String, Value)> = working.values.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            SessionView {
                id: sid.to_string(),
                live: true,
                head: Head {
                    user_id: s.user_id,
                    kind: s.kind,
                    parent: s.parent,
                    status: s.status,
                    model: s.model,
                    created_at: s.created_at,
                    updated_at: s.updated_at,
                    ttl: s.ttl,
                },
                messages: store.messages(sid, MessageQuery::all()).await?,
                compactions: store.compactions(sid).await?,
                usage: store.usage(sid).await?,
                checkpoints: inspect::checkpoint_history(store, db, sid).await?,
                decisions: match &durable {
                    Some(d) => durable_decisions(d, sid).await?,
                    None => Vec::new(),
                },
                working: Some((working.version, entries)),
                lease: store.lease_holder(sid).await?,
                now_ms: redis_time_ms(store).await?,
                inbox: store.inbox(sid).await?,
                effects: store.effects(sid).await?,
                ..SessionView::default()
            }
        }
        None => match &durable {
            Some(d) => match from_export(store, db, sid).await? {
                Some(mut v) => {
                    (v.inbox, v.effects) = durable_inbox_and_effects(d, sid).await?;
                    v
                }
                None => return Ok(None),
            },
            None => return Ok(None),
        },
    };
    // What the decisions stream holds that the durable tier may not have yet.
    let (events, cursor) = stream_events(store, sid, "-").await?;
    apply_events(&mut view.decisions, events);
    view.stream_cursor = cursor;
    view.tree = match &durable {
        Some(d) if !view.live => durable_tree(d, sid).await?,
        _ => live_tree(store, sid).await?,
    };
    Ok(Some(view))
}

/// The durable tier's decisions of `sid`, oldest first.
async fn durable_decisions(db: &Durable, sid: &str) -> Result<Vec<Decision>> {
    let rows = db.text_rows(inspect::SESSION_DECISIONS_SQL, sid).await?;
    Ok(rows.iter().map(|r| decision_of(r)).collect())
}

/// Redis' clock, ms since the epoch: the clock leases are kept by.
async fn redis_time_ms(store: &Store) -> Result<i64> {
    let (secs, micros): (i64, i64) = redis::cmd("TIME")
        .query_async(&mut store.conn().await?)
        .await?;
    Ok(secs * 1000 + micros / 1000)
}

/// The inbox (arrival order) and tool-effect ledger (oldest intent first) of `sid` as the
/// durable tier holds them: each row keeps the record Redis held, so they parse as the live
/// ones do. No claim is there (claims are live only).
async fn durable_inbox_and_effects(
    db: &Durable,
    sid: &str,
) -> Result<(Vec<InboxItem>, Vec<Effect>)> {
    let records = |sql| async move {
        let rows = db.text_rows(sql, sid).await?;
        Ok::<_, Error>(
            rows.into_iter()
                .filter_map(|r| r.into_iter().next().flatten())
                .collect::<Vec<String>>(),
        )
    };
    let mut inbox = records("SELECT record FROM inbox WHERE session_id = ?1")
        .await?
        .iter()
        .map(|r| serde_json::from_str(r))
        .collect::<std::result::Result<Vec<InboxItem>, _>>()?;
    inbox.sort_by_key(|i| i.n);
    let mut effects = records("SELECT record FROM effects WHERE session_id = ?1")
        .await?
        .iter()
        .map(|r| serde_json::from_str(r))
        .collect::<std::result::Result<Vec<Effect>, _>>()?;
    effects.sort_by(|a, b| (a.started_at, &a.call_id).cmp(&(b.started_at, &b.call_id)));
    Ok((inbox, effects))
}

/// Session `sid` from its durable history (`agentstate export`'s lines), or `None`.
async fn from_export(store: &Store, db: &Path, sid: &str) -> Result<Option<SessionView>> {
    let mut out = Vec::new();
    if inspect::export_session(store, db, sid, &mut out).await? == 0 {
        return Ok(None);
    }
    let mut view = SessionView {
        id: sid.to_string(),
        ..SessionView::default()
    };
    for line in String::from_utf8_lossy(&out).lines() {
        let value: Value = serde_json::from_str(line)?;
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match kind {
            "session" => view.head = serde_json::from_value(value)?,
            "message" => view.messages.push(serde_json::from_value(value)?),
            "compaction" => view.compactions.push(serde_json::from_value(value)?),
            "usage" => view.usage.push(serde_json::from_value(value)?),
            "checkpoint" => view.checkpoints.push(serde_json::from_value(value)?),
            "decision" => view.decisions.push(serde_json::from_value(value)?),
            _ => {}
        }
    }
    Ok(Some(view))
}

/// The decision events of `sid` in its partition's decisions stream after `after` (`-` for
/// all it holds), oldest first, and the id of the newest entry read (`after` when none).
pub(crate) async fn stream_events(
    store: &Store,
    sid: &str,
    after: &str,
) -> Result<(Vec<DecisionEvent>, String)> {
    let p = store.keys().partition(sid);
    let from = if after == "-" {
        "-".to_string()
    } else {
        format!("({after}")
    };
    let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg(store.keys().decisions(p))
        .arg(from)
        .arg("+")
        .query_async(&mut store.conn().await?)
        .await?;
    let cursor = reply
        .ids
        .last()
        .map_or_else(|| after.to_string(), |e| e.id.clone());
    let events = reply
        .ids
        .iter()
        .filter_map(|e| parse_event(p, e).ok())
        .filter(|e| match e {
            DecisionEvent::Decision(d) => d.session_id == sid,
            DecisionEvent::Outcome(o) => o.session_id == sid,
        })
        .collect();
    Ok((events, cursor))
}

/// Adds the decisions of `events` that `decisions` lacks and sets their outcomes.
pub(crate) fn apply_events(decisions: &mut Vec<Decision>, events: Vec<DecisionEvent>) {
    for event in events {
        match event {
            DecisionEvent::Decision(d) => {
                if !decisions.iter().any(|k| k.id == d.id) {
                    decisions.push(d);
                }
            }
            DecisionEvent::Outcome(o) => {
                if let Some(d) = decisions.iter_mut().find(|d| d.id == o.decision_id) {
                    d.outcome = Some(o.outcome);
                }
            }
        }
    }
    decisions.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
}

/// The sub-agents below `sid`, depth first: (depth from 1, id); `kids` lists a session's
/// children.
async fn tree<F, Fut>(sid: &str, mut kids: F) -> Result<Vec<(usize, String)>>
where
    F: FnMut(String) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<String>>>,
{
    let mut out = Vec::new();
    let mut stack = vec![(0usize, sid.to_string())];
    while let Some((depth, id)) = stack.pop() {
        if depth > 0 {
            out.push((depth, id.clone()));
        }
        let below = kids(id).await?;
        stack.extend(below.into_iter().rev().map(|k| (depth + 1, k)));
    }
    Ok(out)
}

/// Sub-agents of a live session, as Redis' children sets hold them (a child that expired is
/// listed, not opened: nothing is restored).
async fn live_tree(store: &Store, sid: &str) -> Result<Vec<(usize, String)>> {
    let root = sid.to_string();
    tree(sid, |id| {
        let root = root.clone();
        async move {
            if id != root && store.session(&id).await?.is_none() {
                return Ok(Vec::new());
            }
            store.children(&id).await
        }
    })
    .await
}

/// Sub-agents of a session the durable tier holds.
async fn durable_tree(db: &Durable, sid: &str) -> Result<Vec<(usize, String)>> {
    tree(sid, |id| async move {
        let rows = db
            .text_rows("SELECT id FROM sessions WHERE parent = ?1 ORDER BY id", &id)
            .await?;
        Ok(rows
            .into_iter()
            .filter_map(|r| r.into_iter().next().flatten())
            .collect())
    })
    .await
}

/// One consumer group over every partition.
#[derive(Debug, Clone, Default)]
pub(crate) struct GroupView {
    /// Group name.
    pub name: String,
    /// Entries delivered and not acknowledged, all partitions.
    pub pending: usize,
    /// Entries not delivered yet, where Redis knows.
    pub lag: usize,
    /// Consumers that joined (the most on any partition).
    pub consumers: usize,
    /// How long the oldest pending entry of any partition has been idle, ms.
    pub oldest_idle_ms: Option<u64>,
    /// Consumer → entries it holds.
    pub holders: BTreeMap<String, usize>,
    /// Dead letters this group gave up on.
    pub dead: usize,
}

/// The decisions page: every group, and the newest dead letters.
pub(crate) async fn groups_view(store: &Store) -> Result<(Vec<GroupView>, Vec<DeadLetter>)> {
    let infos: Vec<GroupInfo> = consumer_groups(store).await?;
    let mut groups: BTreeMap<String, GroupView> = BTreeMap::new();
    let mut conn = store.conn().await?;
    for info in infos {
        let g = groups
            .entry(info.name.clone())
            .or_insert_with(|| GroupView {
                name: info.name.clone(),
                ..GroupView::default()
            });
        g.pending += info.pending;
        g.lag += info.lag.unwrap_or(0);
        g.consumers = g.consumers.max(info.consumers);
        if info.pending == 0 {
            continue;
        }
        let key = store.keys().decisions(info.partition);
        // Summary form: who holds how many.
        let summary: redis::streams::StreamPendingReply = redis::cmd("XPENDING")
            .arg(&key)
            .arg(&info.name)
            .query_async(&mut conn)
            .await?;
        if let redis::streams::StreamPendingReply::Data(data) = summary {
            for c in data.consumers {
                *g.holders.entry(c.name).or_default() += c.pending;
            }
        }
        // The oldest pending entry, with its idle time.
        let oldest: redis::streams::StreamPendingCountReply = redis::cmd("XPENDING")
            .arg(&key)
            .arg(&info.name)
            .arg("-")
            .arg("+")
            .arg(1)
            .query_async(&mut conn)
            .await?;
        if let Some(first) = oldest.ids.first() {
            let idle = first.last_delivered_ms as u64;
            g.oldest_idle_ms = Some(g.oldest_idle_ms.map_or(idle, |m| m.max(idle)));
        }
    }
    let dead = store.dead_letters(100).await?;
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for d in &dead {
        *counts.entry(d.group.as_str()).or_default() += 1;
    }
    for (name, n) in counts {
        groups
            .entry(name.to_string())
            .or_insert_with(|| GroupView {
                name: name.to_string(),
                ..GroupView::default()
            })
            .dead += n;
    }
    Ok((groups.into_values().collect(), dead))
}
