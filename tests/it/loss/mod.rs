//! Redis losing its state (FLUSHALL, a restart without persistence, a master restarted
//! empty, a namespace wiped, sessions expired), all in one place: what comes back from the
//! durable tier and how — sessions, history, graph threads, user values, rounds, open
//! decisions, consumer groups — with or without a running daemon, under traffic, on one
//! Redis and on a cluster. A Redis that restarts with its data is a fault (`faults::redis`).

mod cluster;
mod consumers;
mod deployments;
mod failover;
mod flush;
mod graphs;
mod history;
mod reseed;
mod restore;
mod runs;
mod sessions;
mod traffic;
