//! `corral certs DIR`: a cluster CA (kept in DIR and reused on later runs) and
//! certificates for controllers, node agents and users.

use std::process::ExitCode;

use anyhow::bail;
use corral_pki::{BundleSpec, Role};
use corral_state::slurm::hostlist;

use crate::args::CertsArgs;

/// Mints the certificates.
pub fn run(args: &CertsArgs, json: bool) -> anyhow::Result<ExitCode> {
    let agents = match &args.agents {
        Some(list) => hostlist::expand(list).map_err(|e| anyhow::anyhow!("--agents: {e}"))?,
        None => Vec::new(),
    };
    let mut users = Vec::new();
    for entry in &args.users {
        let (name, role) = match entry.split_once(':') {
            Some((name, "user")) => (name, Role::User),
            Some((name, "operator")) => (name, Role::Operator),
            Some((name, "admin")) => (name, Role::Admin),
            Some((_, other)) => {
                bail!("unknown role '{other}' in '{entry}'; use NAME, NAME:operator or NAME:admin")
            }
            None => (entry.as_str(), Role::User),
        };
        users.push((name.to_string(), role));
    }
    let spec = BundleSpec {
        cluster_name: args.cluster_name.clone(),
        controllers: args
            .controllers
            .iter()
            .map(|id| (*id, args.hosts.clone()))
            .collect(),
        agents,
        users,
    };
    corral_pki::write_dev_bundle(&args.dir, &spec)?;
    let mut files: Vec<String> = std::fs::read_dir(&args.dir)?
        .filter_map(|e| e.ok().map(|e| e.path().display().to_string()))
        .collect();
    files.sort();
    if json {
        super::print_json(&files)?;
    } else {
        for file in &files {
            println!("{file}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
