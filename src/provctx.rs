//! Provider instances: the per-instance context handed to OpenSSL and the lookups from the
//! pointers the core passes back. It sits below the operations and the C ABI, which take
//! their instance from here, and below `provider`, which makes and lists the instances.

use crate::error::KaeError;
use crate::ffi::core::Failure;
use crate::ffi::digest::{Md, Rng};
use crate::ffi::encode::{cipher_available, CoreBio, CoreOut, Pkey};
use crate::ffi::fork::ForkRwLock;
use crate::ffi::libctx::{ChildLibCtx, LibCtx};
use crate::ffi::params::OwnedParams;
use crate::ffi::provider::PrivateDefault;
use crate::ffi::rand::Drbg;
use crate::ffi::sys::*;
use crate::ffi::table::Table;
use crate::ffi::Core;
use crate::rsa::libcrypto::Digest;
use crate::settings::Config;
use core::ffi::{c_int, c_void, CStr};
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Arc, Mutex};

/// Per-instance provider state; `provctx` handed to OpenSSL is an `Arc<ProvCtx>` raw pointer.
pub struct ProvCtx {
    pub core: Core,
    /// kae's own library context: a child of the application's (`OSSL_LIB_CTX_new_child`),
    /// so fetches and random numbers use the application's providers without treating the
    /// core's opaque context as a library context. Freed at teardown.
    pub libctx: ChildLibCtx,
    /// This instance's slot in [`INSTANCES`] (selects its keymgmt `load` functions).
    pub slot: usize,
    /// The running core's version (its `openssl-version` parameter): behaviour that differs
    /// between OpenSSL releases follows it.
    pub core_version: crate::core_version::CoreVersion,
    pub config: Config,
    /// The default provider we loaded (None with `load-default = no`). It lives in a private
    /// library context of ours, so its RSA never competes with kae's in the application's
    /// context; everything else it offers is re-listed under `provider=kae`.
    pub private_default: Option<PrivateDefault>,
    /// Algorithm tables of the default provider re-labelled `provider=kae`, per operation.
    pub(crate) proxied: Mutex<HashMap<c_int, ProxyTable>>,
}

/// A copy of one of the default provider's algorithm tables with our property strings
/// (`provider/relist.rs` fills it), or kae's table merged with such a copy.
pub(crate) struct ProxyTable {
    pub(crate) algs: Table<OSSL_ALGORITHM>,
    pub(crate) _props: Vec<CString>,
}

/// Provider contexts by the pointer the core passes back to us. With the default provider
/// loaded, that pointer is the default provider's own context (see `OSSL_provider_init`).
/// Fork-safe: a forked child keeps its instances, and a lookup another parent thread was in
/// at the fork never blocks the child.
pub(crate) static REGISTRY: ForkRwLock<Vec<(usize, Arc<ProvCtx>)>> = ForkRwLock::new(Vec::new());

fn lookup(p: *mut c_void) -> Option<Arc<ProvCtx>> {
    let reg = REGISTRY.read();
    reg.iter()
        .find(|(k, _)| *k == p as usize)
        .map(|(_, v)| v.clone())
}

/// Provider instances by slot. keymgmt `load` carries no provider context, so each slot has
/// its own `load` functions (`abi::keymgmt`'s `load::<K, SLOT>`): a key decoded in one library
/// context is attached to the kae instance of that context, never to another one.
pub const MAX_INSTANCES: usize = 8;
pub(crate) static INSTANCES: ForkRwLock<[Option<std::sync::Weak<ProvCtx>>; MAX_INSTANCES]> =
    ForkRwLock::new([const { None }; MAX_INSTANCES]);

/// The live instance in `slot`.
pub fn instance(slot: usize) -> Option<Arc<ProvCtx>> {
    let g = INSTANCES.read();
    g.get(slot)?.as_ref()?.upgrade()
}

/// A free slot (one whose instance is gone), or None when MAX_INSTANCES are alive.
pub(crate) fn free_slot() -> Option<usize> {
    let g = INSTANCES.read();
    g.iter()
        .position(|w| w.as_ref().is_none_or(|w| w.strong_count() == 0))
}

impl ProvCtx {
    /// The instance the core knows by the provider context pointer `p` (None: not ours). The
    /// pointer is only compared with the registry's keys, never dereferenced.
    pub fn clone_arc(p: *mut c_void) -> Option<Arc<ProvCtx>> {
        if p.is_null() {
            return None;
        }
        lookup(p)
    }

    /// Fetches digest `name` in this instance's child library context; a failure names it.
    pub fn fetch_md(&self, name: &str, props: Option<&str>) -> Result<Digest, Failure> {
        Digest::fetch_with(name, props, |name, props| {
            Md::fetch(self.libctx.libctx(), name, props)
        })
        .map_err(|e| Failure::with(e, format!("digest={name}")))
    }

    /// A new DRBG of type `name` in the private default context, chained to its primary.
    pub fn private_drbg(&self, name: &CStr) -> Result<Drbg, KaeError> {
        let default = self
            .private_default
            .ok_or(KaeError::DefaultProviderUnavailable)?;
        Drbg::new(default.libctx(), name)
    }

    /// The settable (or gettable) parameters of the private default context's DRBG `name`.
    pub fn private_drbg_params(
        &self,
        name: &CStr,
        settable: bool,
    ) -> Result<Option<&'static [OSSL_PARAM]>, KaeError> {
        let default = self
            .private_default
            .ok_or(KaeError::DefaultProviderUnavailable)?;
        Drbg::described(default.libctx(), name, settable)
    }

    /// Whether kae loaded the default provider into its private library context.
    pub fn has_private_default(&self) -> bool {
        self.private_default.is_some()
    }

    /// `EVP_PKEY_fromdata` of `params` in the private default context (kae's encoders
    /// encode there).
    pub fn private_pkey(
        &self,
        key_type: &CStr,
        selection: c_int,
        params: &OwnedParams,
    ) -> Result<Pkey, KaeError> {
        let default = self
            .private_default
            .ok_or(KaeError::DefaultProviderUnavailable)?;
        Pkey::from_params(default.libctx(), key_type, selection, params)
    }

    /// Whether cipher `name` can be fetched with `props` in the private default context
    /// (the default library context with `load-default = no`).
    pub fn private_cipher_available(&self, name: &CStr, props: Option<&CStr>) -> bool {
        cipher_available(self.private_default_libctx(), name, props)
    }

    /// A BIO writing to the application's output of the current `encode` call.
    pub fn core_bio<'o>(&self, out: &'o mut CoreOut<'_>) -> Result<CoreBio<'o>, KaeError> {
        CoreBio::new(self.libctx, out)
    }

    /// Whether the running core is at least `major.minor`.
    pub fn core_at_least(&self, major: u32, minor: u32) -> bool {
        self.core_version.at_least(major, minor)
    }

    /// kae's private library context holding the default provider (libcrypto's default
    /// one with `load-default = no`).
    pub fn private_default_libctx(&self) -> LibCtx {
        self.private_default.map_or(LibCtx::DEFAULT, |d| d.libctx())
    }

    /// Where kae's own random numbers (blinding, key generation) come from: the private
    /// default provider's DRBG chain when kae loaded it, else the application's providers
    /// (through our child context). Never a generator that kae itself lists: that would
    /// make kae depend on how the application configured its own randomness.
    pub fn rand_libctx(&self) -> LibCtx {
        self.private_default
            .map_or(self.libctx.libctx(), |d| d.libctx())
    }

    /// The public DRBG of [`rand_libctx`](Self::rand_libctx), borrowed from this instance.
    pub fn rng(&self) -> Rng<'_> {
        Rng::new(self.rand_libctx(), false)
    }

    /// The private DRBG of [`rand_libctx`](Self::rand_libctx), borrowed from this instance.
    pub fn private_rng(&self) -> Rng<'_> {
        Rng::new(self.rand_libctx(), true)
    }
}
