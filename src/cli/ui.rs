//! `agentstate ui`: serves the read-only web console (`crate::web::console`) until
//! SIGINT/SIGTERM.

use crate::Result;
use tokio_util::sync::CancellationToken;

use super::Ctx;

/// Arguments of `agentstate ui`.
#[derive(Debug, clap::Args)]
pub struct UiArgs {
    /// Address to serve the console on. Anything but loopback needs --token.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
    listen: String,
    /// Token every request must carry: browsers sign in with it once (a cookie), scripts
    /// send `Authorization: Bearer TOKEN`.
    #[arg(
        long,
        env = "AGENTSTATE_UI_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,
}

impl UiArgs {
    /// Checks the listen address and the token before Redis is touched.
    pub fn check(&self) -> Result<std::net::SocketAddr> {
        let addr = crate::web::parse_listen("--listen", &self.listen)?;
        crate::web::console::check_exposure(addr, self.token.as_deref())?;
        Ok(addr)
    }
}

/// Serves the console; prints its URL on stdout once it listens.
pub async fn ui(ctx: &Ctx, args: UiArgs) -> Result<()> {
    let addr = args.check()?;
    let listener = crate::web::bind("--listen", addr).await?;
    // The handlers are in place before the URL is printed: whoever read it may stop us.
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let cancel = CancellationToken::new();
    let on_signal = cancel.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        on_signal.cancel();
    });
    let url = format!("http://{}/", listener.local_addr()?);
    ctx.emit(&url, serde_json::json!({ "url": url }))?;
    tracing::info!(url = %url, "console serving (read-only); Ctrl-C stops it");
    crate::web::console::serve(
        ctx.store.clone(),
        ctx.global.db(),
        args.token,
        listener,
        cancel,
    )
    .await
}
