//! kae's random generators (OSSL_OP_RAND): `CTR-DRBG`, `HASH-DRBG`, `HMAC-DRBG` for an
//! application that loads kae alone (`-provider kae`).
//!
//! Why not re-list the default provider's DRBGs: since OpenSSL 3.5 the library tells a DRBG
//! the name of the provider it came from (`provider-name`), and the DRBG then fetches its
//! cipher or digest from a provider of that name in its own provider's library context.
//! A default-provider DRBG listed under "kae" lives in kae's private context, which has no
//! "kae", so instantiation fails and every key generation and blinding with it.
//!
//! So each generator here is kae's own front: it owns one DRBG of the same type in kae's
//! private library context (the default provider loaded privately), chained to that
//! context's primary DRBG, and forwards every call to it through the public `EVP_RAND` API.
//! Parameters that name a provider or a property query of the application's context
//! (`provider-name`, `properties`) are not forwarded: they mean nothing in the private one.
//! The application's parent generator (its seed source) is not used: entropy comes from
//! the private context's own chain, which reseeds after `fork()` by itself.
//!
//! Safe Rust behind the [`Rand`] trait; its C side is `abi::rand`.

use crate::abi::rand::Rand;
use crate::abi::Table;
use crate::error::KaeError;
use crate::ffi::core::Failure;
use crate::ffi::params::{Params, ParamsMut};
use crate::ffi::rand::Drbg;
use crate::ffi::sys::*;
use crate::provctx::ProvCtx;
use core::ffi::CStr;
use std::sync::{Arc, LazyLock};

/// The generator types kae offers, by index (the const parameter of [`Front`]).
const NAMES: [&CStr; 3] = [c"CTR-DRBG", c"HASH-DRBG", c"HMAC-DRBG"];

/// Parameters never forwarded to the private generator (see the module docs).
const NOT_FORWARDED: [&CStr; 2] = [c"provider-name", c"properties"];

/// One application-visible generator of type `NAMES[ALG]`: the private DRBG it forwards to.
pub struct Front<const ALG: usize> {
    prov: Arc<ProvCtx>,
    drbg: Drbg,
}

impl<const ALG: usize> Rand for Front<ALG> {
    fn new(prov: Arc<ProvCtx>) -> Result<Self, Failure> {
        let drbg = prov.private_drbg(NAMES[ALG])?;
        Ok(Front { prov, drbg })
    }

    fn provider(&self) -> &ProvCtx {
        &self.prov
    }

    fn instantiate(
        &self,
        strength: u32,
        prediction_resistance: bool,
        personalization: Option<&[u8]>,
        params: &Params<'_>,
    ) -> Result<(), Failure> {
        let params = params.without(&NOT_FORWARDED);
        if self
            .drbg
            .instantiate(strength, prediction_resistance, personalization, &params)
        {
            Ok(())
        } else {
            Err(KaeError::RandomFailure.into())
        }
    }

    fn uninstantiate(&self) -> bool {
        self.drbg.uninstantiate()
    }

    fn generate(
        &self,
        out: &mut [u8],
        strength: u32,
        prediction_resistance: bool,
        addin: Option<&[u8]>,
    ) -> Result<(), Failure> {
        if self
            .drbg
            .generate(out, strength, prediction_resistance, addin)
        {
            Ok(())
        } else {
            Err(KaeError::RandomFailure.into())
        }
    }

    fn reseed(
        &self,
        prediction_resistance: bool,
        entropy: Option<&[u8]>,
        addin: Option<&[u8]>,
    ) -> bool {
        self.drbg.reseed(prediction_resistance, entropy, addin)
    }

    fn enable_locking(&self) -> bool {
        self.drbg.enable_locking()
    }

    fn verify_zeroization(&self) -> bool {
        self.drbg.verify_zeroization()
    }

    fn get_params(&self, params: &mut ParamsMut<'_>) -> bool {
        self.drbg.get_params(params)
    }

    fn set_params(&self, params: &Params<'_>) -> bool {
        self.drbg.set_params(&params.without(&NOT_FORWARDED))
    }

    /// The private generator type's own (its context may not exist yet).
    fn settable(prov: &ProvCtx) -> Result<Option<&'static [OSSL_PARAM]>, Failure> {
        Ok(prov.private_drbg_params(NAMES[ALG], true)?)
    }

    fn gettable(prov: &ProvCtx) -> Result<Option<&'static [OSSL_PARAM]>, Failure> {
        Ok(prov.private_drbg_params(NAMES[ALG], false)?)
    }
}

/// Dispatch tables, in the order of [`NAMES`].
pub static RAND_TABLES: [LazyLock<Table<OSSL_DISPATCH>>; 3] = [
    LazyLock::new(crate::abi::rand::table::<Front<0>>),
    LazyLock::new(crate::abi::rand::table::<Front<1>>),
    LazyLock::new(crate::abi::rand::table::<Front<2>>),
];

/// Whether the default provider's generator `names` is one kae offers itself.
pub fn is_kae_generator(names: &str) -> bool {
    names.split(':').any(|n| {
        NAMES
            .iter()
            .any(|k| k.to_bytes().eq_ignore_ascii_case(n.as_bytes()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drbg_names_are_kae_own() {
        assert!(is_kae_generator("CTR-DRBG"));
        assert!(is_kae_generator("HASH-DRBG"));
        assert!(is_kae_generator("hmac-drbg"));
        assert!(!is_kae_generator("SEED-SRC"));
        assert!(!is_kae_generator("TEST-RAND"));
        assert!(!is_kae_generator("JITTER"));
    }
}
