//! The repository's own rules, as tests.

use std::fs;
use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tidy lives in the workspace")
        .to_path_buf()
}

fn rust_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if name != "target" && !name.to_string_lossy().starts_with('.') {
                rust_sources(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn all_sources() -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_sources(&workspace_root(), &mut files);
    assert!(
        files.len() > 10,
        "found only {} Rust files; is the root right?",
        files.len()
    );
    files
}

#[test]
fn every_module_says_what_it_owns() {
    let missing: Vec<String> = all_sources()
        .into_iter()
        .filter(|path| !path.components().any(|c| c.as_os_str() == "support"))
        .filter(|path| {
            let text = fs::read_to_string(path).unwrap_or_default();
            let first = text
                .lines()
                .find(|l| !l.trim().is_empty() && !l.starts_with("#!["));
            !first.is_some_and(|l| l.starts_with("//!"))
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "these files do not start with a `//!` module doc: {missing:#?}"
    );
}

#[test]
fn no_grab_bag_modules() {
    let banned = ["utils.rs", "util.rs", "helpers.rs", "misc.rs", "common.rs"];
    let found: Vec<String> = all_sources()
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| banned.contains(&n.to_string_lossy().as_ref()))
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        found.is_empty(),
        "name modules after the one idea they own: {found:#?}"
    );
}

/// The `[dependencies]` names of a crate's manifest.
fn dependencies(crate_dir: &str) -> Vec<String> {
    let manifest = fs::read_to_string(workspace_root().join(crate_dir).join("Cargo.toml"))
        .expect("manifest readable");
    let mut in_deps = false;
    let mut names = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
        } else if in_deps
            && !line.starts_with('#')
            && let Some((name, _)) = line.split_once('=')
        {
            let name = name.trim().split('.').next().unwrap_or_default();
            names.push(name.to_string());
        }
    }
    names
}

#[test]
fn pure_crates_depend_only_on_pure_crates() {
    // No tokio, no sled, no network, no clock crates: the state machine and the
    // scheduler are deterministic functions of their input.
    let allowed: &[(&str, &[&str])] = &[
        (
            "state-machine",
            &["serde", "serde_json", "thiserror", "postcard", "sha2"],
        ),
        ("scheduler", &["corral-state", "serde", "thiserror"]),
        ("jepsen", &["serde", "serde_json", "thiserror"]),
    ];
    for (crate_dir, allow) in allowed {
        for dep in dependencies(crate_dir) {
            assert!(
                allow.contains(&dep.as_str()),
                "{crate_dir} may not depend on '{dep}' (see ARCHITECTURE.md)"
            );
        }
    }
}

#[test]
fn pure_crates_read_no_clock_and_do_no_io() {
    let forbidden = [
        "std::time::SystemTime",
        "Instant::now",
        "SystemTime::now",
        "std::fs",
        "std::net",
        "std::env",
        "rand::",
        "std::thread",
    ];
    for crate_dir in ["state-machine/src", "scheduler/src", "jepsen/src"] {
        let mut files = Vec::new();
        rust_sources(&workspace_root().join(crate_dir), &mut files);
        for file in files {
            let text = fs::read_to_string(&file).unwrap_or_default();
            for needle in forbidden {
                assert!(
                    !text.contains(needle),
                    "{} uses `{needle}`; the pure core takes time and data as arguments",
                    file.display()
                );
            }
        }
    }
}
