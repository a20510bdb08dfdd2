//! `rediss://` URLs: the store and the CLI talk to a TLS-only listener of a real redis-server.

use std::process::Command;

use agentstate::redis_server::{free_port, RedisServer};
use agentstate::{Config, MessageQuery, NewMessage, NewSession, SpillConfig, Store};

/// A redis-server with a TLS listener (self-signed certificate) besides its plain port, and
/// the `rediss://` URL of that listener (`#insecure`: the certificate is not verified).
fn tls_server(dir: &std::path::Path) -> (RedisServer, String) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let status = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl is needed to make the test certificate");
    assert!(status.status.success(), "{status:?}");
    let tls_port = free_port().to_string();
    let server = RedisServer::start_with(&[
        "--tls-port",
        &tls_port,
        "--tls-cert-file",
        cert.to_str().unwrap(),
        "--tls-key-file",
        key.to_str().unwrap(),
        "--tls-auth-clients",
        "no",
    ])
    .unwrap();
    (server, format!("rediss://127.0.0.1:{tls_port}/#insecure"))
}

#[tokio::test]
async fn a_store_and_the_cli_work_over_rediss() {
    let dir = tempfile::tempdir().unwrap();
    let (server, url) = tls_server(dir.path());
    let store = Store::connect(Config::new(&url)).await.unwrap();
    agentstate::SpillDaemon::open(store.clone(), SpillConfig::new(dir.path().join("t.db")))
        .await
        .unwrap()
        .run_once()
        .await
        .unwrap();
    store
        .create_session(&NewSession::new().id("secure"))
        .await
        .unwrap();
    assert_eq!(
        store
            .append("secure", &NewMessage::new("user").content("over tls"))
            .await
            .unwrap(),
        1
    );
    let out = Command::new(env!("CARGO_BIN_EXE_agentstate"))
        .args(["--redis", &url, "msg", "append", "secure", "--role", "user"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2\n", "{out:?}");
    // Read back through the plain port: both writes are there.
    let plain = Store::connect(Config::new(server.url())).await.unwrap();
    let seqs: Vec<u64> = plain
        .messages("secure", MessageQuery::all())
        .await
        .unwrap()
        .iter()
        .map(|m| m.seq)
        .collect();
    assert_eq!(seqs, vec![1, 2]);
}
