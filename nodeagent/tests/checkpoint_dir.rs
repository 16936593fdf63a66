//! The job's checkpoint directory, made by a root agent in a root users may
//! write to: links, named pipes, files and other users' directories planted
//! under the job's name are refused, and nothing outside the job's directory
//! changes owner or mode.
#![allow(clippy::unwrap_used)]

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, chown, symlink};
use std::path::Path;

use corral_agent::job::checkpoint_dir::{CheckpointDirError, make_checkpoint_dir};
use corral_agent::job::process::{RunAs, resolve_user};
use nix::unistd::geteuid;

/// `nobody` when this test runs as root; otherwise jobs run as the agent's
/// own user and nothing is handed over.
fn job_user() -> Option<RunAs> {
    if !geteuid().is_root() {
        eprintln!("running as a user: only the agent's own directories are checked");
        return None;
    }
    Some(resolve_user("nobody").unwrap())
}

/// A checkpoint root anyone may write to, as shared scratch is.
fn shared_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    fs::set_permissions(root.path(), fs::Permissions::from_mode(0o1777)).unwrap();
    root
}

fn owner_and_mode(path: &Path) -> (u32, u32) {
    let meta = fs::symlink_metadata(path).unwrap();
    (meta.uid(), meta.mode() & 0o7777)
}

fn unsafe_because(result: Result<(), CheckpointDirError>, says: &str) {
    match result {
        Err(e @ CheckpointDirError::Unsafe { .. }) => {
            assert!(e.to_string().contains(says), "{e}");
        }
        other => panic!("expected a refusal saying '{says}', got {other:?}"),
    }
}

#[test]
fn a_new_directory_is_made_and_given_to_the_job_user() {
    let root = shared_root();
    let user = job_user();
    make_checkpoint_dir(root.path(), "41", user.as_ref()).unwrap();
    let meta = fs::metadata(root.path().join("41")).unwrap();
    assert!(meta.is_dir());
    let expected = user.as_ref().map_or(geteuid().as_raw(), |u| u.uid);
    assert_eq!(meta.uid(), expected);
    // A requeued attempt finds its own directory.
    make_checkpoint_dir(root.path(), "41", user.as_ref()).unwrap();
}

#[test]
fn a_link_planted_under_the_jobs_name_is_never_followed() {
    let root = shared_root();
    let elsewhere = tempfile::tempdir().unwrap();
    fs::set_permissions(elsewhere.path(), fs::Permissions::from_mode(0o700)).unwrap();
    let before = owner_and_mode(elsewhere.path());
    symlink(elsewhere.path(), root.path().join("42")).unwrap();
    unsafe_because(
        make_checkpoint_dir(root.path(), "42", job_user().as_ref()),
        "symbolic link",
    );
    assert_eq!(owner_and_mode(elsewhere.path()), before);
    // A dangling link is not followed to make its target either.
    let target = elsewhere.path().join("made-through-the-link");
    symlink(&target, root.path().join("43")).unwrap();
    assert!(make_checkpoint_dir(root.path(), "43", job_user().as_ref()).is_err());
    assert!(!target.exists());
}

#[test]
fn a_named_pipe_or_a_file_under_the_jobs_name_is_refused_at_once() {
    let root = shared_root();
    nix::unistd::mkfifo(
        &root.path().join("44"),
        nix::sys::stat::Mode::from_bits_truncate(0o666),
    )
    .unwrap();
    unsafe_because(
        make_checkpoint_dir(root.path(), "44", job_user().as_ref()),
        "not a directory",
    );
    fs::write(root.path().join("45"), "x").unwrap();
    unsafe_because(
        make_checkpoint_dir(root.path(), "45", job_user().as_ref()),
        "not a directory",
    );
}

#[test]
fn another_users_directory_is_not_taken_over() {
    let Some(user) = job_user() else {
        return;
    };
    let root = shared_root();
    // Made by someone expecting the job's id, with a checkpoint for it to
    // resume from.
    let planted = root.path().join("46");
    fs::create_dir(&planted).unwrap();
    fs::write(planted.join("step-100.pt"), "not yours").unwrap();
    chown(&planted, Some(4242), Some(4242)).unwrap();
    unsafe_because(
        make_checkpoint_dir(root.path(), "46", Some(&user)),
        "uid 4242",
    );
    assert_eq!(fs::metadata(&planted).unwrap().uid(), 4242);
    // The agent's own directory (an attempt it could not hand over) is
    // handed over.
    let agents = root.path().join("47");
    fs::create_dir(&agents).unwrap();
    make_checkpoint_dir(root.path(), "47", Some(&user)).unwrap();
    assert_eq!(fs::metadata(&agents).unwrap().uid(), user.uid);
}

#[test]
fn a_name_that_is_not_one_name_under_the_root_is_refused() {
    let root = shared_root();
    for name in ["", ".", "..", "a/b", "../etc"] {
        unsafe_because(make_checkpoint_dir(root.path(), name, None), "single name");
    }
}

#[test]
fn a_missing_root_is_made_and_a_root_that_is_no_directory_is_the_agents_fault() {
    let root = tempfile::tempdir().unwrap();
    let missing = root.path().join("missing");
    make_checkpoint_dir(&missing, "48", None).unwrap();
    assert!(missing.join("48").is_dir());
    let file = root.path().join("a-file");
    fs::write(&file, "x").unwrap();
    assert!(matches!(
        make_checkpoint_dir(&file, "48", None),
        Err(CheckpointDirError::Root { .. })
    ));
}
