//! The daemon side of restore after Redis lost a session (cargo feature `spill`); the agent
//! side, which asks for a session and waits, is `crate::store::restore`.
//! - `daemon`: the daemon that owns the partition reads the session from the durable tier
//!   (`snapshot`) and writes it back in one atomic, idempotent script; after a Redis loss it
//!   puts back the indexes, open decisions, user values and rounds.
//! - the scripts: `crate::scripts::restore` builds the calls of `restore_session.lua`,
//!   `restore_rounds.lua`, `restore_graph.lua` and `reseed_user_values.lua`.

pub(crate) mod daemon;
pub(crate) mod snapshot;
