//! Production hardening (issue 17): a full Redis, SQLite faults, retention and gc,
//! generated inputs, least privilege.

mod acl;
mod generated;
mod memory;
mod retention;
mod sqlite_faults;
