//! `agentstate session ...` and `agentstate keys`.

use std::time::Duration;

use agentstate::{Lifecycle, MessageQuery, NewSession, Result};
use clap::Subcommand;
use serde_json::{json, Map, Value};

use super::{parse_json, print_json, Ctx};

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
            for sid in store.list_sessions(user.as_deref()).await? {
                println!("{sid}");
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
