//! Retention on PostgreSQL: the same plan as SQLite's (`durable::retention`, the same SQL and
//! the same pure planner), read and applied in one transaction. PostgreSQL gives deleted
//! rows' space back to itself (autovacuum makes it reusable), not to the filesystem; the
//! database's size shrinks only with `VACUUM FULL` (docs/operations.md says when to run it).

use deadpool_postgres::Transaction;

use super::flush::execute;
use super::snapshot::text_query;
use super::Pg;
use crate::durable::plan::removal_changes;
use crate::durable::retention::{now_ms, plan_from, Removal, Retention};
use crate::durable::rows::TextRows;
use crate::error::Result;

/// Runs the plan's reads in `tx` (each `?1` bound as text).
async fn plan_in(tx: &Transaction<'_>, policy: &Retention) -> Result<Vec<Removal>> {
    let mut rows: [TextRows; 5] = Default::default();
    for (out, query) in rows.iter_mut().zip(policy.queries(now_ms())) {
        if let Some((sql, arg)) = query {
            *out = text_query(tx, sql, &arg).await?;
        }
    }
    Ok(plan_from(policy, rows))
}

impl Pg {
    /// What `policy` removes now (reads only, one snapshot).
    pub(crate) async fn plan(&self, policy: &Retention) -> Result<Vec<Removal>> {
        let mut client = self.client().await?;
        let tx = super::read_snapshot(&mut client).await?;
        plan_in(&tx, policy).await
    }

    /// Removes what `policy` lists now, planned and deleted in one transaction (as SQLite's
    /// `sqlite::retention::retain`). Returns what it removed.
    pub(crate) async fn retain(&self, policy: &Retention) -> Result<Vec<Removal>> {
        let mut client = self.client().await?;
        // Read committed: the flusher may update a planned row meanwhile (a repeatable-read
        // transaction would then fail); the deletes go by id either way.
        let tx = client.transaction().await?;
        let removed = plan_in(&tx, policy).await?;
        for change in removed.iter().flat_map(removal_changes) {
            execute(&tx, &change).await?;
        }
        tx.commit().await?;
        Ok(removed)
    }

    /// The database's size on disk, bytes (`pg_database_size`).
    pub(crate) async fn size_bytes(&self) -> Result<u64> {
        let client = self.client().await?;
        let row = client
            .query_one("SELECT pg_database_size(current_database())", &[])
            .await?;
        Ok(row.get::<_, i64>(0).max(0) as u64)
    }
}
