//! `OSSL_OP_KEYMGMT`: the [`KeyManagement`] trait (one key type's objects: make, copy, compare,
//! check, import, export, generate, load) and the dispatch tables made from it, one per
//! provider instance slot (see [`table`]).

use super::*;
use crate::ffi::params::OwnedParams;
use crate::provctx::MAX_INSTANCES;
use core::ffi::{c_char, CStr};
use core::marker::PhantomData;

/// The parts of a key a key management call is about (`OSSL_KEYMGMT_SELECT_*` bits).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct KeySelection(c_int);

impl KeySelection {
    pub const fn new(bits: c_int) -> KeySelection {
        KeySelection(bits)
    }
    pub const fn bits(self) -> c_int {
        self.0
    }
    pub const fn public_key(self) -> bool {
        self.0 & OSSL_KEYMGMT_SELECT_PUBLIC_KEY != 0
    }
    pub const fn private_key(self) -> bool {
        self.0 & OSSL_KEYMGMT_SELECT_PRIVATE_KEY != 0
    }
    /// The public key, the private key or both.
    pub const fn key_pair(self) -> bool {
        self.0 & OSSL_KEYMGMT_SELECT_KEYPAIR != 0
    }
    pub const fn other_parameters(self) -> bool {
        self.0 & OSSL_KEYMGMT_SELECT_OTHER_PARAMETERS != 0
    }
}

/// A key generation context: what `gen_init` makes for the core and `gen_cleanup` drops. The
/// core uses it from one thread at a time.
pub trait KeyGeneration: Sized + 'static {
    /// The instance whose core hears of the generation's failures.
    fn provider(&self) -> &ProvCtx;
    fn set_params(&mut self, params: &Params<'_>) -> Result<(), Failure>;
    /// A new key object; `progress` is the core's progress callback, if it gave one.
    fn generate(&self, progress: Option<&mut Callback<'_>>) -> Result<KeyObj, Failure>;
}

/// The key management of one key type. A keydata pointer of the core is a [`KeyObj`] made by
/// one of these functions; another provider's object is refused by its tag (the call fails
/// quietly: no error is raised, as there is no instance to raise it through).
pub trait KeyManagement: 'static {
    type Generation: KeyGeneration;

    /// An empty key object for instance `prov` (`new`).
    fn new_key(prov: Arc<ProvCtx>) -> Result<KeyObj, Failure>;
    /// Whether `key` holds every part `selection` names (`has`).
    fn has(key: &KeyObj, selection: KeySelection) -> bool;
    /// Whether the parts `selection` names are the same in `a` and `b` (`match`).
    fn matches(a: &KeyObj, b: &KeyObj, selection: KeySelection) -> bool;
    /// Checks the parts `selection` names (`validate`).
    fn validate(key: &KeyObj, selection: KeySelection, check_type: c_int) -> Result<(), Failure>;
    /// Replaces the key inside `key`, a fresh object of ours that nothing else holds yet, by
    /// the parts of `params` that `selection` names (`import`).
    fn import(
        key: &mut KeyObj,
        selection: KeySelection,
        params: &Params<'_>,
    ) -> Result<(), Failure>;
    /// Hands the parts `selection` names to `sink`; returns the callback's answer (`export`).
    fn export(
        key: &KeyObj,
        selection: KeySelection,
        sink: &mut Callback<'_>,
    ) -> Result<c_int, Failure>;
    /// The parameters import accepts and export produces, terminated by `END`.
    fn import_export_types(selection: KeySelection) -> &'static [OSSL_PARAM];
    /// A copy of the parts `selection` names (`dup`).
    fn duplicate(key: &KeyObj, selection: KeySelection) -> Result<KeyObj, Failure>;
    fn get_params(key: &KeyObj, params: &mut ParamsMut<'_>) -> Result<(), Failure>;
    /// The descriptors `get_params` writes, terminated by `END`.
    fn gettable_params() -> &'static [OSSL_PARAM];
    /// The algorithm name operation `operation_id` is fetched with for this key type.
    fn operation_name(operation_id: c_int) -> Option<&'static CStr>;
    /// A generation context for the parts `selection` names, set up with `params`.
    fn gen_init(
        prov: Arc<ProvCtx>,
        selection: KeySelection,
        params: &Params<'_>,
    ) -> Result<Self::Generation, Failure>;
    /// The descriptors the generation's `set_params` reads, terminated by `END`.
    fn gen_settable_params() -> &'static [OSSL_PARAM];
    /// A key object of instance `prov` from a reference a decoder of that instance made.
    fn load(prov: Arc<ProvCtx>, reference: &Reference<'_>) -> Result<KeyObj, Failure>;
}

/// The type of `OSSL_CALLBACK` (core_dispatch.h).
type OsslCallback = unsafe extern "C" fn(params: *const OSSL_PARAM, arg: *mut c_void) -> c_int;

/// A callback of the core with its argument (`OSSL_CALLBACK` and `cbarg`): export's sink, or
/// key generation's progress report. Valid for the call that received it.
pub struct Callback<'a> {
    cb: OsslCallback,
    arg: *mut c_void,
    _call: PhantomData<&'a mut c_void>,
}

impl Callback<'_> {
    /// The callback's answer to `params` (1: accepted; 0: refused).
    pub fn call(&mut self, params: &OwnedParams) -> c_int {
        // SAFETY: the core's callback with the argument it gave for this call, which is still
        // running; params is a terminated array we own, valid across the call.
        unsafe { (self.cb)(params.as_ptr(), self.arg) }
    }
}

/// What a decoder of the default provider hands `load`: a reference to a key object of the
/// default provider's (an address and a size), meaningful only to that provider's key
/// management, which loads it.
pub struct Reference<'a> {
    ptr: *const c_void,
    size: usize,
    _call: PhantomData<&'a c_void>,
}

type LoadFn = unsafe extern "C" fn(*const c_void, usize) -> *mut c_void;
type ExportFn =
    unsafe extern "C" fn(*mut c_void, c_int, Option<OsslCallback>, *mut c_void) -> c_int;
type FreeFn = unsafe extern "C" fn(*mut c_void);

impl Reference<'_> {
    /// Loads the reference with the key management of `prov`'s private default provider for
    /// key type `name`, exports the parts `selection` names into `import`, and frees the
    /// default provider's copy. kae never looks inside the reference itself.
    pub fn export_from_default<F: FnMut(&Params<'_>) -> bool>(
        &self,
        prov: &ProvCtx,
        name: &str,
        selection: KeySelection,
        mut import: F,
    ) -> Result<(), Failure> {
        let (Some(load), Some(export), Some(free)) = (
            default_keymgmt_fn(prov, name, OSSL_FUNC_KEYMGMT_LOAD),
            default_keymgmt_fn(prov, name, OSSL_FUNC_KEYMGMT_EXPORT),
            default_keymgmt_fn(prov, name, OSSL_FUNC_KEYMGMT_FREE),
        ) else {
            return Err(Failure::with(
                KaeError::DefaultProviderUnavailable,
                "default key management lacks load/export",
            ));
        };
        // SAFETY: the function ids fix these types (core_dispatch.h).
        let (load, export, free): (LoadFn, ExportFn, FreeFn) = unsafe {
            (
                core::mem::transmute::<unsafe extern "C" fn(), LoadFn>(load),
                core::mem::transmute::<unsafe extern "C" fn(), ExportFn>(export),
                core::mem::transmute::<unsafe extern "C" fn(), FreeFn>(free),
            )
        };
        // SAFETY: the reference came from the default provider's decoder, which is what its
        // load expects, and is valid for this call.
        let theirs = unsafe { load(self.ptr, self.size) };
        if theirs.is_null() {
            return Err(Failure::with(
                KaeError::InvalidKey,
                "default provider could not load the decoded key",
            ));
        }
        // SAFETY: their keydata with their export; the trampoline's argument is `import`, of
        // the type it is instantiated with, alive across the call.
        let ok = unsafe {
            export(
                theirs,
                selection.bits(),
                Some(import_trampoline::<F>),
                (&mut import as *mut F).cast(),
            )
        };
        // SAFETY: theirs came non-NULL from their load and is not used after this; free is the
        // same key management's, so its owner frees it once.
        unsafe { free(theirs) };
        if ok != 1 {
            return Err(Failure::with(
                KaeError::InvalidKey,
                "export from the default provider failed",
            ));
        }
        Ok(())
    }
}

/// The callback the default provider's export calls: `arg` is the `import` closure.
unsafe extern "C" fn import_trampoline<F: FnMut(&Params<'_>) -> bool>(
    params: *const OSSL_PARAM,
    arg: *mut c_void,
) -> c_int {
    // SAFETY: arg is the &mut F export_from_default passed, alive and unborrowed elsewhere
    // during the export that calls us.
    let Some(import) = (unsafe { arg.cast::<F>().as_mut() }) else {
        return 0;
    };
    // SAFETY: the default provider's export passes a terminated array, valid for this call.
    let params = unsafe { Params::from_ptr(params) };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| import(&params)))
        .map_or(0, c_int::from)
}

/// Function `id` of the private default provider's key management for key type `name` (the
/// first of its names).
fn default_keymgmt_fn(prov: &ProvCtx, name: &str, id: c_int) -> Option<unsafe extern "C" fn()> {
    let mut a = prov.private_default?.query_operation(OSSL_OP_KEYMGMT);
    // SAFETY: the table of a provider we hold a reference to: static and terminated, as are
    // the dispatch tables it points to.
    unsafe {
        if a.is_null() {
            return None;
        }
        while !(*a).algorithm_names.is_null() {
            let names = CStr::from_ptr((*a).algorithm_names).to_string_lossy();
            if names.split(':').next() == Some(name) {
                let mut d = (*a).implementation;
                while (*d).function_id != 0 {
                    if (*d).function_id == id {
                        return (*d).function;
                    }
                    d = d.add(1);
                }
            }
            a = a.add(1);
        }
    }
    None
}

// ---- shims ----------------------------------------------------------------------------------

/// Runs `f` on the key object behind `keydata` inside the panic guard, raising a failure
/// through the key's core: `on_error` when `f` fails or there is no key object of ours.
///
/// # Safety
/// `keydata` is NULL or a keydata pointer of the core, valid for the call (see [`key`]).
unsafe fn with_key<T>(
    keydata: *const c_void,
    on_error: T,
    f: impl FnOnce(&KeyObj) -> Result<T, Failure>,
) -> T {
    // SAFETY: the caller's contract is key's.
    let Some(obj) = (unsafe { key(keydata.cast_mut()) }) else {
        return on_error;
    };
    guard(Some(&obj.prov.core), on_error, || f(obj))
}

unsafe extern "C" fn new<K: KeyManagement>(provctx: *mut c_void) -> *mut c_void {
    let Some(prov) = provider(provctx) else {
        return core::ptr::null_mut();
    };
    let core = prov.core;
    guard(Some(&core), core::ptr::null_mut(), || {
        K::new_key(prov).map(KeyObj::into_raw)
    })
}

unsafe extern "C" fn free(keydata: *mut c_void) {
    // SAFETY: the core frees, once, a key object our key management made.
    let _ = std::panic::catch_unwind(|| unsafe { super::key::free_object(keydata) });
}

unsafe extern "C" fn dup<K: KeyManagement>(
    keydata: *const c_void,
    selection: c_int,
) -> *mut c_void {
    // SAFETY: the core's keydata, valid for the call.
    unsafe {
        with_key(keydata, core::ptr::null_mut(), |k| {
            K::duplicate(k, KeySelection(selection)).map(KeyObj::into_raw)
        })
    }
}

unsafe extern "C" fn has<K: KeyManagement>(keydata: *const c_void, selection: c_int) -> c_int {
    // SAFETY: the core's keydata, valid for the call.
    unsafe {
        with_key(
            keydata,
            0,
            |k| Ok(K::has(k, KeySelection(selection)).into()),
        )
    }
}

unsafe extern "C" fn matches<K: KeyManagement>(
    keydata1: *const c_void,
    keydata2: *const c_void,
    selection: c_int,
) -> c_int {
    // SAFETY: the core's two keydata pointers, valid for the call.
    let (Some(a), Some(b)) = (unsafe { key(keydata1.cast_mut()) }, unsafe {
        key(keydata2.cast_mut())
    }) else {
        return 0;
    };
    guard(Some(&a.prov.core), 0, || {
        Ok::<_, Failure>(K::matches(a, b, KeySelection(selection)).into())
    })
}

unsafe extern "C" fn validate<K: KeyManagement>(
    keydata: *const c_void,
    selection: c_int,
    check_type: c_int,
) -> c_int {
    // SAFETY: the core's keydata, valid for the call.
    unsafe {
        with_key(keydata, 0, |k| {
            K::validate(k, KeySelection(selection), check_type).map(|()| 1)
        })
    }
}

unsafe extern "C" fn import<K: KeyManagement>(
    keydata: *mut c_void,
    selection: c_int,
    ps: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core imports only into NULL or a keydata our `new` just made, which nothing
    // else uses yet: from_ptr_mut's contract (exclusive access).
    let Some(obj) = (unsafe { KeyObj::from_ptr_mut(keydata) }) else {
        return 0;
    };
    let core = obj.prov.core;
    guard(Some(&core), 0, || {
        // SAFETY: the core's parameter array, valid for the call.
        K::import(obj, KeySelection(selection), &unsafe { params(ps) }).map(|()| 1)
    })
}

unsafe extern "C" fn export<K: KeyManagement>(
    keydata: *mut c_void,
    selection: c_int,
    cb: Option<OsslCallback>,
    cbarg: *mut c_void,
) -> c_int {
    // SAFETY: the core's keydata, callback and argument, valid for the call.
    unsafe {
        with_key(keydata, 0, |k| {
            let cb = cb.ok_or(KaeError::NullParameter)?;
            let mut sink = Callback {
                cb,
                arg: cbarg,
                _call: PhantomData,
            };
            K::export(k, KeySelection(selection), &mut sink)
        })
    }
}

unsafe extern "C" fn import_export_types<K: KeyManagement>(selection: c_int) -> *const OSSL_PARAM {
    std::panic::catch_unwind(|| K::import_export_types(KeySelection(selection)).as_ptr())
        .unwrap_or(core::ptr::null())
}

unsafe extern "C" fn get_params<K: KeyManagement>(
    keydata: *mut c_void,
    ps: *mut OSSL_PARAM,
) -> c_int {
    // SAFETY: the core's keydata and its writable parameter array, valid for the call.
    unsafe {
        with_key(keydata, 0, |k| {
            K::get_params(k, &mut params_mut(ps)).map(|()| 1)
        })
    }
}

unsafe extern "C" fn gettable_params<K: KeyManagement>(_provctx: *mut c_void) -> *const OSSL_PARAM {
    std::panic::catch_unwind(|| K::gettable_params().as_ptr()).unwrap_or(core::ptr::null())
}

unsafe extern "C" fn query_operation_name<K: KeyManagement>(operation_id: c_int) -> *const c_char {
    std::panic::catch_unwind(|| {
        K::operation_name(operation_id).map_or(core::ptr::null(), CStr::as_ptr)
    })
    .unwrap_or(core::ptr::null())
}

// ---- key generation -------------------------------------------------------------------------

/// The generation context behind `p`.
///
/// # Safety
/// `p` is NULL or a context of type `G` that [`gen_init`] returned and the core has not
/// cleaned up; the core uses it from no other thread during the call.
unsafe fn generation<'a, G: KeyGeneration>(p: *mut c_void) -> Option<&'a mut G> {
    // SAFETY: per the contract, NULL or a live Box<G> leaked by gen_init, borrowed once.
    unsafe { p.cast::<G>().as_mut() }
}

unsafe extern "C" fn gen_init<K: KeyManagement>(
    provctx: *mut c_void,
    selection: c_int,
    ps: *const OSSL_PARAM,
) -> *mut c_void {
    let Some(prov) = provider(provctx) else {
        return core::ptr::null_mut();
    };
    let core = prov.core;
    guard(Some(&core), core::ptr::null_mut(), || {
        // SAFETY: the core's parameter array, valid for the call.
        let g = K::gen_init(prov, KeySelection(selection), &unsafe { params(ps) })?;
        Ok::<_, Failure>(Box::into_raw(Box::new(g)).cast())
    })
}

unsafe extern "C" fn gen_set_params<K: KeyManagement>(
    genctx: *mut c_void,
    ps: *const OSSL_PARAM,
) -> c_int {
    // SAFETY: the core passes a context our gen_init returned (or NULL), not yet cleaned up.
    let Some(g) = (unsafe { generation::<K::Generation>(genctx) }) else {
        return 0;
    };
    let core = g.provider().core;
    // SAFETY: the core's parameter array, valid for the call.
    guard(Some(&core), 0, || {
        g.set_params(&unsafe { params(ps) }).map(|()| 1)
    })
}

unsafe extern "C" fn gen_settable_params<K: KeyManagement>(
    _genctx: *mut c_void,
    _provctx: *mut c_void,
) -> *const OSSL_PARAM {
    std::panic::catch_unwind(|| K::gen_settable_params().as_ptr()).unwrap_or(core::ptr::null())
}

unsafe extern "C" fn gen<K: KeyManagement>(
    genctx: *mut c_void,
    cb: Option<OsslCallback>,
    cbarg: *mut c_void,
) -> *mut c_void {
    // SAFETY: the core passes a context our gen_init returned (or NULL), not yet cleaned up.
    let Some(g) = (unsafe { generation::<K::Generation>(genctx) }) else {
        return core::ptr::null_mut();
    };
    let mut progress = cb.map(|cb| Callback {
        cb,
        arg: cbarg,
        _call: PhantomData,
    });
    let core = g.provider().core;
    guard(Some(&core), core::ptr::null_mut(), || {
        g.generate(progress.as_mut()).map(KeyObj::into_raw)
    })
}

unsafe extern "C" fn gen_cleanup<K: KeyManagement>(genctx: *mut c_void) {
    if !genctx.is_null() {
        // SAFETY: genctx is the Box our gen_init leaked; the core cleans it up once and never
        // uses it after.
        let _ = std::panic::catch_unwind(|| {
            drop(unsafe { Box::from_raw(genctx.cast::<K::Generation>()) })
        });
    }
}

// ---- load, one per instance slot ------------------------------------------------------------

/// `load` of the instance in `SLOT` (`provider::instance`): `load` receives no provider
/// context, so the slot says which kae instance's decoders made the reference, and the key
/// is attached to that instance.
unsafe extern "C" fn load<K: KeyManagement, const SLOT: usize>(
    reference: *const c_void,
    size: usize,
) -> *mut c_void {
    let prov = crate::provctx::instance(SLOT);
    let core = prov.as_ref().map(|p| p.core);
    guard(core.as_ref(), core::ptr::null_mut(), || {
        let prov = prov.ok_or(KaeError::DefaultProviderUnavailable)?;
        let reference = Reference {
            ptr: reference,
            size,
            _call: PhantomData,
        };
        K::load(prov, &reference).map(KeyObj::into_raw)
    })
}

/// The `load` of each instance slot (an array of `MAX_INSTANCES`, so a change of that number
/// does not compile until this list follows it).
fn loads<K: KeyManagement>() -> [LoadFn; MAX_INSTANCES] {
    [
        load::<K, 0>,
        load::<K, 1>,
        load::<K, 2>,
        load::<K, 3>,
        load::<K, 4>,
        load::<K, 5>,
        load::<K, 6>,
        load::<K, 7>,
    ]
}

/// The `OSSL_OP_KEYMGMT` dispatch table of `K` for the instance in slot `slot`
/// (< `MAX_INSTANCES`): only `load` differs between slots.
pub fn table<K: KeyManagement>(slot: usize) -> Table<OSSL_DISPATCH> {
    let load = loads::<K>()[slot];
    crate::abi::dispatch![
        OSSL_FUNC_KEYMGMT_LOAD => load,
        OSSL_FUNC_KEYMGMT_NEW => new::<K> as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_KEYMGMT_FREE => free as unsafe extern "C" fn(_),
        OSSL_FUNC_KEYMGMT_DUP => dup::<K> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_KEYMGMT_HAS => has::<K> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_KEYMGMT_MATCH => matches::<K> as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_KEYMGMT_VALIDATE => validate::<K> as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_KEYMGMT_IMPORT => import::<K> as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_KEYMGMT_IMPORT_TYPES => import_export_types::<K> as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_KEYMGMT_EXPORT => export::<K> as unsafe extern "C" fn(_, _, _, _) -> _,
        OSSL_FUNC_KEYMGMT_EXPORT_TYPES => import_export_types::<K> as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_KEYMGMT_GET_PARAMS => get_params::<K> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_KEYMGMT_GETTABLE_PARAMS => gettable_params::<K> as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_KEYMGMT_QUERY_OPERATION_NAME => query_operation_name::<K> as unsafe extern "C" fn(_) -> _,
        OSSL_FUNC_KEYMGMT_GEN_INIT => gen_init::<K> as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_KEYMGMT_GEN_SET_PARAMS => gen_set_params::<K> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_KEYMGMT_GEN_SETTABLE_PARAMS => gen_settable_params::<K> as unsafe extern "C" fn(_, _) -> _,
        OSSL_FUNC_KEYMGMT_GEN => gen::<K> as unsafe extern "C" fn(_, _, _) -> _,
        OSSL_FUNC_KEYMGMT_GEN_CLEANUP => gen_cleanup::<K> as unsafe extern "C" fn(_),
    ]
}
