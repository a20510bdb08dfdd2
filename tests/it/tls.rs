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
fn private_ca(dir: &std::path::Path) -> [std::path::PathBuf; 3] {
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
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
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
    let cli = |ca: Option<&std::path::Path>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentstate"));
        cmd.env_remove("AGENTSTATE_LOG")
            .env_remove("SSL_CERT_DIR")
            .current_dir(dir.path())
            .args(["--redis", &url, "session", "create", "--id", "ca"]);
        match ca {
            Some(ca) => cmd.env("SSL_CERT_FILE", ca),
            None => cmd.env_remove("SSL_CERT_FILE"),
        };
        crate::support::cli_output(cmd.output().unwrap())
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
