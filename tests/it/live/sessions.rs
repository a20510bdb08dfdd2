//! Sessions: sub-agent trees, cascade close (keys, indexes, wal), re-parenting, the spawn
//! depth cap, listing by user (whole or paged).

use std::collections::BTreeSet;

use agentstate::*;

use crate::support::{create, env, TestEnv};

/// Every key in Redis that belongs to session `sid`.
fn keys_of(t: &TestEnv, sid: &str) -> Vec<String> {
    let meta = t.store.keys().session(sid).meta;
    t.all_keys()
        .into_iter()
        .filter(|k| *k == meta || k.starts_with(&format!("{meta}:")))
        .collect()
}

/// The union of every partition's session index.
async fn indexed(t: &TestEnv) -> BTreeSet<String> {
    t.store
        .list_sessions(None)
        .await
        .unwrap()
        .into_iter()
        .collect()
}

/// The keys of one session index: its directory and its buckets.
fn index_keys(t: &TestEnv, index: &str) -> Vec<String> {
    let mut keys: Vec<String> = t.cmd(&["KEYS", &format!("{index}*")]);
    keys.retain(|k| k == index || k.starts_with(&format!("{index}:")));
    keys.sort();
    keys
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn cascade_close_deletes_linked_and_ephemeral_descendants_and_frees_detached_ones() {
    let t = env().await;
    let s = &t.store;
    create(&t, "root", Some("alice"), None).await;
    create(&t, "kid", Some("alice"), Some(("root", Lifecycle::Linked))).await;
    create(
        &t,
        "grandkid",
        Some("bob"),
        Some(("kid", Lifecycle::Linked)),
    )
    .await;
    create(
        &t,
        "loose",
        Some("bob"),
        Some(("grandkid", Lifecycle::Detached)),
    )
    .await;
    create(
        &t,
        "det",
        Some("alice"),
        Some(("root", Lifecycle::Detached)),
    )
    .await;
    create(&t, "eph", None, Some(("root", Lifecycle::Ephemeral))).await;
    create(&t, "other", Some("alice"), None).await;
    for sid in ["root", "kid", "grandkid", "eph"] {
        s.append(sid, &NewMessage::new("user").content("x"))
            .await
            .unwrap();
        s.set_working(sid, "k", &serde_json::json!(1))
            .await
            .unwrap();
    }
    assert_eq!(s.children("root").await.unwrap(), ["det", "eph", "kid"]);
    assert_eq!(s.require_session("grandkid").await.unwrap().spawn_depth, 2);
    assert_eq!(
        s.list_sessions(Some("bob")).await.unwrap(),
        ["grandkid", "loose"]
    );

    assert_eq!(s.close_session("root", true).await.unwrap(), 4);

    for gone in ["root", "kid", "grandkid", "eph"] {
        assert_eq!(keys_of(&t, gone), Vec::<String>::new(), "{gone} left keys");
        assert_eq!(s.session(gone).await.unwrap(), None);
    }
    for freed in ["det", "loose"] {
        let meta = s.require_session(freed).await.unwrap();
        assert_eq!(meta.parent, None, "{freed}");
        let meta_key = s.keys().session(freed).meta;
        // detached: the field is at its default, so absent (META_DEFAULTS)
        assert_eq!(
            t.cmd::<Option<String>>(&["HGET", &meta_key, "parent"]),
            None,
            "{freed}"
        );
    }
    assert_eq!(indexed(&t).await, set(&["det", "loose", "other"]));
    assert_eq!(
        s.list_sessions(None).await.unwrap(),
        ["det", "loose", "other"]
    );
    assert_eq!(
        s.list_sessions(Some("alice")).await.unwrap(),
        ["det", "other"]
    );
    assert_eq!(s.list_sessions(Some("bob")).await.unwrap(), ["loose"]);
    // An index set that became empty is gone, not left behind.
    let gk = s.keys().partition("grandkid");
    if gk != s.keys().partition("loose") {
        assert_eq!(
            t.cmd::<i64>(&["EXISTS", &s.keys().user_sessions(gk, "bob")]),
            0
        );
    }

    let closes: BTreeSet<(String, String)> = t.wal_ops("session_close").into_iter().collect();
    let want: BTreeSet<(String, String)> = ["root", "kid", "grandkid", "eph"]
        .iter()
        .map(|sid| (sid.to_string(), r#"{"cascade":true}"#.to_string()))
        .collect();
    assert_eq!(closes, want);
    let reparented: BTreeSet<String> = t
        .wal_ops("session_update")
        .into_iter()
        .filter(|(_, d)| d.contains(r#""parent":null"#))
        .map(|(id, _)| id)
        .collect();
    assert_eq!(reparented, set(&["det", "loose"]));
}

#[tokio::test]
async fn close_without_cascade_reparents_every_child() {
    let t = env().await;
    let s = &t.store;
    create(&t, "top", Some("carol"), None).await;
    create(&t, "a", None, Some(("top", Lifecycle::Linked))).await;
    create(&t, "b", None, Some(("top", Lifecycle::Ephemeral))).await;
    create(&t, "a1", None, Some(("a", Lifecycle::Linked))).await;

    assert_eq!(s.close_session("top", false).await.unwrap(), 1);
    assert_eq!(keys_of(&t, "top"), Vec::<String>::new());
    for child in ["a", "b"] {
        assert_eq!(s.require_session(child).await.unwrap().parent, None);
    }
    assert_eq!(
        s.require_session("a1").await.unwrap().parent.as_deref(),
        Some("a")
    );
    assert_eq!(indexed(&t).await, set(&["a", "a1", "b"]));
    assert_eq!(
        s.list_sessions(Some("carol")).await.unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(
        t.wal_ops("session_close"),
        [("top".to_string(), r#"{"cascade":false}"#.to_string())]
    );

    // Closing a child unlinks it from its parent.
    assert_eq!(s.close_session("a1", true).await.unwrap(), 1);
    assert_eq!(s.children("a").await.unwrap(), Vec::<String>::new());
    // Closing an unknown session is an error that writes nothing.
    let err = t.rejected(s.close_session("top", true)).await;
    assert!(
        matches!(err, Error::UnknownSession(ref id) if id == "top"),
        "{err:?}"
    );
}

#[tokio::test]
async fn spawn_depth_is_capped_at_three() {
    let t = env().await;
    create(&t, "d0", None, None).await;
    create(&t, "d1", None, Some(("d0", Lifecycle::Linked))).await;
    create(&t, "d2", None, Some(("d1", Lifecycle::Detached))).await;
    create(&t, "d3", None, Some(("d2", Lifecycle::Ephemeral))).await;
    let d3 = t.store.require_session("d3").await.unwrap();
    assert_eq!((d3.spawn_depth, d3.kind.as_str()), (3, "subagent"));
    assert_eq!(d3.parent.as_deref(), Some("d2"));
    assert_eq!(d3.lifecycle, Lifecycle::Ephemeral);

    let deeper = NewSession::new().id("d4").parent("d3", Lifecycle::Linked);
    let err = t.rejected(t.store.create_session(&deeper)).await;
    assert!(
        matches!(err, Error::SpawnDepthExceeded { depth: 4, max: 3 }),
        "{err:?}"
    );
    assert_eq!(t.store.children("d3").await.unwrap(), Vec::<String>::new());
}

#[tokio::test]
async fn generated_ids_archive_and_touch() {
    let t = env().await;
    let s = &t.store;
    let sid = s
        .create_session(&NewSession::new().user("dan"))
        .await
        .unwrap();
    assert_eq!(sid.len(), 5 + 24, "{sid}");
    assert!(sid.starts_with("sess_"));
    assert!(sid[5..]
        .bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    let meta = s.require_session(&sid).await.unwrap();
    assert_eq!(
        (meta.kind.as_str(), meta.status.as_str()),
        ("root", "active")
    );
    assert_eq!((meta.spawn_depth, meta.next_seq, meta.version), (0, 1, 0));

    s.archive(&sid).await.unwrap();
    assert_eq!(s.require_session(&sid).await.unwrap().status, "archived");
    let wal_before = t.wal_entries();
    s.touch(&sid).await.unwrap();
    assert_eq!(
        t.wal_entries(),
        wal_before,
        "a heartbeat is not a wal record"
    );

    let dup = NewSession::new().id(sid.clone());
    let err = t.rejected(s.create_session(&dup)).await;
    assert!(matches!(err, Error::AlreadyExists(_)), "{err:?}");
}

#[tokio::test]
async fn a_child_whose_parent_vanishes_while_it_is_created_is_undone_everywhere() {
    let t = env().await;
    create(&t, "keep", Some("una"), None).await;
    // A parent that passes the depth check but is gone by the time the child is linked: its
    // meta holds `spawn_depth` but not `ttl`, which the link script requires of a live session.
    let half = t.store.keys().session("half").meta;
    let _: i64 = t.cmd(&["HSET", &half, "spawn_depth", "0"]);
    let orphan = NewSession::new()
        .id("orphan")
        .user("una")
        .parent("half", Lifecycle::Linked);
    let err = t.store.create_session(&orphan).await.unwrap_err();
    assert!(
        matches!(err, Error::UnknownSession(ref id) if id == "half"),
        "{err:?}"
    );
    assert_eq!(keys_of(&t, "orphan"), Vec::<String>::new());
    assert_eq!(indexed(&t).await, set(&["keep"]));
    assert_eq!(t.store.list_sessions(Some("una")).await.unwrap(), ["keep"]);
}

/// Every page of a listing, following the cursors; fails the test on a page over `limit`.
async fn all_pages(s: &Store, listing: SessionListing) -> Vec<String> {
    let limit = listing.limit;
    let mut listing = listing;
    let mut seen = Vec::new();
    loop {
        let page = s.list_sessions_page(&listing).await.unwrap();
        assert!(page.ids.len() <= limit);
        seen.extend(page.ids.iter().cloned());
        match page.next {
            Some(next) => {
                assert_eq!(Some(&next), page.ids.last());
                listing = listing.after(next);
            }
            None => return seen,
        }
    }
}

#[tokio::test]
async fn paging_over_ten_thousand_sessions_returns_each_exactly_once_in_order() {
    let t = env().await;
    let s = &t.store;
    // 10k sessions of one user plus 50 of another, created in one pipeline of scripts.
    let mut expected: Vec<String> = (0..10_000).map(|i| format!("pg{i:05}")).collect();
    for chunk in expected.chunks(500) {
        let news: Vec<NewSession> = chunk
            .iter()
            .map(|sid| NewSession::new().id(sid).user("paula"))
            .collect();
        let creates = news.iter().map(|new| s.create_session(new));
        for r in futures_util::future::join_all(creates).await {
            r.unwrap();
        }
    }
    for i in 0..50 {
        create(&t, &format!("other{i:02}"), Some("otto"), None).await;
    }
    expected.sort();
    let paged = all_pages(s, SessionListing::new(997).user("paula")).await;
    assert_eq!(paged, expected);
    // The whole namespace, and a prefix range of it, page the same way.
    let everything = all_pages(s, SessionListing::new(1000)).await;
    assert_eq!(everything.len(), 10_050);
    assert_eq!(everything, s.list_sessions(None).await.unwrap());
    let prefixed = all_pages(s, SessionListing::new(7).prefix("other")).await;
    assert_eq!(
        prefixed,
        (0..50).map(|i| format!("other{i:02}")).collect::<Vec<_>>()
    );
    // A cursor that is no id (deleted since, say) still pages from where it sorts.
    let page = s
        .list_sessions_page(&SessionListing::new(2).user("paula").after("pg09998a"))
        .await
        .unwrap();
    assert_eq!(page.ids, vec!["pg09999".to_string()]);
    assert_eq!(page.next, None);
    // A closed session leaves every page.
    s.close_session("pg00001", true).await.unwrap();
    let first = s
        .list_sessions_page(&SessionListing::new(3).user("paula"))
        .await
        .unwrap();
    assert_eq!(first.ids, ["pg00000", "pg00002", "pg00003"]);
    assert_eq!(first.next.as_deref(), Some("pg00003"));
}

#[tokio::test]
async fn a_bad_page_request_is_refused_before_redis_is_touched() {
    let t = env().await;
    let s = &t.store;
    for bad in [
        SessionListing::new(0),
        SessionListing::new(MAX_PAGE + 1),
        SessionListing::new(5).after("no spaces"),
        SessionListing::new(5).user("bad/user"),
        SessionListing::new(5).prefix("bad prefix"),
    ] {
        assert!(matches!(
            t.rejected(s.list_sessions_page(&bad)).await,
            Error::InvalidInput(_) | Error::InvalidId { .. }
        ));
    }
}

#[tokio::test]
async fn the_cli_pages_with_limit_and_after_and_prints_the_next_cursor() {
    let t = env().await;
    for i in 0..5 {
        create(&t, &format!("c{i}"), Some("carl"), None).await;
    }
    let first = t.cli_ok(&["session", "list", "--user", "carl", "--limit", "2"]);
    assert_eq!(first, "c0\nc1\nnext: c1\n");
    let second = t.cli_ok(&[
        "session", "list", "--user", "carl", "--limit", "2", "--after", "c1",
    ]);
    assert_eq!(second, "c2\nc3\nnext: c3\n");
    let last = t.cli_ok(&[
        "session", "list", "--user", "carl", "--limit", "2", "--after", "c3",
    ]);
    assert_eq!(last, "c4\n");
    // A limit out of 1..=MAX_PAGE, or a cursor without a limit, is bad usage (exit 2).
    for args in [
        &["--limit", "0"][..],
        &["--limit", "10001"],
        &["--after", "c1"],
    ] {
        let out = t.cli(&[&["session", "list"][..], args].concat());
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
    }
    let json = t.cli_ok(&["--json", "session", "list", "--limit", "4"]);
    let lines = crate::support::json_lines(&json);
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[4], serde_json::json!({"next": "c3"}));
    assert_eq!(lines[0]["id"], "c0");
}

/// A Redis written by an earlier build holds the session indexes as plain sets (before the
/// paged listing) or as one sorted set of the ids (before the buckets): the scripts that
/// write an index turn it into buckets when they meet it, and a spill daemon turns every
/// other one when it opens, so listing works again.
#[tokio::test]
async fn indexes_an_earlier_build_wrote_are_upgraded() {
    let t = env().await;
    let keys = t.store.keys();
    // `twin` shares old-a's partition, so old-a's index outlives its close.
    let twin = (0..)
        .map(|i| format!("twin{i}"))
        .find(|id| keys.partition(id) == keys.partition("old-a"))
        .unwrap();
    let made = [
        ("old-a", Some("alice")),
        ("old-b", Some("alice")),
        ("old-c", None),
        (twin.as_str(), None),
    ];
    for (sid, user) in made {
        create(&t, sid, user, None).await;
    }
    // As the earlier builds left them: the partition indexes plain sets, alice's sorted sets
    // of her ids, with the same members.
    let mut indexes = Vec::new();
    for (sid, user) in made {
        let p = keys.partition(sid);
        let mut legacy = vec![(keys.sessions_index(p), "SADD")];
        if let Some(u) = user {
            legacy.push((keys.user_sessions(p, u), "ZADD"));
        }
        for (index, command) in legacy {
            if !indexes.contains(&index) {
                for key in index_keys(&t, &index) {
                    t.cmd::<i64>(&["DEL", &key]);
                }
                indexes.push(index.clone());
            }
            let member: &[&str] = if command == "ZADD" {
                &["0", sid]
            } else {
                &[sid]
            };
            t.cmd::<i64>(&[&[command, index.as_str()][..], member].concat());
        }
    }
    // A script meets one first: closing a session converts its indexes.
    t.store.close_session("old-a", false).await.unwrap();
    let p = keys.partition("old-a");
    assert_eq!(
        index_keys(&t, &keys.sessions_index(p)),
        [
            keys.sessions_index(p),
            format!("{}:buckets", keys.sessions_index(p))
        ]
    );
    // The daemon converts the rest when it opens; listing sees every live session.
    t.flush().await;
    for index in &indexes {
        let kind: String = t.cmd(&["TYPE", index]);
        assert!(kind == "zset" || kind == "none", "{index} is a {kind}");
        if kind == "zset" {
            assert_eq!(
                t.cmd::<Option<String>>(&["ZSCORE", index, ""]),
                Some("0".into())
            );
        }
    }
    assert_eq!(
        t.store.list_sessions(None).await.unwrap(),
        ["old-b", "old-c", twin.as_str()]
    );
    assert_eq!(
        t.store.list_sessions(Some("alice")).await.unwrap(),
        ["old-b"]
    );
}

/// Every page of `listing`'s ids, `limit` at a time, followed through `next`.
async fn every_page(t: &TestEnv, user: Option<&str>, prefix: &str, limit: usize) -> Vec<String> {
    let mut ids = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let mut listing = SessionListing::new(limit).prefix(prefix);
        if let Some(u) = user {
            listing = listing.user(u);
        }
        if let Some(a) = &after {
            listing = listing.after(a.clone());
        }
        let page = t.store.list_sessions_page(&listing).await.unwrap();
        assert!(page.ids.len() <= limit);
        ids.extend(page.ids);
        match page.next {
            Some(next) => after = Some(next),
            None => return ids,
        }
    }
}

/// A partition's index past one bucket: 700 sessions of one user in one partition split
/// both of its indexes into buckets, each holding the ids from its bound to the next; the
/// whole listing, every page, a prefix and the index's membership check (a create of an
/// indexed id is refused, one of a closed id is not) stay exact through the splits and
/// through closing most of them (a bucket keeps its bound while it holds an id), and
/// closing the rest leaves no key of either index.
#[tokio::test]
async fn a_large_index_splits_into_buckets_and_lists_exactly() {
    let t = env().await;
    let keys = t.store.keys();
    let p = 5;
    let ids = t.ids_in_partition("a-rather-long-session-id.", p, 700);
    for sid in &ids {
        create(&t, sid, Some("u"), None).await;
    }
    let mut want = ids.clone();
    want.sort();
    for index in [keys.sessions_index(p), keys.user_sessions(p, "u")] {
        let buckets = t.hash(&agentstate::keys::Keys::index_buckets(&index));
        let bounds: Vec<String> = t.cmd(&["ZRANGE", &index, "0", "-1"]);
        assert!(bounds.len() > 2, "{index}: {bounds:?}");
        assert_eq!(bounds, buckets.keys().cloned().collect::<Vec<_>>());
        for (i, bound) in bounds.iter().enumerate() {
            for id in buckets[bound].split_whitespace() {
                assert!(id >= bound.as_str(), "{id} below its bucket {bound:?}");
                assert!(bounds.get(i + 1).is_none_or(|next| id < next.as_str()));
            }
        }
    }
    assert_eq!(t.store.list_sessions(None).await.unwrap(), want);
    assert_eq!(t.store.list_sessions(Some("u")).await.unwrap(), want);
    assert_eq!(every_page(&t, None, "", 7).await, want);
    assert_eq!(every_page(&t, Some("u"), "", 100).await, want);
    let prefixed: Vec<String> = want
        .iter()
        .filter(|id| id.starts_with("a-rather-long-session-id.1"))
        .cloned()
        .collect();
    assert_eq!(
        every_page(&t, None, "a-rather-long-session-id.1", 9).await,
        prefixed
    );
    let again = NewSession::new().id(&want[350]);
    assert!(matches!(
        t.store.create_session(&again).await,
        Err(Error::AlreadyExists(_))
    ));

    // Closing all but every tenth leaves exactly those, in the same buckets.
    let before: usize = t.cmd(&["ZCARD", &keys.sessions_index(p)]);
    for (i, sid) in want.iter().enumerate() {
        if i % 10 != 0 {
            t.store.close_session(sid, false).await.unwrap();
        }
    }
    let kept: Vec<String> = want.iter().step_by(10).cloned().collect();
    assert_eq!(t.store.list_sessions(None).await.unwrap(), kept);
    assert_eq!(every_page(&t, Some("u"), "", 3).await, kept);
    let after: usize = t.cmd(&["ZCARD", &keys.sessions_index(p)]);
    assert_eq!(after, before, "every bucket still holds an id");
    t.store
        .create_session(&NewSession::new().id(&want[1]))
        .await
        .unwrap();
    for sid in &kept {
        t.store.close_session(sid, false).await.unwrap();
    }
    t.store.close_session(&want[1], false).await.unwrap();
    assert_eq!(
        t.store.list_sessions(None).await.unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(
        index_keys(&t, &keys.sessions_index(p)),
        Vec::<String>::new()
    );
    assert_eq!(
        index_keys(&t, &keys.user_sessions(p, "u")),
        Vec::<String>::new()
    );
}
