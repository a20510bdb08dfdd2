//! `agentstate ui` over each durable tier: a session Redis no longer holds is shown from its
//! durable history (read through the durable-tier interface, SQLite or PostgreSQL) and the
//! page says so, without restoring it. The browser tests (tests/browser) cover the pages in
//! Chromium; these read the HTML as it is served.

use agentstate::internals::redis_server::free_port;
use agentstate::*;

use super::{on_both_backends, spill_process};
use crate::support::{http_get, wait_until, TestEnv};

/// An `agentstate ui` process on `t` and its port, once it answers.
async fn console(t: &TestEnv) -> (std::process::Child, u16) {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let child = spill_process(t, &["ui", "--listen", &addr])
        .spawn()
        .unwrap();
    wait_until("the console answers", || {
        http_get(port, "/sessions", &[]).is_some_and(|(status, _)| status == 200)
    })
    .await;
    (child, port)
}

async fn an_expired_session_is_shown_from_its_durable_history_and_not_restored(t: TestEnv) {
    let s = &t.store;
    let sid = s
        .create_session(&NewSession::new().id("gone-run").user("alice"))
        .await
        .unwrap();
    for text in ["plan <b>it</b>", "step one", "step two"] {
        s.append(&sid, &NewMessage::new("user").content(text))
            .await
            .unwrap();
    }
    s.compact(&sid, &Compaction::new(2, 3, "two steps, folded"))
        .await
        .unwrap();
    let d = s
        .record_decision(&sid, &NewDecision::new("take the train", "cheaper"))
        .await
        .unwrap();
    s.record_outcome(&d, "booked").await.unwrap();
    t.flush().await;
    t.expire_session(&sid);
    // A daemon runs (its own process: the test blocks on HTTP), so a restore request would
    // be served.
    let mut daemon = spill_process(&t, &["spill", "--interval-ms", "5"])
        .spawn()
        .unwrap();
    let (mut ui, port) = console(&t).await;

    let (status, list) = http_get(port, "/sessions?tier=durable", &[]).unwrap();
    assert_eq!(status, 200);
    assert!(list.contains(r#"<tr data-session="gone-run">"#), "{list}");
    assert!(
        list.contains(r#"<span class="badge expired">expired</span>"#),
        "{list}"
    );

    let (status, page) = http_get(port, "/sessions/gone-run", &[]).unwrap();
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Redis does not hold this session"), "{page}");
    // Agent text escaped; the compacted range folded under its note; the outcome there.
    assert!(page.contains("plan &lt;b&gt;it&lt;/b&gt;"), "{page}");
    assert!(page.contains(r#"data-from="2" data-to="3""#), "{page}");
    assert!(page.contains("two steps, folded"), "{page}");
    assert!(
        page.contains(r#"<span class="outcome-text">booked</span>"#),
        "{page}"
    );
    // No live updates for it, and nothing restored it.
    assert!(!page.contains("data-live="), "{page}");
    assert_eq!(s.session(&sid).await.unwrap(), None);

    let (status, _) = http_get(port, "/sessions/never-was", &[]).unwrap();
    assert_eq!(status, 404);
    ui.kill().unwrap();
    ui.wait().unwrap();
    daemon.kill().unwrap();
    daemon.wait().unwrap();
}
on_both_backends!(an_expired_session_is_shown_from_its_durable_history_and_not_restored);
