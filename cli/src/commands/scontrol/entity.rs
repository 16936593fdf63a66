//! Which entity `show WORD` names, as Slurm 22.05's `_show_it` decides it:
//! a word names a keyword when it is a prefix of it at least the keyword's
//! minimum long (case-insensitive), and the first keyword in scontrol's order
//! wins, so `show res`, `show c`, `show j` and `show pa` mean what they mean to
//! scontrol. Keywords corral does not serve are in the table too, so a prefix
//! scontrol reads as one of them is never taken for a later one.

/// An entity of `show`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entity {
    /// `config`.
    Config,
    /// `hostnames`.
    Hostnames,
    /// `hostlist`.
    Hostlist,
    /// `hostlistsorted`.
    HostlistSorted,
    /// `jobs`, `jobid`.
    Job,
    /// `nodes` (and corral's `nodename`).
    Node,
    /// `partitions`, `partitionname`.
    Partition,
    /// `reservations`, `reservationname`.
    Reservation,
    /// A keyword scontrol has and corral does not serve.
    Unsupported(&'static str),
}

/// scontrol's keywords in its order, each with the shortest prefix it takes.
const KEYWORDS: &[(&str, usize, Entity)] = &[
    ("aliases", 1, Entity::Unsupported("aliases")),
    ("bbstat", 2, Entity::Unsupported("bbstat")),
    ("dwstat", 2, Entity::Unsupported("dwstat")),
    ("burstbuffer", 2, Entity::Unsupported("burstbuffer")),
    ("assoc_mgr", 2, Entity::Unsupported("assoc_mgr")),
    ("cache", 2, Entity::Unsupported("cache")),
    ("config", 1, Entity::Config),
    ("daemons", 1, Entity::Unsupported("daemons")),
    ("federations", 1, Entity::Unsupported("federations")),
    ("frontendname", 1, Entity::Unsupported("frontendname")),
    ("hostnames", 5, Entity::Hostnames),
    ("hostlist", 5, Entity::Hostlist),
    ("hostlistsorted", 9, Entity::HostlistSorted),
    ("jobs", 1, Entity::Job),
    ("jobid", 1, Entity::Job),
    ("licenses", 2, Entity::Unsupported("licenses")),
    ("nodes", 1, Entity::Node),
    // Not scontrol's (it refuses `show nodename`), but corral always took it.
    ("nodename", 8, Entity::Node),
    ("partitions", 2, Entity::Partition),
    ("partitionname", 2, Entity::Partition),
    ("reservations", 1, Entity::Reservation),
    ("reservationname", 1, Entity::Reservation),
    ("slurmd", 2, Entity::Unsupported("slurmd")),
    ("steps", 2, Entity::Unsupported("steps")),
    ("topology", 1, Entity::Unsupported("topology")),
];

/// The entity `word` names, or `None` when it names none of scontrol's.
pub fn entity(word: &str) -> Option<Entity> {
    let word = word.to_ascii_lowercase();
    KEYWORDS
        .iter()
        .find(|(keyword, shortest, _)| word.len() >= *shortest && keyword.starts_with(&word))
        .map(|(_, _, entity)| *entity)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_as_scontrol_reads_them() {
        for word in ["r", "res", "RESERVATION", "reservations", "ReservationName"] {
            assert_eq!(entity(word), Some(Entity::Reservation), "{word}");
        }
        for word in ["c", "conf", "config"] {
            assert_eq!(entity(word), Some(Entity::Config), "{word}");
        }
        assert_eq!(entity("j"), Some(Entity::Job));
        assert_eq!(entity("job"), Some(Entity::Job));
        assert_eq!(entity("JobId"), Some(Entity::Job));
        assert_eq!(entity("n"), Some(Entity::Node));
        assert_eq!(entity("nodename"), Some(Entity::Node));
        assert_eq!(entity("pa"), Some(Entity::Partition));
        assert_eq!(entity("hostname"), Some(Entity::Hostnames));
        assert_eq!(entity("hostlist"), Some(Entity::Hostlist));
        assert_eq!(entity("hostlists"), Some(Entity::HostlistSorted));
    }

    #[test]
    fn earlier_keywords_win_and_short_or_long_words_name_nothing() {
        // `ca` is scontrol's cache, `t` its topology: not served, never config.
        assert_eq!(entity("ca"), Some(Entity::Unsupported("cache")));
        assert_eq!(entity("t"), Some(Entity::Unsupported("topology")));
        assert_eq!(entity("p"), None);
        assert_eq!(entity("host"), None);
        assert_eq!(entity("reservationsx"), None);
        assert_eq!(entity("nodenames"), None);
    }
}
