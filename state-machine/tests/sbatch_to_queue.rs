//! The whole path from a user's batch script and command line to a queued job:
//! `#SBATCH` parsing, command-line override, request building, and `Submit`.

mod support;

use std::collections::BTreeMap;

use corral_state::command::{Command, Outcome};
use corral_state::job::{JobState, MemoryRequest};
use corral_state::job_request::{RequestError, ScriptSource, SubmitContext, build_request};
use corral_state::slurm::duration::TimeLimit;
use corral_state::slurm::sbatch::{parse_args, parse_script_directives};
use corral_state::slurm::signal::Signal;
use support::*;

const TRAIN_SH: &str = "#!/bin/bash
#SBATCH --job-name=llama
#SBATCH --nodes=2
#SBATCH --gpus-per-node=h100:4
#SBATCH --ntasks-per-node=4 --cpus-per-task=8
#SBATCH --time=0-12:00:00
#SBATCH --output=logs/%x-%j.out
#SBATCH --signal=B:USR1@300
#SBATCH --requeue
#SBATCH --mem=200G

export MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n1)
#SBATCH --nodes=64
srun torchrun --nproc_per_node=4 train.py
";

fn context() -> SubmitContext {
    SubmitContext {
        user: "alice".into(),
        uid: 1000,
        gid: 1000,
        submit_host: "login1".into(),
        cwd: "/home/alice/llama".into(),
        environment: BTreeMap::from([
            ("PATH".to_string(), "/usr/bin".to_string()),
            ("WANDB_PROJECT".to_string(), "llama".to_string()),
        ]),
        command: Some("/home/alice/llama/train.sh".into()),
        now: corral_state::Timestamp::from_secs(1_795_248_000),
    }
}

#[test]
fn a_training_script_becomes_a_two_node_gang_request() {
    let directives = parse_script_directives(TRAIN_SH).expect("script parses");
    // The command line wins over the script.
    let (cli, rest) = parse_args(&[
        "-t",
        "6:00:00",
        "--export=ALL,STAGE=pretrain",
        "train.sh",
        "--lr",
        "3e-4",
    ])
    .expect("args parse");
    assert_eq!(rest, vec!["train.sh", "--lr", "3e-4"]);
    let options = directives.overridden_by(cli);
    let source = ScriptSource::File {
        path: rest[0].clone(),
        text: TRAIN_SH.into(),
        argv: rest[1..].to_vec(),
    };
    let (spec, batch) = build_request(options, source, &context()).expect("request builds");

    assert_eq!(spec.name, "llama");
    assert_eq!(
        spec.nodes, 2,
        "the #SBATCH line after the first command is ignored"
    );
    assert_eq!(spec.time_limit, Some(TimeLimit::Seconds(6 * 3600)));
    assert_eq!(spec.memory, MemoryRequest::PerNodeMb(200 * 1024));
    assert_eq!(
        spec.signal
            .as_ref()
            .map(|s| (s.signal, s.seconds_before, s.batch_only)),
        Some((Signal::USR1, 300, true))
    );
    assert_eq!(spec.workdir, "/home/alice/llama");
    assert_eq!(batch.argv, vec!["--lr", "3e-4"]);
    assert_eq!(
        batch.environment.get("STAGE").map(String::as_str),
        Some("pretrain")
    );
    assert_eq!(
        batch.environment.get("WANDB_PROJECT").map(String::as_str),
        Some("llama")
    );

    let mut s = cluster(3, 8);
    let out = ok(
        &mut s,
        Command::Submit {
            spec,
            batch,
            by: user("alice"),
            at: at(1),
            key: None,
        },
    );
    let Outcome::Submitted { first, .. } = out else {
        panic!("{out:?}")
    };
    let job = s.job(first).unwrap();
    assert_eq!(job.state, JobState::Pending);
    assert_eq!(
        (
            job.resources.nodes,
            job.resources.gpus_per_node,
            job.resources.gpu_type.as_deref()
        ),
        (2, 4, Some("h100"))
    );
    assert_eq!((job.resources.ntasks, job.resources.cpus_per_node), (8, 32));
    assert_eq!(job.resources.memory_per_node_mb, 200 * 1024);
    start(&mut s, first, at(2));
    check_invariants(&s);
}

#[test]
fn wrap_builds_a_shell_script_named_wrap() {
    let (options, rest) = parse_args(&["--wrap=nvidia-smi", "-G", "1"]).expect("args parse");
    assert!(rest.is_empty());
    let (spec, batch) = build_request(
        options.clone(),
        ScriptSource::Wrap("nvidia-smi".into()),
        &context(),
    )
    .expect("builds");
    assert_eq!(spec.name, "wrap");
    assert!(batch.script.starts_with("#!/bin/sh\n") && batch.script.contains("\nnvidia-smi\n"));
    let both = build_request(
        options,
        ScriptSource::File {
            path: "x.sh".into(),
            text: "#!/bin/sh\n".into(),
            argv: vec![],
        },
        &context(),
    );
    assert!(matches!(both, Err(RequestError::Conflict(_))));
}

#[test]
fn conflicting_memory_options_are_refused() {
    let (options, _) = parse_args(&["--mem=10G", "--mem-per-gpu=5G", "x.sh"]).expect("args parse");
    let err = build_request(options, ScriptSource::Wrap("true".into()), &context()).unwrap_err();
    assert!(err.to_string().contains("mutually exclusive"), "{err}");
}

#[test]
fn export_none_keeps_only_slurm_variables_and_a_bad_nodelist_names_its_token() {
    let (options, _) = parse_args(&["--export=NONE", "-w", "n[1-2]", "x.sh"]).expect("args parse");
    let mut ctx = context();
    ctx.environment
        .insert("SLURM_ACCOUNT".into(), "from-the-shell".into());
    let (spec, batch) =
        build_request(options, ScriptSource::Wrap("true".into()), &ctx).expect("builds");
    // As sbatch: the shell's SLURM_* variables, and those sbatch sets itself.
    let names: Vec<&str> = batch.environment.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        ["SLURM_ACCOUNT", "SLURM_EXPORT_ENV", "SLURM_GET_USER_ENV"]
    );
    assert_eq!(batch.environment["SLURM_EXPORT_ENV"], "NONE");
    assert_eq!(spec.required_nodes, vec!["n1", "n2"]);
    let (options, _) = parse_args(&["-x", "n[3-1]", "x.sh"]).expect("args parse");
    let err = build_request(options, ScriptSource::Wrap("true".into()), &context()).unwrap_err();
    assert!(err.to_string().contains("3-1"), "{err}");
}

#[test]
fn a_malformed_directive_names_its_line_and_token() {
    let err =
        parse_script_directives("#!/bin/bash\n#SBATCH -N 2\n#SBATCH --time=1-25\n").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("line 3") && text.contains("25"), "{text}");
}

#[test]
fn options_sbatch_passes_on_as_variables_reach_the_environment_and_the_record() {
    let script =
        "#!/bin/bash\n#SBATCH --mail-type=END\n#SBATCH --mail-type=FAIL\n#SBATCH -c 1\ntrue\n";
    let directives = parse_script_directives(script).expect("directives parse");
    let (cli, _) = parse_args(&[
        "--hint=nomultithread",
        "-O",
        "--open-mode=append",
        "--time-min=10",
        "--mail-type=BEGIN",
        "--dependency=afterok:7",
        "-m",
        "cyclic",
        "--export=PATH,FOO=bar",
    ])
    .expect("args parse");
    let options = directives.overridden_by(cli);
    let (spec, batch) = build_request(
        options,
        ScriptSource::File {
            path: "train.sh".into(),
            text: script.into(),
            argv: vec![],
        },
        &context(),
    )
    .expect("builds");
    let env = |name: &str| batch.environment.get(name).map(String::as_str);
    assert_eq!(env("SLURM_HINT"), Some("nomultithread"));
    assert_eq!(env("SLURM_THREADS_PER_CORE"), Some("1"));
    assert_eq!(env("SLURM_OVERCOMMIT"), Some("1"));
    assert_eq!(env("SLURM_OPEN_MODE"), Some("a"));
    assert_eq!(env("SLURM_JOB_DEPENDENCY"), Some("afterok:7"));
    assert_eq!(env("SLURM_DISTRIBUTION"), Some("cyclic"));
    assert_eq!(env("SLURM_EXPORT_ENV"), Some("PATH,FOO=bar"));
    assert_eq!(env("SLURM_GET_USER_ENV"), Some("1"));
    assert_eq!(env("PATH"), Some("/usr/bin"));
    assert_eq!(env("FOO"), Some("bar"));
    assert_eq!(env("WANDB_PROJECT"), None);
    // Repeated --mail-type lines and the command line are ORed, as in Slurm.
    assert_eq!(spec.mail_type.to_string(), "BEGIN,END,FAIL");
    assert_eq!(
        spec.time_min,
        Some(corral_state::slurm::duration::TimeLimit::Seconds(600))
    );
    assert!(spec.cpus_per_task_given);
    assert_eq!(spec.cpus_per_task, 1);
    assert_eq!(spec.command.as_deref(), Some("/home/alice/llama/train.sh"));
}

#[test]
fn a_bad_open_mode_mail_type_or_distribution_is_refused() {
    assert!(parse_args(&["--open-mode=sometimes"]).is_err());
    assert!(parse_args(&["--mail-type=often"]).is_err());
    for bad in ["foo", "plane=0", "block:sideways", "cyclic,Tight"] {
        let err = parse_args(&["-m", bad]).expect_err(bad);
        assert!(err.to_string().contains("Invalid --distribution"), "{err}");
    }
}

#[test]
fn distributions_reach_the_environment_as_slurm_writes_them() {
    for (given, shown, plane) in [
        ("Cyclic", "cyclic", None),
        ("block:cyclic", "block:cyclic", None),
        ("plane=4", "plane", Some("4")),
        ("cyclic:fcyclic,Pack", "cyclic:fcyclic", None),
    ] {
        let (options, _) = parse_args(&["-m", given]).expect(given);
        let vars = &options.job_variables();
        assert_eq!(
            vars.get("SLURM_DISTRIBUTION").map(String::as_str),
            Some(shown)
        );
        assert_eq!(vars.get("SLURM_DIST_PLANESIZE").map(String::as_str), plane);
    }
}

#[test]
fn a_script_path_becomes_command_as_sbatch_names_it() {
    use corral_state::job_request::command_of_script;
    assert_eq!(
        command_of_script("train.sh", "/home/a/"),
        "/home/a/train.sh"
    );
    assert_eq!(command_of_script("./train.sh", "/home/a"), "./train.sh");
    assert_eq!(command_of_script("../jobs/t.sh", "/home/a"), "../jobs/t.sh");
}

#[test]
fn the_command_line_replaces_what_an_sbatch_line_set_in_the_environment() {
    let script = "#!/bin/bash\n#SBATCH --export=NONE\n#SBATCH --hint=nomultithread\n#SBATCH --threads-per-core=2\ntrue\n";
    let directives = parse_script_directives(script).expect("directives parse");
    let (cli, _) = parse_args(&["--export=ALL", "--hint=multithread"]).expect("args parse");
    let vars = directives.overridden_by(cli).job_variables();
    assert_eq!(vars.get("SLURM_EXPORT_ENV"), None, "{vars:?}");
    assert_eq!(vars.get("SLURM_GET_USER_ENV"), None, "{vars:?}");
    assert_eq!(
        vars.get("SLURM_HINT").map(String::as_str),
        Some("multithread")
    );
    // An explicit --threads-per-core wins over what a hint implies.
    assert_eq!(
        vars.get("SLURM_THREADS_PER_CORE").map(String::as_str),
        Some("2")
    );
}

#[test]
fn begin_waits_for_its_time_and_mincpus_raises_the_cpus_of_each_node() {
    let (options, _) =
        parse_args(&["--begin=now+1hour", "--mincpus=16", "-n", "2", "x.sh"]).expect("args parse");
    let ctx = context();
    let (spec, batch) =
        build_request(options, ScriptSource::Wrap("true".into()), &ctx).expect("builds");
    assert_eq!(spec.begin_time, Some(ctx.now.plus_secs(3600)));
    assert_eq!(spec.min_cpus_per_node, Some(16));
    let mut s = cluster(1, 8);
    let out = ok(
        &mut s,
        Command::Submit {
            spec,
            batch,
            by: user("alice"),
            at: ctx.now,
            key: None,
        },
    );
    let Outcome::Submitted { first, .. } = out else {
        panic!("{out:?}")
    };
    let job = s.job(first).unwrap();
    assert_eq!(job.reason, corral_state::job::PendingReason::BeginTime);
    assert_eq!(
        job.resources.cpus_per_node, 16,
        "2 tasks, but at least 16 CPUs"
    );
    // A date the calendar lacks is refused, naming the option.
    let (options, _) = parse_args(&["--begin=2026-04-31", "x.sh"]).expect("args parse");
    let err = build_request(options, ScriptSource::Wrap("true".into()), &ctx).unwrap_err();
    assert!(err.to_string().contains("--begin"), "{err}");
}

#[test]
fn a_time_min_beyond_the_time_limit_is_refused_as_slurm_refuses_it() {
    let (options, _) = parse_args(&["--time=10", "--time-min=20", "x.sh"]).expect("args parse");
    let err = build_request(options, ScriptSource::Wrap("true".into()), &context()).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("Invalid time-min specification (exceeds job's time or other limits)"),
        "{err}"
    );
    let (options, _) = parse_args(&["--time=20", "--time-min=10", "x.sh"]).expect("args parse");
    assert!(build_request(options, ScriptSource::Wrap("true".into()), &context()).is_ok());
}

#[test]
fn a_mail_user_a_mail_program_would_read_as_an_option_is_refused_at_submission() {
    let hostile = "--mail-user=--exec=!touch /tmp/pwned";
    let err = parse_args(&["--mail-type=END", hostile, "train.sh"]).expect_err("refused");
    let message = err.to_string();
    assert!(message.contains("--exec=!touch /tmp/pwned"), "{message}");
    assert!(
        message.contains("user name") && message.contains("user@host"),
        "{message}"
    );
    let script = format!("#!/bin/bash\n#SBATCH --mail-type=END\n#SBATCH {hostile}\ntrue\n");
    assert!(parse_script_directives(&script).is_err());
    for hostile in [
        "|/bin/sh",
        "/etc/cron.d/x",
        "a b@x.org",
        "-Ssendmail=/tmp/x",
    ] {
        assert!(
            parse_args(&[&format!("--mail-user={hostile}"), "train.sh"]).is_err(),
            "{hostile}"
        );
    }
    // What users write is kept, normalised.
    let (options, _) =
        parse_args(&["--mail-user=ops@example.org, alice", "train.sh"]).expect("parses");
    assert_eq!(options.mail_user.as_deref(), Some("ops@example.org,alice"));
}
