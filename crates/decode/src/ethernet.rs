//! Ethernet II and IEEE 802.3 frames, with what can sit between the MAC header
//! and IP: 802.1Q / 802.1ad / Q-in-Q tags ([`vlan`]), MPLS label stacks
//! ([`mpls`]), LLC/SNAP headers ([`llc`]) and PPPoE sessions
//! ([`crate::ppp::pppoe`]).
//!
//! As in every view of this crate, `new_unchecked` only wraps, `check_len`
//! validates every offset the getters use, and no getter panics after a
//! successful `check_len`.

use crate::link::{Net, Vlans};
use crate::{be16, SkipReason};

/// EtherType values this crate acts on.
pub mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const VLAN: u16 = 0x8100;
    pub const IPV6: u16 = 0x86dd;
    pub const MPLS_UNICAST: u16 = 0x8847;
    pub const MPLS_MULTICAST: u16 = 0x8848;
    pub const PPPOE_DISCOVERY: u16 = 0x8863;
    pub const PPPOE_SESSION: u16 = 0x8864;
    /// 802.1ad service tag.
    pub const QINQ: u16 = 0x88a8;
    /// Pre-standard Q-in-Q outer tag used by some switches.
    pub const QINQ_OLD: u16 = 0x9100;
    /// Values below this in the EtherType position are 802.3 lengths.
    pub const MIN_ETHERTYPE: u16 = 0x0600;
}

mod field {
    use core::ops::Range;
    pub const DESTINATION: Range<usize> = 0..6;
    pub const SOURCE: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
    pub const PAYLOAD: usize = ETHERTYPE.end;
}

/// Length of the Ethernet II / 802.3 MAC header.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// A read-only view of an Ethernet frame (without FCS).
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

    /// The header as an array, so that getters compile without bounds
    /// checks. Only valid after `check_len`.
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
    pub fn destination(&self) -> [u8; 6] {
        let mut a = [0; 6];
        a.copy_from_slice(&self.fixed()[field::DESTINATION]);
        a
    }

    #[inline]
    pub fn source(&self) -> [u8; 6] {
        let mut a = [0; 6];
        a.copy_from_slice(&self.fixed()[field::SOURCE]);
        a
    }

    /// EtherType, or the 802.3 length when below [`ethertype::MIN_ETHERTYPE`].
    #[inline]
    pub fn ethertype(&self) -> u16 {
        be16(self.fixed(), field::ETHERTYPE.start)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Frame<&'a T> {
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

/// 802.1Q / 802.1ad tag: the 4 bytes after a 0x8100/0x88a8/0x9100 EtherType.
pub mod vlan {
    use crate::{be16, SkipReason};

    mod field {
        use core::ops::Range;
        pub const TCI: Range<usize> = 0..2;
        pub const ETHERTYPE: Range<usize> = 2..4;
        pub const PAYLOAD: usize = ETHERTYPE.end;
    }

    pub const HEADER_LEN: usize = field::PAYLOAD;

    #[derive(Debug, Clone, Copy)]
    pub struct Tag<T: AsRef<[u8]>> {
        buffer: T,
    }

    impl<T: AsRef<[u8]>> Tag<T> {
        #[inline]
        pub const fn new_unchecked(buffer: T) -> Self {
            Tag { buffer }
        }

        #[inline]
        pub fn new_checked(buffer: T) -> Result<Self, SkipReason> {
            let t = Self::new_unchecked(buffer);
            t.check_len()?;
            Ok(t)
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
        pub fn tci(&self) -> u16 {
            be16(self.buffer.as_ref(), field::TCI.start)
        }

        /// Priority code point.
        #[inline]
        pub fn pcp(&self) -> u8 {
            (self.tci() >> 13) as u8
        }

        /// Drop eligible indicator.
        #[inline]
        pub fn dei(&self) -> bool {
            self.tci() & 0x1000 != 0
        }

        #[inline]
        pub fn vid(&self) -> u16 {
            self.tci() & 0x0fff
        }

        /// EtherType of what follows the tag.
        #[inline]
        pub fn ethertype(&self) -> u16 {
            be16(self.buffer.as_ref(), field::ETHERTYPE.start)
        }
    }

    impl<'a, T: AsRef<[u8]> + ?Sized> Tag<&'a T> {
        #[inline]
        pub fn payload(&self) -> &'a [u8] {
            &self.buffer.as_ref()[field::PAYLOAD..]
        }
    }
}

/// One 4-byte MPLS label stack entry (RFC 3032).
pub mod mpls {
    use crate::{be32, SkipReason};

    pub const ENTRY_LEN: usize = 4;

    #[derive(Debug, Clone, Copy)]
    pub struct Entry<T: AsRef<[u8]>> {
        buffer: T,
    }

    impl<T: AsRef<[u8]>> Entry<T> {
        #[inline]
        pub const fn new_unchecked(buffer: T) -> Self {
            Entry { buffer }
        }

        #[inline]
        pub fn new_checked(buffer: T) -> Result<Self, SkipReason> {
            let e = Self::new_unchecked(buffer);
            e.check_len()?;
            Ok(e)
        }

        #[inline]
        pub fn check_len(&self) -> Result<(), SkipReason> {
            if self.buffer.as_ref().len() < ENTRY_LEN {
                Err(SkipReason::Truncated)
            } else {
                Ok(())
            }
        }

        #[inline]
        fn word(&self) -> u32 {
            be32(self.buffer.as_ref(), 0)
        }

        #[inline]
        pub fn label(&self) -> u32 {
            self.word() >> 12
        }

        /// Traffic class (formerly EXP).
        #[inline]
        pub fn traffic_class(&self) -> u8 {
            ((self.word() >> 9) & 0x7) as u8
        }

        #[inline]
        pub fn bottom_of_stack(&self) -> bool {
            self.word() & 0x100 != 0
        }

        #[inline]
        pub fn ttl(&self) -> u8 {
            self.word() as u8
        }
    }

    impl<'a, T: AsRef<[u8]> + ?Sized> Entry<&'a T> {
        /// Bytes after this entry (the next entry, or the payload at the bottom).
        #[inline]
        pub fn rest(&self) -> &'a [u8] {
            &self.buffer.as_ref()[ENTRY_LEN..]
        }
    }
}

/// IEEE 802.2 LLC header, with the SNAP extension when DSAP = SSAP = 0xAA.
pub mod llc {
    use crate::{be16, SkipReason};

    pub const SAP_SNAP: u8 = 0xaa;
    /// Unnumbered information: the only control value SNAP uses.
    pub const CONTROL_UI: u8 = 0x03;
    pub const SNAP_HEADER_LEN: usize = 8;

    mod field {
        pub const DSAP: usize = 0;
        pub const SSAP: usize = 1;
        pub const CONTROL: usize = 2;
        pub const SNAP_OUI: core::ops::Range<usize> = 3..6;
        pub const SNAP_TYPE: core::ops::Range<usize> = 6..8;
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

        /// Checks the base header, and the SNAP extension when [`Header::is_snap`].
        #[inline]
        pub fn check_len(&self) -> Result<(), SkipReason> {
            let b = self.buffer.as_ref();
            if b.len() < 3 || b.len() < self.header_len_unchecked(b) {
                Err(SkipReason::Truncated)
            } else {
                Ok(())
            }
        }

        fn header_len_unchecked(&self, b: &[u8]) -> usize {
            if b[field::DSAP] == SAP_SNAP && b[field::SSAP] == SAP_SNAP && b[field::CONTROL] == CONTROL_UI {
                SNAP_HEADER_LEN
            } else if b[field::CONTROL] & 0x03 == 0x03 {
                // U-format control field: one byte.
                3
            } else {
                // I- and S-format control fields are two bytes.
                4
            }
        }

        #[inline]
        pub fn header_len(&self) -> usize {
            self.header_len_unchecked(self.buffer.as_ref())
        }

        #[inline]
        pub fn dsap(&self) -> u8 {
            self.buffer.as_ref()[field::DSAP]
        }

        #[inline]
        pub fn ssap(&self) -> u8 {
            self.buffer.as_ref()[field::SSAP]
        }

        #[inline]
        pub fn control(&self) -> u8 {
            self.buffer.as_ref()[field::CONTROL]
        }

        #[inline]
        pub fn is_snap(&self) -> bool {
            self.header_len() == SNAP_HEADER_LEN
        }

        /// SNAP organisation code (only meaningful when [`Header::is_snap`]).
        #[inline]
        pub fn snap_oui(&self) -> u32 {
            if !self.is_snap() {
                return 0;
            }
            let b = &self.buffer.as_ref()[field::SNAP_OUI];
            u32::from_be_bytes([0, b[0], b[1], b[2]])
        }

        /// SNAP protocol id: an EtherType for OUI 0 and 0x0000f8.
        #[inline]
        pub fn snap_type(&self) -> u16 {
            if !self.is_snap() {
                return 0;
            }
            be16(self.buffer.as_ref(), field::SNAP_TYPE.start)
        }
    }

    impl<'a, T: AsRef<[u8]> + ?Sized> Header<&'a T> {
        #[inline]
        pub fn payload(&self) -> &'a [u8] {
            let b: &'a [u8] = self.buffer.as_ref();
            &b[self.header_len_unchecked(b)..]
        }
    }
}

/// Strips an Ethernet frame down to its network layer.
#[inline(always)]
pub(crate) fn network<'a>(data: &'a [u8], vlans: &mut Vlans) -> Result<(Net, &'a [u8]), SkipReason> {
    let frame = Frame::new_checked(data)?;
    let ty = frame.ethertype();
    if ty < ethertype::MIN_ETHERTYPE {
        return llc_network(frame.payload(), vlans);
    }
    by_ethertype(ty, frame.payload(), vlans)
}

/// Follows an EtherType through VLAN tags, MPLS and PPPoE down to IP.
///
/// The loop is bounded: every tag it steps over consumes 4 bytes.
#[inline(always)]
pub(crate) fn by_ethertype<'a>(
    mut ty: u16,
    mut data: &'a [u8],
    vlans: &mut Vlans,
) -> Result<(Net, &'a [u8]), SkipReason> {
    loop {
        match ty {
            ethertype::IPV4 => return Ok((Net::V4, data)),
            ethertype::IPV6 => return Ok((Net::V6, data)),
            ethertype::VLAN | ethertype::QINQ | ethertype::QINQ_OLD => {
                let tag = vlan::Tag::new_checked(data)?;
                vlans.push(tag.vid());
                ty = tag.ethertype();
                data = tag.payload();
            }
            ethertype::MPLS_UNICAST | ethertype::MPLS_MULTICAST => return mpls_network(data),
            ethertype::PPPOE_SESSION => return crate::ppp::pppoe_network(data),
            _ => return Err(SkipReason::NotIp),
        }
    }
}

/// Pops an MPLS label stack. MPLS does not say what the payload is: like
/// Zeek and Wireshark we guess from the first nibble. Anything else (a
/// pseudowire control word, Ethernet over MPLS) is a tunnel we do not decode.
fn mpls_network(mut data: &[u8]) -> Result<(Net, &[u8]), SkipReason> {
    loop {
        let e = mpls::Entry::new_checked(data)?;
        data = e.rest();
        if e.bottom_of_stack() {
            break;
        }
    }
    match data.first() {
        None => Err(SkipReason::Truncated),
        Some(b) if b >> 4 == 4 => Ok((Net::V4, data)),
        Some(b) if b >> 4 == 6 => Ok((Net::V6, data)),
        Some(_) => Err(SkipReason::TunnelNotDecoded),
    }
}

/// An 802.2 LLC payload (802.3 frames, FDDI, Linux cooked LLC): only SNAP with
/// an EtherType can carry IP here.
pub(crate) fn llc_network<'a>(data: &'a [u8], vlans: &mut Vlans) -> Result<(Net, &'a [u8]), SkipReason> {
    let h = llc::Header::new_checked(data)?;
    // OUI 0 is RFC 1042 encapsulation, 0x0000f8 the 802.1H bridge tunnel: both
    // carry EtherTypes. Other OUIs use private protocol ids.
    if h.is_snap() && (h.snap_oui() == 0 || h.snap_oui() == 0xf8) {
        by_ethertype(h.snap_type(), h.payload(), vlans)
    } else {
        Err(SkipReason::NotIp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// zeek/vlan_qinq/q-in-q.pcap, packet 1: two 802.1Q tags (13, 10), IPv4/UDP.
    static QINQ_FRAME: [u8; 68] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0xc0, 0xe4, 0x01, 0x2c, 0xed, 0x81, 0x00, 0x00, 0x0d, 0x81, 0x00,
        0x00, 0x0a, 0x08, 0x00, 0x45, 0x00, 0x00, 0x2e, 0x47, 0x96, 0x00, 0x00, 0x40, 0x11, 0x74, 0x9e, 0xac, 0x13,
        0x33, 0x25, 0xac, 0x13, 0x33, 0x3f, 0xba, 0xc0, 0xba, 0xc0, 0x00, 0x1a, 0xb9, 0xda, 0x81, 0x0b, 0x00, 0x12,
        0x01, 0x20, 0xff, 0xff, 0x00, 0xff, 0x10, 0x08, 0x0a, 0x1b, 0x59, 0x1a, 0x1b, 0x59,
    ];

    /// zeek/mpls_in_vlan/mpls-in-vlan.pcap, packet 3 (first 70 bytes): VLAN
    /// 3399, MPLS labels 254 and 99, IPv4.
    static MPLS_FRAME: [u8; 70] = [
        0x00, 0x08, 0xe3, 0x41, 0x41, 0x41, 0x00, 0x08, 0xe3, 0x41, 0x41, 0x41, 0x81, 0x00, 0x0d, 0x47, 0x88, 0x47,
        0x00, 0x0f, 0xe0, 0x3c, 0x00, 0x06, 0x31, 0x3c, 0x45, 0x00, 0x02, 0xc6, 0x58, 0xf6, 0x40, 0x00, 0x3d, 0x06,
        0xb7, 0x2c, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0xef, 0x09, 0x00, 0x50, 0x9c, 0xc1, 0xe6, 0x76,
        0x5f, 0x07, 0x2e, 0xd2, 0x80, 0x18, 0x63, 0x88, 0xc1, 0x94, 0x00, 0x00, 0x01, 0x01, 0x08, 0x0a,
    ];

    #[test]
    fn frame_and_tags() {
        let f = Frame::new_checked(&QINQ_FRAME[..]).unwrap();
        assert_eq!(f.destination(), [0xff; 6]);
        assert_eq!(f.source(), [0x00, 0xc0, 0xe4, 0x01, 0x2c, 0xed]);
        assert_eq!(f.ethertype(), ethertype::VLAN);
        let outer = vlan::Tag::new_checked(f.payload()).unwrap();
        assert_eq!((outer.vid(), outer.pcp(), outer.dei(), outer.ethertype()), (13, 0, false, ethertype::VLAN));
        let inner = vlan::Tag::new_checked(outer.payload()).unwrap();
        assert_eq!((inner.vid(), inner.ethertype()), (10, ethertype::IPV4));
        assert_eq!(inner.payload()[0], 0x45);

        let mut vl = Vlans::default();
        let (net, ip) = network(&QINQ_FRAME, &mut vl).unwrap();
        assert_eq!((net, ip.len(), vl.outer, vl.inner), (Net::V4, 46, Some(13), Some(10)));
    }

    #[test]
    fn mpls_stack() {
        let f = Frame::new_checked(&MPLS_FRAME[..]).unwrap();
        let tag = vlan::Tag::new_checked(f.payload()).unwrap();
        assert_eq!((tag.vid(), tag.ethertype()), (3399, ethertype::MPLS_UNICAST));
        let l1 = mpls::Entry::new_checked(tag.payload()).unwrap();
        assert_eq!((l1.label(), l1.traffic_class(), l1.bottom_of_stack(), l1.ttl()), (254, 0, false, 60));
        let l2 = mpls::Entry::new_checked(l1.rest()).unwrap();
        assert_eq!((l2.label(), l2.bottom_of_stack(), l2.ttl()), (99, true, 60));
        let mut vl = Vlans::default();
        let (net, ip) = network(&MPLS_FRAME, &mut vl).unwrap();
        assert_eq!((net, ip[0], vl.outer), (Net::V4, 0x45, Some(3399)));
    }

    #[test]
    fn llc_snap_header() {
        // The LLC/SNAP part of zeek/llc_fddi_large/llc.pcap, packet 1.
        let b = [0xaa, 0xaa, 0x03, 0x00, 0x00, 0x00, 0x08, 0x00, 0x45];
        let h = llc::Header::new_checked(&b[..]).unwrap();
        assert!(h.is_snap());
        assert_eq!((h.dsap(), h.ssap(), h.control(), h.snap_oui(), h.snap_type()), (0xaa, 0xaa, 3, 0, 0x0800));
        assert_eq!(h.payload(), &[0x45]);
        // Spanning tree: plain LLC, U-format control.
        let stp = [0x42, 0x42, 0x03, 0x00];
        let h = llc::Header::new_checked(&stp[..]).unwrap();
        assert!(!h.is_snap());
        assert_eq!((h.header_len(), h.snap_type()), (3, 0));
        assert_eq!(llc::Header::new_checked(&b[..5]).err(), Some(SkipReason::Truncated));
    }

    #[test]
    fn short_buffers() {
        for n in 0..QINQ_FRAME.len() {
            let mut vl = Vlans::default();
            let r = network(&QINQ_FRAME[..n], &mut vl);
            if n < 22 {
                assert_eq!(r.err(), Some(SkipReason::Truncated), "{n}");
            } else {
                assert_eq!(r.unwrap().1.len(), n - 22);
            }
        }
        assert!(Frame::new_checked(&QINQ_FRAME[..13]).is_err());
        assert!(vlan::Tag::new_checked(&[0u8; 3][..]).is_err());
        assert!(mpls::Entry::new_checked(&[0u8; 3][..]).is_err());
    }
}
