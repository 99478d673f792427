//! BSD loopback encapsulation: a 4-byte address family before the IP header.
//!
//! LINKTYPE_NULL (0) stores the family in the byte order of the machine that
//! wrote the capture, which the file does not record: we take whichever order
//! gives a small number, as libpcap and Wireshark do. LINKTYPE_LOOP (108,
//! OpenBSD) stores it in network byte order.
//!
//! AF_INET is 2 everywhere; AF_INET6 differs between the BSDs (24 on
//! NetBSD/OpenBSD/BSD/OS, 28 on FreeBSD/DragonFly, 30 on macOS), and a capture
//! may come from any of them.

use crate::link::Net;
use crate::SkipReason;

pub const HEADER_LEN: usize = 4;

pub mod family {
    pub const INET: u32 = 2;
    pub const INET6_BSD: u32 = 24;
    pub const INET6_FREEBSD: u32 = 28;
    pub const INET6_DARWIN: u32 = 30;
}

#[derive(Debug, Clone, Copy)]
pub struct Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Header<T> {
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Header { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, SkipReason> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    #[inline]
    pub fn check_len(&self) -> Result<(), SkipReason> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(SkipReason::Truncated)
        } else {
            Ok(())
        }
    }

    #[inline]
    fn raw(&self) -> [u8; 4] {
        let b = self.buffer.as_ref();
        [b[0], b[1], b[2], b[3]]
    }

    /// The family in network byte order (LINKTYPE_LOOP).
    #[inline]
    pub fn family_be(&self) -> u32 {
        u32::from_be_bytes(self.raw())
    }

    /// The family in an unknown byte order (LINKTYPE_NULL): families are small
    /// numbers, so a value with high bits set was written big-endian.
    #[inline]
    pub fn family_any_order(&self) -> u32 {
        let le = u32::from_le_bytes(self.raw());
        if le & 0xffff_0000 != 0 {
            le.swap_bytes()
        } else {
            le
        }
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Header<&'a T> {
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

#[inline]
pub(crate) fn network(data: &[u8], network_order: bool) -> Result<(Net, &[u8]), SkipReason> {
    let h = Header::new_checked(data)?;
    let af = if network_order { h.family_be() } else { h.family_any_order() };
    match af {
        family::INET => Ok((Net::V4, h.payload())),
        family::INET6_BSD | family::INET6_FREEBSD | family::INET6_DARWIN => Ok((Net::V6, h.payload())),
        _ => Err(SkipReason::NotIp),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// linktypes/tcpdump_tcp_rst_diag_null.pcap: AF_INET little-endian, IPv4 RST.
    static NULL_RST: [u8; 52] = [
        0x02, 0x00, 0x00, 0x00, 0x45, 0x00, 0x00, 0x30, 0x00, 0x00, 0x00, 0x00, 0xff, 0x06, 0x39, 0x1d, 0xc0, 0x00,
        0x02, 0x01, 0xc0, 0xa8, 0x00, 0x01, 0x9b, 0x95, 0x1f, 0x90, 0x00, 0x00, 0x00, 0x01, 0x13, 0xf4, 0x9a, 0xf1,
        0x50, 0x14, 0x00, 0x00, 0x86, 0xa8, 0x00, 0x00, 0x33, 0xaa, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn families() {
        let h = Header::new_checked(&NULL_RST[..]).unwrap();
        assert_eq!((h.family_any_order(), h.family_be()), (family::INET, 0x0200_0000));
        let (net, ip) = network(&NULL_RST, false).unwrap();
        assert_eq!((net, ip.len()), (Net::V4, 48));
        // The same family written by a big-endian host, and as LINKTYPE_LOOP.
        let be = [0, 0, 0, 2];
        assert_eq!(Header::new_checked(&be[..]).unwrap().family_any_order(), 2);
        assert_eq!(network(&be, true).unwrap().0, Net::V4);
        assert_eq!(network(&NULL_RST, true).err(), Some(SkipReason::NotIp));
        assert_eq!(network(&NULL_RST[..3], false).err(), Some(SkipReason::Truncated));
    }
}
