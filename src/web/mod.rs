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
/// event streams end with it).
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    cancel: CancellationToken,
) -> Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { cancel.cancelled().await })
        .await
        .map_err(|e| Error::io(format!("http server: {e}")))
}
