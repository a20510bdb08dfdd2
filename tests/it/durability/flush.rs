//! Flushing into SQLite: every entry exactly once, the committed ids and cursors, batch order, entries SQLite rejects, seqs a rewound Redis hands out again, and the flusher benchmark.

use agentstate::*;

use crate::support::create;
use crate::support::on_both_backends;
use crate::support::TestEnv;
use crate::support::{count, rich_session};

on_both_backends!(flush_lands_every_entry_once_and_publishes_the_committed_ids);
async fn flush_lands_every_entry_once_and_publishes_the_committed_ids(t: TestEnv) {
    let s = &t.store;
    let (sid, kid) = rich_session(s, "rich1").await;
    let p = s.keys().partition(&sid);
    let wal_before = t.xlen(&s.keys().wal(p));
    assert!(wal_before > 10);
    let report = t.flush().await;
    assert_eq!(report.partitions, 16);
    assert!(report.wal >= wal_before as u64, "{report:?}");
    assert_eq!(report.decisions, 3);

    let seqs = t.durable_messages(&sid);
    assert_eq!(
        seqs.iter().map(|x| x.0).collect::<Vec<_>>(),
        (1..=8).collect::<Vec<_>>()
    );
    let live: Vec<String> = redis::cmd("LRANGE")
        .arg(s.keys().session(&sid).msgs)
        .arg(0)
        .arg(-1)
        .query(&mut t.redis())
        .unwrap();
    assert_eq!(seqs.iter().map(|x| x.1.clone()).collect::<Vec<_>>(), live);
    assert!(seqs[1].1.starts_with(r#"{"at":"#), "{}", seqs[1].1);
    assert_eq!(
        count(
            &t,
            "SELECT count(*) FROM compactions WHERE session_id = ?1",
            &sid
        ),
        2
    );
    assert_eq!(
        count(&t, "SELECT count(*) FROM usage WHERE session_id = ?1", &sid),
        1
    );
    assert_eq!(
        count(
            &t,
            "SELECT count(*) FROM checkpoints WHERE session_id = ?1",
            &sid
        ),
        3
    );
    assert_eq!(
        count(
            &t,
            "SELECT count(*) FROM decisions WHERE session_id = ?1 AND outcome IS NULL",
            &sid
        ),
        1
    );
    assert_eq!(
        count(
            &t,
            "SELECT count(*) FROM decisions WHERE session_id = ?1 AND outcome = 'ok'",
            &sid
        ),
        1
    );
    assert_eq!(
        count(
            &t,
            "SELECT count(*) FROM rounds WHERE session_id = ?1",
            &sid
        ),
        2
    );
    assert_eq!(
        count(&t, "SELECT round_index FROM sessions WHERE id = ?1", &sid),
        3
    );
    assert_eq!(
        count(&t, "SELECT count(*) FROM sessions WHERE parent = ?1", &sid),
        1
    );
    assert_eq!(
        count(&t, "SELECT spawn_depth FROM sessions WHERE id = ?1", &kid),
        1
    );

    // The committed hash names the last entry of each stream, which the trimmer kept.
    let mut c = t.redis();
    let last_wal: Vec<(String, Vec<(String, String)>)> = redis::cmd("XREVRANGE")
        .arg(s.keys().wal(p))
        .arg("+")
        .arg("-")
        .arg("COUNT")
        .arg(1)
        .query(&mut c)
        .unwrap();
    let committed: Option<String> = redis::cmd("HGET")
        .arg(s.keys().committed(p))
        .arg("wal")
        .query(&mut c)
        .unwrap();
    assert_eq!(committed.as_deref(), Some(last_wal[0].0.as_str()));
    assert_eq!(t.xlen(&s.keys().wal(p)), 1);

    // A second pass finds nothing to do.
    assert_eq!(t.flush().await.wal, 0);
}

on_both_backends!(a_decision_applied_before_its_sessions_create_survives_the_create);
async fn a_decision_applied_before_its_sessions_create_survives_the_create(t: TestEnv) {
    create(&t, "busy", None, None).await;
    for i in 0..10 {
        t.store
            .append("busy", &NewMessage::new("user").content(format!("m{i}")))
            .await
            .unwrap();
    }
    // "late" lands in busy's partition: its wal entries queue behind busy's ten messages.
    let late = (0..)
        .map(|i| format!("late{i}"))
        .find(|s| t.store.keys().partition(s) == t.store.keys().partition("busy"))
        .unwrap();
    create(&t, &late, None, None).await;
    let d = t
        .store
        .record_decision(&late, &NewDecision::new("go", "now"))
        .await
        .unwrap();
    // Batches of 4: the decision is applied in the first batch, its session's create later.
    agentstate::SpillDaemon::open(t.store.clone(), t.spill_config().batch_size(4))
        .await
        .unwrap()
        .run_once()
        .await
        .unwrap();
    assert_eq!(
        count(&t, "SELECT count(*) FROM decisions WHERE id = ?1", &d),
        1
    );
    assert_eq!(
        count(&t, "SELECT count(*) FROM sessions WHERE id = ?1", &late),
        1
    );
}

on_both_backends!(a_partition_with_an_entry_sqlite_rejects_does_not_hold_the_others_back);
async fn a_partition_with_an_entry_sqlite_rejects_does_not_hold_the_others_back(t: TestEnv) {
    let p_bad = t.store.keys().partition("sick");
    let well = (0..)
        .map(|i| format!("well{i}"))
        .find(|s| t.store.keys().partition(s) != p_bad)
        .unwrap();
    create(&t, &well, None, None).await;
    t.store
        .append(&well, &NewMessage::new("user").content("fine"))
        .await
        .unwrap();
    // A wal entry no flusher can apply (not JSON), in another partition.
    let _: String = t.cmd(&[
        "XADD",
        &t.store.keys().wal(p_bad),
        "*",
        "op",
        "msg",
        "id",
        "sick",
        "d",
        "not json",
    ]);
    let report = agentstate::SpillDaemon::open(t.store.clone(), t.spill_config())
        .await
        .unwrap()
        .pass()
        .await
        .unwrap();
    assert!(report.wal >= 2, "{report:?}");
    assert_eq!(
        count(
            &t,
            "SELECT count(*) FROM messages WHERE session_id = ?1",
            &well
        ),
        1
    );
}

on_both_backends!(a_flush_that_meets_another_message_at_a_committed_seq_keeps_the_durable_row);
/// The durable tier is the authority for what it committed: a seq Redis hands out again
/// within one history (the history check cannot see it: planted here by hand, standing for
/// a bug or a race the design missed) never replaces the committed message. The partition's
/// batch commits nothing, a later pass does not either, and the other partitions go on.
async fn a_flush_that_meets_another_message_at_a_committed_seq_keeps_the_durable_row(t: TestEnv) {
    create(&t, "rewound", None, None).await;
    for c in ["one", "two", "three"] {
        t.store
            .append("rewound", &NewMessage::new("user").content(c))
            .await
            .unwrap();
    }
    t.flush().await;
    let p = t.store.keys().partition("rewound");
    let k = t.store.keys().session("rewound");
    let _: String = t.cmd(&["RPOP", &k.msgs]);
    let _: i64 = t.cmd(&["HSET", &k.meta, "next_seq", "3"]);
    let seq = t
        .store
        .append("rewound", &NewMessage::new("user").content("three again"))
        .await
        .unwrap();
    assert_eq!(seq, 3);
    // A write of the same partition in the same batch, and one of another partition.
    let same = t.ids_in_partition("same", p, 1).remove(0);
    let other = (0..)
        .map(|i| format!("other{i}"))
        .find(|id| t.store.keys().partition(id) != p)
        .unwrap();
    for sid in [&same, &other] {
        create(&t, sid, None, None).await;
        t.store
            .append(sid, &NewMessage::new("user").content("after"))
            .await
            .unwrap();
    }
    let committed_before: Option<String> = t.cmd(&["HGET", &t.store.keys().committed(p), "wal"]);
    // `spill --once` would fail (NotDrained: the partition cannot commit); a daemon's
    // passes go on with the other partitions.
    let mut daemon = agentstate::SpillDaemon::open(t.store.clone(), t.spill_config())
        .await
        .unwrap();
    for _ in 0..2 {
        daemon.pass().await.unwrap();
    }
    let rows = |sid: &str| {
        t.durable_rows(
            "SELECT element FROM messages WHERE session_id = ?1 ORDER BY seq",
            sid,
        )
    };
    let rewound = rows("rewound");
    assert_eq!(rewound.len(), 3);
    assert!(rewound[2][0].contains("\"three\""), "{rewound:?}");
    assert!(
        rows(&same).is_empty(),
        "the conflicting batch committed nothing"
    );
    assert_eq!(rows(&other).len(), 1, "other partitions go on");
    let committed_after: Option<String> = t.cmd(&["HGET", &t.store.keys().committed(p), "wal"]);
    assert_eq!(committed_before, committed_after);
}

on_both_backends!(a_wal_the_previous_release_wrote_flushes_exactly_beside_batch_entries);
/// A Redis the previous release wrote: every append was a wal entry of its own (fields `op`,
/// `id`, `d`, and `k` for an idempotency key), batched or not. This build reads that layout
/// beside its own batch entries: a fixture of such entries (a session's create, the three
/// appends of one of its batches — one keyed — and a checkpoint), then a batch entry this
/// build wrote for two sessions, flush in one pass to exactly the rows they hold.
async fn a_wal_the_previous_release_wrote_flushes_exactly_beside_batch_entries(t: TestEnv) {
    let s = &t.store;
    let p = s.keys().partition("old1");
    let wal = s.keys().wal(p);
    let xadd = |fields: &[&str]| {
        let mut args = vec!["XADD", wal.as_str(), "*"];
        args.extend(fields);
        let _: String = t.cmd(&args);
    };
    let create = r#"{"user_id":"ann","kind":"root","parent":null,"spawn_depth":0,"lifecycle":"ephemeral","status":"active","model":"m1","system_prompt":null,"config":{},"metadata":{"a":1},"ttl":3600,"created_at":1700000000000}"#;
    xadd(&["op", "session_create", "id", "old1", "d", create]);
    let element = |seq: i64| {
        format!(
            r#"{{"seq":{seq},"state":"active","created_at":170000000{seq}000,"role":"user","content":"old {seq}"}}"#
        )
    };
    let old: Vec<String> = (1..=3).map(element).collect();
    xadd(&["op", "msg", "id", "old1", "d", &old[0]]);
    xadd(&["op", "msg", "id", "old1", "d", &old[1], "k", "key2"]);
    xadd(&["op", "msg", "id", "old1", "d", &old[2]]);
    let checkpoint = r#"{"id":"c-old","session_id":"old1","label":"default","created_at":1700000004000,"payload":{"step":3}}"#;
    xadd(&["op", "checkpoint", "id", "old1", "d", checkpoint]);

    // This build's batch entry after them: two sessions of the same partition in one entry.
    let new = t.ids_in_partition("new", p, 2);
    t.create_sessions(&new).await;
    let items: Vec<_> = new
        .iter()
        .map(|sid| {
            let body = format!(r#"{{"role":"user","content":"to {sid}"}}"#);
            agentstate::test_support::scripts::append_item(
                s.keys().session(sid),
                sid,
                &body,
                Some("kn"),
                None,
                1000,
                None,
            )
        })
        .collect();
    let refs: Vec<_> = items.iter().collect();
    let mut conn = agentstate::test_support::connection(s).await.unwrap();
    let _: String = agentstate::test_support::scripts::session_batch(&refs)
        .run(&mut conn)
        .await
        .unwrap();
    let entries: Vec<(String, std::collections::BTreeMap<String, String>)> =
        t.cmd(&["XRANGE", &wal, "-", "+"]);
    let ops: Vec<&str> = entries.iter().map(|(_, f)| f["op"].as_str()).collect();
    assert_eq!(
        ops,
        [
            "session_create",
            "msg",
            "msg",
            "msg",
            "checkpoint",
            "session_create",
            "session_create",
            "batch"
        ]
    );

    let report = t.flush().await;
    assert_eq!(report.wal, 8, "entries: {report:?}");
    let expected: Vec<(i64, String)> = (1..=3).zip(old.iter().cloned()).collect();
    assert_eq!(t.durable_messages("old1"), expected);
    assert_eq!(
        t.durable_rows(
            "SELECT seq, coalesce(idem_key, '-') FROM messages WHERE session_id = ?1 ORDER BY seq",
            "old1"
        ),
        [["1", "-"], ["2", "key2"], ["3", "-"]]
    );
    assert_eq!(
        t.durable_rows(
            "SELECT user_id, kind, model, created_at FROM sessions WHERE id = ?1",
            "old1"
        ),
        [["ann", "root", "m1", "1700000000000"]]
    );
    assert_eq!(
        t.durable_rows(
            "SELECT id, label, created_at FROM checkpoints WHERE session_id = ?1",
            "old1"
        ),
        [["c-old", "default", "1700000004000"]]
    );
    for sid in &new {
        let live: Vec<String> = t.cmd(&["LRANGE", &s.keys().session(sid).msgs, "0", "-1"]);
        assert_eq!(live.len(), 1);
        assert_eq!(t.durable_messages(sid), [(1, live[0].clone())], "{sid}");
        assert_eq!(
            t.durable_rows("SELECT idem_key FROM messages WHERE session_id = ?1", sid),
            [["kn"]]
        );
    }
    assert_eq!(t.flush().await.wal, 0, "a second pass finds nothing");
}

on_both_backends!(append_many_logs_batch_entries_of_at_most_a_thousand_records);
/// `append_many` writes its messages' records as batch entries of at most 1,000 (one XADD
/// takes at most that many without overflowing Lua's C stack): 2,500 messages are three
/// entries, 1,000, 1,000 and 500 records in seq order, and flush to exactly the list Redis
/// holds.
async fn append_many_logs_batch_entries_of_at_most_a_thousand_records(t: TestEnv) {
    let s = &t.store;
    let sid = "many".to_string();
    create(&t, &sid, None, None).await;
    let messages: Vec<NewMessage> = (1..=2500)
        .map(|i| NewMessage::new("user").content(format!("m{i}")))
        .collect();
    let seqs = s.append_many(&sid, &messages, Some(1)).await.unwrap();
    assert_eq!(seqs, (1..=2500).collect::<Vec<u64>>());
    let p = s.keys().partition(&sid);
    let entries: Vec<(String, Vec<(String, String)>)> =
        t.cmd(&["XRANGE", &s.keys().wal(p), "-", "+"]);
    let sizes: Vec<(String, usize)> = entries
        .iter()
        .map(|(_, f)| (f[0].1.clone(), f.len() - 1))
        .collect();
    let batch = |n: usize| ("batch".to_string(), n);
    assert_eq!(
        sizes,
        [
            ("session_create".to_string(), 2),
            batch(1000),
            batch(1000),
            batch(500)
        ]
    );
    let records = t.wal_records_of(p);
    let seq_fields: Vec<String> = entries[1..]
        .iter()
        .flat_map(|(_, f)| f[1..].iter().map(|(name, _)| name.clone()))
        .collect();
    let want: Vec<String> = (1..=2500).map(|i| format!("msg {sid} {i}")).collect();
    assert_eq!(seq_fields, want);
    assert_eq!(records.len(), 2501);

    t.flush().await;
    let live: Vec<String> = t.cmd(&["LRANGE", &s.keys().session(&sid).msgs, "0", "-1"]);
    let durable: Vec<(i64, String)> = t.durable_messages(&sid);
    assert_eq!(durable, (1..=2500).zip(live).collect::<Vec<_>>());
}
