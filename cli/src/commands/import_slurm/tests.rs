//! The import end to end on whole Slurm configurations (the fixtures under
//! cli/tests/fixtures/import-slurm/), without I/O: each output is fed to
//! corrald's own configuration loader, which must accept it, and the cluster
//! it defines is checked against the Slurm files.

use std::collections::BTreeMap;

use corral_controller::config::{self, ControllerConfig, PartitionStateName, PreemptModeName};
use corral_state::slurm::duration::TimeLimit;

use super::notes::Kind;
use super::source::lines_of;
use super::translate::{Imported, Inputs, translate};

const REFERENCE_SLURM: &str =
    include_str!("../../../tests/fixtures/import-slurm/reference/slurm.conf");
const REFERENCE_GRES: &str =
    include_str!("../../../tests/fixtures/import-slurm/reference/gres.conf");
const MANPAGE_SLURM: &str = include_str!("../../../tests/fixtures/import-slurm/manpage/slurm.conf");
const FORMS_SLURM: &str = include_str!("../../../tests/fixtures/import-slurm/forms/slurm.conf");
const FORMS_NODES: &str = include_str!("../../../tests/fixtures/import-slurm/forms/tux/nodes.conf");
const DGX_SLURM: &str = include_str!("../../../tests/fixtures/import-slurm/dgx/slurm.conf");
const DGX_GRES: &str = include_str!("../../../tests/fixtures/import-slurm/dgx/gres.conf");
const DGX_TOPOLOGY: &str = include_str!("../../../tests/fixtures/import-slurm/dgx/topology.conf");

/// Imports files given as (path, text); the first is slurm.conf, and the
/// others named gres.conf or topology.conf are those.
fn import(files: &[(&str, &str)]) -> Imported {
    let map: BTreeMap<&str, &str> = files.iter().copied().collect();
    let named = |suffix: &str| {
        files
            .iter()
            .find(|(path, _)| path.ends_with(suffix))
            .map(|(path, _)| lines_of(&map, path).unwrap())
    };
    let (main, _) = files[0];
    translate(&Inputs {
        slurm_conf: lines_of(&map, main).unwrap(),
        gres_conf: named("gres.conf"),
        topology_conf: named("topology.conf"),
        sources: vec![("slurm.conf", main.to_string())],
    })
    .unwrap()
}

/// The output as corrald loads it; fails the test if corrald refuses it.
fn load(imported: &Imported) -> ControllerConfig {
    assert_eq!(imported.refusal, None, "{}", imported.text);
    config::parse(
        &imported.text,
        std::path::Path::new("/etc/corral/corral.toml"),
    )
    .unwrap_or_else(|e| panic!("corrald refuses the output: {e}\n{}", imported.text))
}

/// Every not-carried and changed note, as printed.
fn notes(imported: &Imported) -> (String, String) {
    (
        imported.notes.render(Kind::NotCarried, 10_000).join("\n"),
        imported.notes.render(Kind::Changed, 10_000).join("\n"),
    )
}

fn limit(written: Option<&str>) -> Option<TimeLimit> {
    written.map(|w| corral_state::slurm::duration::parse_time_limit(w).unwrap())
}

#[test]
fn the_reference_slurm_22_05_cluster_imports() {
    let imported = import(&[
        ("/var/tmp/slurm-reference/etc/slurm.conf", REFERENCE_SLURM),
        ("/var/tmp/slurm-reference/etc/gres.conf", REFERENCE_GRES),
    ]);
    let loaded = load(&imported);
    assert_eq!(loaded.cluster_name, "reference");
    let cluster = &loaded.cluster;
    assert_eq!(cluster.nodes.len(), 4);
    for node in &cluster.nodes {
        assert_eq!(node.cpus, 8);
        assert_eq!(node.memory_mb, 4096);
        assert_eq!(node.gpus.len(), 8);
        assert!(node.gpus.iter().all(|g| g.gpu_type == "gpu"));
        assert!(node.features.contains("a100"));
    }
    let batch = &cluster.partitions[0];
    assert_eq!(batch.name, "batch");
    assert!(batch.is_default);
    assert_eq!(batch.nodes.len(), 4);
    assert_eq!(batch.max_time, TimeLimit::Unlimited);
    let debug = &cluster.partitions[1];
    assert_eq!(debug.hostlist, "n[1-2]");
    assert_eq!(debug.max_time, TimeLimit::Seconds(3600));
    // priority/basic: FIFO within a tier.
    assert_eq!(cluster.config.priority.fairshare, 0);
    assert_eq!(cluster.config.max_active_jobs, 50_000);
    assert!(!cluster.config.enforce_associations);
    let (not_carried, changed) = notes(&imported);
    for key in [
        "SlurmctldHost=ctl1(10.213.91.11), ctl2(10.213.91.12)",
        "AuthType=auth/munge",
        "SelectType=select/cons_tres",
        "SchedulerParameters=defer,batch_sched_delay=1",
        "NodeAddr=10.213.91.21",
        "Boards",
        "AutoDetect=off",
        "File=/var/tmp/slurm-reference/dev/fakegpu[0-7]",
    ] {
        if key == "Boards" {
            assert!(
                !not_carried.contains(key),
                "Boards is carried: {not_carried}"
            );
        } else {
            assert!(not_carried.contains(key), "{key} missing:\n{not_carried}");
        }
    }
    assert!(changed.contains("Features list a100"), "{changed}");
    assert!(changed.contains("priority/basic"), "{changed}");
    // The header lists the notes, and the placeholder replica is marked.
    assert!(
        imported
            .text
            .starts_with("# corral.toml, imported from Slurm")
    );
    assert!(
        imported
            .text
            .contains("# PLACEHOLDER: corral.toml needs at least one [[replicas]]")
    );
    assert!(
        imported
            .text
            .contains("peer = \"controller-1.invalid:7100\"")
    );
}

#[test]
fn the_man_pages_example_imports() {
    let imported = import(&[("slurm.conf", MANPAGE_SLURM)]);
    let loaded = load(&imported);
    let cluster = &loaded.cluster;
    assert_eq!(cluster.nodes.len(), 26);
    assert!(
        cluster
            .nodes
            .iter()
            .all(|n| n.cpus == 2 && n.memory_mb == 2000)
    );
    let names: Vec<&str> = cluster.partitions.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["debug", "batch", "long"]);
    assert_eq!(cluster.partitions[0].max_time, TimeLimit::Seconds(30 * 60));
    assert_eq!(cluster.partitions[2].max_time, TimeLimit::Seconds(120 * 60));
    assert!(cluster.partitions[0].is_default);
    assert_eq!(loaded.leader.kill_wait_ms, 30_000);
    let (not_carried, changed) = notes(&imported);
    for key in [
        "SlurmctldHost=dev0(12.34.56.78), dev1(12.34.56.79) (slurm.conf:8-9)",
        "TmpDisk=64000 on NodeName lines (slurm.conf:36)",
        "Weight=16 on NodeName lines (slurm.conf:38)",
        "DownNodes=dev20 (slurm.conf:40)",
        "MaxNodes=10 on PartitionName lines (slurm.conf:44)",
        "AllowGroups=admin",
        "Prolog=/usr/local/slurm/prolog",
        "WaitTime=30",
    ] {
        assert!(not_carried.contains(key), "{key} missing:\n{not_carried}");
    }
    assert!(changed.contains("MaxJobCount=10000"), "{changed}");
}

#[test]
fn every_syntax_form_includes_defaults_continuations_and_unknown_keys() {
    let imported = import(&[
        ("forms/slurm.conf", FORMS_SLURM),
        ("forms/tux/nodes.conf", FORMS_NODES),
    ]);
    let loaded = load(&imported);
    assert_eq!(loaded.cluster_name, "tux");
    let cluster = &loaded.cluster;
    assert_eq!(cluster.nodes.len(), 26);
    let features: Vec<&str> = cluster.nodes[0]
        .features
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(features, ["ib", "intel"]);
    let partition = |name: &str| {
        cluster
            .partitions
            .iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("no partition {name}"))
    };
    let minutes = |m: u64| TimeLimit::Seconds(m * 60);
    assert_eq!(partition("debug").max_time, minutes(30));
    assert_eq!(partition("debug").default_time, Some(minutes(10)));
    assert_eq!(partition("quick").max_time, minutes(91));
    assert_eq!(partition("day").max_time, minutes(24 * 60));
    assert_eq!(partition("day").default_time, Some(minutes(60)));
    assert_eq!(partition("twodays").max_time, minutes(2 * 24 * 60));
    assert_eq!(
        partition("week").max_time,
        minutes(7 * 24 * 60 + 12 * 60 + 30)
    );
    assert_eq!(partition("week").default_time, Some(minutes(24 * 60 + 1)));
    assert_eq!(partition("month").nodes.len(), 26);
    assert!(!partition("month").up);
    assert_eq!(partition("forever").max_time, TimeLimit::Unlimited);
    assert_eq!(partition("forever").hostlist, "dev[0,2,4,6]");
    assert_eq!(partition("always").max_time, TimeLimit::Unlimited);
    assert_eq!(loaded.leader.kill_wait_ms, 45_000);
    // MailProg is the leader's mail program (the escaped hash is part of it).
    assert_eq!(
        loaded.leader.mail_program,
        Some(std::path::PathBuf::from("/usr/bin/mail#1"))
    );
    let (not_carried, _) = notes(&imported);
    for key in [
        "Frobnicate=yes (forms/slurm.conf:6): not a slurm.conf key",
        "Colour=blue on PartitionName lines (forms/slurm.conf:24): not a PartitionName key",
        "ControlMachine=tux0",
        "SlurmctldPort=6817 (forms/slurm.conf:7)",
        "SlurmdPort=6818 (forms/slurm.conf:7)",
        "Weight=16 on NodeName lines (forms/tux/nodes.conf:4)",
        "TmpDisk=64000 on NodeName lines (forms/tux/nodes.conf:2)",
        "DownNodes=dev20 (forms/slurm.conf:13)",
    ] {
        assert!(not_carried.contains(key), "{key} missing:\n{not_carried}");
    }
}

#[test]
fn a_dgx_cluster_with_gres_types_mig_and_a_switch_tree() {
    let imported = import(&[
        ("dgx/slurm.conf", DGX_SLURM),
        ("dgx/gres.conf", DGX_GRES),
        ("dgx/topology.conf", DGX_TOPOLOGY),
    ]);
    let loaded = load(&imported);
    let cluster = &loaded.cluster;
    let node = |name: &str| {
        cluster
            .nodes
            .iter()
            .find(|n| n.name == name)
            .unwrap_or_else(|| panic!("no node {name}"))
    };
    assert_eq!(cluster.nodes.len(), 44);
    let a100 = node("dgx001");
    assert_eq!(a100.cpus, 256);
    assert_eq!(a100.memory_mb, 2_063_937 - 16_384);
    assert_eq!(a100.gpus.len(), 8);
    assert!(a100.gpus.iter().all(|g| g.gpu_type == "a100"));
    assert!(node("dgx040").gpus.iter().all(|g| g.gpu_type == "h100"));
    let mig = node("mig02");
    assert_eq!(mig.gpus.len(), 56);
    assert_eq!(mig.gpus[0].gpu_type, "a100_1g.10gb");
    assert!(
        imported.text.contains("mig = [\"0-7:1g.10gb*7\"]"),
        "{}",
        imported.text
    );
    assert!(node("login1").gpus.is_empty());
    assert_eq!(node("login1").cpus, 32);

    let topology = &cluster.topology;
    assert_eq!(topology.switches.len(), 9);
    assert_eq!(topology.switches["leaf6"].nodes, ["mig01", "mig02"]);
    assert_eq!(topology.switches["core"].children, ["spine1", "spine2"]);

    let config = &cluster.config;
    assert_eq!(config.priority.age, 1000);
    assert_eq!(config.priority.fairshare, 100_000);
    assert_eq!(config.priority.qos, 5000);
    assert_eq!(config.fairshare_half_life_seconds, 14 * 24 * 3600);
    assert_eq!(config.preempt_exempt_seconds, 600);
    assert_eq!(config.preempt_grace_seconds, 120);
    assert_eq!(config.max_switch_wait_seconds, 600);
    assert!(config.enforce_associations);
    assert_eq!(loaded.leader.kill_wait_ms, 60_000);

    let partition = |name: &str| cluster.partitions.iter().find(|p| p.name == name).unwrap();
    use corral_state::partition::PreemptMode;
    assert_eq!(partition("batch").preempt_mode, PreemptMode::Requeue);
    assert_eq!(partition("urgent").preempt_mode, PreemptMode::Off);
    assert_eq!(partition("urgent").priority_tier, 10);
    assert_eq!(partition("cpu").preempt_mode, PreemptMode::Cancel);
    assert_eq!(
        partition("batch").default_time,
        Some(TimeLimit::Seconds(4 * 3600))
    );
    let allowed: Vec<&str> = partition("h100")
        .allowed_accounts
        .iter()
        .flatten()
        .map(String::as_str)
        .collect();
    assert_eq!(allowed, ["llm", "vision"]);
    let accounts: Vec<&str> = cluster.accounts.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(accounts, ["llm", "vision", "prod"]);

    let (not_carried, changed) = notes(&imported);
    for key in [
        "Weight=10, 20, 100 on NodeName lines",
        "DefMemPerGPU=65536 on PartitionName lines",
        "PriorityWeightTRES",
        "PriorityFlags=FAIR_TREE",
        "PriorityJobFactor=1",
        "Cores=0-63 (dgx/gres.conf:2)",
        "MultipleFiles=",
        "AutoDetect=nvml (dgx/gres.conf:1): nothing to carry",
        "LinkSpeed=200",
        "spare[1-2] not defined",
        "SchedulerParameters=bf_continue,bf_window=4320",
    ] {
        assert!(not_carried.contains(key), "{key} missing:\n{not_carried}");
    }
    for key in [
        "a100_1g.10gb are counted in MIG instances: carried as 8 a100 GPUs with mig = [\"0-7:1g.10gb*7\"]",
        "MemSpecLimit=16384",
        "AccountingStorageEnforce=associations,limits,qos",
        "AllowAccounts",
    ] {
        assert!(changed.contains(key), "{key} missing:\n{changed}");
    }
    // Each key's origin is written beside it.
    assert!(
        imported.text.contains(
            "weight_fairshare = 100000  # PriorityWeightFairshare=100000 (dgx/slurm.conf:27)"
        ),
        "{}",
        imported.text
    );
    assert!(
        imported
            .text
            .contains("# NodeName=mig[01-02] (dgx/slurm.conf:51)\n[[nodes]]")
    );
}

#[test]
fn an_input_corrald_would_refuse_is_reported_not_passed_off() {
    let imported = import(&[(
        "slurm.conf",
        "ClusterName=c\nGresTypes=gpu\nNodeName=big CPUs=8 RealMemory=1000 Gres=gpu:h100:65\nPartitionName=p Nodes=big\n",
    )]);
    let refusal = imported.refusal.expect("65 GPUs accepted");
    assert!(refusal.contains("at most 64"), "{refusal}");

    let imported = import(&[
        (
            "slurm.conf",
            "ClusterName=c\nNodeName=n[1-2] CPUs=1 RealMemory=10\n",
        ),
        (
            "topology.conf",
            "SwitchName=a Nodes=n[1-2]\nSwitchName=b Nodes=n2\n",
        ),
    ]);
    let refusal = imported.refusal.expect("node under two switches accepted");
    assert!(refusal.contains("n2"), "{refusal}");
}

#[test]
fn slurmctld_parameters_carry_preempt_send_user_signal_and_name_the_rest() {
    let text = "ClusterName=c\nSlurmctldParameters=enable_configless,preempt_send_user_signal\nNodeName=n1 CPUs=4 RealMemory=1024\nPartitionName=p Nodes=n1\n";
    let imported = import(&[("slurm.conf", text)]);
    assert!(load(&imported).leader.preempt_send_user_signal);
    let (not_carried, _) = notes(&imported);
    assert!(
        not_carried.contains("not enable_configless"),
        "{not_carried}"
    );
    let plain = import(&[(
        "slurm.conf",
        "ClusterName=c\nNodeName=n1 CPUs=4 RealMemory=1024\nPartitionName=p Nodes=n1\n",
    )]);
    assert!(!load(&plain).leader.preempt_send_user_signal);
}

#[test]
fn preemption_and_priority_variants_load() {
    use PreemptModeName::{Cancel, Requeue};
    // (settings, the modes written for partitions lo and hi, what is noted)
    let cases: [(&str, [Option<PreemptModeName>; 2], &str); 5] = [
        (
            "PreemptType=preempt/partition_prio\nPreemptMode=CANCEL\n",
            [Some(Cancel), Some(Requeue)],
            "",
        ),
        (
            "PreemptType=preempt/qos\nPreemptMode=REQUEUE\n",
            [None, None],
            "[[qos]] preempts and preempt_mode (here \"requeue\")",
        ),
        (
            "PreemptType=preempt/partition_prio\nPreemptMode=SUSPEND,GANG\n",
            [None, Some(Requeue)],
            "corral cannot suspend a job",
        ),
        (
            "PreemptType=preempt/none\n",
            [None, None],
            "Slurm preempts no job",
        ),
        (
            "PriorityType=priority/multifactor\nPriorityWeightAge=0\nPriorityDecayHalfLife=0\n",
            [None, None],
            "corral always decays usage",
        ),
    ];
    for (extra, modes, noted) in cases {
        let text = format!(
            "ClusterName=c\n{extra}NodeName=n[1-4] CPUs=4 RealMemory=1024 Gres=gpu:l40s:2\nPartitionName=lo Nodes=n[1-4] PriorityTier=1\nPartitionName=hi Nodes=n[1-4] PriorityTier=2 PreemptMode=REQUEUE\n"
        );
        let imported = import(&[("slurm.conf", &text)]);
        load(&imported);
        let file = config::parse_file(&imported.text, std::path::Path::new("x")).unwrap();
        let written: Vec<Option<PreemptModeName>> =
            file.partitions.iter().map(|p| p.preempt_mode).collect();
        assert_eq!(written, modes, "{extra}");
        let (not_carried, _) = notes(&imported);
        assert!(not_carried.contains(noted), "{extra}: {not_carried}");
    }
}

#[test]
fn partition_states_and_a_missing_cluster_name() {
    let imported = import(&[(
        "slurm.conf",
        "NodeName=a CPUs=1 RealMemory=100\nPartitionName=p Nodes=a State=DOWN\n",
    )]);
    let loaded = load(&imported);
    assert_eq!(loaded.cluster_name, "cluster");
    assert!(!loaded.cluster.partitions[0].up);
    let file = config::parse_file(&imported.text, std::path::Path::new("x")).unwrap();
    assert_eq!(file.partitions[0].state, Some(PartitionStateName::Down));
    let (_, changed) = notes(&imported);
    assert!(changed.contains("ClusterName"), "{changed}");
    assert!(limit(file.partitions[0].max_time.as_deref()).is_none());
}
