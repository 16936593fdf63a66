//! Allocations held from a login node. `srun` outside a job and `salloc`
//! create a job whose batch script is `corral allocation-hold`: that holder
//! waits on this node's step socket ([`StepControl::AwaitRelease`]) while the
//! login node's command attaches over QUIC ([`StepControl::Attach`]), runs its
//! steps, and releases the allocation with its command's exit status, which
//! the holder exits with; the job ends as any batch job does (COMPLETED, or
//! FAILED with that exit code). A command that goes away, or never attaches,
//! releases it with status 1 and says why in the job's output.
//!
//! [`StepControl::AwaitRelease`]: corral_proto::step::StepControl::AwaitRelease
//! [`StepControl::Attach`]: corral_proto::step::StepControl::Attach

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;

use crate::supervisor::AttemptKey;

/// How long a holder waits for its login node's command to attach: it does so
/// as soon as it sees the job running, so a holder left alone this long
/// belongs to a command that went away.
pub const ATTACH_PATIENCE: Duration = Duration::from_secs(60);

/// How an allocation ended, for its holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    /// The status the holder exits with.
    pub code: u8,
    /// Why, when it is not the command's own status.
    pub why: Option<String>,
}

/// One allocation's hold.
#[derive(Debug, Clone, Default)]
struct Hold {
    /// A login node's command attached (and has not gone away unreleased).
    attached: bool,
    /// Set once, by the first release.
    release: Option<Release>,
}

/// The holds of this node's allocations, by attempt.
#[derive(Clone, Default)]
pub struct Allocations {
    holds: Arc<Mutex<BTreeMap<AttemptKey, Arc<watch::Sender<Hold>>>>>,
}

impl Allocations {
    fn table(&self) -> MutexGuard<'_, BTreeMap<AttemptKey, Arc<watch::Sender<Hold>>>> {
        // A panic while holding the lock leaves the map consistent.
        self.holds.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn hold(&self, key: AttemptKey) -> Arc<watch::Sender<Hold>> {
        let mut table = self.table();
        Arc::clone(
            table
                .entry(key)
                .or_insert_with(|| Arc::new(watch::Sender::new(Hold::default()))),
        )
    }

    /// Forgets the holds of attempts that no longer run here (`live` says
    /// which do), but `key`'s.
    pub fn sweep(&self, key: AttemptKey, live: impl Fn(AttemptKey) -> bool) {
        self.table().retain(|k, _| *k == key || live(*k));
    }

    /// A login node's command attaches to `key`; refused while another one
    /// holds it or after it was released. `live` says which attempts still run
    /// here: the holds of the others are forgotten.
    pub fn attach(&self, key: AttemptKey, live: impl Fn(AttemptKey) -> bool) -> Result<(), String> {
        self.sweep(key, live);
        let hold = self.hold(key);
        let mut refusal = None;
        hold.send_if_modified(|hold| {
            if hold.release.is_some() {
                refusal = Some(format!(
                    "job {} attempt {}'s allocation was already released",
                    key.0, key.1
                ));
                false
            } else if hold.attached {
                refusal = Some(format!(
                    "job {}'s allocation is already held by another srun or salloc",
                    key.0
                ));
                false
            } else {
                hold.attached = true;
                true
            }
        });
        refusal.map_or(Ok(()), Err)
    }

    /// Ends the allocation of `key` (the first release wins).
    pub fn release(&self, key: AttemptKey, release: Release) {
        self.hold(key).send_if_modified(|hold| {
            if hold.release.is_some() {
                return false;
            }
            hold.release = Some(release);
            true
        });
    }

    /// The holder of `key` waits for its release, or for `patience` when no
    /// command attaches in that time (which releases it with status 1). The
    /// hold stays, released, until a sweep finds its attempt ended: a late
    /// attach is refused, not taken.
    pub async fn await_release(&self, key: AttemptKey, patience: Duration) -> Release {
        let sender = self.hold(key);
        let mut hold = sender.subscribe();
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            let (attached, release) = {
                let hold = hold.borrow_and_update();
                (hold.attached, hold.release.clone())
            };
            if let Some(release) = release {
                return release;
            }
            let changed = if attached {
                hold.changed().await.is_ok()
            } else {
                matches!(
                    tokio::time::timeout_at(deadline, hold.changed()).await,
                    Ok(Ok(()))
                )
            };
            if !changed {
                let gave_up = Release {
                    code: 1,
                    why: Some(format!(
                        "no srun or salloc attached to this allocation within {} s: the command that asked for it went away",
                        patience.as_secs()
                    )),
                };
                sender.send_if_modified(|hold| {
                    if hold.release.is_some() {
                        return false;
                    }
                    hold.release = Some(gave_up);
                    true
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_state::ids::JobId;

    const KEY: AttemptKey = (JobId(7), 1);

    #[tokio::test]
    async fn the_holder_exits_with_the_released_status_whichever_comes_first() {
        let allocations = Allocations::default();
        allocations.attach(KEY, |_| true).unwrap();
        let release = Release { code: 3, why: None };
        allocations.release(KEY, release.clone());
        // Released before the holder asked: it still gets it.
        assert_eq!(
            allocations
                .await_release(KEY, Duration::from_secs(60))
                .await,
            release
        );
        // The released hold stays until its attempt ends: no late attach.
        assert!(allocations.attach(KEY, |_| true).is_err());
        allocations.sweep((JobId(0), 0), |k| k != KEY);

        let waiting = {
            let allocations = allocations.clone();
            tokio::spawn(async move {
                allocations
                    .await_release(KEY, Duration::from_secs(60))
                    .await
            })
        };
        allocations.attach(KEY, |_| true).unwrap();
        assert!(
            allocations.attach(KEY, |_| true).is_err(),
            "one holder at a time"
        );
        allocations.release(KEY, release.clone());
        allocations.release(KEY, Release { code: 9, why: None });
        assert_eq!(waiting.await.unwrap(), release);
    }

    #[tokio::test(start_paused = true)]
    async fn a_holder_nobody_attaches_to_gives_up_with_status_1() {
        let allocations = Allocations::default();
        let release = allocations
            .await_release(KEY, Duration::from_secs(60))
            .await;
        assert_eq!(release.code, 1);
        assert!(release.why.unwrap().contains("went away"));
        // A command that comes after that is told, not attached to nothing.
        let late = allocations.attach(KEY, |_| true).unwrap_err();
        assert!(late.contains("already released"), "{late}");
    }

    #[test]
    fn attaching_forgets_the_holds_of_attempts_that_ended() {
        let allocations = Allocations::default();
        allocations.attach((JobId(1), 1), |_| true).unwrap();
        allocations.attach(KEY, |k| k != (JobId(1), 1)).unwrap();
        assert_eq!(allocations.table().len(), 1);
        assert!(allocations.attach(KEY, |_| true).is_err());
    }
}
