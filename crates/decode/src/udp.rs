//! UDP header (RFC 768).

use crate::{be16, SkipReason};

mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
}

/// Offset of the checksum field.
pub const CHECKSUM_AT: usize = field::CHECKSUM.start;
pub const HEADER_LEN: usize = field::CHECKSUM.end;

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

    #[inline]
    pub fn check_len(&self) -> Result<(), SkipReason> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(SkipReason::Truncated)
        } else {
            Ok(())
        }
    }

    /// The fixed part of the header as an array, so that getters compile
    /// without bounds checks. Only valid after `check_len`.
    #[inline(always)]
    fn fixed(&self) -> &[u8; HEADER_LEN] {
        match self.buffer.as_ref().first_chunk::<HEADER_LEN>() {
            Some(a) => a,
            None => &[0; HEADER_LEN],
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

    /// Header plus payload length as declared (0 in IPv6 jumbograms).
    #[inline]
    pub fn length(&self) -> u16 {
        be16(self.fixed(), field::LENGTH.start)
    }

    /// 0 means "not computed" over IPv4.
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.fixed(), field::CHECKSUM.start)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Captured bytes after the header (not cut at the length field).
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The UDP part of linktypes/tcpdump_LINKTYPE_RAW_ipv4.pcap: a DNS query.
    static DNS: [u8; 37] = [
        0x30, 0x39, 0x00, 0x35, 0x00, 0x25, 0x19, 0x76, 0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x03, 0x63,
        0x6f, 0x6d, 0x00, 0x00, 0x01, 0x00, 0x01,
    ];

    #[test]
    fn fields() {
        let u = Packet::new_checked(&DNS[..]).unwrap();
        assert_eq!(
            (u.src_port(), u.dst_port(), u.length(), u.checksum()),
            (12345, 53, 37, 0x1976)
        );
        assert_eq!(u.payload().len(), 29);
        assert_eq!(
            Packet::new_checked(&DNS[..7]).err(),
            Some(SkipReason::Truncated)
        );
        // The checksum verifies with the pseudo-header of 192.168.1.100 -> 9.9.9.9.
        let pseudo = crate::checksum::pseudo_header_v4(&[192, 168, 1, 100], &[9, 9, 9, 9], 17, 37);
        assert!(crate::checksum::is_valid(crate::checksum::sum(
            &DNS, pseudo
        )));
    }
}
