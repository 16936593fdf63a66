//! Slurm's command names: invoked through a link named `sbatch`, `squeue`,
//! `scancel`, `sinfo`, `sacct`, `scontrol`, `sacctmgr`, `salloc`, `sstat`, `sprio`, `sshare` or `srun`, corral
//! behaves as that command for its common options, by rewriting the command
//! line into the matching subcommand (`sinfo` and `sacct` with a hidden flag
//! that asks for Slurm's own default columns, `sbatch` with one that asks for
//! its refusals in sbatch's words). `scontrol`'s, `sacctmgr`'s, `salloc`'s,
//! `sstat`'s, `sprio`'s and `sshare`'s arguments follow a `--`, so they reach their own parsers
//! untouched.

use std::ffi::OsString;
use std::path::Path;

/// The names `corral shims` links.
pub const SHIM_NAMES: [&str; 12] = [
    "sbatch", "squeue", "scancel", "sinfo", "sacct", "scontrol", "sacctmgr", "salloc", "sstat",
    "sprio", "sshare", "srun",
];

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
    let subcommand: &[&str] = match name.as_str() {
        "sbatch" => &["submit", "--as-sbatch"],
        "squeue" => &["queue"],
        "scancel" => &["cancel"],
        "sinfo" => &["nodes", "--sinfo"],
        "sacct" => &["acct", "--sacct"],
        "scontrol" => &["scontrol", "--"],
        "sacctmgr" => &["sacctmgr", "--"],
        "salloc" => &["salloc", "--"],
        "sstat" => &["sstat", "--"],
        "sprio" => &["sprio", "--"],
        "sshare" => &["sshare", "--"],
        "srun" => &["srun"],
        _ => return Ok(args),
    };
    let mut rewritten = vec![OsString::from("corral")];
    rewritten.extend(subcommand.iter().map(OsString::from));
    let rest: Vec<OsString> = args.into_iter().skip(1).collect();
    if name == "srun" {
        rewritten.extend(crate::srun_slurm_options::carry(rest, srun_takes_value()));
    } else {
        rewritten.extend(rest);
    }
    Ok(rewritten)
}

/// Whether an option of corral's `srun` (`-N`, `--nodes`) takes its value as
/// the next word, read from its clap definition.
fn srun_takes_value() -> impl Fn(&str) -> bool {
    let mut command = <crate::args::Cli as clap::CommandFactory>::command();
    command.build();
    let mut valued = std::collections::HashSet::new();
    if let Some(srun) = command.find_subcommand("srun") {
        for arg in srun.get_arguments() {
            let takes = arg.get_action().takes_values()
                && arg.get_num_args().is_none_or(|n| n.min_values() > 0)
                && !arg.is_require_equals_set();
            if !takes {
                continue;
            }
            if let Some(long) = arg.get_long() {
                valued.insert(format!("--{long}"));
            }
            if let Some(short) = arg.get_short() {
                valued.insert(format!("-{short}"));
            }
        }
    }
    move |name: &str| valued.contains(name)
}

/// What srun prints for an option it does not know, and its exit status
/// (getopt's words, 255), when `original` (the command line as invoked) is the
/// `srun` link and clap refused an argument: scripts that probe for a plugin
/// (`srun --container-image=...`) take their fallback on it.
pub fn unrecognized_option(original: &[OsString], error: &clap::Error) -> Option<(String, u8)> {
    let program = Path::new(original.first()?).file_name()?.to_str()?;
    if program != "srun" || error.kind() != clap::error::ErrorKind::UnknownArgument {
        return None;
    }
    let invalid = match error.get(clap::error::ContextKind::InvalidArg)? {
        clap::error::ContextValue::String(arg) => arg.clone(),
        _ => return None,
    };
    // getopt names the whole argument, value included.
    let token = original
        .iter()
        .skip(1)
        .filter_map(|a| a.to_str())
        .find(|a| *a == invalid || a.starts_with(&format!("{invalid}=")))
        .unwrap_or(&invalid)
        .to_string();
    Some((
        format!("srun: unrecognized option '{token}'\nTry \"srun --help\" for more information"),
        255,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn srun_answers_an_unknown_option_in_getopts_words() {
        use clap::Parser;
        let original = os(&["/usr/bin/srun", "--container-image=nvcr.io/x", "true"]);
        let error = crate::args::Cli::try_parse_from(rewrite(original.clone()).unwrap())
            .expect_err("unknown option");
        assert_eq!(
            unrecognized_option(&original, &error),
            Some((
                "srun: unrecognized option '--container-image=nvcr.io/x'\nTry \"srun --help\" for more information".to_string(),
                255
            ))
        );
        // Not through the link: clap's own message.
        let corral = os(&["corral", "srun", "--container-image=x", "true"]);
        let error = crate::args::Cli::try_parse_from(corral.clone()).expect_err("unknown option");
        assert_eq!(unrecognized_option(&corral, &error), None);
    }

    #[test]
    fn slurm_names_become_subcommands() {
        assert_eq!(
            rewrite(os(&["/usr/bin/sbatch", "-N2", "train.sh"])).unwrap(),
            os(&["corral", "submit", "--as-sbatch", "-N2", "train.sh"])
        );
        assert_eq!(
            rewrite(os(&["squeue", "-u", "alice"])).unwrap(),
            os(&["corral", "queue", "-u", "alice"])
        );
        assert_eq!(
            rewrite(os(&["corral", "queue"])).unwrap(),
            os(&["corral", "queue"])
        );
        assert_eq!(
            rewrite(os(&["/opt/bin/scontrol", "-o", "show", "job", "12"])).unwrap(),
            os(&["corral", "scontrol", "--", "-o", "show", "job", "12"])
        );
        assert_eq!(
            rewrite(os(&["scontrol", "--help"])).unwrap(),
            os(&["corral", "scontrol", "--", "--help"])
        );
        assert_eq!(
            rewrite(os(&["srun", "hostname"])).unwrap(),
            os(&["corral", "srun", "hostname"])
        );
        // Slurm's srun options without a flag of corral's are carried; the
        // values of corral's own stay with them.
        assert_eq!(
            rewrite(os(&[
                "srun",
                "-N",
                "2",
                "--hint",
                "compute_bound",
                "-o",
                "-x",
                "hostname"
            ]))
            .unwrap(),
            os(&[
                "corral",
                "srun",
                "--slurm-option",
                "hint=compute_bound",
                "-N",
                "2",
                "-o",
                "-x",
                "hostname"
            ])
        );
        assert_eq!(
            rewrite(os(&["sinfo", "-N"])).unwrap(),
            os(&["corral", "nodes", "--sinfo", "-N"])
        );
        assert_eq!(
            rewrite(os(&["sacct", "-X"])).unwrap(),
            os(&["corral", "acct", "--sacct", "-X"])
        );
    }

    #[test]
    fn srun_options_stop_at_the_command() {
        use clap::Parser;
        let argv = rewrite(os(&[
            "srun",
            "-N1",
            "-l",
            "--ntasks-per-node",
            "2",
            "python",
            "-c",
            "x",
            "--json",
        ]))
        .unwrap();
        let cli = crate::args::Cli::try_parse_from(argv).unwrap();
        let crate::args::Command::Srun(args) = cli.command else {
            panic!("not srun: {:?}", cli.command);
        };
        assert!(args.label);
        assert_eq!(args.nodes, Some(1));
        assert_eq!(args.ntasks_per_node, Some(2));
        assert_eq!(args.command, ["python", "-c", "x", "--json"]);
        assert!(!cli.global.json);
    }

    #[test]
    fn scontrol_arguments_reach_its_parser_untouched() {
        use clap::Parser;
        let argv = rewrite(os(&["scontrol", "--json", "-h", "show", "job", "1"])).unwrap();
        let cli = crate::args::Cli::try_parse_from(argv).unwrap();
        let crate::args::Command::Scontrol { args } = cli.command else {
            panic!("not scontrol: {:?}", cli.command);
        };
        assert_eq!(args, ["--json", "-h", "show", "job", "1"]);
        assert!(!cli.global.json);
    }
}
