//! Idempotency keys: a retried submission with the same key creates nothing new
//! and answers with the first one's jobs, for the same user only, until the key
//! expires with leader time.

#![allow(clippy::unwrap_used)]

mod support;

use corral_state::command::{Command, Outcome};
use corral_state::submit_keys::SUBMIT_KEY_RETENTION_MS;
use corral_state::time::Timestamp;
use corral_state::{ClusterState, JobId};
use support::*;

fn keyed(state: &mut ClusterState, who: &str, key: &str, when: Timestamp) -> Outcome {
    let mut spec = spec(who, 1, 1);
    spec.user = who.to_string();
    state
        .apply(Command::Submit {
            spec,
            batch: script(),
            by: user(who),
            key: Some(key.to_string()),
            at: when,
        })
        .unwrap()
}

#[test]
fn a_retry_with_the_same_key_changes_nothing_and_answers_the_same_jobs() {
    let mut s = cluster(2, 8);
    let first = keyed(&mut s, "alice", "k-1", at(1));
    let digest = s.digest();
    let again = keyed(&mut s, "alice", "k-1", at(1));
    assert_eq!(first, again);
    assert_eq!(
        s.digest(),
        digest,
        "a duplicate submission changed the state"
    );
    assert_eq!(s.jobs().len(), 1);
}

#[test]
fn keys_are_per_user_and_per_key() {
    let mut s = cluster(2, 8);
    let a = keyed(&mut s, "alice", "k", at(1));
    let b = keyed(&mut s, "bob", "k", at(1));
    let c = keyed(&mut s, "alice", "other", at(1));
    assert_ne!(a, b);
    assert_ne!(a, c);
    assert_eq!(s.jobs().len(), 3);
}

#[test]
fn a_key_expires_after_the_retention_and_then_submits_again() {
    let mut s = cluster(2, 8);
    let first = keyed(&mut s, "alice", "k", at(1));
    let retention_s = SUBMIT_KEY_RETENTION_MS / 1000;
    ok(
        &mut s,
        Command::Tick {
            at: at(retention_s),
        },
    );
    assert_eq!(s.submit_keys().len(), 1, "expired a key early");
    ok(
        &mut s,
        Command::Tick {
            at: at(1 + retention_s),
        },
    );
    assert!(s.submit_keys().is_empty(), "kept a key past its retention");
    let second = keyed(&mut s, "alice", "k", at(2 + retention_s));
    assert_ne!(first, second);
    assert_eq!(
        second,
        Outcome::Submitted {
            first: JobId(2),
            count: 1
        }
    );
}

#[test]
fn an_oversized_key_is_refused_and_changes_nothing() {
    let mut s = cluster(2, 8);
    let before = s.digest();
    let result = s.apply(Command::Submit {
        spec: spec("alice", 1, 1),
        batch: script(),
        by: user("alice"),
        key: Some("x".repeat(129)),
        at: at(1),
    });
    let err = result.unwrap_err().to_string();
    assert!(err.contains("idempotency key"), "{err}");
    assert_eq!(s.digest(), before);
}
