//! Linux "cooked" capture, version 2 (LINKTYPE_LINUX_SLL2, 276): like SLL v1
//! with the protocol first and the interface index added (20 bytes).

use crate::link::{Net, Vlans};
use crate::{be16, be32, sll, SkipReason};

mod field {
    use core::ops::Range;
    pub const PROTOCOL: Range<usize> = 0..2;
    pub const RESERVED: Range<usize> = 2..4;
    pub const IF_INDEX: Range<usize> = 4..8;
    pub const ARPHRD_TYPE: Range<usize> = 8..10;
    pub const PACKET_TYPE: usize = 10;
    pub const ADDR_LEN: usize = 11;
    pub const ADDR: Range<usize> = 12..20;
    pub const PAYLOAD: usize = ADDR.end;
}

pub const HEADER_LEN: usize = field::PAYLOAD;

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
    pub fn protocol(&self) -> u16 {
        be16(self.buffer.as_ref(), field::PROTOCOL.start)
    }

    #[inline]
    pub fn reserved(&self) -> u16 {
        be16(self.buffer.as_ref(), field::RESERVED.start)
    }

    #[inline]
    pub fn if_index(&self) -> u32 {
        be32(self.buffer.as_ref(), field::IF_INDEX.start)
    }

    #[inline]
    pub fn arphrd_type(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ARPHRD_TYPE.start)
    }

    #[inline]
    pub fn packet_type(&self) -> u8 {
        self.buffer.as_ref()[field::PACKET_TYPE]
    }

    #[inline]
    pub fn link_addr_len(&self) -> u8 {
        self.buffer.as_ref()[field::ADDR_LEN]
    }

    #[inline]
    pub fn link_addr(&self) -> &[u8] {
        let n = usize::from(self.link_addr_len()).min(8);
        &self.buffer.as_ref()[field::ADDR.start..field::ADDR.start + n]
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Header<&'a T> {
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

#[inline]
pub(crate) fn network<'a>(data: &'a [u8], vlans: &mut Vlans) -> Result<(Net, &'a [u8]), SkipReason> {
    let h = Header::new_checked(data)?;
    sll::by_protocol(h.arphrd_type(), h.protocol(), h.payload(), vlans)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// linktypes/zeek_linux_dlt_sll2.pcap, packet 1 (first 48 bytes): ICMP echo on loopback.
    static SLL2_ICMP: [u8; 48] = [
        0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x04, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x45, 0x00, 0x00, 0x54, 0xaf, 0x8c, 0x40, 0x00, 0x40, 0x01, 0x07, 0x1a, 0xc0, 0x00, 0x02, 0x01,
        0xc0, 0x00, 0x02, 0x01, 0x08, 0x00, 0x66, 0xb4, 0x00, 0x08, 0x00, 0x01,
    ];

    #[test]
    fn header() {
        let h = Header::new_checked(&SLL2_ICMP[..]).unwrap();
        assert_eq!((h.protocol(), h.reserved(), h.if_index(), h.arphrd_type()), (0x0800, 0, 1, 772));
        assert_eq!((h.packet_type(), h.link_addr_len(), h.link_addr()), (0, 6, &[0u8; 6][..]));
        let (net, ip) = network(&SLL2_ICMP, &mut Vlans::default()).unwrap();
        assert_eq!((net, ip[0], ip.len()), (Net::V4, 0x45, 28));
        assert_eq!(network(&SLL2_ICMP[..19], &mut Vlans::default()).err(), Some(SkipReason::Truncated));
    }
}
