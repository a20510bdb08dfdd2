//! CLI entry: global options, the command tree, connecting (with the embedded default), and
//! the output contract — the value on stdout, `error: ...` on stderr, exit 1 on a runtime
//! error, 2 on bad usage (clap), `null` for an absent value.

mod bench;
mod checkpoint;
mod decisions;
mod demo;
mod msg;
mod render;
mod session;
mod spill;
mod state;
mod tail;
mod user;
mod work;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use agentstate::redis_server::{redis_server_available, RedisServer};
use agentstate::{Config, Durability, Error, Result, Store};
use clap::{Parser, Subcommand};
use serde_json::Value;

/// Shared live session store for AI agents: Redis live tier, SQLite durable tier.
#[derive(Debug, Parser)]
#[command(name = "agentstate", version, about, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: TopCommand,
}

/// Options every command accepts.
#[derive(Debug, clap::Args)]
pub struct Global {
    /// Redis URL (redis:// or rediss://, with user:password for ACLs). Unset: use
    /// 127.0.0.1:6379, or start a private redis-server when nothing answers there.
    #[arg(long, env = "AGENTSTATE_REDIS_URL", global = true)]
    redis: Option<String>,
    /// SQLite database of the spill daemon [default: ./agentstate.db; for `demo`:
    /// ./agentstate-demo.db, recreated by each run].
    #[arg(long, env = "AGENTSTATE_DB", global = true)]
    db: Option<PathBuf>,
    /// Key prefix of the namespace.
    #[arg(long, default_value = "as", global = true)]
    prefix: String,
    /// Partition count of the namespace (fixed per namespace).
    #[arg(long, default_value_t = 16, global = true)]
    partitions: u32,
    /// Print JSON documents instead of plain values or tables.
    #[arg(long, global = true)]
    json: bool,
}

/// The SQLite file when `--db` is not given.
pub const DEFAULT_DB: &str = "./agentstate.db";
/// The demo's SQLite file when `--db` is not given (recreated by each demo run).
pub const DEMO_DB: &str = "./agentstate-demo.db";

impl Global {
    /// The SQLite file: `--db`, or `./agentstate.db`.
    pub fn db(&self) -> PathBuf {
        self.db.clone().unwrap_or_else(|| DEFAULT_DB.into())
    }

    /// The demo's SQLite file: `--db`, or `./agentstate-demo.db`.
    pub fn demo_db(&self) -> PathBuf {
        self.db.clone().unwrap_or_else(|| DEMO_DB.into())
    }
}

/// Commands that manage their own Redis, and the ones that run on a connected store.
#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once per process
enum TopCommand {
    /// Play a multi-agent scenario end to end and narrate it (the main job).
    Demo(demo::DemoArgs),
    /// Benchmark workloads side by side with redis-benchmark.
    Bench(bench::BenchArgs),
    #[command(flatten)]
    Store(Command),
}

/// Commands that run on a store connected through `--redis` or the embedded default.
#[derive(Debug, Subcommand)]
enum Command {
    /// Sessions: create, show, list, close, archive, touch.
    #[command(subcommand)]
    Session(session::SessionCmd),
    /// The Redis keys of a session, one per line.
    Keys {
        /// Session id.
        sid: String,
    },
    /// Working state: set, get, del.
    #[command(subcommand)]
    Work(work::WorkCmd),
    /// Messages: append, list.
    #[command(subcommand)]
    Msg(msg::MsgCmd),
    /// Compact a seq range into a note.
    Compact(msg::CompactArgs),
    /// Record token usage of a round.
    Usage(msg::UsageArgs),
    /// Checkpoints: create, get, list.
    #[command(subcommand)]
    Checkpoint(checkpoint::CheckpointCmd),
    /// StateService rounds: save, export.
    #[command(subcommand)]
    State(state::StateCmd),
    /// Record a decision.
    Decide(decisions::DecideArgs),
    /// Record the outcome of a decision.
    Outcome(decisions::OutcomeArgs),
    /// Decisions: incomplete.
    #[command(subcommand)]
    Decisions(decisions::DecisionsCmd),
    /// Consume decisions through a consumer group, printing JSON lines.
    Tail(tail::TailArgs),
    /// User-attributed data: set, get, forget.
    #[command(subcommand)]
    User(user::UserCmd),
    /// Run the spill daemon: flush streams to SQLite, restore sessions, trim.
    Spill(spill::SpillArgs),
    /// Restore sessions that are not live from SQLite (through a running daemon).
    Restore(spill::RestoreArgs),
    /// Print a session's durable history from SQLite as JSON lines.
    Export {
        /// Session id.
        sid: String,
    },
    /// Spill figures per partition: pending entries, committed ids, flush rate, lag.
    Stats,
}

/// Everything a command needs at run time.
pub struct Ctx {
    /// The connected store.
    pub store: Store,
    /// Global options.
    pub global: Global,
    /// The private redis-server of the embedded default, kept alive for the command.
    _private_redis: Option<RedisServer>,
}

impl Ctx {
    /// The store at `Durable` level when `durable`, else the plain store.
    pub fn store_at(&self, durable: bool) -> Store {
        if durable {
            self.store.with_durability(Durability::Durable)
        } else {
            self.store.clone()
        }
    }

    /// True when `--json` was given.
    pub fn json(&self) -> bool {
        self.global.json
    }
}

/// Parses the arguments, runs the command, and maps the outcome to the exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // The demo narrates its own steps and checks every one; the embedded daemon's expected
    // complaints while Redis is down would only interrupt the story.
    let default_level = match cli.command {
        TopCommand::Demo(_) => "off",
        _ => "warn",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("AGENTSTATE_LOG")
                .unwrap_or_else(|_| default_level.into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

async fn run(cli: Cli) -> Result<()> {
    let command = match cli.command {
        TopCommand::Demo(args) => return demo::run(&cli.global, args).await,
        TopCommand::Bench(args) => return bench::run(&cli.global, args).await,
        TopCommand::Store(command) => command,
    };
    let ctx = connect(cli.global).await?;
    // The daemon and the read-only views need no check; restore stands a daemon by itself.
    if !matches!(
        command,
        Command::Spill(_) | Command::Restore(_) | Command::Export { .. } | Command::Stats
    ) {
        spill::check_against_sqlite(&ctx).await?;
    }
    match command {
        Command::Session(cmd) => session::run(&ctx, cmd).await,
        Command::Keys { sid } => session::keys(&ctx, &sid).await,
        Command::Work(cmd) => work::run(&ctx, cmd).await,
        Command::Msg(cmd) => msg::run(&ctx, cmd).await,
        Command::Compact(args) => msg::compact(&ctx, args).await,
        Command::Usage(args) => msg::usage(&ctx, args).await,
        Command::Checkpoint(cmd) => checkpoint::run(&ctx, cmd).await,
        Command::State(cmd) => state::run(&ctx, cmd).await,
        Command::Decide(args) => decisions::decide(&ctx, args).await,
        Command::Outcome(args) => decisions::outcome(&ctx, args).await,
        Command::Decisions(cmd) => decisions::run(&ctx, cmd).await,
        Command::Tail(args) => tail::run(&ctx, args).await,
        Command::User(cmd) => user::run(&ctx, cmd).await,
        Command::Spill(args) => spill::spill(&ctx, args).await,
        Command::Restore(args) => spill::restore(&ctx, args).await,
        Command::Export { sid } => spill::export(&ctx, &sid).await,
        Command::Stats => spill::stats(&ctx).await,
    }
}

/// Connects to `--redis`, or applies the embedded default: the default address when
/// something answers there, else a private `redis-server` for this command's lifetime.
async fn connect(global: Global) -> Result<Ctx> {
    let (url, private) = embedded_default(&global).await?;
    if let Some(server) = &private {
        eprintln!(
            "agentstate: nothing answers on 127.0.0.1:6379; started a private redis-server on {} for this command",
            server.url()
        );
    }
    let config = Config::new(url)
        .prefix(global.prefix.clone())
        .partitions(global.partitions);
    let store = Store::connect(config).await?;
    Ok(Ctx {
        store,
        global,
        _private_redis: private,
    })
}

/// The message when no Redis can be found or started.
pub const NO_REDIS_HELP: &str =
    "nothing answers on 127.0.0.1:6379 and no redis-server is on PATH; \
start one with `docker compose up -d redis`, or install the system package `redis-server` \
(e.g. `sudo apt-get install -y redis-server`), or pass --redis URL";

/// The address the embedded default probes: `redis://127.0.0.1:6379`, or
/// `AGENTSTATE_DEFAULT_REDIS_URL` (lets tests play "nothing answers on the default address").
fn default_redis_url() -> String {
    std::env::var("AGENTSTATE_DEFAULT_REDIS_URL")
        .unwrap_or_else(|_| agentstate::config::DEFAULT_REDIS_URL.to_string())
}

/// The Redis to use: `--redis` (or its env var); else the default address when something
/// answers there; else a private `redis-server` (returned, so it lives as long as the caller
/// keeps it); else [`NO_REDIS_HELP`].
async fn embedded_default(global: &Global) -> Result<(String, Option<RedisServer>)> {
    if let Some(url) = &global.redis {
        return Ok((url.clone(), None));
    }
    let default = default_redis_url();
    if redis_answers(&default).await {
        return Ok((default, None));
    }
    if !redis_server_available() {
        return Err(Error::unavailable(NO_REDIS_HELP));
    }
    let server = tokio::task::spawn_blocking(RedisServer::start)
        .await
        .map_err(|e| Error::io(e.to_string()))??;
    Ok((server.url(), Some(server)))
}

async fn redis_answers(url: &str) -> bool {
    let probe = async {
        let client = redis::Client::open(url).ok()?;
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        redis::cmd("PING")
            .query_async::<String>(&mut conn)
            .await
            .ok()
    };
    matches!(
        tokio::time::timeout(Duration::from_millis(500), probe).await,
        Ok(Some(_))
    )
}

/// Parses a JSON argument, naming it in the error.
pub fn parse_json(what: &'static str, text: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| Error::MalformedJson {
        what,
        detail: e.to_string(),
    })
}

/// Prints one JSON value on its own line.
pub fn print_json(value: &impl serde::Serialize) -> Result<()> {
    println!("{}", serde_json::to_string(value)?);
    Ok(())
}

/// Prints the value, or `null` when absent.
pub fn print_opt_json<T: serde::Serialize>(value: Option<T>) -> Result<()> {
    match value {
        Some(v) => print_json(&v),
        None => {
            println!("null");
            Ok(())
        }
    }
}
