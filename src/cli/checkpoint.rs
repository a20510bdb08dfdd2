//! `agentstate checkpoint ...`.

use crate::spill::inspect;
use crate::Result;
use clap::Subcommand;
use serde_json::json;

use super::{help, print_json, print_opt_json, Ctx};

#[derive(Debug, Subcommand)]
pub enum CheckpointCmd {
    /// Promote working state to a checkpoint; prints its id.
    #[command(after_help = help::CHECKPOINT_CREATE)]
    Create {
        /// Session id.
        sid: String,
        /// Label.
        label: String,
        /// Only these working-state keys (comma separated).
        #[arg(long, value_delimiter = ',')]
        keys: Option<Vec<String>>,
        /// Return only once SQLite has committed the checkpoint.
        #[arg(long)]
        durable: bool,
        /// A run lease token (`agentstate lease acquire`): refused with nothing written once
        /// another owner acquired the session's lease.
        #[arg(long, value_name = "TOKEN")]
        fence: Option<u64>,
    },
    /// Print the latest payload under LABEL, or the payload of checkpoint `--id` (from the
    /// full history), or null.
    #[command(after_help = help::CHECKPOINT_GET)]
    Get {
        /// Session id.
        sid: String,
        /// Label.
        #[arg(required_unless_present = "id", conflicts_with = "id")]
        label: Option<String>,
        /// A checkpoint id (`ckpt_...`) instead of a label.
        #[arg(long)]
        id: Option<String>,
    },
    /// Print every checkpoint as JSON lines {id, label, created_at}, oldest first: the full
    /// history from the SQLite file (`--db`, read-only) and the latest per label from Redis;
    /// only the latest per label when there is no SQLite file.
    #[command(after_help = help::CHECKPOINT_LIST)]
    List {
        /// Session id.
        sid: String,
    },
}

pub async fn run(ctx: &Ctx, cmd: CheckpointCmd) -> Result<()> {
    match cmd {
        CheckpointCmd::Create {
            sid,
            label,
            keys,
            durable,
            fence,
        } => {
            let names: Option<Vec<&str>> = keys
                .as_ref()
                .map(|k| k.iter().map(String::as_str).collect());
            let id = ctx
                .store_at(durable)
                .with_fence(fence)
                .checkpoint(&sid, &label, names.as_deref())
                .await?;
            ctx.emit(&id, json!({ "id": id }))?;
        }
        CheckpointCmd::Get {
            sid,
            label: Some(label),
            ..
        } => {
            let latest = ctx.store.checkpoint_latest(&sid, &label).await?;
            print_opt_json(latest.map(|c| c.payload))?;
        }
        CheckpointCmd::Get { sid, id, .. } => {
            let id = id.unwrap_or_default();
            let found = inspect::checkpoint_history(&ctx.store, &ctx.global.db(), &sid)
                .await?
                .into_iter()
                .find(|c| c.id == id);
            print_opt_json(found.map(|c| c.payload))?;
        }
        CheckpointCmd::List { sid } => {
            for c in inspect::checkpoint_history(&ctx.store, &ctx.global.db(), &sid).await? {
                print_json(&json!({"id": c.id, "label": c.label, "created_at": c.created_at}))?;
            }
        }
    }
    Ok(())
}
