//! sinfo's output (Slurm 22.05), for `sinfo` and `corral nodes`: which format
//! the options select, the nodes and partitions shown, and the printed text.
//!
//! The default formats are sinfo's own, in its `-O` form: the partition view
//! (`%9P %.5a %.10l %.6D %.6t %N`), `-l` (`%9P %.5a %.10l %.10s %.4r %.8h
//! %.10g %.6D %.11T %N`, after the date), `-N` (`%N %.6D %.9P %6t`), `-N -l`
//! (`%N %.6D %.9P %.11T %4c %.8z %.6m %.8d %.6w %.8f %20E`), `-s` (`%9P %.5a
//! %.10l %.16F %N`) and `-R` (`%20E %9u %19H %N`; `-l` adds `%6t`). As in
//! sinfo, the PARTITION column of these is as wide as the longest partition
//! name shown (`*` included, 9 at least) and `-N`'s NODELIST as the longest
//! node list (9 at least); `-s` wins over `-N`, `-N` over `-R`; `$SINFO_FORMAT`
//! replaces the partition view's format.
//!
//! Invoked as `sinfo`, the output is Slurm's. Invoked as `corral nodes`
//! (`corral_columns`), the default formats add corral's GPU columns:
//! `GPUS(total/free)` before NODELIST in the partition and `-s` views, and
//! `GPUS(total/free)` and `GPU_HEALTH` at the end of the `-N` views; `-O`
//! then also accepts their names (`gpus`, `gpuhealth`). `-o`, `-O` and `-R`
//! print the same either way.

use corral_state::Timestamp;
use corral_state::node::Node;
use corral_state::partition::Partition;
use corral_state::slurm::hostlist;

use super::datetime::ctime;
use super::format_spec::{Format, Piece, parse_letters, parse_names, render_line};
use super::node_list::{Grouping, lines};
use super::node_state::StateFilter;
use super::sinfo_fields::{self, Field, Line, UserIds};

/// Where the columns come from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Columns {
    /// The default format of the view the options select.
    #[default]
    Default,
    /// `-o`: field letters, `%[.][width]X`.
    Letters(String),
    /// `-O`: field names, `name[:[.]width[suffix]]`.
    Names(String),
}

/// What to print.
#[derive(Debug, Clone, Default)]
pub struct SinfoOptions {
    /// The columns.
    pub columns: Columns,
    /// `$SINFO_FORMAT`: the partition view's format, in `-o` form.
    pub env_format: Option<String>,
    /// `-N`: a line per node.
    pub node_oriented: bool,
    /// `-l`: the long default formats, after the date.
    pub long: bool,
    /// `-s`: node counts by state per partition.
    pub summarize: bool,
    /// `-R`: why nodes are down or drained (those nodes only, unless `states`).
    pub list_reasons: bool,
    /// `-h`: no header (nor date).
    pub noheader: bool,
    /// `-t`: only nodes in these states.
    pub states: Option<StateFilter>,
    /// `-p`: only these partitions (empty: all).
    pub partitions: Vec<String>,
    /// `-n`: only these nodes.
    pub nodes: Option<Vec<String>>,
    /// Invoked as `corral nodes`: corral's GPU columns in the default formats.
    pub corral_columns: bool,
    /// The name errors are printed under (`sinfo`).
    pub program: String,
    /// Now, for `-l`'s date line.
    pub now: Timestamp,
    /// Uids of the users named in reasons (`%U`).
    pub users: UserIds,
}

/// The output, and the complaints to print on stderr (unknown fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Printed {
    /// For stdout.
    pub text: String,
    /// For stderr, one line each.
    pub errors: Vec<String>,
}

const PARTITIONS: &str =
    "partition:9 ,available:.5 ,time:.10 ,nodes:.6 ,statecompact:.6 ,nodelist:0";
const PARTITIONS_LONG: &str = "partition:9 ,available:.5 ,time:.10 ,size:.10 ,root:.4 ,oversubscribe:.8 ,groups:.10 ,nodes:.6 ,statelong:.11 ,nodelist:0";
const NODES: &str = "nodelist:0 ,nodes:.6 ,partition:.9 ,statecompact:6";
const NODES_LONG: &str = "nodelist:0 ,nodes:.6 ,partition:.9 ,statelong:.11 ,cpus:4 ,socketcorethread:.8 ,memory:.6 ,disk:.8 ,weight:.6 ,features:.8 ,reason:20";
const SUMMARY: &str = "partition:9 ,available:.5 ,time:.10 ,nodeaiot:.16 ,nodelist:0";
const REASONS: &str = "reason:20 ,user:9 ,timestamp:19 ,nodelist:0";
const REASONS_LONG: &str = "reason:20 ,userlong:12 ,timestamp:19 ,statecompact:6 ,nodelist:0";

/// A column: a field and the width it is printed at (for the default
/// partition's `*`).
#[derive(Debug, Clone, Copy)]
struct Column {
    field: Field,
    width: Option<usize>,
}

/// The chosen format, and whether its partition and node list columns are
/// sized to the lines.
struct Layout {
    format: Format<Field>,
    errors: Vec<String>,
    fit_partition: bool,
    fit_nodes: bool,
}

/// What sinfo prints for `nodes` and `partitions` under `options`.
pub fn sinfo(nodes: &[Node], partitions: &[Partition], options: &SinfoOptions) -> Printed {
    let layout = layout(options);
    let fields: Vec<Field> = layout.format.fields().copied().collect();
    let states = match (&options.states, options.list_reasons) {
        (Some(states), _) => Some(states.clone()),
        (None, true) => Some(StateFilter::reasons()),
        (None, false) => None,
    };
    let shown_nodes: Vec<Node> = nodes
        .iter()
        .filter(|n| options.nodes.as_ref().is_none_or(|w| w.contains(&n.name)))
        .filter(|n| states.as_ref().is_none_or(|s| s.matches(n)))
        .cloned()
        .collect();
    let shown_partitions: Vec<Partition> = partitions
        .iter()
        .filter(|p| options.partitions.is_empty() || options.partitions.contains(&p.name))
        .cloned()
        .collect();
    let grouping = Grouping {
        per_node: options.node_oriented,
        any_partition: options.list_reasons,
    };
    let lines = lines(&shown_nodes, &shown_partitions, &fields, grouping);
    let fit = |on: bool, width: fn(&Line) -> usize| {
        on.then(|| lines.iter().map(width).fold(9, usize::max))
    };
    let partition_width = fit(layout.fit_partition, |l| {
        l.partition.name.chars().count() + usize::from(l.partition.is_default)
    });
    let node_width = fit(layout.fit_nodes, |l| {
        let names: Vec<&str> = l.nodes.iter().map(|n| n.name.as_str()).collect();
        hostlist::compress(&names).chars().count()
    });
    let format = columns(layout.format, partition_width, node_width);
    let mut text = String::new();
    if !options.noheader {
        if options.long {
            text.push_str(&ctime(options.now));
            text.push('\n');
        }
        text.push_str(&render_line(&format, |c| c.field.header().to_string()));
    }
    for line in &lines {
        text.push_str(&render_line(&format, |c| {
            c.field.value(line, c.width, &options.users)
        }));
    }
    Printed {
        text,
        errors: layout.errors,
    }
}

/// The format the options select, parsed.
fn layout(options: &SinfoOptions) -> Layout {
    let corral = options.corral_columns;
    let builtin = |base: &str, per_node: bool, fit_partition: bool| {
        let text = match (corral, per_node) {
            (false, _) => base.to_string(),
            (true, true) => format!("{base} ,gpus:.16 ,gpuhealth:0"),
            (true, false) => base.replace("nodelist:0", "gpus:.16 ,nodelist:0"),
        };
        Layout {
            fit_partition,
            fit_nodes: per_node,
            ..names(&text, sinfo_fields::corral_name, &options.program)
        }
    };
    let long = |short: &'static str, long: &'static str| if options.long { long } else { short };
    match &options.columns {
        Columns::Letters(text) => letters(text),
        Columns::Names(text) if text.eq_ignore_ascii_case("all") => letters("%all"),
        Columns::Names(text) if corral => names(text, sinfo_fields::corral_name, &options.program),
        Columns::Names(text) => names(text, sinfo_fields::name, &options.program),
        Columns::Default if options.summarize => builtin(SUMMARY, false, true),
        Columns::Default if options.node_oriented => builtin(long(NODES, NODES_LONG), true, true),
        Columns::Default if options.list_reasons => Layout {
            fit_partition: false,
            ..names(
                long(REASONS, REASONS_LONG),
                sinfo_fields::name,
                &options.program,
            )
        },
        Columns::Default => match &options.env_format {
            Some(text) => letters(text),
            None => builtin(long(PARTITIONS, PARTITIONS_LONG), false, true),
        },
    }
}

/// A `-o` format; `%all` is every field, `|`-separated.
fn letters(text: &str) -> Layout {
    let text = if text.eq_ignore_ascii_case("%all") {
        let mut all = String::new();
        for c in sinfo_fields::all_letters() {
            if !all.is_empty() {
                all.push('|');
            }
            all.push('%');
            all.push(c);
            if c.is_ascii_uppercase() {
                all.push(' ');
            }
        }
        all
    } else {
        text.to_string()
    };
    let format = parse_letters(&text, sinfo_fields::letter);
    let errors = format
        .unknown
        .iter()
        .map(|x| format!("Invalid node format specification: {x}"))
        .collect();
    Layout {
        format,
        errors,
        fit_partition: false,
        fit_nodes: false,
    }
}

/// A `-O` format. A name with `:` and no width (`cpus:`) is as wide as its
/// value, as `:0` is ([`parse_names`] reads both so).
fn names(text: &str, lookup: fn(&str) -> Option<Field>, program: &str) -> Layout {
    let format = parse_names(text, 20, lookup);
    let errors = format
        .unknown
        .iter()
        .map(|x| format!("{program}: error: Invalid job format specification: {x}"))
        .collect();
    Layout {
        format,
        errors,
        fit_partition: false,
        fit_nodes: false,
    }
}

/// The format with each column's width: `0` means as wide as the value, and
/// the fitted partition and node list widths replace those written.
fn columns(
    format: Format<Field>,
    partition_width: Option<usize>,
    node_width: Option<usize>,
) -> Format<Column> {
    let pieces = format
        .pieces
        .into_iter()
        .map(|piece| match piece {
            Piece::Text(text) => Piece::Text(text),
            Piece::Field(mut spec) => {
                let fitted = match spec.field {
                    Field::Partition | Field::PartitionName => partition_width,
                    Field::NodeList | Field::NodeHost => node_width,
                    _ => None,
                };
                spec.width = fitted.or(spec.width).filter(|w| *w > 0);
                let column = Column {
                    field: spec.field,
                    width: spec.width,
                };
                Piece::Field(super::format_spec::FieldSpec {
                    field: column,
                    width: spec.width,
                    right: spec.right,
                    suffix: spec.suffix,
                })
            }
        })
        .collect();
    Format {
        pieces,
        unknown: format.unknown,
    }
}

#[cfg(test)]
mod tests {
    use corral_state::node::StateReason;
    use corral_state::slurm::duration::TimeLimit;

    use super::*;
    use crate::format::node_state::parse_states;
    use crate::format::test_jobs::{nodes, now, partitions, scenario, t};

    /// The scenario's nodes, n3 drained by root at t(1500), and its partition
    /// `gpu` with a second one, `debug` (n[1-2], 1 hour, up to 1 day).
    fn cluster() -> (Vec<Node>, Vec<Partition>) {
        let state = scenario();
        let mut all = nodes(&state);
        all[2].drain = Some(StateReason {
            reason: "bad gpu, waiting for an RMA".into(),
            since: t(1500),
            by: "root".into(),
        });
        let mut parts = partitions(&state);
        parts.insert(
            0,
            Partition {
                name: "debug".into(),
                hostlist: "n[1-2]".into(),
                nodes: ["n1".to_string(), "n2".to_string()].into(),
                max_time: TimeLimit::Seconds(3600),
                is_default: false,
                ..parts[0].clone()
            },
        );
        (all, parts)
    }

    fn print(options: SinfoOptions) -> String {
        let (all, parts) = cluster();
        let printed = sinfo(&all, &parts, &options);
        assert!(printed.errors.is_empty(), "{:?}", printed.errors);
        printed.text
    }

    fn options() -> SinfoOptions {
        SinfoOptions {
            program: "sinfo".into(),
            now: now(),
            ..SinfoOptions::default()
        }
    }

    #[test]
    fn the_partition_view() {
        let expected = "\
PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST
debug        up    1:00:00      1  alloc n1
debug        up    1:00:00      1   down n2
gpu*         up 1-00:00:00      1  drain n3
gpu*         up 1-00:00:00      2  alloc n[1,4]
gpu*         up 1-00:00:00      1   down n2
";
        assert_eq!(print(options()), expected);
    }

    #[test]
    fn corral_adds_its_gpu_column() {
        let expected = "\
PARTITION AVAIL  TIMELIMIT  NODES  STATE GPUS(total/free) NODELIST
debug        up    1:00:00      1  alloc              8/0 n1
debug        up    1:00:00      1   down              8/0 n2
gpu*         up 1-00:00:00      1  drain              8/0 n3
gpu*         up 1-00:00:00      2  alloc             16/0 n[1,4]
gpu*         up 1-00:00:00      1   down              8/0 n2
";
        let out = print(SinfoOptions {
            corral_columns: true,
            ..options()
        });
        assert_eq!(out, expected);
    }

    #[test]
    fn the_long_partition_view_starts_with_the_date() {
        let expected = "\
Sat Nov 21 09:16:40 2026
PARTITION AVAIL  TIMELIMIT   JOB_SIZE ROOT OVERSUBS     GROUPS  NODES       STATE NODELIST
debug        up    1:00:00 1-infinite   no       NO        all      1   allocated n1
debug        up    1:00:00 1-infinite   no       NO        all      1        down n2
gpu*         up 1-00:00:00 1-infinite   no       NO        all      1     drained n3
gpu*         up 1-00:00:00 1-infinite   no       NO        all      2   allocated n[1,4]
gpu*         up 1-00:00:00 1-infinite   no       NO        all      1        down n2
";
        let out = print(SinfoOptions {
            long: true,
            ..options()
        });
        assert_eq!(out, expected);
    }

    #[test]
    fn the_node_views() {
        let expected = "\
NODELIST   NODES PARTITION STATE 
n1             1     debug alloc 
n1             1      gpu* alloc 
n2             1     debug down  
n2             1      gpu* down  
n3             1      gpu* drain 
n4             1      gpu* alloc 
";
        let out = print(SinfoOptions {
            node_oriented: true,
            ..options()
        });
        assert_eq!(out, expected);
        let expected = "\
NODELIST   NODES PARTITION       STATE CPUS    S:C:T MEMORY TMP_DISK WEIGHT AVAIL_FE REASON              
n3             1      gpu*     drained 64     1:64:1 524288        0      1       ib bad gpu, waiting for
n4             1      gpu*   allocated 64     1:64:1 524288        0      1       ib none                
";
        let out = print(SinfoOptions {
            node_oriented: true,
            long: true,
            noheader: false,
            nodes: Some(vec!["n3".into(), "n4".into()]),
            ..options()
        });
        assert_eq!(out.split_once('\n').map(|(_, rest)| rest), Some(expected));
    }

    #[test]
    fn corral_node_view_adds_gpus_and_their_health() {
        let expected = "\
NODELIST   NODES PARTITION STATE  GPUS(total/free) GPU_HEALTH
n3             1      gpu* drain               8/0 5:xid79
";
        let out = print(SinfoOptions {
            node_oriented: true,
            corral_columns: true,
            nodes: Some(vec!["n3".into()]),
            ..options()
        });
        assert_eq!(out, expected);
    }

    #[test]
    fn the_summary() {
        let expected = "\
PARTITION AVAIL  TIMELIMIT   NODES(A/I/O/T) NODELIST
debug        up    1:00:00          1/0/1/2 n[1-2]
gpu*         up 1-00:00:00          2/0/2/4 n[1-4]
";
        let out = print(SinfoOptions {
            summarize: true,
            ..options()
        });
        assert_eq!(out, expected);
    }

    #[test]
    fn reasons_list_down_and_drained_nodes_once() {
        let expected = "\
REASON               USER      TIMESTAMP           NODELIST
agent lost           root      2026-11-21T08:15:00 n2
bad gpu, waiting for root      2026-11-21T08:25:00 n3
";
        let out = print(SinfoOptions {
            list_reasons: true,
            ..options()
        });
        assert_eq!(out, expected);
        let mut users = UserIds::new();
        users.insert("root".into(), 0);
        let expected = "\
agent lost           root(0)      2026-11-21T08:15:00 down   n2
";
        let out = print(SinfoOptions {
            list_reasons: true,
            long: true,
            noheader: true,
            users,
            states: Some(parse_states("down").expect("valid")),
            ..options()
        });
        assert_eq!(out, expected);
    }

    #[test]
    fn letters_with_widths_text_and_filters() {
        let expected = "\
PARTITION AVAIL TIMELIMIT NODES STATE NODELIST
gpu* up 1-00:00:00 2 alloc n[1,4]
gpu* up 1-00:00:00 1 down n2
";
        let out = print(SinfoOptions {
            columns: Columns::Letters("%P %a %l %D %t %N".into()),
            partitions: vec!["gpu".into()],
            states: Some(parse_states("alloc,down").expect("valid")),
            ..options()
        });
        assert_eq!(out, expected);
        let expected = "\
x NODELIST   |GRES      |  CPUS(A/I/O/T)|MEMORY|PAR
x n[1-4]     |gpu:h100:8|  2/126/128/256|524288|gp*
";
        let out = print(SinfoOptions {
            columns: Columns::Letters("x %10N |%10G|%.15C|%m|%3P".into()),
            partitions: vec!["gpu".into()],
            ..options()
        });
        assert_eq!(out, expected);
    }

    #[test]
    fn names_with_widths_and_suffixes() {
        let expected = "\
PARTITION NODES STATE     NODELIST
debug         1 allocated n1
debug         1 down      n2
gpu*          1 drained   n3
gpu*          2 allocated n[1,4]
gpu*          1 down      n2
";
        let out = print(SinfoOptions {
            columns: Columns::Names("partition:10,nodes:.5 ,statelong:10,nodelist:".into()),
            ..options()
        });
        assert_eq!(out, expected);
    }

    #[test]
    fn unknown_letters_and_names_are_reported_and_the_rest_printed() {
        let (all, parts) = cluster();
        let printed = sinfo(
            &all,
            &parts,
            &SinfoOptions {
                columns: Columns::Letters("%D %Q|%-5t".into()),
                partitions: vec!["nosuch".into()],
                ..options()
            },
        );
        assert_eq!(printed.text, "NODES %Q|%-5t\n");
        assert_eq!(
            printed.errors,
            [
                "Invalid node format specification: Q",
                "Invalid node format specification: -"
            ]
        );
        let printed = sinfo(
            &all,
            &parts,
            &SinfoOptions {
                columns: Columns::Names("nodes:3,gpus,bogus".into()),
                noheader: true,
                nodes: Some(vec!["n3".into()]),
                ..options()
            },
        );
        assert_eq!(printed.text, "1  \n");
        assert_eq!(
            printed.errors,
            [
                "sinfo: error: Invalid job format specification: gpus",
                "sinfo: error: Invalid job format specification: bogus"
            ]
        );
    }

    #[test]
    fn every_letter() {
        let out = print(SinfoOptions {
            columns: Columns::Letters("%all".into()),
            nodes: Some(vec!["n3".into()]),
            partitions: vec!["gpu".into()],
            ..options()
        });
        let expected = "\
AVAIL|ACTIVE_FEATURES|CPUS|TMP_DISK|FREE_MEM|AVAIL_FEATURES|GROUPS|OVERSUBSCRIBE|TIMELIMIT|MEMORY|HOSTNAMES|NODE_ADDR|PRIO_TIER|ROOT|JOB_SIZE|STATE|USER|VERSION|WEIGHT|S:C:T|NODES(A/I) |MAX_CPUS_PER_NODE |CPUS(A/I/O/T) |NODES |REASON |NODES(A/I/O/T) |GRES |TIMESTAMP |PRIO_JOB_FACTOR |DEFAULTTIME |PREEMPT_MODE |NODELIST |CPU_LOAD |PARTITION |PARTITION |ALLOCNODES |STATE |USER |CLUSTER |SOCKETS |CORES |THREADS 
up|ib|64|0|N/A|ib|all|NO|1-00:00:00|524288|n3|n3|1|no|1-infinite|drain|root|test|1|1:64:1|0/0 |UNLIMITED |0/0/64/64 |1 |bad gpu, waiting for an RMA |0/0/1/1 |gpu:h100:8 |2026-11-21T08:25:00 |1 |1:00:00 |REQUEUE |n3 |N/A |gpu* |gpu |all |drained |root |N/A |1 |64 |1 
";
        assert_eq!(out, expected);
    }

    #[test]
    fn the_environment_format_replaces_the_partition_view_only() {
        let out = print(SinfoOptions {
            env_format: Some("%D".into()),
            ..options()
        });
        assert_eq!(out, "NODES\n4\n");
    }
}
