//! Rate-limiting of repeated log lines. Each call site (one `warn!` in the
//! code), for each node and job it names (its `node` and `job` fields) and,
//! for records of the `log` crate, each target, may write `per_window` lines
//! in each window: a flood from one line of code is cut, while one line per
//! node of a thousand nodes going down is not;
//! the rest are counted and dropped, and once the window is over one line
//! says how many were suppressed and where from. [`RepeatBudget`] is the
//! pure count (time comes in as an argument); [`RepeatLimit`] is the tracing
//! layer that applies it to every event before any layer formats it.

use std::collections::HashMap;
use std::hash::Hash;
use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use std::hash::Hasher;

use tracing::callsite::Identifier;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::layer::{Context, Layer};

/// What to do with one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Write it.
    Show,
    /// Count it and drop it.
    Suppress,
}

/// Lines a call site's window dropped, reported once the window is over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suppressed {
    /// Where the lines came from (`module line N`).
    pub site: String,
    /// How many were dropped.
    pub count: u64,
    /// The window's length.
    pub window: Duration,
}

#[derive(Debug)]
struct Window {
    started: Instant,
    shown: u32,
    suppressed: u64,
    site: String,
}

/// Per call site (`K`), how many lines its current window has shown and
/// dropped. Windows are looked over for reports at most once per
/// `window / 10`, so a flood costs a map lookup per line.
#[derive(Debug)]
pub struct RepeatBudget<K> {
    per_window: u32,
    window: Duration,
    windows: HashMap<K, Window>,
    next_sweep: Option<Instant>,
}

impl<K: Hash + Eq + Clone> RepeatBudget<K> {
    /// `per_window` lines per call site every `window`.
    pub fn new(per_window: u32, window: Duration) -> Self {
        RepeatBudget {
            per_window,
            window,
            windows: HashMap::new(),
            next_sweep: None,
        }
    }

    /// A line from call site `key` (described by `site`) at `now`: whether
    /// to write it, and the reports of windows that ended with lines dropped
    /// (this site's or any other's), to write before it.
    pub fn admit(
        &mut self,
        key: &K,
        site: impl FnOnce() -> String,
        now: Instant,
    ) -> (Verdict, Vec<Suppressed>) {
        let mut reports = self.sweep(now);
        let window = self.window;
        let entry = self.windows.entry(key.clone()).or_insert_with(|| Window {
            started: now,
            shown: 0,
            suppressed: 0,
            site: site(),
        });
        if now.saturating_duration_since(entry.started) >= window {
            if entry.suppressed > 0 {
                reports.push(Suppressed {
                    site: entry.site.clone(),
                    count: entry.suppressed,
                    window,
                });
            }
            entry.started = now;
            entry.shown = 0;
            entry.suppressed = 0;
        }
        if entry.shown < self.per_window {
            entry.shown += 1;
            (Verdict::Show, reports)
        } else {
            entry.suppressed += 1;
            (Verdict::Suppress, reports)
        }
    }

    /// Reports (and forgets) every window that is over.
    fn sweep(&mut self, now: Instant) -> Vec<Suppressed> {
        if self.next_sweep.is_some_and(|at| now < at) {
            return Vec::new();
        }
        self.next_sweep = Some(now + self.window / 10);
        let window = self.window;
        let mut reports = Vec::new();
        self.windows.retain(|_, w| {
            if now.saturating_duration_since(w.started) < window {
                return true;
            }
            if w.suppressed > 0 {
                reports.push(Suppressed {
                    site: w.site.clone(),
                    count: w.suppressed,
                    window,
                });
            }
            false
        });
        reports
    }
}

/// The tracing layer: every event passes [`RepeatBudget::admit`] before any
/// layer records it; reports of dropped lines are written as log lines of
/// their own to `out`.
pub struct RepeatLimit {
    budget: Mutex<RepeatBudget<(Identifier, u64)>>,
    per_window: u32,
    out: Box<dyn Fn(&str) + Send + Sync>,
}

impl RepeatLimit {
    /// Limits to `per_window` lines per call site each `window`, reporting
    /// on standard error.
    pub fn to_stderr(per_window: u32, window: Duration) -> Self {
        RepeatLimit::new(per_window, window, |line| {
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        })
    }

    /// The same, reporting through `out` (tests).
    pub fn new(
        per_window: u32,
        window: Duration,
        out: impl Fn(&str) + Send + Sync + 'static,
    ) -> Self {
        RepeatLimit {
            budget: Mutex::new(RepeatBudget::new(per_window, window)),
            per_window,
            out: Box::new(out),
        }
    }
}

impl<S: Subscriber> Layer<S> for RepeatLimit {
    fn event_enabled(&self, event: &Event<'_>, _ctx: Context<'_, S>) -> bool {
        let meta = event.metadata();
        let site = || {
            format!(
                "{} line {}",
                meta.module_path().unwrap_or(meta.target()),
                meta.line().unwrap_or(0)
            )
        };
        let mut subject = Subject::default();
        event.record(&mut subject);
        let key = (meta.callsite(), subject.hasher.finish());
        let (verdict, reports) = {
            let mut budget = self.budget.lock().unwrap_or_else(|p| p.into_inner());
            budget.admit(&key, site, Instant::now())
        };
        for report in reports {
            (self.out)(&report_line(&report, self.per_window));
        }
        crate::line_counts::count(meta.level(), verdict == Verdict::Suppress);
        verdict == Verdict::Show
    }
}

/// What a line is about, as far as the limit tells lines apart: the node and
/// job it names, and a `log` record's own target (the `log` crate's records
/// all come through one call site per level).
#[derive(Default)]
struct Subject {
    hasher: std::collections::hash_map::DefaultHasher,
}

impl Visit for Subject {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if matches!(field.name(), "node" | "job" | "log.target") {
            self.hasher.write(field.name().as_bytes());
            self.hasher.write(format!("{value:?}").as_bytes());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if matches!(field.name(), "node" | "job" | "log.target") {
            self.hasher.write(field.name().as_bytes());
            self.hasher.write(value.as_bytes());
        }
    }
}

/// One report as a log line, in the formatter's layout.
fn report_line(report: &Suppressed, per_window: u32) -> String {
    let mut time = String::new();
    let _ = SystemTime.format_time(&mut Writer::new(&mut time));
    format!(
        "{time}  WARN corral_logging: suppressed {} more lines from {} in {} s (at most {} are written per {} s)\n",
        report.count,
        report.site,
        report.window.as_secs(),
        per_window,
        report.window.as_secs(),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn a_site_writes_its_budget_per_window_and_the_rest_is_counted_once_it_ends() {
        let mut budget = RepeatBudget::new(3, 10 * S);
        let t0 = Instant::now();
        let site = || "openraft::replication (a.rs:1)".to_string();
        let verdicts: Vec<Verdict> = (0..100)
            .map(|i| budget.admit(&1, site, t0 + i * (S / 20)).0)
            .collect();
        assert_eq!(verdicts.iter().filter(|v| **v == Verdict::Show).count(), 3);
        assert!(verdicts[3..].iter().all(|v| *v == Verdict::Suppress));
        // The next window: shown again, after the report of the last one.
        let (verdict, reports) = budget.admit(&1, site, t0 + 10 * S);
        assert_eq!(verdict, Verdict::Show);
        assert_eq!(
            reports,
            vec![Suppressed {
                site: site(),
                count: 97,
                window: 10 * S
            }]
        );
    }

    #[test]
    fn sites_are_counted_apart_and_a_quiet_sites_count_is_reported_by_another() {
        let mut budget = RepeatBudget::new(1, 10 * S);
        let t0 = Instant::now();
        assert_eq!(budget.admit(&1, || "a".into(), t0).0, Verdict::Show);
        assert_eq!(budget.admit(&1, || "a".into(), t0).0, Verdict::Suppress);
        assert_eq!(budget.admit(&2, || "b".into(), t0).0, Verdict::Show);
        // Site 1 falls silent; site 2's next line, after the window, reports it.
        let (verdict, reports) = budget.admit(&2, || "b".into(), t0 + 11 * S);
        assert_eq!(verdict, Verdict::Show);
        assert_eq!(reports.len(), 1);
        assert_eq!(reports[0].site, "a");
        assert_eq!(reports[0].count, 1);
        // Reported once.
        let (_, again) = budget.admit(&2, || "b".into(), t0 + 30 * S);
        assert!(again.is_empty());
    }

    #[test]
    fn a_window_without_drops_reports_nothing() {
        let mut budget = RepeatBudget::new(5, 10 * S);
        let t0 = Instant::now();
        for i in 0..5 {
            assert_eq!(budget.admit(&1, || "a".into(), t0 + i * S).0, Verdict::Show);
        }
        assert!(budget.admit(&1, || "a".into(), t0 + 20 * S).1.is_empty());
    }

    /// Through tracing: a flood from one line of code is cut to the budget,
    /// and other lines still get through.
    #[test]
    fn the_layer_drops_a_flood_from_one_call_site_only() {
        let written = lines_written(|| {
            for i in 0..1000 {
                tracing::warn!(i, "the same line");
            }
            tracing::warn!("another line");
        });
        assert_eq!(written, 3);
    }

    /// One line per node is not a flood: a thousand nodes declared down
    /// write a thousand lines, while one node's repeats are still cut.
    #[test]
    fn lines_about_different_nodes_are_counted_apart() {
        let written = lines_written(|| {
            for i in 0..100 {
                let node = format!("gpu{i:03}");
                tracing::warn!(%node, "declaring node down");
            }
            let node = "gpu000".to_string();
            for _ in 0..100 {
                tracing::warn!(%node, "declaring node down");
            }
        });
        // 100 nodes once each from the first call site; the second writes
        // its budget of 2 for gpu000 and drops the other 98.
        assert_eq!(written, 102);
    }

    /// How many of the lines `log` writes get past a limit of 2 per call
    /// site (and subject) per minute.
    fn lines_written(log: impl FnOnce()) -> usize {
        let written = Arc::new(Mutex::new(0usize));
        let collector = tracing_subscriber::registry()
            .with(RepeatLimit::new(2, 60 * S, |_| {}))
            .with(CountingLayer(Arc::clone(&written)));
        tracing::subscriber::with_default(collector, log);
        *written.lock().unwrap()
    }

    struct CountingLayer(Arc<Mutex<usize>>);

    impl<S: Subscriber> Layer<S> for CountingLayer {
        fn on_event(&self, _event: &Event<'_>, _ctx: Context<'_, S>) {
            *self.0.lock().unwrap() += 1;
        }
    }
}
