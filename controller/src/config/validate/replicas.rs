//! The replica group: unique ids, `host:port` addresses used once each, which
//! replica this is, and the socket addresses it binds.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::values::Checked;
use crate::config::controller::{ListenAddrs, ReplicaEntry};
use crate::config::error::Refusal;
use crate::config::file::{ListenSection, ReplicaSection};

/// The checked group.
pub(crate) struct Group {
    /// This replica's id.
    pub id: u64,
    /// Every replica.
    pub replicas: Vec<ReplicaEntry>,
    /// Where this replica listens.
    pub listen: ListenAddrs,
}

/// Checks the replicas, picks this one, and works out where it listens.
pub(crate) fn check(
    id: Option<u64>,
    sections: &[ReplicaSection],
    listen: &ListenSection,
) -> Checked<Group> {
    if sections.is_empty() {
        return Err(Refusal::new(
            "replicas",
            "no replica is listed; list every initial voter under [[replicas]] (id, peer, api)",
        ));
    }
    let mut ids: BTreeMap<u64, usize> = BTreeMap::new();
    let mut addresses: BTreeMap<String, String> = BTreeMap::new();
    let mut replicas = Vec::with_capacity(sections.len());
    for (i, section) in sections.iter().enumerate() {
        if let Some(first) = ids.insert(section.id, i) {
            return Err(Refusal::new(
                format!("replicas[{i}].id"),
                format!(
                    "replica id {} is listed twice (also replicas[{first}]); ids must be unique",
                    section.id
                ),
            ));
        }
        for (field, address) in [("peer", &section.peer), ("api", &section.api)] {
            let key = format!("replicas[{i}].{field}");
            host_port(&key, address)?;
            if let Some(other) = addresses.insert(address.clone(), key.clone()) {
                return Err(Refusal::new(
                    key,
                    format!("{address:?} is also {other}; every service needs its own address"),
                ));
            }
        }
        replicas.push(ReplicaEntry {
            id: section.id,
            peer: section.peer.clone(),
            api: section.api.clone(),
        });
    }
    let listed = || {
        ids.keys()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let id = match id {
        Some(id) if ids.contains_key(&id) => id,
        Some(id) => {
            return Err(Refusal::new(
                "id",
                format!(
                    "replica {id} is not among the replicas ({}); list it under [[replicas]] or fix the id",
                    listed()
                ),
            ));
        }
        None if replicas.len() == 1 => replicas[0].id,
        None => {
            return Err(Refusal::new(
                "id",
                format!(
                    "missing; with several replicas, say which one this is ({})",
                    listed()
                ),
            ));
        }
    };
    let this = replicas
        .iter()
        .find(|r| r.id == id)
        .ok_or_else(|| Refusal::new("id", "not among the replicas"))?;
    let listen = ListenAddrs {
        peer: listen_addr("listen.peer", listen.peer.as_deref(), &this.peer)?,
        api: listen_addr("listen.api", listen.api.as_deref(), &this.api)?,
        source: listen
            .source
            .as_deref()
            .map(|written| {
                written.parse::<IpAddr>().map_err(|_| {
                    Refusal::new(
                        "listen.source",
                        format!("{written:?} is not an IP address; write one of this host's addresses, e.g. 10.0.0.5"),
                    )
                })
            })
            .transpose()?,
        metrics: listen
            .metrics
            .as_deref()
            .map(|written| {
                written.parse::<SocketAddr>().map_err(|_| {
                    Refusal::new(
                        "listen.metrics",
                        format!("{written:?} is not a socket address; write IP:port, e.g. 0.0.0.0:9180"),
                    )
                })
            })
            .transpose()?,
    };
    Ok(Group {
        id,
        replicas,
        listen,
    })
}

/// The socket address to bind: as written under `[listen]`, else derived from
/// the advertised address.
fn listen_addr(key: &str, written: Option<&str>, advertised: &str) -> Checked<SocketAddr> {
    if let Some(written) = written {
        return written.parse().map_err(|_| {
            Refusal::new(
                key,
                format!("{written:?} is not a socket address; write IP:port, e.g. 0.0.0.0:7100 or [::]:7100"),
            )
        });
    }
    let (host, port) = host_port(key, advertised)?;
    let ip = match host.parse::<IpAddr>() {
        Ok(ip) => ip,
        Err(_) if host.eq_ignore_ascii_case("localhost") => IpAddr::V4(Ipv4Addr::LOCALHOST),
        Err(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    };
    Ok(SocketAddr::new(ip, port))
}

/// Splits `host:port` (`[v6]:port` for IPv6), checking the host is an IP address
/// or a DNS name and the port is not zero.
pub(crate) fn host_port(key: &str, value: &str) -> Checked<(String, u16)> {
    let bad = |why: &str| {
        Refusal::new(
            key,
            format!(
                "{value:?} is not host:port ({why}); write e.g. 10.0.0.1:7100, ctl1.example.org:7100 or [::1]:7100"
            ),
        )
    };
    let (host, port) = if let Some(rest) = value.strip_prefix('[') {
        let (host, port) = rest
            .split_once("]:")
            .ok_or_else(|| bad("an IPv6 address in brackets needs ]:port"))?;
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(bad("not an IPv6 address inside the brackets"));
        }
        (host, port)
    } else {
        let (host, port) = value.rsplit_once(':').ok_or_else(|| bad("no port"))?;
        if host.contains(':') {
            return Err(bad("put an IPv6 address in brackets"));
        }
        if host.parse::<IpAddr>().is_err() && !is_dns_name(host) {
            return Err(bad("the host is neither an IP address nor a DNS name"));
        }
        (host, port)
    };
    let port: u16 = port
        .parse()
        .map_err(|_| bad("the port must be a number from 1 to 65535"))?;
    if port == 0 {
        return Err(bad("port 0 cannot be reached; name a fixed port"));
    }
    Ok((host.to_string(), port))
}

/// Letters, digits and `-` in dot-separated labels, none empty or edged by `-`.
fn is_dns_name(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_host_and_port() {
        assert_eq!(host_port("k", "127.0.0.1:7100").unwrap().1, 7100);
        assert_eq!(
            host_port("k", "ctl-1.example.org:1").unwrap().0,
            "ctl-1.example.org"
        );
        assert_eq!(host_port("k", "[::1]:7100").unwrap().0, "::1");
        for bad in [
            "localhost",
            "::1:7100",
            "host:0",
            "host:99999",
            ":7100",
            "a b:1",
            "[::1]7100",
        ] {
            assert!(host_port("k", bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn listen_defaults_follow_the_advertised_host() {
        let at = |a| listen_addr("k", None, a).unwrap().to_string();
        assert_eq!(at("127.0.0.2:7100"), "127.0.0.2:7100");
        assert_eq!(at("localhost:7100"), "127.0.0.1:7100");
        assert_eq!(at("ctl1.example.org:7100"), "0.0.0.0:7100");
        assert_eq!(
            listen_addr("k", Some("[::]:1"), "x:2").unwrap().to_string(),
            "[::]:1"
        );
    }
}
