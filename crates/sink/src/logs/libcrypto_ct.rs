//! The functions of libcrypto that the validate-sct policy calls (besides
//! validate-certs', in `libcrypto`), loaded the same way (`dlopen` of
//! `libcrypto.so.3` when the policy is asked for); this module holds all
//! of that policy's `unsafe`. Each does what Zeek's `sct_verify` and
//! `x509_spki_hash` do with OpenSSL (zeek/zeek a13de64f,
//! `src/file_analysis/analyzer/x509/functions.bif` lines 659-800 and
//! 805-863), and what its OCSP analyzer does to find the SCT lists of a
//! stapled response (`OCSP.cc`).
//!
//! The signatures are OpenSSL 3's (`include/openssl/x509.h.in`,
//! `evp.h`, `x509v3.h.in`, `ocsp.h.in`, `asn1.h.in`, `objects.h`).

use std::ffi::{c_char, c_int, c_long, c_uchar, c_void, CStr};
use std::ptr::NonNull;
use std::sync::OnceLock;

use super::libcrypto::{functions, i2d, X509, SONAME};
// OpenSSL's opaque OCSP types, declared once beside validate-ocsp's calls.
use super::ocsp::{OcspBasicResp, OcspResponse, OcspSingleResp};

#[repr(C)]
pub struct X509Extension {
    _p: [u8; 0],
}
#[repr(C)]
pub struct X509Pubkey {
    _p: [u8; 0],
}
#[repr(C)]
pub struct EvpPkey {
    _p: [u8; 0],
}
#[repr(C)]
pub struct EvpMd {
    _p: [u8; 0],
}
#[repr(C)]
pub struct EvpMdCtx {
    _p: [u8; 0],
}
#[repr(C)]
pub struct Asn1Object {
    _p: [u8; 0],
}
#[repr(C)]
pub struct Asn1String {
    _p: [u8; 0],
}

functions! {
    struct CtLib;
    d2i_X509: fn(*mut *mut X509, *mut *const c_uchar, c_long) -> *mut X509;
    X509_free: fn(*mut X509);
    X509_get_ext_by_NID: fn(*const X509, c_int, c_int) -> c_int;
    X509_delete_ext: fn(*mut X509, c_int) -> *mut X509Extension;
    X509_EXTENSION_free: fn(*mut X509Extension);
    i2d_re_X509_tbs: fn(*mut X509, *mut *mut c_uchar) -> c_int;
    X509_get_X509_PUBKEY: fn(*const X509) -> *mut X509Pubkey;
    i2d_X509_PUBKEY: fn(*const X509Pubkey, *mut *mut c_uchar) -> c_int;
    d2i_PUBKEY: fn(*mut *mut EvpPkey, *mut *const c_uchar, c_long) -> *mut EvpPkey;
    EVP_PKEY_free: fn(*mut EvpPkey);
    EVP_get_digestbyname: fn(*const c_char) -> *const EvpMd;
    EVP_MD_CTX_new: fn() -> *mut EvpMdCtx;
    EVP_MD_CTX_free: fn(*mut EvpMdCtx);
    EVP_DigestVerifyInit: fn(*mut EvpMdCtx, *mut *mut c_void, *const EvpMd, *mut c_void, *mut EvpPkey) -> c_int;
    EVP_DigestVerifyUpdate: fn(*mut EvpMdCtx, *const c_void, usize) -> c_int;
    EVP_DigestVerifyFinal: fn(*mut EvpMdCtx, *const c_uchar, usize) -> c_int;
    ERR_clear_error: fn();
    d2i_OCSP_RESPONSE: fn(*mut *mut OcspResponse, *mut *const c_uchar, c_long) -> *mut OcspResponse;
    OCSP_RESPONSE_free: fn(*mut OcspResponse);
    OCSP_response_get1_basic: fn(*mut OcspResponse) -> *mut OcspBasicResp;
    OCSP_BASICRESP_free: fn(*mut OcspBasicResp);
    OCSP_resp_count: fn(*mut OcspBasicResp) -> c_int;
    OCSP_resp_get0: fn(*mut OcspBasicResp, c_int) -> *mut OcspSingleResp;
    OCSP_SINGLERESP_get_ext_count: fn(*const OcspSingleResp) -> c_int;
    OCSP_SINGLERESP_get_ext: fn(*const OcspSingleResp, c_int) -> *mut X509Extension;
    OCSP_BASICRESP_get_ext_count: fn(*const OcspBasicResp) -> c_int;
    OCSP_BASICRESP_get_ext: fn(*const OcspBasicResp, c_int) -> *mut X509Extension;
    X509_EXTENSION_get_object: fn(*const X509Extension) -> *mut Asn1Object;
    X509_EXTENSION_get_data: fn(*const X509Extension) -> *mut Asn1String;
    OBJ_obj2nid: fn(*const Asn1Object) -> c_int;
    ASN1_STRING_length: fn(*const Asn1String) -> c_int;
    ASN1_STRING_get0_data: fn(*const Asn1String) -> *const c_uchar;
    d2i_ASN1_OCTET_STRING: fn(*mut *mut Asn1String, *mut *const c_uchar, c_long) -> *mut Asn1String;
    ASN1_OCTET_STRING_free: fn(*mut Asn1String);
}

/// OpenSSL's `NID_ct_precert_scts` (`obj_mac.h`).
const NID_CT_PRECERT_SCTS: c_int = 951;

/// OpenSSL's `NID_ct_cert_scts` (`obj_mac.h`): 1.3.6.1.4.1.11129.2.4.5,
/// the SCT list of an OCSP response (RFC 6962 3.3).
const NID_CT_CERT_SCTS: c_int = 954;

/// The functions, loaded once for the run (the first call loads them).
pub fn lib() -> Result<&'static CtLib, String> {
    static LIB: OnceLock<Result<CtLib, String>> = OnceLock::new();
    LIB.get_or_init(|| CtLib::load(SONAME)).as_ref().map_err(|e| e.clone())
}

/// A certificate parsed by OpenSSL, ours alone (freed on drop).
struct OwnedX509<'l>(NonNull<X509>, &'l CtLib);

impl<'l> OwnedX509<'l> {
    fn from_der(lib: &'l CtLib, der: &[u8]) -> Option<OwnedX509<'l>> {
        let len = c_long::try_from(der.len()).ok()?;
        let mut p = der.as_ptr();
        // SAFETY: `p` points at `len` readable bytes; d2i_X509 reads no
        // further and returns a new X509 we own, or null.
        let x = unsafe { (lib.d2i_X509)(std::ptr::null_mut(), &mut p, len) };
        match NonNull::new(x) {
            Some(x) => Some(OwnedX509(x, lib)),
            None => {
                // SAFETY: empties this thread's error queue, nothing else.
                unsafe { (lib.ERR_clear_error)() };
                None
            }
        }
    }
}

impl Drop for OwnedX509<'_> {
    fn drop(&mut self) {
        // SAFETY: ours, freed once.
        unsafe { (self.1.X509_free)(self.0.as_ptr()) }
    }
}

/// The DER of a certificate's SubjectPublicKeyInfo (what Zeek's
/// `x509_spki_hash` hashes: `i2d_X509_PUBKEY(X509_get_X509_PUBKEY(..))`);
/// `None` when the certificate does not parse.
pub fn spki_der(lib: &CtLib, cert_der: &[u8]) -> Option<Vec<u8>> {
    let x = OwnedX509::from_der(lib, cert_der)?;
    // SAFETY: a live X509; the key is borrowed from it for this call.
    let k = unsafe { (lib.X509_get_X509_PUBKEY)(x.0.as_ptr()) };
    if k.is_null() {
        return None;
    }
    // SAFETY: `k` lives as long as `x`; i2d writes at most the length it
    // returned for a null output into the vector `i2d` made of it.
    i2d(|out| unsafe { (lib.i2d_X509_PUBKEY)(k, out) })
}

/// The precertificate's TBSCertificate of an issued certificate: its TBS
/// with the first `ct_precert_scts` extension deleted, re-encoded
/// (`sct_verify`, functions.bif lines 683-727: `X509_dup`,
/// `X509_delete_ext`, `i2d_re_X509_tbs`); `None` when the certificate
/// does not parse or has no such extension (Zeek: an error, not valid).
pub fn precert_tbs(lib: &CtLib, cert_der: &[u8]) -> Option<Vec<u8>> {
    let x = OwnedX509::from_der(lib, cert_der)?;
    // SAFETY: a live X509 of ours.
    let pos = unsafe { (lib.X509_get_ext_by_NID)(x.0.as_ptr(), NID_CT_PRECERT_SCTS, -1) };
    if pos < 0 {
        return None;
    }
    // SAFETY: `pos` is an extension of `x`; the extension removed is ours
    // and freed at once.
    unsafe { (lib.X509_EXTENSION_free)((lib.X509_delete_ext)(x.0.as_ptr(), pos)) };
    // SAFETY: a live X509; i2d as in `spki_der` (each call re-encodes the
    // TBS, the same bytes both times).
    let tbs = i2d(|out| unsafe { (lib.i2d_re_X509_tbs)(x.0.as_ptr(), out) });
    // SAFETY: empties this thread's error queue, nothing else.
    unsafe { (lib.ERR_clear_error)() };
    tbs
}

/// The contents of a byte string OpenSSL holds (empty for null).
///
/// # Safety
/// `s` is null or a live `ASN1_STRING`, which outlives the slice.
unsafe fn string_bytes<'a>(lib: &CtLib, s: *const Asn1String) -> &'a [u8] {
    if s.is_null() {
        return &[];
    }
    // SAFETY: a live string (the caller's word): its data and length.
    let (p, n) = unsafe { ((lib.ASN1_STRING_get0_data)(s), (lib.ASN1_STRING_length)(s)) };
    match usize::try_from(n) {
        // SAFETY: `p` points at `n` bytes owned by `s`.
        Ok(n) if !p.is_null() && n > 0 => unsafe { std::slice::from_raw_parts(p, n) },
        _ => &[],
    }
}

/// The SCT list an extension holds if it is the OCSP SCT-list extension:
/// Zeek's `OCSP::ParseExtensionsSpecific` (zeek/zeek a13de64f
/// `src/file_analysis/analyzer/x509/OCSP.cc:555-565`: `NID_ct_cert_scts`)
/// and `X509Common::ParseSignedCertificateTimestamps`
/// (`X509Common.cc:169-210`: the extension's value is an OCTET STRING
/// holding the list; one that does not parse gives nothing).
///
/// # Safety
/// `ex` is null or a live extension.
unsafe fn ocsp_ext_scts(lib: &CtLib, ex: *const X509Extension, out: &mut Vec<Vec<u8>>) {
    // SAFETY: a live extension (the caller's word); its object is its own.
    if ex.is_null() || unsafe { (lib.OBJ_obj2nid)((lib.X509_EXTENSION_get_object)(ex)) } != NID_CT_CERT_SCTS {
        return;
    }
    // SAFETY: the extension's value, borrowed from it.
    let value = unsafe { string_bytes(lib, (lib.X509_EXTENSION_get_data)(ex)) };
    let Ok(len) = c_long::try_from(value.len()) else {
        return;
    };
    let mut p = value.as_ptr();
    // SAFETY: `p` points at `len` readable bytes; a new string we own, or
    // null.
    let inner = unsafe { (lib.d2i_ASN1_OCTET_STRING)(std::ptr::null_mut(), &mut p, len) };
    if inner.is_null() {
        // SAFETY: empties this thread's error queue, nothing else.
        unsafe { (lib.ERR_clear_error)() };
        return;
    }
    // SAFETY: ours, live until freed just after.
    out.push(unsafe { string_bytes(lib, inner) }.to_vec());
    // SAFETY: ours, freed once.
    unsafe { (lib.ASN1_OCTET_STRING_free)(inner) };
}

/// The SCT lists (RFC 6962 3.3's `SignedCertificateTimestampList`, each
/// still framed) of a DER OCSP response, in the order Zeek's OCSP analyzer
/// raises `x509_ocsp_ext_signed_certificate_timestamp` for them
/// (zeek/zeek a13de64f `src/file_analysis/analyzer/x509/OCSP.cc`): the
/// response parsed by OpenSSL as a whole (`d2i_OCSP_RESPONSE` and
/// `OCSP_response_get1_basic`, lines 122-129 and 401-403; whatever its
/// status), then each single response's extensions (lines 502-509), then
/// the response's own `responseExtensions` (lines 540-547): both places
/// are read. Empty when the response does not parse.
pub fn ocsp_sct_lists(lib: &CtLib, der: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let Ok(len) = c_long::try_from(der.len()) else {
        return out;
    };
    let mut p = der.as_ptr();
    // SAFETY: `p` points at `len` readable bytes; a new response we own,
    // or null.
    let resp = unsafe { (lib.d2i_OCSP_RESPONSE)(std::ptr::null_mut(), &mut p, len) };
    if !resp.is_null() {
        // SAFETY: a live response; a new basic response we own, or null.
        let basic = unsafe { (lib.OCSP_response_get1_basic)(resp) };
        if !basic.is_null() {
            // SAFETY: `basic` is live until freed below; the single
            // responses and extensions are borrowed from it.
            unsafe {
                for i in 0..(lib.OCSP_resp_count)(basic) {
                    let single = (lib.OCSP_resp_get0)(basic, i);
                    if single.is_null() {
                        continue;
                    }
                    for k in 0..(lib.OCSP_SINGLERESP_get_ext_count)(single) {
                        ocsp_ext_scts(lib, (lib.OCSP_SINGLERESP_get_ext)(single, k), &mut out);
                    }
                }
                for k in 0..(lib.OCSP_BASICRESP_get_ext_count)(basic) {
                    ocsp_ext_scts(lib, (lib.OCSP_BASICRESP_get_ext)(basic, k), &mut out);
                }
                (lib.OCSP_BASICRESP_free)(basic);
            }
        }
        // SAFETY: ours, freed once.
        unsafe { (lib.OCSP_RESPONSE_free)(resp) };
    }
    // SAFETY: empties this thread's error queue, nothing else.
    unsafe { (lib.ERR_clear_error)() };
    out
}

/// A public key (`EVP_PKEY`), ours alone: a CT log's, read once (reading
/// one costs about a million instructions, checking a signature with it a
/// tenth of that).
pub struct PubKey {
    ptr: NonNull<EvpPkey>,
    lib: &'static CtLib,
}

// SAFETY: an EVP_PKEY has no tie to a thread and OpenSSL 3 allows
// concurrent use of a key only read (as the openssl crate's PKey, which is
// Send + Sync); ours is never changed once read.
unsafe impl Send for PubKey {}
// SAFETY: as above.
unsafe impl Sync for PubKey {}

impl PubKey {
    /// A DER SubjectPublicKeyInfo read as `sct_verify` reads a log's key
    /// (`d2i_PUBKEY`); `None` when it is not one.
    pub fn from_der(lib: &'static CtLib, der: &[u8]) -> Option<PubKey> {
        let len = c_long::try_from(der.len()).ok()?;
        let mut p = der.as_ptr();
        // SAFETY: `p` points at `len` readable bytes; a new key we own, or
        // null.
        let key = unsafe { (lib.d2i_PUBKEY)(std::ptr::null_mut(), &mut p, len) };
        match NonNull::new(key) {
            Some(ptr) => Some(PubKey { ptr, lib }),
            None => {
                // SAFETY: empties this thread's error queue, nothing else.
                unsafe { (lib.ERR_clear_error)() };
                None
            }
        }
    }
}

impl Drop for PubKey {
    fn drop(&mut self) {
        // SAFETY: ours, freed once.
        unsafe { (self.lib.EVP_PKEY_free)(self.ptr.as_ptr()) }
    }
}

/// Zeek's `hash_to_evp` (functions.bif lines 99-123): the TLS
/// HashAlgorithm registry's numbers 1-6 as OpenSSL's digest names.
fn digest_name(hash_alg: u8) -> Option<&'static CStr> {
    Some(match hash_alg {
        1 => c"MD5",
        2 => c"SHA1",
        3 => c"SHA224",
        4 => c"SHA256",
        5 => c"SHA384",
        6 => c"SHA512",
        _ => return None,
    })
}

/// The end of `sct_verify` (functions.bif lines 730-800): `signature`
/// checked over `data` with the log's key (a DER SubjectPublicKeyInfo,
/// `d2i_PUBKEY`) and the SCT's hash algorithm (`EVP_DigestVerify*`; the
/// key says whether it is ECDSA or RSA). As Zeek returns the int
/// `EVP_DigestVerifyFinal` gives through a `bool`, anything but 0 counts
/// as valid (OpenSSL 3 gives -1 for a signature that is not DER). The key
/// is read once per log ([`PubKey`]) where Zeek reads it at each call.
pub fn verify(key: &PubKey, hash_alg: u8, data: &[u8], signature: &[u8]) -> bool {
    let lib = key.lib;
    let Some(name) = digest_name(hash_alg) else {
        return false;
    };
    // SAFETY: a NUL-terminated name; a static digest, or null.
    let md = unsafe { (lib.EVP_get_digestbyname)(name.as_ptr()) };
    // SAFETY: no arguments; a new context we own, or null.
    let ctx = unsafe { (lib.EVP_MD_CTX_new)() };
    let rc = if md.is_null() || ctx.is_null() {
        0
    } else {
        // SAFETY: a live context, digest and key; the context takes its own
        // reference of the key, released when it is freed (below).
        unsafe {
            if (lib.EVP_DigestVerifyInit)(ctx, std::ptr::null_mut(), md, std::ptr::null_mut(), key.ptr.as_ptr()) != 1
                || (lib.EVP_DigestVerifyUpdate)(ctx, data.as_ptr() as *const c_void, data.len()) != 1
            {
                0
            } else {
                (lib.EVP_DigestVerifyFinal)(ctx, signature.as_ptr(), signature.len())
            }
        }
    };
    // SAFETY: ours, freed once (a null context is accepted); then this
    // thread's error queue emptied.
    unsafe {
        (lib.EVP_MD_CTX_free)(ctx);
        (lib.ERR_clear_error)();
    }
    rc != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::process::Command;

    fn openssl(dir: &Path, args: &[&str]) {
        let out = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// Signatures made by `openssl dgst -sign` with a P-256 and an RSA key
    /// verify over their data with SHA-256 (4) and not over other data or
    /// with another hash; a hash Zeek does not map gives false, a key that
    /// is not one does not read; a signature that is not DER counts as valid for ECDSA,
    /// as Zeek's `bool` of EVP_DigestVerifyFinal's -1 does.
    #[test]
    fn signatures_verify_as_sct_verify_checks_them() {
        let lib = lib().unwrap();
        let dir = std::env::temp_dir().join(format!("wirelog-ctcrypto-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("data"), b"the signed structure").unwrap();
        for (name, gen) in [("ec", &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"][..]), ("rsa", &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"][..])] {
            let key = format!("{name}.key");
            let mut a = vec!["genpkey"];
            a.extend(gen);
            a.extend(["-out", &key]);
            openssl(&dir, &a);
            openssl(&dir, &["pkey", "-in", &key, "-pubout", "-outform", "DER", "-out", "pub.der"]);
            openssl(&dir, &["dgst", "-sha256", "-sign", &key, "-out", "sig", "data"]);
            let (pubkey, sig) = (std::fs::read(dir.join("pub.der")).unwrap(), std::fs::read(dir.join("sig")).unwrap());
            assert!(PubKey::from_der(lib, &pubkey[1..]).is_none(), "{name}");
            let key = PubKey::from_der(lib, &pubkey).unwrap();
            assert!(verify(&key, 4, b"the signed structure", &sig), "{name}");
            assert!(!verify(&key, 4, b"the signed structure!", &sig), "{name}");
            assert!(!verify(&key, 5, b"the signed structure", &sig), "{name}");
            assert!(!verify(&key, 9, b"the signed structure", &sig), "{name}");
            if name == "ec" {
                assert!(verify(&key, 4, b"the signed structure", b"not DER"), "OpenSSL 3's -1 for ECDSA");
            }
        }
        assert!(PubKey::from_der(lib, b"\x30\x00").is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The precertificate TBS and the key of a certificate OpenSSL made:
    /// no SCT extension gives none; the SPKI is the public key's DER.
    #[test]
    fn spki_and_precert_tbs() {
        let lib = lib().unwrap();
        let dir = std::env::temp_dir().join(format!("wirelog-ctcrypto-tbs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        openssl(&dir, &["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "k", "-out", "c.der", "-outform", "DER", "-subj", "/CN=x", "-days", "2"]);
        openssl(&dir, &["pkey", "-in", "k", "-pubout", "-outform", "DER", "-out", "pub.der"]);
        let der = std::fs::read(dir.join("c.der")).unwrap();
        assert_eq!(spki_der(lib, &der).unwrap(), std::fs::read(dir.join("pub.der")).unwrap());
        assert_eq!(precert_tbs(lib, &der), None);
        assert_eq!(spki_der(lib, b"\x30\x00"), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
