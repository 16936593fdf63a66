//! Generates the peer gRPC service from `proto/peer.proto` with the vendored
//! `protoc`, so building corral needs no system protoc.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_with_config(config, &["proto/peer.proto"], &["proto"])?;
    println!("cargo:rerun-if-changed=proto/peer.proto");
    Ok(())
}
