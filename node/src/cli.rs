//! `runCli`: the `agentstate` command line inside the addon, so `npx agentstate ...` is the
//! same program as the cargo-built binary and the Python wheel's command.

use std::io::Write;

use napi_derive::napi;

/// Runs the command line `argv` (program name first) and returns its exit code (0, 1 on a
/// runtime error, 2 on bad usage). Blocks the calling thread: the package's bin calls it
/// with nothing else to run. `--help`, `--version` and usage errors end the process, as
/// they do for the binary. With `parent` (its pid), the command gets SIGTERM, which it
/// handles as any (the daemon drains and releases its leases), when that process ends.
#[napi]
pub fn run_cli(argv: Vec<String>, parent: Option<u32>) -> u32 {
    default_signals();
    if let Some(parent) = parent {
        end_with(parent);
    }
    let code = agentstate::run_cli(argv);
    let _ = std::io::stdout().flush();
    u32::from(code)
}

/// Gives SIGINT, SIGTERM and SIGPIPE the dispositions the binary runs with, as the wheel's
/// command does. Node catches SIGINT and SIGTERM with handlers that re-raise the signal; the
/// command's own handlers (the daemon's drain, the server's stop) call the handler they
/// replaced, so the signal would come back to them forever, spinning a core, and the command
/// would never stop. Node ignores SIGPIPE; the binary ends quietly when its reader goes away.
fn default_signals() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGPIPE] {
        // SAFETY: SIG_DFL is a valid disposition; the JavaScript thread is blocked in this
        // call for the rest of the process' life, so nothing of Node's relies on them.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
        }
    }
}

/// Asks Linux for SIGTERM when process `parent` ends (`PR_SET_PDEATHSIG`); at once when it
/// ended already. Elsewhere nothing.
fn end_with(parent: u32) {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(PR_SET_PDEATHSIG) and getppid touch no memory; raise sends a signal
    // whose disposition is the default here (before the command installs its handlers).
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
        if libc::getppid() as u32 != parent {
            libc::raise(libc::SIGTERM);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = parent;
}
