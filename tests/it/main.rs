//! Integration tests: one binary, a module per capability. Every test starts its own
//! `redis-server` through `support` and never touches the shared instance on 6379.

mod support;

mod smoke;
mod spill;
