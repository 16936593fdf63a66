//! How much planning users may ask for at once: `--test-only` submissions and
//! `explain` run the scheduler on the caller's behalf, and a user looping them
//! must not slow everyone else's submissions. Each user gets one planning
//! request at a time (the rest of theirs wait their turn), and the controller
//! runs at most [`GLOBAL_PLANNERS`] at once, on blocking threads, never on
//! the async workers that carry submissions and Raft. Each plans on a copy of
//! the state ([`PlanningPermit::plan_on_copy`]), so applies wait only while
//! the copy is taken.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use corral_consensus::Replica;
use corral_state::ClusterState;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::Status;

use super::status;

/// Planning requests the controller runs at once, across users.
pub const GLOBAL_PLANNERS: usize = 2;

/// The admission gate for planning requests.
#[derive(Debug)]
pub struct PlanningLimits {
    global: Arc<Semaphore>,
    per_user: Mutex<HashMap<String, Arc<Semaphore>>>,
}

/// Leave to plan; dropped when the planning is done.
#[derive(Debug)]
pub struct PlanningPermit {
    _user: Option<OwnedSemaphorePermit>,
    _global: Option<OwnedSemaphorePermit>,
}

impl PlanningPermit {
    /// Runs `plan` on a copy of `replica`'s applied state, on a blocking
    /// thread, and holds this permit until `plan` ends, also when the caller
    /// gives up first (the planner is busy until then). The copy is taken as a
    /// long read: applies wait for it without holding a runtime thread.
    pub async fn plan_on_copy<T: Send + 'static>(
        self,
        replica: Arc<Replica>,
        plan: impl FnOnce(ClusterState) -> T + Send + 'static,
    ) -> Result<T, Status> {
        let failed = |e: tokio::task::JoinError| {
            Status::internal(format!("planning failed: {e}; please report this"))
        };
        let planning = tokio::spawn(async move {
            let permit = self;
            let copy = replica
                .read_local_long(ClusterState::clone)
                .await
                .map_err(status::read)?;
            let planned = tokio::task::spawn_blocking(move || plan(copy))
                .await
                .map_err(failed);
            drop(permit);
            planned
        });
        planning.await.map_err(failed)?
    }
}

impl Default for PlanningLimits {
    fn default() -> Self {
        Self::new(GLOBAL_PLANNERS)
    }
}

impl PlanningLimits {
    /// At most `global` planning requests at once, one per user.
    pub fn new(global: usize) -> Self {
        Self {
            global: Arc::new(Semaphore::new(global.max(1))),
            per_user: Mutex::new(HashMap::new()),
        }
    }

    /// Waits for `user`'s turn, then for a free planner.
    pub async fn admit(&self, user: &str) -> PlanningPermit {
        let turn = {
            let mut per_user = self
                .per_user
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            // Users with nothing in flight are forgotten, so the map stays as
            // small as the set of users planning now.
            per_user.retain(|_, gate| Arc::strong_count(gate) > 1);
            Arc::clone(
                per_user
                    .entry(user.to_string())
                    .or_insert_with(|| Arc::new(Semaphore::new(1))),
            )
        };
        // Neither semaphore is ever closed, so acquiring cannot fail; a closed
        // one would only mean no limit (never a loop that asks again at once).
        let user_permit = Arc::clone(&turn).acquire_owned().await.ok();
        let global_permit = Arc::clone(&self.global).acquire_owned().await.ok();
        PlanningPermit {
            _user: user_permit,
            _global: global_permit,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn one_request_per_user_and_a_global_bound() {
        let limits = Arc::new(PlanningLimits::new(2));
        let alice = limits.admit("alice").await;
        // Alice's second request waits for her first.
        let second = tokio::spawn({
            let limits = Arc::clone(&limits);
            async move { limits.admit("alice").await }
        });
        tokio::task::yield_now().await;
        assert!(!second.is_finished());
        // Bob is not held up by Alice.
        let bob = tokio::time::timeout(Duration::from_secs(10), limits.admit("bob"))
            .await
            .expect("bob plans beside alice");
        // The global bound (2) is reached: Carol waits.
        let carol = tokio::spawn({
            let limits = Arc::clone(&limits);
            async move { limits.admit("carol").await }
        });
        tokio::task::yield_now().await;
        assert!(!carol.is_finished());
        drop(bob);
        let carol = tokio::time::timeout(Duration::from_secs(10), carol)
            .await
            .expect("carol gets bob's planner")
            .expect("task");
        drop(alice);
        drop(carol);
        tokio::time::timeout(Duration::from_secs(10), second)
            .await
            .expect("alice's second request goes after her first")
            .expect("task");
    }

    #[tokio::test]
    async fn users_with_nothing_in_flight_are_forgotten() {
        let limits = PlanningLimits::new(2);
        for user in ["a", "b", "c"] {
            drop(limits.admit(user).await);
        }
        drop(limits.admit("d").await);
        let held = limits.per_user.lock().expect("lock").len();
        assert!(held <= 1, "{held} users kept");
    }
}
