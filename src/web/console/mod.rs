//! `agentstate ui`: a read-only web console served from the binary. Server-rendered pages
//! (`pages`, maud) over read-only views (`views`), live updates of a session's page through
//! server-sent events (`live`), and one stylesheet and script embedded from `assets/`.
//!
//! Access: on a loopback address anyone on the machine may look (requests whose `Host`
//! names another server are refused: DNS rebinding); any other address needs `--token`,
//! which every request must carry (`Authorization: Bearer <token>`, or the cookie the login
//! form sets). Every response forbids inline scripts
//! (Content-Security-Policy), on top of maud escaping everything agents wrote.

mod live;
mod pages;
mod views;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Form, Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;
use maud::Markup;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::spill::inspect;
use crate::store::Store;

/// The cookie the login form sets (its value is the token).
const COOKIE: &str = "agentstate_console";

/// How often the spill page's history is sampled, and how many samples it keeps (10 min).
const SAMPLE_EVERY: Duration = Duration::from_secs(5);
const SAMPLES_KEPT: usize = 120;

/// What every handler reads.
#[derive(Clone)]
pub(crate) struct Console {
    /// The namespace.
    store: Store,
    /// The durable tier (`--db`).
    db: Arc<PathBuf>,
    /// The token every request must carry, if any.
    token: Option<Arc<str>>,
    /// Spill figures sampled over the last minutes, oldest first.
    history: Arc<Mutex<VecDeque<LagSample>>>,
    /// Ends the event streams when the server stops.
    cancel: CancellationToken,
}

/// One sample of the spill figures.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LagSample {
    /// When, ms since the epoch (Redis clock).
    pub at: i64,
    /// The largest lag of any partition, ms.
    pub max_lag_ms: u64,
    /// Entries not committed, over every partition and both streams.
    pub pending: usize,
}

/// Refuses a listen address other than loopback without a token: the console shows every
/// session's content to whoever reaches it.
pub(crate) fn check_exposure(addr: SocketAddr, token: Option<&str>) -> Result<()> {
    if addr.ip().is_loopback() || token.is_some_and(|t| !t.is_empty()) {
        return Ok(());
    }
    Err(Error::InvalidInput(format!(
        "--listen {addr} is not a loopback address, and the console shows every session to whoever reaches it: \
pass --token TOKEN (or set AGENTSTATE_UI_TOKEN)"
    )))
}

/// Serves the console on `listener` until `cancel` fires.
pub(crate) async fn serve(
    store: Store,
    db: PathBuf,
    token: Option<String>,
    listener: tokio::net::TcpListener,
    cancel: CancellationToken,
) -> Result<()> {
    let console = Console {
        store,
        db: Arc::new(db),
        token: token.filter(|t| !t.is_empty()).map(Into::into),
        history: Arc::default(),
        cancel: cancel.clone(),
    };
    let sampler = tokio::spawn(sample_spill(console.clone()));
    // With a token every request carries its proof; without one, loopback is the only
    // protection and `Host` must name this server (DNS rebinding).
    let served = if console.token.is_some() {
        super::serve_any_host(listener, router(console), cancel.clone()).await
    } else {
        super::serve(listener, router(console), cancel.clone()).await
    };
    cancel.cancel();
    sampler.await.map_err(|e| Error::io(e.to_string()))?;
    served
}

/// The console's routes behind the token gate, and the login form outside it.
fn router(console: Console) -> Router {
    let gated = Router::new()
        .route("/", get(|| async { Redirect::to("/sessions") }))
        .route("/sessions", get(sessions))
        .route("/sessions/{sid}", get(session))
        .route("/sessions/{sid}/events", get(live::events))
        .route("/decisions", get(decisions))
        .route("/memory", get(memory_namespaces))
        .route("/memory/{namespace}", get(memory_namespace))
        .route("/spill", get(spill))
        .layer(middleware::from_fn_with_state(console.clone(), gate));
    Router::new()
        .merge(gated)
        .route("/login", get(login_form).post(login))
        .route("/assets/console.css", get(css))
        .route("/assets/console.js", get(js))
        .layer(middleware::from_fn(harden))
        .with_state(console)
}

/// Equal without an early exit on the first differing byte.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The token a request carries: its bearer token, else the login cookie.
fn presented(headers: &HeaderMap) -> Option<String> {
    if let Some(bearer) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    {
        return Some(bearer.trim().to_string());
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_string())
}

/// Lets a request through when no token is set or it carries the token; else answers 401
/// with the login form.
async fn gate(State(console): State<Console>, request: Request, next: Next) -> Response {
    let Some(token) = &console.token else {
        return next.run(request).await;
    };
    match presented(request.headers()) {
        Some(given) if same(&given, token) => next.run(request).await,
        _ => (StatusCode::UNAUTHORIZED, pages::login(false)).into_response(),
    }
}

/// Headers on every response: no inline script, no framing, no sniffing.
async fn harden(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

async fn login_form() -> Markup {
    pages::login(false)
}

/// The login form's fields.
#[derive(serde::Deserialize)]
struct Login {
    token: String,
}

/// Sets the cookie and goes to the sessions when the token is right; 401 with the form again
/// otherwise.
async fn login(State(console): State<Console>, Form(form): Form<Login>) -> Response {
    match &console.token {
        Some(token) if same(form.token.trim(), token) => {
            let cookie = format!(
                "{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict",
                form.token.trim()
            );
            let mut response = Redirect::to("/sessions").into_response();
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                response.headers_mut().insert(header::SET_COOKIE, value);
            }
            response
        }
        Some(_) => (StatusCode::UNAUTHORIZED, pages::login(true)).into_response(),
        None => Redirect::to("/sessions").into_response(),
    }
}

async fn css() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("assets/console.css"),
    )
}

async fn js() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("assets/console.js"),
    )
}

impl Console {
    /// The header every page shows.
    fn chrome(&self) -> (String, String, String) {
        let config = self.store.config();
        (
            config.namespace.prefix.clone(),
            crate::address::address(&config.redis_url),
            crate::durable::Location::of(&self.db).display(),
        )
    }

    /// `page` rendered with the chrome, or the failure page when reading failed (its status
    /// from [`status_of`]).
    fn render(&self, page: impl FnOnce(&pages::Chrome) -> Result<Markup>) -> Response {
        let (prefix, redis, durable) = self.chrome();
        let chrome = pages::Chrome {
            prefix: &prefix,
            redis: &redis,
            durable: &durable,
        };
        match page(&chrome) {
            Ok(markup) => markup.into_response(),
            Err(err) => {
                let status = status_of(&err);
                (status, pages::failure(&chrome, status, &err.to_string())).into_response()
            }
        }
    }
}

/// The status of a page whose read failed: 400 for what the request got wrong (an invalid
/// id, a bad filter), 404 for a session nobody knows, 503 for a store that cannot answer
/// now (Redis or the durable tier down: worth trying again).
fn status_of(err: &Error) -> StatusCode {
    match err {
        Error::InvalidId { .. }
        | Error::InvalidInput(_)
        | Error::MalformedJson { .. }
        | Error::BadRange { .. } => StatusCode::BAD_REQUEST,
        Error::UnknownSession(_) => StatusCode::NOT_FOUND,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    }
}

async fn sessions(
    State(console): State<Console>,
    filter: std::result::Result<Query<views::ListFilter>, QueryRejection>,
) -> Response {
    let filter = match filter {
        Ok(Query(filter)) => filter,
        Err(rejected) => {
            let why = Error::InvalidInput(format!(
                "the session list's filter: {} (user, status, tier=live|durable, page=N)",
                rejected.body_text()
            ));
            return console.render(|_| Err(why));
        }
    };
    let page = views::session_page(&console.store, &console.db, &filter).await;
    console.render(|chrome| Ok(pages::sessions(chrome, &filter, &page?)))
}

async fn session(State(console): State<Console>, Path(sid): Path<String>) -> Response {
    let view = views::session_view(&console.store, &console.db, &sid).await;
    let unknown = matches!(view, Ok(None));
    let mut response = console.render(|chrome| {
        Ok(match view? {
            Some(v) => pages::session(chrome, &v),
            None => pages::not_found(chrome, &sid),
        })
    });
    if unknown {
        *response.status_mut() = StatusCode::NOT_FOUND;
    }
    response
}

async fn decisions(State(console): State<Console>) -> Response {
    let read = views::groups_view(&console.store).await;
    console.render(|chrome| {
        let (groups, dead) = read?;
        Ok(pages::decisions(chrome, &groups, &dead))
    })
}

/// Items a namespace's page shows at most.
pub(crate) const MEMORY_PAGE: usize = 500;

async fn memory_namespaces(State(console): State<Console>) -> Response {
    let listing = crate::NamespaceListing {
        limit: 10_000,
        ..Default::default()
    };
    let read = console.store.list_memory_namespaces(&listing).await;
    console.render(|chrome| Ok(pages::memory_namespaces(chrome, &read?)))
}

/// One namespace (labels joined by `.`): its own items, not those of longer namespaces under
/// it.
async fn memory_namespace(
    State(console): State<Console>,
    Path(namespace): Path<String>,
) -> Response {
    let labels: Vec<String> = namespace.split('.').map(str::to_string).collect();
    let search = crate::MemorySearch {
        prefix: labels.clone(),
        limit: MEMORY_PAGE,
        ..Default::default()
    };
    let read = console.store.search_memory(&search).await;
    console.render(|chrome| {
        let items: Vec<_> = read?
            .into_iter()
            .filter(|it| it.namespace == labels)
            .collect();
        Ok(pages::memory_namespace(chrome, &namespace, &items))
    })
}

async fn spill(State(console): State<Console>) -> Response {
    let stats = inspect::stats(&console.store).await;
    let history: Vec<LagSample> = console
        .history
        .lock()
        .expect("history lock")
        .iter()
        .copied()
        .collect();
    console.render(|chrome| Ok(pages::spill(chrome, &stats?, &history)))
}

/// Samples the spill figures every [`SAMPLE_EVERY`] for the spill page's charts, keeping
/// [`SAMPLES_KEPT`]; a failed read skips the sample.
async fn sample_spill(console: Console) {
    loop {
        if let Ok(stats) = inspect::stats(&console.store).await {
            let sample = LagSample {
                at: stats.first().map_or(0, |s| s.at as i64),
                max_lag_ms: stats.iter().map(|s| s.lag_ms).max().unwrap_or(0),
                pending: stats
                    .iter()
                    .map(|s| s.wal_pending + s.decisions_pending)
                    .sum(),
            };
            let mut history = console.history.lock().expect("history lock");
            history.push_back(sample);
            while history.len() > SAMPLES_KEPT {
                history.pop_front();
            }
        }
        tokio::select! {
            _ = console.cancel.cancelled() => return,
            _ = tokio::time::sleep(SAMPLE_EVERY) => {}
        }
    }
}
