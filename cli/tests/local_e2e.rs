//! `corral local` as a process: a local cluster whose bootstrap fails leaves no
//! controller running behind it.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use support::corral_bin;

#[test]
fn a_failed_local_up_stops_the_controllers_it_started() {
    let dir = tempfile::tempdir().unwrap();
    // A stand-in for corrald that runs but cannot bootstrap.
    let fake = dir.path().join("fake-corrald");
    std::fs::write(
        &fake,
        "#!/bin/sh\nif [ \"$1\" = init ]; then echo 'bootstrap refused: test' >&2; exit 1; fi\nwhile true; do sleep 1; done\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cluster = dir.path().join("cluster");
    let out = Command::new(corral_bin())
        .args(["local", "up", "--controllers", "3", "--nodes", "1", "--dir"])
        .arg(&cluster)
        .arg("--corrald")
        .arg(&fake)
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "local up with a failing bootstrap succeeded"
    );
    let status = Command::new(corral_bin())
        .args(["--json", "local", "status", "--dir"])
        .arg(&cluster)
        .output()
        .unwrap();
    let processes: Vec<serde_json::Value> = serde_json::from_slice(&status.stdout).unwrap();
    let left: Vec<&serde_json::Value> = processes.iter().filter(|p| p["running"] == true).collect();
    // Never leave them behind, whatever the outcome.
    let _ = Command::new(corral_bin())
        .args(["local", "down", "--dir"])
        .arg(&cluster)
        .output();
    assert!(left.is_empty(), "processes left running: {left:?}");
}
