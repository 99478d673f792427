//! TLS as the live tests make it: self-signed certificates from `openssl
//! req`, and what OpenSSL's tools print put as Zeek's logs write it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A certificate and its key, PEM files.
pub struct Cert {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Cert {
    /// The certificate's path as text (for a server's arguments).
    pub fn cert_str(&self) -> &str {
        self.cert.to_str().unwrap()
    }

    /// The key's path as text.
    pub fn key_str(&self) -> &str {
        self.key.to_str().unwrap()
    }
}

/// A self-signed P-256 ECDSA certificate for `subject` (`/CN=...`), valid
/// `days` days, written to `dir/cert.pem` and its key to `dir/key.pem`;
/// `extra` goes to `openssl req` as it is (`-addext subjectAltName=...`).
pub fn self_signed(dir: &Path, subject: &str, days: u32, extra: &[&str]) -> Cert {
    let c = Cert { cert: dir.join("cert.pem"), key: dir.join("key.pem") };
    let out = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"])
        .arg("-days")
        .arg(days.to_string())
        .args(["-subj", subject, "-keyout"])
        .arg(&c.key)
        .arg("-out")
        .arg(&c.cert)
        .args(extra)
        .output()
        .expect("run openssl req");
    assert!(out.status.success(), "openssl req: {}", String::from_utf8_lossy(&out.stderr));
    c
}

/// A self-signed P-256 certificate for `/CN=name`, valid 30 days, as DER
/// bytes (for tests that hand certificates to the store directly); its files
/// are `dir/name/cert.pem` (DER despite the name) and `key.pem`.
pub fn self_signed_der(dir: &Path, name: &str) -> Vec<u8> {
    let sub = dir.join(name);
    std::fs::create_dir_all(&sub).unwrap();
    let c = self_signed(&sub, &format!("/CN={name}"), 30, &["-outform", "DER"]);
    std::fs::read(c.cert).unwrap()
}

/// The certificate's SHA-256 fingerprint as x509.log writes it (lower-case
/// hex, no colons).
pub fn sha256_fingerprint(cert: &Path) -> String {
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-fingerprint", "-sha256", "-in"])
        .arg(cert)
        .output()
        .expect("run openssl x509");
    assert!(out.status.success(), "openssl x509: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    super::live::after(&text, "=").unwrap_or_else(|| panic!("openssl x509 printed {text:?}")).replace(':', "").to_lowercase()
}

/// OpenSSL's cipher name to the IANA name Zeek logs (`openssl ciphers
/// -stdname`, which lists the TLS 1.3 suites too); the name itself if
/// OpenSSL does not know it.
pub fn iana(openssl_name: &str) -> String {
    let out = Command::new("openssl").args(["ciphers", "-stdname", "ALL"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            let std = w.next()?;
            (w.next()? == "-" && w.next()? == openssl_name).then(|| std.to_string())
        })
        .unwrap_or_else(|| openssl_name.to_string())
}

/// `TLSv1.2` (as OpenSSL and curl print it) to `TLSv12` (as Zeek logs it).
pub fn zeek_version(v: &str) -> String {
    v.replace("TLSv1.", "TLSv1")
}
