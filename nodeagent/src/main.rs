//! corral-agent: the node agent (issue 6): QUIC client to the leader, heartbeats and leases, GPU health through NVML or a simulated backend, XID fail-fast, job launch and kill.
//!
//! Not built yet: this binary only says so and exits with status 2.

fn main() -> std::process::ExitCode {
    eprintln!("corral-agent is not built yet; see ARCHITECTURE.md for what it will own.");
    std::process::ExitCode::from(2)
}
