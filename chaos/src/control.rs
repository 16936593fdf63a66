//! How faults reach the cluster's processes. On a local cluster (`corral
//! local up`): signals to the pids it recorded, `corral local start`, `corral
//! local cut`/`heal` between network namespaces, `corral local xid`. On an
//! existing deployment: the commands the operator allowed with
//! `--nemesis-exec NAME=COMMAND`, run with `sh -c` after their placeholders
//! (`{host}`, `{id}`, `{node}`, `{peer}`, `{gpu}`, `{xid}`) are filled in.
//! A fault whose commands were not given is skipped, saying which to give.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// What to do to one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// SIGKILL.
    Kill,
    /// A service stop (SIGTERM), waiting until it is gone.
    Stop,
    /// SIGSTOP.
    Pause,
    /// SIGCONT.
    Resume,
    /// Start it again (from its disk).
    Start,
}

impl Act {
    fn verb(self) -> &'static str {
        match self {
            Act::Kill => "kill",
            Act::Stop => "stop",
            Act::Pause => "pause",
            Act::Resume => "resume",
            Act::Start => "start",
        }
    }
}

/// The `--nemesis-exec` names.
const NAMES: &[&str] = &[
    "kill-controller",
    "stop-controller",
    "start-controller",
    "pause-controller",
    "resume-controller",
    "kill-agent",
    "start-agent",
    "pause-agent",
    "resume-agent",
    "cut",
    "heal",
    "xid",
    "stall-disk",
    "unstall-disk",
];

/// The `--nemesis-exec` names with their placeholders, for help and errors.
pub const EXEC_NAMES: &str = "kill-controller, stop-controller, start-controller, \
    pause-controller, resume-controller, kill-agent, start-agent, pause-agent, resume-agent \
    ({host} and {id} or {node}), cut ({host}, {peer}: drop packets from and to peer on host), \
    heal ({host}), xid ({host}, {node}, {gpu}, {xid}), stall-disk and unstall-disk ({host}, \
    {id}, {bytes_per_s}: throttle a controller's writes to its data disk, and stop)";

/// A controller whose disk writes are stalled, until
/// [`Control::unstall_disk`].
pub enum DiskStall {
    /// Throttled by this run (see `disk_stall`).
    Local(crate::disk_stall::Stall),
    /// Throttled by the operator's `stall-disk` command.
    Exec(String),
}

/// How faults reach the processes.
pub enum Control {
    /// A local cluster in `dir`, started by this run.
    Local {
        /// The `corral` binary.
        corral: PathBuf,
        /// The cluster's directory.
        dir: PathBuf,
    },
    /// An existing deployment.
    Exec {
        /// Commands by name (`kill-controller`).
        commands: BTreeMap<String, String>,
        /// Each process's host (`controller-1` → `ctl1.example`).
        hosts: BTreeMap<String, String>,
    },
}

impl Control {
    /// Parses `--nemesis-exec NAME=COMMAND` arguments.
    pub fn exec_commands(pairs: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
        pairs
            .iter()
            .map(|pair| {
                let (name, command) = pair.split_once('=').with_context(|| {
                    format!("--nemesis-exec {pair}: give NAME=COMMAND (names: {EXEC_NAMES})")
                })?;
                if !NAMES.contains(&name) {
                    bail!(
                        "--nemesis-exec: no fault command is called {name} (names: {EXEC_NAMES})"
                    );
                }
                Ok((name.to_string(), command.to_string()))
            })
            .collect()
    }

    /// Why `needs` cannot be done here, if it cannot: the commands it would
    /// run were not given.
    pub fn missing(&self, needs: &[&str]) -> Option<String> {
        let Control::Exec { commands, .. } = self else {
            return None;
        };
        let missing: Vec<&str> = needs
            .iter()
            .copied()
            .filter(|name| !commands.contains_key(*name))
            .collect();
        (!missing.is_empty()).then(|| {
            format!(
                "give --nemesis-exec {} to inject it into this deployment",
                missing
                    .iter()
                    .map(|m| format!("{m}='...'"))
                    .collect::<Vec<_>>()
                    .join(" --nemesis-exec ")
            )
        })
    }

    /// A host that two processes of a deployment share, if one does: cuts
    /// are made between hosts, so such processes cannot be parted.
    pub fn shared_host(&self) -> Option<String> {
        let Control::Exec { hosts, .. } = self else {
            return None;
        };
        let mut seen = std::collections::BTreeSet::new();
        hosts.values().find(|h| !seen.insert(*h)).cloned()
    }

    /// Does `act` to process `name` (`controller-2`, `agent-gpu01`).
    pub fn act(&self, act: Act, name: &str) -> anyhow::Result<()> {
        match self {
            Control::Local { corral, dir } => match act {
                Act::Kill => signal(dir, name, Signal::SIGKILL),
                Act::Pause => signal(dir, name, Signal::SIGSTOP),
                Act::Resume => signal(dir, name, Signal::SIGCONT),
                Act::Stop => {
                    signal(dir, name, Signal::SIGTERM)?;
                    wait_gone(dir, name, Duration::from_secs(20))
                }
                Act::Start => local(corral, dir, &["start", name]),
            },
            Control::Exec { .. } => {
                let (kind, key, value) = match name.strip_prefix("controller-") {
                    Some(id) => ("controller", "id", id),
                    None => ("agent", "node", name.strip_prefix("agent-").unwrap_or(name)),
                };
                let host = self.host(name)?;
                self.exec(
                    &format!("{}-{kind}", act.verb()),
                    &[("host", host.as_str()), (key, value)],
                )
            }
        }
    }

    /// Starts process `name` of a local cluster with extra environment (a
    /// skewed clock); not possible on a deployment.
    pub fn start_with_env(&self, name: &str, env: &[String]) -> anyhow::Result<()> {
        let Control::Local { corral, dir } = self else {
            bail!("starting {name} with another environment is possible on a local cluster only");
        };
        let mut args = vec!["start", name];
        for pair in env {
            args.extend(["--env", pair.as_str()]);
        }
        local(corral, dir, &args)
    }

    /// Drops every packet between each process of `one` and each of `other`.
    pub fn cut(&self, one: &[String], other: &[String]) -> anyhow::Result<()> {
        match self {
            Control::Local { corral, dir } => local(
                corral,
                dir,
                &["cut", &one.join(","), "--from", &other.join(",")],
            ),
            Control::Exec { .. } => {
                for a in one {
                    for b in other {
                        let (ha, hb) = (self.host(a)?, self.host(b)?);
                        self.exec("cut", &[("host", ha.as_str()), ("peer", hb.as_str())])?;
                        self.exec("cut", &[("host", hb.as_str()), ("peer", ha.as_str())])?;
                    }
                }
                Ok(())
            }
        }
    }

    /// Lifts every cut.
    pub fn heal(&self) -> anyhow::Result<()> {
        match self {
            Control::Local { corral, dir } => local(corral, dir, &["heal"]),
            Control::Exec { hosts, .. } => {
                let mut healed: Vec<&String> = hosts.values().collect();
                healed.sort();
                healed.dedup();
                for host in healed {
                    self.exec("heal", &[("host", host.as_str())])?;
                }
                Ok(())
            }
        }
    }

    /// An XID on GPU `gpu` of `node`.
    pub fn xid(&self, node: &str, gpu: u32, xid: u32) -> anyhow::Result<()> {
        match self {
            Control::Local { corral, dir } => local(
                corral,
                dir,
                &[
                    "xid",
                    "--node",
                    node,
                    "--gpu",
                    &gpu.to_string(),
                    "--xid",
                    &xid.to_string(),
                ],
            ),
            Control::Exec { .. } => {
                let host = self.host(&format!("agent-{node}"))?;
                let (gpu, xid) = (gpu.to_string(), xid.to_string());
                self.exec(
                    "xid",
                    &[
                        ("host", host.as_str()),
                        ("node", node),
                        ("gpu", &gpu),
                        ("xid", &xid),
                    ],
                )
            }
        }
    }

    /// Throttles the disk writes of controller `name` (its write-ahead log)
    /// to `bytes_per_s`.
    pub fn stall_disk(&self, name: &str, bytes_per_s: u64) -> anyhow::Result<DiskStall> {
        match self {
            Control::Local { dir, .. } => {
                let data = dir.join(name).join("data");
                Ok(DiskStall::Local(crate::disk_stall::begin(
                    pid(dir, name)?,
                    &data,
                    bytes_per_s,
                )?))
            }
            Control::Exec { .. } => {
                let host = self.host(name)?;
                let id = name.strip_prefix("controller-").unwrap_or(name);
                let rate = bytes_per_s.to_string();
                self.exec(
                    "stall-disk",
                    &[("host", host.as_str()), ("id", id), ("bytes_per_s", &rate)],
                )?;
                Ok(DiskStall::Exec(name.to_string()))
            }
        }
    }

    /// The log file of process `name` (`controller-2`), where this run can
    /// read it: a local cluster's.
    pub fn log_path(&self, name: &str) -> Option<PathBuf> {
        match self {
            Control::Local { dir, .. } => Some(dir.join("logs").join(format!("{name}.log"))),
            Control::Exec { .. } => None,
        }
    }

    /// Lets a stalled controller write again.
    pub fn unstall_disk(&self, stall: DiskStall) -> anyhow::Result<()> {
        match stall {
            DiskStall::Local(stall) => stall.heal(),
            DiskStall::Exec(name) => {
                let host = self.host(&name)?;
                let id = name.strip_prefix("controller-").unwrap_or(&name);
                self.exec("unstall-disk", &[("host", host.as_str()), ("id", id)])
            }
        }
    }

    fn host(&self, name: &str) -> anyhow::Result<String> {
        match self {
            Control::Exec { hosts, .. } => hosts
                .get(name)
                .cloned()
                .with_context(|| format!("the deployment has no process called {name}")),
            Control::Local { .. } => Ok("localhost".into()),
        }
    }

    fn exec(&self, name: &str, values: &[(&str, &str)]) -> anyhow::Result<()> {
        let Control::Exec { commands, .. } = self else {
            bail!("{name}: no commands on a local cluster");
        };
        let template = commands
            .get(name)
            .with_context(|| format!("no --nemesis-exec {name}='...' was given"))?;
        let command = fill(template, values);
        let out = Command::new("sh")
            .args(["-c", &command])
            .output()
            .with_context(|| format!("running {command}"))?;
        if !out.status.success() {
            bail!(
                "{command} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }
}

/// `template` with each `{key}` replaced by its value, shell-quoted (a host
/// or node name from the cluster's replies is never run as shell code), in
/// one pass (a value holding `{id}` is not filled in again). Unknown
/// `{words}` are left as they are.
fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let known = after.find('}').and_then(|close| {
            let key = &after[..close];
            values
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, value)| (close, *value))
        });
        match known {
            Some((close, value)) => {
                out.push_str(&shell_quote(value));
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// `value` as one shell word: bare when it is plain, else single-quoted.
fn shell_quote(value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:/@%+=,".contains(c));
    if plain {
        value.to_string()
    } else {
        format!("'{}'", value.replace('\'', "'\\''"))
    }
}

/// `corral local ARGS --dir DIR`.
fn local(corral: &Path, dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new(corral)
        .arg("local")
        .arg(args[0])
        .arg("--dir")
        .arg(dir)
        .args(&args[1..])
        .output()
        .with_context(|| format!("running corral local {}", args[0]))?;
    if !out.status.success() {
        bail!(
            "corral local {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// The pid of local process `name`.
fn pid(dir: &Path, name: &str) -> anyhow::Result<i32> {
    let path = dir.join("pids").join(format!("{name}.pid"));
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text.trim().parse()?)
}

/// Sends `signal` to local process `name`.
pub fn signal(dir: &Path, name: &str, signal: Signal) -> anyhow::Result<()> {
    let pid = pid(dir, name)?;
    kill(Pid::from_raw(pid), signal).with_context(|| format!("{signal} to {name} (pid {pid})"))
}

/// Whether local process `name` runs.
fn alive(dir: &Path, name: &str) -> bool {
    pid(dir, name).is_ok_and(|pid| kill(Pid::from_raw(pid), None).is_ok() && !zombie(pid))
}

/// Whether `pid` has exited but not been reaped.
fn zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

/// Waits until local process `name` is gone.
fn wait_gone(dir: &Path, name: &str, patience: Duration) -> anyhow::Result<()> {
    let until = Instant::now() + patience;
    while alive(dir, name) {
        if Instant::now() > until {
            bail!("{name} did not stop within {patience:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_and_unknown_names_refused() {
        assert_eq!(
            fill(
                "ssh {host} systemctl kill -s KILL corrald@{id}",
                &[("host", "ctl2"), ("id", "2")]
            ),
            "ssh ctl2 systemctl kill -s KILL corrald@2"
        );
        // Values are quoted and never filled in again; unknown braces stay.
        assert_eq!(
            fill(
                "x {node} {id} {other}",
                &[("node", "a;rm -rf /{id}"), ("id", "1")]
            ),
            "x 'a;rm -rf /{id}' 1 {other}"
        );
        assert_eq!(fill("{host}", &[("host", "it's")]), "'it'\\''s'");
        let parsed =
            Control::exec_commands(&["kill-controller=ssh {host} pkill -9 corrald".into()])
                .expect("parsed");
        assert_eq!(parsed["kill-controller"], "ssh {host} pkill -9 corrald");
        assert!(Control::exec_commands(&["explode=true".into()]).is_err());
        assert!(Control::exec_commands(&["kill-controller".into()]).is_err());
        let control = Control::Exec {
            commands: parsed,
            hosts: BTreeMap::new(),
        };
        assert_eq!(control.missing(&["kill-controller"]), None);
        let why = control.missing(&["kill-controller", "start-controller"]);
        assert!(why.is_some_and(|w| w.contains("start-controller='...'")));
    }

    #[test]
    fn commands_run_with_their_placeholders_filled() {
        let dir = tempfile::tempdir().expect("dir");
        let marker = dir.path().join("marker");
        let control = Control::Exec {
            commands: BTreeMap::from([(
                "pause-agent".to_string(),
                format!("echo {{host}} {{node}} > {}", marker.display()),
            )]),
            hosts: BTreeMap::from([("agent-gpu07".to_string(), "node7.example".to_string())]),
        };
        control.act(Act::Pause, "agent-gpu07").expect("ran");
        let written = std::fs::read_to_string(&marker).expect("marker");
        assert_eq!(written.trim(), "node7.example gpu07");
        assert!(
            control.act(Act::Resume, "agent-gpu07").is_err(),
            "not given"
        );
    }
}
