//! Checks of single values, each refusing with the key path and a reason that
//! says what is accepted: names, Slurm time limits and durations, memory sizes,
//! hostlists and positive numbers.

use corral_state::slurm::FormatError;
use corral_state::slurm::duration::{TimeLimit, parse_duration, parse_time_limit};
use corral_state::slurm::hostlist;
use corral_state::slurm::memory::parse_memory_mb;

use crate::config::error::Refusal;

/// A checked value, or why not.
pub(crate) type Checked<T> = Result<T, Refusal>;

/// The longest name the state machine accepts.
const MAX_NAME_LEN: usize = 128;

/// True for names the state machine accepts: 1-128 letters, digits, `-`, `_`, `.`.
pub(crate) fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Refuses a name the state machine would refuse.
pub(crate) fn name(key: &str, kind: &str, value: &str) -> Checked<()> {
    if is_valid_name(value) {
        Ok(())
    } else {
        Err(Refusal::new(
            key,
            format!(
                "{value:?} is not a valid {kind} name; use 1-{MAX_NAME_LEN} letters, digits, '-', '_' or '.'"
            ),
        ))
    }
}

/// The format error's reason, naming its token when it is only part of `value`.
fn detail(error: &FormatError, value: &str) -> String {
    if error.token.is_empty() || error.token == value {
        error.reason.clone()
    } else {
        format!("'{}': {}", error.token, error.reason)
    }
}

/// A time limit: `D-HH:MM:SS`, `D-HH`, `HH:MM:SS`, `MM:SS`, `MM` or `UNLIMITED`.
pub(crate) fn time_limit(key: &str, value: &str) -> Checked<TimeLimit> {
    parse_time_limit(value).map_err(|e| {
        Refusal::new(
            key,
            format!(
                "{value:?} is not a time limit ({}); use D-HH:MM:SS, HH:MM:SS, minutes or UNLIMITED",
                detail(&e, value)
            ),
        )
    })
}

/// Whether a duration may be zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Zero {
    /// Zero means "none" and is accepted.
    Allowed,
    /// The duration must be positive.
    Refused,
}

/// A finite duration in seconds, written as a Slurm time spec.
pub(crate) fn duration_seconds(key: &str, value: &str, zero: Zero) -> Checked<u64> {
    // To the second (a job's time limit rounds to minutes; a kill wait must not).
    let parsed = parse_duration(value).map_err(|e| {
        Refusal::new(
            key,
            format!(
                "{value:?} is not a duration ({}); use D-HH:MM:SS, HH:MM:SS or MM:SS",
                detail(&e, value)
            ),
        )
    })?;
    let named_unlimited =
        value.eq_ignore_ascii_case("UNLIMITED") || value.eq_ignore_ascii_case("INFINITE");
    match parsed {
        TimeLimit::Seconds(seconds) => Ok(seconds),
        TimeLimit::Unlimited if named_unlimited => Err(Refusal::new(
            key,
            format!("{value:?} is not accepted here; give a finite duration such as 00:05:00"),
        )),
        TimeLimit::Unlimited if zero == Zero::Allowed => Ok(0),
        TimeLimit::Unlimited => Err(Refusal::new(
            key,
            format!("{value:?} is zero; give a positive duration such as 7-00:00:00"),
        )),
    }
}

/// A memory size in MiB: `512G`, `2T`, `1536M`, or MiB without a suffix.
pub(crate) fn memory_mb(key: &str, value: &str) -> Checked<u64> {
    parse_memory_mb(value).map_err(|e| {
        Refusal::new(
            key,
            format!(
                "{value:?} is not a memory size ({}); use e.g. 512G, 2T or 1536M",
                detail(&e, value)
            ),
        )
    })
}

/// A non-empty hostlist expression, expanded.
pub(crate) fn hostlist(key: &str, value: &str) -> Checked<Vec<String>> {
    let names = hostlist::expand(value).map_err(|e| {
        Refusal::new(
            key,
            format!(
                "{value:?} is not a hostlist ({}); write e.g. gpu[01-16],login1",
                detail(&e, value)
            ),
        )
    })?;
    if names.is_empty() {
        return Err(Refusal::new(
            key,
            "names nothing; write a hostlist such as gpu[01-16]",
        ));
    }
    Ok(names)
}

/// A number that must be above zero.
pub(crate) fn positive(key: &str, value: u64) -> Checked<u64> {
    if value == 0 {
        Err(Refusal::new(key, "must be greater than zero"))
    } else {
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_limit_errors_quote_the_value_and_the_bad_field() {
        let err = time_limit("p.max_time", "7-25:00:00").unwrap_err();
        assert_eq!(err.key, "p.max_time");
        assert!(
            err.reason
                .starts_with("\"7-25:00:00\" is not a time limit ('25': hours")
        );
        assert!(err.reason.contains("D-HH:MM:SS"));
    }

    #[test]
    fn durations_take_zero_only_where_allowed() {
        assert_eq!(duration_seconds("k", "00:02:00", Zero::Refused), Ok(120));
        assert_eq!(duration_seconds("k", "00:00:10", Zero::Refused), Ok(10));
        assert!(duration_seconds("k", "-1", Zero::Allowed).is_err());
        assert_eq!(duration_seconds("k", "0", Zero::Allowed), Ok(0));
        assert!(duration_seconds("k", "0", Zero::Refused).is_err());
        assert!(duration_seconds("k", "UNLIMITED", Zero::Allowed).is_err());
    }

    #[test]
    fn names_follow_the_state_machine() {
        assert!(name("k", "node", "gpu-01.a_b").is_ok());
        assert!(name("k", "node", "").is_err());
        assert!(name("k", "node", "a b").is_err());
        assert!(name("k", "node", &"x".repeat(129)).is_err());
    }

    #[test]
    fn hostlists_must_name_something() {
        assert_eq!(hostlist("k", "n[1-2]").unwrap(), ["n1", "n2"]);
        assert!(hostlist("k", " ").is_err());
        assert!(hostlist("k", "n[2-1]").is_err());
    }
}
