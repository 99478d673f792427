//! The address type every layer above the decoder keys on (connections,
//! flows, records, the store), kept here so that the record side of the
//! graph shares it without linking the decoder.

/// An IP address stored as 16 bytes; IPv4 is stored v4-mapped (::ffff:a.b.c.d).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct IpAddr16(pub [u8; 16]);

impl IpAddr16 {
    #[inline]
    pub fn from_v4(b: [u8; 4]) -> Self {
        // Built in a register: byte stores followed by a 16-byte load of the
        // same array defeat store forwarding on the hot path. Little-endian
        // conversions are free on the machines this runs on.
        IpAddr16(((u128::from(u32::from_le_bytes(b)) << 96) | (0xffff_u128 << 80)).to_le_bytes())
    }
    pub fn is_v4(&self) -> bool {
        self.0[..10] == [0; 10] && self.0[10] == 0xff && self.0[11] == 0xff
    }
    /// 255.255.255.255, as Zeek's `IPAddr::IsBroadcast` (src/IPAddr.h): an
    /// IPv4 address whose four bytes are all 0xff (no IPv6 address is).
    #[inline]
    pub fn is_ipv4_broadcast(&self) -> bool {
        self.is_v4() && self.0[12..] == [0xff; 4]
    }
    /// The dotted quad of the IPv4 address `b` (`Ipv4Addr`'s text, as
    /// Zeek's logs write an address), left-aligned in 16 bytes, and its
    /// length (7 to 15): each octet's text copied from a table as one
    /// 4-byte block, the next overwriting what lies past its dot. The one
    /// IPv4 formatter of the logs and of DNS answers.
    #[inline(always)]
    pub fn v4_text(b: [u8; 4]) -> ([u8; 16], usize) {
        let mut t = [0u8; 16];
        let mut n = 0;
        for o in b {
            let (d, len) = OCTETS[o as usize];
            // n <= 12 before the last octet (three of at most 4 bytes).
            t[n & 15..(n & 15) + 4].copy_from_slice(&d);
            n += len as usize;
        }
        // Without the last dot.
        (t, n - 1)
    }

    pub fn to_std(&self) -> std::net::IpAddr {
        if self.is_v4() {
            std::net::IpAddr::V4(std::net::Ipv4Addr::new(
                self.0[12], self.0[13], self.0[14], self.0[15],
            ))
        } else {
            std::net::IpAddr::V6(std::net::Ipv6Addr::from(self.0))
        }
    }
}


/// Each byte value as dotted-quad text followed by a dot, and its length
/// with the dot: "7." is ([b'7', b'.', 0, 0], 2).
const OCTETS: [([u8; 4], u8); 256] = {
    let mut t = [([0u8; 4], 0u8); 256];
    let mut o = 0;
    while o < 256 {
        let mut d = [0u8; 4];
        let mut n = 0;
        if o >= 100 {
            d[n] = b'0' + (o / 100) as u8;
            n += 1;
        }
        if o >= 10 {
            d[n] = b'0' + (o / 10 % 10) as u8;
            n += 1;
        }
        d[n] = b'0' + (o % 10) as u8;
        d[n + 1] = b'.';
        t[o] = (d, n as u8 + 2);
        o += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    use super::*;

    /// Every octet value in every position, as `Ipv4Addr` writes it.
    #[test]
    fn v4_text_as_the_standard_library_writes_it() {
        for x in 0..=255u8 {
            for a in [[x, 0, 0, 0], [1, x, 10, 255], [100, 99, 9, x], [x, x, x, x], [255, 255, 255, x], [x, 200, 0, 99]] {
                let (t, n) = IpAddr16::v4_text(a);
                assert_eq!(&t[..n], std::net::Ipv4Addr::from(a).to_string().as_bytes(), "{a:?}");
            }
        }
    }
}
