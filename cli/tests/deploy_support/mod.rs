//! Hosts for `deploy_e2e`: each a network namespace with its own address
//! on one bridge (this machine is 10.214.0.254 on it, the admin machine),
//! and a mount namespace of its own in which `/etc` (a copy of this
//! machine's), `/var/lib/corral`, `/usr/local/bin` and `/var/backups` are
//! directories of the host's own, so the runbook's commands run there as
//! written (`/var/lib/corral` is created empty on this machine where
//! missing: it is a mount point). `systemctl` is
//! `fixtures/deploy/systemctl`, which runs a unit's `ExecStart`.
//! Everything is removed when the [`Site`] is dropped.

#![allow(clippy::unwrap_used, dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// The directories each host has of its own: `/etc` starts as a copy of
/// this machine's (so `useradd` on a host changes that host's passwd only),
/// the others empty.
const PRIVATE: [&str; 4] = ["/etc", "/var/lib/corral", "/usr/local/bin", "/var/backups"];

/// The runbook's steps, by name (blocks opened with "```sh step=NAME").
pub fn runbook_steps(text: &str) -> BTreeMap<String, String> {
    let mut steps = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        match &mut current {
            None => {
                if let Some(name) = line.strip_prefix("```sh step=") {
                    current = Some((name.trim().to_string(), String::new()));
                }
            }
            Some((name, body)) => {
                if line.trim_start() == "```" {
                    steps.insert(name.clone(), std::mem::take(body));
                    current = None;
                } else {
                    body.push_str(line);
                    body.push('\n');
                }
            }
        }
    }
    steps
}

/// One host.
pub struct Host {
    /// Its name (`ctl1`).
    pub name: String,
    /// Its address.
    pub ip: String,
    /// Its network namespace.
    netns: String,
    /// The bridge side of its link.
    link: String,
    /// Where its private directories are, on this machine.
    pub root: PathBuf,
    /// The process that holds its mount namespace.
    holder: Child,
}

impl Host {
    /// Where `path` of this host is, seen from this machine (`/var/backups/x`).
    pub fn path(&self, path: &str) -> PathBuf {
        let (top, rest) = PRIVATE
            .iter()
            .find_map(|p| path.strip_prefix(p).map(|rest| (*p, rest)))
            .unwrap_or_else(|| panic!("{path} is not one of a host's own directories"));
        self.root
            .join(top.trim_start_matches('/').replace('/', "_"))
            .join(rest.trim_start_matches('/'))
    }

    /// Runs `script` in bash (errexit, pipefail) on this host with `env`.
    pub fn run(&self, script: &str, env: &[(&str, String)]) -> Output {
        let mut command = Command::new("nsenter");
        command
            .arg("--target")
            .arg(self.holder.id().to_string())
            .args([
                "--mount", "--net", "--", "bash", "-euo", "pipefail", "-c", script,
            ])
            .env(
                "PATH",
                format!(
                    "{}:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    self.root.join("sbin").display()
                ),
            );
        for (key, value) in env {
            command.env(key, value);
        }
        command.output().unwrap()
    }

    /// Runs `script` and panics, with its output, if it fails.
    pub fn ok(&self, script: &str, env: &[(&str, String)]) -> String {
        let out = self.run(script, env);
        assert!(
            out.status.success(),
            "on {}: {script}\nstdout: {}\nstderr: {}",
            self.name,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Takes the host's network away (its link down), or gives it back.
    pub fn set_network(&self, up: bool) {
        ip(&["link", "set", &self.link, if up { "up" } else { "down" }]);
    }

    /// A power cut: every process on the host is killed (but the one that
    /// holds its namespaces: the host is rebooted, not removed).
    pub fn crash(&self) {
        let pids = Command::new("ip")
            .args(["netns", "pids", &self.netns])
            .output()
            .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
            .unwrap_or_default();
        let holder = self.holder.id().to_string();
        for pid in pids.split_whitespace().filter(|p| *p != holder) {
            let _ = Command::new("kill").args(["-9", pid]).status();
        }
        let units = self.path("/var/lib/corral/.units");
        for entry in std::fs::read_dir(&units).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "pid") {
                let _ = std::fs::remove_file(&path);
            }
        }
    }

    /// The output of the host's unit `unit` so far.
    pub fn unit_log(&self, unit: &str) -> String {
        std::fs::read_to_string(self.path(&format!("/var/lib/corral/.units/{unit}.log")))
            .unwrap_or_default()
    }
}

/// The hosts of a test, on one bridge.
pub struct Site {
    /// The hosts, by name.
    pub hosts: BTreeMap<String, Host>,
    bridge: String,
    _dir: tempfile::TempDir,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Site {
    /// Hosts `(name, ip)` on 10.214.0.0/24, with `systemctl` from `fixture`.
    pub fn new(hosts: &[(&str, &str)], systemctl: &Path) -> Site {
        let dir = tempfile::tempdir().unwrap();
        let tag = std::process::id() % 10_000;
        let bridge = format!("cdb{tag}");
        ip(&["link", "add", &bridge, "type", "bridge"]);
        ip(&["addr", "add", "10.214.0.254/24", "dev", &bridge]);
        ip(&["link", "set", &bridge, "up"]);
        for top in PRIVATE {
            std::fs::create_dir_all(top).unwrap();
        }
        let mut site = Site {
            hosts: BTreeMap::new(),
            bridge: bridge.clone(),
            _dir: dir,
        };
        for (n, (name, address)) in hosts.iter().enumerate() {
            let netns = format!("cd{tag}-{name}");
            let link = format!("cd{tag}v{n}");
            let inside = format!("cd{tag}p{n}");
            ip(&["netns", "add", &netns]);
            ip(&[
                "link", "add", &link, "type", "veth", "peer", "name", &inside,
            ]);
            ip(&["link", "set", &inside, "netns", &netns]);
            ip(&["link", "set", &link, "master", &bridge]);
            ip(&["link", "set", &link, "up"]);
            let with_address = format!("{address}/24");
            for args in [
                ["addr", "add", with_address.as_str(), "dev", inside.as_str()].as_slice(),
                ["link", "set", inside.as_str(), "up"].as_slice(),
                ["link", "set", "lo", "up"].as_slice(),
            ] {
                let mut full = vec!["netns", "exec", netns.as_str(), "ip"];
                full.extend_from_slice(args);
                ip(&full);
            }
            let root = site._dir.path().join(name);
            let mut binds = String::new();
            for top in PRIVATE {
                let own = root.join(top.trim_start_matches('/').replace('/', "_"));
                if top == "/etc" {
                    std::fs::create_dir_all(&root).unwrap();
                    let copied = Command::new("cp")
                        .args(["-a", "/etc"])
                        .arg(&own)
                        .status()
                        .unwrap();
                    assert!(copied.success(), "cannot copy /etc for host {name}");
                    std::fs::create_dir_all(own.join("systemd/system")).unwrap();
                } else {
                    std::fs::create_dir_all(&own).unwrap();
                }
                binds.push_str(&format!("mount --bind {} {top}; ", own.display()));
            }
            std::fs::create_dir_all(root.join("sbin")).unwrap();
            std::fs::copy(systemctl, root.join("sbin/systemctl")).unwrap();
            let mut holder = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &netns,
                    "unshare",
                    "--mount",
                    "--propagation",
                    "private",
                ])
                .args([
                    "bash",
                    "-c",
                    &format!("{binds}echo ready; exec sleep infinity"),
                ])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let mut ready = String::new();
            BufReader::new(holder.stdout.take().unwrap())
                .read_line(&mut ready)
                .unwrap();
            assert_eq!(ready.trim(), "ready", "host {name} did not come up");
            site.hosts.insert(
                name.to_string(),
                Host {
                    name: name.to_string(),
                    ip: address.to_string(),
                    netns,
                    link,
                    root,
                    holder,
                },
            );
        }
        site
    }

    /// Host `name`.
    pub fn host(&self, name: &str) -> &Host {
        &self.hosts[name]
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        for host in self.hosts.values_mut() {
            host.crash();
            let _ = host.holder.kill();
            let _ = host.holder.wait();
            let _ = Command::new("ip")
                .args(["netns", "delete", &host.netns])
                .status();
            let _ = Command::new("ip")
                .args(["link", "delete", &host.link])
                .status();
        }
        let _ = Command::new("ip")
            .args(["link", "delete", &self.bridge])
            .status();
    }
}
