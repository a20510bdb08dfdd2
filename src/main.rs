//! The `agentstate` command-line tool: the library's `cli` module, entered with this
//! process' arguments (the Python wheel's `agentstate` command enters the same module).

fn main() -> std::process::ExitCode {
    // Like other Unix tools, end quietly when the reader of stdout goes away
    // (`agentstate msg list S | head`) instead of panicking on a broken pipe.
    // SAFETY: called before any other thread exists; SIG_DFL is a valid disposition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    std::process::ExitCode::from(agentstate::internals::cli::run_from(std::env::args_os()))
}
