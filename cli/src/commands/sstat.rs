//! `sstat -j JOB[.STEP] [-a] [-o FIELDS] [-n] [-p|-P] [-i] [-e]`: what a
//! running job's steps use now, asked of the agents of its nodes (over QUIC
//! with the user's certificate, as `srun --jobid` reaches them), in sstat's
//! columns. Without a step and without `-a` it shows the job's first `srun`
//! step, as sstat does; `-a` adds the batch script (`N.batch`).

use std::collections::BTreeMap;
use std::process::ExitCode;

use corral_proto::step::NodeUsage;
use corral_state::job::JobState;

use super::allocation::agent_link;
use crate::connection::Cluster;
use crate::format::print_fields::{self, Layout, parsable};
use crate::format::sstat_fields::{self, StatField, StepStat, TaskSample};
use crate::slurm_options::{OptionReader, help_format, refuse};

/// What sstat was asked.
#[derive(Debug, Default)]
struct Options {
    /// Jobs, each with a step (`None`: the default step; `Some(None)`: batch).
    jobs: Vec<(u64, Option<Option<u32>>)>,
    all_steps: bool,
    fields: Vec<String>,
    header: bool,
    layout: Layout,
    help_format: bool,
    help: bool,
    json: bool,
    raw: bool,
}

const HELP: &str = "\
Usage: sstat [OPTIONS] -j JOB[.STEP][,...]
  -a, --allsteps      every step of each job, the batch script included
  -e, --helpformat    the fields -o takes
  -h, --help          this text
  -i, --pidformat     -o jobid,nodelist,pids
  -j, --jobs LIST     jobs and steps (N, N.S, N.batch)
  -n, --noheader      no header
  -o, --format, --fields LIST   fields (sstat's names; NAME%WIDTH)
  -p, --parsable      '|' after every field
  -P, --parsable2     '|' between fields
Figures are read from /proc on the job's nodes now, and GPU use from each
node's latest GPU sample (gres/gpumem, gres/gpuutil in TRESUsageIn*).
";

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        header: true,
        ..Options::default()
    };
    let mut reader = OptionReader::new(args);
    while let Some(name) = reader.next("aehinpPv") {
        match name.as_str() {
            "-a" | "--allsteps" => options.all_steps = true,
            "-e" | "--helpformat" => options.help_format = true,
            "-h" | "--help" | "--usage" => options.help = true,
            "-i" | "--pidformat" => options.fields.push(sstat_fields::PID_FIELDS.into()),
            "-j" | "--jobs" => add_jobs(&mut options, &reader.value()?)?,
            "-n" | "--noheader" => options.header = false,
            "--noconvert" => options.raw = true,
            "-v" | "--verbose" => {}
            "--json" => options.json = true,
            "-o" | "--format" | "--fields" => options.fields.push(reader.value()?),
            "-p" | "--parsable" => options.layout = parsable(true),
            "-P" | "--parsable2" => options.layout = parsable(false),
            _ if name.starts_with('-') => return Err(format!("unrecognized option '{name}'")),
            _ => add_jobs(&mut options, &name)?,
        }
    }
    Ok(options)
}

fn add_jobs(options: &mut Options, list: &str) -> Result<(), String> {
    for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (job, step) = match item.split_once('.') {
            Some((job, "batch")) => (job, Some(None)),
            Some((job, step)) => (
                job,
                Some(Some(
                    step.parse::<u32>()
                        .map_err(|_| format!("Invalid job step id: {item}"))?,
                )),
            ),
            None => (item, None),
        };
        let job = job
            .parse::<u64>()
            .map_err(|_| format!("Invalid job id: {item}"))?;
        options.jobs.push((job, step));
    }
    Ok(())
}

/// Runs sstat with its raw arguments.
pub async fn run(
    args: &[String],
    connect: impl FnOnce() -> anyhow::Result<Cluster>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let options = match parse(args) {
        Ok(options) => options,
        Err(message) => return Ok(refuse("sstat", &message)),
    };
    if options.help {
        print!("{HELP}");
        return Ok(ExitCode::SUCCESS);
    }
    if options.help_format {
        print!("{}", help_format(sstat_fields::field_names()));
        return Ok(ExitCode::SUCCESS);
    }
    if options.jobs.is_empty() {
        eprintln!("sstat: error: You didn't give me any jobs to stat.");
        return Ok(ExitCode::from(1));
    }
    let spec = if options.fields.is_empty() {
        sstat_fields::DEFAULT_FIELDS.to_string()
    } else {
        options.fields.join(",")
    };
    let mut columns: Vec<(&'static str, i32, StatField)> = Vec::new();
    for name in spec.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match sstat_fields::lookup(name) {
            Ok(column) => columns.push(column),
            Err(message) => {
                eprintln!("sstat: error: {message}");
                return Ok(ExitCode::from(1));
            }
        }
    }
    let cluster = connect()?;
    let mut steps: Vec<StepStat> = Vec::new();
    let mut raw: Vec<NodeUsage> = Vec::new();
    for (job, step) in &options.jobs {
        match job_steps(&cluster, *job).await {
            Ok(usage) => {
                let mut selected = select(*job, &usage, *step, options.all_steps);
                for stat in &mut selected {
                    stat.raw = options.raw;
                }
                steps.extend(selected);
                raw.extend(usage);
            }
            Err(message) => eprintln!("sstat: error: {message}"),
        }
    }
    if json || options.json {
        super::print_json(&raw)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = String::new();
    if options.header {
        let header: Vec<(&str, i32)> = columns.iter().map(|(n, w, _)| (*n, *w)).collect();
        out.push_str(&print_fields::header(&header, &options.layout));
    }
    for step in &steps {
        let cells: Vec<(Option<String>, i32)> = columns
            .iter()
            .map(|(_, width, field)| (step.cell(*field), *width))
            .collect();
        out.push_str(&print_fields::row(&cells, &options.layout));
    }
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

/// Every node's usage of `job`, from its agents; an error in sstat's words
/// when the job does not run.
async fn job_steps(cluster: &Cluster, job: u64) -> Result<Vec<NodeUsage>, String> {
    let (record, _) = super::jobs::fetch(cluster, job)
        .await
        .map_err(|_| format!("couldn't get steps for job {job}"))?;
    if record.state != JobState::Running {
        return Err(format!("No steps running for job {job}"));
    }
    let (_, usage) = agent_link::job_usage_on_nodes(cluster, &record, None, "sstat").await;
    Ok(usage)
}

/// The steps of `job` sstat shows: `step` when given; every one (the batch
/// script first) with `-a`; else the first `srun` step.
fn select(job: u64, usage: &[NodeUsage], step: Option<Option<u32>>, all: bool) -> Vec<StepStat> {
    let mut steps: BTreeMap<(u8, u32), StepStat> = BTreeMap::new();
    for node in usage {
        for step_usage in &node.steps {
            let key = match step_usage.step {
                None => (0, 0),
                Some(n) => (1, n),
            };
            let entry = steps.entry(key).or_insert_with(|| StepStat {
                raw: false,
                id: match step_usage.step {
                    None => format!("{job}.batch"),
                    Some(n) => format!("{job}.{n}"),
                },
                tasks: Vec::new(),
                gpus: Vec::new(),
            });
            entry
                .tasks
                .extend(step_usage.tasks.iter().map(|t| TaskSample {
                    node: node.node.clone(),
                    usage: t.clone(),
                }));
            entry.gpus.push((node.node.clone(), node.gpus.clone()));
        }
    }
    for stat in steps.values_mut() {
        stat.tasks.sort_by_key(|t| t.usage.rank);
    }
    match step {
        Some(None) => steps.remove(&(0, 0)).into_iter().collect(),
        Some(Some(n)) => steps.remove(&(1, n)).into_iter().collect(),
        None if all => steps.into_values().collect(),
        None => steps
            .into_iter()
            .find(|((kind, _), _)| *kind == 1)
            .map(|(_, s)| s)
            .into_iter()
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_proto::step::{StepUsage, TaskUsage};

    fn args(line: &[&str]) -> Vec<String> {
        line.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options_as_sstat_reads_them() {
        let o = parse(&args(&[
            "-j",
            "12,13.batch",
            "-a",
            "--format=JobID,MaxRSS",
            "-P",
        ]))
        .unwrap();
        assert_eq!(o.jobs, vec![(12, None), (13, Some(None))]);
        assert!(o.all_steps);
        assert_eq!(o.fields, ["JobID,MaxRSS"]);
        let o = parse(&args(&["-j12.3", "-n", "-p", "-oJobID"])).unwrap();
        assert_eq!(o.jobs, vec![(12, Some(Some(3)))]);
        assert!(!o.header);
        assert_eq!(o.fields, ["JobID"]);
        assert_eq!(parse(&args(&["7"])).unwrap().jobs, vec![(7, None)]);
        assert!(
            parse(&args(&["-j", "x"]))
                .unwrap_err()
                .contains("Invalid job id")
        );
        assert!(
            parse(&args(&["--bogus"]))
                .unwrap_err()
                .contains("unrecognized option")
        );
    }

    fn usage(node: &str, steps: &[Option<u32>]) -> NodeUsage {
        NodeUsage {
            node: node.into(),
            attempt: 1,
            steps: steps
                .iter()
                .map(|s| StepUsage {
                    step: *s,
                    tasks: vec![TaskUsage::default()],
                })
                .collect(),
            gpus: vec![],
        }
    }

    #[test]
    fn the_default_step_is_the_first_srun_step() {
        let nodes = [
            usage("n1", &[None, Some(0), Some(1)]),
            usage("n2", &[Some(1)]),
        ];
        let ids = |s: Vec<StepStat>| s.into_iter().map(|s| s.id).collect::<Vec<_>>();
        assert_eq!(ids(select(5, &nodes, None, false)), ["5.0"]);
        assert_eq!(
            ids(select(5, &nodes, None, true)),
            ["5.batch", "5.0", "5.1"]
        );
        assert_eq!(ids(select(5, &nodes, Some(None), false)), ["5.batch"]);
        let one = select(5, &nodes, Some(Some(1)), false);
        assert_eq!(one[0].tasks.len(), 2, "both nodes' tasks");
        assert!(select(5, &[usage("n1", &[None])], None, false).is_empty());
    }
}
