//! The `/metrics` endpoint: HTTP/1.1 (hyper) on its own address, answering
//! `GET /metrics` with every metric in the Prometheus text format (what
//! Prometheus scrapes, and what OpenMetrics parsers read), anything else with
//! 404. One task accepts; each connection is served on a task of its own, at
//! most [`MAX_CONNECTIONS`] at once (more are closed at once: the descriptors
//! are the daemon's, shared with Raft and the API), each request's headers
//! within [`HEADER_TIMEOUT`]. The registry is gathered on a blocking thread
//! (gauges read the daemon's state when scraped). An accept that fails (out
//! of descriptors) is retried after a pause, never in a tight loop.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus::{Encoder, TextEncoder};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::TelemetryError;

/// Pause after a failed accept.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// Scrape connections served at once.
pub const MAX_CONNECTIONS: usize = 16;

/// How long a request's headers may take to arrive (an idle kept-alive
/// connection is closed after it too).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// A running endpoint; dropping it stops accepting.
#[derive(Debug)]
pub struct MetricsServer {
    address: SocketAddr,
    accepting: JoinHandle<()>,
}

impl MetricsServer {
    /// Where it listens (the port chosen, for port 0).
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// Listens on `listen` and serves `registry` at `/metrics`.
pub async fn serve(
    listen: SocketAddr,
    registry: prometheus::Registry,
) -> Result<MetricsServer, TelemetryError> {
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|source| TelemetryError::Listen {
            address: listen,
            source,
        })?;
    let address = listener
        .local_addr()
        .map_err(|source| TelemetryError::Listen {
            address: listen,
            source,
        })?;
    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let accepting = tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::debug!("cannot accept a metrics scrape: {e}");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    continue;
                }
            };
            let Ok(permit) = std::sync::Arc::clone(&permits).try_acquire_owned() else {
                tracing::debug!(
                    "{MAX_CONNECTIONS} metrics scrapes are served already; closing another"
                );
                drop(stream);
                continue;
            };
            let registry = registry.clone();
            tokio::spawn(async move {
                let _permit = permit;
                let service = hyper::service::service_fn(move |request| {
                    let registry = registry.clone();
                    async move {
                        let answer = match refusal(&request) {
                            None => tokio::task::spawn_blocking(move || gathered(&registry))
                                .await
                                .unwrap_or_else(|e| {
                                    text(
                                        StatusCode::INTERNAL_SERVER_ERROR,
                                        format!("gathering the metrics failed: {e}\n"),
                                    )
                                }),
                            Some(refusal) => refusal,
                        };
                        Ok::<_, Infallible>(answer)
                    }
                });
                if let Err(e) = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(HEADER_TIMEOUT)
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    tracing::debug!("a metrics scrape's connection failed: {e}");
                }
            });
        }
    });
    Ok(MetricsServer { address, accepting })
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
}

/// The answer to a request that is not `GET /metrics` (or `HEAD`); `None`
/// for one that is.
fn refusal(request: &Request<Incoming>) -> Option<Response<Full<Bytes>>> {
    if request.uri().path() != "/metrics" {
        return Some(text(
            StatusCode::NOT_FOUND,
            "corral serves its metrics at /metrics\n".into(),
        ));
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return Some(text(
            StatusCode::METHOD_NOT_ALLOWED,
            "GET /metrics to read the metrics\n".into(),
        ));
    }
    None
}

/// Every metric of `registry`, in the text format.
fn gathered(registry: &prometheus::Registry) -> Response<Full<Bytes>> {
    let encoder = TextEncoder::new();
    let mut body = Vec::new();
    if let Err(e) = encoder.encode(&registry.gather(), &mut body) {
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot encode the metrics: {e}\n"),
        );
    }
    let mut response = Response::new(Full::new(Bytes::from(body)));
    if let Ok(kind) = encoder.format_type().parse() {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, kind);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn get(address: SocketAddr, path: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        stream
            .write_all(
                format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
            )
            .await
            .unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).await.unwrap();
        reply
    }

    #[tokio::test]
    async fn a_scrape_reads_the_registry_and_other_paths_are_not_found() {
        let registry = prometheus::Registry::new();
        let counter = prometheus::IntCounter::new("things_total", "Things").unwrap();
        registry.register(Box::new(counter.clone())).unwrap();
        counter.inc_by(7);
        let server = serve("127.0.0.1:0".parse().unwrap(), registry)
            .await
            .unwrap();
        let reply = get(server.address(), "/metrics").await;
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        assert!(reply.contains("things_total 7"), "{reply}");
        let missing = get(server.address(), "/").await;
        assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
    }
}
