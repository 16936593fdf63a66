//! Files and directories named in the configuration, resolved against the
//! configuration file's directory, with per-replica defaults.

use std::path::{Path, PathBuf};

use super::values::Checked;
use crate::config::controller::TlsPaths;
use crate::config::error::Refusal;
use crate::config::file::TlsSection;

/// `path` as written, or `default`, relative to `dir` unless absolute.
fn resolve(dir: &Path, key: &str, path: Option<&Path>, default: String) -> Checked<PathBuf> {
    let path = path.map_or_else(|| PathBuf::from(default), Path::to_path_buf);
    if path.as_os_str().is_empty() {
        return Err(Refusal::new(
            key,
            "empty path; name a file or leave the key out",
        ));
    }
    Ok(if path.is_absolute() {
        path
    } else {
        dir.join(path)
    })
}

/// The directory relative paths start from: the file's own.
pub(crate) fn base_dir(source: &Path) -> &Path {
    source.parent().unwrap_or(Path::new(""))
}

/// The data directory; default `data/replica-<id>`.
pub(crate) fn data_dir(dir: &Path, written: Option<&Path>, id: u64) -> Checked<PathBuf> {
    resolve(dir, "data_dir", written, format!("data/replica-{id}"))
}

/// TLS files; defaults `tls/ca.crt`, `tls/replica-<id>.crt`, `tls/replica-<id>.key`.
pub(crate) fn tls(dir: &Path, section: &TlsSection, id: u64) -> Checked<TlsPaths> {
    Ok(TlsPaths {
        ca: resolve(dir, "tls.ca", section.ca.as_deref(), "tls/ca.crt".into())?,
        cert: resolve(
            dir,
            "tls.cert",
            section.cert.as_deref(),
            format!("tls/replica-{id}.crt"),
        )?,
        key: resolve(
            dir,
            "tls.key",
            section.key.as_deref(),
            format!("tls/replica-{id}.key"),
        )?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_start_at_the_file() {
        let dir = base_dir(Path::new("/etc/corral/corral.toml"));
        assert_eq!(
            data_dir(dir, None, 2).unwrap(),
            Path::new("/etc/corral/data/replica-2")
        );
        assert_eq!(
            data_dir(dir, Some(Path::new("/var/lib/corral")), 2).unwrap(),
            Path::new("/var/lib/corral")
        );
        let dir = base_dir(Path::new("corral.toml"));
        assert_eq!(
            tls(dir, &TlsSection::default(), 1).unwrap().cert,
            Path::new("tls/replica-1.crt")
        );
        assert!(data_dir(dir, Some(Path::new("")), 1).is_err());
    }
}
