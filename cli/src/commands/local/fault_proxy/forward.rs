//! Carrying one route's traffic, TCP streams and UDP datagrams, from the
//! address its callers know to the process behind it, unless the cuts part
//! the caller from the route's owner.
//!
//! A cut acts as a dropped link does, never as a refusal: a parted stream's
//! bytes wait in the proxy (so TCP's back-pressure stalls the sender, and the
//! stream goes on after the heal unless a keep-alive gave up first), and so
//! does its end (a close or a reset reaches the other side only across a
//! joined link); a new connection is accepted but reaches nothing until the
//! heal (or its caller gives up); a parted datagram is dropped.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::watch;

use super::cuts::Cuts;

/// How long a UDP caller's upstream socket may receive nothing before it is
/// closed (a new one opens with the caller's next datagram).
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
    tokio::select! {
        () = until_joined(&mut cuts, caller.as_deref(), &route.owner) => {}
        () = gone(&client) => return,
    }
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

/// Returns once the caller of a connection not yet carried has closed it
/// (what it sent meanwhile stays unread).
async fn gone(client: &TcpStream) {
    let mut byte = [0u8; 1];
    match client.peek(&mut byte).await {
        Ok(0) | Err(_) => {}
        // It sent something: it waits for an answer.
        Ok(_) => std::future::pending().await,
    }
}

/// Copies `from` to `to`, holding each chunk while the pair is parted;
/// closes `to`'s half at the end of `from`. However the stream ends, the
/// end waits for the pair to be joined, so that across a cut the other side
/// learns nothing, as across a dropped link.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut cuts: watch::Receiver<Cuts>,
    caller: Option<String>,
    owner: &str,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    let ended = loop {
        let n = match from.read(&mut buf).await {
            Ok(0) => break Ok(()),
            Ok(n) => n,
            Err(e) => break Err(e),
        };
        until_joined(&mut cuts, caller.as_deref(), owner).await;
        if let Err(e) = to.write_all(&buf[..n]).await {
            break Err(e);
        }
    };
    until_joined(&mut cuts, caller.as_deref(), owner).await;
    match ended {
        Ok(()) => to.shutdown().await,
        Err(e) => Err(e),
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
    // Not on the process's own address: a port taken there could be the one
    // it wants back when it restarts.
    let upstream = UdpSocket::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::local::fault_proxy::cuts::Request;

    /// Long enough for a datagram or a chunk to cross loopback many times
    /// over: what has not arrived by then was held.
    const HELD: Duration = Duration::from_millis(300);

    fn names() -> BTreeMap<String, ()> {
        ["agent-a", "controller-1"]
            .into_iter()
            .map(|n| (n.to_string(), ()))
            .collect()
    }

    /// A route to `upstream` whose only known caller is this machine's
    /// 127.0.0.1, named `agent-a`, with a sender for its cuts.
    fn route(upstream: SocketAddr) -> (Arc<Route>, watch::Sender<Cuts>) {
        let (tx, rx) = watch::channel(Cuts::default());
        let callers = [("127.0.0.1".parse().unwrap(), "agent-a".to_string())];
        let route = Route {
            owner: "controller-1".into(),
            upstream,
            callers: Arc::new(callers.into_iter().collect()),
            cuts: rx,
        };
        (Arc::new(route), tx)
    }

    fn set(cuts: &watch::Sender<Cuts>, request: Request) {
        cuts.send_modify(|c| {
            c.apply(&request, &names()).unwrap();
        });
    }

    fn cut() -> Request {
        Request::Cut(vec!["agent-a".into()], vec!["controller-1".into()])
    }

    async fn read_some(stream: &mut TcpStream) -> Vec<u8> {
        let mut buf = vec![0u8; 64];
        let n = stream.read(&mut buf).await.unwrap();
        buf.truncate(n);
        buf
    }

    /// An upstream that echoes, and says when a connection's input ended.
    async fn echo_server() -> (SocketAddr, tokio::sync::mpsc::Receiver<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (ended_tx, ended) = tokio::sync::mpsc::channel(4);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let ended_tx = ended_tx.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 1024];
                    while let Ok(n) = stream.read(&mut buf).await {
                        if n == 0 {
                            let _ = ended_tx.send(()).await;
                            return;
                        }
                        let _ = stream.write_all(&buf[..n]).await;
                    }
                });
            }
        });
        (addr, ended)
    }

    async fn proxy_tcp(route: Arc<Route>) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(tcp(listener, route));
        addr
    }

    /// A stream through the proxy to an echo server, already carrying, with
    /// the route's cuts and word of the server seeing its input end.
    async fn carried_stream() -> (
        TcpStream,
        watch::Sender<Cuts>,
        tokio::sync::mpsc::Receiver<()>,
    ) {
        let (upstream, ended) = echo_server().await;
        let (route, cuts) = route(upstream);
        let proxy = proxy_tcp(route).await;
        let mut client = TcpStream::connect(proxy).await.unwrap();
        client.write_all(b"a").await.unwrap();
        assert_eq!(read_some(&mut client).await, b"a");
        (client, cuts, ended)
    }

    #[tokio::test]
    async fn a_cut_holds_an_open_stream_until_the_heal() {
        let (mut client, cuts, _ended) = carried_stream().await;
        set(&cuts, cut());
        client.write_all(b"b").await.unwrap();
        let held = tokio::time::timeout(HELD, read_some(&mut client)).await;
        assert!(held.is_err(), "an echo crossed the cut: {held:?}");
        set(&cuts, Request::Heal);
        assert_eq!(read_some(&mut client).await, b"b");
    }

    #[tokio::test]
    async fn a_close_across_a_cut_arrives_after_the_heal() {
        let (mut client, cuts, mut ended) = carried_stream().await;
        set(&cuts, cut());
        client.shutdown().await.unwrap();
        let early = tokio::time::timeout(HELD, ended.recv()).await;
        assert!(early.is_err(), "the close crossed the cut");
        set(&cuts, Request::Heal);
        assert_eq!(ended.recv().await, Some(()));
    }

    #[tokio::test]
    async fn a_connection_opened_during_a_cut_reaches_nothing_until_the_heal() {
        let (upstream, _ended) = echo_server().await;
        let (route, cuts) = route(upstream);
        set(&cuts, cut());
        let proxy = proxy_tcp(route).await;
        let mut client = TcpStream::connect(proxy).await.unwrap();
        client.write_all(b"c").await.unwrap();
        let held = tokio::time::timeout(HELD, read_some(&mut client)).await;
        assert!(held.is_err(), "the connection crossed the cut: {held:?}");
        set(&cuts, Request::Heal);
        assert_eq!(read_some(&mut client).await, b"c");
    }

    #[tokio::test]
    async fn datagrams_across_a_cut_are_dropped() {
        let upstream = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let upstream_addr = upstream.local_addr().unwrap();
        let upstream = Arc::new(upstream);
        let echo = Arc::clone(&upstream);
        tokio::spawn(async move {
            let mut buf = vec![0u8; 1024];
            while let Ok((n, from)) = echo.recv_from(&mut buf).await {
                let _ = echo.send_to(&buf[..n], from).await;
            }
        });
        let (route, cuts) = route(upstream_addr);
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let proxy = socket.local_addr().unwrap();
        tokio::spawn(udp(socket, route));
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        client.connect(proxy).await.unwrap();
        let mut buf = vec![0u8; 64];
        client.send(b"p").await.unwrap();
        let n = client.recv(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"p");
        set(&cuts, cut());
        client.send(b"q").await.unwrap();
        let held = tokio::time::timeout(HELD, client.recv(&mut buf)).await;
        assert!(held.is_err(), "a datagram crossed the cut");
        set(&cuts, Request::Heal);
        client.send(b"r").await.unwrap();
        let n = client.recv(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"r");
    }
}
