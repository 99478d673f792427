//! FDDI (LINKTYPE_FDDI, 10): frame control byte and two MAC addresses, then an
//! 802.2 LLC header (SNAP for IP). Zeek decodes it, and old traces use it.

use crate::link::{Net, Vlans};
use crate::{ethernet, SkipReason};

mod field {
    use core::ops::Range;
    pub const FRAME_CONTROL: usize = 0;
    pub const DESTINATION: Range<usize> = 1..7;
    pub const SOURCE: Range<usize> = 7..13;
    pub const PAYLOAD: usize = SOURCE.end;
}

pub const HEADER_LEN: usize = field::PAYLOAD;

#[derive(Debug, Clone, Copy)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Frame { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, SkipReason> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
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
    pub fn frame_control(&self) -> u8 {
        self.buffer.as_ref()[field::FRAME_CONTROL]
    }

    /// Frame control format bits `CLFFZZZZ` with FF = 01: an LLC frame (the
    /// others are MAC and station management frames).
    #[inline]
    pub fn is_llc(&self) -> bool {
        self.frame_control() & 0x30 == 0x10
    }

    /// Addresses as on the wire (FDDI captures may be bit-swapped; we never
    /// interpret them).
    #[inline]
    pub fn destination(&self) -> [u8; 6] {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DESTINATION]);
        a
    }

    #[inline]
    pub fn source(&self) -> [u8; 6] {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SOURCE]);
        a
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Frame<&'a T> {
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

#[inline]
pub(crate) fn network<'a>(data: &'a [u8], vlans: &mut Vlans) -> Result<(Net, &'a [u8]), SkipReason> {
    let f = Frame::new_checked(data)?;
    if !f.is_llc() {
        return Err(SkipReason::NotIp);
    }
    ethernet::llc_network(f.payload(), vlans)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// zeek/llc_fddi_large/llc.pcap, packet 1: FDDI, LLC/SNAP, IPv4 TCP RST
    /// (captured with snaplen 68).
    static FDDI_RST: [u8; 68] = [
        0x50, 0xaa, 0x00, 0x04, 0x00, 0x82, 0xa7, 0xaa, 0x00, 0x04, 0x00, 0x83, 0xa7, 0xaa, 0xaa, 0x03, 0x00, 0x00,
        0x00, 0x08, 0x00, 0x45, 0x00, 0x00, 0x28, 0x12, 0x52, 0x00, 0x00, 0x08, 0x06, 0x49, 0x48, 0x80, 0x03, 0x8c,
        0x84, 0xc2, 0x8c, 0x88, 0x22, 0x07, 0xf3, 0x00, 0x50, 0x52, 0xc7, 0x3e, 0x0d, 0x52, 0xc7, 0x3e, 0x0d, 0x50,
        0x04, 0x20, 0x00, 0x0e, 0xbe, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x01,
    ];

    #[test]
    fn frame() {
        let f = Frame::new_checked(&FDDI_RST[..]).unwrap();
        assert_eq!(f.frame_control(), 0x50);
        assert!(f.is_llc());
        assert_eq!(f.destination(), [0xaa, 0x00, 0x04, 0x00, 0x82, 0xa7]);
        assert_eq!(f.source(), [0xaa, 0x00, 0x04, 0x00, 0x83, 0xa7]);
        let (net, ip) = network(&FDDI_RST, &mut Vlans::default()).unwrap();
        assert_eq!((net, ip[0], ip.len()), (Net::V4, 0x45, 47));
        // A station management frame (FC 0x41) carries no IP.
        let mut smt = FDDI_RST;
        smt[0] = 0x41;
        assert_eq!(network(&smt, &mut Vlans::default()).err(), Some(SkipReason::NotIp));
    }
}
