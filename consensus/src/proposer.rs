//! Batches proposals into log entries. Concurrent callers' commands share one
//! entry (one append, one fsync, one replication round), and several entries may
//! be in flight at once; every caller is answered only when its entry commits.
//! A caller's commands are encoded once, here, on the caller's task; the entry
//! is their encodings back to back (see [`crate::types::Proposal`]).
//!
//! Under load an idle replica also waits a little for the callers a commit has
//! just answered (see [`lingers`]): callers come straight back with their next
//! command, and proposing without them splits them over two entries, each
//! paying an append, an fsync and a replication round on every replica.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use corral_state::{Command, Outcome, Rejection};
use openraft::error::{ClientWriteError, RaftError};
use tokio::sync::{Notify, mpsc, oneshot, watch};
use tokio::time::Instant;

use crate::error::ProposeError;
use crate::types::{EncodedCommands, Raft, ReplicaId};

/// Most commands in one log entry.
pub const MAX_COMMANDS_PER_ENTRY: usize = 512;
/// Most encoded bytes in one log entry (a single larger proposal is proposed
/// alone): entries must replicate well within a heartbeat interval.
pub const MAX_ENTRY_BYTES: usize = 512 * 1024;
/// Most encoded bytes in one proposal (its commands share one entry). Submissions
/// are bounded well below this by `ClusterConfig::max_batch_bytes`.
pub const MAX_PROPOSAL_BYTES: usize = 4 * 1024 * 1024 + 64 * 1024;
/// Most entries proposed and not yet committed at once.
pub const MAX_ENTRIES_IN_FLIGHT: usize = 3;
/// Fewest commands an entry needs to be proposed while another is in flight
/// (see [`ready`]).
pub const MIN_COMMANDS_TO_OVERLAP: usize = 48;
/// Longest an idle replica waits for the callers it expects back (tokio's
/// timers count whole milliseconds, so this is the shortest bound they keep).
pub const MAX_LINGER: Duration = Duration::from_millis(1);
/// Fewest commands a commit must have answered for the replica to wait for
/// their callers: below it the load is light and proposals go at once.
pub const MIN_ANSWERED_TO_LINGER: usize = 16;
/// Most proposals waiting to be batched before callers are pushed back.
const QUEUE_DEPTH: usize = 16 * 1024;

/// The results of one caller's commands, in order.
pub type Results = Result<Vec<Result<Outcome, Rejection>>, ProposeError>;

struct Waiting {
    commands: EncodedCommands,
    answer: oneshot::Sender<Results>,
    /// When it was queued.
    arrived: Instant,
}

/// The leader's clock, which stamps commands as they enter the log. Reading
/// it may wait (a new leader reads its peers' clocks before it stamps).
#[derive(Clone)]
pub struct Clock(pub Arc<dyn Fn() -> ClockReading + Send + Sync>);

/// A reading of the leader's clock, once it is ready.
pub type ClockReading =
    std::pin::Pin<Box<dyn std::future::Future<Output = corral_state::Timestamp> + Send>>;

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Clock")
    }
}

/// The proposer of one replica.
pub struct Proposer {
    queue: mpsc::Sender<Waiting>,
    timeout: Duration,
    /// True while this replica leads without contact with a quorum (see
    /// [`crate::leadership`]).
    stale: watch::Receiver<bool>,
    /// Stamps every command's time, when set.
    clock: Option<Clock>,
    /// Set when the replica stops: nothing more is proposed.
    stopped: std::sync::atomic::AtomicBool,
}

impl Proposer {
    /// Refuses every later proposal as `NotLeader` without a leader (nothing
    /// proposed: callers go to the others): the replica is stopping.
    pub fn stop(&self) {
        self.stopped
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Starts the batching task for `raft`. While `stale` is true (this replica
    /// leads but no quorum answers it), proposals are refused at once.
    pub fn start(
        raft: Raft,
        timeout: Duration,
        stale: watch::Receiver<bool>,
        clock: Option<Clock>,
    ) -> Arc<Self> {
        let (queue, receiver) = mpsc::channel(QUEUE_DEPTH);
        tokio::spawn(batch_loop(raft, receiver, timeout));
        Arc::new(Proposer {
            queue,
            timeout,
            stale,
            clock,
            stopped: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Proposes `commands`, applied in order in one entry (with other callers'),
    /// and waits for their results. The timeout counts from now, queueing
    /// included; when it passes the outcome is unknown (the commands may still
    /// commit). With a clock, every command is stamped with it first. A
    /// leader without contact with a quorum refuses at once
    /// (`NotLeader` without a leader: nothing was proposed) and gives up on
    /// the proposals it holds when it loses contact (`Lost`: they may still
    /// commit if contact comes back before a new leader is elected).
    pub async fn propose(&self, commands: Vec<Command>) -> Results {
        let started = Instant::now();
        let results = self.propose_timed(commands).await;
        let outcome = match &results {
            Ok(_) => "committed",
            Err(ProposeError::NotLeader { .. }) => "not_leader",
            Err(ProposeError::Timeout(_)) => "timeout",
            Err(ProposeError::Lost(_)) => "lost",
            Err(_) => "refused",
        };
        crate::instruments::propose_duration().record(
            started.elapsed().as_secs_f64() * 1000.0,
            &[opentelemetry::KeyValue::new("outcome", outcome)],
        );
        results
    }

    async fn propose_timed(&self, mut commands: Vec<Command>) -> Results {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let mut stale = self.stale.clone();
        if *stale.borrow_and_update() || self.stopped.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(ProposeError::NotLeader { leader: None });
        }
        // Only a leader's entries commit, so time in the log is the leader's.
        // Reading the clock may wait (a new leader reads its peers' first):
        // within the timeout, and a leader that loses contact meanwhile has
        // proposed nothing.
        if let Some(clock) = &self.clock {
            let now = tokio::select! {
                now = (clock.0)() => now,
                _ = stale.wait_for(|s| *s) => {
                    return Err(ProposeError::NotLeader { leader: None });
                }
                () = tokio::time::sleep_until(deadline) => {
                    return Err(ProposeError::Timeout(self.timeout.as_millis() as u64));
                }
            };
            if *stale.borrow_and_update() {
                return Err(ProposeError::NotLeader { leader: None });
            }
            for command in &mut commands {
                command.stamp(now);
            }
        }
        let mut encoded = EncodedCommands::default();
        for command in &commands {
            encoded
                .push(command)
                .map_err(|e| ProposeError::Unencodable(e.to_string()))?;
            if encoded.bytes() > MAX_PROPOSAL_BYTES {
                return Err(ProposeError::TooLarge {
                    bytes: encoded.bytes(),
                    max: MAX_PROPOSAL_BYTES,
                });
            }
        }
        drop(commands);
        let (answer, wait) = oneshot::channel();
        let queued = async {
            if self
                .queue
                .send(Waiting {
                    commands: encoded,
                    answer,
                    arrived: Instant::now(),
                })
                .await
                .is_err()
            {
                return Err(ProposeError::Unavailable(
                    "the replica is shutting down".into(),
                ));
            }
            wait.await.unwrap_or_else(|_| {
                Err(ProposeError::Lost(
                    "the replica stopped before answering".into(),
                ))
            })
        };
        let cut_off = async {
            // A closed watch (the replica stopping) is not a loss of contact.
            if stale.wait_for(|s| *s).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            timed = tokio::time::timeout_at(deadline, queued) => match timed {
                Ok(results) => results,
                Err(_) => Err(ProposeError::Timeout(self.timeout.as_millis() as u64)),
            },
            () = cut_off => Err(ProposeError::Lost(
                "this replica lost contact with the majority while holding the proposal".into(),
            )),
        }
    }
}

/// The group of proposals being gathered into the next entry.
#[derive(Default)]
struct Gathering {
    group: Vec<Waiting>,
    commands: usize,
    bytes: usize,
    /// The proposal that did not fit; it starts the entry after this one.
    overflow: Option<Waiting>,
}

impl Gathering {
    fn push(&mut self, waiting: Waiting) {
        let bytes = waiting.commands.bytes();
        if !self.group.is_empty() && self.bytes + bytes > MAX_ENTRY_BYTES {
            self.overflow = Some(waiting);
            return;
        }
        self.commands += waiting.commands.len();
        self.bytes += bytes;
        self.group.push(waiting);
    }

    fn full(&self) -> bool {
        self.overflow.is_some()
            || self.commands >= MAX_COMMANDS_PER_ENTRY
            || self.bytes >= MAX_ENTRY_BYTES
    }

    /// Takes whatever is already queued, without waiting.
    fn drain(&mut self, receiver: &mut mpsc::Receiver<Waiting>) {
        while !self.full() {
            match receiver.try_recv() {
                Ok(next) => self.push(next),
                Err(_) => break,
            }
        }
    }

    /// Hands the gathered group over, starting the next one with the overflow.
    fn take(&mut self) -> Vec<Waiting> {
        let group = std::mem::take(&mut self.group);
        (self.commands, self.bytes) = (0, 0);
        if let Some(next) = self.overflow.take() {
            self.push(next);
        }
        group
    }
}

/// Whether a gathered group becomes an entry now, given how many are in flight.
/// With nothing in flight it goes at once (an idle replica adds no delay). While
/// entries are in flight, a small group waits for more callers or for a commit:
/// every entry costs an append, an fsync and a replication round on each replica
/// whatever it holds, so overlapping entries pay only when they are large.
fn ready(gathering: &Gathering, in_flight: usize) -> bool {
    match in_flight {
        0 => true,
        n if n >= MAX_ENTRIES_IN_FLIGHT => false,
        _ => gathering.full() || gathering.commands >= MIN_COMMANDS_TO_OVERLAP,
    }
}

/// What the commits that ended since the proposer last looked answered.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Answered {
    /// Commands answered.
    commands: usize,
    /// When the last of those commits ended.
    at: Option<Instant>,
}

/// How many commands an idle replica expects to propose together: those the
/// last commits answered (their callers come back) plus those that were
/// already waiting when it ended. `None` when the load is too light to wait.
fn expected_commands(answered: Answered, gathering: &Gathering) -> Option<usize> {
    let at = answered.at?;
    if answered.commands < MIN_ANSWERED_TO_LINGER {
        return None;
    }
    let waiting_then: usize = gathering
        .group
        .iter()
        .filter(|w| w.arrived <= at)
        .map(|w| w.commands.len())
        .sum();
    Some(answered.commands + waiting_then)
}

/// Whether an idle replica waits for more callers before proposing.
fn lingers(gathering: &Gathering, in_flight: usize, expected: Option<usize>) -> bool {
    in_flight == 0 && !gathering.full() && expected.is_some_and(|e| gathering.commands < e)
}

/// One entry's place among those in flight, given back when its commit ends.
struct InFlightSlot {
    in_flight: Arc<AtomicUsize>,
    committed: Arc<Notify>,
    answered: Arc<std::sync::Mutex<Answered>>,
    commands: usize,
}

impl Drop for InFlightSlot {
    fn drop(&mut self) {
        if let Ok(mut answered) = self.answered.lock() {
            answered.commands += self.commands;
            answered.at = Some(Instant::now());
        }
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.committed.notify_one();
    }
}

async fn batch_loop(raft: Raft, mut receiver: mpsc::Receiver<Waiting>, timeout: Duration) {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let committed = Arc::new(Notify::new());
    let answered: Arc<std::sync::Mutex<Answered>> = Arc::default();
    let mut gathering = Gathering::default();
    let mut open = true;
    loop {
        if gathering.group.is_empty() {
            if !open {
                break;
            }
            match receiver.recv().await {
                Some(waiting) => gathering.push(waiting),
                None => break,
            }
        }
        gathering.drain(&mut receiver);
        if in_flight.load(Ordering::Acquire) == 0 {
            let since = answered
                .lock()
                .map(|mut a| std::mem::take(&mut *a))
                .unwrap_or_default();
            let expected = expected_commands(since, &gathering);
            if open && lingers(&gathering, 0, expected) {
                open = linger(&mut gathering, &mut receiver, expected).await;
            }
        }
        if ready(&gathering, in_flight.load(Ordering::Acquire)) {
            in_flight.fetch_add(1, Ordering::AcqRel);
            let (raft, group) = (raft.clone(), gathering.take());
            // Given back when the task ends, even if the commit panics.
            let slot = InFlightSlot {
                in_flight: Arc::clone(&in_flight),
                committed: Arc::clone(&committed),
                answered: Arc::clone(&answered),
                commands: group.iter().map(|w| w.commands.len()).sum(),
            };
            tokio::spawn(async move {
                let _slot = slot;
                commit(&raft, group, timeout).await;
            });
            continue;
        }
        // Not yet: wait for another caller or for an entry to commit. A commit
        // that lands between the check and here leaves a permit in `committed`.
        tokio::select! {
            next = receiver.recv(), if open && !gathering.full() => match next {
                Some(waiting) => gathering.push(waiting),
                None => open = false,
            },
            () = committed.notified() => {}
        }
    }
}

/// Gathers callers until `expected` commands are there, the entry is full, or
/// [`MAX_LINGER`] has passed. Returns whether the queue is still open.
async fn linger(
    gathering: &mut Gathering,
    receiver: &mut mpsc::Receiver<Waiting>,
    expected: Option<usize>,
) -> bool {
    let deadline = Instant::now() + MAX_LINGER;
    while lingers(gathering, 0, expected) {
        match tokio::time::timeout_at(deadline, receiver.recv()).await {
            Ok(Some(waiting)) => {
                gathering.push(waiting);
                gathering.drain(receiver);
            }
            Ok(None) => return false,
            Err(_) => break,
        }
    }
    true
}

async fn commit(raft: &Raft, group: Vec<Waiting>, timeout: Duration) {
    let mut sizes = Vec::with_capacity(group.len());
    let mut answers = Vec::with_capacity(group.len());
    let mut entry = EncodedCommands::default();
    let mut joined = Ok(());
    for waiting in group {
        sizes.push(waiting.commands.len());
        answers.push(waiting.answer);
        if joined.is_ok() {
            joined = entry.extend(&waiting.commands);
        }
    }
    let outcome = match joined {
        Err(e) => Err(ProposeError::Unencodable(e.to_string())),
        Ok(()) => {
            let write = raft.client_write(entry.into_proposal());
            match tokio::time::timeout(timeout, write).await {
                Err(_) => Err(ProposeError::Timeout(timeout.as_millis() as u64)),
                Ok(Ok(response)) => Ok(response.data.results),
                Ok(Err(error)) => Err(write_error(error)),
            }
        }
    };
    match outcome {
        Ok(results) => {
            let mut results = results.into_iter();
            for (answer, size) in answers.into_iter().zip(sizes) {
                let _ = answer.send(Ok(results.by_ref().take(size).collect()));
            }
        }
        Err(error) => {
            for answer in answers {
                let _ = answer.send(Err(error.clone()));
            }
        }
    }
}

fn write_error(
    error: RaftError<ReplicaId, ClientWriteError<ReplicaId, crate::types::ReplicaAddr>>,
) -> ProposeError {
    if let Some(forward) = error.forward_to_leader() {
        let leader = forward.leader_id.zip(forward.leader_node.clone());
        return ProposeError::NotLeader { leader };
    }
    // Raft took the entry; it stopped (or its storage failed) before answering.
    ProposeError::Lost(error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set_user(name_len: usize) -> Command {
        Command::SetUser {
            user: corral_state::account::User {
                name: "u".repeat(name_len),
                default_account: "root".into(),
                accounts: Default::default(),
                role: corral_state::Role::User,
                limits: Default::default(),
            },
            by: corral_state::Actor {
                user: "root".into(),
                role: corral_state::Role::Admin,
            },
        }
    }

    /// A command whose encoding takes `bytes` bytes (or the fewest it can).
    fn command_of(bytes: usize) -> Command {
        let size = |c: &Command| postcard::to_stdvec(c).expect("encodes").len();
        let overhead = size(&set_user(0));
        let mut name_len = bytes.saturating_sub(overhead);
        // The name's length prefix grows with it.
        while name_len > 0 && size(&set_user(name_len)) > bytes {
            name_len -= 1;
        }
        set_user(name_len)
    }

    /// A caller with `commands` commands of `bytes` encoded bytes in all (each at
    /// least the smallest command).
    fn caller(commands: usize, bytes: usize) -> Waiting {
        let mut encoded = EncodedCommands::default();
        for i in 0..commands {
            let share = bytes / commands + usize::from(i < bytes % commands);
            encoded.push(&command_of(share)).expect("encodes");
        }
        Waiting {
            commands: encoded,
            answer: oneshot::channel().0,
            arrived: Instant::now(),
        }
    }

    fn gathered(callers: impl IntoIterator<Item = Waiting>) -> Gathering {
        let mut gathering = Gathering::default();
        callers.into_iter().for_each(|c| gathering.push(c));
        gathering
    }

    #[test]
    fn an_idle_replica_proposes_at_once_and_a_busy_one_only_a_large_entry() {
        let one = gathered([caller(1, 100)]);
        assert!(ready(&one, 0));
        assert!(!ready(&one, 1));

        let many = gathered((0..MIN_COMMANDS_TO_OVERLAP).map(|_| caller(1, 100)));
        assert!(ready(&many, 1));
        assert!(ready(&many, MAX_ENTRIES_IN_FLIGHT - 1));
        assert!(!ready(&many, MAX_ENTRIES_IN_FLIGHT));

        // Few callers, but their bytes fill an entry: nothing more would fit.
        let heavy = gathered([
            caller(1, MAX_ENTRY_BYTES / 2),
            caller(1, MAX_ENTRY_BYTES / 2),
        ]);
        assert_eq!(heavy.bytes, MAX_ENTRY_BYTES);
        assert!(heavy.full());
        assert!(ready(&heavy, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_replica_waits_for_the_callers_a_busy_commit_answered() {
        let before = gathered((0..32).map(|_| caller(1, 100)));
        tokio::time::advance(Duration::from_micros(100)).await;
        let commit = Instant::now();
        tokio::time::advance(Duration::from_micros(100)).await;
        // 32 answered, 32 were waiting: 64 expected, including the answered
        // callers that come back after the commit.
        let answered = Answered {
            commands: 32,
            at: Some(commit),
        };
        assert_eq!(expected_commands(answered, &before), Some(64));
        let mut after = before;
        (0..8).for_each(|_| after.push(caller(1, 100)));
        assert_eq!(expected_commands(answered, &after), Some(64));
        assert!(lingers(&after, 0, Some(64)));
        // Not while an entry is in flight (that is already a wait), not once
        // as many are there, not when the commits answered few (light load).
        assert!(!lingers(&after, 1, Some(64)));
        assert!(!lingers(&after, 0, Some(40)));
        let light = Answered {
            commands: MIN_ANSWERED_TO_LINGER - 1,
            at: Some(commit),
        };
        assert_eq!(expected_commands(light, &after), None);
        assert_eq!(expected_commands(Answered::default(), &after), None);
        // A full entry never waits.
        let heavy = gathered([
            caller(1, MAX_ENTRY_BYTES / 2),
            caller(1, MAX_ENTRY_BYTES / 2),
        ]);
        assert!(!lingers(&heavy, 0, Some(512)));
    }

    #[tokio::test(start_paused = true)]
    async fn lingering_ends_with_the_expected_callers_or_after_the_longest_wait() {
        let (queue, mut receiver) = mpsc::channel(QUEUE_DEPTH);
        let mut gathering = gathered((0..4).map(|_| caller(1, 100)));
        for _ in 0..4 {
            queue.send(caller(1, 100)).await.expect("queued");
        }
        assert!(linger(&mut gathering, &mut receiver, Some(8)).await);
        assert_eq!(gathering.commands, 8);
        let started = Instant::now();
        assert!(linger(&mut gathering, &mut receiver, Some(9)).await);
        assert_eq!(started.elapsed(), MAX_LINGER);
        drop(queue);
        assert!(!linger(&mut gathering, &mut receiver, Some(9)).await);
    }

    #[test]
    fn a_caller_that_does_not_fit_starts_the_next_entry() {
        let second = caller(3, 90);
        let second_bytes = second.commands.bytes();
        assert_eq!(second_bytes, 90);
        let mut gathering = gathered([caller(2, MAX_ENTRY_BYTES - 10), second]);
        assert!(gathering.full());
        assert_eq!((gathering.group.len(), gathering.commands), (1, 2));

        let first = gathering.take();
        assert_eq!(first.len(), 1);
        assert_eq!((gathering.group.len(), gathering.commands), (1, 3));
        assert_eq!(gathering.bytes, second_bytes);
        assert!(!gathering.full());

        // A single caller larger than an entry still gets one of its own.
        let alone = gathered([caller(1, MAX_ENTRY_BYTES * 2)]);
        assert_eq!(alone.group.len(), 1);
    }

    #[tokio::test]
    async fn draining_stops_at_a_full_entry_and_keeps_the_rest_queued() {
        let (queue, mut receiver) = mpsc::channel(QUEUE_DEPTH);
        for _ in 0..MAX_COMMANDS_PER_ENTRY / 8 + 3 {
            queue.send(caller(8, 10)).await.expect("queued");
        }
        let mut gathering = Gathering::default();
        gathering.drain(&mut receiver);
        assert_eq!(gathering.commands, MAX_COMMANDS_PER_ENTRY);
        assert!(gathering.full());
        let mut left = 0;
        while receiver.try_recv().is_ok() {
            left += 1;
        }
        assert_eq!(left, 3);
    }
}
