//! Signals by name or number, and the `--signal=[{R|B}:]SIG[@SECS]` spec.
//!
//! Names are the Linux ones (`HUP` is 1, `USR1` 10, `SYS` 31), taken with or
//! without the `SIG` prefix and in any case; numbers run from 1 to 64 so that
//! real-time signals can be named by number.

use serde::{Deserialize, Serialize};

use super::FormatError;

/// The format name used in errors from [`parse_signal`].
const SIGNAL_FORMAT: &str = "signal";
/// The format name used in errors from [`parse_signal_spec`].
const SPEC_FORMAT: &str = "signal spec";

/// The highest signal number accepted (Linux's `SIGRTMAX`).
const MAX_SIGNAL: u32 = 64;
/// Slurm's default for how long before the time limit `--signal` fires.
const DEFAULT_SECONDS_BEFORE: u32 = 60;
/// The most seconds `@SECS` may ask for (Slurm keeps it in 16 bits).
const MAX_SECONDS_BEFORE: u32 = 65_535;

/// Linux signal names, without `SIG`, indexed by number minus one.
const NAMES: [&str; 31] = [
    "HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "BUS", "FPE", "KILL", "USR1", "SEGV", "USR2",
    "PIPE", "ALRM", "TERM", "STKFLT", "CHLD", "CONT", "STOP", "TSTP", "TTIN", "TTOU", "URG",
    "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO", "PWR", "SYS",
];

/// A POSIX signal by its Linux number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Signal(pub u8);

impl Signal {
    /// SIGHUP.
    pub const HUP: Signal = Signal(1);
    /// SIGINT.
    pub const INT: Signal = Signal(2);
    /// SIGKILL.
    pub const KILL: Signal = Signal(9);
    /// SIGUSR1. (Not Slurm's preemption notice: that is SIGCONT then SIGTERM,
    /// or the job's `--signal` where the site sets `preempt_send_user_signal`.)
    pub const USR1: Signal = Signal(10);
    /// SIGUSR2.
    pub const USR2: Signal = Signal(12);
    /// SIGTERM.
    pub const TERM: Signal = Signal(15);
    /// SIGCONT.
    pub const CONT: Signal = Signal(18);
    /// SIGSTOP.
    pub const STOP: Signal = Signal(19);

    /// The name without the `SIG` prefix (`USR1`), or the number for unnamed signals.
    pub fn name(self) -> String {
        usize::from(self.0)
            .checked_sub(1)
            .and_then(|index| NAMES.get(index))
            .map_or_else(|| self.0.to_string(), |name| (*name).to_string())
    }
}

/// Parses `USR1`, `SIGUSR1`, `usr1` or `10`.
pub fn parse_signal(spec: &str) -> Result<Signal, FormatError> {
    if spec.is_empty() {
        return Err(FormatError::new(
            SIGNAL_FORMAT,
            spec,
            "empty; expected a name such as USR1 or a number",
        ));
    }
    if spec.bytes().all(|b| b.is_ascii_digit()) {
        return parse_signal_number(spec);
    }
    let upper = spec.to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    NAMES
        .iter()
        .position(|name| *name == bare)
        .and_then(|index| u8::try_from(index + 1).ok())
        .map(Signal)
        .ok_or_else(|| {
            FormatError::new(
                SIGNAL_FORMAT,
                spec,
                "unknown signal; expected a name such as USR1, SIGTERM or HUP, or a number from 1 to 64",
            )
        })
}

fn parse_signal_number(digits: &str) -> Result<Signal, FormatError> {
    digits
        .parse::<u32>()
        .ok()
        .filter(|n| (1..=MAX_SIGNAL).contains(n))
        .and_then(|n| u8::try_from(n).ok())
        .map(Signal)
        .ok_or_else(|| FormatError::new(SIGNAL_FORMAT, digits, "signal numbers run from 1 to 64"))
}

/// A parsed `--signal` value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SignalSpec {
    /// The signal to send.
    pub signal: Signal,
    /// Seconds before the time limit to send it (Slurm's default is 60).
    pub seconds_before: u32,
    /// `B:` — signal only the batch shell, not the job's steps.
    pub batch_only: bool,
    /// `R:` — also signal when the job's reservation ends.
    pub on_reservation_end: bool,
}

/// Parses a `--signal` value: `[{R|B|RB|BR}:]SIG[@SECS]`, e.g. `B:USR1@300`.
pub fn parse_signal_spec(spec: &str) -> Result<SignalSpec, FormatError> {
    let (flags_and_signal, seconds) = match spec.split_once('@') {
        Some((head, secs)) => (head, parse_seconds_before(spec, secs)?),
        None => (spec, DEFAULT_SECONDS_BEFORE),
    };
    let (flags, signal) = match flags_and_signal.split_once(':') {
        Some((flags, signal)) => (parse_flags(spec, flags)?, signal),
        None => (Flags::default(), flags_and_signal),
    };
    if signal.is_empty() {
        return Err(FormatError::new(
            SPEC_FORMAT,
            spec,
            "missing signal; expected [{R|B}:]SIG[@SECS], e.g. B:USR1@300",
        ));
    }
    let signal = parse_signal(signal)?;
    Ok(SignalSpec {
        signal,
        seconds_before: seconds,
        batch_only: flags.batch_only,
        on_reservation_end: flags.on_reservation_end,
    })
}

#[derive(Default)]
struct Flags {
    batch_only: bool,
    on_reservation_end: bool,
}

/// Parses the `R`, `B`, `RB` or `BR` before the colon.
fn parse_flags(spec: &str, text: &str) -> Result<Flags, FormatError> {
    if text.is_empty() {
        return Err(FormatError::new(
            SPEC_FORMAT,
            spec,
            "empty flags before ':'; expected R, B, RB or BR",
        ));
    }
    let mut flags = Flags::default();
    for c in text.chars() {
        let slot = match c {
            'B' | 'b' => &mut flags.batch_only,
            'R' | 'r' => &mut flags.on_reservation_end,
            _ => return Err(bad_flags(text)),
        };
        if *slot {
            return Err(bad_flags(text));
        }
        *slot = true;
    }
    Ok(flags)
}

fn bad_flags(text: &str) -> FormatError {
    FormatError::new(SPEC_FORMAT, text, "flags before ':' must be R, B, RB or BR")
}

fn parse_seconds_before(spec: &str, text: &str) -> Result<u32, FormatError> {
    if text.is_empty() {
        return Err(FormatError::new(
            SPEC_FORMAT,
            spec,
            "missing seconds after '@'",
        ));
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(FormatError::new(
            SPEC_FORMAT,
            text,
            "seconds after '@' must be a whole number from 0 to 65535",
        ));
    }
    text.parse::<u32>()
        .ok()
        .filter(|s| *s <= MAX_SECONDS_BEFORE)
        .ok_or_else(|| {
            FormatError::new(SPEC_FORMAT, text, "seconds after '@' may be at most 65535")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn spec(
        signal: Signal,
        seconds_before: u32,
        batch_only: bool,
        on_reservation_end: bool,
    ) -> SignalSpec {
        SignalSpec {
            signal,
            seconds_before,
            batch_only,
            on_reservation_end,
        }
    }

    #[test]
    fn names_match_linux_numbers() {
        let expected = [
            ("HUP", 1),
            ("INT", 2),
            ("QUIT", 3),
            ("KILL", 9),
            ("USR1", 10),
            ("SEGV", 11),
            ("USR2", 12),
            ("TERM", 15),
            ("STKFLT", 16),
            ("CHLD", 17),
            ("CONT", 18),
            ("STOP", 19),
            ("TSTP", 20),
            ("URG", 23),
            ("XCPU", 24),
            ("WINCH", 28),
            ("IO", 29),
            ("PWR", 30),
            ("SYS", 31),
        ];
        for (name, number) in expected {
            assert_eq!(parse_signal(name), Ok(Signal(number)), "{name}");
            assert_eq!(Signal(number).name(), name);
        }
    }

    #[test]
    fn constants_agree_with_names() {
        for (sig, name) in [
            (Signal::HUP, "HUP"),
            (Signal::INT, "INT"),
            (Signal::KILL, "KILL"),
            (Signal::USR1, "USR1"),
            (Signal::USR2, "USR2"),
            (Signal::TERM, "TERM"),
            (Signal::CONT, "CONT"),
            (Signal::STOP, "STOP"),
        ] {
            assert_eq!(sig.name(), name);
        }
    }

    #[test]
    fn accepts_prefix_case_and_numbers() {
        assert_eq!(parse_signal("SIGUSR1"), Ok(Signal::USR1));
        assert_eq!(parse_signal("sigusr1"), Ok(Signal::USR1));
        assert_eq!(parse_signal("usr1"), Ok(Signal::USR1));
        assert_eq!(parse_signal("SigTerm"), Ok(Signal::TERM));
        assert_eq!(parse_signal("10"), Ok(Signal::USR1));
        assert_eq!(parse_signal("1"), Ok(Signal::HUP));
        assert_eq!(parse_signal("64"), Ok(Signal(64)));
        assert_eq!(parse_signal("034"), Ok(Signal(34)));
    }

    #[test]
    fn unnamed_signals_print_as_numbers() {
        assert_eq!(Signal(34).name(), "34");
        assert_eq!(Signal(64).name(), "64");
        assert_eq!(Signal(0).name(), "0");
        assert_eq!(Signal(255).name(), "255");
    }

    #[test]
    fn bad_signals_are_refused() {
        for bad in [
            "",
            "0",
            "65",
            "256",
            "99999999999999999999",
            "FOO",
            "SIG",
            "SIGSIGUSR1",
            "USR 1",
            "-9",
            "+9",
            "9x",
        ] {
            let err = parse_signal(bad).unwrap_err();
            assert_eq!(err.token, bad);
            assert_eq!(err.format, "signal");
        }
    }

    #[test]
    fn spec_defaults() {
        assert_eq!(
            parse_signal_spec("USR2"),
            Ok(spec(Signal::USR2, 60, false, false))
        );
        assert_eq!(
            parse_signal_spec("SIGTERM"),
            Ok(spec(Signal::TERM, 60, false, false))
        );
    }

    #[test]
    fn spec_with_flags_and_seconds() {
        assert_eq!(
            parse_signal_spec("B:USR1@300"),
            Ok(spec(Signal::USR1, 300, true, false))
        );
        assert_eq!(
            parse_signal_spec("R:10@30"),
            Ok(spec(Signal::USR1, 30, false, true))
        );
        assert_eq!(
            parse_signal_spec("RB:TERM"),
            Ok(spec(Signal::TERM, 60, true, true))
        );
        assert_eq!(
            parse_signal_spec("BR:TERM@0"),
            Ok(spec(Signal::TERM, 0, true, true))
        );
        assert_eq!(
            parse_signal_spec("USR1@65535"),
            Ok(spec(Signal::USR1, 65_535, false, false))
        );
    }

    #[test]
    fn bad_specs_name_the_bad_piece() {
        let cases = [
            ("X:USR1", "X"),
            ("BB:USR1", "BB"),
            ("RBR:USR1", "RBR"),
            (":USR1", ":USR1"),
            ("B:", "B:"),
            ("", ""),
            ("@60", "@60"),
            ("USR1@", "USR1@"),
            ("USR1@65536", "65536"),
            ("USR1@-5", "-5"),
            ("USR1@1m", "1m"),
            ("USR1@99999999999", "99999999999"),
            ("B:FOO@10", "FOO"),
            ("B:0", "0"),
            ("B:USR1:x", "USR1:x"),
            ("USR1@10@20", "10@20"),
        ];
        for (input, token) in cases {
            assert_eq!(
                parse_signal_spec(input).unwrap_err().token,
                token,
                "{input}"
            );
        }
    }

    proptest! {
        #[test]
        fn name_then_parse_round_trips(n in 1u8..=64) {
            prop_assert_eq!(parse_signal(&Signal(n).name()), Ok(Signal(n)));
        }

        #[test]
        fn prefixed_lowercase_names_parse(n in 1u8..=31) {
            let text = format!("sig{}", Signal(n).name().to_lowercase());
            prop_assert_eq!(parse_signal(&text), Ok(Signal(n)));
        }

        #[test]
        fn spec_round_trips(n in 1u8..=64, secs in 0u32..=65_535, b in any::<bool>(), r in any::<bool>()) {
            let flags = format!("{}{}", if r { "R" } else { "" }, if b { "B" } else { "" });
            let text = if flags.is_empty() {
                format!("{}@{secs}", Signal(n).name())
            } else {
                format!("{flags}:{}@{secs}", Signal(n).name())
            };
            prop_assert_eq!(parse_signal_spec(&text), Ok(spec(Signal(n), secs, b, r)));
        }

        #[test]
        fn parse_never_panics(text in "\\PC{0,24}") {
            let _ = parse_signal(&text);
            let _ = parse_signal_spec(&text);
        }
    }
}
