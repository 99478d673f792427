//! The certificates TLS handshakes showed, as store rows ([`Kind::X509`]):
//! one row per (fingerprint, role, host_cert) and hour, not one per
//! handshake. A certificate a busy server shows a million times an hour is
//! one row, its `handshakes` the count.
//!
//! Within a buffer, a repeat only counts. Across flushes of one run, a
//! certificate whose row for an hour is already in a file is not written
//! again for that hour (its later handshakes in that hour are not counted):
//! one row per hour at most.

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

/// Keys remembered as written before the oldest hours are forgotten (a
/// certificate forgotten is at worst written once more in its hour).
const MAX_WRITTEN: usize = 100_000;

struct Row {
    ts: i64,
    key: Key,
    handshakes: u64,
    cert: Certificate,
}

/// The write buffer of the x509 kind.
#[derive(Default)]
pub(crate) struct X509Buf {
    rows: Vec<Row>,
    /// (key, hour) -> row in `rows`.
    index: HashMap<(Key, i64), usize>,
    /// Keys already in a file, with the last hour they were written for.
    written: HashMap<Key, i64>,
    /// About how many bytes the buffer holds.
    pub(crate) bytes: usize,
}

fn join(v: Option<&[String]>) -> Option<String> {
    v.map(|v| v.join(","))
}

impl X509Buf {
    pub(crate) fn len(&self) -> usize {
        self.rows.len()
    }

    /// The certificates of a TLS record (other records have none).
    pub(crate) fn push_record(&mut self, r: &TxRecord) {
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
        if self.written.get(&key) == Some(&hour) {
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

    /// Forgets the buffered rows once they are in files, remembering their
    /// keys so the same hour gets no second row.
    pub(crate) fn clear(&mut self) {
        if self.written.len() + self.rows.len() > MAX_WRITTEN {
            let newest = self.rows.iter().map(|r| hour_of(r.ts)).max().unwrap_or(0);
            self.written.retain(|_, h| *h >= newest);
            if self.written.len() + self.rows.len() > MAX_WRITTEN {
                self.written.clear();
            }
        }
        for r in self.rows.drain(..) {
            let hour = hour_of(r.ts);
            let last = self.written.entry(r.key).or_insert(hour);
            *last = (*last).max(hour);
        }
        self.index.clear();
        self.bytes = 0;
    }

    /// Drops the buffered rows without remembering them (the store closed
    /// without room to write them; they are counted as dropped).
    pub(crate) fn discard(&mut self) {
        self.rows.clear();
        self.index.clear();
        self.bytes = 0;
    }
}

fn secs(t: i64) -> Option<i64> {
    (t >= 0).then_some(t)
}

impl RowSource for X509Buf {
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
        let row = |r: usize| &self.rows[r];
        let c = |r: usize| &self.rows[r].cert;
        let text = |f: fn(&Certificate) -> Option<&str>| {
            strings(rows, schema::X509[col].is_optional(), move |r| {
                f(c(r)).filter(|s| !s.is_empty()).map(str::as_bytes)
            })
        };
        let list = |f: fn(&Certificate) -> Option<String>| {
            let v: Vec<Option<String>> = rows.iter().map(|&r| f(c(r as usize))).collect();
            let at: Vec<u32> = (0..rows.len() as u32).collect();
            strings(&at, true, |i| v[i].as_deref().map(str::as_bytes))
        };
        match schema::X509[col].name {
            "ts" => req_i64(rows, |r| row(r).ts.div_euclid(NS_PER_US)),
            "fingerprint" => strings(rows, false, |r| Some(row(r).key.0.as_bytes())),
            "role" => strings(rows, false, |r| {
                Some(if row(r).key.1 { b"client".as_slice() } else { b"server" })
            }),
            "host_cert" => req_bool(rows, |r| row(r).key.2),
            "handshakes" => req_i64(rows, |r| row(r).handshakes as i64),
            "version" => req_i64(rows, |r| c(r).version as i64),
            "serial" => text(|c| Some(&c.serial)),
            "subject" => text(|c| Some(&c.subject)),
            "issuer" => text(|c| Some(&c.issuer)),
            "not_valid_before" => opt_i64(rows, |r| secs(c(r).not_valid_before)),
            "not_valid_after" => opt_i64(rows, |r| secs(c(r).not_valid_after)),
            "key_alg" => text(|c| Some(&c.key_alg)),
            "sig_alg" => text(|c| Some(&c.sig_alg)),
            "key_type" => text(|c| c.key_type),
            "key_length" => opt_i64(rows, |r| c(r).key_length.map(i64::from)),
            "exponent" => text(|c| c.exponent.as_deref()),
            "curve" => text(|c| c.curve),
            "san_dns" => list(|c| join(c.san.as_ref()?.dns.as_deref())),
            "san_uri" => list(|c| join(c.san.as_ref()?.uri.as_deref())),
            "san_email" => list(|c| join(c.san.as_ref()?.email.as_deref())),
            "san_ip" => list(|c| {
                let ips = c.san.as_ref()?.ip.as_ref()?;
                Some(ips.iter().map(addr_text).collect::<Vec<_>>().join(","))
            }),
            "basic_constraints_ca" => req_bool(rows, |r| c(r).basic_constraints.is_some_and(|b| b.ca)),
            "basic_constraints_path_len" => {
                opt_i64(rows, |r| c(r).basic_constraints.and_then(|b| b.path_len).map(|v| v as i64))
            }
            other => unreachable!("x509 column {other}"),
        }
    }
}
