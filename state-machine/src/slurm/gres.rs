//! GPU requests: `--gres=gpu:h100:8`, `--gpus=[type:]N`, `--gpus-per-node=[type:]N`,
//! including MIG profile types such as `a100_3g.20gb`.

use serde::{Deserialize, Serialize};

use super::FormatError;

/// A number of GPUs, optionally of one type.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GpuRequest {
    /// The GPU type (`h100`, `a100_3g.20gb`); `None` accepts any type.
    pub gpu_type: Option<String>,
    /// How many GPUs.
    pub count: u32,
}

/// Parses a `--gres` value. Only the `gpu` resource is supported; any other GRES
/// is an error naming it.
pub fn parse_gres(spec: &str) -> Result<GpuRequest, FormatError> {
    let _ = spec;
    todo!()
}

/// Parses a `--gpus` or `--gpus-per-node` value: `N` or `type:N`.
pub fn parse_gpu_count(spec: &str) -> Result<GpuRequest, FormatError> {
    let _ = spec;
    todo!()
}
