//! `agentstate inbox ...`: what arrives for a session while a run is in flight.

use clap::Subcommand;
use serde_json::json;

use super::{help, input, print_json, Ctx};
use crate::{InboxItem, NewMessage, Result};

#[derive(Debug, Subcommand)]
pub enum InboxCmd {
    /// Put an item into the session's inbox; prints true (new) or false (already there).
    #[command(after_help = help::INBOX_PUT)]
    Put {
        /// Session id.
        sid: String,
        /// The item's id, chosen by the sender (a re-sent item is a no-op).
        #[arg(long)]
        item_id: String,
        /// The message's role.
        #[arg(long)]
        role: String,
        /// Its text: TEXT, - (stdin) or @FILE.
        #[arg(long, value_name = "TEXT")]
        content: String,
    },
    /// The lease holder claims undelivered items, oldest first; prints them as JSON lines
    /// {"item_id","role","content"}.
    #[command(after_help = help::INBOX_CLAIM)]
    Claim {
        /// Session id.
        sid: String,
        /// The lease holder.
        #[arg(long)]
        owner: String,
        /// Its lease token.
        #[arg(long)]
        token: u64,
        /// At most this many items.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// The lease holder appends items to the transcript and marks them delivered, in one
    /// step; prints their seqs, one per line.
    #[command(after_help = help::INBOX_DELIVER)]
    Deliver {
        /// Session id.
        sid: String,
        /// The lease holder.
        #[arg(long)]
        owner: String,
        /// Its lease token.
        #[arg(long)]
        token: u64,
        /// Item ids, in the order to deliver them.
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// Print every item with its state (pending, claimed, delivered, void) as JSON lines.
    #[command(after_help = help::INBOX_LIST)]
    List {
        /// Session id.
        sid: String,
    },
    /// Drop undelivered items; prints how many were dropped.
    #[command(after_help = help::INBOX_VOID)]
    Void {
        /// Session id.
        sid: String,
        /// Item ids.
        #[arg(required = true)]
        ids: Vec<String>,
    },
}

/// What `claim` prints of an item.
fn claimed(item: &InboxItem) -> serde_json::Value {
    json!({
        "item_id": item.item_id,
        "role": item.message.role,
        "content": item.message.content,
    })
}

pub async fn run(ctx: &Ctx, cmd: InboxCmd) -> Result<()> {
    let store = &ctx.store;
    match cmd {
        InboxCmd::Put {
            sid,
            item_id,
            role,
            content,
        } => {
            let message = NewMessage::new(role).content(input::text("--content", &content)?);
            let added = store.inbox_put(&sid, &[(&item_id, &message)]).await?[0];
            ctx.emit(added, json!({ "added": added }))
        }
        InboxCmd::Claim {
            sid,
            owner,
            token,
            limit,
        } => {
            for item in store.inbox_claim(&sid, &owner, token, limit).await? {
                print_json(&claimed(&item))?;
            }
            Ok(())
        }
        InboxCmd::Deliver {
            sid,
            owner,
            token,
            ids,
        } => {
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            let seqs = store.inbox_deliver(&sid, &owner, token, &ids).await?;
            let plain: Vec<String> = seqs.iter().map(u64::to_string).collect();
            ctx.emit(plain.join("\n"), json!({ "seqs": seqs }))
        }
        InboxCmd::List { sid } => {
            for item in store.inbox(&sid).await? {
                print_json(&item)?;
            }
            Ok(())
        }
        InboxCmd::Void { sid, ids } => {
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            let voided = store.inbox_void(&sid, &ids).await?;
            ctx.emit(voided, json!({ "voided": voided }))
        }
    }
}
