//! End to end: `squeue` and `sacct` invoked through the links `corral local up`
//! puts in its `bin/`, with command lines copied from guides, against a local
//! cluster of three controllers and two agents: Slurm's columns, widths and
//! headers, folded array tasks, refusals in Slurm's words with its exit
//! status, job and batch-step rows, parsable output; `sbatch --test-only`;
//! `scontrol show node|partition`, `update NodeName=` and `ping`; `sacctmgr`
//! setting up a GPU budget that then holds a job back.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use support::{LocalCluster, me, script, slurm_link as slurm, wait_job};

fn ok(cluster: &LocalCluster, name: &str, args: &[&str]) -> String {
    let out = slurm(cluster, name, &me(), args);
    assert!(
        out.status.success(),
        "{name} {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn submit(cluster: &LocalCluster, args: &[&str]) -> String {
    ok(cluster, "sbatch", &[&["--parsable"], args].concat())
        .trim()
        .to_string()
}

#[test]
fn squeue_and_sacct_answer_the_command_lines_guides_teach() {
    let cluster = LocalCluster::start_with_agents(3, 2);
    let user = me().trim_start_matches("user-").to_string();
    let dir = cluster.dir.path();
    let train = script(
        dir,
        "train.sh",
        "#!/bin/bash\n#SBATCH -J train-llm --gres=gpu:2 -N 1\nsleep 600\n",
    );
    let running = submit(&cluster, &[train.to_str().unwrap()]);
    let quick = submit(&cluster, &["-J", "quick", "--gres=gpu:1", "--wrap", "true"]);
    let array = submit(
        &cluster,
        &["--hold", "-J", "sweep", "--array=1-3", "--wrap", "true"],
    );
    wait_job(&cluster, &running, Duration::from_secs(60), "start", |j| {
        j["state"] == "Running"
    });
    wait_job(&cluster, &quick, Duration::from_secs(60), "end", |j| {
        j["state"] == "Completed"
    });

    // The format guides copy, with the GRES column.
    let out = ok(
        &cluster,
        "squeue",
        &["--format=%.18i %.9P %.30j %.8u %.8T %.10M %.6D %R %b"],
    );
    let mut lines = out.lines();
    assert_eq!(
        lines.next().unwrap(),
        "             JOBID PARTITION                           NAME     USER    STATE       TIME  NODES NODELIST(REASON) TRES_PER_NODE"
    );
    let rows: Vec<&str> = lines.collect();
    let train_row = rows
        .iter()
        .find(|r| r.contains("train-llm"))
        .unwrap_or_else(|| panic!("no training job in {out}"));
    assert!(
        train_row.starts_with(&format!("{running:>18} ")),
        "{train_row}"
    );
    assert!(train_row.contains(" RUNNING "), "{train_row}");
    assert!(train_row.ends_with(" gres:gpu:2"), "{train_row}");
    // Pending tasks of the held array share one row, as squeue folds them.
    let folded = format!("{array}_[1-3]");
    let sweep_row = rows.iter().find(|r| r.contains("sweep")).unwrap();
    assert!(sweep_row.starts_with(&format!("{folded:>18} ")), "{out}");
    assert!(sweep_row.contains("(JobHeldUser) N/A"), "{sweep_row}");
    assert!(
        !out.contains("quick"),
        "finished jobs are not listed: {out}"
    );

    // -u, -r (one row per task), -h, -t with codes, -O names, -S.
    let mine = ok(&cluster, "squeue", &["-u", &user, "-r", "-h", "-t", "PD,R"]);
    assert_eq!(mine.lines().count(), 4, "{mine}");
    assert!(mine.contains(&format!("{array}_2 ")), "{mine}");
    let named = ok(
        &cluster,
        "squeue",
        &[
            "-O",
            "JobID:10,Name:.12,StateCompact:4,ReasonList",
            "-S",
            "-i",
        ],
    );
    assert_eq!(
        named.lines().next().unwrap(),
        "JOBID             NAMEST  NODELIST(REASON)    "
    );
    let first = named.lines().nth(1).unwrap();
    assert!(first.starts_with(&array), "highest id first: {named}");
    let long = ok(&cluster, "squeue", &["-l", "-j", &running]);
    let long_lines: Vec<&str> = long.lines().collect();
    assert_eq!(long_lines.len(), 3, "date, header, job: {long}");
    assert!(long_lines[1].contains("TIME_LIMI"), "{long}");
    let start = ok(&cluster, "squeue", &["--start"]);
    assert!(
        start.starts_with(
            "             JOBID PARTITION     NAME     USER ST          START_TIME  NODES SCHEDNODES           NODELIST(REASON)"
        ),
        "{start}"
    );
    assert!(
        !start.contains("train-llm"),
        "--start lists pending jobs only: {start}"
    );

    // sbatch --test-only: where and when, in Slurm's words; nothing submitted.
    let out = slurm(
        &cluster,
        "sbatch",
        &me(),
        &["--test-only", "--gres=gpu:1", "-N", "1", "--wrap", "true"],
    );
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    let next = array.parse::<u64>().unwrap() + 3;
    assert!(
        said.starts_with(&format!("sbatch: Job {next} to start at 20")),
        "{said}"
    );
    assert!(said.contains(" using 1 processors on nodes "), "{said}");
    assert!(said.trim_end().ends_with(" in partition gpu"), "{said}");
    let after = ok(&cluster, "squeue", &["-h", "-r", "-t", "all"]);
    assert_eq!(
        after.lines().count(),
        5,
        "--test-only submitted nothing: {after}"
    );

    // Options scripts use that cannot matter here are accepted with a warning;
    // getopt's prefixes work; seconds round up to whole minutes.
    let out = slurm(
        &cluster,
        "sbatch",
        &me(),
        &[
            "--hint=nomultithread",
            "--err=err.log",
            "--time=45:30",
            "--hold",
            "--wrap",
            "true",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.starts_with("sbatch: warning: --hint is accepted but has no effect: "),
        "{said}"
    );
    let accepted = String::from_utf8_lossy(&out.stdout)
        .trim()
        .replace("Submitted batch job ", "");
    let shown = ok(&cluster, "scontrol", &["show", "job", &accepted]);
    assert!(shown.contains("TimeLimit=00:46:00"), "{shown}");
    assert!(
        shown.contains("StdErr=") && shown.contains("/err.log"),
        "{shown}"
    );
    ok(&cluster, "scancel", &[&accepted]);

    // sbatch's refusals: getopt's words and 255 for options, 1 for requests.
    let out = slurm(&cluster, "sbatch", &me(), &["--x", "--wrap", "true"]);
    assert_eq!(out.status.code(), Some(255));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "sbatch: unrecognized option '--x'\nTry \"sbatch --help\" for more information\n"
    );
    // An option Slurm has and corral refuses: the reason and what to do instead.
    let out = slurm(&cluster, "sbatch", &me(), &["--tmp=10G", "--wrap", "true"]);
    assert_eq!(out.status.code(), Some(255));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.starts_with(
            "sbatch: error: invalid sbatch option '--tmp': corral does not support --tmp: "
        ) && said.contains("--constraint"),
        "{said}"
    );
    // --wait: sbatch exits with the job's status once it has ended; an
    // array's, the highest of its tasks'.
    let out = slurm(&cluster, "sbatch", &me(), &["--wait", "--wrap", "exit 3"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("Submitted batch job "));
    let out = slurm(
        &cluster,
        "sbatch",
        &me(),
        &[
            "-W",
            "--parsable",
            "-a",
            "1-2",
            "--wrap",
            "exit $SLURM_ARRAY_TASK_ID",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // srun's other Slurm options: one shaping the allocation is passed to it
    // (and warned about there), one corral refuses says why.
    let out = slurm(
        &cluster,
        "srun",
        &me(),
        &["--hint=nomultithread", "-Q", "true"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("srun: warning: --hint is accepted but has no effect"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (line, said) in [
        (
            &["--multi-prog", "conf"][..],
            "srun: error: corral does not support --multi-prog: ",
        ),
        (
            &["--tmp=1G", "true"][..],
            "srun: error: invalid sbatch option '--tmp': corral does not support --tmp: ",
        ),
    ] {
        let out = slurm(&cluster, "srun", &me(), line);
        assert_eq!(out.status.code(), Some(255), "{line:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).starts_with(said),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = slurm(&cluster, "sbatch", &me(), &["-p", "nope", "--wrap", "true"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .starts_with("sbatch: error: Batch job submission failed: unknown partition 'nope'"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Refusals: Slurm's words and exit status 1.
    let out = slurm(&cluster, "squeue", &me(), &["-t", "foo"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("squeue: error: Invalid job state specified: foo\n"),
        "{stderr}"
    );
    let out = slurm(&cluster, "squeue", &me(), &["-w", "nosuchnode"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Invalid node name nosuchnode"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // sacct: a finished job with its batch step, in the columns asked for.
    let out = ok(
        &cluster,
        "sacct",
        &[
            "-j",
            &quick,
            "--format=JobID,Elapsed,CPUTime,NCPUS,AllocGRES,State",
        ],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "JobID           Elapsed    CPUTime      NCPUS    AllocGRES      State "
    );
    assert_eq!(
        lines[1],
        "------------ ---------- ---------- ---------- ------------ ---------- "
    );
    assert!(lines[2].starts_with(&format!("{quick:<12} ")), "{out}");
    assert!(lines[2].ends_with(" gpu:1  COMPLETED "), "{out}");
    assert!(lines[3].starts_with(&format!("{quick}.batch ")), "{out}");
    assert!(lines[3].ends_with("  COMPLETED "), "{out}");
    assert_eq!(lines.len(), 4, "{out}");

    // A window, states, allocations only, parsable: the GPU-hours query guides give.
    let out = ok(
        &cluster,
        "sacct",
        &[
            "--allocations",
            "--starttime=2026-01-01",
            "--endtime=now",
            "--format=User,AllocGRES,ElapsedRaw,JobName",
            "--state=COMPLETED",
            "-P",
        ],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "User|AllocGRES|ElapsedRaw|JobName");
    assert!(
        lines[1..]
            .iter()
            .any(|l| l.starts_with(&format!("{user}|gpu:1|")) && l.ends_with("|quick")),
        "{out}"
    );
    assert!(!out.contains("train-llm"), "only completed jobs: {out}");
    // With -s and -S alone the window is the instant -S, as in Slurm: no job
    // ended exactly then.
    let out = ok(
        &cluster,
        "sacct",
        &[
            "-X",
            "-n",
            "--starttime=2026-01-01",
            "--state=CD",
            "-o",
            "JobID",
        ],
    );
    assert_eq!(out, "", "a one-instant window");
    let out = ok(
        &cluster,
        "sacct",
        &[
            "--format=JobID,User,Partition,AllocGRES,Elapsed,State",
            "--starttime=2026-01-01",
            "--endtime=now",
        ],
    );
    assert!(out.contains(" RUNNING "), "{out}");
    assert!(out.contains(&format!("{running}.batch ")), "{out}");

    // scontrol: a node and a partition in Slurm's records; draining needs a
    // reason and an operator; ping names every replica.
    let node = ok(&cluster, "scontrol", &["show", "node", "gpu01"]);
    assert!(node.starts_with("NodeName=gpu01 "), "{node}");
    assert!(node.contains("\n   Partitions=gpu,urgent \n"), "{node}");
    let one = ok(&cluster, "scontrol", &["-o", "show", "partition", "gpu"]);
    assert!(
        one.starts_with("PartitionName=gpu AllowGroups=ALL "),
        "{one}"
    );
    assert_eq!(one.lines().count(), 1, "{one}");
    let out = slurm(&cluster, "scontrol", &me(), &["show", "node", "gpu99"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Node gpu99 not found\n"
    );
    let admin = "user-corral-admin";
    let out = slurm(
        &cluster,
        "scontrol",
        admin,
        &["update", "NodeName=gpu02", "State=DRAIN"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with("You must specify a reason"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = slurm(
        &cluster,
        "scontrol",
        admin,
        &[
            "update",
            "NodeName=gpu02",
            "State=DRAIN",
            "Reason=bad",
            "cable",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let node = ok(&cluster, "scontrol", &["show", "node", "gpu02"]);
    assert!(node.contains("+DRAIN "), "{node}");
    assert!(
        node.contains("\n   Reason=bad cable [corral-admin@"),
        "{node}"
    );
    let out = slurm(
        &cluster,
        "scontrol",
        admin,
        &["update", "NodeName=gpu02", "State=RESUME"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pinged = ok(&cluster, "scontrol", &["ping"]);
    assert_eq!(pinged.lines().count(), 3, "{pinged}");
    assert!(pinged.starts_with("Slurmctld(primary) at "), "{pinged}");
    assert!(pinged.lines().all(|l| l.ends_with(" is UP")), "{pinged}");

    // sacctmgr: a GPU budget as guides set one up, then enforced.
    for line in [
        &[
            "-i",
            "add",
            "account",
            "team-a",
            "Description=Team A",
            "Organization=research",
        ][..],
        &["-i", "add", "user", &user, "Account=team-a"],
        &["-i", "add", "qos", "team-a-qos", "GrpTRESMins=gres/gpu=0"],
        &["-i", "modify", "account", "team-a", "set", "QOS=team-a-qos"],
    ] {
        let out = slurm(&cluster, "sacctmgr", admin, line);
        assert!(
            out.status.success(),
            "{line:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let shown = ok(
        &cluster,
        "sacctmgr",
        &[
            "-n",
            "-P",
            "show",
            "qos",
            "team-a-qos",
            "format=Name,GrpTRESMins",
        ],
    );
    assert_eq!(shown, "team-a-qos|gres/gpu=0\n");
    let accounts = ok(&cluster, "sacctmgr", &["show", "account", "team-a"]);
    assert!(
        accounts.ends_with("    team-a               Team A               team-a \n"),
        "{accounts}"
    );
    let out = slurm(
        &cluster,
        "sacctmgr",
        &me(),
        &["-i", "add", "account", "mine"],
    );
    assert!(!out.status.success(), "only admins change accounts");
    let budgeted = submit(
        &cluster,
        &["-A", "team-a", "--gres=gpu:1", "--wrap", "true"],
    );
    let waiting = wait_job(
        &cluster,
        &budgeted,
        Duration::from_secs(60),
        "a QOS reason",
        |j| j["reason"] == "QosGrpGpuRunMinutes",
    );
    assert_eq!(waiting["qos"], "team-a-qos");
    let row = ok(&cluster, "squeue", &["-h", "-j", &budgeted, "-o", "%q %r"]);
    assert_eq!(row, "team-a-qos QOSGrpGRESMinutes\n");

    // Association limits: the user's submit limit in team-a, shown on its
    // association row and enforced at submission in Slurm's words.
    let out = slurm(
        &cluster,
        "sacctmgr",
        admin,
        &[
            "-i",
            "modify",
            "user",
            &user,
            "set",
            "MaxSubmitJobs=1",
            "MaxJobs=1",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let assoc = ok(
        &cluster,
        "sacctmgr",
        &[
            "-n",
            "-P",
            "show",
            "assoc",
            "team-a",
            "format=Account,User,MaxJobs,MaxSubmit",
        ],
    );
    assert!(assoc.contains(&format!("team-a|{user}|1|1\n")), "{assoc}");
    let out = slurm(
        &cluster,
        "sbatch",
        &me(),
        &["-A", "team-a", "--wrap", "true"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = slurm(&cluster, "sacct", &me(), &["--format=JobID,Bogus"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "sacct: error: Invalid field requested: \"Bogus\"\n"
    );
}
