//! Messages: exact active views after overlapping, adjacent and nested compactions; the
//! compaction audit; stale writers and idempotent retries.

use agentstate::*;
use serde_json::json;

use crate::support::{env, seqs, seqs_in, TestEnv};

/// A session `s` with `n` user messages `m1..mn`.
async fn session_with_messages(t: &TestEnv, n: u64) -> String {
    let sid = t
        .store
        .create_session(&NewSession::new().id("s"))
        .await
        .unwrap();
    for i in 1..=n {
        let m = NewMessage::new("user").content(format!("m{i}"));
        assert_eq!(t.store.append(&sid, &m).await.unwrap(), i);
    }
    sid
}

async fn active(t: &TestEnv, q: MessageQuery) -> Vec<u64> {
    seqs(&t.store.messages("s", q).await.unwrap())
}

#[tokio::test]
async fn compactions_leave_exactly_the_right_active_view() {
    let t = env().await;
    let s = &t.store;
    let sid = session_with_messages(&t, 10).await;
    let compact = |from, to, note: &str, round| {
        let c = Compaction::new(from, to, note)
            .tokens(100 * from as i64, to as i64)
            .round_index(round);
        async move { s.compact("s", &c).await.unwrap() }
    };

    // Middle range, then a single seq further on.
    assert_eq!(compact(3, 4, "n1", 1).await, (1, 11));
    assert_eq!(
        active(&t, MessageQuery::active()).await,
        [1, 2, 5, 6, 7, 8, 9, 10, 11]
    );
    assert_eq!(compact(6, 6, "n2", 2).await, (2, 12));
    assert_eq!(
        active(&t, MessageQuery::active()).await,
        [1, 2, 5, 7, 8, 9, 10, 11, 12]
    );
    // Overlapping an earlier range and adjacent to another: they merge into 3..=7.
    assert_eq!(compact(5, 7, "n3", 3).await, (3, 13));
    assert_eq!(
        active(&t, MessageQuery::active()).await,
        [1, 2, 8, 9, 10, 11, 12, 13]
    );
    // A range holding two earlier notes.
    assert_eq!(compact(10, 12, "n4", 4).await, (4, 14));
    assert_eq!(
        active(&t, MessageQuery::active()).await,
        [1, 2, 8, 9, 13, 14]
    );
    // The prefix, adjacent to 3..=7.
    assert_eq!(compact(1, 2, "n5", 5).await, (5, 15));

    assert_eq!(active(&t, MessageQuery::active()).await, [8, 9, 13, 14, 15]);
    assert_eq!(
        active(&t, MessageQuery::active().after(8)).await,
        [9, 13, 14, 15]
    );
    assert_eq!(
        active(&t, MessageQuery::active().after(9)).await,
        [13, 14, 15]
    );
    assert_eq!(
        active(&t, MessageQuery::active().after(15)).await,
        Vec::<u64>::new()
    );
    assert_eq!(
        active(&t, MessageQuery::active().last(3)).await,
        [13, 14, 15]
    );
    assert_eq!(
        active(&t, MessageQuery::active().last(4)).await,
        [9, 13, 14, 15]
    );
    assert_eq!(
        active(&t, MessageQuery::active().last(50)).await,
        [8, 9, 13, 14, 15]
    );
    assert_eq!(
        active(&t, MessageQuery::active().after(1).last(2)).await,
        [14, 15]
    );
    assert_eq!(
        active(&t, MessageQuery::all().after(12)).await,
        [13, 14, 15]
    );
    assert_eq!(active(&t, MessageQuery::all().last(2)).await, [14, 15]);

    let all = s.messages(&sid, MessageQuery::all()).await.unwrap();
    assert_eq!(seqs(&all), (1..=15).collect::<Vec<u64>>());
    assert_eq!(
        seqs_in(&all, MessageState::CompactedOut),
        [1, 2, 3, 4, 5, 6, 7, 10, 11, 12]
    );
    assert_eq!(seqs_in(&all, MessageState::Active), [8, 9, 13, 14, 15]);
    for m in &all[..10] {
        assert_eq!(m.role, "user");
        assert_eq!(m.content.as_deref(), Some(format!("m{}", m.seq).as_str()));
    }
    let ranges = [(3, 4), (6, 6), (5, 7), (10, 12), (1, 2)];
    for (i, m) in all[10..].iter().enumerate() {
        let (from, to) = ranges[i];
        assert_eq!(m.role, "system");
        assert_eq!(m.name.as_deref(), Some("compact_note"));
        assert_eq!(m.content.as_deref(), Some(format!("n{}", i + 1).as_str()));
        assert_eq!(m.round_index, Some(i as i64 + 1));
        assert_eq!(m.meta.as_ref().unwrap()["from_seq"], json!(from));
        assert_eq!(m.meta.as_ref().unwrap()["to_seq"], json!(to));
    }
    assert_eq!(s.message(&sid, 11).await.unwrap().unwrap(), all[10]);
    assert_eq!(s.message(&sid, 16).await.unwrap(), None);
    assert_eq!(s.message(&sid, 0).await.unwrap(), None);

    let audit = s.compactions(&sid).await.unwrap();
    let got: Vec<_> = audit
        .iter()
        .map(|r| {
            (
                r.compact_seq,
                r.note_seq,
                r.from_seq,
                r.to_seq,
                r.before_tokens,
                r.after_tokens,
                r.round_index,
            )
        })
        .collect();
    let want: Vec<_> = ranges
        .iter()
        .enumerate()
        .map(|(i, &(from, to))| {
            let i = i as u64;
            (
                i + 1,
                11 + i,
                from,
                to,
                Some(100 * from as i64),
                Some(to as i64),
                Some(i as i64 + 1),
            )
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(t.wal_ops("compact").len(), 5);
    // The note reaches the wal as a `msg` just before its `compact` record.
    let wal = t.wal_records();
    let (note_op, _, note) = &wal[wal.len() - 2];
    assert_eq!(note_op, "msg");
    // The element holds neither seq nor state: its reader gives them.
    let mut logged: Message = serde_json::from_str(note).unwrap();
    assert!(!note.contains("\"seq\"") && logged.seq == 0, "{note}");
    logged.seq = all[14].seq;
    assert_eq!(logged, all[14]);
    assert_eq!(wal[wal.len() - 1].0, "compact");
    let meta = s.require_session(&sid).await.unwrap();
    assert_eq!((meta.next_seq, meta.last_compact_seq), (16, 5));
}

#[tokio::test]
async fn last_zero_returns_no_messages() {
    let t = env().await;
    session_with_messages(&t, 3).await;
    assert_eq!(
        active(&t, MessageQuery::active().last(0)).await,
        Vec::<u64>::new()
    );
    assert_eq!(
        active(&t, MessageQuery::all().last(0)).await,
        Vec::<u64>::new()
    );
}

#[tokio::test]
async fn a_message_with_neither_content_nor_tool_calls_is_refused_everywhere_and_writes_nothing() {
    let t = env().await;
    let s = &t.store;
    session_with_messages(&t, 1).await;
    let bare = NewMessage::new("user");
    let ok = NewMessage::new("user").content("ok");
    let refusals = [
        t.rejected(s.append("s", &bare)).await,
        t.rejected(s.append_many("s", &[ok.clone(), bare.clone()], None))
            .await,
        t.rejected(s.append_checkpointed("s", &bare, None, "l", &json!({})))
            .await,
        t.rejected(s.replace_message("s", 1, &bare)).await,
        t.rejected(s.inbox_put("s", &[("i1", &bare)])).await,
    ];
    for err in refusals {
        assert!(
            matches!(&err, Error::InvalidInput(m) if m.contains("needs content or tool_calls")),
            "{err:?}"
        );
    }
    // Empty content is content, and tool calls alone are a message.
    assert_eq!(
        s.append("s", &NewMessage::new("user").content(""))
            .await
            .unwrap(),
        2
    );
    let call = NewMessage::new("assistant").tool_calls(json!([{"id": "c1"}]));
    assert_eq!(s.append("s", &call).await.unwrap(), 3);
}

#[tokio::test]
async fn a_stale_expected_seq_conflicts_and_appends_nothing() {
    let t = env().await;
    let sid = session_with_messages(&t, 2).await;
    let m = NewMessage::new("assistant").content("late");
    let err = t
        .rejected(
            t.store
                .append_with(&sid, &m, &AppendOptions::new().expect_seq(2)),
        )
        .await;
    assert!(
        matches!(
            err,
            Error::Conflict {
                expected: 2,
                current: 3
            }
        ),
        "{err:?}"
    );
    let ahead = AppendOptions::new().expect_seq(9);
    let err = t.rejected(t.store.append_with(&sid, &m, &ahead)).await;
    assert!(
        matches!(
            err,
            Error::Conflict {
                expected: 9,
                current: 3
            }
        ),
        "{err:?}"
    );
    let fresh = AppendOptions::new().expect_seq(3);
    assert_eq!(t.store.append_with(&sid, &m, &fresh).await.unwrap(), 3);
}

#[tokio::test]
async fn a_repeated_idempotency_key_returns_the_original_seq_and_writes_once() {
    let t = env().await;
    let sid = session_with_messages(&t, 1).await;
    let key = AppendOptions::new().idempotency_key("req-7");
    let m = NewMessage::new("user").content("once");
    assert_eq!(t.store.append_with(&sid, &m, &key).await.unwrap(), 2);
    t.store
        .append(&sid, &NewMessage::new("user").content("between"))
        .await
        .unwrap();
    let before = t.snapshot();
    assert_eq!(t.store.append_with(&sid, &m, &key).await.unwrap(), 2);
    // Even a retry with a different body gets the original seq.
    let other = NewMessage::new("user").content("changed");
    assert_eq!(t.store.append_with(&sid, &other, &key).await.unwrap(), 2);
    assert_eq!(t.snapshot(), before);

    let all = t.store.messages(&sid, MessageQuery::all()).await.unwrap();
    let once: Vec<_> = all
        .iter()
        .filter(|m| m.content.as_deref() == Some("once"))
        .collect();
    assert_eq!(once.len(), 1);
    assert_eq!(seqs(&all), [1, 2, 3]);
    let keyed: Vec<_> = t
        .wal_records()
        .into_iter()
        .filter(|(op, _, d)| op == "msg" && d.contains("\"once\""))
        .collect();
    assert_eq!(keyed.len(), 1);
    assert_eq!(
        t.cmd::<String>(&["HGET", &t.store.keys().session(&sid).idem, "req-7"]),
        "2"
    );
}

#[tokio::test]
async fn a_repeated_batch_key_returns_the_original_seqs_and_writes_once() {
    // The adapters' retry: an append_many whose reply was lost is repeated with its key.
    let t = env().await;
    let sid = session_with_messages(&t, 1).await;
    let batch = [
        NewMessage::new("user").content("a"),
        NewMessage::new("assistant").content("b"),
    ];
    let key = AppendOptions::new().idempotency_key("turn-1");
    let s = &t.store;
    assert_eq!(
        s.append_many_with(&sid, &batch, &key).await.unwrap(),
        [2, 3]
    );
    let before = t.snapshot();
    assert_eq!(
        s.append_many_with(&sid, &batch, &key).await.unwrap(),
        [2, 3]
    );
    // A repeat wins over a stale expect_seq, as for one append.
    let stale = key.clone().expect_seq(9);
    assert_eq!(
        s.append_many_with(&sid, &batch, &stale).await.unwrap(),
        [2, 3]
    );
    assert_eq!(t.snapshot(), before);
    // The key sits on the batch's first message (and its wal record), so a pop of that
    // message forgets it and a repeat appends again.
    let idem = &t.store.keys().session(&sid).idem;
    assert_eq!(t.cmd::<String>(&["HGET", idem, "turn-1"]), "2");
    let keyed = t
        .wal_records()
        .into_iter()
        .filter(|(op, _, d)| op == "msg" && d.contains("\"a\""));
    assert_eq!(keyed.count(), 1);
    s.pop_message(&sid).await.unwrap();
    s.pop_message(&sid).await.unwrap();
    assert_eq!(
        s.append_many_with(&sid, &batch, &key).await.unwrap(),
        [2, 3]
    );
    assert_eq!(
        seqs(&s.messages(&sid, MessageQuery::all()).await.unwrap()),
        [1, 2, 3]
    );
}

#[tokio::test]
async fn pending_tool_calls_and_usage_round_trip() {
    let t = env().await;
    let sid = session_with_messages(&t, 0).await;
    let s = &t.store;
    assert_eq!(s.pending(&sid).await.unwrap(), None);
    let calls = json!([{"id": "call_1", "name": "search"}]);
    s.set_pending(&sid, Some(&calls)).await.unwrap();
    assert_eq!(s.pending(&sid).await.unwrap(), Some(calls));
    s.set_pending(&sid, None).await.unwrap();
    assert_eq!(s.pending(&sid).await.unwrap(), None);

    s.record_usage(&sid, &Usage::new(1, 10, 5).model("m1"))
        .await
        .unwrap();
    s.record_usage(&sid, &Usage::new(2, 7, 3).total(11))
        .await
        .unwrap();
    s.record_usage(&sid, &Usage::new(1, 20, 6)).await.unwrap();
    let usage = s.usage(&sid).await.unwrap();
    let got: Vec<_> = usage
        .iter()
        .map(|u| {
            (
                u.round_index,
                u.prompt_tokens,
                u.completion_tokens,
                u.total_tokens,
                u.model.clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (1, Some(20), Some(6), Some(26), None),
            (2, Some(7), Some(3), Some(11), None)
        ]
    );
    assert!(usage.iter().all(|u| u.created_at.unwrap() > 0));
    assert_eq!(t.wal_ops("usage").len(), 3);
}

/// A reference model of one session's message states: `true` = active.
#[derive(Default)]
struct Model {
    active: Vec<bool>,
}

impl Model {
    fn query(&self, q: MessageQuery) -> Vec<u64> {
        let mut out: Vec<u64> = (1..=self.active.len() as u64)
            .filter(|&s| s > q.after.unwrap_or(0))
            .filter(|&s| q.all || self.active[s as usize - 1])
            .collect();
        if let Some(n) = q.last {
            out.drain(..out.len().saturating_sub(n));
        }
        out
    }
}

#[tokio::test]
async fn random_compactions_and_queries_agree_with_a_reference_model() {
    let t = env().await;
    let s = &t.store;
    session_with_messages(&t, 0).await;
    let mut model = Model::default();
    let mut rng: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |bound: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % bound
    };
    for step in 0..120 {
        let n = model.active.len() as u64;
        if n < 3 || next(3) > 0 {
            s.append("s", &NewMessage::new("user").content("m"))
                .await
                .unwrap();
            model.active.push(true);
        } else {
            let from = 1 + next(n);
            let to = from + next(n - from + 1);
            let (_, note) = s
                .compact("s", &Compaction::new(from, to, "n"))
                .await
                .unwrap();
            assert_eq!(note, n + 1);
            for seq in from..=to {
                model.active[seq as usize - 1] = false;
            }
            model.active.push(true);
        }
        let n = model.active.len() as u64;
        let mut queries = vec![MessageQuery::active(), MessageQuery::all()];
        for _ in 0..3 {
            let mut q = if next(2) == 0 {
                MessageQuery::active()
            } else {
                MessageQuery::all()
            };
            if next(2) == 0 {
                q = q.after(next(n + 2));
            }
            if next(2) == 0 {
                q = q.last(next(n + 2) as usize);
            }
            queries.push(q);
        }
        for q in queries {
            let messages = s.messages("s", q).await.unwrap();
            assert_eq!(seqs(&messages), model.query(q), "step {step}, {q:?}");
            // `contents` reads the same elements for their contents alone (notes have one,
            // the appended messages none).
            let contents: Vec<_> = messages.into_iter().map(|m| m.content).collect();
            assert_eq!(
                s.contents("s", q).await.unwrap(),
                contents,
                "step {step}, {q:?}"
            );
        }
    }
    let all = s.messages("s", MessageQuery::all()).await.unwrap();
    let states: Vec<bool> = all
        .iter()
        .map(|m| m.state == MessageState::Active)
        .collect();
    assert_eq!(states, model.active);
}
