//! Linux "cooked" capture, version 1 (LINKTYPE_LINUX_SLL, 113): the 16-byte
//! pseudo-header libpcap writes for `-i any` and for devices without a usable
//! link header.

use crate::link::{Net, Vlans};
use crate::{be16, ethernet, SkipReason};

mod field {
    use core::ops::Range;
    pub const PACKET_TYPE: Range<usize> = 0..2;
    pub const ARPHRD_TYPE: Range<usize> = 2..4;
    pub const ADDR_LEN: Range<usize> = 4..6;
    pub const ADDR: Range<usize> = 6..14;
    pub const PROTOCOL: Range<usize> = 14..16;
    pub const PAYLOAD: usize = PROTOCOL.end;
}

pub const HEADER_LEN: usize = field::PAYLOAD;

/// `protocol` values below 0x0600 that are not EtherTypes (from <linux/if_ether.h>).
pub mod protocol {
    /// Novell 802.3 frames without an 802.2 header.
    pub const ETH_P_802_3: u16 = 0x0001;
    /// 802.2 frames: an LLC header follows.
    pub const ETH_P_802_2: u16 = 0x0004;
}

/// ARPHRD_NETLINK: the protocol field holds a netlink family, never IP.
pub const ARPHRD_NETLINK: u16 = 824;

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

    /// 0 to us, 1 broadcast, 2 multicast, 3 to someone else, 4 sent by us.
    #[inline]
    pub fn packet_type(&self) -> u16 {
        be16(self.buffer.as_ref(), field::PACKET_TYPE.start)
    }

    #[inline]
    pub fn arphrd_type(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ARPHRD_TYPE.start)
    }

    #[inline]
    pub fn link_addr_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ADDR_LEN.start)
    }

    /// The link-layer address, at most 8 bytes (longer ones are cut by the format).
    #[inline]
    pub fn link_addr(&self) -> &[u8] {
        let n = usize::from(self.link_addr_len()).min(8);
        &self.buffer.as_ref()[field::ADDR.start..field::ADDR.start + n]
    }

    #[inline]
    pub fn protocol(&self) -> u16 {
        be16(self.buffer.as_ref(), field::PROTOCOL.start)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Header<&'a T> {
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

/// Shared by SLL and SLL2: the protocol field is an EtherType, except for the
/// small values Linux uses for non-Ethernet-II frames.
#[inline]
pub(crate) fn by_protocol<'a>(
    arphrd: u16,
    proto: u16,
    payload: &'a [u8],
    vlans: &mut Vlans,
) -> Result<(Net, &'a [u8]), SkipReason> {
    if arphrd == ARPHRD_NETLINK {
        return Err(SkipReason::NotIp);
    }
    match proto {
        protocol::ETH_P_802_2 => ethernet::llc_network(payload, vlans),
        p if p < ethernet::ethertype::MIN_ETHERTYPE => Err(SkipReason::NotIp),
        p => ethernet::by_ethertype(p, payload, vlans),
    }
}

#[inline]
pub(crate) fn network<'a>(data: &'a [u8], vlans: &mut Vlans) -> Result<(Net, &'a [u8]), SkipReason> {
    let h = Header::new_checked(data)?;
    by_protocol(h.arphrd_type(), h.protocol(), h.payload(), vlans)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// linktypes/tcpdump_tcp_handshake_nano_sll.pcap, packet 1: outgoing SYN.
    static SLL_SYN: [u8; 76] = [
        0x00, 0x04, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x00, 0x45, 0x00,
        0x00, 0x3c, 0x29, 0xa9, 0x40, 0x00, 0x40, 0x06, 0xdb, 0x5f, 0x83, 0x9b, 0xd7, 0x45, 0x89, 0x74, 0x51, 0x5e,
        0xb6, 0x40, 0x00, 0x50, 0x2f, 0x84, 0x2a, 0xcb, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0x6a, 0x40, 0x50, 0xc4,
        0x00, 0x00, 0x02, 0x04, 0x05, 0x50, 0x04, 0x02, 0x08, 0x0a, 0x43, 0x6a, 0x03, 0x62, 0x00, 0x00, 0x00, 0x00,
        0x01, 0x03, 0x03, 0x07,
    ];

    #[test]
    fn header() {
        let h = Header::new_checked(&SLL_SYN[..]).unwrap();
        // Sent by us, on a device of ARPHRD 512 (PPP) without a link address.
        assert_eq!((h.packet_type(), h.arphrd_type(), h.link_addr_len(), h.protocol()), (4, 512, 0, 0x0800));
        assert_eq!(h.link_addr(), &[] as &[u8]);
        assert_eq!(h.payload().len(), 60);
        let (net, ip) = network(&SLL_SYN, &mut Vlans::default()).unwrap();
        assert_eq!((net, ip.len()), (Net::V4, 60));
        assert_eq!(network(&SLL_SYN[..15], &mut Vlans::default()).err(), Some(SkipReason::Truncated));
    }
}
