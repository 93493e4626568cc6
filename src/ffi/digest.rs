//! Digests (EVP_MD fetched from the application's library context) and randomness. What
//! they are to RSA padding (its `Hasher` / `RandomSource`) is said in `rsa::libcrypto`.

use super::libctx::LibCtx;
use super::sys::*;
use crate::error::{KaeError, KaeResult};
use core::marker::PhantomData;
use core::ptr::NonNull;
use std::ffi::CString;

/// A fetched message digest. Cloning takes another reference.
pub struct Md {
    ptr: NonNull<EVP_MD>,
    size: usize,
    block: usize,
}

// SAFETY: EVP_MD objects are immutable and reference counted with atomic counters.
unsafe impl Send for Md {}
unsafe impl Sync for Md {}

impl Md {
    /// [`Md::fetch`] from libcrypto's default library context.
    pub fn fetch_default(name: &str, props: Option<&str>) -> KaeResult<Md> {
        Md::fetch(LibCtx::DEFAULT, name, props)
    }

    /// Fetches digest `name` in `libctx`. The `EVP_MD` belongs to a provider of that context;
    /// [`LibCtx::free`]'s contract keeps the context until it and its clones are dropped.
    pub fn fetch(libctx: LibCtx, name: &str, props: Option<&str>) -> KaeResult<Md> {
        let cname = CString::new(name).map_err(|_| KaeError::InvalidDigest)?;
        let cprops = props
            .map(CString::new)
            .transpose()
            .map_err(|_| KaeError::InvalidParam)?;
        // SAFETY: NUL-terminated strings that live across the call; a LibCtx is the default
        // context or a live one (its type's contract).
        let p = unsafe {
            EVP_MD_fetch(
                libctx.as_ptr(),
                cname.as_ptr(),
                cprops.as_ref().map_or(core::ptr::null(), |c| c.as_ptr()),
            )
        };
        let ptr = NonNull::new(p).ok_or(KaeError::FetchFailed)?;
        // SAFETY: p is the non-NULL EVP_MD just fetched, a reference we hold until Md's drop; only
        // read.
        let (size, block) = unsafe { (EVP_MD_get_size(p), EVP_MD_get_block_size(p)) };
        Ok(Md {
            ptr,
            size: size.max(0) as usize,
            block: block.max(0) as usize,
        })
    }

    pub fn as_ptr(&self) -> *const EVP_MD {
        self.ptr.as_ptr()
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// Input block size in bytes (64 for SHA-256).
    pub fn block_size(&self) -> usize {
        self.block
    }

    /// Hashes the concatenation of `parts` into `out`, which must be exactly the digest length.
    pub fn digest(&self, parts: &[&[u8]], out: &mut [u8]) -> KaeResult<()> {
        let mut ctx = MdCtx::new()?;
        ctx.init(self)?;
        for p in parts {
            ctx.update(p)?;
        }
        ctx.finalize(out)
    }

    /// The parameters a context of this digest takes (None: it describes none).
    pub fn settable_ctx_params(&self) -> Option<&'static [OSSL_PARAM]> {
        // SAFETY: a live EVP_MD; the answer is its provider's static data, terminated.
        unsafe { super::params::terminated(EVP_MD_settable_ctx_params(self.as_ptr())) }
    }

    /// The parameters a context of this digest reports (None: it describes none).
    pub fn gettable_ctx_params(&self) -> Option<&'static [OSSL_PARAM]> {
        // SAFETY: as in settable_ctx_params.
        unsafe { super::params::terminated(EVP_MD_gettable_ctx_params(self.as_ptr())) }
    }
}

impl Clone for Md {
    fn clone(&self) -> Self {
        // SAFETY: valid EVP_MD; up_ref never fails for fetched digests.
        unsafe { EVP_MD_up_ref(self.ptr.as_ptr()) };
        Md {
            ptr: self.ptr,
            size: self.size,
            block: self.block,
        }
    }
}

impl Drop for Md {
    fn drop(&mut self) {
        // SAFETY: self.ptr is the one EVP_MD reference this Md holds (from fetch or up_ref in
        // clone), released once here.
        unsafe { EVP_MD_free(self.ptr.as_ptr()) }
    }
}

/// A running digest computation.
pub struct MdCtx(NonNull<EVP_MD_CTX>);

// SAFETY: an EVP_MD_CTX is used by one thread at a time (we hold it by &mut).
unsafe impl Send for MdCtx {}

impl MdCtx {
    pub fn new() -> KaeResult<Self> {
        // SAFETY: EVP_MD_CTX_new has no preconditions; a NULL result (out of memory) becomes an
        // error.
        NonNull::new(unsafe { EVP_MD_CTX_new() })
            .map(MdCtx)
            .ok_or(KaeError::OutOfMemory)
    }

    pub fn as_ptr(&self) -> *mut EVP_MD_CTX {
        self.0.as_ptr()
    }

    pub fn init(&mut self, md: &Md) -> KaeResult<()> {
        // SAFETY: self owns a live EVP_MD_CTX and is borrowed mutably; md holds a reference to a
        // live EVP_MD for the call (the context takes its own).
        if unsafe { EVP_DigestInit_ex2(self.as_ptr(), md.as_ptr(), core::ptr::null()) } == 1 {
            Ok(())
        } else {
            Err(KaeError::InvalidDigest)
        }
    }

    pub fn update(&mut self, data: &[u8]) -> KaeResult<()> {
        if data.is_empty() {
            return Ok(());
        }
        // SAFETY: self owns a live EVP_MD_CTX and is borrowed mutably; data is a slice, readable
        // for its length.
        if unsafe { EVP_DigestUpdate(self.as_ptr(), data.as_ptr().cast(), data.len()) } == 1 {
            Ok(())
        } else {
            Err(KaeError::Internal)
        }
    }

    /// Finishes into `out`, which must be exactly the digest length.
    pub fn finalize(&mut self, out: &mut [u8]) -> KaeResult<()> {
        // Wiped on return: digests of secrets (the implicit-rejection key derivation hashes d).
        let mut buf = zeroize::Zeroizing::new([0u8; 64]);
        let mut len = 0u32;
        // SAFETY: `buf` holds EVP_MAX_MD_SIZE (64) writable bytes, which is the most
        // EVP_DigestFinal_ex writes; `len` is a valid u32 out-parameter; the context is ours.
        if unsafe { EVP_DigestFinal_ex(self.as_ptr(), buf.as_mut_ptr(), &mut len) } != 1 {
            return Err(KaeError::Internal);
        }
        if len as usize != out.len() {
            return Err(KaeError::InvalidDigestLength);
        }
        out.copy_from_slice(&buf[..len as usize]);
        Ok(())
    }

    /// `EVP_MD_CTX_get_params`: the digest's answer.
    pub fn get_params(&mut self, params: &mut super::params::ParamsMut<'_>) -> bool {
        // SAFETY: our live context; the array is NULL or terminated and writable.
        unsafe { EVP_MD_CTX_get_params(self.as_ptr(), params.as_mut_ptr()) == 1 }
    }

    /// `EVP_MD_CTX_set_params`: the digest's answer.
    pub fn set_params(&mut self, params: &super::params::Params<'_>) -> bool {
        // SAFETY: our live context; the array is NULL or terminated, valid for the call.
        unsafe { EVP_MD_CTX_set_params(self.as_ptr(), params.as_ptr()) == 1 }
    }

    pub fn try_clone(&self) -> KaeResult<Self> {
        let n = Self::new()?;
        // SAFETY: n is a fresh context owned here and written; self owns a live one that is only
        // read.
        if unsafe { EVP_MD_CTX_copy_ex(n.as_ptr(), self.as_ptr()) } == 1 {
            Ok(n)
        } else {
            Err(KaeError::Internal)
        }
    }
}

impl Drop for MdCtx {
    fn drop(&mut self) {
        // SAFETY: self.0 is the EVP_MD_CTX this wrapper allocated and owns; drop runs once.
        unsafe { EVP_MD_CTX_free(self.0.as_ptr()) }
    }
}

/// Randomness from the application's library context: the public DRBG for padding bytes,
/// the private DRBG for secrets (blinding factors, premaster fallbacks).
///
/// `'a` is how long the user of the `Rng` holds it (an instance's, for one operation).
pub struct Rng<'a> {
    libctx: LibCtx,
    private: bool,
    _borrow: PhantomData<&'a ()>,
}

impl<'a> Rng<'a> {
    /// Draws from `libctx`'s public DRBG, or its private one when `private` is set.
    pub fn new(libctx: LibCtx, private: bool) -> Rng<'a> {
        Rng {
            libctx,
            private,
            _borrow: PhantomData,
        }
    }
}

impl Rng<'static> {
    /// Draws from the default library context's public DRBG, or its private one when
    /// `private` is set.
    pub fn default_ctx(private: bool) -> Rng<'static> {
        Rng::new(LibCtx::DEFAULT, private)
    }
}

impl Rng<'_> {
    /// Fills `buf` with random bytes.
    pub fn fill(&self, buf: &mut [u8]) -> KaeResult<()> {
        if buf.is_empty() {
            return Ok(());
        }
        // SAFETY: buf is writable for buf.len() bytes; a LibCtx is the default context or a
        // live one (its type's contract).
        let r = unsafe {
            if self.private {
                RAND_priv_bytes_ex(self.libctx.as_ptr(), buf.as_mut_ptr(), buf.len(), 0)
            } else {
                RAND_bytes_ex(self.libctx.as_ptr(), buf.as_mut_ptr(), buf.len(), 0)
            }
        };
        if r == 1 {
            Ok(())
        } else {
            Err(KaeError::RandomFailure)
        }
    }
}
