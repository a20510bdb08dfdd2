//! `agentstate._agentstate.run_cli`: the `agentstate` command line inside the extension, so
//! the wheel's `agentstate` command (and `python -m agentstate`) is the same program as the
//! cargo-built binary, with no second binary to build or ship.

use std::io::Write;

use pyo3::prelude::*;

/// Runs the command line `argv` (program name first) with the GIL released and returns its
/// exit code (0, 1 on a runtime error, 2 on bad usage). `--help`, `--version` and usage
/// errors end the process, as they do for the binary.
#[pyfunction]
pub fn run_cli(py: Python<'_>, argv: Vec<String>) -> u8 {
    py.detach(|| {
        let code = agentstate::run_cli(argv);
        let _ = std::io::stdout().flush();
        code
    })
}
