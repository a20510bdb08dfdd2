//! The Lua scripts and their calls: every file in `lua/` embedded once (prefixed with what
//! it uses of the shared `_prelude.lua`), hashed once, and one typed function per script
//! that builds its KEYS and ARGV as the script's header documents them, in a file per
//! capability named as the library's modules are (`sessions`, `messages`, `working`,
//! `checkpoints`, `rounds`, `decisions`, `users`, `graphs`) plus the daemon's (`daemon`,
//! `restore`). The library, the
//! spill daemon and the benchmark all call these functions, so a script's arguments are
//! built in one place. [`ScriptCall`] and [`BatchItem`] can only be built here: their
//! constructors and the registered scripts are private to this module and its files.
//!
//! Architecture Invariant: this module is the only place an `EVALSHA` command is built;
//! [`ScriptCall::run`] sends it (loading the script on NOSCRIPT), pipelines add
//! [`ScriptCall::cmd`] after [`preload`].

use std::sync::{Arc, LazyLock};

use redis::{aio::ConnectionLike, Cmd, FromRedisValue, RedisResult, Script, ToRedisArgs};

use crate::keys::{Keys, SessionKeys};

mod checkpoints;
mod daemon;
mod decisions;
mod graphs;
mod messages;
mod restore;
mod rounds;
mod sessions;
mod users;
mod working;

pub use checkpoints::*;
pub use daemon::*;
pub use decisions::*;
pub use graphs::*;
pub use messages::*;
pub use restore::*;
pub use rounds::*;
pub use sessions::*;
pub use users::*;
pub use working::*;

/// `lua/_prelude.lua`, the scripts' shared library.
const PRELUDE: &str = include_str!("../../lua/_prelude.lua");

/// The prelude's top-level definitions (`local function name` / `local name =`, each with the
/// comment lines above it) that `body`'s code names, and those their code names in turn, in
/// the prelude's order. A script carries only these: each definition it carries is run again
/// on every call (a closure made per function), which cost a lone append ~4 % of its Redis
/// instructions with the whole prelude. Names in comments do not count (`write_working.lua`
/// carried `append_one` and five more because comments mention them).
fn prelude_for(body: &str) -> String {
    let lines: Vec<&str> = PRELUDE.split_inclusive('\n').collect();
    let name_at = |line: &str| -> Option<String> {
        let rest = line.strip_prefix("local function ").or_else(|| {
            line.strip_prefix("local ")
                .filter(|r| r.split_whitespace().nth(1) == Some("="))
        })?;
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        (!name.is_empty()).then_some(name)
    };
    // (name, first line, end line) of each definition, its comment lines included.
    let mut defs: Vec<(String, usize, usize)> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if let Some(name) = name_at(line) {
            let mut start = i;
            while start > 0 && lines[start - 1].starts_with("--") {
                start -= 1;
            }
            if let Some(last) = defs.last_mut() {
                last.2 = start;
            }
            defs.push((name, start, lines.len()));
        }
    }
    let words = |text: &str| -> std::collections::HashSet<String> {
        text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map(str::to_string)
            .collect()
    };
    let text_of = |&(_, a, b): &(String, usize, usize)| lines[a..b].concat();
    let mut needed = vec![false; defs.len()];
    let mut todo = vec![body.to_string()];
    while let Some(text) = todo.pop() {
        let named = words(&without_comments(&text));
        for (i, def) in defs.iter().enumerate() {
            if !needed[i] && named.contains(&def.0) {
                needed[i] = true;
                todo.push(text_of(def));
            }
        }
    }
    defs.iter()
        .zip(needed)
        .filter(|(_, n)| *n)
        .map(|(def, _)| text_of(def))
        .collect()
}

/// `text` without its Lua comments: `--[[ … ]]` blocks and `--` to the end of a line. (No
/// script has `--` inside a string literal, and a name lost that way would fail every test
/// of its script at its first call.)
fn without_comments(text: &str) -> String {
    let mut code = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("--") {
        code.push_str(&rest[..at]);
        let comment = &rest[at..];
        let end = if comment.starts_with("--[[") {
            comment.find("]]").map_or(comment.len(), |e| e + 2)
        } else {
            comment.find('\n').unwrap_or(comment.len())
        };
        rest = &comment[end..];
    }
    code.push_str(rest);
    code
}

/// Registers each script: `NAME => "file"`, or `NAME => "file" #!"flags"` for a script that
/// declares Redis 7 script flags in a shebang line (put before the prelude: it must be the
/// first line).
macro_rules! lua_scripts {
    ($($name:ident => $file:literal $(#! $flags:literal)?),* $(,)?) => {
        $(
            #[doc = concat!("`lua/", $file, ".lua`")]
            static $name: LazyLock<Script> = LazyLock::new(|| {
                let body = include_str!(concat!("../../lua/", $file, ".lua"));
                Script::new(&format!(
                    "{}{}{body}",
                    concat!($("#!lua flags=", $flags, "\n",)? ""),
                    prelude_for(body)
                ))
            });
        )*
        /// Every script with its file name (pre-loading, readable benchmark output, tests).
        fn all() -> Vec<(&'static str, &'static Script)> {
            vec![$(($file, &*$name)),*]
        }
    };
}

lua_scripts! {
    CREATE_SESSION => "create_session",
    LINK_CHILD => "link_child",
    UPDATE_SESSION => "update_session",
    CLOSE_SESSION => "close_session",
    APPEND_MESSAGE => "append_message",
    SESSION_BATCH => "session_batch",
    APPEND_MESSAGES => "append_messages",
    POP_MESSAGE => "pop_message",
    REPLACE_MESSAGE => "replace_message",
    COMPACT => "compact",
    LOAD_MESSAGES => "load_messages",
    WRITE_WORKING => "write_working",
    READ_WORKING => "read_working",
    RECORD_USAGE => "record_usage",
    CREATE_CHECKPOINT => "create_checkpoint",
    PUT_CHECKPOINT => "put_checkpoint",
    APPEND_CHECKPOINTED => "append_checkpointed",
    SAVE_ROUND => "save_round",
    READ_ROUND => "read_round",
    RECORD_DECISION => "record_decision",
    RECORD_OUTCOME => "record_outcome",
    DEAD_LETTER => "dead_letter",
    SET_USER_VALUE => "set_user_value",
    DELETE_USER_VALUE => "delete_user_value",
    FORGET_USER => "forget_user",
    RESEED_USER_VALUES => "reseed_user_values",
    // The daemon's bookkeeping runs on a Redis at maxmemory too (`allow-oom`): it must keep
    // its lease, publish what SQLite committed and trim the streams, which frees memory.
    CLAIM_LEASE => "claim_lease" #!"allow-oom",
    PUBLISH_COMMITTED => "publish_committed" #!"allow-oom",
    DAEMON_HEARTBEAT => "daemon_heartbeat" #!"allow-oom",
    BIND_NAMESPACE => "bind_namespace" #!"allow-oom",
    TRIM_STREAM => "trim_stream",
    RESTORE_SESSION => "restore_session",
    RESTORE_ROUNDS => "restore_rounds",
    GRAPH_PUT => "graph_put",
    GRAPH_READ => "graph_read",
    GRAPH_DROP => "graph_drop",
    RESTORE_GRAPH => "restore_graph",
}

/// One call of one script: the `EVALSHA sha numkeys KEYS... ARGV...` command, built by the
/// script's function in this module.
#[derive(Debug, Clone)]
pub struct ScriptCall {
    /// Its source, for SCRIPT LOAD on NOSCRIPT.
    script: &'static Script,
    /// The EVALSHA command.
    cmd: Cmd,
    /// Whether sending it twice has the effect of sending it once (reads, appends with an
    /// idempotency key, the daemon's only-if-absent and fenced writes): such a call is
    /// retried while Redis is unreachable.
    idempotent: bool,
}

impl ScriptCall {
    fn new(script: &'static Script, keys: &[&str]) -> Self {
        Self::with_room(script, keys, 8, 256)
    }

    /// [`ScriptCall::new`] with room for `args` more arguments of `bytes` in all, so that
    /// building a large call does not grow its buffer again and again.
    fn with_room(script: &'static Script, keys: &[&str], args: usize, bytes: usize) -> Self {
        let key_bytes: usize = keys.iter().map(|k| k.len()).sum();
        let mut cmd = redis::Cmd::with_capacity(3 + keys.len() + args, 64 + key_bytes + bytes);
        cmd.arg("EVALSHA")
            .arg(script.get_hash())
            .arg(keys.len())
            .arg(keys);
        ScriptCall {
            script,
            cmd,
            idempotent: false,
        }
    }

    /// Marks the call as safe to send twice.
    fn idempotent(mut self, yes: bool) -> Self {
        self.idempotent = yes;
        self
    }

    /// Whether sending the call twice has the effect of sending it once.
    pub fn is_idempotent(&self) -> bool {
        self.idempotent
    }

    fn arg(mut self, arg: impl ToRedisArgs) -> Self {
        self.cmd.arg(arg);
        self
    }

    /// The EVALSHA command, for a pipeline (call [`preload`] on the connection first: a
    /// pipeline does not reload a script on NOSCRIPT).
    pub fn cmd(&self) -> &Cmd {
        &self.cmd
    }

    /// The command's words as text (for `redis-benchmark`, which takes them as arguments).
    pub fn argv(&self) -> Vec<String> {
        self.cmd
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                _ => "0".to_string(), // a SCAN cursor: never part of an EVALSHA
            })
            .collect()
    }

    /// Sends the call (one round trip); on NOSCRIPT (a restarted or flushed Redis) loads the
    /// script and sends it once more.
    pub async fn run<T: FromRedisValue>(&self, conn: &mut impl ConnectionLike) -> RedisResult<T> {
        match self.cmd.query_async(conn).await {
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                // Boxed: a rare path whose future would otherwise enlarge every call's.
                Box::pin(self.script.load_async(conn)).await?;
                self.cmd.query_async(conn).await
            }
            other => other,
        }
    }
}

/// Loads every script (SCRIPT LOAD), so pipelines of [`ScriptCall::cmd`] never meet NOSCRIPT.
pub async fn preload(conn: &mut impl ConnectionLike) -> RedisResult<()> {
    for (_, script) in all() {
        script.load_async(conn).await?;
    }
    Ok(())
}

/// The file name of the script whose SHA1 is `sha` (for readable benchmark output).
pub fn name_of(sha: &str) -> Option<&'static str> {
    all()
        .into_iter()
        .find(|(_, script)| script.get_hash().eq_ignore_ascii_case(sha))
        .map(|(name, _)| name)
}

/// `''` for `None`: scripts take optional numbers as empty strings.
fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|n| n.to_string()).unwrap_or_default()
}

/// A message body as the scripts take it: the JSON object text without its opening brace
/// (the script puts seq, state and created_at in front of the rest; see `bad_message_body`
/// in `_prelude.lua`). Text that is not an object goes as `""`, which the script rejects.
fn body_tail(body: &str) -> &str {
    body.strip_prefix('{').unwrap_or("")
}

/// One call of a session script that can also go as an item of `session_batch.lua` (group
/// commit): `append_message`, `record_decision`, `write_working`. Owned, so it can wait in a
/// queue.
#[derive(Debug, Clone)]
pub struct BatchItem {
    /// The item's op in `session_batch.lua`.
    op: &'static str,
    /// The script a lone call runs.
    script: &'static Script,
    /// The session's keys (KEYS[1..9] of the lone call).
    session: Arc<SessionKeys>,
    /// KEYS after the session's nine of the lone call (a decision's stream and open hash).
    extra_keys: Vec<String>,
    /// ARGV of the lone call, which is also the item's arguments in the batch.
    args: Vec<String>,
    /// Whether sending it twice has the effect of sending it once.
    idempotent: bool,
}

impl BatchItem {
    /// Whether sending the item twice has the effect of sending it once.
    pub fn is_idempotent(&self) -> bool {
        self.idempotent
    }

    /// The lone call (one EVALSHA of the item's own script).
    pub fn call(&self) -> ScriptCall {
        let mut keys: Vec<&str> = Vec::with_capacity(9 + self.extra_keys.len());
        self.push_lone_keys(&mut keys);
        let bytes = self.args.iter().map(String::len).sum();
        let mut call = ScriptCall::with_room(self.script, &keys, self.args.len(), bytes)
            .idempotent(self.idempotent);
        for a in &self.args {
            call = call.arg(a);
        }
        call
    }

    /// Its session's meta key (names the session within the namespace).
    pub fn session_key(&self) -> &str {
        &self.session.meta
    }

    /// The partition of its session.
    pub fn partition(&self) -> u32 {
        self.session.partition
    }

    /// Adds to `keys` the keys it brings to a `session_batch.lua`: for an append the four it
    /// writes while its session's TTL refresh is not due (meta, messages, idempotency, wal),
    /// else those of its lone call (nine, eleven for a decision).
    fn push_batch_keys<'a>(&'a self, keys: &mut Vec<&'a str>) {
        let s = &*self.session;
        if self.op == "append" {
            keys.extend([s.meta.as_str(), &s.msgs, &s.idem, &s.wal]);
        } else {
            self.push_lone_keys(keys);
        }
    }

    /// Adds to `keys` the KEYS of its lone call: the session's nine, then its extra keys.
    fn push_lone_keys<'a>(&'a self, keys: &mut Vec<&'a str>) {
        keys.extend(self.session.as_array());
        keys.extend(self.extra_keys.iter().map(String::as_str));
    }

    /// How many values its own script's reply has in its line of `session_batch.lua`'s
    /// reply: three for an append (seq, wal entry id, repeat), one otherwise.
    pub fn reply_len(&self) -> usize {
        if self.op == "append" {
            3
        } else {
            1
        }
    }
}

/// `session_batch.lua`: `items` run in order in one EVALSHA, one reply per item (a line of
/// one text: `1 ` then the lone call's reply values, `0 ` then `CODE detail`, or `2`: not
/// run, send it as its lone call); an append brings four keys, other items those of their
/// lone call (nine, eleven for a decision). Items of several partitions touch several slots:
/// only a single node takes them (group commit batches per partition on a cluster). Safe to
/// send twice only when every item is.
pub fn session_batch(items: &[&BatchItem]) -> ScriptCall {
    let mut keys: Vec<&str> = Vec::with_capacity(items.len() * 11);
    for item in items {
        item.push_batch_keys(&mut keys);
    }
    let args = items.iter().map(|i| 1 + i.args.len()).sum();
    let bytes = items
        .iter()
        .map(|i| i.op.len() + i.args.iter().map(String::len).sum::<usize>())
        .sum();
    let mut call = ScriptCall::with_room(&SESSION_BATCH, &keys, args, bytes)
        .idempotent(items.iter().all(|i| i.idempotent));
    for item in items {
        call = call.arg(item.op);
        for a in &item.args {
            call = call.arg(a);
        }
    }
    call
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    /// Every file in lua/ (but the prelude) is registered, and every script opens with the
    /// header contract: its name, its KEYS and its return value.
    #[test]
    fn every_lua_file_is_registered_with_a_header() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/lua");
        let files: BTreeSet<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".lua") && !n.starts_with('_'))
            .map(|n| n.trim_end_matches(".lua").to_string())
            .collect();
        let registered: BTreeSet<String> =
            super::all().iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(files, registered);
        for name in &files {
            let text = std::fs::read_to_string(format!("{dir}/{name}.lua")).unwrap();
            assert!(
                text.starts_with(&format!("--[[\n  {name}:")),
                "{name}.lua lacks its header"
            );
            assert!(text.contains("KEYS["), "{name}.lua header names no KEYS");
            assert!(
                text.contains("Returns:"),
                "{name}.lua header has no Returns"
            );
        }
    }

    /// `session_batch.lua` walks its ARGV and KEYS by a width and a key count per op (its
    /// `WIDTH` and `NKEYS`); every item the Rust side builds has exactly those, and the lone
    /// call of each item is its own script with the same arguments and all its keys.
    #[test]
    fn batch_items_have_the_widths_session_batch_reads() {
        let lua = include_str!("../../lua/session_batch.lua");
        let table = |name: &str| -> std::collections::BTreeMap<String, usize> {
            let line = lua
                .lines()
                .find(|l| l.starts_with(&format!("local {name} = {{")))
                .unwrap_or_else(|| panic!("session_batch.lua has no {name}"));
            let inner = line.split('{').nth(1).unwrap().trim_end_matches('}');
            inner
                .split(',')
                .map(|pair| {
                    let (op, n) = pair.split_once('=').unwrap();
                    (op.trim().to_string(), n.trim().parse().unwrap())
                })
                .collect()
        };
        let (width, nkeys) = (table("WIDTH"), table("NKEYS"));
        let ns = crate::keys::Keys::new("as", 16);
        let decision = super::DecisionArgs {
            decision: "d",
            rationale: "r",
            planned_action: "",
            meta: "{}",
        };
        let items = [
            super::append_item(
                ns.session("s1"),
                "s1",
                "{\"role\":\"user\"}",
                None,
                None,
                64,
            ),
            super::write_working(ns.session("s1"), "s1", "set", "k", "1", None, 64),
            super::record_decision(&ns, ns.session("s1"), "s1", &decision),
        ];
        let mut seen = std::collections::BTreeSet::new();
        for item in &items {
            assert_eq!(item.args.len(), width[item.op], "{} arguments", item.op);
            let mut keys = Vec::new();
            item.push_batch_keys(&mut keys);
            assert_eq!(keys.len(), nkeys[item.op], "{} keys", item.op);
            let argv = item.call().argv();
            let lone_keys = 9 + item.extra_keys.len();
            assert_eq!(argv[2], lone_keys.to_string(), "{}'s lone call", item.op);
            assert_eq!(argv.len(), 3 + lone_keys + width[item.op]);
            seen.insert(item.op.to_string());
        }
        assert_eq!(
            seen,
            width.keys().cloned().collect(),
            "an op without a builder"
        );
    }

    /// A script carries the prelude definitions its code names and theirs, in order, and no
    /// other: the lone append has `append_one` and what it calls, not the graph or
    /// compaction helpers, nor `log_messages`, which only a comment of `write_message` names.
    /// A working-state write carries nothing of an append's.
    #[test]
    fn a_script_carries_only_the_prelude_it_uses() {
        let text = super::prelude_for(include_str!("../../lua/append_message.lua"));
        let defined: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("local function "))
            .map(|l| l.split('(').next().unwrap())
            .collect();
        for name in [
            "bad_argc",
            "bad_limit",
            "clock",
            "refresh_ttl",
            "write_message",
            "append_one",
        ] {
            assert!(defined.contains(&name), "{name} missing: {defined:?}");
        }
        for name in [
            "merge_compacted",
            "touch_graph",
            "decision_one",
            "index_as_zset",
            // named only in write_message's comment
            "log_messages",
        ] {
            assert!(!defined.contains(&name), "{name} carried: {defined:?}");
        }
        let at = |name: &str| defined.iter().position(|d| *d == name).unwrap();
        assert!(at("refresh_ttl") < at("append_one"), "prelude order");
        let working = super::prelude_for(include_str!("../../lua/write_working.lua"));
        assert!(working.contains("local function working_one("));
        for name in ["append_one", "write_message", "message_element"] {
            assert!(
                !working.contains(&format!("local function {name}(")),
                "write_working carries {name}"
            );
        }
        assert!(
            text.contains("local DEFERRED = {}"),
            "a value definition is carried too"
        );
    }

    /// A call's words are EVALSHA, the script's SHA, the key count, the keys, the args.
    #[test]
    fn calls_spell_evalsha_with_their_keys_and_args() {
        let ns = crate::keys::Keys::new("as", 16);
        let call = super::read_round(&ns, "alice", "default", Some(3));
        let argv = call.argv();
        assert_eq!(argv[0], "EVALSHA");
        assert_eq!(super::name_of(&argv[1]), Some("read_round"));
        assert_eq!(&argv[2..], ["1", &ns.rounds("alice", "default"), "3"]);
    }
}
