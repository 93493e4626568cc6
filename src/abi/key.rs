//! The key object the core holds as `keydata`: kae's key behind a type tag, so that a
//! pointer to another provider's key object is refused instead of read as ours. Key
//! management makes and frees them; every operation receives them through `abi`.

use crate::error::KaeError;
use crate::ffi::bn::BigNum;
use crate::provctx::ProvCtx;
use crate::rsa::{KeyType, PssRestrictions, RsaKey};
use core::ffi::c_void;
use std::sync::Arc;

/// What OpenSSL holds as `keydata`: a type tag, our key, and the provider instance it
/// belongs to.
#[repr(C)]
pub struct KeyObj {
    /// [`KEY_OBJ_TAG`] while the object lives; cleared when it is freed. Checked before any
    /// other field is read, so a foreign keydata pointer (another provider's key handed to
    /// us by mistake) is refused instead of being used as ours.
    tag: u64,
    pub prov: Arc<ProvCtx>,
    pub key: Arc<RsaKey>,
}

/// "kaeRSAk\x01" as a little-endian word.
const KEY_OBJ_TAG: u64 = u64::from_le_bytes(*b"kaeRSAk\x01");

impl KeyObj {
    /// Wraps `key` for instance `prov`, attaching it to the instance's library context.
    pub fn new(prov: Arc<ProvCtx>, mut key: RsaKey) -> KeyObj {
        key.set_rand_source(prov.rand_libctx());
        KeyObj {
            tag: KEY_OBJ_TAG,
            prov,
            key: Arc::new(key),
        }
    }

    /// Replaces the key inside the object by `key`, attached to the object's instance as in
    /// [`new`](Self::new).
    pub fn replace_key(&mut self, mut key: RsaKey) {
        key.set_rand_source(self.prov.rand_libctx());
        self.key = Arc::new(key);
    }

    /// A new key of `kind` and `bits` bits with public exponent `e` and restrictions `pss`,
    /// generated for instance `prov` (its primes and the pairwise test's blinding drawn from
    /// the instance's library context).
    pub fn generate(
        prov: Arc<ProvCtx>,
        kind: KeyType,
        bits: usize,
        e: &BigNum,
        pss: Option<PssRestrictions>,
    ) -> Result<KeyObj, KaeError> {
        let mut key = crate::rsa::ops::generate_in(prov.rand_libctx(), kind, bits, e)?;
        key.pss = pss;
        Ok(KeyObj::new(prov, key))
    }

    /// Our key object behind `p`, or None for NULL or a pointer whose tag is not ours.
    ///
    /// # Safety
    /// `p` is NULL or points to at least 8 readable, aligned bytes (every provider's key
    /// object does); if the tag matches, it is a keydata pointer created by this module and
    /// not yet freed.
    pub unsafe fn from_ptr<'a>(p: *const c_void) -> Option<&'a KeyObj> {
        if p.is_null() {
            return None;
        }
        // SAFETY: caller contract: the first word is readable whatever the object is.
        let tag = unsafe { p.cast::<u64>().read() };
        if tag != KEY_OBJ_TAG {
            return None;
        }
        // SAFETY: the first word is our tag, so by the caller's contract p is a live KeyObj made by
        // this module and not yet freed, hence valid for a shared borrow.
        unsafe { p.cast::<KeyObj>().as_ref() }
    }
    /// # Safety
    /// As `from_ptr`, with exclusive access (import into a fresh key).
    pub(crate) unsafe fn from_ptr_mut<'a>(p: *mut c_void) -> Option<&'a mut KeyObj> {
        // SAFETY: from_ptr_mut's contract includes from_ptr's, so the tag read is sound; NULL or a
        // foreign pointer returns early.
        unsafe { Self::from_ptr(p) }?;
        // SAFETY: the tag matched, so p is a live KeyObj of this module, and the caller
        // guarantees no other reference to it exists during 'a.
        unsafe { p.cast::<KeyObj>().as_mut() }
    }
    /// Hands the object to the core (which frees it with `free_object` or keymgmt `free`).
    pub(crate) fn into_raw(self) -> *mut c_void {
        Box::into_raw(Box::new(self)).cast()
    }
}

impl Drop for KeyObj {
    fn drop(&mut self) {
        // A dangling pointer to a freed object must not pass the tag check on reuse.
        self.tag = 0;
    }
}

/// Frees a key object made by this module; NULL and pointers that are not our key objects are
/// left alone.
///
/// # Safety
/// `p` is NULL or points to at least 8 readable, 8-aligned bytes; if it carries our tag it is
/// a live key object created by this module that nobody uses any more.
pub unsafe fn free_object(p: *mut c_void) {
    // SAFETY: p is NULL or at least 8 readable, aligned bytes (caller's contract), all that the tag
    // check in from_ptr reads.
    if unsafe { KeyObj::from_ptr(p) }.is_some() {
        // SAFETY: tagged, so made by Box::into_raw in this module (caller contract).
        drop(unsafe { Box::from_raw(p.cast::<KeyObj>()) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A keydata pointer that is not one of our key objects (another provider's key, a
    /// freed object) is refused by its tag.
    #[test]
    fn foreign_keydata_is_refused() {
        let foreign = Box::new([0u64; 8]);
        let p = (&*foreign as *const [u64; 8]).cast::<c_void>();
        // SAFETY: p points to a live, 8-aligned [u64; 8]: the 8 readable bytes from_ptr reads.
        assert!(unsafe { KeyObj::from_ptr(p) }.is_none());
        let mut tagged_elsewhere = [0u64; 8];
        // The tag, but not in the first word.
        tagged_elsewhere[1] = KEY_OBJ_TAG;
        // SAFETY: tagged_elsewhere is a live, 8-aligned [u64; 8] on this stack frame.
        assert!(unsafe { KeyObj::from_ptr(tagged_elsewhere.as_ptr().cast()) }.is_none());
        // SAFETY: NULL is always accepted by from_ptr.
        assert!(unsafe { KeyObj::from_ptr(core::ptr::null()) }.is_none());
    }
}
