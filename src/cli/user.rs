//! `agentstate user ...`: user-attributed data and erasure.

use crate::Result;
use clap::Subcommand;
use serde_json::json;

use super::{help, input, print_json, print_opt_json, Ctx};

#[derive(Debug, Subcommand)]
pub enum UserCmd {
    /// Store a JSON value under KEY for the user; prints the Redis hash that holds it.
    #[command(after_help = help::USER_SET)]
    Set {
        /// User id.
        uid: String,
        /// Key.
        key: String,
        /// The value: JSON, - (stdin) or @FILE.
        #[arg(value_name = "JSON")]
        value: String,
    },
    /// Print the value under KEY, or null.
    #[command(after_help = help::USER_GET)]
    Get {
        /// User id.
        uid: String,
        /// Key.
        key: String,
    },
    /// Erase everything stored for the user; prints the number of values removed
    /// (the full receipt with --json).
    #[command(after_help = help::USER_FORGET)]
    Forget {
        /// User id.
        uid: String,
    },
}

pub async fn run(ctx: &Ctx, cmd: UserCmd) -> Result<()> {
    let store = &ctx.store;
    match cmd {
        UserCmd::Set { uid, key, value } => {
            let value = input::json("user value", &value)?;
            store.set_user_value(&uid, &key, &value).await?;
            let redis_key = store.keys().user(&uid);
            ctx.emit(
                &redis_key,
                json!({ "user_id": uid, "key": key, "redis_key": redis_key }),
            )?;
        }
        UserCmd::Get { uid, key } => print_opt_json(store.user_value(&uid, &key).await?)?,
        UserCmd::Forget { uid } => {
            let receipt = store.forget_user(&uid).await?;
            if ctx.json() {
                print_json(&receipt)?;
            } else {
                println!("{}", receipt.removed_keys.len());
            }
        }
    }
    Ok(())
}
