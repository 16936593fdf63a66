//! How `corral top` draws its model (ratatui): a header (cluster, leader,
//! term, when read), the replicas with their lag and clock offset, the
//! queue by state and partition, the GPU map (a row per node, a cell per
//! GPU: `.` free, the job's id, `D` drained, `F` failed, `x` node down) and
//! the recent events, newest first.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table};

use corral_state::node::NodeStateView;
use corral_state::time::Timestamp;

use super::model::{EventKind, GpuCell, Top, gpu_cells, queue};
use crate::format::datetime::format_timestamp;

/// Draws `top` on the whole frame.
pub fn draw(frame: &mut Frame, top: &Top) {
    let area = frame.area();
    let nodes = top.latest.as_ref().map_or(0, |r| r.nodes.len());
    let members = top.latest.as_ref().map_or(0, |r| r.status.members.len());
    let [header, upper, map, events, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(u16::try_from(members.max(3) + 3).unwrap_or(u16::MAX)),
        Constraint::Length(u16::try_from(nodes.clamp(1, 64) + 2).unwrap_or(u16::MAX)),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(header_line(top)), header);
    let [replicas, queued] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(upper);
    draw_replicas(frame, top, replicas);
    draw_queue(frame, top, queued);
    draw_gpu_map(frame, top, map);
    draw_events(frame, top, events);
    frame.render_widget(
        Paragraph::new("q quit · refreshes every second · . free  D drained  F failed  x down"),
        footer,
    );
}

fn header_line(top: &Top) -> Line<'static> {
    let Some(reading) = &top.latest else {
        return Line::from(match &top.error {
            Some(error) => format!("corral top: {error}"),
            None => "corral top: reading the cluster...".to_string(),
        });
    };
    let status = &reading.status;
    let leader = match status.leader_id {
        Some(id) => format!("Leader {id} ({})", status.leader_api_addr),
        None => "No leader".to_string(),
    };
    let mut spans = vec![
        Span::styled(
            format!("corral top · {} · ", status.cluster_name),
            Style::default().add_modifier(Modifier::BOLD),
        ),
        Span::raw(format!(
            "{leader} · term {} · {}",
            status.term,
            format_timestamp(Timestamp(reading.as_of_ms))
        )),
    ];
    if let Some(error) = &top.error {
        spans.push(Span::styled(
            format!(" · stale: {error}"),
            Style::default().fg(Color::Red),
        ));
    }
    Line::from(spans)
}

fn draw_replicas(frame: &mut Frame, top: &Top, area: Rect) {
    let rows: Vec<Row> = top
        .latest
        .iter()
        .flat_map(|r| {
            r.status.members.iter().map(|m| {
                let role = if Some(m.id) == r.status.leader_id {
                    "leader"
                } else if m.voter {
                    "follower"
                } else {
                    "learner"
                };
                Row::new(vec![
                    m.id.to_string(),
                    role.to_string(),
                    m.api_addr.clone(),
                    m.lag.map_or("?".to_string(), |l| l.to_string()),
                    m.clock_offset_ms
                        .map_or("?".to_string(), |o| format!("{o:+} ms")),
                ])
            })
        })
        .collect();
    let table = Table::new(
        rows,
        [
            Constraint::Length(3),
            Constraint::Length(9),
            Constraint::Min(12),
            Constraint::Length(6),
            Constraint::Length(10),
        ],
    )
    .header(Row::new(vec!["ID", "ROLE", "ADDRESS", "LAG", "CLOCK"]))
    .block(Block::default().borders(Borders::ALL).title("Replicas"));
    frame.render_widget(table, area);
}

fn draw_queue(frame: &mut Frame, top: &Top, area: Rect) {
    let rows: Vec<Row> = top
        .latest
        .iter()
        .flat_map(|r| queue(&r.jobs))
        .map(|((state, partition), n)| Row::new(vec![state, partition, n.to_string()]))
        .collect();
    let table = Table::new(
        rows,
        [
            Constraint::Length(12),
            Constraint::Min(10),
            Constraint::Length(7),
        ],
    )
    .header(Row::new(vec!["STATE", "PARTITION", "JOBS"]))
    .block(Block::default().borders(Borders::ALL).title("Queue"));
    frame.render_widget(table, area);
}

fn draw_gpu_map(frame: &mut Frame, top: &Top, area: Rect) {
    let lines: Vec<Line> = top
        .latest
        .iter()
        .flat_map(|r| r.nodes.iter())
        .map(|node| {
            let mut spans = vec![Span::raw(format!("{:<10} ", node.name))];
            for cell in gpu_cells(node) {
                let (text, style) = match cell {
                    GpuCell::Free => (".".to_string(), Style::default().fg(Color::Green)),
                    GpuCell::Job(job) => (job.0.to_string(), Style::default().fg(Color::Cyan)),
                    GpuCell::Drained => ("D".to_string(), Style::default().fg(Color::Yellow)),
                    GpuCell::Failed => ("F".to_string(), Style::default().fg(Color::Red)),
                    GpuCell::Down => ("x".to_string(), Style::default().fg(Color::Red)),
                };
                spans.push(Span::styled(format!("{text:>5}"), style));
            }
            spans.push(Span::raw(format!("  {}", node_state(node.state_view()))));
            Line::from(spans)
        })
        .collect();
    frame.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title("GPUs")),
        area,
    );
}

fn draw_events(frame: &mut Frame, top: &Top, area: Rect) {
    let lines: Vec<Line> = top
        .events
        .iter()
        .rev()
        .map(|event| {
            let color = match event.kind {
                EventKind::Election => Color::Magenta,
                EventKind::Requeue => Color::Yellow,
                EventKind::GpuFault | EventKind::NodeDown | EventKind::Unreachable => Color::Red,
                EventKind::Drain => Color::Yellow,
            };
            Line::from(vec![
                Span::raw(format!("{} ", format_timestamp(Timestamp(event.at_ms)))),
                Span::styled(
                    format!("{:<11} ", event.kind.label()),
                    Style::default().fg(color),
                ),
                Span::raw(event.text.clone()),
            ])
        })
        .collect();
    frame.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title("Events")),
        area,
    );
}

fn node_state(state: NodeStateView) -> &'static str {
    match state {
        NodeStateView::Idle => "idle",
        NodeStateView::Mixed => "mixed",
        NodeStateView::Allocated => "allocated",
        NodeStateView::Draining => "draining",
        NodeStateView::Drained => "drained",
        NodeStateView::Down => "down",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::top::model::Reading;
    use corral_proto::api::{ClusterStatusReply, Member};
    use corral_state::testkit::{at, cluster, spec, start, submit};
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    #[test]
    fn the_view_shows_the_leader_the_queue_and_the_job_on_its_gpus() {
        let mut state = cluster(2, 8);
        let id = submit(&mut state, spec("alice", 1, 2), at(1));
        start(&mut state, id, at(2));
        let mut top = Top::default();
        top.observe(Reading {
            status: ClusterStatusReply {
                cluster_name: "prod".to_string(),
                leader_id: Some(2),
                leader_api_addr: "10.0.0.2:6817".to_string(),
                term: 7,
                members: (1..=3)
                    .map(|id| Member {
                        id,
                        api_addr: format!("10.0.0.{id}:6817"),
                        voter: true,
                        lag: Some(0),
                        ..Member::default()
                    })
                    .collect(),
                ..ClusterStatusReply::default()
            },
            jobs: state.jobs().values().cloned().collect(),
            nodes: state.nodes().values().cloned().collect(),
            as_of_ms: 1_796_000_000_000,
        });
        let mut terminal = Terminal::new(TestBackend::new(120, 30)).expect("a test terminal");
        terminal.draw(|f| draw(f, &top)).expect("drawn");
        let screen: String = terminal
            .backend()
            .buffer()
            .content()
            .chunks(120)
            .map(|row| row.iter().map(|c| c.symbol()).collect::<String>() + "\n")
            .collect();
        assert!(
            screen.contains("Leader 2 (10.0.0.2:6817) · term 7"),
            "{screen}"
        );
        assert!(screen.contains("leader"), "{screen}");
        assert!(screen.contains("RUNNING"), "{screen}");
        let row = screen
            .lines()
            .find(|l| l.contains("n1 "))
            .unwrap_or_else(|| panic!("no row for n1:\n{screen}"));
        assert_eq!(row.matches(&format!(" {}", id.0)).count(), 2, "{row}");
        assert!(row.contains("mixed"), "{row}");
    }
}
