//! A Wing–Gong linearizability search with Lowe's memoization: given
//! operations with their invocation and completion times, find an order that
//! respects real time (an operation completed before another began comes
//! first) in which a sequential model accepts every operation.
//!
//! The search explores, depth first, which pending operation takes effect
//! next: any not yet placed whose invocation precedes the earliest
//! completion among those not yet placed. A (placed set, model state) pair
//! already explored is never explored again, which keeps histories of a few
//! thousand operations per key tractable. Checkers split histories by key
//! first (each job's reads are independent), as P-compositionality allows.

use std::collections::HashSet;
use std::hash::Hash;

/// A sequential specification.
pub trait Model: Clone + Eq + Hash {
    /// An operation with its result, as observed.
    type Op;
    /// The state after `op`, or `None` when the model could not have
    /// answered so in this state.
    fn step(&self, op: &Self::Op) -> Option<Self>;
}

/// An operation that completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timed<O> {
    /// When it was invoked.
    pub invoked: u64,
    /// When its answer arrived.
    pub completed: u64,
    /// The operation's id, unique in the run.
    pub op: O,
}

/// No order exists. The search placed `placed` operations at most; then
/// none of `blocked` (indices into the operations) could take effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotLinearizable {
    /// How many operations the deepest search placed.
    pub placed: usize,
    /// The operations none of which could take effect next.
    pub blocked: Vec<usize>,
}

/// An order in which the operations take effect (indices into `ops`), or
/// where the search got stuck.
pub fn linearize<M: Model>(
    initial: &M,
    ops: &[Timed<M::Op>],
) -> Result<Vec<usize>, NotLinearizable> {
    let mut search = Search {
        ops,
        placed: vec![false; ops.len()],
        order: Vec::with_capacity(ops.len()),
        seen: HashSet::new(),
        deepest: NotLinearizable {
            placed: 0,
            blocked: Vec::new(),
        },
    };
    if search.explore(initial.clone()) {
        Ok(search.order)
    } else {
        Err(search.deepest)
    }
}

struct Search<'a, M: Model> {
    ops: &'a [Timed<M::Op>],
    placed: Vec<bool>,
    order: Vec<usize>,
    seen: HashSet<(Vec<bool>, M)>,
    deepest: NotLinearizable,
}

impl<M: Model> Search<'_, M> {
    fn explore(&mut self, state: M) -> bool {
        if self.order.len() == self.ops.len() {
            return true;
        }
        let horizon = self
            .ops
            .iter()
            .zip(&self.placed)
            .filter(|(_, placed)| !**placed)
            .map(|(op, _)| op.completed)
            .min()
            .unwrap_or(u64::MAX);
        let candidates: Vec<usize> = (0..self.ops.len())
            .filter(|&i| !self.placed[i] && self.ops[i].invoked <= horizon)
            .collect();
        for &i in &candidates {
            let Some(next) = state.step(&self.ops[i].op) else {
                continue;
            };
            self.placed[i] = true;
            if self.seen.insert((self.placed.clone(), next.clone())) {
                self.order.push(i);
                if self.explore(next) {
                    return true;
                }
                self.order.pop();
            }
            self.placed[i] = false;
        }
        if self.order.len() >= self.deepest.placed {
            self.deepest = NotLinearizable {
                placed: self.order.len(),
                blocked: candidates,
            };
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A register with reads and writes.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    struct Register(u32);

    enum RegisterOp {
        Write(u32),
        Read(u32),
    }

    impl Model for Register {
        type Op = RegisterOp;
        fn step(&self, op: &RegisterOp) -> Option<Self> {
            match op {
                RegisterOp::Write(v) => Some(Register(*v)),
                RegisterOp::Read(v) => (*v == self.0).then(|| self.clone()),
            }
        }
    }

    fn op(invoked: u64, completed: u64, op: RegisterOp) -> Timed<RegisterOp> {
        Timed {
            invoked,
            completed,
            op,
        }
    }

    #[test]
    fn concurrent_operations_may_take_effect_in_either_order() {
        // The read overlaps the write and sees the old value: fine.
        let ops = [
            op(0, 10, RegisterOp::Write(1)),
            op(5, 8, RegisterOp::Read(0)),
            op(11, 12, RegisterOp::Read(1)),
        ];
        let order = linearize(&Register(0), &ops).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(order, vec![1, 0, 2]);
    }

    #[test]
    fn a_stale_read_after_a_completed_write_is_not_linearizable() {
        let ops = [
            op(0, 10, RegisterOp::Write(1)),
            op(11, 12, RegisterOp::Read(0)),
        ];
        let error = linearize(&Register(0), &ops).err();
        assert_eq!(
            error,
            Some(NotLinearizable {
                placed: 1,
                blocked: vec![1]
            })
        );
    }

    #[test]
    fn many_concurrent_writes_are_searched_without_blowing_up() {
        // 10 overlapping writes of distinct values, then a read of one of
        // them: 10! orders, but at most 2^10 x 10 (placed, state) pairs.
        let mut ops: Vec<_> = (1..=10).map(|v| op(0, 100, RegisterOp::Write(v))).collect();
        ops.push(op(101, 102, RegisterOp::Read(7)));
        let order = linearize(&Register(0), &ops).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(order.len(), 11);
        assert_eq!(order[9], 6, "the write of 7 goes last");
    }
}
