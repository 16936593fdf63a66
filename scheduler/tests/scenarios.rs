//! Table-driven scenario tests for the scheduler: every `tests/scenarios/*.txt`
//! describes a cluster, a queue and a time; the runner builds that state through
//! `Command`s, runs one pass (`corral_scheduler::plan`), renders the plan as text
//! and compares it, whole, with the file's expected section. It then applies the
//! plan (`Plan::to_command`) and checks that no entry is rejected and that the
//! state's invariants hold, and that a second pass over the same state plans the
//! same (determinism).
//!
//! `BLESS=1 cargo test -p corral-scheduler --test scenarios` rewrites the expected
//! sections from the actual plans (files in [`KNOWN_FAILING`] are never blessed).
//!
//! # The format
//!
//! One scenario per file. `#` starts a comment (at the start of a line or after a
//! space); the first comment lines say what the scenario is about. Lines run in
//! order, each becoming commands an administrator, user, agent or leader would
//! send. Times are whole seconds since the base (`Timestamp::from_secs`); `at=T`
//! on a line moves the clock (never backwards) and lines without it happen at the
//! current clock, which starts at 0. Job ids are given in submission order from 1
//! (an array takes one id per task).
//!
//! Cluster (configuration, as `admin` with `Role::Admin`):
//!
//! ```text
//! config backfill_reservations=4 preempt_exempt_seconds=0 preempt_grace_seconds=120 max_requeue=5 fairshare_half_life_seconds=N
//! priority age=1000 fairshare=10000 job_size=1000 partition=10000 qos=10000 max_age=604800   # weights
//! nodes n[1-8] gpus=8 type=h100 cpus=64 mem=512G features=ib,nvlink   # defined and registered (up)
//! nodes m1 gpus=a100_3g.40gb:2,a100_1g.10gb:3                         # mixed types, in index order
//! switch leaf1 nodes=n[1-4]            # switch, block and blocksizes lines form one topology
//! switch spine switches=leaf[1-2]      # and must stand together
//! block b1 nodes=n[1-4]
//! blocksizes 4,8
//! partition gpu nodes=n[1-8] default tier=1 maxtime=1-00:00:00 defaulttime=1:00:00 preempt=requeue accounts=ml,cv [down]
//! account ml parent=root shares=10 qos=normal      # qos= is the account's default QOS
//! user alice account=ml,cv role=user               # the first account is the default
//! qos high priority=100 preempt=normal preemptmode=requeue grptres=gres/gpu=16 grptresmins=gres/gpu=600 maxwall=4:00:00 maxtresperuser=gres/gpu=8 maxjobsperuser=2
//! reservation r1 nodes=n[1-2] start=0 end=7200 users=alice accounts=ml [maint]
//! ```
//!
//! Defaults: `ClusterConfig::default()`; nodes `cpus=64 mem=512G type=h100` and no
//! GPUs; partitions `tier=1 maxtime=UNLIMITED preempt=off`, up; accounts under
//! `root` with 1 share. Keys are case-insensitive and take Slurm's spellings too (`PriorityTier=`,
//! `AllowAccounts=`, `State=DOWN`, `Default=YES`, `Fairshare=`, `Flags=MAINT`).
//! Configuration lines may also appear between events (e.g. a partition whose
//! MaxTime is lowered after jobs were queued).
//!
//! Queue and events (`USER` submits with its own role; options are sbatch's, parsed
//! by `corral_state::slurm::sbatch::parse_args` and `job_request::build_request`):
//!
//! ```text
//! submit alice -N 2 --gpus-per-node=8 -t 1:00:00 at=10     # a pending job
//! run    alice -N 3 --gpus-per-node=8 -t 2:00:00 at=0 on=n[1-3]
//!                             # submitted and started at once on those nodes (first free GPUs)
//! start 4 on=n5 at=20         # start a pending job (e.g. an array task) on given nodes
//! finish 1 exit=0 at=3600     # the batch script exits; every node cleans up
//! cancel 2 at=50              # scancel (a running job's nodes clean up too)
//! requeue 1 at=60             # scontrol requeue (nodes clean up)
//! cleanup 1 at=70             # a COMPLETING job's nodes confirm cleanup
//! checkpoint 1 at=900         # the job commits a checkpoint
//! hold 3 [admin]              # scontrol hold by the owner (or an operator)
//! release 3 [admin] at=T      # scontrol release
//! drain n3 / down n4 / resume n3 [at=T]
//! gpu_drain n1 gpus=0,1 / gpu_fail n1 gpus=2 xid=79 [at=T]
//! tick at=T                   # the leader's tick (charges usage, ends timed-out jobs)
//! schedule at=T               # a whole pass, applied, gangs reported started
//! now 100                     # the pass under test runs at this time; ends the input
//! ---
//! ```
//!
//! Expected plan, after the `---` line: exactly what `render::plan` prints, one
//! decision per line, in the plan's order (blank lines and indentation aside; no
//! comments, as BLESS rewrites the section). Everything the plan contains is
//! listed, so a plan that does more than expected fails too. Annotated:
//!
//! ```text
//! start 2 n[5-6] gpus=0-7 cpus=1 mem=0       # gang; nodes grouped by identical shares
//! start 7 attempt=2 n1 gpus=0-1 cpus=8 mem=64G; n2 gpus=4-5 cpus=8 mem=64G
//! preempt 1 for 4 signal=TERM grace=120
//! reason 3 Resources                          # only reasons that change
//! backfill 3 at=7200 n[1-2]                   # the blocked job's backfill reservation
//! ```

mod scenario;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use corral_scheduler::explain;
use corral_state::command::Outcome;
use corral_state::job::PendingReason;
use corral_state::{ClusterState, JobId, Timestamp};
use scenario::{Scenario, build, diff, render};

/// Fixtures whose expected section is the correct behaviour but the scheduler does
/// not (yet) produce it: each is a reported bug. The suite prints them and passes;
/// when one starts passing, the suite fails until it is removed from this list.
const KNOWN_FAILING: &[&str] = &[];

fn scenario_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios")
}

fn scenario_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(scenario_dir())
        .expect("tests/scenarios exists")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    files
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Loads a fixture and builds its state.
fn load(name: &str) -> (Scenario, ClusterState) {
    let text = fs::read_to_string(scenario_dir().join(name)).expect("fixture exists");
    let scenario = Scenario::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let state = build::build(&scenario).unwrap_or_else(|e| panic!("{name}: {e}"));
    (scenario, state)
}

/// What running one fixture found.
struct Report {
    /// The rendered plan; `None` when the scenario could not be built.
    actual: Option<String>,
    /// The rendered plan differs from the expected section.
    differs: bool,
    /// Everything wrong, the diff included.
    problems: Vec<String>,
}

fn check(scenario: &Scenario) -> Report {
    let state = match build::build(scenario) {
        Ok(state) => state,
        Err(e) => {
            return Report {
                actual: None,
                differs: false,
                problems: vec![format!("could not build the scenario: {e}")],
            };
        }
    };
    let now = scenario.now;
    let plan = corral_scheduler::plan(&state, now);
    let actual = render::plan(&plan);
    let mut problems = Vec::new();
    let differs = actual != scenario.expected;
    if differs {
        problems.push(format!(
            "the plan differs from the expected section:\n{}",
            diff(&scenario.expected, &actual)
        ));
    }
    if corral_scheduler::plan(&state, now) != plan {
        problems.push("a second pass over the same state gave a different plan".into());
    }
    let mut applied = state.clone();
    if let Some(command) = plan.to_command(now) {
        match applied.apply(command) {
            Ok(Outcome::Plan(outcome)) if outcome.rejected.is_empty() => {}
            Ok(Outcome::Plan(outcome)) => problems.push(format!(
                "ApplyPlan rejected entries: {:?}",
                outcome.rejected
            )),
            Ok(other) => problems.push(format!("ApplyPlan answered {other:?}")),
            Err(e) => problems.push(format!("ApplyPlan was refused: {e}")),
        }
        if let Err(violation) = corral_state::invariants::check(&applied) {
            problems.push(format!(
                "invariant violated after applying the plan: {violation}"
            ));
        }
    }
    Report {
        actual: Some(actual),
        differs,
        problems,
    }
}

#[test]
fn scenarios() {
    let bless = std::env::var("BLESS").is_ok_and(|v| v == "1");
    let files = scenario_files();
    assert!(
        !files.is_empty(),
        "no fixtures in {}",
        scenario_dir().display()
    );
    let mut failures = Vec::new();
    let mut known = Vec::new();
    let mut stderr = std::io::stderr();
    for path in &files {
        let name = file_name(path);
        let text = fs::read_to_string(path).expect("fixture is readable");
        let scenario = match Scenario::parse(&text) {
            Ok(s) => s,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let mut report = check(&scenario);
        if KNOWN_FAILING.contains(&name.as_str()) {
            if report.problems.is_empty() {
                failures.push(format!("{name}: passes now; remove it from KNOWN_FAILING"));
            } else {
                known.push(format!(
                    "{name} (known failing):\n{}",
                    report.problems.join("\n")
                ));
            }
            continue;
        }
        if bless
            && report.differs
            && let Some(actual) = &report.actual
        {
            fs::write(path, scenario.blessed(actual)).expect("fixture is writable");
            let _ = writeln!(stderr, "blessed {name}:\n{}", report.problems[0]);
            report.problems.remove(0);
        }
        if !report.problems.is_empty() {
            failures.push(format!("{name}:\n{}", report.problems.join("\n")));
        }
    }
    // Written to the stderr handle itself so that it shows even when the test passes
    // (the harness captures only the print macros).
    for k in &known {
        let _ = writeln!(stderr, "{k}\n");
    }
    assert!(
        failures.is_empty(),
        "{} of {} scenarios failed:\n\n{}",
        failures.len(),
        files.len(),
        failures.join("\n\n")
    );
    for name in KNOWN_FAILING {
        assert!(
            files.iter().any(|f| file_name(f) == *name),
            "KNOWN_FAILING lists {name}, which does not exist"
        );
    }
}

#[test]
fn explain_gives_a_blocked_job_its_backfill_start() {
    let (scenario, state) = load("backfill_short_job.txt");
    let top = explain(&state, JobId(2), scenario.now).expect("job 2 exists");
    assert_eq!(
        top.reason,
        Some(PendingReason::Resources),
        "{:?}",
        top.lines
    );
    assert_eq!(
        top.estimated_start,
        Some(Timestamp::from_secs(3600)),
        "{:?}",
        top.lines
    );
    assert!(
        top.lines
            .iter()
            .any(|l| l.contains("n[1-2]") || l.contains("n1,n2")),
        "{:?}",
        top.lines
    );

    let long = explain(&state, JobId(3), scenario.now).expect("job 3 exists");
    assert_eq!(
        long.reason,
        Some(PendingReason::Priority),
        "{:?}",
        long.lines
    );
    assert_eq!(long.estimated_start, None, "{:?}", long.lines);
    assert_eq!(long.ahead, vec![JobId(2)]);

    let short = explain(&state, JobId(4), scenario.now).expect("job 4 exists");
    assert_eq!(short.reason, None);
    assert!(
        short.lines[0].contains("starts in this pass on n2"),
        "{:?}",
        short.lines
    );
}

#[test]
fn explain_names_holds_and_preemptions() {
    let (scenario, state) = load("holds.txt");
    let user_held = explain(&state, JobId(1), scenario.now).expect("job 1 exists");
    assert_eq!(
        user_held.reason,
        Some(PendingReason::JobHeldUser),
        "{:?}",
        user_held.lines
    );
    let admin_held = explain(&state, JobId(2), scenario.now).expect("job 2 exists");
    assert_eq!(
        admin_held.reason,
        Some(PendingReason::JobHeldAdmin),
        "{:?}",
        admin_held.lines
    );

    let (scenario, state) = load("preempt_partition_tier.txt");
    let preemptor = explain(&state, JobId(3), scenario.now).expect("job 3 exists");
    assert_eq!(
        preemptor.reason,
        Some(PendingReason::Resources),
        "{:?}",
        preemptor.lines
    );
    assert_eq!(
        preemptor.estimated_start,
        Some(Timestamp::from_secs(1120)),
        "{:?}",
        preemptor.lines
    );
    assert!(
        preemptor
            .lines
            .iter()
            .any(|l| l.contains("preempts job(s) 2")),
        "{:?}",
        preemptor.lines
    );

    let running = explain(&state, JobId(1), scenario.now).expect("job 1 exists");
    assert_eq!(running.reason, None);
    assert!(running.lines[0].contains("RUNNING"), "{:?}", running.lines);
}

#[test]
fn the_format_rejects_unknown_lines_with_their_number() {
    let text = "nodes n1 gpus=8\nfrobnicate n1\nnow 0\n---\n";
    let scenario = Scenario::parse(text).expect("splits");
    let err = build::build(&scenario).expect_err("refused");
    assert!(
        err.starts_with("line 2: unknown line keyword `frobnicate`"),
        "{err}"
    );
    let err = Scenario::parse("nodes n1\n---\n").expect_err("no now");
    assert!(err.contains("now"), "{err}");
}
