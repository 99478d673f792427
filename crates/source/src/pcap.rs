//! Classic libpcap files: a 24-byte file header, then 16-byte record headers
//! each followed by the captured bytes. Both byte orders, microsecond and
//! nanosecond magic.
//!
//! pcap has no sync marker, so a record header that cannot be right ends the
//! walk instead of guessing where the next record starts.

use crate::format::{bytes, Endian, Meta, Resume, Step, TsConv};
use crate::problem::Fault;
use crate::{Interface, LinkType};

pub(crate) const FILE_HEADER_LEN: usize = 24;
const RECORD_HEADER_LEN: usize = 16;

/// Largest packet libpcap itself accepts; writers often put a smaller snaplen in
/// the header and still write longer records, so this is the floor of the limit.
const MAX_SNAPLEN_FLOOR: u32 = 262_144;
/// Above this a captured length is a broken header whatever the snaplen says.
pub(crate) const MAX_CAPLEN: u32 = 16 * 1024 * 1024;

/// The four magics as the file's first four bytes.
const MAGIC_US_LE: [u8; 4] = [0xd4, 0xc3, 0xb2, 0xa1];
const MAGIC_US_BE: [u8; 4] = [0xa1, 0xb2, 0xc3, 0xd4];
const MAGIC_NS_LE: [u8; 4] = [0x4d, 0x3c, 0xb2, 0xa1];
const MAGIC_NS_BE: [u8; 4] = [0xa1, 0xb2, 0x3c, 0x4d];

/// `(byte order, nanosecond)` if the first four bytes are a pcap magic.
pub(crate) fn magic(head: [u8; 4]) -> Option<(Endian, bool)> {
    match head {
        MAGIC_US_LE => Some((Endian::Little, false)),
        MAGIC_US_BE => Some((Endian::Big, false)),
        MAGIC_NS_LE => Some((Endian::Little, true)),
        MAGIC_NS_BE => Some((Endian::Big, true)),
        _ => None,
    }
}

#[derive(Debug)]
pub(crate) struct Pcap {
    endian: Endian,
    nanos: bool,
    /// Fraction-of-second field to nanoseconds.
    frac_mul: i64,
    max_caplen: u32,
    iface: Interface,
}

impl Pcap {
    /// From the file header; `None` if `h` does not start with a pcap magic.
    pub(crate) fn from_header(h: &[u8; FILE_HEADER_LEN]) -> Option<Pcap> {
        let (endian, nanos) = magic(bytes(h, 0))?;
        let snaplen = endian.u32(bytes(h, 16));
        // The upper 16 bits of this field carry FCS information, not the link type.
        let linktype = LinkType(endian.u32(bytes(h, 20)) & 0xffff);
        let frac_mul: i64 = if nanos { 1 } else { 1000 };
        Some(Pcap {
            endian,
            nanos,
            frac_mul,
            max_caplen: snaplen.clamp(MAX_SNAPLEN_FLOOR, MAX_CAPLEN),
            iface: Interface {
                if_id: 0,
                section: 0,
                linktype,
                snaplen,
                tsresol: if nanos { 9 } else { 6 },
                ts_offset_s: 0,
                conv: TsConv::Mul(frac_mul as u64),
                offset_ns: 0,
            },
        })
    }

    pub(crate) fn endian(&self) -> Endian {
        self.endian
    }

    pub(crate) fn nanos(&self) -> bool {
        self.nanos
    }

    pub(crate) fn interfaces(&self) -> &[Interface] {
        std::slice::from_ref(&self.iface)
    }

    /// One record from the start of `w`. The file header is already consumed.
    #[inline]
    pub(crate) fn step(&mut self, w: &[u8]) -> Step {
        let Some(h) = w.first_chunk::<RECORD_HEADER_LEN>() else {
            return Step::Need(RECORD_HEADER_LEN);
        };
        let e = self.endian;
        let sec = e.u32(bytes(h, 0));
        let frac = e.u32(bytes(h, 4));
        let caplen = e.u32(bytes(h, 8));
        let orig_len = e.u32(bytes(h, 12));
        if caplen > self.max_caplen {
            return Step::Fault(
                Fault::PcapCaplen {
                    caplen,
                    limit: self.max_caplen,
                },
                Resume::Stop,
            );
        }
        let total = RECORD_HEADER_LEN + caplen as usize;
        if w.len() < total {
            return Step::Need(total);
        }
        // Both fit easily: u32 seconds * 1e9 + u32 * 1000 < i64::MAX.
        let ts_ns = i64::from(sec) * 1_000_000_000 + i64::from(frac) * self.frac_mul;
        Step::Packet(Meta {
            consumed: total,
            data_off: RECORD_HEADER_LEN,
            data_len: caplen as usize,
            ts_ns,
            // Keep `wire_len >= data.len()` for callers that subtract.
            wire_len: orig_len.max(caplen),
            linktype: self.iface.linktype,
            if_id: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(magic: [u8; 4], be: bool, snaplen: u32, linktype: u32) -> [u8; 24] {
        let mut h = [0u8; 24];
        h[..4].copy_from_slice(&magic);
        let put = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        h[4..6].copy_from_slice(&if be {
            2u16.to_be_bytes()
        } else {
            2u16.to_le_bytes()
        });
        h[6..8].copy_from_slice(&if be {
            4u16.to_be_bytes()
        } else {
            4u16.to_le_bytes()
        });
        h[16..20].copy_from_slice(&put(snaplen));
        h[20..24].copy_from_slice(&put(linktype));
        h
    }

    fn record(be: bool, sec: u32, frac: u32, caplen: u32, orig: u32, data: &[u8]) -> Vec<u8> {
        let put = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let mut r = Vec::new();
        for v in [sec, frac, caplen, orig] {
            r.extend_from_slice(&put(v));
        }
        r.extend_from_slice(data);
        r
    }

    #[test]
    fn all_four_magics() {
        for (m, be, nanos) in [
            (MAGIC_US_LE, false, false),
            (MAGIC_US_BE, true, false),
            (MAGIC_NS_LE, false, true),
            (MAGIC_NS_BE, true, true),
        ] {
            let mut p = Pcap::from_header(&header(m, be, 65535, 1)).unwrap();
            assert_eq!(p.nanos(), nanos);
            assert_eq!(p.endian() == Endian::Big, be);
            assert_eq!(p.interfaces()[0].snaplen, 65535);
            let r = record(be, 10, 20, 3, 60, &[1, 2, 3]);
            let Step::Packet(m) = p.step(&r) else {
                panic!()
            };
            assert_eq!(m.consumed, 19);
            assert_eq!(m.data_len, 3);
            assert_eq!(m.wire_len, 60);
            assert_eq!(m.ts_ns, 10_000_000_000 + 20 * if nanos { 1 } else { 1000 });
            assert!(matches!(p.step(&r[..18]), Step::Need(19)));
            assert!(matches!(p.step(&r[..3]), Step::Need(16)));
        }
    }

    #[test]
    fn fcs_bits_masked_from_linktype() {
        // FCS length 4 with the F bit set, Ethernet.
        let p = Pcap::from_header(&header(MAGIC_US_LE, false, 65535, 0x1400_0001)).unwrap();
        assert_eq!(p.interfaces()[0].linktype, LinkType::ETHERNET);
    }

    #[test]
    fn caplen_limits() {
        let mut p = Pcap::from_header(&header(MAGIC_US_LE, false, 96, 1)).unwrap();
        // Above the snaplen but below the floor: accepted without complaint.
        let data = vec![0u8; 1500];
        let r = record(false, 1, 0, 1500, 1500, &data);
        assert!(matches!(p.step(&r), Step::Packet(_)));
        let r = record(false, 1, 0, MAX_SNAPLEN_FLOOR + 1, 0, &[]);
        assert!(matches!(
            p.step(&r),
            Step::Fault(
                Fault::PcapCaplen {
                    limit: MAX_SNAPLEN_FLOOR,
                    ..
                },
                Resume::Stop
            )
        ));
        // A huge snaplen in the header does not lift the sanity limit.
        let mut p = Pcap::from_header(&header(MAGIC_US_LE, false, u32::MAX, 1)).unwrap();
        let r = record(false, 1, 0, u32::MAX, 0, &[]);
        assert!(matches!(
            p.step(&r),
            Step::Fault(
                Fault::PcapCaplen {
                    limit: MAX_CAPLEN,
                    ..
                },
                _
            )
        ));
        // orig_len below caplen is lifted so that wire_len >= data.len().
        let r = record(false, 1, 0, 2, 1, &[0, 0]);
        let Step::Packet(m) = p.step(&r) else {
            panic!()
        };
        assert_eq!(m.wire_len, 2);
    }
}
