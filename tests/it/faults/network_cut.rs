//! A spill daemon whose network to Redis is cut: Redis runs in a network namespace of its
//! own behind a veth pair, the daemon outside; taking the namespace's end of the link down
//! drops every packet (nothing is refused: calls hang until they time out), as a cut cable
//! or a partition does. Needs `ip netns` (root); skipped with a message where it cannot run.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentstate::test_support::redis_server::ping;

use crate::support::{wait_until, wait_until_blocking, HANG};

/// How long a test waits for the daemon's line about a cut or its healing: a few seconds'
/// work (the daemon's calls time out after its lease time, at least 2 s), with room for a
/// loaded machine. A daemon whose calls wait out the cut never says anything.
const NOTICE_WITHIN: Duration = Duration::from_secs(15);

/// A network namespace with a redis-server in it, reachable from here over a veth pair;
/// removed (and its Redis stopped) when dropped.
struct CutOffRedis {
    /// The namespace's name.
    ns: String,
    /// The veth end inside the namespace (down = cut).
    inner: String,
    /// The redis-server, inside the namespace.
    redis: Child,
    /// `redis://<its address>:6379`.
    url: String,
    /// Its working directory.
    _dir: tempfile::TempDir,
}

/// Runs `ip args`; true when it succeeded.
fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl CutOffRedis {
    /// Sets the namespace up and starts Redis in it; `None` when this machine does not let
    /// the test make a network namespace.
    fn start() -> Option<CutOffRedis> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        // Unique per process and per call: names (veth names have at most 15 bytes) and a
        // /30 of 10.213.0.0/16.
        let n = (std::process::id() * 4 + NEXT.fetch_add(1, Ordering::Relaxed)) % 16384;
        let ns = format!("ascut{n}");
        let (outer, inner) = (format!("ascut{n}o"), format!("ascut{n}i"));
        let (a, b) = (n / 64, (n % 64) * 4);
        let (here, there) = (
            format!("10.213.{a}.{}", b + 1),
            format!("10.213.{a}.{}", b + 2),
        );
        if !ip(&["netns", "add", &ns]) {
            return None;
        }
        let set_up = [
            vec![
                "link", "add", &outer, "type", "veth", "peer", "name", &inner,
            ],
            vec!["link", "set", &inner, "netns", &ns],
            vec!["addr", "add", &format!("{here}/30"), "dev", &outer],
            vec!["link", "set", &outer, "up"],
            vec![
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{there}/30"),
                "dev",
                &inner,
            ],
            vec!["-n", &ns, "link", "set", &inner, "up"],
        ]
        .iter()
        .all(|args| ip(args.as_slice()));
        if !set_up {
            ip(&["netns", "del", &ns]);
            ip(&["link", "del", &outer]);
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let redis = Command::new("ip")
            .args(["netns", "exec", &ns, "redis-server", "--bind", &there])
            .args(["--port", "6379", "--save", "", "--appendonly", "no"])
            .args(["--protected-mode", "no"])
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let cut = CutOffRedis {
            ns,
            inner,
            redis,
            url: format!("redis://{there}:6379"),
            _dir: dir,
        };
        wait_until_blocking(
            &format!("a redis-server answers in {}", cut.ns),
            Duration::from_secs(10),
            || ping(&cut.url),
        );
        Some(cut)
    }

    /// Takes the namespace's end of the link down: every packet is dropped.
    fn cut(&self) {
        assert!(ip(&["-n", &self.ns, "link", "set", &self.inner, "down"]));
    }

    /// Brings the link back.
    fn heal(&self) {
        assert!(ip(&["-n", &self.ns, "link", "set", &self.inner, "up"]));
    }
}

impl Drop for CutOffRedis {
    fn drop(&mut self) {
        let _ = self.redis.kill();
        let _ = self.redis.wait();
        // Removing the namespace removes the veth pair with it.
        ip(&["netns", "del", &self.ns]);
    }
}

/// An `agentstate spill` process and the lines of its stderr so far; killed when dropped.
struct Daemon {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Daemon {
    fn start(url: &str, db: &std::path::Path) -> Daemon {
        let mut child = Command::new(env!("CARGO_BIN_EXE_agentstate"))
            .env_remove("AGENTSTATE_LOG")
            .args(["--redis", url, "--db"])
            .arg(db)
            .args(["spill", "--interval-ms", "5"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Daemon { child, lines }
    }

    /// How many of its lines so far contain `text`.
    fn said(&self, text: &str) -> usize {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(text))
            .count()
    }

    /// Waits up to `within` for a line containing `text`.
    async fn wait_for(&self, text: &str, within: Duration) {
        wait_until(&format!("a line {text:?}"), within, || {
            if self.said(text) > 0 {
                return Ok(());
            }
            Err(format!(
                "the daemon said:\n{}",
                self.lines.lock().unwrap().join("\n")
            ))
        })
        .await;
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn a_daemon_cut_off_from_redis_says_so_within_seconds_and_again_when_it_heals() {
    let Some(redis) = CutOffRedis::start() else {
        eprintln!(
            "skipped: this machine does not let the test make a network namespace (`ip netns add` needs root)"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(&redis.url, &dir.path().join("agentstate.db"));
    wait_until("the daemon starts", HANG, || {
        daemon.said("spill daemon started") == 1
    })
    .await;

    redis.cut();
    daemon
        .wait_for(
            "cannot reach Redis; retrying until it answers",
            NOTICE_WITHIN,
        )
        .await;
    redis.heal();
    daemon
        .wait_for("spill passes work again", NOTICE_WITHIN)
        .await;
    // One warning for the whole cut, however many passes failed.
    assert_eq!(daemon.said("cannot reach Redis"), 1);
}
