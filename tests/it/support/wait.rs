//! Waiting for a condition: the one poll loop of the tests. A test waits for what it checks,
//! never for a time: the timeout only bounds a hang, and when it passes the panic says what
//! was awaited and what the last look saw.

use std::fmt::Display;
use std::time::{Duration, Instant};

/// How long a test waits for a condition before it calls the wait a hang. Generous: it only
/// bounds a hang; what a test checks is the condition, never the time it took.
pub const HANG: Duration = Duration::from_secs(30);

/// How long the wait sleeps between two looks.
const EVERY: Duration = Duration::from_millis(10);

/// What one look saw: the condition holds (with a value), or what was seen instead.
pub trait Seen {
    /// What the wait returns once the condition holds.
    type Value;
    /// `Ok(value)` once the condition holds, else a description of what was seen.
    fn seen(self) -> std::result::Result<Self::Value, String>;
}

/// A condition that holds or not.
impl Seen for bool {
    type Value = ();
    fn seen(self) -> std::result::Result<(), String> {
        if self {
            Ok(())
        } else {
            Err("false".into())
        }
    }
}

/// A value once there is one.
impl<T> Seen for Option<T> {
    type Value = T;
    fn seen(self) -> std::result::Result<T, String> {
        self.ok_or_else(|| "nothing yet".into())
    }
}

/// A value once there is one, else the observation the error carries (reported on a hang).
impl<T, E: Display> Seen for std::result::Result<T, E> {
    type Value = T;
    fn seen(self) -> std::result::Result<T, String> {
        self.map_err(|e| e.to_string())
    }
}

/// Polls `observe` until what it returns holds ([`Seen`]) and returns its value; panics after
/// `timeout` naming `what` and the last observation. Async: a tokio test must not block its
/// runtime while it waits (the store's and the daemon's tasks run on it).
pub async fn wait_until<S: Seen>(
    what: &str,
    timeout: Duration,
    mut observe: impl FnMut() -> S,
) -> S::Value {
    let wait = Wait::new(what, timeout);
    loop {
        match wait.look(&mut observe) {
            Some(value) => return value,
            None => tokio::time::sleep(EVERY).await,
        }
    }
}

/// [`wait_until`] for code without a tokio runtime (a plain `#[test]`, a fixture's
/// constructor): it sleeps the thread between looks.
pub fn wait_until_blocking<S: Seen>(
    what: &str,
    timeout: Duration,
    mut observe: impl FnMut() -> S,
) -> S::Value {
    let wait = Wait::new(what, timeout);
    loop {
        if let Some(value) = wait.look(&mut observe) {
            return value;
        }
        std::thread::sleep(EVERY);
    }
}

/// One wait: what it waits for and until when.
struct Wait<'a> {
    what: &'a str,
    timeout: Duration,
    deadline: Instant,
}

impl<'a> Wait<'a> {
    fn new(what: &'a str, timeout: Duration) -> Wait<'a> {
        Wait {
            what,
            timeout,
            deadline: Instant::now() + timeout,
        }
    }

    /// One look: the value once the condition holds, `None` while it does not; panics,
    /// naming what it waits for and what it saw, once the deadline has passed.
    fn look<S: Seen>(&self, observe: &mut impl FnMut() -> S) -> Option<S::Value> {
        match observe().seen() {
            Ok(value) => Some(value),
            Err(last) => {
                assert!(
                    Instant::now() < self.deadline,
                    "timed out after {:?} waiting until {}; last seen: {last}",
                    self.timeout,
                    self.what
                );
                None
            }
        }
    }
}
