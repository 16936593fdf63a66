//! A local cluster on its own network (`corral local up --netns`, as root):
//! every controller and agent in a network namespace of its own, each joined
//! by a veth pair to one private bridge that also carries this machine's
//! address on that subnet (so the CLI, run here, reaches every member).
//!
//! That makes real network faults possible between chosen members:
//! `corral local cut A B` drops, with iptables in each member's namespace,
//! every packet between each process of A and each of B, both ways, as a
//! failed link or switch would (silently: established connections are left to
//! time out, new ones never answer); `corral local heal` lifts every cut. The
//! machine itself is never cut off, so clients can still reach an isolated
//! leader, as they can in a real partition of the cluster's own network.
//!
//! The layout is kept in `DIR/network.json`; `corral local down` removes the
//! namespaces and the bridge. Names are short (`crl17`, `crl17-c1`) because
//! Linux allows 15 characters for an interface.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

/// The first two octets of every local cluster's subnet: `10.213.K.0/24`.
const SUBNET_PREFIX: [u8; 2] = [10, 213];
/// Members a /24 holds besides the bridge's own address.
pub const MAX_MEMBERS: usize = 250;

/// A local cluster's network: its bridge and each member's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Network {
    /// The bridge's name, also the prefix of every namespace and veth.
    pub bridge: String,
    /// This machine's address on the bridge.
    pub host: Ipv4Addr,
    /// Each process (`controller-1`, `agent-gpu01`) and where it lives.
    pub members: BTreeMap<String, Member>,
}

/// One process's place on the network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Its network namespace (`/run/netns/NAME`).
    pub netns: String,
    /// The bridge's end of its veth pair.
    pub veth: String,
    /// Its address.
    pub ip: Ipv4Addr,
}

fn record_path(dir: &Path) -> PathBuf {
    dir.join("network.json")
}

impl Network {
    /// Creates a network for `names` on subnet `10.213.K.0/24`, with the
    /// first K (from `start`, wrapping) that no interface or namespace of this
    /// machine uses, and records it in `dir`. Creating the bridge claims K, so
    /// clusters started at the same time take different ones.
    pub fn create(dir: &Path, names: &[String], start: u8) -> anyhow::Result<Network> {
        if names.len() > MAX_MEMBERS {
            bail!(
                "--netns gives each process an address on one /24: at most {MAX_MEMBERS} \
                 controllers and nodes together"
            );
        }
        let used = ip_output(&["-4", "-o", "addr", "show"])?;
        let links = ip_output(&["-o", "link", "show"])?;
        let namespaces = ip_output(&["netns", "list"])?;
        for k in (0..=255u8).map(|i| start.wrapping_add(i)) {
            let prefix = format!(" {}.{}.{k}.", SUBNET_PREFIX[0], SUBNET_PREFIX[1]);
            let bridge = format!("crl{k}");
            let taken = used.contains(&prefix)
                || links.contains(&format!(": {bridge}"))
                || namespaces
                    .lines()
                    .any(|ns| ns.starts_with(&format!("{bridge}-")));
            if taken || ip(&["link", "add", &bridge, "type", "bridge"]).is_err() {
                continue;
            }
            let network = Network::layout(names, k);
            let recorded = serde_json::to_string_pretty(&network)
                .map_err(anyhow::Error::from)
                .and_then(|text| {
                    std::fs::write(record_path(dir), text)
                        .with_context(|| format!("cannot write {}", record_path(dir).display()))
                });
            if let Err(error) = recorded {
                let _ = ip(&["link", "del", &bridge]);
                return Err(error);
            }
            // A failure from here on is undone by `down`, which reads the record.
            network.connect()?;
            return Ok(network);
        }
        bail!(
            "every 10.213.K.0/24 subnet is in use on this machine: stop other local clusters \
             (`corral local down`)"
        )
    }

    /// The layout of `names` on subnet `10.213.K.0/24`: the bridge at `.1`,
    /// the members from `.2` in order.
    fn layout(names: &[String], subnet: u8) -> Network {
        let bridge = format!("crl{subnet}");
        let address = |host: u8| Ipv4Addr::new(SUBNET_PREFIX[0], SUBNET_PREFIX[1], subnet, host);
        let members = names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let host = u8::try_from(i + 2).unwrap_or(u8::MAX);
                (
                    name.clone(),
                    Member {
                        netns: format!("{bridge}-{name}"),
                        veth: veth_name(&bridge, name, i),
                        ip: address(host),
                    },
                )
            })
            .collect();
        Network {
            host: address(1),
            bridge,
            members,
        }
    }

    /// Brings up the (created) bridge and every member's namespace and link.
    fn connect(&self) -> anyhow::Result<()> {
        let host = format!("{}/24", self.host);
        ip(&["addr", "add", &host, "dev", &self.bridge])?;
        ip(&["link", "set", &self.bridge, "up"])?;
        for member in self.members.values() {
            let ns = member.netns.as_str();
            let address = format!("{}/24", member.ip);
            ip(&["netns", "add", ns])?;
            ip(&[
                "link",
                "add",
                &member.veth,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                ns,
            ])?;
            ip(&["link", "set", &member.veth, "master", &self.bridge, "up"])?;
            ip(&["-n", ns, "addr", "add", &address, "dev", "eth0"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            ip(&["-n", ns, "link", "set", "eth0", "up"])?;
        }
        Ok(())
    }

    /// The network recorded in `dir`, if the cluster there has one.
    pub fn load(dir: &Path) -> anyhow::Result<Option<Network>> {
        let path = record_path(dir);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(
                serde_json::from_str(&text)
                    .with_context(|| format!("reading {}", path.display()))?,
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    /// Removes the namespaces and the bridge, and the record in `dir`.
    pub fn remove(&self, dir: &Path) {
        for member in self.members.values() {
            let _ = Command::new("ip")
                .args(["netns", "del", &member.netns])
                .output();
            let _ = Command::new("ip")
                .args(["link", "del", &member.veth])
                .output();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .output();
        let _ = std::fs::remove_file(record_path(dir));
    }

    /// The member `name`, or an error naming the ones there are.
    pub fn member(&self, name: &str) -> anyhow::Result<&Member> {
        self.members.get(name).with_context(|| {
            format!(
                "no process named {name} in this cluster's network (there are: {})",
                self.members.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        })
    }

    /// Drops every packet between each process of `one` and each of `other`,
    /// both ways. Cuts add up until [`Network::heal`].
    pub fn cut(&self, one: &[String], other: &[String]) -> anyhow::Result<()> {
        // Every name checked before any rule is added.
        for name in one.iter().chain(other) {
            self.member(name)?;
        }
        if let Some(both) = one.iter().find(|a| other.contains(a)) {
            bail!("{both} is on both sides of the cut");
        }
        for a in one {
            for b in other {
                let (a, b) = (self.member(a)?, self.member(b)?);
                for (here, there) in [(a, b), (b, a)] {
                    let peer = there.ip.to_string();
                    iptables(&here.netns, &["-A", "INPUT", "-s", &peer, "-j", "DROP"])?;
                    iptables(&here.netns, &["-A", "OUTPUT", "-d", &peer, "-j", "DROP"])?;
                }
            }
        }
        Ok(())
    }

    /// Lifts every cut (in every namespace, even after one fails).
    pub fn heal(&self) -> anyhow::Result<()> {
        let failed: Vec<String> = self
            .members
            .values()
            .filter_map(|member| iptables(&member.netns, &["-F"]).err())
            .map(|e| format!("{e:#}"))
            .collect();
        if !failed.is_empty() {
            bail!("some cuts remain: {}", failed.join("; "));
        }
        Ok(())
    }
}

/// `controller-1` → `c1`, `agent-gpu01` → `gpu01`: the part of a veth's name
/// after the bridge's.
/// The host end of member `index`'s link: `crl7-c1`, `crl7-gpu01`, or by
/// index (`crl7-m12`) when the name would pass Linux's 15 characters.
fn veth_name(bridge: &str, name: &str, index: usize) -> String {
    let named = format!("{bridge}-{}", short_name(name));
    if named.len() <= MAX_INTERFACE_NAME {
        named
    } else {
        format!("{bridge}-m{index}")
    }
}

/// The longest interface name Linux takes (IFNAMSIZ less its NUL).
const MAX_INTERFACE_NAME: usize = 15;

fn short_name(name: &str) -> String {
    if let Some(id) = name.strip_prefix("controller-") {
        format!("c{id}")
    } else {
        name.strip_prefix("agent-").unwrap_or(name).to_string()
    }
}

/// Whether this machine can give a cluster its own network: root, with `ip`,
/// `iptables` and `nsenter`. The error says what is missing.
pub fn check_support() -> anyhow::Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("--netns creates network namespaces and a bridge, which needs root");
    }
    for (program, package) in [
        ("ip", "iproute2"),
        ("iptables", "iptables"),
        ("nsenter", "util-linux"),
    ] {
        let found = Command::new(program).arg("--version").output();
        if found.is_err() {
            bail!("--netns needs `{program}` (Debian package {package}), which is not installed");
        }
    }
    // Root in a container may still be refused namespaces.
    let probe = format!("crl-probe-{}", std::process::id());
    ip(&["netns", "add", &probe]).context(
        "--netns cannot create a network namespace here (a container without CAP_SYS_ADMIN?)",
    )?;
    let _ = ip(&["netns", "del", &probe]);
    Ok(())
}

/// The command that runs `program` in namespace `netns` (nsenter enters only
/// the network namespace: the process keeps this machine's mounts, cgroups
/// and pid, which `ip netns exec` would not).
pub fn enter(netns: &str, program: &Path) -> Command {
    let mut command = Command::new("nsenter");
    command
        .arg(format!("--net=/run/netns/{netns}"))
        .arg("--")
        .arg(program);
    command
}

fn ip(args: &[&str]) -> anyhow::Result<()> {
    run(Command::new("ip").args(args), "ip", args)
}

fn ip_output(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("cannot run `ip` (Debian package iproute2)")?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn iptables(netns: &str, args: &[&str]) -> anyhow::Result<()> {
    let mut command = enter(netns, Path::new("iptables"));
    command.arg("-w").args(args);
    run(&mut command, &format!("iptables in {netns}"), args)
}

fn run(command: &mut Command, what: &str, args: &[&str]) -> anyhow::Result<()> {
    let out = command
        .output()
        .with_context(|| format!("cannot run {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_linux_interface_names_and_addresses_are_distinct() {
        let mut names: Vec<String> = (1..=7).map(|i| format!("controller-{i}")).collect();
        names.extend((1..=240).map(|i| format!("agent-gpu{i:03}")));
        // A site's node names (`local up --config`) may be long.
        names.extend((1..=3).map(|i| format!("agent-dgx-a100-{i:03}")));
        assert_eq!(names.len(), MAX_MEMBERS);
        let network = Network::layout(&names, 255);
        let mut veths = std::collections::BTreeSet::new();
        let mut ips = std::collections::BTreeSet::from([network.host]);
        for member in network.members.values() {
            assert!(member.veth.len() <= 15, "{} is too long", member.veth);
            assert!(veths.insert(member.veth.clone()));
            assert!(ips.insert(member.ip), "{} given twice", member.ip);
            assert!(
                member.ip.octets()[3] < 255,
                "{} is the broadcast",
                member.ip
            );
        }
        assert_eq!(
            network.members["controller-2"].ip,
            Ipv4Addr::new(10, 213, 255, 3)
        );
    }
}
