//! CLI entry: global options, the command tree, connecting (with the embedded default), and
//! the output contract — the value on stdout (one JSON document or JSON lines with
//! `--json`), one `error: ...` line on stderr (worded by `errors`), exit 1 on a runtime
//! error, 2 on bad usage (clap), `null` for an absent value.

mod bench;
mod checkpoint;
mod db;
mod decisions;
mod demo;
mod effects;
mod gc;
mod help;
mod inbox;
mod input;
mod lease;
mod memory;
mod msg;
mod render;
mod server;
mod session;
mod spill;
mod state;
mod tail;
mod ui;
mod user;
mod work;

use std::io::IsTerminal;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use crate::redis_server::{redis_server_available, RedisServer};
use crate::{Config, Durability, Error, Result, Store};
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};
use serde_json::Value;

pub(crate) use crate::advice::Situation;

/// Shared live session store for AI agents: Redis live tier, SQLite durable tier.
#[derive(Debug, Parser)]
#[command(
    name = "agentstate",
    version,
    about,
    propagate_version = true,
    after_help = help::TOP
)]
pub(crate) struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: TopCommand,
}

/// The heading the options every command accepts are listed under.
const GLOBAL: &str = "Global options";

/// Options every command accepts. `--redis` and `--db` fall back to their env vars, read
/// after parsing (not through clap's `env`, which would show them in usage lines as if
/// they were required).
#[derive(Debug, clap::Args)]
pub(crate) struct Global {
    /// Redis URL: redis://[user:password@]host:port, rediss://... for TLS, or a cluster
    /// seed list [env: AGENTSTATE_REDIS_URL]. Unset: 127.0.0.1:6379 when something answers
    /// there, else a private redis-server that lives only as long as the command.
    #[arg(long, global = true, value_name = "URL", help_heading = GLOBAL)]
    redis: Option<String>,
    /// The durable tier: a SQLite file, or a postgres:// / postgresql:// URL [env:
    /// AGENTSTATE_DB] [default: ./agentstate.db; for `demo`: ./agentstate-demo.db,
    /// recreated by each run].
    #[arg(long, global = true, value_name = "PATH", help_heading = GLOBAL)]
    db: Option<PathBuf>,
    /// Key prefix of the namespace [env: AGENTSTATE_PREFIX] [default: as].
    #[arg(long = "prefix", global = true, value_name = "PREFIX", help_heading = GLOBAL)]
    prefix_arg: Option<String>,
    /// The prefix in use: `--prefix`, else `AGENTSTATE_PREFIX`, else `as` (see `read_env`).
    #[arg(skip)]
    prefix: String,
    /// Partition count of the namespace (fixed per namespace).
    #[arg(long, default_value_t = 16, global = true, value_name = "N", help_heading = GLOBAL)]
    partitions: u32,
    /// Print one JSON document (or JSON lines, for lists) instead of plain values or tables.
    #[arg(long, global = true, help_heading = GLOBAL)]
    json: bool,
    /// Worker threads of the command's async runtime [env: AGENTSTATE_THREADS] [default: one
    /// per core; for `bench`: 1, as redis-benchmark's client is one thread].
    #[arg(long, global = true, value_name = "N", help_heading = GLOBAL)]
    threads: Option<NonZeroUsize>,
    /// True when `redis` came from `AGENTSTATE_REDIS_URL` (for the wording of errors).
    #[arg(skip)]
    redis_from_env: bool,
}

/// The demo's SQLite file when `--db` is not given (recreated by each demo run).
pub(crate) const DEMO_DB: &str = "./agentstate-demo.db";

impl Global {
    /// Fills `--redis`, `--db` and `--prefix` from `AGENTSTATE_REDIS_URL` / `AGENTSTATE_DB` /
    /// `AGENTSTATE_PREFIX` when they were not given (an empty variable counts as unset),
    /// the precedence the Python package follows too. The demo (`own_lane`) takes only the
    /// Redis from the environment: those variables name the application's file and
    /// namespace, which a demo run must not write into.
    fn read_env(&mut self, own_lane: bool) {
        use crate::config::{env, DEFAULT_PREFIX};
        if self.redis.is_none() {
            self.redis = env::var(env::REDIS_URL);
            self.redis_from_env = self.redis.is_some();
        }
        if own_lane {
            self.prefix = self
                .prefix_arg
                .take()
                .unwrap_or_else(|| DEFAULT_PREFIX.into());
            return;
        }
        if self.db.is_none() {
            self.db = env::var(env::DB).map(PathBuf::from);
        }
        self.prefix = env::resolve(self.prefix_arg.take(), env::PREFIX, DEFAULT_PREFIX);
    }

    /// The runtime's worker threads: `--threads`, else `AGENTSTATE_THREADS`, else one for
    /// `bench` (its W1 rows stand beside redis-benchmark's one client thread; on a machine
    /// Redis shares, a second one competes with Redis for a core: docs/benchmarks-decisions.md,
    /// "one runtime thread") and None (one per core) for every other command.
    fn threads(&self, command: &TopCommand) -> std::result::Result<Option<NonZeroUsize>, String> {
        use crate::config::env;
        if self.threads.is_some() {
            return Ok(self.threads);
        }
        if let Some(v) = env::var(env::THREADS) {
            return v.parse().map(Some).map_err(|_| {
                format!(
                    "{} must be a whole number of threads, at least 1 (got {v:?})",
                    env::THREADS
                )
            });
        }
        Ok(matches!(command, TopCommand::Bench(_)).then_some(NonZeroUsize::MIN))
    }

    /// The durable tier: `--db` (a path or a PostgreSQL URL), or `./agentstate.db`.
    pub fn db(&self) -> PathBuf {
        self.db
            .clone()
            .unwrap_or_else(|| crate::config::DEFAULT_DB.into())
    }

    /// The demo's SQLite file: `--db`, or `./agentstate-demo.db`.
    pub fn demo_db(&self) -> PathBuf {
        self.db.clone().unwrap_or_else(|| DEMO_DB.into())
    }

    /// True when `--json` was given.
    pub fn json(&self) -> bool {
        self.json
    }
}

/// Commands that manage their own Redis, and the ones that run on a connected store.
#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once per process
enum TopCommand {
    /// Play a multi-agent scenario end to end and narrate it (the main job).
    #[command(after_help = help::DEMO)]
    Demo(demo::DemoArgs),
    /// Run a long-lived local Redis that keeps its data (AOF) in a directory; prints its URL.
    #[command(after_help = help::SERVER)]
    Server(server::ServerArgs),
    /// Benchmark workloads side by side with redis-benchmark.
    #[command(after_help = help::BENCH)]
    Bench(bench::BenchArgs),
    /// The durable tier as a whole: `db copy --to postgres://…` moves a SQLite file into
    /// PostgreSQL.
    #[command(subcommand)]
    Db(db::DbCmd),
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
    #[command(after_help = help::KEYS)]
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
    /// Compact a seq range into a note; prints `COMPACT_SEQ NOTE_SEQ`.
    #[command(after_help = help::COMPACT)]
    Compact(msg::CompactArgs),
    /// Record token usage of a round; prints the total tokens recorded.
    #[command(after_help = help::USAGE)]
    Usage(msg::UsageArgs),
    /// Checkpoints: create, get, list.
    #[command(subcommand)]
    Checkpoint(checkpoint::CheckpointCmd),
    /// StateService rounds: save, export.
    #[command(subcommand)]
    State(state::StateCmd),
    /// Record a decision; prints its id.
    #[command(after_help = help::DECIDE)]
    Decide(decisions::DecideArgs),
    /// Record the outcome of a decision; prints true, or false when it was not open.
    #[command(after_help = help::OUTCOME)]
    Outcome(decisions::OutcomeArgs),
    /// Decisions: incomplete.
    #[command(subcommand)]
    Decisions(decisions::DecisionsCmd),
    /// Consume decisions through a consumer group, printing JSON lines.
    #[command(after_help = help::TAIL)]
    Tail(tail::TailArgs),
    /// User-attributed data: set, get, forget.
    #[command(subcommand)]
    User(user::UserCmd),
    /// Long-term memory items: put, get, search, list, delete.
    #[command(subcommand)]
    Memory(memory::MemoryCmd),
    /// A session's run lease: acquire, renew, release, show.
    #[command(subcommand)]
    Lease(lease::LeaseCmd),
    /// A session's inbox: put, claim, deliver, list, void.
    #[command(subcommand)]
    Inbox(inbox::InboxCmd),
    /// The tool-effect ledger of a run: begin, finish, unresolved, list.
    #[command(subcommand)]
    Effects(effects::EffectsCmd),
    /// Run the spill daemon: flush streams to SQLite, restore sessions, trim.
    #[command(after_help = help::SPILL)]
    Spill(spill::SpillArgs),
    /// Restore sessions that are not live from SQLite (with or without a running daemon).
    #[command(after_help = help::RESTORE)]
    Restore(spill::RestoreArgs),
    /// Print a session's durable history from SQLite as JSON lines.
    #[command(after_help = help::EXPORT)]
    Export {
        /// Session id.
        sid: String,
    },
    /// Apply a retention policy to SQLite now (or list what it would remove).
    #[command(after_help = help::GC)]
    Gc(gc::GcArgs),
    /// Spill figures per partition: pending entries, committed ids, flush rate, lag.
    #[command(after_help = help::STATS)]
    Stats(spill::StatsArgs),
    /// Serve a read-only web console: sessions, timelines (live), consumer groups, spill lag.
    #[command(after_help = help::UI)]
    Ui(ui::UiArgs),
}

/// Everything a command needs at run time.
pub(crate) struct Ctx {
    /// The connected store.
    pub store: Store,
    /// Global options.
    pub global: Global,
    /// The private redis-server of the embedded default, kept alive for the command.
    private_redis: Option<RedisServer>,
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

    /// The durable tier of a private Redis (the embedded default): a file beside it, gone
    /// with it, so a command on a Redis of its own works without leaving a tier behind.
    pub fn private_db(&self) -> Option<PathBuf> {
        self.private_redis
            .as_ref()
            .map(|server| server.path("agentstate.db"))
    }

    /// Prints the command's value: `plain` as text, or `json` as one JSON document with
    /// `--json`.
    pub fn emit(&self, plain: impl std::fmt::Display, json: Value) -> Result<()> {
        if self.json() {
            print_json(&json)
        } else {
            println!("{plain}");
            Ok(())
        }
    }
}

/// The verb path of the parsed command line, e.g. `msg append`.
fn verb_of(matches: &ArgMatches) -> String {
    let mut words = Vec::new();
    let mut m = matches;
    while let Some((name, sub)) = m.subcommand() {
        words.push(name.to_string());
        m = sub;
    }
    words.join(" ")
}

/// The program name the command line was run with (`args[0]`): how the demo's hints name
/// this command when it runs inside another program (the Python wheel passes the console
/// script's path, or `python -m agentstate`).
pub(crate) static ENTERED_AS: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Runs the command line `args` (the program name first, as `std::env::args_os` gives it)
/// and returns the exit code: 0 on success, 1 on a runtime error, 2 on bad usage (each
/// error one `error:` line on stderr). `--help` and `--version` (and a verb given without
/// its subcommand, which shows that verb's help) end the process through clap, as for any
/// command-line tool.
pub fn run_from<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    let parsed = Cli::command()
        .try_get_matches_from(&args)
        .and_then(|matches| Ok((Cli::from_arg_matches(&matches)?, matches)));
    let (mut cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(e) if shows_help(&e) => e.exit(),
        Err(e) => {
            eprintln!("{}", usage_error(&e, &verb_in(&args)));
            return 2;
        }
    };
    cli.global
        .read_env(matches!(cli.command, TopCommand::Demo(_)));
    if let Some(program) = args.first() {
        let _ = ENTERED_AS.set(program.to_string_lossy().into_owned());
    }
    let mut at = Situation {
        verb: verb_of(&matches),
        db: cli.global.db(),
        prefix: cli.global.prefix.clone(),
        ..Situation::default()
    };
    // The demo narrates its own steps and checks every one; the embedded daemon's expected
    // complaints while Redis is down would only interrupt the story. The spill daemon says
    // when it starts and stops, and one line per event.
    let default_level = match cli.command {
        TopCommand::Demo(_) => "off",
        // A drain prints its report, or its one `error:` line.
        TopCommand::Store(Command::Spill(ref args)) if args.once() => "warn,deadpool=error",
        TopCommand::Store(Command::Spill(_) | Command::Ui(_)) | TopCommand::Server(_) => {
            // The pool's own warnings repeat what the daemon's one line per outage says.
            "warn,agentstate::spill=info,agentstate::cli=info,deadpool=error"
        }
        // A command's own daemon pass (`check_against_sqlite`) is the daemon's business:
        // only its errors show, so stderr stays the command's one `error:` line. So is
        // whether a daemon runs at all (`stats` shows it): an agent process is told, an
        // operator's one write is not.
        _ => "warn,agentstate::spill=error,agentstate::durability=error",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("AGENTSTATE_LOG")
                .unwrap_or_else(|_| default_level.into()),
        )
        .with_writer(std::io::stderr)
        // Colour only for people: a log written to a file or a pipe stays plain text.
        .with_ansi(std::io::stderr().is_terminal())
        // A second run in one process (the Python wheel's) keeps the first one's subscriber.
        .try_init()
        .ok();
    let threads = match cli.global.threads(&cli.command) {
        Ok(threads) => threads,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = threads {
        runtime.worker_threads(n.get());
    }
    let runtime = match runtime.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return 1;
        }
    };
    match runtime.block_on(run(cli, &mut at)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {}", crate::advice::line(&e, &at));
            1
        }
    }
}

/// Whether clap's "error" is the help or the version to print (not a usage error).
fn shows_help(e: &clap::Error) -> bool {
    use clap::error::ErrorKind;
    matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    )
}

/// The verb a command line names (`agentstate msg append`), as far as its words are verbs:
/// for the `--help` a usage error points to.
fn verb_in(args: &[std::ffi::OsString]) -> String {
    let mut command = Cli::command();
    command.build();
    let mut at = &command;
    let mut words = vec![at.get_name().to_string()];
    let mut rest = args.iter().skip(1).map(|a| a.to_string_lossy());
    while let Some(word) = rest.next() {
        if word == "--" {
            break;
        }
        let flag = match (word.strip_prefix("--"), word.strip_prefix('-')) {
            (Some(long), _) if !long.contains('=') => {
                at.get_arguments().find(|a| a.get_long() == Some(long))
            }
            (None, Some(short)) if short.chars().count() == 1 => at
                .get_arguments()
                .find(|a| a.get_short().map(String::from).as_deref() == Some(short)),
            _ => None,
        };
        if let Some(flag) = flag {
            if flag.get_action().takes_values() {
                rest.next();
            }
        } else if !word.starts_with('-') {
            if let Some(sub) = at.find_subcommand(word.as_ref()) {
                words.push(sub.get_name().to_string());
                at = sub;
            }
        }
    }
    words.join(" ")
}

/// clap's usage error as the one line the output contract promises: its message (with its
/// tip, if any), the usage when clap gives one, and where to read more (`verb`'s help):
/// `error: unexpected argument '--rol' found (tip: a similar argument exists: '--role') —
/// usage: agentstate msg append [OPTIONS] <SID>; see `agentstate msg append --help``.
fn usage_error(e: &clap::Error, verb: &str) -> String {
    // clap's rendering, plain: paragraphs separated by blank lines — the message (with
    // indented details such as the missing arguments), tips, `Usage: ...`, and a pointer to
    // `--help`.
    let text = e.to_string();
    let mut line = String::from("error:");
    let mut tips = Vec::new();
    let mut usage = None;
    for (i, paragraph) in text.split("\n\n").enumerate() {
        let joined = paragraph
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        if let Some(u) = joined.strip_prefix("Usage: ") {
            usage = Some(u.to_string());
        } else if let Some(tip) = joined.strip_prefix("tip: ") {
            tips.push(tip.to_string());
        } else if i == 0 {
            line.push(' ');
            line.push_str(joined.trim_start_matches("error: "));
        }
    }
    for tip in tips {
        line.push_str(&format!(" (tip: {tip})"));
    }
    line.push_str(" — ");
    if let Some(usage) = &usage {
        line.push_str(&format!("usage: {usage}; "));
    }
    line.push_str(&format!("see `{verb} --help`"));
    line
}

async fn run(cli: Cli, at: &mut Situation) -> Result<()> {
    let command = match cli.command {
        TopCommand::Demo(args) => return demo::run(&cli.global, args).await,
        TopCommand::Bench(args) => return bench::run(&cli.global, args).await,
        TopCommand::Server(args) => return server::run(&cli.global, args).await,
        TopCommand::Db(cmd) => return db::run(&cli.global, cmd).await,
        TopCommand::Store(command) => command,
    };
    if let Command::Ui(args) = &command {
        args.check()?;
    }
    let ctx = connect(cli.global, at).await?;
    // The daemon and the read-only views need no check; restore stands a daemon by itself.
    if !matches!(
        command,
        Command::Spill(_)
            | Command::Restore(_)
            | Command::Export { .. }
            | Command::Stats(_)
            | Command::Gc(_)
            | Command::Ui(_)
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
        Command::Memory(cmd) => memory::run(&ctx, cmd).await,
        Command::Lease(cmd) => lease::run(&ctx, cmd).await,
        Command::Inbox(cmd) => inbox::run(&ctx, cmd).await,
        Command::Effects(cmd) => effects::run(&ctx, cmd).await,
        Command::Spill(args) => spill::spill(&ctx, args).await,
        Command::Restore(args) => spill::restore(&ctx, args).await,
        Command::Export { sid } => spill::export(&ctx, &sid).await,
        Command::Gc(args) => gc::gc(&ctx, args).await,
        Command::Stats(args) => spill::stats(&ctx, args).await,
        Command::Ui(args) => ui::ui(&ctx, args).await,
    }
}

/// Connects to `--redis`, or applies the embedded default: the default address when
/// something answers there, else a private `redis-server` for this command's lifetime.
/// Records in `at` where it went, for the wording of a failure.
async fn connect(global: Global, at: &mut Situation) -> Result<Ctx> {
    if let Some(url) = &global.redis {
        at.url = Some(url.clone());
        if let Err(why) = crate::address::check(url) {
            let source = if global.redis_from_env {
                "AGENTSTATE_REDIS_URL"
            } else {
                "--redis"
            };
            return Err(Error::InvalidInput(format!(
                "{source} {} is not a Redis URL: {why} — {}",
                crate::address::redacted(url),
                crate::advice::URL_FORMS
            )));
        }
    } else {
        at.url = Some(default_redis_url());
    }
    let (url, private) = embedded_default(&global).await?;
    if let Some(server) = &private {
        at.private = true;
        at.url = Some(server.url());
        eprintln!("{}", private_notice(&server.url()));
    }
    let config = Config::new(url)
        .prefix(global.prefix.clone())
        .partitions(global.partitions);
    let store = Store::connect(config).await?;
    Ok(Ctx {
        store,
        global,
        private_redis: private,
    })
}

/// What a command on the embedded default says on stderr: where the private Redis is, that
/// it and its data end with the command, and how to keep them.
pub(crate) fn private_notice(url: &str) -> String {
    format!(
        "agentstate: nothing answers on 127.0.0.1:6379; started a private redis-server on {url} for this command only: \
it and its data are gone when the command ends. To keep them between commands, run `agentstate server` \
(or `docker compose up -d redis`) and export the AGENTSTATE_REDIS_URL it prints."
    )
}

/// The message when no Redis can be found or started.
pub(crate) const NO_REDIS_HELP: &str =
    "nothing answers on 127.0.0.1:6379 and no redis-server is on PATH — \
start one with `docker compose up -d redis`, or install the system package `redis-server` \
(e.g. `sudo apt-get install -y redis-server`) and run `agentstate server`, or pass --redis URL";

/// The address the embedded default probes: `redis://127.0.0.1:6379`, or
/// `AGENTSTATE_DEFAULT_REDIS_URL` (lets tests play "nothing answers on the default address").
fn default_redis_url() -> String {
    std::env::var("AGENTSTATE_DEFAULT_REDIS_URL")
        .unwrap_or_else(|_| crate::config::DEFAULT_REDIS_URL.to_string())
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
    // On this (the main) thread, tied to it: the private server goes with the process even
    // when Ctrl-C or a closed pipe ends it before `Drop` runs. (A blocking start here is
    // fine: the command has nothing else to do until it answers.)
    let server = RedisServer::start_tied()?;
    Ok((server.url(), Some(server)))
}

/// True when a Redis answers PING at `url` within half a second.
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

/// Prints one JSON value on its own line.
pub(crate) fn print_json(value: &impl serde::Serialize) -> Result<()> {
    println!("{}", serde_json::to_string(value)?);
    Ok(())
}

/// Prints the value, or `null` when absent.
pub(crate) fn print_opt_json<T: serde::Serialize>(value: Option<T>) -> Result<()> {
    match value {
        Some(v) => print_json(&v),
        None => {
            println!("null");
            Ok(())
        }
    }
}
