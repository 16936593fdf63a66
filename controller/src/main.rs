//! corrald: the controller daemon (issue 5): client gRPC API, leader loop (plan -> propose -> dispatch), agent gateway (QUIC), liveness, configuration.
//!
//! Not built yet: this binary only says so and exits with status 2.

fn main() -> std::process::ExitCode {
    eprintln!("corrald is not built yet; see ARCHITECTURE.md for what it will own.");
    std::process::ExitCode::from(2)
}
