//! Group commit: concurrent appends, decisions and working-state writes of one
//! `Store` share one EVALSHA of `session_batch.lua` (on a single node across partitions, on
//! a cluster per partition); every caller still gets its own reply or its own typed error,
//! per-session order holds, and the wal the daemon flushes is unchanged.

use std::collections::BTreeMap;

use agentstate::test_support::scripts::{self, BatchItem, DecisionArgs};
use agentstate::{AppendOptions, Error, MessageQuery, NewDecision, NewMessage, NewSession};
use futures_util::future::join_all;
use serde_json::json;

use crate::support::{env, sqlite_messages, TestEnv};

/// `n` session ids that each live in a partition of their own.
fn ids_in_distinct_partitions(t: &TestEnv, n: usize) -> Vec<String> {
    let mut seen = Vec::new();
    (0..)
        .map(|i| format!("d{i}"))
        .filter(|id| {
            let p = t.store.keys().session(id).partition;
            let new = !seen.contains(&p);
            seen.push(p);
            new
        })
        .take(n)
        .collect()
}

/// `n` session ids that all live in the partition of the first.
fn ids_in_one_partition(t: &TestEnv, n: usize) -> Vec<String> {
    t.ids_in_partition("g", t.store.keys().session("g0").partition, n)
}

/// EVALSHA calls Redis counted since the last `CONFIG RESETSTAT`.
fn evalsha_calls(t: &TestEnv) -> u64 {
    let info: String = t.cmd(&["INFO", "commandstats"]);
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

fn user(content: &str) -> NewMessage {
    NewMessage::new("user").content(content)
}

const SESSIONS: usize = 3;
const TASKS_PER_SESSION: usize = 6;
const APPENDS_EACH: usize = 20;

/// Many tasks append to several sessions of one partition through one `Store`: seqs are
/// gapless per session, each task's messages sit at the seqs it was given in the order it
/// sent them, idempotent repeats get their original seq, fewer EVALSHAs than appends went
/// out (batches did form), and SQLite holds exactly what Redis holds after a flush.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_to_one_partition_are_batched_and_stay_exact() {
    let t = env().await;
    let sids = ids_in_one_partition(&t, SESSIONS);
    appends_batch_and_stay_exact(&t, &sids, TASKS_PER_SESSION).await;
    sqlite_matches_redis(&t, &sids).await;
}

/// The same across partitions: on a single node one lane serves the whole store, so
/// appends of one task per session, each session in a partition of its own, still share
/// batches, and each partition's wal holds exactly its own session's records (the flushed
/// SQLite rows are exact).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_across_partitions_are_batched_on_a_single_node() {
    let t = env().await;
    let sids = ids_in_distinct_partitions(&t, 8);
    appends_batch_and_stay_exact(&t, &sids, 1).await;
    for sid in &sids {
        let p = t.store.keys().session(sid).partition;
        let logged: Vec<String> = t
            .wal_records_of(p)
            .into_iter()
            .filter(|(op, _, _)| op == "msg")
            .map(|(_, id, _)| id)
            .collect();
        assert_eq!(
            logged,
            vec![sid.clone(); APPENDS_EACH],
            "partition {p}'s wal"
        );
    }
    sqlite_matches_redis(&t, &sids).await;
}

/// `per_session` tasks per session of `sids` append `APPENDS_EACH` messages each (every fifth with
/// an idempotency key, repeated): seqs, order, contents and batching as the two tests above
/// say.
async fn appends_batch_and_stay_exact(t: &TestEnv, sids: &[String], per_session: usize) {
    for sid in sids {
        t.store
            .create_session(&NewSession::new().id(sid))
            .await
            .unwrap();
    }
    let _: String = t.cmd(&["CONFIG", "RESETSTAT"]);

    let tasks: Vec<_> = sids
        .iter()
        .flat_map(|sid| (0..per_session).map(move |w| (sid.clone(), w)))
        .map(|(sid, w)| {
            let store = t.store.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                for i in 0..APPENDS_EACH {
                    let content = format!("{sid}-t{w}-{i}");
                    let seq = if i % 5 == 0 {
                        let keyed = AppendOptions::new().idempotency_key(format!("t{w}-{i}"));
                        let seq = store.append_with(&sid, &user(&content), &keyed).await;
                        let again = store.append_with(&sid, &user("repeat"), &keyed).await;
                        assert_eq!(again.unwrap(), *seq.as_ref().unwrap(), "{content}");
                        seq
                    } else {
                        store.append(&sid, &user(&content)).await
                    };
                    got.push((seq.unwrap(), content));
                }
                (sid, got)
            })
        })
        .collect();
    let mut sent: BTreeMap<String, Vec<(u64, String)>> = BTreeMap::new();
    for task in tasks {
        let (sid, got) = task.await.unwrap();
        let seqs: Vec<u64> = got.iter().map(|(s, _)| *s).collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "{sid}: a task's seqs are not in its order: {seqs:?}"
        );
        sent.entry(sid).or_default().extend(got);
    }

    let appends = (sids.len() * per_session * APPENDS_EACH) as u64;
    let repeats = appends / 5;
    let calls = evalsha_calls(t);
    assert!(
        calls < appends + repeats,
        "{calls} EVALSHAs for {} appends: nothing was batched",
        appends + repeats
    );

    for sid in sids {
        let stored = t.store.messages(sid, MessageQuery::all()).await.unwrap();
        let n = per_session * APPENDS_EACH;
        assert_eq!(
            stored.iter().map(|m| m.seq).collect::<Vec<_>>(),
            (1..=n as u64).collect::<Vec<_>>(),
            "{sid}"
        );
        let mut expected = sent[sid].clone();
        expected.sort();
        let got: Vec<(u64, String)> = stored
            .iter()
            .map(|m| (m.seq, m.content.clone().unwrap()))
            .collect();
        assert_eq!(
            got, expected,
            "{sid}: a message is not at the seq its caller got"
        );
    }
}

/// After a daemon pass, SQLite holds exactly the message elements Redis holds for `sids`.
async fn sqlite_matches_redis(t: &TestEnv, sids: &[String]) {
    t.flush().await;
    for sid in sids {
        let k = t.store.keys().session(sid);
        let live: Vec<String> = t.cmd(&["LRANGE", &k.msgs, "0", "-1"]);
        let rows = sqlite_messages(&t.db(), sid);
        assert_eq!(
            rows,
            live.into_iter()
                .enumerate()
                .map(|(i, e)| (i as i64 + 1, e))
                .collect::<Vec<_>>(),
            "{sid}: SQLite differs from Redis"
        );
    }
}

/// Callers queued behind one round trip go out as one batch, and each gets its own
/// outcome: a conflict and a bad message fail alone (writing nothing), an idempotent
/// repeat returns the original seq, the others append.
#[tokio::test]
async fn one_batch_returns_each_caller_its_own_outcome() {
    let t = env().await;
    let s = &t.store;
    let ids = ids_in_one_partition(&t, 2);
    t.create_sessions(&ids).await;
    let (x, y) = (&ids[0], &ids[1]);
    let keyed = AppendOptions::new().idempotency_key("k1");
    assert_eq!(s.append_with(x, &user("x1"), &keyed).await.unwrap(), 1);
    let _: String = t.cmd(&["CONFIG", "RESETSTAT"]);

    // join_all polls in order: the first two (sessions x and y) find a free slot each and
    // go at once, the others queue (the bad role is refused before it reaches the lane);
    // as each lone call returns, the queued calls of its session board one batch (a call
    // never rides beside a round trip in flight that carries its session).
    let stale = AppendOptions::new().expect_seq(5);
    type Call<'a> =
        std::pin::Pin<Box<dyn std::future::Future<Output = agentstate::Result<u64>> + 'a>>;
    let outcomes = join_all([
        Box::pin(s.append(x, &user("x2"))) as Call,
        Box::pin(s.append_with(y, &user("y-stale"), &stale)),
        Box::pin(s.append_with(x, &user("x-repeat"), &keyed)),
        Box::pin(s.append(x, &NewMessage::new("Not A Role"))),
        Box::pin(s.append(y, &user("y1"))),
        Box::pin(s.set_working(y, "plan", &json!(1))),
        Box::pin(s.set_working_if_version(x, "plan", &json!(2), 7)),
        Box::pin(async {
            s.record_decision(x, &NewDecision::new("go", "because"))
                .await
                .map(|id| id.len() as u64)
        }),
        Box::pin(s.append(x, &user("x3"))),
    ])
    .await;
    let mut it = outcomes.into_iter();
    assert_eq!(it.next().unwrap().unwrap(), 2);
    assert!(matches!(
        it.next().unwrap(),
        Err(Error::Conflict {
            expected: 5,
            current: 1
        })
    ));
    assert_eq!(it.next().unwrap().unwrap(), 1);
    assert!(matches!(it.next().unwrap(), Err(Error::InvalidInput(_))));
    assert_eq!(it.next().unwrap().unwrap(), 1);
    assert_eq!(it.next().unwrap().unwrap(), 1, "y's working-state version");
    assert!(matches!(
        it.next().unwrap(),
        Err(Error::Conflict {
            expected: 7,
            current: 0
        })
    ));
    assert!(it.next().unwrap().unwrap() > 2, "a decision id");
    assert_eq!(it.next().unwrap().unwrap(), 3);
    assert_eq!(
        evalsha_calls(&t),
        4,
        "two lone calls, then a batch of x and one of y"
    );
    assert_eq!(t.hash(&s.keys().session(y).work)["plan"], "1");
    assert!(t.hash(&s.keys().session(x).work).is_empty());
    // never bumped: at its default, so absent (META_DEFAULTS)
    assert_eq!(t.hash(&s.keys().session(x).meta).get("version"), None);
    let open = t.hash(&s.keys().open_decisions(s.keys().session(x).partition));
    assert_eq!(open.len(), 1);

    for (sid, want) in [(x, vec!["x1", "x2", "x3"]), (y, vec!["y1"])] {
        let got: Vec<String> = s
            .messages(sid, MessageQuery::all())
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.content.unwrap())
            .collect();
        assert_eq!(got, want, "{sid}");
    }
    // Each message logged once; x's batch and y's may reach Redis in either order.
    let mut logged: Vec<String> = t
        .wal_records()
        .into_iter()
        .filter(|(op, _, _)| op == "msg")
        .map(|(_, id, _)| id)
        .collect();
    logged.sort();
    let mut want = [x.clone(), x.clone(), x.clone(), y.clone()];
    want.sort();
    assert_eq!(logged, want);
}

/// `session_batch.lua` itself: each item's error comes back as its `CODE detail` text in its
/// place, its session untouched, and the items around it are applied. The appends it applied
/// are ONE wal entry (op `batch`) holding exactly their records in item order, the bad
/// message, the conflict and the idempotent repeat none, and each applied append's reply
/// names that entry.
#[tokio::test]
async fn the_batch_script_answers_per_item_and_writes_nothing_for_failed_items() {
    let t = env().await;
    let s = &t.store;
    let ids = ids_in_one_partition(&t, 3);
    t.create_sessions(&ids[..2]).await;
    let (x, y, ghost) = (&ids[0], &ids[1], &ids[2]);
    let keyed = AppendOptions::new().idempotency_key("k1");
    s.append_with(x, &user("x1"), &keyed).await.unwrap();
    let before = t.wal_records().len();

    let item = |sid: &str, body: &str, idem: Option<&str>, expect: Option<u64>| {
        scripts::append_item(s.keys().session(sid), sid, body, idem, expect, 64, None)
    };
    let decision = DecisionArgs {
        decision: "go",
        rationale: "why",
        planned_action: "",
        meta: "{}",
    };
    let items = [
        item(x, r#"{"role":"user","content":"x2"}"#, None, None),
        item(y, "not json", None, None),
        item(
            y,
            r#"{"role":"user","content":"far too long for the limit of this call"}"#,
            None,
            None,
        ),
        item(y, r#"{"role":"user","content":"stale"}"#, None, Some(4)),
        item(x, r#"{"role":"user","content":"again"}"#, Some("k1"), None),
        item(ghost, r#"{"role":"user","content":"nobody"}"#, None, None),
        scripts::write_working(s.keys().session(y), y, "set", "k", "1", Some(3), 64, None),
        scripts::record_decision(s.keys(), s.keys().session(ghost), ghost, &decision),
        scripts::write_working(s.keys().session(y), y, "set", "k", "1", Some(0), 64, None),
        item(y, r#"{"role":"user","content":"y1"}"#, Some("k2"), Some(1)),
    ];
    let p = s.keys().session(x).partition;
    let wal_before: Vec<(String, Vec<(String, String)>)> =
        t.cmd(&["XRANGE", &s.keys().wal(p), "-", "+"]);
    let refs: Vec<&BatchItem> = items.iter().collect();
    let mut conn = agentstate::test_support::connection(s).await.unwrap();
    let text: String = scripts::session_batch(&refs).run(&mut conn).await.unwrap();
    // A line per item: `1 ` then its own reply's values (3 for an append), or `0 ` then the
    // error.
    let lines: Vec<&str> = text.split('\n').collect();
    assert_eq!(lines.len(), items.len(), "one line per item: {text:?}");
    let shown: Vec<String> = items
        .iter()
        .zip(&lines)
        .map(|(item, line)| match line.split_once(' ') {
            Some(("0", error)) => error.to_string(),
            Some(("1", values)) if item.reply_len() == 3 => {
                let [seq, id, repeat] =
                    <[&str; 3]>::try_from(values.split(' ').collect::<Vec<_>>())
                        .unwrap_or_else(|v| panic!("three values, not {v:?}"));
                // A written append's id names the Redis history it was written in.
                let logged = match id.split_once('/') {
                    _ if id.is_empty() => "nothing",
                    Some((entry, history)) if replid(&t).starts_with(history) => entry,
                    _ => panic!("an entry id without this history: {id}"),
                };
                format!("seq {seq} logged {logged} repeat {repeat}")
            }
            Some(("1", version)) => format!("version {version}"),
            _ => panic!("unexpected item line {line:?}"),
        })
        .collect();
    let wal: Vec<(String, Vec<(String, String)>)> = t.cmd(&["XRANGE", &s.keys().wal(p), "-", "+"]);
    assert_eq!(wal.len(), wal_before.len() + 1, "one new wal entry");
    let (entry, fields) = wal.last().unwrap();
    let element = |sid: &str, i: i64| -> String {
        t.cmd(&["LINDEX", &s.keys().session(sid).msgs, &i.to_string()])
    };
    assert_eq!(
        fields,
        &[
            ("op".to_string(), "batch".to_string()),
            (format!("msg {x} 2"), element(x, 1)),
            (format!("msg {y} 1 k2"), element(y, 0)),
        ]
    );
    assert_eq!(
        shown,
        [
            &format!("seq 2 logged {entry} repeat 0"),
            "BAD_INPUT message body must be a non-empty JSON object",
            "TOO_LARGE 67 64",
            "CONFLICT 4 1",
            "seq 1 logged nothing repeat 1",
            &format!("NO_SESSION {ghost}"),
            "CONFLICT 3 0",
            &format!("NO_SESSION {ghost}"),
            "version 1",
            &format!("seq 1 logged {entry} repeat 0"),
        ]
    );
    assert_eq!(t.hash(&s.keys().session(y).work)["k"], "1");
    assert!(t.hash(&s.keys().open_decisions(p)).is_empty());
    let decisions: i64 = t.cmd(&["XLEN", &s.keys().decisions(p)]);
    assert_eq!(decisions, 0);
    assert_eq!(t.wal_records().len(), before + 2);
    let n: i64 = t.cmd(&["EXISTS", &s.keys().session(ghost).meta]);
    assert_eq!(n, 0);
    let y_msgs: Vec<String> = t.cmd(&["LRANGE", &s.keys().session(y).msgs, "0", "-1"]);
    assert_eq!(y_msgs.len(), 1);
    assert!(y_msgs[0].contains(r#""content":"y1""#));
}

/// A batch gives an append only the four keys it writes. When its session's TTL refresh is
/// due (meta `ttl_at` passed) the refresh would touch all eight, so the script runs neither it
/// nor any later item of that session (line `2`), writes nothing of theirs, and runs the
/// other sessions' items; the batch entry holds only those.
#[tokio::test]
async fn a_batch_defers_every_item_of_a_session_whose_ttl_refresh_is_due() {
    let t = env().await;
    let s = &t.store;
    let ids = ids_in_one_partition(&t, 2);
    t.create_sessions(&ids).await;
    let (x, y) = (&ids[0], &ids[1]);
    let _: i64 = t.cmd(&["HSET", &s.keys().session(x).meta, "ttl_at", "1"]);
    let before = t.snapshot();
    let append = |sid: &str, content: &str| {
        let body = format!(r#"{{"role":"user","content":"{content}"}}"#);
        scripts::append_item(s.keys().session(sid), sid, &body, None, None, 1000, None)
    };
    let items = [
        append(x, "x1"),
        append(y, "y1"),
        scripts::write_working(s.keys().session(x), x, "set", "k", "1", None, 64, None),
        append(x, "x2"),
    ];
    let refs: Vec<&BatchItem> = items.iter().collect();
    let mut conn = agentstate::test_support::connection(s).await.unwrap();
    let text: String = scripts::session_batch(&refs).run(&mut conn).await.unwrap();
    let lines: Vec<&str> = text.split('\n').collect();
    let p = s.keys().session(y).partition;
    let wal: Vec<(String, Vec<(String, String)>)> = t.cmd(&["XRANGE", &s.keys().wal(p), "-", "+"]);
    let (entry, fields) = wal.last().unwrap();
    let tracked = format!("{entry}/{}", &replid(&t)[..12]);
    assert_eq!(lines, ["2", &format!("1 1 {tracked} 0"), "2", "2"]);
    let y_element: String = t.cmd(&["LINDEX", &s.keys().session(y).msgs, "0"]);
    assert_eq!(
        fields,
        &[
            ("op".to_string(), "batch".to_string()),
            (format!("msg {y} 1"), y_element)
        ]
    );
    let after = t.snapshot();
    for key in s.keys().session(x).as_array().iter().take(8) {
        assert_eq!(before.keys.get(*key), after.keys.get(*key), "{key} changed");
    }
}

/// The same through a `Store` under load: while every session's refresh is forced due again
/// and again, concurrent appends (and idempotent repeats) through one `Store` still land at
/// gapless seqs in each task's order with their contents — the deferred ones sent alone,
/// before their sessions' later writes — and SQLite holds exactly what Redis holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_deferred_for_a_due_ttl_refresh_are_sent_alone_in_order() {
    let t = env().await;
    let sids = ids_in_one_partition(&t, 4);
    let stop = tokio_util::sync::CancellationToken::new();
    let forcer = {
        let (metas, url, stop) = (
            sids.iter()
                .map(|sid| t.store.keys().session(sid).meta)
                .collect::<Vec<_>>(),
            t.server.url(),
            stop.clone(),
        );
        tokio::spawn(async move {
            let client = redis::Client::open(url).unwrap();
            let mut conn = client.get_multiplexed_async_connection().await.unwrap();
            let mut forced = 0u32;
            while !stop.is_cancelled() {
                for meta in &metas {
                    // Not before its session exists (a bare HSET would make the meta).
                    let exists: bool = redis::cmd("EXISTS")
                        .arg(meta)
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                    if !exists {
                        continue;
                    }
                    let _: i64 = redis::cmd("HSET")
                        .arg(meta)
                        .arg("ttl_at")
                        .arg(1)
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                }
                forced += 1;
                // No sleep: its own round trips pace it, and a sleep of a millisecond on a
                // loaded machine let the appends finish between a handful of rounds.
                tokio::task::yield_now().await;
            }
            forced
        })
    };
    appends_batch_and_stay_exact(&t, &sids, TASKS_PER_SESSION).await;
    stop.cancel();
    assert!(
        forcer.await.unwrap() > 10,
        "the refresh was hardly ever forced"
    );
    for sid in &sids {
        let k = t.store.keys().session(sid);
        let pttl: i64 = t.cmd(&["PTTL", &k.msgs]);
        assert!(pttl > 0, "{sid}'s messages have no TTL");
    }
    sqlite_matches_redis(&t, &sids).await;
}

/// A batch spanning partitions on a single node writes ONE wal entry per partition: calls of
/// two partitions, interleaved, queued behind the round trips in flight, board one batch,
/// which the `Store` sends grouped by partition.
#[tokio::test]
async fn a_batch_writes_one_wal_entry_per_partition() {
    let t = env().await;
    let s = &t.store;
    let (pa, pb, pc) = (0, 1, 2);
    let of = |p: u32, n: usize| t.ids_in_partition("s", p, n);
    let (a, b, fillers) = (of(pa, 3), of(pb, 3), of(pc, 4));
    for ids in [&a, &b, &fillers] {
        t.create_sessions(ids).await;
    }
    // join_all polls in order: the fillers (partition pc) take every round trip a lane may
    // have in flight (MAX_IN_FLIGHT, three; the fourth filler queues), the calls of pa and
    // pb queue behind them and board one batch when the first round trip returns.
    let order: Vec<&String> = fillers
        .iter()
        .chain([&a[0], &b[0], &a[1], &b[1], &a[2], &b[2]])
        .collect();
    let messages: Vec<NewMessage> = order.iter().map(|sid| user(sid)).collect();
    let seqs = join_all(order.iter().zip(&messages).map(|(sid, m)| s.append(sid, m))).await;
    assert!(seqs.iter().all(|r| *r.as_ref().unwrap() == 1), "{seqs:?}");
    for (p, sids) in [(pa, &a), (pb, &b)] {
        let wal: Vec<(String, Vec<(String, String)>)> =
            t.cmd(&["XRANGE", &s.keys().wal(p), "-", "+"]);
        let shapes: Vec<Vec<String>> = wal
            .iter()
            .skip(3) // the creates
            .map(|(_, f)| f.iter().map(|(name, _)| name.clone()).collect())
            .collect();
        let mut batch = vec!["op".to_string()];
        batch.extend(sids.iter().map(|sid| format!("msg {sid} 1")));
        assert_eq!(shapes, [batch], "partition {p}");
    }
}

/// The replication id of the test's Redis (`INFO replication`, `master_replid`).
fn replid(t: &TestEnv) -> String {
    let info: String = t.cmd(&["INFO", "replication"]);
    info.lines()
        .find_map(|l| l.strip_prefix("master_replid:"))
        .unwrap()
        .trim()
        .to_string()
}
