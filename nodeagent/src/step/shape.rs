//! Laying a step out on the allocation (pure): which nodes run it and how many
//! tasks each runs, from `srun`'s `-N`, `-n` and `--ntasks-per-node`.
//!
//! The step uses the allocation's first N nodes in `SLURM_JOB_NODELIST` order
//! (all of them by default; among those `-w` names, when given). With `--ntasks-per-node=K` each node runs K tasks
//! (the last ones fewer when `-n` says so); otherwise `-n` tasks (one per node
//! by default) are placed by Slurm's block distribution, and a step with fewer
//! tasks than nodes shrinks to as many nodes as tasks, as `srun` does. `-m
//! cyclic` changes which ranks each node runs, not how many.
//!
//! With `--gpus-per-task=N` (the step's, else the job's) each task gets N of
//! its node's job GPUs: a node must hold N for each of its tasks.

use corral_proto::step::{StepLayout, StepShapeRequest, TaskDistribution};
use corral_state::job::{Attempt, Job, NodeAllocation};

use crate::job::environment::layout::{NodeLayout, block_distribution, tasks_that_fit};

/// Why a step cannot be laid out on the allocation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepShapeError {
    /// `-N` asked for more nodes than the job holds (or none).
    #[error(
        "-N {asked}: the job holds {held} node(s); ask for 1 to {held} (srun runs inside the job's allocation)"
    )]
    Nodes {
        /// Asked for.
        asked: u32,
        /// Held by the job.
        held: usize,
    },
    /// `-w` named a node outside the allocation.
    #[error("-w {node}: the node is not part of this job's allocation ({nodelist})")]
    NotInAllocation {
        /// The node.
        node: String,
        /// The job's nodes.
        nodelist: String,
    },
    /// `-n 0` or `--ntasks-per-node=0`.
    #[error("a step needs at least one task; give -n and --ntasks-per-node values of 1 or more")]
    NoTasks,
    /// `--gpus-per-task` asks for more GPUs on a node than the job holds there.
    #[error(
        "--gpus-per-task={per_task} with {tasks} task(s) on {node} needs {needed} GPUs, and the job holds {held} there; lower -n or --gpus-per-task"
    )]
    NotEnoughGpus {
        /// The node.
        node: String,
        /// Its tasks.
        tasks: u32,
        /// GPUs per task.
        per_task: u32,
        /// GPUs needed.
        needed: u64,
        /// GPUs the job holds there.
        held: usize,
    },
    /// `-n` is more than `--ntasks-per-node` times the nodes.
    #[error(
        "-n {ntasks} with --ntasks-per-node={per_node} on {nodes} node(s) leaves tasks without a node; raise -N or --ntasks-per-node, or lower -n"
    )]
    TooManyTasks {
        /// `-n`.
        ntasks: u32,
        /// `--ntasks-per-node`.
        per_node: u32,
        /// Nodes of the step.
        nodes: u32,
    },
}

/// Step number `step` of `job`'s attempt laid out as `request` asks.
pub fn plan_step(
    job: &Job,
    attempt: &Attempt,
    request: &StepShapeRequest,
    step: u32,
) -> Result<StepLayout, StepShapeError> {
    let layout = NodeLayout::of(attempt);
    let candidates: Vec<&NodeAllocation> = match &request.nodelist {
        Some(list) => {
            if let Some(outside) = list.iter().find(|n| layout.index_of(n).is_none()) {
                return Err(StepShapeError::NotInAllocation {
                    node: outside.clone(),
                    nodelist: layout.nodelist().to_string(),
                });
            }
            layout
                .nodes()
                .iter()
                .copied()
                .filter(|a| list.contains(&a.node))
                .collect()
        }
        None => layout.nodes().to_vec(),
    };
    let held = candidates.len();
    let held_u32 = u32::try_from(held).unwrap_or(u32::MAX);
    let mut nodes = request.nodes.unwrap_or(held_u32);
    if nodes == 0 || nodes > held_u32 {
        return Err(StepShapeError::Nodes { asked: nodes, held });
    }
    if request.ntasks == Some(0) || request.ntasks_per_node == Some(0) {
        return Err(StepShapeError::NoTasks);
    }
    let counts = match request.ntasks_per_node {
        Some(per_node) => {
            let room = u64::from(per_node) * u64::from(nodes);
            let ntasks = request
                .ntasks
                .unwrap_or(u32::try_from(room).unwrap_or(u32::MAX));
            if u64::from(ntasks) > room {
                return Err(StepShapeError::TooManyTasks {
                    ntasks,
                    per_node,
                    nodes,
                });
            }
            let mut left = ntasks;
            (0..nodes)
                .map(|_| {
                    let here = left.min(per_node);
                    left -= here;
                    here
                })
                .collect::<Vec<u32>>()
        }
        None => {
            let ntasks = request.ntasks.unwrap_or(nodes);
            nodes = nodes.min(ntasks);
            let per_task = request.cpus_per_task.unwrap_or(job.spec.cpus_per_task);
            let capacity: Vec<u32> = candidates
                .iter()
                .take(nodes as usize)
                .map(|a| tasks_that_fit(a, per_task))
                .collect();
            block_distribution(ntasks, &capacity)
        }
    };
    let placed: Vec<(&NodeAllocation, u32)> = candidates
        .iter()
        .copied()
        .zip(counts)
        .filter(|(_, count)| *count > 0)
        .collect();
    let gpus_per_task = request
        .gpus_per_task
        .or(job.spec.gpus_per_task.as_ref().map(|g| g.count))
        .filter(|n| *n > 0);
    if let Some(per_task) = gpus_per_task {
        for (allocation, tasks) in &placed {
            let needed = u64::from(*tasks) * u64::from(per_task);
            if needed > allocation.gpus.len() as u64 {
                return Err(StepShapeError::NotEnoughGpus {
                    node: allocation.node.clone(),
                    tasks: *tasks,
                    per_task,
                    needed,
                    held: allocation.gpus.len(),
                });
            }
        }
    }
    let nodes_total = placed.len() as u64;
    let ntasks_total: u64 = placed.iter().map(|(_, count)| u64::from(*count)).sum();
    let (names, tasks) = placed
        .into_iter()
        .map(|(allocation, count)| (allocation.node.clone(), count))
        .unzip();
    Ok(StepLayout {
        step,
        nodes: names,
        tasks,
        // srun's default: one task per node is dealt (and named) cyclic.
        distribution: request
            .distribution
            .unwrap_or(if ntasks_total <= nodes_total {
                TaskDistribution::Cyclic
            } else {
                TaskDistribution::Block
            }),
        gpus_per_task,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_state::testkit::{at, cluster, spec, start, submit};

    fn two_node_job() -> Job {
        let mut state = cluster(2, 8);
        let id = submit(&mut state, spec("alice", 2, 8), at(1));
        start(&mut state, id, at(2));
        state.job(id).cloned().expect("job")
    }

    fn plan(
        job: &Job,
        nodes: Option<u32>,
        ntasks: Option<u32>,
        per_node: Option<u32>,
    ) -> Result<StepLayout, StepShapeError> {
        let attempt = job.current_attempt().expect("attempt");
        let request = StepShapeRequest {
            nodes,
            ntasks,
            ntasks_per_node: per_node,
            ..StepShapeRequest::default()
        };
        plan_step(job, attempt, &request, 0)
    }

    #[test]
    fn by_default_one_task_on_every_node() {
        let job = two_node_job();
        let step = plan(&job, None, None, None).expect("layout");
        assert_eq!(step.tasks, vec![1, 1]);
        assert_eq!(step.nodes.len(), 2);
        assert_eq!(step.ntasks(), 2);
    }

    #[test]
    fn ntasks_per_node_fills_each_node_and_n_trims_the_last() {
        let job = two_node_job();
        assert_eq!(
            plan(&job, None, None, Some(4)).expect("layout").tasks,
            vec![4, 4]
        );
        assert_eq!(
            plan(&job, None, Some(6), Some(4)).expect("layout").tasks,
            vec![4, 2]
        );
        assert_eq!(
            plan(&job, None, Some(3), Some(4)).expect("layout").tasks,
            vec![3]
        );
        assert_eq!(
            plan(&job, Some(1), Some(5), Some(4)),
            Err(StepShapeError::TooManyTasks {
                ntasks: 5,
                per_node: 4,
                nodes: 1
            })
        );
    }

    #[test]
    fn gpus_per_task_must_fit_the_gpus_the_job_holds_on_each_node() {
        let job = two_node_job();
        let attempt = job.current_attempt().expect("attempt");
        let request = |per_task, per_node| StepShapeRequest {
            ntasks_per_node: Some(per_node),
            gpus_per_task: Some(per_task),
            distribution: Some(corral_proto::step::TaskDistribution::Cyclic),
            ..StepShapeRequest::default()
        };
        let step = plan_step(&job, attempt, &request(2, 4), 0).expect("8 GPUs hold 4 x 2");
        assert_eq!(step.gpus_per_task, Some(2));
        assert_eq!(
            step.distribution,
            corral_proto::step::TaskDistribution::Cyclic
        );
        let refused = plan_step(&job, attempt, &request(3, 4), 0).unwrap_err();
        assert!(
            matches!(
                refused,
                StepShapeError::NotEnoughGpus {
                    needed: 12,
                    held: 8,
                    ..
                }
            ),
            "{refused:?}"
        );
        // Without the option, the job's own --gpus-per-task (none here).
        assert_eq!(
            plan(&job, None, None, None).expect("layout").gpus_per_task,
            None
        );
    }

    #[test]
    fn without_m_one_task_per_node_is_cyclic_and_more_is_block_as_in_srun() {
        let job = two_node_job();
        assert_eq!(
            plan(&job, None, None, None).expect("layout").distribution,
            TaskDistribution::Cyclic
        );
        assert_eq!(
            plan(&job, None, None, Some(2))
                .expect("layout")
                .distribution,
            TaskDistribution::Block
        );
    }

    #[test]
    fn fewer_tasks_than_nodes_shrinks_the_step() {
        let job = two_node_job();
        let step = plan(&job, None, Some(1), None).expect("layout");
        assert_eq!(step.tasks, vec![1]);
        assert_eq!(step.nodes.len(), 1);
        let one = plan(&job, Some(1), None, None).expect("layout");
        assert_eq!(one.nodes, step.nodes);
    }

    #[test]
    fn nodelist_chooses_among_the_allocations_nodes() {
        let job = two_node_job();
        let attempt = job.current_attempt().expect("attempt");
        let second = NodeLayout::of(attempt).nodes()[1].node.clone();
        let request = StepShapeRequest {
            nodelist: Some(vec![second.clone()]),
            ..StepShapeRequest::default()
        };
        let step = plan_step(&job, attempt, &request, 0).expect("layout");
        assert_eq!(step.nodes, vec![second]);
        let outside = StepShapeRequest {
            nodelist: Some(vec!["elsewhere".into()]),
            ..StepShapeRequest::default()
        };
        assert!(matches!(
            plan_step(&job, attempt, &outside, 0),
            Err(StepShapeError::NotInAllocation { .. })
        ));
    }

    #[test]
    fn bad_requests_say_what_is_wrong() {
        let job = two_node_job();
        assert_eq!(
            plan(&job, Some(3), None, None),
            Err(StepShapeError::Nodes { asked: 3, held: 2 })
        );
        assert_eq!(
            plan(&job, Some(0), None, None),
            Err(StepShapeError::Nodes { asked: 0, held: 2 })
        );
        assert_eq!(
            plan(&job, None, Some(0), None),
            Err(StepShapeError::NoTasks)
        );
        assert_eq!(
            plan(&job, None, None, Some(0)),
            Err(StepShapeError::NoTasks)
        );
    }
}
