//! The agent's lease: the right to keep jobs running, renewed by each heartbeat
//! a leader acknowledges (from when the heartbeat was sent). An agent whose
//! lease lapses kills its jobs (fencing) before the leader, which waits the
//! lease and a margin, may declare the node down and give its GPUs away.
//!
//! The lease guards against partitions, not failovers: an agent that loses its
//! leader finds the new one within a second or two (see [`crate::link`]) and
//! renews the lease there, so a leader change costs no running job. An outage
//! of the controllers themselves is not a partition of this node either: while
//! a majority of the nodes answer that no leader reaches them, the lease is
//! extended by them ([`crate::outage`]), a few seconds at a time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// The lease length until a leader says otherwise.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(10);

/// The lease's end (shared by the link, which renews it, the outage keeper,
/// which may extend it, and the fencing watchdog).
#[derive(Debug, Clone)]
pub struct Lease {
    inner: Arc<Mutex<LeaseState>>,
    /// The instant the lease runs out, published on each renewal.
    expiry: Arc<watch::Sender<Option<Instant>>>,
}

#[derive(Debug, Default)]
struct LeaseState {
    /// When the lease runs out (`None`: never held).
    expires: Option<Instant>,
    /// When a leader last acknowledged a heartbeat of this agent (or welcomed it).
    leader_contact: Option<Instant>,
    /// The length the leader last gave.
    length: Option<Duration>,
}

impl Default for Lease {
    fn default() -> Self {
        Lease {
            inner: Arc::new(Mutex::new(LeaseState::default())),
            expiry: Arc::new(watch::channel(None).0),
        }
    }
}

impl Lease {
    /// A leader acknowledged a heartbeat sent at `from` (or welcomed this
    /// agent): the lease runs until `from + length`. A renewal never shortens
    /// the lease.
    pub fn renew(&self, from: Instant, length: Duration) {
        if let Ok(mut lease) = self.inner.lock() {
            lease.length = Some(length);
        }
        self.extend(from + length, true);
    }

    /// The lease's length as the leader last gave it.
    pub fn length(&self) -> Duration {
        self.inner
            .lock()
            .ok()
            .and_then(|l| l.length)
            .unwrap_or(DEFAULT_LEASE)
    }

    /// A majority of the nodes answered that no leader reaches them (a check
    /// that began at `from`): the jobs may run on until `from + length`,
    /// though no leader renewed the lease (see [`crate::outage`]).
    pub fn extend_by_peers(&self, from: Instant, length: Duration) {
        self.extend(from + length, false);
    }

    fn extend(&self, until: Instant, from_leader: bool) {
        let expiry = {
            let Ok(mut lease) = self.inner.lock() else {
                return;
            };
            if from_leader {
                lease.leader_contact = Some(Instant::now());
            }
            if lease.expires.is_none_or(|e| until > e) {
                lease.expires = Some(until);
            }
            lease.expires
        };
        self.expiry.send_if_modified(|published| {
            let changed = *published != expiry;
            *published = expiry;
            changed
        });
    }

    /// True when no lease is held now: never renewed, or run out. It stays
    /// lapsed until it is renewed, so an attempt launched after fencing (a
    /// launch can arrive before the next acknowledgement) is fenced too.
    pub fn lapsed(&self) -> bool {
        self.inner
            .lock()
            .map_or(true, |l| l.expires.is_none_or(|e| Instant::now() > e))
    }

    /// Whether this agent ever held a lease (a leader welcomed it, or its
    /// peers extended one).
    pub fn ever_held(&self) -> bool {
        self.inner.lock().is_ok_and(|l| l.expires.is_some())
    }

    /// Whether a leader acknowledged this agent within `window`.
    pub fn reaches_leader(&self, window: Duration) -> bool {
        self.inner
            .lock()
            .is_ok_and(|l| l.leader_contact.is_some_and(|at| at.elapsed() < window))
    }

    /// Follows the instant the lease runs out (`None`: never held).
    pub fn expiry(&self) -> watch::Receiver<Option<Instant>> {
        self.expiry.subscribe()
    }
}

/// What the fencing watchdog does on one of its ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fencing {
    /// The lease holds: nothing.
    Nothing,
    /// Kill whatever the node holds, without a word: the lease was never
    /// held (what a new agent holds is an earlier agent's ending
    /// attempts), or the lapse was announced already.
    Quietly,
    /// Kill whatever the node holds, and say so (log it, count a fencing):
    /// the lease lapsed with attempts running.
    Announced,
}

/// The fencing watchdog's memory between ticks: whether this lapse was
/// announced.
#[derive(Debug, Default)]
pub struct FencingWatchdog {
    announced: bool,
}

impl FencingWatchdog {
    /// One tick: `lapsed` and `ever_held` are the lease's, `holds` whether
    /// the node holds attempts. Every tick of a lapsed lease fences, so an
    /// attempt launched since is killed too.
    pub fn tick(&mut self, lapsed: bool, ever_held: bool, holds: bool) -> Fencing {
        if !lapsed {
            self.announced = false;
            return Fencing::Nothing;
        }
        if !self.announced && ever_held && holds {
            self.announced = true;
            return Fencing::Announced;
        }
        Fencing::Quietly
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lapsed_lease_fences_on_every_tick_and_is_announced_once_per_lapse() {
        let mut watchdog = FencingWatchdog::default();
        // A new agent: no lease yet, an earlier agent's attempts held.
        assert_eq!(watchdog.tick(true, false, true), Fencing::Quietly);
        assert_eq!(watchdog.tick(false, true, true), Fencing::Nothing);
        assert_eq!(watchdog.tick(true, true, false), Fencing::Quietly);
        assert_eq!(watchdog.tick(true, true, true), Fencing::Announced);
        assert_eq!(watchdog.tick(true, true, true), Fencing::Quietly);
        assert_eq!(watchdog.tick(false, true, true), Fencing::Nothing);
        assert_eq!(watchdog.tick(true, true, true), Fencing::Announced);
    }

    #[test]
    fn a_lease_is_held_only_between_a_renewal_and_its_end() {
        let lease = Lease::default();
        assert!(lease.lapsed(), "never renewed: nothing may run under it");
        assert!(!lease.ever_held(), "but it never lapsed either");
        lease.renew(Instant::now(), Duration::from_secs(10));
        assert!(!lease.lapsed());
        assert!(lease.ever_held());
        let old = Lease::default();
        let Some(long_ago) = Instant::now().checked_sub(Duration::from_secs(11)) else {
            return;
        };
        old.renew(long_ago, Duration::from_secs(10));
        assert!(old.lapsed(), "a lapsed lease stays lapsed until renewed");
        assert!(old.ever_held(), "and it did lapse");
        old.renew(Instant::now(), Duration::from_secs(10));
        assert!(!old.lapsed());
    }

    #[test]
    fn peers_extend_the_lease_but_only_a_leader_counts_as_reached() {
        let lease = Lease::default();
        let expiry = lease.expiry();
        let now = Instant::now();
        lease.renew(now, Duration::from_secs(10));
        assert!(lease.reaches_leader(Duration::from_secs(5)));
        // A shorter extension leaves the lease as it was.
        lease.extend_by_peers(now, Duration::from_secs(3));
        assert_eq!(*expiry.borrow(), Some(now + Duration::from_secs(10)));
        lease.extend_by_peers(now + Duration::from_secs(9), Duration::from_secs(3));
        assert_eq!(*expiry.borrow(), Some(now + Duration::from_secs(12)));
        let unreached = Lease::default();
        unreached.extend_by_peers(now, Duration::from_secs(3));
        assert!(!unreached.lapsed());
        assert!(!unreached.reaches_leader(Duration::from_secs(5)));
    }

    #[test]
    fn an_older_renewal_never_shortens_the_lease() {
        let lease = Lease::default();
        let expiry = lease.expiry();
        let now = Instant::now();
        lease.renew(now, Duration::from_secs(10));
        assert_eq!(*expiry.borrow(), Some(now + Duration::from_secs(10)));
        if let Some(earlier) = now.checked_sub(Duration::from_secs(1)) {
            lease.renew(earlier, Duration::from_secs(10));
        }
        assert_eq!(*expiry.borrow(), Some(now + Duration::from_secs(10)));
    }
}
