//! Long-term memory items: put/get/delete, search by prefix, filter and query vector with
//! offset and limit, namespace listings, TTL, and bad input refused with nothing written.

use std::collections::BTreeMap;

use agentstate::*;
use serde_json::{json, Map, Value};

use crate::support::env;

fn item(value: Value) -> NewMemoryItem {
    NewMemoryItem {
        value: value.as_object().unwrap().clone(),
        ..NewMemoryItem::default()
    }
}

fn with_vector(value: Value, v: &[f32]) -> NewMemoryItem {
    let mut it = item(value);
    it.vectors = BTreeMap::from([("text".to_string(), v.to_vec())]);
    it
}

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn keys(found: &[MemoryItem]) -> Vec<&str> {
    found.iter().map(|i| i.key.as_str()).collect()
}

#[tokio::test]
async fn items_are_put_read_replaced_and_deleted() {
    let t = env().await;
    let s = &t.store;
    let ns = ["users", "ann", "prefs"];
    s.put_memory(&ns, "tz", &item(json!({"tz": "UTC"})))
        .await
        .unwrap();
    let first = s.get_memory(&ns, "tz", false).await.unwrap().unwrap();
    assert_eq!(first.namespace, ns);
    assert_eq!(first.value, obj(json!({"tz": "UTC"})));
    assert_eq!(first.expires_at, None);
    s.put_memory(&ns, "tz", &item(json!({"tz": "CET"})))
        .await
        .unwrap();
    let second = s.get_memory(&ns, "tz", false).await.unwrap().unwrap();
    assert_eq!(second.value, obj(json!({"tz": "CET"})));
    assert_eq!(
        second.created_at, first.created_at,
        "replacing keeps the creation time"
    );
    assert!(second.updated_at >= first.updated_at);
    s.delete_memory(&ns, "tz").await.unwrap();
    assert_eq!(s.get_memory(&ns, "tz", false).await.unwrap(), None);
    // The namespace holds nothing now: it is not listed.
    let listed = s
        .list_memory_namespaces(&NamespaceListing::default())
        .await
        .unwrap();
    assert!(listed.is_empty(), "{listed:?}");
}

#[tokio::test]
async fn search_filters_ranks_and_pages() {
    let t = env().await;
    let s = &t.store;
    let ns = ["users", "ann", "facts"];
    s.put_memory(
        &ns,
        "a",
        &with_vector(json!({"n": 1, "kind": "pet"}), &[1.0, 0.0]),
    )
    .await
    .unwrap();
    s.put_memory(
        &ns,
        "b",
        &with_vector(json!({"n": 2, "kind": "pet"}), &[0.6, 0.8]),
    )
    .await
    .unwrap();
    s.put_memory(
        &ns,
        "c",
        &with_vector(json!({"n": 3, "kind": "food"}), &[0.0, 1.0]),
    )
    .await
    .unwrap();
    s.put_memory(&ns, "plain", &item(json!({"n": 4, "kind": "pet"})))
        .await
        .unwrap();
    s.put_memory(&["users", "ben", "facts"], "x", &item(json!({"n": 9})))
        .await
        .unwrap();

    let search = |prefix: &[&str], filter: Value, query: Option<Vec<f32>>| MemorySearch {
        prefix: prefix.iter().map(|l| l.to_string()).collect(),
        filter: obj(filter),
        query,
        limit: 10,
        offset: 0,
        refresh_ttl: false,
    };
    // Ranked by cosine similarity, the item without vectors last.
    let ranked = s
        .search_memory(&search(&["users", "ann"], json!({}), Some(vec![0.0, 1.0])))
        .await
        .unwrap();
    assert_eq!(keys(&ranked), ["c", "b", "a", "plain"]);
    assert!((ranked[0].score.unwrap() - 1.0).abs() < 1e-6);
    assert!((ranked[1].score.unwrap() - 0.8).abs() < 1e-6);
    assert_eq!(ranked[3].score, None);
    // Filters: equality and comparisons.
    let pets = s
        .search_memory(&search(
            &["users"],
            json!({"kind": "pet", "n": {"$gte": 2}}),
            None,
        ))
        .await
        .unwrap();
    let mut got = keys(&pets);
    got.sort();
    assert_eq!(got, ["b", "plain"]);
    // Offset and limit over the ranking.
    let mut page = search(&["users", "ann"], json!({}), Some(vec![0.0, 1.0]));
    page.offset = 1;
    page.limit = 2;
    assert_eq!(keys(&s.search_memory(&page).await.unwrap()), ["b", "a"]);
    // A prefix covers whole labels only.
    assert!(s
        .search_memory(&search(&["users", "an"], json!({}), None))
        .await
        .unwrap()
        .is_empty());
    // An unknown operator is refused.
    let err = s
        .search_memory(&search(&["users"], json!({"n": {"$in": [1]}}), None))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err}");
}

#[tokio::test]
async fn namespaces_list_with_prefix_suffix_depth_and_paging() {
    let t = env().await;
    let s = &t.store;
    for ns in [
        ["users", "ann", "prefs"],
        ["users", "ann", "facts"],
        ["users", "ben", "prefs"],
        ["docs", "public", "prefs"],
    ] {
        s.put_memory(&ns, "k", &item(json!({"v": 1})))
            .await
            .unwrap();
    }
    let list = |prefix: &[&str], suffix: &[&str], max_depth: Option<usize>| NamespaceListing {
        prefix: prefix.iter().map(|l| l.to_string()).collect(),
        suffix: suffix.iter().map(|l| l.to_string()).collect(),
        max_depth,
        limit: 100,
        offset: 0,
    };
    let l = |v: &[&[&str]]| {
        v.iter()
            .map(|ns| ns.iter().map(|x| x.to_string()).collect::<Vec<_>>())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        s.list_memory_namespaces(&list(&["users"], &[], None))
            .await
            .unwrap(),
        l(&[
            &["users", "ann", "facts"],
            &["users", "ann", "prefs"],
            &["users", "ben", "prefs"]
        ])
    );
    assert_eq!(
        s.list_memory_namespaces(&list(&[], &["prefs"], Some(2)))
            .await
            .unwrap(),
        l(&[&["docs", "public"], &["users", "ann"], &["users", "ben"]])
    );
    assert_eq!(
        s.list_memory_namespaces(&list(&["users", "*"], &["facts"], None))
            .await
            .unwrap(),
        l(&[&["users", "ann", "facts"]])
    );
    let mut paged = list(&[], &[], Some(1));
    paged.offset = 1;
    assert_eq!(
        s.list_memory_namespaces(&paged).await.unwrap(),
        l(&[&["users"]])
    );
}

#[tokio::test]
async fn an_item_with_a_ttl_expires_and_one_without_does_not() {
    let t = env().await;
    let s = &t.store;
    let ns = ["users", "ann", "notes"];
    let mut short = item(json!({"v": 1}));
    short.ttl_minutes = Some(1);
    s.put_memory(&ns, "short", &short).await.unwrap();
    s.put_memory(&ns, "long", &item(json!({"v": 2})))
        .await
        .unwrap();
    let got = s.get_memory(&ns, "short", false).await.unwrap().unwrap();
    assert_eq!(got.ttl_minutes, Some(1));
    let expires = got.expires_at.unwrap();
    assert!(
        (expires - got.updated_at - 60_000).abs() < 5,
        "{expires} {}",
        got.updated_at
    );
    // The expiry index holds the one item with a TTL, at its moment.
    let p = s.keys().memory_partition("users.ann.notes");
    let score: Option<f64> = t.cmd(&[
        "ZSCORE",
        &s.keys().memory_expiry(p),
        "users.ann.notes\nshort",
    ]);
    assert_eq!(score, Some(expires as f64));
    // Pushing the moment into the past (as the clock will) hides it from reads.
    let hash = s.keys().memory("users.ann.notes");
    let record: String = t.cmd(&["HGET", &hash, "short"]);
    let past = record.replacen(&format!("\"expires_at\":{expires}"), "\"expires_at\":1", 1);
    t.cmd::<i64>(&["HSET", &hash, "short", &past]);
    assert_eq!(s.get_memory(&ns, "short", false).await.unwrap(), None);
    let all = s
        .search_memory(&MemorySearch {
            prefix: vec!["users".into()],
            ..MemorySearch::default()
        })
        .await
        .unwrap();
    assert_eq!(keys(&all), ["long"]);
}

#[tokio::test]
async fn a_read_with_refresh_ttl_moves_the_expiry_and_a_plain_read_does_not() {
    let t = env().await;
    let s = &t.store;
    let ns = ["users", "ann", "notes"];
    let mut short = item(json!({"v": 1}));
    short.ttl_minutes = Some(1);
    for key in ["a", "b"] {
        s.put_memory(&ns, key, &short).await.unwrap();
    }
    s.put_memory(&ns, "forever", &item(json!({"v": 2})))
        .await
        .unwrap();
    // Bring both moments close, as time passing would: 2 s from now.
    let hash = s.keys().memory("users.ann.notes");
    let index = s
        .keys()
        .memory_expiry(s.keys().memory_partition("users.ann.notes"));
    let soon = s
        .get_memory(&ns, "a", false)
        .await
        .unwrap()
        .unwrap()
        .updated_at
        + 2_000;
    for key in ["a", "b"] {
        let record: String = t.cmd(&["HGET", &hash, key]);
        let at = record.split("\"expires_at\":").nth(1).unwrap();
        let at = &at[..at.find(',').unwrap()];
        let near = record.replacen(
            &format!("\"expires_at\":{at}"),
            &format!("\"expires_at\":{soon}"),
            1,
        );
        t.cmd::<i64>(&["HSET", &hash, key, &near]);
        t.cmd::<i64>(&[
            "ZADD",
            &index,
            &soon.to_string(),
            &format!("users.ann.notes\n{key}"),
        ]);
    }
    let plain = s.get_memory(&ns, "a", false).await.unwrap().unwrap();
    assert_eq!(plain.expires_at, Some(soon));
    let wal = s.keys().wal(s.keys().memory_partition("users.ann.notes"));
    let wal_before: i64 = t.cmd(&["XLEN", &wal]);
    let refreshed = s.get_memory(&ns, "a", true).await.unwrap().unwrap();
    let moved = refreshed.expires_at.unwrap();
    assert!(moved >= soon + 55_000, "{moved} vs {soon}");
    let stored = s.get_memory(&ns, "a", false).await.unwrap().unwrap();
    assert_eq!(stored.expires_at, Some(moved));
    assert_eq!(
        stored.updated_at, plain.updated_at,
        "a refresh is not an update"
    );
    let score: f64 = t.cmd(&["ZSCORE", &index, "users.ann.notes\na"]);
    assert_eq!(score, moved as f64);
    // A search with refresh_ttl moves what it returns; "b" was not returned by the first page.
    let page = s
        .search_memory(&MemorySearch {
            prefix: vec!["users".into()],
            filter: obj(json!({"v": 2})),
            refresh_ttl: true,
            ..MemorySearch::default()
        })
        .await
        .unwrap();
    assert_eq!(keys(&page), ["forever"]);
    assert_eq!(page[0].expires_at, None);
    let b = s.get_memory(&ns, "b", false).await.unwrap().unwrap();
    assert_eq!(b.expires_at, Some(soon));
    let found = s
        .search_memory(&MemorySearch {
            prefix: vec!["users".into()],
            filter: obj(json!({"v": 1})),
            refresh_ttl: true,
            ..MemorySearch::default()
        })
        .await
        .unwrap();
    let mut found = keys(&found);
    found.sort_unstable();
    assert_eq!(found, ["a", "b"]);
    let b = s.get_memory(&ns, "b", false).await.unwrap().unwrap();
    assert!(b.expires_at.unwrap() >= soon + 55_000);
    // Each refresh logged one mem_put reference, so the durable row follows.
    let wal_after: i64 = t.cmd(&["XLEN", &wal]);
    assert_eq!(wal_after - wal_before, 3);
}

#[tokio::test]
async fn bad_input_is_refused_and_writes_nothing() {
    let t = env().await;
    let s = &t.store;
    let bad_ns: [&[&str]; 3] = [&[], &["a.b"], &["ok", ""]];
    for ns in bad_ns {
        let err = s
            .put_memory(ns, "k", &item(json!({"v": 1})))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "{err}");
    }
    let err = s
        .put_memory(&["ok"], "line\nbreak", &item(json!({"v": 1})))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err}");
    let mut nan = with_vector(json!({"v": 1}), &[f32::NAN]);
    let err = s.put_memory(&["ok"], "k", &nan).await.unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err}");
    nan.vectors.clear();
    nan.value = obj(json!({"big": "x".repeat(17 << 20)}));
    let err = s.put_memory(&["ok"], "k", &nan).await.unwrap_err();
    assert!(matches!(err, Error::TooLarge { .. }), "{err}");
    let listed = s
        .list_memory_namespaces(&NamespaceListing::default())
        .await
        .unwrap();
    assert!(listed.is_empty(), "{listed:?}");
    let wal_len: usize = t.cmd(&["XLEN", &s.keys().wal(s.keys().memory_partition("ok"))]);
    assert_eq!(wal_len, 0);
}
