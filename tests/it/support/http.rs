//! The daemon's HTTP endpoints: GET requests and Prometheus series.

/// `GET path` from a local HTTP server (the daemon's metrics, the console): the status and
/// the body, or `None` when nothing answers. `headers` are sent as they are.
pub fn http_get(port: u16, path: &str, headers: &[&str]) -> Option<(u16, String)> {
    http_get_as(port, "127.0.0.1", path, headers)
}

/// [`http_get`] with `host` as the `Host` header (what a browser sends for the name it
/// resolved to 127.0.0.1).
pub fn http_get_as(port: u16, host: &str, path: &str, headers: &[&str]) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    conn.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .ok()?;
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for h in headers {
        request.push_str(h);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    conn.write_all(request.as_bytes()).ok()?;
    let mut reply = String::new();
    conn.read_to_string(&mut reply).ok()?;
    let status = reply.split(' ').nth(1)?.parse().ok()?;
    let body = reply.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Some((status, body.to_string()))
}

/// The value of the Prometheus series `series` (its name and labels exactly as rendered,
/// e.g. `agentstate_restores_total{result="restored"}`) in a `/metrics` body.
pub fn metric(body: &str, series: &str) -> Option<f64> {
    body.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// The values of every series named `name` (any labels) in a `/metrics` body.
pub fn metric_values(body: &str, name: &str) -> Vec<f64> {
    body.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect()
}
