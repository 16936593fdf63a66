//! What the import tells the user besides the configuration: each Slurm key it
//! could not carry over and why, and each one it carried with a difference.
//! Notes about the same key for the same reason are shown once, with every
//! line they came from.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::location::Location;
use super::parse::Pair;

/// Which list a note belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The key has no place in corral.toml.
    NotCarried,
    /// The key was carried, but means something different, or a value was
    /// made up that the user should check.
    Changed,
}

/// One note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// Which list.
    pub kind: Kind,
    /// The kind of line the key is on (`NodeName`, `PartitionName`,
    /// `gres.conf`...), empty for a slurm.conf setting.
    pub scope: String,
    /// The key as written.
    pub key: String,
    /// Its value.
    pub value: String,
    /// Why, and what to do.
    pub reason: String,
    /// Where, if from one line.
    pub at: Option<Location>,
}

/// What makes two notes the same note.
type Identity = (bool, String, String, String, String, Option<Location>);

/// Every note, in the order found, each once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Notes {
    notes: Vec<Note>,
    seen: BTreeSet<Identity>,
}

impl Notes {
    /// `pair` (on a `scope` line) is not carried over, because `reason`.
    pub fn not_carried(&mut self, scope: &str, pair: &Pair, reason: impl Into<String>) {
        self.push(Kind::NotCarried, scope, pair, reason);
    }

    /// `pair` was carried over with a difference the user should know.
    pub fn changed(&mut self, scope: &str, pair: &Pair, reason: impl Into<String>) {
        self.push(Kind::Changed, scope, pair, reason);
    }

    /// A note about no single key (`key` names the subject).
    pub fn general(&mut self, kind: Kind, key: &str, reason: impl Into<String>) {
        self.add(Note {
            kind,
            scope: String::new(),
            key: key.to_string(),
            value: String::new(),
            reason: reason.into(),
            at: None,
        });
    }

    fn push(&mut self, kind: Kind, scope: &str, pair: &Pair, reason: impl Into<String>) {
        self.add(Note {
            kind,
            scope: scope.to_string(),
            key: pair.key.clone(),
            value: pair.value.clone(),
            reason: reason.into(),
            at: Some(pair.at.clone()),
        });
    }

    /// Adds `note` unless the same note is there already.
    fn add(&mut self, note: Note) {
        let identity = (
            note.kind == Kind::NotCarried,
            note.scope.clone(),
            note.key.clone(),
            note.value.clone(),
            note.reason.clone(),
            note.at.clone(),
        );
        if self.seen.insert(identity) {
            self.notes.push(note);
        }
    }

    /// Every note.
    #[cfg(test)]
    pub fn all(&self) -> &[Note] {
        &self.notes
    }

    /// How many distinct entries of `kind` `render` prints.
    pub fn count(&self, kind: Kind) -> usize {
        groups(&self.notes)
            .iter()
            .filter(|g| g.first.kind == kind)
            .count()
    }

    /// The list of `kind` as text lines (without `#`), wrapped to `width`:
    /// one entry per reason, naming every key given for it.
    pub fn render(&self, kind: Kind, width: usize) -> Vec<String> {
        let mut by_reason: Vec<(&str, Vec<String>)> = Vec::new();
        for group in groups(&self.notes).iter().filter(|g| g.first.kind == kind) {
            let reason = group.first.reason.as_str();
            match by_reason.iter_mut().find(|(r, _)| *r == reason) {
                Some((_, subjects)) => subjects.push(group.subject()),
                None => by_reason.push((reason, vec![group.subject()])),
            }
        }
        let mut lines = Vec::new();
        for (reason, subjects) in by_reason {
            let text = format!("{}: {reason}", subjects.join("; "));
            lines.extend(wrap(&text, width, "- ", "  "));
        }
        lines
    }
}

/// Notes about one key for one reason.
struct Group<'a> {
    first: &'a Note,
    values: Vec<&'a str>,
    places: Vec<&'a Location>,
}

impl Group<'_> {
    /// `Key=value` (values joined), where it is, and on which lines.
    fn subject(&self) -> String {
        let mut subject = self.first.key.clone();
        let values: Vec<&str> = self
            .values
            .iter()
            .copied()
            .filter(|v| !v.is_empty())
            .collect();
        if !values.is_empty() {
            const SHOWN: usize = 3;
            let mut shown = values[..values.len().min(SHOWN)].join(", ");
            if values.len() > SHOWN {
                let _ = write!(shown, ", ... ({} values)", values.len());
            }
            let _ = write!(subject, "={shown}");
        }
        if !self.first.scope.is_empty() {
            let _ = write!(subject, " on {} lines", self.first.scope);
        }
        if !self.places.is_empty() {
            let _ = write!(subject, " ({})", places(&self.places));
        }
        subject
    }
}

fn groups(notes: &[Note]) -> Vec<Group<'_>> {
    let mut groups: Vec<Group<'_>> = Vec::new();
    for note in notes {
        let same = |g: &&mut Group<'_>| {
            g.first.kind == note.kind
                && g.first.scope == note.scope
                && g.first.key.eq_ignore_ascii_case(&note.key)
                && g.first.reason == note.reason
        };
        let group = match groups.iter_mut().find(same) {
            Some(group) => group,
            None => {
                groups.push(Group {
                    first: note,
                    values: Vec::new(),
                    places: Vec::new(),
                });
                let last = groups.len() - 1;
                &mut groups[last]
            }
        };
        if !group.values.contains(&note.value.as_str()) {
            group.values.push(&note.value);
        }
        if let Some(at) = &note.at
            && !group.places.contains(&at)
        {
            group.places.push(at);
        }
    }
    groups
}

/// `slurm.conf:3-5, 9; gres.conf:2`: line ranges per file, files in order of
/// appearance.
fn places(places: &[&Location]) -> String {
    let mut files: Vec<(&str, Vec<usize>)> = Vec::new();
    for at in places {
        match files.iter_mut().find(|(file, _)| *file == &*at.file) {
            Some((_, lines)) => lines.push(at.line),
            None => files.push((&at.file, vec![at.line])),
        }
    }
    files
        .into_iter()
        .map(|(file, mut lines)| {
            lines.sort_unstable();
            lines.dedup();
            let mut ranges: Vec<String> = Vec::new();
            let mut i = 0;
            while i < lines.len() {
                let start = lines[i];
                let mut end = start;
                while i + 1 < lines.len() && lines[i + 1] == end + 1 {
                    i += 1;
                    end = lines[i];
                }
                ranges.push(if end == start {
                    start.to_string()
                } else {
                    format!("{start}-{end}")
                });
                i += 1;
            }
            format!("{file}:{}", ranges.join(","))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Wraps `text` at spaces to `width` columns: the first line starts with
/// `first`, the others with `rest`. A word longer than a line stays whole.
pub fn wrap(text: &str, width: usize, first: &str, rest: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = first.to_string();
    let mut empty = true;
    for word in text.split_whitespace() {
        if !empty && line.len() + 1 + word.len() > width {
            lines.push(std::mem::replace(&mut line, rest.to_string()));
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    lines.push(line);
    lines
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn pair(key: &str, value: &str, line: usize) -> Pair {
        Pair {
            key: key.into(),
            value: value.into(),
            at: Location::new(&Arc::from("slurm.conf"), line),
        }
    }

    #[test]
    fn the_same_key_for_the_same_reason_is_listed_once_with_its_lines() {
        let mut notes = Notes::default();
        for line in [30, 31, 32, 40] {
            notes.not_carried("NodeName", &pair("Weight", "16", line), "no node weights");
        }
        notes.not_carried("NodeName", &pair("weight", "32", 41), "no node weights");
        notes.not_carried("", &pair("SlurmctldHost", "ctl1", 2), "replicas");
        notes.changed("", &pair("KillWait", "30", 3), "seconds");
        notes.not_carried("", &pair("SlurmctldPort", "6817", 9), "replicas");
        assert_eq!(notes.count(Kind::NotCarried), 3);
        assert_eq!(notes.count(Kind::Changed), 1);
        assert_eq!(
            notes.render(Kind::NotCarried, 200),
            [
                "- Weight=16, 32 on NodeName lines (slurm.conf:30-32,40-41): no node weights",
                "- SlurmctldHost=ctl1 (slurm.conf:2); SlurmctldPort=6817 (slurm.conf:9): replicas",
            ]
        );
    }

    #[test]
    fn long_notes_wrap_under_their_bullet() {
        assert_eq!(
            wrap("aaa bbb ccc ddd", 9, "- ", "  "),
            ["- aaa bbb", "  ccc ddd"]
        );
    }
}
