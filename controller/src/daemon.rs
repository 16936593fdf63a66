//! One controller process: the Raft replica, the client API server and the leader
//! loop, started from a `ControllerConfig` and stopped together.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use corral_consensus::{Replica, ReplicaConfig};
use corral_pki::TlsMaterial;
use corral_proto::api::corral_server::CorralServer;
use tokio::sync::{Notify, oneshot, watch};
use tokio::task::JoinHandle;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;

use crate::agent_gateway::AgentGateway;
use crate::agent_gateway::liveness::{Heartbeats, LeaderConfirmation};
use crate::agent_gateway::registry::AgentSessions;
use crate::agent_gateway::session::SessionContext;
use crate::api::{ApiContext, ApiService};
use crate::config::ControllerConfig;
use crate::leader_loop::{self, LeaderLoopSettings};
use corral_proto::MAX_API_MESSAGE_BYTES;

/// A running controller.
pub struct Controller {
    replica: Arc<Replica>,
    api_addr: SocketAddr,
    stop_loop: watch::Sender<bool>,
    leader_loop: JoinHandle<()>,
    stop_api: oneshot::Sender<()>,
    api_server: JoinHandle<()>,
    gateway: AgentGateway,
    clock_watch: JoinHandle<()>,
    /// The mailer, when a mail program is configured.
    mailer: Option<JoinHandle<()>>,
    /// The metrics endpoint and instruments, when `[listen] metrics` is set.
    _metrics: Option<(
        corral_telemetry::MetricsServer,
        crate::metrics::ControllerMetrics,
    )>,
}

impl Controller {
    /// Starts the replica, the client API and the leader loop.
    pub async fn start(config: ControllerConfig) -> anyhow::Result<Controller> {
        corral_pki::install_crypto_provider();
        let tls = TlsMaterial::load(&config.tls.ca, &config.tls.cert, &config.tls.key)?;
        config.check_files()?;
        // Before anything makes an instrument: one made earlier records nowhere.
        let metrics_server = match config.listen.metrics {
            Some(listen) => {
                Some(corral_telemetry::start("corrald", listen, "[listen] metrics").await?)
            }
            None => None,
        };
        let (peer_listen, api_listen) = (config.listen.peer, config.listen.api);
        if let Some(source) = config.listen.source {
            std::net::TcpListener::bind((source, 0)).with_context(|| {
                format!(
                    "[listen] source = {source:?}: no connection can come from it; give an address of this host"
                )
            })?;
        }
        std::fs::create_dir_all(&config.data_dir).with_context(|| {
            format!(
                "cannot create the data directory {}",
                config.data_dir.display()
            )
        })?;
        let timing = config.raft.timing();
        let clock_offsets = crate::clock_skew::ClockOffsets::default();
        let cluster_clock = crate::cluster_clock::ClusterClock::new(clock_offsets.clone());
        let stamp = cluster_clock.clone();
        let replica = Replica::start(ReplicaConfig {
            id: config.id,
            listen: peer_listen,
            data_dir: config.data_dir.clone(),
            tls: tls.clone(),
            timing,
            cluster_name: config.cluster_name.clone(),
            // Time belongs to the leader: its proposer stamps every command,
            // with its clock bounded by the cluster's (`cluster_clock`).
            clock: Some(corral_consensus::Clock(Arc::new(move || {
                let stamp = stamp.clone();
                Box::pin(async move { stamp.now().await })
            }))),
            source: config.listen.source,
        })
        .await
        .context("starting the Raft replica")?;
        let replica = Arc::new(replica);
        cluster_clock.attach(&replica);
        let metrics = metrics_server.map(|server| (server, crate::metrics::register(&replica)));

        let wake = Arc::new(Notify::new());
        let (stop_loop, stop_rx) = watch::channel(false);
        let leader_timing = LeaderLoopSettings {
            schedule_interval: Duration::from_millis(config.leader.schedule_interval_ms.max(1)),
            tick_interval: Duration::from_millis(config.leader.tick_interval_ms.max(1)),
            preempt_send_user_signal: config.leader.preempt_send_user_signal,
            file_liveness: config.liveness,
        };
        let kill_wait_ms = config.leader.kill_wait_ms;
        let committed = Arc::new(Notify::new());
        let heartbeats = Heartbeats::default();
        let leader_loop = tokio::spawn(leader_loop::run(
            Arc::clone(&replica),
            leader_timing,
            (Arc::clone(&wake), Arc::clone(&committed)),
            heartbeats.clone(),
            stop_rx,
        ));

        let cluster_name = config.cluster_name.clone();
        let mailer = config.leader.mail_program.clone().map(|program| {
            tokio::spawn(crate::mail::sender::run(
                Arc::clone(&replica),
                program,
                cluster_name.clone(),
                stop_loop.subscribe(),
            ))
        });
        let liveness = config.liveness;
        let gateway_wake = Arc::clone(&wake);
        let agents = AgentSessions::default();
        let clock_watch = tokio::spawn(crate::clock_skew::watch(
            Arc::clone(&replica),
            clock_offsets.clone(),
            stop_loop.subscribe(),
        ));
        let ctx = Arc::new(ApiContext {
            replica: Arc::clone(&replica),
            config: Arc::new(config),
            wake_scheduler: wake,
            stopping: stop_loop.subscribe(),
            agents: agents.clone(),
            clock_offsets,
            planning: Arc::default(),
            heartbeats: heartbeats.clone(),
            node_set_changes: Arc::default(),
        });
        let incoming = TcpIncoming::bind(api_listen)
            .map_err(|e| anyhow::anyhow!("cannot listen for clients on {api_listen}: {e}"))?
            .with_nodelay(Some(true));
        let api_addr = incoming.local_addr()?;
        let service = CorralServer::new(ApiService::new(ctx))
            .max_decoding_message_size(MAX_API_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_API_MESSAGE_BYTES);
        let mut builder = Server::builder()
            .tls_config(tls.server_config())
            .context("client API TLS")?;
        let (stop_api, stopped) = oneshot::channel::<()>();
        let api_server = tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            if let Err(e) = builder
                .add_service(service)
                .serve_with_incoming_shutdown(incoming, shutdown)
                .await
            {
                tracing::error!("client API server stopped: {e}");
            }
        });
        let gateway = AgentGateway::start(
            api_addr,
            &tls,
            SessionContext {
                replica: Arc::clone(&replica),
                cluster_name,
                file_liveness: liveness,
                kill_grace_ms: kill_wait_ms,
                heartbeats,
                confirmation: LeaderConfirmation::default(),
                wake_scheduler: gateway_wake,
                stopping: stop_loop.subscribe(),
                committed,
                agents,
            },
        )?;
        tracing::info!(%api_addr, peer = %replica.peer_addr(), "controller started; agents connect to the same port over UDP");
        Ok(Controller {
            replica,
            api_addr,
            stop_loop,
            leader_loop,
            stop_api,
            api_server,
            gateway,
            clock_watch,
            mailer,
            _metrics: metrics,
        })
    }

    /// Where clients reach this controller.
    pub fn api_addr(&self) -> SocketAddr {
        self.api_addr
    }

    /// The replica.
    pub fn replica(&self) -> &Arc<Replica> {
        &self.replica
    }

    /// Stops the API, the leader loop and the replica (storage closed on return).
    pub async fn shutdown(self) {
        // Streams (watches) end on `stop_loop` too, so the graceful shutdown of
        // the API does not wait for clients that never hang up.
        let _ = self.stop_loop.send(true);
        // Raft first: a stopping leader's followers elect another at once,
        // and its agents find that one while this process closes down.
        self.replica.leave_raft().await;
        let _ = self.stop_api.send(());
        let _ = self.leader_loop.await;
        let _ = self.clock_watch.await;
        if let Some(mailer) = self.mailer {
            let _ = mailer.await;
        }
        self.gateway.shutdown(self.stop_loop.subscribe()).await;
        let _ = tokio::time::timeout(Duration::from_secs(5), self.api_server).await;
        let mut replica = self.replica;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            match Arc::try_unwrap(replica) {
                Ok(owned) => {
                    owned.shutdown().await;
                    return;
                }
                Err(shared) if tokio::time::Instant::now() < deadline => {
                    replica = shared;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(_) => {
                    tracing::warn!(
                        "replica still in use at shutdown; leaving it to the process exit"
                    );
                    return;
                }
            }
        }
    }
}
