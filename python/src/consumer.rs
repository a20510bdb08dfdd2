//! `agentstate.Consumer`: a member of a consumer group over every partition's decisions
//! stream (at-least-once: ack after the work is done).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agentstate::test_support::advice::Situation;
use agentstate::{Consumer, Delivery};
use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;

use crate::convert::{to_json, Json};

/// Deliveries handed out and not yet acked or released, by (partition, entry id): `ack`
/// takes the dicts `read` returned and finds the core's `Delivery` again.
type Outstanding = Arc<Mutex<HashMap<(u32, String), Delivery>>>;

/// A consumer of the decisions streams, made by ``Store.consumer(group, name, ...)``.
#[pyclass(frozen, name = "Consumer", module = "agentstate")]
pub struct PyConsumer {
    /// Reads need `&mut`; one read at a time per consumer.
    inner: Arc<tokio::sync::Mutex<Consumer>>,
    outstanding: Outstanding,
    group: String,
    name: String,
    /// Where its store's calls run, for the wording of errors.
    at: Arc<Situation>,
}

impl PyConsumer {
    pub fn new(c: Consumer, at: Arc<Situation>) -> Self {
        PyConsumer {
            at,
            group: c.group().to_string(),
            name: c.name().to_string(),
            inner: Arc::new(tokio::sync::Mutex::new(c)),
            outstanding: Arc::default(),
        }
    }

    /// The core deliveries behind the dicts (`partition`, `entry_id`), removed from the
    /// outstanding set.
    fn take(&self, py_deliveries: &[Bound<'_, PyAny>]) -> PyResult<Vec<Delivery>> {
        let mut keys = Vec::with_capacity(py_deliveries.len());
        for d in py_deliveries {
            let p: u32 = d.get_item("partition")?.extract()?;
            let e: String = d.get_item("entry_id")?.extract()?;
            keys.push((p, e));
        }
        let mut map = self.outstanding.lock().unwrap();
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
        let inner = self.inner.clone();
        let out = self.outstanding.clone();
        async move {
            let batch = inner.lock().await.read().await?;
            let json = to_json(&batch);
            let mut map = out.lock().unwrap();
            for d in batch {
                map.insert((d.partition, d.entry_id.clone()), d);
            }
            Ok(json)
        }
    }

    /// Acknowledges deliveries returned by `read`; returns how many the group still held.
    fn ack / aack(self, py, deliveries: Vec<Bound<'_, PyAny>>) -> usize {
        let ds = self.take(&deliveries)?;
        let inner = self.inner.clone();
        async move { inner.lock().await.ack(&ds).await }
    }

    /// Hands deliveries back to the group unprocessed (the next claim of any consumer takes
    /// them; not counted as a delivery).
    fn release / arelease(self, py, deliveries: Vec<Bound<'_, PyAny>>) -> () {
        let ds = self.take(&deliveries)?;
        let inner = self.inner.clone();
        async move { inner.lock().await.release(&ds).await }
    }
}
