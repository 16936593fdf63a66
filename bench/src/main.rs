//! corral-bench: the benchmarks (scheduler pass time, Raft throughput, failover), each printing figures with --json.
//!
//! Not built yet: this binary only says so and exits with status 2.

fn main() -> std::process::ExitCode {
    eprintln!("corral-bench is not built yet; see ARCHITECTURE.md for what it will own.");
    std::process::ExitCode::from(2)
}
