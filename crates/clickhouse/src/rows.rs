//! Records to RowBinary, the bytes an `INSERT ... FORMAT RowBinary` body
//! holds, in [`Table::columns`] order. The spool keeps these same bytes, so
//! a retried batch is byte for byte the first attempt (what a deduplication
//! token promises the server).
//!
//! RowBinary: integers little-endian, strings as LEB128 length + bytes,
//! `Nullable` as a null byte (1 = NULL) before the value, `IPv6` as its 16
//! bytes in network order, `DateTime64(6)` as Int64 microseconds, `Bool` as
//! one byte; `LowCardinality` changes nothing on the wire.

use wirelog_record::{ConnRecord, FlowRecord, Proc, TxRecord};
use wirelog_store::{schema, tx_columns, Cell, CertRows, CertValue, TxRow};

use crate::schema::{ch_type, ChType, Table};

/// Microseconds, rounded down like the store.
fn us(ns: i64) -> i64 {
    ns.div_euclid(1000)
}

/// One table's rows being collected.
#[derive(Default)]
pub struct Rows {
    pub buf: Vec<u8>,
    pub rows: u64,
}

impl Rows {
    #[inline]
    fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    #[inline]
    fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    #[inline]
    fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    #[inline]
    fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    #[inline]
    fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn time(&mut self, ns: i64) {
        self.i64(us(ns));
    }
    fn str(&mut self, s: &str) {
        let mut n = s.len() as u64;
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                self.buf.push(b);
                break;
            }
            self.buf.push(b | 0x80);
        }
        self.buf.extend_from_slice(s.as_bytes());
    }
    fn ip(&mut self, ip: &[u8; 16]) {
        self.buf.extend_from_slice(ip);
    }
    fn bool(&mut self, b: bool) {
        self.buf.push(b as u8);
    }
    fn opt_u64(&mut self, v: Option<u64>) {
        match v {
            Some(v) => {
                self.u8(0);
                self.u64(v);
            }
            None => self.u8(1),
        }
    }
    fn opt_u16(&mut self, v: Option<u16>) {
        match v {
            Some(v) => {
                self.u8(0);
                self.u16(v);
            }
            None => self.u8(1),
        }
    }
    /// A duration in ns as the store keeps it, microseconds.
    fn dur(&mut self, ns: Option<i64>) {
        match ns {
            Some(v) => {
                self.u8(0);
                self.i64(us(v));
            }
            None => self.u8(1),
        }
    }

    fn identity(&mut self, probe: &str, iface: &str) {
        self.str(probe);
        self.str(iface);
    }

    pub fn flow(&mut self, probe: &str, f: &FlowRecord) {
        self.identity(probe, &f.iface);
        self.time(f.bucket_ns);
        self.ip(&f.client.0);
        self.ip(&f.server.0);
        self.u16(f.server_port);
        self.u8(f.proto);
        self.u64(f.bytes_out);
        self.u64(f.pkts_out);
        self.u64(f.bytes_in);
        self.u64(f.pkts_in);
        self.time(f.first_ns);
        self.time(f.last_ns);
        self.u32(f.conns);
        self.rows += 1;
    }

    fn owner(&mut self, p: &Proc) {
        let o = p.as_deref();
        self.opt_u64(o.map(|o| o.pid as u64));
        let fields: [fn(&wirelog_record::ProcOwner) -> &str; 5] =
            [|o| &o.name, |o| &o.exe, |o| &o.user, |o| &o.container, |o| &o.pod];
        for f in fields {
            self.str(o.map(f).unwrap_or(""));
        }
    }

    pub fn conn(&mut self, probe: &str, iface: &str, r: &ConnRecord) {
        self.identity(probe, iface);
        self.time(r.ts_ns);
        self.str(r.uid.as_str());
        self.ip(&r.orig_h.0);
        self.u16(r.orig_p);
        self.ip(&r.resp_h.0);
        self.u16(r.resp_p);
        self.str(r.proto.as_str());
        self.str(r.service.unwrap_or(""));
        self.dur(r.duration_ns);
        self.opt_u64(r.orig_bytes);
        self.opt_u64(r.resp_bytes);
        self.str(r.conn_state.as_str());
        self.bool(r.local_orig);
        self.bool(r.local_resp);
        self.u64(r.missed_bytes);
        self.str(r.history.as_str());
        self.u64(r.orig_pkts);
        self.u64(r.orig_ip_bytes);
        self.u64(r.resp_pkts);
        self.u64(r.resp_ip_bytes);
        self.u8(r.ip_proto);
        self.str(r.community_id.as_str());
        self.opt_u16(r.vlan);
        self.opt_u16(r.inner_vlan);
        self.bool(r.empty_tcp_skipped);
        self.owner(&r.orig_proc);
        self.owner(&r.resp_proc);
        self.rows += 1;
    }

    /// A transaction, through the store's own mapping of each protocol onto
    /// its columns (so the two backends cannot disagree on a field).
    pub fn tx(&mut self, probe: &str, iface: &str, table: Table, r: &TxRecord) {
        let row = TxRow::from_record(r);
        self.identity(probe, iface);
        self.time(row.ts_ns);
        self.str(&row.uid);
        self.ip(&row.client.0);
        self.u16(row.client_port);
        self.ip(&row.server.0);
        self.u16(row.server_port);
        self.u8(row.transport);
        self.str(row.status);
        self.opt_u64(row.request_bytes);
        self.opt_u64(row.response_bytes);
        self.dur(row.latency_ns);
        self.dur(row.first_byte_latency_ns);
        self.opt_u64(Some(u64::from(row.sample_weight)));
        let Table::Store(kind) = table else {
            unreachable!("transactions go to a store kind's table")
        };
        for (spec, cell) in tx_columns(kind).iter().zip(&row.extra) {
            match (ch_type(spec), cell) {
                (ChType::OptU64, Cell::U64(v)) => self.opt_u64(*v),
                (ChType::OptU16, Cell::U64(v)) => self.opt_u16(v.map(|v| v.min(u16::MAX as u64) as u16)),
                (ChType::Dur, Cell::Dur(v)) => self.dur(*v),
                (ChType::Str | ChType::Lc, Cell::Str(v)) => self.str(v.as_deref().unwrap_or("")),
                (ChType::Bool, Cell::Bool(v)) => self.bool(*v),
                // Cells are the store's, checked against the same columns.
                (ty, cell) => unreachable!("{}: column type {ty:?} for {cell:?}", table.name()),
            }
        }
        self.owner(&row.orig_proc);
        self.owner(&row.resp_proc);
        self.rows += 1;
    }

    /// Row `row` of the certificates, through the store's own values of
    /// each column (so the two backends cannot disagree on a field).
    pub fn cert(&mut self, probe: &str, iface: &str, certs: &CertRows, row: usize) {
        self.identity(probe, iface);
        for (col, spec) in schema::X509.iter().enumerate() {
            match (ch_type(spec), certs.value(row, col)) {
                (ChType::Time, CertValue::Time(ns)) => self.time(ns),
                (ChType::U64, CertValue::U64(v)) => self.u64(v.unwrap_or(0)),
                (ChType::OptU64, CertValue::U64(v)) => self.opt_u64(v),
                (ChType::Str | ChType::Lc, CertValue::Str(v)) => self.str(v.as_deref().unwrap_or("")),
                (ChType::Bool, CertValue::Bool(v)) => self.bool(v),
                // The store's values, of the same columns.
                (ty, v) => unreachable!("x509.{}: column type {ty:?} for {v:?}", spec.name),
            }
        }
        self.rows += 1;
    }

    /// A loss row: the store's `loss` columns (minute, source, protocol,
    /// then every count in `LossCount::ALL` order).
    pub fn loss(&mut self, probe: &str, iface: &str, r: &wirelog_record::LossRecord) {
        self.identity(probe, iface);
        self.time(r.ts_ns);
        self.str(&r.source);
        self.str(r.protocol.map_or("", |p| p.name()));
        for n in r.counts.0 {
            self.u64(n);
        }
        self.rows += 1;
    }

    pub fn health(&mut self, probe: &str, iface: &str, h: &Health) {
        self.identity(probe, iface);
        self.time(h.ts_ns);
        self.u32(h.interval_s);
        self.dur(Some(h.cpu_ns));
        self.u64(h.rss_bytes);
        self.u64(h.packets);
        self.u64(h.bytes);
        self.u64(h.kernel_drops);
        self.u64(h.probe_drops);
        self.u64(h.evictions);
        self.u64(h.parse_errors);
        self.u64(h.sink_dropped_rows);
        self.u64(h.spool_bytes);
        self.rows += 1;
    }
}

/// One health row: the probe over the last interval (counters are deltas).
#[derive(Debug, Clone, Default)]
pub struct Health {
    pub ts_ns: i64,
    pub interval_s: u32,
    /// CPU time of the process (user + system), ns.
    pub cpu_ns: i64,
    pub rss_bytes: u64,
    pub packets: u64,
    pub bytes: u64,
    pub kernel_drops: u64,
    pub probe_drops: u64,
    pub evictions: u64,
    pub parse_errors: u64,
    /// Filled by the sink: rows it dropped (full spool) in the interval.
    pub sink_dropped_rows: u64,
    /// Filled by the sink: bytes waiting in its spool.
    pub spool_bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_leb128_prefixed() {
        let mut r = Rows::default();
        r.str("ab");
        r.str(&"x".repeat(300));
        assert_eq!(&r.buf[..3], &[2, b'a', b'b']);
        assert_eq!(&r.buf[3..5], &[0xac, 0x02]);
        assert_eq!(r.buf.len(), 5 + 300);
    }
}
