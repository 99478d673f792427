//! pcapng: a sequence of self-describing blocks, `type, total length, body,
//! total length`, grouped in sections that each start with a section header
//! (SHB) fixing the byte order and resetting the interface table.
//!
//! Interfaces get ids that are unique in the whole file (the running count of
//! IDBs), so a caller reading several sections never confuses section 2's
//! interface 0 with section 1's.
//!
//! A block whose length fields cannot be trusted makes the parser scan forward
//! byte by byte for the next block that looks whole (known type, sane length,
//! matching trailer), so one damaged block does not lose the rest of the file.

use crate::format::{bytes, Endian, Meta, Resume, Step, TsConv};
use crate::problem::Fault;
use crate::{Interface, LinkType};

pub(crate) const SHB: u32 = 0x0A0D_0D0A;
const IDB: u32 = 1;
/// Obsolete Packet Block, still written by old tools.
const PB: u32 = 2;
const SPB: u32 = 3;
const NRB: u32 = 4;
const ISB: u32 = 5;
const EPB: u32 = 6;

pub(crate) const SHB_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

/// The largest block we will buffer: room for a 16 MiB packet plus options.
/// Anything longer is a damaged length field, not a packet.
pub(crate) const MAX_BLOCK_LEN: u32 = 32 * 1024 * 1024;

/// Each IDB costs the input 20 bytes but us a table entry; bound the table so a
/// file of nothing but IDBs cannot make us hold several times its size.
const MAX_INTERFACES: usize = 1 << 20;

/// Default `if_tsresol`: microseconds.
const DEFAULT_TSRESOL: u8 = 6;

const OPT_END: u16 = 0;
const OPT_IF_TSRESOL: u16 = 9;
const OPT_IF_TSOFFSET: u16 = 14;

/// Byte order of a section from its byte-order magic (0x1A2B3C4D as written).
pub(crate) fn byte_order(bom: [u8; 4]) -> Option<Endian> {
    match bom {
        [0x4d, 0x3c, 0x2b, 0x1a] => Some(Endian::Little),
        [0x1a, 0x2b, 0x3c, 0x4d] => Some(Endian::Big),
        _ => None,
    }
}

/// Smallest total length a block of this type can have.
fn min_len(btype: u32) -> u32 {
    match btype {
        SHB => 28,
        IDB => 20,
        SPB => 16,
        EPB | PB => 32,
        _ => 12,
    }
}

/// Is there a whole, believable block at the start of `b`?
enum Verdict {
    Yes,
    No,
    /// Cannot tell until `b` holds this many bytes.
    NeedMore(usize),
}

#[derive(Debug)]
pub(crate) struct Pcapng {
    endian: Endian,
    /// Every interface seen in the file; the current section's are `[section_base..]`.
    ifaces: Vec<Interface>,
    section_base: usize,
    section: u32,
    sections_seen: u32,
    /// SPBs carry no timestamp; they get the last one seen.
    last_ts: i64,
    /// Scanning for the next plausible block after a damaged one.
    resync: bool,
}

impl Pcapng {
    /// Expects the first block to be a section header (the caller checked the magic).
    pub(crate) fn new() -> Pcapng {
        Pcapng {
            endian: Endian::Little,
            ifaces: Vec::new(),
            section_base: 0,
            section: 0,
            sections_seen: 0,
            last_ts: 0,
            resync: false,
        }
    }

    pub(crate) fn interfaces(&self) -> &[Interface] {
        &self.ifaces
    }

    /// One block from the start of `w`.
    #[inline]
    pub(crate) fn step(&mut self, w: &[u8], eof: bool) -> Step {
        // Fast path: a whole, well-formed EPB, by far the most common block.
        // Everything else, including every check that fails, goes the slow way.
        if let (false, Some(h)) = (self.resync, w.first_chunk::<8>()) {
            let e = self.endian;
            let len = e.u32(bytes(h, 4));
            if e.u32(bytes(h, 0)) == EPB && len & 3 == 0 && (32..=MAX_BLOCK_LEN).contains(&len) {
                if let Some(block) = w.get(..len as usize) {
                    if e.u32(bytes(block, len as usize - 4)) == len {
                        let if_id = e.u32(bytes(block, 8));
                        return self.packet(block, EPB, if_id, 28);
                    }
                }
            }
        }
        self.step_slow(w, eof)
    }

    #[inline(never)]
    fn step_slow(&mut self, w: &[u8], eof: bool) -> Step {
        if self.resync {
            if let Some(step) = self.resync_scan(w, eof) {
                return step;
            }
        }
        let Some(h) = w.first_chunk::<8>() else {
            return Step::Need(8);
        };
        // The SHB type is a byte palindrome, so it is recognised before the byte
        // order is known; its own byte-order magic then decides how to read it.
        if bytes::<4>(h, 0) == SHB_MAGIC {
            return self.section_header(w);
        }
        let e = self.endian;
        let btype = e.u32(bytes(h, 0));
        let len = e.u32(bytes(h, 4));
        if len & 3 != 0 || len < 12 {
            return self.lost(Fault::BlockLen { btype, len });
        }
        if len > MAX_BLOCK_LEN {
            return self.lost(Fault::BlockTooLong {
                btype,
                len,
                max: MAX_BLOCK_LEN,
            });
        }
        let total = len as usize;
        let Some(block) = w.get(..total) else {
            return Step::Need(total);
        };
        let trailer = e.u32(bytes(block, total - 4));
        if trailer != len {
            return self.lost(Fault::BlockTrailer {
                btype,
                len,
                trailer,
            });
        }
        let min = min_len(btype);
        if len < min {
            return Step::Fault(
                Fault::BlockTooShort { btype, len, min },
                Resume::Skip(total),
            );
        }
        match btype {
            EPB => {
                let if_id = e.u32(bytes(block, 8));
                self.packet(block, EPB, if_id, 28)
            }
            SPB => self.simple_packet(block),
            IDB => self.interface(block),
            PB => {
                let if_id = u32::from(e.u16(bytes(block, 8)));
                self.packet(block, PB, if_id, 28)
            }
            _ => Step::Skip(total),
        }
    }

    /// The block's extent is unknown: report, then look for the next block from
    /// the following byte on.
    #[cold]
    fn lost(&mut self, f: Fault) -> Step {
        self.resync = true;
        Step::Fault(f, Resume::Skip(1))
    }

    fn section_header(&mut self, w: &[u8]) -> Step {
        let Some(h) = w.first_chunk::<12>() else {
            return Step::Need(12);
        };
        let Some(e) = byte_order(bytes(h, 8)) else {
            return self.lost(Fault::ByteOrderMagic {
                bom: u32::from_be_bytes(bytes(h, 8)),
            });
        };
        let len = e.u32(bytes(h, 4));
        if len & 3 != 0 || len < 12 {
            return self.lost(Fault::BlockLen { btype: SHB, len });
        }
        if len > MAX_BLOCK_LEN {
            return self.lost(Fault::BlockTooLong {
                btype: SHB,
                len,
                max: MAX_BLOCK_LEN,
            });
        }
        let total = len as usize;
        let Some(block) = w.get(..total) else {
            return Step::Need(total);
        };
        let trailer = e.u32(bytes(block, total - 4));
        if trailer != len {
            return self.lost(Fault::BlockTrailer {
                btype: SHB,
                len,
                trailer,
            });
        }
        if len < min_len(SHB) {
            let min = min_len(SHB);
            return Step::Fault(
                Fault::BlockTooShort {
                    btype: SHB,
                    len,
                    min,
                },
                Resume::Skip(total),
            );
        }
        let major = e.u16(bytes(block, 12));
        let minor = e.u16(bytes(block, 14));
        if major != 1 {
            return Step::Fault(Fault::Version { major, minor }, Resume::Stop);
        }
        self.endian = e;
        self.section_base = self.ifaces.len();
        self.section = self.sections_seen;
        self.sections_seen = self.sections_seen.saturating_add(1);
        Step::Skip(total)
    }

    fn interface(&mut self, b: &[u8]) -> Step {
        let e = self.endian;
        if self.ifaces.len() >= MAX_INTERFACES {
            // Packets on it will show up as UnknownInterface, which says enough.
            return Step::Skip(b.len());
        }
        let linktype = LinkType(u32::from(e.u16(bytes(b, 8))));
        let snaplen = e.u32(bytes(b, 12));
        let mut tsresol = DEFAULT_TSRESOL;
        let mut ts_offset_s = 0i64;
        let opts = b.get(16..b.len() - 4).unwrap_or(&[]);
        let mut i = 0usize;
        // Options are read best effort: a damaged one ends the list, not the block.
        while let Some(o) = opts.get(i..i + 4) {
            let code = e.u16(bytes(o, 0));
            let olen = usize::from(e.u16(bytes(o, 2)));
            i += 4;
            if code == OPT_END {
                break;
            }
            let Some(val) = opts.get(i..i + olen) else {
                break;
            };
            match (code, olen) {
                (OPT_IF_TSRESOL, 1) => tsresol = val[0],
                (OPT_IF_TSOFFSET, 8) => ts_offset_s = e.u64(bytes(val, 0)) as i64,
                _ => {}
            }
            i += (olen + 3) & !3;
        }
        self.ifaces.push(Interface {
            if_id: self.ifaces.len() as u32,
            section: self.section,
            linktype,
            snaplen,
            tsresol,
            ts_offset_s,
            conv: TsConv::from_tsresol(tsresol),
            offset_ns: ts_offset_s.wrapping_mul(1_000_000_000),
        });
        Step::Skip(b.len())
    }

    /// The current section's interface `if_id`, or the fault to report.
    #[inline]
    fn iface(&self, btype: u32, if_id: u32) -> Result<&Interface, Fault> {
        let section = self.ifaces.get(self.section_base..).unwrap_or(&[]);
        section.get(if_id as usize).ok_or(Fault::UnknownInterface {
            btype,
            if_id,
            declared: section.len() as u32,
        })
    }

    /// EPB and obsolete PB: the same layout after the interface id.
    #[inline]
    fn packet(&mut self, b: &[u8], btype: u32, if_id: u32, data_off: usize) -> Step {
        let e = self.endian;
        let total = b.len();
        let units = u64::from(e.u32(bytes(b, 12))) << 32 | u64::from(e.u32(bytes(b, 16)));
        let caplen = e.u32(bytes(b, 20));
        let orig_len = e.u32(bytes(b, 24));
        let room = (total - data_off - 4) as u32;
        if caplen > room {
            return Step::Fault(
                Fault::CaplenExceedsBlock {
                    btype,
                    caplen,
                    room,
                },
                Resume::Skip(total),
            );
        }
        let iface = match self.iface(btype, if_id) {
            Ok(i) => i,
            Err(f) => return Step::Fault(f, Resume::Skip(total)),
        };
        let ts_ns = iface.conv.to_ns(units).wrapping_add(iface.offset_ns);
        let meta = Meta {
            consumed: total,
            data_off,
            data_len: caplen as usize,
            ts_ns,
            wire_len: orig_len.max(caplen),
            linktype: iface.linktype,
            if_id: iface.if_id,
        };
        self.last_ts = ts_ns;
        Step::Packet(meta)
    }

    #[inline]
    fn simple_packet(&mut self, b: &[u8]) -> Step {
        let total = b.len();
        let orig_len = self.endian.u32(bytes(b, 8));
        let iface = match self.iface(SPB, 0) {
            Ok(i) => i,
            Err(f) => return Step::Fault(f, Resume::Skip(total)),
        };
        // The block does not say how much was captured: the spec's rule is the
        // smallest of the original length, the snaplen and the room in the block.
        let mut caplen = orig_len.min((total - 16) as u32);
        if iface.snaplen != 0 {
            caplen = caplen.min(iface.snaplen);
        }
        Step::Packet(Meta {
            consumed: total,
            data_off: 12,
            data_len: caplen as usize,
            ts_ns: self.last_ts,
            wire_len: orig_len,
            linktype: iface.linktype,
            if_id: iface.if_id,
        })
    }

    /// Skips bytes until a plausible block starts the window. `None`: it does,
    /// parse it; `Some(step)`: return that step.
    #[cold]
    fn resync_scan(&mut self, w: &[u8], eof: bool) -> Option<Step> {
        for i in 0..w.len() {
            match self.plausible(&w[i..], eof) {
                Verdict::Yes if i == 0 => {
                    self.resync = false;
                    return None;
                }
                Verdict::Yes => return Some(Step::Skip(i)),
                Verdict::No => {}
                Verdict::NeedMore(_) if i > 0 => return Some(Step::Skip(i)),
                Verdict::NeedMore(n) => return Some(Step::Need(n)),
            }
        }
        Some(if w.is_empty() {
            Step::Need(4)
        } else {
            Step::Skip(w.len())
        })
    }

    fn plausible(&self, b: &[u8], eof: bool) -> Verdict {
        let more = |n: usize| {
            if eof {
                Verdict::No
            } else {
                Verdict::NeedMore(n)
            }
        };
        // Decide with as few bytes as possible: most positions fail on the type.
        let Some(t) = b.first_chunk::<4>() else {
            return more(4);
        };
        let (e, btype) = if *t == SHB_MAGIC {
            let Some(bom) = b.get(8..12) else {
                return more(12);
            };
            match byte_order(bytes(bom, 0)) {
                Some(e) => (e, SHB),
                None => return Verdict::No,
            }
        } else {
            let btype = self.endian.u32(*t);
            if !matches!(btype, IDB | PB | SPB | NRB | ISB | EPB) {
                return Verdict::No;
            }
            (self.endian, btype)
        };
        let Some(l) = b.get(4..8) else {
            return more(8);
        };
        let len = e.u32(bytes(l, 0));
        if len & 3 != 0 || len < min_len(btype) || len > MAX_BLOCK_LEN {
            return Verdict::No;
        }
        let total = len as usize;
        if b.len() < total {
            return more(total);
        }
        if e.u32(bytes(b, total - 4)) == len {
            Verdict::Yes
        } else {
            Verdict::No
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds pcapng blocks for tests, in either byte order.
    pub(crate) struct Builder {
        pub be: bool,
        pub out: Vec<u8>,
    }

    impl Builder {
        pub fn new(be: bool) -> Builder {
            Builder {
                be,
                out: Vec::new(),
            }
        }
        fn u32b(&self, v: u32) -> [u8; 4] {
            if self.be {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        }
        fn u16b(&self, v: u16) -> [u8; 2] {
            if self.be {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        }
        pub fn block(&mut self, btype: u32, body: &[u8]) -> &mut Self {
            let pad = (4 - body.len() % 4) % 4;
            let len = (12 + body.len() + pad) as u32;
            let (t, l) = (self.u32b(btype), self.u32b(len));
            self.out.extend_from_slice(&t);
            self.out.extend_from_slice(&l);
            self.out.extend_from_slice(body);
            self.out.resize(self.out.len() + pad, 0);
            self.out.extend_from_slice(&l);
            self
        }
        pub fn shb(&mut self) -> &mut Self {
            let mut body = Vec::new();
            body.extend_from_slice(&self.u32b(0x1A2B_3C4D));
            body.extend_from_slice(&self.u16b(1));
            body.extend_from_slice(&self.u16b(0));
            body.extend_from_slice(&[0xff; 8]);
            self.block(SHB, &body)
        }
        /// `opts`: (code, value) pairs.
        pub fn idb(&mut self, linktype: u16, snaplen: u32, opts: &[(u16, &[u8])]) -> &mut Self {
            let mut body = Vec::new();
            body.extend_from_slice(&self.u16b(linktype));
            body.extend_from_slice(&[0, 0]);
            body.extend_from_slice(&self.u32b(snaplen));
            if !opts.is_empty() {
                for (code, v) in opts {
                    body.extend_from_slice(&self.u16b(*code));
                    body.extend_from_slice(&self.u16b(v.len() as u16));
                    body.extend_from_slice(v);
                    body.resize(body.len() + (4 - v.len() % 4) % 4, 0);
                }
                body.extend_from_slice(&[0, 0, 0, 0]);
            }
            self.block(IDB, &body)
        }
        pub fn epb(&mut self, if_id: u32, ts: u64, orig: u32, data: &[u8]) -> &mut Self {
            let mut body = Vec::new();
            for v in [if_id, (ts >> 32) as u32, ts as u32, data.len() as u32, orig] {
                body.extend_from_slice(&self.u32b(v));
            }
            body.extend_from_slice(data);
            self.block(EPB, &body)
        }
        pub fn spb(&mut self, orig: u32, data: &[u8]) -> &mut Self {
            let mut body = self.u32b(orig).to_vec();
            body.extend_from_slice(data);
            self.block(SPB, &body)
        }
        pub fn pb(&mut self, if_id: u16, ts: u64, orig: u32, data: &[u8]) -> &mut Self {
            let mut body = Vec::new();
            body.extend_from_slice(&self.u16b(if_id));
            body.extend_from_slice(&self.u16b(0));
            for v in [(ts >> 32) as u32, ts as u32, data.len() as u32, orig] {
                body.extend_from_slice(&self.u32b(v));
            }
            body.extend_from_slice(data);
            self.block(PB, &body)
        }
    }

    /// Runs the parser over a complete buffer, as the mapped source would.
    fn walk(buf: &[u8]) -> (Vec<Meta>, Vec<Fault>) {
        let mut p = Pcapng::new();
        let (mut pos, mut metas, mut faults) = (0usize, Vec::new(), Vec::new());
        while pos < buf.len() {
            match p.step(&buf[pos..], true) {
                Step::Packet(m) => {
                    metas.push(m);
                    pos += m.consumed;
                }
                Step::Skip(n) => pos += n,
                Step::Need(_) => break,
                Step::Fault(f, Resume::Skip(n)) => {
                    faults.push(f);
                    pos += n;
                }
                Step::Fault(f, Resume::Stop) => {
                    faults.push(f);
                    break;
                }
            }
        }
        (metas, faults)
    }

    #[test]
    fn tsresol_and_tsoffset_options() {
        for be in [false, true] {
            let mut b = Builder::new(be);
            b.shb()
                .idb(1, 0, &[])
                .idb(101, 128, &[(OPT_IF_TSRESOL, &[9]), (2, b"eth0")])
                .idb(
                    228,
                    0,
                    &[
                        (OPT_IF_TSRESOL, &[0x80 | 20]),
                        (OPT_IF_TSOFFSET, &{
                            let v = 100u64;
                            if be {
                                v.to_be_bytes()
                            } else {
                                v.to_le_bytes()
                            }
                        }),
                    ],
                )
                .epb(0, 1_000_001, 60, &[1; 60])
                .epb(1, 1_000_000_001, 60, &[2; 60])
                .epb(2, 1 << 20, 4, &[3; 4]);
            let (m, f) = walk(&b.out);
            assert!(f.is_empty(), "{f:?}");
            assert_eq!(m.len(), 3);
            assert_eq!(m[0].ts_ns, 1_000_001_000);
            assert_eq!(m[1].ts_ns, 1_000_000_001);
            assert_eq!(m[2].ts_ns, 101_000_000_000);
            assert_eq!(
                [m[0].linktype.0, m[1].linktype.0, m[2].linktype.0],
                [1, 101, 228]
            );
            assert_eq!([m[0].if_id, m[1].if_id, m[2].if_id], [0, 1, 2]);
        }
    }

    #[test]
    fn sections_reset_interfaces_but_ids_keep_counting() {
        let mut b = Builder::new(false);
        b.shb().idb(1, 0, &[]).epb(0, 1, 10, &[0; 10]);
        let mut b2 = Builder::new(true);
        b2.shb()
            .idb(113, 0, &[])
            .idb(1, 0, &[])
            .epb(1, 2, 10, &[0; 10])
            .epb(0, 3, 10, &[0; 10]);
        // Section 2 has only one interface before the reset: id 1 is unknown there.
        let mut b3 = Builder::new(false);
        b3.shb()
            .idb(228, 0, &[])
            .epb(1, 4, 10, &[0; 10])
            .epb(0, 5, 10, &[0; 10]);
        let all = [b.out, b2.out, b3.out].concat();
        let (m, f) = walk(&all);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].kind(), crate::ProblemKind::UnknownInterface);
        let ids: Vec<_> = m.iter().map(|m| (m.if_id, m.linktype.0)).collect();
        assert_eq!(ids, [(0, 1), (2, 1), (1, 113), (3, 228)]);
        // The table keeps every interface, with its section.
        let mut q = Pcapng::new();
        let mut pos = 0;
        while pos < all.len() {
            match q.step(&all[pos..], true) {
                Step::Packet(m) => pos += m.consumed,
                Step::Skip(n) | Step::Fault(_, Resume::Skip(n)) => pos += n,
                _ => break,
            }
        }
        let secs: Vec<_> = q
            .interfaces()
            .iter()
            .map(|i| (i.if_id, i.section))
            .collect();
        assert_eq!(secs, [(0, 0), (1, 1), (2, 1), (3, 2)]);
    }

    #[test]
    fn spb_uses_last_timestamp_and_snaplen() {
        let mut b = Builder::new(false);
        b.shb()
            .idb(1, 64, &[])
            .spb(100, &[7; 100])
            .epb(0, 5, 50, &[1; 50])
            .spb(40, &[8; 40]);
        let (m, f) = walk(&b.out);
        assert!(f.is_empty());
        assert_eq!(m.len(), 3);
        assert_eq!((m[0].ts_ns, m[0].data_len, m[0].wire_len), (0, 64, 100));
        assert_eq!((m[2].ts_ns, m[2].data_len, m[2].wire_len), (5000, 40, 40));
        // SPB before any IDB.
        let mut b = Builder::new(false);
        b.shb().spb(4, &[0; 4]);
        let (m, f) = walk(&b.out);
        assert!(m.is_empty());
        assert_eq!(f[0].kind(), crate::ProblemKind::UnknownInterface);
    }

    #[test]
    fn obsolete_packet_block() {
        let mut b = Builder::new(true);
        b.shb().idb(1, 0, &[]).pb(0, 7, 80, &[9; 20]);
        let (m, f) = walk(&b.out);
        assert!(f.is_empty());
        assert_eq!(
            (m[0].ts_ns, m[0].data_len, m[0].wire_len, m[0].data_off),
            (7000, 20, 80, 28)
        );
    }

    #[test]
    fn other_blocks_skipped() {
        let mut b = Builder::new(false);
        b.shb()
            .block(NRB, &[0; 20])
            .idb(1, 0, &[])
            .block(ISB, &[0; 24])
            .block(0x0BAD, &[1; 9]);
        b.block(0x8000_0001, &[]).epb(0, 1, 4, &[0; 4]);
        let (m, f) = walk(&b.out);
        assert!(f.is_empty());
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn damaged_blocks() {
        let mut b = Builder::new(false);
        b.shb().idb(1, 0, &[]);
        let good_epb = {
            let mut g = Builder::new(false);
            g.epb(0, 1, 8, &[5; 8]);
            g.out
        };
        // EPB whose caplen exceeds the block: skipped, walk goes on.
        let mut bad = good_epb.clone();
        bad[20..24].copy_from_slice(&100u32.to_le_bytes());
        // EPB whose trailer disagrees: resync finds the next block.
        let mut bad_trailer = good_epb.clone();
        let n = bad_trailer.len();
        bad_trailer[n - 4..].copy_from_slice(&7u32.to_le_bytes());
        // Unaligned length.
        let mut bad_len = good_epb.clone();
        bad_len[4..8].copy_from_slice(&33u32.to_le_bytes());
        // Absurd length.
        let mut huge = good_epb.clone();
        huge[4..8].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
        let all = [
            b.out.clone(),
            bad,
            good_epb.clone(),
            bad_trailer,
            good_epb.clone(),
            bad_len,
            vec![0xee; 13],
            good_epb.clone(),
            huge,
            good_epb.clone(),
        ]
        .concat();
        let (m, f) = walk(&all);
        assert_eq!(m.len(), 4, "{f:?}");
        assert!(matches!(
            f[0],
            Fault::CaplenExceedsBlock { caplen: 100, .. }
        ));
        assert!(matches!(f[1], Fault::BlockTrailer { trailer: 7, .. }));
        assert!(matches!(f[2], Fault::BlockLen { len: 33, .. }));
        assert!(matches!(f[3], Fault::BlockTooLong { .. }));
        assert_eq!(f.len(), 4);
    }

    #[test]
    fn bad_section_headers() {
        let mut b = Builder::new(false);
        b.shb();
        let mut v2 = b.out.clone();
        v2[12..14].copy_from_slice(&2u16.to_le_bytes());
        let (_, f) = walk(&v2);
        assert!(matches!(f[..], [Fault::Version { major: 2, .. }]));
        let mut bom = b.out.clone();
        bom[8] = 0;
        let (_, f) = walk(&bom);
        assert!(matches!(f[..], [Fault::ByteOrderMagic { .. }]));
    }

    #[test]
    fn resync_asks_for_more_when_not_at_eof() {
        let mut b = Builder::new(false);
        b.shb().idb(1, 0, &[]).epb(0, 1, 8, &[5; 8]);
        let mut p = Pcapng::new();
        p.endian = Endian::Little;
        p.resync = true;
        let epb_at = b.out.len() - 40;
        // Garbage, then the first 10 bytes of a block: skip the garbage, then ask.
        let mut w = vec![0xee; 5];
        w.extend_from_slice(&b.out[epb_at..epb_at + 10]);
        assert!(matches!(p.step(&w, false), Step::Skip(5)));
        assert!(matches!(p.step(&w[5..], false), Step::Need(40)));
        assert!(matches!(p.step(&w[5..], true), Step::Skip(10)));
        assert!(matches!(p.step(&[], false), Step::Need(4)));
        // Once the whole block is there it is parsed as a block again (this
        // parser saw no IDB, hence the fault).
        let step = p.step(&b.out[epb_at..], false);
        assert!(matches!(
            step,
            Step::Fault(Fault::UnknownInterface { .. }, Resume::Skip(40))
        ));
        assert!(!p.resync);
    }
}
