//! [`Backoff`]: the one way a bounded wait on Redis pauses between polls — a restore waiting
//! for the daemon, a retry of an idempotent call, and on a cluster (where a blocking read
//! would hold up the shared connection) a durable write waiting for its commit and a
//! consumer's read.

use std::time::{Duration, Instant};

/// Pauses between polls, doubling from a first pause up to a longest one, until a deadline.
pub(crate) struct Backoff {
    /// When the wait is over.
    deadline: Instant,
    /// The next pause.
    pause: Duration,
    /// The longest pause.
    longest: Duration,
}

impl Backoff {
    /// A wait of `wait` starting now, pausing 1 ms, doubling up to 20 ms.
    pub(crate) fn new(wait: Duration) -> Self {
        Self::with_pauses(wait, Duration::from_millis(1), Duration::from_millis(20))
    }

    /// A wait of `wait` starting now, pausing `first`, doubling up to `longest`.
    pub(crate) fn with_pauses(wait: Duration, first: Duration, longest: Duration) -> Self {
        Backoff {
            deadline: Instant::now() + wait,
            pause: first,
            longest,
        }
    }

    /// Sleeps before the next poll (never past the deadline, so the last poll is at it);
    /// `false`, without sleeping, once the wait is over.
    pub(crate) async fn pause(&mut self) -> bool {
        let now = Instant::now();
        if now >= self.deadline {
            return false;
        }
        tokio::time::sleep(self.pause.min(self.deadline - now)).await;
        self.pause = (self.pause * 2).min(self.longest);
        true
    }
}
