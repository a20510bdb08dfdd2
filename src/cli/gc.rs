//! `agentstate gc [--dry-run]` and the retention flags it shares with `agentstate spill`.

use std::time::Duration;

use crate::durable::retention::Retention;
use crate::{Error, Result};

use super::{print_json, Ctx};

/// The retention policy flags (`gc`, `spill`).
#[derive(Debug, Clone, clap::Args)]
pub struct RetentionArgs {
    /// Keep only the newest N checkpoints per session and label.
    #[arg(long, value_name = "N")]
    keep_checkpoints: Option<u32>,
    /// Drop the whole history of archived sessions whose last durable write is older than
    /// DAYS (fractions allowed), and the tombstones of sessions closed longer ago.
    #[arg(long, value_name = "DAYS")]
    drop_closed_after: Option<f64>,
    /// Keep at most N decisions: the oldest with an outcome go first; one still waiting for
    /// its outcome is never dropped.
    #[arg(long, value_name = "N")]
    max_decisions: Option<u64>,
}

impl RetentionArgs {
    /// The policy the flags describe (everything kept when none is given).
    pub fn policy(&self) -> Result<Retention> {
        let mut policy = Retention::default();
        if let Some(n) = self.keep_checkpoints {
            policy = policy.keep_checkpoints(n);
        }
        if let Some(days) = self.drop_closed_after {
            let age = Duration::try_from_secs_f64(days * 86_400.0).map_err(|_| {
                Error::InvalidInput(format!(
                    "--drop-closed-after {days}: give a number of days >= 0"
                ))
            })?;
            policy = policy.drop_closed_after(age);
        }
        if let Some(n) = self.max_decisions {
            policy = policy.max_decisions(n);
        }
        Ok(policy)
    }
}

/// Arguments of `agentstate gc`.
#[derive(Debug, clap::Args)]
pub struct GcArgs {
    /// List what would be removed, change nothing (opens the file read-only).
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    retention: RetentionArgs,
}

/// `agentstate gc`: applies the retention policy to `--db` now and gives the space back to
/// the filesystem; prints one line per thing removed (`--dry-run`: that would be), JSON lines
/// with `--json`, and a summary on stderr.
pub async fn gc(ctx: &Ctx, args: GcArgs) -> Result<()> {
    let policy = args.retention.policy()?;
    if policy.keeps_everything() {
        return Err(Error::InvalidInput(
            "gc without a policy keeps everything — give --keep-checkpoints, --drop-closed-after or --max-decisions".into(),
        ));
    }
    let ns = ctx.store.config().namespace.clone();
    let report =
        crate::durable::collect_garbage(&ctx.global.db(), &ns, policy, args.dry_run).await?;
    let dry = args.dry_run;
    for removal in &report.removed {
        if ctx.json() {
            print_json(removal)?;
        } else {
            println!("{removal}");
        }
    }
    if dry {
        eprintln!(
            "{} to remove (dry run: nothing changed)",
            report.removed.len()
        );
    } else {
        eprintln!(
            "removed {}; database {} -> {} bytes",
            report.removed.len(),
            report.bytes_before,
            report.bytes_after
        );
    }
    Ok(())
}
