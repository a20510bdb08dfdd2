//! The `agentstate` command-line tool: parse with clap, call the library, print the value.

mod cli;

fn main() -> std::process::ExitCode {
    // Like other Unix tools, end quietly when the reader of stdout goes away
    // (`agentstate msg list S | head`) instead of panicking on a broken pipe.
    // SAFETY: called before any other thread exists; SIG_DFL is a valid disposition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    cli::main()
}
