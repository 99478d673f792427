//! IPv4 header (RFC 791), options included through the IHL.
//!
//! `check_len` only validates what the getters read (20 bytes, IHL >= 5, the
//! whole header captured). Whether the total length makes sense is the
//! decoder's business: a capture may be cut by the snaplen (total length >
//! captured) or padded by the link layer (total length < captured).

use crate::{be16, checksum, SkipReason};

mod field {
    use core::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const TOTAL_LEN: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLG_OFF: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC_ADDR: Range<usize> = 12..16;
    pub const DST_ADDR: Range<usize> = 16..20;
}

/// Length of a header without options.
pub const MIN_HEADER_LEN: usize = field::DST_ADDR.end;

/// IP protocol numbers (shared with IPv6 next headers).
pub mod protocol {
    pub const HOPOPTS: u8 = 0;
    pub const ICMP: u8 = 1;
    pub const IPIP: u8 = 4;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const IPV6: u8 = 41;
    pub const ROUTING: u8 = 43;
    pub const FRAGMENT: u8 = 44;
    pub const GRE: u8 = 47;
    pub const ESP: u8 = 50;
    pub const AH: u8 = 51;
    pub const ICMPV6: u8 = 58;
    pub const NO_NEXT: u8 = 59;
    pub const DSTOPTS: u8 = 60;
    pub const MOBILITY: u8 = 135;
    pub const HIP: u8 = 139;
    pub const SHIM6: u8 = 140;
}

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
    /// `Malformed` when the IHL is below 5.
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
    pub fn version(&self) -> u8 {
        self.fixed()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL * 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.fixed()[field::VER_IHL] & 0x0f) * 4
    }

    #[inline]
    pub fn dscp(&self) -> u8 {
        self.fixed()[field::DSCP_ECN] >> 2
    }

    #[inline]
    pub fn ecn(&self) -> u8 {
        self.fixed()[field::DSCP_ECN] & 0x03
    }

    #[inline]
    pub fn total_len(&self) -> u16 {
        be16(self.fixed(), field::TOTAL_LEN.start)
    }

    #[inline]
    pub fn ident(&self) -> u16 {
        be16(self.fixed(), field::IDENT.start)
    }

    #[inline]
    pub fn dont_frag(&self) -> bool {
        self.fixed()[field::FLG_OFF.start] & 0x40 != 0
    }

    #[inline]
    pub fn more_frags(&self) -> bool {
        self.fixed()[field::FLG_OFF.start] & 0x20 != 0
    }

    /// Fragment offset in bytes.
    #[inline]
    pub fn frag_offset(&self) -> u32 {
        u32::from(be16(self.fixed(), field::FLG_OFF.start) & 0x1fff) * 8
    }

    /// True for any fragment, including the first (MF set, offset 0).
    #[inline]
    pub fn is_fragment(&self) -> bool {
        be16(self.fixed(), field::FLG_OFF.start) & 0x3fff != 0
    }

    #[inline]
    pub fn ttl(&self) -> u8 {
        self.fixed()[field::TTL]
    }

    #[inline]
    pub fn protocol(&self) -> u8 {
        self.fixed()[field::PROTOCOL]
    }

    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.fixed(), field::CHECKSUM.start)
    }

    #[inline]
    pub fn src_addr(&self) -> [u8; 4] {
        let b = &self.fixed()[field::SRC_ADDR];
        [b[0], b[1], b[2], b[3]]
    }

    #[inline]
    pub fn dst_addr(&self) -> [u8; 4] {
        let b = &self.fixed()[field::DST_ADDR];
        [b[0], b[1], b[2], b[3]]
    }

    /// The header, options included.
    #[inline]
    pub fn header(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.header_len()]
    }

    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[MIN_HEADER_LEN..self.header_len()]
    }

    /// True when the header checksum is right.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        if self.header_len() == MIN_HEADER_LEN {
            // Nearly every header has no options: five words, no loop.
            let h = self.fixed();
            let w = |i: usize| u64::from(u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]));
            return checksum::is_valid(w(0) + w(4) + w(8) + w(12) + w(16));
        }
        checksum::is_valid(checksum::sum(self.header(), 0))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Source and destination addresses as on the wire (8 bytes).
    #[inline]
    pub fn addrs(&self) -> &'a [u8; 8] {
        let b: &'a [u8] = self.buffer.as_ref();
        match b.get(field::SRC_ADDR.start..).and_then(|b| b.first_chunk::<8>()) {
            Some(a) => a,
            None => &[0; 8],
        }
    }

    /// The captured payload, ending at the total length (link-layer padding
    /// excluded) or at the end of the capture, whichever comes first.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        let b: &'a [u8] = self.buffer.as_ref();
        let hl = self.header_len();
        let end = usize::from(self.total_len()).clamp(hl, b.len());
        &b[hl..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// zeek/tcp_bad_checksum/syn-bad.pcap, packet 1, from the IP header on
    /// (the TCP checksum is the bad one; the IP header is fine).
    static SYN: [u8; 64] = [
        0x45, 0x00, 0x00, 0x40, 0xdf, 0x8e, 0x40, 0x00, 0x40, 0x06, 0x6d, 0xd3, 0x8d, 0x8e, 0xe4, 0x05, 0xc0, 0x96,
        0xbb, 0x2b, 0xe9, 0xd0, 0x00, 0x50, 0xfe, 0x21, 0x32, 0x3a, 0x00, 0x00, 0x00, 0x00, 0xb0, 0x02, 0xff, 0xff,
        0x99, 0x99, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x01, 0x03, 0x03, 0x04, 0x01, 0x01, 0x08, 0x0a, 0x16, 0x4a,
        0xdd, 0x20, 0x00, 0x00, 0x00, 0x00, 0x04, 0x02, 0x00, 0x00,
    ];

    #[test]
    fn fields() {
        let p = Packet::new_checked(&SYN[..]).unwrap();
        assert_eq!((p.version(), p.header_len(), p.dscp(), p.ecn(), p.total_len()), (4, 20, 0, 0, 64));
        assert_eq!(
            (p.ident(), p.dont_frag(), p.more_frags(), p.frag_offset(), p.is_fragment()),
            (0xdf8e, true, false, 0, false)
        );
        assert_eq!((p.ttl(), p.protocol(), p.checksum()), (64, protocol::TCP, 0x6dd3));
        assert_eq!((p.src_addr(), p.dst_addr()), ([141, 142, 228, 5], [192, 150, 187, 43]));
        assert_eq!(p.addrs(), &[141, 142, 228, 5, 192, 150, 187, 43]);
        assert!(p.verify_checksum());
        assert_eq!((p.options(), p.payload().len()), (&[][..], 44));
    }

    #[test]
    fn lengths() {
        // Padding after the datagram is not payload; a cut leaves what is there.
        let mut padded = SYN.to_vec();
        padded.extend_from_slice(&[0; 6]);
        assert_eq!(Packet::new_checked(&padded[..]).unwrap().payload().len(), 44);
        assert_eq!(Packet::new_checked(&SYN[..30]).unwrap().payload().len(), 10);
        assert_eq!(Packet::new_checked(&SYN[..19]).err(), Some(SkipReason::Truncated));
        let mut opts = SYN;
        opts[0] = 0x46;
        assert_eq!(Packet::new_checked(&opts[..23]).err(), Some(SkipReason::Truncated));
        assert_eq!(Packet::new_checked(&opts[..]).unwrap().options(), &SYN[20..24]);
        opts[0] = 0x44;
        assert_eq!(Packet::new_checked(&opts[..]).err(), Some(SkipReason::Malformed));
        // A fragment: MF set, offset 185 * 8.
        let mut frag = SYN;
        frag[6] = 0x20;
        frag[7] = 185;
        let p = Packet::new_unchecked(&frag[..]);
        assert_eq!((p.more_frags(), p.frag_offset(), p.is_fragment()), (true, 1480, true));
        assert!(!p.verify_checksum());
    }
}
