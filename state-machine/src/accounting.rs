//! GPU usage accounting: raw GPU-milliseconds per user, account and (QOS,
//! account), and the decayed usage that fair-share reads.
//!
//! Decay is `U * 2^(-elapsed / half_life)`, computed in 32-bit fixed point with
//! integer arithmetic only, so every replica gets the same bits on every platform.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// Usage of one user, account or (QOS, account).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// All GPU-milliseconds ever charged; never decays.
    pub gpu_ms: u64,
    /// GPU-milliseconds with exponential decay applied (fair-share's U).
    pub decayed_gpu_ms: u64,
}

impl Usage {
    fn charge(&mut self, gpu_ms: u64) {
        self.gpu_ms = self.gpu_ms.saturating_add(gpu_ms);
        self.decayed_gpu_ms = self.decayed_gpu_ms.saturating_add(gpu_ms);
    }

    fn decay(&mut self, factor_q32: u64) {
        self.decayed_gpu_ms = apply_factor(self.decayed_gpu_ms, factor_q32);
    }
}

/// Usage tables.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accounting {
    /// By user.
    pub by_user: BTreeMap<String, Usage>,
    /// By account (direct charges only; the scheduler sums up the tree).
    pub by_account: BTreeMap<String, Usage>,
    /// By (QOS, account), for QOS GPU-minute limits.
    pub by_qos_account: BTreeMap<(String, String), Usage>,
    /// When decay was last applied.
    pub decayed_at: Timestamp,
}

impl Accounting {
    /// Charges `gpu_ms` to a user, an account and, if any, the (QOS, account) pair.
    pub fn charge(&mut self, user: &str, account: &str, qos: Option<&str>, gpu_ms: u64) {
        if gpu_ms == 0 {
            return;
        }
        self.by_user
            .entry(user.to_string())
            .or_default()
            .charge(gpu_ms);
        self.by_account
            .entry(account.to_string())
            .or_default()
            .charge(gpu_ms);
        if let Some(qos) = qos {
            self.by_qos_account
                .entry((qos.to_string(), account.to_string()))
                .or_default()
                .charge(gpu_ms);
        }
    }

    /// Decays every decayed usage from `decayed_at` to `now`.
    pub fn decay_to(&mut self, now: Timestamp, half_life_seconds: u64) {
        let elapsed_ms = now.ms_since(self.decayed_at);
        if elapsed_ms == 0 {
            return;
        }
        self.decayed_at = now;
        let factor = decay_factor_q32(elapsed_ms, half_life_seconds.saturating_mul(1000));
        let tables = self
            .by_user
            .values_mut()
            .chain(self.by_account.values_mut())
            .chain(self.by_qos_account.values_mut());
        for usage in tables {
            usage.decay(factor);
        }
    }
}

/// 1.0 in the Q32 fixed-point format of decay factors.
pub const ONE_Q32: u64 = 1 << 32;

/// `2^(-2^-i)` in Q32 for i = 1..=32, rounded to nearest.
const HALVING_ROOTS_Q32: [u64; 32] = [
    3037000500, 3611622603, 3938502376, 4112874773, 4202935003, 4248701965, 4271771996, 4283353945,
    4289156690, 4292061010, 4293513907, 4294240540, 4294603903, 4294785595, 4294876445, 4294921870,
    4294944583, 4294955939, 4294961618, 4294964457, 4294965876, 4294966586, 4294966941, 4294967119,
    4294967207, 4294967252, 4294967274, 4294967285, 4294967290, 4294967293, 4294967295, 4294967295,
];

/// `2^(-elapsed/half_life)` in Q32. A half-life of zero means no decay memory at all
/// (the factor is zero for any elapsed time).
pub fn decay_factor_q32(elapsed_ms: u64, half_life_ms: u64) -> u64 {
    if half_life_ms == 0 {
        return 0;
    }
    let whole_halvings = elapsed_ms / half_life_ms;
    if whole_halvings >= 64 {
        return 0;
    }
    let remainder = u128::from(elapsed_ms % half_life_ms);
    // The fractional number of halvings, as 32 binary digits.
    let fraction_q32 = ((remainder << 32) / u128::from(half_life_ms)) as u64;
    let mut factor = ONE_Q32;
    for (bit, root) in HALVING_ROOTS_Q32.iter().enumerate() {
        if fraction_q32 & (1 << (31 - bit)) != 0 {
            factor = mul_q32(factor, *root);
        }
    }
    factor >> whole_halvings
}

fn mul_q32(a: u64, b: u64) -> u64 {
    ((u128::from(a) * u128::from(b) + (1 << 31)) >> 32) as u64
}

fn apply_factor(value: u64, factor_q32: u64) -> u64 {
    ((u128::from(value) * u128::from(factor_q32)) >> 32) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factor_matches_floating_point_closely() {
        let half_life_ms = 7 * 24 * 3600 * 1000;
        for elapsed_ms in [
            0,
            1,
            999,
            60_000,
            3_600_000,
            half_life_ms / 3,
            half_life_ms,
            5 * half_life_ms + 17,
        ] {
            let exact = (-(elapsed_ms as f64) / half_life_ms as f64).exp2();
            let fixed = decay_factor_q32(elapsed_ms, half_life_ms) as f64 / ONE_Q32 as f64;
            assert!(
                (exact - fixed).abs() < 1e-8,
                "elapsed {elapsed_ms}: {exact} vs {fixed}"
            );
        }
    }

    #[test]
    fn one_half_life_halves_usage() {
        let mut acct = Accounting::default();
        acct.charge("alice", "nlp", Some("normal"), 1_000_000);
        acct.decay_to(Timestamp::from_secs(3600), 3600);
        let usage = acct.by_user["alice"];
        assert_eq!(usage.gpu_ms, 1_000_000, "raw usage never decays");
        assert!(
            (499_999..=500_000).contains(&usage.decayed_gpu_ms),
            "{usage:?}"
        );
        assert_eq!(acct.by_qos_account[&("normal".into(), "nlp".into())], usage);
    }

    #[test]
    fn decay_is_far_beyond_64_half_lives_zero() {
        assert_eq!(decay_factor_q32(u64::MAX, 1), 0);
        assert_eq!(decay_factor_q32(10, 0), 0);
        assert_eq!(decay_factor_q32(0, 10), ONE_Q32);
    }

    #[test]
    fn halving_roots_are_the_true_roots() {
        for (i, root) in HALVING_ROOTS_Q32.iter().enumerate() {
            let exact = (-(0.5f64.powi(i as i32 + 1))).exp2() * ONE_Q32 as f64;
            assert!((exact - *root as f64).abs() <= 1.0, "root {i}");
        }
    }
}
