//! The rest of Slurm 22.05's srun options: those `SrunArgs` has no flag for.
//! Invoked as `srun`, each is taken out of the command line before clap reads
//! it and carried as `--slurm-option NAME[=VALUE]`, then:
//!
//! - an option srun shares with sbatch shapes the allocation srun creates
//!   outside a job, where sbatch's parser honours it, warns that it has no
//!   effect, or refuses it with a reason (inside a job it is ignored, and srun
//!   says so);
//! - an srun-only option is accepted with a warning where ignoring it is safe,
//!   or refused with the reason and what to do instead.
//!
//! Options no Slurm srun has (`--container-image`, a plugin's) stay on the
//! command line, so clap refuses them in getopt's words and scripts that probe
//! for a plugin take their fallback.

use std::ffi::OsString;

/// Whether an option takes a value (getopt's `has_arg`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arity {
    None,
    Required,
    Optional,
}

/// What srun does with an option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Passed to the allocation outside a job (sbatch's parser decides).
    Allocation,
    /// Accepted; it changes nothing here, for this reason.
    Ignored(&'static str),
    /// Refused: why, and what to do instead.
    Refused(&'static str),
}

/// One option.
struct SlurmOption {
    long: &'static str,
    short: Option<char>,
    arity: Arity,
    kind: Kind,
}

const fn option(long: &'static str, short: Option<char>, arity: Arity, kind: Kind) -> SlurmOption {
    SlurmOption {
        long,
        short,
        arity,
        kind,
    }
}

use Arity::{None as Flag, Optional, Required as Value};
use Kind::{Allocation, Ignored, Refused};

/// Slurm 22.05's srun options without a flag of their own in `SrunArgs`.
const OPTIONS: &[SlurmOption] = &[
    // Shared with sbatch: they shape the allocation.
    option("acctg-freq", None, Value, Allocation),
    option("bb", None, Value, Allocation),
    option("bbf", None, Value, Allocation),
    option("begin", Some('b'), Value, Allocation),
    option("cluster-constraint", None, Value, Allocation),
    option("clusters", Some('M'), Value, Allocation),
    option("container", None, Value, Allocation),
    option("contiguous", None, Flag, Allocation),
    option("core-spec", Some('S'), Value, Allocation),
    option("cores-per-socket", None, Value, Allocation),
    option("cpu-freq", None, Value, Allocation),
    option("cpus-per-gpu", None, Value, Allocation),
    option("deadline", None, Value, Allocation),
    option("delay-boot", None, Value, Allocation),
    option("extra-node-info", Some('B'), Value, Allocation),
    option("gid", None, Value, Allocation),
    option("gpu-freq", None, Value, Allocation),
    option("gpus-per-socket", None, Value, Allocation),
    option("gres-flags", None, Value, Allocation),
    option("hint", None, Value, Allocation),
    option("licenses", Some('L'), Value, Allocation),
    option("mail-type", None, Value, Allocation),
    option("mail-user", None, Value, Allocation),
    option("mcs-label", None, Value, Allocation),
    option("mem-bind", None, Value, Allocation),
    option("mincpus", None, Value, Allocation),
    option("network", None, Value, Allocation),
    option("nice", None, Optional, Allocation),
    option("no-kill", Some('k'), Optional, Allocation),
    option("nodefile", Some('F'), Value, Allocation),
    option("ntasks-per-core", None, Value, Allocation),
    option("ntasks-per-gpu", None, Value, Allocation),
    option("ntasks-per-socket", None, Value, Allocation),
    option("open-mode", None, Value, Allocation),
    option("overcommit", Some('O'), Flag, Allocation),
    option("oversubscribe", Some('s'), Flag, Allocation),
    option("power", None, Value, Allocation),
    option("prefer", None, Value, Allocation),
    option("priority", None, Value, Allocation),
    option("profile", None, Value, Allocation),
    option("propagate", None, Optional, Allocation),
    option("reboot", None, Flag, Allocation),
    option("signal", None, Value, Allocation),
    option("sockets-per-node", None, Value, Allocation),
    option("spread-job", None, Flag, Allocation),
    option("switches", None, Value, Allocation),
    option("thread-spec", None, Value, Allocation),
    option("threads-per-core", None, Value, Allocation),
    option("time-min", None, Value, Allocation),
    option("tmp", None, Value, Allocation),
    option("uid", None, Value, Allocation),
    option("use-min-nodes", None, Flag, Allocation),
    option("wckey", None, Value, Allocation),
    // srun's own.
    option(
        "accel-bind",
        None,
        Value,
        Ignored("corral does not bind tasks to accelerators"),
    ),
    option(
        "bcast",
        None,
        Optional,
        Ignored("the program is not copied: it must be on every node's path (shared storage)"),
    ),
    option(
        "bcast-exclude",
        None,
        Value,
        Ignored("the program is not copied"),
    ),
    option(
        "compress",
        None,
        Optional,
        Ignored("the program is not copied"),
    ),
    option(
        "disable-status",
        Some('X'),
        Flag,
        Ignored("Ctrl-C signals the tasks at once"),
    ),
    option(
        "exact",
        None,
        Flag,
        Ignored("steps share the job's resources"),
    ),
    option(
        "immediate",
        Some('I'),
        Optional,
        Ignored("srun waits for its allocation until it starts or is interrupted"),
    ),
    option(
        "msg-timeout",
        None,
        Value,
        Ignored("corral's links have their own timeouts"),
    ),
    option(
        "preserve-env",
        Some('E'),
        Flag,
        Ignored("the step's node and task counts come from its options and the job"),
    ),
    option(
        "quit-on-interrupt",
        None,
        Flag,
        Ignored("Ctrl-C signals the tasks; a second within a second ends srun"),
    ),
    option(
        "resv-ports",
        None,
        Optional,
        Ignored("corral reserves no communication ports"),
    ),
    option(
        "send-libs",
        None,
        Optional,
        Ignored("the program is not copied"),
    ),
    option(
        "slurmd-debug",
        None,
        Value,
        Ignored("agents log at their own level"),
    ),
    option(
        "threads",
        Some('T'),
        Value,
        Ignored("srun reaches the nodes through their agents"),
    ),
    option(
        "verbose",
        Some('v'),
        Flag,
        Ignored("srun prints its errors only"),
    ),
    option(
        "epilog",
        None,
        Value,
        Refused("corral runs no per-step epilog; run the program after srun in the script"),
    ),
    option(
        "prolog",
        None,
        Value,
        Refused("corral runs no per-step prolog; run the program before srun in the script"),
    ),
    option(
        "task-epilog",
        None,
        Value,
        Refused("corral runs no task epilog; wrap the program: srun sh -c 'PROGRAM; EPILOG'"),
    ),
    option(
        "task-prolog",
        None,
        Value,
        Refused("corral runs no task prolog; wrap the program: srun sh -c 'PROLOG; exec PROGRAM'"),
    ),
    option(
        "het-group",
        None,
        Value,
        Refused("corral has no heterogeneous jobs; run one srun per component"),
    ),
    option(
        "multi-prog",
        None,
        Flag,
        Refused("give one program that chooses by $SLURM_PROCID (e.g. a case in sh -c)"),
    ),
    option(
        "no-allocate",
        Some('Z'),
        Flag,
        Refused("steps always run in an allocation; submit one with sbatch or salloc"),
    ),
    option(
        "relative",
        Some('r'),
        Value,
        Refused("choose the step's nodes with -w/--nodelist"),
    ),
    option(
        "x11",
        None,
        Optional,
        Refused(
            "corral forwards no X11; run graphical programs through `ssh -X` to the job's node",
        ),
    ),
];

/// The hidden `srun` argument that carries each option taken out.
pub const CARRIER: &str = "--slurm-option";

/// Takes the options of [`OPTIONS`] out of srun's arguments (up to the
/// command, `--` or the first word that is no option) and puts each back as
/// `--slurm-option NAME[=VALUE]`; `takes_value(long, short)` says whether one
/// of srun's other options takes a value, so that its value is not read as
/// an option.
pub fn carry(args: Vec<OsString>, takes_value: impl Fn(&str) -> bool) -> Vec<OsString> {
    let mut kept: Vec<OsString> = Vec::with_capacity(args.len());
    let mut carried: Vec<OsString> = Vec::new();
    let mut carry_one = |long: &str, value: Option<String>| {
        carried.push(OsString::from(CARRIER));
        carried.push(OsString::from(match value {
            Some(value) => format!("{long}={value}"),
            None => long.to_string(),
        }));
    };
    let mut words = args.into_iter();
    while let Some(word) = words.next() {
        let Some(text) = word.to_str().map(str::to_string) else {
            kept.push(word);
            break;
        };
        if text == "--" || !text.starts_with('-') || text == "-" {
            kept.push(word);
            break;
        }
        if let Some(long) = text.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value.to_string())),
                None => (long, None),
            };
            match OPTIONS.iter().find(|o| o.long == name) {
                Some(found) => {
                    let value = match (found.arity, inline) {
                        (Arity::None, _) => None,
                        (_, Some(value)) => Some(value),
                        (Arity::Required, None) => words.next().and_then(|v| v.into_string().ok()),
                        (Arity::Optional, None) => None,
                    };
                    carry_one(found.long, value);
                }
                // One of SrunArgs's own, or unknown: left to clap, with its value.
                None => {
                    let separate = inline.is_none() && takes_value(&format!("--{name}"));
                    kept.push(word);
                    if separate && let Some(value) = words.next() {
                        kept.push(value);
                    }
                }
            }
            continue;
        }
        // A bundle of short options, read letter by letter as getopt does: a
        // letter that takes a value takes the rest of the word, or the next word.
        let letters: Vec<char> = text.chars().skip(1).collect();
        let mut at = 0;
        while let Some(&letter) = letters.get(at) {
            at += 1;
            let rest: String = letters[at..].iter().collect();
            let value_taken = match OPTIONS.iter().find(|o| o.short == Some(letter)) {
                Some(found) if found.arity == Arity::None => {
                    carry_one(found.long, None);
                    false
                }
                Some(found) => {
                    let value = if !rest.is_empty() {
                        Some(rest)
                    } else if found.arity == Arity::Required {
                        words.next().and_then(|v| v.into_string().ok())
                    } else {
                        None
                    };
                    carry_one(found.long, value);
                    true
                }
                None if takes_value(&format!("-{letter}")) => {
                    kept.push(OsString::from(format!("-{letter}")));
                    if rest.is_empty() {
                        if let Some(value) = words.next() {
                            kept.push(value);
                        }
                    } else {
                        kept.push(OsString::from(rest));
                    }
                    true
                }
                None => {
                    kept.push(OsString::from(format!("-{letter}")));
                    false
                }
            };
            if value_taken {
                break;
            }
        }
    }
    carried.extend(kept);
    carried.extend(words);
    carried
}

/// What srun does with the carried options: the allocation options they add
/// (outside a job), the warnings to print, or the refusal of the first
/// refused one.
#[derive(Debug)]
pub struct Decided {
    /// sbatch options for a new allocation (`--hint=nomultithread`).
    pub allocation: Vec<String>,
    /// Warnings, one line each, with `srun: warning: `.
    pub warnings: Vec<String>,
}

/// Decides the carried options (`NAME[=VALUE]`) for an srun inside a job
/// (`in_job`) or outside; `Err` is srun's refusal line.
pub fn decide(carried: &[String], in_job: bool) -> Result<Decided, String> {
    let mut decided = Decided {
        allocation: Vec::new(),
        warnings: Vec::new(),
    };
    for text in carried {
        let name = text.split('=').next().unwrap_or(text);
        let Some(found) = OPTIONS.iter().find(|o| o.long == name) else {
            continue;
        };
        match found.kind {
            Allocation if in_job => decided.warnings.push(format!(
                "srun: warning: --{name} is ignored: it shapes a new allocation, and this srun runs in an existing one"
            )),
            Allocation => decided.allocation.push(format!("--{text}")),
            Ignored(why) => decided
                .warnings
                .push(format!("srun: warning: --{name} is ignored: {why}")),
            Refused(why) => {
                return Err(format!(
                    "srun: error: corral does not support --{name}: {why}"
                ));
            }
        }
    }
    Ok(decided)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    fn takes_value(name: &str) -> bool {
        ["-N", "--nodes", "-n", "--ntasks", "-o", "--output", "-p"].contains(&name)
    }

    #[test]
    fn options_are_carried_up_to_the_command_with_their_values() {
        let carried = carry(
            os(&[
                "-N",
                "2",
                "--hint=nomultithread",
                "-b",
                "now",
                "-O",
                "--label",
                "python",
                "--hint",
                "x",
            ]),
            takes_value,
        );
        assert_eq!(
            carried,
            os(&[
                CARRIER,
                "hint=nomultithread",
                CARRIER,
                "begin=now",
                CARRIER,
                "overcommit",
                "-N",
                "2",
                "--label",
                "python",
                "--hint",
                "x",
            ])
        );
        // Bundles, as getopt reads them: `-lN 2`, `-Ol`, `-N2`, `-vv`.
        assert_eq!(
            carry(
                os(&["-lN", "2", "-Ol", "-vv", "-N2", "--hint", "x", "cmd"]),
                takes_value
            ),
            os(&[
                CARRIER,
                "overcommit",
                CARRIER,
                "verbose",
                CARRIER,
                "verbose",
                CARRIER,
                "hint=x",
                "-l",
                "-N",
                "2",
                "-l",
                "-N",
                "2",
                "cmd",
            ])
        );
        // A value that starts with '-' stays with its option; `--` ends it all.
        assert_eq!(
            carry(os(&["-o", "-x", "--", "--hint=x"]), takes_value),
            os(&["-o", "-x", "--", "--hint=x"])
        );
        // A plugin's option stays for clap to refuse in getopt's words.
        let untouched = os(&["--container-image=x", "true"]);
        assert_eq!(carry(untouched.clone(), takes_value), untouched);
    }

    /// Every long option of Slurm 22.05's srun man page.
    const SLURM_22_05_SRUN_OPTIONS: &[&str] = &[
        "accel-bind",
        "account",
        "acctg-freq",
        "bb",
        "bbf",
        "bcast",
        "bcast-exclude",
        "begin",
        "chdir",
        "cluster-constraint",
        "clusters",
        "comment",
        "compress",
        "constraint",
        "container",
        "contiguous",
        "core-spec",
        "cores-per-socket",
        "cpu-bind",
        "cpu-freq",
        "cpus-per-gpu",
        "cpus-per-task",
        "deadline",
        "delay-boot",
        "dependency",
        "disable-status",
        "distribution",
        "epilog",
        "error",
        "exact",
        "exclude",
        "exclusive",
        "export",
        "extra-node-info",
        "gid",
        "gpu-bind",
        "gpu-freq",
        "gpus",
        "gpus-per-node",
        "gpus-per-socket",
        "gpus-per-task",
        "gres",
        "gres-flags",
        "help",
        "het-group",
        "hint",
        "immediate",
        "input",
        "job-name",
        "jobid",
        "kill-on-bad-exit",
        "label",
        "licenses",
        "mail-type",
        "mail-user",
        "mcs-label",
        "mem",
        "mem-bind",
        "mem-per-cpu",
        "mem-per-gpu",
        "mincpus",
        "mpi",
        "msg-timeout",
        "multi-prog",
        "network",
        "nice",
        "no-allocate",
        "no-kill",
        "nodefile",
        "nodelist",
        "nodes",
        "ntasks",
        "ntasks-per-core",
        "ntasks-per-gpu",
        "ntasks-per-node",
        "ntasks-per-socket",
        "open-mode",
        "output",
        "overcommit",
        "overlap",
        "oversubscribe",
        "partition",
        "power",
        "prefer",
        "preserve-env",
        "priority",
        "profile",
        "prolog",
        "propagate",
        "pty",
        "qos",
        "quiet",
        "quit-on-interrupt",
        "reboot",
        "relative",
        "reservation",
        "resv-ports",
        "send-libs",
        "signal",
        "slurmd-debug",
        "sockets-per-node",
        "spread-job",
        "switches",
        "task-epilog",
        "task-prolog",
        "test-only",
        "thread-spec",
        "threads",
        "threads-per-core",
        "time",
        "time-min",
        "tmp",
        "uid",
        "unbuffered",
        "usage",
        "use-min-nodes",
        "verbose",
        "version",
        "wait",
        "wckey",
        "x11",
    ];

    #[test]
    fn every_option_of_srun_s_man_page_is_corral_s_or_in_the_table() {
        let mut command = <crate::args::Cli as clap::CommandFactory>::command();
        command.build();
        let srun = command.find_subcommand("srun").expect("srun");
        let own: Vec<&str> = srun.get_arguments().filter_map(|a| a.get_long()).collect();
        for long in SLURM_22_05_SRUN_OPTIONS {
            if ["help", "usage", "version"].contains(long) {
                continue;
            }
            let known = own.contains(long) || OPTIONS.iter().any(|o| o.long == *long);
            assert!(known, "--{long} is neither srun's nor in the table");
        }
    }

    #[test]
    fn shared_options_shape_the_allocation_outside_a_job_and_are_ignored_inside() {
        let carried = ["hint=nomultithread".to_string(), "exact".to_string()];
        let outside = decide(&carried, false).unwrap();
        assert_eq!(outside.allocation, ["--hint=nomultithread"]);
        assert_eq!(outside.warnings.len(), 1);
        assert!(outside.warnings[0].contains("--exact is ignored"));
        let inside = decide(&carried, true).unwrap();
        assert!(inside.allocation.is_empty());
        assert!(inside.warnings[0].contains("this srun runs in an existing one"));
        let refused = decide(&["multi-prog".to_string()], true).unwrap_err();
        assert!(refused.starts_with("srun: error: corral does not support --multi-prog: "));
    }
}
