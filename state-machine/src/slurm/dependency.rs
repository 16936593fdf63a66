//! Job dependencies as `--dependency` takes them: `afterok:1:2,afternotok:3`, the
//! `?` (any-of) form, `after:JOB[+MIN]`, `aftercorr`, and `singleton`.
//!
//! Entries are joined by `,` (all must hold) or by `?` (any one suffices), never
//! both in one spec. Kinds are matched without regard to case, as Slurm does.
//! Slurm kinds corral does not run (`afterburstbuffer`, `expand`) are refused by
//! name rather than ignored.

use serde::{Deserialize, Serialize};

use super::FormatError;
use super::array::MAX_ARRAY_INDEX;

/// The format name used in errors.
const FORMAT: &str = "dependency";

/// When a dependency on another job is satisfied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum DependencyKind {
    /// `after`: the other job started (or was cancelled), plus an optional delay.
    After,
    /// `afterany`: the other job ended in any state.
    AfterAny,
    /// `afterok`: the other job completed with exit code zero.
    AfterOk,
    /// `afternotok`: the other job ended in any failed state.
    AfterNotOk,
    /// `aftercorr`: the array task with the same index ended successfully.
    AfterCorr,
}

impl DependencyKind {
    /// The keyword as written in a spec (`afterok`).
    pub fn keyword(self) -> &'static str {
        match self {
            DependencyKind::After => "after",
            DependencyKind::AfterAny => "afterany",
            DependencyKind::AfterOk => "afterok",
            DependencyKind::AfterNotOk => "afternotok",
            DependencyKind::AfterCorr => "aftercorr",
        }
    }

    fn from_keyword(word: &str) -> Option<Self> {
        [
            DependencyKind::After,
            DependencyKind::AfterAny,
            DependencyKind::AfterOk,
            DependencyKind::AfterNotOk,
            DependencyKind::AfterCorr,
        ]
        .into_iter()
        .find(|kind| kind.keyword().eq_ignore_ascii_case(word))
    }
}

/// One `kind:job` condition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DependencyCondition {
    /// What must happen to the job.
    pub kind: DependencyKind,
    /// The job id (for an array, the array's job id).
    pub job_id: u64,
    /// A single array task (`123_4`); `None` means the whole job or array.
    pub array_task: Option<u32>,
    /// Minutes to wait after the condition holds (`after:123+10`); zero otherwise.
    pub delay_minutes: u32,
}

/// A parsed `--dependency` value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DependencySpec {
    /// `true` when conditions were joined with `?` (any one suffices), `false` for `,` (all).
    pub any_of: bool,
    /// The conditions, in the order written.
    pub conditions: Vec<DependencyCondition>,
    /// `singleton`: wait until no other job of the same name and user runs.
    pub singleton: bool,
}

/// Parses a `--dependency` value.
pub fn parse_dependency(spec: &str) -> Result<DependencySpec, FormatError> {
    if spec.is_empty() {
        return Err(FormatError::new(
            FORMAT,
            spec,
            "empty; expected e.g. afterok:123 or singleton",
        ));
    }
    let any_of = spec.contains('?');
    if any_of && spec.contains(',') {
        return Err(FormatError::new(
            FORMAT,
            spec,
            "cannot mix ',' (all of) and '?' (any of) in one dependency",
        ));
    }
    let mut parsed = DependencySpec {
        any_of,
        conditions: Vec::new(),
        singleton: false,
    };
    for entry in spec.split([',', '?']) {
        parse_entry(spec, entry, &mut parsed)?;
    }
    Ok(parsed)
}

/// Parses `singleton` or `kind:job[:job...]` into `out`.
fn parse_entry(spec: &str, entry: &str, out: &mut DependencySpec) -> Result<(), FormatError> {
    if entry.is_empty() {
        return Err(FormatError::new(
            FORMAT,
            spec,
            "empty entry between separators",
        ));
    }
    if entry.eq_ignore_ascii_case("singleton") {
        out.singleton = true;
        return Ok(());
    }
    let mut fields = entry.split(':');
    let keyword = fields.next().unwrap_or_default();
    let kind = parse_kind(entry, keyword)?;
    let jobs: Vec<&str> = fields.collect();
    if jobs.is_empty() {
        return Err(FormatError::new(
            FORMAT,
            entry,
            "no job ids; expected KIND:JOB[:JOB...]",
        ));
    }
    for job in jobs {
        out.conditions.push(parse_job(entry, kind, job)?);
    }
    Ok(())
}

fn parse_kind(entry: &str, keyword: &str) -> Result<DependencyKind, FormatError> {
    if keyword.is_empty() {
        return Err(FormatError::new(
            FORMAT,
            entry,
            "missing dependency kind before ':'",
        ));
    }
    DependencyKind::from_keyword(keyword).ok_or_else(|| {
        let reason = if keyword.eq_ignore_ascii_case("singleton") {
            "singleton takes no job ids"
        } else {
            "unsupported dependency kind; expected after, afterany, afterok, afternotok, aftercorr or singleton"
        };
        FormatError::new(FORMAT, keyword, reason)
    })
}

/// Parses `ID`, `ID_TASK`, and for `after` also `ID+MINUTES` or `ID_TASK+MINUTES`.
fn parse_job(
    entry: &str,
    kind: DependencyKind,
    text: &str,
) -> Result<DependencyCondition, FormatError> {
    if text.is_empty() {
        return Err(FormatError::new(FORMAT, entry, "empty job id"));
    }
    let (job, delay_minutes) = match text.split_once('+') {
        Some((_, _)) if kind != DependencyKind::After => {
            return Err(FormatError::new(
                FORMAT,
                text,
                "a +MINUTES delay is only accepted with after",
            ));
        }
        Some((job, minutes)) => (job, parse_number::<u32>(text, minutes, "delay in minutes")?),
        None => (text, 0),
    };
    let (job_id, array_task) = match job.split_once('_') {
        Some((id, task)) => (id, Some(parse_task(text, task)?)),
        None => (job, None),
    };
    let job_id = parse_number::<u64>(text, job_id, "job id")?;
    if job_id == 0 {
        return Err(FormatError::new(FORMAT, text, "job id 0 does not exist"));
    }
    Ok(DependencyCondition {
        kind,
        job_id,
        array_task,
        delay_minutes,
    })
}

fn parse_task(job: &str, text: &str) -> Result<u32, FormatError> {
    let task = parse_number::<u32>(job, text, "array task index")?;
    if task > MAX_ARRAY_INDEX {
        return Err(FormatError::new(
            FORMAT,
            text,
            format!("array task index above the maximum of {MAX_ARRAY_INDEX}"),
        ));
    }
    Ok(task)
}

/// Parses decimal digits, naming `context` when `text` is empty.
fn parse_number<T: std::str::FromStr>(
    context: &str,
    text: &str,
    what: &str,
) -> Result<T, FormatError> {
    if text.is_empty() {
        return Err(FormatError::new(FORMAT, context, format!("missing {what}")));
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(FormatError::new(
            FORMAT,
            text,
            format!("{what} must be a whole number"),
        ));
    }
    text.parse()
        .map_err(|_| FormatError::new(FORMAT, text, format!("{what} is too large")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cond(kind: DependencyKind, job_id: u64) -> DependencyCondition {
        DependencyCondition {
            kind,
            job_id,
            array_task: None,
            delay_minutes: 0,
        }
    }

    fn err_token(spec: &str) -> String {
        parse_dependency(spec).unwrap_err().token
    }

    #[test]
    fn single_kinds() {
        for (text, kind) in [
            ("after:5", DependencyKind::After),
            ("afterany:5", DependencyKind::AfterAny),
            ("afterok:5", DependencyKind::AfterOk),
            ("afternotok:5", DependencyKind::AfterNotOk),
            ("aftercorr:5", DependencyKind::AfterCorr),
            ("AfterOK:5", DependencyKind::AfterOk),
        ] {
            let spec = parse_dependency(text).unwrap();
            assert_eq!(spec.conditions, vec![cond(kind, 5)], "{text}");
            assert!(!spec.any_of);
            assert!(!spec.singleton);
        }
    }

    #[test]
    fn several_jobs_and_entries_all_of() {
        let spec = parse_dependency("afterok:1:2,afternotok:3").unwrap();
        assert_eq!(
            spec.conditions,
            vec![
                cond(DependencyKind::AfterOk, 1),
                cond(DependencyKind::AfterOk, 2),
                cond(DependencyKind::AfterNotOk, 3),
            ]
        );
        assert!(!spec.any_of);
    }

    #[test]
    fn any_of() {
        let spec = parse_dependency("afterok:1?afternotok:2").unwrap();
        assert!(spec.any_of);
        assert_eq!(
            spec.conditions,
            vec![
                cond(DependencyKind::AfterOk, 1),
                cond(DependencyKind::AfterNotOk, 2)
            ]
        );
    }

    #[test]
    fn singleton() {
        let spec = parse_dependency("singleton").unwrap();
        assert!(spec.singleton);
        assert!(spec.conditions.is_empty());
        let spec = parse_dependency("afterok:7,SINGLETON").unwrap();
        assert!(spec.singleton);
        assert_eq!(spec.conditions, vec![cond(DependencyKind::AfterOk, 7)]);
    }

    #[test]
    fn array_tasks_and_delays() {
        let spec = parse_dependency("afterok:123_4:124,after:99+10:100_2+5").unwrap();
        assert_eq!(
            spec.conditions,
            vec![
                DependencyCondition {
                    array_task: Some(4),
                    ..cond(DependencyKind::AfterOk, 123)
                },
                cond(DependencyKind::AfterOk, 124),
                DependencyCondition {
                    delay_minutes: 10,
                    ..cond(DependencyKind::After, 99)
                },
                DependencyCondition {
                    array_task: Some(2),
                    delay_minutes: 5,
                    ..cond(DependencyKind::After, 100)
                },
            ]
        );
    }

    #[test]
    fn mixing_separators_is_refused() {
        let err = parse_dependency("afterok:1,afterok:2?afterok:3").unwrap_err();
        assert_eq!(err.token, "afterok:1,afterok:2?afterok:3");
        assert!(err.reason.contains("mix"));
    }

    #[test]
    fn unknown_kinds_are_named() {
        assert_eq!(err_token("afterburstbuffer:5"), "afterburstbuffer");
        assert_eq!(err_token("expand:5"), "expand");
        assert_eq!(err_token("afterok:1,befor:2"), "befor");
        assert_eq!(err_token("5"), "5");
        assert_eq!(err_token(":5"), ":5");
        assert_eq!(err_token("singleton:5"), "singleton");
    }

    #[test]
    fn malformed_jobs_are_refused() {
        let cases = [
            ("", ""),
            ("afterok", "afterok"),
            ("afterok:", "afterok:"),
            ("afterok:1::2", "afterok:1::2"),
            ("afterok:1,", "afterok:1,"),
            ("?afterok:1", "?afterok:1"),
            ("afterok:abc", "abc"),
            ("afterok:0", "0"),
            ("afterok:-1", "-1"),
            ("afterok:12a", "12a"),
            ("afterok:99999999999999999999", "99999999999999999999"),
            ("afterok:5+10", "5+10"),
            ("after:5+", "5+"),
            ("after:5+x", "x"),
            ("after:+5", "+5"),
            ("afterok:5_", "5_"),
            ("afterok:_5", "_5"),
            ("afterok:5_*", "*"),
            ("afterok:5_4000001", "4000001"),
            ("afterok:5_1_2", "1_2"),
            ("afterok:0_1", "0_1"),
        ];
        for (input, token) in cases {
            let err = parse_dependency(input).unwrap_err();
            assert_eq!(err.token, token, "{input}");
            assert_eq!(err.format, "dependency");
        }
    }

    fn kind() -> impl Strategy<Value = DependencyKind> {
        prop_oneof![
            Just(DependencyKind::After),
            Just(DependencyKind::AfterAny),
            Just(DependencyKind::AfterOk),
            Just(DependencyKind::AfterNotOk),
            Just(DependencyKind::AfterCorr),
        ]
    }

    proptest! {
        #[test]
        fn written_conditions_parse_back(
            conds in prop::collection::vec((kind(), 1u64.., prop::option::of(0u32..=MAX_ARRAY_INDEX)), 1..5),
            any_of in any::<bool>(),
        ) {
            let separator = if any_of { "?" } else { "," };
            let text = conds
                .iter()
                .map(|(kind, id, task)| match task {
                    Some(t) => format!("{}:{id}_{t}", kind.keyword()),
                    None => format!("{}:{id}", kind.keyword()),
                })
                .collect::<Vec<_>>()
                .join(separator);
            let spec = parse_dependency(&text).unwrap();
            prop_assert_eq!(spec.any_of, any_of && conds.len() > 1);
            let expected: Vec<_> = conds
                .iter()
                .map(|&(kind, job_id, array_task)| DependencyCondition { kind, job_id, array_task, delay_minutes: 0 })
                .collect();
            prop_assert_eq!(spec.conditions, expected);
        }

        #[test]
        fn parse_never_panics(text in "\\PC{0,32}") {
            let _ = parse_dependency(&text);
        }
    }
}
