//! The real `agentstate` binary: running it against a test's Redis, on a terminal too.

use super::*;

/// What one run of the CLI binary produced.
#[derive(Debug)]
pub struct CliOutput {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl CliOutput {
    /// Asserts the output contract of a runtime error: exit 1, nothing on stdout, one
    /// `error:` line on stderr. Returns that line.
    pub fn runtime_error(&self) -> &str {
        assert_eq!(self.code, 1, "{self:?}");
        assert_eq!(self.stdout, "", "{self:?}");
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{self:?}");
        assert!(lines[0].starts_with("error: "), "{self:?}");
        lines[0]
    }
}

/// The real `agentstate` binary pointed at the Redis at `url`, working in `dir`, not yet run
/// (spawn it for a long-running command such as `tail`).
pub fn cli_command_at(url: &str, dir: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentstate"));
    cmd.env_remove("AGENTSTATE_REDIS_URL")
        .env_remove("AGENTSTATE_LOG")
        .env_remove("AGENTSTATE_THREADS")
        .env("AGENTSTATE_DB", dir.join("agentstate.db"))
        .current_dir(dir)
        .args(["--redis", url]);
    cmd
}

/// Runs the real `agentstate` binary against the Redis at `url`.
pub fn cli_at(url: &str, dir: &std::path::Path, args: &[&str]) -> CliOutput {
    let out = cli_command_at(url, dir)
        .args(args)
        .output()
        .expect("run agentstate");
    CliOutput {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// What a CLI run produced, from an output with exit status.
pub fn cli_output(out: std::process::Output) -> CliOutput {
    CliOutput {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

impl TestEnv {
    /// Runs the CLI with `stdin` as its standard input.
    pub fn cli_stdin(&self, args: &[&str], stdin: &[u8]) -> CliOutput {
        use std::io::Write;
        let mut child = self
            .cli_command()
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run agentstate");
        let mut input = child.stdin.take().unwrap();
        let data = stdin.to_vec();
        let writer = std::thread::spawn(move || input.write_all(&data));
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap().unwrap();
        cli_output(out)
    }

    /// Runs the CLI on a pseudo-terminal (util-linux `script`), as a person at a terminal
    /// sees it: stdout and stderr together, line ends `\r\n`.
    pub fn cli_on_terminal(&self, args: &[&str]) -> String {
        on_terminal(self.cli_command().args(args))
    }
}

/// Runs `cmd` (program, arguments, env, directory) on a pseudo-terminal with `script` and
/// returns everything it wrote there.
pub fn on_terminal(cmd: &Command) -> String {
    let quote = |s: &std::ffi::OsStr| format!("'{}'", s.to_string_lossy().replace('\'', "'\\''"));
    let line: Vec<String> = std::iter::once(quote(cmd.get_program()))
        .chain(cmd.get_args().map(quote))
        .collect();
    let mut script = Command::new("script");
    script
        .args(["-q", "-e", "-c", &line.join(" "), "/dev/null"])
        .stdin(std::process::Stdio::null());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => script.env(k, v),
            None => script.env_remove(k),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        script.current_dir(dir);
    }
    let out = script
        .output()
        .expect("script (util-linux) runs the CLI on a terminal");
    String::from_utf8_lossy(&out.stdout).into_owned()
}
