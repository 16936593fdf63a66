//! `srun -o/-e`: where the tasks' output goes, as Slurm 22.05's srun reads the
//! value: `all` (or `-`, the default) to srun; `none` nowhere; a task id to
//! srun from that task only; a pattern with `%t`, `%n` or `%N` to a file per
//! task on the task's node; any other name (a pattern of `%j %J %s %u %x %%`)
//! to one file srun itself writes on its host, replaced if it exists. `-e`
//! defaults to `-o`, and when both name the same file srun writes it once.

use std::collections::BTreeMap;
use std::fs::File;

use corral_proto::step::{TaskFiles, TaskStream};
use corral_state::slurm::filename_pattern::{PatternValues, expand_pattern};

/// The tasks' part of `-o/-e`, and the files srun writes itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redirection {
    /// What the agents do with each stream.
    pub tasks: TaskFiles,
    /// The patterns of the files srun writes (standard output, error).
    pub local: (Option<String>, Option<String>),
}

/// Reads `-o` and `-e`.
pub fn redirection(output: Option<&str>, error: Option<&str>) -> Redirection {
    let (stdout, local_out) = classify(output);
    let (stderr, local_err) = classify(error.or(output));
    Redirection {
        tasks: TaskFiles { stdout, stderr },
        local: (local_out, local_err),
    }
}

/// One stream's value: what the tasks do, and the file srun writes, if any.
fn classify(value: Option<&str>) -> (TaskStream, Option<String>) {
    let Some(text) = value else {
        return (TaskStream::Srun, None);
    };
    if text.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("all")) || text.starts_with('-') {
        return (TaskStream::Srun, None);
    }
    if text.eq_ignore_ascii_case("none") {
        return (TaskStream::Discard, None);
    }
    if let Ok(task) = text.parse::<u32>() {
        return (TaskStream::OnlyTask(task), None);
    }
    let per_task = !text.contains('\\') && ["%t", "%n", "%N"].iter().any(|d| per_node(text, d));
    if per_task {
        (TaskStream::NodeFile(text.to_string()), None)
    } else {
        (TaskStream::Srun, Some(text.to_string()))
    }
}

/// Whether `pattern` holds directive `%X` (with or without a width, `%3t`),
/// not escaped as `%%`.
fn per_node(pattern: &str, directive: &str) -> bool {
    let letter = directive.chars().nth(1).unwrap_or('%');
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            continue;
        }
        while chars.peek().is_some_and(char::is_ascii_digit) {
            chars.next();
        }
        if chars.peek() == Some(&letter) {
            return true;
        }
    }
    false
}

/// The files srun writes for `local`, opened (created or emptied, mode 0644
/// under the umask) once the step has its number; one file when both name
/// the same. `Err` says which could not be opened, in srun's words.
pub fn open_local(
    local: &(Option<String>, Option<String>),
    (job, step): (u64, u32),
    env: &BTreeMap<String, String>,
) -> Result<(Option<File>, Option<File>), String> {
    let user = env.get("USER").map_or("", String::as_str);
    let name = env.get("SLURM_JOB_NAME").map_or("", String::as_str);
    let values = PatternValues {
        job_id: job,
        array_job_id: env.get("SLURM_ARRAY_JOB_ID").and_then(|v| v.parse().ok()),
        array_task_id: env.get("SLURM_ARRAY_TASK_ID").and_then(|v| v.parse().ok()),
        job_name: name,
        user,
        node: "",
        node_id: 0,
        task_id: 0,
        step: Some(step),
    };
    let path =
        |pattern: &str| expand_pattern(pattern, &values).unwrap_or_else(|_| pattern.to_string());
    let open = |path: &str, what: &str| {
        File::create(path).map_err(|e| format!("Could not open {what} file {path}: {e}"))
    };
    let out_path = local.0.as_deref().map(path);
    let err_path = local.1.as_deref().map(path);
    let stdout = out_path.as_deref().map(|p| open(p, "stdout")).transpose()?;
    let stderr = match (&err_path, &out_path, &stdout) {
        (Some(err), Some(out), Some(file)) if err == out => Some(
            file.try_clone()
                .map_err(|e| format!("Could not open stderr file {err}: {e}"))?,
        ),
        (Some(err), _, _) => Some(open(err, "stderr")?),
        (None, _, _) => None,
    };
    Ok((stdout, stderr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_form_goes_where_slurms_srun_sends_it() {
        let stream = |o: &str| redirection(Some(o), None);
        assert_eq!(stream("all").tasks, TaskFiles::default());
        assert_eq!(stream("-").tasks, TaskFiles::default());
        assert_eq!(stream("none").tasks.stdout, TaskStream::Discard);
        assert_eq!(stream("3").tasks.stdout, TaskStream::OnlyTask(3));
        assert_eq!(
            stream("out-%2t.log").tasks.stdout,
            TaskStream::NodeFile("out-%2t.log".into())
        );
        assert_eq!(
            stream("on-%N").tasks.stderr,
            TaskStream::NodeFile("on-%N".into())
        );
        let local = stream("train-%j.log");
        assert_eq!(local.tasks, TaskFiles::default());
        assert_eq!(
            local.local,
            (Some("train-%j.log".into()), Some("train-%j.log".into()))
        );
        // %%t is a literal "%t": one file, written by srun.
        assert_eq!(stream("100%%t").local.0.as_deref(), Some("100%%t"));
        // -e alone: only standard error moves.
        let err = redirection(None, Some("err-%t"));
        assert_eq!(err.tasks.stdout, TaskStream::Srun);
        assert_eq!(err.tasks.stderr, TaskStream::NodeFile("err-%t".into()));
    }

    #[test]
    fn a_local_file_is_opened_once_for_both_streams() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pattern = dir.path().join("job-%j.%s.log").display().to_string();
        let local = redirection(Some(&pattern), None).local;
        let env = BTreeMap::from([("USER".to_string(), "alice".to_string())]);
        let (out, err) = open_local(&local, (42, 3), &env).expect("opens");
        assert!(out.is_some() && err.is_some());
        assert!(dir.path().join("job-42.3.log").exists());
        let bad = redirection(Some("/nonexistent-dir/x.log"), None).local;
        let refused = open_local(&bad, (1, 0), &env).expect_err("no directory");
        assert!(
            refused.starts_with("Could not open stdout file"),
            "{refused}"
        );
    }
}
