//! A real Redis Cluster for tests: three masters (`redis-server --cluster-enabled yes`) on
//! loopback ports, joined with `redis-cli --cluster create`, torn down when dropped. Starting
//! one takes ~2 s (Redis' own delay before a new cluster is writable), so tests that only read
//! and write share one per test binary (each in a namespace of its own, [`shared`]); tests
//! that restart nodes or move slots start their own ([`Cluster::start`]).

use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use agentstate::test_support::redis_server::RedisServer;

/// The `redis-server` arguments of a cluster node (a replica added later takes the same).
pub const NODE_ARGS: [&str; 6] = [
    "--cluster-enabled",
    "yes",
    "--cluster-config-file",
    "nodes.conf",
    "--cluster-node-timeout",
    "5000",
];

/// Three masters holding all 16384 slots.
pub struct Cluster {
    pub nodes: Vec<RedisServer>,
}

impl Cluster {
    /// Starts three nodes, creates the cluster, waits until every node says `cluster_state:ok`.
    pub fn start() -> Cluster {
        let nodes: Vec<RedisServer> = (0..3)
            .map(|_| RedisServer::start_with(&NODE_ARGS).expect("start a cluster node"))
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("run redis-cli --cluster create");
        assert!(out.status.success(), "cluster create: {out:?}");
        let cluster = Cluster { nodes };
        cluster.wait_ok();
        cluster
    }

    /// Waits (up to 20 s) until every node reports `cluster_state:ok` and agrees on the slots.
    pub fn wait_ok(&self) {
        super::wait_until_blocking("the cluster is ok", Duration::from_secs(20), || {
            self.nodes.iter().all(|n| {
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(&mut n.connection())
                    .unwrap_or_default();
                info.contains("cluster_state:ok")
            })
        });
    }

    /// `redis+cluster://` URL naming every node.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        format!("redis+cluster://{}", hosts.join(","))
    }

    /// The node id of node `i`.
    pub fn node_id(&self, i: usize) -> String {
        redis::cmd("CLUSTER")
            .arg("MYID")
            .query(&mut self.nodes[i].connection())
            .unwrap()
    }

    /// The index of the node that serves `slot` now (as node 0's `CLUSTER SLOTS` says).
    pub fn owner_of(&self, slot: u16) -> usize {
        let ranges: Vec<(i64, i64, (String, u16))> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query::<Vec<redis::Value>>(&mut self.nodes[0].connection())
            .unwrap()
            .into_iter()
            .map(|range| {
                let redis::Value::Array(parts) = range else {
                    panic!("CLUSTER SLOTS: {range:?}")
                };
                let lo = redis::from_redis_value(parts[0].clone()).unwrap();
                let hi = redis::from_redis_value(parts[1].clone()).unwrap();
                let node: (String, u16) = match &parts[2] {
                    redis::Value::Array(node) => (
                        redis::from_redis_value(node[0].clone()).unwrap(),
                        redis::from_redis_value(node[1].clone()).unwrap(),
                    ),
                    other => panic!("CLUSTER SLOTS node: {other:?}"),
                };
                (lo, hi, node)
            })
            .collect();
        let (_, _, (_, port)) = ranges
            .iter()
            .find(|(lo, hi, _)| (*lo..=*hi).contains(&i64::from(slot)))
            .expect("a node serves every slot");
        self.nodes
            .iter()
            .position(|n| n.port() == *port)
            .expect("the owner is one of our nodes")
    }

    /// Moves `slot` from node `from` to node `to` the way `redis-cli --cluster reshard`
    /// does: IMPORTING/MIGRATING, MIGRATE the keys in batches (clients meanwhile follow ASK),
    /// then SETSLOT NODE on every node. `mid_move` runs after the first batch moved, while
    /// the slot's keys are split between the two nodes.
    pub fn move_slot(&self, slot: u16, from: usize, to: usize, mid_move: impl FnOnce()) {
        let mut mid_move = Some(mid_move);
        let (from_id, to_id) = (self.node_id(from), self.node_id(to));
        let mut src = self.nodes[from].connection();
        let mut dst = self.nodes[to].connection();
        let _: () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg("IMPORTING")
            .arg(&from_id)
            .query(&mut dst)
            .unwrap();
        let _: () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg("MIGRATING")
            .arg(&to_id)
            .query(&mut src)
            .unwrap();
        loop {
            let keys: Vec<String> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                // Two at a time: a session's keys stay split between the nodes for a while.
                .arg(2)
                .query(&mut src)
                .unwrap();
            if keys.is_empty() {
                break;
            }
            let _: () = redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(self.nodes[to].port())
                .arg("")
                .arg(0)
                .arg(5000)
                .arg("KEYS")
                .arg(&keys)
                .query(&mut src)
                .unwrap();
            if let Some(f) = mid_move.take() {
                f();
            }
            // Let the clients run between batches, as a real reshard does.
            std::thread::sleep(Duration::from_millis(5));
        }
        for i in 0..self.nodes.len() {
            let _: () = redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg("NODE")
                .arg(&to_id)
                .query(&mut self.nodes[i].connection())
                .unwrap();
        }
    }
}

/// The cluster every test of this binary that only reads and writes shares, started on first
/// use; its processes are killed when the test binary exits.
pub fn shared() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    static PIDS: Mutex<Vec<u32>> = Mutex::new(Vec::new());
    extern "C" fn stop() {
        for pid in PIDS.lock().map(|p| p.clone()).unwrap_or_default() {
            // SAFETY: kills a redis-server child this process started.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
        }
    }
    CLUSTER.get_or_init(|| {
        let cluster = Cluster::start();
        PIDS.lock()
            .unwrap()
            .extend(cluster.nodes.iter().filter_map(|n| n.pid()));
        // SAFETY: registers a plain function to run at normal process exit.
        unsafe {
            libc::atexit(stop);
        }
        cluster
    })
}
