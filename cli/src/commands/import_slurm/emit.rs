//! Writes the imported configuration as corral.toml text: a header with the
//! sources, the placeholders to replace and the notes (what was not carried
//! over, what was carried with a difference), then the tables, each key with
//! the Slurm line it came from as a comment. Values are written by serde from
//! corrald's own schema types, so the names and formats are corrald's.

use std::fmt::Write as _;

use corral_controller::config::ConfigFile;
use serde::Serialize;

use super::location::ImportError;
use super::notes::{Kind, Notes, wrap};
use super::origins::Origins;

/// The width notes are wrapped to, `# ` included.
const WIDTH: usize = 100;

/// What to write.
pub struct Document<'a> {
    /// The configuration.
    pub config: &'a ConfigFile,
    /// Where its keys came from.
    pub origins: &'a Origins,
    /// The notes.
    pub notes: &'a Notes,
    /// The files read: (what, path).
    pub sources: &'a [(&'static str, String)],
}

/// The placeholder replica's explanation.
const PLACEHOLDER: &str = "PLACEHOLDER: corral.toml needs at least one [[replicas]] entry (and `id` when it lists several), and slurm.conf cannot say where corral's controllers run (SlurmctldHost names slurmctld's hosts). List the 3 (or 5) corrald replicas here, each with its id, the host:port where the other replicas reach it (peer) and the host:port where clients reach it (api), and give each replica's copy of this file its own `id`. TLS files default to tls/ca.crt and tls/replica-<id>.crt/.key beside this file (`corral certs` makes them).";

/// The corral.toml text.
pub fn emit(doc: &Document<'_>) -> Result<String, ImportError> {
    let mut out = String::new();
    header(doc, &mut out);
    let config = doc.config;
    line(
        &mut out,
        &format!("cluster_name = {}", quoted(&config.cluster_name)),
        doc.origins.get("cluster_name"),
    );
    table(&mut out, "leader", &config.leader, doc.origins)?;
    table(&mut out, "priority", &config.priority, doc.origins)?;
    table(&mut out, "scheduling", &config.scheduling, doc.origins)?;
    table(&mut out, "limits", &config.limits, doc.origins)?;
    if !config.topology.is_empty() {
        out.push_str("\n[topology]\n");
        if !config.topology.block_sizes.is_empty() {
            let sizes: Vec<String> = config
                .topology
                .block_sizes
                .iter()
                .map(u32::to_string)
                .collect();
            line(
                &mut out,
                &format!("block_sizes = [{}]", sizes.join(", ")),
                doc.origins.get("topology.block_sizes"),
            );
        }
        array(
            &mut out,
            "topology.switches",
            &config.topology.switches,
            doc.origins,
        )?;
        array(
            &mut out,
            "topology.blocks",
            &config.topology.blocks,
            doc.origins,
        )?;
    }
    out.push('\n');
    for text in wrap(PLACEHOLDER, WIDTH - 2, "", "") {
        let _ = writeln!(out, "# {text}");
    }
    array_tables(&mut out, "replicas", &config.replicas, doc.origins)?;
    array(&mut out, "nodes", &config.nodes, doc.origins)?;
    array(&mut out, "partitions", &config.partitions, doc.origins)?;
    array(&mut out, "accounts", &config.accounts, doc.origins)?;
    Ok(out)
}

/// The comment block at the top.
fn header(doc: &Document<'_>, out: &mut String) {
    out.push_str("# corral.toml, imported from Slurm by `corral import-slurm`.\n");
    for (what, path) in doc.sources {
        let _ = writeln!(out, "#   {what}: {path}");
    }
    out.push_str(
        "#\n\
         # Read it before use. A comment beside a key names the Slurm line it came\n\
         # from; keys without one keep corral's defaults. Replace the PLACEHOLDER\n\
         # [[replicas]] below. docs/slurm-commands.md (\"corral import-slurm\") lists\n\
         # what maps to what.\n",
    );
    for (kind, title) in [
        (Kind::NotCarried, "Not carried over"),
        (
            Kind::Changed,
            "Carried with a difference, or made up: check these",
        ),
    ] {
        let count = doc.notes.count(kind);
        out.push_str("#\n");
        if count == 0 {
            let _ = writeln!(out, "# {title}: none.");
            continue;
        }
        let _ = writeln!(out, "# {title} ({count}):");
        for text in doc.notes.render(kind, WIDTH - 2) {
            let _ = writeln!(out, "# {text}");
        }
    }
    out.push('\n');
}

/// `text`, then its origin as a comment.
fn line(out: &mut String, text: &str, origin: Option<&str>) {
    match origin {
        Some(origin) => {
            let _ = writeln!(out, "{text}  # {origin}");
        }
        None => {
            let _ = writeln!(out, "{text}");
        }
    }
}

/// `[name]` and the section's keys, each with its origin (`name.key`).
fn table<T: Serialize>(
    out: &mut String,
    name: &str,
    section: &T,
    origins: &Origins,
) -> Result<(), ImportError> {
    let _ = writeln!(out, "\n[{name}]");
    body(out, name, section, origins)
}

/// Each item as `[[name]]`, with the item's origin (`name[i]`) above it.
fn array<T: Serialize>(
    out: &mut String,
    name: &str,
    items: &[T],
    origins: &Origins,
) -> Result<(), ImportError> {
    if items.is_empty() {
        return Ok(());
    }
    array_tables(out, name, items, origins)
}

fn array_tables<T: Serialize>(
    out: &mut String,
    name: &str,
    items: &[T],
    origins: &Origins,
) -> Result<(), ImportError> {
    for (i, item) in items.iter().enumerate() {
        let path = format!("{name}[{i}]");
        out.push('\n');
        if let Some(origin) = origins.get(&path) {
            let _ = writeln!(out, "# {origin}");
        }
        let _ = writeln!(out, "[[{name}]]");
        body(out, &path, item, origins)?;
    }
    Ok(())
}

/// A struct's `key = value` lines, each with the origin `prefix.key`.
fn body<T: Serialize>(
    out: &mut String,
    prefix: &str,
    value: &T,
    origins: &Origins,
) -> Result<(), ImportError> {
    let text = toml::to_string(value).map_err(|e| {
        ImportError::general(format!(
            "cannot write [{prefix}] as TOML: {e}; this is a bug in import-slurm"
        ))
    })?;
    for text in text.lines().filter(|l| !l.trim().is_empty()) {
        let key = text.split(" = ").next().unwrap_or_default().trim();
        line(out, text, origins.get(&format!("{prefix}.{key}")));
    }
    Ok(())
}

/// A TOML string.
fn quoted(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use corral_controller::config::{NodeSection, ReplicaSection};

    use super::*;

    #[test]
    fn keys_carry_their_origin_and_the_file_parses() {
        let config = ConfigFile {
            cluster_name: "c\"x".into(),
            replicas: vec![ReplicaSection {
                id: 1,
                peer: "a.invalid:1".into(),
                api: "a.invalid:2".into(),
            }],
            nodes: vec![NodeSection {
                names: "n[1-2]".into(),
                cpus: 4,
                memory: "1G".into(),
                gpus: 2,
                gpu_type: Some("a100".into()),
                mig: Vec::new(),
                features: vec!["ib".into(), "x".into()],
            }],
            ..ConfigFile::default()
        };
        let mut origins = Origins::default();
        origins.set("nodes[0]", "NodeName=n[1-2] (slurm.conf:3)");
        origins.set("nodes[0].cpus", "CPUs=4");
        origins.set("priority.weight_age", "PriorityWeightAge=0");
        let text = emit(&Document {
            config: &config,
            origins: &origins,
            notes: &Notes::default(),
            sources: &[("slurm.conf", "/etc/slurm/slurm.conf".into())],
        })
        .unwrap();
        assert!(text.contains("cluster_name = 'c\"x'\n"), "{text}");
        assert!(
            text.contains("# NodeName=n[1-2] (slurm.conf:3)\n[[nodes]]\n"),
            "{text}"
        );
        assert!(text.contains("cpus = 4  # CPUs=4\n"), "{text}");
        assert!(text.contains("features = [\"ib\", \"x\"]\n"), "{text}");
        assert!(
            text.contains("weight_age = 1000  # PriorityWeightAge=0\n"),
            "{text}"
        );
        assert!(text.contains("# Not carried over: none."), "{text}");
        let parsed =
            corral_controller::config::parse_file(&text, std::path::Path::new("c.toml")).unwrap();
        assert_eq!(parsed.nodes, config.nodes);
        assert_eq!(parsed.cluster_name, config.cluster_name);
    }
}
