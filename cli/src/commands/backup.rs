//! `corral admin snapshot save|inspect`: backups of the whole cluster state.
//! `save` streams the leader's consistent copy into FILE (written to a
//! temporary file beside it, checked whole, synced, then renamed: a FILE
//! that exists is a complete, checked backup); `inspect` checks a file and
//! says what it holds, with no cluster needed.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use corral_proto::api::{Empty, backup_chunk};
use corral_state::ClusterState;
use corral_state::backup::{self, BackupMeta};
use corral_state::time::Timestamp;

use crate::connection::{Cluster, Retry};
use crate::format::datetime::format_timestamp;

/// The largest backup `save` takes in (the whole file is checked in memory).
const MAX_BACKUP_BYTES: u64 = 16 * 1024 * 1024 * 1024;

/// `corral admin snapshot save FILE`.
pub async fn save(cluster: &Cluster, file: &Path, json: bool) -> anyhow::Result<ExitCode> {
    if file.exists() {
        bail!(
            "{} exists; give a new file name (a backup is never written over another file)",
            file.display()
        );
    }
    let mut stream = cluster
        .call(Retry::Idempotent, |mut c| async move {
            c.save_backup(Empty {}).await
        })
        .await?;
    let mut bytes: Vec<u8> = Vec::new();
    let mut total = None;
    while let Some(chunk) = stream
        .message()
        .await
        .context("the backup stream broke off; nothing was written, run it again")?
    {
        match chunk.part {
            Some(backup_chunk::Part::TotalBytes(n)) => {
                if n > MAX_BACKUP_BYTES {
                    bail!("the controller offers a {n}-byte backup, larger than this client takes");
                }
                total = Some(n);
                bytes.reserve(usize::try_from(n).unwrap_or(0));
            }
            Some(backup_chunk::Part::Data(piece)) => bytes.extend_from_slice(&piece),
            None => {}
        }
    }
    if total != Some(bytes.len() as u64) {
        bail!(
            "the backup stream ended after {} of {} bytes; nothing was written, run it again",
            bytes.len(),
            total.map_or("an unknown number of".to_string(), |n| n.to_string())
        );
    }
    let read = backup::decode(&bytes).context("the controller sent a damaged backup")?;
    let summary = Summary::of(&read.meta, &read.state()?);
    write_durably(file, &bytes)?;
    if json {
        super::print_json(&summary.json(file, bytes.len()))?;
    } else {
        println!(
            "saved a backup of cluster '{}' at log index {} ({} bytes) to {}",
            summary.meta.cluster_name,
            summary.meta.index,
            bytes.len(),
            file.display()
        );
        print!("{}", summary.text());
    }
    Ok(ExitCode::SUCCESS)
}

/// `corral admin snapshot inspect FILE`.
pub fn inspect(file: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let read = backup::decode(&bytes).with_context(|| format!("{}", file.display()))?;
    let summary = Summary::of(&read.meta, &read.state()?);
    if json {
        super::print_json(&summary.json(file, bytes.len()))?;
    } else {
        println!("{}: a whole backup, every checksum right", file.display());
        print!("{}", summary.text());
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes `bytes` to a new file beside `file`, syncs it and links it as
/// `file` (which fails if `file` appeared meanwhile: never over a file),
/// then syncs the directory.
fn write_durably(file: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let name = file
        .file_name()
        .with_context(|| format!("{} names no file", file.display()))?;
    let dir = match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let partial = dir.join(format!(
        ".{}.{}.partial",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = (|| {
        let mut out = std::fs::File::create_new(&partial)?;
        out.write_all(bytes)?;
        out.sync_all()?;
        std::fs::hard_link(&partial, file)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    let _ = std::fs::remove_file(&partial);
    written.with_context(|| format!("cannot write {}", file.display()))
}

/// What a backup holds, for people.
struct Summary {
    meta: BackupMeta,
    jobs_by_state: BTreeMap<&'static str, usize>,
    nodes: usize,
    accounts: usize,
    users: usize,
    next_job_id: u64,
}

impl Summary {
    fn of(meta: &BackupMeta, state: &ClusterState) -> Summary {
        let mut jobs_by_state = BTreeMap::new();
        for job in state.jobs().values() {
            *jobs_by_state.entry(job.state.slurm_name()).or_default() += 1;
        }
        Summary {
            meta: meta.clone(),
            jobs_by_state,
            nodes: state.nodes().len(),
            accounts: state.accounts().len(),
            users: state.users().len(),
            next_job_id: state.next_job_id().0,
        }
    }

    fn text(&self) -> String {
        let jobs: Vec<String> = self
            .jobs_by_state
            .iter()
            .map(|(state, n)| format!("{n} {state}"))
            .collect();
        format!(
            "  cluster {}, taken {} by corral {} (term {}, state format {})\n  jobs: {}; next job id {}\n  nodes {}, accounts {}, users {}\n",
            self.meta.cluster_name,
            format_timestamp(Timestamp(self.meta.taken_at_ms)),
            self.meta.build,
            self.meta.term,
            self.meta.format,
            if jobs.is_empty() {
                "none".to_string()
            } else {
                jobs.join(", ")
            },
            self.next_job_id,
            self.nodes,
            self.accounts,
            self.users,
        )
    }

    fn json(&self, file: &Path, bytes: usize) -> serde_json::Value {
        serde_json::json!({
            "file": file.display().to_string(),
            "bytes": bytes,
            "meta": self.meta,
            "jobs_by_state": self.jobs_by_state,
            "next_job_id": self.next_job_id,
            "nodes": self.nodes,
            "accounts": self.accounts,
            "users": self.users,
        })
    }
}
