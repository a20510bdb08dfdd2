//! The `agentstate` command-line tool: parse with clap, call the library, print the value.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
