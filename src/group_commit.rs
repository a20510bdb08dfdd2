//! Group commit of appends (issue 15): concurrent [`Store::append`]s of one process to
//! sessions of one partition share round trips. Per partition a lane holds at most one round
//! trip in flight. A caller that finds the lane idle sends its append at once
//! (`append_message.lua`: no timer, no added latency at low load); callers that arrive while
//! a round trip is in flight queue, and when it returns everything queued goes as one
//! `append_batch.lua` (one EVALSHA, one slot). Each caller gets its own reply or typed error.
//!
//! Order: a lane sends its queue in arrival order and one round trip at a time, so appends
//! of one session land in the order their callers reached the lane. A caller that gives up
//! (its future dropped) before its batch is sent is left out of it.

use std::sync::Mutex;

use redis::{FromRedisValue, Value};
use tokio::sync::oneshot;

use crate::error::{Error, Result};
use crate::scripts::{self, AppendArgs};
use crate::store::Store;

/// What one append returned.
#[derive(Debug)]
pub(crate) struct Appended {
    /// The message's seq (the original one for an idempotent repeat).
    pub seq: u64,
    /// The wal entry id; empty for a repeat (nothing was written).
    pub wal_id: String,
}

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

/// An append waiting in a lane, with where its reply goes.
struct Waiting {
    args: AppendArgs,
    reply: oneshot::Sender<Result<Appended>>,
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
                    turn.store.send_batch(batch).await;
                    drop(turn);
                });
            }
            Err(_) => {
                // Only reachable when a runtime shuts down under a waiting batch.
                for w in batch {
                    let _ = w.reply.send(Err(Error::unavailable(
                        "the runtime stopped before the append was sent",
                    )));
                }
            }
        }
    }
}

impl Store {
    /// Appends through partition `args.keys.partition`'s lane: at once when no round trip
    /// of the partition is in flight, else with the next batch.
    pub(crate) async fn append_grouped(&self, args: AppendArgs) -> Result<Appended> {
        let p = args.keys.partition;
        let waiting = {
            let mut lane = self.lanes().lock(p);
            if lane.busy {
                let (reply, rx) = oneshot::channel();
                lane.queue.push(Waiting { args, reply });
                Err(rx)
            } else {
                lane.busy = true;
                Ok(args)
            }
        };
        match waiting {
            Ok(args) => {
                let turn = Turn {
                    store: self.clone(),
                    p,
                };
                let reply = self.invoke::<Value>(&args.call()).await;
                drop(turn);
                reply.and_then(decode_item)
            }
            Err(rx) => rx.await.unwrap_or_else(|_| {
                Err(Error::redis("the batch carrying this append was dropped"))
            }),
        }
    }

    /// Sends `batch` (one partition's queue) and hands each caller its reply: one item goes
    /// as `append_message.lua`, more as one `append_batch.lua`. A batch is retried while
    /// Redis is unreachable only when every item is idempotent.
    async fn send_batch(&self, batch: Vec<Waiting>) {
        let batch: Vec<Waiting> = batch.into_iter().filter(|w| !w.reply.is_closed()).collect();
        if batch.len() == 1 {
            let w = batch.into_iter().next().expect("one item");
            let reply = self.invoke::<Value>(&w.args.call()).await;
            let _ = w.reply.send(reply.and_then(decode_item));
            return;
        }
        if batch.is_empty() {
            return;
        }
        let items: Vec<&AppendArgs> = batch.iter().map(|w| &w.args).collect();
        match self
            .invoke::<Vec<Value>>(&scripts::append_batch(&items))
            .await
        {
            Ok(replies) if replies.len() == batch.len() => {
                for (w, reply) in batch.into_iter().zip(replies) {
                    let _ = w.reply.send(decode_item(reply));
                }
            }
            Ok(replies) => {
                let err = Error::redis(format!(
                    "append_batch answered {} items for {}",
                    replies.len(),
                    batch.len()
                ));
                for w in batch {
                    let _ = w.reply.send(Err(err.for_each_caller()));
                }
            }
            Err(err) => {
                for w in batch {
                    let _ = w.reply.send(Err(err.for_each_caller()));
                }
            }
        }
    }
}

/// One append's reply: `{seq, wal id, repeat}`, or the `CODE detail` text of its error
/// (a batch item; a single call's error arrives as a Redis error instead).
fn decode_item(reply: Value) -> Result<Appended> {
    match reply {
        Value::BulkString(text) => Err(Error::from_script_reply(&String::from_utf8_lossy(&text))),
        Value::SimpleString(text) => Err(Error::from_script_reply(&text)),
        other => {
            let (seq, wal_id, _repeat) = <(u64, String, u8)>::from_redis_value(other)
                .map_err(|e| Error::redis(format!("append reply: {e}")))?;
            Ok(Appended { seq, wal_id })
        }
    }
}
