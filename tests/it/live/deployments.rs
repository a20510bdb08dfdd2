//! The same flows on both deployments, one Redis and a 3-master Redis Cluster: seq
//! allocation under concurrent writers, compaction, CAS, checkpoints, decisions consumed by a
//! group, flush + loss + restore. Each flow is one function over a [`Deployed`]; `on_both!`
//! runs it as `<flow>::single` and `<flow>::cluster` (one suite, not a copy).

use std::collections::BTreeSet;
use std::time::Duration;

use agentstate::*;
use serde_json::json;

use crate::support::*;

on_both!(seqs_stay_gapless_under_concurrent_writers);
on_both!(compaction_cas_and_checkpoints);
on_both!(decisions_are_consumed_by_a_group);

async fn seqs_stay_gapless_under_concurrent_writers(d: Deployed) {
    let sids = d.sessions(4).await;
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let (store, sids) = (d.store.clone(), sids.clone());
            tokio::spawn(async move {
                let mut got = Vec::new();
                for i in 0..25 {
                    let sid = &sids[(w + i) % sids.len()];
                    let m = NewMessage::new("user").content(format!("w{w}-{i}"));
                    got.push((sid.clone(), store.append(sid, &m).await.unwrap()));
                }
                got
            })
        })
        .collect();
    let mut seqs: Vec<(String, u64)> = Vec::new();
    for w in writers {
        seqs.extend(w.await.unwrap());
    }
    for sid in &sids {
        let mine: BTreeSet<u64> = seqs.iter().filter(|(s, _)| s == sid).map(|x| x.1).collect();
        let stored = d.store.messages(sid, MessageQuery::all()).await.unwrap();
        assert_eq!(stored.len(), 50, "{sid}");
        assert_eq!(mine, (1..=50).collect(), "{sid}: every seq once, no gap");
    }
    assert_eq!(d.store.list_sessions(Some("alice")).await.unwrap(), sids);
}

async fn compaction_cas_and_checkpoints(d: Deployed) {
    let s = &d.store;
    let sid = &d.sessions(1).await[0];
    for i in 0..10 {
        s.append(sid, &NewMessage::new("user").content(format!("m{i}")))
            .await
            .unwrap();
    }
    assert_eq!(
        s.compact(sid, &Compaction::new(2, 6, "summary"))
            .await
            .unwrap(),
        (1, 11)
    );
    let active: Vec<u64> = s
        .messages(sid, MessageQuery::active())
        .await
        .unwrap()
        .iter()
        .map(|m| m.seq)
        .collect();
    assert_eq!(active, [1, 7, 8, 9, 10, 11]);
    let v = s
        .set_working(sid, "plan", &json!({"step": 1}))
        .await
        .unwrap();
    let err = s
        .set_working_if_version(sid, "plan", &json!({"step": 2}), v - 1)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Conflict { current, .. } if current == v),
        "{err:?}"
    );
    assert_eq!(
        s.set_working_if_version(sid, "plan", &json!({"step": 2}), v)
            .await
            .unwrap(),
        v + 1
    );
    s.set_working(sid, "scratch", &json!("x")).await.unwrap();
    let id = s
        .checkpoint(sid, "after-plan", Some(&["plan"]))
        .await
        .unwrap();
    let latest = s
        .checkpoint_latest(sid, "after-plan")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (latest.id, latest.payload),
        (id, json!({"plan": {"step": 2}}))
    );
}

async fn decisions_are_consumed_by_a_group(d: Deployed) {
    let s = &d.store;
    let sids = d.sessions(6).await;
    let options = ConsumerOptions::new()
        .start(StartFrom::Beginning)
        .block(Duration::from_millis(200));
    let mut a = s.consumer("svc", "a", options.clone()).await.unwrap();
    let mut b = s.consumer("svc", "b", options).await.unwrap();
    let mut ids = BTreeSet::new();
    for i in 0..30 {
        let decision = NewDecision::new(format!("d{i}"), "because");
        ids.insert(s.record_decision(&sids[i % 6], &decision).await.unwrap());
    }
    let mut seen = Vec::new();
    for _ in 0..20 {
        for c in [&mut a, &mut b] {
            let got = c.read_up_to(4).await.unwrap();
            assert!(got.len() <= 4);
            seen.extend(got.iter().filter_map(|g| match &g.event {
                DecisionEvent::Decision(d) => Some(d.id.clone()),
                _ => None,
            }));
            c.ack(&got).await.unwrap();
        }
        if seen.len() == ids.len() {
            break;
        }
    }
    assert_eq!(seen.len(), ids.len(), "each decision delivered once");
    assert_eq!(seen.into_iter().collect::<BTreeSet<_>>(), ids);
    let first = ids.iter().next().unwrap().clone();
    assert!(s.record_outcome(&first, "done").await.unwrap());
    assert_eq!(s.incomplete_decisions(None).await.unwrap().len(), 29);
}
