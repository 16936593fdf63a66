//! `corral.toml`: this replica's identity and addresses, the other replicas, TLS
//! files, Raft timing, the leader loop's intervals, and the cluster definition
//! (partitions, nodes, topology, accounts, users, QOS, priority settings).
