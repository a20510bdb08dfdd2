//! Test support: a private redis-server per test and helpers that read like what they check,
//! a file per concern; tests take them all with `use crate::support::*`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::future::Future;
use std::process::Command;

use agentstate::test_support::redis_server::RedisServer;
use agentstate::{
    Config, Error, Lifecycle, Message, MessageState, NewDecision, NewSession, Result, Store,
};

mod cli;
pub mod cluster;
mod daemon;
mod deployed;
mod durable;
mod env;
mod http;
mod monitor;
pub mod pg_server;
pub mod sentinel;
mod spill;
mod wait;

pub use cli::*;
pub use daemon::*;
pub use deployed::*;
pub use durable::*;
pub use env::*;
pub use http::*;
pub use monitor::*;
pub use spill::*;
pub use wait::*;
