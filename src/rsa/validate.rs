//! Key validation: the public shape, the private parts' consistency with n and e, the
//! primes, and the pairwise round trip (which needs the operations, hence apart from the key).

use crate::error::{KaeError, KaeResult};
use crate::ffi::bn::{arith, BigNum};
use crate::rsa::RsaKey;

impl RsaKey {
    /// Full validation: public shape, private components consistent with n and e, primes
    /// prime, and (for keypairs) a sign/verify round trip.
    pub fn validate(
        &self,
        check_public: bool,
        check_private: bool,
        pairwise: bool,
    ) -> KaeResult<()> {
        if check_public || pairwise {
            self.check_public_shape()?;
        }
        if check_private {
            let d = self.d.as_ref().ok_or(KaeError::MissingPrivateKey)?;
            if d.is_zero()
                || d.is_negative()
                || d.cmp_vartime(self.n()?) != core::cmp::Ordering::Less
            {
                return Err(KaeError::InvalidKey);
            }
        }
        if pairwise {
            self.check_factors()?;
            super::ops::pairwise_test(self)?;
        }
        Ok(())
    }

    /// n = p·q, d·e ≡ 1 (mod λ(n)), dp/dq/qinv consistent, both primes prime.
    fn check_factors(&self) -> KaeResult<()> {
        if self.primes.is_empty() {
            // No factors: the round trip in pairwise_test is the only check possible.
            return Ok(());
        }
        if self.primes.len() != 2 {
            return Err(KaeError::UnsupportedPrimeCount);
        }
        let ctx = self.bn_ctx()?;
        let n = self.n()?;
        let e = self.e()?;
        let (p, q) = (&self.primes[0], &self.primes[1]);
        let mut t = BigNum::new_secret()?;
        arith::mul(&mut t, p, q, &ctx)?;
        if t.cmp_vartime(n) != core::cmp::Ordering::Equal {
            return Err(KaeError::InconsistentKey);
        }
        if !arith::is_prime(p, &ctx)? || !arith::is_prime(q, &ctx)? {
            return Err(KaeError::InconsistentKey);
        }
        let mut p1 = p.dup(true)?;
        arith::sub_word(&mut p1, 1)?;
        let mut q1 = q.dup(true)?;
        arith::sub_word(&mut q1, 1)?;
        if let Some(d) = &self.d {
            // d·e mod (p-1) == 1 and mod (q-1) == 1  ⇔  d·e ≡ 1 (mod λ(n)).
            for m in [&p1, &q1] {
                arith::mod_mul(&mut t, d, e, m, &ctx)?;
                if !t.is_one() {
                    return Err(KaeError::InconsistentKey);
                }
            }
        }
        if self.exps.len() == 2 && self.coeffs.len() == 1 {
            // dp·e ≡ 1 (mod p-1), dq·e ≡ 1 (mod q-1), qinv·q ≡ 1 (mod p).
            for (dx, m) in [(&self.exps[0], &p1), (&self.exps[1], &q1)] {
                arith::mod_mul(&mut t, dx, e, m, &ctx)?;
                if !t.is_one() {
                    return Err(KaeError::InconsistentKey);
                }
            }
            arith::mod_mul(&mut t, &self.coeffs[0], q, p, &ctx)?;
            if !t.is_one() {
                return Err(KaeError::InconsistentKey);
            }
        }
        Ok(())
    }
}
