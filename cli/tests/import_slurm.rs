//! `corral import-slurm` as a user runs it: the real binary on the Slurm
//! configurations under tests/fixtures/import-slurm/ (Include lines read from
//! disk), its output loaded by corrald's own configuration loader, its notes
//! on standard error, and its refusals.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/import-slurm")
        .join(path)
}

fn import(args: &[&Path]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_corral"));
    command.arg("import-slurm");
    let flags = ["--slurm-conf", "--gres-conf", "--topology-conf"];
    for (flag, path) in flags.iter().zip(args) {
        command.arg(flag).arg(path);
    }
    command.output().unwrap()
}

/// The output, loaded by corrald's loader as if written to /etc/corral.
fn loads(output: &Output) -> corral_controller::config::ControllerConfig {
    let stdout = String::from_utf8(output.stdout.clone()).unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "failed: {stderr}\n{stdout}");
    corral_controller::config::parse(&stdout, Path::new("/etc/corral/corral.toml"))
        .unwrap_or_else(|e| panic!("corrald refuses the output: {e}\n{stdout}"))
}

#[test]
fn import_slurm_the_reference_cluster_loads_in_corrald() {
    let output = import(&[
        &fixture("reference/slurm.conf"),
        &fixture("reference/gres.conf"),
    ]);
    let config = loads(&output);
    assert_eq!(config.cluster_name, "reference");
    assert_eq!(config.cluster.nodes.len(), 4);
    assert_eq!(config.cluster.partitions.len(), 2);
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("Slurm keys not carried over") && stderr.contains("PLACEHOLDER"),
        "{stderr}"
    );
    assert!(!stderr.contains("beside slurm.conf"), "{stderr}");
}

#[test]
fn import_slurm_names_a_gres_conf_it_was_not_given() {
    let output = import(&[&fixture("reference/slurm.conf")]);
    loads(&output);
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("gres.conf is beside slurm.conf but was not read; give --gres-conf"),
        "{stderr}"
    );
}

#[test]
fn import_slurm_follows_include_lines_on_disk() {
    let output = import(&[&fixture("forms/slurm.conf")]);
    let config = loads(&output);
    assert_eq!(config.cluster_name, "tux");
    assert_eq!(config.cluster.nodes.len(), 26);
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(stdout.contains("tux/nodes.conf:4"), "{stdout}");
}

#[test]
fn import_slurm_a_dgx_cluster_with_gres_conf_and_topology_conf() {
    let output = import(&[
        &fixture("dgx/slurm.conf"),
        &fixture("dgx/gres.conf"),
        &fixture("dgx/topology.conf"),
    ]);
    let config = loads(&output);
    assert_eq!(config.cluster.nodes.len(), 44);
    assert_eq!(config.cluster.topology.switches.len(), 9);
    assert_eq!(config.cluster.accounts.len(), 3);
}

#[test]
fn import_slurm_the_man_page_example_loads() {
    let config = loads(&import(&[&fixture("manpage/slurm.conf")]));
    assert_eq!(config.cluster.nodes.len(), 26);
}

#[test]
fn import_slurm_refuses_bad_input_saying_where() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.conf");
    let output = import(&[&missing]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("cannot read") && stderr.contains("nope.conf"),
        "{stderr}"
    );

    let bad = dir.path().join("slurm.conf");
    std::fs::write(&bad, "ClusterName=c\nNodeName=n1 CPUs=many RealMemory=10\n").unwrap();
    let output = import(&[&bad]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("slurm.conf:2: CPUs=many is not a whole number"),
        "{stderr}"
    );

    // corrald would refuse a node with more GPUs than it supports: the output
    // is printed for editing, and the command fails saying why.
    std::fs::write(
        &bad,
        "ClusterName=c\nNodeName=n1 CPUs=8 RealMemory=10 Gres=gpu:h100:65\n",
    )
    .unwrap();
    let output = import(&[&bad]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8(output.stdout)
            .unwrap()
            .contains("gpus = 65")
    );
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("corrald would refuse") && stderr.contains("at most 64"),
        "{stderr}"
    );
}
