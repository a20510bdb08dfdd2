//! `agentstate.Consumer`: a member of a consumer group over every partition's decisions
//! stream (at-least-once: ack after the work is done).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agentstate::test_support::advice::Situation;
use agentstate::{Consumer, ConsumerOptions, Delivery};
use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;

use crate::bridge::block;
use crate::convert::{to_json, Json};
use crate::fork::Local;

/// Deliveries handed out and not yet acked or released, by (partition, entry id): `ack`
/// takes the dicts `read` returned and finds the core's `Delivery` again.
type Outstanding = Arc<Mutex<HashMap<(u32, String), Delivery>>>;

/// The group member of one process: the core consumer (reads need `&mut`: one read at a
/// time) and the deliveries it handed out.
#[derive(Clone)]
struct Member {
    consumer: Arc<tokio::sync::Mutex<Consumer>>,
    outstanding: Outstanding,
}

impl Member {
    fn new(c: Consumer) -> Self {
        Member {
            consumer: Arc::new(tokio::sync::Mutex::new(c)),
            outstanding: Arc::default(),
        }
    }
}

/// A consumer of the decisions streams, made by ``Store.consumer(group, name, ...)``. After
/// `os.fork()` the child's first call joins the group again under the same name on its own
/// connection (deliveries the parent handed out stay the parent's to ack).
#[pyclass(frozen, name = "Consumer", module = "agentstate")]
pub struct PyConsumer {
    /// This process's member; locked only with the GIL held (so never across a fork).
    member: Mutex<Local<Member>>,
    /// What a forked child joins the group again with: its `Store`'s core store in this
    /// process (reconnected after a fork).
    store: Reconnect,
    options: ConsumerOptions,
    group: String,
    name: String,
    /// Where its store's calls run, for the wording of errors.
    at: Arc<Situation>,
}

/// How a consumer reaches a core store of the current process (the `Store` it was made by,
/// which reconnects in a forked child).
pub type Reconnect = Box<dyn Fn(Python<'_>) -> PyResult<agentstate::Store> + Send + Sync>;

impl PyConsumer {
    /// A consumer joined as `c`; `at`: where its store's calls run.
    pub fn new(
        c: Consumer,
        store: Reconnect,
        at: Arc<Situation>,
        options: ConsumerOptions,
    ) -> Self {
        PyConsumer {
            at,
            group: c.group().to_string(),
            name: c.name().to_string(),
            member: Mutex::new(Local::new(Member::new(c))),
            store,
            options,
        }
    }

    /// This process's member: the one joined here, or (first call after a fork) one joined
    /// now; the parent's is leaked.
    fn member(&self, py: Python<'_>) -> PyResult<Member> {
        let lock = || self.member.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = lock().get() {
            return Ok(m.clone());
        }
        let s = (self.store)(py)?;
        let (group, name, options) = (&self.group, &self.name, self.options.clone());
        let fresh = block(py, &self.at, s.consumer(group, name, options))?;
        let mut slot = lock();
        if slot.get().is_none() {
            *slot = Local::new(Member::new(fresh));
        }
        Ok(slot.get().expect("set above in this generation").clone())
    }

    /// The core deliveries behind the dicts (`partition`, `entry_id`), removed from the
    /// outstanding set.
    fn take(&self, m: &Member, py_deliveries: &[Bound<'_, PyAny>]) -> PyResult<Vec<Delivery>> {
        let mut keys = Vec::with_capacity(py_deliveries.len());
        for d in py_deliveries {
            let p: u32 = d.get_item("partition")?.extract()?;
            let e: String = d.get_item("entry_id")?.extract()?;
            keys.push((p, e));
        }
        let mut map = m.outstanding.lock().unwrap();
        keys.into_iter()
            .map(|k| {
                map.remove(&k).ok_or_else(|| {
                    PyKeyError::new_err(format!(
                        "no outstanding delivery {}:{} on this consumer",
                        k.0, k.1
                    ))
                })
            })
            .collect()
    }
}

#[pymethods]
impl PyConsumer {
    /// The consumer group.
    #[getter]
    fn group(&self) -> String {
        self.group.clone()
    }

    /// This consumer's name in the group.
    #[getter]
    fn name(&self) -> String {
        self.name.clone()
    }

    fn __repr__(&self) -> String {
        format!("Consumer(group={:?}, name={:?})", self.group, self.name)
    }
}

twins! {
    impl PyConsumer;

    /// Waits up to `block` for decisions/outcomes (claiming stale ones of dead consumers
    /// first) and returns them as dicts (`partition`, `entry_id`, `deliveries`, `type`, ...).
    fn read / aread(self, py) -> Json {
        let Member { consumer, outstanding } = self.member(py)?;
        async move {
            let batch = consumer.lock().await.read().await?;
            let json = to_json(&batch);
            let mut map = outstanding.lock().unwrap();
            for d in batch {
                map.insert((d.partition, d.entry_id.clone()), d);
            }
            Ok(json)
        }
    }

    /// Acknowledges deliveries returned by `read`; returns how many the group still held.
    fn ack / aack(self, py, deliveries: Vec<Bound<'_, PyAny>>) -> usize {
        let m = self.member(py)?;
        let ds = self.take(&m, &deliveries)?;
        async move { m.consumer.lock().await.ack(&ds).await }
    }

    /// Hands deliveries back to the group unprocessed (the next claim of any consumer takes
    /// them; not counted as a delivery).
    fn release / arelease(self, py, deliveries: Vec<Bound<'_, PyAny>>) -> () {
        let m = self.member(py)?;
        let ds = self.take(&m, &deliveries)?;
        async move { m.consumer.lock().await.release(&ds).await }
    }
}
