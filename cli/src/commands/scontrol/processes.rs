//! `scontrol write batch_script` and `scontrol listpids`: a job's script as
//! the controllers keep it, and its processes as its nodes' agents see them
//! (the same answer `sstat` reads), in scontrol's words.

use std::process::ExitCode;

use corral_proto::step::NodeUsage;

use super::super::allocation::agent_link;
use super::super::jobs;
use crate::connection::Cluster;

/// `write batch_script ID [FILE]`: to `slurm-ID.sh` by default, `-` for
/// standard output.
pub async fn write_batch_script(
    cluster: &Cluster,
    job: u64,
    file: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let script = match jobs::fetch(cluster, job).await {
        Ok((_, script)) if !script.is_empty() => script,
        Ok(_) => {
            eprintln!("job script retrieval failed: job {job} has no batch script kept");
            return Ok(ExitCode::from(1));
        }
        Err(e) => {
            eprintln!("job script retrieval failed: {e:#}");
            return Ok(ExitCode::from(1));
        }
    };
    let path = file.map_or_else(|| format!("slurm-{job}.sh"), str::to_string);
    if path == "-" {
        print!("{script}");
        return Ok(ExitCode::SUCCESS);
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    match std::io::Write::write_all(&mut options.open(&path)?, script.as_bytes()) {
        Ok(()) => {
            println!("batch script for job {job} written to {path}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("could not write {path}: {e}");
            Ok(ExitCode::from(1))
        }
    }
}

/// `listpids JOB[.STEP] [NODE]`: the processes of the job's steps on `node`,
/// or on every node of the job (Slurm's looks at its own node only; a login
/// node has none).
pub async fn list_pids(
    cluster: &Cluster,
    job: Option<u64>,
    step: Option<Option<u32>>,
    node: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let Some(job) = job else {
        eprintln!(
            "scontrol: error: corral's listpids needs a job id (scontrol listpids JOBID[.STEP] [NODE])"
        );
        return Ok(ExitCode::from(2));
    };
    let (record, _) = jobs::fetch(cluster, job).await?;
    let asked = node.map(|node| vec![node.to_string()]);
    let (nodes, usage) = agent_link::job_usage_on_nodes(cluster, &record, asked, "scontrol").await;
    println!("{}", pid_header());
    let mut found = 0;
    for node_usage in &usage {
        let lines = pid_lines(job, node_usage, step);
        found += lines.len();
        for line in lines {
            println!("{line}");
        }
    }
    if found == 0 {
        match step {
            Some(step) => eprintln!(
                "StepId={job}.{} does not exist on node {}.",
                step.map_or("batch".to_string(), |s| s.to_string()),
                nodes.join(",")
            ),
            None => eprintln!(
                "There are no steps for job {job} on node {}.",
                nodes.join(",")
            ),
        }
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn pid_header() -> String {
    format!(
        "{:<8} {:<8} {:<8} {:<7} {:<8}",
        "PID", "JOBID", "STEPID", "LOCALID", "GLOBALID"
    )
}

/// One line per process, as scontrol prints them: a task's first process
/// with its local and global rank, its other processes with `-`.
fn pid_lines(job: u64, usage: &NodeUsage, step: Option<Option<u32>>) -> Vec<String> {
    let mut lines = Vec::new();
    for step_usage in &usage.steps {
        if step.is_some_and(|s| s != step_usage.step) {
            continue;
        }
        let id = step_usage
            .step
            .map_or("batch".to_string(), |s| s.to_string());
        for task in &step_usage.tasks {
            lines.push(format!(
                "{:<8} {:<8} {:<8} {:<7} {:<8}",
                task.leader, job, id, task.local, task.rank
            ));
            for pid in task.pids.iter().filter(|p| **p != task.leader) {
                lines.push(format!("{pid:<8} {job:<8} {id:<8} {:<7} {:<8}", "-", "-"));
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_proto::step::{StepUsage, TaskUsage};

    #[test]
    fn lines_as_scontrol_prints_them() {
        let usage = NodeUsage {
            node: "n1".into(),
            attempt: 1,
            steps: vec![
                StepUsage {
                    step: None,
                    tasks: vec![TaskUsage {
                        rank: 0,
                        leader: 100,
                        pids: vec![100, 101],
                        ..TaskUsage::default()
                    }],
                },
                StepUsage {
                    step: Some(0),
                    tasks: vec![TaskUsage {
                        rank: 3,
                        leader: 200,
                        pids: vec![200],
                        ..TaskUsage::default()
                    }],
                },
            ],
            gpus: vec![],
        };
        assert_eq!(pid_header(), "PID      JOBID    STEPID   LOCALID GLOBALID");
        assert_eq!(
            pid_lines(7, &usage, None),
            [
                "100      7        batch    0       0       ",
                "101      7        batch    -       -       ",
                "200      7        0        0       3       ",
            ]
        );
        assert_eq!(pid_lines(7, &usage, Some(Some(0))).len(), 1);
        assert_eq!(pid_lines(7, &usage, Some(Some(5))).len(), 0);
    }
}
