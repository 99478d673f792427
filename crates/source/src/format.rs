//! The contract between the record parsers (`pcap`, `pcapng`) and the byte
//! sources that feed them (`input`).
//!
//! A parser looks at a window that starts at the next unread record and answers
//! with one [`Step`]. It never reads, never allocates per record and never holds
//! on to the window, so the same code walks a memory-mapped file in place and a
//! decompressed stream through a refilled buffer: the mapped source's window is
//! the rest of the file, the stream's window is whatever is buffered, and
//! `Need` is how the parser asks for more.

use crate::problem::{Fault, Unit};
use crate::{pcap::Pcap, pcapng::Pcapng, Interface, LinkType, TimestampNs};

/// Section (pcapng) or file (pcap) byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endian {
    Little,
    Big,
}

impl Endian {
    #[inline]
    pub(crate) fn u16(self, b: [u8; 2]) -> u16 {
        match self {
            Endian::Little => u16::from_le_bytes(b),
            Endian::Big => u16::from_be_bytes(b),
        }
    }

    #[inline]
    pub(crate) fn u32(self, b: [u8; 4]) -> u32 {
        match self {
            Endian::Little => u32::from_le_bytes(b),
            Endian::Big => u32::from_be_bytes(b),
        }
    }

    #[inline]
    pub(crate) fn u64(self, b: [u8; 8]) -> u64 {
        match self {
            Endian::Little => u64::from_le_bytes(b),
            Endian::Big => u64::from_be_bytes(b),
        }
    }
}

/// `N` bytes at `off`. Callers check the length first; the `get` keeps a
/// parser bug from turning into a panic on hostile input.
#[inline]
pub(crate) fn bytes<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
    match b.get(off..off.wrapping_add(N)) {
        Some(s) => {
            let mut a = [0u8; N];
            a.copy_from_slice(s);
            a
        }
        None => [0u8; N],
    }
}

/// Where a packet is in the window and what the record header said about it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Meta {
    /// Bytes of the window the record occupies.
    pub consumed: usize,
    /// Packet bytes start this far into the window.
    pub data_off: usize,
    pub data_len: usize,
    pub ts_ns: TimestampNs,
    pub wire_len: u32,
    pub linktype: LinkType,
    pub if_id: u32,
}

/// What to do after a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resume {
    /// Drop this many bytes and go on.
    Skip(usize),
    /// Nothing after this point can be trusted.
    Stop,
}

/// A parser's answer for the window it was shown.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Step {
    Packet(Meta),
    /// A record that carries no packet (header, IDB, statistics, ...): drop it.
    Skip(usize),
    /// The window must hold at least this many bytes (always more than it has).
    Need(usize),
    Fault(Fault, Resume),
}

/// pcapng timestamp units to nanoseconds, chosen once per interface so the
/// per-packet conversion is one multiply in the common (power of 10) case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TsConv {
    Mul(u64),
    /// Finer than a nanosecond: divide by 10^n (n <= 38, so it fits a u128).
    Div10(u32),
    /// Units of 2^-n seconds.
    Pow2(u32),
    /// A resolution so fine that any 64-bit count is below one nanosecond.
    Zero,
}

impl TsConv {
    /// From the raw `if_tsresol` byte: MSB clear = 10^-n s, set = 2^-n s.
    pub(crate) fn from_tsresol(v: u8) -> TsConv {
        let n = u32::from(v & 0x7f);
        if v & 0x80 != 0 {
            TsConv::Pow2(n)
        } else if n <= 9 {
            TsConv::Mul(10u64.pow(9 - n))
        } else if n - 9 <= 38 {
            TsConv::Div10(n - 9)
        } else {
            TsConv::Zero
        }
    }

    #[inline]
    pub(crate) fn to_ns(self, units: u64) -> i64 {
        // Wrapping, not checked: a nonsense timestamp must not stop the read.
        // Powers of 10 down to nanoseconds are nearly every file; keep them a
        // multiply, not a jump table.
        if let TsConv::Mul(f) = self {
            return units.wrapping_mul(f) as i64;
        }
        self.to_ns_other(units)
    }

    #[cold]
    #[inline(never)]
    fn to_ns_other(self, units: u64) -> i64 {
        match self {
            TsConv::Mul(f) => units.wrapping_mul(f) as i64,
            TsConv::Div10(n) => (u128::from(units) / 10u128.pow(n)) as i64,
            TsConv::Pow2(n) => ((u128::from(units) * 1_000_000_000) >> n) as i64,
            TsConv::Zero => 0,
        }
    }
}

/// The record parser for one file, chosen from its magic.
#[derive(Debug)]
pub(crate) enum Parser {
    Pcap(Pcap),
    Pcapng(Pcapng),
}

impl Parser {
    /// `eof`: the window is all the input there is (always so for a mapped file).
    #[inline]
    pub(crate) fn step(&mut self, w: &[u8], eof: bool) -> Step {
        match self {
            Parser::Pcap(p) => p.step(w),
            Parser::Pcapng(p) => p.step(w, eof),
        }
    }

    pub(crate) fn unit(&self) -> Unit {
        match self {
            Parser::Pcap(_) => Unit::PcapRecord,
            Parser::Pcapng(_) => Unit::PcapngBlock,
        }
    }

    pub(crate) fn interfaces(&self) -> &[Interface] {
        match self {
            Parser::Pcap(p) => p.interfaces(),
            Parser::Pcapng(p) => p.interfaces(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsresol_conversions() {
        assert_eq!(TsConv::from_tsresol(6), TsConv::Mul(1000));
        assert_eq!(TsConv::from_tsresol(9), TsConv::Mul(1));
        assert_eq!(TsConv::from_tsresol(0), TsConv::Mul(1_000_000_000));
        assert_eq!(TsConv::from_tsresol(6).to_ns(1_500_000), 1_500_000_000);
        assert_eq!(
            TsConv::from_tsresol(12).to_ns(1_000_000_123_456),
            1_000_000_123
        );
        // 2^-10 s units: 1024 units is one second, 1 unit is 976562.5 ns.
        assert_eq!(TsConv::from_tsresol(0x80 | 10).to_ns(1024), 1_000_000_000);
        assert_eq!(TsConv::from_tsresol(0x80 | 10).to_ns(1), 976_562);
        assert_eq!(TsConv::from_tsresol(0x80 | 127).to_ns(u64::MAX), 0);
        assert_eq!(TsConv::from_tsresol(127), TsConv::Zero);
        assert_eq!(TsConv::from_tsresol(47).to_ns(u64::MAX), 0);
        // No overflow panic on any input.
        for v in 0..=255u8 {
            let c = TsConv::from_tsresol(v);
            let _ = c.to_ns(u64::MAX);
            let _ = c.to_ns(0);
        }
    }

    #[test]
    fn bytes_never_panics() {
        assert_eq!(bytes::<4>(&[1, 2, 3], 0), [0; 4]);
        assert_eq!(bytes::<2>(&[1, 2, 3], 1), [2, 3]);
        assert_eq!(bytes::<4>(&[1, 2, 3], usize::MAX), [0; 4]);
        assert_eq!(Endian::Big.u32([0xa1, 0xb2, 0xc3, 0xd4]), 0xa1b2_c3d4);
        assert_eq!(Endian::Little.u16([0x01, 0x02]), 0x0201);
    }
}
