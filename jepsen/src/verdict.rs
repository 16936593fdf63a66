//! What a checker concludes: the promise it checked, whether the history kept
//! it, each violation found (with when and which job), and what it measured.

use serde::Serialize;

/// One checker's conclusion.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// The checker's name (`gpu-exclusivity`).
    pub checker: &'static str,
    /// The promise, in a sentence.
    pub promise: &'static str,
    /// What broke it; empty when kept.
    pub violations: Vec<Violation>,
    /// Figures the checker measured (`max_overlap_ms`, `acknowledged`), in
    /// the order found.
    pub measures: Vec<(String, f64)>,
}

/// One broken promise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// When, on the run's clock, if one moment applies.
    pub t: Option<u64>,
    /// The job, if one applies.
    pub job: Option<u64>,
    /// What happened, in words an operator can check against the history.
    pub message: String,
}

impl Verdict {
    /// A verdict with nothing found yet.
    pub fn new(checker: &'static str, promise: &'static str) -> Self {
        Verdict {
            checker,
            promise,
            violations: Vec::new(),
            measures: Vec::new(),
        }
    }

    /// Whether the promise was kept.
    pub fn holds(&self) -> bool {
        self.violations.is_empty()
    }

    /// Records a violation.
    pub fn violation(&mut self, t: Option<u64>, job: Option<u64>, message: impl Into<String>) {
        self.violations.push(Violation {
            t,
            job,
            message: message.into(),
        });
    }

    /// Records a figure.
    pub fn measure(&mut self, name: &str, value: impl Into<f64>) {
        self.measures.push((name.to_string(), value.into()));
    }

    /// The figure `name`, if measured.
    pub fn measured(&self, name: &str) -> Option<f64> {
        self.measures
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
    }
}
