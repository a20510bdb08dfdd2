//! Live updates of a session's page: a server-sent event stream that polls Redis every
//! [`POLL`] and sends each new message (`message`), decision (`decision`) and outcome
//! (`outcome`) as JSON. The page's script adds them with `textContent`, never as markup.
//! Each poll is one read of the session's meta, plus a read of the new messages when its
//! `next_seq` moved, plus one `XRANGE` of its partition's decisions stream after the last
//! entry seen; a session that is not live is not read further (nothing is restored).

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream, StreamExt};

use super::views::stream_events;
use super::Console;
use crate::consumer::DecisionEvent;
use crate::messages::MessageQuery;

/// How often a page's stream looks for news.
const POLL: Duration = Duration::from_millis(250);

/// Where a page's stream starts: after the last seq and decisions-stream entry it shows.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct Since {
    /// The last seq the page shows.
    #[serde(default)]
    after: u64,
    /// The last decisions-stream entry id the page read (`-` for none).
    #[serde(default = "start")]
    cursor: String,
}

fn start() -> String {
    "-".to_string()
}

/// Where a stream stands between polls.
struct Cursor {
    console: Console,
    sid: String,
    after: u64,
    stream: String,
    /// Set once the session is no longer live: the stream ends.
    gone: bool,
}

/// `GET /sessions/{sid}/events`: the session's news as server-sent events until the page
/// closes or the console stops; 400 for an id that cannot be a session's.
pub(crate) async fn events(
    State(console): State<Console>,
    Path(sid): Path<String>,
    Query(since): Query<Since>,
) -> Response {
    if let Err(err) = crate::keys::validate_id("session", &sid) {
        return (StatusCode::BAD_REQUEST, format!("{err}\n")).into_response();
    }
    stream_news(console, sid, since).into_response()
}

/// The event stream of `sid` from `since` on.
fn stream_news(
    console: Console,
    sid: String,
    since: Since,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let cancel = console.cancel.clone();
    let cursor = Cursor {
        console,
        sid,
        after: since.after,
        stream: since.cursor,
        gone: false,
    };
    let news = stream::unfold(cursor, |mut c| async move {
        if c.gone {
            return None;
        }
        tokio::time::sleep(POLL).await;
        let events = poll(&mut c)
            .await
            .unwrap_or_else(|err| vec![Event::default().event("trouble").data(err.to_string())]);
        Some((stream::iter(events.into_iter().map(Ok)), c))
    })
    .flatten()
    .take_until(async move { cancel.cancelled_owned().await });
    Sse::new(news).keep_alive(KeepAlive::default())
}

/// One poll: the events since the cursor (advanced past them).
async fn poll(c: &mut Cursor) -> crate::Result<Vec<Event>> {
    let store = &c.console.store;
    let Some(meta) = store.session(&c.sid).await? else {
        c.gone = true;
        return Ok(vec![Event::default().event("gone").data(c.sid.clone())]);
    };
    let mut out = Vec::new();
    if meta.next_seq.saturating_sub(1) > c.after {
        for m in store
            .messages(&c.sid, MessageQuery::all().after(c.after))
            .await?
        {
            c.after = c.after.max(m.seq);
            out.push(json_event("message", &m)?);
        }
    }
    let (events, next) = stream_events(store, &c.sid, &c.stream).await?;
    c.stream = next;
    for e in events {
        out.push(match &e {
            DecisionEvent::Decision(d) => json_event("decision", d)?,
            DecisionEvent::Outcome(o) => json_event("outcome", o)?,
        });
    }
    Ok(out)
}

/// An event named `name` carrying `value` as JSON.
fn json_event(name: &str, value: &impl serde::Serialize) -> crate::Result<Event> {
    Ok(Event::default()
        .event(name)
        .data(serde_json::to_string(value)?))
}
