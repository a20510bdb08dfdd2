//! `agentstate decide`, `outcome` and `decisions ...`.

use crate::{NewDecision, Result};
use clap::{Args, Subcommand};
use serde_json::json;

use super::{help, input, print_json, render, Ctx};

#[derive(Debug, Args)]
pub struct DecideArgs {
    /// Session id.
    sid: String,
    /// What was decided.
    #[arg(long)]
    decision: String,
    /// Why: TEXT, - (stdin) or @FILE.
    #[arg(long, value_name = "TEXT")]
    rationale: String,
    /// The planned action.
    #[arg(long)]
    action: Option<String>,
    /// Metadata: a JSON object, - (stdin) or @FILE.
    #[arg(long, value_name = "JSON")]
    meta: Option<String>,
    /// Return only once SQLite has committed the decision.
    #[arg(long)]
    durable: bool,
}

#[derive(Debug, Args)]
pub struct OutcomeArgs {
    /// Decision id (`<partition>:<entry id>`).
    decision_id: String,
    /// The outcome: TEXT, - (stdin) or @FILE.
    #[arg(long, value_name = "TEXT")]
    outcome: String,
}

#[derive(Debug, Subcommand)]
pub enum DecisionsCmd {
    /// Print decisions without an outcome as JSON lines, oldest first (a table on a
    /// terminal).
    #[command(after_help = help::DECISIONS_INCOMPLETE)]
    Incomplete {
        /// Only this session's.
        #[arg(long)]
        session: Option<String>,
    },
}

pub async fn decide(ctx: &Ctx, a: DecideArgs) -> Result<()> {
    let mut d = NewDecision::new(a.decision, input::text("--rationale", &a.rationale)?);
    d.planned_action = a.action;
    d.meta = input::opt_json("--meta", a.meta)?;
    let id = ctx.store_at(a.durable).record_decision(&a.sid, &d).await?;
    ctx.emit(&id, json!({ "id": id }))
}

/// Prints `true` when the outcome was recorded, `false` when the decision was no longer open
/// (it already had an outcome, or its session was closed).
pub async fn outcome(ctx: &Ctx, a: OutcomeArgs) -> Result<()> {
    let outcome = input::text("--outcome", &a.outcome)?;
    let recorded = ctx.store.record_outcome(&a.decision_id, &outcome).await?;
    ctx.emit(recorded, json!({ "recorded": recorded }))
}

pub async fn run(ctx: &Ctx, cmd: DecisionsCmd) -> Result<()> {
    match cmd {
        DecisionsCmd::Incomplete { session } => {
            let decisions = ctx.store.incomplete_decisions(session.as_deref()).await?;
            if render::for_people(ctx.json()) {
                let rows: Vec<Vec<String>> = decisions
                    .iter()
                    .map(|d| {
                        vec![
                            d.id.clone(),
                            d.session_id.clone(),
                            render::clip(&d.decision, 40),
                            render::clip(d.planned_action.as_deref().unwrap_or("-"), 30),
                            render::age(d.created_at),
                        ]
                    })
                    .collect();
                render::table(
                    &["id", "session", "decision", "planned action", "recorded"],
                    &rows,
                );
            } else {
                for d in decisions {
                    print_json(&d)?;
                }
            }
        }
    }
    Ok(())
}
