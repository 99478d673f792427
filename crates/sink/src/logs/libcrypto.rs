//! The few functions of OpenSSL's libcrypto that validate-certs calls,
//! loaded at run time (`dlopen` of the system's `libcrypto.so.3`, Debian's
//! libssl3) the first time the policy is asked for: wirelog neither needs
//! OpenSSL's headers to build nor libcrypto to start. Each pointer
//! libcrypto hands us is owned by a wrapper that frees it on drop; this
//! module holds all of the policy's `unsafe`.
//!
//! The signatures are OpenSSL 3's (`include/openssl/x509.h.in`,
//! `x509_vfy.h.in`, `stack.h`, `err.h.in` of openssl/openssl 3.0).

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_long, c_uchar, c_ulong, c_void, CStr};
use std::ptr::NonNull;
use std::sync::OnceLock;

/// The library loaded, Debian 12's OpenSSL 3.
pub const SONAME: &str = "libcrypto.so.3";

// OpenSSL's opaque types (the Nomicon's form for an opaque C struct).
#[repr(C)]
pub struct X509 {
    _p: [u8; 0],
}
#[repr(C)]
pub struct X509Name {
    _p: [u8; 0],
}
#[repr(C)]
pub struct X509Store {
    _p: [u8; 0],
}
#[repr(C)]
pub struct X509StoreCtx {
    _p: [u8; 0],
}
#[repr(C)]
pub struct Stack {
    _p: [u8; 0],
}

/// Declares the functions: a struct of their pointers, each resolved by
/// name when the library is loaded.
/// `functions! { struct Name; ... }` declares another such table (the
/// OCSP functions of `super::ocsp`, validate-sct's of
/// `super::libcrypto_ct`), its fields visible to this module's siblings.
macro_rules! functions {
    ($($name:ident: fn($($arg:ty),*) $(-> $ret:ty)?;)*) => {
        functions! { struct Lib; $($name: fn($($arg),*) $(-> $ret)?;)* }
    };
    (struct $lib:ident; $($name:ident: fn($($arg:ty),*) $(-> $ret:ty)?;)*) => {
        #[allow(non_snake_case)]
        pub struct $lib {
            $(pub(super) $name: unsafe extern "C" fn($($arg),*) $(-> $ret)?,)*
        }

        impl $lib {
            /// `soname` opened and every function found in it; an error
            /// names the library, or the library and the missing function.
            fn load(soname: &str) -> Result<$lib, String> {
                let handle = $crate::logs::libcrypto::open(soname)?;
                Ok($lib {
                    $($name: {
                        let p = $crate::logs::libcrypto::symbol(handle, soname, stringify!($name))?;
                        // SAFETY: `p` is the address of the libcrypto
                        // function of this name, whose C signature the
                        // type states (OpenSSL 3's headers).
                        unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) $(-> $ret)?>(p) }
                    },)*
                })
            }
        }
    };
}
pub(super) use functions;

functions! {
    struct Lib;
    d2i_X509: fn(*mut *mut X509, *mut *const c_uchar, c_long) -> *mut X509;
    i2d_X509: fn(*const X509, *mut *mut c_uchar) -> c_int;
    X509_up_ref: fn(*mut X509) -> c_int;
    X509_free: fn(*mut X509);
    X509_get_issuer_name: fn(*const X509) -> *mut X509Name;
    X509_get_subject_name: fn(*const X509) -> *mut X509Name;
    i2d_X509_NAME: fn(*const X509Name, *mut *mut c_uchar) -> c_int;
    X509_STORE_new: fn() -> *mut X509Store;
    X509_STORE_free: fn(*mut X509Store);
    X509_STORE_add_cert: fn(*mut X509Store, *mut X509) -> c_int;
    X509_STORE_CTX_new: fn() -> *mut X509StoreCtx;
    X509_STORE_CTX_free: fn(*mut X509StoreCtx);
    X509_STORE_CTX_init: fn(*mut X509StoreCtx, *mut X509Store, *mut X509, *mut Stack) -> c_int;
    X509_STORE_CTX_set_time: fn(*mut X509StoreCtx, c_ulong, libc::time_t);
    X509_verify_cert: fn(*mut X509StoreCtx) -> c_int;
    X509_STORE_CTX_get_error: fn(*const X509StoreCtx) -> c_int;
    X509_STORE_CTX_get0_chain: fn(*const X509StoreCtx) -> *mut Stack;
    X509_verify_cert_error_string: fn(c_long) -> *const c_char;
    OPENSSL_sk_new_null: fn() -> *mut Stack;
    OPENSSL_sk_push: fn(*mut Stack, *const c_void) -> c_int;
    OPENSSL_sk_num: fn(*const Stack) -> c_int;
    OPENSSL_sk_value: fn(*const Stack, c_int) -> *mut c_void;
    OPENSSL_sk_free: fn(*mut Stack);
    ERR_clear_error: fn();
}

/// The last `dlerror`, or `what` when there is none.
fn dl_error(what: &str) -> String {
    // SAFETY: dlerror returns null or a NUL-terminated string that stays
    // valid until the next dl call on this thread; it is copied at once.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        return what.to_string();
    }
    // SAFETY: non-null, NUL-terminated (above).
    unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
}

pub(super) fn open(soname: &str) -> Result<*mut c_void, String> {
    let name = std::ffi::CString::new(soname).map_err(|_| format!("{soname}: a NUL in the name"))?;
    // SAFETY: `name` is NUL-terminated; the handle is never closed (the
    // functions stay in use for the run).
    let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if h.is_null() {
        return Err(format!("{soname} not found (install libssl3): {}", dl_error("dlopen failed")));
    }
    Ok(h)
}

pub(super) fn symbol(handle: *mut c_void, soname: &str, name: &str) -> Result<*mut c_void, String> {
    let c = std::ffi::CString::new(name).map_err(|_| format!("{name}: a NUL in the name"))?;
    // SAFETY: `handle` is dlopen's, never closed; `c` is NUL-terminated.
    let p = unsafe { libc::dlsym(handle, c.as_ptr()) };
    if p.is_null() {
        return Err(format!("{soname} has no function {name} (OpenSSL 3 is needed): {}", dl_error("not found")));
    }
    Ok(p)
}

/// libcrypto, loaded once for the run (the first call loads it).
pub fn lib() -> Result<&'static Lib, String> {
    static LIB: OnceLock<Result<Lib, String>> = OnceLock::new();
    LIB.get_or_init(|| Lib::load(SONAME)).as_ref().map_err(|e| e.clone())
}

/// `i2d_*` into a vector: `len` gives the length with a null output, then
/// writes it.
pub(super) fn i2d(len: impl Fn(*mut *mut c_uchar) -> c_int) -> Option<Vec<u8>> {
    let n = usize::try_from(len(std::ptr::null_mut())).ok().filter(|&n| n > 0)?;
    let mut out = vec![0u8; n];
    let mut p = out.as_mut_ptr();
    let written = len(&mut p);
    (usize::try_from(written).ok()? == n).then_some(out)
}

/// A certificate (`X509`), one reference of it.
pub struct Cert {
    pub(super) ptr: NonNull<X509>,
    lib: &'static Lib,
}

// SAFETY: an X509 has no tie to a thread; its reference count is atomic
// in OpenSSL 3 and we only read it once parsed (as the openssl crate,
// whose X509 is Send + Sync).
unsafe impl Send for Cert {}
// SAFETY: as above: `&Cert` only reads.
unsafe impl Sync for Cert {}

impl Cert {
    /// A certificate parsed from DER (`d2i_X509`); `None` when it does not
    /// parse.
    pub fn from_der(lib: &'static Lib, der: &[u8]) -> Option<Cert> {
        let len = c_long::try_from(der.len()).ok()?;
        let mut p = der.as_ptr();
        // SAFETY: `p` points at `len` readable bytes; d2i_X509 reads no
        // further and returns a new X509 we own, or null.
        let x = unsafe { (lib.d2i_X509)(std::ptr::null_mut(), &mut p, len) };
        match NonNull::new(x) {
            Some(ptr) => Some(Cert { ptr, lib }),
            None => {
                // SAFETY: empties this thread's error queue, nothing else.
                unsafe { (lib.ERR_clear_error)() };
                None
            }
        }
    }

    /// Another reference to a certificate OpenSSL holds (`X509_up_ref`).
    ///
    /// # Safety
    /// `x` must point at a live X509.
    unsafe fn from_borrowed(lib: &'static Lib, x: NonNull<X509>) -> Cert {
        // SAFETY: `x` is live (the caller's promise); the new reference is
        // the returned Cert's, released by its drop.
        unsafe { (lib.X509_up_ref)(x.as_ptr()) };
        Cert { ptr: x, lib }
    }

    /// The certificate's DER (`i2d_X509`).
    pub fn to_der(&self) -> Option<Vec<u8>> {
        // SAFETY: a live X509; i2d writes at most the length it returned
        // for a null output into the vector `i2d` made of that length.
        i2d(|out| unsafe { (self.lib.i2d_X509)(self.ptr.as_ptr(), out) })
    }

    /// The DER of the issuer's name.
    pub fn issuer_der(&self) -> Option<Vec<u8>> {
        // SAFETY: a live X509; the name is borrowed from it, for this call.
        let name = unsafe { (self.lib.X509_get_issuer_name)(self.ptr.as_ptr()) };
        self.name_der(name)
    }

    /// The DER of the subject's name.
    pub fn subject_der(&self) -> Option<Vec<u8>> {
        // SAFETY: as `issuer_der`.
        let name = unsafe { (self.lib.X509_get_subject_name)(self.ptr.as_ptr()) };
        self.name_der(name)
    }

    fn name_der(&self, name: *mut X509Name) -> Option<Vec<u8>> {
        if name.is_null() {
            return None;
        }
        // SAFETY: `name` is a live X509_NAME of our certificate; i2d as in
        // `to_der`.
        i2d(|out| unsafe { (self.lib.i2d_X509_NAME)(name, out) })
    }
}

impl Clone for Cert {
    fn clone(&self) -> Cert {
        // SAFETY: our own reference keeps it live.
        unsafe { Cert::from_borrowed(self.lib, self.ptr) }
    }
}

impl Drop for Cert {
    fn drop(&mut self) {
        // SAFETY: releases this Cert's one reference.
        unsafe { (self.lib.X509_free)(self.ptr.as_ptr()) }
    }
}

/// Certificates as OpenSSL parsed them (`None`: one does not parse), by
/// their SHA-256 fingerprint: a server shows the same chain on every
/// handshake, and parsing it costs more than verifying it
/// (`BENCHMARKS.md`). Emptied when it holds [`ParsedCerts::KEPT`].
#[derive(Default)]
pub struct ParsedCerts(HashMap<String, Option<Cert>>);

impl ParsedCerts {
    /// Certificates kept at most.
    pub const KEPT: usize = 4096;

    /// The certificate of `fingerprint`, parsed from `der` the first time.
    pub fn get(&mut self, lib: &'static Lib, fingerprint: &str, der: &[u8]) -> Option<Cert> {
        if let Some(c) = self.0.get(fingerprint) {
            return c.clone();
        }
        if self.0.len() >= Self::KEPT {
            self.0.clear();
        }
        let c = Cert::from_der(lib, der);
        self.0.insert(fingerprint.to_string(), c.clone());
        c
    }

    /// Certificates kept (for the tests).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }
}

/// A trust store (`X509_STORE`).
pub struct Store {
    pub(super) ptr: NonNull<X509Store>,
    lib: &'static Lib,
}

// SAFETY: an X509_STORE has no tie to a thread and locks itself in OpenSSL
// 3 (the openssl crate's X509Store is Send + Sync); we add to it only
// through `&mut`.
unsafe impl Send for Store {}
// SAFETY: as above.
unsafe impl Sync for Store {}

impl Store {
    /// An empty store; `None` when OpenSSL could not make one.
    pub fn new(lib: &'static Lib) -> Option<Store> {
        // SAFETY: no arguments; a new store we own, or null.
        NonNull::new(unsafe { (lib.X509_STORE_new)() }).map(|ptr| Store { ptr, lib })
    }

    /// Adds a trusted certificate (the store takes its own reference);
    /// false when refused (a duplicate, for some OpenSSL versions).
    pub fn add(&mut self, c: &Cert) -> bool {
        // SAFETY: both live; X509_STORE_add_cert takes a reference of its
        // own and leaves ours.
        let ok = unsafe { (self.lib.X509_STORE_add_cert)(self.ptr.as_ptr(), c.ptr.as_ptr()) } == 1;
        if !ok {
            // SAFETY: empties this thread's error queue, nothing else.
            unsafe { (self.lib.ERR_clear_error)() };
        }
        ok
    }

    /// `X509_verify_cert` of `leaf` with `untrusted` as the untrusted stack
    /// at time `secs` (Unix seconds): OpenSSL's error code and, when it
    /// verified, the chain it built; `None` when the verification could
    /// not be set up or failed to run (OpenSSL's negative return).
    pub fn verify(&self, leaf: &Cert, untrusted: &[Cert], secs: i64) -> Option<(c_int, Vec<Cert>)> {
        let lib = self.lib;
        let stack = OwnedStack::new(lib)?;
        for c in untrusted {
            // SAFETY: a live stack; it holds the pointer only (no
            // reference), and `untrusted` outlives it (freed below, at the
            // end of this function).
            if unsafe { (lib.OPENSSL_sk_push)(stack.0.as_ptr(), c.ptr.as_ptr() as *const c_void) } <= 0 {
                return None;
            }
        }
        let ctx = Ctx::new(lib)?;
        // SAFETY: all live: ctx, our store, the leaf and the stack, which
        // outlive ctx (dropped first, as declared last).
        if unsafe { (lib.X509_STORE_CTX_init)(ctx.0.as_ptr(), self.ptr.as_ptr(), leaf.ptr.as_ptr(), stack.0.as_ptr()) } != 1 {
            // SAFETY: empties this thread's error queue, nothing else.
            unsafe { (lib.ERR_clear_error)() };
            return None;
        }
        // SAFETY: an initialised ctx; stores the time in its parameters
        // (and sets X509_V_FLAG_USE_CHECK_TIME).
        unsafe { (lib.X509_STORE_CTX_set_time)(ctx.0.as_ptr(), 0, secs as libc::time_t) };
        // SAFETY: an initialised ctx.
        let rc = unsafe { (lib.X509_verify_cert)(ctx.0.as_ptr()) };
        // SAFETY: empties this thread's error queue (the verification's
        // errors are in ctx), nothing else.
        unsafe { (lib.ERR_clear_error)() };
        if rc < 0 {
            return None;
        }
        // SAFETY: ctx is live.
        let err = unsafe { (lib.X509_STORE_CTX_get_error)(ctx.0.as_ptr()) };
        let mut chain = Vec::new();
        if rc == 1 {
            // SAFETY: ctx is live; the chain is borrowed from it (null if
            // none).
            let sk = unsafe { (lib.X509_STORE_CTX_get0_chain)(ctx.0.as_ptr()) };
            if !sk.is_null() {
                // SAFETY: a live stack of X509.
                let n = unsafe { (lib.OPENSSL_sk_num)(sk) };
                for i in 0..n.max(0) {
                    // SAFETY: `i` below the stack's length; its entries
                    // are live X509s, each given a reference of our own.
                    if let Some(x) = NonNull::new(unsafe { (lib.OPENSSL_sk_value)(sk, i) } as *mut X509) {
                        // SAFETY: a live X509 of the ctx's chain.
                        chain.push(unsafe { Cert::from_borrowed(lib, x) });
                    }
                }
            }
        }
        Some((err, chain))
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // SAFETY: ours, freed once.
        unsafe { (self.lib.X509_STORE_free)(self.ptr.as_ptr()) }
    }
}

/// OpenSSL's text of a verification error code.
pub fn error_string(lib: &'static Lib, err: c_int) -> String {
    // SAFETY: returns a static NUL-terminated string for any code.
    let s = unsafe { (lib.X509_verify_cert_error_string)(err as c_long) };
    if s.is_null() {
        return format!("error {err}");
    }
    // SAFETY: non-null, static, NUL-terminated.
    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
}

/// A stack of pointers we do not own (freed, not its entries).
struct OwnedStack(NonNull<Stack>, &'static Lib);

impl OwnedStack {
    fn new(lib: &'static Lib) -> Option<OwnedStack> {
        // SAFETY: no arguments; a new empty stack we own, or null.
        NonNull::new(unsafe { (lib.OPENSSL_sk_new_null)() }).map(|p| OwnedStack(p, lib))
    }
}

impl Drop for OwnedStack {
    fn drop(&mut self) {
        // SAFETY: ours; frees the stack only, its entries are borrowed.
        unsafe { (self.1.OPENSSL_sk_free)(self.0.as_ptr()) }
    }
}

/// A verification context (`X509_STORE_CTX`).
struct Ctx(NonNull<X509StoreCtx>, &'static Lib);

impl Ctx {
    fn new(lib: &'static Lib) -> Option<Ctx> {
        // SAFETY: no arguments; a new context we own, or null.
        NonNull::new(unsafe { (lib.X509_STORE_CTX_new)() }).map(|p| Ctx(p, lib))
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        // SAFETY: ours; X509_STORE_CTX_free also cleans up what init set.
        unsafe { (self.1.X509_STORE_CTX_free)(self.0.as_ptr()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A library that is not there, or one without libcrypto's functions:
    /// errors naming the library (and the function), no panic.
    #[test]
    fn a_missing_library_or_function_is_named() {
        let e = Lib::load("libcrypto.so.0-not-here").err().unwrap();
        assert!(e.starts_with("libcrypto.so.0-not-here not found (install libssl3)"), "{e}");
        let e = Lib::load("libc.so.6").err().unwrap();
        assert!(e.starts_with("libc.so.6 has no function d2i_X509"), "{e}");
    }

    /// The system's libcrypto loads, and a certificate's DER goes through
    /// it unchanged; garbage does not parse.
    #[test]
    fn libcrypto_parses_and_writes_der() {
        let lib = lib().unwrap();
        assert!(Cert::from_der(lib, &[0x30, 0x00]).is_none());
        assert!(Cert::from_der(lib, &[]).is_none());
        assert_eq!(error_string(lib, 0), "ok");
    }
}
