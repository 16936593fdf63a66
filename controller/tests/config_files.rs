//! `load` reads a file from disk: relative paths resolve against its directory,
//! and `check_files` names a missing TLS file by its key.

use std::fs;

use corral_controller::config::{self, ConfigError};

const FILE: &str = r#"
cluster_name = "disk"
data_dir = "state"

[tls]
ca = "certs/ca.crt"

[[replicas]]
id = 1
peer = "127.0.0.1:7101"
api = "127.0.0.1:7201"
"#;

#[test]
fn relative_paths_resolve_against_the_files_directory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("corral.toml");
    fs::write(&path, FILE).unwrap();
    let config = config::load(&path).unwrap();
    assert_eq!(config.source, path);
    assert_eq!(config.data_dir, dir.path().join("state"));
    assert_eq!(config.tls.ca, dir.path().join("certs/ca.crt"));
    assert_eq!(config.tls.cert, dir.path().join("tls/replica-1.crt"));

    let missing = config.check_files().unwrap_err();
    assert_eq!(missing.key(), Some("tls.ca"), "{missing}");

    fs::create_dir_all(dir.path().join("certs")).unwrap();
    fs::create_dir_all(dir.path().join("tls")).unwrap();
    fs::write(dir.path().join("certs/ca.crt"), "ca").unwrap();
    fs::write(dir.path().join("tls/replica-1.crt"), "cert").unwrap();
    let missing = config.check_files().unwrap_err();
    assert_eq!(missing.key(), Some("tls.key"), "{missing}");
    assert!(matches!(missing, ConfigError::Invalid { .. }));
    fs::write(dir.path().join("tls/replica-1.key"), "key").unwrap();
    config.check_files().unwrap();
}
