//! `agentstate ui` over each durable tier: a session Redis no longer holds is shown from its
//! durable history (read through the durable-tier interface, SQLite or PostgreSQL) and the
//! page says so, without restoring it. The browser tests (tests/browser) cover the pages in
//! Chromium; these read the HTML as it is served.

use agentstate::test_support::redis_server::free_port;
use agentstate::*;

use crate::support::{env, http_get, http_get_as, wait_until, TestEnv, HANG};
use crate::support::{on_both_backends, spill_process};

/// An `agentstate ui` process on `t` and its port, once it answers.
async fn console(t: &TestEnv) -> (std::process::Child, u16) {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let child = spill_process(t, &["ui", "--listen", &addr])
        .spawn()
        .unwrap();
    wait_until("the console answers", HANG, || {
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
    let late = NewMessage::new("user").content("also <i>lunch</i>");
    s.inbox_put(&sid, &[("late-1", &late)]).await.unwrap();
    let args = serde_json::json!({"seat": 42});
    s.effect_begin(&sid, "call-pay", &args).await.unwrap();
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
    // Its inbox and tool-effect ledger from the same tier; no lease (leases are live only).
    assert!(
        page.contains(r#"<tr data-item="late-1" data-state="pending">"#),
        "{page}"
    );
    assert!(page.contains("also &lt;i&gt;lunch&lt;/i&gt;"), "{page}");
    assert!(
        page.contains(r#"<tr data-call="call-pay" class="unresolved">"#),
        "{page}"
    );
    assert!(
        page.contains(r#"<span class="badge free">free</span>"#),
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

/// Stops `child` (a console or daemon process of the test).
fn stop(mut child: std::process::Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test]
async fn a_malformed_request_gets_400_an_unknown_session_404_and_a_store_down_503() {
    let mut t = env().await;
    t.store
        .create_session(&NewSession::new().id("known").user("alice"))
        .await
        .unwrap();
    let (ui, port) = console(&t).await;
    let long = format!("/sessions/{}", "x".repeat(200));
    for (path, status, says) in [
        ("/sessions/bad%20id", 400, "invalid session id"),
        (long.as_str(), 400, "invalid session id"),
        ("/sessions/bad%20id/events", 400, "invalid session id"),
        ("/sessions?user=bad%20user", 400, "invalid user id"),
        (
            "/sessions?tier=sideways",
            400,
            "tier &quot;sideways&quot;: expected live, durable",
        ),
        (
            "/sessions?page=minus",
            400,
            "the session list's filter: Failed to deserialize query string: page",
        ),
        ("/sessions/never-was", 404, "Unknown session"),
        ("/sessions/known", 200, "alice"),
        (
            "/sessions?tier=live&user=alice",
            200,
            r#"<tr data-session="known">"#,
        ),
    ] {
        let (got, body) = http_get(port, path, &[]).unwrap();
        assert_eq!(got, status, "{path}: {body}");
        assert!(body.contains(says), "{path}: {body}");
    }
    // A page shows what is wrong with the request, not "cannot read that now".
    let (_, body) = http_get(port, "/sessions/bad%20id", &[]).unwrap();
    assert!(body.contains("<h1>Bad request</h1>"), "{body}");
    // Redis down is the store's failure, not the request's: 503, worth trying again.
    t.server.stop();
    let (got, body) = http_get(port, "/sessions/known", &[]).unwrap();
    assert_eq!(got, 503, "{body}");
    assert!(body.contains("Cannot read that now"), "{body}");
    stop(ui);
}

#[tokio::test]
async fn on_loopback_without_a_token_only_requests_naming_this_server_are_served() {
    let t = env().await;
    let (ui, port) = console(&t).await;
    let own = format!("127.0.0.1:{port}");
    let local = format!("localhost:{port}");
    for host in [
        own.as_str(),
        "127.0.0.1",
        local.as_str(),
        "localhost",
        "[::1]:8080",
    ] {
        let (status, body) = http_get_as(port, host, "/sessions", &[]).unwrap();
        assert_eq!(status, 200, "{host}: {body}");
    }
    // A page of another site whose name was rebound to 127.0.0.1 sends that name.
    let rebound = format!("attacker.example:{port}");
    for host in [
        rebound.as_str(),
        "attacker.example",
        "localhost.attacker.example",
    ] {
        for path in [
            "/sessions",
            "/sessions/known",
            "/assets/console.js",
            "/login",
        ] {
            let (status, body) = http_get_as(port, host, path, &[]).unwrap();
            assert_eq!(status, 403, "{host}{path}: {body}");
            assert_eq!(body.lines().count(), 1, "{body}");
            assert!(
                body.contains("answers only to 127.0.0.1, localhost"),
                "{body}"
            );
        }
    }
    stop(ui);

    // With a token, the token is the guard: any name is served to whoever carries it.
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let ui = spill_process(&t, &["ui", "--listen", &addr, "--token", "s3cret"])
        .spawn()
        .unwrap();
    let bearer = ["Authorization: Bearer s3cret"];
    wait_until("the console answers", HANG, || {
        http_get(port, "/sessions", &bearer).is_some_and(|(status, _)| status == 200)
    })
    .await;
    let (status, _) = http_get_as(port, "console.example", "/sessions", &bearer).unwrap();
    assert_eq!(status, 200);
    let (status, _) = http_get_as(port, "console.example", "/sessions", &[]).unwrap();
    assert_eq!(status, 401);
    stop(ui);
}
