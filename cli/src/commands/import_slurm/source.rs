//! A configuration file and the files its `Include` lines name, read through a
//! loader the caller gives (the file system in `run`, a map in tests), as one
//! sequence of lines. An included path is relative to the including file's
//! directory, and `%c` in it is the cluster name (lower case), as Slurm does.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::location::{ImportError, Location};
use super::parse::{Item, Pair, parse};

/// How deep `Include` lines may nest.
const MAX_INCLUDE_DEPTH: usize = 16;

/// Reads a file's contents, or says why not.
pub type Loader<'a> = dyn FnMut(&Path) -> std::io::Result<String> + 'a;

/// The `Key=Value` lines of `path` and of every file it includes, in order.
pub fn read_lines(path: &Path, load: &mut Loader<'_>) -> Result<Vec<Vec<Pair>>, ImportError> {
    let text = load(path).map_err(|e| {
        ImportError::general(format!(
            "cannot read {}: {e}; check the path and that you may read it",
            path.display()
        ))
    })?;
    let mut reader = Reader {
        load,
        stack: Vec::new(),
        cluster_name: None,
        lines: Vec::new(),
    };
    reader.file(path, &text)?;
    Ok(reader.lines)
}

/// Parses several files given as text, without includes (pure callers' helper).
#[cfg(test)]
pub fn lines_of(
    files: &std::collections::BTreeMap<&str, &str>,
    main: &str,
) -> Result<Vec<Vec<Pair>>, ImportError> {
    let mut load = |path: &Path| {
        files
            .get(path.to_string_lossy().as_ref())
            .map(|text| text.to_string())
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
    };
    read_lines(Path::new(main), &mut load)
}

struct Reader<'l, 'a> {
    load: &'l mut Loader<'a>,
    stack: Vec<PathBuf>,
    cluster_name: Option<String>,
    lines: Vec<Vec<Pair>>,
}

impl Reader<'_, '_> {
    fn file(&mut self, path: &Path, text: &str) -> Result<(), ImportError> {
        let name: Arc<str> = Arc::from(path.display().to_string());
        self.stack.push(path.to_path_buf());
        for item in parse(&name, text)? {
            match item {
                Item::Pairs(pairs) => {
                    if let Some(cluster) = pairs.iter().rev().find(|p| p.is("ClusterName")) {
                        self.cluster_name = Some(cluster.value.to_ascii_lowercase());
                    }
                    self.lines.push(pairs);
                }
                Item::Include { at, path: written } => self.include(path, &at, &written)?,
            }
        }
        self.stack.pop();
        Ok(())
    }

    fn include(&mut self, from: &Path, at: &Location, written: &str) -> Result<(), ImportError> {
        if written.is_empty() {
            return Err(ImportError::at(
                at,
                "an Include line names no file; write Include FILE",
            ));
        }
        let named = if written.contains("%c") {
            let Some(cluster) = &self.cluster_name else {
                return Err(ImportError::at(
                    at,
                    format!(
                        "Include {written} uses %c, but no ClusterName comes before it; set ClusterName earlier in the file"
                    ),
                ));
            };
            written.replace("%c", cluster)
        } else {
            written.to_string()
        };
        let named = Path::new(&named);
        let path = if named.is_absolute() {
            named.to_path_buf()
        } else {
            from.parent().unwrap_or(Path::new("")).join(named)
        };
        if self.stack.contains(&path) {
            return Err(ImportError::at(
                at,
                format!(
                    "Include {} includes itself (through {}); remove the loop",
                    path.display(),
                    self.stack
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(" -> ")
                ),
            ));
        }
        if self.stack.len() >= MAX_INCLUDE_DEPTH {
            return Err(ImportError::at(
                at,
                format!("Include lines nest more than {MAX_INCLUDE_DEPTH} deep; flatten them"),
            ));
        }
        let text = (self.load)(&path).map_err(|e| {
            ImportError::at(
                at,
                format!(
                    "cannot read the included file {}: {e}; an included path is relative to the including file's directory",
                    path.display()
                ),
            )
        })?;
        self.file(&path, &text)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn flat(lines: &[Vec<Pair>]) -> Vec<String> {
        lines
            .iter()
            .flatten()
            .map(|p| format!("{}={}@{}", p.key, p.value, p.at))
            .collect()
    }

    #[test]
    fn includes_are_read_in_place_relative_to_the_including_file() {
        let files = BTreeMap::from([
            (
                "/etc/slurm/slurm.conf",
                "ClusterName=Tux\nInclude %c/nodes.conf\nPartitionName=p Nodes=ALL\n",
            ),
            (
                "/etc/slurm/tux/nodes.conf",
                "NodeName=a\ninclude more.conf\n",
            ),
            ("/etc/slurm/tux/more.conf", "NodeName=b\n"),
        ]);
        let lines = lines_of(&files, "/etc/slurm/slurm.conf").unwrap();
        assert_eq!(
            flat(&lines),
            [
                "ClusterName=Tux@/etc/slurm/slurm.conf:1",
                "NodeName=a@/etc/slurm/tux/nodes.conf:1",
                "NodeName=b@/etc/slurm/tux/more.conf:1",
                "PartitionName=p@/etc/slurm/slurm.conf:3",
                "Nodes=ALL@/etc/slurm/slurm.conf:3",
            ]
        );
    }

    #[test]
    fn missing_and_looping_includes_are_refused_with_the_line() {
        let files = BTreeMap::from([("s.conf", "A=1\nInclude nope.conf\n")]);
        let err = lines_of(&files, "s.conf").unwrap_err();
        assert_eq!(err.at.unwrap().line, 2);
        assert!(err.message.contains("nope.conf"), "{}", err.message);

        let files = BTreeMap::from([
            ("s.conf", "Include t.conf\n"),
            ("t.conf", "Include s.conf\n"),
        ]);
        let err = lines_of(&files, "s.conf").unwrap_err();
        assert!(err.message.contains("includes itself"), "{}", err.message);

        let files = BTreeMap::from([("s.conf", "Include %c.conf\n")]);
        let err = lines_of(&files, "s.conf").unwrap_err();
        assert!(err.message.contains("ClusterName"), "{}", err.message);

        let err = lines_of(&BTreeMap::new(), "gone.conf").unwrap_err();
        assert!(
            err.to_string().starts_with("cannot read gone.conf"),
            "{err}"
        );
    }
}
