//! Integration tests: one binary, a module per capability. Every test starts its own
//! `redis-server` through `support` and never touches the shared instance on 6379.

mod support;

mod bad_input;
mod cli;
mod cluster;
mod concurrency;
mod consumer;
mod decisions;
mod demo;
mod deployments;
mod faults;
mod graphs;
mod group_commit;
mod hardening;
mod history;
mod key_protocol;
mod loss;
mod messages;
mod network_cut;
mod operator;
mod rounds;
mod scripts;
mod server;
mod sessions;
mod smoke;
mod spill;
mod tls;
mod traffic;
mod users;
mod working;
