//! `agentstate session ...` and `agentstate keys`.

use std::time::Duration;

use crate::{Checkpoint, Decision, Lifecycle, Message, MessageQuery, NewSession, Result, Session};
use clap::Subcommand;
use serde::Serialize;
use serde_json::{json, Map, Value};

use super::{help, input, print_json, render, Ctx};

#[derive(Debug, Subcommand)]
pub enum SessionCmd {
    /// Create a session; prints its id.
    #[command(after_help = help::SESSION_CREATE)]
    Create {
        /// Session id (generated `sess_...` when absent).
        #[arg(long)]
        id: Option<String>,
        /// Owning user.
        #[arg(long)]
        user: Option<String>,
        /// Parent session: makes this a sub-agent.
        #[arg(long)]
        parent: Option<String>,
        /// Lifecycle relative to the parent.
        #[arg(long, default_value = "ephemeral")]
        lifecycle: Lifecycle,
        /// Idle TTL in seconds.
        #[arg(long)]
        ttl: Option<u64>,
        /// Model name.
        #[arg(long)]
        model: Option<String>,
        /// System prompt: TEXT, - (stdin) or @FILE.
        #[arg(long, value_name = "TEXT")]
        system_prompt: Option<String>,
        /// Metadata: JSON, - (stdin) or @FILE.
        #[arg(long, value_name = "JSON")]
        metadata: Option<String>,
    },
    /// Print the session, its sub-agents, working state, active messages, latest checkpoints
    /// and pending decisions (an overview on a terminal; one JSON document when piped or
    /// with --json).
    #[command(after_help = help::SESSION_SHOW)]
    Show {
        /// Session id.
        sid: String,
    },
    /// List session ids (all, or one user's), one per line (a table on a terminal; JSON
    /// lines with --json).
    #[command(after_help = help::SESSION_LIST)]
    List {
        /// Only this user's sessions.
        #[arg(long)]
        user: Option<String>,
        /// One page of at most N ids (constant time, whatever the number of sessions); when
        /// more follow, the last line is `next: CURSOR` (`{"next":"CURSOR"}` with --json).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=crate::MAX_PAGE as u64))]
        limit: Option<u64>,
        /// The page after this cursor (the `next:` of the previous page); needs --limit.
        #[arg(long, value_name = "CURSOR", requires = "limit")]
        after: Option<String>,
    },
    /// Delete the session (and linked/ephemeral sub-agents); prints how many were removed.
    #[command(after_help = help::SESSION_CLOSE)]
    Close {
        /// Session id.
        sid: String,
        /// Delete only this session; its children are re-parented to none.
        #[arg(long)]
        no_cascade: bool,
    },
    /// Mark the session archived; prints `archived`.
    #[command(after_help = help::SESSION_ARCHIVE)]
    Archive {
        /// Session id.
        sid: String,
    },
    /// Heartbeat: refresh the idle TTL; prints it (seconds).
    #[command(after_help = help::SESSION_TOUCH)]
    Touch {
        /// Session id.
        sid: String,
    },
    /// Fork: a new session with SID's settings, the messages active up to --at (renumbered
    /// from 1) and its graph checkpoint log; prints the new session id.
    #[command(after_help = help::SESSION_FORK)]
    Fork {
        /// The session to fork.
        sid: String,
        /// Fork at this seq: messages after it stay behind (default: all).
        #[arg(long, value_name = "SEQ")]
        at: Option<u64>,
        /// Id of the new session (default: generated).
        #[arg(long, value_name = "SID")]
        id: Option<String>,
    },
}

pub async fn run(ctx: &Ctx, cmd: SessionCmd) -> Result<()> {
    let store = &ctx.store;
    match cmd {
        SessionCmd::Create {
            id,
            user,
            parent,
            lifecycle,
            ttl,
            model,
            system_prompt,
            metadata,
        } => {
            let mut new = NewSession::new();
            new.id = id;
            new.user_id = user;
            if let Some(p) = parent {
                new = new.parent(p, lifecycle);
            }
            new.ttl = ttl.map(Duration::from_secs);
            new.model = model;
            new.system_prompt = input::opt_text("--system-prompt", system_prompt)?;
            new.metadata = input::opt_json("--metadata", metadata)?;
            let sid = store.create_session(&new).await?;
            ctx.emit(&sid, json!({ "id": sid }))?;
        }
        SessionCmd::Show { sid } => {
            let overview = overview(ctx, &sid).await?;
            if render::for_people(ctx.json()) {
                show_for_people(&overview);
            } else {
                print_json(&overview.document())?;
            }
        }
        SessionCmd::List { user, limit, after } => {
            list(ctx, user.as_deref(), limit, after.as_deref()).await?
        }
        SessionCmd::Close { sid, no_cascade } => {
            let removed = store.close_session(&sid, !no_cascade).await?;
            ctx.emit(removed, json!({ "removed": removed }))?;
        }
        SessionCmd::Archive { sid } => {
            store.archive(&sid).await?;
            ctx.emit("archived", json!({ "id": sid, "status": "archived" }))?;
        }
        SessionCmd::Fork { sid, at, id } => {
            let fork = store.fork_session(&sid, id.as_deref(), at).await?;
            ctx.emit(
                &fork.id,
                json!({
                    "id": fork.id,
                    "forked_from": sid,
                    "at": at,
                    "messages": fork.messages,
                    "checkpoints": fork.checkpoints,
                }),
            )?;
        }
        SessionCmd::Touch { sid } => {
            store.touch(&sid).await?;
            let ttl = store.require_session(&sid).await?.ttl;
            ctx.emit(ttl, json!({ "id": sid, "ttl": ttl }))?;
        }
    }
    Ok(())
}

/// One row of `session list`: what the table shows, and the `--json` line.
#[derive(Debug, Serialize)]
struct Listed {
    id: String,
    /// False when the session is not live in Redis (expired or lost; restorable from SQLite).
    live: bool,
    user_id: Option<String>,
    kind: Option<String>,
    parent: Option<String>,
    lifecycle: Option<&'static str>,
    status: Option<String>,
    messages: Option<u64>,
    updated_at: Option<i64>,
}

/// `session list`: ids one per line when piped, a table on a terminal, JSON lines with
/// `--json`.
/// With `limit`, one page after `after`, and the next page's cursor printed last.
async fn list(
    ctx: &Ctx,
    user: Option<&str>,
    limit: Option<u64>,
    after: Option<&str>,
) -> Result<()> {
    let (ids, next) = match limit {
        Some(limit) => {
            let mut listing = crate::SessionListing::new(limit as usize);
            listing.user = user.map(str::to_string);
            listing.after = after.map(str::to_string);
            let page = ctx.store.list_sessions_page(&listing).await?;
            (page.ids, page.next)
        }
        None => (ctx.store.list_sessions(user).await?, None),
    };
    let people = render::for_people(ctx.json());
    if !people && !ctx.json() {
        for sid in ids {
            println!("{sid}");
        }
        if let Some(next) = next {
            println!("next: {next}");
        }
        return Ok(());
    }
    let mut rows = Vec::new();
    for sid in ids {
        rows.push(match ctx.store.session(&sid).await? {
            Some(m) => Listed {
                live: true,
                user_id: m.user_id,
                kind: Some(m.kind),
                parent: m.parent,
                lifecycle: Some(m.lifecycle.as_str()),
                status: Some(m.status),
                messages: Some(m.next_seq - 1),
                updated_at: Some(m.updated_at),
                id: sid,
            },
            None => Listed {
                id: sid,
                live: false,
                user_id: None,
                kind: None,
                parent: None,
                lifecycle: None,
                status: None,
                messages: None,
                updated_at: None,
            },
        });
    }
    if !people {
        for row in &rows {
            print_json(row)?;
        }
        if let Some(next) = next {
            print_json(&serde_json::json!({ "next": next }))?;
        }
        return Ok(());
    }
    let dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let table: Vec<Vec<String>> = rows
        .into_iter()
        .map(|r| {
            if !r.live {
                return vec![r.id, "-".into(), "(not live: restorable)".into()];
            }
            vec![
                r.id,
                dash(r.user_id),
                dash(r.kind),
                dash(r.parent),
                dash(r.status),
                r.messages.unwrap_or(0).to_string(),
                r.updated_at.map_or("-".into(), render::age),
            ]
        })
        .collect();
    render::table(
        &[
            "session", "user", "kind", "parent", "status", "messages", "updated",
        ],
        &table,
    );
    if let Some(next) = next {
        println!("next: {next}");
    }
    Ok(())
}

/// One key of `keys --json`.
#[derive(Debug, Serialize)]
struct KeyLine {
    key: String,
    #[serde(rename = "type")]
    kind: String,
    /// Seconds left of its idle TTL (-1: none).
    ttl: i64,
}

/// Prints the session's keys that exist in Redis, one per line (JSON lines `{key, type,
/// ttl}` with --json). A session with no key is unknown, or not live (expired or lost, and
/// restorable from SQLite): both are errors, as for every other verb.
pub async fn keys(ctx: &Ctx, sid: &str) -> Result<()> {
    let names = ctx.store.admin().session_key_names(sid).await?;
    if names.is_empty() {
        if ctx.store.is_indexed(sid).await? {
            return Err(crate::Error::InvalidInput(format!(
                "session {sid} has no keys in Redis: it is not live (it expired or Redis lost it; SQLite may hold it) — `agentstate restore {sid}` brings it back"
            )));
        }
        return Err(crate::Error::UnknownSession(sid.to_string()));
    }
    if !ctx.json() {
        for key in names {
            println!("{key}");
        }
        return Ok(());
    }
    let mut pipe = redis::pipe();
    for key in &names {
        pipe.cmd("TYPE").arg(key).cmd("TTL").arg(key);
    }
    let mut conn = ctx.store.conn().await?;
    let facts: Vec<redis::Value> = pipe.query_async(&mut conn).await?;
    for (key, pair) in names.into_iter().zip(facts.chunks(2)) {
        let kind = match &pair[0] {
            redis::Value::SimpleString(s) => s.clone(),
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            other => format!("{other:?}"),
        };
        let ttl = match pair[1] {
            redis::Value::Int(n) => n,
            _ => -1,
        };
        print_json(&KeyLine { key, kind, ttl })?;
    }
    Ok(())
}

/// A sub-agent in the tree under a session.
#[derive(Debug, Serialize)]
struct SubAgent {
    id: String,
    /// False when the sub-agent is not live in Redis (its fields below are then absent).
    live: bool,
    lifecycle: Option<&'static str>,
    spawn_depth: Option<u32>,
    messages: Option<u64>,
    sub_agents: Vec<SubAgent>,
}

/// Everything `session show` shows, read once: the terminal overview and the JSON document
/// are two renderings of it.
struct Overview {
    session: Session,
    sub_agents: Vec<SubAgent>,
    working: Map<String, Value>,
    messages: Vec<Message>,
    checkpoints: Vec<Checkpoint>,
    pending: Vec<Decision>,
}

async fn overview(ctx: &Ctx, sid: &str) -> Result<Overview> {
    let store = &ctx.store;
    let session = store.require_session(sid).await?;
    Ok(Overview {
        sub_agents: tree(ctx, sid).await?,
        working: store.working(sid).await?.values,
        messages: store.messages(sid, MessageQuery::active()).await?,
        checkpoints: store.checkpoints(sid).await?,
        pending: store.incomplete_decisions(Some(sid)).await?,
        session,
    })
}

impl Overview {
    /// The JSON document: SPEC §6's `session`, `working`, `messages` (every active one),
    /// `checkpoints` (latest per label), plus `sub_agents` (the tree) and
    /// `pending_decisions` (decisions without an outcome).
    fn document(&self) -> Value {
        let checkpoints: Map<String, Value> = self
            .checkpoints
            .iter()
            .map(|c| (c.label.clone(), json!(c)))
            .collect();
        json!({
            "session": self.session,
            "sub_agents": self.sub_agents,
            "working": self.working,
            "messages": self.messages,
            "checkpoints": checkpoints,
            "pending_decisions": self.pending,
        })
    }
}

/// How many of the last active messages the overview shows.
const SHOWN_MESSAGES: usize = 10;

/// The session overview for people: meta, sub-agent tree, working state, last messages,
/// checkpoints and pending decisions.
fn show_for_people(o: &Overview) {
    let s = &o.session;
    println!(
        "session {}  ({}, {}, user {}, depth {}, ttl {}s, updated {})",
        s.id,
        s.kind,
        s.status,
        s.user_id.as_deref().unwrap_or("-"),
        s.spawn_depth,
        s.ttl,
        render::age(s.updated_at)
    );
    if let Some(parent) = &s.parent {
        println!("  parent: {parent} ({})", s.lifecycle.as_str());
    }
    if let Some(model) = &s.model {
        println!("  model: {model}");
    }
    println!("\nsub-agents:");
    let mut lines = Vec::new();
    tree_lines(&o.sub_agents, "", &mut lines);
    if lines.is_empty() {
        println!("  (none)");
    }
    for l in lines {
        println!("  {l}");
    }
    println!("\nworking state (version {}):", s.version);
    if o.working.is_empty() {
        println!("  (empty)");
    }
    for (k, v) in &o.working {
        println!("  {k} = {}", render::clip(&v.to_string(), 100));
    }
    println!(
        "\nlast messages ({} next seq, {} compactions):",
        s.next_seq, s.last_compact_seq
    );
    let skip = o.messages.len().saturating_sub(SHOWN_MESSAGES);
    let rows: Vec<Vec<String>> = o.messages[skip..]
        .iter()
        .map(|m| {
            vec![
                format!("#{}", m.seq),
                m.role.clone(),
                m.name.clone().unwrap_or_default(),
                render::clip(m.content.as_deref().unwrap_or(""), 80),
            ]
        })
        .collect();
    render::table(&["seq", "role", "name", "content"], &rows);
    println!("\ncheckpoints:");
    if o.checkpoints.is_empty() {
        println!("  (none)");
    }
    for c in &o.checkpoints {
        let keys: Vec<&String> = c
            .payload
            .as_object()
            .map(|o| o.keys().collect())
            .unwrap_or_default();
        println!(
            "  {}  {}  {}  keys: {:?}",
            c.label,
            c.id,
            render::age(c.created_at),
            keys
        );
    }
    println!("\npending decisions:");
    if o.pending.is_empty() {
        println!("  (none)");
    }
    for d in &o.pending {
        println!(
            "  {}  {} — {}{}",
            d.id,
            render::clip(&d.decision, 50),
            render::clip(&d.rationale, 50),
            d.planned_action
                .as_ref()
                .map(|a| format!(" (action: {a})"))
                .unwrap_or_default()
        );
    }
}

/// The sub-agent tree under `sid`.
fn tree<'a>(
    ctx: &'a Ctx,
    sid: &'a str,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Vec<SubAgent>>> + 'a>> {
    Box::pin(async move {
        let mut out = Vec::new();
        for kid in ctx.store.children(sid).await? {
            let agent = match ctx.store.session(&kid).await? {
                Some(m) => SubAgent {
                    sub_agents: tree(ctx, &kid).await?,
                    id: kid,
                    live: true,
                    lifecycle: Some(m.lifecycle.as_str()),
                    spawn_depth: Some(m.spawn_depth),
                    messages: Some(m.next_seq - 1),
                },
                None => SubAgent {
                    id: kid,
                    live: false,
                    lifecycle: None,
                    spawn_depth: None,
                    messages: None,
                    sub_agents: Vec::new(),
                },
            };
            out.push(agent);
        }
        Ok(out)
    })
}

/// The tree as indented lines, as `tree(1)` draws it.
fn tree_lines(agents: &[SubAgent], indent: &str, lines: &mut Vec<String>) {
    for (i, a) in agents.iter().enumerate() {
        let last = i + 1 == agents.len();
        let label = if a.live {
            format!(
                "{} ({}, depth {}, {} msgs)",
                a.id,
                a.lifecycle.unwrap_or("-"),
                a.spawn_depth.unwrap_or(0),
                a.messages.unwrap_or(0)
            )
        } else {
            format!("{} (not live)", a.id)
        };
        lines.push(format!(
            "{indent}{}{label}",
            if last { "└── " } else { "├── " }
        ));
        let deeper = format!("{indent}{}", if last { "    " } else { "│   " });
        tree_lines(&a.sub_agents, &deeper, lines);
    }
}
