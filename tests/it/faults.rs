//! Redis down and Redis with a password: typed errors from the library, the error contract
//! from the CLI.

use agentstate::redis_server::{free_port, RedisServer};
use agentstate::*;

use crate::support::{cli_at, env};

#[tokio::test]
async fn nothing_listening_is_redis_unavailable() {
    let url = format!("redis://127.0.0.1:{}", free_port());
    let err = Store::connect(Config::new(&url)).await.unwrap_err();
    assert!(matches!(err, Error::RedisUnavailable { .. }), "{err:?}");

    let dir = tempfile::tempdir().unwrap();
    let out = cli_at(&url, dir.path(), &["session", "list"]);
    assert!(
        out.runtime_error().starts_with("error: redis unavailable"),
        "{out:?}"
    );
}

#[tokio::test]
async fn a_store_whose_redis_died_reports_it_and_recovers_after_a_restart() {
    let mut t = env().await;
    t.store
        .create_session(&NewSession::new().id("s"))
        .await
        .unwrap();
    t.server.kill();
    let err = t.store.session("s").await.unwrap_err();
    assert!(matches!(err, Error::RedisUnavailable { .. }), "{err:?}");
    t.server.restart_empty().unwrap();
    // The pool reconnects; the empty server knows no session.
    let mut answer = t.store.session("s").await;
    for _ in 0..20 {
        if answer.is_ok() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        answer = t.store.session("s").await;
    }
    assert_eq!(answer.unwrap(), None);
}

/// Connections used a moment ago are handed out without a PING; one the restart closed is
/// skipped before anything is sent on it, so the first call after the restart succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_call_after_a_restart_between_calls_succeeds() {
    let mut t = env().await;
    t.store
        .create_session(&NewSession::new().id("s"))
        .await
        .unwrap();
    t.server.restart_empty().unwrap();
    assert_eq!(t.store.session("s").await.unwrap(), None);
}

#[tokio::test]
async fn a_password_or_acl_protected_redis_works_with_credentials_in_the_url() {
    let server = RedisServer::start().unwrap();
    let mut admin = server.connection();
    let acl = ["SETUSER", "agent", "on", ">s3cret", "~*", "+@all"];
    let _: () = redis::cmd("ACL").arg(&acl[..]).query(&mut admin).unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "requirepass", "pa55"][..])
        .query(&mut admin)
        .unwrap();
    let port = server.port();

    for (n, url) in [
        (1, format!("redis://:pa55@127.0.0.1:{port}")),
        (3, format!("redis://agent:s3cret@127.0.0.1:{port}")),
    ] {
        let store = Store::connect(Config::new(&url)).await.unwrap();
        if n == 1 {
            let db = tempfile::tempdir().unwrap();
            agentstate::SpillDaemon::open(store.clone(), SpillConfig::new(db.path().join("a.db")))
                .await
                .unwrap()
                .run_once()
                .await
                .unwrap();
            store
                .create_session(&NewSession::new().id("locked"))
                .await
                .unwrap();
        }
        assert_eq!(
            store
                .append("locked", &NewMessage::new("user"))
                .await
                .unwrap(),
            n
        );
        let out = cli_at(
            &url,
            server.dir(),
            &["msg", "append", "locked", "--role", "user"],
        );
        assert_eq!(
            (out.code, out.stdout.as_str()),
            (0, format!("{}\n", n + 1).as_str()),
            "{out:?}"
        );
    }

    let wrong = format!("redis://:nope@127.0.0.1:{port}");
    assert!(Store::connect(Config::new(&wrong)).await.is_err());
    cli_at(&wrong, server.dir(), &["session", "list"]).runtime_error();
    let anonymous = format!("redis://127.0.0.1:{port}");
    cli_at(&anonymous, server.dir(), &["session", "list"]).runtime_error();
}
