//! Over real loopback sockets, served the way corral's daemons serve (tonic's
//! `tls_config` with `serve_with_incoming_shutdown` on a `TcpIncoming`): the
//! client certificate's identity reaches the handler through `identity_of`, a
//! connection without one is answered `unauthenticated`, roles are enforced by
//! `require_role`, and a certificate from another CA never gets in.
#![allow(clippy::unwrap_used)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use corral_pki::{
    ClusterCa, Role, TlsMaterial, identity_of, install_crypto_provider, require_role,
};
use tokio::sync::oneshot;
use tonic::codegen::{BoxFuture, Context, Poll, Service, StdError, http};
use tonic::server::{NamedService, UnaryService};
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Server, ServerTlsConfig};
use tonic::{Code, Request, Response, Status};
use tonic_prost::ProstCodec;

/// A one-method gRPC service answering "<name> <role>" of its caller;
/// `ADMIN_ONLY` makes it require the admin role.
#[derive(Clone)]
struct WhoAmI<const ADMIN_ONLY: bool>;

impl NamedService for WhoAmI<false> {
    const NAME: &'static str = "corral.test.WhoAmI";
}

impl NamedService for WhoAmI<true> {
    const NAME: &'static str = "corral.test.AdminOnly";
}

impl<const ADMIN_ONLY: bool> UnaryService<()> for WhoAmI<ADMIN_ONLY> {
    type Response = String;
    type Future = std::future::Ready<Result<Response<String>, Status>>;

    fn call(&mut self, request: Request<()>) -> Self::Future {
        let identity = if ADMIN_ONLY {
            require_role(&request, &[Role::Admin], "the admin service")
        } else {
            identity_of(&request)
        };
        std::future::ready(identity.map(|id| Response::new(format!("{} {}", id.name, id.role))))
    }
}

impl<const ADMIN_ONLY: bool, B> Service<http::Request<B>> for WhoAmI<ADMIN_ONLY>
where
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let service = self.clone();
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(ProstCodec::<String, ()>::default());
            Ok(grpc.unary(service, request).await)
        })
    }
}

/// A running server; dropping it stops it.
struct TestServer {
    addr: SocketAddr,
    _stop: oneshot::Sender<()>,
}

fn serve(tls: ServerTlsConfig) -> TestServer {
    install_crypto_provider();
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().unwrap())
        .unwrap()
        .with_nodelay(Some(true));
    let addr = incoming.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let router = Server::builder()
        .tls_config(tls)
        .unwrap()
        .add_service(WhoAmI::<false>)
        .add_service(WhoAmI::<true>);
    tokio::spawn(router.serve_with_incoming_shutdown(incoming, async {
        let _ = stopped.await;
    }));
    TestServer { addr, _stop: stop }
}

async fn call(server: &TestServer, tls: ClientTlsConfig, service: &str) -> Result<String, Status> {
    let channel = Endpoint::from_shared(format!("https://{}", server.addr))
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(10))
        .connect()
        .await
        .map_err(|e| Status::unavailable(e.to_string()))?;
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(e.to_string()))?;
    let path = http::uri::PathAndQuery::try_from(format!("/{service}/Who")).unwrap();
    grpc.unary(Request::new(()), path, ProstCodec::<(), String>::default())
        .await
        .map(Response::into_inner)
}

fn controller(ca: &ClusterCa) -> TlsMaterial {
    ca.material(
        Role::Controller,
        "controller-1",
        &["127.0.0.1", "localhost"],
    )
    .unwrap()
}

#[tokio::test]
async fn a_client_certificates_identity_reaches_the_handler() {
    let ca = ClusterCa::generate("loopback").unwrap();
    let server = serve(controller(&ca).server_config());
    for (role, name) in [
        (Role::User, "alice"),
        (Role::Operator, "oscar"),
        (Role::Admin, "root"),
        (Role::Agent, "gpu-001"),
        (Role::Controller, "controller-2"),
    ] {
        let client = ca.material(role, name, &[]).unwrap();
        let answer = call(&server, client.client_config(), "corral.test.WhoAmI").await;
        assert_eq!(answer.unwrap(), format!("{name} {role}"));
    }
}

#[tokio::test]
async fn require_role_refuses_other_roles_with_permission_denied() {
    let ca = ClusterCa::generate("loopback").unwrap();
    let server = serve(controller(&ca).server_config());
    let admin = ca.material(Role::Admin, "root", &[]).unwrap();
    let answer = call(&server, admin.client_config(), "corral.test.AdminOnly").await;
    assert_eq!(answer.unwrap(), "root admin");

    let user = ca.material(Role::User, "alice", &[]).unwrap();
    let status = call(&server, user.client_config(), "corral.test.AdminOnly")
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    assert!(status.message().contains("alice (user)"), "{status:?}");
    assert!(status.message().contains("role admin"), "{status:?}");
}

#[tokio::test]
async fn a_connection_without_a_client_certificate_is_unauthenticated() {
    let ca = ClusterCa::generate("loopback").unwrap();
    // Only a server that lets clients in without a certificate reaches the
    // handler with none; ours (`server_config`) refuse them at the handshake.
    let server = serve(controller(&ca).server_config().client_auth_optional(true));
    let anonymous = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca.ca_pem()));
    let status = call(&server, anonymous, "corral.test.WhoAmI")
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    assert!(
        status.message().contains("client certificate"),
        "{status:?}"
    );
}

#[tokio::test]
async fn clients_without_a_certificate_from_the_cluster_ca_never_reach_the_handler() {
    let ca = ClusterCa::generate("loopback").unwrap();
    let server = serve(controller(&ca).server_config());
    let anonymous = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca.ca_pem()));
    let status = call(&server, anonymous, "corral.test.WhoAmI")
        .await
        .unwrap_err();
    assert_ne!(
        status.code(),
        Code::Unauthenticated,
        "refused before the handler"
    );

    let other = ClusterCa::generate("other").unwrap();
    let stranger = TlsMaterial {
        ca_pem: ca.ca_pem().to_string(),
        ..other.material(Role::Admin, "root", &[]).unwrap()
    };
    let status = call(&server, stranger.client_config(), "corral.test.WhoAmI")
        .await
        .unwrap_err();
    assert_ne!(status.code(), Code::Ok);
    assert!(
        !status.message().contains("root"),
        "a foreign certificate's identity was read: {status:?}"
    );
}
