//! Carrying one route's traffic, TCP streams and UDP datagrams, from the
//! address its callers know to the process behind it, unless the cuts part
//! the caller from the route's owner.
//!
//! A cut acts as a dropped link does, never as a refusal: a parted stream's
//! bytes wait in the proxy (so TCP's back-pressure stalls the sender, and the
//! stream goes on after the heal unless a keep-alive gave up first), a new
//! connection is accepted but reaches nothing until the heal, and a parted
//! datagram is dropped.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::watch;

use super::cuts::Cuts;

/// How long a UDP caller may send nothing before its upstream socket is
/// closed (a new one opens with its next datagram).
const UDP_IDLE: Duration = Duration::from_secs(60);

/// What every connection of one route needs.
pub struct Route {
    /// The process behind it (`controller-2`).
    pub owner: String,
    /// Where that process listens.
    pub upstream: SocketAddr,
    /// Each process's own address, to name callers by.
    pub callers: Arc<BTreeMap<IpAddr, String>>,
    /// The cuts in force.
    pub cuts: watch::Receiver<Cuts>,
}

impl Route {
    fn caller(&self, from: SocketAddr) -> Option<String> {
        self.callers.get(&from.ip()).cloned()
    }

    fn parted(&self, caller: Option<&str>) -> bool {
        self.cuts.borrow().parts(caller, &self.owner)
    }
}

/// Waits until nothing parts `caller` from `owner`; returns at once when
/// the proxy is going away.
async fn until_joined(cuts: &mut watch::Receiver<Cuts>, caller: Option<&str>, owner: &str) {
    loop {
        if !cuts.borrow_and_update().parts(caller, owner) {
            return;
        }
        if cuts.changed().await.is_err() {
            return;
        }
    }
}

/// Accepts the route's TCP connections and carries each.
pub async fn tcp(listener: TcpListener, route: Arc<Route>) {
    loop {
        match listener.accept().await {
            Ok((client, from)) => {
                tokio::spawn(carry_stream(client, from, Arc::clone(&route)));
            }
            Err(e) => {
                eprintln!(
                    "fault proxy: accepting a connection for {} failed: {e}",
                    route.owner
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

async fn carry_stream(client: TcpStream, from: SocketAddr, route: Arc<Route>) {
    let caller = route.caller(from);
    let mut cuts = route.cuts.clone();
    until_joined(&mut cuts, caller.as_deref(), &route.owner).await;
    // A process that is down refuses: so does the proxy, by closing.
    let Ok(upstream) = TcpStream::connect(route.upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (upstream_read, upstream_write) = upstream.into_split();
    let there = pump(
        client_read,
        upstream_write,
        cuts.clone(),
        caller.clone(),
        &route.owner,
    );
    let back = pump(upstream_read, client_write, cuts, caller, &route.owner);
    tokio::pin!(there, back);
    // One side closing its half lets the other finish; an error ends both.
    tokio::select! {
        done = &mut there => if done.is_ok() { let _ = back.await; },
        done = &mut back => if done.is_ok() { let _ = there.await; },
    }
}

/// Copies `from` to `to`, holding each chunk while the pair is parted;
/// closes `to`'s half at the end of `from`.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut cuts: watch::Receiver<Cuts>,
    caller: Option<String>,
    owner: &str,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            return to.shutdown().await;
        }
        until_joined(&mut cuts, caller.as_deref(), owner).await;
        to.write_all(&buf[..n]).await?;
    }
}

/// Carries the route's datagrams: each caller address gets an upstream
/// socket of its own, so the replies find their way back.
pub async fn udp(socket: UdpSocket, route: Arc<Route>) {
    let socket = Arc::new(socket);
    let sessions: Arc<Mutex<HashMap<SocketAddr, Arc<UdpSocket>>>> = Arc::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let (n, from) = match socket.recv_from(&mut buf).await {
            Ok(received) => received,
            // An ICMP error for an earlier datagram: nothing to do.
            Err(_) => continue,
        };
        let caller = route.caller(from);
        if route.parted(caller.as_deref()) {
            continue;
        }
        let known = sessions.lock().ok().and_then(|s| s.get(&from).cloned());
        let upstream = match known {
            Some(upstream) => upstream,
            None => match open_session(&socket, from, caller, &route, &sessions).await {
                Ok(upstream) => upstream,
                Err(e) => {
                    eprintln!("fault proxy: cannot open a socket to {}: {e}", route.owner);
                    continue;
                }
            },
        };
        // Refusals (the process is down) come back as errors: a lost datagram.
        let _ = upstream.send(&buf[..n]).await;
    }
}

async fn open_session(
    socket: &Arc<UdpSocket>,
    client: SocketAddr,
    caller: Option<String>,
    route: &Arc<Route>,
    sessions: &Arc<Mutex<HashMap<SocketAddr, Arc<UdpSocket>>>>,
) -> std::io::Result<Arc<UdpSocket>> {
    let upstream = UdpSocket::bind(SocketAddr::new(route.upstream.ip(), 0)).await?;
    upstream.connect(route.upstream).await?;
    let upstream = Arc::new(upstream);
    if let Ok(mut open) = sessions.lock() {
        open.insert(client, Arc::clone(&upstream));
    }
    let (socket, route, sessions, reply) = (
        Arc::clone(socket),
        Arc::clone(route),
        Arc::clone(sessions),
        Arc::clone(&upstream),
    );
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match tokio::time::timeout(UDP_IDLE, reply.recv(&mut buf)).await {
                Err(_) => break,
                Ok(Err(_)) => continue,
                Ok(Ok(n)) => {
                    if !route.parted(caller.as_deref()) {
                        let _ = socket.send_to(&buf[..n], client).await;
                    }
                }
            }
        }
        if let Ok(mut open) = sessions.lock() {
            open.remove(&client);
        }
    });
    Ok(upstream)
}
