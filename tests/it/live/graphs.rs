//! Graph checkpoint logs (LangGraph threads): puts and reads in one EVALSHA each, pending
//! writes (repeats kept, special writes overwritten, scoped by namespace and checkpoint),
//! lists newest first in pages, prune / delete runs / copy (the SQLite mirror and the thread
//! back after Redis loses everything are in `loss::graphs`).

use std::collections::BTreeMap;

use agentstate::*;
use serde_json::{json, Value};

use crate::support::{env, TestEnv};

/// Checkpoint `id` of `ns` after `parent`, with `values` (channel → value) at `version`
/// and metadata `md`.
pub(crate) fn cp(
    ns: &str,
    id: &str,
    parent: Option<&str>,
    values: &[(&str, &str)],
    md: Value,
) -> GraphPut {
    let mut p = GraphPut::new(ns, id);
    p.parent = parent.map(str::to_string);
    p.checkpoint = json!({"v": 1, "id": id, "ts": "2026-11-23T00:00:00+00:00"});
    p.metadata = md;
    p.channels = values
        .iter()
        .map(|(c, _)| (c.to_string(), "1".to_string()))
        .collect();
    p.blobs = values
        .iter()
        .map(|(c, v)| (c.to_string(), "1".to_string(), v.to_string()))
        .collect();
    p
}

pub(crate) fn ids(list: &[GraphTuple]) -> Vec<&str> {
    list.iter().map(|t| t.id.as_str()).collect()
}

/// A tuple's document or metadata (JSON text) as a value.
pub(crate) fn doc(text: &serde_json::value::RawValue) -> Value {
    serde_json::from_str(text.get()).unwrap()
}

fn values(t: &GraphTuple) -> BTreeMap<&str, &str> {
    t.values
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// INFO commandstats calls of EVALSHA so far.
fn evalshas(t: &TestEnv) -> u64 {
    let info: String = t.cmd(&["INFO", "commandstats"]);
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

#[tokio::test]
async fn a_put_and_a_read_of_the_latest_are_one_evalsha_each() {
    let t = env().await;
    let s = &t.store;
    s.graph_put(
        "t1",
        &cp("", "01", None, &[("a", "json:1")], json!({"step": 0})),
    )
    .await
    .unwrap();
    let before = evalshas(&t);
    let mut second = cp(
        "",
        "02",
        Some("01"),
        &[("b", "json:\"x\"")],
        json!({"step": 1}),
    );
    // `a` is unchanged: referenced at its old version, no new value sent.
    second.channels.push(("a".into(), "1".into()));
    s.graph_put("t1", &second).await.unwrap();
    assert_eq!(evalshas(&t), before + 1);
    let latest = s.graph_get("t1", "", None).await.unwrap().unwrap();
    assert_eq!(evalshas(&t), before + 2);
    assert_eq!(latest.id, "02");
    assert_eq!(latest.parent.as_deref(), Some("01"));
    assert_eq!(doc(&latest.metadata), json!({"step": 1}));
    assert_eq!(doc(&latest.checkpoint)["id"], "02");
    assert_eq!(
        values(&latest),
        BTreeMap::from([("a", "json:1"), ("b", "json:\"x\"")])
    );
    assert!(latest.writes.is_empty());
    let first = s.graph_get("t1", "", Some("01")).await.unwrap().unwrap();
    assert_eq!(values(&first), BTreeMap::from([("a", "json:1")]));
    assert_eq!(first.parent, None);
    assert!(s.graph_get("t1", "", Some("03")).await.unwrap().is_none());
    assert!(s.graph_get("t1", "sub:1", None).await.unwrap().is_none());
    assert!(s.graph_get("nothread", "", None).await.unwrap().is_none());
    // The thread is an agentstate session with its graph log in its own slot.
    let keys = t.store.keys().session("t1");
    assert_eq!(
        t.store.admin().session_key_names("t1").await.unwrap(),
        [keys.meta.clone(), keys.graph.clone(), keys.glog.clone()]
    );
    assert_eq!(t.wal_ops("graph_put").len(), 2);
}

#[tokio::test]
async fn pending_writes_keep_repeats_overwrite_specials_and_stay_with_their_checkpoint() {
    let t = env().await;
    let s = &t.store;
    s.graph_put("t", &cp("", "01", None, &[], json!({})))
        .await
        .unwrap();
    s.graph_put("t", &cp("sub:9", "01", None, &[], json!({})))
        .await
        .unwrap();
    let w = |idx: i64, ch: &str, v: &str| (idx, ch.to_string(), v.to_string());
    s.graph_put_writes(
        "t",
        "",
        "01",
        "task-b",
        "~p|b",
        &[w(0, "ch", "json:1"), w(1, "x", "json:2")],
    )
    .await
    .unwrap();
    s.graph_put_writes("t", "", "01", "task-a", "~p|a", &[w(0, "ch", "json:3")])
        .await
        .unwrap();
    // A repeat of (task, idx) keeps the first; a special write (negative idx) overwrites.
    s.graph_put_writes(
        "t",
        "",
        "01",
        "task-b",
        "~p|b",
        &[w(0, "ch", "json:9"), w(-3, "__interrupt__", "json:\"i1\"")],
    )
    .await
    .unwrap();
    s.graph_put_writes(
        "t",
        "",
        "01",
        "task-b",
        "~p|b",
        &[w(-3, "__interrupt__", "json:\"i2\"")],
    )
    .await
    .unwrap();
    s.graph_put_writes("t", "", "01", "task-b", "~p|b", &[w(0, "ch", "json:10")])
        .await
        .unwrap();
    s.graph_put_writes("t", "sub:9", "01", "task-c", "", &[w(0, "ch", "json:4")])
        .await
        .unwrap();
    let root = s.graph_get("t", "", None).await.unwrap().unwrap();
    let got: Vec<(&str, &str, i64, &str)> = root
        .writes
        .iter()
        .map(|w| {
            (
                w.task_path.as_str(),
                w.channel.as_str(),
                w.idx,
                w.value.as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("~p|a", "ch", 0, "json:3"),
            ("~p|b", "__interrupt__", -3, "json:\"i2\""),
            ("~p|b", "ch", 0, "json:1"),
            ("~p|b", "x", 1, "json:2"),
        ]
    );
    let sub = s.graph_get("t", "sub:9", None).await.unwrap().unwrap();
    assert_eq!(sub.writes.len(), 1);
    assert_eq!(sub.writes[0].value, "json:4");
    // A new checkpoint starts with none.
    s.graph_put("t", &cp("", "02", Some("01"), &[], json!({})))
        .await
        .unwrap();
    assert!(s
        .graph_get("t", "", None)
        .await
        .unwrap()
        .unwrap()
        .writes
        .is_empty());
    // 3 checkpoints and 6 writes calls, of which the pure repeat logged nothing.
    assert_eq!(t.wal_ops("graph_put").len(), 3 + 5);
}

#[tokio::test]
async fn lists_go_newest_first_by_namespace_in_pages_with_filters() {
    let t = env().await;
    let s = &t.store;
    let mut parent: Option<String> = None;
    for i in 0..250 {
        let id = format!("{i:04}");
        let source = if i % 2 == 0 { "input" } else { "loop" };
        let md = json!({"source": source, "step": i, "score": i % 7});
        s.graph_put("t", &cp("", &id, parent.as_deref(), &[("c", "json:0")], md))
            .await
            .unwrap();
        parent = Some(id);
    }
    s.graph_put("t", &cp("child:1", "0100x", None, &[], json!({"step": 1})))
        .await
        .unwrap();
    let all = s.graph_list("t", Some(""), None, None, None).await.unwrap();
    assert_eq!(all.len(), 250);
    assert_eq!(all[0].id, "0249");
    assert_eq!(all[249].id, "0000");
    assert!(all.windows(2).all(|w| w[0].id > w[1].id));
    let page = s
        .graph_list("t", Some(""), Some("0003"), None, Some(2))
        .await
        .unwrap();
    assert_eq!(ids(&page), ["0002", "0001"]);
    let filter = json!({"source": "loop", "score": 3})
        .as_object()
        .unwrap()
        .clone();
    let loops = s
        .graph_list("t", Some(""), None, Some(&filter), None)
        .await
        .unwrap();
    let expected: Vec<String> = (0..250)
        .rev()
        .filter(|i| i % 2 == 1 && i % 7 == 3)
        .map(|i| format!("{i:04}"))
        .collect();
    assert_eq!(ids(&loops), expected);
    let one = s
        .graph_list("t", Some(""), None, Some(&filter), Some(1))
        .await
        .unwrap();
    assert_eq!(ids(&one), [expected[0].as_str()]);
    // Every namespace, merged newest first.
    let mixed = s
        .graph_list("t", None, Some("0101"), None, Some(3))
        .await
        .unwrap();
    assert_eq!(ids(&mixed), ["0100x", "0100", "0099"]);
    assert_eq!(mixed[0].ns, "child:1");
    assert_eq!(
        s.graph_list("t", Some("child:1"), None, None, None)
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(s
        .graph_list("none", None, None, None, None)
        .await
        .unwrap()
        .is_empty());
}

/// A page reads the writes of all its checkpoints with one index range per namespace: ids
/// of different lengths (one a prefix of another, so `id|` sorts unlike `id`) still get
/// exactly their own writes, and a checkpoint outside the page lends none.
#[tokio::test]
async fn a_page_gets_each_checkpoint_its_own_writes_whatever_the_id_lengths() {
    let t = env().await;
    let s = &t.store;
    let ids = ["a", "a-", "ab", "b", "b0", "c"];
    for (i, id) in ids.iter().enumerate() {
        let parent = i.checked_sub(1).map(|p| ids[p]);
        s.graph_put("t", &cp("", id, parent, &[("x", "json:0")], json!({})))
            .await
            .unwrap();
        let w = (0, "x".to_string(), format!("json:\"{id}\""));
        s.graph_put_writes("t", "", id, "task", "", &[w])
            .await
            .unwrap();
    }
    let own = |list: &[GraphTuple]| -> Vec<(String, Vec<String>)> {
        list.iter()
            .map(|t| {
                (
                    t.id.clone(),
                    t.writes.iter().map(|w| w.value.clone()).collect(),
                )
            })
            .collect()
    };
    let expect: Vec<(String, Vec<String>)> = ids
        .iter()
        .rev()
        .map(|id| (id.to_string(), vec![format!("json:\"{id}\"")]))
        .collect();
    let all = s.graph_list("t", None, None, None, None).await.unwrap();
    assert_eq!(own(&all), expect);
    // A middle page: `b`, `ab` (below `b0`), whose write ranges enclose `a-`'s and `a`'s.
    let page = s
        .graph_list("t", Some(""), Some("b0"), None, Some(2))
        .await
        .unwrap();
    assert_eq!(own(&page), expect[2..4]);
}

#[tokio::test]
async fn odd_characters_in_namespaces_channels_and_tasks_round_trip() {
    let t = env().await;
    let s = &t.store;
    let ns = "outer:1|inner:%2,~";
    let mut put = cp(
        ns,
        "a|b",
        None,
        &[("branch:to:x|y", "json:[1]"), ("%7C", "msgpack:AQI=")],
        json!({"k": "a|b"}),
    );
    put.channels.push(("never~stored".into(), "3".into()));
    s.graph_put("t", &put).await.unwrap();
    s.graph_put_writes(
        "t",
        ns,
        "a|b",
        "t|1,~",
        "p:1|x",
        &[(0, "c|h".into(), "json:null".into())],
    )
    .await
    .unwrap();
    let got = s.graph_get("t", ns, Some("a|b")).await.unwrap().unwrap();
    assert_eq!(got.ns, ns);
    assert_eq!(got.id, "a|b");
    assert_eq!(
        values(&got),
        BTreeMap::from([("%7C", "msgpack:AQI="), ("branch:to:x|y", "json:[1]")])
    );
    assert_eq!(got.channels.len(), 3);
    assert_eq!(got.writes[0].task_id, "t|1,~");
    assert_eq!(got.writes[0].channel, "c|h");
    assert_eq!(
        s.graph_list("t", Some(ns), None, None, None)
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(s.graph_get("t", "outer:1", None).await.unwrap().is_none());
}

#[tokio::test]
async fn prune_delete_runs_copy_and_delete() {
    let t = env().await;
    let s = &t.store;
    for (thread, run) in [("t1", "r1"), ("t1", "r2"), ("t2", "r1")] {
        for i in 0..3 {
            let id = format!("{run}-{i}");
            let md = json!({"run_id": run, "step": i});
            s.graph_put(
                thread,
                &cp("", &id, None, &[(&format!("c{i}"), "json:1")], md),
            )
            .await
            .unwrap();
        }
    }
    s.graph_put("t1", &cp("sub:1", "x", None, &[], json!({})))
        .await
        .unwrap();
    s.graph_put_writes(
        "t1",
        "",
        "r2-2",
        "task",
        "",
        &[(0, "ch".into(), "json:1".into())],
    )
    .await
    .unwrap();
    // Copy is a fork: same ids, values, writes, times.
    assert_eq!(s.graph_copy("t1", "t3").await.unwrap(), 7);
    let (a, b) = (
        s.graph_list("t1", None, None, None, None).await.unwrap(),
        s.graph_list("t3", None, None, None, None).await.unwrap(),
    );
    assert_eq!(a, b);
    assert_eq!(s.graph_copy("nothing", "t4").await.unwrap(), 0);
    assert!(s.graph_get("t4", "", None).await.unwrap().is_none());

    // Runs: r1's checkpoints go from t1, t2 and the copy t3; r2's stay.
    assert_eq!(s.graph_delete_runs(&["r1", "nope"]).await.unwrap(), 9);
    assert_eq!(
        ids(&s
            .graph_list("t1", Some(""), None, None, None)
            .await
            .unwrap()),
        ["r2-2", "r2-1", "r2-0"]
    );
    assert!(s
        .graph_list("t2", None, None, None, None)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(s.graph_delete_runs(&["r1"]).await.unwrap(), 0);

    // keep_latest keeps the greatest per namespace, its writes and the values it references.
    assert_eq!(s.graph_prune("t1", true).await.unwrap(), 2);
    let kept = s.graph_list("t1", None, None, None, None).await.unwrap();
    assert_eq!(ids(&kept), ["x", "r2-2"]);
    assert_eq!(kept[1].writes.len(), 1);
    let graph = t.hash(&t.store.keys().session("t1").graph);
    let blobs: Vec<&String> = graph.keys().filter(|f| f.starts_with("b|")).collect();
    assert_eq!(blobs, ["b||c2|1"]);
    assert_eq!(s.graph_prune("t3", false).await.unwrap(), 4);
    assert!(t.hash(&t.store.keys().session("t3").graph).is_empty());

    assert!(s.graph_delete("t1").await.unwrap());
    assert!(!s.graph_delete("t1").await.unwrap());
    assert!(s.graph_get("t1", "", None).await.unwrap().is_none());
}

#[tokio::test]
async fn bad_input_is_rejected_and_writes_nothing() {
    let t = env().await;
    let s = &t.store;
    s.graph_put("t", &cp("", "01", None, &[], json!({})))
        .await
        .unwrap();
    let mut bad = cp("", "02", None, &[], json!([1]));
    assert!(matches!(
        t.rejected(s.graph_put("t", &bad)).await,
        Error::InvalidInput(_)
    ));
    bad.metadata = json!({});
    bad.id = String::new();
    assert!(matches!(
        t.rejected(s.graph_put("t", &bad)).await,
        Error::InvalidInput(_)
    ));
    assert!(matches!(
        t.rejected(s.graph_put("bad id", &cp("", "1", None, &[], json!({}))))
            .await,
        Error::InvalidId { .. }
    ));
    let big = "x".repeat(17 << 20);
    let huge = cp("", "03", None, &[("c", &big)], json!({}));
    assert!(matches!(
        t.rejected(s.graph_put("t", &huge)).await,
        Error::TooLarge { .. }
    ));
    assert!(matches!(
        t.rejected(s.graph_put_writes("t", "", "01", "", "", &[(0, "c".into(), "v".into())]))
            .await,
        Error::InvalidInput(_)
    ));
}

#[tokio::test]
async fn session_fork_at_a_seq_through_the_cli() {
    let t = env().await;
    let s = &t.store;
    s.create_session(&NewSession::new().id("src").user("alice").model("m1"))
        .await
        .unwrap();
    for i in 1..=6 {
        s.append("src", &NewMessage::new("user").content(format!("m{i}")))
            .await
            .unwrap();
    }
    // Seqs 1-2 compacted (note at 7), so at seq 7 the model saw m3..m6 and the note.
    s.compact("src", &Compaction::new(1, 2, "summary of m1 m2"))
        .await
        .unwrap();
    s.append("src", &NewMessage::new("user").content("m8"))
        .await
        .unwrap();
    s.graph_put("src", &cp("", "01", None, &[("c", "json:1")], json!({})))
        .await
        .unwrap();
    assert_eq!(
        t.cli_ok(&["session", "fork", "src", "--at", "7", "--id", "f"]),
        "f\n"
    );
    let contents: Vec<String> = s
        .messages("f", MessageQuery::all())
        .await
        .unwrap()
        .into_iter()
        .map(|m| format!("{}:{}", m.seq, m.content.unwrap()))
        .collect();
    assert_eq!(
        contents,
        ["1:m3", "2:m4", "3:m5", "4:m6", "5:summary of m1 m2"]
    );
    let f = s.session("f").await.unwrap().unwrap();
    assert_eq!(f.user_id.as_deref(), Some("alice"));
    assert_eq!(f.model.as_deref(), Some("m1"));
    assert_eq!(
        f.metadata["forked_from"],
        json!({"session": "src", "at": 7})
    );
    assert_eq!(
        s.graph_get("f", "", None).await.unwrap(),
        s.graph_get("src", "", None).await.unwrap()
    );
    // The source is untouched; a fork past the end is refused and writes nothing.
    assert_eq!(
        s.messages("src", MessageQuery::all()).await.unwrap().len(),
        8
    );
    let err = t.cli_rejected(&["session", "fork", "src", "--at", "9", "--id", "g"]);
    assert!(err.contains("last seq is 8"), "{err}");
    assert!(s.session("g").await.unwrap().is_none());
}
