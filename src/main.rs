//! The `agentstate` command-line tool: the library's [`agentstate::run_cli`], entered with this
//! process' arguments (the Python wheel's `agentstate` command enters it too).

fn main() -> std::process::ExitCode {
    // Like other Unix tools, end quietly when the reader of stdout goes away
    // (`agentstate msg list S | head`) instead of panicking on a broken pipe.
    // SAFETY: called before any other thread exists; SIG_DFL is a valid disposition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    std::process::ExitCode::from(agentstate::run_cli(std::env::args_os()))
}
