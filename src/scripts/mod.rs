//! The Lua scripts and their calls: every file in `lua/` embedded once and built by the one
//! loader (`loader.rs`: the prelude helpers its `-- @include` lines name prepended, and a map
//! of its lines back to the files for errors), hashed once, and one typed function per script
//! that builds its KEYS and ARGV as the script's header documents them, in a file per
//! capability named as the library's modules are (`sessions`, `messages`, `working`,
//! `checkpoints`, `rounds`, `decisions`, `users`, `graphs`, `long_term`) plus the daemon's (`daemon`,
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

use crate::error::{Error, Result};
use crate::keys::{Keys, SessionKeys};

mod checkpoints;
mod daemon;
mod decisions;
mod effects;
mod graphs;
mod inbox;
mod leases;
mod loader;
mod long_term;
mod messages;
mod restore;
mod rounds;
mod sessions;
mod users;
mod working;

pub use checkpoints::*;
pub use daemon::*;
pub use decisions::*;
pub use effects::*;
pub use graphs::*;
pub use inbox::*;
pub use leases::*;
pub use long_term::*;
pub use messages::*;
pub use restore::*;
pub use rounds::*;
pub use sessions::*;
pub use users::*;
pub use working::*;

/// A registered script: the redis-rs [`Script`] of its built text (which it derefs to) and
/// where that text's lines came from.
struct Loaded {
    script: Script,
    built: loader::Built,
}

impl Loaded {
    /// Builds `lua/<file>.lua` with the loader; an unknown include panics at the first use
    /// (the tests build every script).
    fn new(file: &str, body: &str, flags: Option<&str>) -> Loaded {
        let built = loader::build(file, body, flags).unwrap_or_else(|e| panic!("{e}"));
        Loaded {
            script: Script::new(&built.text),
            built,
        }
    }
}

impl std::ops::Deref for Loaded {
    type Target = Script;

    fn deref(&self) -> &Script {
        &self.script
    }
}

/// Registers each script: `NAME => "file"`, or `NAME => "file" #!"flags"` for a script that
/// declares Redis 7 script flags in a shebang line.
macro_rules! lua_scripts {
    ($($name:ident => $file:literal $(#! $flags:literal)?),* $(,)?) => {
        $(
            #[doc = concat!("`lua/", $file, ".lua`")]
            static $name: LazyLock<Loaded> = LazyLock::new(|| {
                let flags: Option<&str> = [$($flags)?].first().copied();
                Loaded::new($file, include_str!(concat!("../../lua/", $file, ".lua")), flags)
            });
        )*
        /// Every script with its file name (pre-loading, readable benchmark output, tests).
        fn all() -> Vec<(&'static str, &'static Loaded)> {
            vec![$(($file, &*$name)),*]
        }
    };
}

lua_scripts! {
    CREATE_SESSION => "create_session",
    LINK_CHILD => "link_child",
    UPDATE_SESSION => "update_session",
    CLOSE_SESSION => "close_session",
    LIST_INDEX => "list_index",
    INDEX_SESSIONS => "index_sessions",
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
    REPLACE_USER_VALUES => "replace_user_values",
    MEMORY_PUT => "memory_put",
    MEMORY_DELETE => "memory_delete",
    MEMORY_FORGET => "memory_forget",
    MEMORY_EXPIRE => "memory_expire",
    MEMORY_REFRESH => "memory_refresh",
    RESEED_MEMORY => "reseed_memory",
    REPLACE_MEMORY => "replace_memory",
    // The daemon's bookkeeping runs on a Redis at maxmemory too (`allow-oom`): it must keep
    // its lease, publish what SQLite committed and trim the streams, which frees memory.
    CLAIM_LEASE => "claim_lease" #!"allow-oom",
    PUBLISH_COMMITTED => "publish_committed" #!"allow-oom",
    DAEMON_HEARTBEAT => "daemon_heartbeat" #!"allow-oom",
    CHECK_HISTORY => "check_history" #!"allow-oom",
    BIND_NAMESPACE => "bind_namespace" #!"allow-oom",
    TRIM_STREAM => "trim_stream",
    RESTORE_SESSION => "restore_session",
    RESTORE_ROUNDS => "restore_rounds",
    GRAPH_PUT => "graph_put",
    GRAPH_READ => "graph_read",
    GRAPH_DROP => "graph_drop",
    RESTORE_GRAPH => "restore_graph",
    LEASE_ACQUIRE => "lease_acquire",
    LEASE_RENEW => "lease_renew",
    LEASE_RELEASE => "lease_release",
    INBOX_PUT => "inbox_put",
    INBOX_CLAIM => "inbox_claim",
    INBOX_DELIVER => "inbox_deliver",
    INBOX_VOID => "inbox_void",
    EFFECT_BEGIN => "effect_begin",
    EFFECT_FINISH => "effect_finish",
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
    /// script and sends it once more. A runtime error names its line in the script's file
    /// ([`locate_lines`]).
    pub async fn run<T: FromRedisValue>(&self, conn: &mut impl ConnectionLike) -> Result<T> {
        let reply = match self.cmd.query_async(conn).await {
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                // Boxed: a rare path whose future would otherwise enlarge every call's.
                Box::pin(self.script.load_async(conn)).await?;
                self.cmd.query_async(conn).await
            }
            other => other,
        };
        reply.map_err(|err| match Error::from_redis(err) {
            Error::Redis { message, source } => Error::Redis {
                message: locate_lines(&message).into_owned(),
                source,
            },
            typed => typed,
        })
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

/// The text Redis runs for `lua/<name>.lua` (the benchmarks send it themselves).
pub fn text_of(name: &str) -> Option<&'static str> {
    all()
        .into_iter()
        .find(|(file, _)| *file == name)
        .map(|(_, loaded)| loaded.built.text.as_str())
}

/// `message`, a Redis error's text, with each line of a registered script it names
/// (`user_script:NN`, counted in the built text) as the file and line it came from
/// (`lua/<file>.lua:MM`, `lua/_prelude.lua:MM` for a helper). The script is the one whose SHA1
/// follows `script: `, as Redis 7 writes it after a runtime error; other text is unchanged.
pub fn locate_lines(message: &str) -> std::borrow::Cow<'_, str> {
    let sha = message.match_indices("script: ").find_map(|(at, tag)| {
        let sha = message.get(at + tag.len()..at + tag.len() + 40)?;
        sha.bytes().all(|b| b.is_ascii_hexdigit()).then_some(sha)
    });
    let loaded = sha.and_then(|sha| {
        all()
            .into_iter()
            .find(|(_, loaded)| loaded.get_hash().eq_ignore_ascii_case(sha))
    });
    match loaded {
        Some((_, loaded)) => loader::map_lines(message, &loaded.built).into(),
        None => message.into(),
    }
}

/// `''` for `None`: scripts take optional numbers as empty strings.
fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|n| n.to_string()).unwrap_or_default()
}

/// A message body as the scripts take it: the JSON object text without its opening brace
/// (the script puts the append time `at` in front of the rest; see `bad_message_body`
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
        let mut keys: Vec<&str> = Vec::with_capacity(10 + self.extra_keys.len());
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
    /// writes while its session's TTL refresh is not due (meta, messages, idempotency, wal)
    /// and its partition's commit marker, else those of its lone call.
    fn push_batch_keys<'a>(&'a self, keys: &mut Vec<&'a str>) {
        let s = &*self.session;
        if self.op == "append" {
            keys.extend([s.meta.as_str(), &s.msgs, &s.idem, &s.wal, &s.committed]);
        } else {
            self.push_lone_keys(keys);
        }
    }

    /// Adds to `keys` the KEYS of its lone call: the session's nine, its extra keys, then
    /// its partition's commit marker.
    fn push_lone_keys<'a>(&'a self, keys: &mut Vec<&'a str>) {
        keys.extend(self.session.as_array());
        keys.extend(self.extra_keys.iter().map(String::as_str));
        keys.push(&self.session.committed);
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
    let mut keys: Vec<&str> = Vec::with_capacity(items.len() * 12);
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
                None,
            ),
            super::write_working(ns.session("s1"), "s1", "set", "k", "1", None, 64, None),
            super::record_decision(&ns, ns.session("s1"), "s1", &decision),
        ];
        let mut seen = std::collections::BTreeSet::new();
        for item in &items {
            assert_eq!(item.args.len(), width[item.op], "{} arguments", item.op);
            let mut keys = Vec::new();
            item.push_batch_keys(&mut keys);
            assert_eq!(keys.len(), nkeys[item.op], "{} keys", item.op);
            let argv = item.call().argv();
            // The session's nine, its extra keys, its partition's commit marker.
            let lone_keys = 9 + item.extra_keys.len() + 1;
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

    /// A script carries the prelude definitions it includes and theirs, in order, and no
    /// other: the lone append has `append_one` and what it calls, not the graph or
    /// compaction helpers, nor `log_messages`, which only a comment of `write_message` names.
    /// A working-state write carries nothing of an append's.
    #[test]
    fn a_script_carries_only_the_prelude_it_uses() {
        let text = super::text_of("append_message").unwrap();
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
            "index_upgrade",
            // named only in write_message's comment
            "log_messages",
        ] {
            assert!(!defined.contains(&name), "{name} carried: {defined:?}");
        }
        let at = |name: &str| defined.iter().position(|d| *d == name).unwrap();
        assert!(at("refresh_ttl") < at("append_one"), "prelude order");
        let working = super::text_of("write_working").unwrap();
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

    /// The prelude names `text`'s code uses (comments do not count): what its `@include`
    /// lines must say.
    fn prelude_names_used(text: &str) -> BTreeSet<&'static str> {
        // Comments out: `--[[ … ]]` blocks and `--` to the end of a line. (No script has
        // `--` inside a string literal.)
        let mut code = String::new();
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
        let words: BTreeSet<&str> = code
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .collect();
        super::loader::DEFS
            .iter()
            .map(|d| d.name)
            .filter(|n| words.contains(n))
            .collect()
    }

    /// Each script includes exactly the prelude names its code uses, and each helper those
    /// its code uses (other than itself), all defined before it: a name used but not
    /// included would fail only at the script's first call, one included but not used costs
    /// every call.
    #[test]
    fn includes_are_the_prelude_names_the_code_uses() {
        for (file, _) in super::all() {
            let path = format!("{}/lua/{file}.lua", env!("CARGO_MANIFEST_DIR"));
            let body = std::fs::read_to_string(path).unwrap();
            let said: BTreeSet<&str> = super::loader::includes_of(&body).into_iter().collect();
            assert_eq!(said, prelude_names_used(&body), "lua/{file}.lua's @include");
        }
        let defs = &*super::loader::DEFS;
        for (i, def) in defs.iter().enumerate() {
            let said: BTreeSet<&str> = super::loader::includes_of(def.text).into_iter().collect();
            let mut used = prelude_names_used(def.text);
            used.remove(def.name);
            assert_eq!(said, used, "{}'s @include in _prelude.lua", def.name);
            for name in said {
                let at = defs.iter().position(|d| d.name == name).unwrap();
                assert!(at < i, "{} includes {name}, defined after it", def.name);
            }
        }
    }

    /// A name the prelude does not define is an error of the build, naming who included it.
    #[test]
    fn an_unknown_include_is_an_error() {
        let err = super::loader::build("x", "-- @include bad_argc, no_such\n", None).unwrap_err();
        assert_eq!(
            err,
            "lua/x.lua includes `no_such`, which lua/_prelude.lua does not define"
        );
    }

    /// Every line of every built script maps back to a file and line holding that very text
    /// (the shebang to itself): what turns Redis' `user_script:NN` into a place in `lua/`.
    #[test]
    fn every_built_line_maps_back_to_its_file() {
        let root = env!("CARGO_MANIFEST_DIR");
        for (file, loaded) in super::all() {
            for (i, line) in loaded.built.text.lines().enumerate() {
                let place = loaded.built.locate(i + 1).unwrap();
                let (path, at) = place.rsplit_once(':').unwrap();
                if path == "(shebang)" {
                    assert!(i == 0 && line.starts_with("#!lua"), "{file}: {place}");
                    continue;
                }
                let source = std::fs::read_to_string(format!("{root}/{path}")).unwrap();
                let at: usize = at.parse().unwrap();
                assert_eq!(
                    source.lines().nth(at - 1),
                    Some(line),
                    "{file} line {}",
                    i + 1
                );
            }
        }
        let loaded = super::all()
            .into_iter()
            .find(|(f, _)| *f == "claim_lease")
            .unwrap()
            .1;
        let message = format!(
            "user_script:2: boom script: {}, on @user_script:2.",
            loaded.get_hash()
        );
        let first = loaded.built.locate(2).unwrap();
        assert!(first.starts_with("lua/_prelude.lua:"), "{first}");
        assert_eq!(
            super::locate_lines(&message),
            format!("{first}: boom script: {}, on @{first}.", loaded.get_hash())
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
