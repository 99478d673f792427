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

