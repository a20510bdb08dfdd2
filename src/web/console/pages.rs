//! The console's HTML, written with maud: every interpolated value is escaped, so what agents
//! wrote (message content, names, decisions, working state) is always shown as text. The
//! pages link one stylesheet and one script (`assets/`), and carry no inline script.

use axum::http::StatusCode;
use maud::{html, Markup, DOCTYPE};
use serde_json::Value;

use super::views::{GroupView, SessionPage, SessionRow, SessionView, Tier, PAGE_SIZE};
use super::{LagSample, MEMORY_PAGE};
use crate::consumer::DeadLetter;
use crate::effects::{Effect, EffectState};
use crate::error::utc;
use crate::inbox::InboxItem;
use crate::long_term::MemoryItem;
use crate::messages::{Message, MessageState};
use crate::spill::inspect::PartitionStats;

/// What every page shows in its header.
pub(crate) struct Chrome<'a> {
    /// The namespace prefix.
    pub prefix: &'a str,
    /// The Redis address, without password.
    pub redis: &'a str,
    /// The durable tier, as shown to people.
    pub durable: &'a str,
}

/// The page frame: header with navigation, then `body`.
fn frame(chrome: &Chrome, title: &str, active: &str, body: Markup) -> Markup {
    let nav = [
        ("sessions", "/sessions", "Sessions"),
        ("decisions", "/decisions", "Decisions"),
        ("memory", "/memory", "Memory"),
        ("spill", "/spill", "Spill"),
    ];
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · agentstate" }
                link rel="stylesheet" href="/assets/console.css";
                script src="/assets/console.js" defer {}
            }
            body {
                header.top {
                    a.brand href="/sessions" { "agentstate" }
                    nav {
                        @for (key, href, label) in nav {
                            a href=(href) class=[(key == active).then_some("active")] { (label) }
                        }
                    }
                    span.where {
                        "prefix " code { (chrome.prefix) } " · redis " code { (chrome.redis) }
                        " · durable " code { (chrome.durable) }
                    }
                }
                main { (body) }
            }
        }
    }
}

/// A duration in ms for people: `850 ms`, `12.5 s`, `3 min`.
fn duration(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms} ms"),
        1000..=119_999 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{} min", ms / 60_000),
    }
}

/// `bytes` for people: B, KiB, MiB or GiB with one decimal past bytes.
fn size(bytes: u64) -> String {
    const UNITS: [&str; 3] = ["KiB", "MiB", "GiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let (mut value, mut unit) = (bytes as f64 / 1024.0, 0);
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// The login form of a console started with `--token`; `failed` after a wrong token.
pub(crate) fn login(failed: bool) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "Sign in · agentstate" }
                link rel="stylesheet" href="/assets/console.css";
            }
            body.login {
                form.login method="post" action="/login" {
                    h1 { "agentstate console" }
                    p { "This console was started with " code { "--token" } ". Enter it to continue." }
                    @if failed {
                        p.error role="alert" { "That token is not the one the console was started with." }
                    }
                    input type="password" name="token" placeholder="token" autofocus required;
                    button type="submit" { "Sign in" }
                }
            }
        }
    }
}

/// The session list.
pub(crate) fn sessions(
    chrome: &Chrome,
    filter: &super::views::ListFilter,
    page: &SessionPage,
) -> Markup {
    let pages = page.total.div_ceil(PAGE_SIZE).max(1);
    let link = |n: usize| {
        format!(
            "/sessions?user={}&status={}&tier={}&page={n}",
            query_escape(&filter.user),
            query_escape(&filter.status),
            query_escape(&filter.tier)
        )
    };
    let option = |value: &str, current: &str, label: &str| {
        html! { option value=(value) selected[value == current] { (label) } }
    };
    let body = html! {
        h1 { "Sessions" }
        form.filters method="get" action="/sessions" {
            label { "User " input type="text" name="user" value=(filter.user) placeholder="any"; }
            label { "Status "
                select name="status" {
                    (option("", &filter.status, "any"))
                    (option("active", &filter.status, "active"))
                    (option("archived", &filter.status, "archived"))
                }
            }
            label { "Tier "
                select name="tier" {
                    (option("", &filter.tier, "live and durable"))
                    (option("live", &filter.tier, "live in Redis"))
                    (option("durable", &filter.tier, "only durable"))
                }
            }
            button type="submit" { "Filter" }
        }
        p.count { (page.total) " sessions · page " (page.page) " of " (pages) }
        table.grid id="sessions" {
            thead { tr { th { "Session" } th { "User" } th { "Status" } th { "Tier" } th { "Kind" } th.num { "Messages" } th { "Updated (UTC)" } } }
            tbody {
                @for row in &page.rows { (session_row(row)) }
                @if page.rows.is_empty() {
                    tr { td.empty colspan="7" { "No session matches." } }
                }
            }
        }
        nav.pager {
            @if page.page > 1 { a rel="prev" href=(link(page.page - 1)) { "← previous" } }
            @if page.page < pages { a rel="next" href=(link(page.page + 1)) { "next →" } }
        }
    };
    frame(chrome, "Sessions", "sessions", body)
}

fn session_row(row: &SessionRow) -> Markup {
    let tier_class = match row.tier {
        Tier::Live => "badge live",
        Tier::Restorable => "badge expired",
        Tier::Durable => "badge durable",
    };
    html! {
        tr data-session=(row.id) {
            td { a href=(format!("/sessions/{}", row.id)) { code { (row.id) } } }
            td { (row.user.as_deref().unwrap_or("—")) }
            td { (row.status) }
            td { span class=(tier_class) { (row.tier.as_str()) } }
            td { (row.kind) }
            td.num { @if let Some(n) = row.messages { (n) } @else { "—" } }
            td { @if let Some(t) = row.updated_at { (utc(t)) } @else { "—" } }
        }
    }
}

/// Percent-escapes a query-string value.
fn query_escape(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'@' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// One entry of a session's timeline.
enum Entry<'a> {
    /// A message outside any compacted range.
    Message(&'a Message),
    /// A run of compacted messages, folded, with the note that replaced them.
    Folded(Vec<&'a Message>),
    /// A checkpoint.
    Checkpoint(&'a crate::checkpoints::Checkpoint),
    /// A decision.
    Decision(&'a crate::decisions::Decision),
}

/// The timeline: messages in seq order (compacted runs folded), with checkpoints and
/// decisions placed after the last message written before them.
fn timeline(view: &SessionView) -> Vec<Entry<'_>> {
    let mut entries: Vec<(i64, Entry)> = Vec::new();
    let mut run: Vec<&Message> = Vec::new();
    for m in &view.messages {
        if m.state == MessageState::CompactedOut {
            run.push(m);
            continue;
        }
        if !run.is_empty() {
            let at = run[0].created_at;
            entries.push((at, Entry::Folded(std::mem::take(&mut run))));
        }
        entries.push((m.created_at, Entry::Message(m)));
    }
    if !run.is_empty() {
        let at = run[0].created_at;
        entries.push((at, Entry::Folded(run)));
    }
    let mut others: Vec<(i64, Entry)> = view
        .checkpoints
        .iter()
        .map(|c| (c.created_at, Entry::Checkpoint(c)))
        .chain(
            view.decisions
                .iter()
                .map(|d| (d.created_at, Entry::Decision(d))),
        )
        .collect();
    others.sort_by_key(|(at, _)| *at);
    // Merge: messages keep their seq order; the others go after the messages up to their time.
    let mut out = Vec::new();
    let mut others = others.into_iter().peekable();
    for (at, entry) in entries {
        while others.peek().is_some_and(|(t, _)| *t < at) {
            out.push(others.next().expect("peeked").1);
        }
        out.push(entry);
    }
    out.extend(others.map(|(_, e)| e));
    out
}

/// The note of the compaction that folded `run` (its first seq), when known.
fn fold_note<'a>(
    view: &'a SessionView,
    run: &[&Message],
) -> Option<(&'a crate::messages::CompactionRecord, Option<&'a str>)> {
    let first = run.first()?.seq;
    let c = view
        .compactions
        .iter()
        .filter(|c| c.from_seq <= first && first <= c.to_seq)
        .max_by_key(|c| c.compact_seq)?;
    let note = view
        .messages
        .iter()
        .find(|m| m.seq == c.note_seq)
        .and_then(|m| m.content.as_deref());
    Some((c, note))
}

fn message_item(m: &Message) -> Markup {
    let note = m.name.as_deref() == Some("compact_note");
    html! {
        li class={ "item msg role-" (m.role) @if note { " note" } } data-seq=(m.seq) {
            div.meta {
                span.seq { "#" (m.seq) }
                span.role { (m.role) }
                @if let Some(name) = &m.name { span.name { (name) } }
                @if let Some(r) = m.round_index { span.round { "round " (r) } }
                time { (utc(m.created_at)) }
            }
            @if let Some(content) = &m.content { pre.content { (content) } }
            @if let Some(calls) = &m.tool_calls { pre.json { (pretty(calls)) } }
            @if let Some(id) = &m.tool_call_id { div.small { "answers tool call " code { (id) } } }
        }
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// A session's page.
pub(crate) fn session(chrome: &Chrome, view: &SessionView) -> Markup {
    let last_seq = view.messages.last().map_or(0, |m| m.seq);
    let live_url = view.live.then(|| {
        format!(
            "/sessions/{}/events?after={last_seq}&cursor={}",
            view.id,
            query_escape(&view.stream_cursor)
        )
    });
    let h = &view.head;
    let body = html! {
        div.title {
            h1 { "Session " code { (view.id) } }
            @if view.live { span.badge.live { "live" } } @else { span.badge.durable { "durable history" } }
            @if view.live { span.small id="live-state" { "connecting…" } }
        }
        @if !view.live {
            p.notice id="not-live" role="status" {
                "Redis does not hold this session (it expired, or Redis lost its data). "
                "What follows is its durable history from " code { (chrome.durable) } ". "
                "An agent that opens it restores it; this console only reads."
            }
        }
        dl.head {
            dt { "User" } dd { (h.user_id.as_deref().unwrap_or("—")) }
            dt { "Kind" } dd { (h.kind) }
            dt { "Parent" } dd { @if let Some(p) = &h.parent { a href=(format!("/sessions/{p}")) { code { (p) } } } @else { "—" } }
            dt { "Status" } dd { (h.status) }
            dt { "Model" } dd { (h.model.as_deref().unwrap_or("—")) }
            dt { "Created" } dd { (utc(h.created_at)) }
            dt { "Updated" } dd { (utc(h.updated_at)) }
            dt { "Idle TTL" } dd { (h.ttl) " s" }
        }
        (run_state(view))
        div.columns {
            section.timeline {
                h2 { "Timeline " span.small id="msg-count" { (view.messages.len()) " messages" } }
                ol id="timeline" data-live=[live_url] {
                    @for entry in timeline(view) {
                        @match entry {
                            Entry::Message(m) => (message_item(m)),
                            Entry::Folded(run) => {
                                li.item.folded data-from=(run[0].seq) data-to=(run[run.len() - 1].seq) {
                                    details {
                                        summary {
                                            "Compacted #" (run[0].seq) "–#" (run[run.len() - 1].seq)
                                            " (" (run.len()) " messages)"
                                            @if let Some((c, note)) = fold_note(view, &run) {
                                                @if let Some(note) = note { ": " span.note-text { (note) } }
                                                @if let (Some(b), Some(a)) = (c.before_tokens, c.after_tokens) {
                                                    span.small { " · " (b) " → " (a) " tokens" }
                                                }
                                            }
                                        }
                                        ol.compacted { @for m in &run { (message_item(m)) } }
                                    }
                                }
                            },
                            Entry::Checkpoint(c) => {
                                li.item.checkpoint data-checkpoint=(c.id) {
                                    div.meta { span.role { "checkpoint" } span.name { (c.label) } time { (utc(c.created_at)) } }
                                    details { summary { code { (c.id) } } pre.json { (pretty(&c.payload)) } }
                                }
                            },
                            Entry::Decision(d) => (decision_item(d)),
                        }
                    }
                }
            }
            aside {
                section {
                    h2 { "Usage per round" }
                    (usage_chart(view))
                }
                section {
                    h2 { "Working state" }
                    @match &view.working {
                        Some((version, entries)) => {
                            p.small { "version " (version) }
                            @if entries.is_empty() { p.small { "empty" } }
                            dl.working { @for (k, v) in entries { dt { code { (k) } } dd { pre.json { (pretty(v)) } } } }
                        }
                        None => p.small { "Working state is ephemeral: the durable tier never holds it." },
                    }
                }
                section {
                    h2 { "Sub-agents" }
                    @if view.tree.is_empty() { p.small { "none" } }
                    ul.tree {
                        @for (depth, id) in &view.tree {
                            li style=(format!("margin-left: {}em", depth - 1)) {
                                a href=(format!("/sessions/{id}")) { code { (id) } }
                            }
                        }
                    }
                }
                section {
                    h2 { "Compactions" }
                    @if view.compactions.is_empty() { p.small { "none" } }
                    ul { @for c in &view.compactions {
                        li { "#" (c.from_seq) "–#" (c.to_seq) " → note #" (c.note_seq)
                            @if let (Some(b), Some(a)) = (c.before_tokens, c.after_tokens) { span.small { " (" (b) " → " (a) " tokens)" } } }
                    } }
                }
            }
        }
    };
    frame(chrome, &view.id, "sessions", body)
}

/// Characters of an inbox item's content or an effect's result shown in a table cell.
const EXCERPT_CHARS: usize = 120;

/// Characters of an arguments digest shown (`sha256:` and 12 hex digits): enough to tell
/// calls apart, the full one is in `agentstate effects list`.
const DIGEST_CHARS: usize = 19;

/// The first `chars` characters of `text`, with `…` when there is more.
fn excerpt(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// The run's state, side by side: who holds the run lease, the inbox, the tool-effect
/// ledger. Read once with the page (the live updates carry the timeline only).
fn run_state(view: &SessionView) -> Markup {
    let unresolved = view
        .effects
        .iter()
        .filter(|e| e.state == EffectState::Running)
        .count();
    // Unresolved first (a process may have died mid-tool: someone must reconcile them),
    // each group oldest intent first as the ledger lists them.
    let mut effects: Vec<&Effect> = view.effects.iter().collect();
    effects.sort_by_key(|e| e.state != EffectState::Running);
    html! {
        div.run-state {
            section.panel id="lease" {
                h2 { "Run lease" }
                @match &view.lease {
                    Some(l) => {
                        p { span.badge.held { "held" } " by " code.owner { (l.owner) } }
                        dl.lease {
                            dt { "Token" } dd.token { (l.token) }
                            dt { "Expires in" } dd.expires { (duration(l.expires_at.saturating_sub(view.now_ms).max(0) as u64)) }
                            dt { "At (UTC)" } dd { (utc(l.expires_at)) }
                        }
                    },
                    None => {
                        p { span.badge.free { "free" } }
                        @if !view.live { p.small { "Leases live in Redis only: none survives the session's keys." } }
                    },
                }
            }
            section.panel id="inbox" {
                h2 { "Inbox " span.small { (view.inbox.len()) " items" } }
                @if view.inbox.is_empty() {
                    p.small { "empty" }
                } @else {
                    table.grid.compact {
                        thead { tr { th.num { "#" } th { "Item" } th { "State" } th { "Role" } th { "Content" } th.num { "Seq" } } }
                        tbody { @for i in &view.inbox { (inbox_row(i)) } }
                    }
                }
            }
            section.panel id="effects" {
                h2 { "Tool effects " span.small { (view.effects.len()) " calls" }
                    @if unresolved > 0 { " " span.badge.unresolved { (unresolved) " unresolved" } } }
                @if effects.is_empty() {
                    p.small { "none recorded" }
                } @else {
                    table.grid.compact {
                        thead { tr { th { "Call" } th { "State" } th { "Started (UTC)" } th { "Result" } } }
                        tbody { @for e in effects { (effect_row(e)) } }
                    }
                }
            }
        }
    }
}

fn inbox_row(i: &InboxItem) -> Markup {
    let state = i.state.as_str();
    html! {
        tr data-item=(i.item_id) data-state=(state) {
            td.num { (i.n) }
            td { code { (i.item_id) } }
            td { span class={ "badge state-" (state) } { (state) } }
            td { (i.message.role) }
            td.content { @if let Some(c) = &i.message.content { (excerpt(c, EXCERPT_CHARS)) } @else { "—" } }
            td.num { @if let Some(seq) = i.seq { (seq) } @else { "—" } }
        }
    }
}

fn effect_row(e: &Effect) -> Markup {
    let running = e.state == EffectState::Running;
    html! {
        tr data-call=(e.call_id) class=[running.then_some("unresolved")] {
            td { code { (e.call_id) } div.small { code { (excerpt(&e.args_digest, DIGEST_CHARS)) } } }
            td { @if running { span.badge.unresolved { "running" } } @else { span.badge.state-delivered { "done" } } }
            td { (utc(e.started_at)) }
            td.content { @if let Some(r) = &e.result { code { (excerpt(&r.to_string(), EXCERPT_CHARS)) } } @else { "—" } }
        }
    }
}

fn decision_item(d: &crate::decisions::Decision) -> Markup {
    html! {
        li.item.decision data-decision=(d.id) {
            div.meta { span.role { "decision" } time { (utc(d.created_at)) } }
            div.decision-text { (d.decision) }
            div.small { "why: " (d.rationale) }
            @if let Some(a) = &d.planned_action { div.small { "plan: " (a) } }
            div.outcome {
                @match &d.outcome {
                    Some(o) => { "outcome: " span.outcome-text { (o) } },
                    None => span.pending { "waiting for its outcome" },
                }
            }
        }
    }
}

/// A token count, 0 when not recorded.
fn tokens(n: Option<i64>) -> i64 {
    n.unwrap_or(0)
}

/// Bars of total tokens per round (prompt and completion stacked), as inline SVG.
fn usage_chart(view: &SessionView) -> Markup {
    if view.usage.is_empty() {
        return html! { p.small { "no usage recorded" } };
    }
    let max = view
        .usage
        .iter()
        .map(|u| tokens(u.prompt_tokens) + tokens(u.completion_tokens))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let (w, h) = (300.0, 100.0);
    let bar = w / view.usage.len() as f64;
    html! {
        svg.chart viewBox=(format!("0 0 {w} {}", h + 14.0)) role="img" aria-label="tokens per round" {
            @for (i, u) in view.usage.iter().enumerate() {
                @let x = i as f64 * bar;
                @let ph = tokens(u.prompt_tokens) as f64 / max * h;
                @let ch = tokens(u.completion_tokens) as f64 / max * h;
                g {
                    title { "round " (u.round_index) ": " (tokens(u.prompt_tokens)) " prompt + " (tokens(u.completion_tokens)) " completion tokens" }
                    rect.prompt x=(x + 1.0) y=(h - ph) width=((bar - 2.0).max(1.0)) height=(ph) {}
                    rect.completion x=(x + 1.0) y=(h - ph - ch) width=((bar - 2.0).max(1.0)) height=(ch) {}
                    text x=(x + bar / 2.0) y=(h + 12.0) text-anchor="middle" { (u.round_index) }
                }
            }
        }
        p.small.legend { span.key.prompt {} "prompt " span.key.completion {} "completion · max " (max) " tokens" }
    }
}

/// The decisions page: consumer groups and dead letters.
pub(crate) fn decisions(chrome: &Chrome, groups: &[GroupView], dead: &[DeadLetter]) -> Markup {
    let body = html! {
        h1 { "Decisions" }
        h2 { "Consumer groups" }
        table.grid id="groups" {
            thead { tr { th { "Group" } th.num { "Consumers" } th.num { "Pending" } th.num { "Not delivered" } th { "Oldest pending idle" } th { "Held by" } th.num { "Dead letters" } } }
            tbody {
                @for g in groups {
                    tr data-group=(g.name) {
                        td { code { (g.name) } }
                        td.num { (g.consumers) }
                        td.num { (g.pending) }
                        td.num { (g.lag) }
                        td { @if let Some(ms) = g.oldest_idle_ms { (duration(ms)) } @else { "—" } }
                        td { @for (c, n) in &g.holders { span.holder { code { (c) } " " (n) } " " } }
                        td.num { (g.dead) }
                    }
                }
                @if groups.is_empty() { tr { td.empty colspan="7" { "No consumer group has joined yet." } } }
            }
        }
        h2 { "Dead letters " span.small { "(newest 100 per partition)" } }
        table.grid id="dead" {
            thead { tr { th.num { "Partition" } th { "Entry" } th { "Group" } th { "Reason" } th.num { "Deliveries" } th { "Dead since (UTC)" } } }
            tbody {
                @for d in dead {
                    tr {
                        td.num { (d.partition) }
                        td { code { (d.original_id) } }
                        td { code { (d.group) } }
                        td { (d.reason) }
                        td.num { (d.deliveries) }
                        td { (utc(d.dead_at)) }
                    }
                }
                @if dead.is_empty() { tr { td.empty colspan="6" { "None." } } }
            }
        }
    };
    frame(chrome, "Decisions", "decisions", body)
}

/// The long-term memory page: every namespace that holds items, each a link to its page.
pub(crate) fn memory_namespaces(chrome: &Chrome, namespaces: &[Vec<String>]) -> Markup {
    let body = html! {
        h1 { "Long-term memory" }
        table.grid id="namespaces" {
            thead { tr { th { "Namespace" } } }
            tbody {
                @for ns in namespaces {
                    @let text = ns.join(".");
                    tr data-namespace=(text) {
                        td { a href={ "/memory/" (query_escape(&text)) } { code { (text) } } }
                    }
                }
                @if namespaces.is_empty() { tr { td.empty { "No memory item yet." } } }
            }
        }
    };
    frame(chrome, "Memory", "memory", body)
}

/// One memory namespace's items, most recently updated first.
pub(crate) fn memory_namespace(chrome: &Chrome, namespace: &str, items: &[MemoryItem]) -> Markup {
    let body = html! {
        h1 { "Memory " code { (namespace) } }
        p.small { (items.len()) " items (the newest " (MEMORY_PAGE) " at most); times in UTC" }
        table.grid id="items" {
            thead { tr { th { "Key" } th { "Updated" } th { "Created" } th { "Expires" } th { "Value" } } }
            tbody {
                @for it in items {
                    tr data-key=(it.key) {
                        td { code { (it.key) } }
                        td { (utc(it.updated_at)) }
                        td { (utc(it.created_at)) }
                        td { @if let Some(at) = it.expires_at { (utc(at)) } @else { "never" } }
                        td { pre.content { (pretty(&Value::Object(it.value.clone()))) } }
                    }
                }
                @if items.is_empty() { tr { td.empty colspan="5" { "No item in this namespace." } } }
            }
        }
    };
    frame(chrome, namespace, "memory", body)
}

/// The spill page: per partition owner, pending, lag; lag and pending over the last minutes.
pub(crate) fn spill(chrome: &Chrome, stats: &[PartitionStats], history: &[LagSample]) -> Markup {
    let body = html! {
        h1 { "Spill" }
        div data-refresh="5" {}
        section.charts {
            figure {
                figcaption { "Flush lag, slowest partition (s)" }
                (line_chart(history, |s| s.max_lag_ms as f64 / 1000.0))
            }
            figure {
                figcaption { "Entries not committed, all partitions" }
                (line_chart(history, |s| s.pending as f64))
            }
        }
        p id="spool" {
            "Spool: " (stats.iter().map(|s| s.spool_entries).sum::<u64>()) " entries, "
            (size(stats.iter().map(|s| s.spool_bytes).sum::<u64>())) ", oldest "
            (duration(stats.iter().map(|s| s.spool_age_ms).max().unwrap_or(0)))
            "; durable tier down " (duration(stats.iter().map(|s| s.durable_down_ms).max().unwrap_or(0)))
            "; wal budget " (size(stats.iter().map(|s| s.wal_budget).max().unwrap_or(0)))
        }
        table.grid id="partitions" {
            thead { tr { th.num { "Partition" } th { "Owner" } th.num { "wal pending" } th.num { "decisions pending" } th { "Lag" } th.num { "Rate /s" } th { "Committed wal id" } th { "Writes" } th.num { "Rollbacks repaired" } } }
            tbody {
                @for s in stats {
                    tr data-partition=(s.partition) {
                        td.num { (s.partition) }
                        td { @if let Some(o) = &s.owner { code { (o) } } @else { span.warn { "no owner" } } }
                        td.num { (s.wal_pending) }
                        td.num { (s.decisions_pending) }
                        td { (duration(s.lag_ms)) }
                        td.num { @if let Some(r) = s.flush_rate { (format!("{r:.1}")) } @else { "—" } }
                        td { code { (s.wal_committed.as_deref().unwrap_or("—")) } }
                        td { @match s.writes_open { Some(true) => "open", Some(false) => span.warn { "waiting for a daemon's check" }, None => "—" } }
                        td.num { (s.rollbacks) @if s.rollback_records > 0 { " (" (s.rollback_records) " records)" } }
                    }
                }
            }
        }
    };
    frame(chrome, "Spill", "spill", body)
}

/// A polyline of `value` over the samples (oldest left), with its maximum labelled.
fn line_chart(history: &[LagSample], value: impl Fn(&LagSample) -> f64) -> Markup {
    let (w, h) = (480.0, 120.0);
    if history.len() < 2 {
        return html! { p.small { "collecting samples (one every 5 s)…" } };
    }
    let values: Vec<f64> = history.iter().map(&value).collect();
    let top = values.iter().cloned().fold(0.0, f64::max);
    // The scale: at least 1, so an idle line lies on the axis.
    let max = top.max(1.0);
    let (t0, t1) = (history[0].at, history[history.len() - 1].at);
    let span = (t1 - t0).max(1) as f64;
    let points: Vec<String> = history
        .iter()
        .zip(&values)
        .map(|(s, v)| {
            let x = (s.at - t0) as f64 / span * w;
            let y = h - v / max * (h - 10.0);
            format!("{x:.1},{y:.1}")
        })
        .collect();
    html! {
        svg.chart viewBox=(format!("0 0 {w} {}", h + 14.0)) role="img" {
            line.axis x1="0" y1=(h) x2=(w) y2=(h) {}
            polyline points=(points.join(" ")) {}
            text x="2" y="10" { "max " (format!("{top:.1}")) }
            text x="2" y=(h + 12.0) { (duration((t1 - t0) as u64)) " ago" }
            text x=(w - 2.0) y=(h + 12.0) text-anchor="end" { "now" }
        }
    }
}

/// The page for an id neither tier knows.
pub(crate) fn not_found(chrome: &Chrome, sid: &str) -> Markup {
    frame(
        chrome,
        "Not found",
        "sessions",
        html! { h1 { "Unknown session" } p { "Neither Redis nor the durable tier knows " code { (sid) } "." } },
    )
}

/// The page for a failed read answered with `status`: a request to correct (400), or a
/// store that cannot answer now (Redis down, ...).
pub(crate) fn failure(chrome: &Chrome, status: StatusCode, what: &str) -> Markup {
    let heading = if status.is_client_error() {
        "Bad request"
    } else {
        "Cannot read that now"
    };
    frame(
        chrome,
        "Error",
        "",
        html! { h1 { (heading) } p.error { (what) } },
    )
}

#[cfg(test)]
mod tests {
    use super::size;

    #[test]
    fn sizes_read_in_the_largest_whole_unit() {
        assert_eq!(size(0), "0 B");
        assert_eq!(size(1023), "1023 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(256 << 20), "256.0 MiB");
        assert_eq!(size(3 << 40), "3072.0 GiB");
    }
}
