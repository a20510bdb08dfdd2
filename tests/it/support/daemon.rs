//! `agentstate spill` run as a process of its own, killed when dropped.

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};

use super::TestEnv;

/// A running `agentstate spill` process, killed when dropped (a failed assertion leaves none
/// running).
pub struct Daemon(pub Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Daemon {
    /// Stops it with SIGTERM (it drains, commits, releases its leases) and waits.
    pub fn terminate(&mut self) -> ExitStatus {
        // SAFETY: signals our own child, not reaped yet.
        unsafe {
            libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM);
        }
        self.0.wait().unwrap()
    }
}

/// Starts `agentstate [--json] spill --interval-ms 5 --lease-ms 500 <extra>` on the test's
/// Redis and the SQLite file `db`; stdout is discarded (piped with `json`), stderr goes to
/// `stderr`.
pub fn spill_daemon(t: &TestEnv, db: &Path, extra: &[&str], json: bool, stderr: Stdio) -> Daemon {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentstate"));
    // a spool goes to the working directory on PostgreSQL: the test's, not the checkout
    cmd.current_dir(t.server.path("."))
        .env_remove("AGENTSTATE_LOG")
        .arg("--redis")
        .arg(t.server.url())
        .arg("--db")
        .arg(db);
    if json {
        cmd.arg("--json").stdout(Stdio::piped());
    } else {
        cmd.stdout(Stdio::null());
    }
    cmd.args(["spill", "--interval-ms", "5", "--lease-ms", "500"])
        .args(extra)
        .stderr(stderr);
    Daemon(cmd.spawn().unwrap())
}
