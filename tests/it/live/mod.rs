//! The live tier's guarantees, on a real Redis: the key protocol and the session TTL,
//! sessions, messages and history edits, working state, rounds, decisions and consumers,
//! user values, graph checkpoints, group commit, seqs under concurrent writers, what the
//! scripts touch and report, and the same flows on a Redis Cluster.

pub(crate) mod cluster;
mod concurrency;
pub(crate) mod consumer;
mod decisions;
mod deployments;
pub(crate) mod graphs;
mod group_commit;
pub(crate) mod history;
mod invariants;
mod key_protocol;
mod long_term;
mod messages;
mod rounds;
mod runs;
mod scripts;
mod sessions;
mod smoke;
mod users;
mod working;
