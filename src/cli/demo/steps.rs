//! The scenario's eight steps, one function each, in the order `run` plays them.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::consumer::{Consumer, ConsumerOptions, DecisionEvent, StartFrom};
use crate::{
    AppendOptions, Compaction, Error, Lifecycle, MessageQuery, NewDecision, NewMessage, NewSession,
    Result, Store, Usage,
};
use serde_json::json;

use super::narrator::Narrator;
use super::observe::{differences, durable_counts, session_image, wait_caught_up};
use super::{DemoRedis, Scenario};

/// Messages each of the three agents appends to the planner's session.
const MESSAGES_PER_AGENT: usize = 20;

/// Waits for spawned agent tasks and collects what they return.
async fn join_all<T>(tasks: Vec<tokio::task::JoinHandle<Result<T>>>) -> Result<Vec<T>> {
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(t.await.map_err(|e| Error::io(e.to_string()))??);
    }
    Ok(out)
}

/// Step 1: the planner and its two workers (one linked, one detached).
pub(super) async fn sessions(sc: &Scenario, n: &mut Narrator) -> Result<()> {
    let Scenario {
        store,
        planner,
        workers: [worker_a, worker_b],
        ..
    } = sc;
    n.step("Sessions: a planner and two worker sub-agents");
    store
        .create_session(
            &NewSession::new()
                .id(planner)
                .user("alice")
                .model("planner-model"),
        )
        .await?;
    store
        .create_session(
            &NewSession::new()
                .id(worker_a)
                .parent(planner, Lifecycle::Linked),
        )
        .await?;
    store
        .create_session(
            &NewSession::new()
                .id(worker_b)
                .parent(planner, Lifecycle::Detached),
        )
        .await?;
    n.say(format!(
        "planner {planner} (user alice); {worker_a} linked, {worker_b} detached"
    ));
    let a = store.require_session(worker_a).await?;
    n.check(
        a.spawn_depth == 1 && a.parent.as_deref() == Some(planner.as_str()),
        "workers have spawn depth 1 and the planner as parent",
    );
    n.check(
        store.children(planner).await? == vec![worker_a.clone(), worker_b.clone()],
        "the planner lists both workers as children",
    );
    Ok(())
}

/// Step 2: both workers tick off plan steps in the planner's working state at the same time,
/// with compare-and-set, retrying on a conflict.
pub(super) async fn working_state(sc: &Scenario, n: &mut Narrator) -> Result<()> {
    let Scenario { store, planner, .. } = sc;
    n.step("Shared working state: both workers tick off plan steps concurrently (compare-and-set)");
    store
        .set_working(
            planner,
            "plan",
            &json!({"steps": ["research", "draft", "review"], "done": []}),
        )
        .await?;
    let mut tasks = Vec::new();
    for worker in ["worker-a", "worker-b"] {
        let store = store.clone();
        let planner = planner.clone();
        tasks.push(tokio::spawn(async move {
            let mut conflicts = 0;
            for step in ["research", "draft", "review"] {
                loop {
                    let state = store.working(&planner).await?;
                    let mut plan = state.values["plan"].clone();
                    plan["done"]
                        .as_array_mut()
                        .expect("done list")
                        .push(json!(format!("{worker}:{step}")));
                    match store
                        .set_working_if_version(&planner, "plan", &plan, state.version)
                        .await
                    {
                        Ok(_) => break,
                        Err(Error::Conflict { .. }) => conflicts += 1,
                        Err(e) => return Err(e),
                    }
                }
            }
            Ok(conflicts)
        }));
    }
    let conflicts: usize = join_all(tasks).await?.into_iter().sum();
    let state = store.working(planner).await?;
    let done: BTreeSet<String> = state.values["plan"]["done"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    n.say(format!(
        "{conflicts} stale writes were refused with a Conflict and retried on the new version"
    ));
    n.check(
        done.len() == 6 && state.version == 7,
        format!(
            "all 6 ticks present, none lost; working-state version is {}",
            state.version
        ),
    );
    Ok(())
}

/// Step 3: three agents append to the planner's session at once, plus a retried append.
/// Returns the last seq.
pub(super) async fn messages(sc: &Scenario, n: &mut Narrator) -> Result<u64> {
    let Scenario {
        store,
        planner,
        workers,
        ..
    } = sc;
    n.step("Messages: three agents append to the planner's session at the same time");
    let mut tasks = Vec::new();
    for agent in ["planner", "worker-a", "worker-b"] {
        let store = store.clone();
        let planner = planner.clone();
        tasks.push(tokio::spawn(async move {
            let mut seqs = Vec::new();
            for i in 0..MESSAGES_PER_AGENT {
                let role = if agent == "planner" {
                    "assistant"
                } else {
                    "tool"
                };
                let m = NewMessage::new(role)
                    .name(agent)
                    .content(format!("{agent} note {i}"))
                    .round_index(1);
                seqs.push(store.append(&planner, &m).await?);
            }
            Ok(seqs)
        }));
    }
    let mut seqs: Vec<u64> = join_all(tasks).await?.into_iter().flatten().collect();
    seqs.sort_unstable();
    let expected: Vec<u64> = (1..=(3 * MESSAGES_PER_AGENT) as u64).collect();
    n.check(
        seqs == expected,
        format!(
            "seqs are exactly 1..={}: unique and gapless",
            expected.len()
        ),
    );
    let retry = AppendOptions::new().idempotency_key("final-answer");
    let answer = NewMessage::new("assistant")
        .name("planner")
        .content("plan complete");
    let first = store.append_with(planner, &answer, &retry).await?;
    let again = store.append_with(planner, &answer, &retry).await?;
    n.check(
        first == again,
        format!(
            "a retried append (same idempotency key) returns seq {first} again and writes nothing"
        ),
    );
    for w in workers {
        store
            .append(w, &NewMessage::new("user").content("your part of the plan"))
            .await?;
    }
    store
        .record_usage(planner, &Usage::new(1, 1200, 340).model("planner-model"))
        .await?;
    Ok(first)
}

/// A member of the demo's consumer group `executors`.
async fn executor(store: &Store, name: &str) -> Result<Consumer> {
    let options = ConsumerOptions::new()
        .start(StartFrom::Now)
        .block(Duration::from_millis(200));
    store.consumer("executors", name, options).await
}

/// Step 4: the planner records decisions; two consumers of one group act on them and record
/// outcomes. Returns the first consumer, which step 8 uses again.
pub(super) async fn decisions(sc: &Scenario, n: &mut Narrator) -> Result<Consumer> {
    let Scenario { store, planner, .. } = sc;
    n.step(
        "Decisions: the planner records decisions; a consumer group of two services acts on them",
    );
    let mut c1 = executor(store, "exec-1").await?;
    let mut c2 = executor(store, "exec-2").await?;
    let mut ids = Vec::new();
    for (d, r, act) in [
        ("publish the draft", "review passed", "deploy docs"),
        ("notify the team", "release is ready", "send mail"),
        ("archive worker-b", "its part is done", "archive"),
    ] {
        ids.push(
            store
                .record_decision(planner, &NewDecision::new(d, r).action(act))
                .await?,
        );
    }
    let mut seen = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.len() < ids.len() && Instant::now() < deadline {
        for (name, c) in [("exec-1", &mut c1), ("exec-2", &mut c2)] {
            let batch = c.read().await?;
            for d in &batch {
                if let DecisionEvent::Decision(dec) = &d.event {
                    n.say(format!(
                        "{name} got {:?} -> does {:?}",
                        dec.decision,
                        dec.planned_action.as_deref().unwrap_or("-")
                    ));
                    store
                        .record_outcome(&dec.id, &format!("done by {name}"))
                        .await?;
                    seen.insert(dec.id.clone());
                }
            }
            c.ack(&batch).await?;
        }
    }
    n.check(
        seen == ids.iter().cloned().collect(),
        "every decision was delivered to the group and acted on",
    );
    n.check(
        store.incomplete_decisions(Some(planner)).await?.is_empty(),
        "no decision is left without an outcome",
    );
    Ok(c1)
}

/// Step 5: the first 50 messages become one note. Returns the note's seq and the number of
/// messages in the history.
pub(super) async fn compaction(
    sc: &Scenario,
    n: &mut Narrator,
    last_seq: u64,
) -> Result<(u64, usize)> {
    let Scenario { store, planner, .. } = sc;
    n.step("Compaction: the first 50 messages become one summary note");
    let (compact_seq, note_seq) = store
        .compact(
            planner,
            &Compaction::new(1, 50, "Agents researched, drafted and reviewed the plan.")
                .tokens(9000, 120)
                .round_index(1),
        )
        .await?;
    let active = store.messages(planner, MessageQuery::active()).await?;
    let all = store.messages(planner, MessageQuery::all()).await?;
    let active_seqs: Vec<u64> = active.iter().map(|m| m.seq).collect();
    let want: Vec<u64> = (51..=last_seq).chain([note_seq]).collect();
    n.say(format!(
        "compaction #{compact_seq}, note at seq {note_seq}; history keeps all {} messages",
        all.len()
    ));
    n.check(
        active_seqs == want,
        format!(
            "the active view is seqs 51..={last_seq} plus the note: {} messages instead of {}",
            active.len(),
            all.len()
        ),
    );
    Ok((note_seq, all.len()))
}

/// Step 6: the plan is promoted from working state to a durable checkpoint.
pub(super) async fn checkpoint(sc: &Scenario, n: &mut Narrator) -> Result<()> {
    let Scenario { store, planner, .. } = sc;
    n.step("Checkpoint: the finished plan is promoted from working state to durable state");
    let ckpt = store
        .checkpoint(planner, "plan-done", Some(&["plan"]))
        .await?;
    let latest = store.checkpoint_latest(planner, "plan-done").await?;
    n.check(
        latest.as_ref().map(|c| c.id.as_str()) == Some(ckpt.as_str()),
        format!("checkpoint {ckpt} holds the plan"),
    );
    Ok(())
}

/// Step 7: the daemon catches up; the durable tier holds the history, decisions and
/// checkpoint.
pub(super) async fn spill(sc: &Scenario, n: &mut Narrator, history: usize) -> Result<()> {
    let Scenario {
        store, planner, db, ..
    } = sc;
    let tier = sc.tier();
    n.step(&format!(
        "Spill: the daemon copies the write-ahead log and decisions into {tier}"
    ));
    let caught_up = wait_caught_up(store, Duration::from_secs(15)).await?;
    n.check(
        caught_up,
        format!("every wal and decisions entry is committed to {tier}"),
    );
    let rows = durable_counts(db, &store.config().namespace, planner).await?;
    n.say(format!(
        "{tier} holds {} messages, {} decisions and {} checkpoint of the planner",
        rows.0, rows.1, rows.2
    ));
    n.check(
        rows.0 == history as i64 && rows.1 == 3 && rows.2 == 1,
        format!("{tier} has the full history, the decisions and the checkpoint"),
    );
    Ok(())
}

/// Step 8: Redis loses everything; the next calls restore the session from the durable tier, seqs go
/// on, and the consumer group receives a decision recorded after the loss.
pub(super) async fn redis_lost(
    sc: &Scenario,
    n: &mut Narrator,
    redis: DemoRedis,
    consumer: &mut Consumer,
    note_seq: u64,
    history: usize,
) -> Result<DemoRedis> {
    let Scenario { store, planner, .. } = sc;
    n.step(&format!(
        "Redis is lost; the next call restores the session from {}",
        sc.tier()
    ));
    let before = session_image(store, planner).await?;
    let redis = match redis {
        DemoRedis::Private(mut server) => {
            server.restart_empty()?;
            n.say("the private redis-server was killed and restarted empty");
            DemoRedis::Private(server)
        }
        DemoRedis::Shared(url) => {
            store.admin().wipe_namespace().await?;
            n.say(format!(
                "every `{}` key was deleted",
                store.keys().namespace_pattern()
            ));
            DemoRedis::Shared(url)
        }
    };
    let live = store.admin().scan_namespace().await.unwrap_or_default();
    n.check(
        live.iter().all(|k| !k.contains(planner.as_str())),
        "nothing of the session is left in Redis",
    );
    let after = session_image(store, planner).await?;
    let differs = differences(&before, &after);
    n.check(
        differs.is_empty(),
        format!(
            "session meta, all {history} messages (seqs, states, bytes), compactions, usage, \
             checkpoints and sub-agents are back exactly{}",
            if differs.is_empty() {
                String::new()
            } else {
                format!("; differs: {}", differs.join(", "))
            }
        ),
    );
    n.check(
        store.working(planner).await?.values.is_empty(),
        "working state is ephemeral: it comes back empty, as designed",
    );
    let next = store
        .append(planner, &NewMessage::new("user").content("thanks!"))
        .await?;
    n.check(
        next == note_seq + 1,
        format!("the next append gets seq {next}: allocation continues where it stopped"),
    );
    let follow_up = store
        .record_decision(
            planner,
            &NewDecision::new("ship the release", "the plan survived the outage").action("tag v1"),
        )
        .await?;
    let mut got = false;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !got && Instant::now() < deadline {
        let batch = consumer.read().await?;
        got = batch
            .iter()
            .any(|d| matches!(&d.event, DecisionEvent::Decision(dec) if dec.id == follow_up));
        consumer.ack(&batch).await?;
    }
    n.check(
        got,
        "the consumer group re-joins the recreated streams and receives a decision recorded \
         after the loss",
    );
    n.check(
        wait_caught_up(store, Duration::from_secs(15)).await?,
        format!(
            "the daemon has flushed the post-outage writes to {} as well",
            sc.tier()
        ),
    );
    Ok(redis)
}
