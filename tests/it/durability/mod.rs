//! The durable tier's guarantees: the spill daemon flushes every entry exactly once (one
//! owner per partition, standbys, repeated kills), trims what is committed, erases a user,
//! moves a tier into PostgreSQL, retention removes only what its policy says, and the daemon
//! and durable callers wake on writes and commits.

mod copy;
pub(crate) mod daemon;
mod erasure;
mod flush;
mod retention;
mod trim;
mod wake;
