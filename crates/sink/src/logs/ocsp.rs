//! Zeek's validate-ocsp policy (`--zeek-policy validate-ocsp`): the OCSP
//! response a TLS server stapled (its CertificateStatus message) checked
//! as Zeek's `x509_ocsp_verify` checks it, through the same OpenSSL calls
//! of the system's libcrypto (loaded at run time, as validate-certs), giving
//! ssl.log's `ocsp_status`: `good`, `revoked`, `unknown`, or the text of
//! the check that failed.
//!
//! The rules, from zeek/zeek a13de64f:
//! - `scripts/policy/protocols/ssl/validate-ocsp.zeek`: the response of
//!   `ssl_stapled_ocsp` is kept (lines 34-37; the SSL analyzer raises it
//!   for a CertificateStatus of status_type 1 with a non-empty response,
//!   `src/analyzer/protocol/ssl/tls-handshake-analyzer.pac:419-442`); at
//!   `ssl_established` (lines 39-75) nothing is written unless the server
//!   sent a certificate, its first one decodes and a response was kept
//!   (line 41); the chain is the certificates that decode, in order (lines
//!   45-50). So a handshake that never got established, TLS 1.3 (the
//!   Certificate message and its status_request entry are encrypted) and a
//!   server that stapled nothing leave `ocsp_status` unset.
//! - The cache (lines 32, 52-62): `recently_ocsp_validated` is keyed by the
//!   response's SHA-256 *and the chain's file ids*, which are made per
//!   connection (the file handle hashes the connection's start time and id:
//!   `tls-handshake-analyzer.pac`'s `proc_certificate`), so an entry is
//!   never found by another connection: every established connection with
//!   a staple is verified, at its own time. wirelog keeps no cache either.
//! - `src/file_analysis/analyzer/x509/functions.bif` (`x509_ocsp_verify`,
//!   lines 257-525, and `x509_get_ocsp_signer`, lines 62-97) is what
//!   [`verify`] does, call for call; each step cites its line.
//!
//! Where wirelog departs: the trust store is `--ca-file` (by default the
//! system's), Zeek's the Mozilla list it ships; OpenSSL's error queue is
//! emptied before each verification (Zeek's may hold an earlier error,
//! which `ERR_get_error` would then report instead of the signature's);
//! the time is the end of the handshake (the last packet of either side's
//! handshake), which is the packet that completes `ssl_established`.
//!
//! This runs on the output thread, off the packet path.

use std::ffi::{c_char, c_int, c_long, c_uchar, c_uint, c_ulong, c_void, CStr};
use std::path::Path;
use std::ptr::{self, NonNull};
use std::sync::OnceLock;

use super::libcrypto::{self, functions, Cert, Lib, ParsedCerts, Stack, Store, X509Name, X509Store, X509StoreCtx, X509};
use wirelog_record::{Detail, TxRecord};

// OpenSSL's opaque types of OCSP (the Nomicon's form, as libcrypto.rs).
#[repr(C)]
pub struct OcspResponse {
    _p: [u8; 0],
}
#[repr(C)]
pub struct OcspBasicResp {
    _p: [u8; 0],
}
#[repr(C)]
pub struct OcspSingleResp {
    _p: [u8; 0],
}
#[repr(C)]
pub struct OcspCertId {
    _p: [u8; 0],
}
#[repr(C)]
pub struct Asn1String {
    _p: [u8; 0],
}
#[repr(C)]
pub struct X509Object {
    _p: [u8; 0],
}
#[repr(C)]
pub struct EvpMd {
    _p: [u8; 0],
}

// The functions x509_ocsp_verify calls, OpenSSL 3's signatures
// (include/openssl/ocsp.h.in, x509.h.in, x509_vfy.h.in, asn1.h.in,
// evp.h, err.h.in, stack.h).
functions! {
    struct Ocsp;
    d2i_OCSP_RESPONSE: fn(*mut *mut OcspResponse, *mut *const c_uchar, c_long) -> *mut OcspResponse;
    OCSP_RESPONSE_free: fn(*mut OcspResponse);
    OCSP_response_status: fn(*mut OcspResponse) -> c_int;
    OCSP_response_status_str: fn(c_long) -> *const c_char;
    OCSP_response_get1_basic: fn(*mut OcspResponse) -> *mut OcspBasicResp;
    OCSP_BASICRESP_free: fn(*mut OcspBasicResp);
    OCSP_basic_add1_cert: fn(*mut OcspBasicResp, *mut X509) -> c_int;
    OCSP_resp_get0_certs: fn(*const OcspBasicResp) -> *const Stack;
    OCSP_resp_get0_id: fn(*const OcspBasicResp, *mut *const Asn1String, *mut *const X509Name) -> c_int;
    OCSP_basic_verify: fn(*mut OcspBasicResp, *mut Stack, *mut X509Store, c_ulong) -> c_int;
    OCSP_cert_to_id: fn(*const EvpMd, *const X509, *const X509) -> *mut OcspCertId;
    OCSP_CERTID_free: fn(*mut OcspCertId);
    OCSP_resp_get0: fn(*mut OcspBasicResp, c_int) -> *mut OcspSingleResp;
    OCSP_SINGLERESP_get0_id: fn(*const OcspSingleResp) -> *const OcspCertId;
    OCSP_id_cmp: fn(*const OcspCertId, *const OcspCertId) -> c_int;
    OCSP_single_get0_status: fn(*mut OcspSingleResp, *mut c_int, *mut *mut Asn1String, *mut *mut Asn1String, *mut *mut Asn1String) -> c_int;
    OCSP_cert_status_str: fn(c_long) -> *const c_char;
    X509_get_issuer_name: fn(*const X509) -> *mut X509Name;
    X509_get_subject_name: fn(*const X509) -> *mut X509Name;
    X509_NAME_cmp: fn(*const X509Name, *const X509Name) -> c_int;
    X509_find_by_subject: fn(*const Stack, *const X509Name) -> *mut X509;
    X509_pubkey_digest: fn(*const X509, *const EvpMd, *mut c_uchar, *mut c_uint) -> c_int;
    EVP_sha1: fn() -> *const EvpMd;
    ASN1_STRING_length: fn(*const Asn1String) -> c_int;
    ASN1_STRING_get0_data: fn(*const Asn1String) -> *const c_uchar;
    ASN1_GENERALIZEDTIME_check: fn(*const Asn1String) -> c_int;
    ASN1_TIME_cmp_time_t: fn(*const Asn1String, libc::time_t) -> c_int;
    OPENSSL_sk_num: fn(*const Stack) -> c_int;
    OPENSSL_sk_value: fn(*const Stack, c_int) -> *mut c_void;
    OPENSSL_sk_new_null: fn() -> *mut Stack;
    OPENSSL_sk_push: fn(*mut Stack, *const c_void) -> c_int;
    OPENSSL_sk_dup: fn(*const Stack) -> *mut Stack;
    OPENSSL_sk_free: fn(*mut Stack);
    X509_STORE_CTX_new: fn() -> *mut X509StoreCtx;
    X509_STORE_CTX_free: fn(*mut X509StoreCtx);
    X509_STORE_CTX_init: fn(*mut X509StoreCtx, *mut X509Store, *mut X509, *mut Stack) -> c_int;
    X509_STORE_CTX_set_time: fn(*mut X509StoreCtx, c_ulong, libc::time_t);
    X509_STORE_CTX_set_purpose: fn(*mut X509StoreCtx, c_int) -> c_int;
    X509_STORE_CTX_get_error: fn(*const X509StoreCtx) -> c_int;
    X509_STORE_CTX_get_by_subject: fn(*const X509StoreCtx, c_int, *const X509Name, *mut X509Object) -> c_int;
    X509_verify_cert: fn(*mut X509StoreCtx) -> c_int;
    X509_verify_cert_error_string: fn(c_long) -> *const c_char;
    X509_OBJECT_new: fn() -> *mut X509Object;
    X509_OBJECT_free: fn(*mut X509Object);
    X509_OBJECT_get0_X509: fn(*const X509Object) -> *mut X509;
    ERR_get_error: fn() -> c_ulong;
    ERR_error_string_n: fn(c_ulong, *mut c_char, usize);
    ERR_clear_error: fn();
}

// OpenSSL 3's constants (include/openssl/ocsp.h.in, x509v3.h.in,
// x509_vfy.h.in).
const OCSP_RESPONSE_STATUS_SUCCESSFUL: c_int = 0;
const OCSP_NOVERIFY: c_ulong = 0x10;
const X509_PURPOSE_OCSP_HELPER: c_int = 8;
const X509_LU_X509: c_int = 1;
const SHA_DIGEST_LENGTH: usize = 20;

/// The OCSP functions, loaded once for the run (the first call loads them).
fn ocsp_lib() -> Result<&'static Ocsp, String> {
    static LIB: OnceLock<Result<Ocsp, String>> = OnceLock::new();
    LIB.get_or_init(|| Ocsp::load(libcrypto::SONAME)).as_ref().map_err(|e| e.clone())
}

/// A pointer OpenSSL handed us, freed by its free function on drop.
struct Owned<T>(NonNull<T>, unsafe extern "C" fn(*mut T));

impl<T> Owned<T> {
    fn new(p: *mut T, free: unsafe extern "C" fn(*mut T)) -> Option<Owned<T>> {
        NonNull::new(p).map(|p| Owned(p, free))
    }
    fn ptr(&self) -> *mut T {
        self.0.as_ptr()
    }
}

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: ours, of the type this free function takes, freed once.
        unsafe { (self.1)(self.0.as_ptr()) }
    }
}

/// A static NUL-terminated string OpenSSL returns, as text.
fn text(s: *const c_char) -> String {
    if s.is_null() {
        return String::new();
    }
    // SAFETY: non-null, NUL-terminated, static in OpenSSL.
    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
}

/// `x509_get_ocsp_signer` (functions.bif:62-97): the certificate of
/// `certs` the response's ResponderID names, by name, or by the SHA-1 of
/// its public key.
///
/// # Safety
/// `certs` null or a live stack of X509, `basic` live.
unsafe fn signer(o: &Ocsp, certs: *const Stack, basic: *mut OcspBasicResp) -> *mut X509 {
    let (mut key, mut name) = (ptr::null(), ptr::null());
    // SAFETY: live response; the two outputs are borrowed from it.
    if unsafe { (o.OCSP_resp_get0_id)(basic, &mut key, &mut name) } == 0 {
        return ptr::null_mut();
    }
    if !name.is_null() {
        // SAFETY: `certs` per the contract (OpenSSL takes null as empty).
        return unsafe { (o.X509_find_by_subject)(certs, name) };
    }
    // Like OpenSSL, only a SHA-1 key hash is looked up (lines 77-79).
    // SAFETY: `key` is the response's live octet string.
    if unsafe { (o.ASN1_STRING_length)(key) } != SHA_DIGEST_LENGTH as c_int {
        return ptr::null_mut();
    }
    // SAFETY: 20 bytes, as just checked.
    let hash = unsafe { std::slice::from_raw_parts((o.ASN1_STRING_get0_data)(key), SHA_DIGEST_LENGTH) };
    // SAFETY: as above; null counts -1.
    let n = unsafe { (o.OPENSSL_sk_num)(certs) };
    for i in 0..n.max(0) {
        // SAFETY: `i` below the stack's length; its entries are X509s.
        let c = unsafe { (o.OPENSSL_sk_value)(certs, i) } as *mut X509;
        let mut digest = [0u8; SHA_DIGEST_LENGTH];
        // SAFETY: a live certificate, a 20-byte output for SHA-1.
        if unsafe { (o.X509_pubkey_digest)(c, (o.EVP_sha1)(), digest.as_mut_ptr(), ptr::null_mut()) } == 0 {
            continue;
        }
        if digest == hash {
            return c;
        }
    }
    ptr::null_mut()
}

/// `x509_ocsp_verify` of Zeek's functions.bif (lines 257-525): `reply`
/// checked for `chain[0]` (its issuer among the others, or in the store)
/// against `store` at `secs` (Unix seconds), the result string it returns.
pub fn verify(o: &Ocsp, store: &Store, chain: &[Cert], reply: &[u8], secs: i64) -> String {
    let Some(leaf) = chain.first() else {
        return "no certificates".into(); // line 269
    };
    let cert = leaf.ptr.as_ptr();
    let vtime = secs as libc::time_t;
    // SAFETY: empties this thread's error queue, nothing else.
    unsafe { (o.ERR_clear_error)() };
    // Lines 290-294: the chain after the leaf is the untrusted stack (it
    // holds pointers only; `chain` outlives it).
    // SAFETY: no arguments; a new empty stack we own, or null.
    let Some(untrusted) = Owned::new(unsafe { (o.OPENSSL_sk_new_null)() }, o.OPENSSL_sk_free) else {
        return "Problem initializing list of untrusted certificates".into();
    };
    for c in &chain[1..] {
        // SAFETY: live stack and certificate.
        unsafe { (o.OPENSSL_sk_push)(untrusted.ptr(), c.ptr.as_ptr() as *const c_void) };
    }
    let Ok(len) = c_long::try_from(reply.len()) else {
        return "Could not parse OCSP response".into();
    };
    let mut start = reply.as_ptr();
    // Lines 312-318.
    // SAFETY: `start` points at `len` readable bytes; d2i reads no further
    // and returns a new response we own, or null.
    let Some(resp) = Owned::new(unsafe { (o.d2i_OCSP_RESPONSE)(ptr::null_mut(), &mut start, len) }, o.OCSP_RESPONSE_free) else {
        return "Could not parse OCSP response".into();
    };
    // Lines 320-325.
    // SAFETY: a live response.
    let status = unsafe { (o.OCSP_response_status)(resp.ptr()) };
    if status != OCSP_RESPONSE_STATUS_SUCCESSFUL {
        // SAFETY: a static string for any value.
        return text(unsafe { (o.OCSP_response_status_str)(status as c_long) });
    }
    // Lines 327-332.
    // SAFETY: a live response; a new basic response we own, or null.
    let Some(basic) = Owned::new(unsafe { (o.OCSP_response_get1_basic)(resp.ptr()) }, o.OCSP_BASICRESP_free) else {
        return "Could not parse OCSP response".into();
    };
    // Lines 342-349: the server's chain joins the response's certificates
    // (so the signer is found among them), and the last of it whose
    // subject is the leaf's issuer name is the issuer.
    let mut issuer: *mut X509 = ptr::null_mut();
    for c in &chain[1..] {
        let x = c.ptr.as_ptr();
        // SAFETY: live response and certificates; add1 takes a reference
        // of its own; the names are borrowed for the comparison.
        unsafe {
            (o.OCSP_basic_add1_cert)(basic.ptr(), x);
            if (o.X509_NAME_cmp)((o.X509_get_issuer_name)(cert), (o.X509_get_subject_name)(x)) == 0 {
                issuer = x;
            }
        }
    }
    // Lines 353-368.
    // SAFETY: the stack is the live response's (or null).
    let certs = unsafe { (o.OCSP_resp_get0_certs)(basic.ptr()) };
    // SAFETY: as above.
    let signer = unsafe { signer(o, certs, basic.ptr()) };
    if signer.is_null() {
        return "Could not find OCSP responder certificate".into();
    }
    // Lines 370-376: a copy of the response's certificates is the
    // untrusted stack of the signer's verification (non-null: the signer
    // was found in it).
    // SAFETY: a live stack; the copy holds pointers only, freed by us.
    let Some(ocsp_certs) = Owned::new(unsafe { (o.OPENSSL_sk_dup)(certs) }, o.OPENSSL_sk_free) else {
        return "Could not find OCSP responder certificate".into();
    };
    // Lines 378-389: the signer's chain to the trust store, at the time,
    // for the OCSP helper purpose.
    // SAFETY: no arguments; a new context we own, or null.
    let Some(csc) = Owned::new(unsafe { (o.X509_STORE_CTX_new)() }, o.X509_STORE_CTX_free) else {
        return "Problem initializing root store".into();
    };
    // SAFETY: all live (the store, the signer inside `basic`, the stack),
    // and they outlive `csc` (declared after them, dropped first).
    let result = unsafe {
        (o.X509_STORE_CTX_init)(csc.ptr(), store.ptr.as_ptr(), signer, ocsp_certs.ptr());
        (o.X509_STORE_CTX_set_time)(csc.ptr(), 0, vtime);
        (o.X509_STORE_CTX_set_purpose)(csc.ptr(), X509_PURPOSE_OCSP_HELPER);
        (o.X509_verify_cert)(csc.ptr())
    };
    if result != 1 {
        // SAFETY: a live context; a static string for any code.
        return text(unsafe { (o.X509_verify_cert_error_string)((o.X509_STORE_CTX_get_error)(csc.ptr()) as c_long) });
    }
    // Lines 391-399: the response's signature only (OCSP_NOVERIFY); the
    // text of the first error queued.
    // SAFETY: a live response and store.
    let out = unsafe { (o.OCSP_basic_verify)(basic.ptr(), ptr::null_mut(), store.ptr.as_ptr(), OCSP_NOVERIFY) };
    if out < 1 {
        let mut buf = [0 as c_char; 256];
        // SAFETY: ERR_error_string_n writes at most `len` bytes, NUL
        // included, into our buffer.
        unsafe { (o.ERR_error_string_n)((o.ERR_get_error)(), buf.as_mut_ptr(), buf.len()) };
        return text(buf.as_ptr());
    }
    // Lines 410-433: the CertID of the leaf and its issuer (from the chain,
    // else the store, where Zeek looks up the *leaf's* subject, line 416).
    let certid = if !issuer.is_null() {
        // SAFETY: live certificates; a new CertID we own, or null.
        unsafe { (o.OCSP_cert_to_id)(ptr::null(), cert, issuer) }
    } else {
        // SAFETY: no arguments; a new object we own, or null.
        let Some(obj) = Owned::new(unsafe { (o.X509_OBJECT_new)() }, o.X509_OBJECT_free) else {
            return "Could not find issuer of host certificate".into();
        };
        // SAFETY: the live context (its store), the leaf's name borrowed.
        let lookup = unsafe { (o.X509_STORE_CTX_get_by_subject)(csc.ptr(), X509_LU_X509, (o.X509_get_subject_name)(cert), obj.ptr()) };
        if lookup <= 0 {
            return "Could not find issuer of host certificate".into();
        }
        // SAFETY: the object holds a certificate (the lookup succeeded).
        unsafe { (o.OCSP_cert_to_id)(ptr::null(), cert, (o.X509_OBJECT_get0_X509)(obj.ptr())) }
    };
    let Some(certid) = Owned::new(certid, o.OCSP_CERTID_free) else {
        return "Certificate ID construction failed".into();
    };
    // Lines 436-444: the first single response, for this certificate.
    // SAFETY: a live response; the single response is borrowed from it.
    let single = unsafe { (o.OCSP_resp_get0)(basic.ptr(), 0) };
    if single.is_null() {
        return "Could not lookup OCSP response information".into();
    }
    // SAFETY: live CertIDs.
    if unsafe { (o.OCSP_id_cmp)(certid.ptr(), (o.OCSP_SINGLERESP_get0_id)(single)) } != 0 {
        return "OCSP reply is not for host certificate".into();
    }
    // Lines 447-477.
    let (mut this_update, mut next_update) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: a live single response; the times are borrowed from it.
    let kind = unsafe { (o.OCSP_single_get0_status)(single, ptr::null_mut(), ptr::null_mut(), &mut this_update, &mut next_update) };
    if kind == -1 {
        return "OCSP reply failed to retrieve update times".into();
    }
    if this_update.is_null() {
        return "OCSP reply missing thisUpdate field".into();
    }
    if next_update.is_null() {
        return "OCSP reply missing nextUpdate field".into();
    }
    // SAFETY: live times.
    if unsafe { (o.ASN1_GENERALIZEDTIME_check)(this_update) } == 0 {
        return "OCSP reply contains invalid thisUpdate field".into();
    }
    // SAFETY: as above.
    if unsafe { (o.ASN1_GENERALIZEDTIME_check)(next_update) } == 0 {
        return "OCSP reply contains invalid nextUpdate field".into();
    }
    // Lines 486-499: freshness at the time, then the status.
    // SAFETY: live times.
    let (this_cmp, next_cmp) = unsafe { ((o.ASN1_TIME_cmp_time_t)(this_update, vtime), (o.ASN1_TIME_cmp_time_t)(next_update, vtime)) };
    if this_cmp == -2 {
        return "OCSP reply has invalid thisUpdate time".into();
    }
    if this_cmp > 0 {
        return "OCSP reply specifies time in future".into();
    }
    if next_cmp == -2 {
        return "OCSP reply has invalid nextUpdate time".into();
    }
    if next_cmp < 0 {
        return "OCSP reply expired".into();
    }
    // Good or not (lines 494-499), the text is the status's name.
    // SAFETY: a static string for any value.
    text(unsafe { (o.OCSP_cert_status_str)(kind as c_long) })
}

/// The verifier: the trust store, and the certificates parsed so far.
pub struct OcspVerifier {
    lib: &'static Lib,
    ocsp: &'static Ocsp,
    store: Store,
    roots: usize,
    /// Certificates parsed by OpenSSL (a server staples on every handshake
    /// with the same chain, and parsing it cost twice the verification:
    /// `BENCHMARKS.md`).
    parsed: ParsedCerts,
    /// Responses verified.
    pub verified: u64,
}

impl OcspVerifier {
    /// The trust store read from `path` (PEM certificates); an error names
    /// the file and what is wrong, or the library (and the function it
    /// lacks) when libcrypto could not be loaded.
    pub fn from_pem_file(path: &Path) -> Result<OcspVerifier, String> {
        let lib = libcrypto::lib()?;
        let ocsp = ocsp_lib()?;
        let (store, roots) = super::validate::trust_store(lib, path)?;
        Ok(OcspVerifier { lib, ocsp, store, roots, parsed: ParsedCerts::default(), verified: 0 })
    }

    /// Certificates in the trust store.
    pub fn roots(&self) -> usize {
        self.roots
    }

    /// Fills a TLS record's `ocsp_status` (once; other records are left
    /// alone).
    pub fn fill(&mut self, r: &TxRecord) {
        let Detail::Tls(t) = &r.tx.detail else {
            return;
        };
        if t.ocsp_status.0.get().is_some() {
            return;
        }
        // validate-ocsp.zeek:39-42: at ssl_established, with a server
        // certificate that decodes first and a stapled response.
        let status = match (&t.server_certs, &t.ocsp_response, t.established) {
            (Some(ders), Some(reply), true) => {
                // x509_ocsp_verify's default time, network_time() at
                // ssl_established: the packet that ended the handshake.
                let ts = [r.tx.request, r.tx.response].iter().flatten().map(|s| s.last_ns).max().unwrap_or(r.tx.ts_ns());
                let fps: Vec<&str> = t.server_chain().iter().map(|c| c.fingerprint.as_str()).collect();
                let parsed: Vec<Option<Cert>> = fps.iter().zip(ders).map(|(fp, der)| self.parsed.get(self.lib, fp, der)).collect();
                let mut certs = parsed.into_iter();
                match certs.next().flatten() {
                    Some(leaf) => {
                        // Lines 45-50: certificates that do not decode are
                        // holes the BIF skips.
                        let mut chain = vec![leaf];
                        chain.extend(certs.flatten());
                        self.verified += 1;
                        Some(verify(self.ocsp, &self.store, &chain, reply, ts.div_euclid(1_000_000_000)))
                    }
                    None => None,
                }
            }
            _ => None,
        };
        let _ = t.ocsp_status.0.set(status);
    }
}

/// The verifier as the transaction logs use it: every TLS record of a
/// batch gets its status before its line is written.
pub fn fill_batch(v: &mut OcspVerifier, batch: &wirelog_record::Batch) {
    for r in &batch.txs {
        v.fill(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logs::validate::pem_certificates;
    use std::process::Command;

    fn run(dir: &Path, args: &[&str]) -> (bool, String) {
        let out = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl");
        (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    }

    fn openssl(dir: &Path, args: &[&str]) -> String {
        let (ok, text) = run(dir, args);
        assert!(ok, "openssl {args:?}: {text}");
        text
    }

    const EC: [&str; 5] = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];

    /// `stem.pem` and `stem.key`: self-signed when `ca` is `None`, else
    /// issued by `ca` with serial `serial` and the extensions of `ext`.
    fn make(dir: &Path, stem: &str, subj: &str, ca: Option<&str>, serial: &str, ext: &str) {
        let (key, csr, pem) = (format!("{stem}.key"), format!("{stem}.csr"), format!("{stem}.pem"));
        match ca {
            None => {
                let mut a = vec!["req", "-x509"];
                a.extend(EC);
                a.extend(["-keyout", &key, "-out", &pem, "-days", "30", "-subj", subj, "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
                openssl(dir, &a);
            }
            Some(ca) => {
                let mut a = vec!["req", "-new"];
                a.extend(EC);
                a.extend(["-keyout", &key, "-out", &csr, "-subj", subj]);
                openssl(dir, &a);
                let (cacert, cakey) = (format!("{ca}.pem"), format!("{ca}.key"));
                openssl(dir, &["x509", "-req", "-in", &csr, "-CA", &cacert, "-CAkey", &cakey, "-set_serial", serial, "-days", "20", "-extfile", ext, "-out", &pem]);
            }
        }
    }

    fn certs(dir: &Path, lib: &'static Lib, pems: &[&str]) -> Vec<Cert> {
        pems.iter().map(|p| Cert::from_der(lib, &pem_certificates(&std::fs::read(dir.join(p)).unwrap()).unwrap()[0]).unwrap()).collect()
    }

    /// `openssl ocsp`'s own check of a response for `cert` (issuer and
    /// untrusted `int.pem`, trust store `root.pem`): its output.
    fn openssl_check(dir: &Path, resp: &str, cert: &str) -> String {
        run(dir, &["ocsp", "-respin", resp, "-CAfile", "root.pem", "-verify_other", "int.pem", "-issuer", "int.pem", "-cert", cert]).1
    }

    /// `openssl ocsp` verified the response and gave `status` for the
    /// certificate.
    fn says(check: &str, status: &str) -> bool {
        check.contains("Response verify OK") && check.lines().any(|l| l == status)
    }

    /// A CA, an intermediate, two leaves (one revoked in the responder's
    /// index), a delegated OCSP responder and a forger named as the
    /// intermediate, made by OpenSSL here; responses made by `openssl
    /// ocsp`. Each verdict is the BIF's result string, checked against what
    /// `openssl ocsp -respin ... -verify_other -CAfile` says of the same
    /// response where it says the same thing (good, revoked, a signature
    /// that fails: its first queued error), and against the BIF's own text
    /// where OpenSSL's tool words it differently (a response for another
    /// certificate; freshness, which the BIF checks at the packet time).
    #[test]
    fn stapled_responses_get_zeeks_verdicts() {
        let lib = libcrypto::lib().unwrap();
        let o = ocsp_lib().unwrap();
        let dir = std::env::temp_dir().join(format!("wirelog-ocsp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let d = dir.as_path();
        std::fs::write(dir.join("ca.ext"), "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n").unwrap();
        std::fs::write(dir.join("leaf.ext"), "basicConstraints=CA:FALSE\n").unwrap();
        std::fs::write(dir.join("resp.ext"), "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=OCSPSigning\n").unwrap();
        make(d, "root", "/CN=OCSP Test Root", None, "", "");
        make(d, "int", "/CN=OCSP Test Intermediate", Some("root"), "02", "ca.ext");
        make(d, "leaf", "/CN=good.example", Some("int"), "0x10", "leaf.ext");
        make(d, "leaf2", "/CN=revoked.example", Some("int"), "0x11", "leaf.ext");
        make(d, "responder", "/CN=OCSP Test Responder", Some("int"), "0x20", "resp.ext");
        make(d, "forger", "/CN=OCSP Test Intermediate", None, "", "");
        std::fs::write(
            dir.join("index.txt"),
            "V\t351231235959Z\t\t10\tunknown\t/CN=good.example\nR\t351231235959Z\t250101000000Z\t11\tunknown\t/CN=revoked.example\n",
        )
        .unwrap();
        // The responses are made at least two seconds after the
        // certificates, so a time between them is one where the chain is
        // valid and the responses not yet.
        let made = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        std::thread::sleep(std::time::Duration::from_millis(2100));
        for leaf in ["leaf", "leaf2"] {
            openssl(d, &["ocsp", "-issuer", "int.pem", "-cert", &format!("{leaf}.pem"), "-no_nonce", "-reqout", &format!("req-{leaf}.der")]);
        }
        let respond = |req: &str, signer: &str, out: &str, extra: &[&str]| {
            let (pem, key) = (format!("{signer}.pem"), format!("{signer}.key"));
            let mut a = vec!["ocsp", "-index", "index.txt", "-CA", "int.pem", "-rsigner", &pem, "-rkey", &key, "-reqin", req, "-respout", out, "-ndays", "7"];
            a.extend(extra);
            openssl(d, &a);
        };
        respond("req-leaf.der", "responder", "good.der", &[]);
        respond("req-leaf2.der", "responder", "revoked.der", &[]);
        // Signed by the issuing CA itself (no delegated responder).
        respond("req-leaf.der", "int", "byint.der", &[]);
        // Signed by a key that is not the intermediate's, naming it.
        respond("req-leaf.der", "forger", "forged.der", &["-resp_no_certs"]);
        // The responder's issuer sent along: the chain validates without
        // the server's intermediate.
        respond("req-leaf.der", "responder", "withint.der", &["-rother", "int.pem"]);
        let (store, _) = super::super::validate::trust_store(lib, &dir.join("root.pem")).unwrap();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        let read = |f: &str| std::fs::read(dir.join(f)).unwrap();
        let chain = certs(d, lib, &["leaf.pem", "int.pem"]);
        let chain2 = certs(d, lib, &["leaf2.pem", "int.pem"]);

        // good and revoked, as openssl ocsp says.
        assert!(says(&openssl_check(d, "good.der", "leaf.pem"), "leaf.pem: good"));
        assert_eq!(verify(o, &store, &chain, &read("good.der"), now), "good");
        assert!(says(&openssl_check(d, "byint.der", "leaf.pem"), "leaf.pem: good"));
        assert_eq!(verify(o, &store, &chain, &read("byint.der"), now), "good");
        assert!(says(&openssl_check(d, "revoked.der", "leaf2.pem"), "leaf2.pem: revoked"));
        assert_eq!(verify(o, &store, &chain2, &read("revoked.der"), now), "revoked");
        // A wrong signature: OpenSSL's first queued error, as
        // ERR_error_string writes it ("error:code:library::reason").
        let check = openssl_check(d, "forged.der", "leaf.pem");
        assert!(check.contains("Response Verify Failure"), "{check}");
        let first = check.lines().find(|l| l.contains(":error:")).unwrap_or_else(|| panic!("{check}"));
        let f: Vec<&str> = first.split(':').collect();
        let wanted = format!("error:{}:{}::{}", f[2], f[3], f[5]);
        assert_eq!(verify(o, &store, &chain, &read("forged.der"), now), wanted);
        // A response for another certificate: openssl finds no status for
        // it; the BIF's text (line 444).
        assert!(openssl_check(d, "revoked.der", "leaf.pem").contains("leaf.pem: ERROR: No Status found"));
        assert_eq!(verify(o, &store, &chain, &read("revoked.der"), now), "OCSP reply is not for host certificate");
        // Freshness at the packet's time (lines 486-493): before
        // thisUpdate, after nextUpdate (seven days on); before the
        // responder's certificate, its chain fails first (line 383).
        assert_eq!(verify(o, &store, &chain, &read("good.der"), made + 1), "OCSP reply specifies time in future");
        assert_eq!(verify(o, &store, &chain, &read("good.der"), now - 3600), "certificate is not yet valid");
        assert_eq!(verify(o, &store, &chain, &read("good.der"), now + 8 * 86400), "OCSP reply expired");
        // The responder's chain to the trust store fails: its issuer is
        // not sent (X509_verify_cert's text, lines 383-388).
        let alone = certs(d, lib, &["leaf.pem"]);
        assert_eq!(verify(o, &store, &alone, &read("good.der"), now), "unable to get local issuer certificate");
        // The leaf's issuer is not in the server's chain: Zeek looks the
        // leaf's own subject up in the store (line 416), which fails.
        assert_eq!(verify(o, &store, &alone, &read("withint.der"), now), "Could not find issuer of host certificate");
        assert_eq!(verify(o, &store, &chain, &read("withint.der"), now), "good");
        // Not a response; a response saying tryLater (RFC 6960 4.2.1:
        // OCSPResponse with responseStatus 3 and no body).
        assert_eq!(verify(o, &store, &chain, b"\x30\x00", now), "Could not parse OCSP response");
        assert_eq!(verify(o, &store, &chain, &[0x30, 0x03, 0x0a, 0x01, 0x03], now), "trylater");
        assert_eq!(verify(o, &store, &[], &read("good.der"), now), "no certificates");

        // The policy's rules (validate-ocsp.zeek:39-50) through the verifier
        // the logs use: an established handshake, a leaf that decodes, a
        // staple; a certificate that does not decode is a hole skipped.
        let mut v = OcspVerifier::from_pem_file(&dir.join("root.pem")).unwrap();
        assert_eq!(v.roots(), 1);
        let der = |p: &str| pem_certificates(&std::fs::read(dir.join(p)).unwrap()).unwrap().remove(0);
        let rec = |chain: Vec<Vec<u8>>, staple: Option<Vec<u8>>, established: bool| {
            let mut r = wirelog_record::tls::fixtures::handshake(now * 1_000_000_000, chain, None);
            if let Detail::Tls(t) = &mut r.tx.detail {
                t.ocsp_response = staple;
                t.established = established;
            }
            r
        };
        let status = |v: &mut OcspVerifier, r: &TxRecord| {
            v.fill(r);
            let Detail::Tls(t) = &r.tx.detail else { panic!() };
            t.ocsp_status.0.get().cloned().flatten()
        };
        let (leaf, int, hole, good) = (der("leaf.pem"), der("int.pem"), vec![0x30, 0x00], read("good.der"));
        assert_eq!(status(&mut v, &rec(vec![leaf.clone(), int.clone()], Some(good.clone()), true)).as_deref(), Some("good"));
        assert_eq!(status(&mut v, &rec(vec![leaf.clone(), hole.clone(), int.clone()], Some(good.clone()), true)).as_deref(), Some("good"));
        assert_eq!(status(&mut v, &rec(vec![leaf.clone(), int.clone()], Some(good.clone()), false)), None);
        assert_eq!(status(&mut v, &rec(vec![leaf.clone(), int.clone()], None, true)), None);
        assert_eq!(status(&mut v, &rec(vec![hole.clone(), int.clone()], Some(good.clone()), true)), None);
        assert_eq!(status(&mut v, &rec(vec![], Some(good.clone()), true)), None);
        assert_eq!(v.verified, 2);
        // Each certificate parsed once: the leaf, the hole, the intermediate.
        assert_eq!(v.parsed.len(), 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
