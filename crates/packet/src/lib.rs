//! The one packet type at the bottom of wirelog's graph: what a capture file
//! reader (`wirelog-source`) or a live ring (`wirelog-capture`) hands to the
//! decoder (`wirelog-decode`, through `wirelog-probe`).
//!
//! A [`Packet`] borrows its bytes from the source's buffer (a memory-mapped
//! file, a ring block) and carries what only the source knows: the link type
//! the bytes start with, the interface, and for live packets what the kernel
//! took out of the frame or already checked (the offloaded VLAN tag, the
//! checksum status). Files carry neither, so a packet built with
//! [`Packet::new`] has none.
//!
//! Also here, because both sides of the graph need them and the record side
//! must not link the decoder: the address type ([`IpAddr16`]) and ICMP's
//! request/reply pairing ([`icmp::counterpart`]).
//!
//! ```
//! use wirelog_packet::{KernelChecksum, LinkType, Packet};
//!
//! let bytes = [0x45u8, 0, 0, 20];
//! let p = Packet { if_id: 2, vlan_tci: Some(100), ..Packet::new(LinkType::RAW, 1_700_000_000_000_000_000, &bytes) };
//! assert_eq!(p.wire_len, 4);
//! assert_eq!(p.checksum, KernelChecksum::Unknown);
//! assert_eq!(p.linktype.to_string(), "101");
//! ```

#![forbid(unsafe_code)]

mod addr;
pub mod icmp;
mod linktype;

pub use addr::IpAddr16;
pub use linktype::LinkType;

/// Packet time: nanoseconds since the Unix epoch (UTC).
pub type TimestampNs = i64;

/// What the capturing kernel says about a packet's transport checksum
/// (AF_PACKET `tp_status`); files carry no such word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KernelChecksum {
    /// Nothing known: check it.
    #[default]
    Unknown,
    /// `TP_STATUS_CSUM_VALID`: the NIC or the stack already verified it.
    Valid,
    /// `TP_STATUS_CSUMNOTREADY`: the packet is CHECKSUM_PARTIAL, its
    /// checksum is filled in later (by the NIC, or never on loopback).
    NotReady,
}

/// One captured packet, borrowed from its source's buffer.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    pub ts_ns: TimestampNs,
    /// Length of the packet on the wire (may exceed `data.len()` when the snaplen cut it).
    /// Never less than `data.len()`: a record claiming so gets `data.len()` here.
    pub wire_len: u32,
    /// What `data` starts with.
    pub linktype: LinkType,
    /// The interface the packet was captured on: the pcapng interface (IDB
    /// order; 0 for pcap), or live the position of the `-i` interface (the
    /// kernel ifindex on `any`). Connections and flows are kept apart per id.
    pub if_id: u32,
    /// The outer 802.1Q VLAN id the kernel took out of the frame
    /// (`tp_vlan_tci`), so `data` no longer carries it; `None` from files.
    pub vlan_tci: Option<u16>,
    /// What the kernel knows of the transport checksum.
    pub checksum: KernelChecksum,
    pub data: &'a [u8],
}

impl<'a> Packet<'a> {
    /// A packet as a file holds it: whole (wire length = captured length),
    /// interface 0, no offloaded VLAN, checksum status unknown.
    #[inline]
    pub fn new(linktype: LinkType, ts_ns: TimestampNs, data: &'a [u8]) -> Packet<'a> {
        Packet {
            ts_ns,
            wire_len: data.len() as u32,
            linktype,
            if_id: 0,
            vlan_tci: None,
            checksum: KernelChecksum::Unknown,
            data,
        }
    }
}
