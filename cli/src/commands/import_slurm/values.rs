//! Slurm's value forms as its configuration files write them: whole numbers,
//! YES/NO, counts with K/M/G/T/P suffixes, time specs, comma lists; and the
//! names corral accepts. Each refusal names the line, the key and the value.

use corral_state::slurm::duration::{TimeLimit, parse_duration, parse_time_limit};

use super::location::ImportError;
use super::parse::Pair;

/// The longest name corral accepts.
const MAX_NAME_LEN: usize = 128;

/// True for names corrald accepts (nodes, partitions, features, switches,
/// accounts, GPU types): 1-128 letters, digits, `-`, `_` or `.`.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// A whole number.
pub fn number(pair: &Pair) -> Result<u64, ImportError> {
    pair.value.trim().parse().map_err(|_| {
        ImportError::at(
            &pair.at,
            format!(
                "{}={} is not a whole number; write e.g. {}=4",
                pair.key, pair.value, pair.key
            ),
        )
    })
}

/// A whole number that fits 32 bits.
pub fn number_u32(pair: &Pair) -> Result<u32, ImportError> {
    u32::try_from(number(pair)?).map_err(|_| {
        ImportError::at(
            &pair.at,
            format!("{}={} is too large", pair.key, pair.value),
        )
    })
}

/// YES/NO as Slurm reads them (also TRUE/FALSE, UP/DOWN, 1/0).
pub fn yes_no(pair: &Pair) -> Result<bool, ImportError> {
    match pair.value.trim().to_ascii_lowercase().as_str() {
        "yes" | "true" | "up" | "1" => Ok(true),
        "no" | "false" | "down" | "0" => Ok(false),
        _ => Err(ImportError::at(
            &pair.at,
            format!("{}={} is not YES or NO", pair.key, pair.value),
        )),
    }
}

/// A count with an optional K, M, G, T or P suffix (powers of 1024), as GRES
/// counts are written.
pub fn suffixed_count(text: &str) -> Option<u64> {
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &text[digits.len()..];
    let power = match suffix.to_ascii_uppercase().as_str() {
        "" => 0,
        "K" => 1,
        "M" => 2,
        "G" => 3,
        "T" => 4,
        "P" => 5,
        _ => return None,
    };
    let number: u64 = digits.parse().ok()?;
    number.checked_mul(1024u64.checked_pow(power)?)
}

/// A time limit (`MaxTime`, `DefaultTime`): minutes, `MM:SS`, `HH:MM:SS`,
/// `D-HH[:MM[:SS]]`, `UNLIMITED` or `INFINITE`.
pub fn time_limit(pair: &Pair) -> Result<TimeLimit, ImportError> {
    parse_time_limit(pair.value.trim()).map_err(|e| {
        ImportError::at(
            &pair.at,
            format!(
                "{}={} is not a time limit ({e}); write minutes, HH:MM:SS, D-HH:MM:SS or UNLIMITED",
                pair.key, pair.value
            ),
        )
    })
}

/// A duration in a time spec's forms, to the second; `None` for zero,
/// `UNLIMITED` or `INFINITE`.
pub fn duration_seconds(pair: &Pair) -> Result<Option<u64>, ImportError> {
    match parse_duration(pair.value.trim()) {
        Ok(TimeLimit::Seconds(seconds)) => Ok(Some(seconds)),
        Ok(TimeLimit::Unlimited) => Ok(None),
        Err(e) => Err(ImportError::at(
            &pair.at,
            format!(
                "{}={} is not a time ({e}); write minutes, HH:MM:SS or D-HH:MM:SS",
                pair.key, pair.value
            ),
        )),
    }
}

/// The items of a comma-separated list, trimmed, empty ones dropped.
pub fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::location::Location;
    use super::*;

    fn pair(key: &str, value: &str) -> Pair {
        Pair {
            key: key.into(),
            value: value.into(),
            at: Location::new(&Arc::from("slurm.conf"), 7),
        }
    }

    #[test]
    fn counts_take_binary_suffixes() {
        assert_eq!(suffixed_count("8"), Some(8));
        assert_eq!(suffixed_count("4G"), Some(4 << 30));
        assert_eq!(suffixed_count("2k"), Some(2048));
        assert_eq!(suffixed_count("x"), None);
        assert_eq!(suffixed_count("8GB"), None);
        assert_eq!(suffixed_count(""), None);
    }

    #[test]
    fn yes_no_and_numbers_name_the_line_when_wrong() {
        assert!(yes_no(&pair("Default", "YES")).unwrap());
        assert!(!yes_no(&pair("Default", "no")).unwrap());
        let err = yes_no(&pair("Default", "maybe")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "slurm.conf:7: Default=maybe is not YES or NO"
        );
        let err = number(&pair("CPUs", "lots")).unwrap_err();
        assert!(
            err.to_string().starts_with("slurm.conf:7: CPUs=lots"),
            "{err}"
        );
    }

    #[test]
    fn times_in_slurms_forms() {
        assert_eq!(
            time_limit(&pair("MaxTime", "INFINITE")).unwrap(),
            TimeLimit::Unlimited
        );
        assert_eq!(
            time_limit(&pair("MaxTime", "2-12")).unwrap(),
            TimeLimit::Seconds(60 * 3600)
        );
        assert_eq!(duration_seconds(&pair("X", "1:30")).unwrap(), Some(90));
        assert_eq!(duration_seconds(&pair("X", "0")).unwrap(), None);
        assert!(time_limit(&pair("MaxTime", "1-25")).is_err());
    }

    #[test]
    fn names_follow_corral() {
        assert!(is_valid_name("gpu-01.a_b"));
        assert!(!is_valid_name("a b"));
        assert!(!is_valid_name(""));
    }
}
