//! The RSA key object kae owns. It is filled only through OSSL_PARAM import or our own key
//! generation: nothing here depends on OpenSSL's private RSA structure.

use crate::error::{KaeError, KaeResult};
use crate::ffi::bn::{BigNum, BnCtx, MontCtx};
use crate::ffi::fork::ForkSafeMutex;
use crate::ffi::libctx::LibCtx;
use crate::rsa::ct_limbs::{BigNumLimbs, Limbs, Modulus};
use crate::rsa::padding::pss::SaltLen;
use crate::rsa::padding::DigestId;
use core::ffi::CStr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// Smallest modulus accepted for any operation (OpenSSL's RSA_MIN_MODULUS_BITS).
pub const MIN_MODULUS_BITS: usize = 512;
/// Largest modulus accepted (OpenSSL's OPENSSL_RSA_MAX_MODULUS_BITS).
pub const MAX_MODULUS_BITS: usize = 16384;
/// Above this modulus size the public exponent is limited to 64 bits (OpenSSL's rule,
/// which bounds the cost of a public operation an attacker can request).
pub const SMALL_MODULUS_BITS: usize = 3072;
pub const MAX_PUBEXP_BITS: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyType {
    Rsa,
    RsaPss,
}

impl KeyType {
    pub fn name(self) -> &'static str {
        match self {
            KeyType::Rsa => "RSA",
            KeyType::RsaPss => "RSA-PSS",
        }
    }

    /// The names OpenSSL knows this key type by (name, alias, OID), under which kae lists
    /// the algorithms for it.
    pub const fn algorithm_names(self) -> &'static CStr {
        match self {
            KeyType::Rsa => c"RSA:rsaEncryption:1.2.840.113549.1.1.1",
            KeyType::RsaPss => c"RSA-PSS:RSASSA-PSS:1.2.840.113549.1.1.10",
        }
    }
}

/// RSASSA-PSS key restrictions (RFC 4055 §3.1 parameters carried by an RSA-PSS key).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PssRestrictions {
    pub md: DigestId,
    pub mgf1_md: DigestId,
    /// Minimum salt length for signatures made with this key.
    pub min_saltlen: usize,
}

impl PssRestrictions {
    /// The defaults of RFC 8017 A.2.3: SHA-1, MGF1-SHA-1, 20-byte salt.
    pub fn defaults() -> Self {
        PssRestrictions {
            md: DigestId::Sha1,
            mgf1_md: DigestId::Sha1,
            min_saltlen: 20,
        }
    }
    pub fn salt(&self) -> SaltLen {
        SaltLen::Fixed(self.min_saltlen)
    }
}

/// Precomputed Montgomery contexts for the modulus and (when present) the two primes:
/// libcrypto's (for its exponentiations) and kae's constant-time limb form (`ct_limbs`, for
/// blinding, reductions and the CRT recombination).
pub struct MontCache {
    pub n: MontCtx,
    pub ln: Modulus,
    pub crt: Option<CrtCache>,
}

/// Per-prime contexts and qInv in Montgomery form (qInv·R mod p, as limbs).
pub struct CrtCache {
    pub p: MontCtx,
    pub q: MontCtx,
    pub lp: Modulus,
    pub lq: Modulus,
    pub qinv_mont: Limbs,
    /// p and q have the same bit length (libcrypto's two-at-once exponentiation applies).
    pub same_bits: bool,
}

/// A blinding pair kept in Montgomery form as limbs of n's width: `a = r^e · R`,
/// `ai = r^-1 · R` (mod n). `pid` is the process that made it: a forked child must not
/// replay its parent's sequence of r.
pub struct Blinding {
    pub a: Limbs,
    pub ai: Limbs,
    pub uses: u32,
    pub pid: u32,
}

/// Limb count of a number whose size is public (a modulus, a prime's width).
pub(crate) fn words_of(bn: &BigNum) -> usize {
    crate::rsa::ct_limbs::declassify_usize(bn.num_bits()).div_ceil(64)
}

pub struct RsaKey {
    pub kind: KeyType,
    pub n: Option<BigNum>,
    pub e: Option<BigNum>,
    pub d: Option<BigNum>,
    /// Prime factors p, q (and further primes of multi-prime keys).
    pub primes: Vec<BigNum>,
    /// CRT exponents d mod (p-1), d mod (q-1), ...
    pub exps: Vec<BigNum>,
    /// CRT coefficients q^-1 mod p, ...
    pub coeffs: Vec<BigNum>,
    /// RSA-PSS restrictions (None: unrestricted).
    pub pss: Option<PssRestrictions>,
    mont: OnceLock<Result<MontCache, KaeError>>,
    /// Pooled blinding pairs; a forked child starts with none (see `ForkSafeMutex`).
    pub(crate) blindings: ForkSafeMutex<Vec<Blinding>>,
    /// Blinding pairs made for this key so far (test observable).
    pub(crate) blindings_made: AtomicU32,
    /// Where blinding factors and prime tests draw their random numbers: the library context
    /// of the kae instance that owns the key, or the default one (keys made outside a provider
    /// instance, in unit tests).
    rand_source: LibCtx,
    /// What a backend attached to this key (an HPRE session, a lane layout): made at first
    /// use, freed with the key, rebuilt in a forked child (`key_slot`).
    pub backend_state: crate::rsa::key_slot::KeySlot,
}

impl RsaKey {
    pub fn empty(kind: KeyType) -> Self {
        RsaKey {
            kind,
            n: None,
            e: None,
            d: None,
            primes: Vec::new(),
            exps: Vec::new(),
            coeffs: Vec::new(),
            pss: None,
            mont: OnceLock::new(),
            blindings: ForkSafeMutex::default(),
            blindings_made: AtomicU32::new(0),
            rand_source: LibCtx::DEFAULT,
            backend_state: Default::default(),
        }
    }

    /// Attaches the key to a provider instance's library context (see the field).
    pub fn set_rand_source(&mut self, source: LibCtx) {
        self.rand_source = source;
    }

    /// A secure scratch context drawing random numbers from the key's library context.
    pub fn bn_ctx(&self) -> KaeResult<BnCtx> {
        BnCtx::new_for(self.rand_source)
    }

    pub fn has_public(&self) -> bool {
        self.n.is_some() && self.e.is_some()
    }

    /// A usable private key needs d: the CRT fault check falls back to it, implicit
    /// rejection derives its key from it, and OpenSSL refuses private operations without it.
    pub fn has_private(&self) -> bool {
        self.n.is_some() && self.d.is_some()
    }

    /// Two-prime CRT components present.
    pub fn has_crt(&self) -> bool {
        self.primes.len() == 2 && self.exps.len() == 2 && self.coeffs.len() == 1
    }

    pub fn n(&self) -> KaeResult<&BigNum> {
        self.n.as_ref().ok_or(KaeError::MissingPublicKey)
    }

    pub fn e(&self) -> KaeResult<&BigNum> {
        self.e.as_ref().ok_or(KaeError::MissingPublicKey)
    }

    pub fn bits(&self) -> usize {
        self.n.as_ref().map_or(0, |n| n.num_bits())
    }

    /// Modulus length in bytes (the size of every signature and ciphertext).
    pub fn size(&self) -> usize {
        self.bits().div_ceil(8)
    }

    /// NIST SP 800-56B / SP 800-57 security strength for the modulus size (the same table
    /// and formula OpenSSL uses), in bits.
    pub fn security_bits(&self) -> u32 {
        security_bits_for(self.bits())
    }

    /// Montgomery contexts, built once per key on first use.
    pub fn mont(&self) -> KaeResult<&MontCache> {
        let r = self.mont.get_or_init(|| {
            let ctx = BnCtx::new()?;
            let n_bn = self.n()?;
            // libcrypto's context first: it refuses even moduli, which the limb form needs.
            let n = MontCtx::new(n_bn, &ctx)?;
            let ln = Modulus::new(n_bn.to_limbs(words_of(n_bn))?);
            let crt = if self.has_crt() {
                let (pb, qb) = (&self.primes[0], &self.primes[1]);
                let p = MontCtx::new(pb, &ctx)?;
                let q = MontCtx::new(qb, &ctx)?;
                let lp = Modulus::new(pb.to_limbs(words_of(pb))?);
                let lq = Modulus::new(qb.to_limbs(words_of(qb))?);
                // qInv may come unreduced from an import: reduce it, then to Montgomery form.
                let qinv = &self.coeffs[0];
                // A valid qInv (< p) fits in p's width; a wider imported one takes its own.
                let qinv_l = match qinv.to_limbs(lp.width()) {
                    Ok(l) => l,
                    Err(_) => qinv.to_limbs(words_of(qinv))?,
                };
                let qinv_mont = lp.to_mont(&lp.reduce(&qinv_l));
                let same_bits = crate::rsa::ct_limbs::declassify_usize(pb.num_bits())
                    == crate::rsa::ct_limbs::declassify_usize(qb.num_bits());
                Some(CrtCache {
                    p,
                    q,
                    lp,
                    lq,
                    qinv_mont,
                    same_bits,
                })
            } else {
                None
            };
            Ok(MontCache { n, ln, crt })
        });
        r.as_ref().map_err(|e| *e)
    }

    /// Test hook for the secret-taint check (`examples/ctgrind.rs`): adds a blinding pair
    /// `a = r^e·R`, `ai = r^-1·R` (mod n, Montgomery form) that the next private operation
    /// takes, so the check can hand it pairs whose bytes it has marked secret. The pair is
    /// kept as limbs of n's width (the taint follows the bytes through `BN_bn2lebinpad`).
    #[doc(hidden)]
    pub fn push_blinding_pair(&self, a: BigNum, ai: BigNum) -> KaeResult<()> {
        let w = self.mont()?.ln.width();
        let pair = Blinding {
            a: a.to_limbs(w)?,
            ai: ai.to_limbs(w)?,
            uses: 0,
            pid: std::process::id(),
        };
        self.blindings.lock().push(pair);
        Ok(())
    }

    /// Blinding pairs made for this key so far (each private operation takes a pooled pair
    /// of this process or makes one). For tests.
    #[doc(hidden)]
    pub fn blinding_pairs_made(&self) -> u32 {
        self.blindings_made.load(Ordering::Relaxed)
    }

    /// Copy of the selected parts (for keymgmt dup).
    pub fn dup(&self, public: bool, private: bool, params: bool) -> KaeResult<RsaKey> {
        let mut k = RsaKey::empty(self.kind);
        k.rand_source = self.rand_source;
        if public || private {
            k.n = self.n.as_ref().map(|b| b.dup(false)).transpose()?;
            k.e = self.e.as_ref().map(|b| b.dup(false)).transpose()?;
        }
        if private {
            k.d = self.d.as_ref().map(|b| b.dup(true)).transpose()?;
            k.primes = self
                .primes
                .iter()
                .map(|b| b.dup(true))
                .collect::<KaeResult<_>>()?;
            k.exps = self
                .exps
                .iter()
                .map(|b| b.dup(true))
                .collect::<KaeResult<_>>()?;
            k.coeffs = self
                .coeffs
                .iter()
                .map(|b| b.dup(true))
                .collect::<KaeResult<_>>()?;
        }
        if params {
            k.pss = self.pss;
        }
        Ok(k)
    }

    /// Cheap structural checks done on import: sizes in range, n odd, e odd and > 1.
    pub fn check_public_shape(&self) -> KaeResult<()> {
        let n = self.n()?;
        let e = self.e()?;
        let bits = n.num_bits();
        if n.is_negative() || !n.is_odd() || bits < 2 {
            return Err(KaeError::InvalidModulus);
        }
        if bits > MAX_MODULUS_BITS {
            return Err(KaeError::KeyTooLarge);
        }
        if e.is_negative()
            || !e.is_odd()
            || e.is_one()
            || e.cmp_vartime(n) != core::cmp::Ordering::Less
        {
            return Err(KaeError::BadPublicExponent);
        }
        if bits > SMALL_MODULUS_BITS && e.num_bits() > MAX_PUBEXP_BITS {
            return Err(KaeError::BadPublicExponent);
        }
        Ok(())
    }
}

/// SP 800-56B rev2 Appendix D / SP 800-57: security strength of an RSA modulus.
pub fn security_bits_for(bits: usize) -> u32 {
    // Canonical values listed in the standards, then the SP 800-56B approximation
    // E = (1.923 · cbrt(n·ln2) · (ln(n·ln2))^(2/3) − 4.69) / ln2, rounded to the nearest multiple of
    // 8 and capped, as OpenSSL computes it.
    match bits {
        2048 => return 112,
        3072 => return 128,
        4096 => return 152,
        6144 => return 176,
        7680 => return 192,
        8192 => return 200,
        15360 => return 256,
        b if b < 8 => return 0,
        _ => {}
    }
    let cap = if bits <= 7680 {
        192
    } else if bits <= 15360 {
        256
    } else {
        1024
    };
    let x = bits as f64 * core::f64::consts::LN_2;
    let e = (1.923 * x.cbrt() * x.ln().powf(2.0 / 3.0) - 4.69) / core::f64::consts::LN_2;
    let v = ((e.max(0.0) + 4.0) as u32) & !7; // nearest multiple of 8
    v.min(cap)
}

#[cfg(test)]
mod tests {
    use super::security_bits_for;

    #[test]
    fn security_bits_match_the_standard_table() {
        assert_eq!(security_bits_for(1024), 80);
        assert_eq!(security_bits_for(2048), 112);
        assert_eq!(security_bits_for(3072), 128);
        assert_eq!(security_bits_for(4096), 152);
        assert_eq!(security_bits_for(7680), 192);
        assert_eq!(security_bits_for(15360), 256);
        // Values OpenSSL 3.0 reports for non-canonical sizes.
        assert_eq!(security_bits_for(2047), 112);
        assert_eq!(security_bits_for(1536), 96);
        assert_eq!(security_bits_for(512), 56);
        assert_eq!(security_bits_for(1025), 80);
        assert_eq!(security_bits_for(4), 0);
    }
}
