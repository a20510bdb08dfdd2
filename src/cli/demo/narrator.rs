//! The demo's voice: prints each step, its facts and its checks (✓/✗), keeps the checks that
//! failed, and gives the verdict. With `--json` it prints nothing as it goes and one JSON
//! document at the end (every step with its facts and checks, the verdict, the hints).

use std::time::Instant;

use crate::{Error, Result};
use serde::Serialize;

/// One step as the JSON document carries it.
#[derive(Debug, Serialize)]
struct Step {
    title: String,
    facts: Vec<String>,
    checks: Vec<Check>,
}

/// One check: the claim and whether it held.
#[derive(Debug, Serialize)]
struct Check {
    claim: String,
    ok: bool,
}

/// Prints the steps and remembers whether every check held.
pub(super) struct Narrator {
    step: usize,
    total: usize,
    failures: Vec<String>,
    /// `Some` with `--json`: what is printed at the end instead of as it goes.
    json: Option<Document>,
}

/// The `--json` document.
#[derive(Debug, Default, Serialize)]
struct Document {
    intro: Vec<String>,
    steps: Vec<Step>,
    passed: bool,
    seconds: f64,
    failures: Vec<String>,
    look_for_yourself: Vec<String>,
}

impl Narrator {
    /// A narrator for a scenario of `total` steps; `json` collects instead of printing.
    pub(super) fn new(total: usize, json: bool) -> Self {
        Narrator {
            step: 0,
            total,
            failures: Vec::new(),
            json: json.then(Document::default),
        }
    }
    /// A line of the introduction (what runs where).
    pub(super) fn intro(&mut self, text: impl Into<String>) {
        let text = text.into();
        match &mut self.json {
            Some(doc) => doc.intro.push(text),
            None => println!("{text}"),
        }
    }
    /// Starts the next step.
    pub(super) fn step(&mut self, title: &str) {
        self.step += 1;
        match &mut self.json {
            Some(doc) => doc.steps.push(Step {
                title: title.to_string(),
                facts: Vec::new(),
                checks: Vec::new(),
            }),
            None => println!("\n[{}/{}] {title}", self.step, self.total),
        }
    }
    /// Narrates a fact.
    pub(super) fn say(&mut self, text: impl AsRef<str>) {
        match &mut self.json {
            Some(doc) => {
                if let Some(step) = doc.steps.last_mut() {
                    step.facts.push(text.as_ref().to_string());
                }
            }
            None => println!("      {}", text.as_ref()),
        }
    }
    /// Prints a claim as held (✓) or not (✗, remembered as a failure).
    pub(super) fn check(&mut self, ok: bool, claim: impl AsRef<str>) {
        let claim = claim.as_ref();
        if !ok {
            self.failures.push(format!("step {}: {claim}", self.step));
        }
        match &mut self.json {
            Some(doc) => {
                if let Some(step) = doc.steps.last_mut() {
                    step.checks.push(Check {
                        claim: claim.to_string(),
                        ok,
                    });
                }
            }
            None => println!("   {}  {claim}", if ok { "✓" } else { "✗" }),
        }
    }
    /// The closing commands to look at what the demo left.
    pub(super) fn hints(&mut self, title: &str, lines: Vec<String>) {
        match &mut self.json {
            Some(doc) => doc.look_for_yourself = lines,
            None => {
                println!("\n{title}");
                for l in lines {
                    println!("  {l}");
                }
            }
        }
    }
    /// Prints the verdict and the time since `started` (or the whole document with
    /// `--json`); an error naming every failed check unless all held.
    pub(super) fn finish(self, started: Instant) -> Result<()> {
        let seconds = started.elapsed().as_secs_f64();
        let passed = self.failures.is_empty();
        match self.json {
            Some(mut doc) => {
                doc.passed = passed;
                doc.seconds = (seconds * 10.0).round() / 10.0;
                doc.failures = self.failures.clone();
                super::super::print_json(&doc)?;
            }
            None => println!(
                "\n{} in {seconds:.1} s",
                if passed {
                    "all checks passed"
                } else {
                    "SOME CHECKS FAILED"
                },
            ),
        }
        if passed {
            Ok(())
        } else {
            Err(Error::InvalidInput(format!(
                "demo checks failed: {}",
                self.failures.join("; ")
            )))
        }
    }
}
