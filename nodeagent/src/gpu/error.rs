//! `GpuError`: everything that can go wrong opening a GPU backend, parsing a
//! `--gpus` value or a fault command, and injecting a fault. Each message says
//! what was wrong and what to do about it.

use std::io;
use std::path::PathBuf;

use nvml_wrapper::error::NvmlError;

/// Why a GPU backend could not be opened, or a fault not injected.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// `libnvidia-ml.so.1` could not be loaded: no NVIDIA driver on this node.
    #[error(
        "libnvidia-ml.so not found: this node has no NVIDIA driver; \
         run the agent with --gpus simulated:N:TYPE for a simulated node"
    )]
    NvmlLibraryMissing {
        /// What loading the library reported.
        #[source]
        source: NvmlError,
    },

    /// The library loaded but the kernel driver is not running.
    #[error(
        "libnvidia-ml.so is installed but the NVIDIA kernel driver is not loaded: \
         load it (modprobe nvidia; check with nvidia-smi), or run the agent with \
         --gpus simulated:N:TYPE for a simulated node"
    )]
    NvmlDriverNotLoaded,

    /// NVML works but sees no GPU.
    #[error(
        "NVML found no GPU on this node: check nvidia-smi; for a CPU node run the \
         agent with --gpus none"
    )]
    NvmlNoGpus,

    /// An NVML call failed.
    #[error("NVML could not {action}: {source}; check the GPUs and driver with nvidia-smi")]
    Nvml {
        /// What the agent was doing, as a verb phrase ("count the GPUs").
        action: String,
        /// NVML's error.
        #[source]
        source: NvmlError,
    },

    /// The thread that waits for XID events could not be started.
    #[error(
        "cannot start the thread that watches for XID errors: {source}; the node is \
         short of memory or threads"
    )]
    EventThread {
        /// The operating system's error.
        #[source]
        source: io::Error,
    },

    /// The XID watch's thread did not end when asked to.
    #[error(
        "the thread that watches for XID errors did not end within {waited:?} of being \
         asked to: an NVML event wait is stuck; check the driver with nvidia-smi"
    )]
    EventThreadStuck {
        /// How long the backend waited.
        waited: std::time::Duration,
    },

    /// The agent's `--gpus` value is malformed.
    #[error(
        "invalid --gpus value {spec:?}: {reason}; expected nvml, none or \
         simulated:COUNT:TYPE[:mig=LAYOUT] (e.g. simulated:8:h100, or \
         simulated:8:a100:mig=6-7:3g.20gb*2 for GPUs 6 and 7 split into MIG instances)"
    )]
    BadSpec {
        /// The value as given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A fault command's text is malformed (or names a GPU that does not exist).
    #[error("invalid GPU fault command {text:?}: {reason}")]
    BadFaultCommand {
        /// The command as given.
        text: String,
        /// What is wrong with it, and the expected form.
        reason: String,
    },

    /// The simulated backend could not create its control socket.
    #[error(
        "cannot create the simulated GPU control socket at {}: {source}; check that \
         the directory exists and is writable, and that the path is under 108 bytes",
        path.display()
    )]
    ControlSocket {
        /// The socket's path.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },

    /// Nothing listens at the control socket: the node's agent is not running.
    #[error(
        "no simulated GPU control socket answers at {}: the agent for this node is \
         not running (or was not started with --gpus simulated:N:TYPE); start it first",
        path.display()
    )]
    AgentNotRunning {
        /// The socket's path.
        path: PathBuf,
    },

    /// Talking to the control socket failed midway (or timed out).
    #[error(
        "talking to the simulated GPU control socket at {}: {source}; the agent may \
         be overloaded or stopping, try again",
        path.display()
    )]
    Injection {
        /// The socket's path.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },

    /// The agent answered the fault command with an error.
    #[error("the agent refused `{command}`: {reason}")]
    InjectionRefused {
        /// The command sent.
        command: String,
        /// The agent's reason.
        reason: String,
    },
}
