//! Snapshot reads from PostgreSQL: the same queries as SQLite's (`durable::snapshot::sql`), made
//! into the same restore image by `durable::snapshot::assemble`.

use super::Pg;
use crate::durable::rows::TextRows;
use crate::durable::snapshot::{
    assemble, group_sorted, sql, SessionRow, SessionRows, Snapshot, UserData,
};
use crate::error::Result;

/// SQLite's `?N` placeholders in PostgreSQL's spelling, `$N`.
pub(crate) fn dollar(sql: &str) -> String {
    sql.replace('?', "$")
}

impl Pg {
    /// Reads session `sid`; `None` when PostgreSQL does not know it. One snapshot of the
    /// database (a repeatable-read transaction), as SQLite's reads are.
    pub(crate) async fn load_snapshot(&self, sid: &str) -> Result<Option<Snapshot>> {
        let mut client = self.client().await?;
        let tx = super::read_snapshot(&mut client).await?;
        let head = tx.query_opt(&dollar(sql::HEAD), &[&sid]).await?;
        let Some(head) = head else {
            return Ok(None);
        };
        let mut texts: [String; 10] = Default::default();
        for (i, t) in texts.iter_mut().enumerate() {
            *t = head.get(i);
        }
        let mut ints = [0i64; 5];
        for (i, n) in ints.iter_mut().enumerate() {
            *n = head.get(10 + i);
        }
        // The eight reads go out together: tokio-postgres pipelines queries polled at once.
        let q = |s: &'static str| {
            let tx = &tx;
            async move {
                let stmt = tx.prepare_cached(&dollar(s)).await?;
                tx.query(&stmt, &[&sid]).await
            }
        };
        let (messages, compactions, usage, checkpoints, decisions, rounds, children, graph) = futures_util::try_join!(
            q(sql::MESSAGES),
            q(sql::COMPACTIONS),
            q(sql::USAGE),
            q(sql::CHECKPOINTS),
            q(sql::DECISIONS),
            q(sql::ROUNDS),
            q(sql::CHILDREN),
            q(sql::GRAPH),
        )?;
        let (inbox, effects) = futures_util::try_join!(q(sql::INBOX), q(sql::EFFECTS))?;
        let rows = SessionRows {
            head: SessionRow { texts, ints },
            messages: messages
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2)))
                .collect(),
            compactions: compactions.iter().map(|r| r.get(0)).collect(),
            usage: usage.iter().map(|r| (r.get(0), r.get(1))).collect(),
            checkpoints: checkpoints.iter().map(|r| (r.get(0), r.get(1))).collect(),
            decisions: decisions
                .iter()
                .map(|r| {
                    let mut v: Vec<String> = (0..5).map(|i| r.get(i)).collect();
                    v.push(r.get::<_, i64>(5).to_string());
                    v
                })
                .collect(),
            rounds: rounds
                .iter()
                .map(|r| (r.get(0), (r.get(1), r.get(2))))
                .collect(),
            children: children.iter().map(|r| r.get(0)).collect(),
            graph: graph.iter().map(|r| (r.get(0), r.get(1))).collect(),
            inbox: inbox.iter().map(|r| (r.get(0), r.get(1))).collect(),
            effects: effects.iter().map(|r| (r.get(0), r.get(1))).collect(),
        };
        tx.commit().await?;
        assemble(sid, rows).map(Some)
    }

    /// Every row of `sql` (SQLite's spelling, `?1` = `arg`), each column as text.
    pub(crate) async fn text_rows(&self, sql: &str, arg: &str) -> Result<TextRows> {
        text_query(&self.client().await?, sql, arg).await
    }

    /// The user data of partition `p` (the partition of the user id).
    pub(crate) async fn load_user_data(
        &self,
        keys: &crate::keys::Keys,
        p: u32,
    ) -> Result<UserData> {
        let client = self.client().await?;
        let values = client
            .query(
                "SELECT user_id, key, value FROM user_values ORDER BY user_id, key",
                &[],
            )
            .await?
            .iter()
            .map(|r| (r.get::<_, String>(0), (r.get(1), r.get(2))))
            .filter(|(u, _)| keys.partition(u) == p)
            .collect::<Vec<_>>();
        let rounds = client
            .query(
                "SELECT user_id, session_id, round_id, state FROM rounds
                 WHERE session_id NOT IN (SELECT id FROM sessions)
                 ORDER BY user_id, session_id, round_id",
                &[],
            )
            .await?
            .iter()
            .map(|r| ((r.get::<_, String>(0), r.get(1)), (r.get(2), r.get(3))))
            .filter(|((u, _), _)| keys.partition(u) == p)
            .collect::<Vec<_>>();
        Ok((group_sorted(values), group_sorted(rounds)))
    }

    /// The sessions of partition `p`: (id, user id or '').
    pub(crate) async fn partition_sessions(&self, p: u32) -> Result<Vec<(String, String)>> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT id, user_id FROM sessions WHERE partition = $1",
                &[&(p as i64)],
            )
            .await?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }
}

/// Every row of `sql` (SQLite's spelling: `?1` is `arg`, bound as text when the statement
/// has it) through `client` (a connection or a transaction), each column as text.
pub(crate) async fn text_query(
    client: &impl deadpool_postgres::GenericClient,
    sql: &str,
    arg: &str,
) -> Result<TextRows> {
    let stmt = client.prepare_cached(&dollar(sql)).await?;
    let params: &[&(dyn tokio_postgres::types::ToSql + Sync)] = if stmt.params().is_empty() {
        &[]
    } else {
        &[&arg]
    };
    Ok(client
        .query(&stmt, params)
        .await?
        .iter()
        .map(|r| {
            (0..r.len())
                .map(|i| r.get::<_, Option<String>>(i))
                .collect()
        })
        .collect())
}
