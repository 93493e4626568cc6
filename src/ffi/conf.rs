//! Reading kae's own provider section from the configuration file, to warn about keys kae does
//! not know (`queus = 4`).
//!
//! The core hands a provider only the values of the keys it asks for, so a misspelt key would
//! simply never be seen. We therefore load the file OpenSSL loads by default (`OPENSSL_CONF`, or
//! `openssl.cnf` in OPENSSLDIR) with libcrypto's own parser (`NCONF_load`: same syntax, same
//! `.include` handling) and follow `openssl_conf` → `providers` → the section of the provider
//! named like us. Public API only; every error this raises is popped again, so the
//! application's error queue is left as it was.

use super::sys::{ERR_pop_to_mark, ERR_set_mark};
use core::ffi::{c_char, c_int, c_long, c_void, CStr};
use std::ffi::CString;

#[repr(C)]
struct ConfValue {
    section: *mut c_char,
    name: *mut c_char,
    value: *mut c_char,
}

extern "C" {
    fn CONF_get1_default_config_file() -> *mut c_char;
    fn NCONF_load(conf: *mut openssl_sys::CONF, file: *const c_char, eline: *mut c_long) -> c_int;
    fn NCONF_get_string(
        conf: *const openssl_sys::CONF,
        group: *const c_char,
        name: *const c_char,
    ) -> *mut c_char;
    fn NCONF_get_section(
        conf: *const openssl_sys::CONF,
        section: *const c_char,
    ) -> *mut openssl_sys::OPENSSL_STACK;
}

/// The provider section found in the default configuration file.
#[derive(Debug)]
pub struct FileSection {
    pub file: String,
    pub section: String,
    /// `(key, value)` in file order, keys as OpenSSL sees them (text before the first `.` of a
    /// repeated key dropped, as OpenSSL does).
    pub entries: Vec<(String, String)>,
}

/// Owned `CONF`, freed on drop.
struct Conf(*mut openssl_sys::CONF);

impl Drop for Conf {
    fn drop(&mut self) {
        // SAFETY: self.0 is NULL or the CONF from NCONF_new that only this wrapper owns; NCONF_free
        // accepts NULL and drop runs once.
        unsafe { openssl_sys::NCONF_free(self.0) }
    }
}

/// What OpenSSL does with a config name: a leading `something.` is dropped (it lets a section
/// repeat a key).
fn skip_dot(name: &str) -> &str {
    match name.find('.') {
        Some(i) if i + 1 < name.len() => &name[i + 1..],
        _ => name,
    }
}

impl Conf {
    fn string(&self, group: Option<&CStr>, name: &CStr) -> Option<String> {
        // SAFETY: a loaded CONF and NUL-terminated strings; the answer is owned by the CONF.
        let p = unsafe {
            NCONF_get_string(
                self.0,
                group.map_or(core::ptr::null(), |g| g.as_ptr()),
                name.as_ptr(),
            )
        };
        // SAFETY: NULL or a string owned by the CONF, which outlives this call.
        unsafe { super::core::opt_cstr(p) }.map(str::to_owned)
    }

    fn section(&self, name: &str) -> Option<Vec<(String, String)>> {
        let name = CString::new(name).ok()?;
        // SAFETY: a loaded CONF; the stack and its values are owned by the CONF.
        let stack = unsafe { NCONF_get_section(self.0, name.as_ptr()) };
        if stack.is_null() {
            return None;
        }
        // SAFETY: stack is the non-NULL section stack just returned, owned by self's CONF, which
        // outlives this loop.
        let n = unsafe { openssl_sys::OPENSSL_sk_num(stack) };
        let mut out = Vec::new();
        for i in 0..n {
            // SAFETY: i < n; each element is a CONF_VALUE owned by the CONF.
            let v = unsafe { openssl_sys::OPENSSL_sk_value(stack, i) } as *const ConfValue;
            if v.is_null() {
                continue;
            }
            // SAFETY: fields are NULL or NUL-terminated strings owned by the CONF.
            let (k, val) = unsafe {
                (
                    super::core::opt_cstr((*v).name),
                    super::core::opt_cstr((*v).value),
                )
            };
            if let Some(k) = k {
                out.push((skip_dot(k).to_owned(), val.unwrap_or("").to_owned()));
            }
        }
        Some(out)
    }
}

/// The section of the provider called `provider_name` in the default configuration file, or
/// `None` when there is no such file, section or provider entry.
pub fn provider_section(provider_name: &str) -> Option<FileSection> {
    // SAFETY: ERR_set_mark/ERR_pop_to_mark bracket everything below, so the errors NCONF
    // raises for missing values never reach the application.
    unsafe { ERR_set_mark() };
    let found = provider_section_inner(provider_name);
    // SAFETY: no preconditions; it pops back to the mark this function set just above.
    unsafe { ERR_pop_to_mark() };
    found
}

fn provider_section_inner(provider_name: &str) -> Option<FileSection> {
    // SAFETY: returns a malloc'd copy (or NULL) that we free below.
    let file_ptr = unsafe { CONF_get1_default_config_file() };
    // SAFETY: file_ptr is NULL or the NUL-terminated copy just returned, freed only after this
    // copy.
    let file = unsafe { super::core::opt_cstr(file_ptr) }.map(str::to_owned);
    if !file_ptr.is_null() {
        // SAFETY: file_ptr is the non-NULL copy CONF_get1_default_config_file allocated with
        // libcrypto's allocator for us; it is not used after this.
        unsafe { openssl_sys::CRYPTO_free(file_ptr as *mut c_void, c"conf.rs".as_ptr(), 0) };
    }
    let file = file?;
    let cfile = CString::new(file.as_str()).ok()?;
    // SAFETY: NCONF_new accepts NULL (the default method); a NULL result is checked below.
    let conf = Conf(unsafe { openssl_sys::NCONF_new(core::ptr::null_mut()) });
    if conf.0.is_null() {
        return None;
    }
    let mut eline: c_long = 0;
    // SAFETY: conf.0 is the non-NULL CONF just created, cfile a NUL-terminated path and eline a
    // local.
    if unsafe { NCONF_load(conf.0, cfile.as_ptr(), &mut eline) } != 1 {
        return None;
    }
    let init = conf.string(None, c"openssl_conf")?;
    let init = CString::new(init).ok()?;
    let providers = conf.string(Some(&init), c"providers")?;
    for (name, section) in conf.section(&providers)? {
        let Some(entries) = conf.section(&section) else {
            continue;
        };
        let identity = entries
            .iter()
            .find(|(k, _)| k == "identity")
            .map(|(_, v)| v.as_str())
            .unwrap_or(name.as_str());
        if identity == provider_name {
            return Some(FileSection {
                file,
                section,
                entries,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skip_dot_drops_the_prefix_of_a_repeated_key() {
        assert_eq!(skip_dot("queues"), "queues");
        assert_eq!(skip_dot("1.queues"), "queues");
        assert_eq!(skip_dot("trailing."), "trailing.");
    }
}
