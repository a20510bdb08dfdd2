//! `agentstate state ...`: the StateService rounds.

use crate::Result;
use clap::Subcommand;
use serde_json::json;

use super::{help, input, print_opt_json, Ctx};

#[derive(Debug, Subcommand)]
pub enum StateCmd {
    /// Save a state snapshot; prints the round id.
    #[command(after_help = help::STATE_SAVE)]
    Save {
        /// User id.
        uid: String,
        /// The state: JSON, - (stdin) or @FILE.
        #[arg(value_name = "JSON")]
        value: String,
        /// Session (default "default").
        #[arg(long)]
        session: Option<String>,
        /// Round id (overwrites; next round when absent).
        #[arg(long)]
        round: Option<u64>,
    },
    /// Print a round's state (the latest when --round is absent), or null.
    #[command(after_help = help::STATE_EXPORT)]
    Export {
        /// User id.
        uid: String,
        /// Session (default "default").
        #[arg(long)]
        session: Option<String>,
        /// Round id.
        #[arg(long)]
        round: Option<u64>,
    },
}

pub async fn run(ctx: &Ctx, cmd: StateCmd) -> Result<()> {
    match cmd {
        StateCmd::Save {
            uid,
            value,
            session,
            round,
        } => {
            let state = input::json("state", &value)?;
            let round = ctx
                .store
                .save_state(&uid, &state, session.as_deref(), round)
                .await?;
            ctx.emit(round, json!({ "round": round }))?;
        }
        StateCmd::Export {
            uid,
            session,
            round,
        } => print_opt_json(
            ctx.store
                .export_state(&uid, session.as_deref(), round)
                .await?,
        )?,
    }
    Ok(())
}
