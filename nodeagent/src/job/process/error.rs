//! Why a job's process could not be started, signalled or waited for. Each
//! message names what was wrong and what to do about it.

use std::io;
use std::path::PathBuf;

/// An error starting or controlling a job's processes.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The working directory does not exist.
    #[error(
        "working directory {path} does not exist on this node; create it or submit with --chdir naming a directory that exists here"
    )]
    WorkdirMissing {
        /// The directory.
        path: PathBuf,
    },
    /// The working directory is not a directory.
    #[error("working directory {path} is not a directory; submit with --chdir naming a directory")]
    WorkdirNotDirectory {
        /// The path.
        path: PathBuf,
    },
    /// The working directory could not be examined.
    #[error(
        "cannot examine working directory {path}: {source}; check that it is reachable from this node"
    )]
    Workdir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// An output file could not be created or opened.
    #[error(
        "cannot open output file {path}: {reason}; check that its directory exists and the job's user may write there, or change --output/--error"
    )]
    OutputFile {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// An output file is not a plain file owned by the job's user (for example a
    /// symbolic link), so the agent, running as root, refuses to write to it.
    #[error(
        "refusing to write job output to {path}: {reason}; remove it or choose another --output/--error"
    )]
    UnsafeOutputFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The input file could not be opened, or the job's user may not read it.
    #[error("cannot open input file {path}: {reason}; check --input and its permissions")]
    InputFile {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The user does not exist on this node.
    #[error(
        "user {user} does not exist on this node; create the account (with the same uid as on the submit host) or drain the node"
    )]
    UnknownUser {
        /// The user name.
        user: String,
    },
    /// The user database could not be read.
    #[error("cannot look up user {user}: {source}; check the node's user database (NSS, LDAP)")]
    UserLookup {
        /// The user name.
        user: String,
        /// Why.
        source: nix::Error,
    },
    /// The job claims a uid that is not the user's uid on this node.
    #[error(
        "job claims uid {claimed} for user {user}, but {user} has uid {actual} on this node; the job is refused (uids must agree across the cluster)"
    )]
    UidMismatch {
        /// The user name.
        user: String,
        /// The uid the submission claimed.
        claimed: u32,
        /// The uid on this node.
        actual: u32,
    },
    /// The job claims a gid the user does not belong to on this node.
    #[error(
        "job claims gid {claimed} for user {user}, who is not a member of that group on this node; the job is refused (group membership must agree across the cluster)"
    )]
    GidNotAllowed {
        /// The user name.
        user: String,
        /// The gid the submission claimed.
        claimed: u32,
    },
    /// A job is to run as another user, but the agent is not root.
    #[error(
        "cannot run a job as {user} (uid {uid}): the agent runs as uid {euid}, not root; run the agent as root or as {user}"
    )]
    NotRoot {
        /// The job's user.
        user: String,
        /// The job's uid.
        uid: u32,
        /// The agent's effective uid.
        euid: u32,
    },
    /// The user has supplementary groups but `setpriv` is not installed.
    #[error(
        "user {user} belongs to supplementary groups, which corral gives a job through setpriv; install util-linux (setpriv) on this node"
    )]
    SetprivMissing {
        /// The job's user.
        user: String,
    },
    /// `srun --pty` needs util-linux's `setsid` to give the task its terminal.
    #[error(
        "srun --pty needs setsid (util-linux) on this node to give the task its terminal; install util-linux, or run srun without --pty"
    )]
    SetsidMissing,
    /// No pseudo-terminal could be made for `srun --pty`.
    #[error(
        "cannot open a pseudo-terminal for srun --pty: {0}; check /dev/ptmx and /dev/pts on this node"
    )]
    Terminal(io::Error),
    /// The batch script could not be written.
    #[error(
        "cannot write batch script {path}: {source}; check that the agent's spool directory exists and is writable"
    )]
    Script {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The program could not be started.
    #[error(
        "cannot start {program} in {workdir}: {source}; check that it exists, is executable and that the job's user may enter the directory"
    )]
    Spawn {
        /// The program.
        program: PathBuf,
        /// The working directory.
        workdir: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The signal has no Linux number this agent can send.
    #[error(
        "cannot send signal {signal}: only signals 1 to 31 can be sent to a job; use a named signal such as USR1 or TERM"
    )]
    UnsupportedSignal {
        /// The signal's number.
        signal: u8,
    },
    /// Sending a signal failed.
    #[error("cannot send SIG{signal} to process group {pgid}: {source}")]
    Signal {
        /// The signal's name.
        signal: String,
        /// The process group.
        pgid: u32,
        /// Why.
        source: nix::Error,
    },
    /// Waiting for the process failed.
    #[error("cannot wait for process {pid}: {source}")]
    Wait {
        /// The process.
        pid: u32,
        /// Why.
        source: io::Error,
    },
}
