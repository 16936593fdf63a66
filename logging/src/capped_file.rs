//! A daemon's log file with a size cap. Standard error is the log (`corral
//! local` opens the file as the process's standard error); once more than
//! `max_bytes` have gone to it, the file is renamed `NAME.1` (older ones
//! move up to `NAME.KEEP`, the oldest is removed) and a fresh file at the
//! same path becomes standard error (`dup2`), so raw writes such as a panic
//! message land in the current file too. A daemon whose log floods fills at
//! most `(keep + 1) × max_bytes` of disk.
//!
//! Rotation is counted, not measured: the lines this writer passes count,
//! and the file's size when the daemon starts, so a file several runs
//! appended to is rotated on time.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tracing_subscriber::fmt::MakeWriter;

/// Where the log goes and how large it may grow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogCap {
    /// The log file (the daemon's standard error).
    pub path: PathBuf,
    /// Bytes past which the file is rotated.
    pub max_bytes: u64,
    /// Rotated files kept (`NAME.1` .. `NAME.KEEP`).
    pub keep: u32,
}

/// The renames that rotate `path` keeping `keep` old files, in the order
/// they must run: `(from, Some(to))`, or `(from, None)` to remove `from`.
pub fn rotation(path: &Path, keep: u32) -> Vec<(PathBuf, Option<PathBuf>)> {
    let numbered = |n: u32| {
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    };
    if keep == 0 {
        return vec![(path.to_path_buf(), None)];
    }
    let mut plan = vec![(numbered(keep), None)];
    for n in (1..keep).rev() {
        plan.push((numbered(n), Some(numbered(n + 1))));
    }
    plan.push((path.to_path_buf(), Some(numbered(1))));
    plan
}

/// Standard error, counted and rotated under a [`LogCap`].
pub struct CappedStderr {
    cap: LogCap,
    /// Bytes in the current file.
    written: Mutex<u64>,
}

impl CappedStderr {
    /// Counts from the file's current size.
    pub fn new(cap: LogCap) -> Self {
        let size = std::fs::metadata(&cap.path).map_or(0, |m| m.len());
        CappedStderr {
            cap,
            written: Mutex::new(size),
        }
    }

    /// Writes `bytes` to standard error, rotating first when they would
    /// take the file past the cap.
    fn write_counted(&self, bytes: &[u8]) -> std::io::Result<()> {
        let mut written = self.written.lock().unwrap_or_else(|p| p.into_inner());
        if *written > 0 && *written + bytes.len() as u64 > self.cap.max_bytes {
            // A log that cannot rotate (a read-only directory) keeps writing
            // where it is rather than losing lines.
            if self.rotate().is_ok() {
                *written = 0;
            }
        }
        std::io::stderr().lock().write_all(bytes)?;
        *written += bytes.len() as u64;
        Ok(())
    }

    fn rotate(&self) -> std::io::Result<()> {
        for (from, to) in rotation(&self.cap.path, self.cap.keep) {
            let done = match to {
                Some(to) => std::fs::rename(&from, to),
                None => std::fs::remove_file(&from),
            };
            match done {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        let fresh = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.cap.path)?;
        rustix::stdio::dup2_stderr(&fresh)?;
        Ok(())
    }
}

/// One event's writer: the formatted line, written whole on drop.
pub struct CappedLine<'a> {
    target: &'a CappedStderr,
    line: Vec<u8>,
}

impl Write for CappedLine<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.line.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for CappedLine<'_> {
    fn drop(&mut self) {
        if !self.line.is_empty() {
            let _ = self.target.write_counted(&self.line);
        }
    }
}

impl<'a> MakeWriter<'a> for CappedStderr {
    type Writer = CappedLine<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        CappedLine {
            target: self,
            line: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_shifts_old_files_up_and_drops_the_oldest() {
        let plan = rotation(Path::new("/l/c.log"), 3);
        let show: Vec<(String, Option<String>)> = plan
            .iter()
            .map(|(a, b)| {
                (
                    a.display().to_string(),
                    b.as_ref().map(|b| b.display().to_string()),
                )
            })
            .collect();
        assert_eq!(
            show,
            vec![
                ("/l/c.log.3".into(), None),
                ("/l/c.log.2".into(), Some("/l/c.log.3".into())),
                ("/l/c.log.1".into(), Some("/l/c.log.2".into())),
                ("/l/c.log".into(), Some("/l/c.log.1".into())),
            ]
        );
        assert_eq!(
            rotation(Path::new("/l/c.log"), 0),
            vec![(PathBuf::from("/l/c.log"), None)]
        );
    }
}
