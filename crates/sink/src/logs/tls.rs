//! The TLS logs: ssl.log's values (its fields are in `tx.rs` with the other
//! transaction logs) and x509.log, one row per certificate the way Zeek logs
//! them: decoded here, on the output thread, and each (fingerprint, host or
//! client role) logged again only a day after it was last logged.

use std::collections::HashMap;
use std::io::{self, Write};

use wirelog_record::tls::{shown_chains, CertInfo};
use wirelog_record::x509::addr_text;
use wirelog_record::TxRecord;

use crate::logs::tx::{json_str, zeek_text, Line};
use crate::logs::zeek::{zeek_close, zeek_header};
use crate::LogFormat;

impl<const JSON: bool> Line<'_, JSON> {
    /// A vector that may be unset (`-`) or set and empty (`(empty)` in TSV,
    /// `[]` in JSON), as Zeek distinguishes them.
    fn zlist<T>(&mut self, items: Option<&[T]>, item: impl Fn(&T, &mut String)) {
        if !self.field(items.is_some()) {
            return;
        }
        let items = items.unwrap_or(&[]);
        if JSON {
            self.b.push(b'[');
        } else if items.is_empty() {
            self.b.extend_from_slice(b"(empty)");
            return;
        }
        for (j, it) in items.iter().enumerate() {
            if j > 0 {
                self.b.push(b',');
            }
            self.scratch.clear();
            item(it, self.scratch);
            if JSON {
                json_str(self.b, self.scratch);
            } else {
                zeek_text(self.b, self.scratch, true);
            }
        }
        if JSON {
            self.b.push(b']');
        }
    }
}

/// x509.log's columns, as Zeek's (its `certificate.*`, `san.*` and
/// `basic_constraints.*` records flattened, as its writers do).
const X509: &[(&str, &str)] = &[
    ("ts", "time"),
    ("fingerprint", "string"),
    ("certificate.version", "count"),
    ("certificate.serial", "string"),
    ("certificate.subject", "string"),
    ("certificate.issuer", "string"),
    ("certificate.not_valid_before", "time"),
    ("certificate.not_valid_after", "time"),
    ("certificate.key_alg", "string"),
    ("certificate.sig_alg", "string"),
    ("certificate.key_type", "string"),
    ("certificate.key_length", "count"),
    ("certificate.exponent", "string"),
    ("certificate.curve", "string"),
    ("san.dns", "vector[string]"),
    ("san.uri", "vector[string]"),
    ("san.email", "vector[string]"),
    ("san.ip", "vector[addr]"),
    ("basic_constraints.ca", "bool"),
    ("basic_constraints.path_len", "count"),
    ("host_cert", "bool"),
    ("client_cert", "bool"),
];

/// The field Zeek's `policy/protocols/ssl/log-certs-base64.zeek` adds
/// (`redef record X509::Info += { cert: string &log &optional }`, set to
/// `encode_base64` of the DER, never truncated), after every other.
const X509_CERT: (&str, &str) = ("cert", "string");

/// Standard base64 (RFC 4648 section 4, padded), as Zeek's `encode_base64`.
fn base64(b: &[u8], out: &mut String) {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    out.reserve(b.len().div_ceil(3) * 4);
    for c in b.chunks(3) {
        let n = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
        out.push(T[(n >> 18) as usize & 63] as char);
        out.push(T[(n >> 12) as usize & 63] as char);
        out.push(if c.len() > 1 { T[(n >> 6) as usize & 63] as char } else { '=' });
        out.push(if c.len() > 2 { T[n as usize & 63] as char } else { '=' });
    }
}

/// Zeek logs a known certificate again once this much time has passed
/// (`X509::relog_known_certificates_after`, one day).
const RELOG_NS: i64 = 86_400_000_000_000;

/// Certificates remembered for de-duplication before the oldest are
/// forgotten (a certificate forgotten is at worst logged once more).
const MAX_KNOWN: usize = 100_000;

const X509_LOG: &str = "x509.log";

/// Opens x509.log when its first row comes (a capture without plaintext
/// certificates has none, as with Zeek).
pub type OpenLog<W> = Box<dyn FnMut() -> io::Result<W> + Send>;

/// Writes x509.log: each certificate of the TLS records it is given, once
/// per (fingerprint, host_cert, client_cert) a day.
pub struct X509LogWriter<W: Write> {
    open: OpenLog<W>,
    out: Option<W>,
    format: LogFormat,
    header_written: bool,
    names: Vec<&'static str>,
    line: Vec<u8>,
    scratch: String,
    /// When each (fingerprint, host, client) was last logged.
    known: HashMap<(String, bool, bool), i64>,
    rows: u64,
    /// log-certs-base64: the `cert` column.
    base64: bool,
    /// log-hostcerts-only: only the first certificate of each chain.
    hosts_only: bool,
}

impl<W: Write> X509LogWriter<W> {
    pub fn new(open: OpenLog<W>, format: LogFormat) -> Self {
        X509LogWriter {
            open,
            out: None,
            format,
            header_written: false,
            names: X509.iter().map(|f| f.0).collect(),
            line: Vec::with_capacity(1024),
            scratch: String::new(),
            known: HashMap::new(),
            rows: 0,
            base64: false,
            hosts_only: false,
        }
    }

    /// With the Zeek policies `policies` (`--zeek-policy`): x509.log gets
    /// the `cert` column with log-certs-base64, and only host certificates
    /// with log-hostcerts-only (its `X509::log_policy` hook breaks for a
    /// certificate that is not `host_cert`).
    pub fn with_policies(mut self, policies: &[&str]) -> Self {
        self.base64 = policies.contains(&"log-certs-base64");
        self.hosts_only = policies.contains(&"log-hostcerts-only");
        if self.base64 {
            self.names.push(X509_CERT.0);
        }
        self
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The certificates of one TLS record (other records are ignored).
    pub fn write(&mut self, r: &TxRecord) -> io::Result<()> {
        let Some(chains) = shown_chains(r) else {
            return Ok(());
        };
        for chain in chains {
            for (i, c) in chain.certs.iter().enumerate() {
                if self.hosts_only && i > 0 {
                    break;
                }
                let der = chain.der.get(i).map_or(&[][..], Vec::as_slice);
                self.cert(c, der, i == 0, chain.client, chain.ts_ns)?;
            }
        }
        Ok(())
    }

    fn cert(&mut self, info: &CertInfo, der: &[u8], host: bool, client: bool, ts: i64) -> io::Result<()> {
        let Some(c) = &info.cert else {
            return Ok(());
        };
        let key = (info.fingerprint.clone(), host, client);
        if let Some(&last) = self.known.get(&key) {
            if ts.saturating_sub(last) < RELOG_NS {
                return Ok(());
            }
        }
        if self.known.len() >= MAX_KNOWN {
            self.known
                .retain(|_, &mut t| ts.saturating_sub(t) < RELOG_NS);
            if self.known.len() >= MAX_KNOWN {
                self.known.clear();
            }
        }
        self.known.insert(key, ts);
        if self.out.is_none() {
            self.out = Some((self.open)()?);
        }
        self.line.clear();
        if self.format == LogFormat::Json {
            self.cert_line::<true>(c, der, host, client, ts);
        } else {
            self.cert_line::<false>(c, der, host, client, ts);
        }
        let out = self.out.as_mut().expect("opened above");
        zeek_header(
            out,
            self.format,
            &mut self.header_written,
            "x509",
            X509.iter().chain(self.base64.then_some(&X509_CERT)),
        )?;
        self.rows += 1;
        out.write_all(&self.line)
    }

    /// One certificate's line, in `self.line`.
    fn cert_line<const JSON: bool>(&mut self, c: &wirelog_record::x509::Certificate, der: &[u8], host: bool, client: bool, ts: i64) {
        let mut v = Line::<JSON>::start(&mut self.line, &self.names, &mut self.scratch);
        let secs = |t: i64| t.saturating_mul(1_000_000_000);
        v.time(ts);
        v.ztext(Some(&c.fingerprint));
        v.count(Some(c.version));
        v.ztext(Some(&c.serial));
        v.ztext(Some(&c.subject));
        v.ztext(Some(&c.issuer));
        v.time(secs(c.not_valid_before));
        v.time(secs(c.not_valid_after));
        v.ztext(Some(&c.key_alg));
        v.ztext(Some(&c.sig_alg));
        v.ztext(c.key_type);
        v.count(c.key_length.map(u64::from));
        v.ztext(c.exponent.as_deref());
        v.ztext(c.curve);
        let san = c.san.as_ref();
        let text = |s: &String, o: &mut String| o.push_str(s);
        v.zlist(san.and_then(|s| s.dns.as_deref()), text);
        v.zlist(san.and_then(|s| s.uri.as_deref()), text);
        v.zlist(san.and_then(|s| s.email.as_deref()), text);
        v.zlist(san.and_then(|s| s.ip.as_deref()), |a, o| {
            o.push_str(&addr_text(a))
        });
        v.bool(c.basic_constraints.map(|b| b.ca));
        v.count(c.basic_constraints.and_then(|b| b.path_len));
        v.bool(Some(host));
        v.bool(Some(client));
        if self.base64 {
            let mut b64 = String::new();
            base64(der, &mut b64);
            v.ztext(Some(&b64));
        }
        debug_assert_eq!(v.i, self.names.len());
        self.line.extend_from_slice(if JSON { b"}\n" } else { b"\n" });
    }

    /// The file, once opened.
    pub fn get_mut(&mut self) -> Option<&mut W> {
        self.out.as_mut()
    }

    pub fn flush(&mut self) -> io::Result<()> {
        match &mut self.out {
            Some(o) => o.flush(),
            None => Ok(()),
        }
    }

    /// Writes the `#close` line (TSV) and flushes, if the log was opened.
    pub fn finish(&mut self) -> io::Result<()> {
        match &mut self.out {
            Some(o) => zeek_close(o, self.format),
            None => Ok(()),
        }
    }
}

impl X509LogWriter<crate::LogOut> {
    /// x509.log in the log directory, created at its first row (one left by
    /// an earlier run is removed now).
    pub fn in_dir(dir: crate::LogDir) -> io::Result<Self> {
        dir.remove_stale(X509_LOG)?;
        let format = dir.format;
        Ok(X509LogWriter::new(Box::new(move || dir.create(X509_LOG)), format))
    }
}

/// x509.log as a sink: the certificates of each batch's TLS transactions.
impl crate::Sink for X509LogWriter<crate::LogOut> {
    fn name(&self) -> &str {
        X509_LOG
    }

    fn write(&mut self, batch: &wirelog_record::Batch) -> io::Result<()> {
        batch.txs.iter().try_for_each(|r| X509LogWriter::write(self, r))
    }

    fn tick(&mut self, _now: std::time::Instant) -> io::Result<()> {
        self.flush()
    }

    fn space(&self) -> crate::Space {
        crate::logs::out::space(self.out.as_ref())
    }

    fn close(&mut self) -> io::Result<crate::SinkEnd> {
        self.finish()?;
        Ok(crate::logs::out::abandon(self.out.as_mut()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirelog_record::tls::fixtures::handshake as record;
    use wirelog_record::{Detail, Protocol};

    /// RFC 4648 section 10's test vectors.
    #[test]
    fn base64_vectors() {
        for (i, o) in [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy")] {
            let mut s = String::new();
            base64(i.as_bytes(), &mut s);
            assert_eq!(s, o);
        }
    }

    /// The DER certificates of Zeek's `tls12_ecdhe` case (the base64 `cert`
    /// column of its x509.base64.log), leaf first.
    fn zeek_certs() -> Vec<Vec<u8>> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/testdata/tls/tls12_ecdhe/x509.base64.log"
        );
        let text = std::fs::read_to_string(path).unwrap();
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| unbase64(l.rsplit('\t').next().unwrap()))
            .collect()
    }

    fn unbase64(s: &str) -> Vec<u8> {
        let v = |c: u8| match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            _ => 63,
        };
        let mut out = Vec::new();
        for q in s.trim_end_matches('=').as_bytes().chunks(4) {
            let mut n = 0u32;
            for (i, &c) in q.iter().enumerate() {
                n |= (v(c) as u32) << (18 - 6 * i);
            }
            out.extend_from_slice(&n.to_be_bytes()[1..q.len()]);
        }
        out
    }

    /// Zeek's de-duplication: a (fingerprint, host_cert, client_cert) once
    /// a day; the same certificate as a client's is another row; undecodable
    /// DER is no row; x509.log opens only with its first row.
    #[test]
    fn x509_rows_once_a_day_per_role() {
        let certs = zeek_certs();
        assert_eq!(certs.len(), 3);
        let opened = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let o = opened.clone();
        let mut w = X509LogWriter::new(
            Box::new(move || {
                o.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(Vec::new())
            }),
            LogFormat::Tsv,
        );
        let day = 86_400_000_000_000i64;
        w.write(&record(0, vec![b"not a certificate".to_vec()], None))
            .unwrap();
        assert_eq!(
            (w.rows(), opened.load(std::sync::atomic::Ordering::Relaxed)),
            (0, 0)
        );
        w.write(&record(1, certs.clone(), None)).unwrap();
        assert_eq!(w.rows(), 3);
        // The same chain an hour later: known.
        w.write(&record(day / 24, certs.clone(), None)).unwrap();
        assert_eq!(w.rows(), 3);
        // The leaf sent by a client: a new (fingerprint, role).
        w.write(&record(
            day / 12,
            certs.clone(),
            Some(vec![certs[0].clone()]),
        ))
        .unwrap();
        assert_eq!(w.rows(), 4);
        // A day after they were logged: logged again.
        w.write(&record(day + 1, certs.clone(), None)).unwrap();
        assert_eq!(w.rows(), 7);
        assert_eq!(opened.load(std::sync::atomic::Ordering::Relaxed), 1);
        let text = String::from_utf8(w.get_mut().unwrap().clone()).unwrap();
        let rows: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(rows.len(), 7);
        // host_cert, client_cert of the client's leaf row.
        assert!(rows[3].ends_with("\tT\tT"), "{}", rows[3]);
        assert!(rows[0].ends_with("\tT\tF") && rows[1].ends_with("\tF\tF"));
        assert!(text.contains("#path\tx509"));
    }

    /// ssl.log's certificate columns from the decoded chain.
    #[test]
    fn ssl_leaf_columns() {
        let certs = zeek_certs();
        let r = record(0, certs.clone(), None);
        let mut w = crate::TxLogWriter::new(Vec::new(), LogFormat::Json, Protocol::Tls);
        w.write(&r).unwrap();
        let line = String::from_utf8(w.get_mut().clone()).unwrap();
        let Detail::Tls(t) = &r.tx.detail else {
            unreachable!()
        };
        let leaf = t.leaf().unwrap();
        assert!(
            line.contains(&format!("\"subject\":\"{}\"", leaf.subject)),
            "{line}"
        );
        assert!(
            line.contains(&format!("\"cert_chain_fps\":[\"{}\"", leaf.fingerprint)),
            "{line}"
        );
        assert!(line.contains("\"client_cert_chain_fps\":[]"), "{line}");
        assert!(line.contains("\"sni_matches_cert\":"), "{line}");
    }
}
