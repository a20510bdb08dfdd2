//! The demo's voice: prints each step, its facts and its checks (✓/✗), keeps the checks that
//! failed, and gives the verdict.

use std::time::Instant;

use agentstate::{Error, Result};

/// Prints the steps and remembers whether every check held.
pub(super) struct Narrator {
    step: usize,
    total: usize,
    failures: Vec<String>,
}

impl Narrator {
    /// A narrator for a scenario of `total` steps.
    pub(super) fn new(total: usize) -> Self {
        Narrator {
            step: 0,
            total,
            failures: Vec::new(),
        }
    }
    /// Starts the next step.
    pub(super) fn step(&mut self, title: &str) {
        self.step += 1;
        println!("\n[{}/{}] {title}", self.step, self.total);
    }
    /// Narrates a fact.
    pub(super) fn say(&self, text: impl AsRef<str>) {
        println!("      {}", text.as_ref());
    }
    /// Prints a claim as held (✓) or not (✗, remembered as a failure).
    pub(super) fn check(&mut self, ok: bool, claim: impl AsRef<str>) {
        if ok {
            println!("   ✓  {}", claim.as_ref());
        } else {
            println!("   ✗  {}", claim.as_ref());
            self.failures
                .push(format!("step {}: {}", self.step, claim.as_ref()));
        }
    }
    /// Prints the verdict and the time since `started`; an error naming every failed check
    /// unless all held.
    pub(super) fn finish(self, started: Instant) -> Result<()> {
        println!(
            "\n{} in {:.1} s",
            if self.failures.is_empty() {
                "all checks passed"
            } else {
                "SOME CHECKS FAILED"
            },
            started.elapsed().as_secs_f64()
        );
        if self.failures.is_empty() {
            Ok(())
        } else {
            Err(Error::InvalidInput(format!(
                "demo checks failed: {}",
                self.failures.join("; ")
            )))
        }
    }
}
