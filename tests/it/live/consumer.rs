//! Decision consumers: consumer groups across partitions, ack, claim after a crash (a real
//! SIGKILLed `agentstate tail` process), dead letters, blocking reads, `tail` (rejoining after
//! Redis lost the streams is in `loss::consumers`).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use agentstate::*;
use serde_json::Value;

use crate::support::{env, json_lines, record_decisions, sessions, wait_until, HANG};

/// Options for fast tests: short idle and block times.
pub(crate) fn fast() -> ConsumerOptions {
    ConsumerOptions::new()
        .min_idle(Duration::from_millis(200))
        .block(Duration::from_millis(100))
}

/// The decision ids of deliveries that carry decisions.
pub(crate) fn decision_ids(ds: &[Delivery]) -> Vec<String> {
    ds.iter()
        .filter_map(|d| match &d.event {
            DecisionEvent::Decision(dec) => Some(dec.id.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn consumer_gets_typed_decisions_and_outcomes_and_acks_them() {
    let t = env().await;
    let s = &t.store;
    let sid = sessions(s, 1).await.remove(0);
    let mut c = s.consumer("svc", "c1", fast()).await.unwrap();
    let d = NewDecision::new("ship", "tests pass")
        .action("deploy")
        .meta(serde_json::json!({"risk": "low"}));
    let id = s.record_decision(&sid, &d).await.unwrap();
    assert!(s.record_outcome(&id, "deployed").await.unwrap());

    let got = c.read().await.unwrap();
    assert_eq!(got.len(), 2);
    let p = DecisionId::parse(&id, 16).unwrap();
    assert_eq!(got[0].partition, p.partition);
    assert_eq!(got[0].entry_id, p.entry);
    assert_eq!(got[0].deliveries, 1);
    match &got[0].event {
        DecisionEvent::Decision(dec) => {
            assert_eq!(dec.id, id);
            assert_eq!(dec.session_id, sid);
            assert_eq!(dec.decision, "ship");
            assert_eq!(dec.rationale, "tests pass");
            assert_eq!(dec.planned_action.as_deref(), Some("deploy"));
            assert_eq!(dec.meta, serde_json::json!({"risk": "low"}));
            assert_eq!(dec.outcome, None);
        }
        other => panic!("expected a decision, got {other:?}"),
    }
    match &got[1].event {
        DecisionEvent::Outcome(o) => {
            assert_eq!(o.decision_id, id);
            assert_eq!(o.session_id, sid);
            assert_eq!(o.outcome, "deployed");
        }
        other => panic!("expected an outcome, got {other:?}"),
    }
    let json = serde_json::to_value(&got[0]).unwrap();
    assert_eq!(json["type"], "decision");
    assert_eq!(json["id"], id.as_str());
    assert_eq!(json["outcome"], Value::Null);

    assert_eq!(t.pending("svc"), 2);
    assert_eq!(c.ack(&got).await.unwrap(), 2);
    assert_eq!(
        c.ack(&got).await.unwrap(),
        0,
        "a second ack finds nothing pending"
    );
    assert_eq!(t.pending("svc"), 0);
    assert!(c.read().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_group_created_later_starts_from_what_is_retained_or_from_now() {
    let t = env().await;
    let s = &t.store;
    let sids = sessions(s, 5).await;
    let ids = record_decisions(s, &sids, 40).await;

    let mut late = s
        .consumer("late", "c", fast().start(StartFrom::Beginning))
        .await
        .unwrap();
    let got = late.read().await.unwrap();
    let want: BTreeSet<String> = ids.iter().cloned().collect();
    assert_eq!(
        decision_ids(&got).into_iter().collect::<BTreeSet<_>>(),
        want
    );
    assert_eq!(got.len(), 40);

    let mut fresh = s.consumer("fresh", "c", fast()).await.unwrap();
    assert!(fresh.read().await.unwrap().is_empty());
    let next = record_decisions(s, &sids, 1).await;
    assert_eq!(decision_ids(&fresh.read().await.unwrap()), next);
}

#[tokio::test]
async fn a_blocked_consumer_receives_a_decision_recorded_afterwards() {
    let t = env().await;
    let s = t.store.clone();
    let sid = sessions(&s, 1).await.remove(0);
    let mut c = s
        .consumer("svc", "c1", fast().block(Duration::from_secs(5)))
        .await
        .unwrap();
    c.read().await.unwrap(); // first read: nothing yet (and the initial claim check)
    let reader = tokio::spawn(async move { c.read().await.unwrap() });
    // The read is blocked in Redis (XREADGROUP ... BLOCK) before the decision exists.
    let blocked = || {
        let info: String = t.cmd(&["INFO", "clients"]);
        info.lines().any(|l| l.trim() == "blocked_clients:1")
    };
    wait_until("the consumer's read blocks in Redis", HANG, blocked).await;
    assert!(!reader.is_finished());
    // The store's pool is not stalled by the blocked read.
    let id = s
        .record_decision(&sid, &NewDecision::new("late", "r"))
        .await
        .unwrap();
    assert_eq!(decision_ids(&reader.await.unwrap()), vec![id]);
}

#[tokio::test]
async fn two_consumers_share_a_group_without_duplicates_or_loss() {
    const N: usize = 3000;
    let t = env().await;
    let s = t.store.clone();
    let sids = sessions(&s, 32).await;
    let mut workers = Vec::new();
    for name in ["a", "b"] {
        let mut c = s.consumer("svc", name, fast()).await.unwrap();
        workers.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut idle_reads = 0;
            while idle_reads < 5 {
                let got = c.read().await.unwrap();
                if got.is_empty() {
                    idle_reads += 1;
                    continue;
                }
                idle_reads = 0;
                c.ack(&got).await.unwrap();
                seen.extend(decision_ids(&got));
            }
            seen
        }));
    }
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (s, sids) = (s.clone(), sids.clone());
            tokio::spawn(async move {
                let mine: Vec<String> = sids.into_iter().skip(w).step_by(4).collect();
                record_decisions(&s, &mine, N / 4).await
            })
        })
        .collect();
    let mut recorded = BTreeSet::new();
    for w in writers {
        recorded.extend(w.await.unwrap());
    }
    let mut received = Vec::new();
    let mut per_consumer = Vec::new();
    for w in workers {
        let seen = w.await.unwrap();
        per_consumer.push(seen.len());
        received.extend(seen);
    }
    assert_eq!(recorded.len(), N);
    assert_eq!(received.len(), N, "duplicates or losses: {per_consumer:?}");
    assert_eq!(received.into_iter().collect::<BTreeSet<_>>(), recorded);
    assert!(per_consumer.iter().all(|&n| n > 0), "{per_consumer:?}");
    assert_eq!(t.pending("svc"), 0);
}

#[tokio::test]
async fn entries_of_a_killed_consumer_process_are_claimed_after_min_idle() {
    let t = env().await;
    let s = &t.store;
    let sids = sessions(s, 6).await;
    let ids = record_decisions(s, &sids, 25).await;

    // Another OS process reads everything without acking, then dies by SIGKILL.
    let mut child = t
        .cli_command()
        .args([
            "tail",
            "--group",
            "svc",
            "--consumer",
            "doomed",
            "--from-start",
        ])
        .args(["--no-ack", "--block-ms", "100", "--min-idle-ms", "60000"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut held = BTreeSet::new();
    while held.len() < ids.len() {
        let line = lines.next().unwrap().unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["deliveries"], 1);
        held.insert(v["id"].as_str().unwrap().to_string());
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert_eq!(held, ids.iter().cloned().collect::<BTreeSet<_>>());
    assert_eq!(t.pending("svc"), 25);

    // Not idle long enough for a consumer that claims after an hour: it gets nothing.
    let patient = ConsumerOptions::new()
        .min_idle(Duration::from_secs(3600))
        .block(Duration::from_millis(100));
    let mut patient = s.consumer("svc", "patient", patient).await.unwrap();
    assert_eq!(
        decision_ids(&patient.read().await.unwrap()),
        Vec::<String>::new()
    );
    assert_eq!(t.pending("svc"), 25);
    // One that claims after 200 ms gets them all, each delivered a second time.
    let mut live = s.consumer("svc", "live", fast()).await.unwrap();
    let mut claimed = Vec::new();
    let deadline = Instant::now() + crate::support::HANG;
    while claimed.len() < ids.len() {
        assert!(Instant::now() < deadline, "claimed only {claimed:?}");
        let got = live.read().await.unwrap();
        live.ack(&got).await.unwrap();
        claimed.extend(got);
    }
    assert_eq!(claimed.len(), 25);
    assert!(claimed.iter().all(|d| d.deliveries == 2), "{claimed:?}");
    assert_eq!(
        decision_ids(&claimed).into_iter().collect::<BTreeSet<_>>(),
        held
    );
    assert_eq!(t.pending("svc"), 0);
}

#[tokio::test]
async fn a_poison_entry_lands_in_the_dead_letter_stream_after_max_deliveries() {
    let t = env().await;
    let s = &t.store;
    let sids = sessions(s, 1).await;
    let mut c = s
        .consumer(
            "svc",
            "c1",
            fast()
                .min_idle(Duration::from_millis(100))
                .max_deliveries(3),
        )
        .await
        .unwrap();
    let poison = record_decisions(s, &sids, 1).await.remove(0);
    let mut deliveries = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while s.dead_letters(10).await.unwrap().is_empty() && Instant::now() < deadline {
        // Never acked: the handler "crashes" on it every time.
        deliveries.extend(c.read().await.unwrap().iter().map(|d| d.deliveries));
    }
    assert_eq!(deliveries, vec![1, 2, 3]);
    let dead = s.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    let p = DecisionId::parse(&poison, 16).unwrap();
    assert_eq!(dead[0].partition, p.partition);
    assert_eq!(dead[0].original_id, p.entry);
    assert_eq!(dead[0].group, "svc");
    assert_eq!(dead[0].deliveries, 4);
    assert_eq!(
        dead[0].reason,
        "delivered more than max_deliveries (3) times without ack"
    );
    assert_eq!(dead[0].fields["type"], "decision");
    assert_eq!(dead[0].fields["decision"], "d0");
    assert_eq!(dead[0].fields["session_id"], "s0");
    assert_eq!(t.pending("svc"), 0, "dead-lettering acks the entry");
    assert!(c.read().await.unwrap().is_empty());
    let mut r = t.redis();
    let len: usize = redis::cmd("XLEN")
        .arg(s.keys().dead_letters(p.partition))
        .query(&mut r)
        .unwrap();
    assert_eq!(len, 1);
}

#[tokio::test]
async fn a_malformed_entry_is_dead_lettered_and_not_delivered() {
    let t = env().await;
    let s = &t.store;
    let mut c = s.consumer("svc", "c1", fast()).await.unwrap();
    let mut r = t.redis();
    let entry: String = redis::cmd("XADD")
        .arg(s.keys().decisions(3))
        .arg("*")
        .arg("type")
        .arg("bogus")
        .arg("created_at")
        .arg("1")
        .query(&mut r)
        .unwrap();
    assert!(c.read().await.unwrap().is_empty());
    let dead = s.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(
        (dead[0].partition, dead[0].original_id.as_str()),
        (3, entry.as_str())
    );
    assert!(
        dead[0].reason.starts_with("malformed: "),
        "{}",
        dead[0].reason
    );
    assert_eq!(dead[0].deliveries, 1);
    assert_eq!(t.pending("svc"), 0);
}

#[tokio::test]
async fn tail_prints_json_lines_exits_after_count_and_releases_the_rest() {
    let t = env().await;
    let s = &t.store;
    let sids = sessions(s, 5).await;
    let ids = record_decisions(s, &sids, 5).await;
    let tail = |consumer: &str, count: &str| {
        json_lines(&t.cli_ok(&[
            "tail",
            "--group",
            "g",
            "--consumer",
            consumer,
            "--count",
            count,
            "--from-start",
            "--block-ms",
            "200",
        ]))
    };
    let first = tail("c1", "3");
    assert_eq!(first.len(), 3);
    for v in &first {
        assert_eq!(v["type"], "decision");
        assert_eq!(v["rationale"], "because");
        assert_eq!(v["deliveries"], 1);
        assert!(v["created_at"].as_i64().unwrap() > 0);
    }
    // The second tail gets the two entries left, first delivery.
    let second = tail("c2", "10");
    assert_eq!(second.len(), 2);
    assert!(second.iter().all(|v| v["deliveries"] == 1), "{second:?}");
    let all: Vec<String> = first
        .iter()
        .chain(&second)
        .map(|v| v["id"].as_str().unwrap().to_string())
        .collect();
    let unique: BTreeSet<&String> = all.iter().collect();
    assert_eq!(unique.len(), 5);
    assert_eq!(unique, ids.iter().collect());
    assert_eq!(t.pending("g"), 0);

    // A block that times out with nothing new ends `tail --count`.
    assert!(tail("c3", "1").is_empty());
}

#[tokio::test]
async fn consumer_ids_are_validated_before_redis_is_touched() {
    let t = env().await;
    let err = t
        .store
        .consumer("bad group", "c", fast())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidId {
                what: "consumer group",
                ..
            }
        ),
        "{err}"
    );
    let err = t
        .store
        .consumer("g", "c", fast().max_deliveries(0))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err}");
    assert!(!t.all_keys().iter().any(|k| k.contains("decisions")));
}

#[tokio::test]
async fn a_busy_partition_does_not_starve_the_others() {
    let t = env().await;
    let s = &t.store;
    let sids = sessions(s, 2).await;
    assert_ne!(s.keys().partition(&sids[0]), s.keys().partition(&sids[1]));
    let mut c = s
        .consumer("svc", "c1", fast().start(StartFrom::Beginning).count(10))
        .await
        .unwrap();
    let busy = record_decisions(s, &sids[..1], 200).await;
    let quiet = record_decisions(s, &sids[1..], 1).await;
    let got = decision_ids(&c.read().await.unwrap());
    assert_eq!(got.len(), 11, "10 per partition per read");
    assert!(got.contains(&quiet[0]), "{got:?}");
    assert!(got.iter().filter(|id| busy.contains(id)).count() == 10);
}

/// Two `tail --count 20` of one group over 40 decisions (spread over the partitions) share
/// the work: each prints exactly 20, none takes more than it prints, together they print
/// all 40 once. (Before: COUNT applied per partition, one took 40 and left 20 pending on
/// itself, and the other exited with nothing in about half the runs.)
#[tokio::test]
async fn two_bounded_tails_in_one_group_share_the_work() {
    let t = env().await;
    let s = &t.store;
    let sids = sessions(s, 8).await;
    // A bounded tail holds only what it printed: with --no-ack its 20 stay pending on it,
    // and not one more (the other 20 were never delivered).
    s.consumer("peek", "p", fast()).await.unwrap();
    record_decisions(s, &sids, 40).await;
    let out = t.cli_ok(&[
        "tail",
        "--group",
        "peek",
        "--consumer",
        "p",
        "--count",
        "20",
        "--no-ack",
    ]);
    assert_eq!(json_lines(&out).len(), 20);
    assert_eq!(t.pending("peek"), 20);
    for round in 0..3 {
        let group = format!("g{round}");
        // Both consumers join (group from now) before the decisions arrive.
        for c in ["a", "b"] {
            s.consumer(&group, c, fast()).await.unwrap();
        }
        let ids = record_decisions(s, &sids, 40).await;
        let spawn = |consumer: &str| {
            t.cli_command()
                .args(["tail", "--group", &group, "--consumer", consumer])
                .args(["--count", "20", "--block-ms", "500"])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (spawn("a"), spawn("b"));
        let mut printed = Vec::new();
        for child in [a, b] {
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "{out:?}");
            let lines = json_lines(&String::from_utf8(out.stdout).unwrap());
            assert_eq!(lines.len(), 20, "round {round}: each prints its share");
            printed.extend(lines.iter().map(|v| v["id"].as_str().unwrap().to_string()));
        }
        let unique: BTreeSet<&String> = printed.iter().collect();
        assert_eq!(unique, ids.iter().collect(), "round {round}");
        assert_eq!(t.pending(&group), 0, "round {round}: nothing left pending");
    }
}

/// Entries a consumer hands back go to the group at once: the next read of another
/// consumer gets them, long before `min_idle`, uncounted.
#[tokio::test]
async fn released_entries_go_to_the_next_reader_at_once() {
    let t = env().await;
    let s = &t.store;
    let sids = sessions(s, 3).await;
    let slow = ConsumerOptions::new()
        .min_idle(Duration::from_secs(600))
        .block(Duration::from_millis(100))
        .start(StartFrom::Beginning);
    let mut a = s.consumer("svc", "a", slow.clone()).await.unwrap();
    let mut b = s.consumer("svc", "b", slow).await.unwrap();
    let ids = record_decisions(s, &sids, 6).await;
    let taken = a.read_up_to(4).await.unwrap();
    assert_eq!(taken.len(), 4, "a bounded read takes no more than asked");
    assert_eq!(t.pending("svc"), 4);
    a.release(&taken).await.unwrap();
    let mut got = b.read_up_to(10).await.unwrap();
    assert_eq!(
        decision_ids(&got),
        decision_ids(&taken),
        "the handed-back ones first"
    );
    assert!(got.iter().all(|d| d.deliveries == 1), "{got:?}");
    got.extend(b.read_up_to(10).await.unwrap());
    let mut all = decision_ids(&got);
    all.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(all, expected);
    b.ack(&got).await.unwrap();
    assert_eq!(t.pending("svc"), 0);
}
