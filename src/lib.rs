//! # agentstate
//!
//! A shared, live session store for AI-agent processes in Redis, with a durable spillover
//! into SQLite. Agent processes need only Redis; every mutation is one Lua script that updates
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
//! # Layout
//! - [`config`]: namespace (prefix, partitions), TTLs, payload limits, waits, durability.
//! - [`error`]: the one error enum; Lua error codes mapped in one table.
//! - [`keys`]: the only place key names are formatted; id validation; partition function.
//! - [`scripts`]: the `lua/` registry and one typed argument builder per script; the only
//!   place an EVALSHA is built.
//! - [`records`]: what the streams carry, typed (wal records, decision entries, the
//!   `committed` fields, stream ids).
//! - [`connection`]: one node (pool) or a Redis Cluster (cluster connection), chosen by the
//!   URL; the `Connection` every call uses.
//! - [`store`]: the shared handle (connection, namespace check, fan-out over partitions).
//! - [`sessions`], [`working`], [`messages`], [`checkpoints`], [`rounds`], [`decisions`],
//!   [`users`]: one capability each, as `impl Store` blocks.
//! - [`graphs`]: graph checkpoint logs (LangGraph threads) kept in a session.
//! - [`fork`]: a new session from another one's settings, history up to a seq and graph log.
//! - [`memory`]: what Redis' `maxmemory-policy` can evict of ours (checked at daemon start).
//! - [`restore`]: the agent side of restore (ask the daemon, wait, bounded).
//! - [`consumer`]: consumer groups over the decisions streams: read, ack, claim, dead letters.
//! - `group_commit`: concurrent appends to one partition share one EVALSHA (lanes).
//! - [`durability`]: `Durable` writes wait for SQLite's commit.
//! - `spill` (cargo feature `spill`, on by default): the spill daemon (flusher,
//!   rehydrator, trimmer, ownership) and the SQLite schema; the only code that opens SQLite.
//! - [`pool`]: the connection pool (multiplexed connections, no PING per checkout in steady
//!   use).
//! - [`redis_server`]: a private `redis-server` child (the CLI's embedded default, tests)
//!   and the long-lived one of `agentstate server` (AOF in a data dir).
//! - [`address`]: how a Redis URL is shown to people (its address; never a password).
//! - [`advice`]: an error worded for the person who hit it: what failed, the address, the
//!   next step in the words of their front end (the CLI's flags, Python's arguments).
//! - `cli` (cargo feature `cli`, on by default): the `agentstate` command line, entered by
//!   the binary and by the Python wheel's `agentstate` command ([`cli::run_from`]).

pub mod address;
pub mod advice;
mod backoff;
pub mod checkpoints;
#[cfg(feature = "cli")]
pub mod cli;
pub mod config;
pub mod connection;
pub mod consumer;
pub mod decisions;
pub mod durability;
pub mod error;
pub mod fork;
pub mod graphs;
mod group_commit;
pub mod keys;
pub mod memory;
pub mod messages;
pub mod pool;
pub mod records;
pub mod redis_server;
pub mod restore;
pub mod rounds;
pub mod scripts;
pub mod sessions;
#[cfg(feature = "spill")]
pub mod spill;
pub mod store;
pub mod users;
pub mod working;

pub use checkpoints::Checkpoint;
pub use config::{Config, Durability, Limits, Namespace};
pub use consumer::{
    Consumer, ConsumerOptions, DeadLetter, DecisionEvent, Delivery, Outcome, StartFrom,
};
pub use decisions::{Decision, DecisionId, NewDecision};
pub use error::{Error, Result};
pub use fork::Fork;
pub use graphs::{GraphPut, GraphTuple, GraphWrite};
pub use messages::{
    AppendOptions, Compaction, CompactionRecord, Message, MessageQuery, MessageState, NewMessage,
    Usage,
};
pub use sessions::{Lifecycle, NewSession, Session};
#[cfg(feature = "spill")]
pub use spill::{PassReport, SpillConfig, SpillDaemon};
pub use store::Store;
pub use users::ForgetReceipt;
pub use working::WorkingState;
