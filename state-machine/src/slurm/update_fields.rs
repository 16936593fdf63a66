//! `scontrol update JobId=N KEY=VALUE ...`: the fields corral can change, in
//! Slurm's names (case-insensitive) and value formats, turned into a
//! [`JobUpdate`]. An empty `Dependency=` clears the job's dependency.

use super::FormatError;
use super::begin::parse_begin;
use super::dependency::parse_dependency;
use super::duration::parse_time_limit;
use super::hostlist::expand;
use super::sbatch::parse_constraint;
use crate::job_update::JobUpdate;
use crate::time::Timestamp;

const FORMAT: &str = "scontrol update field";

/// The fields `scontrol update` accepts, as the error for an unknown one lists them.
pub const UPDATABLE_FIELDS: &str = "JobName, Comment, TimeLimit, Partition, Account, QOS, Nice, Dependency, NumNodes, Features, ExcNodeList, StartTime";

/// Parses `KEY=VALUE` pairs (keys in any case) into one update; a key given
/// twice is an error. `StartTime=` takes `--begin`'s forms, counted from `now`.
pub fn parse_update_fields(
    fields: &[(String, String)],
    now: Timestamp,
) -> Result<JobUpdate, FormatError> {
    let mut update = JobUpdate::default();
    for (key, value) in fields {
        let value = value.as_str();
        let duplicate = || FormatError::new(FORMAT, key.as_str(), "given twice");
        match key.to_ascii_lowercase().as_str() {
            "jobname" | "name" => set(&mut update.name, value.to_string(), duplicate)?,
            "comment" => set(&mut update.comment, value.to_string(), duplicate)?,
            "starttime" | "begintime" => {
                let begin = parse_begin(value)?.resolve(now).ok_or_else(|| {
                    FormatError::new(
                        FORMAT,
                        value,
                        "StartTime names a date the calendar does not have, or one after 2500",
                    )
                })?;
                set(&mut update.begin_time, begin, duplicate)?;
            }
            "timelimit" => set(&mut update.time_limit, parse_time_limit(value)?, duplicate)?,
            "partition" => set(&mut update.partition, non_empty(key, value)?, duplicate)?,
            "account" => set(&mut update.account, non_empty(key, value)?, duplicate)?,
            "qos" => set(&mut update.qos, non_empty(key, value)?, duplicate)?,
            "nice" => {
                let nice = value
                    .parse::<i32>()
                    .ok()
                    .filter(|n| n.unsigned_abs() <= 2_147_483_645);
                let nice = nice.ok_or_else(|| {
                    FormatError::new(FORMAT, value, "Nice takes a whole number, e.g. Nice=100")
                })?;
                set(&mut update.nice, nice, duplicate)?;
            }
            "dependency" => {
                let dependency = if value.is_empty() {
                    None
                } else {
                    Some(parse_dependency(value)?)
                };
                set(&mut update.dependency, dependency, duplicate)?;
            }
            "numnodes" => {
                let nodes = value
                    .parse::<u32>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| {
                        FormatError::new(FORMAT, value, "NumNodes takes a node count of 1 or more")
                    })?;
                set(&mut update.nodes, nodes, duplicate)?;
            }
            "features" | "constraint" => {
                let features = if value.is_empty() {
                    Vec::new()
                } else {
                    parse_constraint(value)?
                };
                set(&mut update.features, features, duplicate)?;
            }
            "excnodelist" => {
                let nodes = if value.is_empty() {
                    Vec::new()
                } else {
                    expand(value)?
                };
                set(&mut update.excluded_nodes, nodes, duplicate)?;
            }
            _ => {
                return Err(FormatError::new(
                    FORMAT,
                    key.as_str(),
                    format!("corral cannot change this field; it can change {UPDATABLE_FIELDS}"),
                ));
            }
        }
    }
    Ok(update)
}

fn set<T>(
    slot: &mut Option<T>,
    value: T,
    duplicate: impl Fn() -> FormatError,
) -> Result<(), FormatError> {
    if slot.is_some() {
        return Err(duplicate());
    }
    *slot = Some(value);
    Ok(())
}

fn non_empty(key: &str, value: &str) -> Result<String, FormatError> {
    if value.is_empty() {
        return Err(FormatError::new(FORMAT, key, "needs a value"));
    }
    Ok(value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_update_fields_now(fields: &[(String, String)]) -> Result<JobUpdate, FormatError> {
        parse_update_fields(fields, Timestamp::from_secs(1_000))
    }

    #[test]
    fn start_time_takes_begin_forms_counted_from_now() {
        let update = parse_update_fields_now(&fields(&[("StartTime", "now+60")])).unwrap();
        assert_eq!(update.begin_time, Some(Timestamp::from_secs(1_060)));
        let update = parse_update_fields_now(&fields(&[("starttime", "now")])).unwrap();
        assert_eq!(update.begin_time, Some(Timestamp::from_secs(1_000)));
        assert!(parse_update_fields_now(&fields(&[("StartTime", "soon")])).is_err());
    }
    use crate::slurm::duration::TimeLimit;

    fn fields(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn reads_slurms_names_and_formats() {
        let update = parse_update_fields_now(&fields(&[
            ("TimeLimit", "1-00:00:00"),
            ("jobname", "x"),
            ("Dependency", ""),
            ("NumNodes", "2"),
            ("ExcNodeList", "gpu[01-02]"),
            ("Features", "a&b"),
        ]))
        .expect("parses");
        assert_eq!(update.time_limit, Some(TimeLimit::Seconds(86_400)));
        assert_eq!(update.name.as_deref(), Some("x"));
        assert_eq!(update.dependency, Some(None));
        assert_eq!(update.nodes, Some(2));
        assert_eq!(
            update.excluded_nodes,
            Some(vec!["gpu01".to_string(), "gpu02".to_string()])
        );
        assert_eq!(
            update.features,
            Some(vec!["a".to_string(), "b".to_string()])
        );
    }

    #[test]
    fn unknown_duplicate_and_malformed_fields_are_named() {
        let unknown = parse_update_fields_now(&fields(&[("MinCPUsNode", "4")])).unwrap_err();
        assert!(unknown.to_string().contains("MinCPUsNode"), "{unknown}");
        assert!(unknown.to_string().contains("TimeLimit"), "{unknown}");
        let twice = parse_update_fields_now(&fields(&[("Nice", "1"), ("nice", "2")])).unwrap_err();
        assert!(twice.to_string().contains("twice"), "{twice}");
        assert!(parse_update_fields_now(&fields(&[("TimeLimit", "soon")])).is_err());
        assert!(parse_update_fields_now(&fields(&[("NumNodes", "0")])).is_err());
        assert!(parse_update_fields_now(&fields(&[("Partition", "")])).is_err());
    }
}
