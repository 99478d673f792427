//! IPv6 header (RFC 8200) and its extension headers.

use crate::{be16, be32, SkipReason};

pub use crate::ipv4::protocol;

mod field {
    use core::ops::Range;
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    pub const PAYLOAD_LEN: Range<usize> = 4..6;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Range<usize> = 8..24;
    pub const DST_ADDR: Range<usize> = 24..40;
}

pub const HEADER_LEN: usize = field::DST_ADDR.end;

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
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    #[inline]
    pub fn traffic_class(&self) -> u8 {
        ((be32(self.fixed(), field::VER_TC_FLOW.start) >> 20) & 0xff) as u8
    }

    #[inline]
    pub fn flow_label(&self) -> u32 {
        be32(self.fixed(), field::VER_TC_FLOW.start) & 0x000f_ffff
    }

    /// Length after the fixed header (0 for a jumbogram).
    #[inline]
    pub fn payload_len(&self) -> u16 {
        be16(self.fixed(), field::PAYLOAD_LEN.start)
    }

    #[inline]
    pub fn next_header(&self) -> u8 {
        self.fixed()[field::NEXT_HEADER]
    }

    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.fixed()[field::HOP_LIMIT]
    }

    #[inline]
    pub fn src_addr(&self) -> [u8; 16] {
        let mut a = [0; 16];
        a.copy_from_slice(&self.fixed()[field::SRC_ADDR]);
        a
    }

    #[inline]
    pub fn dst_addr(&self) -> [u8; 16] {
        let mut a = [0; 16];
        a.copy_from_slice(&self.fixed()[field::DST_ADDR]);
        a
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Source and destination addresses as on the wire (32 bytes).
    #[inline]
    pub fn addrs(&self) -> &'a [u8; 32] {
        let b: &'a [u8] = self.buffer.as_ref();
        match b.get(field::SRC_ADDR.start..).and_then(|b| b.first_chunk::<32>()) {
            Some(a) => a,
            None => &[0; 32],
        }
    }

    /// Everything captured after the fixed header, ending at the payload
    /// length when it is set (link-layer padding excluded).
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        let b: &'a [u8] = self.buffer.as_ref();
        let rest = &b[HEADER_LEN..];
        match usize::from(self.payload_len()) {
            0 => rest,
            n => &rest[..n.min(rest.len())],
        }
    }
}

/// True for the next-header values that are extension headers with the
/// common layout (next header, length) that the decoder steps over. ESP is
/// not among them: what follows it is encrypted.
#[inline]
pub fn is_extension(next_header: u8) -> bool {
    matches!(
        next_header,
        protocol::HOPOPTS
            | protocol::ROUTING
            | protocol::FRAGMENT
            | protocol::DSTOPTS
            | protocol::AH
            | protocol::MOBILITY
            | protocol::HIP
            | protocol::SHIM6
    )
}

/// A generic extension header: next header and length. The length unit
/// depends on the header type: 8 bytes not counting the first 8, except AH
/// (RFC 4302: 4 bytes, not counting the first 8) and the fixed 8-byte
/// fragment header.
#[derive(Debug, Clone, Copy)]
pub struct ExtHeader<T: AsRef<[u8]>> {
    buffer: T,
    kind: u8,
}

impl<T: AsRef<[u8]>> ExtHeader<T> {
    /// `kind` is the next-header value that announced this header.
    #[inline]
    pub const fn new_unchecked(buffer: T, kind: u8) -> Self {
        ExtHeader { buffer, kind }
    }

    #[inline]
    pub fn new_checked(buffer: T, kind: u8) -> Result<Self, SkipReason> {
        let h = Self::new_unchecked(buffer, kind);
        h.check_len()?;
        Ok(h)
    }

    /// The whole header must be captured.
    #[inline]
    pub fn check_len(&self) -> Result<(), SkipReason> {
        let len = self.buffer.as_ref().len();
        if len < 2 || len < self.header_len() {
            Err(SkipReason::Truncated)
        } else {
            Ok(())
        }
    }

    #[inline]
    pub fn kind(&self) -> u8 {
        self.kind
    }

    #[inline]
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// Length of the whole header in bytes.
    #[inline]
    pub fn header_len(&self) -> usize {
        let raw = usize::from(self.buffer.as_ref()[1]);
        match self.kind {
            protocol::AH => (raw + 2) * 4,
            protocol::FRAGMENT => 8,
            _ => (raw + 1) * 8,
        }
    }

    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[2..self.header_len()]
    }

    /// For a routing header with segments left, the destination the packet
    /// finally reaches, which the upper-layer checksum uses (RFC 8200 section
    /// 8.1): the last address of a type 0 header, the home address of a type 2
    /// header, the first segment of a segment routing header (type 4).
    pub fn final_destination(&self) -> Option<[u8; 16]> {
        if self.kind != protocol::ROUTING {
            return None;
        }
        let b = self.buffer.as_ref();
        let len = self.header_len();
        if len < 24 || b[3] == 0 {
            return None;
        }
        let at = match b[2] {
            0 => len - 16,
            2 | 4 => 8,
            _ => return None,
        };
        let mut a = [0; 16];
        a.copy_from_slice(&b[at..at + 16]);
        Some(a)
    }
}

/// The fragment extension header (8 bytes).
#[derive(Debug, Clone, Copy)]
pub struct FragmentHeader<T: AsRef<[u8]>> {
    buffer: T,
}

pub const FRAGMENT_HEADER_LEN: usize = 8;

impl<T: AsRef<[u8]>> FragmentHeader<T> {
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        FragmentHeader { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, SkipReason> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    #[inline]
    pub fn check_len(&self) -> Result<(), SkipReason> {
        if self.buffer.as_ref().len() < FRAGMENT_HEADER_LEN {
            Err(SkipReason::Truncated)
        } else {
            Ok(())
        }
    }

    #[inline]
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// Fragment offset in bytes.
    #[inline]
    pub fn frag_offset(&self) -> u32 {
        u32::from(be16(self.buffer.as_ref(), 2) & 0xfff8)
    }

    #[inline]
    pub fn more_frags(&self) -> bool {
        self.buffer.as_ref()[3] & 1 != 0
    }

    #[inline]
    pub fn ident(&self) -> u32 {
        be32(self.buffer.as_ref(), 4)
    }

    /// An atomic fragment (offset 0, no more fragments, RFC 6946) is a whole
    /// datagram that merely carries a fragment header.
    #[inline]
    pub fn is_atomic(&self) -> bool {
        self.frag_offset() == 0 && !self.more_frags()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// zeek/ftp_ipv6/ipv6.pcap, packet 1, from the IPv6 header on: a TCP SYN.
    static SYN6: [u8; 84] = [
        0x60, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x06, 0x40, 0x20, 0x01, 0x04, 0x70, 0x1f, 0x11, 0x08, 0x1f, 0xc9, 0x99,
        0x0d, 0x94, 0xaa, 0x7c, 0x2e, 0x3e, 0x20, 0x01, 0x04, 0x70, 0x48, 0x67, 0x00, 0x99, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x21, 0xc0, 0x21, 0x00, 0x15, 0x26, 0x8a, 0x7e, 0x5f, 0x00, 0x00, 0x00, 0x00, 0xb0, 0x02,
        0xff, 0xff, 0x44, 0x89, 0x00, 0x00, 0x02, 0x04, 0x05, 0xa0, 0x01, 0x03, 0x03, 0x01, 0x01, 0x01, 0x08, 0x0a,
        0x3a, 0x01, 0xea, 0x4e, 0x00, 0x00, 0x00, 0x00, 0x04, 0x02, 0x00, 0x00,
    ];

    #[test]
    fn fields() {
        let p = Packet::new_checked(&SYN6[..]).unwrap();
        assert_eq!((p.version(), p.traffic_class(), p.flow_label(), p.payload_len()), (6, 0, 0, 44));
        assert_eq!((p.next_header(), p.hop_limit()), (protocol::TCP, 64));
        assert_eq!(std::net::Ipv6Addr::from(p.src_addr()).to_string(), "2001:470:1f11:81f:c999:d94:aa7c:2e3e");
        assert_eq!(std::net::Ipv6Addr::from(p.dst_addr()).to_string(), "2001:470:4867:99::21");
        assert_eq!(&p.addrs()[..16], &p.src_addr());
        assert_eq!(p.payload().len(), 44);
        assert_eq!(Packet::new_checked(&SYN6[..39]).err(), Some(SkipReason::Truncated));
        assert_eq!(Packet::new_checked(&SYN6[..50]).unwrap().payload().len(), 10);
    }

    #[test]
    fn extension_headers() {
        assert!(is_extension(protocol::HOPOPTS) && is_extension(protocol::SHIM6) && is_extension(protocol::AH));
        assert!(!is_extension(protocol::ESP) && !is_extension(protocol::TCP) && !is_extension(protocol::NO_NEXT));
        let hbh = [6, 0, 1, 4, 0, 0, 0, 0];
        let h = ExtHeader::new_checked(&hbh[..], protocol::HOPOPTS).unwrap();
        assert_eq!((h.next_header(), h.header_len(), h.data().len(), h.final_destination()), (6, 8, 6, None));
        // AH counts 4-byte units, plus 2.
        let ah = [6, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(ExtHeader::new_checked(&ah[..], protocol::AH).unwrap().header_len(), 24);
        assert_eq!(ExtHeader::new_checked(&ah[..20], protocol::AH).err(), Some(SkipReason::Truncated));
        // Routing type 2 with one segment left names the final destination.
        let mut rh = vec![6, 2, 2, 1, 0, 0, 0, 0];
        rh.extend_from_slice(&SYN6[24..40]);
        let h = ExtHeader::new_checked(&rh[..], protocol::ROUTING).unwrap();
        assert_eq!(h.final_destination(), Some(<[u8; 16]>::try_from(&SYN6[24..40]).unwrap()));
        rh[3] = 0;
        assert_eq!(ExtHeader::new_checked(&rh[..], protocol::ROUTING).unwrap().final_destination(), None);
        // Fragment header: offset 2896, last fragment, id 1 (as in
        // zeek/ipv6_frag_dns/ipv6-fragmented-dns.pcap, packet 4).
        let f = [17, 0, 0x0b, 0x50, 0, 0, 0, 1];
        let f = FragmentHeader::new_checked(&f[..]).unwrap();
        assert_eq!(
            (f.next_header(), f.frag_offset(), f.more_frags(), f.ident(), f.is_atomic()),
            (17, 2896, false, 1, false)
        );
        assert!(FragmentHeader::new_checked(&[17, 0, 0, 0, 0, 0, 0, 9][..]).unwrap().is_atomic());
    }
}
