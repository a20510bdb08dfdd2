//! `agentstate lease ...`: a session's run lease (one run at a time, with a fencing token).

use std::time::Duration;

use clap::Subcommand;
use serde_json::json;

use super::{help, print_opt_json, Ctx};
use crate::Result;

#[derive(Debug, Subcommand)]
pub enum LeaseCmd {
    /// Take the session's run lease; prints its fencing token (exit 1 while another owner
    /// holds it: the error names the holder).
    #[command(after_help = help::LEASE_ACQUIRE)]
    Acquire {
        /// Session id.
        sid: String,
        /// Who takes it (name the process, e.g. host:pid).
        #[arg(long)]
        owner: String,
        /// How long it lasts unless renewed, ms.
        #[arg(long, value_name = "MS")]
        ttl_ms: u64,
    },
    /// Extend the lease while OWNER holds it with TOKEN; prints true, or false (stop the run).
    #[command(after_help = help::LEASE_RENEW)]
    Renew {
        /// Session id.
        sid: String,
        /// The holder.
        #[arg(long)]
        owner: String,
        /// Its token.
        #[arg(long)]
        token: u64,
        /// How long from now, ms.
        #[arg(long, value_name = "MS")]
        ttl_ms: u64,
    },
    /// Drop the lease if OWNER holds it with TOKEN; prints true or false.
    #[command(after_help = help::LEASE_RELEASE)]
    Release {
        /// Session id.
        sid: String,
        /// The holder.
        #[arg(long)]
        owner: String,
        /// Its token.
        #[arg(long)]
        token: u64,
    },
    /// Print who holds the lease, `{"owner","token","expires_at"}`, or null.
    #[command(after_help = help::LEASE_SHOW)]
    Show {
        /// Session id.
        sid: String,
    },
}

pub async fn run(ctx: &Ctx, cmd: LeaseCmd) -> Result<()> {
    let store = &ctx.store;
    match cmd {
        LeaseCmd::Acquire { sid, owner, ttl_ms } => {
            let lease = store
                .acquire_lease(&sid, &owner, Duration::from_millis(ttl_ms))
                .await?;
            ctx.emit(lease.token, serde_json::to_value(&lease)?)
        }
        LeaseCmd::Renew {
            sid,
            owner,
            token,
            ttl_ms,
        } => {
            let held = store
                .renew_lease(&sid, &owner, token, Duration::from_millis(ttl_ms))
                .await?;
            ctx.emit(held, json!({ "renewed": held }))
        }
        LeaseCmd::Release { sid, owner, token } => {
            let released = store.release_lease(&sid, &owner, token).await?;
            ctx.emit(released, json!({ "released": released }))
        }
        LeaseCmd::Show { sid } => print_opt_json(store.lease_holder(&sid).await?),
    }
}
