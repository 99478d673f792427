//! The certificates TLS handshakes showed, as rows of x509.log's columns
//! ([`schema::X509`]): one row per (fingerprint, role, host_cert) and hour,
//! not one per handshake. A certificate a busy server shows a million times
//! an hour is one row, its `handshakes` the count.
//!
//! [`CertRows`] folds the handshakes of one buffer (the store's, until it
//! is flushed; a ClickHouse batch, until it is cut). A handshake after its
//! row left (a flush, a cut) starts a new row for the same hour counting
//! from there: an hour's count is the sum of its rows, which is what
//! `wirelog query x509` shows (it sums `handshakes` per group), what the
//! store's compaction of a closed hour folds back into one row, and what
//! ClickHouse's `SummingMergeTree` folds into one row as it merges.

use std::borrow::Cow;
use std::collections::HashMap;

use wirelog_record::tls::{shown_chains, CertInfo};
use wirelog_record::x509::{addr_text, Certificate};
use wirelog_record::TxRecord;

use crate::batch::Kind;
use crate::encode::{opt_i64, req_bool, req_i64, strings, PqValues, RowSource};
use crate::schema;
use crate::time::{hour_of, NS_PER_US};

/// (fingerprint, client's chain, first of its chain): what one row is about.
type Key = (String, bool, bool);

struct Row {
    ts: i64,
    key: Key,
    handshakes: u64,
    cert: Certificate,
}

/// One value of a certificate row, in the type of its [`schema::X509`]
/// column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertValue<'a> {
    /// ns since the epoch.
    Time(i64),
    U64(Option<u64>),
    /// Text; `None` is unset (stored as null where the column is optional).
    Str(Option<Cow<'a, str>>),
    Bool(bool),
}

/// Certificate rows being collected: the store's x509 write buffer, and a
/// ClickHouse batch of the `x509` table.
#[derive(Default)]
pub struct CertRows {
    rows: Vec<Row>,
    /// (key, hour) -> row in `rows`.
    index: HashMap<(Key, i64), usize>,
    /// About how many bytes the rows hold.
    bytes: usize,
}

fn join(v: Option<&[String]>) -> Option<String> {
    v.map(|v| v.join(","))
}

fn secs(t: i64) -> Option<u64> {
    (t >= 0).then_some(t as u64)
}

impl CertRows {
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// About how many bytes the rows hold.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The certificates of a TLS record (other records have none).
    pub fn push_record(&mut self, r: &TxRecord) {
        let Some(chains) = shown_chains(r) else {
            return;
        };
        for chain in chains {
            for (i, c) in chain.certs.iter().enumerate() {
                self.push(c, chain.client, i == 0, chain.ts_ns);
            }
        }
    }

    fn push(&mut self, info: &CertInfo, client: bool, host: bool, ts: i64) {
        // Undecodable DER has no fields to store (Zeek logs no row either).
        let Some(cert) = &info.cert else {
            return;
        };
        let hour = hour_of(ts);
        let key = (info.fingerprint.clone(), client, host);
        if let Some(&i) = self.index.get(&(key.clone(), hour)) {
            let row = &mut self.rows[i];
            row.handshakes += 1;
            row.ts = row.ts.min(ts);
            return;
        }
        self.bytes += 256 + cert.subject.len() + cert.issuer.len() + cert.serial.len();
        self.index.insert((key.clone(), hour), self.rows.len());
        self.rows.push(Row {
            ts,
            key,
            handshakes: 1,
            cert: Certificate::clone(cert),
        });
    }

    /// Forgets the rows (written, sent, or dropped and counted); later
    /// handshakes start new rows.
    pub fn clear(&mut self) {
        self.rows.clear();
        self.index.clear();
        self.bytes = 0;
    }

    /// When row `row` was first seen (ns).
    pub fn time_ns(&self, row: usize) -> i64 {
        self.rows[row].ts
    }

    /// The value of row `row` in column `col` of [`schema::X509`].
    pub fn value(&self, row: usize, col: usize) -> CertValue<'_> {
        let r = &self.rows[row];
        let c = &r.cert;
        // Empty text is unset; an empty list joins to "".
        fn text(s: Option<&str>) -> CertValue<'_> {
            CertValue::Str(s.filter(|s| !s.is_empty()).map(Cow::Borrowed))
        }
        let list = |s: Option<String>| CertValue::Str(s.map(Cow::Owned));
        match schema::X509[col].name {
            "ts" => CertValue::Time(r.ts),
            "fingerprint" => CertValue::Str(Some(Cow::Borrowed(&r.key.0))),
            "role" => CertValue::Str(Some(Cow::Borrowed(if r.key.1 { "client" } else { "server" }))),
            "host_cert" => CertValue::Bool(r.key.2),
            "handshakes" => CertValue::U64(Some(r.handshakes)),
            "version" => CertValue::U64(Some(c.version)),
            "serial" => text(Some(&c.serial)),
            "subject" => text(Some(&c.subject)),
            "issuer" => text(Some(&c.issuer)),
            "not_valid_before" => CertValue::U64(secs(c.not_valid_before)),
            "not_valid_after" => CertValue::U64(secs(c.not_valid_after)),
            "key_alg" => text(Some(&c.key_alg)),
            "sig_alg" => text(Some(&c.sig_alg)),
            "key_type" => text(c.key_type),
            "key_length" => CertValue::U64(c.key_length.map(u64::from)),
            "exponent" => text(c.exponent.as_deref()),
            "curve" => text(c.curve),
            "san_dns" => list(join(c.san.as_ref().and_then(|s| s.dns.as_deref()))),
            "san_uri" => list(join(c.san.as_ref().and_then(|s| s.uri.as_deref()))),
            "san_email" => list(join(c.san.as_ref().and_then(|s| s.email.as_deref()))),
            "san_ip" => list(c.san.as_ref().and_then(|s| s.ip.as_ref()).map(|ips| {
                ips.iter().map(addr_text).collect::<Vec<_>>().join(",")
            })),
            "basic_constraints_ca" => CertValue::Bool(c.basic_constraints.is_some_and(|b| b.ca)),
            "basic_constraints_path_len" => {
                CertValue::U64(c.basic_constraints.and_then(|b| b.path_len))
            }
            other => unreachable!("x509 column {other}"),
        }
    }
}

impl RowSource for CertRows {
    fn kind(&self) -> Kind {
        Kind::X509
    }
    fn len(&self) -> usize {
        self.rows.len()
    }
    fn time_ns(&self, row: usize) -> i64 {
        self.rows[row].ts
    }
    fn sort_rows(&self, rows: &mut [u32]) {
        rows.sort_by_key(|&r| self.rows[r as usize].ts);
    }
    fn values(&self, col: usize, rows: &[u32]) -> PqValues {
        let spec = &schema::X509[col];
        let v: Vec<CertValue> = rows.iter().map(|&r| self.value(r as usize, col)).collect();
        let at: Vec<u32> = (0..rows.len() as u32).collect();
        match spec.col_type() {
            schema::ColType::TimeUs => req_i64(&at, |i| match v[i] {
                CertValue::Time(t) => t.div_euclid(NS_PER_US),
                _ => unreachable!("x509 {}: a time", spec.name),
            }),
            schema::ColType::U64 => {
                let n = |i: usize| match v[i] {
                    CertValue::U64(n) => n.map(|n| n as i64),
                    _ => unreachable!("x509 {}: a number", spec.name),
                };
                if spec.is_optional() {
                    opt_i64(&at, n)
                } else {
                    req_i64(&at, |i| n(i).unwrap_or(0))
                }
            }
            schema::ColType::Bool => req_bool(&at, |i| matches!(v[i], CertValue::Bool(true))),
            schema::ColType::Str => strings(&at, spec.is_optional(), |i| match &v[i] {
                CertValue::Str(s) => s.as_deref().map(str::as_bytes),
                _ => unreachable!("x509 {}: text", spec.name),
            }),
            other => unreachable!("x509 {}: no {other:?} columns", spec.name),
        }
    }
}
