//! A real Sentinel deployment for tests: a master, its replicas (`--replicaof`) and Sentinels
//! (`redis-server sentinel.conf --sentinel`, each with its config file in a temp dir of its
//! own), on free loopback ports, killed when dropped. [`Deployment::url`] is the
//! `redis+sentinel://` URL clients use; the nodes are `nodes[i]` (node 0 is the first master).

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use agentstate::test_support::redis_server::{free_port, RedisServer};

use super::{wait_until_blocking, HANG};

/// The name the Sentinels monitor the master under.
pub const SERVICE: &str = "agentstate";

/// How a deployment is made.
#[derive(Clone, Debug)]
pub struct Shape {
    /// Replicas of the first master.
    pub replicas: usize,
    /// Sentinels (a majority of them must agree on a failover of a killed master).
    pub sentinels: usize,
    /// The Sentinels' own password (`requirepass`), when they have one.
    pub sentinel_password: Option<String>,
}

impl Default for Shape {
    fn default() -> Self {
        Shape {
            replicas: 1,
            sentinels: 1,
            sentinel_password: None,
        }
    }
}

/// A Sentinel process.
pub struct SentinelProcess {
    pub port: u16,
    child: Child,
    /// Holds its config file and log, deleted with it.
    _dir: tempfile::TempDir,
}

impl Drop for SentinelProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A master, its replicas and the Sentinels watching them.
pub struct Deployment {
    /// The data nodes; node 0 was the master at start.
    pub nodes: Vec<RedisServer>,
    pub sentinels: Vec<SentinelProcess>,
    pub shape: Shape,
}

impl Deployment {
    /// Starts the nodes and Sentinels and waits until every Sentinel sees every replica and
    /// every other Sentinel, and the replicas are in sync.
    pub fn start(shape: Shape) -> Deployment {
        let master = RedisServer::start().expect("start the master");
        let master_port = master.port().to_string();
        let mut nodes = vec![master];
        for _ in 0..shape.replicas {
            nodes.push(
                RedisServer::start_with(&["--replicaof", "127.0.0.1", &master_port])
                    .expect("start a replica"),
            );
        }
        let quorum = shape.sentinels / 2 + 1;
        let sentinels = (0..shape.sentinels)
            .map(|_| start_sentinel(&master_port, quorum, shape.sentinel_password.as_deref()))
            .collect();
        let deployment = Deployment {
            nodes,
            sentinels,
            shape,
        };
        deployment.wait_settled();
        deployment
    }

    /// The Sentinel URL, `redis+sentinel://127.0.0.1:P1,.../agentstate` (with
    /// `sentinel_password` when the Sentinels have one).
    pub fn url(&self) -> String {
        self.url_as("")
    }

    /// The Sentinel URL with `auth` (`user:password@`) for the data nodes.
    pub fn url_as(&self, auth: &str) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        let query = match &self.shape.sentinel_password {
            Some(p) => format!("?sentinel_password={p}"),
            None => String::new(),
        };
        format!(
            "redis+sentinel://{auth}{}/{SERVICE}{query}",
            hosts.join(",")
        )
    }

    /// A connection to Sentinel `i`.
    pub fn sentinel(&self, i: usize) -> redis::Connection {
        let auth = match &self.shape.sentinel_password {
            Some(p) => format!(":{p}@"),
            None => String::new(),
        };
        redis::Client::open(format!(
            "redis://{auth}127.0.0.1:{}",
            self.sentinels[i].port
        ))
        .and_then(|c| c.get_connection())
        .expect("connect to a Sentinel")
    }

    /// The port of the master as Sentinel 0 names it now.
    pub fn master_port(&self) -> u16 {
        let (_, port): (String, u16) = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(SERVICE)
            .query(&mut self.sentinel(0))
            .expect("SENTINEL GET-MASTER-ADDR-BY-NAME");
        port
    }

    /// The index in `nodes` of the master Sentinel 0 names now.
    pub fn master(&self) -> usize {
        let port = self.master_port();
        self.nodes
            .iter()
            .position(|n| n.port() == port)
            .expect("the master is one of our nodes")
    }

    /// The role node `i` gives itself (`master`, `slave`), or `down`.
    pub fn role(&self, i: usize) -> String {
        if self.nodes[i].pid().is_none() {
            return "down".into();
        }
        let Ok(mut conn) = redis::Client::open(self.nodes[i].url())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(500)))
        else {
            return "down".into();
        };
        let role: Vec<redis::Value> = redis::cmd("ROLE").query(&mut conn).unwrap_or_default();
        role.first()
            .and_then(|v| redis::from_redis_value::<String>(v.clone()).ok())
            .unwrap_or_else(|| "down".into())
    }

    /// `SENTINEL FAILOVER` on Sentinel 0, then waits until every Sentinel names another
    /// master, it says it is one, and the old master (still running) is its replica.
    /// Returns the new master's index.
    pub fn failover(&self) -> usize {
        let old = self.master();
        let _: () = redis::cmd("SENTINEL")
            .arg("FAILOVER")
            .arg(SERVICE)
            .query(&mut self.sentinel(0))
            .expect("SENTINEL FAILOVER");
        let new = self.wait_new_master(old);
        wait_until_blocking("the old master is a replica", HANG, || {
            let role = self.role(old);
            (role == "slave").then_some(()).ok_or(role)
        });
        new
    }

    /// Kills the master (SIGKILL) and waits until every Sentinel names another one and it
    /// says it is one. Returns the new master's index.
    pub fn kill_master(&mut self) -> usize {
        let old = self.master();
        self.nodes[old].kill();
        self.wait_new_master(old)
    }

    /// Waits until every Sentinel names a master other than node `old`, the same one, and
    /// that node says it is a master; returns its index.
    fn wait_new_master(&self, old: usize) -> usize {
        let old_port = self.nodes[old].port();
        wait_until_blocking("the Sentinels name a new master", HANG, || {
            let ports: Vec<u16> = (0..self.sentinels.len())
                .map(|i| {
                    redis::cmd("SENTINEL")
                        .arg("GET-MASTER-ADDR-BY-NAME")
                        .arg(SERVICE)
                        .query::<(String, u16)>(&mut self.sentinel(i))
                        .map(|(_, port)| port)
                        .unwrap_or(0)
                })
                .collect();
            let port = ports[0];
            let agreed = port != old_port && ports.iter().all(|p| *p == port);
            let new = self.nodes.iter().position(|n| n.port() == port);
            match new {
                Some(new) if agreed && self.role(new) == "master" => Ok(new),
                _ => Err(format!("Sentinels name ports {ports:?}")),
            }
        })
    }

    /// Waits until every Sentinel knows every replica and the other Sentinels and every
    /// replica's link is up.
    fn wait_settled(&self) {
        let (replicas, others) = (self.shape.replicas, self.sentinels.len() - 1);
        wait_until_blocking("the Sentinels see the deployment", HANG, || {
            for i in 0..self.sentinels.len() {
                let info: Vec<String> = redis::cmd("SENTINEL")
                    .arg("MASTER")
                    .arg(SERVICE)
                    .query(&mut self.sentinel(i))
                    .map_err(|e| e.to_string())?;
                let field = |name: &str| {
                    info.iter()
                        .position(|f| f == name)
                        .and_then(|at| info.get(at + 1))
                        .and_then(|v| v.parse::<usize>().ok())
                        .unwrap_or(0)
                };
                if field("num-slaves") != replicas || field("num-other-sentinels") != others {
                    return Err(format!("Sentinel {i}: {info:?}"));
                }
            }
            for node in &self.nodes[1..] {
                let info: String = redis::cmd("INFO")
                    .arg("replication")
                    .query(&mut node.connection())
                    .map_err(|e| e.to_string())?;
                if !info.contains("master_link_status:up") {
                    return Err(format!("replica {}: {info}", node.port()));
                }
            }
            Ok(())
        });
    }
}

/// Starts a Sentinel watching the master on `master_port`, quick to act: the master is down
/// after 1 s without an answer, and a failover is retried after 3 s.
fn start_sentinel(master_port: &str, quorum: usize, password: Option<&str>) -> SentinelProcess {
    let dir = tempfile::tempdir().expect("a Sentinel's dir");
    let port = free_port();
    let mut conf = format!(
        "port {port}\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\ndir {dir}\n\
         logfile sentinel.log\n\
         sentinel monitor {SERVICE} 127.0.0.1 {master_port} {quorum}\n\
         sentinel down-after-milliseconds {SERVICE} 1000\n\
         sentinel failover-timeout {SERVICE} 3000\n\
         sentinel parallel-syncs {SERVICE} 1\n",
        dir = dir.path().display()
    );
    if let Some(password) = password {
        conf.push_str(&format!("requirepass {password}\n"));
        // The Sentinels talk to each other with the same password.
        conf.push_str(&format!("sentinel sentinel-pass {password}\n"));
    }
    let file = dir.path().join("sentinel.conf");
    std::fs::write(&file, conf).expect("write sentinel.conf");
    let child = Command::new("redis-server")
        .arg(&file)
        .arg("--sentinel")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start redis-server --sentinel");
    let sentinel = SentinelProcess {
        port,
        child,
        _dir: dir,
    };
    wait_until_blocking("a Sentinel answers", HANG, || {
        let auth = password.map(|p| format!(":{p}@")).unwrap_or_default();
        agentstate::test_support::redis_server::ping(&format!("redis://{auth}127.0.0.1:{port}"))
    });
    sentinel
}
