//! What an operator and a newcomer use: the CLI and its contract, the spill daemon's
//! commands, the web console, metrics, the long-lived server, the demo, and what a release
//! ships.

mod cli;
mod console;
mod contract;
mod demo;
mod metrics;
mod release;
mod server;
mod spill_cli;
mod watch;
