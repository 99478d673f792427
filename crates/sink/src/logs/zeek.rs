use std::io::{self, Write};

use wirelog_record::{ConnRecord, IpAddr16, Proto};

use crate::logs::line::{append, Kept, Room, VALUE_MOST};
use crate::logs::out::TakeLines;
use crate::logs::tx::{LINES_HANDED_AT, LINE_ROOM};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Zeek's tab-separated ASCII logs.
    Tsv,
    /// Zeek-style JSON lines.
    Json,
}

const FIELDS: &[(&str, &str)] = &[
    ("ts", "time"),
    ("uid", "string"),
    ("id.orig_h", "addr"),
    ("id.orig_p", "port"),
    ("id.resp_h", "addr"),
    ("id.resp_p", "port"),
    ("proto", "enum"),
    ("service", "string"),
    ("duration", "interval"),
    ("orig_bytes", "count"),
    ("resp_bytes", "count"),
    ("conn_state", "string"),
    ("local_orig", "bool"),
    ("local_resp", "bool"),
    ("missed_bytes", "count"),
    ("history", "string"),
    ("orig_pkts", "count"),
    ("orig_ip_bytes", "count"),
    ("resp_pkts", "count"),
    ("resp_ip_bytes", "count"),
    ("tunnel_parents", "set[string]"),
    ("ip_proto", "count"),
    ("community_id", "string"),
];

const EMPTY_TCP_FIELD: (&str, &str) = ("empty_tcp_skipped", "bool");

/// The most bytes of fixed-size blocks a conn.log line stores (its
/// `append` budget): each field and the line's end at most
/// [`VALUE_MOST`] (a JSON line stores 55 blocks, none over 16 bytes).
const CONN_BUDGET: usize = (FIELDS.len() + 1) * VALUE_MOST;

/// Writes conn records as they come, in Zeek's conn.log format: each line
/// composed in place at the end of the collected lines ([`append`]), the
/// lines handed to the output together (as the transaction logs do).
pub struct ConnLogWriter<W: TakeLines> {
    out: W,
    format: LogFormat,
    /// Adds the `empty_tcp_skipped` column (capture --skip-empty-tcp); off,
    /// the log has exactly Zeek's columns.
    empty_tcp_note: bool,
    /// Adds the process columns (capture --processes).
    processes: bool,
    header_written: bool,
    line: Vec<u8>,
    rows: u64,
    /// The last line's second and addresses as text.
    kept: Kept,
}

// Records are formatted by hand into a reused buffer: `write!` and Display
// cost more than everything else on the per-connection path.

/// "00" to "99": numbers are written two digits per division.
const DIGIT_PAIRS: [u8; 200] = {
    let mut t = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        t[2 * i] = b'0' + (i / 10) as u8;
        t[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    t
};

/// Writes the decimal digits of `v` so that they end at `tmp[end]`
/// (exclusive); returns where they start.
#[inline]
fn digits_before(tmp: &mut [u8], mut end: usize, mut v: u64) -> usize {
    while v >= 100 {
        let p = (v % 100) as usize * 2;
        v /= 100;
        end -= 2;
        tmp[end..end + 2].copy_from_slice(&DIGIT_PAIRS[p..p + 2]);
    }
    if v >= 10 {
        let p = v as usize * 2;
        end -= 2;
        tmp[end..end + 2].copy_from_slice(&DIGIT_PAIRS[p..p + 2]);
    } else {
        end -= 1;
        tmp[end] = b'0' + v as u8;
    }
    end
}

/// 10^i, for [`decimal_len`] (and line.rs's).
pub(crate) const POW10: [u64; 20] = {
    let mut t = [1u64; 20];
    let mut i = 1;
    while i < 20 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
};

/// How many decimal digits `v` has (1 for 0): from its bit length, one
/// table comparison, no division.
#[inline]
fn decimal_len(v: u64) -> usize {
    let w = v | 1;
    let t = (((64 - w.leading_zeros()) * 1233) >> 12) as usize;
    t + 1 - usize::from(w < POW10[t])
}

/// Appends the first `used` bytes of `chunk`: the chunk is copied whole (a
/// fixed-size copy, a few moves, instead of a `memcpy` call of a variable
/// length), then the line is cut back to what was meant.
#[inline(always)]
pub(crate) fn push_prefix<const N: usize>(buf: &mut Vec<u8>, chunk: &[u8; N], used: usize) {
    let end = buf.len() + used;
    buf.extend_from_slice(chunk);
    buf.truncate(end);
}

/// Appends the decimal digits of `v`.
#[inline]
pub(crate) fn push_u64(buf: &mut Vec<u8>, v: u64) {
    let n = decimal_len(v);
    let mut tmp = [0u8; 20];
    digits_before(&mut tmp, n, v);
    push_prefix(buf, &tmp, n);
}

/// Seconds with six decimals, from nanoseconds, rounded to the microsecond.
/// Composed on the stack, left-aligned, and appended as one fixed-size
/// copy: every record has several.
pub(crate) fn write_secs(buf: &mut Vec<u8>, ns: i64) {
    let us = if ns >= 0 {
        (ns + 500) / 1000
    } else {
        (ns - 500) / 1000
    };
    let abs = us.unsigned_abs();
    let whole = abs / 1_000_000;
    // Sign, at most 13 digits (i64 ns), point, 6 decimals.
    let mut tmp = [0u8; 24];
    let sign = usize::from(us < 0);
    tmp[0] = b'-';
    let dot = sign + decimal_len(whole);
    digits_before(&mut tmp, dot, whole);
    tmp[dot] = b'.';
    let mut f = abs % 1_000_000;
    let mut i = dot + 7;
    for _ in 0..3 {
        let p = (f % 100) as usize * 2;
        f /= 100;
        i -= 2;
        tmp[i..i + 2].copy_from_slice(&DIGIT_PAIRS[p..p + 2]);
    }
    push_prefix(buf, &tmp, dot + 7);
}

pub(crate) fn write_addr(buf: &mut Vec<u8>, a: &IpAddr16) {
    if a.is_v4() {
        // Composed on the stack, appended at once.
        let (t, n) = IpAddr16::v4_text([a.0[12], a.0[13], a.0[14], a.0[15]]);
        push_prefix(buf, &t, n);
    } else {
        let (t, n) = IpAddr16::v6_text(a.0);
        buf.extend_from_slice(&t[..n]);
    }
}

/// Writes a Zeek log's header block (TSV; JSON has none) the first time it
/// is called for a file: `*written` says whether it was. One place for the
/// header of conn.log, flows.log and the transaction logs.
pub(crate) fn zeek_header<'a, W: Write>(
    out: &mut W,
    format: LogFormat,
    written: &mut bool,
    path: &str,
    fields: impl Iterator<Item = &'a (&'static str, &'static str)> + Clone,
) -> io::Result<()> {
    if std::mem::replace(written, true) || format == LogFormat::Json {
        return Ok(());
    }
    let names: Vec<&str> = fields.clone().map(|f| f.0).collect();
    let types: Vec<&str> = fields.map(|f| f.1).collect();
    write!(
        out,
        "#separator \\x09\n#set_separator\t,\n#empty_field\t(empty)\n#unset_field\t-\n#path\t{path}\n#open\t{}\n#fields\t{}\n#types\t{}\n",
        zeek_datetime(now_secs()),
        names.join("\t"),
        types.join("\t")
    )
}

/// Ends a Zeek log: the `#close` line (TSV), then a flush.
pub(crate) fn zeek_close<W: Write>(out: &mut W, format: LogFormat) -> io::Result<()> {
    if format == LogFormat::Tsv {
        writeln!(out, "#close\t{}", zeek_datetime(now_secs()))?;
    }
    out.flush()
}

/// Zeek's `#open`/`#close` timestamp format, in UTC.
pub(crate) fn zeek_datetime(unix_secs: i64) -> String {
    let days = unix_secs.div_euclid(86_400);
    let secs = unix_secs.rem_euclid(86_400);
    let (y, m, d) = wirelog_record::civil::civil_from_days(days);
    format!(
        "{:04}-{:02}-{:02}-{:02}-{:02}-{:02}",
        y,
        m,
        d,
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

pub(crate) fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

impl<W: TakeLines> ConnLogWriter<W> {
    pub fn new(out: W, format: LogFormat) -> Self {
        ConnLogWriter {
            out,
            format,
            empty_tcp_note: false,
            processes: false,
            header_written: false,
            line: Vec::with_capacity(LINES_HANDED_AT + LINE_ROOM),
            rows: 0,
            kept: Kept::default(),
        }
    }

    /// With `--skip-empty-tcp`: every record says whether pure ACKs were
    /// dropped before it was tracked (T for TCP, `-` where it does not apply),
    /// as Zeek logs gain a column when a script adds a field.
    pub fn with_empty_tcp_note(mut self, on: bool) -> Self {
        self.empty_tcp_note = on;
        self
    }

    /// With `capture --processes`: the process, user and container of each
    /// local end, in columns after Zeek's (see `procs`).
    pub fn with_processes(mut self, on: bool) -> Self {
        self.processes = on;
        self
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    fn header(&mut self) -> io::Result<()> {
        let note = self.empty_tcp_note.then_some(EMPTY_TCP_FIELD);
        let procs = if self.processes { crate::logs::procs::FIELDS } else { &[] };
        let fields = FIELDS.iter().chain(note.iter()).chain(procs);
        zeek_header(&mut self.out, self.format, &mut self.header_written, "conn", fields)
    }

    pub fn write(&mut self, r: &ConnRecord) -> io::Result<()> {
        if !self.header_written {
            self.header()?;
        }
        let fitted = match self.format {
            LogFormat::Tsv => self.fill::<false>(r),
            LogFormat::Json => self.fill::<true>(r),
        };
        if !fitted {
            // Not reached: the second pass has the room the first asked for.
            return Err(io::Error::other("conn.log: a line did not fit in its buffer"));
        }
        self.rows += 1;
        // Whole lines handed over together, not one call each.
        if self.line.len() >= LINES_HANDED_AT {
            self.hand_over()?;
        }
        Ok(())
    }

    fn hand_over(&mut self) -> io::Result<()> {
        self.out.hand_over(&mut self.line)
    }

    /// Appends a record's line to the collected lines, every value composed
    /// in place; false if it did not fit (not reached). JSON leaves unset
    /// fields out, as Zeek's JSON writer does.
    fn fill<const JSON: bool>(&mut self, r: &ConnRecord) -> bool {
        let extras = self.empty_tcp_note || self.processes;
        let kept = &mut self.kept;
        let fitted = append(&mut self.line, CONN_BUDGET, |room| {
            // Text that needs no escaping (names, letters, base64), in
            // JSON quoted, after its key (`k`) or a tab.
            fn plain<const JSON: bool>(room: &mut Room<'_>, k: &[u8], s: &[u8]) {
                if JSON {
                    room.lit(k);
                    room.byte(b'"');
                    room.ascii(s);
                    room.byte(b'"');
                } else {
                    room.byte(b'\t');
                    room.ascii(s);
                }
            }
            let count = |room: &mut Room<'_>, k: &[u8], v: Option<u64>| match v {
                Some(v) => {
                    room.lit(if JSON { k } else { b"\t" });
                    room.u64(v);
                }
                None if JSON => {}
                None => room.put(*b"\t-", 2),
            };
            if JSON {
                room.lit(b"{\"ts\":");
            }
            room.time(r.ts_ns, kept);
            let (uid, n) = r.uid.padded();
            if JSON {
                room.lit(b",\"uid\":\"");
                room.put(uid, n);
                room.lit(b"\",\"id.orig_h\":\"");
            } else {
                room.byte(b'\t');
                room.put(uid, n);
                room.byte(b'\t');
            }
            room.addr_kept(&r.orig_h, kept, 0);
            room.sep::<JSON>(b"\",\"id.orig_p\":");
            room.u64(u64::from(r.orig_p));
            room.sep::<JSON>(b",\"id.resp_h\":\"");
            room.addr_kept(&r.resp_h, kept, 1);
            room.sep::<JSON>(b"\",\"id.resp_p\":");
            room.u64(u64::from(r.resp_p));
            plain::<JSON>(room, b",\"proto\":", r.proto.as_str().as_bytes());
            match r.service {
                Some(s) => plain::<JSON>(room, b",\"service\":", s.as_bytes()),
                None if JSON => {}
                None => room.put(*b"\t-", 2),
            }
            match r.duration_ns {
                Some(d) => {
                    room.lit(if JSON { b",\"duration\":" } else { b"\t" });
                    room.secs(d);
                }
                None if JSON => {}
                None => room.put(*b"\t-", 2),
            }
            count(room, b",\"orig_bytes\":", r.orig_bytes);
            count(room, b",\"resp_bytes\":", r.resp_bytes);
            plain::<JSON>(room, b",\"conn_state\":", r.conn_state.as_str().as_bytes());
            if JSON {
                room.lit(if r.local_orig { b",\"local_orig\":true" } else { b",\"local_orig\":false" });
                room.lit(if r.local_resp { b",\"local_resp\":true" } else { b",\"local_resp\":false" });
            } else {
                room.put(if r.local_orig { *b"\tT" } else { *b"\tF" }, 2);
                room.put(if r.local_resp { *b"\tT" } else { *b"\tF" }, 2);
            }
            count(room, b",\"missed_bytes\":", Some(r.missed_bytes));
            if !r.history.is_empty() {
                plain::<JSON>(room, b",\"history\":", r.history.as_bytes());
            } else if !JSON {
                room.put(*b"\t-", 2);
            }
            count(room, b",\"orig_pkts\":", Some(r.orig_pkts));
            count(room, b",\"orig_ip_bytes\":", Some(r.orig_ip_bytes));
            count(room, b",\"resp_pkts\":", Some(r.resp_pkts));
            count(room, b",\"resp_ip_bytes\":", Some(r.resp_ip_bytes));
            if !JSON {
                // tunnel_parents: never set.
                room.put(*b"\t-", 2);
            }
            count(room, b",\"ip_proto\":", Some(u64::from(r.ip_proto)));
            let cid = r.community_id.as_bytes();
            if JSON {
                room.lit(b",\"community_id\":\"");
                room.ascii(cid.get(..16).unwrap_or(cid));
                room.ascii(cid.get(16..).unwrap_or_default());
                room.byte(b'"');
            } else {
                room.byte(b'\t');
                room.ascii(cid.get(..16).unwrap_or(cid));
                room.ascii(cid.get(16..).unwrap_or_default());
            }
            if !extras {
                room.end_line::<JSON>();
            }
        });
        if extras && fitted {
            self.extras::<JSON>(r);
        }
        fitted
    }

    /// The columns after Zeek's, when asked for (`empty_tcp_skipped`, the
    /// processes); then the line's end.
    #[cold]
    fn extras<const JSON: bool>(&mut self, r: &ConnRecord) {
        let b = &mut self.line;
        if self.empty_tcp_note {
            if JSON {
                if r.proto == Proto::Tcp {
                    b.extend_from_slice(if r.empty_tcp_skipped {
                        b",\"empty_tcp_skipped\":true"
                    } else {
                        b",\"empty_tcp_skipped\":false"
                    });
                }
            } else {
                b.extend_from_slice(match (r.proto, r.empty_tcp_skipped) {
                    (Proto::Tcp, true) => b"\tT",
                    (Proto::Tcp, false) => b"\tF",
                    _ => b"\t-",
                });
            }
        }
        if self.processes {
            if JSON {
                crate::logs::procs::json(b, &r.orig_proc, &r.resp_proc);
            } else {
                crate::logs::procs::tsv(b, &r.orig_proc, &r.resp_proc);
            }
        }
        b.extend_from_slice(if JSON { b"}\n" } else { b"\n" });
    }

    /// Writes the `#close` line (TSV) and flushes.
    pub fn finish(&mut self) -> io::Result<()> {
        self.header()?;
        self.hand_over()?;
        zeek_close(&mut self.out, self.format)
    }

    /// The output the lines go to (the lines written so far handed to it).
    pub fn get_mut(&mut self) -> &mut W {
        let _ = self.hand_over();
        &mut self.out
    }

    /// Hands the collected lines to the output and flushes it.
    pub fn flush(&mut self) -> io::Result<()> {
        self.hand_over()?;
        self.out.flush()
    }
}

crate::logs::out::log_sink!(ConnLogWriter, "conn.log", conns);

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use wirelog_record::{ConnState, History, Proto, UidGenerator};

    pub(crate) fn record() -> ConnRecord {
        let mut h = History::new();
        for c in b"ShADadFf" {
            h.push(*c);
        }
        ConnRecord {
            ts_ns: 1_300_000_000_123_456_789,
            uid: UidGenerator::new(1).next_uid(),
            orig_h: IpAddr16::from_v4([10, 0, 0, 1]),
            orig_p: 40000,
            resp_h: IpAddr16(
                "2001:db8::1"
                    .parse::<std::net::Ipv6Addr>()
                    .unwrap()
                    .octets(),
            ),
            resp_p: 80,
            proto: Proto::Tcp,
            service: None,
            duration_ns: Some(60_991_770_000),
            orig_bytes: Some(474),
            resp_bytes: Some(23783),
            conn_state: ConnState::SF,
            local_orig: true,
            local_resp: false,
            missed_bytes: 0,
            history: h,
            orig_pkts: 17,
            orig_ip_bytes: 1250,
            resp_pkts: 22,
            resp_ip_bytes: 28961,
            ip_proto: 6,
            community_id: wirelog_record::community_id_v1(
                &IpAddr16::from_v4([10, 0, 0, 1]),
                &IpAddr16::from_v4([10, 0, 0, 2]),
                6,
                40000,
                80,
            ),
            vlan: None,
            inner_vlan: None,
            empty_tcp_skipped: false,
            orig_proc: None,
            resp_proc: None,
        }
    }

    /// What the writer wrote, its collected lines handed over.
    fn out(mut w: ConnLogWriter<Vec<u8>>) -> String {
        w.flush().unwrap();
        String::from_utf8(w.out).unwrap()
    }

    #[test]
    fn process_columns_follow_zeeks_only_when_asked() {
        let mut r = record();
        r.resp_proc = Some(std::sync::Arc::new(wirelog_record::ProcOwner {
            pid: 4242,
            name: "nginx".into(),
            exe: "/usr/sbin/nginx".into(),
            uid: 33,
            user: "www-data".into(),
            container: "nginx.service".into(),
            pod: String::new(),
        }));
        let mut w = ConnLogWriter::new(Vec::new(), LogFormat::Tsv).with_processes(true);
        w.write(&r).unwrap();
        let text = out(w);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[6].ends_with("\tcommunity_id\torig_pid\torig_proc\torig_exe\torig_user\torig_container\torig_pod\tresp_pid\tresp_proc\tresp_exe\tresp_user\tresp_container\tresp_pod"));
        assert!(lines[8].ends_with("\t-\t-\t-\t-\t-\t-\t4242\tnginx\t/usr/sbin/nginx\twww-data\tnginx.service\t-"), "{}", lines[8]);
        let mut w = ConnLogWriter::new(Vec::new(), LogFormat::Json).with_processes(true);
        w.write(&r).unwrap();
        let text = out(w);
        assert!(text.ends_with(",\"resp_pid\":4242,\"resp_proc\":\"nginx\",\"resp_exe\":\"/usr/sbin/nginx\",\"resp_user\":\"www-data\",\"resp_container\":\"nginx.service\"}\n"), "{text}");
        let mut w = ConnLogWriter::new(Vec::new(), LogFormat::Tsv);
        w.write(&r).unwrap();
        assert!(!out(w).contains("nginx"));
    }

    #[test]
    fn empty_tcp_note_is_a_column_only_when_asked() {
        let mut r = record();
        r.empty_tcp_skipped = true;
        let mut w = ConnLogWriter::new(Vec::new(), LogFormat::Tsv).with_empty_tcp_note(true);
        w.write(&r).unwrap();
        r.proto = Proto::Udp;
        w.write(&r).unwrap();
        let s = out(w);
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines[6].ends_with("\tcommunity_id\tempty_tcp_skipped"));
        assert!(lines[7].ends_with("\tstring\tbool"));
        assert!(lines[8].ends_with("\tT") && lines[9].ends_with("\t-"));
        let mut w = ConnLogWriter::new(Vec::new(), LogFormat::Json).with_empty_tcp_note(true);
        r.proto = Proto::Tcp;
        w.write(&r).unwrap();
        assert!(out(w).ends_with(",\"empty_tcp_skipped\":true}\n"));
        // Without the option, Zeek's columns only, whatever the record says.
        let mut w = ConnLogWriter::new(Vec::new(), LogFormat::Tsv);
        w.write(&r).unwrap();
        assert!(!out(w).contains("empty_tcp"));
    }

    #[test]
    fn tsv_matches_zeek_layout() {
        let mut w = ConnLogWriter::new(Vec::new(), LogFormat::Tsv);
        w.write(&record()).unwrap();
        w.finish().unwrap();
        let s = out(w);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "#separator \\x09");
        assert!(lines[6].starts_with("#fields\tts\tuid\tid.orig_h\tid.orig_p"));
        assert!(lines[7].starts_with("#types\ttime\tstring\taddr\tport"));
        let row: Vec<&str> = lines[8].split('\t').collect();
        assert_eq!(row.len(), FIELDS.len());
        assert_eq!(row[0], "1300000000.123457");
        assert_eq!(row[4], "2001:db8::1");
        assert_eq!(row[7], "-");
        assert_eq!(row[8], "60.991770");
        assert_eq!(row[11], "SF");
        assert_eq!(row[15], "ShADadFf");
        assert!(lines[9].starts_with("#close\t"));
    }

    #[test]
    fn json_omits_unset_fields() {
        let mut r = record();
        r.duration_ns = None;
        r.orig_bytes = None;
        r.resp_bytes = None;
        let mut w = ConnLogWriter::new(Vec::new(), LogFormat::Json);
        w.write(&r).unwrap();
        let s = out(w);
        assert!(s.starts_with("{\"ts\":1300000000.123457,\"uid\":\"C"));
        assert!(!s.contains("duration"));
        assert!(s.contains("\"id.resp_h\":\"2001:db8::1\""));
        assert!(s
            .trim_end()
            .ends_with(&format!("\"community_id\":\"{}\"}}", r.community_id)));
    }

    #[test]
    fn numbers_and_addresses() {
        let mut b = Vec::new();
        let edges = (0..20).flat_map(|k| {
            let p = 10u64.pow(k);
            [p - 1, p, p + 1, p.wrapping_mul(2) - 1]
        });
        for v in [0u64, 7, 9, 10, 99, 100, 101, 1000, 65535, 10u64.pow(19), u64::MAX].into_iter().chain(edges) {
            b.clear();
            b.push(b'x');
            push_u64(&mut b, v);
            assert_eq!(String::from_utf8(b.clone()).unwrap(), format!("x{v}"));
            assert_eq!(decimal_len(v), v.to_string().len(), "{v}");
        }
        for o in 0..=255u8 {
            b.clear();
            write_addr(&mut b, &IpAddr16::from_v4([o, 255 - o, o / 3, 9]));
            assert_eq!(String::from_utf8(b.clone()).unwrap(), std::net::Ipv4Addr::new(o, 255 - o, o / 3, 9).to_string());
        }
        for (ns, want) in [
            (0, "0.000000"),
            (1_500, "0.000002"),
            (60_991_770_000, "60.991770"),
            (-1_000, "-0.000001"),
        ] {
            b.clear();
            write_secs(&mut b, ns);
            assert_eq!(String::from_utf8(b.clone()).unwrap(), want);
        }
        b.clear();
        write_addr(&mut b, &IpAddr16::from_v4([192, 168, 0, 1]));
        assert_eq!(b, b"192.168.0.1");
    }

    #[test]
    fn zeek_dates() {
        assert_eq!(zeek_datetime(0), "1970-01-01-00-00-00");
        assert_eq!(zeek_datetime(1_700_000_000), "2023-11-14-22-13-20");
    }

    #[test]
    fn secs_and_v4_addresses_match_std_formatting() {
        for ns in [
            0i64,
            499,
            500,
            -499,
            -500,
            -1_500_000_000,
            999_999_999,
            1_795_335_577_286_776_123,
            i64::MAX - 1000,
            i64::MIN + 1000,
        ] {
            let us = if ns >= 0 {
                (ns + 500) / 1000
            } else {
                (ns - 500) / 1000
            };
            let sign = if us < 0 { "-" } else { "" };
            let (a, f) = (us.unsigned_abs() / 1_000_000, us.unsigned_abs() % 1_000_000);
            let mut b = Vec::new();
            write_secs(&mut b, ns);
            assert_eq!(
                String::from_utf8(b).unwrap(),
                format!("{sign}{a}.{f:06}"),
                "{ns}"
            );
        }
        for o in [
            [0, 0, 0, 0],
            [1, 9, 10, 99],
            [100, 199, 200, 255],
            [127, 0, 0, 1],
        ] {
            let mut b = Vec::new();
            write_addr(&mut b, &IpAddr16::from_v4(o));
            assert_eq!(
                String::from_utf8(b).unwrap(),
                std::net::Ipv4Addr::from(o).to_string()
            );
        }
    }

    /// The line writers as they were before lines were composed in place
    /// (one `Vec` push per value): the reference the room writer is
    /// compared with.
    fn tsv_reference(b: &mut Vec<u8>, r: &ConnRecord, empty_tcp_note: bool, processes: bool) {
        let opt = |b: &mut Vec<u8>, v: Option<u64>| match v {
            Some(v) => push_u64(b, v),
            None => b.push(b'-'),
        };
        write_secs(b, r.ts_ns);
        b.push(b'\t');
        b.extend_from_slice(r.uid.as_bytes());
        b.push(b'\t');
        write_addr(b, &r.orig_h);
        b.push(b'\t');
        push_u64(b, r.orig_p as u64);
        b.push(b'\t');
        write_addr(b, &r.resp_h);
        b.push(b'\t');
        push_u64(b, r.resp_p as u64);
        b.push(b'\t');
        b.extend_from_slice(r.proto.as_str().as_bytes());
        b.push(b'\t');
        b.extend_from_slice(r.service.unwrap_or("-").as_bytes());
        b.push(b'\t');
        match r.duration_ns {
            Some(d) => write_secs(b, d),
            None => b.push(b'-'),
        }
        b.push(b'\t');
        opt(b, r.orig_bytes);
        b.push(b'\t');
        opt(b, r.resp_bytes);
        b.push(b'\t');
        b.extend_from_slice(r.conn_state.as_str().as_bytes());
        b.extend_from_slice(if r.local_orig { b"\tT" } else { b"\tF" });
        b.extend_from_slice(if r.local_resp { b"\tT\t" } else { b"\tF\t" });
        push_u64(b, r.missed_bytes);
        b.push(b'\t');
        if r.history.is_empty() {
            b.push(b'-');
        } else {
            b.extend_from_slice(r.history.as_bytes());
        }
        for v in [r.orig_pkts, r.orig_ip_bytes, r.resp_pkts, r.resp_ip_bytes] {
            b.push(b'\t');
            push_u64(b, v);
        }
        b.extend_from_slice(b"\t-\t");
        push_u64(b, r.ip_proto as u64);
        b.push(b'\t');
        b.extend_from_slice(r.community_id.as_bytes());
        if empty_tcp_note {
            b.extend_from_slice(match (r.proto, r.empty_tcp_skipped) {
                (Proto::Tcp, true) => b"\tT",
                (Proto::Tcp, false) => b"\tF",
                _ => b"\t-",
            });
        }
        if processes {
            crate::logs::procs::tsv(b, &r.orig_proc, &r.resp_proc);
        }
        b.push(b'\n');
    }

    fn json_reference(b: &mut Vec<u8>, r: &ConnRecord, empty_tcp_note: bool, processes: bool) {
        let num = |b: &mut Vec<u8>, key: &[u8], v: u64| {
            b.extend_from_slice(key);
            push_u64(b, v);
        };
        b.extend_from_slice(b"{\"ts\":");
        write_secs(b, r.ts_ns);
        b.extend_from_slice(b",\"uid\":\"");
        b.extend_from_slice(r.uid.as_bytes());
        b.extend_from_slice(b"\",\"id.orig_h\":\"");
        write_addr(b, &r.orig_h);
        num(b, b"\",\"id.orig_p\":", r.orig_p as u64);
        b.extend_from_slice(b",\"id.resp_h\":\"");
        write_addr(b, &r.resp_h);
        num(b, b"\",\"id.resp_p\":", r.resp_p as u64);
        b.extend_from_slice(b",\"proto\":\"");
        b.extend_from_slice(r.proto.as_str().as_bytes());
        b.push(b'"');
        if let Some(s) = r.service {
            b.extend_from_slice(b",\"service\":\"");
            b.extend_from_slice(s.as_bytes());
            b.push(b'"');
        }
        if let Some(d) = r.duration_ns {
            b.extend_from_slice(b",\"duration\":");
            write_secs(b, d);
        }
        if let Some(v) = r.orig_bytes {
            num(b, b",\"orig_bytes\":", v);
        }
        if let Some(v) = r.resp_bytes {
            num(b, b",\"resp_bytes\":", v);
        }
        b.extend_from_slice(b",\"conn_state\":\"");
        b.extend_from_slice(r.conn_state.as_str().as_bytes());
        b.extend_from_slice(if r.local_orig {
            b"\",\"local_orig\":true"
        } else {
            b"\",\"local_orig\":false"
        });
        b.extend_from_slice(if r.local_resp {
            b",\"local_resp\":true"
        } else {
            b",\"local_resp\":false"
        });
        num(b, b",\"missed_bytes\":", r.missed_bytes);
        if !r.history.is_empty() {
            b.extend_from_slice(b",\"history\":\"");
            b.extend_from_slice(r.history.as_bytes());
            b.push(b'"');
        }
        num(b, b",\"orig_pkts\":", r.orig_pkts);
        num(b, b",\"orig_ip_bytes\":", r.orig_ip_bytes);
        num(b, b",\"resp_pkts\":", r.resp_pkts);
        num(b, b",\"resp_ip_bytes\":", r.resp_ip_bytes);
        num(b, b",\"ip_proto\":", r.ip_proto as u64);
        b.extend_from_slice(b",\"community_id\":\"");
        b.extend_from_slice(r.community_id.as_bytes());
        b.push(b'"');
        if empty_tcp_note && r.proto == Proto::Tcp {
            b.extend_from_slice(if r.empty_tcp_skipped {
                b",\"empty_tcp_skipped\":true"
            } else {
                b",\"empty_tcp_skipped\":false"
            });
        }
        if processes {
            crate::logs::procs::json(b, &r.orig_proc, &r.resp_proc);
        }
        b.extend_from_slice(b"}\n");
    }


    /// Records with every kind of value (v4 and v6 ends, unset and set
    /// counts, every state, empty and long histories, pending community
    /// ids, numbers of every length), with and without the extra columns:
    /// the lines the room writer composes are the reference's, byte for
    /// byte, also across hand-overs.
    #[test]
    fn lines_as_the_reference_writes_them() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let states = [ConnState::S0, ConnState::SF, ConnState::REJ, ConnState::RSTOS0, ConnState::OTH, ConnState::SHR];
        let services = [None, Some("http"), Some("ssl,http"), Some("mysql")];
        let mut records = Vec::new();
        for i in 0..3000u64 {
            let mut r = record();
            let v = next();
            r.ts_ns = (v >> (v % 64)) as i64;
            r.orig_h = if v % 3 == 0 { IpAddr16([v as u8; 16]) } else { IpAddr16::from_v4((v as u32).to_le_bytes()) };
            r.resp_h = if v % 5 == 0 { IpAddr16([(v >> 8) as u8; 16]) } else { IpAddr16::from_v4(((v >> 32) as u32).to_le_bytes()) };
            r.orig_p = v as u16;
            r.resp_p = (v >> 16) as u16;
            r.proto = [Proto::Tcp, Proto::Udp, Proto::Icmp][(v % 3) as usize];
            r.service = services[(v % 4) as usize];
            r.duration_ns = (v % 7 != 0).then(|| (next() >> (v % 64)) as i64);
            r.orig_bytes = (v % 11 != 0).then(|| next() >> (next() % 64));
            r.resp_bytes = (v % 13 != 0).then(|| next() >> (next() % 64));
            r.conn_state = states[(v % 6) as usize];
            r.local_orig = v & 1 == 0;
            r.local_resp = v & 2 == 0;
            r.missed_bytes = next() >> (next() % 64);
            let mut h = History::new();
            for c in b"ShADadFfTtWwGgCcIiQqRr".iter().take((v % 23) as usize) {
                h.push(*c);
            }
            r.history = h;
            r.orig_pkts = next() >> (next() % 64);
            r.orig_ip_bytes = next() >> (next() % 64);
            r.resp_pkts = i;
            r.resp_ip_bytes = next();
            r.ip_proto = v as u8;
            if v % 17 == 0 {
                r.community_id = wirelog_record::CommunityId::PENDING;
            }
            r.empty_tcp_skipped = v & 4 == 0;
            records.push(r);
        }
        for format in [LogFormat::Tsv, LogFormat::Json] {
            for (note, procs) in [(false, false), (true, false), (false, true), (true, true)] {
                let mut want = Vec::new();
                for r in &records {
                    match format {
                        LogFormat::Tsv => tsv_reference(&mut want, r, note, procs),
                        LogFormat::Json => json_reference(&mut want, r, note, procs),
                    }
                }
                let mut w = ConnLogWriter::new(Vec::new(), format).with_empty_tcp_note(note).with_processes(procs);
                w.header_written = true;
                for r in &records {
                    w.write(r).unwrap();
                }
                let got = out(w);
                let want = String::from_utf8(want).unwrap();
                for (g, w) in got.lines().zip(want.lines()) {
                    assert_eq!(g, w, "{format:?} {note} {procs}");
                }
                assert_eq!(got, want, "{format:?} {note} {procs}");
            }
        }
    }

}
