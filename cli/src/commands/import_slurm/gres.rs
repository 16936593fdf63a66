//! GPUs: a NodeName line's `Gres=` (`gpu:8`, `gpu:a100:8`, MIG profiles such
//! as `gpu:a100_3g.20gb:2`) and gres.conf's lines (Name, Type, Count, File per
//! NodeName; AutoDetect) into each node's GPU count and type. corral.toml
//! gives a node one GPU type, which must be the type its agent reports.

use std::collections::HashSet;

use corral_state::slurm::hostlist;

use super::location::ImportError;
use super::mig_gres;
use super::notes::Notes;
use super::parse::Pair;
use super::reasons;
use super::values::{is_valid_name, list, suffixed_count};

/// The type written for GPUs that Slurm gives no type.
pub const PLACEHOLDER_GPU_TYPE: &str = "gpu";

/// One item of a `Gres=` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GresItem {
    /// The resource (`gpu`, `mps`, `bandwidth`...).
    pub name: String,
    /// Its type, where written.
    pub gpu_type: Option<String>,
    /// How many.
    pub count: u64,
    /// Written with `no_consume`.
    pub no_consume: bool,
}

/// Parses `Gres=name[:type][:no_consume]:count[,...]`; a count may have a K,
/// M or G suffix and may be left out (one).
pub fn parse_node_gres(pair: &Pair) -> Result<Vec<GresItem>, ImportError> {
    let mut items = Vec::new();
    for entry in list(&pair.value) {
        let mut fields: Vec<&str> = entry.split(':').collect();
        let bad = |why: &str| {
            ImportError::at(
                &pair.at,
                format!(
                    "Gres={}: '{entry}' {why}; write name[:type]:count, e.g. gpu:a100:8",
                    pair.value
                ),
            )
        };
        let name = fields.remove(0).to_string();
        if name.is_empty() {
            return Err(bad("names no resource"));
        }
        let count = match fields.last().map(|last| suffixed_count(last)) {
            Some(Some(count)) => {
                fields.pop();
                count
            }
            _ => 1,
        };
        let no_consume = match fields
            .iter()
            .position(|f| f.eq_ignore_ascii_case("no_consume"))
        {
            Some(i) => {
                fields.remove(i);
                true
            }
            None => false,
        };
        let gpu_type = match fields.as_slice() {
            [] => None,
            [t] if !t.is_empty() => Some(t.to_string()),
            _ => return Err(bad("has an empty or an extra ':' field")),
        };
        items.push(GresItem {
            name,
            gpu_type,
            count,
            no_consume,
        });
    }
    Ok(items)
}

/// One gres.conf line that describes GPUs.
#[derive(Debug, Clone)]
struct Entry {
    /// Its first pair, named in notes.
    head: Pair,
    /// The nodes it is for; `None` for every node.
    nodes: Option<HashSet<String>>,
    /// `Type=`.
    gpu_type: Option<Pair>,
    /// Count=, else the number of File= names, else one.
    count: u64,
}

/// gres.conf's GPU lines.
#[derive(Debug, Clone, Default)]
pub struct GresConf {
    entries: Vec<Entry>,
}

impl GresConf {
    /// Reads gres.conf's lines, noting what is not carried.
    pub fn read(lines: &[Vec<Pair>], notes: &mut Notes) -> Result<Self, ImportError> {
        let mut entries = Vec::new();
        for line in lines {
            let Some(head) = line.first() else { continue };
            let get = |key: &str| line.iter().rev().find(|p| p.is(key));
            let nodes = match get("NodeName") {
                Some(pair) => Some(
                    hostlist::expand(&pair.value)
                        .map_err(|e| {
                            ImportError::at(&pair.at, format!("NodeName={}: {e}", pair.value))
                        })?
                        .into_iter()
                        .collect::<HashSet<String>>(),
                ),
                None => None,
            };
            for pair in line {
                let key = pair.key.to_ascii_lowercase();
                match key.as_str() {
                    "nodename" | "name" | "type" | "count" => {}
                    "autodetect" => autodetect(pair, notes),
                    _ => match reasons::gres_field(&key) {
                        Some(reason) => notes.not_carried("", pair, reason),
                        None => notes.not_carried(
                            "",
                            pair,
                            "not a gres.conf key of Slurm 22.05; nothing to carry",
                        ),
                    },
                }
            }
            let Some(name) = get("Name") else { continue };
            if !name.value.eq_ignore_ascii_case("gpu") {
                notes.not_carried(
                    "",
                    name,
                    "corral schedules GPUs only; this resource cannot be requested",
                );
                continue;
            }
            let count = match (get("Count"), get("File").or_else(|| get("MultipleFiles"))) {
                (Some(pair), _) => suffixed_count(pair.value.trim()).ok_or_else(|| {
                    ImportError::at(
                        &pair.at,
                        format!("Count={} is not a count; write e.g. Count=8", pair.value),
                    )
                })?,
                (None, Some(files)) if files.is("File") => hostlist::expand(&files.value)
                    .map_err(|e| ImportError::at(&files.at, format!("File={}: {e}", files.value)))?
                    .len() as u64,
                _ => 1,
            };
            entries.push(Entry {
                head: head.clone(),
                nodes,
                gpu_type: get("Type").cloned(),
                count,
            });
        }
        Ok(GresConf { entries })
    }

    /// The indexes of the lines that describe `node`'s GPUs.
    pub fn matching(&self, node: &str) -> Vec<usize> {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.nodes.as_ref().is_none_or(|n| n.contains(node)))
            .map(|(i, _)| i)
            .collect()
    }
}

fn autodetect(pair: &Pair, notes: &mut Notes) {
    let reason = match pair.value.trim().to_ascii_lowercase().as_str() {
        "nvml" => "nothing to carry: corral-agent always finds its GPUs through NVML",
        "off" => {
            "corral-agent always finds its GPUs through NVML; it cannot be turned off, and File= lines are not needed"
        }
        _ => "corral-agent finds NVIDIA GPUs through NVML only",
    };
    notes.not_carried("", pair, reason);
}

/// A node's GPUs as corral.toml gives them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeGpus {
    /// How many.
    pub count: u32,
    /// Their type; `None` without GPUs.
    pub gpu_type: Option<String>,
    /// Those split into MIG instances, as corral.toml's `mig` entries.
    pub mig: Vec<String>,
}

/// What a node line's `Gres=` and its gres.conf lines give a node.
pub struct GpuSources<'a> {
    /// The line's `Gres=` pair, if any.
    pub gres: Option<&'a Pair>,
    /// Its parsed items.
    pub items: &'a [GresItem],
    /// gres.conf.
    pub gres_conf: &'a GresConf,
    /// The indexes of gres.conf lines for this node.
    pub matching: &'a [usize],
    /// The node's features (for a hint when the type is missing).
    pub features: &'a [String],
}

/// Decides a node's GPUs, noting what does not carry.
pub fn node_gpus(sources: &GpuSources<'_>, notes: &mut Notes) -> Result<NodeGpus, ImportError> {
    let entries: Vec<&Entry> = sources
        .matching
        .iter()
        .filter_map(|i| sources.gres_conf.entries.get(*i))
        .collect();
    let Some(gres) = sources.gres else {
        for entry in &entries {
            notes.not_carried(
                "",
                &entry.head,
                "describes GPUs of nodes whose NodeName line has no Gres=gpu, so Slurm schedules none of them, and neither does corral",
            );
        }
        return Ok(NodeGpus {
            count: 0,
            gpu_type: None,
            mig: Vec::new(),
        });
    };
    let others: Vec<String> = sources
        .items
        .iter()
        .filter(|i| !i.name.eq_ignore_ascii_case("gpu"))
        .map(|i| i.name.clone())
        .collect();
    if !others.is_empty() {
        notes.not_carried(
            "NodeName",
            gres,
            format!(
                "corral schedules GPUs only; {} cannot be requested",
                others.join(", ")
            ),
        );
    }
    let gpus: Vec<&GresItem> = sources
        .items
        .iter()
        .filter(|i| i.name.eq_ignore_ascii_case("gpu"))
        .collect();
    let Some(first) = gpus.first() else {
        return Ok(NodeGpus {
            count: 0,
            gpu_type: None,
            mig: Vec::new(),
        });
    };
    if gpus.iter().any(|g| g.no_consume) {
        notes.not_carried(
            "NodeName",
            gres,
            "no_consume: corral gives each GPU to one job at a time",
        );
    }
    match mig_gres::plan(&gpus) {
        Some(Ok(plan)) => {
            let types: Vec<&str> = gpus.iter().filter_map(|g| g.gpu_type.as_deref()).collect();
            notes.changed(
                "NodeName",
                gres,
                format!(
                    "{} are counted in MIG instances: carried as {} {} GPUs with mig = [\"{}\"], assuming the whole GPUs come first and each split GPU holds as many instances of one profile as its 7 compute slices allow; compare with `corral-agent gpus` on a node, or the nodes register drained (hardware differs)",
                    types.join(", "),
                    plan.gpus,
                    plan.model,
                    plan.mig.join("\", \"")
                ),
            );
            return Ok(NodeGpus {
                count: plan.gpus,
                gpu_type: Some(plan.model),
                mig: plan.mig,
            });
        }
        Some(Err(why)) => notes.changed(
            "NodeName",
            gres,
            format!("its MIG instances cannot be laid out on GPUs: {why}"),
        ),
        None => {}
    }
    if gpus.len() > 1 {
        notes.not_carried(
            "NodeName",
            gres,
            format!(
                "corral.toml gives a [[nodes]] line one GPU type: only the first, {}:{}, is carried, and the node's other GPUs are left out",
                first.gpu_type.as_deref().unwrap_or("untyped"),
                first.count
            ),
        );
    }
    let count = u32::try_from(first.count).map_err(|_| {
        ImportError::at(
            &gres.at,
            format!("Gres={}: {} GPUs is too many", gres.value, first.count),
        )
    })?;
    let gpu_type = match &first.gpu_type {
        Some(t) => t.clone(),
        None => type_from_gres_conf(sources, &entries, gres, notes),
    };
    if !is_valid_name(&gpu_type) {
        return Err(ImportError::at(
            &gres.at,
            format!(
                "GPU type '{gpu_type}' is not a name corral accepts; use letters, digits, '-', '_' or '.'"
            ),
        ));
    }
    if is_mig_profile(&gpu_type) {
        notes.changed(
            "NodeName",
            gres,
            format!(
                "{gpu_type} is a MIG profile: it is carried as the type of {count} whole GPUs, which the nodes' agents (which report each MIG instance as a GPU of its GPU's model and profile, e.g. a100_1g.10gb) do not have, so these nodes register drained (hardware differs) until gpus, gpu_type and mig describe the GPUs and their instances"
            ),
        );
    }
    let typed_count: u64 = entries
        .iter()
        .filter(|e| {
            e.gpu_type
                .as_ref()
                .is_none_or(|t| t.value.eq_ignore_ascii_case(&gpu_type))
        })
        .map(|e| e.count)
        .sum();
    if !entries.is_empty() && typed_count != u64::from(count) {
        notes.changed(
            "NodeName",
            gres,
            format!(
                "gres.conf gives these nodes {typed_count} GPUs of this type and slurm.conf {count}; slurm.conf's count is carried"
            ),
        );
    }
    Ok(NodeGpus {
        count,
        gpu_type: Some(gpu_type),
        mig: Vec::new(),
    })
}

/// The type of untyped GPUs: gres.conf's one Type for the node, or the
/// placeholder.
fn type_from_gres_conf(
    sources: &GpuSources<'_>,
    entries: &[&Entry],
    gres: &Pair,
    notes: &mut Notes,
) -> String {
    let mut types: Vec<&Pair> = Vec::new();
    for pair in entries.iter().filter_map(|e| e.gpu_type.as_ref()) {
        if !types.iter().any(|t| t.value == pair.value) {
            types.push(pair);
        }
    }
    match types.as_slice() {
        [one] => one.value.clone(),
        [first, ..] => {
            notes.not_carried(
                "",
                first,
                format!(
                    "gres.conf gives these nodes GPUs of several types ({}), and corral.toml gives a [[nodes]] line one; {} is carried for all of them",
                    types.iter().map(|t| t.value.as_str()).collect::<Vec<_>>().join(", "),
                    first.value
                ),
            );
            first.value.clone()
        }
        [] => {
            let hint = sources
                .features
                .iter()
                .find(|f| looks_like_a_gpu_model(f))
                .map(|f| format!("; the nodes' Features list {f}, which may be it"))
                .unwrap_or_default();
            notes.changed(
                "NodeName",
                gres,
                format!(
                    "these GPUs have no type in slurm.conf or gres.conf, and corral needs one: gpu_type is written as \"{PLACEHOLDER_GPU_TYPE}\". Replace it with the type the nodes' agents report (`corral-agent gpus` prints it, e.g. a100 for an NVIDIA A100), or the nodes register drained (hardware differs){hint}"
                ),
            );
            PLACEHOLDER_GPU_TYPE.to_string()
        }
    }
}

/// True for MIG profile types: `3g.20gb`, `a100_1g.5gb`.
pub fn is_mig_profile(gpu_type: &str) -> bool {
    gpu_type.to_ascii_lowercase().split('_').any(|part| {
        let Some((slices, memory)) = part.split_once("g.") else {
            return false;
        };
        let Some(gigabytes) = memory.strip_suffix("gb") else {
            return false;
        };
        !slices.is_empty()
            && slices.chars().all(|c| c.is_ascii_digit())
            && !gigabytes.is_empty()
            && gigabytes.chars().all(|c| c.is_ascii_digit())
    })
}

/// A feature such as `a100`, `h100`, `v100`, `l40s`: one to three letters,
/// then a digit, as corral-agent's GPU types are.
fn looks_like_a_gpu_model(feature: &str) -> bool {
    let letters = feature
        .chars()
        .take_while(char::is_ascii_alphabetic)
        .count();
    let rest = &feature[letters..];
    (1..=3).contains(&letters)
        && rest.starts_with(|c: char| c.is_ascii_digit())
        && rest.chars().all(|c| c.is_ascii_alphanumeric())
        && feature.chars().all(|c| !c.is_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::location::Location;
    use super::super::notes::Kind;
    use super::*;

    fn pair(key: &str, value: &str, line: usize) -> Pair {
        Pair {
            key: key.into(),
            value: value.into(),
            at: Location::new(&Arc::from("slurm.conf"), line),
        }
    }

    fn item(name: &str, t: Option<&str>, count: u64) -> GresItem {
        GresItem {
            name: name.into(),
            gpu_type: t.map(str::to_string),
            count,
            no_consume: false,
        }
    }

    #[test]
    fn gres_lists_as_the_man_page_writes_them() {
        let items = parse_node_gres(&pair(
            "Gres",
            "gpu:tesla:1,gpu:kepler:1,bandwidth:lustre:no_consume:4G",
            1,
        ))
        .unwrap();
        assert_eq!(items[0], item("gpu", Some("tesla"), 1));
        assert_eq!(items[1], item("gpu", Some("kepler"), 1));
        assert_eq!(items[2].count, 4 << 30);
        assert!(items[2].no_consume);
        assert_eq!(
            parse_node_gres(&pair("Gres", "gpu:8", 1)).unwrap(),
            [item("gpu", None, 8)]
        );
        assert_eq!(
            parse_node_gres(&pair("Gres", "gpu:a100_3g.20gb:2", 1)).unwrap(),
            [item("gpu", Some("a100_3g.20gb"), 2)]
        );
        assert_eq!(
            parse_node_gres(&pair("Gres", "gpu", 1)).unwrap(),
            [item("gpu", None, 1)]
        );
        assert!(parse_node_gres(&pair("Gres", "gpu:a:b:c:2", 1)).is_err());
    }

    fn conf(text: &str) -> (GresConf, Notes) {
        let lines: Vec<Vec<Pair>> = super::super::parse::parse(&Arc::from("gres.conf"), text)
            .unwrap()
            .into_iter()
            .filter_map(|i| match i {
                super::super::parse::Item::Pairs(p) => Some(p),
                super::super::parse::Item::Include { .. } => None,
            })
            .collect();
        let mut notes = Notes::default();
        (GresConf::read(&lines, &mut notes).unwrap(), notes)
    }

    fn decide(gres: &str, conf: &GresConf, node: &str, features: &[String]) -> (NodeGpus, Notes) {
        let gres = pair("Gres", gres, 9);
        let items = parse_node_gres(&gres).unwrap();
        let matching = conf.matching(node);
        let mut notes = Notes::default();
        let gpus = node_gpus(
            &GpuSources {
                gres: Some(&gres),
                items: &items,
                gres_conf: conf,
                matching: &matching,
                features,
            },
            &mut notes,
        )
        .unwrap();
        (gpus, notes)
    }

    #[test]
    fn typed_gpus_carry_their_type() {
        let (gpus, notes) = decide("gpu:a100:8", &GresConf::default(), "n1", &[]);
        assert_eq!(
            gpus,
            NodeGpus {
                count: 8,
                gpu_type: Some("a100".into()),
                mig: Vec::new(),
            }
        );
        assert!(notes.all().is_empty());
    }

    #[test]
    fn untyped_gpus_take_gres_confs_type_per_node() {
        let (conf, notes) = conf(
            "AutoDetect=nvml\nNodeName=tux[0-7] Name=gpu Type=a100 File=/dev/nvidia[0-3]\nNodeName=tux[8-15] Name=gpu Type=v100 File=/dev/nvidia[0-3] Cores=0-15\n",
        );
        // AutoDetect, File and Cores.
        assert_eq!(notes.count(Kind::NotCarried), 3);
        let (gpus, n) = decide("gpu:4", &conf, "tux3", &[]);
        assert_eq!(gpus.gpu_type.as_deref(), Some("a100"));
        assert!(n.all().is_empty(), "{:?}", n.all());
        let (gpus, _) = decide("gpu:4", &conf, "tux9", &[]);
        assert_eq!(gpus.gpu_type.as_deref(), Some("v100"));
    }

    #[test]
    fn untyped_gpus_without_a_type_get_the_placeholder_and_a_hint() {
        let (conf, _) = conf("AutoDetect=off\nNodeName=n[1-4] Name=gpu File=/dev/fakegpu[0-7]\n");
        let features = vec!["gpu".to_string(), "a100".to_string(), "ib".to_string()];
        let (gpus, notes) = decide("gpu:8", &conf, "n2", &features);
        assert_eq!(gpus.gpu_type.as_deref(), Some(PLACEHOLDER_GPU_TYPE));
        let text = notes.render(Kind::Changed, 1000).join("\n");
        assert!(text.contains("Features list a100"), "{text}");
    }

    #[test]
    fn count_mismatches_mig_and_mixed_types_are_noted() {
        let (conf, _) = conf("NodeName=d1 Name=gpu Type=a100 File=/dev/nvidia[0-3]\n");
        let (gpus, notes) = decide("gpu:a100:8", &conf, "d1", &[]);
        assert_eq!(gpus.count, 8);
        assert_eq!(notes.count(Kind::Changed), 1);

        let (gpus, notes) = decide("gpu:a100_3g.20gb:2", &GresConf::default(), "d1", &[]);
        assert_eq!(gpus.gpu_type.as_deref(), Some("a100"));
        assert_eq!((gpus.count, gpus.mig), (1, vec!["0:3g.20gb*2".to_string()]));
        assert!(notes.render(Kind::Changed, 1000)[0].contains("counted in MIG instances"));

        let (gpus, notes) = decide(
            "gpu:a100_3g.20gb:2,gpu:a100_1g.5gb:1,mps:100",
            &GresConf::default(),
            "d1",
            &[],
        );
        assert_eq!(gpus.count, 2);
        assert_eq!(notes.count(Kind::NotCarried), 2);
        let changed = notes.render(Kind::Changed, 1000).join("\n");
        assert!(
            changed.contains("1 1g.5gb instances do not fill whole GPUs of 7"),
            "{changed}"
        );
        assert!(
            changed.contains("a100_3g.20gb is a MIG profile"),
            "{changed}"
        );
    }

    #[test]
    fn mig_profiles_are_recognised() {
        assert!(is_mig_profile("a100_3g.20gb"));
        assert!(is_mig_profile("1g.5gb"));
        assert!(is_mig_profile("nvidia_a100_7g.80gb"));
        assert!(!is_mig_profile("a100"));
        assert!(!is_mig_profile("rtx-a6000"));
    }
}
