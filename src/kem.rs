//! RSA KEM: RSASVE (NIST SP 800-56B Rev. 2 §7.2.1), the `OSSL_OP_KEM` operation for kae's RSA
//! keys, as safe Rust behind the [`Kem`] trait; its C side is `abi::kem`.
//!
//! Encapsulation draws a random secret z with 1 < z < n − 1 from kae's private random
//! generator (the owning instance's child library context, as blinding does) and returns
//! z^e mod n through the public operation. Decapsulation is the raw private operation (RSADP:
//! blinding, CRT, the fault check with e) on a ciphertext of exactly k bytes.
//!
//! The observable rules follow the default provider of the running core
//! (`providers/implementations/kem/rsa_kem.c`): the only operation is "RSASVE" (matched without
//! regard to case); before 3.5 a context has no operation until one is set and then both calls
//! return -2, from 3.5 on RSASVE is the default; size queries with a NULL output report k for
//! both lengths; a non-NULL `*outlen` below k is refused; decapsulation refuses any input
//! length but k and, from 4.0 on, the degenerate ciphertexts c ≤ 1 and c ≥ n − 1; RSA-PSS keys
//! are refused at init; a public key can be set up for decapsulation (as the default provider
//! allows) and fails at the operation.

use crate::abi::kem::Kem;
use crate::abi::key::KeyObj;
use crate::abi::{CtxParams, Duplicate, OpCtx, Table};
use crate::error::KaeError;
use crate::ffi::bn::{arith, BigNum};
use crate::ffi::core::Failure;
use crate::ffi::params::{desc, ParamTable, Params, ParamsMut, END};
use crate::ffi::sys::*;
use crate::provctx::ProvCtx;
use crate::rsa::{KeyType, RsaKey};
use core::cmp::Ordering;
use std::sync::{Arc, LazyLock};

/// The value of the `operation` parameter (OSSL_KEM_PARAM_OPERATION_RSASVE).
const RSASVE: &str = "RSASVE";

#[derive(Clone)]
pub struct KemCtx {
    prov: Arc<ProvCtx>,
    key: Option<Arc<RsaKey>>,
    /// RSASVE selected (the only operation there is). False only on cores before 3.5 until
    /// the caller sets it.
    rsasve: bool,
}

impl KemCtx {
    fn key(&self) -> Result<&Arc<RsaKey>, KaeError> {
        self.key.as_ref().ok_or(KaeError::MissingKey)
    }

    /// Both inits: the private key is needed by decapsulate itself, as in the default provider.
    fn init(&mut self, key: Option<&KeyObj>, params: &Params<'_>) -> Result<(), Failure> {
        let obj = key.ok_or(KaeError::MissingKey)?;
        if obj.key.kind == KeyType::RsaPss {
            return Err(Failure::with(
                KaeError::PssRestricted,
                "RSA-PSS keys cannot be used with RSASVE",
            ));
        }
        if !obj.key.has_public() {
            return Err(KaeError::MissingPublicKey.into());
        }
        self.key = Some(obj.key.clone());
        self.set_params(params)
    }

    fn set_operation(&mut self, params: &Params<'_>) -> Result<(), Failure> {
        if let Some(p) = params.locate(c"operation") {
            if p.data_type() != OSSL_PARAM_UTF8_STRING {
                return Err(Failure::with(
                    KaeError::InvalidParam,
                    "operation must be a UTF8 string",
                ));
            }
            let v = p.get_utf8()?;
            if !v.eq_ignore_ascii_case(RSASVE) {
                return Err(Failure::with(
                    KaeError::InvalidParam,
                    format!("operation={v} (only RSASVE)"),
                ));
            }
            self.rsasve = true;
        }
        Ok(())
    }

    /// RSASVE.GENERATE: z uniform with 1 < z < n − 1 into `secret`, z^e mod n into `ct`
    /// (both k bytes).
    fn generate(&self, ct: &mut [u8], secret: &mut [u8]) -> Result<(), Failure> {
        let key = self.key()?;
        // 2 + (uniform in [0, n − 3)), from the private DRBG of the key's library context.
        let ctx = key.bn_ctx()?;
        let mut range = key.n()?.dup(false)?;
        arith::sub_word(&mut range, 3)?;
        let mut r = BigNum::new_secret()?;
        arith::priv_rand_range(&mut r, &range, &ctx)?;
        let mut z = BigNum::new_secret()?;
        arith::add(&mut z, &r, &BigNum::from_u64(2)?)?;
        z.write_be_padded(secret)?;
        crate::offload::public_op(key, secret, ct)?;
        Ok(())
    }

    /// RSASVE.RECOVER: the private operation on a ciphertext of exactly k bytes.
    fn recover(&self, ct: &[u8], out: &mut [u8]) -> Result<(), Failure> {
        let key = self.key()?;
        let k = key.size();
        if ct.len() != k {
            return Err(Failure::with(
                KaeError::InvalidLength,
                format!(
                    "ciphertext of {} bytes; the key needs exactly {k}",
                    ct.len()
                ),
            ));
        }
        let c = BigNum::from_be_bytes(ct, false)?;
        let n = key.n()?;
        if self.prov.core_at_least(4, 0) {
            // OpenSSL 4.0 refuses the degenerate ciphertexts 0, 1 and n − 1 (SP 800-56B
            // §7.1.2.1: 1 < c < n − 1). The ciphertext is public.
            let mut n1 = n.dup(false)?;
            arith::sub_word(&mut n1, 1)?;
            if c.cmp_vartime(&BigNum::from_u64(1)?) != Ordering::Greater {
                return Err(Failure::with(KaeError::DataTooSmall, "ciphertext ≤ 1"));
            }
            if c.cmp_vartime(&n1) != Ordering::Less {
                return Err(Failure::with(
                    KaeError::DataTooLargeForModulus,
                    "ciphertext ≥ n − 1",
                ));
            }
        }
        if c.cmp_vartime(n) != Ordering::Less {
            return Err(KaeError::DataTooLargeForModulus.into());
        }
        crate::offload::private_op(key, ct, out)?;
        Ok(())
    }
}

impl OpCtx for KemCtx {
    fn new(prov: Arc<ProvCtx>) -> Result<Self, Failure> {
        // OpenSSL 3.5 made RSASVE the default; earlier cores start with no operation.
        let rsasve = prov.core_at_least(3, 5);
        Ok(KemCtx {
            prov,
            key: None,
            rsasve,
        })
    }

    fn provider(&self) -> &ProvCtx {
        &self.prov
    }
}

impl Duplicate for KemCtx {
    fn dup(&self) -> Result<Self, Failure> {
        Ok(self.clone())
    }
}

static GETTABLE: ParamTable<1> = ParamTable([END]);

static SETTABLE: ParamTable<2> = ParamTable([desc(c"operation", OSSL_PARAM_UTF8_STRING), END]);

impl CtxParams for KemCtx {
    fn set_params(&mut self, params: &Params<'_>) -> Result<(), Failure> {
        self.set_operation(params)
    }

    /// Nothing to report (the default provider's list is empty outside FIPS).
    fn get_params(&mut self, _params: &mut ParamsMut<'_>) -> Result<(), Failure> {
        Ok(())
    }

    fn settable(_prov: Option<&ProvCtx>) -> &'static [OSSL_PARAM] {
        &SETTABLE.0
    }

    fn gettable(_prov: Option<&ProvCtx>) -> &'static [OSSL_PARAM] {
        &GETTABLE.0
    }
}

impl Kem for KemCtx {
    fn encapsulate_init(
        &mut self,
        key: Option<&KeyObj>,
        params: &Params<'_>,
    ) -> Result<(), Failure> {
        self.init(key, params)
    }

    fn decapsulate_init(
        &mut self,
        key: Option<&KeyObj>,
        params: &Params<'_>,
    ) -> Result<(), Failure> {
        self.init(key, params)
    }

    fn operation_selected(&self) -> Result<(), Failure> {
        if self.rsasve {
            Ok(())
        } else {
            Err(Failure::with(
                KaeError::OperationNotInitialized,
                "no KEM operation set (set operation=RSASVE)",
            ))
        }
    }

    fn size(&self) -> Result<usize, Failure> {
        Ok(self.key()?.size())
    }

    fn encapsulate(&mut self, ct: &mut [u8], secret: &mut [u8]) -> Result<(), Failure> {
        self.generate(ct, secret)
    }

    fn decapsulate(&mut self, ct: &[u8], secret: &mut [u8]) -> Result<(), Failure> {
        self.recover(ct, secret)
    }
}

pub static RSA_KEM: LazyLock<Table<OSSL_DISPATCH>> =
    LazyLock::new(crate::abi::kem::table::<KemCtx>);
