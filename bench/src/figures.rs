//! Turning timings into figures and printing them.

use std::time::Duration;

use serde_json::{Map, Value};

/// Latency samples in microseconds.
#[derive(Default)]
pub struct Samples {
    micros: Vec<f64>,
}

impl Samples {
    /// Records one duration.
    pub fn push(&mut self, d: Duration) {
        self.micros.push(d.as_secs_f64() * 1e6);
    }

    /// The `q` quantile (0..=1), nearest-rank; 0 when empty.
    pub fn quantile(&mut self, q: f64) -> f64 {
        if self.micros.is_empty() {
            return 0.0;
        }
        self.micros.sort_by(f64::total_cmp);
        let rank = ((self.micros.len() as f64 - 1.0) * q).round() as usize;
        self.micros[rank.min(self.micros.len() - 1)]
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.micros.len()
    }

    /// Adds another set of samples.
    pub fn merge(&mut self, other: Samples) {
        self.micros.extend(other.micros);
    }

    /// Sum of all samples, microseconds.
    pub fn total_us(&self) -> f64 {
        self.micros.iter().sum()
    }
}

/// An ordered set of named figures.
#[derive(Default)]
pub struct Report {
    fields: Map<String, Value>,
}

impl Report {
    /// Adds a figure, rounded to 3 decimals for floats.
    pub fn put(&mut self, name: &str, value: impl Into<Value>) {
        let value = match value.into() {
            Value::Number(n) if n.is_f64() => {
                let rounded = (n.as_f64().unwrap_or(0.0) * 1000.0).round() / 1000.0;
                Value::from(rounded)
            }
            other => other,
        };
        self.fields.insert(name.to_string(), value);
    }

    /// Prints one JSON object, or one `name: value` line per figure.
    pub fn print(&self, json: bool) -> anyhow::Result<()> {
        if json {
            println!("{}", serde_json::to_string(&self.fields)?);
        } else {
            for (name, value) in &self.fields {
                println!("{name:>32}: {value}");
            }
        }
        Ok(())
    }
}

/// Peak resident set size of this process in MiB (Linux `VmHWM`), if readable.
pub fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}
