//! Applying one committed command so that a bug in apply cannot stop the
//! cluster. Apply is meant to be total (the state machine's property tests
//! feed it generated and damaged commands), but if it ever panics, every
//! replica panics at the same entry, and again on every replay: the group
//! would stop for good. Here a panic instead becomes the same refusal on every
//! replica: the command is refused with an error that names the entry and asks
//! for a bug report; what it changed before the panic stays, identically on
//! every replica (apply is deterministic), so replicas still agree.

use std::panic::{AssertUnwindSafe, catch_unwind};

use corral_state::Rejection;

use crate::types::LogId;

/// Runs `apply` for the command of entry `at`, turning a panic into a refusal.
pub fn apply_total<T>(
    at: &LogId,
    apply: impl FnOnce() -> Result<T, Rejection>,
) -> Result<T, Rejection> {
    match catch_unwind(AssertUnwindSafe(apply)) {
        Ok(result) => result,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_string());
            tracing::error!(
                entry = %at,
                panic = what,
                "applying a committed command panicked: a bug in corral; the command is \
                 refused on every replica and the cluster goes on"
            );
            Err(Rejection::InvalidRequest(format!(
                "corral could not apply this command (log entry {at}: {what}); this is a bug \
                 in corral, please report it with the controllers' logs"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use openraft::CommittedLeaderId;

    use super::*;

    #[test]
    fn a_panic_becomes_the_same_refusal_and_a_result_passes_through() {
        let at = LogId::new(CommittedLeaderId::new(3, 1), 42);
        assert_eq!(apply_total(&at, || Ok::<_, Rejection>(7)), Ok(7));
        let refused = Rejection::UnknownJob(corral_state::ids::JobId(5));
        assert_eq!(
            apply_total(&at, || Err::<u32, _>(refused.clone())),
            Err(refused)
        );
        let first = apply_total(&at, || -> Result<u32, Rejection> {
            panic!("index out of range");
        });
        let second = apply_total(&at, || -> Result<u32, Rejection> {
            panic!("index out of range");
        });
        assert_eq!(first, second, "every replica gets the same outcome");
        let Err(Rejection::InvalidRequest(message)) = first else {
            panic!("not a refusal: {first:?}");
        };
        assert!(message.contains("index out of range"), "{message}");
        assert!(message.contains("42"), "{message}");
        let formatted = apply_total(&at, || -> Result<u32, Rejection> {
            panic!("job {} vanished", 9);
        });
        assert!(format!("{formatted:?}").contains("job 9 vanished"));
    }
}
