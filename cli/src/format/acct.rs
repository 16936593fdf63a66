//! `corral acct` (and `sacct`): job records as sacct prints them, in Slurm's
//! `print_fields` layout (see [`super::print_fields`]).
//! Under each job come its batch step (`N.batch`) and its newest attempt's
//! `srun` steps (`N.0`, `N.1`, ...) unless `-X`, and with `--attempts`
//! (sacct's `--duplicates`) one row per attempt (`N#A`).

use corral_state::job::{Job, JobState};

use super::acct_fields::{AcctContext, AcctField, AcctRow, lookup, value};
use super::print_fields::{Layout, header, row};

/// sacct's default columns.
pub const SLURM_DEFAULT_FIELDS: &str = "jobid,jobname,partition,account,alloccpus,state,exitcode";
/// `corral acct`'s default columns: sacct's, with GPUs for CPUs, and the run
/// time, restarts and failed node.
pub const CORRAL_DEFAULT_FIELDS: &str =
    "jobid,jobname,partition,account,allocgpus,state,exitcode,elapsed,restarts,failednode";
/// sacct `--brief`'s columns.
pub const BRIEF_FIELDS: &str = "jobid,state,exitcode";

/// One column: the field's name as Slurm spells it, its width and the field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcctColumn {
    /// The header.
    pub name: &'static str,
    /// Width; negative for left-aligned.
    pub width: i32,
    /// The field.
    pub field: AcctField,
}

/// Parses `--format` (`JobID,JobName%30,elap`): names or prefixes, each with
/// an optional `%WIDTH`. `Err` names the first field sacct would refuse.
pub fn parse_fields(format: &str) -> Result<Vec<AcctColumn>, String> {
    format
        .split(',')
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .map(|spec| {
            let (name, width) = match spec.split_once('%') {
                Some((name, width)) => (name, Some(width)),
                None => (spec, None),
            };
            let (full, default_width, field) = lookup(name)?;
            let width = match width {
                Some(w) => w
                    .parse::<i32>()
                    .map_err(|_| format!("Invalid field width: \"{spec}\""))?,
                None => default_width,
            };
            Ok(AcctColumn {
                name: full,
                width,
                field,
            })
        })
        .collect()
}

/// How `acct_table` prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcctOptions {
    /// The columns.
    pub columns: Vec<AcctColumn>,
    /// Job rows only, no batch-step rows (`-X`).
    pub allocations: bool,
    /// One row per attempt under each job.
    pub attempts: bool,
    /// No header (`-n`).
    pub noheader: bool,
    /// Fixed columns, or `-p`/`-P`/`--delimiter`.
    pub layout: Layout,
}

impl Default for AcctOptions {
    fn default() -> Self {
        AcctOptions {
            columns: parse_fields(CORRAL_DEFAULT_FIELDS).unwrap_or_default(),
            allocations: true,
            attempts: false,
            noheader: false,
            layout: Layout::Columns,
        }
    }
}

/// The jobs as sacct prints them, in the order given.
pub fn acct_table(jobs: &[Job], ctx: &AcctContext, opts: &AcctOptions) -> String {
    let mut out = String::new();
    if !opts.noheader {
        let columns: Vec<(&str, i32)> = opts.columns.iter().map(|c| (c.name, c.width)).collect();
        out.push_str(&header(&columns, &opts.layout));
    }
    for job in jobs {
        let mut rows = vec![AcctRow::Job(job)];
        let started = job
            .current_attempt()
            .filter(|_| !matches!(job.state, JobState::Pending | JobState::RequeueHold));
        if opts.attempts {
            rows.extend(job.attempts.iter().map(|a| AcctRow::Attempt(job, a)));
        }
        if let (false, Some(attempt)) = (opts.allocations, started) {
            rows.push(AcctRow::Batch(job, attempt));
            rows.extend(
                job.steps
                    .iter()
                    .filter(|s| s.attempt == attempt.number)
                    .map(|s| AcctRow::Step(job, attempt, s)),
            );
        }
        for r in rows {
            let cells: Vec<(Option<String>, i32)> = opts
                .columns
                .iter()
                .map(|c| (value(c.field, r, ctx), c.width))
                .collect();
            out.push_str(&row(&cells, &opts.layout));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::test_jobs::{jobs, now, scenario};

    fn ctx() -> AcctContext {
        AcctContext {
            now: now(),
            ..AcctContext::default()
        }
    }

    #[test]
    fn corral_columns_with_restarts_failed_node_and_attempts() {
        let opts = AcctOptions {
            attempts: true,
            ..AcctOptions::default()
        };
        let out = acct_table(&jobs(&scenario())[..3], &ctx(), &opts);
        let expected = "\
JobID           JobName  Partition    Account AllocGPUS      State ExitCode    Elapsed Restarts FailedNode 
------------ ---------- ---------- ---------- --------- ---------- -------- ---------- -------- ---------- 
1                 train        gpu         ml        16    RUNNING      0:0   01:00:00        1         n2 
1#1               train        gpu         ml        16   REQUEUED      0:0   00:14:00        0         n2 
1#2               train        gpu         ml        16    RUNNING      0:0   01:00:00        1            
2                  eval        gpu         ml         4  COMPLETED      0:0   00:20:00        0            
2#1                eval        gpu         ml         4  COMPLETED      0:0   00:20:00        0            
3            long-name+        gpu         ml         0    PENDING      0:0   00:00:00        0            
";
        assert_eq!(out, expected);
    }

    /// Slurm records an attempt that was preempted and requeued as PREEMPTED.
    #[test]
    fn an_attempt_preempted_and_requeued_shows_preempted() {
        let opts = AcctOptions {
            attempts: true,
            columns: parse_fields("jobid,state").unwrap(),
            ..AcctOptions::default()
        };
        let mut job = jobs(&scenario())[0].clone();
        if let Some(end) = job.attempts[0].end.as_mut() {
            end.cause = corral_state::job::EndCause::Preempted {
                for_job: corral_state::JobId(9),
            };
        }
        let out = acct_table(&[job], &ctx(), &opts);
        assert!(out.contains("\n1#1           PREEMPTED \n"), "{out}");
        assert!(out.contains("\n1#2             RUNNING \n"), "{out}");
    }

    #[test]
    fn a_guide_format_with_steps_widths_and_gres() {
        let opts = AcctOptions {
            columns: parse_fields(
                "JobID,JobName%20,Partition,AllocGRES,AllocTRES%45,Elapsed,State",
            )
            .unwrap(),
            allocations: false,
            ..AcctOptions::default()
        };
        let out = acct_table(&jobs(&scenario())[1..3], &ctx(), &opts);
        let expected = "\
JobID                     JobName  Partition    AllocGRES                                     AllocTRES    Elapsed      State 
------------ -------------------- ---------- ------------ --------------------------------------------- ---------- ---------- 
2                            eval        gpu        gpu:4             billing=1,cpu=1,gres/gpu=4,node=1   00:20:00  COMPLETED 
2.batch                     batch                   gpu:4             billing=1,cpu=1,gres/gpu=4,node=1   00:20:00  COMPLETED 
3                   long-name-job        gpu                                                              00:00:00    PENDING 
";
        assert_eq!(out, expected);
    }

    #[test]
    fn srun_steps_follow_the_batch_step_as_sacct_prints_them() {
        let mut job = jobs(&scenario())[1].clone();
        let attempt = job.current_attempt().unwrap().number;
        let node = job.current_attempt().unwrap().allocation[0].node.clone();
        let started = job.current_attempt().unwrap().started_at;
        job.steps = vec![
            corral_state::job::StepRecord {
                attempt,
                step: 0,
                node: node.clone(),
                name: "python".into(),
                nodes: node.clone(),
                node_count: 1,
                ntasks: 4,
                cpus: 4,
                started_at: started,
                ended_at: Some(started.plus_secs(90)),
                exit: Some(corral_state::job::ExitStatus {
                    code: 3,
                    signal: None,
                }),
            },
            corral_state::job::StepRecord {
                attempt: attempt + 1,
                step: 0,
                node: node.clone(),
                name: "of-another-attempt".into(),
                nodes: node.clone(),
                node_count: 1,
                ntasks: 1,
                cpus: 1,
                started_at: started,
                ended_at: None,
                exit: None,
            },
        ];
        let opts = AcctOptions {
            columns: parse_fields("JobID,JobName,NTasks,AllocCPUS,Elapsed,State,ExitCode").unwrap(),
            allocations: false,
            layout: Layout::Parsable {
                delimiter: "|".into(),
                trailing: false,
            },
            ..AcctOptions::default()
        };
        let out = acct_table(&[job], &ctx(), &opts);
        assert_eq!(
            out,
            "JobID|JobName|NTasks|AllocCPUS|Elapsed|State|ExitCode\n\
             2|eval||1|00:20:00|COMPLETED|0:0\n\
             2.batch|batch|1|1|00:20:00|COMPLETED|0:0\n\
             2.0|python|4|4|00:01:30|FAILED|3:0\n"
        );
    }

    #[test]
    fn parsable_forms_and_refused_fields() {
        let mut opts = AcctOptions {
            columns: parse_fields("jobid,state,elapsedraw").unwrap(),
            layout: Layout::Parsable {
                delimiter: "|".into(),
                trailing: false,
            },
            ..AcctOptions::default()
        };
        let out = acct_table(&jobs(&scenario())[1..2], &ctx(), &opts);
        assert_eq!(out, "JobID|State|ElapsedRaw\n2|COMPLETED|1200\n");
        opts.layout = Layout::Parsable {
            delimiter: ",".into(),
            trailing: true,
        };
        opts.noheader = true;
        let out = acct_table(&jobs(&scenario())[1..2], &ctx(), &opts);
        assert_eq!(out, "2,COMPLETED,1200,\n");
        assert_eq!(
            parse_fields("JobID,Bogus").unwrap_err(),
            "Invalid field requested: \"Bogus\""
        );
    }
}
