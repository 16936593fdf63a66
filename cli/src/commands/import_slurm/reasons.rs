//! Why each Slurm key that corral.toml has no place for is not carried over,
//! in words the user can act on. Keys the import carries are handled where
//! they are mapped; these are the rest, by the kind of line they are on.

/// Why a slurm.conf setting (outside NodeName/PartitionName lines) is not
/// carried; `None` when Slurm 22.05 has no such key.
pub fn setting(key: &str) -> Option<&'static str> {
    let key = key.to_ascii_lowercase();
    let reason = match key.as_str() {
        "slurmctldhost" | "controlmachine" | "controladdr" | "backupcontroller" | "backupaddr"
        | "slurmctldaddr" | "slurmctldport" => {
            "corral's controllers are the replicas under [[replicas]] (3 or 5 corrald processes, each with a peer and a client address and a certificate from `corral certs`); replace the placeholder replica below with them"
        }
        "slurmctldprimaryoffprog" | "slurmctldprimaryonprog" => {
            "corral has no primary controller: the replicas elect a leader by Raft, and no program runs when it changes"
        }
        "slurmctldtimeout" => {
            "corral fails over by Raft election in about 0.3 s ([raft] election_min_ms and election_max_ms), not after a backup controller's timeout"
        }
        "slurmctldplugstack" | "slurmdparameters" | "slurmdspooldir" | "slurmduser"
        | "slurmuser" => {
            "settings of slurmctld and slurmd; corrald and corral-agent take their own options (the agent keeps its state in its --state-dir and runs as root to start jobs as their users)"
        }
        "slurmctldlogfile"
        | "slurmdlogfile"
        | "slurmctldpidfile"
        | "slurmdpidfile"
        | "slurmctlddebug"
        | "slurmddebug"
        | "slurmctldsyslogdebug"
        | "slurmdsyslogdebug"
        | "slurmschedlogfile"
        | "slurmschedloglevel"
        | "logtimeformat"
        | "debugflags" => {
            "corrald and corral-agent log to standard error (RUST_LOG sets the level); their service manager keeps the logs and the pid files"
        }
        "statesavelocation" => {
            "each replica keeps its Raft log and snapshots in its own data_dir (default data/replica-<id>), replicated, not on a shared file system"
        }
        "authtype" | "authalttypes" | "authaltparameters" | "authinfo" | "credtype" => {
            "corral authenticates daemons and users with TLS certificates from the cluster's CA (`corral certs`), not munge"
        }
        "slurmdport"
        | "srunportrange"
        | "tcptimeout"
        | "messagetimeout"
        | "treewidth"
        | "communicationparameters"
        | "routeplugin"
        | "eiotimeout" => {
            "corral's agents call the controllers over gRPC with mutual TLS and each other over QUIC; their addresses are the agents' own options, and there is no message fan-out to tune"
        }
        "slurmdtimeout" => {
            "corral declares a node down when its agent's lease lapses: the cluster's lease + down margin (15 s by default; `corral admin liveness set`)"
        }
        "returntoservice" => {
            "in corral a node whose agent registers again is up at once; a node an operator drained, or drained for a hardware mismatch, stays drained until `corral node resume`"
        }
        "accountingstoragebackuphost"
        | "accountingstorageexternalhost"
        | "accountingstoragehost"
        | "accountingstorageparameters"
        | "accountingstoragepass"
        | "accountingstorageport"
        | "accountingstoragetres"
        | "accountingstoragetype"
        | "accountingstorageuser"
        | "accountingstoreflags"
        | "jobcomphost"
        | "jobcomploc"
        | "jobcompparams"
        | "jobcomppass"
        | "jobcompport"
        | "jobcomptype"
        | "jobcompuser"
        | "maxdbdmsgs"
        | "trackwckey"
        | "accountingstorageloc" => {
            "corral keeps job records and GPU-time usage in its replicated state (`corral acct`, sacct); there is no slurmdbd and no job completion plugin"
        }
        "acctgathernodefreq"
        | "acctgatherenergytype"
        | "acctgatherinterconnecttype"
        | "acctgatherfilesystemtype"
        | "acctgatherprofiletype"
        | "jobacctgathertype"
        | "jobacctgatherfrequency"
        | "jobacctgatherparams"
        | "extsensorsfreq"
        | "extsensorstype" => {
            "corral-agent does not sample jobs' CPU, memory, energy or I/O; it accounts GPU time and watches GPU health through NVML"
        }
        "priorityweightassoc" | "priorityweighttres" => {
            "corral's multifactor priority has age, fair-share, job size, partition and QOS factors only"
        }
        "priorityflags" => {
            "corral's priority takes no flags: fair-share is 2^(-usage/shares) over the account tree, and age counts from eligibility"
        }
        "prioritycalcperiod" => "corral computes priorities afresh on every scheduling pass",
        "priorityusageresetperiod" => {
            "corral decays usage by [priority] fairshare_half_life and never resets it"
        }
        "priorityparameters" | "prioritysitefactorparameters" | "prioritysitefactorplugin" => {
            "corral has no priority plugins"
        }
        "fairsharedampeningfactor" => "corral's fair-share has no dampening factor",
        "schedulertimeslice" => "corral does not gang-schedule (time-slice) jobs",
        "enforcepartlimits" => {
            "corral always checks a job against its partition's limits at submission"
        }
        "selecttypeparameters" => {
            "corral always treats each node's CPUs (as configured) and memory as consumable, like CR_CPU_Memory; there is no per-core or per-socket allocation"
        }
        "defmempercpu" | "defmempergpu" | "defmempernode" | "defcpupergpu" => {
            "corral has no default memory or CPUs per CPU/GPU: a job that gives no --mem reserves no memory, and one CPU per task unless it asks for more"
        }
        "maxmempercpu" | "maxmempernode" | "maxtaskspernode" | "maxstepcount" | "maxnodecount" => {
            "corral has no such cluster-wide limit; requests are bounded by the nodes' own CPUs, memory and GPUs"
        }
        "firstjobid" | "maxjobid" => {
            "corral numbers jobs from 1 in its replicated state; ids are never reused"
        }
        "minjobage" => {
            "corral keeps finished jobs in its replicated records (`corral acct`), not for a while in slurmctld's memory"
        }
        "jobrequeue" | "requeueexit" | "requeueexithold" => {
            "corral requeues a job after a node or GPU failure or a preemption unless it was submitted with --no-requeue, from its last checkpoint, and holds it after [scheduling] max_requeue requeues; exit codes do not requeue"
        }
        "prolog"
        | "epilog"
        | "prologslurmctld"
        | "epilogslurmctld"
        | "prologflags"
        | "prologepilogtimeout"
        | "epilogmsgtime"
        | "srunprolog"
        | "srunepilog"
        | "taskprolog"
        | "taskepilog"
        | "resvprolog"
        | "resvepilog" => {
            "corral runs no prolog or epilog scripts; put set-up and clean-up in the job script or on the node"
        }
        "healthcheckinterval" | "healthchecknodestate" | "healthcheckprogram" => {
            "corral-agent checks GPU health itself (XID errors through NVML drain the GPU and requeue its job); it runs no health-check program"
        }
        "proctracktype"
        | "taskplugin"
        | "taskpluginparam"
        | "jobcontainertype"
        | "launchtype"
        | "launchparameters"
        | "mpidefault"
        | "mpiparams"
        | "propagateprioprocess"
        | "propagateresourcelimits"
        | "propagateresourcelimitsexcept"
        | "vsizefactor"
        | "usepam"
        | "plugstackconfig"
        | "plugindir"
        | "corespecplugin"
        | "cpufreqdef"
        | "cpufreqgovernors"
        | "gpufreqdef"
        | "killonbadexit"
        | "unkillablestepprogram"
        | "unkillablesteptimeout"
        | "tmpfs"
        | "getenvtimeout"
        | "interactivestepoptions"
        | "bcastexclude"
        | "bcastparameters"
        | "allowspecresourcesusage" => {
            "how slurmd starts and confines tasks; corral-agent starts each job's processes in its own process group with Slurm's environment and CUDA_VISIBLE_DEVICES, with no plugins to choose"
        }
        "jobsubmitplugins"
        | "clifilterplugins"
        | "mcsplugin"
        | "mcsparameters"
        | "prepplugins"
        | "prepparameters"
        | "burstbuffertype"
        | "nodefeaturesplugins"
        | "switchtype"
        | "switchparameters"
        | "powerplugin"
        | "powerparameters"
        | "extsensorsplugin" => "corral has no plugins of this kind",
        "licenses" => "corral does not schedule licenses",
        "suspendprogram" | "suspendrate" | "suspendtime" | "suspendtimeout" | "suspendexcnodes"
        | "suspendexcparts" | "resumeprogram" | "resumerate" | "resumetimeout"
        | "resumefailprogram" | "rebootprogram" => {
            "corral does not power nodes down or up, or reboot them"
        }
        "resvoverrun" => "corral ends a reservation's jobs' access at the reservation's end",
        "inactivelimit" | "batchstarttimeout" | "completewait" | "waittime" | "overtimelimit" => {
            "corral has no such timeout: a job ends at its time limit (SIGTERM, then SIGKILL after [leader] kill_wait), and srun's steps run agent to agent"
        }
        "dependencyparameters" => {
            "corral's dependencies take no parameters; a dependency that can never be satisfied leaves the job pending with reason DependencyNeverSatisfied"
        }
        "jobfileappend" => {
            "corral opens job output files itself; sbatch's --open-mode is accepted and has no effect"
        }
        "maildomain" => "corral mails the address --mail-user gives, or the user's name as it is",
        "privatedata" => {
            "corral shows every user the queue and nodes; a user acts only on their own jobs unless an operator or admin"
        }
        "disablerootjobs" => "corral lets root submit jobs like any user with a certificate",
        "groupupdateforce" | "groupupdatetime" => {
            "corral restricts partitions by account, not by Unix group"
        }
        "reconfigflags" => {
            "corral's configuration changes go through the replicated state (`corral admin`, sacctmgr, scontrol update), not a reconfigure"
        }
        "federationparameters" | "scronparameters" => "corral has no federation or scrontab",
        "topologyparam" => {
            "corral places multi-node jobs under the lowest switch that fits, with no further topology parameters"
        }
        "fastschedule"
        | "cachegroups"
        | "cryptotype"
        | "schedulerport"
        | "schedulerrootfilter"
        | "jobcheckpointdir"
        | "checkpointtype"
        | "memlimitenforce"
        | "jobcredentialprivatekey"
        | "jobcredentialpubliccertificate" => "an obsolete Slurm setting; nothing to carry",
        _ => return None,
    };
    Some(reason)
}

/// Why a field of a `NodeName=` line is not carried; `None` for keys Slurm
/// 22.05 does not have.
pub fn node_field(key: &str) -> Option<&'static str> {
    let reason = match key.to_ascii_lowercase().as_str() {
        "nodehostname" | "nodeaddr" | "bcastaddr" | "port" => {
            "corral's agents connect to the controllers themselves (their certificate names the node), so the controllers need no node address or port"
        }
        "weight" => {
            "corral has no node weights: it places a job on the nodes that fit it most tightly (best fit), under the lowest switch that fits"
        }
        "tmpdisk" => "corral does not schedule temporary disk space (--tmp)",
        "corespeccount" | "cpuspeclist" => {
            "corral reserves no cores for the system; lower cpus by hand if some should stay free"
        }
        "cpubind" => "corral-agent does not bind tasks to CPUs",
        "reason" => {
            "node state comes from the node's agent in corral; drain a node with `corral node drain` (or scontrol update) after the cluster starts"
        }
        _ => return None,
    };
    Some(reason)
}

/// Why a field of a `PartitionName=` line is not carried; `None` for keys
/// Slurm 22.05 does not have.
pub fn partition_field(key: &str) -> Option<&'static str> {
    let reason = match key.to_ascii_lowercase().as_str() {
        "allocnodes" => "corral does not restrict the hosts jobs are submitted from",
        "allowgroups" | "allowqos" | "denyqos" | "denyaccounts" => {
            "a corral partition restricts only by an allow list of accounts (AllowAccounts)"
        }
        "alternate" => "corral has no alternate partitions",
        "cpubind" => "corral-agent does not bind tasks to CPUs",
        "defcpupergpu" | "defmempercpu" | "defmempergpu" | "defmempernode" => {
            "corral has no default memory or CPUs per CPU/GPU: a job that gives no --mem reserves no memory"
        }
        "disablerootjobs" => "corral lets root submit jobs like any user with a certificate",
        "exclusiveuser" => {
            "corral shares nodes between users' jobs; a job asks for whole nodes with --exclusive"
        }
        "hidden" => "corral hides no partition",
        "lln" => "corral places jobs by best fit, not on the least loaded nodes",
        "maxcpuspernode" | "maxmempercpu" | "maxmempernode" | "maxnodes" | "minnodes" => {
            "a corral partition limits only time (MaxTime); it has no node, CPU or memory limits (a QOS can limit GPUs per user or account)"
        }
        "oversubscribe" | "shared" => {
            "corral never oversubscribes: each CPU, GPU and MiB of memory goes to one job at a time"
        }
        "overtimelimit" => {
            "corral ends a job at its time limit (SIGTERM, then SIGKILL after [leader] kill_wait)"
        }
        "priorityjobfactor" => {
            "corral's partition priority factor is the partition's PriorityTier (over the highest tier); there is no separate job factor"
        }
        "qos" => {
            "corral has no partition QOS; limits belong to the job's own QOS (sacctmgr or [[qos]])"
        }
        "reqresv" => "corral has no partitions that require a reservation",
        "rootonly" => "corral has no root-only partitions",
        "selecttypeparameters" => {
            "corral always treats CPUs and memory as consumable, in every partition"
        }
        "resumetimeout" | "suspendtime" | "suspendtimeout" => {
            "corral does not power nodes down or up"
        }
        "tresbillingweights" => "corral bills GPU time; there are no TRES billing weights",
        _ => return None,
    };
    Some(reason)
}

/// Why a gres.conf field is not carried; `None` for keys Slurm 22.05 does not
/// have.
pub fn gres_field(key: &str) -> Option<&'static str> {
    let reason = match key.to_ascii_lowercase().as_str() {
        "file" | "multiplefiles" => {
            "corral-agent finds the GPUs' devices through NVML and gives each job its GPUs by CUDA_VISIBLE_DEVICES"
        }
        "cores" => "corral does not bind GPUs to cores",
        "links" => "corral does not place jobs by NVLink connections between a node's GPUs",
        "flags" => {
            "corral-agent always sets CUDA_VISIBLE_DEVICES (as nvidia_gpu_env); there are no other GRES flags"
        }
        _ => return None,
    };
    Some(reason)
}

/// Why a topology.conf field is not carried; `None` for keys Slurm does not
/// have.
pub fn topology_field(key: &str) -> Option<&'static str> {
    match key.to_ascii_lowercase().as_str() {
        "linkspeed" => Some("corral does not use link speeds (nor does Slurm)"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_match_without_case() {
        assert!(setting("SLURMCTLDHOST").is_some());
        assert!(setting("slurmctldhost").unwrap().contains("[[replicas]]"));
        assert!(setting("NoSuchKey").is_none());
        assert!(node_field("Weight").unwrap().contains("best fit"));
        assert!(partition_field("PriorityJobFactor").is_some());
        assert!(gres_field("Cores").is_some());
        assert!(topology_field("LinkSpeed").is_some());
    }
}
