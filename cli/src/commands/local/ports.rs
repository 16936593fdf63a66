//! Ports for a local cluster's listeners: free now for TCP and UDP on the
//! address they will be bound to (a controller's client port takes both:
//! agents use it over UDP), and below the kernel's ephemeral range, so that
//! no socket bound to port 0 meanwhile (an agent's QUIC endpoint, a client's
//! connection, another cluster starting beside this one) can take one before
//! the process it is for binds it.

use std::net::{IpAddr, TcpListener, UdpSocket};

use anyhow::bail;

/// The lowest port handed out.
const LOWEST: u16 = 10_000;

/// `count` distinct ports free on `ip` now, for TCP and UDP.
pub fn free_ports(ip: IpAddr, count: usize) -> anyhow::Result<Vec<u16>> {
    let highest = ephemeral_start().saturating_sub(1);
    if highest <= LOWEST {
        bail!("no ports below the ephemeral range ({highest}) to give a local cluster");
    }
    let span = highest - LOWEST + 1;
    let start = rand::random_range(0..span);
    let mut ports = Vec::with_capacity(count);
    for offset in 0..span {
        if ports.len() == count {
            break;
        }
        let port = LOWEST + (start + offset) % span;
        let free = TcpListener::bind((ip, port)).is_ok() && UdpSocket::bind((ip, port)).is_ok();
        if free {
            ports.push(port);
        }
    }
    if ports.len() < count {
        bail!(
            "cannot find {count} ports free for TCP and UDP on {ip} between {LOWEST} and {highest}"
        );
    }
    Ok(ports)
}

/// The first port of the kernel's ephemeral range (32768 unless set).
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_free_and_below_the_ephemeral_range() {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        // Other tests of this binary bind ports meanwhile: a port free when
        // chosen may be taken before it is tried again here. Three draws in a
        // row each losing a port to them would be a bug, not a race.
        let bindable = (0..3).any(|_| {
            let ports = free_ports(ip, 8).unwrap();
            let distinct: std::collections::BTreeSet<u16> = ports.iter().copied().collect();
            assert_eq!(distinct.len(), 8);
            assert!(
                ports
                    .iter()
                    .all(|p| (LOWEST..ephemeral_start()).contains(p))
            );
            ports.iter().all(|&port| {
                TcpListener::bind((ip, port)).is_ok() && UdpSocket::bind((ip, port)).is_ok()
            })
        });
        assert!(
            bindable,
            "free_ports gave ports that could not be bound, three times"
        );
    }
}
