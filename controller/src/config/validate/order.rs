//! Dependency order for definitions that must be created after others: accounts
//! after their parent, QOS after the QOS they preempt.

/// Orders indices `0..deps.len()` so each comes after every index in its
/// `deps` entry, keeping the written order where it is free. On a cycle, returns
/// an index on it.
pub(crate) fn dependency_order(deps: &[Vec<usize>]) -> Result<Vec<usize>, usize> {
    let mut placed = vec![false; deps.len()];
    let mut order = Vec::with_capacity(deps.len());
    while order.len() < deps.len() {
        let before = order.len();
        for (i, needs) in deps.iter().enumerate() {
            if !placed[i] && needs.iter().all(|&d| placed[d]) {
                placed[i] = true;
                order.push(i);
            }
        }
        if order.len() == before {
            return Err(on_cycle(deps, &placed));
        }
    }
    Ok(order)
}

/// Walks unplaced dependencies from the first unplaced index until one repeats:
/// that one is on a cycle.
fn on_cycle(deps: &[Vec<usize>], placed: &[bool]) -> usize {
    let mut at = placed.iter().position(|p| !p).unwrap_or(0);
    let mut seen = vec![false; deps.len()];
    while !seen[at] {
        seen[at] = true;
        match deps[at].iter().find(|&&d| !placed[d]) {
            Some(&next) => at = next,
            None => break,
        }
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependencies_come_first_and_written_order_is_kept() {
        let deps = vec![vec![2], vec![], vec![1], vec![]];
        assert_eq!(dependency_order(&deps), Ok(vec![1, 2, 3, 0]));
    }

    #[test]
    fn a_cycle_names_one_of_its_members() {
        // 0 depends on the cycle 1 <-> 2 but is not on it.
        let deps = vec![vec![1], vec![2], vec![1]];
        let at = dependency_order(&deps).unwrap_err();
        assert!(at == 1 || at == 2);
    }
}
