//! # agentstate
//!
//! A shared, live session store for AI-agent processes in Redis, with a durable tier in
//! SQLite (embedded, the default) or PostgreSQL. Agent processes need only Redis; every mutation is one Lua script that updates
//! the live keys and appends a record to its partition's `wal` stream in the same atomic step.
//!
//! ```no_run
//! # async fn demo() -> agentstate::Result<()> {
//! use agentstate::{Config, NewMessage, NewSession, Store};
//! let store = Store::connect(Config::new("redis://127.0.0.1:6379")).await?;
//! let sid = store.create_session(&NewSession::new().user("alice")).await?;
//! let seq = store.append(&sid, &NewMessage::new("user").content("hello")).await?;
//! assert_eq!(seq, 1);
//! # Ok(()) }
//! ```
//!
//! # The public API
//! What users call: [`Store`] (the handle; every capability agents use is a method on it),
//! [`Admin`] (from [`Store::admin`]: what operators and tools call — restore on request, a
//! session's keys, scanning and wiping the namespace), [`Config`] and [`config`] (namespace,
//! TTLs, payload limits, waits, durability; the environment variables every front end
//! reads), [`Error`] and [`error`], the capability types re-exported here ([`NewSession`],
//! [`NewMessage`], [`Message`], [`WorkingState`], [`Checkpoint`], [`NewDecision`],
//! [`GraphPut`], ...), the decision [`Consumer`], the key protocol [`keys`] and the stream
//! records [`records`].
//!
//! Cargo features: `spill` (on by default) the spill daemon, [`SpillDaemon`] and `spill`;
//! `cli` (on by default) the `agentstate` command line, `run_cli`; `tls` (on by default)
//! `rediss://` URLs; `test-support` (off) `test_support`, what the integration tests, the
//! benchmark and the Python binding use beyond the API (outside semver).
//!
//! # Layout (private modules unless marked)
//! - `store`: the shared handle (connection, namespace check, fan-out over partitions), on
//!   one floor with `store::group_commit` (concurrent writes share one EVALSHA: lanes) and
//!   `store::restore` (restore after Redis lost a session, the agent side), and the
//!   operators' `store::admin`.
//! - `sessions`, `working`, `messages`, `checkpoints`, `rounds`, `decisions`, `users`,
//!   `graphs` (graph checkpoint logs), `fork`, `long_term` (memory items across sessions):
//!   one capability each, as `impl Store` blocks.
//! - `consumer`: consumer groups over the decisions streams: read, ack, claim, dead letters.
//! - `durability`: `Durable` writes wait for SQLite's commit (and see a lost write); a
//!   process that writes with no daemon running is told once.
//! - `durable` (feature `spill`): the durable tier, one interface over SQLite and PostgreSQL:
//!   the flush's shared interpreter, retention, snapshots, copy; the two thin backends.
//! - `keys` (public): the only place key names are formatted; id validation; partition
//!   function.
//! - `scripts`: the `lua/` registry and one typed argument builder per script, a file per
//!   capability; the only place a script call can be built.
//! - `records` (public): what the streams carry, typed (wal records, decision entries, the
//!   `committed` fields, stream ids).
//! - `connection`, `pool`: one node (a pool of multiplexed connections, no PING per
//!   checkout) or a Redis Cluster, chosen by the URL.
//! - `memory`: what Redis' `maxmemory-policy` can evict of ours (checked at daemon start).
//! - `backoff`: the one pause-and-poll every bounded wait uses.
//! - `redis_server`: a private `redis-server` child (the CLI's embedded default, tests)
//!   and the long-lived one of `agentstate server` (AOF in a data dir).
//! - `address`: how a Redis URL is shown to people (its address; never a password).
//! - `advice`: an error worded for the person who hit it: what failed, the address, the
//!   next step in the words of their front end (the CLI's flags, Python's arguments).
//! - `cli` (cargo feature `cli`, on by default): the `agentstate` command line, entered
//!   through `run_cli` by the binary and by the Python wheel's `agentstate` command.
//! - `web` (feature `cli`): HTTP from the same binary: the daemon's Prometheus and health
//!   endpoints (`agentstate spill --metrics`) and the read-only console (`agentstate ui`).

#![warn(missing_docs)]

// The public API.
pub mod config;
#[cfg(feature = "spill")]
mod durable;
pub mod error;
pub mod keys;
pub mod records;
#[cfg(feature = "spill")]
pub mod spill;
#[cfg(feature = "test-support")]
pub mod test_support;

// Capabilities: `impl Store` blocks; their types are re-exported below.
mod checkpoints;
mod consumer;
mod decisions;
mod durability;
mod effects;
mod fork;
mod graphs;
mod inbox;
mod leases;
mod long_term;
mod messages;
mod rounds;
mod sessions;
mod store;
mod users;
mod working;

// Machinery. The front ends' wording and the private redis-server serve the daemon, the CLI
// and `test_support`: an agent-only build (no `spill`) leaves them out.
#[cfg(any(feature = "spill", feature = "test-support"))]
mod address;
#[cfg(any(feature = "spill", feature = "test-support"))]
mod advice;
mod backoff;
#[cfg(feature = "cli")]
mod cli;
mod connection;
#[cfg(feature = "spill")]
mod memory;
mod pool;
#[cfg(any(feature = "spill", feature = "test-support"))]
mod redis_server;
// Holds the daemon's scripts too, which an agent-only build compiles and never calls.
#[cfg_attr(not(feature = "spill"), allow(dead_code, unused_imports))]
mod scripts;
mod sentinel;
#[cfg(feature = "cli")]
mod web;

/// The Rust examples of the guides, compiled by `cargo test --doc` so they cannot drift from
/// the API they show.
#[cfg(doctest)]
mod guides {
    #[doc = include_str!("../README.md")]
    struct Readme;
    #[doc = include_str!("../docs/library.md")]
    struct Library;
    #[doc = include_str!("../docs/consumers.md")]
    struct Consumers;
    #[doc = include_str!("../docs/runs.md")]
    struct Runs;
}

/// Runs the `agentstate` command line on `args` (the program name first, as
/// [`std::env::args_os`] gives them) and returns the process exit code: the binary's whole
/// `main`, and the Python wheel's `agentstate` command. Cargo feature `cli` (on by default).
#[cfg(feature = "cli")]
pub use cli::run_from as run_cli;

pub use checkpoints::Checkpoint;
pub use config::{Config, Durability, Limits, Namespace, MEMORY_USER_LABEL};
pub use consumer::{
    Consumer, ConsumerOptions, DeadLetter, DecisionEvent, Delivery, Outcome, StartFrom,
};
pub use decisions::{Decision, DecisionId, NewDecision};
pub use durability::take_durability_warning;
pub use effects::{args_digest, Effect, EffectStart, EffectState};
pub use error::{Error, Result};
pub use fork::Fork;
pub use graphs::{GraphPut, GraphTuple, GraphWrite};
pub use inbox::{InboxItem, InboxState};
pub use leases::{Lease, RunLease};
pub use long_term::{
    namespace_text, FilterOp, MemoryItem, MemorySearch, NamespaceListing, NewMemoryItem,
    MAX_LABEL_BYTES, MAX_NAMESPACE_DEPTH,
};
pub use messages::{
    AppendOptions, Compaction, CompactionRecord, Message, MessageQuery, MessageState, NewMessage,
    Usage,
};
pub use rounds::MAX_ROUND_ID;
pub use sessions::{Lifecycle, NewSession, Session, SessionListing, SessionPage, MAX_PAGE};
#[cfg(feature = "spill")]
pub use spill::{PassReport, SpillConfig, SpillDaemon};
pub use store::{Admin, Store};
pub use users::ForgetReceipt;
pub use working::WorkingState;
