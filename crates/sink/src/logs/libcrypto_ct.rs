//! The functions of libcrypto that the validate-sct policy calls (besides
//! validate-certs', in `libcrypto`), loaded the same way (`dlopen` of
//! `libcrypto.so.3` when the policy is asked for); this module holds all
//! of that policy's `unsafe`. Each does what Zeek's `sct_verify` and
//! `x509_spki_hash` do with OpenSSL (zeek/zeek a13de64f,
//! `src/file_analysis/analyzer/x509/functions.bif` lines 659-800 and
//! 805-863).
//!
//! The signatures are OpenSSL 3's (`include/openssl/x509.h.in`,
//! `evp.h`, `x509v3.h.in`).

use std::ffi::{c_char, c_int, c_long, c_uchar, c_void, CStr};
use std::ptr::NonNull;
use std::sync::OnceLock;

use super::libcrypto::{functions, i2d, open, symbol, X509, SONAME};

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
}

/// OpenSSL's `NID_ct_precert_scts` (`obj_mac.h`).
const NID_CT_PRECERT_SCTS: c_int = 951;

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
