//! Redis under Sentinel: `redis+sentinel://[user:password@]host:port[,host:port...]/SERVICE[/DB]`
//! (`rediss+sentinel://` for TLS to the data nodes). The hosts are Sentinels; the master of
//! `SERVICE` is asked of them (redis-rs' `redis::sentinel`, which also checks with `ROLE` that
//! the node it names is a master) whenever a connection is made, so connections made after a
//! failover reach the new master. The user and password are the data nodes' (an ACL user);
//! the Sentinels' own are query parameters:
//!
//! - `sentinel_username=U`, `sentinel_password=P` — `AUTH` to the Sentinels;
//! - `sentinel_tls=yes` — TLS to the Sentinels (`insecure`: TLS without checking the
//!   certificate; `no`, the default: plain TCP).
//!
//! A `#insecure` fragment skips the certificate check of the data nodes, as on `rediss://`.

use std::sync::Arc;
use std::time::Duration;

use redis::sentinel::{Sentinel, SentinelNodeConnectionInfo};
use redis::{Client, ConnectionAddr, IntoConnectionInfo, TlsMode};

use crate::error::{Error, Result};

/// The schemes of a Sentinel URL: plain and TLS to the data nodes.
pub(crate) const SCHEMES: [(&str, &str); 2] = [
    ("redis+sentinel://", "redis://"),
    ("rediss+sentinel://", "rediss://"),
];

/// A Sentinel URL, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SentinelTarget {
    /// A URL per Sentinel, with the Sentinels' credentials and TLS.
    pub sentinels: Vec<String>,
    /// The name the Sentinels monitor the master under.
    pub service: String,
    /// A data node's URL, scheme, credentials, database and fragment, whose `host:port` is
    /// the first Sentinel's: the master's address replaces it.
    pub nodes: String,
}

impl SentinelTarget {
    /// Reads `url` when it has a Sentinel scheme (`None` otherwise).
    pub(crate) fn parse(url: &str) -> Option<Result<SentinelTarget>> {
        let (rest, plain) = SCHEMES.iter().find_map(|(scheme, plain)| {
            strip_prefix_ignore_case(url, scheme).map(|r| (r, *plain))
        })?;
        Some(parse_rest(rest, plain))
    }
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

fn parse_rest(rest: &str, plain: &str) -> Result<SentinelTarget> {
    // The URL itself is not repeated: it may carry passwords.
    let bad = |why: String| Error::InvalidInput(format!("Sentinel URL: {why}"));
    let (rest, fragment) = match rest.split_once('#') {
        Some((rest, fragment)) => (rest, format!("#{fragment}")),
        None => (rest, String::new()),
    };
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (auth, hosts) = match authority.rsplit_once('@') {
        Some((auth, hosts)) => (format!("{auth}@"), hosts),
        None => (String::new(), authority),
    };
    let hosts: Vec<&str> = hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .collect();
    if hosts.is_empty() {
        return Err(bad("no Sentinel given (host:port before /SERVICE)".into()));
    }
    let mut path = path.split('/').filter(|p| !p.is_empty());
    let service = path
        .next()
        .ok_or_else(|| {
            bad("no service named (.../SERVICE, the name the Sentinels monitor)".into())
        })?
        .to_string();
    let db = match path.next() {
        Some(db) if db.parse::<i64>().is_ok() => format!("/{db}"),
        Some(db) => return Err(bad(format!("the database {db:?} is not a number"))),
        None => String::new(),
    };
    let (mut s_user, mut s_pass, mut s_scheme, mut s_fragment) = ("", "", "redis://", "");
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "sentinel_username" => s_user = value,
            "sentinel_password" => s_pass = value,
            "sentinel_tls" => match value {
                "yes" | "true" | "1" => s_scheme = "rediss://",
                "insecure" => (s_scheme, s_fragment) = ("rediss://", "#insecure"),
                "no" | "false" | "0" => s_scheme = "redis://",
                other => {
                    return Err(bad(format!(
                        "sentinel_tls={other}: use yes, insecure or no"
                    )))
                }
            },
            other => {
                return Err(bad(format!(
                    "unknown parameter {other:?} (known: sentinel_username, sentinel_password, sentinel_tls)"
                )))
            }
        }
    }
    let s_auth = match (s_user, s_pass) {
        ("", "") => String::new(),
        (user, pass) => format!("{user}:{pass}@"),
    };
    Ok(SentinelTarget {
        sentinels: hosts
            .iter()
            .map(|h| format!("{s_scheme}{s_auth}{h}{s_fragment}"))
            .collect(),
        service,
        nodes: format!("{plain}{auth}{}{db}{fragment}", hosts[0]),
    })
}

/// How long asking the Sentinels for the master (and checking its role) may take.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(3);

/// Finds the current master of a Sentinel-managed Redis. Cheap to share: lookups take
/// turns (the Sentinels' connections are kept between them).
pub(crate) struct Locator {
    /// The Sentinels and their connections.
    sentinel: tokio::sync::Mutex<Sentinel>,
    /// The master's name.
    service: String,
    /// How to connect to a data node (credentials, database, TLS).
    node: SentinelNodeConnectionInfo,
    /// A data node's URL ([`SentinelTarget::nodes`]).
    nodes: String,
}

impl std::fmt::Debug for Locator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Locator")
            .field("service", &self.service)
            .finish()
    }
}

impl Locator {
    /// A locator for `target` (nothing is contacted yet).
    pub(crate) fn new(target: &SentinelTarget) -> Result<Arc<Locator>> {
        let sentinel = Sentinel::build(target.sentinels.clone()).map_err(Error::from_redis)?;
        let info = target
            .nodes
            .as_str()
            .into_connection_info()
            .map_err(Error::from_redis)?;
        let mut node = SentinelNodeConnectionInfo::default()
            .set_redis_connection_info(info.redis_settings().clone());
        if let ConnectionAddr::TcpTls { insecure, .. } = info.addr() {
            node = node.set_tls_mode(if *insecure {
                TlsMode::Insecure
            } else {
                TlsMode::Secure
            });
        }
        Ok(Arc::new(Locator {
            sentinel: tokio::sync::Mutex::new(sentinel),
            service: target.service.clone(),
            node,
            nodes: target.nodes.clone(),
        }))
    }

    /// A client of the master the Sentinels name now, checked to be one. Failing is
    /// `RedisUnavailable`, retry-safe: nothing was sent (during a failover no master may be
    /// known for a few seconds).
    pub(crate) async fn master(&self) -> Result<Client> {
        let lookup = async {
            let mut sentinel = self.sentinel.lock().await;
            sentinel
                .async_master_for(&self.service, Some(&self.node))
                .await
        };
        match tokio::time::timeout(LOOKUP_TIMEOUT, lookup).await {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(e)) => Err(Error::unavailable(format!(
                "no master of {:?} found through the Sentinels: {e}",
                self.service
            ))),
            Err(_) => Err(Error::unavailable(format!(
                "the Sentinels named no master of {:?} within {LOOKUP_TIMEOUT:?}",
                self.service
            ))),
        }
    }

    /// The URL of the master the Sentinels name now (same scheme, credentials, database and
    /// fragment as the Sentinel URL gives the data nodes), for connections of their own.
    pub(crate) async fn master_url(&self) -> Result<String> {
        let client = self.master().await?;
        let (host, port) = match client.get_connection_info().addr() {
            ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                (host.clone(), *port)
            }
            other => {
                return Err(Error::redis(format!(
                    "the Sentinels named a master that is not host:port: {other}"
                )))
            }
        };
        node_url(&self.nodes, &host, port)
    }
}

/// Where the one node is: a URL, or the master the Sentinels name at the time of asking.
#[derive(Clone, Debug)]
pub(crate) enum Node {
    /// Its URL.
    Fixed(String),
    /// Asked of the Sentinels.
    Sentinel(Arc<Locator>),
}

impl Node {
    /// The node's URL now (on Sentinel, the current master's).
    pub(crate) async fn url(&self) -> Result<String> {
        match self {
            Node::Fixed(url) => Ok(url.clone()),
            Node::Sentinel(locator) => locator.master_url().await,
        }
    }
}

/// The URL of node `host:port` of a cluster whose seed URL is `seed`, or of a Sentinel
/// deployment whose data node URL is `seed` (same scheme, credentials and options).
pub(crate) fn node_url(seed: &str, host: &str, port: u16) -> Result<String> {
    let mut url = url_parts(seed)?;
    url.host_port = format!("{host}:{port}");
    Ok(format!(
        "{}{}{}{}",
        url.scheme, url.auth, url.host_port, url.tail
    ))
}

/// A node URL split for [`node_url`].
struct UrlParts {
    scheme: String,
    auth: String,
    host_port: String,
    tail: String,
}

fn url_parts(url: &str) -> Result<UrlParts> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| Error::InvalidInput(format!("redis url {url:?} has no scheme")))?;
    let (auth, rest) = match rest.rsplit_once('@') {
        Some((auth, rest)) => (format!("{auth}@"), rest),
        None => (String::new(), rest),
    };
    let (host_port, tail) = match rest.find(['/', '#', '?']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    Ok(UrlParts {
        scheme: format!("{scheme}://"),
        auth,
        host_port: host_port.to_string(),
        tail: tail.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::SentinelTarget;

    fn parse(url: &str) -> SentinelTarget {
        SentinelTarget::parse(url).unwrap().unwrap()
    }

    #[test]
    fn a_sentinel_url_names_the_sentinels_the_service_and_the_nodes() {
        assert!(SentinelTarget::parse("redis://h:1").is_none());
        assert_eq!(
            parse("redis+sentinel://s1:26379,s2:26380/mymaster"),
            SentinelTarget {
                sentinels: vec!["redis://s1:26379".into(), "redis://s2:26380".into()],
                service: "mymaster".into(),
                nodes: "redis://s1:26379".into(),
            }
        );
        assert_eq!(
            parse("rediss+sentinel://app:pw@s1:26379/svc/2?sentinel_password=sp&sentinel_tls=insecure#insecure"),
            SentinelTarget {
                sentinels: vec!["rediss://:sp@s1:26379#insecure".into()],
                service: "svc".into(),
                nodes: "rediss://app:pw@s1:26379/2#insecure".into(),
            }
        );
        assert_eq!(
            parse("redis+sentinel://s1:1/svc?sentinel_username=su&sentinel_password=sp&sentinel_tls=yes")
                .sentinels,
            vec!["rediss://su:sp@s1:1".to_string()]
        );
        for bad in [
            "redis+sentinel://s1:1",
            "redis+sentinel:///svc",
            "redis+sentinel://s1:1/svc/x",
            "redis+sentinel://s1:1/svc?sentinel_tls=maybe",
            "redis+sentinel://s1:1/svc?password=x",
        ] {
            assert!(SentinelTarget::parse(bad).unwrap().is_err(), "{bad}");
        }
    }
}
