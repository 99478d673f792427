//! Zeek's validate-sct policy (`--zeek-policy validate-sct`): the Signed
//! Certificate Timestamps (RFC 6962) a TLS server showed for its leaf
//! certificate, each checked against the CT log that signed it, giving
//! ssl.log's `valid_ct_logs` and `valid_ct_operators`.
//!
//! The rules, from zeek/zeek a13de64f:
//! - `scripts/policy/protocols/ssl/validate-sct.zeek`: the SCTs are those
//!   of the server's `signed_certificate_timestamp` hello extension (the
//!   `ssl_extension_signed_certificate_timestamp` handler, lines 77-80)
//!   and of the leaf certificate's `ct_precert_scts` extension (lines
//!   82-109: the `application/x-x509-user-cert` file, the server chain's
//!   first certificate). The `ssl_finishing` hook (lines 112-212) runs
//!   after validate-certs' (it loads validate-certs, line 5) and only where
//!   that hook has a leaf (lines 114-115); an SCT of a log not in the list
//!   is invalid (lines 130-135); a TLS-extension SCT is checked over the
//!   certificate (lines 153-156), a certificate-extension SCT over the
//!   precertificate, trying as issuer key the intermediate cached for the
//!   leaf's issuer, then the second certificate of the chain validate-certs
//!   verified, then every other certificate sent (lines 157-196; the key
//!   that worked is tried first for the next SCT); results are cached for
//!   five minutes of reuse (`recently_validated_scts`, lines 68-70 and
//!   143-151, keyed by the leaf, log, timestamp, hash algorithm, signature
//!   and source, plus the validation result for a certificate SCT). It
//!   logs (lines 57-60) the number of distinct logs and distinct operators
//!   with a valid SCT; `valid_scts` and `invalid_scts` are not logged.
//! - `src/file_analysis/analyzer/x509/functions.bif` (`sct_verify`, lines
//!   659-800): the signed structure (RFC 6962 3.2) is version 0, type
//!   certificate_timestamp, the timestamp, the entry type (x509_entry, or
//!   precert_entry with the issuer key hash, SHA-256 of its
//!   SubjectPublicKeyInfo, `x509_spki_hash`), the 24-bit length and the
//!   certificate (or the precertificate's TBS), then an empty extensions
//!   field (Zeek writes none whatever the SCT carried).
//! - `src/analyzer/protocol/ssl/tls-handshake-signed_certificate_timestamp.pac`:
//!   the list's framing; SCTs before one that does not parse are kept.
//!
//! The CT log list is data (`crates/sink/data/ct-logs.tsv`, made by
//! `scripts/gen_ct_logs.py` from Zeek's `ct-list.zeek`), or a file of the
//! same form given with `--ct-logs`.
//! - SCTs of the stapled OCSP response (Zeek's `SCT_OCSP_EXT`): validate-sct
//!   registers the OCSP reply analyzer for the SSL analyzer's
//!   `application/ocsp-response` files (validate-sct.zeek line 74), which
//!   the SSL analyzer makes of every CertificateStatus of status_type 1
//!   with a non-empty response, established or not
//!   (`tls-handshake-analyzer.pac:411-442`); the OCSP analyzer raises
//!   `x509_ocsp_ext_signed_certificate_timestamp` for the SCT-list
//!   extensions of each single response and of the response itself
//!   (`OCSP.cc:502-509`, `540-547`, `555-565`: [`ct::ocsp_sct_lists`]),
//!   which validate-sct.zeek keeps with source `SCT_OCSP_EXT` (lines
//!   82-89, 106) and checks, like a TLS-extension SCT, over the
//!   certificate itself (line 148-151: no issuer key, RFC 6962's
//!   `x509_entry`). validate-sct's hook runs at `ssl_established`, or when
//!   an unestablished connection ends (`base/protocols/ssl/main.zeek`
//!   lines 507-527, 549-558), so those SCTs count in both cases. wirelog
//!   keeps the last response a connection stapled where Zeek reads each
//!   one.
//!
//! Not read: the SCTs of a client certificate, which Zeek adds to the same
//! list and which can only count as invalid there.
//!
//! This runs on the output thread with validate-certs; an SCT costs one
//! signature check once, then a hash lookup.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use super::libcrypto::Cert;
use super::libcrypto_ct::{self as ct, CtLib};
use wirelog_record::sha256::sha256;
use wirelog_record::tls::{CtCounts, TlsTx};

/// The CT log list shipped with wirelog.
const BUILTIN: &str = include_str!("../../data/ct-logs.tsv");

/// Results kept at most (emptied when full).
const KEPT: usize = 4096;

/// How long a cached result stays good after it was last used (packet
/// time): Zeek's `recently_validated_scts` `&read_expire=5mins`.
const REUSE_NS: i64 = 300 * 1_000_000_000;

/// One CT log of the list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CtLog {
    /// The log's public key, a DER SubjectPublicKeyInfo.
    pub key: Vec<u8>,
    pub operator: String,
    pub description: String,
}

/// The CT logs SCTs are checked against, by log id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CtLogs {
    logs: HashMap<[u8; 32], CtLog>,
}

impl CtLogs {
    /// The list shipped with wirelog (Zeek's).
    pub fn builtin() -> CtLogs {
        // Checked by a test: the shipped list parses.
        CtLogs::parse(BUILTIN, "the built-in CT log list").unwrap_or_default()
    }

    /// The list in `path`; an error names the file (and line).
    pub fn from_file(path: &Path) -> Result<CtLogs, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let logs = CtLogs::parse(&text, &path.display().to_string())?;
        if logs.logs.is_empty() {
            return Err(format!("{}: no CT log in it", path.display()));
        }
        Ok(logs)
    }

    /// Parses the list's text: per line the log id and key (standard
    /// base64), the operator and the description, tab-separated; empty
    /// lines and lines starting with `#` skipped. `name` names the source
    /// in errors, with the line.
    pub fn parse(text: &str, name: &str) -> Result<CtLogs, String> {
        let mut logs = HashMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.strip_suffix('\r').unwrap_or(line);
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let at = format!("{name}:{}", n + 1);
            let f: Vec<&str> = line.split('\t').collect();
            if f.len() != 4 {
                return Err(format!("{at}: {} tab-separated fields, 4 wanted (log id, key, operator, description)", f.len()));
            }
            let id = super::validate::unbase64(f[0].trim()).ok_or_else(|| format!("{at}: the log id is not base64"))?;
            let id: [u8; 32] = id.try_into().map_err(|v: Vec<u8>| format!("{at}: the log id has {} bytes, 32 wanted", v.len()))?;
            let key = super::validate::unbase64(f[1].trim()).ok_or_else(|| format!("{at}: the key is not base64"))?;
            if key.is_empty() {
                return Err(format!("{at}: the key is empty"));
            }
            if f[2].is_empty() {
                return Err(format!("{at}: the operator is empty"));
            }
            let log = CtLog { key, operator: f[2].to_string(), description: f[3].to_string() };
            if logs.insert(id, log).is_some() {
                return Err(format!("{at}: a log id listed twice"));
            }
        }
        Ok(CtLogs { logs })
    }

    /// Logs in the list.
    pub fn len(&self) -> usize {
        self.logs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.logs.is_empty()
    }

    pub fn get(&self, id: &[u8; 32]) -> Option<&CtLog> {
        self.logs.get(id)
    }
}

/// Where an SCT came from (Zeek's `SctSource`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// The leaf certificate's extension (`SCT_X509_EXT`).
    X509,
    /// The server's hello extension (`SCT_TLS_EXT`).
    Tls,
    /// The stapled OCSP response's extension (`SCT_OCSP_EXT`).
    Ocsp,
}

/// One SCT (RFC 6962 3.2), as Zeek's `SctInfo` keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sct {
    pub version: u8,
    pub log_id: [u8; 32],
    /// Milliseconds since the epoch.
    pub timestamp: u64,
    pub hash_alg: u8,
    pub sig_alg: u8,
    pub signature: Vec<u8>,
    pub source: Source,
}

/// The SCTs of a `SignedCertificateTimestampList` (RFC 6962 3.3), added to
/// `out`. As Zeek's parser (binpac, which raises each SCT's event as it is
/// parsed): the SCTs before one that does not parse are kept, the list's
/// length bounds what is read.
pub fn parse_list(data: &[u8], source: Source, out: &mut Vec<Sct>) {
    let Some((len, rest)) = split_u16(data) else {
        return;
    };
    let mut list = &rest[..len.min(rest.len())];
    while !list.is_empty() {
        let Some((n, after)) = split_u16(list) else {
            return;
        };
        if after.len() < n {
            return;
        }
        let (one, next) = after.split_at(n);
        list = next;
        match parse_sct(one, source) {
            Some(s) => out.push(s),
            None => return,
        }
    }
}

fn split_u16(b: &[u8]) -> Option<(usize, &[u8])> {
    (b.len() >= 2).then(|| (usize::from(u16::from_be_bytes([b[0], b[1]])), &b[2..]))
}

/// One `SignedCertificateTimestamp`: version, log id, timestamp,
/// extensions (skipped), then the `digitally-signed` hash and signature
/// algorithms and signature.
fn parse_sct(b: &[u8], source: Source) -> Option<Sct> {
    let version = *b.first()?;
    let log_id: [u8; 32] = b.get(1..33)?.try_into().ok()?;
    let timestamp = u64::from_be_bytes(b.get(33..41)?.try_into().ok()?);
    let (ext_len, rest) = split_u16(b.get(41..)?)?;
    let rest = rest.get(ext_len..)?;
    let (&hash_alg, rest) = rest.split_first()?;
    let (&sig_alg, rest) = rest.split_first()?;
    let (sig_len, rest) = split_u16(rest)?;
    let signature = rest.get(..sig_len)?.to_vec();
    Some(Sct { version, log_id, timestamp, hash_alg, sig_alg, signature, source })
}

/// What an SCT's signature covers (`sct_verify`, functions.bif lines
/// 677-730): for an SCT over the certificate, its DER (`issuer_key_hash`
/// `None`); for one over the precertificate, the issuer key hash and the
/// precertificate's TBS.
pub fn signed_data(timestamp: u64, issuer_key_hash: Option<&[u8; 32]>, cert: &[u8]) -> Vec<u8> {
    let mut d = Vec::with_capacity(cert.len() + 50);
    d.push(0); // sct_version v1
    d.push(0); // signature_type certificate_timestamp
    d.extend_from_slice(&timestamp.to_be_bytes());
    match issuer_key_hash {
        Some(h) => {
            d.extend_from_slice(&[0, 1]); // precert_entry
            d.extend_from_slice(h);
        }
        None => d.extend_from_slice(&[0, 0]), // x509_entry
    }
    let n = cert.len() as u32;
    d.extend_from_slice(&n.to_be_bytes()[1..]);
    d.extend_from_slice(cert);
    d.extend_from_slice(&[0, 0]); // no extensions
    d
}

/// The cache's key: Zeek's `validatestring` (validate-sct.zeek lines
/// 140-142) with the leaf's SHA-256 where Zeek has its SHA-1.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    leaf: String,
    log_id: [u8; 32],
    timestamp: u64,
    hash_alg: u8,
    signature: Vec<u8>,
    source: Source,
    /// validate-certs' result, for a certificate SCT.
    validation: Option<String>,
}

/// What validate-sct needs of validate-certs' result for one connection.
pub struct Chains<'a> {
    /// The leaf as OpenSSL parsed it.
    pub leaf: &'a Cert,
    /// validate-certs' `validation_status`.
    pub status: &'a str,
    /// The chain OpenSSL built when it verified (Zeek's `valid_chain`).
    pub valid_chain: &'a [Cert],
    /// The intermediates validate-certs cached for the leaf's issuer
    /// (Zeek's `intermediate_cache[issuer_name_hash]`).
    pub cached_intermediates: Option<&'a [Cert]>,
}

/// The SCT checker: the log list (each key read by OpenSSL), libcrypto and
/// the cache.
pub struct SctChecker {
    lib: &'static CtLib,
    logs: CtLogs,
    keys: HashMap<[u8; 32], ct::PubKey>,
    /// Key -> (valid, last use).
    results: HashMap<Key, (bool, i64)>,
    /// Signature checks done (not answered from the cache).
    pub verified: u64,
}

impl SctChecker {
    /// A checker of SCTs against `logs`; an error names the library (or
    /// its missing function), or a log whose key OpenSSL cannot read.
    pub fn new(logs: CtLogs) -> Result<SctChecker, String> {
        let lib = ct::lib()?;
        let mut keys = HashMap::new();
        let mut bad = Vec::new();
        for (id, l) in &logs.logs {
            match ct::PubKey::from_der(lib, &l.key) {
                Some(k) => {
                    keys.insert(*id, k);
                }
                None => bad.push(l.description.as_str()),
            }
        }
        bad.sort_unstable();
        if let Some(d) = bad.first() {
            return Err(format!("the key of CT log {d:?} is not a public key OpenSSL reads"));
        }
        Ok(SctChecker { lib, logs, keys, results: HashMap::new(), verified: 0 })
    }

    /// Logs in the list.
    pub fn logs(&self) -> usize {
        self.logs.len()
    }

    /// The counts for one TLS record, whose leaf validate-certs had
    /// (`chains`), at packet time `ts_ns`.
    pub fn counts(&mut self, t: &TlsTx, chains: &Chains, ts_ns: i64) -> CtCounts {
        let chain = t.server_chain();
        let mut proofs = Vec::new();
        for l in &t.sct_lists {
            parse_list(l, Source::Tls, &mut proofs);
        }
        if let Some(c) = chain.first().and_then(|c| c.cert.as_ref()) {
            for l in &c.sct_lists {
                parse_list(l, Source::X509, &mut proofs);
            }
        }
        if let Some(r) = &t.ocsp_response {
            for l in ct::ocsp_sct_lists(self.lib, r) {
                parse_list(&l, Source::Ocsp, &mut proofs);
            }
        }
        let leaf_fp = chain.first().map(|c| c.fingerprint.clone()).unwrap_or_default();
        // The leaf's DER as OpenSSL writes it (`i2d_X509`), made when first
        // needed (most connections have no SCT).
        let mut leaf_der: Option<Vec<u8>> = None;
        // The issuer keys to try for certificate SCTs, made when first
        // needed; the one that worked goes first (Zeek keeps
        // `issuer_key_hash` from one SCT to the next).
        let mut issuer_keys: Option<Vec<[u8; 32]>> = None;
        let mut precert: Option<Option<Vec<u8>>> = None;
        let mut counts = CtCounts::default();
        let mut logs = HashSet::new();
        let mut operators = HashSet::new();
        for p in &proofs {
            let (Some(log), Some(log_key)) = (self.logs.get(&p.log_id), self.keys.get(&p.log_id)) else {
                counts.invalid += 1;
                continue;
            };
            let key = Key {
                leaf: leaf_fp.clone(),
                log_id: p.log_id,
                timestamp: p.timestamp,
                hash_alg: p.hash_alg,
                signature: p.signature.clone(),
                source: p.source,
                validation: (p.source == Source::X509).then(|| chains.status.to_string()),
            };
            let cached = match self.results.get_mut(&key) {
                Some((valid, last)) if ts_ns.abs_diff(*last) <= REUSE_NS as u64 => {
                    *last = ts_ns;
                    Some(*valid)
                }
                _ => None,
            };
            let valid = match cached {
                Some(v) => v,
                None => {
                    let v = match p.source {
                        // validate-sct.zeek lines 148-151: a TLS or
                        // OCSP SCT is over the certificate.
                        Source::Tls | Source::Ocsp => {
                            self.verified += 1;
                            let der = leaf_der.get_or_insert_with(|| chains.leaf.to_der().unwrap_or_default());
                            ct::verify(log_key, p.hash_alg, &signed_data(p.timestamp, None, der), &p.signature)
                        }
                        Source::X509 => {
                            let der = leaf_der.get_or_insert_with(|| chains.leaf.to_der().unwrap_or_default());
                            let tbs = precert.get_or_insert_with(|| ct::precert_tbs(self.lib, der));
                            let keys = issuer_keys.get_or_insert_with(|| issuer_key_hashes(self.lib, t, chains));
                            let mut ok = false;
                            if let Some(tbs) = tbs {
                                for i in 0..keys.len() {
                                    self.verified += 1;
                                    if ct::verify(log_key, p.hash_alg, &signed_data(p.timestamp, Some(&keys[i]), tbs), &p.signature) {
                                        keys[..=i].rotate_right(1);
                                        ok = true;
                                        break;
                                    }
                                }
                            }
                            ok
                        }
                    };
                    if self.results.len() >= KEPT {
                        self.results.clear();
                    }
                    self.results.insert(key, (v, ts_ns));
                    v
                }
            };
            if valid {
                counts.valid += 1;
                logs.insert(p.log_id);
                operators.insert(log.operator.as_str());
            } else {
                counts.invalid += 1;
            }
        }
        counts.logs = logs.len() as u64;
        counts.operators = operators.len() as u64;
        counts
    }
}

/// The issuer key hashes validate-sct tries, in its order (lines
/// 168-196): the first intermediate cached for the leaf's issuer, the
/// second certificate of the verified chain, then every certificate sent
/// after the leaf that decodes; each the SHA-256 of its
/// SubjectPublicKeyInfo, duplicates dropped.
fn issuer_key_hashes(lib: &CtLib, t: &TlsTx, chains: &Chains) -> Vec<[u8; 32]> {
    let mut ders: Vec<Vec<u8>> = Vec::new();
    if let Some(c) = chains.cached_intermediates.and_then(|v| v.first()).and_then(Cert::to_der) {
        ders.push(c);
    }
    if let Some(c) = chains.valid_chain.get(1).and_then(Cert::to_der) {
        ders.push(c);
    }
    if let Some(sent) = &t.server_certs {
        for (der, info) in sent.iter().zip(t.server_chain()).skip(1) {
            if info.cert.is_some() {
                ders.push(der.clone());
            }
        }
    }
    let mut out: Vec<[u8; 32]> = Vec::new();
    for d in ders {
        if let Some(spki) = ct::spki_der(lib, &d) {
            let h = sha256(&spki);
            if !out.contains(&h) {
                out.push(h);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shipped list parses, and has Zeek's logs (26 in the ct-list.zeek
    /// it was made from).
    #[test]
    fn the_builtin_list_parses() {
        let l = CtLogs::parse(BUILTIN, "builtin").unwrap();
        assert_eq!(l.len(), 26);
        assert!(l.logs.values().any(|l| l.operator == "Google"));
        // Every key is one OpenSSL reads.
        SctChecker::new(l).unwrap();
    }

    /// A bad list gives an error naming the file and line.
    #[test]
    fn a_bad_list_is_named() {
        let id = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
        let ok = format!("# c\n\n{id}\tMFkw\tOp\tDesc\n");
        assert_eq!(CtLogs::parse(&ok, "f").unwrap().len(), 1);
        for (text, says) in [
            (format!("# c\n{id}\tMFkw\tOp\n"), "f:2: 3 tab-separated fields, 4 wanted"),
            (format!("{id}\tMF*w\tOp\tD\n"), "f:1: the key is not base64"),
            ("AAAA\tMFkw\tOp\tD\n".to_string(), "f:1: the log id has 3 bytes, 32 wanted"),
            (format!("{id}\tMFkw\t\tD\n"), "f:1: the operator is empty"),
            (format!("{id}\tMFkw\tOp\tD\n{id}\tMFkw\tOp\tD\n"), "f:2: a log id listed twice"),
        ] {
            let e = CtLogs::parse(&text, "f").err().unwrap();
            assert!(e.starts_with(says), "{e}");
        }
        let e = CtLogs::from_file(Path::new("/nonexistent/ct.tsv")).err().unwrap();
        assert!(e.starts_with("/nonexistent/ct.tsv: "), "{e}");
        // A key that is base64 but no key.
        let e = SctChecker::new(CtLogs::parse(&ok, "f").unwrap()).err().unwrap();
        assert_eq!(e, "the key of CT log \"Desc\" is not a public key OpenSSL reads");
    }

    fn sct_bytes(id: u8, ts: u64, sig: &[u8]) -> Vec<u8> {
        let mut b = vec![0];
        b.extend([id; 32]);
        b.extend(ts.to_be_bytes());
        b.extend([0, 2, 9, 9]); // two bytes of extensions
        b.extend([4, 3]);
        b.extend((sig.len() as u16).to_be_bytes());
        b.extend(sig);
        b
    }

    /// The list's framing: SCTs in order; a cut SCT ends the list, the
    /// ones before it kept.
    #[test]
    fn sct_lists_parse_as_zeek_frames_them() {
        let a = sct_bytes(1, 7, b"sig-a");
        let b = sct_bytes(2, 8, b"sig-bb");
        let mut body = Vec::new();
        for s in [&a, &b] {
            body.extend((s.len() as u16).to_be_bytes());
            body.extend(s);
        }
        let mut list = (body.len() as u16).to_be_bytes().to_vec();
        list.extend(&body);
        let mut out = Vec::new();
        parse_list(&list, Source::Tls, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].log_id[0], out[0].timestamp, out[0].hash_alg, out[0].sig_alg), (1, 7, 4, 3));
        assert_eq!(out[1].signature, b"sig-bb");
        // Cut inside the second SCT.
        let mut cut = list[..list.len() - 3].to_vec();
        cut[..2].copy_from_slice(&((body.len() - 3) as u16).to_be_bytes());
        let mut out = Vec::new();
        parse_list(&cut, Source::X509, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].source, Source::X509);
        parse_list(&[], Source::Tls, &mut out);
        parse_list(&[0], Source::Tls, &mut out);
        assert_eq!(out.len(), 1);
    }

    /// The certificates and SCTs of `tests/sct_certs.py` (made here by
    /// Python's `cryptography`), checked without a network: the leaf's four
    /// certificate SCTs (A and B valid, A over another timestamp, C not in
    /// the list) and the TLS extension's two (D valid, B over another
    /// certificate); the issuer key found in the chain sent, the chain
    /// built, or nowhere; the cache answers the second time; the SCT lists
    /// of the stapled OCSP response (single response and response
    /// extensions) and their counts.
    #[test]
    fn counts_of_the_test_certificates() {
        let dir = std::env::temp_dir().join(format!("wirelog-sct-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/sct_certs.py");
        let o = std::process::Command::new("python3").arg(script).arg(&dir).output().expect("python3");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let pem = |f: &str| super::super::validate::pem_certificates(&std::fs::read(dir.join(f)).unwrap()).unwrap().remove(0);
        let (leaf, ca) = (pem("sct.pem"), pem("ca.pem"));
        let info = std::fs::read_to_string(dir.join("serverinfo.pem")).unwrap();
        let b64: String = info.lines().filter(|l| !l.starts_with("-----")).collect();
        let ext = super::super::validate::unbase64(&b64).unwrap();
        assert_eq!(&ext[..2], &[0, 18]);
        let tls_list = ext[4..].to_vec();
        let logs = CtLogs::from_file(&dir.join("ct-logs.tsv")).unwrap();
        let mut checker = SctChecker::new(logs).unwrap();
        let lib = super::super::libcrypto::lib().unwrap();
        let (leaf_c, ca_c) = (Cert::from_der(lib, &leaf).unwrap(), Cert::from_der(lib, &ca).unwrap());
        let record = |chain: Vec<Vec<u8>>, tls: bool| {
            let r = wirelog_record::tls::fixtures::handshake(1_000_000_000, chain, None);
            let wirelog_record::Detail::Tls(mut t) = r.tx.detail else { panic!() };
            if tls {
                t.sct_lists.push(tls_list.clone());
            }
            t
        };
        let chains = |valid: &'static [Cert]| Chains { leaf: &leaf_c, status: "x", valid_chain: valid, cached_intermediates: None };
        let c = |valid, invalid, logs, operators| CtCounts { valid, invalid, logs, operators };
        // The CA sent after the leaf, and the TLS extension.
        let t = record(vec![leaf.clone(), ca.clone()], true);
        assert_eq!(checker.counts(&t, &chains(&[]), 0), c(3, 3, 3, 2));
        let checks = checker.verified;
        assert_eq!(checker.counts(&t, &chains(&[]), 1_000_000_000), c(3, 3, 3, 2));
        assert_eq!(checker.verified, checks, "answered from the cache");
        // The leaf alone: no issuer key, then the CA from the chain built.
        let t = record(vec![leaf.clone()], false);
        let mut other = Chains { leaf: &leaf_c, status: "y", valid_chain: &[], cached_intermediates: None };
        assert_eq!(checker.counts(&t, &other, 0), c(0, 4, 0, 0));
        let built = [leaf_c.clone(), ca_c.clone()];
        other.status = "z";
        other.valid_chain = &built;
        assert_eq!(checker.counts(&t, &other, 0), c(2, 2, 2, 2));
        // Or from the intermediates cached for the leaf's issuer.
        let cached = [ca_c.clone()];
        other.status = "w";
        other.valid_chain = &[];
        other.cached_intermediates = Some(&cached);
        assert_eq!(checker.counts(&t, &other, 0), c(2, 2, 2, 2));

        // The stapled OCSP response of the plain leaf: its single
        // response's list (A valid, D over the other leaf), then its
        // responseExtensions' (B valid), as Zeek's OCSP analyzer reads them.
        let ocsp = std::fs::read(dir.join("ocsp.der")).unwrap();
        let lists = ct::ocsp_sct_lists(checker.lib, &ocsp);
        let ids = |l: &[u8]| {
            let mut out = Vec::new();
            parse_list(l, Source::Ocsp, &mut out);
            out.iter().map(|s| s.log_id).collect::<Vec<_>>()
        };
        let (la, ld) = (ids(&lists[0]), ids(&lists[1]));
        assert_eq!((lists.len(), la.len(), ld.len()), (2, 2, 1));
        let logs = CtLogs::from_file(&dir.join("ct-logs.tsv")).unwrap();
        let name = |id: &[u8; 32]| logs.get(id).unwrap().description.clone();
        assert_eq!([name(&la[0]), name(&la[1]), name(&ld[0])], ["Test log A", "Test log D", "Test log B (RSA)"]);
        // Not a response, or cut: nothing.
        assert!(ct::ocsp_sct_lists(checker.lib, b"\x30\x03\x0a\x01\x00").is_empty());
        assert!(ct::ocsp_sct_lists(checker.lib, &ocsp[..ocsp.len() - 1]).is_empty());
        assert!(ct::ocsp_sct_lists(checker.lib, &[]).is_empty());
        // Counted over the certificate itself, whatever issuer is known.
        let plain = pem("plain.pem");
        let plain_c = Cert::from_der(lib, &plain).unwrap();
        let mut t = record(vec![plain.clone()], false);
        t.ocsp_response = Some(ocsp.clone());
        let alone = Chains { leaf: &plain_c, status: "v", valid_chain: &[], cached_intermediates: None };
        assert_eq!(checker.counts(&t, &alone, 0), c(2, 1, 2, 2));
        // Stapled by the other leaf's server (sent alone, no issuer key for
        // its four certificate SCTs): D's, made over that leaf, is the
        // valid one.
        let mut t = record(vec![leaf.clone()], false);
        t.ocsp_response = Some(ocsp);
        let other = Chains { leaf: &leaf_c, status: "u", valid_chain: &[], cached_intermediates: None };
        assert_eq!(checker.counts(&t, &other, 0), c(1, 6, 1, 1));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// RFC 6962 3.2's structure, as `sct_verify` builds it.
    #[test]
    fn signed_data_is_rfc6962s() {
        let d = signed_data(0x0102030405060708, None, b"CERT");
        assert_eq!(d, [&[0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 4][..], b"CERT", &[0, 0]].concat());
        let d = signed_data(1, Some(&[0xaa; 32]), b"TBS");
        assert_eq!(&d[10..12], &[0, 1]);
        assert_eq!(&d[12..44], &[0xaa; 32]);
        assert_eq!(&d[44..47], &[0, 0, 3]);
        assert_eq!(&d[47..], b"TBS\0\0");
    }
}
