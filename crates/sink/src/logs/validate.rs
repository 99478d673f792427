//! Zeek's validate-certs policy (`--zeek-policy validate-certs`): the
//! server's certificate chain of each TLS record checked by OpenSSL's
//! `X509_verify_cert` against a trust store, at the time the handshake
//! ended, giving ssl.log's `validation_status`: `ok` or OpenSSL's error
//! text (`X509_verify_cert_error_string`), what Zeek writes.
//!
//! The rules, from zeek/zeek a13de64f:
//! - `scripts/policy/protocols/ssl/validate-certs.zeek` (the `ssl_finishing`
//!   hook, lines 136-199): nothing when the server sent no certificate or
//!   its first one does not decode; with `ssl_cache_intermediate_ca` (on
//!   by default) the leaf is first tried with the intermediates of an
//!   earlier chain that validated and whose first CA has the leaf's issuer
//!   as subject (lines 104-125, 150-168), and that answer is kept if `ok`;
//!   else the chain as sent (certificates that do not decode left out).
//!   Results are cached per chain (`recently_validated_certs`,
//!   `&read_expire=5mins`: reused while read again within five minutes).
//! - `src/file_analysis/analyzer/x509/functions.bif` (`x509_verify`, lines
//!   544-635): the chain's first certificate is the one verified, the others
//!   are the untrusted stack, the time is set with `X509_STORE_CTX_set_time`
//!   (network time), and `X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT` is
//!   written as OpenSSL 1 wrote it, "self signed certificate".
//!
//! The trust store is where wirelog departs: Zeek's is Mozilla's root list
//! shipped as a script (`base/protocols/ssl/mozilla-ca-list.zeek`), ours a
//! PEM file, by default the system's (`/etc/ssl/certs/ca-certificates.crt`).
//! The intermediate cache is keyed by the issuer name's DER (Zeek hashes
//! OpenSSL's canonical form, which also equates names differing only in
//! case or spacing) and both caches are bounded (emptied when full).
//!
//! This runs on the output thread, off the packet path; a chain costs a
//! few signature checks once, then a hash lookup.

use std::collections::HashMap;
use std::path::Path;

use super::libcrypto::{self, Cert, Lib, ParsedCerts, Store};
use wirelog_record::sha256::sha256_hex;
use wirelog_record::tls::TlsTx;
use wirelog_record::{Detail, TxRecord};

/// Where the trust store comes from when no file is named.
pub const SYSTEM_CA_FILE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Results and intermediates kept at most (each map emptied when full).
const KEPT: usize = 4096;

/// How long a cached result stays good after it was last used (packet
/// time): Zeek's `recently_validated_certs` `&read_expire=5mins`.
const REUSE_NS: i64 = 300 * 1_000_000_000;

/// OpenSSL's `X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT`.
const DEPTH_ZERO_SELF_SIGNED: i32 = 18;

/// The validator: the trust store and the caches.
pub struct Validator {
    lib: &'static Lib,
    store: Store,
    roots: usize,
    /// Certificates parsed by OpenSSL.
    parsed: ParsedCerts,
    /// Chain (each certificate's fingerprint) -> (status, the chain
    /// OpenSSL built when it verified, last use): validate-sct sets Zeek's
    /// `ssl_store_valid_chain`, which keeps the chain with the status.
    results: HashMap<Vec<String>, (String, Vec<Cert>, i64)>,
    /// A validated chain's CA certificates below its root (Zeek's
    /// `intermediate_cache`), by the DER of their first one's subject.
    intermediates: HashMap<Vec<u8>, Vec<(String, Cert)>>,
    /// Validations done (not answered from the cache).
    pub verified: u64,
    /// validate-sct, when on: run after each validation, with its result.
    sct: Option<super::sct::SctChecker>,
}

/// validate-certs' answer for one connection.
struct Verdict {
    leaf: Cert,
    status: String,
    /// The chain OpenSSL built (Zeek's `valid_chain`), empty unless `ok`.
    valid_chain: Vec<Cert>,
}

impl Validator {
    /// The trust store read from `path` (PEM certificates); an error names
    /// the file and what is wrong, or the library when libcrypto could not
    /// be loaded ([`load`]).
    pub fn from_pem_file(path: &Path) -> Result<Validator, String> {
        let lib = libcrypto::lib()?;
        let (store, roots) = trust_store(lib, path)?;
        Ok(Validator { lib, store, roots, parsed: ParsedCerts::default(), results: HashMap::new(), intermediates: HashMap::new(), verified: 0, sct: None })
    }

    /// Turns on the validate-sct policy, with its checker.
    pub fn with_sct(mut self, sct: super::sct::SctChecker) -> Validator {
        self.sct = Some(sct);
        self
    }

    /// Certificates in the trust store.
    pub fn roots(&self) -> usize {
        self.roots
    }

    /// Fills a TLS record's `validation_status` (once; other records are
    /// left alone).
    pub fn fill(&mut self, r: &TxRecord) {
        let Detail::Tls(t) = &r.tx.detail else {
            return;
        };
        if t.validation.0.get().is_some() {
            return;
        }
        // Zeek verifies at ssl_finishing's network time: when the
        // handshake ended (the last packet of either side's handshake).
        let ts = [r.tx.request, r.tx.response].iter().flatten().map(|s| s.last_ns).max().unwrap_or(r.tx.ts_ns());
        let verdict = self.status(t, ts);
        let _ = t.validation.0.set(verdict.as_ref().map(|v| v.status.clone()));
        // validate-sct's hook runs after validate-certs' (its priority 19
        // to 20), where that one had a leaf (validate-sct.zeek lines
        // 112-115): unset otherwise.
        if let Some(sct) = self.sct.as_mut() {
            let counts = verdict.map(|v| {
                let cached: Option<Vec<Cert>> = v
                    .leaf
                    .issuer_der()
                    .and_then(|k| self.intermediates.get(&k))
                    .map(|c| c.iter().map(|(_, c)| c.clone()).collect());
                let chains = super::sct::Chains { leaf: &v.leaf, status: &v.status, valid_chain: &v.valid_chain, cached_intermediates: cached.as_deref() };
                sct.counts(t, &chains, ts)
            });
            let _ = t.ct.0.set(counts);
        }
    }

    /// The status of a record's server chain at `ts_ns`; `None` where Zeek's
    /// hook returns without one.
    fn status(&mut self, t: &TlsTx, ts_ns: i64) -> Option<Verdict> {
        let ders = t.server_certs.as_ref()?;
        let fps: Vec<&str> = t.server_chain().iter().map(|c| c.fingerprint.as_str()).collect();
        let leaf = self.parsed.get(self.lib, fps.first()?, ders.first()?)?;
        let leaf_fp = fps[0].to_string();
        let key = leaf.issuer_der();
        if let Some(cached) = key.as_ref().and_then(|k| self.intermediates.get(k)).cloned() {
            let mut chain = vec![(leaf_fp.clone(), leaf.clone())];
            chain.extend(cached);
            let (status, valid_chain) = self.cached(&chain, ts_ns);
            if status == "ok" {
                return Some(Verdict { leaf, status, valid_chain });
            }
        }
        // The chain as sent, certificates that do not decode left out.
        let mut chain = vec![(leaf_fp, leaf.clone())];
        for (fp, der) in fps.iter().zip(ders).skip(1) {
            if let Some(c) = self.parsed.get(self.lib, fp, der) {
                chain.push((fp.to_string(), c));
            }
        }
        let (status, verified) = self.cached(&chain, ts_ns);
        // A validated chain of more than leaf and root: its CAs are kept
        // for leaves whose server leaves them out (validate-certs.zeek
        // lines 104-125).
        if status == "ok" && verified.len() > 2 {
            if let Some(subject) = verified[1].subject_der() {
                if !self.intermediates.contains_key(&subject) {
                    if self.intermediates.len() >= KEPT {
                        self.intermediates.clear();
                    }
                    let cas = verified[1..verified.len() - 1]
                        .iter()
                        .map(|c| (c.to_der().map(|d| sha256_hex(&d)).unwrap_or_default(), c.clone()))
                        .collect();
                    self.intermediates.insert(subject, cas);
                }
            }
        }
        Some(Verdict { leaf, status, valid_chain: verified })
    }

    /// Zeek's `cache_validate`: the cached status of `chain` (fingerprint,
    /// certificate) if used within five minutes, else a validation; with
    /// the chain OpenSSL built.
    fn cached(&mut self, chain: &[(String, Cert)], ts_ns: i64) -> (String, Vec<Cert>) {
        let key: Vec<String> = chain.iter().map(|(fp, _)| fp.clone()).collect();
        if let Some((status, built, last)) = self.results.get_mut(&key) {
            if ts_ns.abs_diff(*last) <= REUSE_NS as u64 {
                *last = ts_ns;
                return (status.clone(), built.clone());
            }
        }
        self.verified += 1;
        let certs: Vec<Cert> = chain.iter().map(|(_, c)| c.clone()).collect();
        let (status, verified) = verify(self.lib, &self.store, &certs, ts_ns);
        if self.results.len() >= KEPT {
            self.results.clear();
        }
        self.results.insert(key, (status.clone(), verified.clone(), ts_ns));
        (status, verified)
    }
}

/// The trust store read from `path` (PEM certificates) and how many
/// certificates it holds; an error names the file and what is wrong.
pub(super) fn trust_store(lib: &'static Lib, path: &Path) -> Result<(Store, usize), String> {
    let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let ders = pem_certificates(&pem).map_err(|e| format!("{}: not PEM certificates: {e}", path.display()))?;
    if ders.is_empty() {
        return Err(format!("{}: no PEM certificate in it", path.display()));
    }
    let mut roots = Vec::with_capacity(ders.len());
    for (i, der) in ders.iter().enumerate() {
        let c = Cert::from_der(lib, der).ok_or_else(|| format!("{}: not PEM certificates: certificate {} does not parse", path.display(), i + 1))?;
        roots.push(c);
    }
    let mut store = Store::new(lib).ok_or_else(|| format!("{}: OpenSSL could not make a store", path.display()))?;
    for r in &roots {
        // A certificate listed twice is refused by some OpenSSL
        // versions: the first stays in the store.
        let _ = store.add(r);
    }
    Ok((store, roots.len()))
}

/// Loads libcrypto (once for the run): an error names the library, or the
/// library and the function it lacks.
pub fn load() -> Result<(), String> {
    libcrypto::lib().map(|_| ())
}

/// The DER of every certificate of a PEM text (`CERTIFICATE`, `X509
/// CERTIFICATE` and `TRUSTED CERTIFICATE` blocks, as OpenSSL's
/// `PEM_read_bio_X509` takes; other blocks and text around them skipped).
pub fn pem_certificates(pem: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let text = String::from_utf8_lossy(pem);
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((n, line)) = lines.next() {
        let Some(label) = line.trim_end().strip_prefix("-----BEGIN ").and_then(|l| l.strip_suffix("-----")) else {
            continue;
        };
        let end = format!("-----END {label}-----");
        let mut body = String::new();
        let mut closed = false;
        for (_, l) in lines.by_ref() {
            if l.trim_end() == end {
                closed = true;
                break;
            }
            body.push_str(l.trim());
        }
        if !closed {
            return Err(format!("line {}: no {end}", n + 1));
        }
        if matches!(label, "CERTIFICATE" | "X509 CERTIFICATE" | "TRUSTED CERTIFICATE") {
            out.push(unbase64(&body).ok_or_else(|| format!("line {}: {label} is not base64", n + 1))?);
        }
    }
    Ok(out)
}

/// Standard base64 (RFC 4648 section 4, padded) decoded; `None` for any
/// other character, or a length not a multiple of four.
pub(super) fn unbase64(s: &str) -> Option<Vec<u8>> {
    let v = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let b = s.as_bytes();
    if !b.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(b.len() / 4 * 3);
    for (i, q) in b.chunks(4).enumerate() {
        let last = i == b.len() / 4 - 1;
        let pad = q.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return None;
        }
        let mut n = 0u32;
        for &c in &q[..4 - pad] {
            n = n << 6 | v(c)?;
        }
        n <<= 6 * pad as u32;
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..4 - pad]);
    }
    Some(out)
}

/// `x509_verify` of Zeek's functions.bif: the first certificate verified
/// with the others as the untrusted stack, at `ts_ns`; the status and,
/// when `ok`, the chain OpenSSL built.
fn verify(lib: &'static Lib, store: &Store, chain: &[Cert], ts_ns: i64) -> (String, Vec<Cert>) {
    match store.verify(&chain[0], &chain[1..], ts_ns.div_euclid(1_000_000_000)) {
        Some((err, built)) => {
            let text = if err == DEPTH_ZERO_SELF_SIGNED { "self signed certificate".to_string() } else { libcrypto::error_string(lib, err) };
            (text, built)
        }
        // Zeek writes its own texts where OpenSSL could not be set up.
        None => ("Problem initializing root store".to_string(), Vec::new()),
    }
}

/// The validator as the transaction logs use it: every TLS record of a
/// batch gets its status before its line is written.
pub fn fill_batch(v: &mut Validator, batch: &wirelog_record::Batch) {
    for r in &batch.txs {
        v.fill(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn openssl(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn der(dir: &Path, pem: &str) -> Vec<u8> {
        pem_certificates(&std::fs::read(dir.join(pem)).unwrap()).unwrap().remove(0)
    }

    fn record(chain: Vec<Vec<u8>>, ts_ns: i64) -> TxRecord {
        wirelog_record::tls::fixtures::handshake(ts_ns, chain, None)
    }

    fn status(r: &TxRecord) -> Option<String> {
        let Detail::Tls(t) = &r.tx.detail else { panic!() };
        t.validation.0.get().cloned().flatten()
    }

    /// PEM texts: certificate blocks decoded (other blocks and text
    /// skipped), bad base64 and an unclosed block refused with the line.
    #[test]
    fn pem_blocks_are_read() {
        let pem = "text\n-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\r\n-----BEGIN TRUSTED CERTIFICATE-----\nAQID\nBA==\n-----END TRUSTED CERTIFICATE-----\n";
        assert_eq!(pem_certificates(pem.as_bytes()).unwrap(), vec![vec![0x30, 0x00], vec![1, 2, 3, 4]]);
        assert_eq!(pem_certificates(b"no pem here").unwrap(), Vec::<Vec<u8>>::new());
        let e = pem_certificates(b"\n-----BEGIN CERTIFICATE-----\nMA*=\n-----END CERTIFICATE-----\n").err().unwrap();
        assert_eq!(e, "line 2: CERTIFICATE is not base64");
        let e = pem_certificates(b"-----BEGIN CERTIFICATE-----\nMAA=\n").err().unwrap();
        assert_eq!(e, "line 1: no -----END CERTIFICATE-----");
        assert_eq!(unbase64("TWFu"), Some(b"Man".to_vec()));
        assert_eq!(unbase64("TWE="), Some(b"Ma".to_vec()));
        assert_eq!(unbase64("TQ=="), Some(b"M".to_vec()));
        assert_eq!(unbase64("TQ==TWFu"), None);
        assert_eq!(unbase64("TWF"), None);
    }

    /// A CA, an intermediate and leaves made by OpenSSL here: the
    /// statuses are OpenSSL's texts, the result is cached per chain (and
    /// checked again after five minutes), a leaf sent without its
    /// intermediate validates once a chain showed it (Zeek's intermediate
    /// cache), no certificate gives no status.
    #[test]
    fn chains_get_openssl_verdicts_and_are_cached() {
        let dir = std::env::temp_dir().join(format!("wirelog-validate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let d = dir.as_path();
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
        let mut args = vec!["req", "-x509"];
        args.extend(ec);
        args.extend(["-keyout", "ca.key", "-out", "ca.pem", "-days", "30", "-subj", "/CN=Test Root", "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
        openssl(d, &args);
        std::fs::write(dir.join("ca.ext"), "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n").unwrap();
        std::fs::write(dir.join("leaf.ext"), "basicConstraints=CA:FALSE\nsubjectAltName=DNS:www.example.org\n").unwrap();
        let issue = |stem: &str, subj: &str, ca: &str, ext: &str| {
            let mut a = vec!["req", "-new"];
            a.extend(ec);
            let (key, csr, pem) = (format!("{stem}.key"), format!("{stem}.csr"), format!("{stem}.pem"));
            a.extend(["-keyout", &key, "-out", &csr, "-subj", subj]);
            openssl(d, &a);
            let (cacert, cakey) = (format!("{ca}.pem"), format!("{ca}.key"));
            openssl(d, &["x509", "-req", "-in", &csr, "-CA", &cacert, "-CAkey", &cakey, "-set_serial", "7", "-days", "20", "-extfile", ext, "-out", &pem]);
        };
        issue("int", "/CN=Test Intermediate", "ca", "ca.ext");
        issue("leaf", "/CN=www.example.org", "int", "leaf.ext");
        let mut v = Validator::from_pem_file(&dir.join("ca.pem")).unwrap();
        assert_eq!(v.roots(), 1);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as i64;
        let (leaf, int, ca) = (der(d, "leaf.pem"), der(d, "int.pem"), der(d, "ca.pem"));

        // Without the intermediate, before any chain showed it.
        let r = record(vec![leaf.clone()], now);
        v.fill(&r);
        assert_eq!(status(&r).as_deref(), Some("unable to get local issuer certificate"));
        let r = record(vec![leaf.clone(), int.clone()], now);
        v.fill(&r);
        assert_eq!(status(&r).as_deref(), Some("ok"));
        assert_eq!(v.verified, 2);
        // The chains after it are first tried as leaf + the intermediate
        // seen, which is cached: no new validation, and the leaf alone
        // now validates.
        for (chain, dt) in [(vec![leaf.clone(), int.clone(), ca.clone()], 0), (vec![leaf.clone(), int.clone()], 1), (vec![leaf.clone()], 2)] {
            let r = record(chain, now + dt * 1_000_000_000);
            v.fill(&r);
            assert_eq!(status(&r).as_deref(), Some("ok"));
        }
        assert_eq!(v.verified, 2);
        // Thirty days on, every certificate has expired: a cached answer
        // is not reused after five minutes.
        let later = now + 30 * 86400 * 1_000_000_000;
        let r = record(vec![leaf.clone(), int.clone()], later);
        v.fill(&r);
        assert_eq!(status(&r).as_deref(), Some("certificate has expired"));
        assert_eq!(v.verified, 3);
        // A self-signed leaf, a CA not in the store, nothing decodable.
        let r = record(vec![ca.clone()], now);
        let mut other = Validator::from_pem_file(&dir.join("leaf.pem")).unwrap();
        other.fill(&r);
        assert_eq!(status(&r).as_deref(), Some("self signed certificate"));
        let r = record(vec![leaf.clone(), int.clone(), ca.clone()], now);
        other.fill(&r);
        assert_eq!(status(&r).as_deref(), Some("self-signed certificate in certificate chain"));
        let r = record(vec![vec![0x30, 0x00]], now);
        v.fill(&r);
        assert_eq!(status(&r), None);
        let r = record(vec![], now);
        v.fill(&r);
        assert_eq!(status(&r), None);
        assert!(Validator::from_pem_file(&dir.join("leaf.ext")).err().unwrap().contains("leaf.ext"));
        assert!(Validator::from_pem_file(&dir.join("nonexistent")).err().unwrap().contains("nonexistent"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
