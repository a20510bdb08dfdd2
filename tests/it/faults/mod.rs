//! Faults of the processes and the network around the data: Redis down, paused or restarted
//! with its data, a full Redis, a daemon cut off from Redis, PostgreSQL stopped, restarted or
//! locked and its fencing, a Sentinel failover, SQLite faults.

mod memory;
mod network_cut;
mod postgres;
mod postgres_fencing;
mod redis;
mod sentinel;
mod spool;
mod sqlite;
mod sqlite_lock;
