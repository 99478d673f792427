//! Linux NFLOG (LINKTYPE_NFLOG, 239): a 4-byte header, then netlink-style
//! TLVs; the NFULA_PAYLOAD TLV holds the IP packet.
//!
//! TLV lengths and types are in the byte order of the host that captured
//! (libpcap swaps them when it reads a file from a host of the other order,
//! so they follow the file's byte order, which is not visible here). Almost
//! all captures are little-endian; we still tell the orders apart from the
//! first TLV's type, which is a small number (see [`Tlvs`]).

use crate::link::Net;
use crate::{be16, SkipReason};

mod field {
    use core::ops::Range;
    pub const FAMILY: usize = 0;
    pub const VERSION: usize = 1;
    pub const RESOURCE_ID: Range<usize> = 2..4;
    pub const TLVS: usize = RESOURCE_ID.end;
}

pub const HEADER_LEN: usize = field::TLVS;
pub const TLV_HEADER_LEN: usize = 4;

pub mod family {
    pub const INET: u8 = 2;
    pub const INET6: u8 = 10;
}

/// TLV types (enum nfulnl_attr_type in <linux/netfilter/nfnetlink_log.h>).
pub mod tlv_type {
    pub const PACKET_HDR: u16 = 1;
    pub const MARK: u16 = 2;
    pub const TIMESTAMP: u16 = 3;
    pub const IFINDEX_INDEV: u16 = 4;
    pub const IFINDEX_OUTDEV: u16 = 5;
    pub const HWADDR: u16 = 8;
    pub const PAYLOAD: u16 = 9;
    pub const PREFIX: u16 = 10;
    pub const UID: u16 = 11;
    pub const SEQ: u16 = 12;
    pub const GID: u16 = 14;
    pub const HWTYPE: u16 = 15;
    pub const HWHEADER: u16 = 16;
    pub const HWLEN: u16 = 17;
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

    /// Address family of the logged packet (2 = IPv4, 10 = IPv6).
    #[inline]
    pub fn family(&self) -> u8 {
        self.buffer.as_ref()[field::FAMILY]
    }

    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }

    /// The nflog group, big-endian unlike the TLVs.
    #[inline]
    pub fn resource_id(&self) -> u16 {
        be16(self.buffer.as_ref(), field::RESOURCE_ID.start)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Header<&'a T> {
    #[inline]
    pub fn tlvs(&self) -> Tlvs<'a> {
        Tlvs::new(&self.buffer.as_ref()[field::TLVS..])
    }
}

/// One TLV: its type (flag bits masked off) and captured value.
#[derive(Debug, Clone, Copy)]
pub struct Tlv<'a> {
    pub tlv_type: u16,
    /// Value length declared by the TLV (may exceed `value.len()` in a cut capture).
    pub declared_len: usize,
    pub value: &'a [u8],
}

/// Iterator over the TLVs. Yields `Err` once and stops when a TLV header is
/// cut short (`Truncated`) or declares a length below its own header (`Malformed`).
#[derive(Debug, Clone)]
pub struct Tlvs<'a> {
    data: &'a [u8],
    big_endian: bool,
    done: bool,
}

impl<'a> Tlvs<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        // The first TLV type is small in the right byte order; read in the
        // wrong one it is at least 0x100 (types never have a zero low byte).
        let big_endian = data.len() >= TLV_HEADER_LEN && {
            let le = u16::from_le_bytes([data[2], data[3]]) & 0x3fff;
            let be = u16::from_be_bytes([data[2], data[3]]) & 0x3fff;
            le >= 0x100 && be < 0x100
        };
        Tlvs { data, big_endian, done: false }
    }

    #[inline]
    fn u16_at(&self, at: usize) -> u16 {
        let b = [self.data[at], self.data[at + 1]];
        if self.big_endian {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        }
    }
}

impl<'a> Iterator for Tlvs<'a> {
    type Item = Result<Tlv<'a>, SkipReason>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.data.is_empty() {
            return None;
        }
        if self.data.len() < TLV_HEADER_LEN {
            self.done = true;
            return Some(Err(SkipReason::Truncated));
        }
        let len = usize::from(self.u16_at(0));
        // Top two bits are NLA_F_NESTED and NLA_F_NET_BYTEORDER.
        let tlv_type = self.u16_at(2) & 0x3fff;
        if len < TLV_HEADER_LEN {
            self.done = true;
            return Some(Err(SkipReason::Malformed));
        }
        let value = &self.data[TLV_HEADER_LEN..len.min(self.data.len())];
        // Values are padded to 4 bytes.
        let next = ((len + 3) & !3).min(self.data.len());
        self.data = &self.data[next..];
        Some(Ok(Tlv { tlv_type, declared_len: len - TLV_HEADER_LEN, value }))
    }
}

#[inline]
pub(crate) fn network(data: &[u8]) -> Result<(Net, &[u8]), SkipReason> {
    let h = Header::new_checked(data)?;
    let net = match h.family() {
        family::INET => Net::V4,
        family::INET6 => Net::V6,
        _ => Net::Any,
    };
    let mut complete = true;
    let mut any = false;
    for tlv in h.tlvs() {
        let tlv = tlv?;
        if tlv.tlv_type == tlv_type::PAYLOAD {
            return Ok((net, tlv.value));
        }
        any = true;
        complete &= tlv.value.len() == tlv.declared_len;
    }
    if complete && any {
        // A log record without the packet (copy mode "none"): nothing to decode.
        Err(SkipReason::NotIp)
    } else {
        // Every record has TLVs: the capture stopped before the payload.
        Err(SkipReason::Truncated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// linktypes/zeek_nflog_http.pcap, packet 1: AF_INET, group 42, TLVs
    /// PACKET_HDR, PREFIX, IFINDEX_OUTDEV, UID, GID, then the PAYLOAD (a TCP SYN).
    static NFLOG_SYN: [u8; 108] = [
        0x02, 0x00, 0x00, 0x2a, 0x08, 0x00, 0x01, 0x00, 0x00, 0x00, 0x03, 0x00, 0x05, 0x00, 0x0a, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x08, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x02, 0x08, 0x00, 0x0b, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x08, 0x00, 0x0e, 0x00, 0x00, 0x00, 0x00, 0x00, 0x40, 0x00, 0x09, 0x00, 0x45, 0x00, 0x00, 0x3c, 0xe8, 0xef,
        0x40, 0x00, 0x40, 0x06, 0x0f, 0xe3, 0x0a, 0x00, 0x02, 0x0f, 0x5d, 0xb8, 0xd8, 0x22, 0xc2, 0x62, 0x00, 0x50,
        0x3f, 0x32, 0xba, 0xd1, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0x72, 0x10, 0x42, 0x18, 0x00, 0x00, 0x02, 0x04,
        0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x00, 0x27, 0x52, 0x3e, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x07,
    ];

    #[test]
    fn header_and_tlvs() {
        let h = Header::new_checked(&NFLOG_SYN[..]).unwrap();
        assert_eq!((h.family(), h.version(), h.resource_id()), (family::INET, 0, 42));
        let tlvs: Vec<(u16, usize)> = h.tlvs().map(|t| t.map(|t| (t.tlv_type, t.value.len())).unwrap()).collect();
        assert_eq!(
            tlvs,
            [
                (tlv_type::PACKET_HDR, 4),
                // A one-byte (empty, NUL-terminated) prefix, padded to 4.
                (tlv_type::PREFIX, 1),
                (tlv_type::IFINDEX_OUTDEV, 4),
                (tlv_type::UID, 4),
                (tlv_type::GID, 4),
                (tlv_type::PAYLOAD, 60)
            ]
        );
        let (net, ip) = network(&NFLOG_SYN).unwrap();
        assert_eq!((net, ip.len(), ip[0]), (Net::V4, 60, 0x45));
    }

    #[test]
    fn bad_tlvs() {
        // A TLV length below its own header.
        let bad = [2, 0, 0, 0, 2, 0, 1, 0];
        assert_eq!(network(&bad).err(), Some(SkipReason::Malformed));
        // Cut inside a TLV header, and inside the value before the payload.
        assert_eq!(network(&NFLOG_SYN[..6]).err(), Some(SkipReason::Truncated));
        assert_eq!(network(&NFLOG_SYN[..10]).err(), Some(SkipReason::Truncated));
        // Cut inside the payload: the IP layer sees the cut.
        assert_eq!(network(&NFLOG_SYN[..60]).unwrap().1.len(), 12);
    }
}
