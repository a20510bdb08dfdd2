//! Seqs stay unique and gapless under concurrent writers in several OS processes (the real
//! CLI binary) and in-process tokio tasks, all appending to one session at once.

use std::collections::BTreeSet;

use agentstate::{AppendOptions, Compaction, MessageQuery, MessageState, NewMessage, NewSession};

use crate::support::{cli_at, env, json_lines, seqs};

const CLI_WRITERS: usize = 8;
const TASK_WRITERS: usize = 4;
const APPENDS_EACH: usize = 25;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_in_many_processes_get_gapless_seqs() {
    let t = env().await;
    let sid = t
        .store
        .create_session(&NewSession::new().id("shared"))
        .await
        .unwrap();

    let tasks: Vec<_> = (0..TASK_WRITERS)
        .map(|w| {
            let store = t.store.clone();
            let sid = sid.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                for i in 0..APPENDS_EACH {
                    let m = NewMessage::new("assistant").content(format!("task-{w}-{i}"));
                    got.push(store.append(&sid, &m).await.unwrap());
                }
                got
            })
        })
        .collect();

    let url = t.server.url();
    let dir = t.server.dir().to_path_buf();
    let mut printed: Vec<u64> = tokio::task::block_in_place(|| {
        std::thread::scope(|scope| {
            let writers: Vec<_> = (0..CLI_WRITERS)
                .map(|w| {
                    let (url, dir) = (&url, &dir);
                    scope.spawn(move || {
                        (0..APPENDS_EACH)
                            .map(|i| {
                                let content = format!("cli-{w}-{i}");
                                let args = ["msg", "append", "shared", "--role", "user"];
                                let out = cli_at(
                                    url,
                                    dir,
                                    &[&args[..], &["--content", &content]].concat(),
                                );
                                assert_eq!(out.code, 0, "{out:?}");
                                out.stdout.trim().parse::<u64>().unwrap()
                            })
                            .collect::<Vec<u64>>()
                    })
                })
                .collect();
            writers
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        })
    });
    for task in tasks {
        printed.extend(task.await.unwrap());
    }

    let n = ((CLI_WRITERS + TASK_WRITERS) * APPENDS_EACH) as u64;
    printed.sort_unstable();
    assert_eq!(printed, (1..=n).collect::<Vec<u64>>(), "seqs not 1..=N");

    let mut expected_contents: BTreeSet<String> = BTreeSet::new();
    for w in 0..CLI_WRITERS {
        expected_contents.extend((0..APPENDS_EACH).map(|i| format!("cli-{w}-{i}")));
    }
    for w in 0..TASK_WRITERS {
        expected_contents.extend((0..APPENDS_EACH).map(|i| format!("task-{w}-{i}")));
    }

    let listed = json_lines(&t.cli_ok(&["msg", "list", "shared", "--all"]));
    let listed_seqs: Vec<u64> = listed.iter().map(|m| m["seq"].as_u64().unwrap()).collect();
    assert_eq!(listed_seqs, (1..=n).collect::<Vec<u64>>());
    let listed_contents: Vec<String> = listed
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        listed_contents.iter().cloned().collect::<BTreeSet<_>>(),
        expected_contents
    );
    assert_eq!(
        listed_contents.len(),
        expected_contents.len(),
        "a content twice"
    );

    // Each writer's own appends keep their order.
    for w in 0..CLI_WRITERS {
        let own: Vec<String> = listed_contents
            .iter()
            .filter(|c| c.starts_with(&format!("cli-{w}-")))
            .cloned()
            .collect();
        let in_order: Vec<String> = (0..APPENDS_EACH).map(|i| format!("cli-{w}-{i}")).collect();
        assert_eq!(own, in_order);
    }

    let lib = t.store.messages(&sid, MessageQuery::all()).await.unwrap();
    assert_eq!(seqs(&lib), (1..=n).collect::<Vec<u64>>());
    assert_eq!(t.store.require_session(&sid).await.unwrap().next_seq, n + 1);
    assert_eq!(t.wal_ops("msg").len() as u64, n);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_retries_with_one_idempotency_key_write_one_message() {
    let t = env().await;
    t.store
        .create_session(&NewSession::new().id("retry"))
        .await
        .unwrap();
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let store = t.store.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                for k in 0..10 {
                    let m = NewMessage::new("user").content(format!("req-{k} by {w}"));
                    let key = AppendOptions::new().idempotency_key(format!("req-{k}"));
                    got.push((k, store.append_with("retry", &m, &key).await.unwrap()));
                }
                got
            })
        })
        .collect();
    let mut by_key: std::collections::BTreeMap<u64, BTreeSet<u64>> = Default::default();
    for w in writers {
        for (k, seq) in w.await.unwrap() {
            by_key.entry(k).or_default().insert(seq);
        }
    }
    assert!(by_key.values().all(|seqs| seqs.len() == 1), "{by_key:?}");
    let all = t
        .store
        .messages("retry", MessageQuery::all())
        .await
        .unwrap();
    assert_eq!(seqs(&all), (1..=10).collect::<Vec<u64>>());
    for m in &all {
        let k: u64 = m.content.as_deref().unwrap()[4..]
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(by_key[&k], BTreeSet::from([m.seq]));
    }
    assert_eq!(t.wal_ops("msg").len(), 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_writers_expecting_the_same_seq_exactly_one_wins() {
    let t = env().await;
    t.store
        .create_session(&NewSession::new().id("race"))
        .await
        .unwrap();
    for round in 1..=5u64 {
        let writers: Vec<_> = (0..6)
            .map(|w| {
                let store = t.store.clone();
                tokio::spawn(async move {
                    let m = NewMessage::new("assistant").content(format!("{round}/{w}"));
                    let expect = AppendOptions::new().expect_seq(round);
                    store.append_with("race", &m, &expect).await
                })
            })
            .collect();
        let mut wins = 0;
        for w in writers {
            match w.await.unwrap() {
                Ok(seq) => {
                    assert_eq!(seq, round);
                    wins += 1;
                }
                Err(agentstate::Error::Conflict { expected, current }) => {
                    assert_eq!((expected, current), (round, round + 1));
                }
                Err(other) => panic!("{other:?}"),
            }
        }
        assert_eq!(wins, 1, "round {round}");
    }
    let all = t.store.messages("race", MessageQuery::all()).await.unwrap();
    assert_eq!(seqs(&all), [1, 2, 3, 4, 5]);
}

/// Compactions race appends on one session: each compaction is one atomic step (its note
/// takes the next seq between two appends), so seqs stay gapless, every compacted range is
/// compacted out and nothing else is, the audit names each note, and SQLite ends up with
/// exactly what Redis holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compactions_racing_appends_keep_seqs_gapless_and_the_audit_exact() {
    let t = env().await;
    let sid = t
        .store
        .create_session(&NewSession::new().id("racing"))
        .await
        .unwrap();
    const APPENDS: usize = 150;
    // The appenders hold their second half until a compaction has landed, so compactions
    // run while appends still come (however the machine schedules the tasks).
    let (compacted_once, gate) = tokio::sync::watch::channel(false);
    let appenders: Vec<_> = (0..2)
        .map(|w| {
            let store = t.store.clone();
            let mut gate = gate.clone();
            tokio::spawn(async move {
                for i in 0..APPENDS {
                    if i == APPENDS / 2 {
                        gate.wait_for(|done| *done).await.unwrap();
                    }
                    let m = NewMessage::new("user").content(format!("w{w}-{i}"));
                    store.append("racing", &m).await.unwrap();
                }
            })
        })
        .collect();
    // Meanwhile: compact the next five user messages as soon as they exist, again and again.
    let mut ranges = Vec::new();
    let mut from = 1;
    while appenders.iter().any(|a| !a.is_finished()) || ranges.len() < 5 {
        let all = t.store.messages(&sid, MessageQuery::all()).await.unwrap();
        let users: Vec<u64> = all
            .iter()
            .filter(|m| m.role == "user" && m.seq >= from)
            .map(|m| m.seq)
            .take(5)
            .collect();
        if users.len() < 5 {
            tokio::task::yield_now().await;
            continue;
        }
        let (lo, hi) = (users[0], users[4]);
        let (compact_seq, note_seq) = t
            .store
            .compact(&sid, &Compaction::new(lo, hi, format!("sum {lo}-{hi}")))
            .await
            .unwrap();
        assert_eq!(compact_seq as usize, ranges.len() + 1);
        ranges.push((lo, hi, note_seq));
        compacted_once.send_replace(true);
        from = hi + 1;
    }
    for a in appenders {
        a.await.unwrap();
    }
    let all = t.store.messages(&sid, MessageQuery::all()).await.unwrap();
    let total = 2 * APPENDS + ranges.len();
    assert!(
        all.iter().any(|m| m.role == "user" && m.seq > ranges[0].2),
        "appends came after the first compaction"
    );
    assert_eq!(seqs(&all), (1..=total as u64).collect::<Vec<_>>());
    let compacted = |seq: u64| ranges.iter().any(|(lo, hi, _)| (*lo..=*hi).contains(&seq));
    for m in &all {
        let expected = if compacted(m.seq) {
            MessageState::CompactedOut
        } else {
            MessageState::Active
        };
        assert_eq!(m.state, expected, "seq {}", m.seq);
    }
    let notes: Vec<u64> = all
        .iter()
        .filter(|m| m.name.as_deref() == Some("compact_note"))
        .map(|m| m.seq)
        .collect();
    let audit = t.store.compactions(&sid).await.unwrap();
    assert_eq!(
        audit
            .iter()
            .map(|c| (c.from_seq, c.to_seq, c.note_seq))
            .collect::<Vec<_>>(),
        ranges
    );
    assert_eq!(notes, ranges.iter().map(|r| r.2).collect::<Vec<_>>());
    // The durable copy is the same history.
    t.flush().await;
    let durable = crate::support::sqlite_messages(&t.db(), &sid);
    assert_eq!(durable.len(), total);
    // Element for element what Redis holds (neither rewrites a compacted one: a state is
    // the compactions' ranges, whose rows came through the same wal).
    let live: Vec<String> = t.cmd(&["LRANGE", &t.store.keys().session(&sid).msgs, "0", "-1"]);
    for ((seq, element), m) in durable.iter().zip(&all) {
        assert_eq!(*seq as u64, m.seq);
        assert_eq!(element, &live[m.seq as usize - 1], "seq {seq}");
    }
}
