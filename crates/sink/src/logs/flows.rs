//! `flows.log`: flow records in the same TSV/JSON conventions as conn.log.

use std::io::{self, Write};

use wirelog_record::FlowRecord;

use crate::logs::zeek::{push_u64, write_addr, write_secs, zeek_close, zeek_header};
use crate::LogFormat;

const FIELDS: &[(&str, &str)] = &[
    ("bucket", "time"),
    ("iface", "string"),
    ("client", "addr"),
    ("server", "addr"),
    ("server_port", "count"),
    ("proto", "count"),
    ("bytes_out", "count"),
    ("pkts_out", "count"),
    ("bytes_in", "count"),
    ("pkts_in", "count"),
    ("first", "time"),
    ("last", "time"),
    ("conns", "count"),
];

/// Writes flow records as their buckets end.
pub struct FlowLogWriter<W: Write> {
    out: W,
    format: LogFormat,
    header_written: bool,
    line: Vec<u8>,
}

impl<W: Write> FlowLogWriter<W> {
    pub fn new(out: W, format: LogFormat) -> Self {
        FlowLogWriter {
            out,
            format,
            header_written: false,
            line: Vec::with_capacity(256),
        }
    }

    fn header(&mut self) -> io::Result<()> {
        zeek_header(&mut self.out, self.format, &mut self.header_written, "flows", FIELDS.iter())
    }

    pub fn write(&mut self, r: &FlowRecord) -> io::Result<()> {
        self.header()?;
        let b = &mut self.line;
        b.clear();
        let json = self.format == LogFormat::Json;
        // (name, writer) pairs in field order; JSON quotes strings and addresses.
        let mut first = true;
        let mut field = |b: &mut Vec<u8>, name: &str, quoted: bool, f: &dyn Fn(&mut Vec<u8>)| {
            if json {
                b.extend_from_slice(if first { b"{\"" } else { b",\"" });
                b.extend_from_slice(name.as_bytes());
                b.extend_from_slice(if quoted { b"\":\"" } else { b"\":" });
                f(b);
                if quoted {
                    b.push(b'"');
                }
            } else {
                if !first {
                    b.push(b'\t');
                }
                f(b);
            }
            first = false;
        };
        field(b, "bucket", false, &|b| write_secs(b, r.bucket_ns));
        field(b, "iface", true, &|b| {
            b.extend_from_slice(r.iface.as_bytes())
        });
        field(b, "client", true, &|b| write_addr(b, &r.client));
        field(b, "server", true, &|b| write_addr(b, &r.server));
        field(b, "server_port", false, &|b| {
            push_u64(b, r.server_port as u64)
        });
        field(b, "proto", false, &|b| push_u64(b, r.proto as u64));
        field(b, "bytes_out", false, &|b| push_u64(b, r.bytes_out));
        field(b, "pkts_out", false, &|b| push_u64(b, r.pkts_out));
        field(b, "bytes_in", false, &|b| push_u64(b, r.bytes_in));
        field(b, "pkts_in", false, &|b| push_u64(b, r.pkts_in));
        field(b, "first", false, &|b| write_secs(b, r.first_ns));
        field(b, "last", false, &|b| write_secs(b, r.last_ns));
        field(b, "conns", false, &|b| push_u64(b, r.conns as u64));
        if json {
            b.push(b'}');
        }
        b.push(b'\n');
        self.out.write_all(b)
    }

    pub fn finish(&mut self) -> io::Result<()> {
        self.header()?;
        zeek_close(&mut self.out, self.format)
    }

    /// The output the lines go to.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

crate::logs::out::log_sink!(FlowLogWriter, "flows.log", flows);

#[cfg(test)]
mod tests {
    use super::*;
    use wirelog_record::IpAddr16;

    #[test]
    fn tsv_and_json_rows() {
        let r = FlowRecord {
            bucket_ns: 1_700_000_100_000_000_000,
            iface: "eth0".into(),
            client: IpAddr16::from_v4([10, 0, 0, 1]),
            server: IpAddr16::from_v4([10, 0, 0, 2]),
            server_port: 443,
            proto: 6,
            bytes_out: 100,
            pkts_out: 2,
            bytes_in: 3000,
            pkts_in: 3,
            first_ns: 1_700_000_100_000_001_000,
            last_ns: 1_700_000_100_500_000_000,
            conns: 1,
        };
        let mut w = FlowLogWriter::new(Vec::new(), LogFormat::Tsv);
        w.write(&r).unwrap();
        let s = String::from_utf8(w.out).unwrap();
        let row = s.lines().find(|l| !l.starts_with('#')).unwrap();
        assert_eq!(row, "1700000100.000000\teth0\t10.0.0.1\t10.0.0.2\t443\t6\t100\t2\t3000\t3\t1700000100.000001\t1700000100.500000\t1");
        let mut w = FlowLogWriter::new(Vec::new(), LogFormat::Json);
        w.write(&r).unwrap();
        let s = String::from_utf8(w.out).unwrap();
        assert!(
            s.starts_with(
                "{\"bucket\":1700000100.000000,\"iface\":\"eth0\",\"client\":\"10.0.0.1\""
            ),
            "{s}"
        );
        assert!(s.trim_end().ends_with("\"conns\":1}"));
    }
}
