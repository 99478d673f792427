//! Decode: link layer -> IP (with fragment reassembly) -> transport header summary.
//!
//! Each protocol has a zero-copy view in its own module. [`Decoder::packet`]
//! walks the layers of one [`Packet`] (what a file reader or a live ring
//! produced: bytes, link type, and live the VLAN tag the kernel took out of
//! the frame and the checksum status it knows) and returns a small [`IpPacket`] summary
//! that borrows the packet's bytes (or, for a reassembled fragment series,
//! the decoder's reassembly buffer). It never allocates per packet, never
//! panics on any input, and never fails: a packet it cannot use is a
//! [`Decoded::Skipped`] with a reason, which the caller counts.
//!
//! The views (`ethernet::Frame`, `ipv4::Packet`, `tcp::Packet`, ...) follow
//! smoltcp: `new_unchecked` wraps, `check_len` validates every offset the
//! getters read, `new_checked` does both, and no getter panics after a
//! successful `check_len`. Nothing is rejected for odd flags or ports: this is
//! a passive probe.
//!
//! Decisions that shape the results:
//! - Tunnels (IP-in-IP, IPv6-in-IP, GRE, MPLS pseudowires) are
//!   [`SkipReason::TunnelNotDecoded`], never the outer flow. UDP to the VXLAN,
//!   GTP-U or Teredo ports stays plain UDP (see `decoder::transport`).
//! - Checksums follow [`DecodeConfig::checksums`]: a bad IPv4 header checksum
//!   is [`Checksum::BadIp`], a bad TCP/UDP/ICMP one [`Checksum::BadTransport`]
//!   (as Zeek), except that in [`ChecksumMode::Auto`] a TCP/UDP checksum the
//!   sender offloaded is [`Checksum::Offloaded`]; a segment cut by the snaplen
//!   is [`Checksum::Unchecked`].
//! - Lengths come from the headers (a snaplen cut keeps them; link padding is
//!   ignored), and payload slices hold what was captured of them.
//! - Fragments are reassembled first-wins within a memory budget and a
//!   packet-time timeout (see [`DecodeStats`] for what gets counted where).
//!
//! ```
//! use wirelog_decode::{DecodeConfig, Decoded, Decoder, LinkType, Packet, Transport};
//!
//! // A raw IPv4 UDP datagram (LINKTYPE_RAW): 10.0.0.1:1234 -> 10.0.0.2:53.
//! let pkt = [
//!     0x45, 0, 0, 30, 0, 1, 0, 0, 64, 17, 0x66, 0xcc, 10, 0, 0, 1, 10, 0, 0, 2, //
//!     0x04, 0xd2, 0, 53, 0, 10, 0, 0, b'h', b'i',
//! ];
//! let mut d = Decoder::new(DecodeConfig::default());
//! match d.packet(&Packet::new(LinkType::RAW, 0, &pkt)) {
//!     Decoded::Ip(ip) => {
//!         assert_eq!(ip.src.to_std().to_string(), "10.0.0.1");
//!         // UDP checksum 0: not computed by the sender, fine over IPv4.
//!         assert_eq!(ip.checksum, wirelog_decode::Checksum::Good);
//!         assert!(matches!(ip.transport, Transport::Udp { dport: 53, payload_len: 2, .. }));
//!     }
//!     Decoded::Skipped(why) => panic!("{}", why.as_str()),
//! }
//! assert_eq!(d.stats().decoded, 1);
//! ```

#![forbid(unsafe_code)]

pub use wirelog_packet::{IpAddr16, KernelChecksum, LinkType, Packet, TimestampNs};

pub mod checksum;
pub mod ethernet;
pub mod fddi;
pub mod icmp;
pub mod ipv4;
pub mod ipv6;
pub mod nflog;
pub mod null;
pub mod ppp;
pub mod raw;
pub mod sll;
pub mod sll2;
pub mod tcp;
pub mod udp;

mod decoder;
mod frag;
#[cfg(any(test, feature = "bench"))]
mod hint;
mod link;

#[cfg(test)]
mod testpcap;

pub use decoder::{DecodeStats, Decoder};
#[cfg(feature = "bench")]
pub use hint::{flow_hint, FlowHint};
pub use link::SUPPORTED as SUPPORTED_LINKTYPES;

/// Big-endian reads at fixed offsets, shared by the views. Callers have
/// checked the length, so the indexing never panics.
#[inline(always)]
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline(always)]
pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// TCP flag bits as on the wire (byte 13 of the TCP header).
pub mod tcp_flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;
}

/// Transport-layer summary of one IP packet.
#[derive(Debug, Clone, Copy)]
pub enum Transport<'a> {
    Tcp {
        sport: u16,
        dport: u16,
        seq: u32,
        ack: u32,
        flags: u8,
        window: u16,
        /// TCP payload length computed from the IP length fields (not from what was captured).
        payload_len: u32,
        /// The captured part of the payload (may be shorter than `payload_len`).
        payload: &'a [u8],
    },
    Udp {
        sport: u16,
        dport: u16,
        /// UDP payload length from the UDP length field (bounded by the IP length).
        payload_len: u32,
        payload: &'a [u8],
    },
    /// ICMPv4 (`v6 == false`) or ICMPv6.
    Icmp {
        v6: bool,
        icmp_type: u8,
        code: u8,
        /// Payload after the 4-byte type/code/checksum header, i.e. including the
        /// echo id/seq word; length from the IP length fields.
        payload_len: u32,
        payload: &'a [u8],
    },
    /// Any other IP protocol (or a transport header too short to read: then the
    /// packet still counts at the IP level).
    Other { payload_len: u32 },
}

/// Result of checking the transport (and IPv4 header) checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksum {
    /// Not checked: checking is off, or the packet was cut by the snaplen.
    Unchecked,
    Good,
    /// The IPv4 header checksum is wrong (Zeek drops such packets entirely).
    BadIp,
    /// The TCP/UDP/ICMP checksum is wrong.
    BadTransport,
    /// The TCP/UDP checksum was never computed: the field holds the offload
    /// signature (see [`ChecksumMode::Auto`]), or the kernel said so
    /// ([`KernelChecksum::NotReady`]). The packet is as good as a valid one.
    Offloaded,
}

/// How checksums are treated (`--checksums`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChecksumMode {
    /// Verify, but accept a TCP/UDP checksum that was never computed because
    /// the sender offloaded it: on Linux (CHECKSUM_PARTIAL) the field then
    /// holds the folded one's-complement sum of the pseudo-header alone, not
    /// complemented. Every loopback capture and every capture of a host's own
    /// outgoing packets with transmit offload looks like this. The signature
    /// is compared first (one 16-bit compare), so an offloaded packet costs
    /// less than verifying it; only other packets pay for the full sum. A
    /// correct checksum equal to the signature (1 in 65536) is counted as
    /// offloaded rather than good; both are used.
    #[default]
    Auto,
    /// Zeek's behaviour: any wrong checksum makes the packet unusable.
    Verify,
    /// Zeek's `-C`: checksums are not looked at.
    Ignore,
}

/// A decoded IP packet.
#[derive(Debug, Clone, Copy)]
pub struct IpPacket<'a> {
    pub src: IpAddr16,
    pub dst: IpAddr16,
    /// 4 or 6.
    pub ip_version: u8,
    /// Transport protocol number, after walking IPv6 extension headers.
    pub proto: u8,
    /// IP datagram length as declared by the headers: IPv4 total length,
    /// IPv6 40 + payload length (for a reassembled datagram, its full length).
    pub ip_len: u32,
    pub ttl: u8,
    /// Outer and inner 802.1Q VLAN ids, if tagged.
    pub vlan: Option<u16>,
    pub inner_vlan: Option<u16>,
    /// True when this packet is a datagram reassembled from fragments.
    pub reassembled: bool,
    pub checksum: Checksum,
    pub transport: Transport<'a>,
}

/// Why a packet was not turned into an [`IpPacket`]. Every reason is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum SkipReason {
    /// Link type this decoder does not know.
    UnknownLinkType,
    /// Valid link layer carrying something other than IP (ARP, LLDP, STP, ...).
    NotIp,
    /// Tunnel encapsulation not decoded yet (GRE, VXLAN, Teredo, GTP, IP-in-IP):
    /// counted as "not decoded", never mis-decoded as the outer flow.
    TunnelNotDecoded,
    /// Headers cut short by the snaplen or by the end of the packet.
    Truncated,
    /// Header fields that cannot be right (IP version, header length, total length < header).
    Malformed,
    /// An IP fragment held for reassembly (not an error: the datagram comes later).
    FragmentHeld,
    /// Fragments dropped: reassembly timed out, overlapped inconsistently, or the
    /// reassembly memory budget was exceeded.
    FragmentDropped,
}

impl SkipReason {
    /// Number of reasons; [`SkipReason::index`] is below it.
    pub const COUNT: usize = 7;
    /// Every reason, in [`SkipReason::index`] order.
    pub const ALL: [SkipReason; SkipReason::COUNT] = [
        SkipReason::UnknownLinkType,
        SkipReason::NotIp,
        SkipReason::TunnelNotDecoded,
        SkipReason::Truncated,
        SkipReason::Malformed,
        SkipReason::FragmentHeld,
        SkipReason::FragmentDropped,
    ];

    /// Dense index for counter arrays.
    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::UnknownLinkType => "unknown link type",
            SkipReason::NotIp => "not IP",
            SkipReason::TunnelNotDecoded => "tunnel not decoded",
            SkipReason::Truncated => "truncated headers",
            SkipReason::Malformed => "malformed headers",
            SkipReason::FragmentHeld => "IP fragment held for reassembly",
            SkipReason::FragmentDropped => "IP fragment dropped",
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub enum Decoded<'a> {
    Ip(IpPacket<'a>),
    Skipped(SkipReason),
}

/// Decoder settings.
#[derive(Debug, Clone)]
pub struct DecodeConfig {
    /// How IPv4 header and TCP/UDP/ICMP checksums are treated.
    pub checksums: ChecksumMode,
    /// Fragments of an incomplete datagram are dropped after this long (packet time).
    pub frag_timeout_ns: i64,
    /// Upper bound on bytes held in incomplete datagrams.
    pub frag_max_bytes: usize,
}

impl Default for DecodeConfig {
    fn default() -> Self {
        DecodeConfig {
            checksums: ChecksumMode::Auto,
            frag_timeout_ns: 60_000_000_000,
            frag_max_bytes: 16 << 20,
        }
    }
}
