//! A whole cluster's TLS material in one directory, for development and first
//! deployments (behind `corral certs DIR`): the CA, and a certificate and key per
//! controller, node agent and user.
//!
//! Layout: `ca.pem`, `ca.key`, `controller-<id>.pem/.key`, `agent-<node>.pem/.key`
//! and `user-<name>.pem/.key`. Private keys are written with mode 0600. An existing
//! `ca.pem` + `ca.key` pair is reused, so running it again adds principals to the
//! same cluster; the principals it names get fresh keys.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::ca::{ClusterCa, IssuedCert};
use crate::error::PkiError;
use crate::identity::Identity;
use crate::role::Role;

/// What to mint.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BundleSpec {
    /// The cluster's name (goes into a new CA's subject).
    pub cluster_name: String,
    /// Controller ids, each with host names or IP addresses it is reached at
    /// besides `localhost` and `127.0.0.1`.
    pub controllers: Vec<(u64, Vec<String>)>,
    /// Node names, one agent each.
    pub agents: Vec<String>,
    /// User names with their role: user, operator or admin.
    pub users: Vec<(String, Role)>,
}

/// One principal's files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrincipalFiles {
    /// Who the certificate names.
    pub identity: Identity,
    /// The certificate.
    pub cert: PathBuf,
    /// Its private key (mode 0600).
    pub key: PathBuf,
}

/// What [`write_dev_bundle`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundlePaths {
    /// The CA certificate: every participant needs it.
    pub ca_cert: PathBuf,
    /// The CA key (mode 0600): needed only to issue more certificates.
    pub ca_key: PathBuf,
    /// True when the CA already existed and was reused.
    pub ca_reused: bool,
    /// Controllers, then agents, then users, in the order the spec lists them.
    pub principals: Vec<PrincipalFiles>,
}

/// A principal to mint: its identity, file stem and SANs.
struct Principal {
    identity: Identity,
    stem: String,
    sans: Vec<String>,
}

/// Mints the CA (or reuses `dir/ca.pem` + `dir/ca.key`) and a certificate for
/// every principal in `spec`, writing them to `dir` (created if missing).
/// Controllers get the SANs `localhost`, `127.0.0.1` and their extra hosts;
/// agents their node name, `localhost` and `127.0.0.1`; users none.
pub fn write_dev_bundle(dir: &Path, spec: &BundleSpec) -> Result<BundlePaths, PkiError> {
    let principals = principals(spec)?;
    fs::create_dir_all(dir).map_err(|source| PkiError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let ca_cert = dir.join("ca.pem");
    let ca_key = dir.join("ca.key");
    let (ca, ca_reused) = match (ca_cert.exists(), ca_key.exists()) {
        (true, true) => (
            ClusterCa::from_pem(&read(&ca_cert)?, &read(&ca_key)?)?,
            true,
        ),
        (false, false) => {
            let ca = ClusterCa::generate(&spec.cluster_name)?;
            write_file(&ca_key, &ca.key_pem(), 0o600)?;
            write_file(&ca_cert, ca.ca_pem(), 0o644)?;
            (ca, false)
        }
        (true, false) => {
            return Err(PkiError::HalfCa {
                present: ca_cert,
                missing: ca_key,
            });
        }
        (false, true) => {
            return Err(PkiError::HalfCa {
                present: ca_key,
                missing: ca_cert,
            });
        }
    };
    let mut written = Vec::with_capacity(principals.len());
    for principal in principals {
        let sans: Vec<&str> = principal.sans.iter().map(String::as_str).collect();
        let IssuedCert { cert_pem, key_pem } =
            ca.issue(principal.identity.role, &principal.identity.name, &sans)?;
        let cert = dir.join(format!("{}.pem", principal.stem));
        let key = dir.join(format!("{}.key", principal.stem));
        write_file(&key, &key_pem, 0o600)?;
        write_file(&cert, &cert_pem, 0o644)?;
        written.push(PrincipalFiles {
            identity: principal.identity,
            cert,
            key,
        });
    }
    Ok(BundlePaths {
        ca_cert,
        ca_key,
        ca_reused,
        principals: written,
    })
}

/// Every principal of `spec`, checked before anything is written.
fn principals(spec: &BundleSpec) -> Result<Vec<Principal>, PkiError> {
    let local = ["localhost".to_string(), "127.0.0.1".to_string()];
    let mut all = Vec::new();
    for (id, hosts) in &spec.controllers {
        let name = format!("controller-{id}");
        let mut sans = local.to_vec();
        for host in hosts {
            if !sans.contains(host) {
                sans.push(host.clone());
            }
        }
        all.push(Principal {
            stem: name.clone(),
            identity: Identity {
                name,
                role: Role::Controller,
            },
            sans,
        });
    }
    for node in &spec.agents {
        check_name(node)?;
        let mut sans = vec![node.clone()];
        sans.extend(local.iter().filter(|s| *s != node).cloned());
        all.push(Principal {
            stem: format!("agent-{node}"),
            identity: Identity {
                name: node.clone(),
                role: Role::Agent,
            },
            sans,
        });
    }
    for (user, role) in &spec.users {
        check_name(user)?;
        if !matches!(role, Role::User | Role::Operator | Role::Admin) {
            return Err(PkiError::NotAUserRole {
                name: user.clone(),
                role: *role,
            });
        }
        all.push(Principal {
            stem: format!("user-{user}"),
            identity: Identity {
                name: user.clone(),
                role: *role,
            },
            sans: Vec::new(),
        });
    }
    let mut stems = BTreeSet::new();
    for principal in &all {
        if !stems.insert(principal.stem.as_str()) {
            return Err(PkiError::InvalidName {
                name: principal.identity.name.clone(),
                reason: "listed twice",
            });
        }
    }
    Ok(all)
}

/// A node or user name must be usable as part of a file name.
fn check_name(name: &str) -> Result<(), PkiError> {
    let invalid = |reason| {
        Err(PkiError::InvalidName {
            name: name.to_string(),
            reason,
        })
    };
    if name.is_empty() || name.len() > 128 {
        return invalid("names are 1 to 128 characters long");
    }
    if name.starts_with(['.', '-']) {
        return invalid("names may not start with '.' or '-'");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    {
        return invalid("names may hold only ASCII letters, digits, '.', '-' and '_'");
    }
    Ok(())
}

fn read(path: &Path) -> Result<String, PkiError> {
    fs::read_to_string(path).map_err(|source| PkiError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes `contents` to `path` through a temporary file renamed over it, so the
/// file never exists with other permissions than `mode` or half written.
fn write_file(path: &Path, contents: &str, mode: u32) -> Result<(), PkiError> {
    let error = |source| PkiError::Write {
        path: path.to_path_buf(),
        source,
    };
    let file_name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = path.with_file_name(format!(".{file_name}.tmp"));
    let _ = fs::remove_file(&tmp);
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options.open(&tmp).map_err(error)?;
    file.write_all(contents.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(error)?;
    drop(file);
    fs::rename(&tmp, path).map_err(error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::material::TlsMaterial;

    fn spec() -> BundleSpec {
        BundleSpec {
            cluster_name: "test".into(),
            controllers: vec![(1, vec!["ctl1.example".into()]), (2, Vec::new())],
            agents: vec!["gpu-001".into()],
            users: vec![("alice".into(), Role::User), ("root".into(), Role::Admin)],
        }
    }

    #[test]
    fn a_bundle_holds_the_ca_and_every_principal_with_its_identity() {
        let dir = tempfile::tempdir().unwrap();
        let paths = write_dev_bundle(dir.path(), &spec()).unwrap();
        assert!(!paths.ca_reused);
        assert_eq!(paths.ca_cert, dir.path().join("ca.pem"));
        let names: Vec<String> = paths
            .principals
            .iter()
            .map(|p| p.cert.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "controller-1.pem",
                "controller-2.pem",
                "agent-gpu-001.pem",
                "user-alice.pem",
                "user-root.pem"
            ]
        );
        for principal in &paths.principals {
            let material =
                TlsMaterial::load(&paths.ca_cert, &principal.cert, &principal.key).unwrap();
            assert_eq!(material.identity().unwrap(), principal.identity);
        }
        assert_eq!(
            paths.principals[2].identity,
            Identity {
                name: "gpu-001".into(),
                role: Role::Agent
            }
        );
        assert_eq!(paths.principals[4].identity.role, Role::Admin);
    }

    #[cfg(unix)]
    #[test]
    fn private_keys_are_readable_by_their_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        // A key left readable by an earlier run is replaced by a private one.
        fs::write(dir.path().join("user-alice.key"), "old").unwrap();
        fs::set_permissions(
            dir.path().join("user-alice.key"),
            fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let paths = write_dev_bundle(dir.path(), &spec()).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&paths.ca_key), 0o600);
        for principal in &paths.principals {
            assert_eq!(mode(&principal.key), 0o600, "{}", principal.key.display());
        }
    }

    #[test]
    fn a_second_run_reuses_the_ca_and_adds_principals() {
        let dir = tempfile::tempdir().unwrap();
        let first = write_dev_bundle(dir.path(), &spec()).unwrap();
        let ca_pem = fs::read_to_string(&first.ca_cert).unwrap();
        let more = BundleSpec {
            users: vec![("bob".into(), Role::Operator)],
            ..BundleSpec::default()
        };
        let second = write_dev_bundle(dir.path(), &more).unwrap();
        assert!(second.ca_reused);
        assert_eq!(fs::read_to_string(&second.ca_cert).unwrap(), ca_pem);
        assert!(first.principals[0].cert.exists(), "earlier files stay");
        let bob = &second.principals[0];
        assert_eq!(bob.identity.name, "bob");
        TlsMaterial::load(&second.ca_cert, &bob.cert, &bob.key).unwrap();
    }

    #[test]
    fn a_half_ca_bad_names_and_daemon_roles_for_users_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let first = write_dev_bundle(dir.path(), &BundleSpec::default()).unwrap();
        fs::remove_file(&first.ca_key).unwrap();
        let err = write_dev_bundle(dir.path(), &spec()).unwrap_err();
        assert!(matches!(err, PkiError::HalfCa { .. }), "{err}");
        assert!(
            !dir.path().join("controller-1.pem").exists(),
            "nothing written"
        );

        let fresh = tempfile::tempdir().unwrap();
        for bad in ["../etc", "", ".hidden", "a b", "-rf"] {
            let spec = BundleSpec {
                agents: vec![bad.into()],
                ..BundleSpec::default()
            };
            assert!(
                matches!(
                    write_dev_bundle(fresh.path(), &spec),
                    Err(PkiError::InvalidName { .. })
                ),
                "{bad:?}"
            );
        }
        let twice = BundleSpec {
            users: vec![("alice".into(), Role::User), ("alice".into(), Role::Admin)],
            ..BundleSpec::default()
        };
        assert!(matches!(
            write_dev_bundle(fresh.path(), &twice),
            Err(PkiError::InvalidName { .. })
        ));
        let daemon = BundleSpec {
            users: vec![("eve".into(), Role::Controller)],
            ..BundleSpec::default()
        };
        assert!(matches!(
            write_dev_bundle(fresh.path(), &daemon),
            Err(PkiError::NotAUserRole { .. })
        ));
        assert!(
            !fresh.path().join("ca.pem").exists(),
            "refused specs write nothing"
        );
    }
}
