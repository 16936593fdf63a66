//! Records the history as the run goes: one clock for the whole run (a
//! monotonic one for the runner's own events), and the jobs' event files
//! read at the end and shifted from the wall clock onto it.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use corral_jepsen::history::{Event, EventKind, Header, History};

/// The run's history, shared by the workload, the nemesis and the observers.
#[derive(Clone)]
pub struct Recorder {
    started: Instant,
    started_wall_ms: u64,
    history: Arc<Mutex<History>>,
}

impl Recorder {
    /// A new run under `header`, starting now.
    pub fn new(header: Header) -> Recorder {
        Recorder {
            started: Instant::now(),
            started_wall_ms: wall_ms(),
            history: Arc::new(Mutex::new(History::new(header))),
        }
    }

    /// Sets the bound the liveness checker holds the drain to (known once
    /// the backlog at the last heal is).
    pub fn set_liveness_bound_ms(&self, bound_ms: u64) {
        self.history
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .header
            .liveness_bound_ms = bound_ms;
    }

    /// Milliseconds since the run began.
    pub fn now(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// A wall-clock time (ms since the epoch) on the run's clock.
    pub fn run_time_of_wall(&self, wall_ms: u64) -> u64 {
        wall_ms.saturating_sub(self.started_wall_ms)
    }

    /// Records `kind` now; returns the time.
    pub fn record(&self, kind: EventKind) -> u64 {
        let t = self.now();
        self.record_at(t, kind);
        t
    }

    /// Records `kind` at `t`.
    pub fn record_at(&self, t: u64, kind: EventKind) {
        self.history
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(t, kind);
    }

    /// Reads every job's event file in `events` into the history.
    pub fn read_job_events(&self, events: &Path) -> anyhow::Result<usize> {
        let mut count = 0;
        let Ok(entries) = std::fs::read_dir(events) else {
            return Ok(0);
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            for (index, line) in text.lines().enumerate() {
                let event = self
                    .job_event(line)
                    .with_context(|| format!("{} line {}: {line}", path.display(), index + 1))?;
                self.record_at(event.t, event.kind);
                count += 1;
            }
        }
        Ok(count)
    }

    fn job_event(&self, line: &str) -> anyhow::Result<Event> {
        let mut value: serde_json::Value = serde_json::from_str(line)?;
        let object = value.as_object_mut().context("not a JSON object")?;
        let wall = object
            .remove("wall_ms")
            .and_then(|w| w.as_u64())
            .context("no wall_ms")?;
        object.insert("t".into(), self.run_time_of_wall(wall).into());
        Ok(serde_json::from_value(value)?)
    }

    /// The history so far, in time order.
    pub fn history(&self) -> History {
        let mut history = self
            .history
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        history.sort();
        history
    }
}

/// Milliseconds since the epoch.
pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
