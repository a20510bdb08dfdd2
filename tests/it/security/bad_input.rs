//! Every kind of rejected input fails with its typed error and writes nothing: the full key
//! set, every key's serialized content and the wal length are identical before and after.

use agentstate::*;
use serde_json::json;

use crate::support::{env, env_with, TestEnv};

const SMALL: Limits = Limits {
    message: 1024,
    working_value: 256,
    state: 512,
};

/// A store with small limits and a populated session `s` of user `u`, so that a stray write
/// anywhere would show in the snapshot.
async fn populated() -> TestEnv {
    let t = env_with(|c| c.limits(SMALL)).await;
    let s = &t.store;
    s.create_session(&NewSession::new().id("s").user("u"))
        .await
        .unwrap();
    s.create_session(&NewSession::new().id("kid").parent("s", Lifecycle::Linked))
        .await
        .unwrap();
    for i in 1..=3 {
        s.append("s", &NewMessage::new("user").content(format!("m{i}")))
            .await
            .unwrap();
    }
    s.set_working("s", "plan", &json!({"step": 1}))
        .await
        .unwrap();
    s.checkpoint("s", "cp", None).await.unwrap();
    s.save_state("u", &json!({"r": 1}), None, None)
        .await
        .unwrap();
    s.set_user_value("u", "tz", &json!("UTC")).await.unwrap();
    s.record_decision("s", &NewDecision::new("d", "r"))
        .await
        .unwrap();
    t
}

fn invalid_id(err: &Error) -> (&'static str, String) {
    match err {
        Error::InvalidId { what, id } => (*what, id.clone()),
        other => panic!("expected InvalidId, got {other:?}"),
    }
}

#[tokio::test]
async fn invalid_ids_in_every_position_write_nothing() {
    let t = populated().await;
    let s = &t.store;
    let m = NewMessage::new("user").content("x");
    let v = json!(1);
    let long = "x".repeat(129);
    for bad in ["", "has space", "a:b", "{0}", "é", long.as_str()] {
        let cases: Vec<(&str, Error)> = vec![
            (
                "session",
                t.rejected(s.create_session(&NewSession::new().id(bad)))
                    .await,
            ),
            (
                "user",
                t.rejected(s.create_session(&NewSession::new().user(bad)))
                    .await,
            ),
            (
                "parent session",
                t.rejected(s.create_session(&NewSession::new().parent(bad, Lifecycle::Linked)))
                    .await,
            ),
            ("session", t.rejected(s.append(bad, &m)).await),
            ("session", t.rejected(s.set_working(bad, "k", &v)).await),
            (
                "working-state key",
                t.rejected(s.set_working("s", bad, &v)).await,
            ),
            (
                "working-state key",
                t.rejected(s.delete_working("s", bad)).await,
            ),
            (
                "working-state key",
                t.rejected(s.get_working("s", bad)).await,
            ),
            ("label", t.rejected(s.checkpoint("s", bad, None)).await),
            (
                "working-state key",
                t.rejected(s.checkpoint("s", "cp2", Some(&[bad]))).await,
            ),
            (
                "idempotency key",
                t.rejected(s.append_with("s", &m, &AppendOptions::new().idempotency_key(bad)))
                    .await,
            ),
            (
                "session",
                t.rejected(s.compact(bad, &Compaction::new(1, 1, "n")))
                    .await,
            ),
            ("session", t.rejected(s.close_session(bad, true)).await),
            (
                "session",
                t.rejected(s.record_decision(bad, &NewDecision::new("d", "r")))
                    .await,
            ),
            ("user", t.rejected(s.save_state(bad, &v, None, None)).await),
            (
                "session",
                t.rejected(s.save_state("u", &v, Some(bad), None)).await,
            ),
            ("user", t.rejected(s.set_user_value(bad, "k", &v)).await),
            (
                "user data key",
                t.rejected(s.set_user_value("u", bad, &v)).await,
            ),
            ("user", t.rejected(s.forget_user(bad)).await),
            ("user", t.rejected(s.list_sessions(Some(bad))).await),
        ];
        for (i, (what, err)) in cases.iter().enumerate() {
            let expected_text: String = bad.chars().take(200).collect();
            assert_eq!(
                invalid_id(err),
                (*what, expected_text),
                "case {i} with {bad:?}"
            );
        }
    }
}

#[tokio::test]
async fn every_session_scoped_write_on_an_unknown_session_writes_nothing() {
    let t = populated().await;
    let s = &t.store;
    let m = NewMessage::new("user").content("x");
    let v = json!(1);
    let errors = vec![
        t.rejected(s.append("ghost", &m)).await,
        t.rejected(s.append_with("ghost", &m, &AppendOptions::new().idempotency_key("k1")))
            .await,
        t.rejected(s.append_with("ghost", &m, &AppendOptions::new().expect_seq(1)))
            .await,
        t.rejected(s.set_working("ghost", "k", &v)).await,
        t.rejected(s.set_working_if_version("ghost", "k", &v, 0))
            .await,
        t.rejected(s.delete_working("ghost", "k")).await,
        t.rejected(s.clear_working("ghost")).await,
        t.rejected(s.checkpoint("ghost", "cp", None)).await,
        t.rejected(s.compact("ghost", &Compaction::new(1, 1, "n")))
            .await,
        t.rejected(s.record_usage("ghost", &Usage::new(1, 1, 1)))
            .await,
        t.rejected(s.record_decision("ghost", &NewDecision::new("d", "r")))
            .await,
        t.rejected(s.touch("ghost")).await,
        t.rejected(s.archive("ghost")).await,
        t.rejected(s.set_pending("ghost", Some(&v))).await,
        t.rejected(s.set_round_index("ghost", 2)).await,
        t.rejected(s.close_session("ghost", true)).await,
        t.rejected(s.close_session("ghost", false)).await,
        t.rejected(s.messages("ghost", MessageQuery::all())).await,
        t.rejected(s.working("ghost")).await,
    ];
    for (i, err) in errors.iter().enumerate() {
        assert!(
            matches!(err, Error::UnknownSession(id) if id == "ghost"),
            "case {i}: {err:?}"
        );
    }
    let orphan = NewSession::new()
        .id("orphan")
        .parent("ghost", Lifecycle::Linked);
    let err = t.rejected(s.create_session(&orphan)).await;
    assert!(
        matches!(err, Error::UnknownSession(ref id) if id == "ghost"),
        "{err:?}"
    );
}

#[tokio::test]
async fn oversized_payloads_are_rejected_with_their_limit() {
    let t = populated().await;
    let s = &t.store;
    let big = |n: usize| "x".repeat(n);

    let err = t
        .rejected(s.append("s", &NewMessage::new("user").content(big(1100))))
        .await;
    assert!(
        matches!(err, Error::TooLarge { what: "message", limit: 1024, size } if size > 1100),
        "{err:?}"
    );
    let err = t
        .rejected(s.compact("s", &Compaction::new(1, 1, big(1100))))
        .await;
    assert!(
        matches!(err, Error::TooLarge { limit: 1024, .. }),
        "{err:?}"
    );
    let err = t.rejected(s.set_working("s", "k", &json!(big(300)))).await;
    assert!(
        matches!(
            err,
            Error::TooLarge {
                what: "working value",
                size: 302,
                limit: 256
            }
        ),
        "{err:?}"
    );
    let err = t
        .rejected(s.save_state("u", &json!({"a": big(600)}), None, None))
        .await;
    assert!(
        matches!(
            err,
            Error::TooLarge {
                what: "state",
                size: 608,
                limit: 512
            }
        ),
        "{err:?}"
    );
    let err = t
        .rejected(s.set_user_value("u", "k", &json!(big(600))))
        .await;
    assert!(
        matches!(
            err,
            Error::TooLarge {
                size: 602,
                limit: 512,
                ..
            }
        ),
        "{err:?}"
    );
    let err = t
        .rejected(s.record_decision("s", &NewDecision::new(big(1100), "r")))
        .await;
    assert!(
        matches!(err, Error::TooLarge { limit: 1024, .. }),
        "{err:?}"
    );

    // A checkpoint payload is only known inside the script: two values under the working
    // limit that together exceed the state limit.
    s.set_working("s", "a", &json!(big(200))).await.unwrap();
    s.set_working("s", "b", &json!(big(200))).await.unwrap();
    s.set_working("s", "c", &json!(big(200))).await.unwrap();
    let err = t.rejected(s.checkpoint("s", "huge", None)).await;
    assert!(matches!(err, Error::TooLarge { limit: 512, .. }), "{err:?}");
}

#[tokio::test]
async fn a_message_over_the_default_one_mib_is_rejected() {
    let t = env().await;
    t.store
        .create_session(&NewSession::new().id("s"))
        .await
        .unwrap();
    let at_limit = NewMessage::new("user").content("x".repeat((1 << 20) - 40));
    let seq = t.store.append("s", &at_limit).await.unwrap();
    assert_eq!(seq, 1);
    let over = NewMessage::new("user").content("x".repeat(1 << 20));
    let err = t.rejected(t.store.append("s", &over)).await;
    assert!(
        matches!(err, Error::TooLarge { what: "message", limit: 1048576, size } if size > 1 << 20),
        "{err:?}"
    );
}

#[tokio::test]
async fn bad_ranges_roles_decision_ids_and_empty_key_lists_write_nothing() {
    let t = populated().await;
    let s = &t.store;
    // next seq is 4
    for (from, to) in [(0, 2), (3, 2), (0, 0), (2, 4), (4, 4), (1, 99)] {
        let err = t
            .rejected(s.compact("s", &Compaction::new(from, to, "n")))
            .await;
        assert!(
            matches!(err, Error::BadRange { from: f, to: tt, .. } if f == from && tt == to),
            "{from}..={to}: {err:?}"
        );
    }
    for role in ["", "User", "as sistant", "tool1", &"a".repeat(33)] {
        let err = t
            .rejected(s.append("s", &NewMessage::new(role).content("x")))
            .await;
        assert!(matches!(err, Error::InvalidInput(_)), "{role:?}: {err:?}");
    }
    for usage in [
        Usage::new(1, -1, 5),
        Usage::new(1, 5, -1),
        Usage::new(1, 1, 1).total(-2),
    ] {
        let err = t.rejected(s.record_usage("s", &usage)).await;
        assert!(matches!(err, Error::InvalidInput(_)), "{usage:?}: {err:?}");
    }
    for id in ["nope", "99:1-0", "16:1-0", "0:abc", "x:1-0", "0:1-0", ""] {
        let err = t.rejected(s.record_outcome(id, "done")).await;
        assert!(matches!(err, Error::InvalidInput(_)), "{id:?}: {err:?}");
    }
    let err = t
        .rejected(s.record_decision("s", &NewDecision::new("d", "r").meta(json!([1]))))
        .await;
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    let err = t.rejected(s.checkpoint("s", "cp", Some(&[]))).await;
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
}

#[tokio::test]
async fn malformed_json_through_the_cli_writes_nothing() {
    let t = populated().await;
    let cases: [&[&str]; 8] = [
        &["work", "set", "s", "k", "{bad"],
        &["session", "create", "--id", "n1", "--metadata", "{x"],
        &[
            "msg",
            "append",
            "s",
            "--role",
            "user",
            "--content",
            "x",
            "--meta",
            "nope",
        ],
        &[
            "msg",
            "append",
            "s",
            "--role",
            "user",
            "--tool-calls",
            "[1,",
        ],
        &["state", "save", "u", "{"],
        &["user", "set", "u", "k", "["],
        &[
            "decide",
            "s",
            "--decision",
            "d",
            "--rationale",
            "r",
            "--meta",
            "{",
        ],
        &["work", "set", "s", "k", ""],
    ];
    for args in cases {
        let line = t.cli_rejected(args);
        assert!(
            line.starts_with("error: malformed JSON in "),
            "{args:?}: {line}"
        );
    }
}

// Reads of plain keys restore a session that is not live first (`Store::ensure_live`), so an
// unknown session is an error for them too. `keys SID` stays an inspection of what Redis holds
// (empty for a closed session), so it is not among them.
#[tokio::test]
async fn reads_of_an_unknown_session_are_errors() {
    let t = env().await;
    let s = &t.store;
    let errors = [
        s.checkpoint_latest("ghost", "cp")
            .await
            .map(drop)
            .unwrap_err(),
        s.checkpoints("ghost").await.map(drop).unwrap_err(),
        s.compactions("ghost").await.map(drop).unwrap_err(),
        s.usage("ghost").await.map(drop).unwrap_err(),
        s.children("ghost").await.map(drop).unwrap_err(),
    ];
    for (i, err) in errors.iter().enumerate() {
        assert!(
            matches!(err, Error::UnknownSession(id) if id == "ghost"),
            "case {i}: {err:?}"
        );
    }
    for args in [
        &["checkpoint", "get", "ghost", "cp"][..],
        &["checkpoint", "list", "ghost"],
    ] {
        t.cli_rejected(args);
    }
}

#[tokio::test]
async fn an_out_of_range_ttl_is_rejected_and_writes_nothing() {
    let t = populated().await;
    let s = &t.store;
    for ttl in [0, agentstate::config::MAX_TTL_SECS + 1, u64::MAX / 2] {
        let new = NewSession::new()
            .id("ttl")
            .ttl(std::time::Duration::from_secs(ttl));
        let err = t.rejected(s.create_session(&new)).await;
        assert!(matches!(err, Error::InvalidInput(_)), "{ttl}: {err:?}");
    }
    let err =
        Store::connect(Config::new(t.server.url()).session_ttl(std::time::Duration::from_secs(0)))
            .await
            .unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    assert_eq!(Usage::new(1, i64::MAX, 1).total_tokens, None);
}
