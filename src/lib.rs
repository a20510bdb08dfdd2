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
//! What users call: [`Store`] (the handle; every capability is a method on it), [`Config`]
//! and [`config`] (namespace, TTLs, payload limits, waits, durability; the environment
//! variables every front end reads), [`Error`] and [`error`], the capability types
//! re-exported here ([`NewSession`], [`NewMessage`], [`Message`], [`WorkingState`],
//! [`Checkpoint`], [`NewDecision`], [`GraphPut`], ...), the decision [`Consumer`], and behind
//! the cargo feature `spill` (on by default) the spill daemon: [`SpillDaemon`] and [`spill`].
//!
//! # Layout (private modules)
//! - `store`: the shared handle (connection, namespace check, fan-out over partitions).
//! - `sessions`, `working`, `messages`, `checkpoints`, `rounds`, `decisions`, `users`,
//!   `graphs` (graph checkpoint logs), `fork`: one capability each, as `impl Store` blocks.
//! - `consumer`: consumer groups over the decisions streams: read, ack, claim, dead letters.
//! - `durability`: `Durable` writes wait for SQLite's commit (and see a lost write).
//! - `restore`: restore after Redis lost a session, the agent side (the daemon side is in
//!   `spill`).
//! - `durable` (feature `spill`): the durable tier, one interface over SQLite and PostgreSQL:
//!   the flush's shared interpreter, retention, snapshots, copy; the two thin backends.
//! - `group_commit`: concurrent writes share one EVALSHA (lanes).
//! - `keys`: the only place key names are formatted; id validation; partition function.
//! - `scripts`: the `lua/` registry and one typed argument builder per script, a file per
//!   capability; the only place a script call can be built.
//! - `records`: what the streams carry, typed (wal records, decision entries, the
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
//! - `cli` (cargo feature `cli`, on by default): the `agentstate` command line, entered by
//!   the binary and by the Python wheel's `agentstate` command.
//! - `web` (feature `cli`): HTTP from the same binary: the daemon's Prometheus and health
//!   endpoints (`agentstate spill --metrics`) and the read-only console (`agentstate ui`).
//!
//! What the tests, the benchmark, the binary and the Python binding reach beyond the API is
//! re-exported under [`internals`] (hidden from the docs; it changes without notice).

// The public API.
pub mod config;
#[cfg(feature = "spill")]
mod durable;
pub mod error;
#[cfg(feature = "spill")]
pub mod spill;

// Capabilities: `impl Store` blocks; their types are re-exported below.
mod checkpoints;
mod consumer;
mod decisions;
mod durability;
mod fork;
mod graphs;
mod messages;
mod restore;
mod rounds;
mod sessions;
mod store;
mod users;
mod working;

// Machinery.
mod address;
mod advice;
mod backoff;
#[cfg(feature = "cli")]
mod cli;
mod connection;
mod group_commit;
mod keys;
mod memory;
mod pool;
mod records;
mod redis_server;
mod scripts;
#[cfg(feature = "cli")]
mod web;

/// Not API: what the tests, the benchmark, the `agentstate` binary and the Python binding
/// reach beyond the public API (key names, script calls, stream records, a private
/// redis-server, error wording, the command line). It changes without notice.
#[doc(hidden)]
pub mod internals {
    /// See `src/address.rs`.
    pub mod address {
        pub use crate::address::*;
    }
    /// See `src/advice.rs`.
    pub mod advice {
        pub use crate::advice::*;
    }
    /// See `src/cli/`.
    #[cfg(feature = "cli")]
    pub mod cli {
        pub use crate::cli::*;
    }
    /// See `src/connection.rs`.
    pub mod connection {
        pub use crate::connection::*;
    }
    /// See `src/keys.rs`.
    pub mod keys {
        pub use crate::keys::*;
    }
    /// See `src/memory.rs`.
    pub mod memory {
        pub use crate::memory::*;
    }
    /// See `src/records.rs`.
    pub mod records {
        pub use crate::records::*;
    }
    /// See `src/redis_server.rs`.
    pub mod redis_server {
        pub use crate::redis_server::*;
    }
    /// See `src/scripts/`.
    pub mod scripts {
        pub use crate::scripts::*;
    }
    /// What tests and the Python binding need of the durable tier.
    #[cfg(feature = "spill")]
    pub mod durable {
        pub use crate::durable::copy::TABLES;
        pub use crate::durable::postgres::is_url;
    }
}

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
pub use rounds::MAX_ROUND_ID;
pub use sessions::{Lifecycle, NewSession, Session, SessionListing, SessionPage, MAX_PAGE};
#[cfg(feature = "spill")]
pub use spill::{PassReport, SpillConfig, SpillDaemon};
pub use store::Store;
pub use users::ForgetReceipt;
pub use working::WorkingState;
