//! `corral import-slurm --slurm-conf FILE [--gres-conf FILE] [--topology-conf
//! FILE]`: prints the corral.toml equivalent of a site's Slurm configuration
//! on standard output. What could not be carried over, and what was carried
//! with a difference, is listed in comments at the top of that output (with a
//! one-line count on standard error); the output is checked by corrald's own
//! configuration loader, and the command fails if corrald would refuse it.
//!
//! Only `run` reads files; the rest are pure functions from text to records to
//! corral.toml: `parse` (the files' syntax), `source` (Include lines),
//! `records` (NodeName/PartitionName... records and DEFAULT lines),
//! `settings`, `preemption`, `nodes`, `gres`, `partitions`, `topology` (the
//! mapping, with `reasons` for every key that has no place), `notes` and
//! `origins` (what the user is told), `emit` (the TOML text) and `translate`
//! (all of it in order).

mod emit;
mod gres;
mod location;
mod mig_gres;
mod nodes;
mod notes;
mod origins;
mod parse;
mod partitions;
mod preemption;
mod reasons;
mod records;
mod settings;
mod source;
mod topology;
mod translate;
mod values;

#[cfg(test)]
mod tests;

use std::path::Path;
use std::process::ExitCode;

use anyhow::bail;

use crate::args::ImportSlurmArgs;
use notes::Kind;
use translate::{Inputs, translate};

/// Reads the files and prints corral.toml.
pub fn run(args: &ImportSlurmArgs) -> anyhow::Result<ExitCode> {
    let mut load = |path: &Path| std::fs::read_to_string(path);
    let slurm_conf = source::read_lines(&args.slurm_conf, &mut load)?;
    let mut sources = vec![("slurm.conf", args.slurm_conf.display().to_string())];
    let gres_conf = match &args.gres_conf {
        Some(path) => {
            sources.push(("gres.conf", path.display().to_string()));
            Some(source::read_lines(path, &mut load)?)
        }
        None => None,
    };
    let topology_conf = match &args.topology_conf {
        Some(path) => {
            sources.push(("topology.conf", path.display().to_string()));
            Some(source::read_lines(path, &mut load)?)
        }
        None => None,
    };
    let imported = translate(&Inputs {
        slurm_conf,
        gres_conf,
        topology_conf,
        sources,
    })?;
    print!("{}", imported.text);
    eprintln!(
        "corral import-slurm: Slurm keys not carried over: {}; carried with a difference: {} (both listed at the top of the output). Replace the PLACEHOLDER [[replicas]] before use.",
        imported.notes.count(Kind::NotCarried),
        imported.notes.count(Kind::Changed)
    );
    let beside = args.slurm_conf.parent().unwrap_or(Path::new(""));
    for (flag, given, name) in [
        ("--gres-conf", args.gres_conf.is_some(), "gres.conf"),
        (
            "--topology-conf",
            args.topology_conf.is_some(),
            "topology.conf",
        ),
    ] {
        let path = beside.join(name);
        if !given && path.is_file() {
            eprintln!(
                "corral import-slurm: {} is beside slurm.conf but was not read; give {flag} {} to carry it",
                path.display(),
                path.display()
            );
        }
    }
    if let Some(refusal) = imported.refusal {
        bail!(
            "corrald would refuse the configuration printed above: {refusal}; fix the Slurm files (or edit the output) and import again"
        );
    }
    Ok(ExitCode::SUCCESS)
}
