//! PPP (LINKTYPE_PPP 9, LINKTYPE_PPP_HDLC 50), PPPoE sessions (LINKTYPE_PPP_ETHER
//! 51 and EtherType 0x8864) and Cisco HDLC (LINKTYPE_C_HDLC 104, and the Cisco
//! framing that LINKTYPE_PPP_HDLC also allows).

use crate::link::{Net, Vlans};
use crate::{be16, ethernet, SkipReason};

/// PPP protocol numbers that carry IP.
pub mod protocol {
    pub const IPV4: u16 = 0x0021;
    pub const IPV6: u16 = 0x0057;
}

/// RFC 1662 HDLC-like framing: all-stations address, unnumbered information.
pub const ADDRESS: u8 = 0xff;
pub const CONTROL: u8 = 0x03;

/// A PPP header: optional address/control bytes, then a protocol field of one
/// byte (protocol field compression, RFC 1661 section 6.5: a compressed value is
/// odd) or two bytes.
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
        let b = self.buffer.as_ref();
        if b == [ADDRESS] {
            // The address byte, cut before the control byte.
            return Err(SkipReason::Truncated);
        }
        let start = self.protocol_offset();
        match b.get(start) {
            None => Err(SkipReason::Truncated),
            Some(p) if p & 1 == 0 && b.len() < start + 2 => Err(SkipReason::Truncated),
            Some(_) => Ok(()),
        }
    }

    /// True when the frame starts with the 0xff 0x03 address/control bytes
    /// (they may be compressed away, RFC 1661 section 6.6).
    #[inline]
    pub fn has_address_control(&self) -> bool {
        let b = self.buffer.as_ref();
        b.len() >= 2 && b[0] == ADDRESS && b[1] == CONTROL
    }

    #[inline]
    fn protocol_offset(&self) -> usize {
        if self.has_address_control() {
            2
        } else {
            0
        }
    }

    #[inline]
    fn protocol_compressed(&self) -> bool {
        self.buffer.as_ref()[self.protocol_offset()] & 1 == 1
    }

    /// The protocol number, expanded to 16 bits when compressed.
    #[inline]
    pub fn protocol(&self) -> u16 {
        let at = self.protocol_offset();
        let b = self.buffer.as_ref();
        if self.protocol_compressed() {
            u16::from(b[at])
        } else {
            be16(b, at)
        }
    }

    #[inline]
    pub fn header_len(&self) -> usize {
        self.protocol_offset() + if self.protocol_compressed() { 1 } else { 2 }
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Header<&'a T> {
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

/// The PPPoE session header (RFC 2516), without the PPP protocol that follows.
pub mod pppoe {
    use crate::{be16, SkipReason};

    mod field {
        use core::ops::Range;
        pub const VER_TYPE: usize = 0;
        pub const CODE: usize = 1;
        pub const SESSION_ID: Range<usize> = 2..4;
        pub const LENGTH: Range<usize> = 4..6;
        pub const PAYLOAD: usize = LENGTH.end;
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
        pub fn version(&self) -> u8 {
            self.buffer.as_ref()[field::VER_TYPE] >> 4
        }

        #[inline]
        pub fn pppoe_type(&self) -> u8 {
            self.buffer.as_ref()[field::VER_TYPE] & 0x0f
        }

        /// 0 for session data.
        #[inline]
        pub fn code(&self) -> u8 {
            self.buffer.as_ref()[field::CODE]
        }

        #[inline]
        pub fn session_id(&self) -> u16 {
            be16(self.buffer.as_ref(), field::SESSION_ID.start)
        }

        /// Length of the PPP frame that follows.
        #[inline]
        pub fn length(&self) -> u16 {
            be16(self.buffer.as_ref(), field::LENGTH.start)
        }
    }

    impl<'a, T: AsRef<[u8]> + ?Sized> Header<&'a T> {
        #[inline]
        pub fn payload(&self) -> &'a [u8] {
            &self.buffer.as_ref()[field::PAYLOAD..]
        }
    }
}

/// Cisco HDLC: address (0x0f unicast, 0x8f broadcast), control 0, EtherType.
pub mod chdlc {
    use crate::{be16, SkipReason};

    pub const ADDRESS_UNICAST: u8 = 0x0f;
    pub const ADDRESS_BROADCAST: u8 = 0x8f;
    pub const HEADER_LEN: usize = 4;

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
        pub fn address(&self) -> u8 {
            self.buffer.as_ref()[0]
        }

        #[inline]
        pub fn control(&self) -> u8 {
            self.buffer.as_ref()[1]
        }

        #[inline]
        pub fn protocol(&self) -> u16 {
            be16(self.buffer.as_ref(), 2)
        }
    }

    impl<'a, T: AsRef<[u8]> + ?Sized> Header<&'a T> {
        #[inline]
        pub fn payload(&self) -> &'a [u8] {
            &self.buffer.as_ref()[HEADER_LEN..]
        }
    }
}

/// LINKTYPE_PPP, and the PPP frame inside a PPPoE session.
#[inline]
pub(crate) fn ppp_network(data: &[u8]) -> Result<(Net, &[u8]), SkipReason> {
    let h = Header::new_checked(data)?;
    match h.protocol() {
        protocol::IPV4 => Ok((Net::V4, h.payload())),
        protocol::IPV6 => Ok((Net::V6, h.payload())),
        // LCP, IPCP, compressed TCP/IP (VJ), multilink, ...
        _ => Err(SkipReason::NotIp),
    }
}

/// LINKTYPE_PPP_HDLC: PPP in HDLC-like framing, or Cisco HDLC; the first
/// byte tells them apart.
#[inline]
pub(crate) fn hdlc_network<'a>(data: &'a [u8], vlans: &mut Vlans) -> Result<(Net, &'a [u8]), SkipReason> {
    match data.first() {
        Some(&chdlc::ADDRESS_UNICAST) | Some(&chdlc::ADDRESS_BROADCAST) => chdlc_network(data, vlans),
        _ => ppp_network(data),
    }
}

#[inline]
pub(crate) fn chdlc_network<'a>(data: &'a [u8], vlans: &mut Vlans) -> Result<(Net, &'a [u8]), SkipReason> {
    let h = chdlc::Header::new_checked(data)?;
    match h.protocol() {
        p if p < ethernet::ethertype::MIN_ETHERTYPE => Err(SkipReason::NotIp),
        p => ethernet::by_ethertype(p, h.payload(), vlans),
    }
}

/// A PPPoE session header followed by PPP (no address/control bytes there,
/// but accepting them costs nothing).
#[inline]
pub(crate) fn pppoe_network(data: &[u8]) -> Result<(Net, &[u8]), SkipReason> {
    let h = pppoe::Header::new_checked(data)?;
    if h.code() != 0 {
        // Discovery packets (PADI, PADO, ...) on the session EtherType.
        return Err(SkipReason::NotIp);
    }
    ppp_network(h.payload())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// linktypes/zeek_ppp_quic_interop_retry.pcap, packet 1: PPP without
    /// address/control, protocol 0x0057, IPv6 neighbour solicitation.
    static PPP_NS: [u8; 74] = [
        0x00, 0x57, 0x60, 0x00, 0x00, 0x01, 0x00, 0x20, 0x3a, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x01, 0xff, 0x00, 0x00, 0x03, 0x87, 0x00, 0xe5, 0x47, 0x00, 0x00, 0x00, 0x00, 0xfd, 0x00, 0xca, 0xfe,
        0xca, 0xfe, 0x00, 0x50, 0x02, 0x00, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x03, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x03,
    ];

    #[test]
    fn ppp_header() {
        let h = Header::new_checked(&PPP_NS[..]).unwrap();
        assert!(!h.has_address_control());
        assert_eq!((h.protocol(), h.header_len(), h.payload().len()), (protocol::IPV6, 2, 72));
        assert_eq!(ppp_network(&PPP_NS).unwrap().0, Net::V6);
        let framed = [&[ADDRESS, CONTROL][..], &PPP_NS[..]].concat();
        let h = Header::new_checked(&framed[..]).unwrap();
        assert!(h.has_address_control());
        assert_eq!((h.protocol(), h.header_len()), (protocol::IPV6, 4));
        // Protocol field compression: one odd byte.
        let h = Header::new_checked(&[0x21, 0x45][..]).unwrap();
        assert_eq!((h.protocol(), h.header_len()), (protocol::IPV4, 1));
        assert_eq!(Header::new_checked(&[0x00][..]).err(), Some(SkipReason::Truncated));
        assert_eq!(Header::new_checked(&[][..]).err(), Some(SkipReason::Truncated));
    }

    #[test]
    fn pppoe_and_chdlc() {
        let s = [0x11, 0x00, 0x12, 0x34, 0x00, 0x4c];
        let h = pppoe::Header::new_checked(&s[..]).unwrap();
        assert_eq!((h.version(), h.pppoe_type(), h.code(), h.session_id(), h.length()), (1, 1, 0, 0x1234, 76));
        let framed = [&s[..], &PPP_NS[..]].concat();
        assert_eq!(pppoe_network(&framed).unwrap().1.len(), 72);
        let c = chdlc::Header::new_checked(&[0x0f, 0x00, 0x86, 0xdd][..]).unwrap();
        assert_eq!((c.address(), c.control(), c.protocol()), (0x0f, 0, 0x86dd));
    }
}
