//! The agent gateway: node agents connect over QUIC (mutual TLS; the agent's
//! certificate names its node) to the client API's port, over UDP. Every replica
//! listens; only the leader keeps sessions (a follower answers with the leader's
//! address). The leader tracks liveness in memory, declares silent nodes down
//! through Raft, and turns committed state into launches and kills by
//! reconciliation; the client API reaches the leader's sessions through the
//! registry.

pub mod cluster_liveness;
pub mod liveness;
pub mod node_majority;
pub mod reconcile;
pub mod registry;
mod reports;
pub mod session;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use corral_pki::TlsMaterial;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use session::SessionContext;

/// The running gateway.
pub struct AgentGateway {
    endpoint: quinn::Endpoint,
    accept: JoinHandle<()>,
    monitor: JoinHandle<()>,
    confirm: JoinHandle<()>,
}

impl AgentGateway {
    /// Listens on `addr` (UDP) and serves agents; declares nodes down after
    /// the cluster's lease and margin without a heartbeat
    /// ([`cluster_liveness`]).
    pub fn start(
        addr: SocketAddr,
        tls: &TlsMaterial,
        ctx: SessionContext,
    ) -> anyhow::Result<AgentGateway> {
        let server = tls
            .quic_server_config()
            .context("agent channel TLS settings")?;
        let endpoint = quinn::Endpoint::server(server, addr)
            .with_context(|| format!("cannot listen for agents on {addr} (UDP)"))?;
        let ctx = Arc::new(ctx);
        let monitor = tokio::spawn(liveness::monitor(
            Arc::clone(&ctx.replica),
            ctx.heartbeats.clone(),
            ctx.file_liveness,
            ctx.stopping.clone(),
        ));
        let confirm = tokio::spawn(liveness::confirm_leadership(
            Arc::clone(&ctx.replica),
            ctx.confirmation.clone(),
            ctx.stopping.clone(),
        ));
        let accept = {
            let endpoint = endpoint.clone();
            let mut stopping = ctx.stopping.clone();
            tokio::spawn(async move {
                loop {
                    let incoming = tokio::select! {
                        incoming = endpoint.accept() => incoming,
                        _ = stopping.changed() => return,
                    };
                    let Some(incoming) = incoming else { return };
                    let ctx = Arc::clone(&ctx);
                    tokio::spawn(async move {
                        match incoming.await {
                            Ok(connection) => session::serve(ctx, connection).await,
                            Err(e) => tracing::debug!("agent handshake failed: {e}"),
                        }
                    });
                }
            })
        };
        Ok(AgentGateway {
            endpoint,
            accept,
            monitor,
            confirm,
        })
    }

    /// Stops accepting, ends every session and waits for the tasks.
    pub async fn shutdown(self, mut stopped: watch::Receiver<bool>) {
        let _ = stopped.wait_for(|s| *s).await;
        self.endpoint.close(0u32.into(), b"controller stopping");
        let _ = self.accept.await;
        let _ = self.monitor.await;
        let _ = self.confirm.await;
        let _ = tokio::time::timeout(Duration::from_secs(2), self.endpoint.wait_idle()).await;
    }
}
