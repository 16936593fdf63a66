//! What this node has: CPUs and memory as the kernel reports them (overridable on
//! the command line, as Slurm's node definition would).

/// CPUs available to this process.
pub fn cpus() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX))
}

/// Total memory in MiB, from `/proc/meminfo` (0 when unreadable).
pub fn memory_mb() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| parse_meminfo_total_kib(&text))
        .map_or(0, |kib| kib / 1024)
}

fn parse_meminfo_total_kib(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memtotal_is_read_in_kib() {
        let text = "MemTotal:       24576000 kB\nMemFree:  100 kB\n";
        assert_eq!(parse_meminfo_total_kib(text), Some(24_576_000));
        assert_eq!(parse_meminfo_total_kib("nothing"), None);
    }
}
