//! The timeline page: a self-contained HTML file with one SVG picture. Time
//! runs left to right; the lanes are the faults injected, the leader of each
//! term, and every GPU that ran an attempt, with each rank's use of it drawn
//! as a bar named `job.attempt`. Violations are red lines at their moment;
//! every bar and line has a tooltip.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::attempts::Attempts;
use crate::history::{EventKind, History};
use crate::verdict::Verdict;

const WIDTH: f64 = 1200.0;
const LABEL: f64 = 140.0;
const LANE: f64 = 22.0;

/// The page for `history` and its verdicts.
pub fn timeline_html(history: &History, verdicts: &[Verdict]) -> String {
    let end = history.end().max(1) as f64;
    let x = |t: u64| LABEL + (t as f64 / end) * (WIDTH - LABEL - 10.0);
    let mut lanes: Vec<(String, Vec<Bar>)> = Vec::new();

    // Faults, each from its beginning to its heal (or the run's end).
    let mut faults = Vec::new();
    let mut open: BTreeMap<u64, (u64, String)> = BTreeMap::new();
    for event in &history.events {
        match &event.kind {
            EventKind::FaultBegin {
                fault,
                kind,
                target,
                ..
            } => {
                open.insert(*fault, (event.t, format!("{kind} {target}")));
            }
            EventKind::FaultHealed { fault } => {
                if let Some((from, label)) = open.remove(fault) {
                    faults.push(Bar::new(from, event.t, label, "#f0a030"));
                }
            }
            _ => {}
        }
    }
    for (from, label) in open.into_values() {
        faults.push(Bar::new(from, history.end(), label, "#f0a030"));
    }
    lanes.push(("faults".into(), faults));

    // Leaders: each term from its first sighting to the next term's.
    let mut terms: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for event in &history.events {
        if let EventKind::Leader { replica, term } | EventKind::Dispatch { replica, term, .. } =
            &event.kind
        {
            terms.entry(*term).or_insert((event.t, *replica));
        }
    }
    let starts: Vec<(u64, u64, u64)> = terms.iter().map(|(term, (t, r))| (*term, *t, *r)).collect();
    let leaders = starts
        .iter()
        .enumerate()
        .map(|(i, (term, from, replica))| {
            let to = starts.get(i + 1).map_or(history.end(), |next| next.1);
            Bar::new(
                *from,
                to,
                format!("controller {replica}, term {term}"),
                "#6090d0",
            )
        })
        .collect();
    lanes.push(("leader".into(), leaders));

    // Every GPU's uses.
    let view = Attempts::of(history);
    let mut gpus: BTreeMap<(String, u32), Vec<Bar>> = BTreeMap::new();
    for (key, attempt) in &view.observed {
        for rank in attempt.ranks.values() {
            let to = view.rank_end(rank);
            for gpu in &rank.gpus {
                gpus.entry((rank.node.clone(), *gpu))
                    .or_default()
                    .push(Bar::new(
                        rank.started,
                        to,
                        format!("{}.{}", key.0, key.1),
                        colour(key.0),
                    ));
            }
        }
    }
    for ((node, gpu), bars) in gpus {
        lanes.push((format!("{node} GPU {gpu}"), bars));
    }

    let height = LANE * lanes.len() as f64 + 40.0;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" font-size="11">"#
    );
    for (i, (name, bars)) in lanes.iter().enumerate() {
        let y = 20.0 + LANE * i as f64;
        let _ = writeln!(
            svg,
            r##"<text x="4" y="{:.1}">{}</text><line x1="{LABEL}" x2="{WIDTH}" y1="{:.1}" y2="{:.1}" stroke="#ddd"/>"##,
            y + 14.0,
            escape(name),
            y + LANE,
            y + LANE
        );
        for bar in bars {
            let (left, right) = (x(bar.from), x(bar.to).max(x(bar.from) + 1.0));
            let _ = writeln!(
                svg,
                r#"<g><title>{} ({}..{} ms)</title><rect x="{left:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}" opacity="0.8"/><text x="{:.1}" y="{:.1}">{}</text></g>"#,
                escape(&bar.label),
                bar.from,
                bar.to,
                y + 3.0,
                right - left,
                LANE - 6.0,
                bar.colour,
                left + 2.0,
                y + 15.0,
                escape(&bar.label)
            );
        }
    }
    for verdict in verdicts {
        for violation in &verdict.violations {
            let Some(t) = violation.t else { continue };
            let _ = writeln!(
                svg,
                r#"<g><title>{}: {}</title><line x1="{:.1}" x2="{:.1}" y1="10" y2="{height:.1}" stroke="red" stroke-width="2"/></g>"#,
                verdict.checker,
                escape(&violation.message),
                x(t),
                x(t)
            );
        }
    }
    svg.push_str("</svg>\n");

    let failed: usize = verdicts.iter().map(|v| v.violations.len()).sum();
    let mut page = String::new();
    let _ = write!(
        page,
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>corral chaos: {}</title></head><body>\n<h1>{} (seed {})</h1>\n<p>{} events over {:.1} s; {} violation(s).</p>\n<pre>{}</pre>\n{svg}</body></html>\n",
        escape(&history.header.scenario),
        escape(&history.header.scenario),
        history.header.seed,
        history.events.len(),
        end / 1000.0,
        failed,
        escape(&super::verdict_table(verdicts)),
    );
    page
}

struct Bar {
    from: u64,
    to: u64,
    label: String,
    colour: &'static str,
}

impl Bar {
    fn new(from: u64, to: u64, label: String, colour: &'static str) -> Self {
        Bar {
            from,
            to,
            label,
            colour,
        }
    }
}

/// A colour per job, so a job's attempts look alike across GPUs.
fn colour(job: u64) -> &'static str {
    const PALETTE: [&str; 8] = [
        "#8dd3c7", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5", "#bc80bd",
    ];
    PALETTE[(job % PALETTE.len() as u64) as usize]
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkers::check_all;
    use crate::testing::Builder;

    #[test]
    fn the_page_draws_faults_leaders_gpu_uses_and_violations() {
        let mut b = Builder::new();
        b.event(
            100,
            EventKind::FaultBegin {
                fault: 1,
                kind: "kill-leader".into(),
                target: "controller-1".into(),
                cut_off: Vec::new(),
            },
        )
        .event(200, EventKind::FaultHealed { fault: 1 })
        .event(
            50,
            EventKind::Leader {
                replica: 1,
                term: 1,
            },
        )
        .event(
            300,
            EventKind::Leader {
                replica: 2,
                term: 2,
            },
        )
        .start(60, (4, 1), "gpu01", (0, 1), &[3], None)
        .start(90, (5, 1), "gpu01", (0, 1), &[3], None)
        .exit(5_000, (4, 1), "gpu01", 0, 0)
        .exit(5_000, (5, 1), "gpu01", 0, 0);
        let history = b.history();
        let verdicts = check_all(&history);
        let page = timeline_html(&history, &verdicts);
        assert!(
            page.contains("kill-leader controller-1 (100..200 ms)"),
            "{page}"
        );
        assert!(page.contains("controller 2, term 2"), "{page}");
        assert!(page.contains(">gpu01 GPU 3</text>"), "{page}");
        assert!(page.contains("<title>4.1 (60..5000 ms)</title>"), "{page}");
        assert!(
            page.contains("stroke=\"red\""),
            "two jobs on GPU 3 is drawn as a violation"
        );
    }
}
