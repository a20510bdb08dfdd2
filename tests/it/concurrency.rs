//! Seqs stay unique and gapless under concurrent writers in several OS processes (the real
//! CLI binary) and in-process tokio tasks, all appending to one session at once.

use std::collections::BTreeSet;

use agentstate::{AppendOptions, MessageQuery, NewMessage, NewSession};

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
