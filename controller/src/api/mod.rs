//! The client API (`corral_proto::api::corral_server::Corral`) as every replica
//! serves it: reads come from this replica's applied state, changes are proposed
//! through the leader (forwarded over the peer connection when this replica
//! follows), and signals are relayed by the leader to its agent sessions. The
//! caller's identity comes from its client certificate only.

mod accounting;
mod associations;
mod backup;
pub mod caller;
mod cluster;
mod job_target;
mod jobs;
mod node_set;
mod nodes;
pub mod planning_limits;
mod priorities;
mod reservations;
mod settings;
mod signal;
mod signal_targets;
mod start_estimates;
pub mod status;
mod submit;
mod watch;

use std::pin::Pin;
use std::sync::Arc;

use corral_consensus::Replica;
use corral_proto::api::corral_server::Corral;
use corral_proto::api::{
    AccountingReply, AccountingRequest, AdminRequest, BackupChunk, BootstrapReply, CancelJobsReply,
    CancelJobsRequest, ChangeMembershipRequest, ClusterSettingsReply, ClusterStatusReply,
    ControlJobReply, ControlJobRequest, Empty, ExplainJobReply, GetJobReply, GetJobRequest,
    JobEvent, ListAssociationsReply, ListJobsReply, ListJobsRequest, ListNodesReply,
    ListNodesRequest, ListReservationsReply, PrioritiesReply, PrioritiesRequest,
    ReportCheckpointRequest, SetNodeStateRequest, ShareTreeReply, SignalJobsReply,
    SignalJobsRequest, StartEstimatesReply, SubmitJobReply, SubmitJobRequest, UpdateJobRequest,
    WhoAmIReply,
};
use corral_state::{Command, Outcome, Rejection};
use tokio::sync::Notify;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::agent_gateway::registry::AgentSessions;
use crate::config::ControllerConfig;
use caller::Caller;

/// What every handler needs.
pub struct ApiContext {
    /// This controller's replica.
    pub replica: Arc<Replica>,
    /// Its configuration (cluster name, replicas, definition for bootstrap).
    pub config: Arc<ControllerConfig>,
    /// Wakes the leader loop for a scheduling pass after a change.
    pub wake_scheduler: Arc<Notify>,
    /// Turns true when the controller stops: open streams end then, so the
    /// server's graceful shutdown is not held up by them.
    pub stopping: tokio::sync::watch::Receiver<bool>,
    /// The agent sessions this replica holds (only the leader holds any).
    pub agents: AgentSessions,
    /// The followers' clocks, as this replica sees them when it leads.
    pub clock_offsets: crate::clock_skew::ClockOffsets,
    /// Who may run the scheduler on their behalf now (`--test-only`, explain).
    pub planning: Arc<planning_limits::PlanningLimits>,
    /// The agents' heartbeats as the leader sees them (who holds the roster).
    pub heartbeats: crate::agent_gateway::liveness::Heartbeats,
    /// Held while a change to the set of nodes waits and commits: one at a time.
    pub node_set_changes: Arc<tokio::sync::Mutex<()>>,
}

impl ApiContext {
    /// Proposes commands through the leader; one result per command.
    pub async fn propose(
        &self,
        commands: Vec<Command>,
    ) -> Result<Vec<Result<Outcome, Rejection>>, Status> {
        self.replica
            .propose_via_leader(commands)
            .await
            .map_err(status::propose)
    }

    /// Proposes one command; a refusal becomes its status.
    pub async fn propose_one(&self, command: Command) -> Result<Outcome, Status> {
        let mut results = self.propose(vec![command]).await?;
        match results.pop() {
            Some(Ok(outcome)) => Ok(outcome),
            Some(Err(rejection)) => Err(status::rejection(rejection)),
            None => Err(Status::internal("the cluster returned no result")),
        }
    }
}

/// The tonic service.
#[derive(Clone)]
pub struct ApiService {
    ctx: Arc<ApiContext>,
}

impl ApiService {
    /// A service over `ctx`.
    pub fn new(ctx: Arc<ApiContext>) -> Self {
        ApiService { ctx }
    }
}

type JobStream = Pin<Box<dyn Stream<Item = Result<JobEvent, Status>> + Send + 'static>>;
type BackupStream = Pin<Box<dyn Stream<Item = Result<BackupChunk, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl Corral for ApiService {
    async fn submit_job(
        &self,
        request: Request<SubmitJobRequest>,
    ) -> Result<Response<SubmitJobReply>, Status> {
        let actor = Caller::of(&request)?.actor()?;
        submit::submit(&self.ctx, actor, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn cancel_jobs(
        &self,
        request: Request<CancelJobsRequest>,
    ) -> Result<Response<CancelJobsReply>, Status> {
        let caller = Caller::of(&request)?;
        jobs::cancel(&self.ctx, &caller, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn signal_jobs(
        &self,
        request: Request<SignalJobsRequest>,
    ) -> Result<Response<SignalJobsReply>, Status> {
        let caller = Caller::of(&request)?;
        signal::signal(&self.ctx, &caller, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn control_job(
        &self,
        request: Request<ControlJobRequest>,
    ) -> Result<Response<ControlJobReply>, Status> {
        let caller = Caller::of(&request)?;
        jobs::control(&self.ctx, &caller, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn update_job(
        &self,
        request: Request<UpdateJobRequest>,
    ) -> Result<Response<ControlJobReply>, Status> {
        let caller = Caller::of(&request)?;
        jobs::update(&self.ctx, &caller, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn get_job(
        &self,
        request: Request<GetJobRequest>,
    ) -> Result<Response<GetJobReply>, Status> {
        let caller = Caller::of(&request)?;
        jobs::get(&self.ctx, &caller, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn list_jobs(
        &self,
        request: Request<ListJobsRequest>,
    ) -> Result<Response<ListJobsReply>, Status> {
        Caller::of(&request)?;
        jobs::list(&self.ctx, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn start_estimates(
        &self,
        request: Request<ListJobsRequest>,
    ) -> Result<Response<StartEstimatesReply>, Status> {
        let caller = Caller::of(&request)?;
        start_estimates::start_estimates(&self.ctx, &caller.identity.name, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn priorities(
        &self,
        request: Request<PrioritiesRequest>,
    ) -> Result<Response<PrioritiesReply>, Status> {
        Caller::of(&request)?;
        priorities::priorities(&self.ctx, request.into_inner()).map(Response::new)
    }

    async fn share_tree(
        &self,
        request: Request<Empty>,
    ) -> Result<Response<ShareTreeReply>, Status> {
        Caller::of(&request)?;
        priorities::share_tree(&self.ctx).map(Response::new)
    }

    type WatchJobsStream = JobStream;

    async fn watch_jobs(
        &self,
        request: Request<ListJobsRequest>,
    ) -> Result<Response<Self::WatchJobsStream>, Status> {
        Caller::of(&request)?;
        let rx = watch::start(Arc::clone(&self.ctx), request.into_inner())?;
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn explain_job(
        &self,
        request: Request<GetJobRequest>,
    ) -> Result<Response<ExplainJobReply>, Status> {
        let caller = Caller::of(&request)?;
        jobs::explain(&self.ctx, &caller.identity.name, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn list_nodes(
        &self,
        request: Request<ListNodesRequest>,
    ) -> Result<Response<ListNodesReply>, Status> {
        Caller::of(&request)?;
        nodes::list(&self.ctx, request.get_ref()).map(Response::new)
    }

    async fn set_node_state(
        &self,
        request: Request<SetNodeStateRequest>,
    ) -> Result<Response<Empty>, Status> {
        let caller = Caller::of(&request)?;
        nodes::set_state(&self.ctx, &caller, request.into_inner()).await?;
        Ok(Response::new(Empty {}))
    }

    async fn accounting(
        &self,
        request: Request<AccountingRequest>,
    ) -> Result<Response<AccountingReply>, Status> {
        let caller = Caller::of(&request)?;
        accounting::query(&self.ctx, &caller, request.get_ref()).map(Response::new)
    }

    async fn list_associations(
        &self,
        request: Request<Empty>,
    ) -> Result<Response<ListAssociationsReply>, Status> {
        Caller::of(&request)?;
        associations::list(&self.ctx).map(Response::new)
    }

    async fn list_reservations(
        &self,
        request: Request<Empty>,
    ) -> Result<Response<ListReservationsReply>, Status> {
        Caller::of(&request)?;
        reservations::list(&self.ctx).map(Response::new)
    }

    async fn cluster_settings(
        &self,
        request: Request<Empty>,
    ) -> Result<Response<ClusterSettingsReply>, Status> {
        Caller::of(&request)?;
        settings::settings(&self.ctx).map(Response::new)
    }

    async fn cluster_status(
        &self,
        request: Request<Empty>,
    ) -> Result<Response<ClusterStatusReply>, Status> {
        Caller::of(&request)?;
        cluster::cluster_status(&self.ctx).map(Response::new)
    }

    async fn admin(&self, request: Request<AdminRequest>) -> Result<Response<Empty>, Status> {
        let caller = Caller::of(&request)?;
        cluster::admin(&self.ctx, &caller, request.into_inner()).await?;
        Ok(Response::new(Empty {}))
    }

    async fn change_membership(
        &self,
        request: Request<ChangeMembershipRequest>,
    ) -> Result<Response<ClusterStatusReply>, Status> {
        let caller = Caller::of(&request)?;
        cluster::change_membership(&self.ctx, &caller, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn bootstrap(&self, request: Request<Empty>) -> Result<Response<BootstrapReply>, Status> {
        let caller = Caller::of(&request)?;
        cluster::bootstrap(&self.ctx, &caller)
            .await
            .map(Response::new)
    }

    async fn report_checkpoint(
        &self,
        request: Request<ReportCheckpointRequest>,
    ) -> Result<Response<Empty>, Status> {
        let caller = Caller::of(&request)?;
        jobs::checkpoint(&self.ctx, &caller, request.into_inner()).await?;
        Ok(Response::new(Empty {}))
    }

    async fn who_am_i(&self, request: Request<Empty>) -> Result<Response<WhoAmIReply>, Status> {
        let caller = Caller::of(&request)?;
        Ok(Response::new(cluster::who_am_i(&caller)))
    }

    type SaveBackupStream = BackupStream;

    async fn save_backup(
        &self,
        request: Request<Empty>,
    ) -> Result<Response<Self::SaveBackupStream>, Status> {
        let caller = Caller::of(&request)?;
        let rx = backup::save(&self.ctx, &caller).await?;
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}
