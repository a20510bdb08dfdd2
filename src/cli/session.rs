//! `agentstate session ...` and `agentstate keys`.

use std::time::Duration;

use agentstate::{Lifecycle, MessageQuery, NewSession, Result};
use clap::Subcommand;
use serde_json::{json, Map, Value};

use super::{parse_json, print_json, render, Ctx};

#[derive(Debug, Subcommand)]
pub enum SessionCmd {
    /// Create a session; prints its id.
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
        /// System prompt.
        #[arg(long)]
        system_prompt: Option<String>,
        /// Metadata JSON.
        #[arg(long)]
        metadata: Option<String>,
    },
    /// Print the session, its working state, active messages and latest checkpoints.
    Show {
        /// Session id.
        sid: String,
    },
    /// List session ids (all, or one user's), one per line.
    List {
        /// Only this user's sessions.
        #[arg(long)]
        user: Option<String>,
    },
    /// Delete the session (and linked/ephemeral sub-agents); prints how many were removed.
    Close {
        /// Session id.
        sid: String,
        /// Delete only this session; its children are re-parented to none.
        #[arg(long)]
        no_cascade: bool,
    },
    /// Mark the session archived.
    Archive {
        /// Session id.
        sid: String,
    },
    /// Heartbeat: refresh the idle TTL.
    Touch {
        /// Session id.
        sid: String,
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
            new.system_prompt = system_prompt;
            new.metadata = metadata.map(|m| parse_json("--metadata", &m)).transpose()?;
            println!("{}", store.create_session(&new).await?);
        }
        SessionCmd::Show { sid } if render::for_people(ctx.json()) => {
            show_for_people(ctx, &sid).await?
        }
        SessionCmd::Show { sid } => {
            let session = store.require_session(&sid).await?;
            let working = store.working(&sid).await?;
            let messages = store.messages(&sid, MessageQuery::active()).await?;
            let checkpoints: Map<String, Value> = store
                .checkpoints(&sid)
                .await?
                .into_iter()
                .map(|c| Ok((c.label.clone(), serde_json::to_value(c)?)))
                .collect::<Result<_>>()?;
            print_json(&json!({
                "session": session,
                "working": working.values,
                "messages": messages,
                "checkpoints": checkpoints,
            }))?;
        }
        SessionCmd::List { user } => {
            let ids = store.list_sessions(user.as_deref()).await?;
            if render::for_people(ctx.json()) {
                let mut rows = Vec::new();
                for sid in &ids {
                    rows.push(match store.session(sid).await? {
                        Some(m) => vec![
                            sid.clone(),
                            m.user_id.unwrap_or_else(|| "-".into()),
                            m.kind,
                            m.parent.unwrap_or_else(|| "-".into()),
                            m.status,
                            (m.next_seq - 1).to_string(),
                            render::age(m.updated_at),
                        ],
                        None => vec![sid.clone(), "-".into(), "(not live: restorable)".into()],
                    });
                }
                render::table(
                    &[
                        "session", "user", "kind", "parent", "status", "messages", "updated",
                    ],
                    &rows,
                );
            } else if ctx.json() {
                print_json(&ids)?;
            } else {
                for sid in ids {
                    println!("{sid}");
                }
            }
        }
        SessionCmd::Close { sid, no_cascade } => {
            println!("{}", store.close_session(&sid, !no_cascade).await?);
        }
        SessionCmd::Archive { sid } => store.archive(&sid).await?,
        SessionCmd::Touch { sid } => store.touch(&sid).await?,
    }
    Ok(())
}

/// Prints the session's keys that exist in Redis, one per line.
pub async fn keys(ctx: &Ctx, sid: &str) -> Result<()> {
    for key in ctx.store.session_key_names(sid).await? {
        println!("{key}");
    }
    Ok(())
}

/// How many of the last active messages the overview shows.
const SHOWN_MESSAGES: usize = 10;

/// The session overview for people: meta, sub-agent tree, working state, last messages,
/// checkpoints and pending decisions.
async fn show_for_people(ctx: &Ctx, sid: &str) -> Result<()> {
    let store = &ctx.store;
    let s = store.require_session(sid).await?;
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
    tree(ctx, sid, "", &mut lines).await?;
    if lines.is_empty() {
        println!("  (none)");
    }
    for l in lines {
        println!("  {l}");
    }
    let working = store.working(sid).await?;
    println!("\nworking state (version {}):", working.version);
    if working.values.is_empty() {
        println!("  (empty)");
    }
    for (k, v) in &working.values {
        println!("  {k} = {}", render::clip(&v.to_string(), 100));
    }
    let messages = store
        .messages(sid, MessageQuery::active().last(SHOWN_MESSAGES))
        .await?;
    println!(
        "\nlast messages ({} next seq, {} compactions):",
        s.next_seq, s.last_compact_seq
    );
    let rows: Vec<Vec<String>> = messages
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
    let checkpoints = store.checkpoints(sid).await?;
    if checkpoints.is_empty() {
        println!("  (none)");
    }
    for c in checkpoints {
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
    let pending = store.incomplete_decisions(Some(sid)).await?;
    if pending.is_empty() {
        println!("  (none)");
    }
    for d in pending {
        println!(
            "  {}  {} — {}{}",
            d.id,
            render::clip(&d.decision, 50),
            render::clip(&d.rationale, 50),
            d.planned_action
                .map(|a| format!(" (action: {a})"))
                .unwrap_or_default()
        );
    }
    Ok(())
}

/// Appends the sub-agent tree under `sid` as indented lines.
fn tree<'a>(
    ctx: &'a Ctx,
    sid: &'a str,
    indent: &'a str,
    lines: &'a mut Vec<String>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<()>> + 'a>> {
    Box::pin(async move {
        let kids = ctx.store.children(sid).await?;
        for (i, kid) in kids.iter().enumerate() {
            let last = i + 1 == kids.len();
            let label = match ctx.store.session(kid).await? {
                Some(m) => format!(
                    "{kid} ({}, depth {}, {} msgs)",
                    m.lifecycle.as_str(),
                    m.spawn_depth,
                    m.next_seq - 1
                ),
                None => format!("{kid} (not live)"),
            };
            lines.push(format!(
                "{indent}{}{label}",
                if last { "└── " } else { "├── " }
            ));
            let deeper = format!("{indent}{}", if last { "    " } else { "│   " });
            tree(ctx, kid, &deeper, lines).await?;
        }
        Ok(())
    })
}
