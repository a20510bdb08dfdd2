//! `agentstate msg ...`, `compact` and `usage`.

use crate::{AppendOptions, Compaction, MessageQuery, NewMessage, Result, Usage};
use clap::{Args, Subcommand};
use serde_json::json;

use super::{help, input, print_json, Ctx};

#[derive(Debug, Subcommand)]
pub enum MsgCmd {
    /// Append a message; prints its seq.
    #[command(after_help = help::MSG_APPEND)]
    Append(AppendArgs),
    /// Print messages as JSON lines in seq order (active ones unless --all).
    #[command(after_help = help::MSG_LIST)]
    List {
        /// Session id.
        sid: String,
        /// Include compacted-out messages.
        #[arg(long)]
        all: bool,
        /// Only messages after this seq.
        #[arg(long)]
        after: Option<u64>,
        /// Only the last N.
        #[arg(long)]
        last: Option<usize>,
    },
}

#[derive(Debug, Args)]
pub struct AppendArgs {
    /// Session id.
    sid: String,
    /// system, user, assistant, tool, ...
    #[arg(long)]
    role: String,
    /// Text content: TEXT, - (stdin) or @FILE. Required unless --tool-calls is given.
    #[arg(long, value_name = "TEXT", required_unless_present = "tool_calls")]
    content: Option<String>,
    /// Author name.
    #[arg(long)]
    name: Option<String>,
    /// Tool calls: JSON, - (stdin) or @FILE.
    #[arg(long, value_name = "JSON")]
    tool_calls: Option<String>,
    /// The tool call this message answers.
    #[arg(long)]
    tool_call_id: Option<String>,
    /// Round index.
    #[arg(long)]
    round: Option<i64>,
    /// Metadata: JSON, - (stdin) or @FILE.
    #[arg(long, value_name = "JSON")]
    meta: Option<String>,
    /// Retry-safe: a repeated key returns the original seq and writes nothing.
    #[arg(long)]
    idempotency_key: Option<String>,
    /// Stale-writer-safe: fail with a conflict unless the next seq is N.
    #[arg(long)]
    expect_seq: Option<u64>,
    /// Return only once SQLite has committed the message.
    #[arg(long)]
    durable: bool,
    /// A run lease token (`agentstate lease acquire`): refused with nothing written once
    /// another owner acquired the session's lease.
    #[arg(long, value_name = "TOKEN")]
    fence: Option<u64>,
}

#[derive(Debug, Args)]
pub struct CompactArgs {
    /// Session id.
    sid: String,
    /// First seq to compact.
    #[arg(long)]
    from: u64,
    /// Last seq to compact (inclusive).
    #[arg(long)]
    to: u64,
    /// The summary note: TEXT, - (stdin) or @FILE.
    #[arg(long, value_name = "TEXT")]
    note: String,
    /// Tokens before.
    #[arg(long)]
    before_tokens: Option<i64>,
    /// Tokens after.
    #[arg(long)]
    after_tokens: Option<i64>,
    /// Round index.
    #[arg(long)]
    round: Option<i64>,
    /// A run lease token (`agentstate lease acquire`): refused with nothing written once
    /// another owner acquired the session's lease.
    #[arg(long, value_name = "TOKEN")]
    fence: Option<u64>,
}

#[derive(Debug, Args)]
pub struct UsageArgs {
    /// Session id.
    sid: String,
    /// Round index.
    #[arg(long)]
    round: i64,
    /// Prompt tokens.
    #[arg(long)]
    prompt: i64,
    /// Completion tokens.
    #[arg(long)]
    completion: i64,
    /// Total tokens (prompt + completion when absent).
    #[arg(long)]
    total: Option<i64>,
    /// Model.
    #[arg(long)]
    model: Option<String>,
}

pub async fn run(ctx: &Ctx, cmd: MsgCmd) -> Result<()> {
    match cmd {
        MsgCmd::Append(a) => {
            let mut m = NewMessage::new(a.role);
            m.content = input::opt_text("--content", a.content)?;
            m.name = a.name;
            m.tool_calls = input::opt_json("--tool-calls", a.tool_calls)?;
            m.tool_call_id = a.tool_call_id;
            m.round_index = a.round;
            m.meta = input::opt_json("--meta", a.meta)?;
            let mut options = AppendOptions::new();
            options.idempotency_key = a.idempotency_key;
            options.expect_seq = a.expect_seq;
            let seq = ctx
                .store_at(a.durable)
                .with_fence(a.fence)
                .append_with(&a.sid, &m, &options)
                .await?;
            ctx.emit(seq, json!({ "seq": seq }))?;
        }
        MsgCmd::List {
            sid,
            all,
            after,
            last,
        } => {
            let mut query = if all {
                MessageQuery::all()
            } else {
                MessageQuery::active()
            };
            query.after = after;
            query.last = last;
            for m in ctx.store.messages(&sid, query).await? {
                print_json(&m)?;
            }
        }
    }
    Ok(())
}

/// Prints `COMPACT_SEQ NOTE_SEQ` (`{"compact_seq", "note_seq"}` with --json).
pub async fn compact(ctx: &Ctx, a: CompactArgs) -> Result<()> {
    let mut c = Compaction::new(a.from, a.to, input::text("--note", &a.note)?);
    c.before_tokens = a.before_tokens;
    c.after_tokens = a.after_tokens;
    c.round_index = a.round;
    let (compact_seq, note_seq) = ctx.store.with_fence(a.fence).compact(&a.sid, &c).await?;
    ctx.emit(
        format!("{compact_seq} {note_seq}"),
        json!({ "compact_seq": compact_seq, "note_seq": note_seq }),
    )
}

/// Prints the total tokens recorded (the usage record with --json).
pub async fn usage(ctx: &Ctx, a: UsageArgs) -> Result<()> {
    let mut u = Usage::new(a.round, a.prompt, a.completion);
    if let Some(total) = a.total {
        u = u.total(total);
    }
    u.model = a.model;
    ctx.store.record_usage(&a.sid, &u).await?;
    let total = u
        .total_tokens
        .map_or_else(|| "null".to_string(), |t| t.to_string());
    ctx.emit(total, serde_json::to_value(&u)?)
}
