//! `runCli`: the `agentstate` command line inside the addon, so `npx agentstate ...` is the
//! same program as the cargo-built binary and the Python wheel's command.

use std::io::Write;

use napi_derive::napi;

/// Runs the command line `argv` (program name first) and returns its exit code (0, 1 on a
/// runtime error, 2 on bad usage). Blocks the calling thread: the package's bin calls it
/// with nothing else to run. `--help`, `--version` and usage errors end the process, as
/// they do for the binary.
#[napi]
pub fn run_cli(argv: Vec<String>) -> u32 {
    let code = agentstate::run_cli(argv);
    let _ = std::io::stdout().flush();
    u32::from(code)
}
