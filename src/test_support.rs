//! What the integration tests, the benchmark and the Python binding use beyond the API:
//! cargo feature `test-support`, off by default, outside semver (it changes with them).
//! - [`redis_server`]: a private `redis-server` child on a free loopback port.
//! - [`scripts`]: the typed calls of the `lua/` scripts, to run them raw (batches, faults).
//! - [`connection`]: a raw connection to a store's Redis, for commands no API sends.
//! - [`advice`], [`address`]: the wording of errors and of Redis URLs that every front end
//!   (the CLI, the Python binding) shows people.

pub use crate::connection::Connection;

/// A private `redis-server` child (see `src/redis_server.rs`).
pub mod redis_server {
    pub use crate::redis_server::*;
}
/// The script registry and one typed argument builder per script (see `src/scripts/`).
pub mod scripts {
    pub use crate::scripts::*;
}
/// An error worded for the person who hit it (see `src/advice.rs`).
pub mod advice {
    pub use crate::advice::*;
}
/// How a Redis URL is shown to people: its address, never a password (see `src/address.rs`).
pub mod address {
    pub use crate::address::*;
}

/// A pooled connection to `store`'s Redis, for raw commands in tests (the API never hands
/// one out: every call goes through a script or a typed read).
pub async fn connection(store: &crate::Store) -> crate::Result<Connection> {
    store.conn().await
}

/// What the tests and the Python binding need of the durable tier: the tables a copy carries,
/// and whether a `--db` value names PostgreSQL.
#[cfg(feature = "spill")]
pub mod durable {
    pub use crate::durable::copy::TABLES;
    pub use crate::durable::postgres::is_url;
}
