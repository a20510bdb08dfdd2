//! StateService round scripts: save, read.

use super::*;

/// `save_round.lua`: stores a StateService round (`None` = the next one).
pub fn save_round(
    ns: &Keys,
    user: &str,
    session: &str,
    round: Option<u64>,
    state: &str,
    limit: usize,
) -> ScriptCall {
    let rounds = ns.rounds(user, session);
    let p = ns.partition(user);
    ScriptCall::new(&SAVE_ROUND, &[&rounds, &ns.wal(p), &ns.committed(p)])
        .arg(user)
        .arg(session)
        .arg(opt(round))
        .arg(state)
        .arg(limit)
}

/// `read_round.lua`: one round's state (`None` = the latest).
pub fn read_round(ns: &Keys, user: &str, session: &str, round: Option<u64>) -> ScriptCall {
    ScriptCall::new(&READ_ROUND, &[&ns.rounds(user, session)])
        .arg(opt(round))
        .idempotent(true)
}
