//! sshare's output: its fields (Slurm 22.05's table; a prefix picks the first
//! name it starts), the account tree as sshare indents it (an account one
//! space per level below root, a user row naming its account one level
//! deeper), doubles as `%f`, and sacct's print_fields layout. corral computes
//! classic fair share (`2^(-U/S)` for every row, as sshare shows without
//! Fair Tree); its usage is decayed GPU-seconds.

use corral_proto::api::ShareRow;

use super::print_fields::{Layout, header, row};

/// One sshare field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareField {
    Account,
    Cluster,
    EffectvUsage,
    FairShare,
    GrpTresMins,
    GrpTresRaw,
    Id,
    LevelFs,
    NormShares,
    NormUsage,
    Partition,
    RawShares,
    RawUsage,
    TresRunMins,
    User,
}

use ShareField as F;

const FIELDS: &[(&str, i32, ShareField)] = &[
    ("Account", -20, F::Account),
    ("Cluster", 10, F::Cluster),
    ("EffectvUsage", 13, F::EffectvUsage),
    ("FairShare", 10, F::FairShare),
    ("GrpTRESMins", 30, F::GrpTresMins),
    ("GrpTRESRaw", 30, F::GrpTresRaw),
    ("ID", 6, F::Id),
    ("LevelFS", 10, F::LevelFs),
    ("NormShares", 11, F::NormShares),
    ("NormUsage", 11, F::NormUsage),
    ("Partition", 12, F::Partition),
    ("RawShares", 10, F::RawShares),
    ("RawUsage", 11, F::RawUsage),
    ("TRESRunMins", 30, F::TresRunMins),
    ("User", 10, F::User),
];

/// sshare's default fields without Fair Tree (`-l`: the long list).
pub fn default_fields(long: bool) -> &'static str {
    if long {
        "A,User,RawShares,NormShares,RawUsage,NormUsage,Eff,Fairshare,GrpTRESMins,TRESRunMins"
    } else {
        "A,User,RawShares,NormShares,RawUsage,Eff,Fairshare"
    }
}

/// Every field name, for `--helpformat`.
pub fn field_names() -> impl Iterator<Item = &'static str> {
    FIELDS.iter().map(|(name, _, _)| *name)
}

/// The columns of a comma-separated list (`NAME%WIDTH` sets a width).
pub fn columns(list: &str) -> Result<Vec<(&'static str, i32, ShareField)>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|spec| {
            let (prefix, width) = match spec.split_once('%') {
                Some((p, w)) => (p, w.parse::<i32>().ok().filter(|w| *w != 0)),
                None => (spec, None),
            };
            let lower = prefix.to_ascii_lowercase();
            FIELDS
                .iter()
                .find(|(name, _, _)| name.to_ascii_lowercase().starts_with(&lower))
                .map(|(name, default, field)| (*name, width.unwrap_or(*default), *field))
                .ok_or_else(|| format!("Invalid field requested: \"{prefix}\""))
        })
        .collect()
}

/// The table: a header (unless `with_header` is false) and a line per row.
pub fn table(
    rows: &[&ShareRow],
    columns: &[(&'static str, i32, ShareField)],
    layout: &Layout,
    with_header: bool,
) -> String {
    let mut out = String::new();
    if with_header {
        let names: Vec<(&str, i32)> = columns.iter().map(|(n, w, _)| (*n, *w)).collect();
        out.push_str(&header(&names, layout));
    }
    for share in rows {
        let cells: Vec<(Option<String>, i32)> = columns
            .iter()
            .map(|(_, width, field)| (cell(share, *field), *width))
            .collect();
        out.push_str(&row(&cells, layout));
    }
    out
}

fn cell(share: &ShareRow, field: ShareField) -> Option<String> {
    let user_row = !share.user.is_empty();
    let indent = |depth: u32| " ".repeat(depth as usize);
    match field {
        // A user row names its account one level deeper than the account's row.
        F::Account => Some(format!("{}{}", indent(share.depth), share.account)),
        F::User => user_row.then(|| share.user.clone()),
        F::RawShares if user_row => Some("parent".into()),
        F::RawShares if share.depth == 0 => None,
        F::RawShares => Some(share.raw_shares.to_string()),
        F::NormShares => Some(format!("{:.6}", share.norm_shares)),
        F::RawUsage => Some(format!("{:.0}", share.raw_usage.floor())),
        F::EffectvUsage | F::NormUsage => Some(format!("{:.6}", share.effective_usage)),
        F::FairShare => Some(format!("{:.6}", share.fairshare)),
        // Not kept by corral: no association ids, Fair Tree levels,
        // partition-level shares or TRES-minute limits per association.
        F::Cluster | F::Id | F::LevelFs | F::Partition | F::GrpTresMins | F::GrpTresRaw => None,
        F::TresRunMins => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(account: &str, user: &str, depth: u32, shares: u32, norm: f64, used: f64) -> ShareRow {
        ShareRow {
            account: account.into(),
            user: user.into(),
            depth,
            raw_shares: shares,
            norm_shares: norm,
            raw_usage: used,
            effective_usage: used / 1000.0,
            fairshare: (-(used / 1000.0) / norm).exp2(),
        }
    }

    #[test]
    fn the_tree_as_sshare_indents_it() {
        let rows = [
            share("root", "", 0, 1, 1.0, 1000.0),
            share("ml", "", 1, 10, 0.25, 1000.0),
            share("ml", "alice", 2, 0, 0.25, 600.0),
        ];
        let refs: Vec<&ShareRow> = rows.iter().collect();
        let cols = columns(default_fields(false)).unwrap();
        let out = table(&refs, &cols, &Layout::Columns, true);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "Account                    User  RawShares  NormShares    RawUsage  EffectvUsage  FairShare "
        );
        assert_eq!(
            lines[2],
            "root                                          1.000000        1000      1.000000   0.500000 "
        );
        assert_eq!(
            lines[3],
            " ml                                     10    0.250000        1000      1.000000   0.062500 "
        );
        assert_eq!(
            lines[4],
            "  ml                      alice     parent    0.250000         600      0.600000   0.189465 "
        );
        assert!(columns("bogus").is_err());
        assert_eq!(columns("eff").unwrap()[0].0, "EffectvUsage");
    }
}
