//! The workload's jobs: trainers that record, from inside, what the checkers
//! need. A batch script starts one rank per node with `srun`; each rank
//! records its start (attempt, node, rank, GPUs, the checkpoint it resumes
//! from, and the leader and term that sent its node the launch) and every step (its signs of life), and rank 0 writes a checkpoint
//! every few steps (recording that) and reports it with `corral checkpoint`,
//! recording it again once the report is committed.
//! The batch script records its own end (`batch_exit`) once `srun` returns.
//! Events are JSON lines with the wall clock (`wall_ms`) appended to
//! `EVENTS/JOB.jsonl`; the runner shifts them onto the run's clock.
//! In the preemption scenarios a rank may trap the notice (SIGTERM): record
//! it (`notice`), and then either commit a checkpoint of the step it is at
//! and exit 0, or run on until killed ([`OnNotice`]).

use std::path::Path;

use anyhow::Context;

/// Writes the rank program into `dir` (once per run); returns its path.
pub fn install_rank_program(dir: &Path) -> anyhow::Result<std::path::PathBuf> {
    let path = dir.join("rank.sh");
    std::fs::write(&path, RANK).with_context(|| format!("writing {}", path.display()))?;
    let mut permissions = std::fs::metadata(&path)?.permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&path, permissions)?;
    Ok(path)
}

/// What a trainer's ranks do when told they are preempted (the SIGTERM the
/// steps' tasks get).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnNotice {
    /// Nothing: bash's default, they die.
    Die,
    /// Record it, commit a checkpoint of the current step (rank 0), exit 0.
    Checkpoint,
    /// Record it and run on (until the deadline's SIGKILL).
    Ignore,
}

impl OnNotice {
    /// The rank program's third argument.
    fn arg(self) -> &'static str {
        match self {
            OnNotice::Die => "die",
            OnNotice::Checkpoint => "checkpoint",
            OnNotice::Ignore => "ignore",
        }
    }
}

/// A trainer's batch script: `nodes` nodes with `gpus` GPUs each, `steps`
/// steps of 100 ms, a checkpoint every `every` steps; its ranks answer a
/// preemption notice as `on_notice` says, and `sbatch` lines (`-p urgent`,
/// `--qos=high`) are added to its header.
pub fn batch_script(
    name: &str,
    (nodes, gpus): (u32, u32),
    (steps, every): (u32, u32),
    run_dir: &Path,
    (cluster_bin, corral): (Option<&Path>, &Path),
    (on_notice, sbatch): (OnNotice, &[&str]),
) -> String {
    let path = cluster_bin.map_or_else(String::new, |bin| {
        format!("export PATH={}:$PATH\n", bin.display())
    });
    let extra: String = sbatch
        .iter()
        .map(|line| format!("#SBATCH {line}\n"))
        .collect();
    format!(
        "#!/bin/bash\n#SBATCH -J {name}\n#SBATCH -N {nodes}\n#SBATCH --gpus-per-node={gpus}\n#SBATCH --output={out}/%j.out\n{extra}{path}export CHAOS_EVENTS={events}\nexport CHAOS_CORRAL={corral}\nsrun {rank} {steps} {every} {mode}\nstatus=$?\nus=${{EPOCHREALTIME/./}}\nprintf '{{\"wall_ms\":%s,\"ev\":\"batch_exit\",\"job\":%s,\"attempt\":%s,\"node\":\"%s\",\"status\":%s}}\\n' \"${{us:0:-3}}\" \"$SLURM_JOB_ID\" \"$((${{SLURM_RESTART_COUNT:-0}} + 1))\" \"$SLURMD_NODENAME\" \"$status\" >> {events}/$SLURM_JOB_ID.jsonl\nexit $status\n",
        out = run_dir.join("out").display(),
        events = run_dir.join("events").display(),
        corral = corral.display(),
        rank = run_dir.join("rank.sh").display(),
        mode = on_notice.arg(),
    )
}

/// One rank: `rank.sh STEPS EVERY [die|checkpoint|ignore]`.
const RANK: &str = r#"#!/bin/bash
steps=$1
every=$2
mode=${3:-die}
attempt=$((${SLURM_RESTART_COUNT:-0} + 1))
log="$CHAOS_EVENTS/$SLURM_JOB_ID.jsonl"
# Milliseconds since the epoch without a fork (bash 5's EPOCHREALTIME).
ev() { local us=${EPOCHREALTIME/./}; printf '{"wall_ms":%s,"job":%s,"attempt":%s,%s}\n' "${us:0:-3}" "$SLURM_JOB_ID" "$attempt" "$1" >> "$log"; }
step=0
resumed=null
if [ -n "$CORRAL_RESUME_FROM" ] && [ -f "$CORRAL_RESUME_FROM" ]; then
  step=$(cat "$CORRAL_RESUME_FROM")
  resumed=$step
fi
gpus=${CUDA_VISIBLE_DEVICES:-}
ev "\"ev\":\"attempt_start\",\"node\":\"$SLURMD_NODENAME\",\"rank\":$SLURM_NODEID,\"nodes\":$SLURM_NNODES,\"gpus\":[$gpus],\"resumed_from\":$resumed"
# Which leader sent this node its launch, and in which term.
if [ -n "$CORRAL_DISPATCHED_BY" ]; then
  ev "\"ev\":\"dispatch\",\"replica\":${CORRAL_DISPATCHED_BY%%:*},\"term\":${CORRAL_DISPATCHED_BY##*:},\"node\":\"$SLURMD_NODENAME\""
fi
checkpoint() {
  file="$CORRAL_CHECKPOINT_DIR/step-$step"
  echo "$step" > "$file"
  ev "\"ev\":\"checkpoint_written\",\"step\":$step"
  if "$CHAOS_CORRAL" checkpoint --step "$step" --path "$file" >/dev/null 2>&1; then
    ev "\"ev\":\"checkpoint\",\"step\":$step"
  fi
}
notice() { ev "\"ev\":\"notice\",\"rank\":$SLURM_NODEID,\"step\":$step,\"ignored\":$1"; }
# The preemption notice: checkpoint where we are and leave, or run on.
on_notice() {
  notice false
  if [ "$SLURM_NODEID" -eq 0 ] && [ "$step" -gt 0 ]; then checkpoint; fi
  ev "\"ev\":\"attempt_exit\",\"node\":\"$SLURMD_NODENAME\",\"rank\":$SLURM_NODEID,\"status\":0,\"step\":$step"
  exit 0
}
case "$mode" in
  checkpoint) trap on_notice TERM ;;
  ignore) trap 'notice true' TERM ;;
esac
while [ "$step" -lt "$steps" ]; do
  sleep 0.1
  step=$((step + 1))
  ev "\"ev\":\"step\",\"rank\":$SLURM_NODEID,\"step\":$step"
  if [ "$SLURM_NODEID" -eq 0 ] && [ $((step % every)) -eq 0 ]; then
    checkpoint
  fi
done
ev "\"ev\":\"attempt_exit\",\"node\":\"$SLURMD_NODENAME\",\"rank\":$SLURM_NODEID,\"status\":0,\"step\":$step"
"#;
