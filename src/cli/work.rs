//! `agentstate work ...`: working state.

use crate::Result;
use clap::Subcommand;
use serde_json::{json, Value};

use super::{help, input, print_json, print_opt_json, Ctx};

#[derive(Debug, Subcommand)]
pub enum WorkCmd {
    /// Set KEY to a JSON value; prints the new version.
    #[command(after_help = help::WORK_SET)]
    Set {
        /// Session id.
        sid: String,
        /// Working-state key.
        key: String,
        /// The value: JSON, - (stdin) or @FILE.
        #[arg(value_name = "JSON", allow_negative_numbers = true)]
        value: String,
        /// Only if the session's version is still N (else a conflict, exit 1).
        #[arg(long)]
        if_version: Option<u64>,
        /// A run lease token (`agentstate lease acquire`): refused with nothing written once
        /// another owner acquired the session's lease.
        #[arg(long, value_name = "TOKEN")]
        fence: Option<u64>,
    },
    /// Print one value (or null), or all keys as one object.
    #[command(after_help = help::WORK_GET)]
    Get {
        /// Session id.
        sid: String,
        /// Working-state key (all keys when absent).
        key: Option<String>,
    },
    /// Delete a key; prints the new version.
    #[command(after_help = help::WORK_DEL)]
    Del {
        /// Session id.
        sid: String,
        /// Working-state key.
        key: String,
    },
}

pub async fn run(ctx: &Ctx, cmd: WorkCmd) -> Result<()> {
    let store = &ctx.store;
    match cmd {
        WorkCmd::Set {
            sid,
            key,
            value,
            if_version,
            fence,
        } => {
            let store = &store.with_fence(fence);
            let value = input::json("working value", &value)?;
            let version = match if_version {
                Some(v) => store.set_working_if_version(&sid, &key, &value, v).await?,
                None => store.set_working(&sid, &key, &value).await?,
            };
            ctx.emit(version, json!({ "version": version }))?;
        }
        WorkCmd::Get {
            sid,
            key: Some(key),
        } => {
            print_opt_json(store.get_working(&sid, &key).await?)?;
        }
        WorkCmd::Get { sid, key: None } => {
            let state = store.working(&sid).await?;
            print_json(&Value::Object(state.values))?;
        }
        WorkCmd::Del { sid, key } => {
            let version = store.delete_working(&sid, &key).await?;
            ctx.emit(version, json!({ "version": version }))?;
        }
    }
    Ok(())
}
