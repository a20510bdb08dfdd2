//! Waiting for a condition: the one poll loop of the tests.

/// How long a test waits for a condition before it calls the wait a hang. Generous: it only
/// bounds a hang; what a test checks is the condition, never the time it took.
pub const HANG: std::time::Duration = std::time::Duration::from_secs(30);

/// Waits until `ready()` holds, polling every few milliseconds; panics naming `what` after
/// [`HANG`].
pub async fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + HANG;
    while !ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}
