//! GPU requests: `--gres=gpu:h100:8`, `--gpus=[type:]N`, `--gpus-per-node=[type:]N`,
//! including MIG profile types such as `a100_3g.20gb`.
//!
//! `--gres` entries are `NAME[:TYPE][:COUNT]`, comma-separated; the TRES spelling
//! `gres/gpu[:TYPE][=COUNT]` is accepted too. Only the `gpu` resource exists in
//! corral, so any other name is refused by name, and so is a second `gpu` entry.

use serde::{Deserialize, Serialize};

use super::FormatError;

/// The format name used in errors from [`parse_gres`].
const GRES_FORMAT: &str = "gres";
/// The format name used in errors from [`parse_gpu_count`].
const GPUS_FORMAT: &str = "gpu count";

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
    if spec.is_empty() {
        return Err(FormatError::new(
            GRES_FORMAT,
            spec,
            "empty; expected e.g. gpu, gpu:8 or gpu:h100:8",
        ));
    }
    let mut request = None;
    for entry in spec.split(',') {
        let parsed = parse_gres_entry(spec, entry)?;
        if request.is_some() {
            return Err(FormatError::new(
                GRES_FORMAT,
                "gpu",
                "gpu is requested more than once",
            ));
        }
        request = Some(parsed);
    }
    request.ok_or_else(|| FormatError::new(GRES_FORMAT, spec, "no gpu entry"))
}

/// Parses one `NAME[:TYPE][:COUNT]` or `gres/NAME[:TYPE][=COUNT]` entry.
fn parse_gres_entry(spec: &str, entry: &str) -> Result<GpuRequest, FormatError> {
    if entry.is_empty() {
        return Err(FormatError::new(
            GRES_FORMAT,
            spec,
            "empty entry between commas",
        ));
    }
    if let Some(tres) = entry.strip_prefix("gres/") {
        return parse_tres_entry(entry, tres);
    }
    let mut fields = entry.split(':');
    let name = fields.next().unwrap_or_default();
    check_gpu_name(entry, name)?;
    let rest: Vec<&str> = fields.collect();
    match rest.as_slice() {
        [] => Ok(GpuRequest {
            gpu_type: None,
            count: 1,
        }),
        [count] if is_digits(count) => Ok(GpuRequest {
            gpu_type: None,
            count: parse_count(GRES_FORMAT, entry, count)?,
        }),
        [gpu_type] => Ok(GpuRequest {
            gpu_type: Some(parse_type(GRES_FORMAT, entry, gpu_type)?),
            count: 1,
        }),
        [gpu_type, count] => Ok(GpuRequest {
            gpu_type: Some(parse_type(GRES_FORMAT, entry, gpu_type)?),
            count: parse_count(GRES_FORMAT, entry, count)?,
        }),
        _ => Err(FormatError::new(
            GRES_FORMAT,
            entry,
            "too many ':' fields; expected gpu[:TYPE][:COUNT]",
        )),
    }
}

/// Parses the part after `gres/`: `gpu`, `gpu=8`, `gpu:h100`, `gpu:h100=8`.
fn parse_tres_entry(entry: &str, tres: &str) -> Result<GpuRequest, FormatError> {
    let (name_and_type, count) = match tres.split_once('=') {
        Some((head, count)) => (head, parse_count(GRES_FORMAT, entry, count)?),
        None => (tres, 1),
    };
    let (name, gpu_type) = match name_and_type.split_once(':') {
        Some((name, gpu_type)) => (name, Some(gpu_type)),
        None => (name_and_type, None),
    };
    check_gpu_name(entry, name)?;
    let gpu_type = gpu_type
        .map(|t| parse_type(GRES_FORMAT, entry, t))
        .transpose()?;
    Ok(GpuRequest { gpu_type, count })
}

fn check_gpu_name(entry: &str, name: &str) -> Result<(), FormatError> {
    match name {
        "gpu" => Ok(()),
        "" => Err(FormatError::new(
            GRES_FORMAT,
            entry,
            "missing resource name; expected gpu",
        )),
        _ => Err(FormatError::new(
            GRES_FORMAT,
            name,
            "unsupported generic resource; corral supports only gpu",
        )),
    }
}

/// Parses a `--gpus`, `--gpus-per-node` or `--gpus-per-task` value: `N` or `type:N`.
pub fn parse_gpu_count(spec: &str) -> Result<GpuRequest, FormatError> {
    if spec.is_empty() {
        return Err(FormatError::new(
            GPUS_FORMAT,
            spec,
            "empty; expected N or TYPE:N, e.g. 8 or h100:8",
        ));
    }
    match spec.split_once(':') {
        None if is_digits(spec) => Ok(GpuRequest {
            gpu_type: None,
            count: parse_count(GPUS_FORMAT, spec, spec)?,
        }),
        None => Err(FormatError::new(
            GPUS_FORMAT,
            spec,
            "expected a GPU count, N or TYPE:N (e.g. 8 or h100:8)",
        )),
        Some((gpu_type, count)) => Ok(GpuRequest {
            gpu_type: Some(parse_type(GPUS_FORMAT, spec, gpu_type)?),
            count: parse_count(GPUS_FORMAT, spec, count)?,
        }),
    }
}

fn is_digits(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// Parses a GPU count, which must be a whole number above zero.
fn parse_count(format: &'static str, context: &str, text: &str) -> Result<u32, FormatError> {
    if text.is_empty() {
        return Err(FormatError::new(format, context, "missing GPU count"));
    }
    if !is_digits(text) {
        return Err(FormatError::new(
            format,
            text,
            "GPU count must be a whole number above zero",
        ));
    }
    match text.parse::<u32>() {
        Ok(0) => Err(FormatError::new(
            format,
            text,
            "GPU count must be above zero",
        )),
        Ok(count) => Ok(count),
        Err(_) => Err(FormatError::new(format, text, "GPU count is too large")),
    }
}

/// Checks a GPU type name: letters, digits, `_`, `.` and `-`, not all digits.
fn parse_type(format: &'static str, context: &str, text: &str) -> Result<String, FormatError> {
    if text.is_empty() {
        return Err(FormatError::new(format, context, "empty GPU type"));
    }
    let valid_chars = text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if !valid_chars {
        return Err(FormatError::new(
            format,
            text,
            "GPU type may hold only letters, digits, '_', '.' and '-'",
        ));
    }
    if is_digits(text) {
        return Err(FormatError::new(
            format,
            text,
            "GPU type cannot be a number",
        ));
    }
    Ok(text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn gpus(gpu_type: Option<&str>, count: u32) -> GpuRequest {
        GpuRequest {
            gpu_type: gpu_type.map(str::to_string),
            count,
        }
    }

    #[test]
    fn gres_forms() {
        assert_eq!(parse_gres("gpu"), Ok(gpus(None, 1)));
        assert_eq!(parse_gres("gpu:8"), Ok(gpus(None, 8)));
        assert_eq!(parse_gres("gpu:h100"), Ok(gpus(Some("h100"), 1)));
        assert_eq!(parse_gres("gpu:h100:8"), Ok(gpus(Some("h100"), 8)));
        assert_eq!(
            parse_gres("gpu:a100_3g.20gb:1"),
            Ok(gpus(Some("a100_3g.20gb"), 1))
        );
        assert_eq!(parse_gres("gpu:1g.5gb"), Ok(gpus(Some("1g.5gb"), 1)));
        assert_eq!(
            parse_gres("gpu:nvidia-h100:2"),
            Ok(gpus(Some("nvidia-h100"), 2))
        );
    }

    #[test]
    fn gres_tres_forms() {
        assert_eq!(parse_gres("gres/gpu"), Ok(gpus(None, 1)));
        assert_eq!(parse_gres("gres/gpu=4"), Ok(gpus(None, 4)));
        assert_eq!(parse_gres("gres/gpu:h100"), Ok(gpus(Some("h100"), 1)));
        assert_eq!(parse_gres("gres/gpu:h100=8"), Ok(gpus(Some("h100"), 8)));
    }

    #[test]
    fn gres_refuses_other_resources_by_name() {
        assert_eq!(parse_gres("nvme:1").unwrap_err().token, "nvme");
        assert_eq!(parse_gres("gpu:1,nvme:1").unwrap_err().token, "nvme");
        assert_eq!(parse_gres("shard:2").unwrap_err().token, "shard");
        assert_eq!(parse_gres("GPU:1").unwrap_err().token, "GPU");
        assert_eq!(parse_gres("gres/mps=100").unwrap_err().token, "mps");
        assert_eq!(parse_gres(":1").unwrap_err().token, ":1");
        assert_eq!(parse_gres("gres/=1").unwrap_err().token, "gres/=1");
    }

    #[test]
    fn gres_refuses_bad_counts_and_types() {
        let cases = [
            ("gpu:0", "0"),
            ("gpu:h100:0", "0"),
            ("gres/gpu=0", "0"),
            ("gpu:h100:x", "x"),
            ("gpu:h100:-1", "-1"),
            ("gpu:h100:99999999999", "99999999999"),
            ("gpu:4:2", "4"),
            ("gpu:h1 00:2", "h1 00"),
            ("gpu:h100:8(S:0-1)", "gpu:h100:8(S:0-1)"),
            ("gpu::8", "gpu::8"),
            ("gpu:", "gpu:"),
            ("gpu:h100:", "gpu:h100:"),
            ("gres/gpu=", "gres/gpu="),
            ("gres/gpu:=2", "gres/gpu:=2"),
            ("gpu:a:b:c", "gpu:a:b:c"),
        ];
        for (input, token) in cases {
            assert_eq!(parse_gres(input).unwrap_err().token, token, "{input}");
        }
    }

    #[test]
    fn gres_refuses_empty_and_duplicate_entries() {
        assert_eq!(parse_gres("").unwrap_err().token, "");
        assert_eq!(parse_gres("gpu,").unwrap_err().token, "gpu,");
        assert_eq!(parse_gres(",gpu").unwrap_err().token, ",gpu");
        let err = parse_gres("gpu:1,gpu:2").unwrap_err();
        assert_eq!(err.token, "gpu");
        assert!(err.reason.contains("more than once"));
    }

    #[test]
    fn gpu_count_forms() {
        assert_eq!(parse_gpu_count("1"), Ok(gpus(None, 1)));
        assert_eq!(parse_gpu_count("8"), Ok(gpus(None, 8)));
        assert_eq!(parse_gpu_count("h100:8"), Ok(gpus(Some("h100"), 8)));
        assert_eq!(
            parse_gpu_count("a100_3g.20gb:7"),
            Ok(gpus(Some("a100_3g.20gb"), 7))
        );
    }

    #[test]
    fn gpu_count_refuses_malformed_input() {
        let cases = [
            ("", ""),
            ("0", "0"),
            ("h100", "h100"),
            ("h100:0", "0"),
            ("h100:", "h100:"),
            (":8", ":8"),
            ("h100:8:1", "8:1"),
            ("-1", "-1"),
            ("4294967296", "4294967296"),
            ("h 100:1", "h 100"),
            ("12:4", "12"),
        ];
        for (input, token) in cases {
            let err = parse_gpu_count(input).unwrap_err();
            assert_eq!(err.token, token, "{input}");
            assert_eq!(err.format, "gpu count");
        }
    }

    proptest! {
        #[test]
        fn typed_counts_round_trip(gpu_type in "[a-z][a-z0-9_.]{0,12}", count in 1u32..) {
            prop_assert_eq!(parse_gpu_count(&format!("{gpu_type}:{count}")), Ok(gpus(Some(&gpu_type), count)));
            prop_assert_eq!(parse_gres(&format!("gpu:{gpu_type}:{count}")), Ok(gpus(Some(&gpu_type), count)));
        }

        #[test]
        fn parse_never_panics(text in "\\PC{0,24}") {
            let _ = parse_gres(&text);
            let _ = parse_gpu_count(&text);
        }
    }
}
