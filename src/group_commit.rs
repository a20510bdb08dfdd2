//! Group commit (issue 15): concurrent appends, decisions and working-state writes of one
//! process to sessions of one partition share round trips. Per partition a lane holds at
//! most one such round trip in flight. A caller that finds the lane idle sends its call at
//! once (its own script: no timer, no added latency at low load); callers that arrive while
//! a round trip is in flight queue, and when it returns everything queued goes as one
//! `session_batch.lua` (one EVALSHA, one slot). Each caller gets its own reply or typed error.
//!
//! Order: a lane sends its queue in arrival order and one round trip at a time, so the
//! writes of one session land in the order their callers reached the lane. A caller that
//! gives up (its future dropped) before its batch is sent is left out of it.

use std::sync::Mutex;

use redis::{FromRedisValue, Value};
use tokio::sync::oneshot;

use crate::error::{Error, Result};
use crate::scripts::{self, BatchItem};
use crate::store::Store;

/// The lanes of a store, one per partition.
pub(crate) struct Lanes(Vec<Mutex<Lane>>);

impl Lanes {
    /// Idle lanes for `partitions` partitions.
    pub(crate) fn new(partitions: u32) -> Self {
        Lanes((0..partitions).map(|_| Mutex::default()).collect())
    }

    fn lock(&self, p: u32) -> std::sync::MutexGuard<'_, Lane> {
        // A panic while holding the lock cannot leave a half-updated lane (the critical
        // sections only push or take), so a poisoned lock is used as is.
        self.0[p as usize]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One partition's lane.
#[derive(Default)]
struct Lane {
    /// A round trip of this partition is in flight (its sender hands the lane on).
    busy: bool,
    /// Appends waiting for the next round trip, in arrival order.
    queue: Vec<Waiting>,
}

/// A call waiting in a lane, with where its reply (its own script's reply) goes.
struct Waiting {
    item: BatchItem,
    reply: oneshot::Sender<Result<Value>>,
}

/// The lane of partition `p` is this holder's: dropping it (the round trip returned, or the
/// holder's future was dropped) hands the lane to the queue, or leaves it idle.
struct Turn {
    store: Store,
    p: u32,
}

impl Drop for Turn {
    fn drop(&mut self) {
        let batch = {
            let mut lane = self.store.lanes().lock(self.p);
            if lane.queue.is_empty() {
                lane.busy = false;
                return;
            }
            std::mem::take(&mut lane.queue)
        };
        let turn = Turn {
            store: self.store.clone(),
            p: self.p,
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    let retry = turn.store.send_batch(batch).await;
                    let store = turn.store.clone();
                    // Retries run outside the lane: a call waiting out a Redis outage must
                    // not hold up the partition's calls that fail fast.
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
    /// Runs `item` through its partition's lane (at once when no round trip of the
    /// partition is in flight, else with the next batch) and decodes its own script's
    /// reply. A `NO_SESSION` failure asks for a restore and runs it once more, as
    /// [`Store::invoke_session`] does.
    pub(crate) async fn invoke_grouped<T: FromRedisValue>(
        &self,
        sid: &str,
        item: BatchItem,
    ) -> Result<T> {
        let reply = self
            .restoring(sid, || self.through_lane(item.clone()))
            .await?;
        T::from_redis_value(reply).map_err(|e| Error::redis(format!("script reply: {e}")))
    }

    async fn through_lane(&self, item: BatchItem) -> Result<Value> {
        let p = item.partition();
        let waiting = {
            let mut lane = self.lanes().lock(p);
            if lane.busy {
                let (reply, rx) = oneshot::channel();
                lane.queue.push(Waiting { item, reply });
                Err(rx)
            } else {
                lane.busy = true;
                Ok(item)
            }
        };
        match waiting {
            Ok(item) => {
                let turn = Turn {
                    store: self.clone(),
                    p,
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

    /// Sends `batch` (one partition's queue) once and hands each caller its reply: one item
    /// goes as its own script, more as one `session_batch.lua`. While Redis is unreachable
    /// the idempotent callers are returned, for their caller to retry each on its own
    /// once the lane is handed on; the others get the error at once (they fail fast).
    async fn send_batch(&self, batch: Vec<Waiting>) -> Vec<Waiting> {
        let batch: Vec<Waiting> = batch.into_iter().filter(|w| !w.reply.is_closed()).collect();
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
        if batch.len() == 1 {
            let reply = self.invoke_once::<Value>(&batch[0].item.call()).await;
            return match reply {
                Err(err) if err.is_unavailable() && batch[0].item.is_idempotent() => batch,
                reply => {
                    // Its own script's reply or typed error (a conflict stays a conflict).
                    let w = batch.into_iter().next().expect("one item");
                    let _ = w.reply.send(reply);
                    Vec::new()
                }
            };
        }
        if batch.is_empty() {
            return Vec::new();
        }
        let items: Vec<&BatchItem> = batch.iter().map(|w| &w.item).collect();
        let call = scripts::session_batch(self.keys(), &items);
        match self.invoke_once::<Vec<Value>>(&call).await {
            Ok(replies) if replies.len() == batch.len() => {
                for (w, reply) in batch.into_iter().zip(replies) {
                    let _ = w.reply.send(decode_item(reply));
                }
                Vec::new()
            }
            Ok(replies) => {
                let err = Error::redis(format!(
                    "session_batch answered {} items for {}",
                    replies.len(),
                    batch.len()
                ));
                for w in batch {
                    let _ = w.reply.send(Err(err.for_each_caller()));
                }
                Vec::new()
            }
            Err(err) => failed(err, batch),
        }
    }
}

/// One batch item's reply: `{1, its own script's reply}` or `{0, "CODE detail"}`.
fn decode_item(reply: Value) -> Result<Value> {
    let malformed = |v: &Value| Error::redis(format!("session_batch item reply {v:?}"));
    let Value::Array(mut parts) = reply else {
        return Err(malformed(&reply));
    };
    if parts.len() != 2 {
        return Err(malformed(&Value::Array(parts)));
    }
    let value = parts.pop().expect("two parts");
    match (parts.pop().expect("two parts"), value) {
        (Value::Int(1), value) => Ok(value),
        (Value::Int(0), Value::BulkString(text)) => {
            Err(Error::from_script_reply(&String::from_utf8_lossy(&text)))
        }
        (ok, value) => Err(malformed(&Value::Array(vec![ok, value]))),
    }
}
