//! Least privilege and untrusted input: Redis ACLs, TLS to Redis and PostgreSQL, bad and
//! generated input that must write nothing.

pub(crate) mod acl;
mod bad_input;
pub(crate) mod generated;
mod postgres_tls;
pub(crate) mod tls;
