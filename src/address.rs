//! How a Redis URL is shown to people — in error lines, logs and notices: the address alone
//! (`host:port`), never the password. The library's own URL parsing stays in `config`.

/// The schemes a Redis URL may start with (single node, TLS, cluster seed lists, Sentinels,
/// sockets).
pub const SCHEMES: [&str; 8] = [
    "redis",
    "rediss",
    "redis+cluster",
    "rediss+cluster",
    "redis+sentinel",
    "rediss+sentinel",
    "unix",
    "redis+unix",
];

/// The address of each URL of a comma-separated list, joined with `,`: `host:port` (port
/// 6379 when the URL names none), or the socket path of a `unix://` URL.
pub fn address(url: &str) -> String {
    url.split(',')
        .map(|part| one_address(part.trim()))
        .collect::<Vec<_>>()
        .join(",")
}

fn one_address(url: &str) -> String {
    let url = url.split('#').next().unwrap_or(url);
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (scheme, rest),
        None => ("", url),
    };
    if scheme.ends_with("unix") {
        return rest.split('?').next().unwrap_or(rest).to_string();
    }
    let authority = rest.split(['/', '?']).next().unwrap_or(rest);
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let has_port = match host_port.rfind(']') {
        // [::1]:6379
        Some(end) => host_port[end..].contains(':'),
        None => host_port.contains(':'),
    };
    if has_port || host_port.is_empty() {
        host_port.to_string()
    } else {
        format!("{host_port}:6379")
    }
}

/// The URL list with every password replaced by `***` (user names are kept), a Sentinel
/// URL's `sentinel_password` too.
pub fn redacted(url: &str) -> String {
    let url = match url.split_once("sentinel_password=") {
        Some((head, tail)) => {
            let end = tail.find(['&', '#']).unwrap_or(tail.len());
            format!("{head}sentinel_password=***{}", &tail[end..])
        }
        None => url.to_string(),
    };
    url.split(',')
        .map(|part| {
            let Some((scheme, rest)) = part.split_once("://") else {
                return redact_authority(part);
            };
            format!("{scheme}://{}", redact_authority(rest))
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A `--db` for people: a PostgreSQL URL with its password (`user:password@`) replaced by
/// `***` (a lone `user@` is the user, shown); a SQLite path as it is.
pub fn redacted_db(db: &str) -> String {
    let Some((scheme, rest)) = db.split_once("://") else {
        return db.to_string();
    };
    let (auth, host) = match rest.rsplit_once('@') {
        Some((auth, host)) => (Some(auth), host),
        None => (None, rest),
    };
    match auth.and_then(|a| a.split_once(':')) {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => db.to_string(),
    }
}

/// `user:password@host...` → `user:***@host...`; `:password@host` → `:***@host`.
fn redact_authority(rest: &str) -> String {
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or("");
            if userinfo.contains(':') {
                format!("{user}:***@{host}{tail}")
            } else {
                // A lone userinfo is a password to redis-rs (`redis://secret@host`).
                format!("***@{host}{tail}")
            }
        }
        None => rest.to_string(),
    }
}

/// Why `url` cannot be a Redis URL, if it cannot: each comma-separated part must start with
/// one of [`SCHEMES`] (parts after the first of a cluster seed list or a Sentinel list may
/// leave it out); a Sentinel URL must read as one.
pub fn check(url: &str) -> Result<(), String> {
    if let Some(parsed) = crate::sentinel::SentinelTarget::parse(url) {
        return parsed.map(|_| ()).map_err(|e| match e {
            crate::error::Error::InvalidInput(why) => {
                why.trim_start_matches("Sentinel URL: ").to_string()
            }
            other => other.to_string(),
        });
    }
    for (i, part) in url.split(',').map(str::trim).enumerate() {
        match part.split_once("://") {
            Some((scheme, rest)) => {
                if !SCHEMES.contains(&scheme.to_ascii_lowercase().as_str()) {
                    return Err(format!("the scheme {scheme}:// is not a Redis scheme"));
                }
                if rest.is_empty() {
                    return Err("it names no host".into());
                }
            }
            None if i == 0 => return Err("it has no scheme (redis://...)".into()),
            None if part.is_empty() => return Err("it has an empty entry".into()),
            None => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_durable_tier_is_shown_without_its_password() {
        assert_eq!(
            redacted_db("postgres://app:s3cret@db:5432/x?sslmode=require"),
            "postgres://app:***@db:5432/x?sslmode=require"
        );
        assert_eq!(redacted_db("postgres://app@db/x"), "postgres://app@db/x");
        assert_eq!(redacted_db("./agentstate.db"), "./agentstate.db");
    }

    #[test]
    fn addresses_never_show_passwords() {
        assert_eq!(address("redis://127.0.0.1:6379"), "127.0.0.1:6379");
        assert_eq!(address("redis://u:secret@h:7000/2"), "h:7000");
        assert_eq!(address("rediss://h/#insecure"), "h:6379");
        assert_eq!(address("redis://a:1,redis://b:2"), "a:1,b:2");
        assert_eq!(address("redis+cluster://a:1,b:2"), "a:1,b:2");
        assert_eq!(address("unix:///tmp/r.sock"), "/tmp/r.sock");
        assert_eq!(address("redis://[::1]:6380"), "[::1]:6380");
        assert_eq!(redacted("redis://u:secret@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redacted("redis://secret@h:1"), "redis://***@h:1");
        assert_eq!(redacted("redis://h:1"), "redis://h:1");
        assert_eq!(address("redis+sentinel://u:pw@s1:1,s2:2/svc"), "s1:1,s2:2");
        assert_eq!(
            redacted("redis+sentinel://u:pw@s1:1,s2:2/svc?sentinel_password=sp&sentinel_tls=yes"),
            "redis+sentinel://u:***@s1:1,s2:2/svc?sentinel_password=***&sentinel_tls=yes"
        );
    }

    #[test]
    fn check_names_what_is_wrong() {
        assert!(check("redis://h:1").is_ok());
        assert!(check("redis+cluster://a:1,b:2").is_ok());
        assert!(check("redis://a:1,redis://b:2").is_ok());
        assert!(check("redis+sentinel://a:1,b:2/svc").is_ok());
        assert_eq!(
            check("redis+sentinel://a:1,b:2").unwrap_err(),
            "no service named (.../SERVICE, the name the Sentinels monitor)"
        );
        assert_eq!(
            check("http://x").unwrap_err(),
            "the scheme http:// is not a Redis scheme"
        );
        assert_eq!(
            check("localhost:6379").unwrap_err(),
            "it has no scheme (redis://...)"
        );
    }
}
