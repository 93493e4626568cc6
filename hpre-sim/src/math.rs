//! The simulated device's arithmetic: RSA with the `openssl` crate's `BigNum` (test-only, not
//! constant time), and the key material a session holds.

use crate::abi::{STATUS_IN_EPARA, STATUS_OUT_EPARA, WD_RSA_SIGN, WD_RSA_VERIFY};
use core::cmp::Ordering;
use core::ffi::c_int;
use openssl::bn::{BigNum, BigNumContext};
use openssl::error::ErrorStack;

/// Key bytes (big-endian, as the caller gave them), overwritten with zeros when dropped.
#[derive(Clone, Default)]
pub struct Secret(pub Vec<u8>);

impl Drop for Secret {
    fn drop(&mut self) {
        for b in self.0.iter_mut() {
            // SAFETY: `b` is a valid, exclusive reference to a byte of the vector; the
            // volatile write only keeps the compiler from eliding the wipe.
            unsafe { core::ptr::write_volatile(b, 0) };
        }
    }
}

/// CRT private key parts.
#[derive(Clone, Default)]
pub struct CrtKey {
    pub p: Secret,
    pub q: Secret,
    pub dp: Secret,
    pub dq: Secret,
    pub qinv: Secret,
}

/// What one session holds: a public key `(e, n)`, CRT private key parts, or both. Every key
/// byte is wiped when it is dropped or replaced.
#[derive(Clone, Default)]
pub struct KeyMaterial {
    pub public: Option<(Secret, Secret)>,
    pub crt: Option<CrtKey>,
}

impl KeyMaterial {
    /// Wipes and forgets every stored key.
    pub fn zeroize(&mut self) {
        self.public = None;
        self.crt = None;
    }

    /// Whether the keys `op` needs are set.
    pub fn ready_for(&self, op: u8) -> bool {
        match op {
            WD_RSA_SIGN => self.crt.is_some(),
            WD_RSA_VERIFY => self.public.is_some(),
            _ => false,
        }
    }
}

/// A computed result: `key_bytes` big-endian bytes, and whether the input was not below the
/// modulus (API misuse the hardware does not detect).
pub struct Computed {
    pub out: Vec<u8>,
    pub input_not_below_n: bool,
}

/// Runs `op` on `src` (`key_bytes` big-endian bytes) with `key`. An error is a completion status
/// (67 when the arithmetic failed, e.g. on a zeroized key; 66 when the result does not fit).
pub fn compute(op: u8, key: &KeyMaterial, src: &[u8], key_bytes: usize) -> Result<Computed, c_int> {
    // The host process (an OpenSSL application) has initialised libcrypto; BIGNUM needs no
    // more. Without this, the `openssl` crate's first BigNum would call OPENSSL_init_ssl(),
    // which loads the OpenSSL config file: re-entrant when the caller is inside a provider
    // that is being loaded from that config.
    // SAFETY: skipping the crate's one-time init is sound on OpenSSL 3, whose libcrypto
    // initialises itself on first use; only BIGNUM functions are used here.
    unsafe { openssl_sys::assume_init() };
    let inner = || -> Result<Result<Computed, c_int>, ErrorStack> {
        let mut ctx = BigNumContext::new()?;
        let c = BigNum::from_slice(src)?;
        let (r, n) = match (op, key) {
            (
                WD_RSA_VERIFY,
                KeyMaterial {
                    public: Some((e, n)),
                    ..
                },
            ) => {
                let e = BigNum::from_slice(&e.0)?;
                let n = BigNum::from_slice(&n.0)?;
                let mut r = BigNum::new()?;
                r.mod_exp(&c, &e, &n, &mut ctx)?;
                (r, n)
            }
            (WD_RSA_SIGN, KeyMaterial { crt: Some(k), .. }) => {
                let p = BigNum::from_slice(&k.p.0)?;
                let q = BigNum::from_slice(&k.q.0)?;
                let dp = BigNum::from_slice(&k.dp.0)?;
                let dq = BigNum::from_slice(&k.dq.0)?;
                let qinv = BigNum::from_slice(&k.qinv.0)?;
                let mut m1 = BigNum::new()?;
                m1.mod_exp(&c, &dp, &p, &mut ctx)?;
                let mut m2 = BigNum::new()?;
                m2.mod_exp(&c, &dq, &q, &mut ctx)?;
                let mut diff = BigNum::new()?;
                diff.mod_sub(&m1, &m2, &p, &mut ctx)?;
                let mut h = BigNum::new()?;
                h.mod_mul(&qinv, &diff, &p, &mut ctx)?;
                let mut hq = BigNum::new()?;
                hq.checked_mul(&h, &q, &mut ctx)?;
                let mut m = BigNum::new()?;
                m.checked_add(&m2, &hq)?;
                let mut n = BigNum::new()?;
                n.checked_mul(&p, &q, &mut ctx)?;
                (m, n)
            }
            _ => return Ok(Err(STATUS_IN_EPARA)),
        };
        let input_not_below_n = c.ucmp(&n) != Ordering::Less;
        Ok(match r.to_vec_padded(key_bytes as i32) {
            Ok(out) => Ok(Computed {
                out,
                input_not_below_n,
            }),
            Err(_) => Err(STATUS_OUT_EPARA),
        })
    };
    inner().unwrap_or(Err(STATUS_IN_EPARA))
}

/// KAE_SIM_COMPUTE=0: the "result" is the input, unchanged.
pub fn echo(src: &[u8]) -> Computed {
    Computed {
        out: src.to_vec(),
        input_not_below_n: false,
    }
}
