//! Integration tests: one binary, a module per family of guarantees, so the test of a
//! guarantee is found from the guarantee (`live`, `durability`, `loss`, `faults`,
//! `operator`, `security`); `support` holds the fixtures. Every test starts its own
//! `redis-server` through `support` and never touches the shared instance on 6379.

mod support;

mod durability;
mod faults;
mod live;
mod loss;
mod operator;
mod security;
