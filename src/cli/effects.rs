//! `agentstate effects ...`: the tool-effect ledger (a side effect runs once per tool call).

use clap::Subcommand;
use serde_json::json;

use super::{help, input, print_json, Ctx};
use crate::{EffectStart, Result};

#[derive(Debug, Subcommand)]
pub enum EffectsCmd {
    /// Record the intent to run a tool call; prints `started` (run the tool), or the record
    /// as JSON when it began before: {"state":"done","result":...} (use the result) or
    /// {"state":"running",...} (running elsewhere, or its process died: reconcile).
    #[command(after_help = help::EFFECTS_BEGIN)]
    Begin {
        /// The run's session id.
        run: String,
        /// The tool call id.
        call_id: String,
        /// The call's arguments: JSON, - (stdin) or @FILE.
        #[arg(long, value_name = "JSON")]
        args: String,
        /// A run lease token (`agentstate lease acquire`): refused with nothing recorded once
        /// another owner acquired the session's lease.
        #[arg(long, value_name = "TOKEN")]
        fence: Option<u64>,
    },
    /// Record a tool call's result; prints true, or false when it had one already.
    #[command(after_help = help::EFFECTS_FINISH)]
    Finish {
        /// The run's session id.
        run: String,
        /// The tool call id.
        call_id: String,
        /// The result: JSON, - (stdin) or @FILE.
        #[arg(long, value_name = "JSON", allow_negative_numbers = true)]
        result: String,
        /// A run lease token (`agentstate lease acquire`): refused with nothing recorded once
        /// another owner acquired the session's lease.
        #[arg(long, value_name = "TOKEN")]
        fence: Option<u64>,
    },
    /// Print the intents without a result as JSON lines, oldest first.
    #[command(after_help = help::EFFECTS_UNRESOLVED)]
    Unresolved {
        /// The run's session id.
        run: String,
    },
    /// Print every tool call of the ledger as JSON lines, oldest first.
    #[command(after_help = help::EFFECTS_LIST)]
    List {
        /// The run's session id.
        run: String,
    },
}

pub async fn run(ctx: &Ctx, cmd: EffectsCmd) -> Result<()> {
    let store = &ctx.store;
    match cmd {
        EffectsCmd::Begin {
            run,
            call_id,
            args,
            fence,
        } => {
            let args = input::json("--args", &args)?;
            match store
                .with_fence(fence)
                .effect_begin(&run, &call_id, &args)
                .await?
            {
                EffectStart::Started => ctx.emit("started", json!({ "state": "started" })),
                EffectStart::Running(e) | EffectStart::Done(e) => print_json(&e),
            }
        }
        EffectsCmd::Finish {
            run,
            call_id,
            result,
            fence,
        } => {
            let result = input::json("--result", &result)?;
            let recorded = store
                .with_fence(fence)
                .effect_finish(&run, &call_id, &result)
                .await?;
            ctx.emit(recorded, json!({ "recorded": recorded }))
        }
        EffectsCmd::Unresolved { run } => {
            for e in store.unresolved_effects(&run).await? {
                print_json(&e)?;
            }
            Ok(())
        }
        EffectsCmd::List { run } => {
            for e in store.effects(&run).await? {
                print_json(&e)?;
            }
            Ok(())
        }
    }
}
