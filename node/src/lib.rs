//! The native addon behind the Node package `@agentstate/node`: one binding over the Rust core
//! (`agentstate::Store`), so a Node process speaks the same key protocol, Lua scripts and
//! validation as every other agentstate process (the CLI, the Python package).
//!
//! # Layout
//! - `errors`: the one mapping from `agentstate::Error` to a rejected promise whose message
//!   carries the kind, the fields and the worded line; `index.js` turns it into the JS
//!   `Error` subclass of that kind.
//! - `store`: `NativeStore`, every capability of the core store as an async method (a
//!   promise resolved from napi's tokio runtime: the event loop never waits for Redis), one
//!   file per capability.
//! - `daemon`: `NativeSpillDaemon`, the spill daemon in a background task of this process.
//! - `cli`: `runCli`, the `agentstate` command line (the package's `agentstate` bin).

mod cli;
mod daemon;
mod errors;
mod store;

use napi_derive::napi;

/// The version of this addon (the Rust crates' version).
#[napi]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}
