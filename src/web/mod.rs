//! HTTP surfaces of the one binary (feature `cli`): the spill daemon's Prometheus and health
//! endpoints (`metrics`, `agentstate spill --metrics`) and the read-only web console
//! (`console`, `agentstate ui`). Both are axum routers served by [`serve`].
//!
//! # Layout
//! - this module: binding a listen address and serving a router until cancelled.
//! - `metrics`: `/metrics` (Prometheus text), `/healthz`, `/readyz`.
//! - `console`: the console's pages, live updates (server-sent events) and token gate.

pub(crate) mod console;
pub(crate) mod metrics;

use std::net::SocketAddr;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};

/// Reads a listen address (`127.0.0.1:8080`, `[::1]:8080`, `0.0.0.0:9464`; `localhost:P`
/// is `127.0.0.1:P`); `flag` names the option in the error.
pub(crate) fn parse_listen(flag: &str, text: &str) -> Result<SocketAddr> {
    let text = text.trim();
    let resolved = match text.strip_prefix("localhost:") {
        Some(port) => format!("127.0.0.1:{port}"),
        None => text.to_string(),
    };
    resolved.parse().map_err(|_| {
        Error::InvalidInput(format!(
            "{flag} {text:?} is not an address to listen on: give IP:PORT, e.g. 127.0.0.1:8080 or 0.0.0.0:9464"
        ))
    })
}

/// Binds `addr`, with an error that names `flag` when the port is taken or not allowed.
pub(crate) async fn bind(flag: &str, addr: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| Error::io(format!("{flag} {addr}: cannot listen there: {e}")))
}

/// Serves `router` on `listener` until `cancel` fires (requests in flight finish; open
/// event streams end with it). On a loopback address only requests that name this server
/// in `Host` are served (see [`local_host`]).
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    cancel: CancellationToken,
) -> Result<()> {
    let bound = listener.local_addr()?;
    let router = if bound.ip().is_loopback() {
        router.layer(middleware::from_fn_with_state(bound, guard_host))
    } else {
        router
    };
    serve_any_host(listener, router, cancel).await
}

/// [`serve`] without the `Host` check: for a server whose every request must carry a token
/// anyway (a page of another site, rebound to this address, has none).
pub(crate) async fn serve_any_host(
    listener: TcpListener,
    router: Router,
    cancel: CancellationToken,
) -> Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { cancel.cancelled().await })
        .await
        .map_err(|e| Error::io(format!("http server: {e}")))
}

/// Answers 403 to a request whose `Host` does not name this server (see [`local_host`]).
/// A server on loopback trusts whoever reaches it, and a web page can reach it by DNS
/// rebinding (its own name, resolved to 127.0.0.1 after the page loaded): the browser then
/// sends that name as `Host`, which this refuses.
async fn guard_host(State(bound): State<SocketAddr>, request: Request, next: Next) -> Response {
    let Some(host) = request.headers().get(header::HOST) else {
        // No browser leaves Host out; a client that does is not a rebound page.
        return next.run(request).await;
    };
    if local_host(host.as_bytes(), bound) {
        return next.run(request).await;
    }
    let shown = String::from_utf8_lossy(host.as_bytes())
        .chars()
        .take(100)
        .collect::<String>();
    (
        StatusCode::FORBIDDEN,
        format!(
            "Host {shown:?} is not this server: on {bound} it answers only to {}, localhost, 127.0.0.1 and [::1] (a guard against DNS rebinding)\n",
            bound.ip()
        ),
    )
        .into_response()
}

/// Whether `host` (a `Host` header) names the server bound to `bound`: its own IP,
/// `localhost`, `127.0.0.1` or `[::1]`, each with or without a port.
fn local_host(host: &[u8], bound: SocketAddr) -> bool {
    let Ok(host) = std::str::from_utf8(host) else {
        return false;
    };
    let host = host.trim().to_ascii_lowercase();
    // `name[:port]`, or `[ipv6][:port]`.
    let (name, port) = match host.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((ip, "")) => (ip, None),
            Some((ip, port)) => match port.strip_prefix(':') {
                Some(port) => (ip, Some(port)),
                None => return false,
            },
            None => return false,
        },
        None => match host.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host.as_str(), None),
        },
    };
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok());
    let own = bound.ip().to_string();
    port_ok && (matches!(name, "localhost" | "127.0.0.1" | "::1") || name == own)
}

#[cfg(test)]
mod tests {
    use super::local_host;

    #[test]
    fn loopback_servers_answer_to_their_own_names_only() {
        let v4 = "127.0.0.1:8080".parse().unwrap();
        let v6 = "[::1]:8080".parse().unwrap();
        let other = "127.0.0.2:9464".parse().unwrap();
        for host in [
            "127.0.0.1",
            "127.0.0.1:8080",
            "localhost",
            "LocalHost:9000",
            "[::1]",
        ] {
            assert!(local_host(host.as_bytes(), v4), "{host}");
        }
        for host in ["[::1]:8080", "localhost:8080"] {
            assert!(local_host(host.as_bytes(), v6), "{host}");
        }
        assert!(local_host(b"127.0.0.2:9464", other));
        for host in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "127.0.0.1.nip.io:8080",
            "127.0.0.2:8080",
            "[::1",
            "[::1]x",
            "localhost:http",
            "",
        ] {
            assert!(!local_host(host.as_bytes(), v4), "{host}");
        }
    }
}
