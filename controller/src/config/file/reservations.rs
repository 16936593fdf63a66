//! Advance reservations as written in `corral.toml` (`[[reservations]]`).

use serde::{Deserialize, Serialize};
use toml::value::Datetime;

/// A reservation, as `scontrol create reservation`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReservationSection {
    /// Its name, given with `--reservation`.
    pub name: String,
    /// Reserved nodes, as a hostlist.
    pub nodes: String,
    /// Start, a TOML date-time with an offset: `2030-01-01T08:00:00Z`.
    pub start: Datetime,
    /// End (exclusive), likewise.
    pub end: Datetime,
    /// Users who may use it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<String>,
    /// Accounts whose users may use it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accounts: Vec<String>,
    /// A maintenance reservation: no job runs on its nodes during the window.
    #[serde(default, skip_serializing_if = "is_false")]
    pub maintenance: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}
