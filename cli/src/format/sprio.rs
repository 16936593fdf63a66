//! sprio's output: its format letters (`%i %r %u %Y %S %A %B %F %J %P %Q %N
//! %T`, lowercase for the normalised factors) through the squeue-style `-o`
//! parser, its default formats (a column for each factor whose weight is not
//! zero, as sprio chooses), the weights row of `-w`, and each cell as sprio
//! prints it: weighted factors rounded (`%.0f`), normalised ones with seven
//! decimals. corral has no site, association or TRES factors: those columns
//! print 0.

use corral_proto::api::{JobPriority, PriorityWeights};

use super::format_spec::{Format, parse_letters, render_line};

/// One column of sprio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SprioField {
    JobId,
    Partition,
    User,
    Account,
    Priority,
    Site,
    Age,
    Assoc,
    FairShare,
    JobSize,
    PartitionFactor,
    Qos,
    Nice,
    Tres,
    Cluster,
}

/// A column and whether it shows the normalised factor (lowercase letter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SprioColumn {
    /// Which value.
    pub field: SprioField,
    /// The normalised factor, not the weighted one.
    pub normalised: bool,
}

fn letter(c: char) -> Option<SprioColumn> {
    use SprioField as F;
    // sprio's letters: uppercase the weighted factor, lowercase the
    // normalised one, where both exist.
    let (field, normalised) = match c {
        'i' => (F::JobId, false),
        'r' => (F::Partition, false),
        'u' => (F::User, false),
        'o' => (F::Account, false),
        'c' => (F::Cluster, false),
        'Y' => (F::Priority, false),
        'y' => (F::Priority, true),
        'S' => (F::Site, false),
        'A' => (F::Age, false),
        'a' => (F::Age, true),
        'B' => (F::Assoc, false),
        'b' => (F::Assoc, true),
        'F' => (F::FairShare, false),
        'f' => (F::FairShare, true),
        'J' => (F::JobSize, false),
        'j' => (F::JobSize, true),
        'P' => (F::PartitionFactor, false),
        'p' => (F::PartitionFactor, true),
        'Q' => (F::Qos, false),
        'q' => (F::Qos, true),
        'N' => (F::Nice, false),
        'T' => (F::Tres, false),
        't' => (F::Tres, true),
        _ => return None,
    };
    Some(SprioColumn { field, normalised })
}

/// Parses an `-o` format.
pub fn parse(format: &str) -> Format<SprioColumn> {
    parse_letters(format, letter)
}

/// sprio's default format: `long` (`-l`), `normalised` (`-n`), with a user
/// column when users were asked for (`-u`), and a column for each weighted
/// factor.
pub fn default_format(
    weights: &PriorityWeights,
    long: bool,
    normalised: bool,
    users: bool,
) -> String {
    match (long, normalised) {
        (true, true) => return "%.15i %9r %.8u %10y %10a %10b %10f %10j %10p %10q %20t".into(),
        (true, false) => {
            return "%.15i %9r %.8u %.10Y %.10S %.10A %.10B %.10F %.10J %.10P %.10Q %.11N %.20T"
                .into();
        }
        _ => {}
    }
    let mut format = String::from("%.15i %9r");
    if users {
        format.push_str(" %.8u");
    }
    format.push_str(if normalised { " %10y" } else { " %.10Y %.10S" });
    for (weight, weighted, plain) in [
        (weights.age, " %.10A", " %10a"),
        (weights.fairshare, " %.10F", " %10f"),
        (weights.job_size, " %.10J", " %10j"),
        (weights.partition, " %.10P", " %10p"),
        (weights.qos, " %.10Q", " %10q"),
    ] {
        if weight > 0 {
            format.push_str(if normalised { plain } else { weighted });
        }
    }
    format
}

/// The header line.
pub fn header(format: &Format<SprioColumn>) -> String {
    render_line(format, |c| {
        match c.field {
            SprioField::JobId => "JOBID",
            SprioField::Partition | SprioField::PartitionFactor => "PARTITION",
            SprioField::User => "USER",
            SprioField::Account => "ACCOUNT",
            SprioField::Priority => "PRIORITY",
            SprioField::Site => "SITE",
            SprioField::Age => "AGE",
            SprioField::Assoc => "ASSOC",
            SprioField::FairShare => "FAIRSHARE",
            SprioField::JobSize => "JOBSIZE",
            SprioField::Qos => "QOS",
            SprioField::Nice => "NICE",
            SprioField::Tres => "TRES",
            SprioField::Cluster => "CLUSTER",
        }
        .to_string()
    })
}

/// `-w`: the weights row.
pub fn weights_row(format: &Format<SprioColumn>, w: &PriorityWeights, cluster: &str) -> String {
    render_line(format, |c| match c.field {
        SprioField::JobId => "Weights".into(),
        SprioField::Cluster => cluster.into(),
        SprioField::Partition | SprioField::User | SprioField::Account | SprioField::Tres => {
            String::new()
        }
        SprioField::Priority | SprioField::Site | SprioField::Assoc | SprioField::Nice => {
            "0".into()
        }
        SprioField::Age => w.age.to_string(),
        SprioField::FairShare => w.fairshare.to_string(),
        SprioField::JobSize => w.job_size.to_string(),
        SprioField::PartitionFactor => w.partition.to_string(),
        SprioField::Qos => w.qos.to_string(),
    })
}

/// One job's row.
pub fn job_row(
    format: &Format<SprioColumn>,
    job: &JobPriority,
    w: &PriorityWeights,
    cluster: &str,
) -> String {
    render_line(format, |c| {
        let factor = |normalised: f64, weight: u32| {
            if c.normalised {
                format!("{normalised:.7}")
            } else {
                format!("{:.0}", normalised * f64::from(weight))
            }
        };
        match c.field {
            SprioField::JobId => job.job_id.to_string(),
            SprioField::Partition => job.partition.clone(),
            SprioField::User => job.user.clone(),
            SprioField::Account => job.account.clone(),
            SprioField::Cluster => cluster.into(),
            SprioField::Priority => {
                if c.normalised {
                    format!(
                        "{:16.14}",
                        (job.priority.max(0) as f64) / f64::from(u32::MAX)
                    )
                } else {
                    job.priority.max(1).to_string()
                }
            }
            SprioField::Site | SprioField::Assoc => factor(0.0, 0),
            SprioField::Age => factor(job.age, w.age),
            SprioField::FairShare => factor(job.fairshare, w.fairshare),
            SprioField::JobSize => factor(job.job_size, w.job_size),
            SprioField::PartitionFactor => factor(job.partition_factor, w.partition),
            SprioField::Qos => factor(job.qos, w.qos),
            SprioField::Nice => job.nice.to_string(),
            SprioField::Tres => String::new(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weights() -> PriorityWeights {
        PriorityWeights {
            age: 1000,
            fairshare: 10000,
            job_size: 0,
            partition: 1000,
            qos: 0,
        }
    }

    fn job() -> JobPriority {
        JobPriority {
            job_id: 42,
            user: "alice".into(),
            partition: "gpu".into(),
            account: "ml".into(),
            age: 0.5,
            fairshare: 0.25,
            job_size: 0.125,
            partition_factor: 1.0,
            qos: 0.0,
            nice: 0,
            priority: 4000,
        }
    }

    #[test]
    fn the_default_shows_the_weighted_factors_only() {
        let format = default_format(&weights(), false, false, false);
        assert_eq!(format, "%.15i %9r %.10Y %.10S %.10A %.10F %.10P");
        let parsed = parse(&format);
        assert_eq!(
            header(&parsed),
            "          JOBID PARTITION   PRIORITY       SITE        AGE  FAIRSHARE  PARTITION\n"
        );
        assert_eq!(
            job_row(&parsed, &job(), &weights(), "local"),
            "             42 gpu             4000          0        500       2500       1000\n"
        );
        assert_eq!(
            weights_row(&parsed, &weights(), "local"),
            "        Weights                    0          0       1000      10000       1000\n"
        );
    }

    #[test]
    fn normalised_factors_have_seven_decimals() {
        let parsed = parse(&default_format(&weights(), false, true, true));
        let row = job_row(&parsed, &job(), &weights(), "local");
        assert!(row.contains(" alice "), "{row}");
        assert!(row.contains(" 0.5000000 "), "{row}");
        assert!(row.contains(" 0.2500000 "), "{row}");
        assert!(parse("%.15i %Z %n").unknown == ["Z", "n"]);
        let account = parse("%o");
        assert_eq!(job_row(&account, &job(), &weights(), ""), "ml\n");
    }
}
