//! The composite algorithms of OpenSSL 3.4+ (`RSA-SHA256` and the like), listed only on
//! 3.4+ cores.
//!
//! As the default provider's "sigalgs" (providers/implementations/signature/rsa_sig.c in 3.5):
//! PKCS#1 v1.5 with the algorithm's digest. Init refuses RSA-PSS keys; the digest, the padding
//! and the PSS parameters cannot be changed (set_ctx_params takes only `signature`, in
//! verify-message, and the settable list is empty otherwise, so libcrypto refuses
//! EVP_PKEY_CTX_set_rsa_padding & co.); sign/verify work on a digest of the digest's size,
//! sign-message/verify-message hash the message; verify-recover returns the digest. There is
//! no digest-sign and no digest context parameter access. After a final, the operation is over
//! (update and final are refused), and after an update the one-shot call is refused.

use super::{SigCtx, GETTABLE};
use crate::abi::key::KeyObj;
use crate::abi::signature::{KeyTypes, Operation, SignatureAlgorithm, SignatureCtx};
use crate::abi::{Duplicate, OpCtx, Table};
use crate::error::KaeError;
use crate::ffi::core::Failure;
use crate::ffi::digest::MdCtx;
use crate::ffi::params::{desc, ParamTable, Params, ParamsMut, END};
use crate::ffi::sys::*;
use crate::provctx::ProvCtx;
use crate::rsa::padding::pss::SaltLen;
use crate::rsa::padding::DigestId;
use crate::rsa::{KeyType, PadMode};
use core::ffi::CStr;
use std::sync::{Arc, LazyLock};
use zeroize::Zeroizing;

/// One composite algorithm: its names (the default provider's, so the name map agrees), its
/// digest, and the digest name the default provider reports for it.
pub struct SigAlg {
    pub(super) names: &'static CStr,
    pub(super) md: DigestId,
    pub(super) md_name: &'static CStr,
    pub(super) descr: &'static CStr,
}

/// The default provider's composite RSA algorithms (3.5 `providers/defltprov.c`,
/// `prov/names.h`), in its order; kae's PKCS#1 signature supports each of these digests.
static SIGALGS: [SigAlg; 13] = [
    SigAlg {
        names: c"RSA-RIPEMD160:ripemd160WithRSA:1.3.36.3.3.1.2",
        md: DigestId::Ripemd160,
        md_name: c"RIPEMD160",
        descr: c"kae RSA-RIPEMD160 signature",
    },
    SigAlg {
        names: c"RSA-SHA1:RSA-SHA-1:sha1WithRSAEncryption:1.2.840.113549.1.1.5",
        md: DigestId::Sha1,
        md_name: c"SHA1",
        descr: c"kae RSA-SHA1 signature",
    },
    SigAlg {
        names: c"RSA-SHA2-224:RSA-SHA224:sha224WithRSAEncryption:1.2.840.113549.1.1.14",
        md: DigestId::Sha224,
        md_name: c"SHA2-224",
        descr: c"kae RSA-SHA2-224 signature",
    },
    SigAlg {
        names: c"RSA-SHA2-256:RSA-SHA256:sha256WithRSAEncryption:1.2.840.113549.1.1.11",
        md: DigestId::Sha256,
        md_name: c"SHA2-256",
        descr: c"kae RSA-SHA2-256 signature",
    },
    SigAlg {
        names: c"RSA-SHA2-384:RSA-SHA384:sha384WithRSAEncryption:1.2.840.113549.1.1.12",
        md: DigestId::Sha384,
        md_name: c"SHA2-384",
        descr: c"kae RSA-SHA2-384 signature",
    },
    SigAlg {
        names: c"RSA-SHA2-512:RSA-SHA512:sha512WithRSAEncryption:1.2.840.113549.1.1.13",
        md: DigestId::Sha512,
        md_name: c"SHA2-512",
        descr: c"kae RSA-SHA2-512 signature",
    },
    SigAlg {
        names: c"RSA-SHA2-512/224:RSA-SHA512-224:sha512-224WithRSAEncryption:1.2.840.113549.1.1.15",
        md: DigestId::Sha512_224,
        md_name: c"SHA2-512/224",
        descr: c"kae RSA-SHA2-512/224 signature",
    },
    SigAlg {
        names: c"RSA-SHA2-512/256:RSA-SHA512-256:sha512-256WithRSAEncryption:1.2.840.113549.1.1.16",
        md: DigestId::Sha512_256,
        md_name: c"SHA2-512/256",
        descr: c"kae RSA-SHA2-512/256 signature",
    },
    SigAlg {
        names: c"RSA-SHA3-224:id-rsassa-pkcs1-v1_5-with-sha3-224:2.16.840.1.101.3.4.3.13",
        md: DigestId::Sha3_224,
        md_name: c"SHA3-224",
        descr: c"kae RSA-SHA3-224 signature",
    },
    SigAlg {
        names: c"RSA-SHA3-256:id-rsassa-pkcs1-v1_5-with-sha3-256:2.16.840.1.101.3.4.3.14",
        md: DigestId::Sha3_256,
        md_name: c"SHA3-256",
        descr: c"kae RSA-SHA3-256 signature",
    },
    SigAlg {
        names: c"RSA-SHA3-384:id-rsassa-pkcs1-v1_5-with-sha3-384:2.16.840.1.101.3.4.3.15",
        md: DigestId::Sha3_384,
        md_name: c"SHA3-384",
        descr: c"kae RSA-SHA3-384 signature",
    },
    SigAlg {
        names: c"RSA-SHA3-512:id-rsassa-pkcs1-v1_5-with-sha3-512:2.16.840.1.101.3.4.3.16",
        md: DigestId::Sha3_512,
        md_name: c"SHA3-512",
        descr: c"kae RSA-SHA3-512 signature",
    },
    SigAlg {
        names: c"RSA-SM3:sm3WithRSAEncryption:1.2.156.10197.1.504",
        md: DigestId::Sm3,
        md_name: c"SM3",
        descr: c"kae RSA-SM3 signature",
    },
];

impl SigCtx {
    /// Init of composite `alg` for `op` (sign, sign-message, verify, verify-message,
    /// verify-recover).
    fn sigalg_init(
        &mut self,
        alg: &'static SigAlg,
        key: Option<&KeyObj>,
        params: &Params<'_>,
        op: Operation,
    ) -> Result<(), Failure> {
        self.init_key(key, op)?;
        // The default provider applies the init parameters (only `signature` counts) first.
        self.sigalg_set_params(params)?;
        if self.key()?.kind == KeyType::RsaPss {
            return Err(Failure::with(
                KaeError::PssRestricted,
                "composite RSA signature algorithms do not take RSA-PSS keys",
            ));
        }
        let md = self.prov.fetch_md(alg.md.name(), self.propq.as_deref())?;
        let mut ctx = MdCtx::new()?;
        ctx.init(md.md())?;
        self.md = Some(md);
        self.mgf1 = None; // follows the digest, as in the default provider
        self.pad = PadMode::Pkcs1;
        self.saltlen = SaltLen::AutoDigestMax; // what the default provider reports
        self.md_ctx = Some(ctx);
        self.md_locked = true;
        self.sigalg = Some(alg);
        Ok(())
    }

    /// set_ctx_params of a composite: `signature` in verify-message; anything else is
    /// ignored (the settable list does not offer it).
    fn sigalg_set_params(&mut self, params: &Params<'_>) -> Result<(), Failure> {
        if self.op != Operation::VerifyMessage {
            return Ok(());
        }
        if let Some(p) = params.locate(c"signature") {
            self.sig = None;
            if p.data_type() != OSSL_PARAM_OCTET_STRING {
                return Err(Failure::with(
                    KaeError::InvalidParam,
                    "signature must be an octet string",
                ));
            }
            self.sig = Some(p.get_octets()?.to_vec());
        }
        Ok(())
    }

    fn message_update(&mut self, data: &[u8]) -> Result<(), Failure> {
        let ctx = self
            .md_ctx
            .as_mut()
            .ok_or(KaeError::OperationNotInitialized)?;
        if !self.allow_update {
            return Err(Failure::with(
                KaeError::OperationNotInitialized,
                "update call out of order (the operation has ended)",
            ));
        }
        self.allow_oneshot = false;
        ctx.update(data)?;
        Ok(())
    }

    /// The final digest; ends the operation (no update, final or one-shot call after it).
    fn message_digest(&mut self) -> Result<Zeroizing<Vec<u8>>, Failure> {
        self.check_final()?;
        let h = self.digest_final()?;
        self.allow_update = false;
        self.allow_final = false;
        self.allow_oneshot = false;
        Ok(h)
    }

    /// Refuses a final call before init or once the operation has ended.
    fn check_final(&self) -> Result<(), Failure> {
        if self.md_ctx.is_none() {
            return Err(KaeError::OperationNotInitialized.into());
        }
        if !self.allow_final {
            return Err(Failure::with(
                KaeError::OperationNotInitialized,
                "final call out of order (the operation has ended)",
            ));
        }
        Ok(())
    }

    fn check_oneshot(&self) -> Result<(), Failure> {
        if self.allow_oneshot {
            Ok(())
        } else {
            Err(Failure::with(
                KaeError::OperationNotInitialized,
                "one-shot call out of order (after update or final)",
            ))
        }
    }

    fn verify_message_final(&mut self) -> Result<(), Failure> {
        let h = self.message_digest()?;
        let sig = self.sig.clone().unwrap_or_default();
        self.verify_tbs(&sig, &h)
    }
}

static SIGALG_SETTABLE: ParamTable<2> =
    ParamTable([desc(c"signature", OSSL_PARAM_OCTET_STRING), END]);

static SIGALG_KEY_TYPES: KeyTypes = KeyTypes::one(c"RSA");

/// A context of the composite algorithm `SIGALGS[I]`.
pub struct SigAlgCtx<const I: usize>(SigCtx);

impl<const I: usize> OpCtx for SigAlgCtx<I> {
    fn new(prov: Arc<ProvCtx>) -> Result<Self, Failure> {
        SigCtx::new(prov).map(SigAlgCtx)
    }

    fn provider(&self) -> &ProvCtx {
        &self.0.prov
    }
}

impl<const I: usize> Duplicate for SigAlgCtx<I> {
    fn dup(&self) -> Result<Self, Failure> {
        self.0.dup().map(SigAlgCtx)
    }
}

impl<const I: usize> SignatureCtx for SigAlgCtx<I> {
    fn set_properties(&mut self, propq: Option<&str>) {
        self.0.set_properties(propq)
    }

    fn sign_size(&self) -> Result<usize, Failure> {
        self.0.sign_size()
    }

    fn verify_recover_size(&self) -> Result<usize, Failure> {
        self.0.verify_recover_size()
    }

    fn verify_recover(&mut self, sig: &[u8]) -> Result<Zeroizing<Vec<u8>>, Failure> {
        SignatureCtx::verify_recover(&mut self.0, sig)
    }
}

impl<const I: usize> SignatureAlgorithm for SigAlgCtx<I> {
    fn init(
        &mut self,
        op: Operation,
        key: Option<&KeyObj>,
        params: &Params<'_>,
    ) -> Result<(), Failure> {
        self.0.sigalg_init(&SIGALGS[I], key, params, op)
    }

    fn oneshot_sign_size(&self) -> Result<usize, Failure> {
        self.0.check_oneshot()?;
        if self.0.op == Operation::SignMessage {
            self.0.check_final()?;
        }
        self.0.sign_size()
    }

    fn oneshot_input(&mut self, tbs: &[u8]) -> Result<Zeroizing<Vec<u8>>, Failure> {
        if self.0.op == Operation::SignMessage {
            self.0.message_update(tbs)?;
            return self.0.message_digest();
        }
        Ok(Zeroizing::new(tbs.to_vec()))
    }

    fn sign_digest(&mut self, digest: &[u8], sig: &mut [u8]) -> Result<usize, Failure> {
        self.0.sign_tbs(digest, sig)?;
        Ok(sig.len())
    }

    fn message_update(&mut self, data: &[u8]) -> Result<(), Failure> {
        self.0.message_update(data)
    }

    /// A size query leaves the running digest alone.
    fn sign_message_final_size(&self) -> Result<usize, Failure> {
        self.0.check_final()?;
        self.0.sign_size()
    }

    fn end_message(&mut self) -> Result<Zeroizing<Vec<u8>>, Failure> {
        self.0.message_digest()
    }

    fn oneshot_verify(&mut self, sig: &[u8], tbs: &[u8]) -> Result<(), Failure> {
        self.0.check_oneshot()?;
        if self.0.op == Operation::VerifyMessage {
            self.0.sig = Some(sig.to_vec());
            self.0.message_update(tbs)?;
            return self.0.verify_message_final();
        }
        self.0.verify_tbs(sig, tbs)
    }

    fn verify_message_final(&mut self) -> Result<(), Failure> {
        self.0.verify_message_final()
    }

    fn get_params(&mut self, params: &mut ParamsMut<'_>) -> Result<(), Failure> {
        Ok(self.0.get_sig_params(params)?)
    }

    fn set_params(&mut self, params: &Params<'_>) -> Result<(), Failure> {
        self.0.sigalg_set_params(params)
    }

    fn gettable(_prov: Option<&ProvCtx>) -> &'static [OSSL_PARAM] {
        &GETTABLE.0
    }

    /// `signature` in verify-message, nothing otherwise (NULL, as the default provider).
    fn settable(ctx: Option<&Self>) -> Option<&'static [OSSL_PARAM]> {
        match ctx {
            Some(c) if c.0.op == Operation::VerifyMessage => Some(&SIGALG_SETTABLE.0),
            _ => None,
        }
    }

    fn key_types() -> &'static KeyTypes {
        &SIGALG_KEY_TYPES
    }
}

macro_rules! algorithm_tables {
    ($($i:literal),*) => {
        [$(LazyLock::new(crate::abi::signature::algorithm_table::<SigAlgCtx<$i>>)),*]
    };
}

static SIGALG_TABLES: [LazyLock<Table<OSSL_DISPATCH>>; 13] =
    algorithm_tables!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12);

/// (names, dispatch table, description) of every composite algorithm, for the provider's
/// algorithm list on 3.4+ cores.
pub fn sigalg_tables(
) -> impl Iterator<Item = (&'static CStr, &'static Table<OSSL_DISPATCH>, &'static CStr)> {
    SIGALGS
        .iter()
        .zip(SIGALG_TABLES.iter())
        .map(|(a, t)| (a.names, &**t, a.descr))
}

#[cfg(test)]
mod sigalg_tests {
    use super::*;

    /// Each composite's digest is the one its names say, and each table's init functions are
    /// bound to their own entry (a table pointing at the wrong digest would sign with it).
    #[test]
    fn composite_names_and_digests_agree() {
        for (i, a) in SIGALGS.iter().enumerate() {
            let names = a.names.to_str().unwrap();
            let first = names.split(':').next().unwrap();
            let md = DigestId::from_name(a.md_name.to_str().unwrap()).unwrap();
            assert_eq!(md, a.md, "{first}: reported digest name");
            let want = first.strip_prefix("RSA-").unwrap();
            assert_eq!(
                DigestId::from_name(want)
                    .or_else(|| DigestId::from_name(&want.replace("SHA2-", "SHA-"))),
                Some(a.md),
                "{first}: names vs digest"
            );
            assert!(
                a.md.digest_info_prefix().is_some(),
                "{first}: PKCS#1 needs a DigestInfo"
            );
            let t = &SIGALG_TABLES[i];
            let init =
                t.0.iter()
                    .find(|d| d.function_id == OSSL_FUNC_SIGNATURE_SIGN_INIT)
                    .and_then(|d| d.function)
                    .unwrap();
            let want_init = sigalg_init_fn(i);
            assert_eq!(init as usize, want_init as usize, "{first}: table {i}");
        }
        assert_eq!(sigalg_tables().count(), SIGALGS.len());
    }

    /// The sign-init function of a table made for composite `i`.
    fn sigalg_init_fn(i: usize) -> unsafe extern "C" fn() {
        macro_rules! pick {
            ($($n:literal),*) => {
                match i {
                    $($n => crate::abi::signature::algorithm_table::<SigAlgCtx<$n>>(),)*
                    _ => unreachable!(),
                }
            };
        }
        pick!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
            .0
            .iter()
            .find(|d| d.function_id == OSSL_FUNC_SIGNATURE_SIGN_INIT)
            .and_then(|d| d.function)
            .unwrap()
    }
}
