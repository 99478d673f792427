//! The per-packet walk: link layer, IP (with reassembly), transport summary.

use crate::frag::{FirstInfo, FragKey, FragTable, Fragment, Insert, MAX_PAYLOAD};
use crate::link::{self, Net, Vlans};
use crate::{
    checksum, icmp, ipv4, ipv6, tcp, udp, Checksum, DecodeConfig, Decoded, IpAddr16, IpPacket, LinkType, SkipReason,
    TimestampNs, Transport,
};
use ipv4::protocol as proto;

/// What the decoder has seen. Every call to [`Decoder::decode`] counts once:
/// `decoded + skipped.iter().sum()` is the number of packets. Fragments count
/// once when they arrive (as [`SkipReason::FragmentHeld`], or as the decoded
/// datagram they complete); the `frag_*` counters say what happened later to
/// datagrams that never completed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecodeStats {
    /// Packets returned as [`Decoded::Ip`], reassembled datagrams included.
    pub decoded: u64,
    /// Of `decoded`, datagrams reassembled from fragments.
    pub reassembled: u64,
    /// Of `decoded`, packets with [`Checksum::BadIp`].
    pub bad_ip_checksum: u64,
    /// Of `decoded`, packets with [`Checksum::BadTransport`].
    pub bad_transport_checksum: u64,
    /// [`Decoded::Skipped`] results, indexed by [`SkipReason::index`].
    pub skipped: [u64; SkipReason::COUNT],
    /// Incomplete datagrams dropped because their first fragment was older
    /// than `frag_timeout_ns`.
    pub frag_timed_out: u64,
    /// Incomplete datagrams dropped to stay within `frag_max_bytes`.
    pub frag_evicted: u64,
    /// Held fragments thrown away with those datagrams (or with a datagram
    /// split into too many pieces).
    pub frag_fragments_dropped: u64,
}

impl DecodeStats {
    /// How often `reason` was returned.
    pub fn skipped(&self, reason: SkipReason) -> u64 {
        self.skipped[reason.index()]
    }

    /// Every skip reason with its count, zero counts included.
    pub fn skipped_iter(&self) -> impl Iterator<Item = (SkipReason, u64)> + '_ {
        SkipReason::ALL.iter().map(|&r| (r, self.skipped[r.index()]))
    }

    /// All packets seen.
    pub fn packets(&self) -> u64 {
        self.decoded + self.skipped.iter().sum::<u64>()
    }
}

/// Turns captured packets into [`IpPacket`] summaries.
///
/// One decoder per packet stream: it holds the fragment table (fragments of
/// one datagram must go through the same decoder) and the buffer that
/// reassembled datagrams are returned in.
pub struct Decoder {
    verify: bool,
    cfg: DecodeConfig,
    stats: DecodeStats,
    frags: FragTable,
    /// The last reassembled datagram's payload; `decode` results borrow it.
    reasm: Vec<u8>,
}

impl Decoder {
    pub fn new(cfg: DecodeConfig) -> Decoder {
        Decoder {
            verify: cfg.verify_checksums,
            frags: FragTable::new(cfg.frag_max_bytes, cfg.frag_timeout_ns),
            cfg,
            stats: DecodeStats::default(),
            reasm: Vec::new(),
        }
    }

    pub fn config(&self) -> &DecodeConfig {
        &self.cfg
    }

    pub fn stats(&self) -> &DecodeStats {
        &self.stats
    }

    /// Incomplete datagrams currently held, and the bytes charged for them
    /// against `frag_max_bytes`.
    pub fn fragments_held(&self) -> (usize, usize) {
        self.frags.held()
    }

    /// Decodes one packet. Never panics and never fails: a packet that cannot
    /// be used comes back as [`Decoded::Skipped`]. It does not allocate unless
    /// the packet is a fragment to hold. The result borrows `data`, or, for a
    /// reassembled datagram, the decoder.
    #[inline(always)]
    pub fn decode<'a>(&'a mut self, linktype: LinkType, ts_ns: TimestampNs, data: &'a [u8]) -> Decoded<'a> {
        let Decoder { verify, stats, frags, reasm, .. } = self;
        let mut cx = Cx { verify: *verify, ts: ts_ns, frags, stats };
        decode_packet(&mut cx, reasm, linktype, data)
    }
}

/// Unwraps a `Result<T, SkipReason>`, or counts the reason and returns
/// `Decoded::Skipped` from the enclosing function.
///
/// The decode functions return [`Decoded`] rather than `Result<IpPacket, _>`
/// and count statistics where the values are still in registers: converting
/// a `Result` into `Decoded` afterwards made the compiler copy the packet
/// through the stack right after writing it field by field, which stalls on
/// store forwarding and cost more than the decoding itself.
macro_rules! tri {
    ($cx:expr, $e:expr) => {
        match $e {
            Ok(v) => v,
            Err(r) => return skip($cx, r),
        }
    };
}

#[inline(always)]
fn skip<'a>(cx: &mut Cx<'_>, r: SkipReason) -> Decoded<'a> {
    cx.stats.skipped[r.index()] += 1;
    Decoded::Skipped(r)
}

/// The decoder's parts one packet needs, borrowed apart from the
/// reassembly buffer that the result may borrow.
struct Cx<'d> {
    verify: bool,
    ts: TimestampNs,
    frags: &'d mut FragTable,
    stats: &'d mut DecodeStats,
}

#[inline(always)]
fn decode_packet<'a>(
    cx: &mut Cx<'_>,
    reasm: &'a mut Vec<u8>,
    lt: LinkType,
    data: &'a [u8],
) -> Decoded<'a> {
    let mut vlans = Vlans::default();
    let (net, ip) = tri!(cx, link::network(lt, data, &mut vlans));
    let Some(&first) = ip.first() else { return skip(cx, SkipReason::Truncated) };
    match (net, first >> 4) {
        (Net::V4 | Net::Any, 4) => decode_v4(cx, reasm, ip, vlans),
        (Net::V6 | Net::Any, 6) => decode_v6(cx, reasm, ip, vlans),
        _ => skip(cx, SkipReason::Malformed),
    }
}

/// Source and destination as they sit in the IP header. Kept as a reference
/// until the result is built: copies made early stay live across the whole
/// walk and end up spilled to the stack.
#[derive(Clone, Copy)]
enum Addrs<'a> {
    V4(&'a [u8; 8]),
    V6(&'a [u8; 32]),
}

impl Addrs<'_> {
    #[inline(always)]
    fn src(&self) -> IpAddr16 {
        match self {
            Addrs::V4(a) => IpAddr16::from_v4([a[0], a[1], a[2], a[3]]),
            Addrs::V6(a) => IpAddr16(*a.first_chunk().unwrap_or(&[0; 16])),
        }
    }

    #[inline(always)]
    fn dst(&self) -> IpAddr16 {
        match self {
            Addrs::V4(a) => IpAddr16::from_v4([a[4], a[5], a[6], a[7]]),
            Addrs::V6(a) => IpAddr16(*a.last_chunk().unwrap_or(&[0; 16])),
        }
    }
}

/// Addresses for the TCP/UDP/ICMPv6 pseudo-header; for IPv6 the destination
/// is the final one when a routing header names it.
enum Pseudo<'a> {
    V4(&'a [u8; 8]),
    V6(IpAddr16, [u8; 16]),
}

impl Pseudo<'_> {
    #[inline]
    fn sum(&self, proto: u8, len: u32) -> u64 {
        match self {
            Pseudo::V4(a) => {
                checksum::pseudo_header_v4(&[a[0], a[1], a[2], a[3]], &[a[4], a[5], a[6], a[7]], proto, len)
            }
            Pseudo::V6(s, d) => checksum::pseudo_header_v6(&s.0, d, proto, len),
        }
    }
}

#[inline(always)]
fn decode_v4<'a>(cx: &mut Cx<'_>, reasm: &'a mut Vec<u8>, ip: &'a [u8], vlans: Vlans) -> Decoded<'a> {
    let p = tri!(cx, ipv4::Packet::new_checked(ip));
    let hl = p.header_len();
    let mut total = usize::from(p.total_len());
    if total == 0 {
        // TCP segmentation offload leaves the length zero in captures taken on
        // the sending host. Like Zeek: trust the capture when checksums are
        // not verified, otherwise the packet is unusable (its checksums are
        // not filled in either).
        if cx.verify {
            return skip(cx, SkipReason::Malformed);
        }
        total = ip.len();
    }
    if total < hl {
        return skip(cx, SkipReason::Malformed);
    }
    let ip_ok = !cx.verify || p.verify_checksum();
    // Declared lengths drive payload_len (a snaplen cut keeps them); the
    // captured slice stops at the total length (Ethernet padding excluded).
    let declared = (total - hl) as u32;
    let captured = &ip[hl..total.min(ip.len())];
    let addrs = p.addrs();
    let mut hdr = IpHdr {
        addrs: Addrs::V4(addrs),
        proto: p.protocol(),
        ip_len: total as u32,
        ttl: p.ttl(),
        vlans,
        reassembled: false,
    };
    if p.is_fragment() {
        if !ip_ok {
            // Zeek drops it before reassembly; so do we, but report it like any
            // other packet with a bad header checksum.
            return hdr.finish(cx, Checksum::BadIp, Transport::Other { payload_len: declared });
        }
        let frag = Fragment { offset: p.frag_offset(), more: p.more_frags(), data: captured };
        let key = FragKey { src: hdr.addrs.src(), dst: hdr.addrs.dst(), id: u32::from(p.ident()), proto: hdr.proto, v6: false };
        let first = FirstInfo { hdr_len: hl as u32, proto: hdr.proto, ttl: hdr.ttl, final_dst: [0; 16] };
        hdr.reassembled = true;
        return fragment(cx, reasm, hdr, key, frag, declared, first, Pseudo::V4(addrs));
    }
    let verify = if ip_ok { Verify::from(cx.verify) } else { Verify::BadIp };
    transport(cx, &hdr, hdr.proto, false, captured, declared, &Pseudo::V4(addrs), verify)
}

/// Where the IPv6 extension header chain ends.
enum Chain {
    /// The upper-layer protocol and its offset in the payload.
    Upper { proto: u8, offset: usize },
    /// A (non-atomic) fragment header at this offset.
    Fragment { offset: usize },
}

/// Walks extension headers from `nh` at the start of `payload`. `declared` is
/// the payload length the headers announce; `payload` is what was captured
/// of it. A header that runs past `declared` is malformed, one that runs past
/// the capture is truncated.
#[inline]
fn walk_chain(mut nh: u8, payload: &[u8], declared: usize, final_dst: &mut [u8; 16]) -> Result<Chain, SkipReason> {
    let mut off = 0;
    // Bounded: every step consumes at least 8 bytes.
    while ipv6::is_extension(nh) {
        let rest = payload.get(off..).unwrap_or_default();
        let left = declared - off;
        if rest.len() < 2 {
            return Err(if left < 2 { SkipReason::Malformed } else { SkipReason::Truncated });
        }
        let h = ipv6::ExtHeader::new_unchecked(rest, nh);
        let len = h.header_len();
        if len > left {
            return Err(SkipReason::Malformed);
        }
        if len > rest.len() {
            return Err(SkipReason::Truncated);
        }
        if nh == proto::FRAGMENT {
            let f = ipv6::FragmentHeader::new_checked(rest)?;
            if !f.is_atomic() {
                return Ok(Chain::Fragment { offset: off });
            }
            nh = f.next_header();
        } else {
            if let Some(fd) = h.final_destination() {
                *final_dst = fd;
            }
            nh = h.next_header();
        }
        off += len;
    }
    Ok(Chain::Upper { proto: nh, offset: off })
}

#[inline(always)]
fn decode_v6<'a>(cx: &mut Cx<'_>, reasm: &'a mut Vec<u8>, ip: &'a [u8], vlans: Vlans) -> Decoded<'a> {
    let p = tri!(cx, ipv6::Packet::new_checked(ip));
    let payload = p.payload();
    // Payload length 0: a jumbogram (RFC 2675) or an offloaded segment; the
    // capture is all we know.
    let declared = match p.payload_len() {
        0 => payload.len(),
        n => usize::from(n),
    };
    let mut hdr = IpHdr {
        addrs: Addrs::V6(p.addrs()),
        proto: p.next_header(),
        ip_len: (ipv6::HEADER_LEN + declared) as u32,
        ttl: p.hop_limit(),
        vlans,
        reassembled: false,
    };
    let mut final_dst = hdr.addrs.dst().0;
    match tri!(cx, walk_chain(p.next_header(), payload, declared, &mut final_dst)) {
        Chain::Upper { proto, offset } => {
            hdr.proto = proto;
            let body = payload.get(offset..).unwrap_or_default();
            let pseudo = Pseudo::V6(hdr.addrs.src(), final_dst);
            transport(cx, &hdr, proto, true, body, (declared - offset) as u32, &pseudo, Verify::from(cx.verify))
        }
        Chain::Fragment { offset } => {
            let f = tri!(cx, ipv6::FragmentHeader::new_checked(payload.get(offset..).unwrap_or_default()));
            let start = offset + ipv6::FRAGMENT_HEADER_LEN;
            let body = payload.get(start..).unwrap_or_default();
            let frag = Fragment { offset: f.frag_offset(), more: f.more_frags(), data: body };
            let key = FragKey { src: hdr.addrs.src(), dst: hdr.addrs.dst(), id: f.ident(), proto: 0, v6: true };
            let first = FirstInfo {
                hdr_len: (ipv6::HEADER_LEN + offset) as u32,
                proto: f.next_header(),
                ttl: hdr.ttl,
                final_dst,
            };
            hdr.reassembled = true;
            let pseudo = Pseudo::V6(key.src, final_dst);
            fragment(cx, reasm, hdr, key, frag, (declared - start) as u32, first, pseudo)
        }
    }
}

/// Holds a fragment, and decodes the datagram it completes.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn fragment<'a>(
    cx: &mut Cx<'_>,
    reasm: &'a mut Vec<u8>,
    mut hdr: IpHdr<'a>,
    key: FragKey,
    frag: Fragment<'_>,
    declared: u32,
    first: FirstInfo,
    pseudo: Pseudo<'a>,
) -> Decoded<'a> {
    if (frag.data.len() as u32) < declared {
        // Cut by the snaplen: the datagram can never be whole (Zeek's
        // "incompletely_captured_fragment").
        return skip(cx, SkipReason::Truncated);
    }
    // The datagram's headers plus this fragment's end must fit the 16-bit
    // length fields.
    let unfrag = if key.v6 { first.hdr_len - ipv6::HEADER_LEN as u32 } else { first.hdr_len };
    if unfrag + frag.offset + declared > MAX_PAYLOAD {
        return skip(cx, SkipReason::Malformed);
    }
    let first = (frag.offset == 0).then_some(first);
    let (data, first) = match cx.frags.insert(key, cx.ts, frag, first, cx.stats) {
        Insert::Held => return skip(cx, SkipReason::FragmentHeld),
        Insert::Dropped => return skip(cx, SkipReason::FragmentDropped),
        Insert::Complete { data, first } => (data, first),
    };
    let old = std::mem::replace(reasm, data);
    cx.frags.recycle(old);
    let buf: &'a [u8] = reasm;
    let total = buf.len();
    hdr.ttl = first.ttl;
    hdr.ip_len = first.hdr_len + total as u32;
    let (proto, body, pseudo) = if key.v6 {
        // The fragmentable part may start with more extension headers.
        let mut final_dst = first.final_dst;
        match tri!(cx, walk_chain(first.proto, buf, total, &mut final_dst)) {
            Chain::Upper { proto, offset } => (proto, &buf[offset..], Pseudo::V6(key.src, final_dst)),
            // A fragment header inside a reassembled payload.
            Chain::Fragment { .. } => return skip(cx, SkipReason::Malformed),
        }
    } else {
        (first.proto, buf, pseudo)
    };
    hdr.proto = proto;
    transport(cx, &hdr, proto, key.v6, body, body.len() as u32, &pseudo, Verify::from(cx.verify))
}

/// Verifies a transport checksum over `len` bytes, if they were all captured.
#[inline]
fn verify_l4(data: &[u8], len: u32, initial: u64) -> Checksum {
    match data.get(..len as usize) {
        None => Checksum::Unchecked,
        Some(seg) if checksum::is_valid(checksum::sum(seg, initial)) => Checksum::Good,
        Some(_) => Checksum::BadTransport,
    }
}

/// Everything an [`IpPacket`] holds but the transport summary and checksum.
#[derive(Clone, Copy)]
struct IpHdr<'a> {
    addrs: Addrs<'a>,
    proto: u8,
    ip_len: u32,
    ttl: u8,
    vlans: Vlans,
    reassembled: bool,
}

impl IpHdr<'_> {
    /// Counts the packet and returns it.
    #[inline(always)]
    fn finish<'a>(&self, cx: &mut Cx<'_>, checksum: Checksum, transport: Transport<'a>) -> Decoded<'a> {
        let s = &mut *cx.stats;
        s.decoded += 1;
        s.reassembled += u64::from(self.reassembled);
        match checksum {
            Checksum::BadIp => s.bad_ip_checksum += 1,
            Checksum::BadTransport => s.bad_transport_checksum += 1,
            _ => {}
        }
        Decoded::Ip(IpPacket {
            src: self.addrs.src(),
            dst: self.addrs.dst(),
            ip_version: match self.addrs {
                Addrs::V4(_) => 4,
                Addrs::V6(_) => 6,
            },
            proto: self.proto,
            ip_len: self.ip_len,
            ttl: self.ttl,
            vlan: self.vlans.outer,
            inner_vlan: self.vlans.inner,
            reassembled: self.reassembled,
            checksum,
            transport,
        })
    }
}

/// What to do about the transport checksum.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Verify {
    Off,
    On,
    /// The IPv4 header checksum already failed: report that, skip the rest.
    BadIp,
}

impl From<bool> for Verify {
    #[inline(always)]
    fn from(on: bool) -> Self {
        if on {
            Verify::On
        } else {
            Verify::Off
        }
    }
}

/// Summarises the transport header into the finished packet. `data` is what
/// was captured of the IP payload, `declared` its length from the IP header
/// (`data.len() <= declared`).
///
/// Each arm builds the whole result in one expression, for the reason given
/// at [`tri`].
#[inline(always)]
fn transport<'a>(
    cx: &mut Cx<'_>,
    hdr: &IpHdr<'_>,
    proto: u8,
    v6: bool,
    data: &'a [u8],
    declared: u32,
    pseudo: &Pseudo<'_>,
    verify: Verify,
) -> Decoded<'a> {
    let no_check = match verify {
        Verify::Off => Checksum::Unchecked,
        Verify::On => Checksum::Good,
        Verify::BadIp => Checksum::BadIp,
    };
    match proto {
        proto::TCP => {
            if declared < tcp::MIN_HEADER_LEN as u32 {
                return skip(cx, SkipReason::Malformed);
            }
            let t = tri!(cx, tcp::Packet::new_checked(data));
            let hl = t.header_len() as u32;
            if hl > declared {
                return skip(cx, SkipReason::Malformed);
            }
            let ck = if verify == Verify::On {
                verify_l4(data, declared, pseudo.sum(proto::TCP, declared))
            } else {
                no_check
            };
            hdr.finish(cx, 
                ck,
                Transport::Tcp {
                    sport: t.src_port(),
                    dport: t.dst_port(),
                    seq: t.seq_number(),
                    ack: t.ack_number(),
                    flags: t.flags(),
                    window: t.window_len(),
                    payload_len: declared - hl,
                    payload: t.payload(),
                },
            )
        }
        proto::UDP => {
            if declared < udp::HEADER_LEN as u32 {
                return skip(cx, SkipReason::Malformed);
            }
            let u = tri!(cx, udp::Packet::new_checked(data));
            // The UDP length bounds the datagram when it is sane; 0 (IPv6
            // jumbograms) or a value past the IP payload falls back to the IP
            // length.
            let ulen = u32::from(u.len());
            let len = if (udp::HEADER_LEN as u32..=declared).contains(&ulen) { ulen } else { declared };
            let ck = if verify != Verify::On {
                no_check
            } else if u.checksum() == 0 && !v6 {
                // Not computed by the sender (allowed over IPv4 only).
                Checksum::Good
            } else {
                verify_l4(data, len, pseudo.sum(proto::UDP, len))
            };
            let end = (len as usize).min(data.len());
            // Ports 4789 (VXLAN), 2152 (GTP-U) and 3544 (Teredo) are
            // deliberately not treated as tunnels: the port alone does not
            // prove the encapsulation, and Zeek without its tunnel scripts
            // logs such traffic as plain UDP connections too.
            hdr.finish(cx, 
                ck,
                Transport::Udp {
                    sport: u.src_port(),
                    dport: u.dst_port(),
                    payload_len: len - udp::HEADER_LEN as u32,
                    payload: data.get(udp::HEADER_LEN..end).unwrap_or_default(),
                },
            )
        }
        proto::ICMP | proto::ICMPV6 if (proto == proto::ICMPV6) == v6 => {
            if declared < icmp::HEADER_LEN as u32 {
                return skip(cx, SkipReason::Malformed);
            }
            let i = tri!(cx, icmp::Packet::new_checked(data));
            let ck = if verify != Verify::On {
                no_check
            } else {
                let initial = if v6 { pseudo.sum(proto::ICMPV6, declared) } else { 0 };
                verify_l4(data, declared, initial)
            };
            hdr.finish(cx, 
                ck,
                Transport::Icmp {
                    v6,
                    icmp_type: i.msg_type(),
                    code: i.msg_code(),
                    payload_len: declared - icmp::HEADER_LEN as u32,
                    payload: i.payload(),
                },
            )
        }
        // Encapsulated IP and GRE: decoding them as the outer flow would be
        // wrong, and the inner flow is not decoded yet. ESP (50) is not a
        // tunnel for connection purposes: it stays Other, as in Zeek.
        proto::IPIP | proto::IPV6 | proto::GRE => skip(cx, SkipReason::TunnelNotDecoded),
        _ => hdr.finish(cx, no_check, Transport::Other { payload_len: declared }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testpcap;

    /// `WIRELOG_DUMP=path cargo test -p wirelog-decode dump -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn dump() {
        let path = std::env::var("WIRELOG_DUMP").unwrap();
        let verify = std::env::var("WIRELOG_NOVERIFY").is_err();
        let mut d = Decoder::new(DecodeConfig { verify_checksums: verify, ..Default::default() });
        for (i, p) in testpcap::read(&path).iter().enumerate() {
            match d.decode(p.linktype, p.ts_ns, &p.data) {
                Decoded::Ip(ip) => {
                    let t = match ip.transport {
                        Transport::Tcp { sport, dport, seq, ack, flags, payload_len, payload, .. } => {
                            format!("tcp {sport}->{dport} seq={seq} ack={ack} fl={flags:02x} len={payload_len} cap={}", payload.len())
                        }
                        Transport::Udp { sport, dport, payload_len, payload } => {
                            format!("udp {sport}->{dport} len={payload_len} cap={}", payload.len())
                        }
                        Transport::Icmp { v6, icmp_type, code, payload_len, .. } => {
                            format!("icmp{} {icmp_type}/{code} len={payload_len}", if v6 { "6" } else { "" })
                        }
                        Transport::Other { payload_len } => format!("other len={payload_len}"),
                    };
                    println!(
                        "{} {} > {} p{} iplen={} ttl={} vlan={:?}/{:?} re={} {:?} {t}",
                        i + 1,
                        ip.src.to_std(),
                        ip.dst.to_std(),
                        ip.proto,
                        ip.ip_len,
                        ip.ttl,
                        ip.vlan,
                        ip.inner_vlan,
                        ip.reassembled,
                        ip.checksum
                    );
                }
                Decoded::Skipped(r) => println!("{} skipped {r:?}", i + 1),
            }
        }
        println!("{:?}", d.stats());
    }
}
#[cfg(test)]
mod size_probe {
    #[test]
    fn sizes() {
        println!("IpPacket {} Decoded {} Transport {}", std::mem::size_of::<crate::IpPacket>(), std::mem::size_of::<crate::Decoded>(), std::mem::size_of::<crate::Transport>());
    }
}
