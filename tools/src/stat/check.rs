//! `kae-stat --check [--conf FILE]`: loads an OpenSSL configuration the way OpenSSL does, into a
//! library context of its own, and says whether kae came out of it active, with which backend.
//! OpenSSL's programs (and nginx, HAProxy) carry on without a provider that failed to load and
//! exit 0; this check exits non-zero instead, saying why, so it can run before a restart (or
//! as a systemd `ExecStartPre=`).
//!
//! The only `unsafe` of kae-stat: calls into libcrypto, each with what makes it sound.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_ulong, c_void, CStr, CString};
use std::ptr;

#[allow(non_camel_case_types)]
#[repr(C)]
struct OSSL_PROVIDER {
    _private: [u8; 0],
}

/// OSSL_PARAM as libcrypto lays it out (`openssl/core.h`).
#[repr(C)]
struct Param {
    key: *const c_char,
    data_type: u32,
    data: *mut c_void,
    data_size: usize,
    return_size: usize,
}

const OSSL_PARAM_UTF8_PTR: u32 = 6;
const ERR_TXT_STRING: c_int = 0x02;

type ProviderCb = unsafe extern "C" fn(*mut OSSL_PROVIDER, *mut c_void) -> c_int;

extern "C" {
    fn OSSL_LIB_CTX_load_config(ctx: *mut openssl_sys::OSSL_LIB_CTX, file: *const c_char) -> c_int;
    fn OSSL_LIB_CTX_free(ctx: *mut openssl_sys::OSSL_LIB_CTX);
    fn OSSL_PROVIDER_do_all(
        ctx: *mut openssl_sys::OSSL_LIB_CTX,
        cb: ProviderCb,
        cbdata: *mut c_void,
    ) -> c_int;
    fn OSSL_PROVIDER_get0_name(prov: *const OSSL_PROVIDER) -> *const c_char;
    fn OSSL_PROVIDER_get_params(prov: *const OSSL_PROVIDER, params: *mut Param) -> c_int;
    fn CONF_get1_default_config_file() -> *mut c_char;
    fn ERR_error_string_n(e: c_ulong, buf: *mut c_char, len: usize);
}

/// What kae reports as its `name` parameter (`PROVIDER_FULL_NAME` in the provider).
const KAE_FULL_NAME: &str = "kae RSA offload provider";

/// One provider of the checked context: the name it was loaded under, and its `name` and
/// `backend` parameters.
struct Loaded {
    name: String,
    full_name: Option<String>,
    backend: Option<String>,
}

/// The outcome, as the lines to print and the exit status.
pub struct Verdict {
    pub ok: bool,
    pub lines: Vec<String>,
}

/// The configuration file OpenSSL reads when `OPENSSL_CONF` is unset.
fn default_config_file() -> Option<String> {
    // SAFETY: no arguments; returns a string allocated by OPENSSL_malloc or NULL.
    let p = unsafe { CONF_get1_default_config_file() };
    if p.is_null() {
        return None;
    }
    // SAFETY: p is a NUL-terminated string libcrypto allocated for us; read before freeing.
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    // SAFETY: p came from OPENSSL_malloc and is freed once, here.
    unsafe { openssl_sys::CRYPTO_free(p.cast(), c"kae-stat".as_ptr(), 0) };
    Some(s)
}

/// The errors libcrypto queued on this thread, oldest first (the queue is emptied).
fn drain_errors() -> Vec<String> {
    let mut out = Vec::new();
    loop {
        let (mut data, mut flags): (*const c_char, c_int) = (ptr::null(), 0);
        // SAFETY: every out-pointer is either NULL or points at a local of the right type.
        let e = unsafe {
            openssl_sys::ERR_get_error_all(
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
                &mut data,
                &mut flags,
            )
        };
        if e == 0 {
            return out;
        }
        let mut buf = [0 as c_char; 256];
        // SAFETY: buf is writable for its whole length, which is passed; the result is
        // NUL-terminated within it.
        unsafe { ERR_error_string_n(e, buf.as_mut_ptr(), buf.len()) };
        // SAFETY: NUL-terminated by ERR_error_string_n.
        let mut line = unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        if !data.is_null() && flags & ERR_TXT_STRING != 0 {
            // SAFETY: with ERR_TXT_STRING set, data is a NUL-terminated string owned by the
            // error queue, valid until the next error call on this thread.
            let d = unsafe { CStr::from_ptr(data) }.to_string_lossy();
            if !d.is_empty() {
                line.push_str(&format!(" ({d})"));
            }
        }
        out.push(line);
    }
}

/// A string parameter of `prov`, if it has one.
///
/// # Safety
/// `prov` must be a provider handed to an `OSSL_PROVIDER_do_all` callback, during that call.
unsafe fn utf8_param(prov: *const OSSL_PROVIDER, key: &CStr) -> Option<String> {
    let mut out: *const c_char = ptr::null();
    let mut params = [
        Param {
            key: key.as_ptr(),
            data_type: OSSL_PARAM_UTF8_PTR,
            data: (&mut out as *mut *const c_char).cast(),
            data_size: 0,
            return_size: usize::MAX,
        },
        Param {
            key: ptr::null(),
            data_type: 0,
            data: ptr::null_mut(),
            data_size: 0,
            return_size: 0,
        },
    ];
    // SAFETY: prov is live (the caller's contract); params is a terminated array whose one
    // entry points at `out`, a local that outlives the call.
    let ok = unsafe { OSSL_PROVIDER_get_params(prov, params.as_mut_ptr()) } == 1;
    if !ok || out.is_null() {
        return None;
    }
    // SAFETY: a UTF8_PTR result points at a NUL-terminated string the provider keeps alive
    // while it is loaded; copied out at once.
    Some(
        unsafe { CStr::from_ptr(out) }
            .to_string_lossy()
            .into_owned(),
    )
}

unsafe extern "C" fn collect(prov: *mut OSSL_PROVIDER, data: *mut c_void) -> c_int {
    // SAFETY: data is the &mut Vec<Loaded> that `check` passed to OSSL_PROVIDER_do_all, which
    // calls back on this thread during that call only.
    let found = unsafe { &mut *data.cast::<Vec<Loaded>>() };
    // SAFETY: prov is the live provider this callback was given.
    let name = unsafe { OSSL_PROVIDER_get0_name(prov) };
    let name = if name.is_null() {
        String::new()
    } else {
        // SAFETY: a NUL-terminated name owned by the provider object.
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned()
    };
    found.push(Loaded {
        name,
        // SAFETY: during the callback (utf8_param's contract).
        full_name: unsafe { utf8_param(prov, c"name") },
        // SAFETY: as above.
        backend: unsafe { utf8_param(prov, c"backend") },
    });
    1
}

/// Loads `conf` (or what OpenSSL would read: `$OPENSSL_CONF`, else its default file) and says
/// whether kae is active in it.
pub fn check(conf: Option<&str>) -> Verdict {
    let file = match conf
        .map(str::to_string)
        .or_else(|| std::env::var("OPENSSL_CONF").ok().filter(|s| !s.is_empty()))
        .or_else(default_config_file)
    {
        Some(f) => f,
        None => {
            return Verdict {
                ok: false,
                lines: vec!["FAIL: no configuration file: give --conf FILE".into()],
            }
        }
    };
    let fail = |mut lines: Vec<String>| {
        lines[0] = format!("FAIL: {}", lines[0]);
        Verdict { ok: false, lines }
    };
    match std::fs::metadata(&file) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return fail(vec![format!("{file} is not a regular file")]),
        Err(e) => return fail(vec![format!("cannot read {file}: {e}")]),
    }
    let Ok(cfile) = CString::new(file.clone()) else {
        return fail(vec![format!("{file:?}: a path with a NUL byte")]);
    };
    drain_errors();
    // SAFETY: no arguments; returns a new context or NULL.
    let ctx = unsafe { openssl_sys::OSSL_LIB_CTX_new() };
    if ctx.is_null() {
        return fail(vec!["OSSL_LIB_CTX_new failed".into()]);
    }
    // SAFETY: ctx is the live context made above; cfile is a NUL-terminated path.
    let loaded = unsafe { OSSL_LIB_CTX_load_config(ctx, cfile.as_ptr()) } == 1;
    let errors = drain_errors();
    let mut found: Vec<Loaded> = Vec::new();
    // SAFETY: ctx is live; `collect` gets &mut found as its data and only uses it during the
    // call, on this thread.
    unsafe { OSSL_PROVIDER_do_all(ctx, collect, (&mut found as *mut Vec<Loaded>).cast()) };
    let kae = found
        .iter()
        .find(|p| p.full_name.as_deref() == Some(KAE_FULL_NAME));
    let verdict = match (loaded, kae) {
        (true, Some(k)) => Verdict {
            ok: true,
            lines: vec![format!(
                "OK: kae is active in {file} (provider \"{}\", backend {}); providers: {}",
                k.name,
                k.backend.as_deref().unwrap_or("unknown"),
                names(&found)
            )],
        },
        (false, _) => {
            let mut lines = vec![format!(
                "OpenSSL could not load {file}; a server started with it runs without kae \
                 (or does not start). OpenSSL said:"
            )];
            lines.extend(errors.iter().map(|e| format!("  {e}")));
            fail(lines)
        }
        (true, None) => {
            let mut lines = vec![format!(
                "{file} leaves kae inactive (providers active: {}); a server started with it \
                 runs without kae",
                names(&found)
            )];
            if !errors.is_empty() {
                lines.push("  OpenSSL said:".into());
                lines.extend(errors.iter().map(|e| format!("  {e}")));
            }
            let modules = module_lines(&file);
            if modules.is_empty() {
                lines.push(format!(
                    "  {file} has no `module =` line (kae's section names kae.so)"
                ));
            }
            lines.extend(modules.iter().map(|m| format!("  {m}")));
            lines.push(
                "  (a bad value in kae's section is reported by kae itself, as `kae: error:` \
                 lines above)"
                    .into(),
            );
            fail(lines)
        }
    };
    // SAFETY: ctx is live and freed once; nothing of it is used afterwards.
    unsafe { OSSL_LIB_CTX_free(ctx) };
    verdict
}

/// OpenSSL's module directory: `$OPENSSL_MODULES`, else the one it was built with.
fn modules_dir() -> String {
    if let Some(d) = std::env::var("OPENSSL_MODULES")
        .ok()
        .filter(|d| !d.is_empty())
    {
        return d;
    }
    const OPENSSL_MODULES_DIR: c_int = 105;
    // SAFETY: OpenSSL_version returns a static NUL-terminated string for any argument.
    let v = unsafe { CStr::from_ptr(openssl_sys::OpenSSL_version(OPENSSL_MODULES_DIR)) };
    let v = v.to_string_lossy();
    v.split_once('"')
        .and_then(|(_, rest)| rest.rsplit_once('"'))
        .map_or_else(|| v.to_string(), |(d, _)| d.to_string())
}

/// Each `module = PATH` line of `file` and whether that module exists where OpenSSL looks
/// (a name without a slash: in the module directory). OpenSSL 3.0 drops a provider whose
/// module cannot be loaded without queueing an error, so this is the reason it cannot give.
fn module_lines(file: &str) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(file) else {
        return Vec::new();
    };
    let dir = modules_dir();
    text.lines()
        .filter_map(|l| {
            let l = l.split('#').next().unwrap_or("").trim();
            let (k, v) = l.split_once('=')?;
            (k.trim() == "module").then(|| v.trim().trim_matches('"').to_string())
        })
        .map(|m| {
            let path = if m.contains('/') {
                std::path::PathBuf::from(&m)
            } else {
                std::path::Path::new(&dir).join(&m)
            };
            match std::fs::metadata(&path) {
                Ok(md) if md.is_file() => format!("module = {m}: {} exists", path.display()),
                Ok(_) => format!("module = {m}: {} is not a file", path.display()),
                Err(e) => format!("module = {m}: {}: {e}", path.display()),
            }
        })
        .collect()
}

fn names(found: &[Loaded]) -> String {
    if found.is_empty() {
        return "none".into();
    }
    found
        .iter()
        .map(|p| p.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
