//! The Lua script registry: every file in `lua/` embedded once, prefixed with the shared
//! `_prelude.lua`, hashed once, and called by EVALSHA with a SCRIPT LOAD fallback on NOSCRIPT.
//!
//! Architecture Invariant: this module is the only caller of EVALSHA; concept modules build
//! a [`redis::ScriptInvocation`] with the keys from [`crate::keys`] and hand it to
//! [`crate::Store`]'s invoke.

use std::sync::LazyLock;

use redis::Script;

macro_rules! lua_script {
    ($(#[$doc:meta])* $name:ident, $file:literal) => {
        $(#[$doc])*
        pub(crate) static $name: LazyLock<Script> = LazyLock::new(|| {
            Script::new(concat!(
                include_str!("../lua/_prelude.lua"),
                include_str!(concat!("../lua/", $file, ".lua"))
            ))
        });
    };
}

lua_script!(/// `lua/create_session.lua`
    CREATE_SESSION, "create_session");
lua_script!(/// `lua/link_child.lua`
    LINK_CHILD, "link_child");
lua_script!(/// `lua/update_session.lua`
    UPDATE_SESSION, "update_session");
lua_script!(/// `lua/close_session.lua`
    CLOSE_SESSION, "close_session");
lua_script!(/// `lua/append_message.lua`
    APPEND_MESSAGE, "append_message");
lua_script!(/// `lua/compact.lua`
    COMPACT, "compact");
lua_script!(/// `lua/load_messages.lua`
    LOAD_MESSAGES, "load_messages");
lua_script!(/// `lua/write_working.lua`
    WRITE_WORKING, "write_working");
lua_script!(/// `lua/read_working.lua`
    READ_WORKING, "read_working");
lua_script!(/// `lua/record_usage.lua`
    RECORD_USAGE, "record_usage");
lua_script!(/// `lua/create_checkpoint.lua`
    CREATE_CHECKPOINT, "create_checkpoint");
lua_script!(/// `lua/save_round.lua`
    SAVE_ROUND, "save_round");
lua_script!(/// `lua/read_round.lua`
    READ_ROUND, "read_round");
lua_script!(/// `lua/record_decision.lua`
    RECORD_DECISION, "record_decision");
lua_script!(/// `lua/record_outcome.lua`
    RECORD_OUTCOME, "record_outcome");
lua_script!(/// `lua/dead_letter.lua`
    DEAD_LETTER, "dead_letter");
lua_script!(/// `lua/set_user_value.lua`
    SET_USER_VALUE, "set_user_value");
lua_script!(/// `lua/delete_user_value.lua`
    DELETE_USER_VALUE, "delete_user_value");
lua_script!(/// `lua/forget_user.lua`
    FORGET_USER, "forget_user");
lua_script!(/// `lua/reseed_user_values.lua`
    RESEED_USER_VALUES, "reseed_user_values");
lua_script!(/// `lua/claim_lease.lua`
    CLAIM_LEASE, "claim_lease");
lua_script!(/// `lua/restore_session.lua`
    RESTORE_SESSION, "restore_session");
lua_script!(/// `lua/restore_rounds.lua`
    RESTORE_ROUNDS, "restore_rounds");

/// Every script with its file name, for pre-loading (SCRIPT LOAD before pipelines) and for
/// the header test.
pub(crate) fn all() -> [(&'static str, &'static Script); 23] {
    [
        ("create_session", &CREATE_SESSION),
        ("link_child", &LINK_CHILD),
        ("update_session", &UPDATE_SESSION),
        ("close_session", &CLOSE_SESSION),
        ("append_message", &APPEND_MESSAGE),
        ("compact", &COMPACT),
        ("load_messages", &LOAD_MESSAGES),
        ("write_working", &WRITE_WORKING),
        ("read_working", &READ_WORKING),
        ("record_usage", &RECORD_USAGE),
        ("create_checkpoint", &CREATE_CHECKPOINT),
        ("save_round", &SAVE_ROUND),
        ("read_round", &READ_ROUND),
        ("record_decision", &RECORD_DECISION),
        ("record_outcome", &RECORD_OUTCOME),
        ("dead_letter", &DEAD_LETTER),
        ("set_user_value", &SET_USER_VALUE),
        ("delete_user_value", &DELETE_USER_VALUE),
        ("forget_user", &FORGET_USER),
        ("reseed_user_values", &RESEED_USER_VALUES),
        ("claim_lease", &CLAIM_LEASE),
        ("restore_session", &RESTORE_SESSION),
        ("restore_rounds", &RESTORE_ROUNDS),
    ]
}

/// The file name of the registered script whose SHA1 is `sha` (for readable benchmark output).
pub(crate) fn name_of(sha: &str) -> Option<&'static str> {
    all()
        .into_iter()
        .find(|(_, script)| script.get_hash().eq_ignore_ascii_case(sha))
        .map(|(name, _)| name)
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
}
