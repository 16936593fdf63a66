//! `corral top`: a live view of the cluster for operators. Every second it
//! reads the leader's view of the replicas, the unfinished jobs and the
//! nodes (the same calls `corral cluster`, `corral queue` and `corral
//! nodes` make), and redraws; the events it lists are what changed between
//! readings (`model.rs`). Keys are read on a thread of their own, which
//! blocks on the terminal; the loop waits on the next tick or a key, never
//! spins. `q` or Ctrl-C ends it and gives the terminal back as it was.

mod model;
mod view;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use corral_proto::api::{Empty, ListJobsRequest, ListNodesRequest};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use tokio::sync::mpsc;

use crate::connection::{Cluster, Retry};
use model::{Reading, Top};

/// How often the view reads the cluster.
const REFRESH: Duration = Duration::from_secs(1);

/// Runs the view until `q`.
pub async fn run(cluster: &Cluster) -> anyhow::Result<ExitCode> {
    let mut terminal = ratatui::try_init().context("corral top needs a terminal")?;
    let result = show(cluster, &mut terminal).await;
    ratatui::restore();
    result.map(|()| ExitCode::SUCCESS)
}

async fn show(cluster: &Cluster, terminal: &mut ratatui::DefaultTerminal) -> anyhow::Result<()> {
    let (keys_tx, mut keys) = mpsc::channel(16);
    // A key read blocks the thread, not the runtime; the thread ends with
    // the process.
    std::thread::spawn(move || {
        while let Ok(event) = event::read() {
            if keys_tx.blocking_send(event).is_err() {
                return;
            }
        }
    });
    let mut top = Top::default();
    let mut ticks = tokio::time::interval(REFRESH);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        terminal.draw(|frame| view::draw(frame, &top))?;
        tokio::select! {
            _ = ticks.tick() => match read(cluster).await {
                Ok(reading) => top.observe(reading),
                Err(e) => top.failed(format!("{e:#}"), crate::when::now_ms()),
            },
            key = keys.recv() => match key {
                Some(Event::Key(key)) if key.kind == KeyEventKind::Press => {
                    let ctrl_c = key.code == KeyCode::Char('c')
                        && key.modifiers.contains(KeyModifiers::CONTROL);
                    if key.code == KeyCode::Char('q') || key.code == KeyCode::Esc || ctrl_c {
                        return Ok(());
                    }
                }
                Some(_) => {}
                None => return Ok(()),
            },
        }
    }
}

/// One reading: the leader's status, the unfinished jobs, the nodes.
async fn read(cluster: &Cluster) -> anyhow::Result<Reading> {
    let first = cluster
        .call(Retry::Idempotent, |mut c| async move {
            c.cluster_status(Empty {}).await
        })
        .await?;
    let status = super::cluster::leader_view(cluster, first).await;
    let (jobs, as_of_ms) = super::queue::list_jobs(cluster, ListJobsRequest::default()).await?;
    let (nodes, _) = super::nodes::fetch(cluster, ListNodesRequest::default()).await?;
    Ok(Reading {
        status,
        jobs,
        nodes,
        as_of_ms,
    })
}
