//! `redis-cli monitor` on a test's server: every command Redis runs, in order.

use super::*;

/// `redis-cli monitor` on a test's server, its feed in a file: every command Redis runs,
/// those a script runs included (client `lua`), in order.
pub struct Monitor {
    child: std::process::Child,
    feed: std::path::PathBuf,
    url: String,
}

/// One command of a [`Monitor`] feed: who sent it (`lua` for a script) and its words.
#[derive(Debug, Clone)]
pub struct Monitored {
    pub client: String,
    pub words: Vec<Vec<u8>>,
}

impl Monitored {
    /// The command name, upper case.
    pub fn name(&self) -> String {
        String::from_utf8_lossy(&self.words[0]).to_uppercase()
    }

    /// True for a command a script ran.
    pub fn by_lua(&self) -> bool {
        self.client == "lua"
    }
}

impl Monitor {
    /// Starts watching the server at `t` (returns once the feed has begun).
    pub async fn start(t: &TestEnv, name: &str) -> Monitor {
        let feed = t.server.path(&format!("{name}.monitor"));
        let child = Command::new("redis-cli")
            .args(["-p", &t.server.port().to_string(), "monitor"])
            .stdout(std::fs::File::create(&feed).unwrap())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("redis-cli (redis-tools) runs MONITOR");
        wait_until("MONITOR starts", HANG, || {
            std::fs::read_to_string(&feed).is_ok_and(|f| f.starts_with("OK"))
        })
        .await;
        Monitor {
            child,
            feed,
            url: t.server.url(),
        }
    }

    /// Stops watching once every command sent before this call is in the feed; returns the
    /// feed.
    pub async fn stop(mut self) -> Vec<Monitored> {
        let marker = format!("monitor-end-{}", std::process::id());
        let mut c = redis::Client::open(self.url.as_str())
            .unwrap()
            .get_connection()
            .unwrap();
        let _: String = redis::cmd("ECHO").arg(&marker).query(&mut c).unwrap();
        let feed = self.feed.clone();
        wait_until("MONITOR shows the end marker", HANG, || {
            std::fs::read_to_string(&feed).is_ok_and(|f| f.contains(&marker))
        })
        .await;
        let _ = self.child.kill();
        let _ = self.child.wait();
        let text = std::fs::read(&self.feed).unwrap();
        text.split(|b| *b == b'\n')
            .filter_map(parse_monitor_line)
            .filter(|m| m.words.get(1).is_none_or(|w| w != marker.as_bytes()))
            .collect()
    }
}

/// `1700000000.123456 [0 127.0.0.1:5555] "SET" "k" "v"` → client and unquoted words.
fn parse_monitor_line(line: &[u8]) -> Option<Monitored> {
    let open = line.iter().position(|b| *b == b'[')?;
    let close = open + line[open..].iter().position(|b| *b == b']')?;
    let inside = String::from_utf8_lossy(&line[open + 1..close]).into_owned();
    let client = inside.split_once(' ')?.1.to_string();
    let mut words = Vec::new();
    let mut rest = &line[close + 1..];
    while let Some(start) = rest.iter().position(|b| *b == b'"') {
        let mut word = Vec::new();
        let mut i = start + 1;
        while rest[i] != b'"' {
            if rest[i] == b'\\' {
                i += 1;
                match rest[i] {
                    b'n' => word.push(b'\n'),
                    b'r' => word.push(b'\r'),
                    b't' => word.push(b'\t'),
                    b'a' => word.push(7),
                    b'b' => word.push(8),
                    b'x' => {
                        let hex = std::str::from_utf8(&rest[i + 1..i + 3]).unwrap();
                        word.push(u8::from_str_radix(hex, 16).unwrap());
                        i += 2;
                    }
                    other => word.push(other),
                }
            } else {
                word.push(rest[i]);
            }
            i += 1;
        }
        words.push(word);
        rest = &rest[i + 1..];
    }
    (!words.is_empty()).then_some(Monitored { client, words })
}
