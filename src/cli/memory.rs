//! `agentstate memory ...`: long-term memory items (`crate::long_term`). A namespace is
//! written as its labels joined by `.` (`users.alice.prefs`), as Redis keys and the durable
//! tier hold it.

use std::collections::BTreeMap;

use clap::{Args, Subcommand};
use serde_json::{json, Map, Value};

use super::{help, input, print_json, print_opt_json, render, Ctx};
use crate::{Error, MemorySearch, NamespaceListing, NewMemoryItem, Result};

#[derive(Debug, Subcommand)]
pub enum MemoryCmd {
    /// Store a JSON object under KEY in NAMESPACE (replacing it); prints `NAMESPACE KEY`.
    #[command(after_help = help::MEMORY_PUT)]
    Put {
        /// Namespace: labels joined by '.' (users.alice.prefs).
        namespace: String,
        /// Item key.
        key: String,
        /// The item: a JSON object, - (stdin) or @FILE.
        #[arg(value_name = "JSON")]
        value: String,
        /// Expire the item this many minutes after it was put (or last read with
        /// --refresh-ttl).
        #[arg(long, value_name = "MINUTES")]
        ttl: Option<u64>,
        /// An embedding of one field, computed by you: FIELD=[0.1, 0.2, ...]. Repeatable.
        #[arg(long = "vector", value_name = "FIELD=JSON")]
        vectors: Vec<String>,
    },
    /// Print the item as JSON, or null.
    #[command(after_help = help::MEMORY_GET)]
    Get {
        /// Namespace: labels joined by '.'.
        namespace: String,
        /// Item key.
        key: String,
        /// Restart the item's TTL, as a read does in LangGraph with refresh_ttl.
        #[arg(long)]
        refresh_ttl: bool,
    },
    /// Items under a namespace prefix, filtered, ranked by a query vector; JSON lines with
    /// --json.
    #[command(after_help = help::MEMORY_SEARCH)]
    Search(SearchArgs),
    /// Namespaces that hold items, one per line; JSON lines of label arrays with --json.
    #[command(after_help = help::MEMORY_LIST)]
    List {
        /// Only namespaces starting with these labels, joined by '.' ('*' matches any one
        /// label).
        prefix: Option<String>,
        /// Only namespaces ending with these labels ('*' matches any one label).
        #[arg(long, value_name = "NAMESPACE")]
        suffix: Option<String>,
        /// Cut each namespace to this many labels.
        #[arg(long, value_name = "N")]
        max_depth: Option<usize>,
        /// Most namespaces [default: 100].
        #[arg(long, value_name = "N", default_value_t = 100)]
        limit: usize,
        /// Namespaces skipped first.
        #[arg(long, value_name = "N", default_value_t = 0)]
        offset: usize,
    },
    /// Remove the item; prints `deleted`.
    #[command(after_help = help::MEMORY_DELETE)]
    Delete {
        /// Namespace: labels joined by '.'.
        namespace: String,
        /// Item key.
        key: String,
    },
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Namespace prefix: labels joined by '.' (none: every namespace).
    prefix: Option<String>,
    /// Conditions on the item's fields: {"field": value} or {"field": {"$gt": 3}} with
    /// $eq $ne $gt $gte $lt $lte.
    #[arg(long, value_name = "JSON")]
    filter: Option<String>,
    /// A query vector, as a JSON array: results ranked by cosine similarity, with a score.
    #[arg(long, value_name = "JSON")]
    query: Option<String>,
    /// Most results.
    #[arg(long, value_name = "N", default_value_t = 10)]
    limit: usize,
    /// Results skipped first.
    #[arg(long, value_name = "N", default_value_t = 0)]
    offset: usize,
    /// Restart the TTL of each result.
    #[arg(long)]
    refresh_ttl: bool,
}

pub async fn run(ctx: &Ctx, cmd: MemoryCmd) -> Result<()> {
    let store = &ctx.store;
    match cmd {
        MemoryCmd::Put {
            namespace,
            key,
            value,
            ttl,
            vectors,
        } => {
            let ns = labels(&namespace);
            let item = NewMemoryItem {
                value: object("memory item", input::json("memory item", &value)?)?,
                vectors: vectors_of(&vectors)?,
                ttl_minutes: ttl,
            };
            store.put_memory(&ns, &key, &item).await?;
            ctx.emit(
                format!("{namespace} {key}"),
                json!({ "namespace": ns, "key": key }),
            )?;
        }
        MemoryCmd::Get {
            namespace,
            key,
            refresh_ttl,
        } => print_opt_json(
            store
                .get_memory(&labels(&namespace), &key, refresh_ttl)
                .await?,
        )?,
        MemoryCmd::Search(args) => search(ctx, args).await?,
        MemoryCmd::List {
            prefix,
            suffix,
            max_depth,
            limit,
            offset,
        } => {
            let listing = NamespaceListing {
                prefix: prefix.as_deref().map(labels).unwrap_or_default(),
                suffix: suffix.as_deref().map(labels).unwrap_or_default(),
                max_depth,
                limit,
                offset,
            };
            for ns in store.list_memory_namespaces(&listing).await? {
                if ctx.json() {
                    print_json(&ns)?;
                } else {
                    println!("{}", ns.join("."));
                }
            }
        }
        MemoryCmd::Delete { namespace, key } => {
            store.delete_memory(&labels(&namespace), &key).await?;
            ctx.emit(
                "deleted",
                json!({ "namespace": labels(&namespace), "key": key }),
            )?;
        }
    }
    Ok(())
}

async fn search(ctx: &Ctx, args: SearchArgs) -> Result<()> {
    let query = match &args.query {
        Some(raw) => Some(vector("--query", input::json("--query", raw)?)?),
        None => None,
    };
    let search = MemorySearch {
        prefix: args.prefix.as_deref().map(labels).unwrap_or_default(),
        filter: match &args.filter {
            Some(raw) => object("--filter", input::json("--filter", raw)?)?,
            None => Map::new(),
        },
        query,
        limit: args.limit,
        offset: args.offset,
        refresh_ttl: args.refresh_ttl,
    };
    let found = ctx.store.search_memory(&search).await?;
    if ctx.json() {
        for item in &found {
            print_json(item)?;
        }
        return Ok(());
    }
    let rows: Vec<Vec<String>> = found
        .iter()
        .map(|it| {
            vec![
                it.namespace.join("."),
                it.key.clone(),
                it.score.map_or("-".into(), |s| format!("{s:.4}")),
                render::clip(&Value::Object(it.value.clone()).to_string(), 60),
            ]
        })
        .collect();
    render::table(&["NAMESPACE", "KEY", "SCORE", "VALUE"], &rows);
    Ok(())
}

/// A namespace argument's labels (checked by the store: no empty label).
fn labels(namespace: &str) -> Vec<String> {
    namespace.split('.').map(str::to_string).collect()
}

fn object(what: &'static str, value: Value) -> Result<Map<String, Value>> {
    match value {
        Value::Object(map) => Ok(map),
        other => Err(Error::InvalidInput(format!(
            "{what} must be a JSON object, not {other}: wrap the value, e.g. {{\"text\": ...}}"
        ))),
    }
}

fn vector(what: &str, value: Value) -> Result<Vec<f32>> {
    let bad = || {
        Error::InvalidInput(format!(
            "{what} must be a JSON array of numbers, e.g. [0.1, 0.2]"
        ))
    };
    let Value::Array(items) = value else {
        return Err(bad());
    };
    items
        .iter()
        .map(|v| v.as_f64().map(|x| x as f32).ok_or_else(bad))
        .collect()
}

/// `--vector FIELD=[...]` arguments, by field.
fn vectors_of(args: &[String]) -> Result<BTreeMap<String, Vec<f32>>> {
    let mut out = BTreeMap::new();
    for arg in args {
        let (field, raw) = arg.split_once('=').ok_or_else(|| {
            Error::InvalidInput(format!(
                "--vector {arg:?}: expected FIELD=[numbers], e.g. text=[0.1, 0.2]"
            ))
        })?;
        let value = serde_json::from_str(raw).map_err(|e| Error::MalformedJson {
            what: "--vector",
            detail: e.to_string(),
        })?;
        out.insert(field.to_string(), vector("--vector", value)?);
    }
    Ok(out)
}
