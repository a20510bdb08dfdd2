//! `sslmode` on a `postgres://` `--db`, against a private server that takes TLS connections
//! only: `require` encrypts, `disable` is turned away, `verify-full` checks the chain and the
//! host name against `sslrootcert` (or the platform's roots), `verify-ca` the chain only.

use crate::security::tls::{private_ca, private_ca_for};
use crate::support::pg_server::PgServer;
use crate::support::{env_without_daemon, PgDatabase, TestEnv};

/// `agentstate --db URL spill --once` (connects, migrates, drains an empty Redis).
fn spill_once(t: &TestEnv, url: &str) -> crate::support::CliOutput {
    t.cli(&["--db", url, "spill", "--once"])
}

#[tokio::test]
async fn each_sslmode_connects_or_refuses_as_libpq_does() {
    let dir = tempfile::tempdir().unwrap();
    let [ca, cert, key] = private_ca(dir.path());
    let pg = PgServer::start_tls(&cert, &key);
    let db = PgDatabase::create_on(&pg.socket_admin_url());
    let t = env_without_daemon().await;
    let url = |params: &str| {
        format!(
            "postgres://postgres@127.0.0.1:{}/{}?{params}",
            pg.port(),
            db.name
        )
    };
    let root = format!("sslrootcert={}", ca.display());

    for ok in [
        "sslmode=require",
        "sslmode=prefer",
        &format!("sslmode=verify-full&{root}"),
    ] {
        let out = spill_once(&t, &url(ok));
        assert_eq!(out.code, 0, "{ok}: {out:?}");
    }
    let plain = spill_once(&t, &url("sslmode=disable"));
    let err = plain.runtime_error();
    assert!(
        err.contains("no pg_hba.conf entry") && err.contains("no encryption"),
        "{err}"
    );
    // The platform's roots do not know the private CA.
    let unknown = spill_once(&t, &url("sslmode=verify-full"));
    let err = unknown.runtime_error();
    assert!(err.contains("UnknownIssuer"), "{err}");
    let bad = spill_once(&t, &url("sslmode=sometimes"));
    assert!(
        bad.runtime_error()
            .contains("sslmode=sometimes is not one of"),
        "{bad:?}"
    );

    // A certificate for another host: the chain is good, the name is not.
    let other = tempfile::tempdir().unwrap();
    let [other_ca, other_cert, other_key] =
        private_ca_for(other.path(), "subjectAltName=DNS:elsewhere.example");
    pg.replace_certificate(&other_cert, &other_key);
    let root = format!("sslrootcert={}", other_ca.display());
    let full = spill_once(&t, &url(&format!("sslmode=verify-full&{root}")));
    let err = full.runtime_error();
    assert!(
        err.contains("certificate not valid for name \"127.0.0.1\""),
        "{err}"
    );
    let ca_only = spill_once(&t, &url(&format!("sslmode=verify-ca&{root}")));
    assert_eq!(ca_only.code, 0, "{ca_only:?}");
}
