//! `scontrol show hostnames` and `show hostlist`: hostlist expressions expanded
//! to one host per line, and names compressed back, with no cluster involved.

use anyhow::Context;
use corral_state::slurm::hostlist::{compress, expand};

/// `show hostnames [LIST]`: one host per line, in the order written, duplicates
/// kept (as Slurm prints them). Without `list`, `job_nodelist` (the value of
/// `$SLURM_JOB_NODELIST`) is expanded.
pub fn hostnames(list: Option<&str>, job_nodelist: Option<&str>) -> anyhow::Result<String> {
    let list = match list {
        Some(list) => list,
        None => job_nodelist.filter(|v| !v.trim().is_empty()).context(
            "no host list: SLURM_JOB_NODELIST is not set (outside a job); \
             give one, e.g. scontrol show hostnames gpu[01-04]",
        )?,
    };
    let mut out = String::new();
    for name in expand(list)? {
        out.push_str(&name);
        out.push('\n');
    }
    Ok(out)
}

/// `show hostlist NAMES` (`sorted`: `show hostlistsorted`): the names (themselves
/// a hostlist expression) as one expression. Unsorted, the order and duplicates
/// are kept, so the result expands back to exactly the names given; sorted,
/// duplicates are dropped.
pub fn hostlist(names: &str, sorted: bool) -> anyhow::Result<String> {
    let names = expand(names)?;
    if sorted {
        return Ok(compress(&names));
    }
    // Split into runs that are already in compress's order, and compress each.
    let mut runs: Vec<Vec<&str>> = Vec::new();
    for name in &names {
        match runs.last_mut() {
            Some(run) if run.last().is_some_and(|last| in_order(last, name)) => run.push(name),
            _ => runs.push(vec![name]),
        }
    }
    let parts: Vec<String> = runs.iter().map(|run| compress(run)).collect();
    Ok(parts.join(","))
}

/// Whether `next` comes strictly after `prev` in the order `compress` sorts by.
fn in_order(prev: &str, next: &str) -> bool {
    expand(&compress(&[prev, next])).is_ok_and(|names| names == [prev, next])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_one_host_per_line_as_slurm_does() {
        assert_eq!(
            hostnames(Some("gpu[01-03],login1"), None).unwrap(),
            "gpu01\ngpu02\ngpu03\nlogin1\n"
        );
        assert_eq!(hostnames(Some("n[8-10]"), None).unwrap(), "n8\nn9\nn10\n");
        assert_eq!(hostnames(Some("b,a,b"), None).unwrap(), "b\na\nb\n");
    }

    #[test]
    fn without_a_list_the_job_nodelist_is_used() {
        assert_eq!(
            hostnames(None, Some("node[1-2]")).unwrap(),
            "node1\nnode2\n"
        );
        // An explicit list wins.
        assert_eq!(hostnames(Some("x1"), Some("node[1-2]")).unwrap(), "x1\n");
    }

    #[test]
    fn without_a_list_or_a_job_nodelist_the_error_says_so() {
        for missing in [None, Some(""), Some("  ")] {
            let message = hostnames(None, missing).unwrap_err().to_string();
            assert!(message.contains("SLURM_JOB_NODELIST"), "{message}");
        }
    }

    #[test]
    fn bad_expressions_name_the_token() {
        let message = hostnames(Some("gpu[3-1]"), None).unwrap_err().to_string();
        assert!(message.contains("[3-1]"), "{message}");
        assert!(hostlist("n[1-", false).is_err());
    }

    #[test]
    fn hostlist_compresses_in_the_order_given() {
        assert_eq!(hostlist("a,b,c", false).unwrap(), "a,b,c");
        assert_eq!(hostlist("n1,n2,n3,n5", false).unwrap(), "n[1-3,5]");
        assert_eq!(
            hostlist("n[1-3],n4,login1", false).unwrap(),
            "n[1-4],login1"
        );
        assert_eq!(hostlist("n3,n1,n2", false).unwrap(), "n3,n[1-2]");
        assert_eq!(hostlist("n1,n1", false).unwrap(), "n1,n1");
        assert_eq!(hostlist("", false).unwrap(), "");
    }

    #[test]
    fn unsorted_hostlist_expands_back_to_the_names() {
        let names = "n3,n1,n2,gpu07,gpu08,n2,login,a1";
        let expr = hostlist(names, false).unwrap();
        assert_eq!(expand(&expr).unwrap(), expand(names).unwrap());
    }

    #[test]
    fn hostlistsorted_sorts_and_deduplicates() {
        assert_eq!(hostlist("n3,n1,n2,n2", true).unwrap(), "n[1-3]");
    }
}
