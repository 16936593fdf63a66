//! `--mail-user`: who a job's notices go to. Slurm hands the value to its mail
//! program unread, as an argument of a process the controller runs; corral
//! accepts only what a mail program reads as recipients: a comma list of user
//! names and addresses (`user@host`). A value that begins with `-` would be read
//! as an option (GNU mail's `--exec` runs a command as the controller's user);
//! one that begins with `|` or `/` names a pipe or a file to mailx; spaces,
//! quotes and control characters would let one value pass several arguments or
//! headers. None of those can be a recipient, so all are refused.

use super::FormatError;

const FORMAT: &str = "mail user";

/// At most this many recipients in one `--mail-user`.
pub const MAX_RECIPIENTS: usize = 16;

/// What a recipient may be, for the error messages.
const ALLOWED: &str = "give a user name (letters, digits, '_', '.', '-') or an address user@host, \
                       not starting with '-' or '.'; separate several with commas";

/// Checks a `--mail-user` value and returns it normalised (no spaces around
/// the commas), as it is stored and later passed to the mail program.
pub fn parse(text: &str) -> Result<String, FormatError> {
    Ok(recipients(text)?.join(","))
}

/// The recipients of a `--mail-user` value (or of a user name used as one),
/// each checked as [`parse`] checks them.
pub fn recipients(text: &str) -> Result<Vec<&str>, FormatError> {
    let list: Vec<&str> = text.split(',').map(str::trim).collect();
    if list.len() > MAX_RECIPIENTS {
        return Err(FormatError::new(
            FORMAT,
            text,
            format!("at most {MAX_RECIPIENTS} recipients are accepted"),
        ));
    }
    for recipient in &list {
        check_recipient(recipient)?;
    }
    Ok(list)
}

fn check_recipient(recipient: &str) -> Result<(), FormatError> {
    let refuse = |why: &str| {
        Err(FormatError::new(
            FORMAT,
            recipient,
            format!("{why}; {ALLOWED}"),
        ))
    };
    if recipient.is_empty() {
        return refuse("a recipient is empty");
    }
    let (local, domain) = match recipient.split_once('@') {
        Some((local, domain)) => (local, Some(domain)),
        None => (recipient, None),
    };
    if local.starts_with(['-', '.']) {
        return refuse(
            "a recipient may not begin with '-' or '.' (a mail program reads it as an option)",
        );
    }
    let local_ok = !local.is_empty()
        && local
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'+'));
    if !local_ok {
        return refuse("a recipient holds a character no user name or address may hold");
    }
    if let Some(domain) = domain {
        let labels_ok = domain.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
        if !labels_ok {
            return refuse(
                "the host of an address must be names of letters, digits and '-' joined by dots",
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_names_and_addresses_are_accepted_and_normalised() {
        assert_eq!(parse("alice").unwrap(), "alice");
        assert_eq!(parse("a.lee_2-x").unwrap(), "a.lee_2-x");
        assert_eq!(
            parse("ops+gpu@mail.example.org").unwrap(),
            "ops+gpu@mail.example.org"
        );
        assert_eq!(
            parse("a@x.org, b@y.org ,carol").unwrap(),
            "a@x.org,b@y.org,carol"
        );
        assert_eq!(recipients("a@x.org,bob").unwrap(), vec!["a@x.org", "bob"]);
    }

    #[test]
    fn what_a_mail_program_reads_as_an_option_a_pipe_or_a_file_is_refused() {
        for hostile in [
            "--exec=!touch /tmp/x",
            "-Ssendmail=/tmp/x",
            "-",
            ".hidden",
            "|/bin/sh",
            "/etc/passwd",
            "./mbox",
            "a b",
            "a\nBcc: eve@x.org",
            "a\"@x.org",
            "a'b",
            "$(id)",
            "`id`",
            "a;b",
            "a@",
            "@x.org",
            "a@x..org",
            "a@-x.org",
            "a@x.org-",
            "a@b@c",
            "",
            "a,,b",
            "a,",
            "ünïcode",
        ] {
            let err = parse(hostile).expect_err(hostile);
            assert!(err.to_string().contains("user name"), "{hostile}: {err}");
        }
    }

    #[test]
    fn too_many_recipients_are_refused() {
        let many = vec!["a"; MAX_RECIPIENTS + 1].join(",");
        assert!(parse(&many).is_err());
        let enough = vec!["a"; MAX_RECIPIENTS].join(",");
        assert!(parse(&enough).is_ok());
    }
}
