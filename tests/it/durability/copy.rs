//! `agentstate db copy`: a SQLite durable tier moved into PostgreSQL, every table and row
//! exactly, the cursors with it (a daemon on the URL resumes without replaying), again
//! after an interruption without a row twice, and never into another namespace's database.

use agentstate::*;
use serde_json::json;

use crate::support::{env, Durable, PgDatabase, TestEnv};
use crate::support::{keep_ledger, replays, rich_session, spill_process};

/// Every table's rows, ordered by all columns, as text (the same on both backends).
fn dump(rows: impl Fn(&str) -> Vec<Vec<String>>) -> Vec<(String, Vec<Vec<String>>)> {
    agentstate::test_support::durable::TABLES
        .iter()
        .map(|table| {
            let n = rows(&format!("SELECT * FROM {table} LIMIT 1"))
                .first()
                .map_or(0, Vec::len);
            let order: Vec<String> = (1..=n.max(1)).map(|i| i.to_string()).collect();
            let sql = format!("SELECT * FROM {table} ORDER BY {}", order.join(", "));
            (table.to_string(), rows(&sql))
        })
        .collect()
}

/// A SQLite durable tier with a row in every table.
async fn everything_flushed(t: &TestEnv) {
    rich_session(&t.store, "rich").await;
    let mail = NewMessage::new("user").content("also this");
    t.store
        .inbox_put("rich", &[("mail-1", &mail)])
        .await
        .unwrap();
    t.store
        .effect_begin("rich", "call-1", &json!({"amount": 1}))
        .await
        .unwrap();
    t.store
        .set_user_value("alice", "tz", &json!("UTC"))
        .await
        .unwrap();
    let fact = NewMemoryItem {
        value: json!({"pet": "cat"}).as_object().unwrap().clone(),
        vectors: [("pet".to_string(), vec![1.0f32, 0.0])].into(),
        ttl_minutes: Some(600),
    };
    t.store
        .put_memory(&["users", "alice"], "pet", &fact)
        .await
        .unwrap();
    t.store
        .graph_put(
            "thread",
            &crate::live::graphs::cp("", "01", None, &[("c", "json:1")], json!({"step": 1})),
        )
        .await
        .unwrap();
    t.store
        .create_session(&NewSession::new().id("gone"))
        .await
        .unwrap();
    t.store.close_session("gone", false).await.unwrap();
    t.flush().await;
    for (table, rows) in dump(|sql| t.durable_rows(sql, "")) {
        assert!(!rows.is_empty(), "the fixture leaves {table} empty");
    }
}

fn copy_to(t: &TestEnv, url: &str) -> crate::support::CliOutput {
    t.cli(&["--db", t.db().to_str().unwrap(), "db", "copy", "--to", url])
}

#[tokio::test]
async fn a_copy_holds_every_row_and_the_daemon_resumes_from_its_cursors() {
    let t = env().await;
    everything_flushed(&t).await;
    let pg = PgDatabase::create();
    let out = copy_to(&t, &pg.url);
    assert_eq!(out.code, 0, "{out:?}");
    let lines: Vec<Vec<&str>> = out
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines.len(), agentstate::test_support::durable::TABLES.len());
    for l in &lines {
        assert_eq!(l[1], l[2], "{l:?}");
    }
    assert!(
        out.stderr.contains("every table's count matches"),
        "{out:?}"
    );
    let sqlite = dump(|sql| t.durable_rows(sql, ""));
    assert_eq!(dump(|sql| pg.text_rows(sql)), sqlite);

    // Agents go on; a daemon on PostgreSQL commits only what SQLite had not.
    let on_pg = TestEnv {
        durable: Durable::Postgres(pg),
        ..t
    };
    keep_ledger(&on_pg);
    let seq = on_pg
        .store
        .append("rich", &NewMessage::new("user").content("after the move"))
        .await
        .unwrap() as i64;
    let out = spill_process(&on_pg, &["spill", "--once"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        on_pg.durable_rows(
            "SELECT what, session_id, item FROM test_ledger ORDER BY item",
            ""
        ),
        [["message".to_string(), "rich".into(), seq.to_string()]],
        "only the new message was applied"
    );
    assert_eq!(replays(&on_pg), vec![]);
    let seqs = on_pg.durable_ints(
        "SELECT count(*), min(seq), max(seq) FROM messages WHERE session_id = ?1",
        "rich",
    );
    assert_eq!(seqs, [seq, 1, seq], "copied and new, gapless");
}

#[tokio::test]
async fn a_copy_run_again_after_an_interruption_duplicates_nothing() {
    let t = env().await;
    everything_flushed(&t).await;
    let pg = PgDatabase::create();
    assert_eq!(copy_to(&t, &pg.url).code, 0);
    let whole = dump(|sql| pg.text_rows(sql));
    // What an interruption leaves: some tables part-copied, the later ones not at all.
    pg.rows(
        "DELETE FROM messages WHERE seq > 3; DELETE FROM checkpoints WHERE seq > 1;
         DELETE FROM rounds; DELETE FROM graph_log; DELETE FROM cursors;",
    );
    let again = copy_to(&t, &pg.url);
    assert_eq!(again.code, 0, "{again:?}");
    assert_eq!(dump(|sql| pg.text_rows(sql)), whole);
    // And once more over a complete copy: nothing changes.
    assert_eq!(copy_to(&t, &pg.url).code, 0);
    assert_eq!(dump(|sql| pg.text_rows(sql)), whole);
    // The checkpoints' identity goes on above the copied seqs.
    let next = pg.text_rows(
        "SELECT nextval(pg_get_serial_sequence('checkpoints', 'seq')) > max(seq) FROM checkpoints",
    );
    assert_eq!(next, [["t"]]);
}

#[tokio::test]
async fn a_target_holding_another_namespace_is_refused_and_left_alone() {
    let t = env().await;
    everything_flushed(&t).await;
    let pg = PgDatabase::create();
    // Another namespace's daemon has written the target.
    let other = t.cli(&["--prefix", "other", "--db", &pg.url, "spill", "--once"]);
    assert_eq!(other.code, 0, "{other:?}");
    let before = dump(|sql| pg.text_rows(sql));
    let out = copy_to(&t, &pg.url);
    let err = out.runtime_error();
    assert!(
        err.contains("namespace \"other\"")
            && err.contains("\"as\"")
            && err.contains("prefix differs"),
        "{err}"
    );
    assert_eq!(dump(|sql| pg.text_rows(sql)), before, "nothing was written");
}
