//! What `srun` prints: the tasks' output as it arrives (or line by line with
//! each line's rank in front, `-l`), Slurm's messages for tasks that fail, and
//! the step's exit status: the worst of its tasks'.

use std::collections::HashMap;
use std::io::{self, Write};

use corral_proto::step::OutputStream;
use corral_state::job::ExitStatus;

/// The exit status of a task that could not be started (as Slurm's srun).
pub const NOT_STARTED: i32 = 2;

/// Prints the tasks' output, labelled or not.
#[derive(Debug, Default)]
pub struct OutputPrinter {
    /// Rank width when labelling (`None`: print as it comes).
    label_width: Option<usize>,
    /// Lines not yet ended, per task and stream (labelling only).
    partial: HashMap<(u32, OutputStream), Vec<u8>>,
}

impl OutputPrinter {
    /// A printer for `ntasks` tasks; `label` prefixes lines with the rank.
    pub fn new(label: bool, ntasks: u32) -> Self {
        let width = ntasks.saturating_sub(1).max(1).to_string().len();
        OutputPrinter {
            label_width: label.then_some(width),
            partial: HashMap::new(),
        }
    }

    /// Writes `data` from `task` to `out`.
    pub fn write(
        &mut self,
        task: u32,
        stream: OutputStream,
        data: &[u8],
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let Some(width) = self.label_width else {
            out.write_all(data)?;
            return out.flush();
        };
        let pending = self.partial.entry((task, stream)).or_default();
        pending.extend_from_slice(data);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            write!(out, "{task:>width$}: ")?;
            out.write_all(&line)?;
        }
        out.flush()
    }

    /// Writes what is left of `task`'s last line on `stream`, ended.
    pub fn finish(
        &mut self,
        task: u32,
        stream: OutputStream,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let Some(width) = self.label_width else {
            return Ok(());
        };
        if let Some(rest) = self.partial.remove(&(task, stream))
            && !rest.is_empty()
        {
            write!(out, "{task:>width$}: ")?;
            out.write_all(&rest)?;
            out.write_all(b"\n")?;
            out.flush()?;
        }
        Ok(())
    }
}

/// The exit status a task's end counts as: its code, or 128 + the signal that
/// killed it (as a shell reports it).
pub fn task_code(status: &ExitStatus) -> i32 {
    match status.signal {
        Some(signal) => 128 + i32::from(signal.0),
        None => status.code,
    }
}

/// Slurm's line for a task that did not succeed; `None` for one that did.
pub fn failure_message(node: &str, task: u32, status: &ExitStatus) -> Option<String> {
    if status.is_success() {
        return None;
    }
    let how = match status.signal {
        Some(signal) => format!("Killed by signal {}", signal.name()),
        None => format!("Exited with exit code {}", status.code),
    };
    Some(format!("srun: error: {node}: task {task}: {how}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_state::slurm::signal::Signal;

    #[test]
    fn labels_whole_lines_and_ends_the_last_one() {
        let mut printer = OutputPrinter::new(true, 12);
        let mut out = Vec::new();
        printer
            .write(3, OutputStream::Stdout, b"hel", &mut out)
            .unwrap();
        assert!(out.is_empty());
        printer
            .write(3, OutputStream::Stdout, b"lo\nwor", &mut out)
            .unwrap();
        printer
            .write(11, OutputStream::Stdout, b"x\n", &mut out)
            .unwrap();
        printer.finish(3, OutputStream::Stdout, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            " 3: hello\n11: x\n 3: wor\n"
        );
    }

    #[test]
    fn unlabelled_output_passes_through() {
        let mut printer = OutputPrinter::new(false, 2);
        let mut out = Vec::new();
        printer
            .write(0, OutputStream::Stdout, b"a", &mut out)
            .unwrap();
        printer.finish(0, OutputStream::Stdout, &mut out).unwrap();
        assert_eq!(out, b"a");
    }

    #[test]
    fn codes_and_messages_follow_slurm() {
        let ok = ExitStatus {
            code: 0,
            signal: None,
        };
        let three = ExitStatus {
            code: 3,
            signal: None,
        };
        let killed = ExitStatus {
            code: 0,
            signal: Some(Signal::KILL),
        };
        assert_eq!(task_code(&three), 3);
        assert_eq!(task_code(&killed), 137);
        assert_eq!(failure_message("n1", 0, &ok), None);
        assert_eq!(
            failure_message("n2", 1, &three).as_deref(),
            Some("srun: error: n2: task 1: Exited with exit code 3")
        );
        assert!(failure_message("n2", 1, &killed).unwrap().contains("KILL"));
    }
}
