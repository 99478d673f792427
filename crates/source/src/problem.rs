//! What the parsers report about bad input, and the per-kind tally kept for the caller.
//!
//! The parsers return a small `Copy` [`Fault`] on the hot path; it is only turned
//! into text the first time its kind is seen, so a file full of bad blocks costs a
//! counter increment per block, not an allocation.

use std::fmt;

use crate::{Problem, ProblemKind};

/// Which kind of record the input ended in, for the "truncated" detail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    PcapRecord,
    PcapngBlock,
}

impl Unit {
    fn as_str(self) -> &'static str {
        match self {
            Unit::PcapRecord => "pcap record",
            Unit::PcapngBlock => "pcapng block",
        }
    }
}

/// One problem found by a parser, with the numbers needed to describe it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// Input ended after `have` of the `need` bytes the current record requires.
    Truncated {
        have: usize,
        need: usize,
        unit: Unit,
    },
    /// pcap record header claims more captured bytes than any sane writer produces.
    PcapCaplen { caplen: u32, limit: u32 },
    /// pcapng total length not a multiple of 4 or below the 12-byte minimum.
    BlockLen { btype: u32, len: u32 },
    /// pcapng total length above what we are willing to buffer.
    BlockTooLong { btype: u32, len: u32, max: u32 },
    /// pcapng trailing total length disagrees with the leading one.
    BlockTrailer { btype: u32, len: u32, trailer: u32 },
    /// pcapng block shorter than the fixed part of its type.
    BlockTooShort { btype: u32, len: u32, min: u32 },
    /// Section header whose byte-order magic is neither order of 0x1A2B3C4D.
    ByteOrderMagic { bom: u32 },
    /// Section header with a major version we cannot parse.
    Version { major: u16, minor: u16 },
    /// Packet block whose captured length does not fit in the block.
    CaplenExceedsBlock { btype: u32, caplen: u32, room: u32 },
    /// Packet block naming an interface the section never declared.
    UnknownInterface {
        btype: u32,
        if_id: u32,
        declared: u32,
    },
}

impl Fault {
    pub(crate) fn kind(self) -> ProblemKind {
        match self {
            Fault::Truncated { .. } => ProblemKind::Truncated,
            Fault::PcapCaplen { .. } => ProblemKind::OversizedPacket,
            Fault::BlockLen { .. }
            | Fault::BlockTooLong { .. }
            | Fault::BlockTrailer { .. }
            | Fault::BlockTooShort { .. }
            | Fault::ByteOrderMagic { .. }
            | Fault::Version { .. }
            | Fault::CaplenExceedsBlock { .. } => ProblemKind::CorruptBlock,
            Fault::UnknownInterface { .. } => ProblemKind::UnknownInterface,
        }
    }
}

/// Human name of a pcapng block type, for details.
fn block_name(btype: u32) -> &'static str {
    match btype {
        0x0A0D_0D0A => "section header block",
        1 => "interface description block",
        2 => "packet block",
        3 => "simple packet block",
        4 => "name resolution block",
        5 => "interface statistics block",
        6 => "enhanced packet block",
        _ => "block",
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Fault::Truncated { have, need, unit } => {
                write!(
                    f,
                    "input ends {have} bytes into a {need}-byte {}",
                    unit.as_str()
                )
            }
            Fault::PcapCaplen { caplen, limit } => {
                write!(
                    f,
                    "record captured length {caplen} exceeds limit {limit}; rest of file skipped"
                )
            }
            Fault::BlockLen { btype, len } => write!(
                f,
                "{} (type 0x{btype:x}) has invalid total length {len}",
                block_name(btype)
            ),
            Fault::BlockTooLong { btype, len, max } => write!(
                f,
                "{} (type 0x{btype:x}) total length {len} exceeds limit {max}",
                block_name(btype)
            ),
            Fault::BlockTrailer {
                btype,
                len,
                trailer,
            } => write!(
                f,
                "{} (type 0x{btype:x}) total length {len} but trailing length {trailer}",
                block_name(btype)
            ),
            Fault::BlockTooShort { btype, len, min } => {
                write!(f, "{} total length {len} < {min}", block_name(btype))
            }
            Fault::ByteOrderMagic { bom } => {
                write!(
                    f,
                    "section header byte-order magic 0x{bom:08x} is not 0x1a2b3c4d"
                )
            }
            Fault::Version { major, minor } => {
                write!(
                    f,
                    "unsupported pcapng version {major}.{minor}; rest of file skipped"
                )
            }
            Fault::CaplenExceedsBlock {
                btype,
                caplen,
                room,
            } => write!(
                f,
                "{} captured length {caplen} exceeds the {room} bytes the block has room for",
                block_name(btype)
            ),
            Fault::UnknownInterface {
                btype,
                if_id,
                declared,
            } => write!(
                f,
                "{} on interface {if_id}, but the section declares {declared} interface(s)",
                block_name(btype)
            ),
        }
    }
}

/// One entry per kind, in the order first seen. At most a handful of kinds exist,
/// so a linear scan beats any map.
#[derive(Debug, Default)]
pub(crate) struct Problems(Vec<Problem>);

impl Problems {
    #[cold]
    #[inline(never)]
    pub(crate) fn record(&mut self, kind: ProblemKind, offset: u64, detail: &dyn fmt::Display) {
        if let Some(p) = self.0.iter_mut().find(|p| p.kind == kind) {
            p.count += 1;
            return;
        }
        self.0.push(Problem {
            kind,
            count: 1,
            first_offset: offset,
            detail: detail.to_string(),
        });
    }

    pub(crate) fn as_slice(&self) -> &[Problem] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_entry_per_kind_keeps_first_offset_and_detail() {
        let mut p = Problems::default();
        let a = Fault::BlockLen { btype: 6, len: 13 };
        let b = Fault::BlockTrailer {
            btype: 6,
            len: 32,
            trailer: 36,
        };
        p.record(a.kind(), 100, &a);
        p.record(b.kind(), 200, &b);
        p.record(ProblemKind::Truncated, 300, &"x");
        let s = p.as_slice();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].kind, ProblemKind::CorruptBlock);
        assert_eq!(s[0].count, 2);
        assert_eq!(s[0].first_offset, 100);
        assert_eq!(
            s[0].detail,
            "enhanced packet block (type 0x6) has invalid total length 13"
        );
        assert_eq!(s[1].kind, ProblemKind::Truncated);
        assert_eq!(s[1].count, 1);
    }

    #[test]
    fn every_fault_maps_to_a_kind_and_formats() {
        let faults = [
            Fault::Truncated {
                have: 3,
                need: 16,
                unit: Unit::PcapRecord,
            },
            Fault::PcapCaplen {
                caplen: 1 << 30,
                limit: 262_144,
            },
            Fault::BlockTooLong {
                btype: 1,
                len: u32::MAX - 3,
                max: 1,
            },
            Fault::BlockTooShort {
                btype: 6,
                len: 16,
                min: 32,
            },
            Fault::ByteOrderMagic { bom: 1 },
            Fault::Version { major: 2, minor: 0 },
            Fault::CaplenExceedsBlock {
                btype: 6,
                caplen: 100,
                room: 4,
            },
            Fault::UnknownInterface {
                btype: 6,
                if_id: 9,
                declared: 1,
            },
        ];
        for f in faults {
            assert!(!f.to_string().is_empty());
            let _ = f.kind();
        }
        assert_eq!(faults[1].kind(), ProblemKind::OversizedPacket);
        assert_eq!(faults[7].kind(), ProblemKind::UnknownInterface);
    }
}
