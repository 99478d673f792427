//! TCP header (RFC 9293).
//!
//! A passive probe takes segments as they come: no flag combination, port or
//! option is rejected here. `check_len` only makes sure the header the data
//! offset announces was captured.

use crate::{be16, be32, SkipReason};

pub use crate::tcp_flags as flags;

mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const SEQ_NUM: Range<usize> = 4..8;
    pub const ACK_NUM: Range<usize> = 8..12;
    pub const DATA_OFF: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WIN_SIZE: Range<usize> = 14..16;
    pub const CHECKSUM: Range<usize> = 16..18;
    pub const URGENT: Range<usize> = 18..20;
}

/// Length of a header without options.
/// Offset of the checksum field.
pub const CHECKSUM_AT: usize = field::CHECKSUM.start;
pub const MIN_HEADER_LEN: usize = field::URGENT.end;

#[derive(Debug, Clone, Copy)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, SkipReason> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Truncated` when the header (options included) is not all captured,
    /// `Malformed` when the data offset is below 5.
    #[inline]
    pub fn check_len(&self) -> Result<(), SkipReason> {
        let len = self.buffer.as_ref().len();
        if len < MIN_HEADER_LEN {
            Err(SkipReason::Truncated)
        } else if self.header_len() < MIN_HEADER_LEN {
            Err(SkipReason::Malformed)
        } else if len < self.header_len() {
            Err(SkipReason::Truncated)
        } else {
            Ok(())
        }
    }

    /// The fixed part of the header as an array, so that getters compile
    /// without bounds checks. Only valid after `check_len`.
    #[inline(always)]
    fn fixed(&self) -> &[u8; MIN_HEADER_LEN] {
        match self.buffer.as_ref().first_chunk::<MIN_HEADER_LEN>() {
            Some(a) => a,
            None => &[0; MIN_HEADER_LEN],
        }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    pub fn src_port(&self) -> u16 {
        be16(self.fixed(), field::SRC_PORT.start)
    }

    #[inline]
    pub fn dst_port(&self) -> u16 {
        be16(self.fixed(), field::DST_PORT.start)
    }

    #[inline]
    pub fn seq_number(&self) -> u32 {
        be32(self.fixed(), field::SEQ_NUM.start)
    }

    #[inline]
    pub fn ack_number(&self) -> u32 {
        be32(self.fixed(), field::ACK_NUM.start)
    }

    /// Header length in bytes (data offset * 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.fixed()[field::DATA_OFF] >> 4) * 4
    }

    /// Flag byte as on the wire; see [`crate::tcp_flags`]. The NS bit (RFC
    /// 3540, historic) sits in the data-offset byte and is not included.
    #[inline]
    pub fn flags(&self) -> u8 {
        self.fixed()[field::FLAGS]
    }

    #[inline]
    pub fn window_len(&self) -> u16 {
        be16(self.fixed(), field::WIN_SIZE.start)
    }

    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.fixed(), field::CHECKSUM.start)
    }

    #[inline]
    pub fn urgent_at(&self) -> u16 {
        be16(self.fixed(), field::URGENT.start)
    }

    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[MIN_HEADER_LEN..self.header_len()]
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Captured bytes after the header.
    #[inline(always)]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The TCP header of zeek/tcp_bad_checksum/syn-bad.pcap, packet 1.
    static SYN: [u8; 44] = [
        0xe9, 0xd0, 0x00, 0x50, 0xfe, 0x21, 0x32, 0x3a, 0x00, 0x00, 0x00, 0x00, 0xb0, 0x02, 0xff,
        0xff, 0x99, 0x99, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x01, 0x03, 0x03, 0x04, 0x01, 0x01,
        0x08, 0x0a, 0x16, 0x4a, 0xdd, 0x20, 0x00, 0x00, 0x00, 0x00, 0x04, 0x02, 0x00, 0x00,
    ];

    #[test]
    fn fields() {
        let t = Packet::new_checked(&SYN[..]).unwrap();
        assert_eq!(
            (t.src_port(), t.dst_port(), t.seq_number(), t.ack_number()),
            (59856, 80, 4263588410, 0)
        );
        assert_eq!(
            (
                t.header_len(),
                t.flags(),
                t.window_len(),
                t.checksum(),
                t.urgent_at()
            ),
            (44, flags::SYN, 65535, 0x9999, 0)
        );
        assert_eq!(&t.options()[..4], &[0x02, 0x04, 0x05, 0xb4]);
        assert!(t.payload().is_empty());
    }

    #[test]
    fn check_len() {
        assert_eq!(
            Packet::new_checked(&SYN[..19]).err(),
            Some(SkipReason::Truncated)
        );
        assert_eq!(
            Packet::new_checked(&SYN[..43]).err(),
            Some(SkipReason::Truncated)
        );
        let mut short = SYN;
        short[12] = 0x40;
        assert_eq!(
            Packet::new_checked(&short[..]).err(),
            Some(SkipReason::Malformed)
        );
        // Getters of an unchecked short view read zeros, never panic.
        let t = Packet::new_unchecked(&SYN[..3]);
        assert_eq!((t.seq_number(), t.flags()), (0, 0));
    }
}
