//! The agent's lease: the right to keep jobs running, renewed by each heartbeat
//! a leader acknowledges (from when the heartbeat was sent). An agent whose
//! lease lapses kills its jobs (fencing) before the leader, which waits the
//! lease and a margin, may declare the node down and give its GPUs away.
//!
//! The lease guards against partitions, not failovers: an agent that loses its
//! leader finds the new one within a second or two (see [`crate::link`]) and
//! renews the lease there, so a leader change costs no running job.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// The lease length until a leader says otherwise.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(10);

/// When the lease was last renewed (shared by the link, which renews it, and
/// the fencing watchdog).
#[derive(Debug, Clone)]
pub struct Lease {
    inner: Arc<Mutex<LeaseState>>,
    /// The instant the lease runs out, published on each renewal.
    expiry: Arc<watch::Sender<Option<Instant>>>,
}

#[derive(Debug)]
struct LeaseState {
    renewed: Option<Instant>,
    length: Duration,
}

impl Default for Lease {
    fn default() -> Self {
        Lease {
            inner: Arc::new(Mutex::new(LeaseState {
                renewed: None,
                length: DEFAULT_LEASE,
            })),
            expiry: Arc::new(watch::channel(None).0),
        }
    }
}

impl Lease {
    /// Renews the lease from `from` (when the acknowledged heartbeat was sent)
    /// for `length`. An older renewal never shortens a newer one.
    pub fn renew(&self, from: Instant, length: Duration) {
        let expiry = {
            let Ok(mut lease) = self.inner.lock() else {
                return;
            };
            lease.length = length;
            if lease.renewed.is_none_or(|r| from > r) {
                lease.renewed = Some(from);
            }
            lease.renewed.map(|r| r + lease.length)
        };
        self.expiry.send_if_modified(|published| {
            let changed = *published != expiry;
            *published = expiry;
            changed
        });
    }

    /// True when no lease is held now: never renewed, or not renewed within its
    /// length. It stays lapsed until a leader renews it, so an attempt launched
    /// after fencing (a launch can arrive before the next acknowledgement) is
    /// fenced too.
    pub fn lapsed(&self) -> bool {
        self.inner
            .lock()
            .map_or(true, |l| l.renewed.is_none_or(|r| r.elapsed() > l.length))
    }

    /// Follows the instant the lease runs out (`None`: never held).
    pub fn expiry(&self) -> watch::Receiver<Option<Instant>> {
        self.expiry.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_held_only_between_a_renewal_and_its_end() {
        let lease = Lease::default();
        assert!(lease.lapsed(), "never renewed: nothing may run under it");
        lease.renew(Instant::now(), Duration::from_secs(10));
        assert!(!lease.lapsed());
        let old = Lease::default();
        let Some(long_ago) = Instant::now().checked_sub(Duration::from_secs(11)) else {
            return;
        };
        old.renew(long_ago, Duration::from_secs(10));
        assert!(old.lapsed(), "a lapsed lease stays lapsed until renewed");
        old.renew(Instant::now(), Duration::from_secs(10));
        assert!(!old.lapsed());
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
