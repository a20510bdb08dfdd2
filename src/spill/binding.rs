//! A namespace is bound to one durable tier. The first daemon gives its tier an identity (the
//! tier's namespace record) and records it in Redis (`<prefix>:config`: `durable`, and
//! `durable_at` where the tier is, for messages) with `bind_namespace.lua`. A daemon whose
//! tier holds another identity, or none, refuses to start, so two tiers never split one
//! namespace's partitions; and since only a daemon writes the markers that say "a daemon
//! checked this Redis" (`<prefix>:{p}:committed`), only a process holding the bound tier
//! marks partitions checked, re-seeds or restores. Redis losing its data loses the binding:
//! the first daemon back binds it again before it re-seeds anything.

use std::path::Path;

use crate::error::{Error, Result};
use crate::scripts;
use crate::store::Store;

use crate::durable::Location;

/// The durable tier a namespace is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Binding {
    /// The tier's identity (hex), recorded in the tier and in Redis.
    pub identity: String,
    /// Where the tier is, for people: an absolute path, or a URL without its password.
    pub location: String,
}

impl Binding {
    /// The binding of the tier at `db` with `identity`.
    pub(crate) fn of(db: &Path, identity: String) -> Binding {
        let location = match Location::of(db) {
            Location::Sqlite(path) => std::fs::canonicalize(path)
                .or_else(|_| std::path::absolute(path))
                .map_or_else(|_| path.display().to_string(), |p| p.display().to_string()),
            postgres => postgres.display(),
        };
        Binding { identity, location }
    }
}

/// The binding Redis records for the namespace, if any.
pub(crate) async fn recorded(store: &Store) -> Result<Option<Binding>> {
    let mut conn = store.conn().await?;
    let (identity, location): (Option<String>, Option<String>) = redis::cmd("HMGET")
        .arg(store.keys().config())
        .arg("durable")
        .arg("durable_at")
        .query_async(&mut conn)
        .await?;
    Ok(identity.map(|identity| Binding {
        identity,
        location: location.unwrap_or_default(),
    }))
}

/// Binds the namespace to `ours` unless it is bound already; the refusal
/// ([`Error::NamespaceMismatch`]) when it is bound to another tier.
pub(crate) async fn bind(store: &Store, ours: &Binding, db: &Path) -> Result<()> {
    let call = scripts::bind_namespace(store.keys(), &ours.identity, &ours.location);
    let (identity, location): (String, String) = store.invoke(&call).await?;
    if identity == ours.identity {
        return Ok(());
    }
    let bound = Binding { identity, location };
    Err(refusal(store, &bound, db, Some(&ours.identity)))
}

/// The one line a daemon on the wrong durable tier stops with: the tier the namespace is
/// bound to, this one (`ours`: its identity, or `None` when it has none or does not exist),
/// and what to do.
pub(crate) fn refusal(store: &Store, bound: &Binding, db: &Path, ours: Option<&str>) -> Error {
    let keys = store.keys();
    let redis_url = crate::address::redacted(&store.config().redis_url);
    let here = Location::of(db);
    let state = match (ours, &here) {
        (Some(id), _) => format!("has identity {id}"),
        (None, Location::Sqlite(path)) if !path.exists() => "does not exist".to_string(),
        (None, _) => "has no identity yet".to_string(),
    };
    Error::NamespaceMismatch(format!(
        "namespace {prefix:?} in Redis at {redis} is bound to the durable tier {at} (identity {id}); this process's durable tier {here} {state} — run the daemon on {at} (--db, or AGENTSTATE_DB); if that tier is gone for good, unbind the namespace with `redis-cli -u {redis} HDEL {config} durable durable_at` and start again (its durable history starts from this tier)",
        prefix = keys.prefix(),
        redis = redis_url,
        at = if bound.location.is_empty() { "recorded without a location" } else { &bound.location },
        id = bound.identity,
        here = here.display(),
        config = keys.config(),
    ))
}
