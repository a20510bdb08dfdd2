//! One run at a time across processes: session run leases with fencing tokens, the inbox and
//! the tool-effect ledger, raced by real `agentstate` processes (each CLI call is a process of
//! its own), with a holder paused past its lease and holders killed mid-run.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use agentstate::*;
use serde_json::{json, Value};

use crate::support::*;

/// Runs the CLI with the arguments `args(i)` in `n` processes at once; their outputs in
/// process order.
fn race(t: &TestEnv, n: usize, args: impl Fn(usize) -> Vec<String> + Sync) -> Vec<CliOutput> {
    let url = t.server.url();
    let dir = t.server.dir().to_path_buf();
    tokio::task::block_in_place(|| {
        std::thread::scope(|s| {
            let runs: Vec<_> = (0..n)
                .map(|i| {
                    let (args, url, dir) = (args(i), &url, &dir);
                    s.spawn(move || {
                        let words: Vec<&str> = args.iter().map(String::as_str).collect();
                        cli_at(url, dir, &words)
                    })
                })
                .collect();
            runs.into_iter().map(|h| h.join().unwrap()).collect()
        })
    })
}

/// `words` as owned arguments.
fn args(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

/// Each JSON line of `text`.
fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A shell running `script` in a process group of its own, with `$AS` the `agentstate`
/// binary on the test's Redis and the test's temp dir as its working directory.
fn shell(t: &TestEnv, script: &str) -> Child {
    let dir = t.server.dir();
    Command::new("sh")
        .arg("-c")
        .arg(format!("set -u\n{script}"))
        .env(
            "AS",
            format!(
                "{} --redis {}",
                env!("CARGO_BIN_EXE_agentstate"),
                t.server.url()
            ),
        )
        .env_remove("AGENTSTATE_REDIS_URL")
        .env_remove("AGENTSTATE_LOG")
        .env("AGENTSTATE_DB", dir.join("agentstate.db"))
        .current_dir(dir)
        .stdout(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap()
}

/// Sends `signal` to the process group of `child` (a [`shell`]: the shell and its CLI).
fn signal_group(child: &Child, signal: libc::c_int) {
    // SAFETY: kill(2) with a negative pid signals that process group; no memory is involved.
    unsafe { libc::kill(-(child.id() as libc::pid_t), signal) };
}

/// Waits until the lease of session `sid` lapsed (its holder stopped or died), then takes it
/// for owner `B`; asserts B's token is larger than the lapsed holder's `before`.
async fn take_over_after_lapse(t: &TestEnv, sid: &str, before: u64) -> Lease {
    wait_until("the holder's lease to lapse", HANG, || {
        t.cli_ok(&["lease", "show", sid]).trim() == "null"
    })
    .await;
    let lease = t
        .store
        .acquire_lease(sid, "B", Duration::from_secs(30))
        .await
        .unwrap();
    assert!(lease.token > before, "{} after {before}", lease.token);
    lease
}

/// Kills the process group of `child` (a [`shell`]) and reaps the shell.
fn kill_group(child: Child) {
    signal_group(&child, libc::SIGKILL);
    tokio::task::block_in_place(|| {
        let mut child = child;
        child.wait().unwrap()
    });
}

/// The text of file `name` in `dir` once it exists and ends with a newline.
async fn file_line(dir: &Path, name: &str) -> String {
    let path = dir.join(name);
    wait_until(&format!("{name} written"), HANG, || {
        std::fs::read_to_string(&path)
            .ok()
            .filter(|s| s.ends_with('\n'))
    })
    .await
}

/// The contents of session `sid`'s transcript, in seq order.
async fn transcript(store: &Store, sid: &str) -> Vec<String> {
    store
        .messages(sid, MessageQuery::all())
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.content.unwrap_or_default())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_race_for_a_lease_one_wins_and_the_token_grows_on_takeover() {
    let t = env().await;
    t.create_sessions(&["run".to_string()]).await;
    let acquire = |who: &'static str| {
        move |i: usize| {
            args(&[
                "lease",
                "acquire",
                "run",
                "--owner",
                &format!("{who}{i}"),
                "--ttl-ms",
                "1500",
            ])
        }
    };
    let first = race(&t, 6, acquire("p"));
    let winners: Vec<usize> = (0..6).filter(|i| first[*i].code == 0).collect();
    assert_eq!(winners.len(), 1, "{first:?}");
    let w = winners[0];
    let token: u64 = first[w].stdout.trim().parse().unwrap();
    for (i, out) in first.iter().enumerate().filter(|(i, _)| *i != w) {
        let line = out.runtime_error();
        assert!(
            line.contains(&format!("held by p{w} (token {token}) until 20")),
            "process {i}: {line}"
        );
        // The expiry as a UTC time and as "in N s" (at most the 1.5 s TTL), and what to do.
        let (_, rest) = line
            .split_once(" UTC (in ")
            .unwrap_or_else(|| panic!("{line}"));
        let (secs, _) = rest.split_once(" s) unless renewed").unwrap();
        assert!(secs.parse::<u64>().unwrap() <= 2, "{line}");
        assert!(line.contains("`agentstate lease show <session>`"), "{line}");
    }
    let shown: Value = serde_json::from_str(&t.cli_ok(&["lease", "show", "run"])).unwrap();
    assert_eq!(shown["owner"], json!(format!("p{w}")));
    assert_eq!(shown["token"], json!(token));
    let loser = (w + 1) % 6;
    let renew = |owner: &str, token: u64| {
        t.cli_ok(&[
            "lease",
            "renew",
            "run",
            "--owner",
            owner,
            "--token",
            &token.to_string(),
            "--ttl-ms",
            "300",
        ])
        .trim()
        .to_string()
    };
    assert_eq!(renew(&format!("p{loser}"), token), "false");
    assert_eq!(renew(&format!("p{w}"), token), "true");
    // Once the winner's lease lapses, a new race has a new winner with a larger token.
    wait_until("the lease to lapse", HANG, || {
        t.cli_ok(&["lease", "show", "run"]).trim() == "null"
    })
    .await;
    let second = race(&t, 6, acquire("q"));
    let winners: Vec<usize> = (0..6).filter(|i| second[*i].code == 0).collect();
    assert_eq!(winners.len(), 1, "{second:?}");
    let taken: u64 = second[winners[0]].stdout.trim().parse().unwrap();
    assert!(taken > token, "{taken} after {token}");
    // The former holder can neither renew nor release it now.
    assert_eq!(renew(&format!("p{w}"), token), "false");
    let release = |owner: &str, token: u64| {
        t.cli_ok(&[
            "lease",
            "release",
            "run",
            "--owner",
            owner,
            "--token",
            &token.to_string(),
        ])
        .trim()
        .to_string()
    };
    assert_eq!(release(&format!("p{w}"), token), "false");
    assert_eq!(release(&format!("q{}", winners[0]), taken), "true");
    assert_eq!(t.cli_ok(&["lease", "show", "run"]).trim(), "null");
    let again: u64 = t
        .cli_ok(&[
            "lease", "acquire", "run", "--owner", "r", "--ttl-ms", "1000",
        ])
        .trim()
        .parse()
        .unwrap();
    assert!(again > taken, "{again} after {taken}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_stopped_past_its_lease_wakes_to_find_every_fenced_write_refused() {
    let t = env().await;
    t.create_sessions(&["s".to_string()]).await;
    t.store
        .append("s", &NewMessage::new("user").content("hello"))
        .await
        .unwrap();
    let mail = NewMessage::new("user").content("mail");
    t.store.inbox_put("s", &[("mail-1", &mail)]).await.unwrap();
    // The holder takes the lease, waits for `go`, then tries each fenced write: the
    // transcript's and state's, the ledger's, the inbox's.
    let holder = shell(
        &t,
        r#"T=$($AS lease acquire s --owner A --ttl-ms 300) || exit 9
echo "$T" > token
until [ -e go ]; do sleep 0.02; done
for write in "msg append s --role assistant --content stale --fence $T" \
             "work set s k 1 --fence $T" "checkpoint create s mid --fence $T" \
             "compact s --from 1 --to 1 --note stale --fence $T" \
             "effects begin s call-A --args 1 --fence $T" \
             "effects finish s call-B --result 1 --fence $T" \
             "inbox claim s --owner A --token $T" \
             "inbox deliver s --owner A --token $T mail-1"; do
  $AS $write 2>> errors
  echo $? >> codes
done"#,
    );
    let token_a: u64 = file_line(t.server.dir(), "token")
        .await
        .trim()
        .parse()
        .unwrap();
    signal_group(&holder, libc::SIGSTOP);
    // Its lease lapses while it is stopped; another process takes the session over.
    let b = take_over_after_lapse(&t, "s", token_a).await;
    let successor = t.store.with_fence(Some(b.token));
    successor
        .append("s", &NewMessage::new("assistant").content("fresh"))
        .await
        .unwrap();
    let args = json!({"by": "B"});
    assert_eq!(
        successor.effect_begin("s", "call-B", &args).await.unwrap(),
        EffectStart::Started
    );
    let before = t.snapshot();
    std::fs::write(t.server.path("go"), "").unwrap();
    signal_group(&holder, libc::SIGCONT);
    let status = tokio::task::block_in_place(|| {
        let mut holder = holder;
        holder.wait().unwrap()
    });
    assert!(status.success(), "{status:?}");
    let codes = std::fs::read_to_string(t.server.path("codes")).unwrap();
    assert_eq!(codes.lines().collect::<Vec<_>>(), ["1"; 8]);
    let errors = std::fs::read_to_string(t.server.path("errors")).unwrap();
    assert_eq!(errors.lines().count(), 8, "{errors}");
    for line in errors.lines() {
        assert!(
            line.starts_with("error: fenced")
                && line.contains(&format!("taken over by B (token {})", b.token)),
            "{line}"
        );
    }
    assert_eq!(
        t.snapshot(),
        before,
        "a refused fenced write wrote something"
    );
    assert_eq!(transcript(&t.store, "s").await, ["hello", "fresh"]);
    // The ledger holds the successor's call only, still waiting for the successor's result.
    let ledger = t.store.effects("s").await.unwrap();
    assert_eq!(
        ledger
            .iter()
            .map(|e| (e.call_id.as_str(), e.state, e.args_digest.clone()))
            .collect::<Vec<_>>(),
        [("call-B", EffectState::Running, args_digest(&args))]
    );
    let inbox = t.store.inbox("s").await.unwrap();
    assert_eq!(inbox.len(), 1);
    assert_eq!(inbox[0].state, InboxState::Pending);
}

#[tokio::test]
async fn every_fenced_write_of_a_stale_or_released_token_writes_nothing() {
    let t = env().await;
    t.create_sessions(&["s".to_string()]).await;
    let ttl = Duration::from_secs(30);
    let old = t.store.acquire_lease("s", "A", ttl).await.unwrap();
    let stale = t.store.with_fence(Some(old.token));
    stale
        .append("s", &NewMessage::new("user").content("one"))
        .await
        .unwrap();
    assert!(t.store.release_lease("s", "A", old.token).await.unwrap());
    // Released: the holder's own token no longer writes.
    let err = t
        .rejected(stale.append("s", &NewMessage::new("user").content("late")))
        .await;
    assert!(matches!(err, Error::Fenced { holder: None, .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("released, or lost with Redis (nobody holds the lease)"),
        "{err}"
    );
    let new = t.store.acquire_lease("s", "B", ttl).await.unwrap();
    assert!(new.token > old.token);
    let m = NewMessage::new("user").content("late");
    let fenced = |e: Error| {
        assert!(
            matches!(&e, Error::Fenced { token, current, holder: Some(h) }
                if *token == old.token && *current == new.token && h == "B"),
            "{e:?}"
        );
    };
    fenced(t.rejected(stale.append("s", &m)).await);
    fenced(
        t.rejected(stale.append_many("s", &[m.clone(), m.clone()], None))
            .await,
    );
    fenced(t.rejected(stale.set_working("s", "k", &json!(1))).await);
    fenced(t.rejected(stale.delete_working("s", "k")).await);
    fenced(t.rejected(stale.checkpoint("s", "l", None)).await);
    fenced(
        t.rejected(stale.compact("s", &Compaction::new(1, 1, "n")))
            .await,
    );
    fenced(t.rejected(stale.put_checkpoint("s", "l", &json!({}))).await);
    fenced(
        t.rejected(stale.append_checkpointed("s", &m, None, "l", &json!({})))
            .await,
    );
    fenced(t.rejected(stale.pop_message("s")).await);
    fenced(t.rejected(stale.replace_message("s", 1, &m)).await);
    let args = json!({"n": 1});
    fenced(t.rejected(stale.effect_begin("s", "c1", &args)).await);
    t.store
        .with_fence(Some(new.token))
        .effect_begin("s", "c1", &args)
        .await
        .unwrap();
    fenced(t.rejected(stale.effect_finish("s", "c1", &json!(1))).await);
    t.store.inbox_put("s", &[("i1", &m)]).await.unwrap();
    fenced(
        t.rejected(t.store.inbox_claim("s", "A", old.token, 5))
            .await,
    );
    fenced(
        t.rejected(t.store.inbox_deliver("s", "A", old.token, &["i1"]))
            .await,
    );
    // The holder's fenced writes and unfenced ones go through.
    let current = t.store.with_fence(Some(new.token));
    assert_eq!(current.append("s", &m).await.unwrap(), 2);
    current.set_working("s", "k", &json!(2)).await.unwrap();
    current.checkpoint("s", "l", None).await.unwrap();
    assert_eq!(t.store.append("s", &m).await.unwrap(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_lease_guard_renews_and_reports_its_lease_lost() {
    let t = env().await;
    t.create_sessions(&["s".to_string()]).await;
    let ttl = Duration::from_millis(300);
    let run = t.store.run_lease("s", "A", ttl).await.unwrap();
    // Renewed in the background: nobody can take it however long the run works.
    for _ in 0..3 {
        tokio::time::sleep(ttl).await;
        let err = t.store.acquire_lease("s", "B", ttl).await.unwrap_err();
        assert!(
            matches!(err, Error::Leased { ref holder, .. } if holder == "A"),
            "{err:?}"
        );
    }
    assert!(!run.is_lost());
    run.store()
        .append("s", &NewMessage::new("assistant").content("working"))
        .await
        .unwrap();
    // An operator drops it; the next renewal learns it and the guard reports it lost.
    assert!(t.store.release_lease("s", "A", run.token()).await.unwrap());
    tokio::time::timeout(HANG, run.lost()).await.unwrap();
    let b = t.store.acquire_lease("s", "B", ttl).await.unwrap();
    let err = run
        .store()
        .append("s", &NewMessage::new("assistant").content("too late"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Fenced { current, .. } if current == b.token),
        "{err:?}"
    );
    assert!(!run.release().await.unwrap());
    assert_eq!(transcript(&t.store, "s").await, ["working"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inbox_items_sent_by_eight_processes_land_once_and_a_killed_holders_claims_go_to_the_next()
{
    let t = env().await;
    t.create_sessions(&["s".to_string()]).await;
    let items: Vec<String> = (1..=6).map(|k| format!("mail-{k}")).collect();
    // Eight senders put the same six items, each in its own order.
    let url = t.server.url();
    let dir = t.server.dir().to_path_buf();
    let printed: Vec<(String, String)> = tokio::task::block_in_place(|| {
        std::thread::scope(|s| {
            let senders: Vec<_> = (0..8)
                .map(|p| {
                    let (items, url, dir) = (&items, &url, &dir);
                    s.spawn(move || {
                        (0..items.len())
                            .map(|k| {
                                let item = &items[(k + p) % items.len()];
                                let out = cli_at(
                                    url,
                                    dir,
                                    &[
                                        "inbox",
                                        "put",
                                        "s",
                                        "--item-id",
                                        item,
                                        "--role",
                                        "user",
                                        "--content",
                                        item,
                                    ],
                                );
                                assert_eq!(out.code, 0, "{out:?}");
                                (item.clone(), out.stdout.trim().to_string())
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            senders
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        })
    });
    let mut accepted: BTreeMap<&str, usize> = BTreeMap::new();
    for (item, said) in &printed {
        *accepted.entry(item).or_default() += usize::from(said == "true");
    }
    assert_eq!(accepted.len(), 6);
    assert!(accepted.values().all(|n| *n == 1), "{accepted:?}");
    // A holder claims three, delivers one, and is killed before it delivers the others.
    let holder = shell(
        &t,
        r#"T=$($AS lease acquire s --owner A --ttl-ms 400) || exit 9
$AS inbox claim s --owner A --token "$T" --limit 3 > claimed || exit 9
first=$(head -n 1 claimed | sed 's/.*"item_id":"\([^"]*\)".*/\1/')
$AS inbox deliver s --owner A --token "$T" "$first" > delivered || exit 9
echo "$T" > token
sleep 30"#,
    );
    let token_a: u64 = file_line(t.server.dir(), "token")
        .await
        .trim()
        .parse()
        .unwrap();
    kill_group(holder);
    let claimed = json_lines(&std::fs::read_to_string(t.server.path("claimed")).unwrap());
    let claimed_ids: Vec<&str> = claimed
        .iter()
        .map(|c| c["item_id"].as_str().unwrap())
        .collect();
    assert_eq!(claimed.len(), 3);
    let states = |list: Vec<InboxItem>| -> Vec<(String, &'static str)> {
        list.into_iter()
            .map(|i| (i.item_id, i.state.as_str()))
            .collect()
    };
    let listed = states(t.store.inbox("s").await.unwrap());
    assert_eq!(
        listed.iter().filter(|(_, s)| *s == "claimed").count(),
        2,
        "{listed:?}"
    );
    // The next holder, once the dead one's lease lapsed, gets its claims back with the rest.
    let b = take_over_after_lapse(&t, "s", token_a).await;
    let next = t.store.inbox_claim("s", "B", b.token, 100).await.unwrap();
    let next_ids: Vec<&str> = next.iter().map(|i| i.item_id.as_str()).collect();
    assert_eq!(next_ids.len(), 5, "{next_ids:?}");
    assert!(claimed_ids[1..].iter().all(|id| next_ids.contains(id)));
    // The dead holder's token can neither claim nor deliver any more.
    let err = t
        .rejected(t.store.inbox_deliver("s", "A", token_a, &[next_ids[0]]))
        .await;
    assert!(matches!(err, Error::Fenced { .. }), "{err:?}");
    let seqs = t
        .store
        .inbox_deliver("s", "B", b.token, &next_ids)
        .await
        .unwrap();
    assert_eq!(seqs, [2, 3, 4, 5, 6]);
    // Delivering again changes nothing.
    let before = t.snapshot();
    assert_eq!(
        t.store
            .inbox_deliver("s", "B", b.token, &next_ids)
            .await
            .unwrap(),
        seqs
    );
    assert_eq!(t.snapshot(), before);
    // Each item is in the transcript exactly once, in one order, and says where.
    let lines = transcript(&t.store, "s").await;
    let mut sorted = lines.clone();
    sorted.sort();
    assert_eq!(sorted, items);
    let inbox = t.store.inbox("s").await.unwrap();
    for item in &inbox {
        assert_eq!(item.state, InboxState::Delivered, "{item:?}");
        let seq = item.seq.unwrap() as usize;
        assert_eq!(lines[seq - 1], item.item_id);
    }
    let printed = t.cli_ok(&["inbox", "list", "s"]);
    assert_eq!(json_lines(&printed).len(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_recorders_of_one_tool_call_start_it_once() {
    let t = env().await;
    t.create_sessions(&["run".to_string()]).await;
    let begin = |_| {
        args(&[
            "effects",
            "begin",
            "run",
            "call-1",
            "--args",
            r#"{"amount":42}"#,
        ])
    };
    let outs = race(&t, 8, begin);
    let started: Vec<&CliOutput> = outs
        .iter()
        .filter(|o| o.stdout.trim() == "started")
        .collect();
    assert_eq!(started.len(), 1, "{outs:?}");
    for out in outs.iter().filter(|o| o.stdout.trim() != "started") {
        assert_eq!(out.code, 0, "{out:?}");
        let record: Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(record["state"], "running", "{record}");
        assert_eq!(
            record["args_digest"],
            json!(args_digest(&json!({"amount": 42})))
        );
    }
    let finish = [
        "effects",
        "finish",
        "run",
        "call-1",
        "--result",
        r#"{"charged":true}"#,
    ];
    assert_eq!(t.cli_ok(&finish).trim(), "true");
    let again = ["effects", "finish", "run", "call-1", "--result", "2"];
    assert_eq!(t.cli_ok(&again).trim(), "false");
    // Every later recorder gets the first result instead of running the tool.
    for out in race(&t, 4, begin) {
        let record: Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(record["state"], "done");
        assert_eq!(record["result"], json!({"charged": true}));
    }
    // Other arguments under the same id are refused, writing nothing.
    let before = t.snapshot();
    let line = t.cli_rejected(&[
        "effects",
        "begin",
        "run",
        "call-1",
        "--args",
        r#"{"amount":43}"#,
    ]);
    assert!(line.contains("other arguments"), "{line}");
    assert_eq!(t.snapshot(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_between_intent_and_result_leaves_the_intent_unresolved() {
    let t = env().await;
    t.create_sessions(&["run".to_string()]).await;
    let run = shell(
        &t,
        r#"$AS effects begin run charge-7 --args '{"card":"x"}' > said || exit 9
mv said begun
sleep 30
$AS effects finish run charge-7 --result '{"charged":true}'"#,
    );
    assert_eq!(file_line(t.server.dir(), "begun").await, "started\n");
    kill_group(run);
    let unresolved = json_lines(&t.cli_ok(&["effects", "unresolved", "run"]));
    assert_eq!(unresolved.len(), 1);
    assert_eq!(unresolved[0]["call_id"], "charge-7");
    assert_eq!(unresolved[0]["state"], "running");
    // A resumed run asks first and is told, not started again.
    let asked = t
        .store
        .effect_begin("run", "charge-7", &json!({"card": "x"}))
        .await
        .unwrap();
    assert!(
        matches!(asked, EffectStart::Running(ref e) if e.call_id == "charge-7"),
        "{asked:?}"
    );
    // It reconciles (the charge went through), and the ledger is resolved.
    assert!(t
        .store
        .effect_finish("run", "charge-7", &json!({"charged": true}))
        .await
        .unwrap());
    assert!(t.store.unresolved_effects("run").await.unwrap().is_empty());
}
