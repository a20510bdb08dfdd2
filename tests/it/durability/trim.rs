//! Trimming the wal and decisions streams: only below what SQLite committed, keeping undelivered decisions.

use agentstate::*;

use crate::support::count;
use crate::support::env;

#[tokio::test]
async fn streams_shrink_only_below_what_sqlite_committed_and_keep_undelivered_decisions() {
    let t = env().await;
    let s = &t.store;
    let sid = s
        .create_session(&NewSession::new().id("trim1"))
        .await
        .unwrap();
    let p = s.keys().partition(&sid);
    for _ in 0..10 {
        s.append(&sid, &NewMessage::new("user").content("m"))
            .await
            .unwrap();
    }
    let dkey = s.keys().decisions(p);
    let mut c = t.redis();
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(&dkey)
        .arg("g")
        .arg("0")
        .arg("MKSTREAM")
        .query(&mut c)
        .unwrap();
    for i in 0..3 {
        s.record_decision(&sid, &NewDecision::new(format!("d{i}"), "r"))
            .await
            .unwrap();
    }
    // No daemon: nothing is committed, nothing is trimmed.
    assert_eq!(t.xlen(&s.keys().wal(p)), 11);
    assert_eq!(t.wal_entries(), 11);
    // One decision delivered and still pending, two undelivered: all three stay.
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("g")
        .arg("c")
        .arg("COUNT")
        .arg(1)
        .arg("STREAMS")
        .arg(&dkey)
        .arg(">")
        .query(&mut c)
        .unwrap();
    t.flush().await;
    assert_eq!(t.xlen(&s.keys().wal(p)), 1);
    assert_eq!(t.xlen(&dkey), 3);
    assert_eq!(
        count(
            &t,
            "SELECT count(*) FROM decisions WHERE session_id = ?1",
            &sid
        ),
        3
    );
    // Acknowledging the first lets it go.
    let first: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg(&dkey)
        .arg("-")
        .arg("+")
        .arg("COUNT")
        .arg(1)
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("XACK")
        .arg(&dkey)
        .arg("g")
        .arg(&first[0].0)
        .query(&mut c)
        .unwrap();
    s.append(&sid, &NewMessage::new("user").content("m"))
        .await
        .unwrap();
    t.flush().await;
    assert_eq!(t.xlen(&dkey), 2);
    // The hard cap trims undelivered decisions too, but only what SQLite holds.
    let capped = agentstate::SpillDaemon::open(t.store.clone(), t.spill_config().decisions_cap(1))
        .await
        .unwrap();
    s.append(&sid, &NewMessage::new("user").content("m"))
        .await
        .unwrap();
    capped.run_once().await.unwrap();
    assert_eq!(t.xlen(&dkey), 1);
}
