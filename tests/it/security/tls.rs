//! `rediss://` URLs: the store and the CLI talk to a TLS-only listener of a real redis-server.

use std::process::Command;

use agentstate::test_support::redis_server::{free_port, RedisServer};
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
    let (server, tls_port) = tls_listener(&cert, &key);
    (server, format!("rediss://127.0.0.1:{tls_port}/#insecure"))
}

/// A redis-server with a TLS listener serving `cert` / `key` (clients not authenticated),
/// and that listener's port.
fn tls_listener(cert: &std::path::Path, key: &std::path::Path) -> (RedisServer, u16) {
    let tls_port = free_port();
    let server = RedisServer::start_with(&[
        "--tls-port",
        &tls_port.to_string(),
        "--tls-cert-file",
        cert.to_str().unwrap(),
        "--tls-key-file",
        key.to_str().unwrap(),
        "--tls-auth-clients",
        "no",
    ])
    .unwrap();
    (server, tls_port)
}

#[tokio::test]
async fn a_store_and_the_cli_work_over_rediss() {
    let dir = tempfile::tempdir().unwrap();
    let (server, url) = tls_server(dir.path());
    let store = Store::connect(Config::new(&url)).await.unwrap();
    crate::support::daemon_pass(&store, SpillConfig::new(dir.path().join("t.db"))).await;
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
        .args(["--content", "over tls, from the CLI"])
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

/// A private CA, and a certificate it signed for `localhost` / 127.0.0.1 (EC keys: quick).
/// Returns the paths of the CA certificate, the server certificate and its key.
pub(crate) fn private_ca(dir: &std::path::Path) -> [std::path::PathBuf; 3] {
    private_ca_for(dir, "subjectAltName=DNS:localhost,IP:127.0.0.1")
}

/// Like [`private_ca`], the server certificate naming `san` (an openssl subjectAltName line).
pub(crate) fn private_ca_for(dir: &std::path::Path, san: &str) -> [std::path::PathBuf; 3] {
    let p = |name: &str| dir.join(name);
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl is needed to make the test certificates");
        assert!(out.status.success(), "openssl {args:?}: {out:?}");
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &[
                "-days",
                "1",
                "-subj",
                "/CN=test-ca",
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
            ],
        ]
        .concat(),
    );
    openssl(
        &[
            &["req"][..],
            &ec,
            &[
                "-subj",
                "/CN=localhost",
                "-keyout",
                "srv.key",
                "-out",
                "srv.csr",
            ],
        ]
        .concat(),
    );
    std::fs::write(
        p("ext.cnf"),
        format!("{san}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"),
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "srv.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-out",
        "srv.pem",
        "-extfile",
        "ext.cnf",
    ]);
    [p("ca.pem"), p("srv.pem"), p("srv.key")]
}

/// README: a Redis whose certificate a private CA signed is verified once SSL_CERT_FILE names
/// that CA; without it the error says so and what to set.
#[test]
fn ssl_cert_file_makes_a_private_ca_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let [ca, cert, key] = private_ca(dir.path());
    let (_server, tls_port) = tls_listener(&cert, &key);
    let url = format!("rediss://localhost:{tls_port}");
    let cli_with = |ca: Option<&std::path::Path>, args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentstate"));
        cmd.env_remove("AGENTSTATE_LOG")
            .env_remove("AGENTSTATE_DB")
            .env_remove("SSL_CERT_DIR")
            .current_dir(dir.path())
            .args(["--redis", &url])
            .args(args);
        match ca {
            Some(ca) => cmd.env("SSL_CERT_FILE", ca),
            None => cmd.env_remove("SSL_CERT_FILE"),
        };
        crate::support::cli_output(cmd.output().unwrap())
    };
    let cli = |ca: Option<&std::path::Path>| {
        // The namespace's daemon first (it binds the namespace), then an agent's create.
        if ca.is_some() {
            assert_eq!(cli_with(ca, &["spill", "--once"]).code, 0);
        }
        cli_with(ca, &["session", "create", "--id", "ca"])
    };
    assert_eq!(
        cli(None).runtime_error(),
        format!(
            "error: Redis at localhost:{tls_port} presented a TLS certificate this machine does \
             not trust: invalid peer certificate: UnknownIssuer — for a private CA, set \
             SSL_CERT_FILE=/path/to/ca.pem (PEM); `#insecure` at the end of a rediss:// URL \
             skips verification (tests only)"
        )
    );
    let out = cli(Some(&ca));
    assert_eq!((out.code, out.stdout.as_str()), (0, "ca\n"), "{out:?}");
}

/// The library (not the CLI) verifies a Redis' certificate against the CA SSL_CERT_FILE
/// names, and refuses one issued by that CA for another host name. SSL_CERT_FILE is read
/// from the process environment, so the library half runs in a child process of this test
/// binary (`library_side_of_tls_verification`, ignored in a plain run) with it set.
#[test]
fn the_library_verifies_the_ca_and_refuses_a_certificate_for_another_host() {
    let dir = tempfile::tempdir().unwrap();
    let [ca, cert, key] = private_ca(dir.path());
    let (_good, good_port) = tls_listener(&cert, &key);
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    // A key and request for a host that is not localhost (private_ca_for's own CA there is
    // not used), signed by the CA the child trusts.
    private_ca_for(&other, "subjectAltName=DNS:redis.example");
    let out = Command::new("openssl")
        .args(["x509", "-req", "-in"])
        .arg(other.join("srv.csr"))
        .arg("-CA")
        .arg(&ca)
        .arg("-CAkey")
        .arg(dir.path().join("ca.key"))
        .args(["-CAcreateserial", "-days", "1", "-out"])
        .arg(other.join("wrong-host.pem"))
        .arg("-extfile")
        .arg(other.join("ext.cnf"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let (_wrong, wrong_port) = tls_listener(&other.join("wrong-host.pem"), &other.join("srv.key"));
    // The ignored half by its path in this binary (the module's path without the crate's
    // name), so that moving this file does not leave it unrun.
    let half = format!(
        "{}::library_side_of_tls_verification",
        module_path!().split_once("::").unwrap().1
    );
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", &half, "--nocapture"])
        .env("SSL_CERT_FILE", &ca)
        .env_remove("SSL_CERT_DIR")
        .env(
            "AGENTSTATE_TEST_TLS_GOOD",
            format!("rediss://localhost:{good_port}"),
        )
        .env(
            "AGENTSTATE_TEST_TLS_WRONG",
            format!("rediss://localhost:{wrong_port}"),
        )
        .env("AGENTSTATE_TEST_TLS_DB", dir.path().join("t.db"))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&child.stdout),
        String::from_utf8_lossy(&child.stderr)
    );
    assert!(child.status.success(), "{text}");
    assert!(
        text.contains("1 passed"),
        "the library half did not run:\n{text}"
    );
}

/// The child-process half of the test above (needs its environment: ignored in a plain run).
#[tokio::test]
#[ignore = "run by the_library_verifies_the_ca_and_refuses_a_certificate_for_another_host"]
async fn library_side_of_tls_verification() {
    let var = |name: &str| std::env::var(name).unwrap();
    let good = var("AGENTSTATE_TEST_TLS_GOOD");
    let store = Store::connect(Config::new(&good)).await.unwrap();
    let db = var("AGENTSTATE_TEST_TLS_DB");
    crate::support::daemon_pass(&store, SpillConfig::new(db)).await;
    store
        .create_session(&NewSession::new().id("verified"))
        .await
        .unwrap();
    let seq = store
        .append(
            "verified",
            &NewMessage::new("user").content("over verified tls"),
        )
        .await
        .unwrap();
    assert_eq!(seq, 1);
    // A certificate of the trusted CA, but for redis.example: refused.
    let wrong = var("AGENTSTATE_TEST_TLS_WRONG");
    let err = match Store::connect(Config::new(&wrong)).await {
        Err(err) => err,
        Ok(store) => store
            .create_session(&NewSession::new().id("never"))
            .await
            .unwrap_err(),
    };
    assert!(
        err.to_string()
            .contains("certificate not valid for name \"localhost\""),
        "not refused for its host name: {err:?}"
    );
}
