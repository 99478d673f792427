//! ICMP (RFC 792) and ICMPv6 (RFC 4443): both start with type, code and
//! checksum, followed by a type-dependent 4-byte word and the body.

use crate::{be16, be32, SkipReason};

mod field {
    use core::ops::Range;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    pub const REST: Range<usize> = 4..8;
}

/// Type, code and checksum: the part every message has.
/// Offset of the checksum field.
pub const CHECKSUM_AT: usize = field::CHECKSUM.start;
pub const HEADER_LEN: usize = field::CHECKSUM.end;

pub mod v4_type {
    pub const ECHO_REPLY: u8 = 0;
    pub const DEST_UNREACHABLE: u8 = 3;
    pub const REDIRECT: u8 = 5;
    pub const ECHO_REQUEST: u8 = 8;
    pub const TIME_EXCEEDED: u8 = 11;
}

pub mod v6_type {
    pub const DEST_UNREACHABLE: u8 = 1;
    pub const PACKET_TOO_BIG: u8 = 2;
    pub const TIME_EXCEEDED: u8 = 3;
    pub const ECHO_REQUEST: u8 = 128;
    pub const ECHO_REPLY: u8 = 129;
    pub const ROUTER_SOLICIT: u8 = 133;
    pub const NEIGHBOR_SOLICIT: u8 = 135;
}

pub use wirelog_packet::icmp::counterpart;

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

    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    #[inline]
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM.start)
    }

    /// The 4-byte word after the checksum (echo id and sequence, MTU, pointer,
    /// unused), if captured.
    #[inline]
    pub fn rest_of_header(&self) -> Option<u32> {
        let b = self.buffer.as_ref();
        (b.len() >= field::REST.end).then(|| be32(b, field::REST.start))
    }

    /// Echo identifier (meaningful for echo request/reply only).
    #[inline]
    pub fn echo_ident(&self) -> Option<u16> {
        self.rest_of_header().map(|w| (w >> 16) as u16)
    }

    #[inline]
    pub fn echo_seq_no(&self) -> Option<u16> {
        self.rest_of_header().map(|w| w as u16)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Captured bytes after type, code and checksum (the rest-of-header word
    /// included), matching [`crate::Transport::Icmp`]'s payload.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ICMP part of zeek/icmp_events/icmp-ping.pcap, packet 1: echo request.
    static ECHO: [u8; 64] = [
        0x08, 0x00, 0x69, 0x09, 0x88, 0x1c, 0x00, 0x00, 0x4f, 0x85, 0xe0, 0x43, 0x00, 0x0e, 0xeb,
        0xff, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15,
        0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x24,
        0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f, 0x30, 0x31, 0x32, 0x33,
        0x34, 0x35, 0x36, 0x37,
    ];

    #[test]
    fn fields() {
        let i = Packet::new_checked(&ECHO[..]).unwrap();
        assert_eq!(
            (i.msg_type(), i.msg_code(), i.checksum()),
            (v4_type::ECHO_REQUEST, 0, 0x6909)
        );
        assert_eq!((i.echo_ident(), i.echo_seq_no()), (Some(34844), Some(0)));
        assert_eq!(i.payload().len(), 60);
        assert!(crate::checksum::is_valid(crate::checksum::sum(&ECHO, 0)));
        let short = Packet::new_checked(&ECHO[..5]).unwrap();
        assert_eq!(short.rest_of_header(), None);
        assert_eq!(
            Packet::new_checked(&ECHO[..3]).err(),
            Some(SkipReason::Truncated)
        );
    }
}
