//! Group commit: concurrent appends, decisions and working-state writes of one
//! process share round trips. A lane holds at most [`MAX_IN_FLIGHT`](lanes::MAX_IN_FLIGHT)
//! such round trips in flight, the last only beside few calls (`Lane::may_take_off`). A
//! caller that finds a free slot sends its call at once (its own script: no timer, no added
//! latency at low load); callers that arrive while every slot is taken queue, and
//! when a round trip returns what queued goes as one `session_batch.lua` (one EVALSHA, at
//! most [`MAX_BATCH`](lanes::MAX_BATCH) items). Several in flight, not one, so that Redis
//! runs one batch while this process gathers the next (with one, Redis and the client took
//! turns idling: at 8 workers W1 fell to 0.7 of per-partition lanes); three rather than two
//! since a batch got cheaper for Redis (one wal entry per partition, four keys per append:
//! W1 at 8 workers +10 % on a quiet machine, the same at 64: docs/benchmarks-decisions.md), the third only
//! while the two carry few calls (at 64 workers W1 +5 %, Redis CPU per append −7 %). Each caller gets its own reply or typed error.
//!
//! Lanes: on a Redis Cluster one per partition (a batch touches one hash slot); on a single
//! node one for the whole store, so the writes of every partition share a batch (a single
//! node has no slot rule, and many agents of one process rarely write to one partition at a
//! time: per-partition lanes formed almost no batches at 8 workers over 16 partitions).
//!
//! Order: the round trips in flight at once never share a session (a queued call of a
//! session that is in flight waits for that round trip), and a lane sends its queue in
//! arrival order, so the writes of one session land in the order their callers reached the
//! lane; writes of different sessions commute. A caller that gives up (its future dropped)
//! before its batch is sent is left out of it.

use std::sync::Arc;

use redis::{FromRedisValue, Value};
use tokio::sync::oneshot;

pub(crate) mod lanes;

use super::Store;
use crate::error::{Error, Result};
use crate::scripts::{self, BatchItem};
use lanes::{session_tag, Lane, Waiting};

/// Round trip `flight` of lane `lane` is this holder's: dropping it (the round trip
/// returned, or the holder's future was dropped) lands it and sends what may board next.
struct Turn {
    store: Store,
    lane: usize,
    flight: u64,
}

impl Drop for Turn {
    fn drop(&mut self) {
        let (batch, flight) = {
            let mut lane = self.store.lanes().lock(self.lane);
            lane.flights.retain(|(f, _)| *f != self.flight);
            let batch = lane.boarding();
            if batch.is_empty() {
                return;
            }
            let flight = lane.take_off(batch.iter().map(|w| w.session).collect());
            (batch, flight)
        };
        let turn = Turn {
            store: self.store.clone(),
            lane: self.lane,
            flight,
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    let retry = turn.store.send_batch(batch).await;
                    let store = turn.store.clone();
                    // Retries run outside the lane: a call waiting out a Redis outage must
                    // not hold up the lane's calls that fail fast.
                    drop(turn);
                    for w in retry {
                        let reply = store.invoke::<Value>(&w.item.call()).await;
                        let _ = w.reply.send(reply);
                    }
                });
            }
            Err(_) => {
                // Only reachable when a runtime shuts down under a waiting batch.
                for w in batch {
                    let _ = w.reply.send(Err(Error::unavailable(
                        "the runtime stopped before the call was sent",
                    )));
                }
            }
        }
    }
}

impl Store {
    /// Runs `item` through its lane (at once when a slot is free and nothing waits, else
    /// with a later batch) and decodes its own script's reply. A `NO_SESSION` failure asks
    /// for a restore and runs it once more, as [`Store::invoke_session`] does.
    pub(crate) async fn invoke_grouped<T: FromRedisValue>(
        &self,
        sid: &str,
        item: BatchItem,
    ) -> Result<T> {
        // Shared, not cloned, by the attempts (a restore retries) and the queue.
        let item = Arc::new(item);
        let reply = self
            .restoring(sid, || self.through_lane(item.clone()))
            .await?;
        T::from_redis_value(reply).map_err(|e| Error::redis(format!("script reply: {e}")))
    }

    async fn through_lane(&self, item: Arc<BatchItem>) -> Result<Value> {
        let lane = self.lanes().of(item.partition());
        let session = session_tag(&item);
        let waiting = {
            let mut lane = self.lanes().lock(lane);
            if lane.may_take_off()
                && lane.queue.is_empty()
                && !Lane::carries(&lane.flights, session)
            {
                Ok((item, lane.take_off(vec![session])))
            } else {
                let (reply, rx) = oneshot::channel();
                lane.queue.push(Waiting {
                    item,
                    session,
                    reply,
                });
                Err(rx)
            }
        };
        match waiting {
            Ok((item, flight)) => {
                let turn = Turn {
                    store: self.clone(),
                    lane,
                    flight,
                };
                let call = item.call();
                let first = self.invoke_once::<Value>(&call).await;
                // Retries run outside the lane (see `send_batch`).
                drop(turn);
                match first {
                    Err(e) if e.is_unavailable() && call.is_idempotent() => {
                        self.invoke::<Value>(&call).await
                    }
                    other => other,
                }
            }
            Err(rx) => rx
                .await
                .unwrap_or_else(|_| Err(Error::redis("the batch carrying this call was dropped"))),
        }
    }

    /// Sends `batch` (one lane's queue) once and hands each caller its reply: one item
    /// goes as its own script, more as one `session_batch.lua`. While Redis is unreachable
    /// the idempotent callers are returned, for their caller to retry each on its own
    /// once the lane is handed on; the others get the error at once (they fail fast).
    async fn send_batch(&self, batch: Vec<Waiting>) -> Vec<Waiting> {
        let mut batch: Vec<Waiting> = batch.into_iter().filter(|w| !w.reply.is_closed()).collect();
        let failed = |err: Error, batch: Vec<Waiting>| -> Vec<Waiting> {
            let mut retry = Vec::new();
            for w in batch {
                if err.is_unavailable() && w.item.is_idempotent() {
                    retry.push(w);
                } else {
                    let _ = w.reply.send(Err(err.for_each_caller()));
                }
            }
            retry
        };
        if batch.len() <= 1 {
            return self.send_alone(batch, failed).await;
        }
        // Grouped by partition (a stable sort: one session's calls keep their order, and
        // different sessions' commute), so the script writes one wal entry per partition.
        batch.sort_by_key(|w| w.item.partition());
        let items: Vec<&BatchItem> = batch.iter().map(|w| &*w.item).collect();
        let call = scripts::session_batch(&items);
        match self.invoke_once::<String>(&call).await {
            Ok(text) => match split_replies(batch.iter().map(|w| &*w.item), &text) {
                Ok(lines) => {
                    let mut alone = Vec::new();
                    for (w, line) in batch.into_iter().zip(lines) {
                        match line {
                            Line::Ran(reply) => {
                                let _ = w.reply.send(reply);
                            }
                            Line::Deferred => alone.push(w),
                        }
                    }
                    return self.send_alone(alone, failed).await;
                }
                Err(err) => {
                    for w in batch {
                        let _ = w.reply.send(Err(err.for_each_caller()));
                    }
                }
            },
            Err(err) => return failed(err, batch),
        }
        Vec::new()
    }

    /// Sends `alone` each as its own script, in order, and hands each caller its own reply
    /// or typed error (a conflict stays a conflict): a batch of one, or the items a batch
    /// deferred (their sessions' TTL refresh was due), while the lane still holds their
    /// sessions, so no later write of theirs can pass them. Once Redis is unreachable, the
    /// idempotent callers from there on are returned for a retry and the others get the error.
    async fn send_alone(
        &self,
        alone: Vec<Waiting>,
        failed: impl Fn(Error, Vec<Waiting>) -> Vec<Waiting>,
    ) -> Vec<Waiting> {
        let mut alone = alone.into_iter();
        while let Some(w) = alone.next() {
            match self.invoke_once::<Value>(&w.item.call()).await {
                Err(err) if err.is_unavailable() => {
                    let rest = failed(err.for_each_caller(), alone.collect());
                    if !w.item.is_idempotent() {
                        let _ = w.reply.send(Err(err));
                        return rest;
                    }
                    return std::iter::once(w).chain(rest).collect();
                }
                reply => {
                    let _ = w.reply.send(reply);
                }
            }
        }
        Vec::new()
    }
}

/// One item's line of `session_batch.lua`'s reply.
enum Line {
    /// It ran: its own script's reply, or its typed error.
    Ran(Result<Value>),
    /// Not run (its session's TTL refresh was due): to be sent as its own script.
    Deferred,
}

/// `session_batch.lua`'s text reply cut into each item's own: per item a line, `1 ` then its
/// own script's reply values joined by spaces (`item.reply_len()` of them: an array when
/// more than one; each a bulk string, which decodes as its own script's reply does), `0 `
/// then `CODE detail` (its typed error), or `2` (deferred).
fn split_replies<'a>(
    items: impl ExactSizeIterator<Item = &'a BatchItem>,
    text: &str,
) -> Result<Vec<Line>> {
    let count = items.len();
    let malformed = || {
        Error::redis(format!(
            "session_batch's reply does not fit its {count} items"
        ))
    };
    let bulk = |value: &str| Value::BulkString(value.as_bytes().to_vec());
    let mut lines = text.split('\n');
    let mut replies = Vec::with_capacity(count);
    for item in items {
        let line = lines.next().ok_or_else(malformed)?;
        if line == "2" {
            replies.push(Line::Deferred);
            continue;
        }
        let reply = if let Some(values) = line.strip_prefix("1 ") {
            if item.reply_len() == 1 {
                Ok(bulk(values))
            } else {
                let own: Vec<Value> = values.split(' ').map(bulk).collect();
                if own.len() != item.reply_len() {
                    return Err(malformed());
                }
                Ok(Value::Array(own))
            }
        } else if let Some(error) = line.strip_prefix("0 ") {
            Err(Error::from_script_reply(error))
        } else {
            return Err(malformed());
        };
        replies.push(Line::Ran(reply));
    }
    if lines.next().is_some() {
        return Err(malformed());
    }
    Ok(replies)
}
