//! [`CaptureReader`]: picks the byte source and the record parser for a file,
//! then walks records, turning parser faults into [`Problem`] entries.

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use memmap2::Mmap;

use crate::error::{io_message, OpenError, OpenErrorKind};
use crate::format::{Endian, Meta, Parser, Resume, Step};
use crate::input::{Mapped, Source, Stream, DEFAULT_BUF};
use crate::pcap::{self, Pcap};
use crate::pcapng::{self, Pcapng};
use crate::problem::{Fault, Problems};
use crate::{FileFormat, Interface, Packet, Problem, ProblemKind};

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

// One per reader, so the size of the mapped variant does not matter.
#[allow(clippy::large_enum_variant)]
enum Input {
    Mapped(Mapped),
    Stream(Stream),
}

/// Reads one capture file (pcap or pcapng, optionally gzip-compressed) and hands
/// out its packets one at a time, borrowed from its buffer.
///
/// Regular uncompressed files are memory-mapped and walked in place; gzip files,
/// pipes and stdin go through one reusable buffer.
pub struct CaptureReader {
    name: String,
    input: Input,
    parser: Parser,
    problems: Problems,
    packets: u64,
    total_len: Option<u64>,
    done: bool,
}

impl CaptureReader {
    /// Opens a capture file; `-` means stdin. The format is detected from the
    /// magic: pcap (micro- or nanosecond, either byte order), pcapng, or either
    /// of them inside gzip.
    pub fn open(path: &Path) -> Result<CaptureReader, OpenError> {
        if path.as_os_str() == "-" {
            return CaptureReader::from_reader("stdin", Box::new(io::stdin()));
        }
        let name = path.display().to_string();
        let file = File::open(path).map_err(|e| OpenError::io(&name, OpenErrorKind::Io, e))?;
        let meta = file
            .metadata()
            .map_err(|e| OpenError::io(&name, OpenErrorKind::Io, e))?;
        if meta.is_dir() {
            return Err(OpenError::new(
                &name,
                OpenErrorKind::Io,
                "is a directory".into(),
            ));
        }
        if !meta.is_file() {
            // FIFOs, character devices, process substitution: cannot be mapped.
            return CaptureReader::from_stream(name, Box::new(file), None, DEFAULT_BUF);
        }
        let len = meta.len();
        if len == 0 {
            return Err(OpenError::new(
                &name,
                OpenErrorKind::Empty,
                "empty file".into(),
            ));
        }
        // SAFETY: the map is only read. If another process truncates or rewrites the
        // file while we read it, we may see changed bytes (which the parsers treat
        // like any other input) or get SIGBUS on truncation; every mmap-based
        // capture reader accepts this for the speed of walking records in place.
        let map = match unsafe { Mmap::map(&file) } {
            Ok(m) => m,
            // Some filesystems refuse mmap; reading still works.
            Err(_) => {
                return CaptureReader::from_stream(name, Box::new(file), Some(len), DEFAULT_BUF)
            }
        };
        if map.starts_with(&GZIP_MAGIC) {
            drop(map);
            return CaptureReader::from_stream(name, Box::new(file), Some(len), DEFAULT_BUF);
        }
        let (parser, header_len) = detect(&name, &map, false)?;
        let mut input = Mapped::new(map);
        input.consume(header_len);
        Ok(CaptureReader::build(
            name,
            Input::Mapped(input),
            parser,
            Some(len),
        ))
    }

    /// Same as [`open`](Self::open) for any reader (stdin, tests); `name` is used in messages.
    pub fn from_reader(name: &str, r: Box<dyn Read + Send>) -> Result<CaptureReader, OpenError> {
        CaptureReader::from_stream(name.to_owned(), r, None, DEFAULT_BUF)
    }

    pub(crate) fn from_stream(
        name: String,
        r: Box<dyn Read + Send>,
        total_len: Option<u64>,
        buf_size: usize,
    ) -> Result<CaptureReader, OpenError> {
        let mut s = Stream::new(r, buf_size);
        s.fill(pcap::FILE_HEADER_LEN)
            .map_err(|e| OpenError::io(&name, OpenErrorKind::Io, e))?;
        if s.window().starts_with(&GZIP_MAGIC) {
            s = s.into_gzip();
            s.fill(pcap::FILE_HEADER_LEN).map_err(|e| {
                let msg = format!("gzip decompression failed: {}", io_message(&e));
                OpenError::new(&name, OpenErrorKind::Decompression, msg)
            })?;
        }
        let (parser, header_len) = detect(&name, s.window(), s.is_gzip())?;
        s.consume(header_len);
        Ok(CaptureReader::build(
            name,
            Input::Stream(s),
            parser,
            total_len,
        ))
    }

    fn build(name: String, input: Input, parser: Parser, total_len: Option<u64>) -> CaptureReader {
        CaptureReader {
            name,
            input,
            parser,
            problems: Problems::default(),
            packets: 0,
            total_len,
            done: false,
        }
    }

    /// The next packet, or `None` at the end of input or at a problem that ends
    /// the read (recorded in [`problems`](Self::problems)). The packet borrows
    /// the reader's buffer until the next call.
    #[inline]
    pub fn next_packet(&mut self) -> Option<Packet<'_>> {
        if self.done {
            return None;
        }
        let found = match &mut self.input {
            Input::Mapped(m) => walk(m, &mut self.parser, &mut self.problems, false),
            Input::Stream(s) => {
                let gzip = s.is_gzip();
                walk(s, &mut self.parser, &mut self.problems, gzip)
            }
        };
        let bytes = match &self.input {
            Input::Mapped(m) => m.bytes(),
            Input::Stream(s) => s.bytes(),
        };
        let Some((meta, data)) =
            found.and_then(|(at, m)| Some((m, bytes.get(at..at.checked_add(m.data_len)?)?)))
        else {
            self.done = true;
            return None;
        };
        self.packets += 1;
        Some(Packet {
            ts_ns: meta.ts_ns,
            wire_len: meta.wire_len,
            linktype: meta.linktype,
            if_id: meta.if_id,
            vlan_tci: None,
            checksum: crate::KernelChecksum::Unknown,
            data,
        })
    }

    /// The name given at open: the path as displayed, `stdin`, or the `from_reader` name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Packets yielded so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Bytes consumed of the file as stored (compressed bytes for gzip; for
    /// streams, what has been read ahead), for a progress bar.
    pub fn position(&self) -> u64 {
        match &self.input {
            Input::Mapped(m) => m.position(),
            Input::Stream(s) => s.position(),
        }
    }

    /// Size of the file as stored, when known (not for stdin or pipes).
    pub fn total_len(&self) -> Option<u64> {
        self.total_len
    }

    /// One entry per kind of problem seen so far.
    pub fn problems(&self) -> &[Problem] {
        self.problems.as_slice()
    }

    pub fn format(&self) -> FileFormat {
        match &self.parser {
            Parser::Pcap(p) => FileFormat::Pcap {
                nanosecond: p.nanos(),
                big_endian: p.endian() == Endian::Big,
            },
            Parser::Pcapng(_) => FileFormat::Pcapng,
        }
    }

    /// Whether the file was gzip-compressed.
    pub fn is_gzip(&self) -> bool {
        matches!(&self.input, Input::Stream(s) if s.is_gzip())
    }

    /// Interfaces declared so far, indexed by `Packet::if_id`: the file header
    /// for pcap, every IDB of every section read so far for pcapng.
    pub fn interfaces(&self) -> &[Interface] {
        self.parser.interfaces()
    }

    #[cfg(test)]
    pub(crate) fn stream_buf_len(&self) -> Option<usize> {
        match &self.input {
            Input::Mapped(_) => None,
            Input::Stream(s) => Some(s.buf_len()),
        }
    }
}

impl fmt::Debug for CaptureReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaptureReader")
            .field("name", &self.name)
            .field("format", &self.format())
            .field("gzip", &self.is_gzip())
            .field("packets", &self.packets)
            .field("position", &self.position())
            .field("problems", &self.problems())
            .finish_non_exhaustive()
    }
}

/// Advances to the next packet: `(index of its data in src.bytes(), header)`.
/// Each iteration consumes bytes, grows the window or returns, so it ends.
#[inline]
fn walk<S: Source>(
    src: &mut S,
    parser: &mut Parser,
    problems: &mut Problems,
    gzip: bool,
) -> Option<(usize, Meta)> {
    loop {
        let w = src.window();
        let eof = src.eof();
        if w.is_empty() && eof {
            return None;
        }
        match parser.step(w, eof) {
            Step::Packet(m) => {
                let at = src.window_start() + m.data_off;
                src.consume(m.consumed);
                return Some((at, m));
            }
            Step::Skip(n) if n > 0 => src.consume(n),
            Step::Need(n) if n > w.len() => {
                if eof {
                    let f = Fault::Truncated {
                        have: w.len(),
                        need: n,
                        unit: parser.unit(),
                    };
                    problems.record(f.kind(), src.offset(), &f);
                    return None;
                }
                let at = src.offset() + w.len() as u64;
                if let Err(e) = src.fill(n) {
                    record_read_error(problems, at, &e, gzip);
                }
            }
            Step::Fault(f, resume) => {
                problems.record(f.kind(), src.offset(), &f);
                match resume {
                    Resume::Skip(n) if n > 0 => src.consume(n),
                    _ => return None,
                }
            }
            // A parser asking to skip nothing or for bytes it already has would
            // loop forever; end the file instead.
            Step::Skip(_) | Step::Need(_) => {
                debug_assert!(false, "parser made no progress");
                return None;
            }
        }
    }
}

#[cold]
fn record_read_error(problems: &mut Problems, at: u64, e: &io::Error, gzip: bool) {
    use io::ErrorKind::{InvalidData, InvalidInput, UnexpectedEof};
    let kind = if gzip && matches!(e.kind(), InvalidData | InvalidInput | UnexpectedEof) {
        ProblemKind::Decompression
    } else {
        ProblemKind::Io
    };
    problems.record(kind, at, &io_message(e));
}

/// The parser for a file from its first bytes, and how many of them are a
/// file header to skip.
fn detect(name: &str, head: &[u8], gzip: bool) -> Result<(Parser, usize), OpenError> {
    let inside = if gzip {
        " after gzip decompression"
    } else {
        ""
    };
    let Some(magic) = head.first_chunk::<4>() else {
        return Err(if head.is_empty() {
            OpenError::new(name, OpenErrorKind::Empty, format!("empty file{inside}"))
        } else {
            let msg = format!(
                "too short to be a capture file ({} bytes{inside})",
                head.len()
            );
            OpenError::new(name, OpenErrorKind::UnknownFormat, msg)
        });
    };
    if pcap::magic(*magic).is_some() {
        let parser = head
            .first_chunk::<{ pcap::FILE_HEADER_LEN }>()
            .and_then(Pcap::from_header);
        return match parser {
            Some(p) => Ok((Parser::Pcap(p), pcap::FILE_HEADER_LEN)),
            None => Err(OpenError::new(
                name,
                OpenErrorKind::TruncatedHeader,
                format!(
                    "truncated pcap file header ({} of 24 bytes{inside})",
                    head.len()
                ),
            )),
        };
    }
    if *magic == pcapng::SHB_MAGIC {
        let Some(bom) = head.get(8..12) else {
            return Err(OpenError::new(
                name,
                OpenErrorKind::TruncatedHeader,
                format!(
                    "truncated pcapng section header ({} bytes{inside})",
                    head.len()
                ),
            ));
        };
        let bom: [u8; 4] = bom.try_into().unwrap_or_default();
        if pcapng::byte_order(bom).is_none() {
            return Err(OpenError::new(
                name,
                OpenErrorKind::BadHeader,
                format!(
                    "pcapng section header has bad byte-order magic 0x{:08x}",
                    u32::from_be_bytes(bom)
                ),
            ));
        }
        return Ok((Parser::Pcapng(Pcapng::new()), 0));
    }
    Err(OpenError::new(
        name,
        OpenErrorKind::UnknownFormat,
        format!(
            "not a pcap or pcapng file{inside} (magic 0x{:08x})",
            u32::from_be_bytes(*magic)
        ),
    ))
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::path::PathBuf;

    use flate2::write::GzEncoder;
    use flate2::Compression;

    use super::*;
    use crate::pcapng::tests::Builder;
    use crate::testutil::{
        days_from_civil, drain, manifest, records, testdata, Summary, TempDir, Trickle,
    };
    use crate::LinkType;

    fn open(p: &Path) -> CaptureReader {
        CaptureReader::open(p).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The same bytes through the streaming path, in awkward small reads.
    fn stream(name: &str, data: Vec<u8>, chunk: usize) -> CaptureReader {
        CaptureReader::from_reader(name, Box::new(Trickle::new(data, chunk)))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// Every capture listed in both manifests: (path, expected packets, linktypes or empty).
    fn all_captures() -> Vec<(PathBuf, u64, Vec<u32>)> {
        let mut out = Vec::new();
        for e in manifest("linktypes/manifest.json").arr() {
            let lts = e
                .get("idb_or_header_linktypes")
                .arr()
                .iter()
                .filter_map(|l| l.u64());
            out.push((
                testdata().join("linktypes").join(e.get("file").str()),
                e.get("packets").u64().unwrap(),
                lts.map(|l| l as u32).collect(),
            ));
        }
        for case in manifest("zeek/manifest.json").arr() {
            for p in case.get("pcaps").arr() {
                let lts = if p.get("encap").str() == "ether" {
                    vec![1]
                } else {
                    vec![]
                };
                out.push((
                    testdata()
                        .join("zeek")
                        .join(case.get("case").str())
                        .join(p.get("file").str()),
                    p.get("packets").u64().unwrap(),
                    lts,
                ));
            }
        }
        assert!(out.len() > 40, "manifests list only {} captures", out.len());
        out
    }

    #[test]
    fn reader_is_send() {
        fn send<T: Send>() {}
        send::<CaptureReader>();
    }

    #[test]
    fn manifest_packet_counts_mapped_and_streamed() {
        for (path, packets, linktypes) in all_captures() {
            let mut r = open(&path);
            let name = path.display().to_string();
            let gz = name.ends_with(".gz");
            assert_eq!(r.is_gzip(), gz, "{name}");
            assert_eq!(r.total_len(), Some(std::fs::metadata(&path).unwrap().len()));
            let mut seen_linktypes = Vec::new();
            while let Some(p) = r.next_packet() {
                let (if_id, linktype) = (p.if_id, p.linktype);
                // Every packet's link type is its interface's.
                let iface = &r.interfaces()[if_id as usize];
                assert_eq!(iface.if_id, if_id);
                assert_eq!(iface.linktype, linktype, "{name}");
                if !seen_linktypes.contains(&linktype.0) {
                    seen_linktypes.push(linktype.0);
                }
            }
            assert_eq!(r.packets(), packets, "{name}");
            assert!(r.problems().is_empty(), "{name}: {:?}", r.problems());
            assert_eq!(
                r.position(),
                r.total_len().unwrap(),
                "{name}: position at end"
            );
            // Declared link types: exactly the manifest's (pcap header or IDBs).
            if !linktypes.is_empty() {
                let mut declared: Vec<u32> = r.interfaces().iter().map(|i| i.linktype.0).collect();
                declared.sort();
                declared.dedup();
                let mut want = linktypes.clone();
                want.sort();
                if name.contains("/zeek/") {
                    // "ether" only says what the packets are.
                    assert_eq!(seen_linktypes, want, "{name}");
                } else {
                    assert_eq!(declared, want, "{name}");
                }
            }
            // Mapped and streamed reads agree packet for packet.
            let mapped = drain(&mut open(&path));
            let data = std::fs::read(&path).unwrap();
            let streamed = drain(&mut stream(&name, data, 4093));
            assert_eq!(mapped, streamed, "{name}");
        }
    }

    /// `(days since epoch if printed, nanoseconds into the day, fraction digits)`
    /// of each packet line of a tcpdump `.out` file.
    fn tcpdump_times(out: &str) -> Vec<(Option<i64>, i64, u32)> {
        let mut v = Vec::new();
        for line in out.lines() {
            let mut it = line.split_whitespace();
            let (Some(num), Some(mut t)) = (it.next(), it.next()) else {
                continue;
            };
            if !line.starts_with(' ') || num.parse::<u64>().is_err() {
                continue;
            }
            let mut days = None;
            if t.contains('-') {
                let ymd: Vec<i64> = t.split('-').map(|x| x.parse().unwrap()).collect();
                days = Some(days_from_civil(ymd[0], ymd[1], ymd[2]));
                t = it.next().unwrap();
            }
            let (hms, frac) = t.split_once('.').unwrap();
            let hms: Vec<i64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
            let digits = frac.len() as u32;
            let ns = (hms[0] * 3600 + hms[1] * 60 + hms[2]) * 1_000_000_000
                + frac.parse::<i64>().unwrap() * 10i64.pow(9 - digits);
            v.push((days, ns, digits));
        }
        v
    }

    #[test]
    fn timestamps_match_tcpdump_output() {
        let mut checked = 0;
        for e in manifest("linktypes/manifest.json").arr() {
            let file = e.get("file").str();
            for exp in e.get("expected").arr().iter().map(|x| x.str()) {
                if !exp.ends_with(".out") {
                    continue;
                }
                let dir = testdata().join("linktypes");
                let want = tcpdump_times(&std::fs::read_to_string(dir.join(exp)).unwrap());
                let mut r = open(&dir.join(file));
                let mut got = Vec::new();
                while let Some(p) = r.next_packet() {
                    got.push(p.ts_ns);
                }
                assert_eq!(got.len(), want.len(), "{exp}");
                for (ts, (days, ns, digits)) in got.iter().zip(&want) {
                    // tcpdump truncates to the digits it prints.
                    let unit = 10i64.pow(9 - digits);
                    let ts = ts - ts.rem_euclid(unit);
                    match days {
                        Some(d) => assert_eq!(ts, d * 86_400_000_000_000 + ns, "{exp}"),
                        None => assert_eq!(ts.rem_euclid(86_400_000_000_000), *ns, "{exp}"),
                    }
                }
                checked += 1;
            }
        }
        assert!(checked >= 8, "only {checked} tcpdump outputs checked");
    }

    #[test]
    fn nanosecond_pcap_keeps_nanoseconds() {
        let path = testdata().join("linktypes/tcpdump_tcp_handshake_nano_sll.pcap");
        let mut r = open(&path);
        assert_eq!(
            r.format(),
            FileFormat::Pcap {
                nanosecond: true,
                big_endian: false
            }
        );
        assert_eq!(r.interfaces()[0].tsresol, 9);
        let mut sub_micro = 0;
        while let Some(p) = r.next_packet() {
            assert_eq!(p.linktype, LinkType::LINUX_SLL);
            sub_micro += (p.ts_ns % 1000 != 0) as u32;
        }
        assert_eq!(sub_micro, 3);
        let r = open(&testdata().join("linktypes/tcpdump_pptp_bigendian.pcap"));
        assert_eq!(
            r.format(),
            FileFormat::Pcap {
                nanosecond: false,
                big_endian: true
            }
        );
    }

    /// Block counts from a pcapng-test-generator description file.
    fn block_counts(txt: &str) -> Vec<(String, u64)> {
        let mut v = Vec::new();
        let mut in_counts = false;
        for line in txt.lines() {
            if line.starts_with("Block counts:") {
                in_counts = true;
            } else if in_counts {
                match line.trim().split_once(':') {
                    Some((k, n)) if line.starts_with('\t') => {
                        v.push((k.to_string(), n.trim().parse().unwrap()))
                    }
                    _ => in_counts = false,
                }
            }
        }
        v
    }

    #[test]
    fn pcapng_generator_files_match_their_descriptions() {
        let dir = testdata().join("linktypes");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            if !(name.starts_with("pcapnggen_") && name.ends_with(".txt")) {
                continue;
            }
            let counts = block_counts(&std::fs::read_to_string(&path).unwrap());
            let count = |k: &str| counts.iter().find(|(n, _)| n == k).map_or(0, |c| c.1);
            let mut r = open(&path.with_extension("pcapng"));
            let s = drain(&mut r);
            assert!(s.problems.is_empty(), "{name}");
            assert_eq!(s.count, count("EPB") + count("SPB") + count("PB"), "{name}");
            assert_eq!(r.interfaces().len() as u64, count("IDB"), "{name}");
            n += 1;
        }
        assert!(n >= 3);
    }

    #[test]
    fn two_linktypes_same_in_both_byte_orders() {
        let dir = testdata().join("linktypes");
        let le = dir.join("pcapnggen_test006_le_two_linktypes.pcapng");
        let be = dir.join("pcapnggen_test006_be_two_linktypes.pcapng");
        assert_eq!(drain(&mut open(&le)), drain(&mut open(&be)));
        let mut r = open(&be);
        let mut ids = Vec::new();
        while let Some(p) = r.next_packet() {
            ids.push((p.if_id, p.linktype.0));
        }
        let lts: Vec<u32> = r.interfaces().iter().map(|i| i.linktype.0).collect();
        // Independently: the link types of the IDBs, in order, from the raw bytes.
        let raw = std::fs::read(&be).unwrap();
        let (_, recs) = records(&raw);
        let mut start = 0;
        let mut want = Vec::new();
        for rec in &recs {
            if rec.btype == 1 {
                want.push(u32::from(u16::from_be_bytes([
                    raw[start + 8],
                    raw[start + 9],
                ])));
            }
            start = rec.end;
        }
        assert_eq!(lts, want);
        assert!(ids.iter().any(|&(i, _)| i == 0) && ids.iter().any(|&(i, _)| i == 1));
    }

    #[test]
    fn spb_packets_get_interface_zero_and_last_timestamp() {
        let path = testdata().join("linktypes/pcapnggen_test011_spb_epb_mix.pcapng");
        let raw = std::fs::read(&path).unwrap();
        let (_, recs) = records(&raw);
        let types: Vec<u32> = recs
            .iter()
            .filter(|r| r.is_packet)
            .map(|r| r.btype)
            .collect();
        let mut r = open(&path);
        let (mut last_epb_ts, mut i) = (0, 0);
        while let Some(p) = r.next_packet() {
            assert_eq!(p.if_id, 0);
            if types[i] == 3 {
                assert_eq!(p.ts_ns, last_epb_ts);
            } else {
                last_epb_ts = p.ts_ns;
            }
            i += 1;
        }
        assert_eq!(i, types.len());
        assert!(types.contains(&3) && types.contains(&6));
    }

    #[test]
    fn pcapng_126_interfaces() {
        let path = testdata().join("linktypes/zeek_pcapng_126_interfaces.pcapng");
        let raw = std::fs::read(&path).unwrap();
        let (_, recs) = records(&raw);
        // Independently: the IDB link types and the EPB interface ids.
        let (mut idb_lts, mut epb_ifs, mut start) = (Vec::new(), Vec::new(), 0);
        for rec in &recs {
            match rec.btype {
                1 => idb_lts.push(u32::from(u16::from_le_bytes([
                    raw[start + 8],
                    raw[start + 9],
                ]))),
                6 => epb_ifs.push(u32::from_le_bytes(
                    raw[start + 8..start + 12].try_into().unwrap(),
                )),
                _ => {}
            }
            start = rec.end;
        }
        assert!(idb_lts.len() > 100);
        let mut r = open(&path);
        let mut ifs = Vec::new();
        while let Some(p) = r.next_packet() {
            // The manifest note: every packet is Ethernet, whatever its interface.
            assert_eq!(p.linktype, LinkType::ETHERNET);
            ifs.push(p.if_id);
        }
        assert_eq!(ifs, epb_ifs);
        let lts: Vec<u32> = r.interfaces().iter().map(|i| i.linktype.0).collect();
        assert_eq!(lts, idb_lts);
        for (i, iface) in r.interfaces().iter().enumerate() {
            assert_eq!((iface.if_id as usize, iface.section), (i, 0));
        }
    }

    #[test]
    fn pcapng_per_interface_resolution() {
        let path = testdata().join("zeek/pcapng_multi_interface/pcapng-multi-interface.pcapng");
        let mut r = open(&path);
        let mut pkts = Vec::new();
        while let Some(p) = r.next_packet() {
            pkts.push((p.if_id, p.ts_ns));
        }
        let ifs = r.interfaces();
        assert_eq!(ifs.len(), 2);
        assert_ne!(ifs[0].tsresol, ifs[1].tsresol, "the file mixes resolutions");
        for (if_id, ts) in pkts {
            // Right scale for both: within this decade.
            let (y2020, y2030) = (
                1_577_836_800i64 * 1_000_000_000,
                1_893_456_000i64 * 1_000_000_000,
            );
            assert!((y2020..y2030).contains(&ts), "{ts}");
            if ifs[if_id as usize].tsresol == 9 {
                assert_ne!(ts % 1000, 0, "nanoseconds kept");
            } else {
                assert_eq!(ts % 1000, 0);
            }
        }
    }

    #[test]
    fn multi_section_ids_keep_counting() {
        let dir = testdata().join("linktypes");
        let le = std::fs::read(dir.join("pcapnggen_test006_le_two_linktypes.pcapng")).unwrap();
        let be = std::fs::read(dir.join("pcapnggen_test006_be_two_linktypes.pcapng")).unwrap();
        let tmp = TempDir::new();
        let path = tmp.write("two-sections.pcapng", &[le.clone(), be].concat());
        let mut single = open(&dir.join("pcapnggen_test006_le_two_linktypes.pcapng"));
        let mut first = Vec::new();
        while let Some(p) = single.next_packet() {
            first.push((p.ts_ns, p.if_id, p.linktype, p.data.to_vec()));
        }
        for mut r in [open(&path), stream("two", std::fs::read(&path).unwrap(), 7)] {
            let mut got = Vec::new();
            while let Some(p) = r.next_packet() {
                got.push((p.ts_ns, p.if_id, p.linktype, p.data.to_vec()));
            }
            assert!(r.problems().is_empty());
            assert_eq!(got.len(), 2 * first.len());
            assert_eq!(&got[..first.len()], &first[..]);
            for (a, b) in first.iter().zip(&got[first.len()..]) {
                assert_eq!((a.0, a.1 + 2, a.2, &a.3), (b.0, b.1, b.2, &b.3));
            }
            let secs: Vec<_> = r
                .interfaces()
                .iter()
                .map(|i| (i.if_id, i.section))
                .collect();
            assert_eq!(secs, [(0, 0), (1, 0), (2, 1), (3, 1)]);
        }
    }

    #[test]
    fn gzip_equals_uncompressed() {
        let tmp = TempDir::new();
        let dir = testdata().join("linktypes");
        for f in [
            "tcpdump_pptp_bigendian.pcap",
            "tcpdump_tcp_handshake_nano_sll.pcap",
            "zeek_pcapng_126_interfaces.pcapng",
            "pcapnggen_test006_be_two_linktypes.pcapng",
        ] {
            let raw = std::fs::read(dir.join(f)).unwrap();
            let gz = tmp.write(&format!("{f}.gz"), &gzip(&raw));
            let mut r = open(&gz);
            assert!(r.is_gzip());
            let s = drain(&mut r);
            assert_eq!(s, drain(&mut open(&dir.join(f))), "{f}");
            assert_eq!(
                r.position(),
                r.total_len().unwrap(),
                "{f}: compressed bytes consumed"
            );
            // Concatenated members decompress as one stream, like zcat does.
            let two = tmp.write("two.gz", &[gzip(&raw[..100]), gzip(&raw[100..])].concat());
            assert_eq!(drain(&mut open(&two)), s, "{f}");
            // And gzip on stdin.
            assert_eq!(
                drain(&mut stream("stdin", std::fs::read(&gz).unwrap(), 333)),
                s
            );
        }
    }

    #[test]
    fn large_gzip_capture_equals_its_decompression() {
        let gz = testdata().join("zeek/echo_connections_large/echo-connections.pcap.gz");
        let mut r = open(&gz);
        let s = drain(&mut r);
        let want = manifest("zeek/manifest.json")
            .arr()
            .iter()
            .flat_map(|c| c.get("pcaps").arr())
            .find(|p| p.get("file").str() == "echo-connections.pcap.gz")
            .and_then(|p| p.get("packets").u64())
            .unwrap();
        assert_eq!(s.count, want);
        assert!(s.problems.is_empty());
        let mut raw = Vec::new();
        flate2::read::MultiGzDecoder::new(std::fs::File::open(&gz).unwrap())
            .read_to_end(&mut raw)
            .unwrap();
        // Larger than the stream buffer, so this also covers refills and compaction.
        assert!(raw.len() > 4 * DEFAULT_BUF);
        let tmp = TempDir::new();
        let mapped = drain(&mut open(&tmp.write("echo.pcap", &raw)));
        assert_eq!(s, mapped);
        // The independent walk agrees on the count, and the first/last timestamps
        // are the first and last record headers'.
        let (_, recs) = records(&raw);
        assert_eq!(recs.len() as u64, want);
        let ts = |off: usize| {
            let sec = u32::from_le_bytes(raw[off..off + 4].try_into().unwrap());
            let usec = u32::from_le_bytes(raw[off + 4..off + 8].try_into().unwrap());
            i64::from(sec) * 1_000_000_000 + i64::from(usec) * 1000
        };
        let last_start = recs[recs.len() - 2].end;
        assert_eq!(
            (s.first_ts, s.last_ts),
            (Some(ts(24)), Some(ts(last_start)))
        );
    }

    #[test]
    fn stdin_style_reader() {
        let path = testdata().join("linktypes/zeek_ppp_quic_interop_retry.pcap");
        let data = std::fs::read(&path).unwrap();
        let want = drain(&mut open(&path));
        for chunk in [1, 3, 64, 100_000] {
            let mut r = stream("stdin", data.clone(), chunk);
            assert_eq!(r.name(), "stdin");
            assert_eq!(r.total_len(), None);
            assert_eq!(drain(&mut r), want);
            assert_eq!(r.position(), data.len() as u64);
        }
        // A tiny buffer forces growth and compaction on every record.
        let mut r =
            CaptureReader::from_stream("s".into(), Box::new(Trickle::new(data, 5)), None, 64)
                .unwrap();
        assert_eq!(drain(&mut r), want);
    }

    fn open_err(p: &Path) -> OpenError {
        CaptureReader::open(p).map(|_| ()).unwrap_err()
    }

    #[test]
    fn open_errors_name_the_file_and_the_cause() {
        let tmp = TempDir::new();
        let e = open_err(&tmp.0.join("missing.pcap"));
        assert_eq!(e.kind(), OpenErrorKind::Io);
        assert!(
            e.to_string()
                .ends_with("missing.pcap: No such file or directory"),
            "{e}"
        );
        let e = open_err(&tmp.write("empty.pcap", b""));
        assert_eq!(e.kind(), OpenErrorKind::Empty);
        assert!(e.to_string().ends_with("empty.pcap: empty file"), "{e}");
        let e = open_err(&tmp.write(
            "garbage.pcap",
            b"\x12\x34\x56\x78 hello world, not a capture",
        ));
        assert_eq!(e.kind(), OpenErrorKind::UnknownFormat);
        assert!(e
            .to_string()
            .ends_with("garbage.pcap: not a pcap or pcapng file (magic 0x12345678)"));
        let e = open_err(&tmp.write("short.pcap", b"\xd4\xc3"));
        assert!(e.to_string().contains("too short"), "{e}");
        let e = open_err(&tmp.write("hdr.pcap", b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00"));
        assert_eq!(e.kind(), OpenErrorKind::TruncatedHeader);
        assert!(
            e.to_string()
                .contains("truncated pcap file header (8 of 24 bytes)"),
            "{e}"
        );
        let e = open_err(&tmp.write(
            "bom.pcapng",
            b"\x0a\x0d\x0d\x0a\x1c\x00\x00\x00\x00\x00\x00\x00",
        ));
        assert_eq!(e.kind(), OpenErrorKind::BadHeader);
        let e = open_err(&tmp.0);
        assert!(e.to_string().contains("is a directory"), "{e}");
        let e = open_err(&tmp.write("empty.gz", &gzip(b"")));
        assert_eq!(e.kind(), OpenErrorKind::Empty);
        assert!(
            e.to_string()
                .contains("empty file after gzip decompression"),
            "{e}"
        );
        let e = open_err(&tmp.write("text.gz", &gzip(b"just some text, long enough")));
        assert!(e
            .to_string()
            .contains("not a pcap or pcapng file after gzip decompression"));
        let e = open_err(&tmp.write("bad.gz", b"\x1f\x8b\x08\x00garbage garbage garbage garbage"));
        assert_eq!(e.kind(), OpenErrorKind::Decompression);
        assert!(e
            .to_string()
            .starts_with(&format!("{}: gzip", tmp.0.join("bad.gz").display())));
        let e = CaptureReader::from_reader("stdin", Box::new(std::io::empty())).unwrap_err();
        assert_eq!(e.to_string(), "stdin: empty file");
    }

    /// Cuts a capture at every byte offset and reads each prefix, mapped and
    /// streamed: never a panic, exactly the packets wholly before the cut, and
    /// `Truncated` exactly when the cut is inside a record.
    fn check_every_truncation(path: &Path) {
        let raw = std::fs::read(path).unwrap();
        let (header, recs) = records(&raw);
        let tmp = TempDir::new();
        let file = tmp.0.join("cut");
        for k in 0..raw.len() {
            let cut = &raw[..k];
            std::fs::write(&file, cut).unwrap();
            let mapped = CaptureReader::open(&file);
            let streamed =
                CaptureReader::from_reader("cut", Box::new(Trickle::new(cut.to_vec(), 5)));
            let min_open = if header == 24 { 24 } else { 12 };
            if k < min_open {
                let e = mapped.map(|_| ()).unwrap_err();
                assert!(e.to_string().starts_with(&file.display().to_string()));
                assert!(streamed.is_err());
                continue;
            }
            let at_boundary = k == header || recs.iter().any(|r| r.end == k);
            let whole = recs.iter().filter(|r| r.is_packet && r.end <= k).count() as u64;
            for r in [mapped, streamed] {
                let mut r = r.unwrap_or_else(|e| panic!("cut at {k}: {e}"));
                let s = drain(&mut r);
                assert_eq!(s.count, whole, "{}: cut at {k}", path.display());
                if at_boundary {
                    assert!(s.problems.is_empty(), "cut at {k}: {:?}", r.problems());
                } else {
                    assert_eq!(s.problems, [ProblemKind::Truncated], "cut at {k}");
                    // Reported at the start of the record the input ends in.
                    let start = recs
                        .iter()
                        .map(|r| r.end)
                        .filter(|&e| e < k)
                        .max()
                        .unwrap_or(header);
                    assert_eq!(r.problems()[0].first_offset, start as u64, "cut at {k}");
                }
            }
        }
    }

    #[test]
    fn truncated_at_every_offset_pcap() {
        check_every_truncation(&testdata().join("linktypes/tcpdump_tcp_handshake_nano_sll.pcap"));
        check_every_truncation(&testdata().join("linktypes/zeek_linux_dlt_sll2.pcap"));
    }

    #[test]
    fn truncated_at_every_offset_pcapng() {
        check_every_truncation(
            &testdata().join("linktypes/pcapnggen_test006_be_two_linktypes.pcapng"),
        );
        check_every_truncation(&testdata().join("linktypes/pcapnggen_test011_spb_epb_mix.pcapng"));
    }

    /// Reads `data` streamed and, if `mapped`, also mapped (they must agree);
    /// checks the reader ends with a sane packet count.
    fn survive(data: &[u8], tmp: &TempDir, mapped: bool) -> Option<Summary> {
        let limit = (data.len() / 12 + 1) as u64;
        let mut out = None;
        if let Ok(mut r) =
            CaptureReader::from_reader("fuzz", Box::new(Trickle::new(data.to_vec(), 11)))
        {
            let s = drain(&mut r);
            assert!(s.count <= limit);
            out = Some(s);
        }
        if !mapped {
            return out;
        }
        let p = tmp.write("fuzz", data);
        if let Ok(mut r) = CaptureReader::open(&p) {
            let s = drain(&mut r);
            assert_eq!(Some(&s), out.as_ref(), "mapped and streamed differ");
        }
        out
    }

    #[test]
    fn flipped_bytes_never_panic() {
        let tmp = TempDir::new();
        for f in [
            "linktypes/tcpdump_tcp_handshake_nano_sll.pcap",
            "linktypes/pcapnggen_test006_le_two_linktypes.pcapng",
            "linktypes/pcapnggen_test011_spb_epb_mix.pcapng",
        ] {
            let raw = std::fs::read(testdata().join(f)).unwrap();
            for i in 0..raw.len() {
                for (n, v) in [raw[i] ^ 0xff, 0x00, 0x7f, raw[i] ^ 0x04]
                    .into_iter()
                    .enumerate()
                {
                    let mut d = raw.clone();
                    d[i] = v;
                    // Writing a file per case is the slow part: map only some.
                    survive(&d, &tmp, n == 0);
                }
            }
        }
    }

    #[test]
    fn random_garbage_never_panics() {
        let tmp = TempDir::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let heads: [&[u8]; 5] = [
            b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00\0\0\0\0\0\0\0\0\xff\xff\0\0\x01\0\0\0",
            b"\xa1\xb2\x3c\x4d\x00\x02\x00\x04\0\0\0\0\0\0\0\0\0\0\0\x60\0\0\0\x01",
            b"\x0a\x0d\x0d\x0a\x1c\0\0\0\x4d\x3c\x2b\x1a\x01\0\0\0\xff\xff\xff\xff\xff\xff\xff\xff\x1c\0\0\0",
            b"\x0a\x0d\x0d\x0a\0\0\0\x1c\x1a\x2b\x3c\x4d\0\x01\0\0\xff\xff\xff\xff\xff\xff\xff\xff\0\0\0\x1c",
            b"\x1f\x8b",
        ];
        for i in 0..600 {
            let head = heads[i % heads.len()];
            let len = (rnd() % 400) as usize;
            let mut d = head.to_vec();
            // Small values make plausible lengths and types far more often than uniform bytes.
            d.extend((0..len).map(|_| {
                if rnd() % 3 == 0 {
                    (rnd() % 8) as u8
                } else {
                    rnd() as u8
                }
            }));
            survive(&d, &tmp, true);
        }
    }

    #[test]
    fn lying_pcap_lengths() {
        let raw = std::fs::read(testdata().join("linktypes/zeek_linux_dlt_sll2.pcap")).unwrap();
        let (_, recs) = records(&raw);
        let second = recs[0].end;
        for (caplen, kind) in [
            (0xffff_fff0u32, ProblemKind::OversizedPacket),
            (200_000, ProblemKind::Truncated),
        ] {
            let mut d = raw.clone();
            d[second + 8..second + 12].copy_from_slice(&caplen.to_le_bytes());
            let mut r = CaptureReader::from_stream(
                "lie".into(),
                Box::new(Trickle::new(d.clone(), 64)),
                None,
                256,
            )
            .unwrap();
            let s = drain(&mut r);
            assert_eq!(s.count, 1);
            assert_eq!(s.problems, [kind]);
            assert_eq!(r.problems()[0].first_offset, second as u64);
            assert!(
                r.problems()[0].detail.contains(&caplen.to_string())
                    || kind == ProblemKind::Truncated
            );
            // The buffer grew only with data that exists.
            assert!(
                r.stream_buf_len().unwrap() <= 4 * d.len(),
                "{:?}",
                r.stream_buf_len()
            );
        }
    }

    #[test]
    fn lying_pcapng_lengths() {
        let mut b = Builder::new(false);
        b.shb().idb(1, 0, &[]).epb(0, 1, 60, &[1; 60]);
        let epb_at = b.out.len();
        b.epb(0, 2, 60, &[2; 60]).epb(0, 3, 60, &[3; 60]);
        // Absurd length: reported, then the next block is found again.
        let mut d = b.out.clone();
        d[epb_at + 4..epb_at + 8].copy_from_slice(&0x7fff_fff0u32.to_le_bytes());
        let mut r =
            CaptureReader::from_stream("lie".into(), Box::new(Trickle::new(d, 9)), None, 64)
                .unwrap();
        let s = drain(&mut r);
        assert_eq!((s.count, s.problems), (2, vec![ProblemKind::CorruptBlock]));
        assert_eq!(r.problems()[0].first_offset, epb_at as u64);
        assert!(
            r.problems()[0].detail.contains("exceeds limit"),
            "{}",
            r.problems()[0].detail
        );
        // Plausible but beyond the end: the file looks cut, and the buffer stays small.
        let mut d = b.out.clone();
        d[epb_at + 4..epb_at + 8].copy_from_slice(&(30u32 << 20).to_le_bytes());
        let n = d.len();
        let mut r =
            CaptureReader::from_stream("lie".into(), Box::new(Trickle::new(d, 9)), None, 64)
                .unwrap();
        let s = drain(&mut r);
        assert_eq!((s.count, s.problems), (1, vec![ProblemKind::Truncated]));
        assert!(r.stream_buf_len().unwrap() <= 4 * n);
    }

    #[test]
    fn bad_blocks_through_the_reader() {
        let mut b = Builder::new(true);
        b.shb().idb(1, 0, &[]).epb(0, 1, 4, &[0; 4]);
        let unknown_at = b.out.len() as u64;
        b.epb(5, 2, 4, &[0; 4])
            .epb(7, 2, 4, &[0; 4])
            .epb(0, 3, 4, &[0; 4]);
        let trailer_at = b.out.len();
        b.epb(0, 4, 4, &[0; 4]).epb(0, 5, 4, &[0; 4]);
        let mut d = b.out.clone();
        let n = trailer_at + 36;
        d[n - 4..n].copy_from_slice(&99u32.to_be_bytes());
        let tmp = TempDir::new();
        let p = tmp.write("bad.pcapng", &d);
        for mut r in [open(&p), stream("bad", d.clone(), 3)] {
            let s = drain(&mut r);
            assert_eq!(s.count, 3, "{:?}", r.problems());
            let pr = r.problems();
            assert_eq!(pr[0].kind, ProblemKind::UnknownInterface);
            assert_eq!((pr[0].count, pr[0].first_offset), (2, unknown_at));
            assert_eq!(
                pr[0].detail,
                "enhanced packet block on interface 5, but the section declares 1 interface(s)"
            );
            assert_eq!(pr[1].kind, ProblemKind::CorruptBlock);
            assert_eq!(pr[1].first_offset, trailer_at as u64);
        }
    }

    #[test]
    fn read_and_gzip_errors_are_recorded() {
        struct FailAfter(Vec<u8>, usize);
        impl Read for FailAfter {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if self.1 >= self.0.len() {
                    return Err(io::Error::other("disk on fire"));
                }
                let n = buf.len().min(self.0.len() - self.1).min(100);
                buf[..n].copy_from_slice(&self.0[self.1..self.1 + n]);
                self.1 += n;
                Ok(n)
            }
        }
        let raw = std::fs::read(testdata().join("linktypes/tcpdump_pptp_bigendian.pcap")).unwrap();
        let half = raw[..raw.len() / 2].to_vec();
        let mut r = CaptureReader::from_reader("io", Box::new(FailAfter(half, 0))).unwrap();
        let s = drain(&mut r);
        assert!(s.count > 0);
        assert_eq!(s.problems[0], ProblemKind::Io);
        assert_eq!(r.problems()[0].detail, "disk on fire");

        // A damaged deflate stream after a good member: the second member's
        // first block has the reserved block type.
        let good = gzip(&raw);
        let bad = [&good[..], b"\x1f\x8b\x08\x00\0\0\0\0\0\xff\x07\0\0\0"].concat();
        let mut r = stream("bad.gz", bad, 4096);
        let s = drain(&mut r);
        assert_eq!(s.count, records(&raw).1.len() as u64);
        assert_eq!(
            s.problems,
            [ProblemKind::Decompression],
            "{:?}",
            r.problems()
        );
        assert_eq!(r.problems()[0].first_offset, raw.len() as u64);
        // Flipped compressed bytes: some problem, never a panic.
        let big = std::fs::read(testdata().join("zeek/http_no_crlf/no_crlf.pcap")).unwrap();
        let mut gz = gzip(&big);
        let mid = gz.len() / 2;
        for b in &mut gz[mid..mid + 64] {
            *b ^= 0x5a;
        }
        let mut r = stream("flipped.gz", gz.clone(), 4096);
        let s = drain(&mut r);
        assert!(!s.problems.is_empty());
        // A cut gzip file.
        let mut r = stream("cut.gz", gz[..mid].to_vec(), 4096);
        let s = drain(&mut r);
        assert!(!s.problems.is_empty());
        assert!(s.count > 0);
    }
}
