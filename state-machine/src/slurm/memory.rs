//! Memory sizes as `--mem` takes them: a number with an optional K, M, G or T
//! suffix (powers of 1024), megabytes when no suffix is given.
//!
//! The number is whole decimal digits; like Slurm, fractions (`1.5G`) and
//! multi-letter suffixes (`16GB`) are refused rather than guessed at.

use super::FormatError;

/// The format name used in errors.
const FORMAT: &str = "memory size";

const MB_PER_GB: u64 = 1024;
const MB_PER_TB: u64 = 1024 * 1024;

/// Parses a memory size into MiB, rounding kilobytes up to whole MiB. `0` is valid
/// (Slurm reads `--mem=0` as "all the memory of the node").
pub fn parse_memory_mb(spec: &str) -> Result<u64, FormatError> {
    if spec.is_empty() {
        return Err(FormatError::new(
            FORMAT,
            spec,
            "empty; expected e.g. 512, 512M, 16G or 2T",
        ));
    }
    let digits_end = spec
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(spec.len());
    let (digits, suffix) = spec.split_at(digits_end);
    if digits.is_empty() {
        return Err(missing_number(spec));
    }
    check_not_fraction(digits, suffix)?;
    let number: u64 = digits
        .parse()
        .map_err(|_| FormatError::new(FORMAT, spec, "too large"))?;
    let mb = match suffix {
        "" | "M" | "m" => Some(number),
        "K" | "k" => Some(number.div_ceil(1024)),
        "G" | "g" => number.checked_mul(MB_PER_GB),
        "T" | "t" => number.checked_mul(MB_PER_TB),
        _ => {
            return Err(FormatError::new(
                FORMAT,
                suffix,
                "unknown unit; expected one of K, M, G or T (powers of 1024), or none for megabytes",
            ));
        }
    };
    mb.ok_or_else(|| FormatError::new(FORMAT, spec, "too large"))
}

fn missing_number(spec: &str) -> FormatError {
    let reason = if spec.starts_with('-') {
        "negative; a memory size is zero or more"
    } else {
        "must start with a whole number, e.g. 512M or 16G"
    };
    FormatError::new(FORMAT, spec, reason)
}

/// Refuses `1.5G` and `1,5G`, naming the number with its fraction.
fn check_not_fraction(digits: &str, suffix: &str) -> Result<(), FormatError> {
    let Some(rest) = suffix.strip_prefix(['.', ',']) else {
        return Ok(());
    };
    let fraction_len = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let number = &suffix[..1 + fraction_len];
    Err(FormatError::new(
        FORMAT,
        format!("{digits}{number}"),
        "fractions are not accepted; use a smaller unit (1536M instead of 1.5G)",
    ))
}

/// Prints MiB with the largest exact unit: `512M`, `16G`, `2T` (and `0` for zero).
pub fn format_memory_mb(mb: u64) -> String {
    if mb == 0 {
        "0".to_string()
    } else if mb.is_multiple_of(MB_PER_TB) {
        format!("{}T", mb / MB_PER_TB)
    } else if mb.is_multiple_of(MB_PER_GB) {
        format!("{}G", mb / MB_PER_GB)
    } else {
        format!("{mb}M")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn err_token(spec: &str) -> String {
        parse_memory_mb(spec).unwrap_err().token
    }

    #[test]
    fn plain_numbers_are_megabytes() {
        assert_eq!(parse_memory_mb("0"), Ok(0));
        assert_eq!(parse_memory_mb("512"), Ok(512));
        assert_eq!(parse_memory_mb("007"), Ok(7));
    }

    #[test]
    fn suffixes_are_powers_of_1024_any_case() {
        assert_eq!(parse_memory_mb("512M"), Ok(512));
        assert_eq!(parse_memory_mb("512m"), Ok(512));
        assert_eq!(parse_memory_mb("16G"), Ok(16 * 1024));
        assert_eq!(parse_memory_mb("16g"), Ok(16 * 1024));
        assert_eq!(parse_memory_mb("2T"), Ok(2 * 1024 * 1024));
        assert_eq!(parse_memory_mb("2t"), Ok(2 * 1024 * 1024));
        assert_eq!(parse_memory_mb("0G"), Ok(0));
    }

    #[test]
    fn kilobytes_round_up_to_whole_megabytes() {
        assert_eq!(parse_memory_mb("1024K"), Ok(1));
        assert_eq!(parse_memory_mb("1025k"), Ok(2));
        assert_eq!(parse_memory_mb("1K"), Ok(1));
        assert_eq!(parse_memory_mb("0K"), Ok(0));
        assert_eq!(
            parse_memory_mb("18446744073709551615K"),
            Ok(u64::MAX.div_ceil(1024))
        );
    }

    #[test]
    fn bad_suffixes_name_the_suffix() {
        assert_eq!(err_token("16X"), "X");
        assert_eq!(err_token("16GB"), "GB");
        assert_eq!(err_token("16MiB"), "MiB");
        assert_eq!(err_token("16 G"), " G");
        assert_eq!(err_token("16G "), "G ");
        assert_eq!(err_token("16P"), "P");
    }

    #[test]
    fn fractions_are_refused() {
        assert_eq!(err_token("1.5G"), "1.5");
        assert_eq!(err_token("1,5G"), "1,5");
        assert_eq!(err_token("2."), "2.");
        let err = parse_memory_mb("1.5G").unwrap_err();
        assert!(err.reason.contains("fraction"), "{}", err.reason);
    }

    #[test]
    fn missing_or_negative_numbers_are_refused() {
        assert_eq!(err_token(""), "");
        assert_eq!(err_token("G"), "G");
        assert_eq!(err_token("-1G"), "-1G");
        assert_eq!(err_token(".5G"), ".5G");
        assert_eq!(err_token(" 16G"), " 16G");
        assert!(
            parse_memory_mb("-1")
                .unwrap_err()
                .reason
                .contains("negative")
        );
    }

    #[test]
    fn overflow_is_refused() {
        assert_eq!(err_token("18446744073709551616"), "18446744073709551616");
        assert_eq!(err_token("18446744073709551615T"), "18446744073709551615T");
        assert_eq!(err_token("18014398509481984G"), "18014398509481984G");
        assert_eq!(
            parse_memory_mb("18014398509481983G"),
            Ok(18_014_398_509_481_983 * 1024)
        );
    }

    #[test]
    fn formats_with_the_largest_exact_unit() {
        assert_eq!(format_memory_mb(0), "0");
        assert_eq!(format_memory_mb(1), "1M");
        assert_eq!(format_memory_mb(512), "512M");
        assert_eq!(format_memory_mb(1536), "1536M");
        assert_eq!(format_memory_mb(16 * 1024), "16G");
        assert_eq!(format_memory_mb(1024 * 1024), "1T");
        assert_eq!(format_memory_mb(2 * 1024 * 1024), "2T");
        assert_eq!(format_memory_mb(1024 * 1024 + 1024), "1025G");
    }

    proptest! {
        #[test]
        fn format_then_parse_round_trips(mb in any::<u64>()) {
            prop_assert_eq!(parse_memory_mb(&format_memory_mb(mb)), Ok(mb));
        }

        #[test]
        fn parse_never_panics(spec in "\\PC{0,24}") {
            let _ = parse_memory_mb(&spec);
        }

        #[test]
        fn gigabytes_are_1024_megabytes(g in 0u64..1 << 40) {
            prop_assert_eq!(parse_memory_mb(&format!("{g}G")), Ok(g * 1024));
        }
    }
}
