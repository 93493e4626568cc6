//! Tables of OpenSSL's C structs (dispatch tables, algorithm lists, parameter descriptors,
//! reason strings) that can live in statics and be shared between threads.

use super::sys::*;

/// Wrapper letting tables of OpenSSL's C structs (which hold raw pointers) live in statics.
/// Only [`TableEntry`] types: a table of anything else would be shared unsoundly.
///
/// ```compile_fail
/// let shared = kae::ffi::table::Table(vec![std::rc::Rc::new(1)]);
/// ```
pub struct Table<T: TableEntry>(pub Vec<T>);

/// The C structs a [`Table`] may hold: plain data (integers and pointers that OpenSSL only
/// reads), so a table of them can be shared and sent between threads.
///
/// # Safety
/// Implement only for C structs without interior mutability, ownership or `Drop`: sharing
/// or sending a value must not allow a data race or a double free.
pub unsafe trait TableEntry {}
// SAFETY: `#[repr(C)]` structs of integers, C string pointers and function pointers (no
// ownership, no interior mutability); what they point to is static and never written.
unsafe impl TableEntry for OSSL_DISPATCH {}
// SAFETY: `#[repr(C)]`: C string pointers (names, properties, description) and a dispatch
// table pointer, to data that is only ever read; no ownership or interior mutability.
unsafe impl TableEntry for OSSL_ALGORITHM {}
// SAFETY: as above; in a table they are descriptors (key, type, null data): nothing is ever
// written through them.
unsafe impl TableEntry for OSSL_PARAM {}
// SAFETY: an integer and a pointer to a static C string.
unsafe impl TableEntry for OSSL_ITEM {}
// SAFETY: a table's values are `TableEntry`s: plain data that may be shared and sent.
unsafe impl<T: TableEntry> Sync for Table<T> {}
// SAFETY: as for Sync: `TableEntry` values are plain data, so moving a table is sound.
unsafe impl<T: TableEntry> Send for Table<T> {}
