//! A synthetic GPU cluster and job mix for benchmarks, built through commands
//! exactly as an administrator and agents would, from a fixed seed.

use std::collections::BTreeSet;

use corral_state::account::{Account, User};
use corral_state::command::{Command, PlannedAllocation};
use corral_state::job::{BatchScript, JobSpec, NodeAllocation};
use corral_state::node::{GpuDefinition, NodeDefinition};
use corral_state::partition::{Partition, PreemptMode};
use corral_state::slurm::duration::TimeLimit;
use corral_state::slurm::gres::GpuRequest;
use corral_state::slurm::hostlist;
use corral_state::{Actor, ClusterState, JobId, Role, Timestamp};
use rand::Rng;
use rand::rngs::StdRng;

/// Accounts in the synthetic account tree.
pub const ACCOUNTS: usize = 50;
/// Users, spread over the accounts.
pub const USERS: usize = 200;

fn admin() -> Actor {
    Actor {
        user: "root".into(),
        role: Role::Admin,
    }
}

/// The name of node `i` (0-based).
pub fn node_name(i: u32) -> String {
    format!("gpu-node{:05}", i + 1)
}

fn apply(state: &mut ClusterState, command: Command) -> anyhow::Result<()> {
    state
        .apply(command)
        .map(|_| ())
        .map_err(|e| anyhow::anyhow!("setting up the synthetic cluster: {e}"))
}

/// `nodes` nodes of `gpus` h100 GPUs each, one default partition holding them all,
/// 50 accounts with skewed shares and 200 users; every agent registered.
pub fn build(nodes: u32, gpus: u32) -> anyhow::Result<ClusterState> {
    let mut state = ClusterState::default();
    let at = Timestamp::from_secs(1_000_000);
    let defs = (0..nodes)
        .map(|i| NodeDefinition {
            name: node_name(i),
            cpus: 128,
            memory_mb: 2 * 1024 * 1024,
            gpus: (0..gpus)
                .map(|index| GpuDefinition {
                    index,
                    gpu_type: "h100".into(),
                })
                .collect(),
            features: BTreeSet::new(),
        })
        .collect();
    apply(
        &mut state,
        Command::DefineNodes {
            nodes: defs,
            by: admin(),
            at,
        },
    )?;
    let names: Vec<String> = (0..nodes).map(node_name).collect();
    let partition = Partition {
        name: "gpu".into(),
        hostlist: hostlist::compress(&names),
        nodes: BTreeSet::new(),
        max_time: TimeLimit::Seconds(7 * 24 * 3600),
        default_time: Some(TimeLimit::Seconds(24 * 3600)),
        priority_tier: 1,
        allowed_accounts: None,
        preempt_mode: PreemptMode::Requeue,
        is_default: true,
        up: true,
    };
    apply(
        &mut state,
        Command::SetPartition {
            partition,
            by: admin(),
        },
    )?;
    for a in 0..ACCOUNTS {
        let account = Account {
            name: format!("acct{a:02}"),
            parent: Some("root".into()),
            shares: 1 + (a as u32 % 10) * 10,
            default_qos: None,
            description: String::new(),
            limits: Default::default(),
        };
        apply(
            &mut state,
            Command::SetAccount {
                account,
                by: admin(),
            },
        )?;
    }
    for u in 0..USERS {
        let account = format!("acct{:02}", u % ACCOUNTS);
        let user = User {
            name: format!("user{u:03}"),
            default_account: account.clone(),
            accounts: BTreeSet::from([account]),
            role: Role::User,
            limits: Default::default(),
        };
        apply(&mut state, Command::SetUser { user, by: admin() })?;
    }
    for i in 0..nodes {
        apply(
            &mut state,
            Command::RegisterNode {
                node: node_name(i),
                cpus: 128,
                memory_mb: 2 * 1024 * 1024,
                gpus: (0..gpus).map(|g| (g, "h100".to_string())).collect(),
                running: Vec::new(),
                agent_version: "bench".into(),
                boot_id: format!("boot-{i}"),
                step_address: None,
                at,
            },
        )?;
    }
    Ok(state)
}

/// One job of the benchmark mix: 70% one GPU, 20% a whole 8-GPU node, 10% a gang
/// of 2-16 whole nodes. Users are skewed towards the first few.
pub fn job(rng: &mut StdRng, gpus_per_node: u32) -> (JobSpec, BatchScript, Actor) {
    let u = (rng.random_range(0.0f64..1.0).powi(3) * USERS as f64) as usize % USERS;
    let user = format!("user{u:03}");
    let mut spec = JobSpec::sbatch_defaults("bench", &user, "/home/bench");
    let roll: f64 = rng.random_range(0.0..1.0);
    let (nodes, gpus) = if roll < 0.7 {
        (1, 1)
    } else if roll < 0.9 {
        (1, gpus_per_node)
    } else {
        (rng.random_range(2..=16), gpus_per_node)
    };
    spec.nodes = nodes;
    spec.gpus_per_node = (gpus > 0).then_some(GpuRequest {
        gpu_type: None,
        count: gpus,
    });
    spec.time_limit = Some(TimeLimit::Seconds(rng.random_range(1..=48) * 1800));
    let batch = BatchScript {
        script: "#!/bin/bash\n#SBATCH --job-name=bench\nsrun python train.py --config big.yaml\n"
            .into(),
        argv: Vec::new(),
        environment: [("PATH", "/usr/bin:/bin"), ("HOME", "/home/bench")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    (
        spec,
        batch,
        Actor {
            user,
            role: Role::User,
        },
    )
}

/// GPUs placed by the plan being built but not yet applied.
pub type Taken = BTreeSet<(String, u32)>;

/// A first-fit placement over free GPUs not in `taken`, scanning nodes from
/// `cursor` onwards (the cursor moves past full nodes so a long run of placements
/// stays linear). Records the GPUs it picks in `taken`.
pub fn first_fit(
    state: &ClusterState,
    id: JobId,
    cursor: &mut usize,
    names: &[String],
    taken: &mut Taken,
) -> Option<PlannedAllocation> {
    let job = state.job(id)?;
    let want = &job.resources;
    let mut parts = Vec::new();
    let mut i = *cursor;
    while i < names.len() && parts.len() < want.nodes as usize {
        let node = state.nodes().get(&names[i])?;
        let free: Vec<u32> = node
            .gpus
            .iter()
            .filter(|g| g.is_free_and_usable() && !taken.contains(&(node.name.clone(), g.index)))
            .map(|g| g.index)
            .collect();
        if free.len() >= want.gpus_per_node as usize {
            let gpus = free[..want.gpus_per_node as usize].to_vec();
            parts.push(NodeAllocation {
                node: node.name.clone(),
                gpus,
                cpus: want.cpus_per_node,
                memory_mb: 0,
            });
        } else if parts.is_empty() && free.is_empty() {
            *cursor = i + 1;
        }
        i += 1;
    }
    if parts.len() != want.nodes as usize {
        return None;
    }
    for part in &parts {
        taken.extend(part.gpus.iter().map(|g| (part.node.clone(), *g)));
    }
    Some(PlannedAllocation {
        job: id,
        attempt: job.next_attempt_number(),
        nodes: parts,
    })
}

/// Nodes under one leaf switch of the synthetic fat tree.
pub const NODES_PER_LEAF: u32 = 32;
/// Leaf switches under one spine switch.
pub const LEAVES_PER_SPINE: u32 = 16;

/// A three-level fat tree over `nodes` nodes: 32 nodes per leaf switch, 16 leaves
/// per spine, one core switch above the spines.
pub fn fat_tree(nodes: u32) -> corral_state::topology::Topology {
    use corral_state::topology::{Switch, Topology};
    let mut topology = Topology::default();
    let leaves = nodes.div_ceil(NODES_PER_LEAF);
    let spines = leaves.div_ceil(LEAVES_PER_SPINE);
    for leaf in 0..leaves {
        let first = leaf * NODES_PER_LEAF;
        let last = (first + NODES_PER_LEAF).min(nodes);
        let switch = Switch {
            nodes: (first..last).map(node_name).collect(),
            children: Vec::new(),
        };
        topology.switches.insert(format!("leaf{leaf:04}"), switch);
    }
    for spine in 0..spines {
        let first = spine * LEAVES_PER_SPINE;
        let last = (first + LEAVES_PER_SPINE).min(leaves);
        let switch = Switch {
            nodes: Vec::new(),
            children: (first..last).map(|l| format!("leaf{l:04}")).collect(),
        };
        topology.switches.insert(format!("spine{spine:03}"), switch);
    }
    let core = Switch {
        nodes: Vec::new(),
        children: (0..spines).map(|s| format!("spine{s:03}")).collect(),
    };
    topology.switches.insert("core".into(), core);
    topology
}

/// Applies the fat tree to the cluster.
pub fn add_fat_tree(state: &mut ClusterState, nodes: u32) -> anyhow::Result<()> {
    apply(
        state,
        Command::SetTopology {
            topology: fat_tree(nodes),
            by: admin(),
        },
    )
}

/// One job of the scheduler benchmark's mix: 70% one GPU, 25% a whole node, 5% a
/// gang of 16-512 whole nodes (log-uniform). Users are skewed towards the first few.
pub fn scheduler_job(rng: &mut StdRng, gpus_per_node: u32) -> (JobSpec, BatchScript, Actor) {
    let (mut spec, batch, by) = job(rng, gpus_per_node);
    let roll: f64 = rng.random_range(0.0..1.0);
    let (nodes, gpus) = if roll < 0.70 {
        (1, 1)
    } else if roll < 0.95 {
        (1, gpus_per_node)
    } else {
        let log2 = rng.random_range(4.0f64..=9.0);
        (log2.exp2().round() as u32, gpus_per_node)
    };
    spec.nodes = nodes;
    spec.gpus_per_node = (gpus > 0).then_some(GpuRequest {
        gpu_type: None,
        count: gpus,
    });
    (spec, batch, by)
}
