//! Keys: the owned `EVP_PKEY`, key generation, import and transfer between contexts, key
//! checks, and the cached key pairs shared by the per-size tests.

use std::collections::HashMap;
use std::ffi::{c_int, CString};
use std::fmt;
use std::ptr;
use std::sync::{Mutex, OnceLock};

use super::error::{clear_errors, cvt, take_errors, Res};
use super::ffi::{
    BN_free, EVP_PKEY_CTX_set_params, EVP_PKEY_check, EVP_PKEY_eq, EVP_PKEY_free,
    EVP_PKEY_fromdata, EVP_PKEY_fromdata_init, EVP_PKEY_get0_provider, EVP_PKEY_get0_type_name,
    EVP_PKEY_get_bits, EVP_PKEY_get_bn_param, EVP_PKEY_get_int_param, EVP_PKEY_get_security_bits,
    EVP_PKEY_get_size, EVP_PKEY_get_size_t_param, EVP_PKEY_is_a, EVP_PKEY_keygen,
    EVP_PKEY_keygen_init, EVP_PKEY_pairwise_check, EVP_PKEY_private_check, EVP_PKEY_public_check,
    EVP_PKEY_todata, EVP_PKEY_up_ref, BIGNUM, EVP_PKEY, EVP_PKEY_KEYPAIR, EVP_PKEY_PUBLIC_KEY,
    OSSL_LIB_CTX, OSSL_PARAM,
};
use super::params::{bn_to_vec, Params, ParamsBuilder};
use super::provider_load::{kae, provider_name, reference, Lib};
use super::util::{cstr_opt, strip_zeros};

impl Lib {
    /// Key generation in this context (`keytype` "RSA" or "RSA-PSS").
    pub fn keygen(&self, keytype: &str, params: &Params) -> Res<Pkey> {
        clear_errors();
        let ctx = self.new_ctx_from_name(keytype)?;
        unsafe {
            cvt(EVP_PKEY_keygen_init(ctx.0), "EVP_PKEY_keygen_init")?;
            cvt(
                EVP_PKEY_CTX_set_params(ctx.0, params.as_ptr()),
                "EVP_PKEY_CTX_set_params(keygen)",
            )?;
            let mut pk: *mut EVP_PKEY = ptr::null_mut();
            cvt(
                EVP_PKEY_keygen(ctx.0, &mut pk),
                &format!("EVP_PKEY_keygen [{}]", self.label),
            )?;
            let key = Pkey(pk);
            self.expect_key(&key, "keygen");
            Ok(key)
        }
    }

    /// Convenience: RSA key of `bits` bits (optionally with a public exponent).
    pub fn keygen_rsa(&self, bits: usize, e: Option<u64>) -> Res<Pkey> {
        let mut b = ParamsBuilder::new().size_t("bits", bits);
        if let Some(e) = e {
            b = b.bn("e", strip_zeros(&e.to_be_bytes()));
        }
        self.keygen("RSA", &b.build())
    }

    /// `EVP_PKEY_fromdata` in this context.
    pub fn import(&self, keytype: &str, selection: c_int, params: &Params) -> Res<Pkey> {
        clear_errors();
        let ctx = self.new_ctx_from_name(keytype)?;
        unsafe {
            cvt(EVP_PKEY_fromdata_init(ctx.0), "EVP_PKEY_fromdata_init")?;
            let mut pk: *mut EVP_PKEY = ptr::null_mut();
            cvt(
                EVP_PKEY_fromdata(ctx.0, &mut pk, selection, params.as_mut_ptr()),
                &format!("EVP_PKEY_fromdata [{}]", self.label),
            )?;
            let key = Pkey(pk);
            self.expect_key(&key, "fromdata");
            Ok(key)
        }
    }

    /// Copy a key (from any context) into this one via todata/fromdata.
    pub fn transfer(&self, key: &Pkey) -> Res<Pkey> {
        let sel = if key.has_private() {
            EVP_PKEY_KEYPAIR
        } else {
            EVP_PKEY_PUBLIC_KEY
        };
        let params = key.export(sel)?;
        self.import(&key.type_name(), sel, &params)
    }
}

/// An owned `EVP_PKEY`.
pub struct Pkey(pub *mut EVP_PKEY);

unsafe impl Send for Pkey {}
unsafe impl Sync for Pkey {}

impl Drop for Pkey {
    fn drop(&mut self) {
        unsafe { EVP_PKEY_free(self.0) }
    }
}

impl Clone for Pkey {
    fn clone(&self) -> Self {
        unsafe { assert_eq!(EVP_PKEY_up_ref(self.0), 1) };
        Pkey(self.0)
    }
}

impl fmt::Debug for Pkey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Pkey({} {} bits, provider {})",
            self.type_name(),
            self.bits(),
            self.provider_name()
        )
    }
}

impl Pkey {
    pub fn as_ptr(&self) -> *mut EVP_PKEY {
        self.0
    }
    pub fn bits(&self) -> i32 {
        unsafe { EVP_PKEY_get_bits(self.0) }
    }
    pub fn security_bits(&self) -> i32 {
        unsafe { EVP_PKEY_get_security_bits(self.0) }
    }
    /// `EVP_PKEY_get_size`: maximum signature/ciphertext size in bytes.
    pub fn size(&self) -> usize {
        unsafe { EVP_PKEY_get_size(self.0) as usize }
    }
    pub fn type_name(&self) -> String {
        cstr_opt(unsafe { EVP_PKEY_get0_type_name(self.0) }).unwrap_or_default()
    }
    pub fn is_a(&self, name: &str) -> bool {
        let n = CString::new(name).unwrap();
        unsafe { EVP_PKEY_is_a(self.0, n.as_ptr()) == 1 }
    }
    pub fn provider_name(&self) -> String {
        provider_name(unsafe { EVP_PKEY_get0_provider(self.0) })
    }
    pub fn bn_param(&self, name: &str) -> Res<Vec<u8>> {
        let n = CString::new(name).unwrap();
        let mut bn: *mut BIGNUM = ptr::null_mut();
        cvt(
            unsafe { EVP_PKEY_get_bn_param(self.0, n.as_ptr(), &mut bn) },
            &format!("EVP_PKEY_get_bn_param({name})"),
        )?;
        let v = bn_to_vec(bn);
        unsafe { BN_free(bn) };
        Ok(v)
    }
    pub fn int_param(&self, name: &str) -> Res<i32> {
        let n = CString::new(name).unwrap();
        let mut v: c_int = 0;
        cvt(
            unsafe { EVP_PKEY_get_int_param(self.0, n.as_ptr(), &mut v) },
            &format!("EVP_PKEY_get_int_param({name})"),
        )?;
        Ok(v)
    }
    pub fn size_t_param(&self, name: &str) -> Res<usize> {
        let n = CString::new(name).unwrap();
        let mut v: usize = 0;
        cvt(
            unsafe { EVP_PKEY_get_size_t_param(self.0, n.as_ptr(), &mut v) },
            &format!("EVP_PKEY_get_size_t_param({name})"),
        )?;
        Ok(v)
    }
    /// Modulus `n`.
    pub fn n(&self) -> Vec<u8> {
        self.bn_param("n").expect("modulus")
    }
    /// Modulus size in bytes.
    pub fn k(&self) -> usize {
        (self.bits() as usize + 7) / 8
    }
    pub fn has_private(&self) -> bool {
        let n = CString::new("d").unwrap();
        let mut bn: *mut BIGNUM = ptr::null_mut();
        let ok = unsafe { EVP_PKEY_get_bn_param(self.0, n.as_ptr(), &mut bn) } == 1;
        if ok {
            unsafe { BN_free(bn) };
        }
        clear_errors();
        ok
    }
    /// `EVP_PKEY_todata`.
    pub fn export(&self, selection: c_int) -> Res<Params> {
        clear_errors();
        let mut p: *mut OSSL_PARAM = ptr::null_mut();
        cvt(
            unsafe { EVP_PKEY_todata(self.0, selection, &mut p) },
            "EVP_PKEY_todata",
        )?;
        Ok(Params { ptr: p })
    }
    /// `EVP_PKEY_eq`: 1 equal, 0 different, negative not comparable.
    pub fn eq_raw(&self, other: &Pkey) -> i32 {
        unsafe { EVP_PKEY_eq(self.0, other.0) }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    Full,
    Public,
    Private,
    Pairwise,
}

/// `EVP_PKEY_check` and friends in `lib`.
pub fn check_key(lib: &Lib, key: &Pkey, which: Check) -> Res<()> {
    clear_errors();
    let ctx = lib.pctx(key)?;
    let (r, name) = unsafe {
        match which {
            Check::Full => (EVP_PKEY_check(ctx.0), "EVP_PKEY_check"),
            Check::Public => (EVP_PKEY_public_check(ctx.0), "EVP_PKEY_public_check"),
            Check::Private => (EVP_PKEY_private_check(ctx.0), "EVP_PKEY_private_check"),
            Check::Pairwise => (EVP_PKEY_pairwise_check(ctx.0), "EVP_PKEY_pairwise_check"),
        }
    };
    cvt(r, &format!("{name} [{}]", lib.label))?;
    Ok(())
}

/// The same RSA key in both contexts: generated by the default provider, moved into kae.
pub struct KeyPair {
    pub bits: u32,
    pub reference: Pkey,
    pub kae: Pkey,
}

impl KeyPair {
    /// The key belonging to `lib`.
    pub fn key(&self, lib: &Lib) -> &Pkey {
        if lib.is_kae() {
            &self.kae
        } else {
            &self.reference
        }
    }
    pub fn k(&self) -> usize {
        (self.bits as usize + 7) / 8
    }
}

fn make_keypair(bits: u32) -> KeyPair {
    let t = std::time::Instant::now();
    let reference = reference()
        .keygen_rsa(bits as usize, None)
        .unwrap_or_else(|e| panic!("keygen {bits}: {e}"));
    assert_eq!(reference.bits(), bits as i32);
    let kae_key = kae()
        .transfer(&reference)
        .unwrap_or_else(|e| panic!("import {bits}-bit key into kae: {e}"));
    kae().expect_key(&kae_key, "imported key");
    eprintln!("[keys] {bits}-bit key ready in {:.2?}", t.elapsed());
    KeyPair {
        bits,
        reference,
        kae: kae_key,
    }
}

/// A cached RSA key pair of `bits` bits (generated once per test process and size).
pub fn keypair(bits: u32) -> &'static KeyPair {
    static CACHE: OnceLock<Mutex<HashMap<u32, &'static OnceLock<KeyPair>>>> = OnceLock::new();
    let cell: &'static OnceLock<KeyPair> = {
        let mut m = CACHE
            .get_or_init(|| Mutex::new(HashMap::new()))
            .lock()
            .unwrap();
        *m.entry(bits)
            .or_insert_with(|| Box::leak(Box::new(OnceLock::new())))
    };
    cell.get_or_init(|| make_keypair(bits))
}

/// `EVP_PKEY_fromdata` of `params` (a key pair) into `ctx` with kae (`provider=kae`), for tests
/// that manage their own library contexts; panics with OpenSSL's errors on failure. The caller
/// frees the key.
pub fn import_into_kae(ctx: *mut OSSL_LIB_CTX, params: &Params) -> *mut EVP_PKEY {
    use super::ffi::{EVP_PKEY_CTX_free, EVP_PKEY_CTX_new_from_name};
    // SAFETY: ctx is the caller's live library context (or NULL); the key context is freed
    // before returning; params is a terminated array that outlives the call.
    unsafe {
        let pctx = EVP_PKEY_CTX_new_from_name(ctx, c"RSA".as_ptr(), c"provider=kae".as_ptr());
        assert!(
            !pctx.is_null(),
            "EVP_PKEY_CTX_new_from_name: {}",
            take_errors("ctx")
        );
        assert_eq!(
            EVP_PKEY_fromdata_init(pctx),
            1,
            "fromdata_init: {}",
            take_errors("init")
        );
        let mut pk: *mut EVP_PKEY = ptr::null_mut();
        let r = EVP_PKEY_fromdata(pctx, &mut pk, EVP_PKEY_KEYPAIR, params.as_mut_ptr());
        EVP_PKEY_CTX_free(pctx);
        assert_eq!(
            r,
            1,
            "EVP_PKEY_fromdata into kae: {}",
            take_errors("fromdata")
        );
        pk
    }
}
