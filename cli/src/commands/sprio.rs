//! `sprio [-j LIST] [-u LIST] [-p LIST] [-l] [-n] [-w] [-h] [-o FORMAT]
//! [-S SORT]`: pending jobs' multifactor priority, factor by factor, from the
//! `Priorities` RPC (the scheduler's own computation on the answering
//! replica's state), followed through its pages.

use std::process::ExitCode;

use corral_proto::api::{JobPriority, PrioritiesRequest, PriorityWeights};

use crate::connection::{Cluster, Retry};
use crate::format::sprio;
use crate::slurm_options::{OptionReader, list, refuse};

#[derive(Debug, Default)]
struct Options {
    jobs: Vec<u64>,
    users: Vec<String>,
    partitions: Vec<String>,
    long: bool,
    normalised: bool,
    weights: bool,
    header: bool,
    format: Option<String>,
    sort: Option<String>,
    help: bool,
}

const HELP: &str = "\
Usage: sprio [OPTIONS]
  -h, --noheader        no header
  -j, --jobs=LIST       only these jobs
  -l, --long            every factor, weighted
  -n, --norm            the normalised factors (0 to 1)
  -o, --format=FORMAT   sprio's letters: %i %r %u %Y %S %A %B %F %J %P %Q %N %T
                        (lowercase: normalised), %[.]N widths
  -p, --partition=LIST  only jobs in these partitions
  -S, --sort=LIST       sort letters (i u r y a f j p q N), '-' descending
  -u, --user=LIST       only these users' jobs (adds a USER column)
  -w, --weights         the configured weights
      --help            this text
The factors are the scheduler's own: age, fair share over the account tree,
job size (GPUs), partition tier and QOS; corral has no site, association or
TRES factors (0).
";

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        header: true,
        ..Options::default()
    };
    let mut reader = OptionReader::new(args);
    while let Some(name) = reader.next("hlnwv") {
        match name.as_str() {
            "-h" | "--noheader" => o.header = false,
            "-j" | "--jobs" => {
                for id in list(&reader.value()?) {
                    o.jobs
                        .push(id.parse().map_err(|_| format!("Invalid job id: {id}"))?);
                }
            }
            "-l" | "--long" => o.long = true,
            "-n" | "--norm" => o.normalised = true,
            "-o" | "--format" => o.format = Some(reader.value()?),
            "-p" | "--partition" => o.partitions.extend(list(&reader.value()?)),
            "-S" | "--sort" => o.sort = Some(reader.value()?),
            "-u" | "--user" | "--users" => o.users.extend(list(&reader.value()?)),
            "-w" | "--weights" => o.weights = true,
            "--help" | "--usage" => o.help = true,
            "-M" | "--cluster" | "--clusters" => {
                reader.value()?;
            }
            "--local" | "--sibling" | "--sib" | "--federation" | "-v" | "--verbose" => {}
            _ => return Err(format!("unrecognized option '{name}'")),
        }
    }
    Ok(o)
}

/// Runs sprio with its raw arguments.
pub async fn run(
    args: &[String],
    connect: impl FnOnce() -> anyhow::Result<Cluster>,
) -> anyhow::Result<ExitCode> {
    let options = match parse(args) {
        Ok(options) => options,
        Err(message) => return Ok(refuse("sprio", &message)),
    };
    if options.help {
        print!("{HELP}");
        return Ok(ExitCode::SUCCESS);
    }
    let cluster = connect()?;
    let (weights, mut jobs) = fetch(&cluster, &options).await?;
    let format = options.format.clone().unwrap_or_else(|| {
        sprio::default_format(
            &weights,
            options.long,
            options.normalised,
            !options.users.is_empty(),
        )
    });
    let format = sprio::parse(&format);
    for letter in &format.unknown {
        eprintln!("sprio: error: Invalid job format specification: {letter}");
    }
    let cluster_name = String::new();
    let mut out = String::new();
    if options.header {
        out.push_str(&sprio::header(&format));
    }
    if options.weights {
        out.push_str(&sprio::weights_row(&format, &weights, &cluster_name));
        print!("{out}");
        return Ok(ExitCode::SUCCESS);
    }
    if !options.jobs.is_empty() && jobs.is_empty() {
        print!("{out}");
        println!("Unable to find jobs matching user/id(s) specified");
        return Ok(ExitCode::SUCCESS);
    }
    sort(&mut jobs, options.sort.as_deref().unwrap_or("i"));
    for job in &jobs {
        out.push_str(&sprio::job_row(&format, job, &weights, &cluster_name));
    }
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

/// Every page of the matching pending jobs.
async fn fetch(
    cluster: &Cluster,
    options: &Options,
) -> anyhow::Result<(PriorityWeights, Vec<JobPriority>)> {
    let mut jobs = Vec::new();
    let mut after = 0;
    loop {
        let request = PrioritiesRequest {
            job_ids: options.jobs.clone(),
            users: options.users.clone(),
            partitions: options.partitions.clone(),
            after_job_id: after,
        };
        let reply = cluster
            .call(Retry::Idempotent, |mut c| {
                let request = request.clone();
                async move { c.priorities(request).await }
            })
            .await?;
        jobs.extend(reply.jobs);
        // The last page, or a controller that would page backwards.
        if reply.next_after_job_id == 0 || reply.next_after_job_id <= after {
            return Ok((reply.weights.unwrap_or_default(), jobs));
        }
        after = reply.next_after_job_id;
    }
}

/// sprio's `-S`: letters applied from the last (least significant) to the
/// first, `-` before a letter for descending; unknown letters are ignored.
fn sort(jobs: &mut [JobPriority], spec: &str) {
    let chars: Vec<char> = spec.chars().filter(|c| *c != ',').collect();
    let mut keys: Vec<(char, bool)> = Vec::new();
    let mut descending = false;
    for c in chars {
        if c == '-' {
            descending = true;
        } else if c == '+' {
            descending = false;
        } else {
            keys.push((c, descending));
            descending = false;
        }
    }
    for (key, descending) in keys.into_iter().rev() {
        let value = |j: &JobPriority| -> f64 {
            match key.to_ascii_lowercase() {
                'y' => j.priority as f64,
                'a' => j.age,
                'f' => j.fairshare,
                'j' => j.job_size,
                'p' => j.partition_factor,
                'q' => j.qos,
                'n' if key == 'N' => f64::from(j.nice),
                _ => j.job_id as f64,
            }
        };
        jobs.sort_by(|a, b| {
            let order = match key {
                'u' => a.user.cmp(&b.user),
                'r' => a.partition.cmp(&b.partition),
                _ => value(a).total_cmp(&value(b)),
            };
            if descending { order.reverse() } else { order }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &[&str]) -> Vec<String> {
        line.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options_as_sprio_reads_them() {
        let o = parse(&args(&[
            "-j",
            "3,4",
            "-u",
            "alice",
            "-l",
            "--partition=gpu",
            "-Sy",
        ]))
        .unwrap();
        assert_eq!(o.jobs, [3, 4]);
        assert_eq!(o.users, ["alice"]);
        assert_eq!(o.partitions, ["gpu"]);
        assert!(o.long);
        assert_eq!(o.sort.as_deref(), Some("y"));
        assert!(!parse(&args(&["-h"])).unwrap().header);
        assert!(
            parse(&args(&["--bogus"]))
                .unwrap_err()
                .contains("unrecognized")
        );
    }

    #[test]
    fn sorting_by_priority_descending_then_id() {
        let job = |id: u64, priority: i64| JobPriority {
            job_id: id,
            priority,
            ..JobPriority::default()
        };
        let mut jobs = vec![job(1, 10), job(2, 30), job(3, 30)];
        sort(&mut jobs, "-y,i");
        let ids: Vec<u64> = jobs.iter().map(|j| j.job_id).collect();
        assert_eq!(ids, [2, 3, 1]);
    }
}
