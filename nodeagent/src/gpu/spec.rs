//! The agent's `--gpus` option: `nvml` (real GPUs), `simulated:COUNT:TYPE` (fake
//! GPUs with a control socket; `simulated:COUNT:TYPE:mig=LAYOUT` splits some into
//! MIG instances, as [`corral_state::mig`] writes layouts) or `none` (a CPU
//! node); and opening the backend it names, as [`GpuSlots`].

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::backend::GpuBackend;
use super::error::GpuError;
use super::no_gpus::NoGpus;
use super::nvml::NvmlGpus;
use super::simulated::SimulatedGpus;
use super::slots::GpuSlots;
use corral_state::mig::{MigError, MigLayout};

/// The simulated backend's control socket's file name, in the agent's control
/// directory.
pub const CONTROL_SOCKET_NAME: &str = "gpu-control.sock";

/// Where a simulated node's control socket is, given the agent's control
/// directory (what `corral local xid` connects to).
pub fn control_socket(control_dir: &Path) -> PathBuf {
    control_dir.join(CONTROL_SOCKET_NAME)
}

/// Which GPU backend the agent runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuSpec {
    /// Real GPUs through NVML.
    Nvml,
    /// `count` simulated GPUs of type `model`.
    Simulated {
        /// How many GPUs.
        count: u32,
        /// Their type (`h100`).
        model: String,
        /// Those in MIG mode, and their instances.
        mig: MigLayout,
    },
    /// A CPU node.
    None,
}

impl GpuSpec {
    /// Opens the backend, seen as GPU slots (a MIG instance is a GPU of its
    /// own). A simulated one listens at [`control_socket`]`(control_dir)`; the
    /// others ignore `control_dir`.
    pub fn open(&self, control_dir: &Path) -> Result<GpuSlots, GpuError> {
        let backend: Box<dyn GpuBackend> = match self {
            GpuSpec::Nvml => Box::new(NvmlGpus::open()?),
            GpuSpec::Simulated { count, model, mig } => Box::new(SimulatedGpus::new(
                *count,
                model,
                mig,
                control_socket(control_dir),
            )?),
            GpuSpec::None => Box::new(NoGpus::new()),
        };
        Ok(GpuSlots::new(backend))
    }
}

impl fmt::Display for GpuSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuSpec::Nvml => f.write_str("nvml"),
            GpuSpec::Simulated { count, model, mig } if mig.is_empty() => {
                write!(f, "simulated:{count}:{model}")
            }
            GpuSpec::Simulated { count, model, mig } => {
                write!(f, "simulated:{count}:{model}:mig={mig}")
            }
            GpuSpec::None => f.write_str("none"),
        }
    }
}

impl FromStr for GpuSpec {
    type Err = GpuError;

    fn from_str(spec: &str) -> Result<Self, GpuError> {
        let bad = |reason: &str| GpuError::BadSpec {
            spec: spec.to_string(),
            reason: reason.to_string(),
        };
        match spec {
            "nvml" => return Ok(GpuSpec::Nvml),
            "none" => return Ok(GpuSpec::None),
            _ => {}
        }
        let Some(rest) = spec.strip_prefix("simulated:") else {
            return Err(bad("unknown backend"));
        };
        let Some((count, rest)) = rest.split_once(':') else {
            return Err(bad("a simulated node needs both a GPU count and a type"));
        };
        let (model, mig) = match rest.split_once(':') {
            Some((model, layout)) => {
                let Some(layout) = layout.strip_prefix("mig=") else {
                    return Err(bad("after the type only mig=LAYOUT may follow"));
                };
                let mig: MigLayout = layout.parse().map_err(|e: MigError| bad(&e.to_string()))?;
                (model, mig)
            }
            None => (rest, MigLayout::default()),
        };
        let count: u32 = count
            .parse()
            .map_err(|_| bad("the GPU count is not a whole number"))?;
        if model.is_empty() {
            return Err(bad("the GPU type is empty"));
        }
        Ok(GpuSpec::Simulated {
            count,
            model: model.to_string(),
            mig,
        })
    }
}

/// Parses the agent's `--gpus` value and opens that backend (see
/// [`GpuSpec::open`]). With `nvml` on a node without the NVIDIA driver this
/// fails with [`GpuError::NvmlLibraryMissing`], and the agent must not start.
pub fn backend_from_spec(spec: &str, control_dir: &Path) -> Result<GpuSlots, GpuError> {
    spec.parse::<GpuSpec>()?.open(control_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_forms_parse_and_print_back() {
        for (text, spec) in [
            ("nvml", GpuSpec::Nvml),
            ("none", GpuSpec::None),
            (
                "simulated:8:h100",
                GpuSpec::Simulated {
                    count: 8,
                    model: "h100".to_string(),
                    mig: MigLayout::default(),
                },
            ),
            (
                "simulated:8:a100:mig=0-1:3g.20gb*2,7:1g.10gb*7",
                GpuSpec::Simulated {
                    count: 8,
                    model: "a100".to_string(),
                    mig: "0-1:3g.20gb*2,7:1g.10gb*7".parse().unwrap(),
                },
            ),
        ] {
            assert_eq!(text.parse::<GpuSpec>().unwrap(), spec);
            assert_eq!(spec.to_string(), text);
        }
    }

    #[test]
    fn malformed_specs_say_what_is_wrong_and_what_is_expected() {
        for (text, reason) in [
            ("", "unknown backend"),
            ("cuda", "unknown backend"),
            ("simulated", "unknown backend"),
            ("simulated:8", "needs both a GPU count and a type"),
            ("simulated:eight:h100", "not a whole number"),
            ("simulated:-1:h100", "not a whole number"),
            ("simulated:8:", "the GPU type is empty"),
            ("simulated:8:a100:3g.20gb", "only mig=LAYOUT"),
            ("simulated:8:a100:mig=0:9g.20gb", "compute slices"),
        ] {
            let message = text.parse::<GpuSpec>().unwrap_err().to_string();
            assert!(message.contains(reason), "{text:?}: {message}");
            assert!(message.contains("simulated:COUNT:TYPE"), "{message}");
        }
    }

    #[test]
    fn the_control_socket_lives_in_the_control_directory() {
        assert_eq!(
            control_socket(Path::new("/run/corral/node3")),
            Path::new("/run/corral/node3/gpu-control.sock")
        );
    }
}
