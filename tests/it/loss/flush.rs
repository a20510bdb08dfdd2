//! Flushing after Redis loss: the new Redis' wal ids may sort below the durable tier's
//! cursor, and its entries flush all the same.

use agentstate::*;

use crate::support::*;

on_both_backends!(after_redis_loss_new_entries_flush_even_when_their_ids_sort_below_the_cursor);

async fn after_redis_loss_new_entries_flush_even_when_their_ids_sort_below_the_cursor(
    mut t: TestEnv,
) {
    t.store
        .create_session(&NewSession::new().id("before"))
        .await
        .unwrap();
    t.flush().await;
    t.lose_redis().await;
    // A Redis whose clock runs behind: its first wal entry gets a tiny id.
    let p = t.store.keys().partition("before");
    let late = (0..)
        .map(|i| format!("late{i}"))
        .find(|s| t.store.keys().partition(s) == p)
        .unwrap();
    let record = r#"{"user_id":null,"kind":"root","parent":null,"spawn_depth":0,"lifecycle":"ephemeral","status":"active","model":null,"system_prompt":null,"config":{},"metadata":{},"ttl":60,"created_at":5}"#;
    let _: String = redis::cmd("XADD")
        .arg(t.store.keys().wal(p))
        .arg("1-1")
        .arg("op")
        .arg("session_create")
        .arg("id")
        .arg(&late)
        .arg("d")
        .arg(record)
        .query(&mut t.redis())
        .unwrap();
    assert_eq!(t.flush().await.wal, 1);
    assert_eq!(
        count(&t, "SELECT count(*) FROM sessions WHERE id = ?1", &late),
        1
    );
    assert_eq!(
        count(&t, "SELECT count(*) FROM sessions WHERE id = ?1", "before"),
        1
    );
    let committed: Option<String> = redis::cmd("HGET")
        .arg(t.store.keys().committed(p))
        .arg("wal")
        .query(&mut t.redis())
        .unwrap();
    assert_eq!(committed.as_deref(), Some("1-1"));
}
