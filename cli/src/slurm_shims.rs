//! Slurm's command names: invoked through a link named `sbatch`, `squeue`,
//! `scancel`, `sinfo`, `sacct` or `srun`, corral behaves as that command for its
//! common options, by rewriting the command line into the matching subcommand.

use std::ffi::OsString;
use std::path::Path;

/// The names `corral shims` links.
pub const SHIM_NAMES: [&str; 6] = ["sbatch", "squeue", "scancel", "sinfo", "sacct", "srun"];

/// The command line as corral reads it: unchanged when invoked as `corral`,
/// rewritten to the subcommand when invoked under a Slurm name. `Err` carries a
/// message for Slurm commands corral cannot serve yet.
pub fn rewrite(args: Vec<OsString>) -> Result<Vec<OsString>, String> {
    let Some(program) = args.first() else {
        return Ok(args);
    };
    let name = Path::new(program)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("corral")
        .to_string();
    let subcommand = match name.as_str() {
        "sbatch" => "submit",
        "squeue" => "queue",
        "scancel" => "cancel",
        "sinfo" => "nodes",
        "sacct" => "acct",
        "srun" => {
            return Err(
                "srun: job steps run through the node agent, which is not built yet in corral; \
                 run the command directly in the batch script for now"
                    .into(),
            );
        }
        _ => return Ok(args),
    };
    let mut rewritten = vec![OsString::from("corral"), OsString::from(subcommand)];
    rewritten.extend(args.into_iter().skip(1));
    Ok(rewritten)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn slurm_names_become_subcommands() {
        assert_eq!(
            rewrite(os(&["/usr/bin/sbatch", "-N2", "train.sh"])).unwrap(),
            os(&["corral", "submit", "-N2", "train.sh"])
        );
        assert_eq!(
            rewrite(os(&["squeue", "-u", "alice"])).unwrap(),
            os(&["corral", "queue", "-u", "alice"])
        );
        assert_eq!(
            rewrite(os(&["corral", "queue"])).unwrap(),
            os(&["corral", "queue"])
        );
        assert!(
            rewrite(os(&["srun", "hostname"]))
                .unwrap_err()
                .contains("node agent")
        );
    }
}
