//! Decision consumers: Redis consumer groups over every partition's `decisions` stream, with
//! explicit ack, recovery of entries a dead consumer held (XAUTOCLAIM), and dead letters.
//!
//! Delivery is at-least-once per group: an entry stays pending in the group until a consumer
//! acks it; an entry idle for `min_idle` is claimed by whichever live consumer of the group
//! looks next; once the group's delivery counter for an entry passes `max_deliveries` it is
//! moved to the partition's dead-letter stream and acked there (`lua/dead_letter.lua`).
//! Outcomes are events of the same stream, delivered as [`DecisionEvent::Outcome`] in the
//! order they were recorded; a delivered [`Decision`] never carries an outcome.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::streams::{
    StreamAutoClaimReply, StreamId, StreamPendingCountReply, StreamRangeReply, StreamReadOptions,
    StreamReadReply,
};
use redis::{AsyncCommands, RedisError};
use serde::{Deserialize, Serialize};

use crate::backoff::Backoff;
use crate::decisions::Decision;
use crate::error::{Error, Result};
use crate::keys::validate_id;
use crate::records::{decision_id, DecisionEntry};
use crate::scripts;
use crate::store::Store;

/// Where a consumer group starts when [`Store::consumer`] creates it (an existing group keeps
/// its position).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StartFrom {
    /// From the oldest entry still retained in each stream (`XGROUP CREATE ... 0`).
    Beginning,
    /// Only entries recorded after the group was created (`XGROUP CREATE ... $`).
    #[default]
    Now,
}

/// How a [`Consumer`] reads, recovers and gives up on entries.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerOptions {
    /// Where a newly created group starts.
    pub start: StartFrom,
    /// How long an entry must sit unacked with its consumer before another one claims it.
    pub min_idle: Duration,
    /// Deliveries allowed per entry; the next claim moves it to the dead-letter stream.
    pub max_deliveries: u32,
    /// How long one read waits for new entries; zero does not wait.
    pub block: Duration,
    /// Most entries taken from each partition per read (and per claim).
    pub count: usize,
}

impl Default for ConsumerOptions {
    fn default() -> Self {
        ConsumerOptions {
            start: StartFrom::Now,
            min_idle: Duration::from_secs(30),
            max_deliveries: 5,
            block: Duration::from_secs(2),
            count: 100,
        }
    }
}

impl ConsumerOptions {
    /// The defaults: start now, `min_idle` 30 s, 5 deliveries, block 2 s, 100 per partition.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets where a newly created group starts.
    pub fn start(mut self, start: StartFrom) -> Self {
        self.start = start;
        self
    }
    /// Sets the idle time after which held entries are claimed.
    pub fn min_idle(mut self, min_idle: Duration) -> Self {
        self.min_idle = min_idle;
        self
    }
    /// Sets the deliveries allowed per entry.
    pub fn max_deliveries(mut self, max: u32) -> Self {
        self.max_deliveries = max;
        self
    }
    /// Sets how long a read waits for new entries.
    pub fn block(mut self, block: Duration) -> Self {
        self.block = block;
        self
    }
    /// Sets the most entries taken from each partition per read.
    pub fn count(mut self, count: usize) -> Self {
        self.count = count;
        self
    }
}

/// The outcome of a decision, as recorded in the decisions stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// The decision it completes (`<partition>:<entry id>`).
    pub decision_id: String,
    /// The session of the decision.
    pub session_id: String,
    /// What happened.
    pub outcome: String,
    /// When, ms since the epoch (Redis clock).
    pub created_at: i64,
}

/// One entry of a decisions stream.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
#[non_exhaustive]
pub enum DecisionEvent {
    /// A decision was recorded (its `outcome` is always `None` here: outcomes are their own
    /// events).
    Decision(Decision),
    /// An outcome was recorded for an earlier decision.
    Outcome(Outcome),
}

/// An event handed to a consumer, with what [`Consumer::ack`] needs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Delivery {
    /// Partition whose stream holds the entry.
    pub partition: u32,
    /// Stream entry id.
    pub entry_id: String,
    /// How many times the group has handed this entry out, this time included.
    pub deliveries: u64,
    /// The decision or outcome.
    #[serde(flatten)]
    pub event: DecisionEvent,
}

/// An entry moved to a dead-letter stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeadLetter {
    /// Partition of the streams.
    pub partition: u32,
    /// Entry id in the dead-letter stream.
    pub entry_id: String,
    /// Entry id it had in the decisions stream.
    pub original_id: String,
    /// The consumer group that gave up on it.
    pub group: String,
    /// Why it was moved.
    pub reason: String,
    /// The group's delivery counter when it was moved.
    pub deliveries: u64,
    /// When it was moved, ms since the epoch (Redis clock).
    pub dead_at: i64,
    /// The entry's own fields (`type`, `session_id`, ...), empty if it had been trimmed.
    pub fields: BTreeMap<String, String>,
}

/// A member of a consumer group reading every partition's decisions stream.
///
/// Built by [`Store::consumer`]. Reads go through a dedicated connection whose response
/// timeout covers the block time, so a blocked read never stalls the store's pool.
pub struct Consumer {
    /// The store's pool serves acks, claims and dead letters.
    store: Store,
    /// Consumer group name (the same on every partition).
    group: String,
    /// This consumer's name within the group.
    name: String,
    /// Read, claim and dead-letter settings.
    options: ConsumerOptions,
    /// Only XREADGROUP BLOCK runs here. `None` on a cluster, where one read cannot span
    /// the partitions' slots: reads go to each partition's node and a wait polls.
    reader: Option<MultiplexedConnection>,
    /// Decisions stream key of each partition, indexed by partition.
    streams: std::sync::Arc<[String]>,
    /// When stale entries were last claimed; `None` before the first read.
    last_claim: Option<Instant>,
    /// Where the next bounded read starts scanning partitions (rotates, so no partition
    /// starves the others).
    next_partition: usize,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("group", &self.group)
            .field("name", &self.name)
            .field("options", &self.options)
            .finish()
    }
}

/// The idle time [`Consumer::release`] gives an entry it hands back: every read claims
/// entries this idle first, so a released entry goes to the next reader of the group at once.
pub const RELEASED_IDLE: Duration = Duration::from_secs(365 * 24 * 3600);

/// Milliseconds of `d`, for Redis arguments.
fn millis(d: Duration) -> usize {
    usize::try_from(d.as_millis()).unwrap_or(usize::MAX)
}

/// True when Redis answered with error `code`, alone or as any command of a pipeline.
fn has_code(e: &RedisError, code: &str) -> bool {
    e.code() == Some(code)
        || e.clone()
            .into_server_errors()
            .is_some_and(|errs| errs.iter().any(|(_, s)| s.code() == code))
}

/// Creates consumer group `group` on stream `key` at `start` (`0` or `$`), creating the
/// stream too (`MKSTREAM`); an existing group (BUSYGROUP) is left as it is.
pub async fn create_group(store: &Store, key: &str, group: &str, start: &str) -> Result<()> {
    let mut conn = store.conn().await?;
    let created: std::result::Result<(), RedisError> =
        conn.xgroup_create_mkstream(key, group, start).await;
    match created {
        Err(e) if !has_code(&e, "BUSYGROUP") => Err(e.into()),
        _ => Ok(()),
    }
}

/// A connection of its own for XREADGROUP BLOCK: its response timeout covers `block`, and
/// blocking on it stalls no other caller. On a cluster it reaches the node of partition 0's
/// stream (a read over every partition's stream cannot span a cluster's slots).
pub async fn blocking_connection(store: &Store, block: Duration) -> Result<MultiplexedConnection> {
    let any_stream = store.keys().decisions(0);
    store
        .dedicated_connection(&any_stream, block + store.config().response_timeout)
        .await
}

/// The fields of a stream entry as text.
fn text_fields(entry: &StreamId) -> BTreeMap<String, String> {
    entry
        .map
        .keys()
        .filter_map(|k| entry.get::<String>(k).map(|v| (k.clone(), v)))
        .collect()
}

/// Parses a decisions stream entry of partition `p` into its typed event
/// ([`DecisionEntry`] is the one parser of these entries).
pub fn parse_event(p: u32, entry: &StreamId) -> std::result::Result<DecisionEvent, String> {
    let fields: HashMap<String, String> = text_fields(entry).into_iter().collect();
    let parsed = DecisionEntry::parse(&entry.id, &fields).map_err(|e| match e {
        Error::InvalidInput(msg) => msg,
        other => other.to_string(),
    })?;
    Ok(match parsed {
        DecisionEntry::Decision(d) => DecisionEvent::Decision(Decision {
            id: decision_id(p, &entry.id),
            session_id: d.session_id.to_string(),
            decision: d.decision.to_string(),
            rationale: d.rationale.to_string(),
            planned_action: (!d.planned_action.is_empty()).then(|| d.planned_action.to_string()),
            meta: serde_json::from_str(d.meta)
                .map_err(|e| format!("entry {}: meta: {e}", entry.id))?,
            outcome: None,
            created_at: d.created_at,
        }),
        DecisionEntry::Outcome(o) => DecisionEvent::Outcome(Outcome {
            decision_id: o.decision_id.to_string(),
            session_id: o.session_id.to_string(),
            outcome: o.outcome.to_string(),
            created_at: o.created_at,
        }),
    })
}

impl Store {
    /// Joins consumer group `group` as `name` on every partition's decisions stream, creating
    /// the group (and the streams, `MKSTREAM`) where it does not exist yet.
    ///
    /// ```no_run
    /// # async fn f(store: agentstate::Store) -> agentstate::Result<()> {
    /// use agentstate::{ConsumerOptions, DecisionEvent, StartFrom};
    /// let options = ConsumerOptions::new().start(StartFrom::Beginning);
    /// let mut consumer = store.consumer("billing", "worker-1", options).await?;
    /// let batch = consumer.read().await?;
    /// for d in &batch {
    ///     if let DecisionEvent::Decision(dec) = &d.event {
    ///         println!("{} decided {}", dec.session_id, dec.decision);
    ///     }
    /// }
    /// consumer.ack(&batch).await?; // after the work is done: at-least-once
    /// # Ok(()) }
    /// ```
    pub async fn consumer(
        &self,
        group: &str,
        name: &str,
        options: ConsumerOptions,
    ) -> Result<Consumer> {
        validate_id("consumer group", group)?;
        validate_id("consumer", name)?;
        if options.max_deliveries == 0 || options.count == 0 {
            return Err(Error::InvalidInput(
                "max_deliveries and count must be at least 1".into(),
            ));
        }
        let reader = if self.is_cluster() {
            None
        } else {
            Some(blocking_connection(self, options.block).await?)
        };
        let consumer = Consumer {
            store: self.clone(),
            group: group.to_string(),
            name: name.to_string(),
            options,
            reader,
            streams: (0..self.keys().partitions())
                .map(|p| self.keys().decisions(p))
                .collect(),
            last_claim: None,
            next_partition: 0,
        };
        consumer.join(consumer.options.start).await?;
        Ok(consumer)
    }

    /// Up to `count` dead letters of each partition, oldest first within a partition.
    pub async fn dead_letters(&self, count: usize) -> Result<Vec<DeadLetter>> {
        let cmds = (0..self.keys().partitions())
            .map(|p| {
                let mut cmd = redis::cmd("XRANGE");
                cmd.arg(self.keys().dead_letters(p))
                    .arg("-")
                    .arg("+")
                    .arg("COUNT")
                    .arg(count);
                cmd
            })
            .collect();
        let replies: Vec<StreamRangeReply> = self.fan_out(cmds).await?;
        let mut out = Vec::new();
        for (p, reply) in (0..).zip(replies) {
            for entry in reply.ids {
                let mut fields = text_fields(&entry);
                let mut take = |k: &str| fields.remove(k).unwrap_or_default();
                let (original_id, group, reason) =
                    (take("original_id"), take("group"), take("reason"));
                let deliveries = take("deliveries").parse().unwrap_or(0);
                let dead_at = take("dead_at").parse().unwrap_or(0);
                out.push(DeadLetter {
                    partition: p,
                    entry_id: entry.id,
                    original_id,
                    group,
                    reason,
                    deliveries,
                    dead_at,
                    fields,
                });
            }
        }
        Ok(out)
    }
}

impl Consumer {
    /// The group name.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// This consumer's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Creates the group on every partition where it is missing (BUSYGROUP is fine).
    async fn join(&self, start: StartFrom) -> Result<()> {
        let start = match start {
            StartFrom::Beginning => "0",
            StartFrom::Now => "$",
        };
        for key in self.streams.iter() {
            create_group(&self.store, key, &self.group, start).await?;
        }
        Ok(())
    }

    /// The next batch: entries other consumers handed back ([`Consumer::release`]) first,
    /// then entries claimed from dead consumers (checked at most every `min_idle / 2`),
    /// otherwise new entries of every partition (at most `count` from each, so no partition
    /// starves another), waiting up to `block` for some. Empty when the wait timed out.
    /// Entries that cannot be parsed go straight to the dead-letter stream.
    pub async fn read(&mut self) -> Result<Vec<Delivery>> {
        if let Some(claimed) = self.claim_first(usize::MAX).await? {
            return Ok(claimed);
        }
        let all = 0..self.streams.len();
        self.deliveries(all, self.options.count, true).await
    }

    /// Like [`Consumer::read`], but takes at most `n` entries in all, so a bounded reader
    /// (`tail --count`) never holds entries it will not hand out while others of its group
    /// wait: partitions are read one after the other (from a rotating start) with what is
    /// left of `n`, and only when all are empty does it block, for one entry.
    pub async fn read_up_to(&mut self, n: usize) -> Result<Vec<Delivery>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        if let Some(claimed) = self.claim_first(n).await? {
            return Ok(claimed);
        }
        let parts = self.streams.len();
        let start = self.next_partition;
        self.next_partition = (start + 1) % parts;
        let mut out = Vec::new();
        for i in 0..parts {
            let p = (start + i) % parts;
            out.extend(self.deliveries(p..p + 1, n - out.len(), false).await?);
            if out.len() >= n {
                return Ok(out);
            }
        }
        if !out.is_empty() || self.options.block.is_zero() {
            return Ok(out);
        }
        out = self.deliveries(0..parts, 1, true).await?;
        // Entries landing in several partitions at the instant the block ends come back one
        // per partition: give what is over `n` back to the group at once.
        let surplus = out.split_off(out.len().min(n));
        self.release(&surplus).await?;
        Ok(out)
    }

    /// New entries of the partitions in `partitions` (`count` from each, blocking when
    /// `block`), parsed; nothing when the read failed and [`Consumer::recover`] handled it.
    async fn deliveries(
        &mut self,
        partitions: std::ops::Range<usize>,
        count: usize,
        block: bool,
    ) -> Result<Vec<Delivery>> {
        let streams = self.streams.clone();
        let reply = match self.read_new(&streams[partitions], count, block).await {
            Err(e) => return self.recover(e).await,
            Ok(reply) => reply,
        };
        let mut out = Vec::new();
        for key in reply.into_iter().flat_map(|r| r.keys) {
            let p = self.partition_of(&key.key)?;
            out.extend(self.parse_batch(p, key.ids, &HashMap::new()).await?);
        }
        Ok(out)
    }

    /// The claims every read makes first, at most `limit` entries (the rest handed back
    /// again): entries idle past `min_idle` when that check is due (at most every
    /// `min_idle / 2`; handed-back entries are among them), else only the entries handed
    /// back to the group ([`RELEASED_IDLE`]).
    async fn claim_first(&mut self, limit: usize) -> Result<Option<Vec<Delivery>>> {
        let stale_due = self
            .last_claim
            .is_none_or(|t| t.elapsed() >= self.options.min_idle / 2);
        let claimed = if stale_due {
            self.claim_stale_up_to(limit).await?
        } else {
            self.claim_idle(RELEASED_IDLE, limit).await?
        };
        Ok((!claimed.is_empty()).then_some(claimed))
    }

    /// What a read does when its XREADGROUP failed: after Redis lost the streams (NOGROUP)
    /// it joins again from the beginning — everything in a stream recreated since is new to
    /// this group; when the dedicated connection broke (Redis restarted) it opens a new one.
    /// Either way this read returns nothing and the caller's next read goes on.
    async fn recover(&mut self, e: Error) -> Result<Vec<Delivery>> {
        if e.server_code().as_deref() == Some("NOGROUP") {
            self.join(StartFrom::Beginning).await?;
            return Ok(Vec::new());
        }
        if e.is_unavailable() {
            if self.reader.is_some() {
                self.reader = Some(blocking_connection(&self.store, self.options.block).await?);
            }
            return Ok(Vec::new());
        }
        Err(e)
    }

    /// One XREADGROUP over `streams` (`>`: never delivered to this group), `count` from each;
    /// blocking up to `block` when `block` is set and the option is not zero. On a cluster
    /// (one read cannot span slots) each stream is read on its own node, all at once, and a
    /// wait is a poll: reads every 5 ms doubling to 50 ms until something comes or the block
    /// time is over.
    async fn read_new(
        &mut self,
        streams: &[String],
        count: usize,
        block: bool,
    ) -> Result<Option<StreamReadReply>> {
        let Some(reader) = self.reader.as_mut() else {
            return self.poll_new(streams, count, block).await;
        };
        let mut opts = StreamReadOptions::default()
            .group(&self.group, &self.name)
            .count(count);
        if block && !self.options.block.is_zero() {
            opts = opts.block(millis(self.options.block));
        }
        let ids = vec![">"; streams.len()];
        Ok(redis::cmd("XREADGROUP")
            .arg(&opts)
            .arg("STREAMS")
            .arg(streams)
            .arg(&ids)
            .query_async(reader)
            .await?)
    }

    /// [`Consumer::read_new`] on a cluster: one XREADGROUP per stream, sent at once.
    async fn poll_new(
        &self,
        streams: &[String],
        count: usize,
        block: bool,
    ) -> Result<Option<StreamReadReply>> {
        let mut backoff = Backoff::with_pauses(
            self.options.block,
            Duration::from_millis(5),
            Duration::from_millis(50),
        );
        loop {
            let opts = StreamReadOptions::default()
                .group(&self.group, &self.name)
                .count(count);
            let cmds = streams
                .iter()
                .map(|key| {
                    let mut cmd = redis::cmd("XREADGROUP");
                    cmd.arg(&opts).arg("STREAMS").arg(key).arg(">");
                    cmd
                })
                .collect();
            let replies: Vec<Option<StreamReadReply>> = self.store.fan_out(cmds).await?;
            let keys: Vec<_> = replies.into_iter().flatten().flat_map(|r| r.keys).collect();
            if !keys.is_empty() || !block || !backoff.pause().await {
                return Ok(Some(StreamReadReply { keys }));
            }
        }
    }

    /// The partition whose decisions stream is `key`.
    fn partition_of(&self, key: &str) -> Result<u32> {
        self.streams
            .iter()
            .position(|k| k == key)
            .and_then(|i| u32::try_from(i).ok())
            .ok_or_else(|| Error::redis(format!("XREADGROUP answered for unknown stream {key}")))
    }

    /// Parses entries of partition `p`; `counts` holds delivery counters of claimed entries
    /// (absent: first delivery). Unparseable entries are dead-lettered and left out.
    async fn parse_batch(
        &self,
        p: u32,
        entries: Vec<StreamId>,
        counts: &HashMap<String, u64>,
    ) -> Result<Vec<Delivery>> {
        let mut out = Vec::with_capacity(entries.len());
        for entry in entries {
            match parse_event(p, &entry) {
                Ok(event) => out.push(Delivery {
                    partition: p,
                    deliveries: counts.get(&entry.id).copied().unwrap_or(1),
                    entry_id: entry.id,
                    event,
                }),
                Err(why) => {
                    tracing::warn!(partition = p, %why, "dead-lettering a malformed decisions entry");
                    self.dead_letter(p, &[entry.id.as_str()], &format!("malformed: {why}"))
                        .await?;
                }
            }
        }
        Ok(out)
    }

    /// Claims entries other consumers of the group (or this one) held longer than
    /// `min_idle` (XAUTOCLAIM on every partition, one pipeline), moves those whose delivery
    /// counter now exceeds `max_deliveries` to the dead-letter stream, and returns the rest.
    /// [`Consumer::read`] calls it on its own; call it to recover without waiting.
    pub async fn claim_stale(&mut self) -> Result<Vec<Delivery>> {
        self.claim_stale_up_to(usize::MAX).await
    }

    async fn claim_stale_up_to(&mut self, limit: usize) -> Result<Vec<Delivery>> {
        self.last_claim = Some(Instant::now());
        self.claim_idle(self.options.min_idle, limit).await
    }

    /// Claims up to `limit` entries idle for at least `idle` (XAUTOCLAIM on every partition,
    /// one pipeline; what is over `limit` is handed back at once), dead-lettering those past
    /// `max_deliveries`.
    async fn claim_idle(&mut self, idle: Duration, limit: usize) -> Result<Vec<Delivery>> {
        let min_idle = millis(idle);
        let count = self.options.count.min(limit);
        let cmds = self
            .streams
            .iter()
            .map(|key| {
                let mut cmd = redis::cmd("XAUTOCLAIM");
                cmd.arg(key)
                    .arg(&self.group)
                    .arg(&self.name)
                    .arg(min_idle)
                    .arg("0-0")
                    .arg("COUNT")
                    .arg(count);
                cmd
            })
            .collect();
        let replies: Vec<StreamAutoClaimReply> = match self.store.fan_out(cmds).await {
            Err(e) if e.server_code().as_deref() == Some("NOGROUP") => {
                self.join(StartFrom::Beginning).await?;
                return Ok(Vec::new());
            }
            other => other?,
        };
        let claimed: Vec<(u32, StreamAutoClaimReply)> = (0..)
            .zip(replies)
            .filter(|(_, r)| !r.claimed.is_empty() || !r.deleted_ids.is_empty())
            .collect();
        if claimed.is_empty() {
            return Ok(Vec::new());
        }
        // Exact delivery counters of what this consumer now holds (nobody else can claim
        // it before min_idle passes again).
        let mut cmds = Vec::new();
        for (p, reply) in &claimed {
            if !reply.deleted_ids.is_empty() {
                tracing::warn!(partition = p, ids = ?reply.deleted_ids, "pending entries were trimmed before anyone acked them");
            }
            for entry in &reply.claimed {
                let mut cmd = redis::cmd("XPENDING");
                cmd.arg(&self.streams[*p as usize])
                    .arg(&self.group)
                    .arg(&entry.id)
                    .arg(&entry.id)
                    .arg(1);
                cmds.push(cmd);
            }
        }
        let pending: Vec<StreamPendingCountReply> = self.store.fan_out(cmds).await?;
        let counts: HashMap<String, u64> = pending
            .into_iter()
            .flat_map(|r| r.ids)
            .map(|e| (e.id, e.times_delivered as u64))
            .collect();
        let max = u64::from(self.options.max_deliveries);
        let mut out = Vec::new();
        for (p, reply) in claimed {
            let (dead, live): (Vec<StreamId>, Vec<StreamId>) = reply
                .claimed
                .into_iter()
                .partition(|e| counts.get(&e.id).copied().unwrap_or(1) > max);
            if !dead.is_empty() {
                let ids: Vec<&str> = dead.iter().map(|e| e.id.as_str()).collect();
                let reason =
                    format!("delivered more than max_deliveries ({max}) times without ack");
                self.dead_letter(p, &ids, &reason).await?;
            }
            out.extend(self.parse_batch(p, live, &counts).await?);
        }
        let surplus = out.split_off(out.len().min(limit));
        self.release(&surplus).await?;
        Ok(out)
    }

    /// Moves entries this consumer holds to partition `p`'s dead-letter stream and acks them.
    async fn dead_letter(&self, p: u32, ids: &[&str], reason: &str) -> Result<usize> {
        let call = scripts::dead_letter(self.store.keys(), p, &self.group, reason, ids);
        self.store.invoke(&call).await
    }

    /// Hands deliveries back to the group unprocessed: they stay pending but look idle for
    /// `RELEASED_IDLE`, so the next read of any consumer of the group (this one included)
    /// claims them first, and this delivery is not counted against `max_deliveries`
    /// (XCLAIM ... IDLE RETRYCOUNT JUSTID).
    pub async fn release(&self, deliveries: &[Delivery]) -> Result<()> {
        if deliveries.is_empty() {
            return Ok(());
        }
        let idle = millis(RELEASED_IDLE);
        let cmds = deliveries
            .iter()
            .map(|d| {
                let mut cmd = redis::cmd("XCLAIM");
                cmd.arg(&self.streams[d.partition as usize])
                    .arg(&self.group)
                    .arg(&self.name)
                    .arg(0)
                    .arg(&d.entry_id)
                    .arg("IDLE")
                    .arg(idle)
                    .arg("RETRYCOUNT")
                    .arg(d.deliveries.saturating_sub(1))
                    .arg("JUSTID");
                cmd
            })
            .collect();
        let _: Vec<redis::Value> = self.store.fan_out(cmds).await?;
        Ok(())
    }

    /// Acknowledges deliveries in the group (one pipeline); returns how many were still
    /// pending. Acking twice, or acking an entry another consumer claimed, is harmless.
    pub async fn ack(&self, deliveries: &[Delivery]) -> Result<usize> {
        if deliveries.is_empty() {
            return Ok(0);
        }
        let mut by_partition: BTreeMap<u32, Vec<&str>> = BTreeMap::new();
        for d in deliveries {
            by_partition
                .entry(d.partition)
                .or_default()
                .push(&d.entry_id);
        }
        let cmds: Vec<redis::Cmd> = by_partition
            .iter()
            .map(|(p, ids)| {
                let mut cmd = redis::cmd("XACK");
                cmd.arg(&self.streams[*p as usize])
                    .arg(&self.group)
                    .arg(ids);
                cmd
            })
            .collect();
        // XACK is idempotent: repeat it while Redis restarts.
        let acked: Vec<usize> = self
            .store
            .retrying(true, || self.store.fan_out(cmds.clone()))
            .await?;
        Ok(acked.into_iter().sum())
    }
}
