//! The getopt-style reading the hand-parsed Slurm commands share (sstat,
//! sprio, sshare): `--name=value` and `--name value`, `-xVALUE` and `-x VALUE`,
//! comma lists, and the four-column field list of `--helpformat`.

/// Reads a command line one option at a time.
pub struct OptionReader<'a> {
    args: std::slice::Iter<'a, String>,
    /// The rest of a bundle of short flags (`-an` after `-a`: `-n`).
    bundle: Option<String>,
    /// The value written into the current option (`--a=b`, `-ab`).
    inline: Option<String>,
    /// The current option's name (`--a`, `-a`) or the plain word.
    name: String,
}

impl<'a> OptionReader<'a> {
    /// A reader of `args`.
    pub fn new(args: &'a [String]) -> OptionReader<'a> {
        OptionReader {
            args: args.iter(),
            bundle: None,
            inline: None,
            name: String::new(),
        }
    }

    /// The next option's name (`-j`, `--jobs`) or plain word; `None` at the
    /// end. A short option's letters after
    /// the first are its value (`-j12`); `short_flags` lists the short options
    /// that take none, whose letters may be bundled (`-an`) instead.
    pub fn next(&mut self, short_flags: &str) -> Option<String> {
        let arg = match self.bundle.take() {
            Some(rest) => rest,
            None => self.args.next()?.clone(),
        };
        let (name, inline) = match arg.split_once('=') {
            Some((name, value)) if name.starts_with("--") => {
                (name.to_string(), Some(value.to_string()))
            }
            _ if arg.starts_with('-') && !arg.starts_with("--") && arg.chars().count() > 2 => {
                // `-` and one letter, whatever its width.
                let end = arg.char_indices().nth(2).map_or(arg.len(), |(i, _)| i);
                let (flag, rest) = arg.split_at(end);
                let bundled = flag.chars().nth(1).is_some_and(|c| short_flags.contains(c));
                if bundled {
                    self.bundle = Some(format!("-{rest}"));
                    (flag.to_string(), None)
                } else {
                    (flag.to_string(), Some(rest.to_string()))
                }
            }
            _ => (arg.clone(), None),
        };
        self.name = name.clone();
        self.inline = inline;
        Some(name)
    }

    /// The current option's value: written into it, or the next argument.
    pub fn value(&mut self) -> Result<String, String> {
        let name = self.name.clone();
        self.inline
            .take()
            .or_else(|| self.args.next().cloned())
            .ok_or_else(|| format!("option '{name}' requires an argument"))
    }
}

/// A command line `program` could not read: getopt's second line after the
/// reason, and status 1, as sstat, sprio and sshare exit.
pub fn refuse(program: &str, message: &str) -> std::process::ExitCode {
    eprintln!("{program}: {message}\nTry \"{program} --help\" for more information");
    std::process::ExitCode::from(1)
}

/// The items of a comma-separated list, trimmed, without empty ones.
pub fn list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// `--helpformat`: the field names four to a line, 20 wide.
pub fn help_format<'n>(names: impl Iterator<Item = &'n str>) -> String {
    let names: Vec<&str> = names.collect();
    let mut out = String::new();
    for row in names.chunks(4) {
        let cells: Vec<String> = row.iter().map(|n| format!("{n:<20}")).collect();
        out.push_str(&cells.join(""));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(line: &[&str], flags: &str) -> Vec<(String, Option<String>)> {
        let args: Vec<String> = line.iter().map(|s| s.to_string()).collect();
        let mut reader = OptionReader::new(&args);
        let mut out = Vec::new();
        while let Some(name) = reader.next(flags) {
            let value = name
                .strip_prefix('-')
                .is_some_and(|n| n == "j" || n == "-jobs")
                .then(|| reader.value().unwrap());
            out.push((name, value));
        }
        out
    }

    #[test]
    fn values_inline_or_next_and_bundled_flags() {
        let got = read(&["-j12", "--jobs=3", "-j", "4", "-an", "word"], "an");
        let want: Vec<(String, Option<String>)> = vec![
            ("-j".into(), Some("12".into())),
            ("--jobs".into(), Some("3".into())),
            ("-j".into(), Some("4".into())),
            ("-a".into(), None),
            ("-n".into(), None),
            ("word".into(), None),
        ];
        assert_eq!(got, want);
        let args = vec!["-j".to_string()];
        let mut reader = OptionReader::new(&args);
        reader.next("");
        assert!(reader.value().unwrap_err().contains("requires an argument"));
        assert_eq!(list(" a, ,b"), ["a", "b"]);
        assert_eq!(read(&["-üx"], ""), [("-ü".to_string(), None)]);
        assert_eq!(
            help_format(["A", "B"].into_iter()),
            format!("{:<20}{:<20}\n", "A", "B")
        );
    }
}
