//! `FaultCommand`: a fault injected into a simulated GPU, and its one-line text
//! form on the control socket (`xid 3 79`, `heal 3`, `temp 3 95`,
//! `context 3 4242`).
//!
//! The agent answers each line with `ok` or `error: REASON`.

use std::fmt;
use std::str::FromStr;

use super::error::GpuError;

/// The longest command line accepted, in bytes.
pub const MAX_COMMAND_LEN: usize = 256;

/// The highest temperature a command may set, in degrees Celsius.
pub const MAX_TEMPERATURE_C: u32 = 150;

/// The forms, for error messages.
const USAGE: &str = "expected `xid GPU XID`, `heal GPU`, `temp GPU CELSIUS` or `context GPU PID`";

/// A fault (or a repair) for one simulated GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultCommand {
    /// Raise XID `xid` on GPU `gpu`: an [`super::XidEvent`] is emitted and the
    /// GPU reports unhealthy with the XID as its problem.
    Xid {
        /// The GPU's index.
        gpu: u32,
        /// The XID number.
        xid: u32,
    },
    /// Make GPU `gpu` healthy again, at its idle temperature.
    Heal {
        /// The GPU's index.
        gpu: u32,
    },
    /// Set GPU `gpu`'s temperature.
    Temperature {
        /// The GPU's index.
        gpu: u32,
        /// Degrees Celsius, at most [`MAX_TEMPERATURE_C`].
        celsius: u32,
    },
    /// Process `pid` opens a context on GPU `gpu` (as a CUDA program does):
    /// the GPU lists it among its processes until it exits.
    Context {
        /// The GPU's index.
        gpu: u32,
        /// The process.
        pid: u32,
    },
}

impl FaultCommand {
    /// The GPU the command is for.
    pub fn gpu(&self) -> u32 {
        match *self {
            FaultCommand::Xid { gpu, .. }
            | FaultCommand::Heal { gpu }
            | FaultCommand::Temperature { gpu, .. }
            | FaultCommand::Context { gpu, .. } => gpu,
        }
    }
}

impl fmt::Display for FaultCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultCommand::Xid { gpu, xid } => write!(f, "xid {gpu} {xid}"),
            FaultCommand::Heal { gpu } => write!(f, "heal {gpu}"),
            FaultCommand::Temperature { gpu, celsius } => write!(f, "temp {gpu} {celsius}"),
            FaultCommand::Context { gpu, pid } => write!(f, "context {gpu} {pid}"),
        }
    }
}

impl FromStr for FaultCommand {
    type Err = GpuError;

    fn from_str(text: &str) -> Result<Self, GpuError> {
        let bad = |reason: String| GpuError::BadFaultCommand {
            text: text.to_string(),
            reason,
        };
        if text.len() > MAX_COMMAND_LEN {
            return Err(bad(format!("longer than {MAX_COMMAND_LEN} bytes")));
        }
        let words: Vec<&str> = text.split_whitespace().collect();
        let number = |what: &str, word: &str| {
            word.parse::<u32>()
                .map_err(|_| bad(format!("{what} {word:?} is not a whole number")))
        };
        match words.as_slice() {
            ["xid", gpu, xid] => Ok(FaultCommand::Xid {
                gpu: number("GPU index", gpu)?,
                xid: number("XID", xid)?,
            }),
            ["heal", gpu] => Ok(FaultCommand::Heal {
                gpu: number("GPU index", gpu)?,
            }),
            ["temp", gpu, celsius] => {
                let gpu = number("GPU index", gpu)?;
                let celsius = number("temperature", celsius)?;
                if celsius > MAX_TEMPERATURE_C {
                    return Err(bad(format!(
                        "temperature {celsius} °C is above {MAX_TEMPERATURE_C} °C"
                    )));
                }
                Ok(FaultCommand::Temperature { gpu, celsius })
            }
            ["context", gpu, pid] => Ok(FaultCommand::Context {
                gpu: number("GPU index", gpu)?,
                pid: number("process id", pid)?,
            }),
            [] => Err(bad(format!("empty; {USAGE}"))),
            [verb, ..] if matches!(*verb, "xid" | "heal" | "temp" | "context") => Err(bad(
                format!("wrong number of arguments for `{verb}`; {USAGE}"),
            )),
            [verb, ..] => Err(bad(format!("unknown command `{verb}`; {USAGE}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_forms_round_trip() {
        let commands = [
            FaultCommand::Xid { gpu: 3, xid: 79 },
            FaultCommand::Heal { gpu: 0 },
            FaultCommand::Temperature {
                gpu: 7,
                celsius: 95,
            },
            FaultCommand::Context { gpu: 2, pid: 4242 },
        ];
        for command in commands {
            let text = command.to_string();
            assert_eq!(text.parse::<FaultCommand>().unwrap(), command, "{text}");
        }
        assert_eq!(
            FaultCommand::Xid { gpu: 3, xid: 79 }.to_string(),
            "xid 3 79"
        );
    }

    #[test]
    fn extra_spaces_are_fine() {
        assert_eq!(
            "  xid   1  48 ".parse::<FaultCommand>().unwrap(),
            FaultCommand::Xid { gpu: 1, xid: 48 }
        );
    }

    #[test]
    fn malformed_commands_say_what_is_wrong() {
        let cases = [
            ("", "empty"),
            ("reboot 1", "unknown command `reboot`"),
            ("xid 1", "wrong number of arguments for `xid`"),
            ("heal", "wrong number of arguments for `heal`"),
            ("xid one 79", "GPU index \"one\" is not a whole number"),
            ("xid 1 -4", "XID \"-4\" is not a whole number"),
            ("temp 1 400", "above 150 °C"),
        ];
        for (text, expected) in cases {
            let message = text.parse::<FaultCommand>().unwrap_err().to_string();
            assert!(message.contains(expected), "{text:?}: {message}");
        }
        let long = format!("xid 1 {}", "9".repeat(MAX_COMMAND_LEN));
        let message = long.parse::<FaultCommand>().unwrap_err().to_string();
        assert!(message.contains("longer than"), "{message}");
    }
}
