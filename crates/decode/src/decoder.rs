//! The per-packet walk: link layer, IP (with reassembly), transport summary.

use crate::frag::{FirstInfo, FragKey, FragTable, Fragment, Insert, MAX_PAYLOAD};
use crate::link::{self, Net, Vlans};
use crate::{
    checksum, icmp, ipv4, ipv6, tcp, udp, Checksum, ChecksumMode, DecodeConfig, Decoded,
    IpAddr16, IpPacket, KernelChecksum, LinkType, Packet, SkipReason, TimestampNs, Transport,
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
    /// Of `decoded`, packets with [`Checksum::Good`].
    pub good_checksum: u64,
    /// Of `decoded`, packets with [`Checksum::Offloaded`].
    pub offloaded_checksum: u64,
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
        SkipReason::ALL
            .iter()
            .map(|&r| (r, self.skipped[r.index()]))
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
    mode: ChecksumMode,
    cfg: DecodeConfig,
    stats: DecodeStats,
    frags: FragTable,
    /// The last reassembled datagram's payload; `decode` results borrow it.
    reasm: Vec<u8>,
}

impl Decoder {
    pub fn new(cfg: DecodeConfig) -> Decoder {
        Decoder {
            mode: cfg.checksums,
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
    /// the packet is a fragment to hold. The result borrows the packet's
    /// bytes, or, for a reassembled datagram, the decoder.
    ///
    /// The kernel's checksum status of the packet replaces checksum work in
    /// [`ChecksumMode::Auto`] (see [`Decoder::decode_with`]), and a VLAN tag
    /// the kernel took out of the frame is the packet's outer VLAN (a tag
    /// still in the frame is then its inner one).
    #[inline(always)]
    pub fn packet<'a>(&'a mut self, p: &Packet<'a>) -> Decoded<'a> {
        let vlans = Vlans { outer: p.vlan_tci, inner: None };
        self.decode_in(p.linktype, p.ts_ns, p.data, p.checksum, vlans)
    }

    /// [`Decoder::packet`] for bytes as a file holds them (no offloaded
    /// VLAN, checksum status unknown).
    #[inline(always)]
    pub fn decode<'a>(
        &'a mut self,
        linktype: LinkType,
        ts_ns: TimestampNs,
        data: &'a [u8],
    ) -> Decoded<'a> {
        self.decode_in(linktype, ts_ns, data, KernelChecksum::Unknown, Vlans::default())
    }

    /// [`Decoder::decode`] for a packet whose transport checksum the
    /// capturing kernel already knows about. In [`ChecksumMode::Auto`] that
    /// replaces the transport checksum work; [`ChecksumMode::Verify`] checks
    /// anyway, as Zeek would.
    #[inline(always)]
    pub fn decode_with<'a>(
        &'a mut self,
        linktype: LinkType,
        ts_ns: TimestampNs,
        data: &'a [u8],
        kernel: KernelChecksum,
    ) -> Decoded<'a> {
        self.decode_in(linktype, ts_ns, data, kernel, Vlans::default())
    }

    #[inline(always)]
    fn decode_in<'a>(
        &'a mut self,
        linktype: LinkType,
        ts_ns: TimestampNs,
        data: &'a [u8],
        kernel: KernelChecksum,
        vlans: Vlans,
    ) -> Decoded<'a> {
        let Decoder {
            mode,
            stats,
            frags,
            reasm,
            ..
        } = self;
        let verify = match (*mode, kernel) {
            (ChecksumMode::Ignore, _) => Verify::Off,
            (ChecksumMode::Verify, _) => Verify::On,
            (ChecksumMode::Auto, KernelChecksum::Unknown) => Verify::Auto,
            (ChecksumMode::Auto, KernelChecksum::Valid) => Verify::KernelValid,
            (ChecksumMode::Auto, KernelChecksum::NotReady) => Verify::KernelNotReady,
        };
        let mut cx = Cx {
            verify,
            ts: ts_ns,
            frags,
            stats,
        };
        decode_packet(&mut cx, reasm, linktype, data, vlans)
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
    verify: Verify,
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
    mut vlans: Vlans,
) -> Decoded<'a> {
    let (net, ip) = tri!(cx, link::network(lt, data, &mut vlans));
    let Some(&first) = ip.first() else {
        return skip(cx, SkipReason::Truncated);
    };
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
    #[inline(always)]
    fn sum(&self, proto: u8, len: u32) -> u64 {
        match self {
            Pseudo::V4(a) => checksum::pseudo_header_v4(
                &[a[0], a[1], a[2], a[3]],
                &[a[4], a[5], a[6], a[7]],
                proto,
                len,
            ),
            Pseudo::V6(s, d) => checksum::pseudo_header_v6(&s.0, d, proto, len),
        }
    }
}

#[inline(always)]
fn decode_v4<'a>(
    cx: &mut Cx<'_>,
    reasm: &'a mut Vec<u8>,
    ip: &'a [u8],
    vlans: Vlans,
) -> Decoded<'a> {
    let p = tri!(cx, ipv4::Packet::new_checked(ip));
    let hl = p.header_len();
    let mut total = usize::from(p.total_len());
    if total == 0 {
        // TCP segmentation offload leaves the length zero in captures taken on
        // the sending host. Like Zeek: trust the capture when checksums are
        // not verified, otherwise the packet is unusable (its checksums are
        // not filled in either).
        // In auto mode such a packet comes from the capturing host itself,
        // which filled in no checksum either: use it, unchecked.
        match cx.verify {
            Verify::On => return skip(cx, SkipReason::Malformed),
            _ => cx.verify = Verify::Off,
        }
        total = ip.len();
    }
    if total < hl {
        return skip(cx, SkipReason::Malformed);
    }
    // A header checksum left zero was offloaded too: BSD and macOS loopback
    // captures (CSUM_IP) carry it beside the transport signature.
    let ip_ok = cx.verify == Verify::Off
        || p.verify_checksum()
        || (cx.verify != Verify::On && p.checksum() == 0);
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
            return hdr.finish(
                cx,
                Checksum::BadIp,
                Transport::Other {
                    payload_len: declared,
                },
            );
        }
        let frag = Fragment {
            offset: p.frag_offset(),
            more: p.more_frags(),
            data: captured,
        };
        let key = FragKey {
            src: hdr.addrs.src(),
            dst: hdr.addrs.dst(),
            id: u32::from(p.ident()),
            proto: hdr.proto,
            v6: false,
        };
        let first = FirstInfo {
            hdr_len: hl as u32,
            proto: hdr.proto,
            ttl: hdr.ttl,
            final_dst: [0; 16],
        };
        hdr.reassembled = true;
        return fragment(
            cx,
            reasm,
            hdr,
            key,
            frag,
            declared,
            first,
            Pseudo::V4(addrs),
        );
    }
    let verify = if ip_ok {
        cx.verify
    } else {
        Verify::BadIp
    };
    transport(
        cx,
        &hdr,
        hdr.proto,
        false,
        captured,
        declared,
        &Pseudo::V4(addrs),
        verify,
    )
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
fn walk_chain(
    mut nh: u8,
    payload: &[u8],
    declared: usize,
    final_dst: &mut [u8; 16],
) -> Result<Chain, SkipReason> {
    let mut off = 0;
    // Bounded: every step consumes at least 8 bytes.
    while ipv6::is_extension(nh) {
        let rest = payload.get(off..).unwrap_or_default();
        let left = declared - off;
        if rest.len() < 2 {
            return Err(if left < 2 {
                SkipReason::Malformed
            } else {
                SkipReason::Truncated
            });
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
    Ok(Chain::Upper {
        proto: nh,
        offset: off,
    })
}

#[inline(always)]
fn decode_v6<'a>(
    cx: &mut Cx<'_>,
    reasm: &'a mut Vec<u8>,
    ip: &'a [u8],
    vlans: Vlans,
) -> Decoded<'a> {
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
    match tri!(
        cx,
        walk_chain(p.next_header(), payload, declared, &mut final_dst)
    ) {
        Chain::Upper { proto, offset } => {
            hdr.proto = proto;
            let body = payload.get(offset..).unwrap_or_default();
            let pseudo = Pseudo::V6(hdr.addrs.src(), final_dst);
            transport(
                cx,
                &hdr,
                proto,
                true,
                body,
                (declared - offset) as u32,
                &pseudo,
                cx.verify,
            )
        }
        Chain::Fragment { offset } => {
            let f = tri!(
                cx,
                ipv6::FragmentHeader::new_checked(payload.get(offset..).unwrap_or_default())
            );
            let start = offset + ipv6::FRAGMENT_HEADER_LEN;
            let body = payload.get(start..).unwrap_or_default();
            let frag = Fragment {
                offset: f.frag_offset(),
                more: f.more_frags(),
                data: body,
            };
            let key = FragKey {
                src: hdr.addrs.src(),
                dst: hdr.addrs.dst(),
                id: f.ident(),
                proto: 0,
                v6: true,
            };
            let first = FirstInfo {
                hdr_len: (ipv6::HEADER_LEN + offset) as u32,
                proto: f.next_header(),
                ttl: hdr.ttl,
                final_dst,
            };
            hdr.reassembled = true;
            let pseudo = Pseudo::V6(key.src, final_dst);
            fragment(
                cx,
                reasm,
                hdr,
                key,
                frag,
                (declared - start) as u32,
                first,
                pseudo,
            )
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
    let unfrag = if key.v6 {
        first.hdr_len - ipv6::HEADER_LEN as u32
    } else {
        first.hdr_len
    };
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
            Chain::Upper { proto, offset } => {
                (proto, &buf[offset..], Pseudo::V6(key.src, final_dst))
            }
            // A fragment header inside a reassembled payload.
            Chain::Fragment { .. } => return skip(cx, SkipReason::Malformed),
        }
    } else {
        (first.proto, buf, pseudo)
    };
    hdr.proto = proto;
    transport(
        cx,
        &hdr,
        proto,
        key.v6,
        body,
        body.len() as u32,
        &pseudo,
        cx.verify,
    )
}

/// Verifies a transport checksum over `len` bytes, if they were all captured.
///
/// With `offload`, the field (at `field`) is first compared with the offload
/// signature, which costs one compare against the pseudo-header sum already
/// at hand; only a field without it pays for the sum over the whole segment.
/// Loopback and host captures are mostly offloaded, so checking the
/// signature after a failed full sum would pay for both on nearly every
/// packet. A correct checksum that happens to equal the signature (about 1
/// in 65536 segments) is then counted as offloaded instead of good: harmless,
/// since both are used. [`ChecksumMode::Verify`] (`offload` false) never
/// looks at the signature and stays Zeek's verdict bit for bit.
#[inline]
fn verify_l4(data: &[u8], len: u32, initial: u64, field: usize, offload: bool) -> Checksum {
    match data.get(..len as usize) {
        None => Checksum::Unchecked,
        Some(seg) if offload && checksum::is_offload_signature(seg, field, initial) => {
            Checksum::Offloaded
        }
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
    fn finish<'a>(
        &self,
        cx: &mut Cx<'_>,
        checksum: Checksum,
        transport: Transport<'a>,
    ) -> Decoded<'a> {
        let s = &mut *cx.stats;
        s.decoded += 1;
        s.reassembled += u64::from(self.reassembled);
        match checksum {
            Checksum::Good => s.good_checksum += 1,
            Checksum::Offloaded => s.offloaded_checksum += 1,
            Checksum::BadIp => s.bad_ip_checksum += 1,
            Checksum::BadTransport => s.bad_transport_checksum += 1,
            Checksum::Unchecked => {}
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

/// What to do about the checksums of one packet.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Verify {
    /// [`ChecksumMode::Ignore`].
    Off,
    /// [`ChecksumMode::Verify`].
    On,
    /// [`ChecksumMode::Auto`]: verify, accept the offload signature.
    Auto,
    /// Auto, and the kernel verified the transport checksum: no work.
    KernelValid,
    /// Auto, and the kernel says the transport checksum is not filled in.
    KernelNotReady,
    /// The IPv4 header checksum already failed: report that, skip the rest.
    BadIp,
}

/// Summarises the transport header into the finished packet. `data` is what
/// was captured of the IP payload, `declared` its length from the IP header
/// (`data.len() <= declared`).
///
/// Each arm builds the whole result in one expression, for the reason given
/// at [`tri`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
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
        Verify::BadIp => Checksum::BadIp,
        Verify::On | Verify::Auto | Verify::KernelValid | Verify::KernelNotReady => Checksum::Good,
    };
    match proto {
        proto::TCP => {
            if declared < tcp::MIN_HEADER_LEN as u32 {
                return skip(cx, SkipReason::Malformed);
            }
            // check_len's tests, with the declared length taking precedence:
            // a header that cannot fit the datagram is malformed, not cut.
            let t = tcp::Packet::new_unchecked(data);
            if data.len() < tcp::MIN_HEADER_LEN {
                return skip(cx, SkipReason::Truncated);
            }
            let hl = t.header_len() as u32;
            if hl < tcp::MIN_HEADER_LEN as u32 || hl > declared {
                return skip(cx, SkipReason::Malformed);
            }
            if hl as usize > data.len() {
                return skip(cx, SkipReason::Truncated);
            }
            let ck = match verify {
                Verify::On | Verify::Auto => verify_l4(
                    data,
                    declared,
                    pseudo.sum(proto::TCP, declared),
                    tcp::CHECKSUM_AT,
                    verify == Verify::Auto,
                ),
                Verify::KernelNotReady => Checksum::Offloaded,
                _ => no_check,
            };
            hdr.finish(
                cx,
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
            let ulen = u32::from(u.length());
            let len = if (udp::HEADER_LEN as u32..=declared).contains(&ulen) {
                ulen
            } else {
                declared
            };
            let ck = match verify {
                // Not computed by the sender (allowed over IPv4 only).
                Verify::On | Verify::Auto if u.checksum() == 0 && !v6 => Checksum::Good,
                Verify::On | Verify::Auto => verify_l4(
                    data,
                    len,
                    pseudo.sum(proto::UDP, len),
                    udp::CHECKSUM_AT,
                    verify == Verify::Auto,
                ),
                Verify::KernelNotReady => Checksum::Offloaded,
                _ => no_check,
            };
            let end = (len as usize).min(data.len());
            // Ports 4789 (VXLAN), 2152 (GTP-U) and 3544 (Teredo) are
            // deliberately not treated as tunnels: the port alone does not
            // prove the encapsulation, and Zeek without its tunnel scripts
            // logs such traffic as plain UDP connections too.
            hdr.finish(
                cx,
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
            // ICMP has no offload signature: the stack always computes it.
            let ck = match verify {
                Verify::On | Verify::Auto => {
                    let initial = if v6 {
                        pseudo.sum(proto::ICMPV6, declared)
                    } else {
                        0
                    };
                    verify_l4(data, declared, initial, icmp::CHECKSUM_AT, false)
                }
                Verify::KernelNotReady => Checksum::Offloaded,
                _ => no_check,
            };
            hdr.finish(
                cx,
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
        _ => hdr.finish(
            cx,
            no_check,
            Transport::Other {
                payload_len: declared,
            },
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::extra;
    use crate::testpcap::{self, TestPacket};
    use Checksum::{BadIp, BadTransport, Good, Unchecked};

    /// An owned copy of the fields the tests look at.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Got {
        src: String,
        dst: String,
        version: u8,
        proto: u8,
        ip_len: u32,
        ttl: u8,
        vlan: Option<u16>,
        inner_vlan: Option<u16>,
        reassembled: bool,
        checksum: Checksum,
        t: T,
    }

    #[derive(Debug, Clone, PartialEq, Eq)]
    enum T {
        Tcp {
            sport: u16,
            dport: u16,
            seq: u32,
            ack: u32,
            flags: u8,
            window: u16,
            len: u32,
            cap: usize,
        },
        Udp {
            sport: u16,
            dport: u16,
            len: u32,
            cap: usize,
        },
        Icmp {
            v6: bool,
            ty: u8,
            code: u8,
            len: u32,
            cap: usize,
        },
        Other {
            len: u32,
        },
    }

    type R = Result<Got, SkipReason>;

    fn own(d: Decoded<'_>) -> R {
        let p = match d {
            Decoded::Ip(p) => p,
            Decoded::Skipped(r) => return Err(r),
        };
        let t = match p.transport {
            Transport::Tcp {
                sport,
                dport,
                seq,
                ack,
                flags,
                window,
                payload_len,
                payload,
            } => T::Tcp {
                sport,
                dport,
                seq,
                ack,
                flags,
                window,
                len: payload_len,
                cap: payload.len(),
            },
            Transport::Udp {
                sport,
                dport,
                payload_len,
                payload,
            } => T::Udp {
                sport,
                dport,
                len: payload_len,
                cap: payload.len(),
            },
            Transport::Icmp {
                v6,
                icmp_type,
                code,
                payload_len,
                payload,
            } => T::Icmp {
                v6,
                ty: icmp_type,
                code,
                len: payload_len,
                cap: payload.len(),
            },
            Transport::Other { payload_len } => T::Other { len: payload_len },
        };
        Ok(Got {
            src: p.src.to_std().to_string(),
            dst: p.dst.to_std().to_string(),
            version: p.ip_version,
            proto: p.proto,
            ip_len: p.ip_len,
            ttl: p.ttl,
            vlan: p.vlan,
            inner_vlan: p.inner_vlan,
            reassembled: p.reassembled,
            checksum: p.checksum,
            t,
        })
    }

    fn decoder(verify: bool) -> Decoder {
        Decoder::new(DecodeConfig {
            checksums: if verify { ChecksumMode::Verify } else { ChecksumMode::Ignore },
            ..Default::default()
        })
    }

    fn one(d: &mut Decoder, lt: LinkType, data: &[u8]) -> R {
        own(d.decode(lt, 0, data))
    }

    /// Decodes a whole capture with one decoder.
    fn run(rel: &str, verify: bool) -> (Vec<R>, DecodeStats) {
        let mut d = decoder(verify);
        let out = testpcap::read(rel)
            .iter()
            .map(|p| own(d.decode(p.linktype, p.ts_ns, &p.data)))
            .collect();
        (out, d.stats().clone())
    }

    fn nth(rel: &str, n: usize) -> TestPacket {
        testpcap::read(rel).swap_remove(n - 1)
    }

    /// The IP packet inside packet `n` of a capture (for wrapping it in other
    /// link layers).
    fn ip_bytes(rel: &str, n: usize) -> Vec<u8> {
        let p = nth(rel, n);
        let (_, ip) = link::network(p.linktype, &p.data, &mut Vlans::default()).unwrap();
        ip.to_vec()
    }

    fn tcp(r: &R) -> (u16, u16, u32, u32, u8, u32) {
        match r.as_ref().unwrap().t {
            T::Tcp {
                sport,
                dport,
                seq,
                ack,
                flags,
                len,
                ..
            } => (sport, dport, seq, ack, flags, len),
            ref t => panic!("not TCP: {t:?}"),
        }
    }

    fn udp(r: &R) -> (u16, u16, u32) {
        match r.as_ref().unwrap().t {
            T::Udp {
                sport, dport, len, ..
            } => (sport, dport, len),
            ref t => panic!("not UDP: {t:?}"),
        }
    }

    /// Per capture: [decoded, reassembled, bad IP checksum, bad transport
    /// checksum] and the skip counts by reason index, with checksums verified.
    /// Checksum verdicts were cross-checked packet by packet against tshark
    /// (`-o tcp.check_checksum:TRUE` etc.) when this table was written.
    #[test]
    fn counts_per_capture() {
        #[rustfmt::skip]
        let table: &[(&str, [u64; 4], [u64; SkipReason::COUNT])] = &[
            ("linktypes/pcapnggen_test006_le_two_linktypes.pcapng", [5, 0, 2, 0], [0; 7]),
            ("linktypes/pcapnggen_test006_be_two_linktypes.pcapng", [5, 0, 2, 0], [0; 7]),
            ("linktypes/pcapnggen_test011_spb_epb_mix.pcapng", [4, 0, 2, 0], [0; 7]),
            ("linktypes/tcpdump_LINKTYPE_IPV4.pcap", [1, 0, 0, 0], [0; 7]),
            ("linktypes/tcpdump_LINKTYPE_IPV6.pcap", [1, 0, 0, 0], [0; 7]),
            ("linktypes/tcpdump_LINKTYPE_RAW_ipv4.pcap", [1, 0, 0, 0], [0; 7]),
            ("linktypes/tcpdump_LINKTYPE_RAW_ipv6.pcap", [1, 0, 0, 0], [0; 7]),
            ("linktypes/tcpdump_bgp_role_sll.pcapng", [9, 0, 0, 5], [0; 7]),
            ("linktypes/tcpdump_mptcp_v1_sll.pcap", [20, 0, 0, 20], [0; 7]),
            // Packet 16 is GRE (PPTP data).
            ("linktypes/tcpdump_pptp_bigendian.pcap", [22, 0, 0, 0], [0, 0, 1, 0, 0, 0, 0]),
            ("linktypes/tcpdump_tcp_handshake_nano_sll.pcap", [3, 0, 0, 0], [0; 7]),
            ("linktypes/tcpdump_tcp_rst_diag_null.pcap", [1, 0, 0, 1], [0; 7]),
            // Two ARP packets.
            ("linktypes/zeek_linux_dlt_sll2.pcap", [4, 0, 0, 0], [0, 2, 0, 0, 0, 0, 0]),
            ("linktypes/zeek_nflog_http.pcap", [13, 0, 0, 7], [0; 7]),
            ("linktypes/zeek_pcapng_126_interfaces.pcapng", [17, 0, 0, 0], [0; 7]),
            ("linktypes/zeek_ppp_quic_interop_retry.pcap", [26, 0, 0, 0], [0; 7]),
            ("linktypes/zeek_tcp_syslog_linktype_ipv4.pcap", [10, 0, 0, 0], [0; 7]),
            ("zeek/checksums_ignore_nets/localhost-bad-chksum.pcap", [10, 0, 0, 6], [0; 7]),
            ("zeek/ftp_ipv6/ipv6.pcap", [136, 0, 0, 0], [0; 7]),
            // 40 fragments complete 36 datagrams (Wireshark also finds their
            // UDP checksums wrong); the GTP payloads stay UDP.
            ("zeek/gtp_outer_ip_frag/gtp1_gn_normal_incl_fragmentation.pcap", [68, 36, 0, 36], [0, 0, 0, 0, 0, 40, 0]),
            ("zeek/gtp_s3_tunnel/gtp2_different_udp_port.pcap", [78, 42, 0, 42], [0, 0, 0, 0, 0, 42, 0]),
            ("zeek/http_padding/tcp-http-with-padding.pcap", [25, 0, 0, 11], [0; 7]),
            ("zeek/icmp_events/icmp-destunreach-udp.pcap", [1, 0, 0, 0], [0; 7]),
            ("zeek/icmp_events/icmp-ping.pcap", [4, 0, 0, 0], [0; 7]),
            // Packet 4 is the last fragment of a datagram whose others are missing.
            ("zeek/ipv6_frag_dns/ipv6-fragmented-dns.pcap", [5, 1, 0, 0], [0, 0, 0, 0, 0, 3, 0]),
            // FDDI with LLC/SNAP, snaplen 68.
            ("zeek/llc_fddi_large/llc.pcap", [1333, 0, 0, 0], [0; 7]),
            // Zeek's test runs with -C: the IP checksums are wrong.
            ("zeek/mpls_in_vlan/mpls-in-vlan.pcap", [3, 0, 3, 0], [0; 7]),
            ("zeek/tcp_bad_checksum/dns-corrupt.pcap", [2, 0, 0, 2], [0; 7]),
            ("zeek/tcp_bad_checksum/syn-bad.pcap", [1, 0, 0, 1], [0; 7]),
            ("zeek/tcp_retransmit_rsto/retransmit-fast009.pcap", [39, 0, 39, 0], [0; 7]),
            ("zeek/teredo_tunnel/Teredo.pcap", [78, 0, 0, 0], [0; 7]),
            // The fifth packet is ARP.
            ("zeek/vlan_qinq/q-in-q.pcap", [4, 0, 0, 0], [0, 1, 0, 0, 0, 0, 0]),
        ];
        for (rel, [dec, re, bad_ip, bad_t], skipped) in table {
            let (out, st) = run(rel, true);
            let got = [
                st.decoded,
                st.reassembled,
                st.bad_ip_checksum,
                st.bad_transport_checksum,
            ];
            assert_eq!(
                (got, st.skipped),
                ([*dec, *re, *bad_ip, *bad_t], *skipped),
                "{rel}"
            );
            assert_eq!(st.packets(), out.len() as u64, "{rel}");
            // Without verification nothing is bad, and nothing else changes.
            let (out2, st2) = run(rel, false);
            assert_eq!(
                (st2.decoded, st2.skipped),
                (st.decoded, st.skipped),
                "{rel}"
            );
            assert!(
                out2.iter().flatten().all(|g| g.checksum == Unchecked),
                "{rel}"
            );
        }
    }

    #[test]
    fn qinq_vlans() {
        let (out, _) = run("zeek/vlan_qinq/q-in-q.pcap", true);
        let g = out[0].as_ref().unwrap();
        assert_eq!((g.vlan, g.inner_vlan), (Some(13), Some(10)));
        assert_eq!(
            (g.src.as_str(), g.dst.as_str(), g.version, g.ip_len, g.ttl),
            ("172.19.51.37", "172.19.51.63", 4, 46, 64)
        );
        assert_eq!(
            g.t,
            T::Udp {
                sport: 47808,
                dport: 47808,
                len: 18,
                cap: 18
            }
        );
        assert_eq!(g.checksum, Good);
        assert_eq!(out[4], Err(SkipReason::NotIp));
    }

    #[test]
    fn mpls_in_vlan() {
        let (out, _) = run("zeek/mpls_in_vlan/mpls-in-vlan.pcap", true);
        let g = out[0].as_ref().unwrap();
        assert_eq!(
            (g.vlan, g.inner_vlan, g.ip_len, g.ttl, g.checksum),
            (Some(3199), None, 257, 60, BadIp)
        );
        assert_eq!(tcp(&out[0]), (19244, 80, 2191944293, 4144883607, 0x18, 205));
        assert_eq!(tcp(&out[1]), (80, 32828, 408724638, 2687550607, 0x10, 1448));
        assert_eq!(out[1].as_ref().unwrap().vlan, Some(0));
        assert_eq!(tcp(&out[2]), (61193, 80, 2629953142, 1594306258, 0x18, 658));
        // Two labels (254, 99) on the third packet.
        assert_eq!(out[2].as_ref().unwrap().vlan, Some(3399));
        let (out, _) = run("zeek/mpls_in_vlan/mpls-in-vlan.pcap", false);
        assert!(out
            .iter()
            .all(|r| r.as_ref().unwrap().checksum == Unchecked));
    }

    #[test]
    fn linktype_samples() {
        let (o, _) = run("linktypes/tcpdump_tcp_handshake_nano_sll.pcap", true);
        assert_eq!(tcp(&o[0]), (46656, 80, 797190859, 0, 0x02, 0));
        assert_eq!(tcp(&o[1]), (80, 46656, 3078856592, 797190860, 0x12, 0));
        assert_eq!(tcp(&o[2]), (46656, 80, 797190860, 3078856593, 0x10, 0));
        let g = o[1].as_ref().unwrap();
        assert_eq!(
            (g.src.as_str(), g.dst.as_str(), g.ip_len, g.ttl),
            ("137.116.81.94", "131.155.215.69", 60, 117)
        );
        match g.t {
            T::Tcp { window, .. } => assert_eq!(window, 8192),
            _ => unreachable!(),
        }

        let (o, _) = run("linktypes/zeek_linux_dlt_sll2.pcap", true);
        let g = o[0].as_ref().unwrap();
        assert_eq!(
            (g.src.as_str(), g.ip_len, g.checksum),
            ("192.0.2.1", 84, Good)
        );
        assert_eq!(
            g.t,
            T::Icmp {
                v6: false,
                ty: 8,
                code: 0,
                len: 60,
                cap: 60
            }
        );
        let g = o[2].as_ref().unwrap();
        assert_eq!(
            (g.src.as_str(), g.version, g.proto, g.ip_len),
            ("fe80::8c36:6ff:fe44:acaf", 6, 58, 104)
        );
        assert_eq!(
            g.t,
            T::Icmp {
                v6: true,
                ty: 128,
                code: 0,
                len: 60,
                cap: 60
            }
        );

        let (o, _) = run("linktypes/tcpdump_tcp_rst_diag_null.pcap", true);
        assert_eq!(tcp(&o[0]), (39829, 8080, 1, 334797553, 0x14, 8));
        let g = o[0].as_ref().unwrap();
        assert_eq!(
            (g.src.as_str(), g.dst.as_str(), g.ttl, g.checksum),
            ("192.0.2.1", "192.168.0.1", 255, BadTransport)
        );

        for rel in [
            "linktypes/tcpdump_LINKTYPE_RAW_ipv4.pcap",
            "linktypes/tcpdump_LINKTYPE_IPV4.pcap",
        ] {
            let (o, _) = run(rel, true);
            let g = o[0].as_ref().unwrap();
            assert_eq!(
                (g.src.as_str(), g.dst.as_str(), g.ip_len, g.checksum),
                ("192.168.1.100", "9.9.9.9", 57, Good)
            );
            assert_eq!(udp(&o[0]), (12345, 53, 29));
        }
        for rel in [
            "linktypes/tcpdump_LINKTYPE_RAW_ipv6.pcap",
            "linktypes/tcpdump_LINKTYPE_IPV6.pcap",
        ] {
            let (o, _) = run(rel, true);
            let g = o[0].as_ref().unwrap();
            assert_eq!(
                (g.src.as_str(), g.dst.as_str(), g.ip_len, g.checksum),
                ("2001:db8::1", "2620:fe::9", 77, Good)
            );
            assert_eq!(udp(&o[0]), (12345, 53, 29));
        }

        let (o, _) = run("linktypes/zeek_nflog_http.pcap", true);
        assert_eq!(tcp(&o[0]), (49762, 80, 1060289233, 0, 0x02, 0));
        assert_eq!(tcp(&o[5]), (49762, 80, 1060289234, 1131904002, 0x18, 79));
        assert_eq!(o[5].as_ref().unwrap().checksum, Good);

        let (o, _) = run("linktypes/zeek_ppp_quic_interop_retry.pcap", true);
        let g = o[0].as_ref().unwrap();
        assert_eq!(
            (g.src.as_str(), g.dst.as_str(), g.ip_len, g.ttl),
            ("::", "ff02::1:ff00:3", 72, 255)
        );
        assert_eq!(
            g.t,
            T::Icmp {
                v6: true,
                ty: 135,
                code: 0,
                len: 28,
                cap: 28
            }
        );
        assert_eq!(udp(&o[4]), (42834, 443, 1252));

        let (o, _) = run("zeek/llc_fddi_large/llc.pcap", true);
        let g = o[0].as_ref().unwrap();
        assert_eq!(
            (g.src.as_str(), g.dst.as_str(), g.ip_len, g.ttl),
            ("128.3.140.132", "194.140.136.34", 40, 8)
        );
        assert_eq!(tcp(&o[0]), (2035, 80, 1388789261, 1388789261, 0x04, 0));

        let (o, _) = run("zeek/ftp_ipv6/ipv6.pcap", true);
        let g = o[0].as_ref().unwrap();
        assert_eq!(
            (g.src.as_str(), g.dst.as_str(), g.ip_len, g.checksum),
            (
                "2001:470:1f11:81f:c999:d94:aa7c:2e3e",
                "2001:470:4867:99::21",
                84,
                Good
            )
        );
        assert_eq!(tcp(&o[0]), (49185, 21, 646610527, 0, 0x02, 0));
        assert_eq!(tcp(&o[1]), (21, 49185, 108197924, 646610528, 0x12, 0));
    }

    #[test]
    fn checksum_verdicts() {
        let (o, _) = run("zeek/tcp_bad_checksum/syn-bad.pcap", true);
        assert_eq!(o[0].as_ref().unwrap().checksum, BadTransport);
        assert_eq!(tcp(&o[0]), (59856, 80, 4263588410, 0, 0x02, 0));
        let (o, _) = run("zeek/tcp_bad_checksum/dns-corrupt.pcap", true);
        assert_eq!(udp(&o[0]), (34357, 53, 49));
        assert!(o
            .iter()
            .all(|r| r.as_ref().unwrap().checksum == BadTransport));
        // Wireshark's verdicts, packet by packet.
        let (o, _) = run("zeek/checksums_ignore_nets/localhost-bad-chksum.pcap", true);
        let want = [
            false, true, false, false, true, true, false, false, true, false,
        ];
        for (i, (r, good)) in o.iter().zip(want).enumerate() {
            assert_eq!(
                r.as_ref().unwrap().checksum,
                if good { Good } else { BadTransport },
                "packet {}",
                i + 1
            );
        }
    }

    fn decoder_mode(checksums: ChecksumMode) -> Decoder {
        Decoder::new(DecodeConfig {
            checksums,
            ..Default::default()
        })
    }

    fn verdicts(rel: &str, mode: ChecksumMode) -> (Vec<Checksum>, DecodeStats) {
        let mut d = decoder_mode(mode);
        let v = testpcap::read(rel)
            .iter()
            .map(|p| own(d.decode(p.linktype, p.ts_ns, &p.data)).unwrap().checksum)
            .collect();
        (v, d.stats().clone())
    }

    /// Offset of the TCP/UDP checksum field in an Ethernet frame with IPv4.
    fn l4_checksum_at(frame: &[u8], proto_field: usize) -> usize {
        14 + usize::from(frame[14] & 0x0f) * 4 + proto_field
    }

    /// Real captures: every wrong checksum of Zeek's localhost capture and of
    /// Packetbeat's loopback captures holds the offload signature, the
    /// corrupt ones of Zeek's tcp_bad_checksum do not.
    #[test]
    fn offload_signature_in_real_captures() {
        use ChecksumMode::{Auto, Verify};
        let (v, st) = verdicts("zeek/checksums_ignore_nets/localhost-bad-chksum.pcap", Auto);
        let (strict, _) = verdicts("zeek/checksums_ignore_nets/localhost-bad-chksum.pcap", Verify);
        for (a, s) in v.iter().zip(&strict) {
            assert_eq!(*a, if *s == BadTransport { Checksum::Offloaded } else { *s });
        }
        assert_eq!(
            (st.good_checksum, st.offloaded_checksum, st.bad_transport_checksum),
            (4, 6, 0)
        );
        for rel in ["zeek/tcp_bad_checksum/syn-bad.pcap", "zeek/tcp_bad_checksum/dns-corrupt.pcap"] {
            let (v, _) = verdicts(rel, Auto);
            assert!(v.iter().all(|c| *c == BadTransport), "{rel}");
        }
        // macOS loopback (NULL link type), TCP: 2 IPv6 and 31 IPv4 packets,
        // the IPv4 ones with a zero header checksum (offloaded as well).
        let (v, st) = verdicts("packetbeat/pcaps/http_get_2k_file.pcap", Auto);
        assert!(v.iter().all(|c| *c == Checksum::Offloaded), "{v:?}");
        assert_eq!((st.offloaded_checksum, st.bad_transport_checksum, st.bad_ip_checksum), (33, 0, 0));
        let (_, st) = verdicts("packetbeat/pcaps/http_get_2k_file.pcap", Verify);
        assert_eq!((st.offloaded_checksum, st.bad_transport_checksum, st.bad_ip_checksum), (0, 2, 31));
        // Linux loopback (raw IP), every packet offloaded.
        let (v, _) = verdicts("packetbeat/pcaps/mysql_connection.pcap", Auto);
        assert_eq!(v, [Checksum::Offloaded; 18]);
        // A zero IPv4 header checksum on a packet with a real one is bad.
        let mut syn = nth("zeek/tcp_bad_checksum/syn-bad.pcap", 1);
        syn.data[14 + 10] = 0;
        syn.data[14 + 11] = 0;
        assert_eq!(one(&mut decoder_mode(Verify), syn.linktype, &syn.data).unwrap().checksum, BadIp);
        let (v, _) = verdicts("packetbeat/pcaps/dns_udp_edns_ds.pcap", Auto);
        assert_eq!(v, [Checksum::Offloaded, Good]);
    }

    /// The signature is the folded pseudo-header sum itself: its complement,
    /// or any other value, is corruption; a valid packet rewritten to carry
    /// the signature is offloaded in auto and bad in verify.
    #[test]
    fn offload_signature_exact_form() {
        use ChecksumMode::{Auto, Ignore, Verify};
        let rel = "zeek/checksums_ignore_nets/localhost-bad-chksum.pcap";
        let offloaded = nth(rel, 1);
        let at = l4_checksum_at(&offloaded.data, tcp::CHECKSUM_AT);
        let field = u16::from_be_bytes([offloaded.data[at], offloaded.data[at + 1]]);
        let check = |data: &[u8], mode| one(&mut decoder_mode(mode), offloaded.linktype, data).unwrap().checksum;
        assert_eq!(check(&offloaded.data, Auto), Checksum::Offloaded);
        for other in [!field, field.wrapping_add(1), field ^ 0x0100] {
            let mut d = offloaded.data.clone();
            d[at..at + 2].copy_from_slice(&other.to_be_bytes());
            assert_eq!(check(&d, Auto), BadTransport, "{other:#06x}");
            assert_eq!(check(&d, Ignore), Unchecked);
        }
        // Packet 2 is valid; give it its signature.
        let good = nth(rel, 2);
        assert_eq!(check(&good.data, Auto), Good);
        let at = l4_checksum_at(&good.data, tcp::CHECKSUM_AT);
        let ip = &good.data[14..];
        let hl = usize::from(ip[0] & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        let pseudo = checksum::pseudo_header_v4(
            &[ip[12], ip[13], ip[14], ip[15]],
            &[ip[16], ip[17], ip[18], ip[19]],
            6,
            (total - hl) as u32,
        );
        let mut d = good.data.clone();
        d[at..at + 2].copy_from_slice(&checksum::fold(pseudo).to_be_bytes());
        assert_eq!(check(&d, Auto), Checksum::Offloaded);
        assert_eq!(check(&d, Verify), BadTransport);
    }

    /// The ring's flags replace the transport checksum work in auto mode
    /// only; verify checks anyway, as Zeek would.
    #[test]
    fn kernel_checksum_flags() {
        use ChecksumMode::{Auto, Verify};
        let corrupt = nth("zeek/tcp_bad_checksum/syn-bad.pcap", 1);
        let mut d = decoder_mode(Auto);
        let with = |mode, k| {
            let mut d = decoder_mode(mode);
            own(d.decode_with(corrupt.linktype, 0, &corrupt.data, k)).unwrap().checksum
        };
        assert_eq!(with(Auto, KernelChecksum::Valid), Good);
        assert_eq!(with(Auto, KernelChecksum::NotReady), Checksum::Offloaded);
        assert_eq!(with(Auto, KernelChecksum::Unknown), BadTransport);
        assert_eq!(with(Verify, KernelChecksum::Valid), BadTransport);
        assert_eq!(with(Verify, KernelChecksum::NotReady), BadTransport);
        // The IPv4 header checksum is the stack's own: still checked.
        let mut bad_ip = corrupt.data.clone();
        bad_ip[14 + 8] ^= 1; // TTL
        let r = own(d.decode_with(corrupt.linktype, 0, &bad_ip, KernelChecksum::Valid));
        assert_eq!(r.unwrap().checksum, BadIp);
    }

    /// A live packet's VLAN tag taken out by the kernel is its outer VLAN,
    /// a tag still in the frame the inner one; its checksum status is used
    /// as `decode_with` uses it.
    #[test]
    fn packet_carries_offloaded_vlan_and_checksum() {
        let qinq = nth("zeek/vlan_qinq/q-in-q.pcap", 1);
        let mut d = decoder(true);
        let file = own(d.packet(&Packet::new(qinq.linktype, 0, &qinq.data))).unwrap();
        assert_eq!((file.vlan, file.inner_vlan), (Some(13), Some(10)));
        let live = Packet { vlan_tci: Some(7), ..Packet::new(qinq.linktype, 0, &qinq.data) };
        let got = own(d.packet(&live)).unwrap();
        assert_eq!((got.vlan, got.inner_vlan), (Some(7), Some(13)));
        let plain = nth("zeek/tcp_bad_checksum/syn-bad.pcap", 1);
        let live = Packet { vlan_tci: Some(7), ..Packet::new(plain.linktype, 0, &plain.data) };
        let got = own(d.packet(&live)).unwrap();
        assert_eq!((got.vlan, got.inner_vlan), (Some(7), None));
        let mut d = decoder_mode(ChecksumMode::Auto);
        assert_eq!(own(d.packet(&live)).unwrap().checksum, BadTransport);
        let valid = Packet { checksum: KernelChecksum::Valid, ..live };
        assert_eq!(own(d.packet(&valid)).unwrap().checksum, Good);
        let partial = Packet { checksum: KernelChecksum::NotReady, ..live };
        assert_eq!(own(d.packet(&partial)).unwrap().checksum, Checksum::Offloaded);
    }

    #[test]
    fn padding_is_not_payload() {
        // 60-byte frame, 40-byte IP datagram: 6 bytes of Ethernet padding.
        let p = nth("zeek/checksums_ignore_nets/localhost-bad-chksum.pcap", 5);
        assert_eq!(p.data.len(), 60);
        let r = one(&mut decoder(true), p.linktype, &p.data);
        let g = r.as_ref().unwrap();
        assert_eq!((g.ip_len, g.checksum), (40, Good));
        assert!(matches!(g.t, T::Tcp { len: 0, cap: 0, .. }));
    }

    #[test]
    fn snaplen_cut_keeps_declared_lengths() {
        let p = nth("zeek/mpls_in_vlan/mpls-in-vlan.pcap", 2);
        // Ethernet + VLAN + one MPLS label = 22 bytes, then 20 IP + 32 TCP.
        for cut in [74, 100, 400] {
            let r = one(&mut decoder(false), p.linktype, &p.data[..cut]);
            let g = r.as_ref().unwrap();
            assert_eq!(g.ip_len, 1500);
            assert!(
                matches!(g.t, T::Tcp { len: 1448, cap, .. } if cap == cut - 74),
                "{:?}",
                g.t
            );
        }
        // Inside the TCP options, inside the TCP header, inside the IP header.
        for cut in [70, 50, 30] {
            assert_eq!(
                one(&mut decoder(false), p.linktype, &p.data[..cut]),
                Err(SkipReason::Truncated),
                "{cut}"
            );
        }
        // A cut segment cannot be verified; a good one cut only in its padding can.
        let p = nth("zeek/ftp_ipv6/ipv6.pcap", 4);
        let full = one(&mut decoder(true), p.linktype, &p.data);
        assert_eq!(full.as_ref().unwrap().checksum, Good);
        let cut = one(&mut decoder(true), p.linktype, &p.data[..p.data.len() - 1]);
        assert_eq!(cut.as_ref().unwrap().checksum, Unchecked);
    }

    /// Rewrites an IPv4 header field and fixes the header checksum.
    fn patch_v4(ip: &mut [u8], f: impl FnOnce(&mut [u8])) {
        f(ip);
        let hl = usize::from(ip[0] & 0x0f) * 4;
        ip[10] = 0;
        ip[11] = 0;
        let c = checksum::checksum(&ip[..hl]);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
    }

    fn raw(ip: &[u8], verify: bool) -> R {
        one(&mut decoder(verify), LinkType::RAW, ip)
    }

    #[test]
    fn malformed_headers() {
        let good = ip_bytes("zeek/tcp_bad_checksum/syn-bad.pcap", 1);
        assert!(raw(&good, true).is_ok());
        // Total length below the header length.
        let mut ip = good.clone();
        patch_v4(&mut ip, |ip| ip[2..4].copy_from_slice(&19u16.to_be_bytes()));
        assert_eq!(raw(&ip, true), Err(SkipReason::Malformed));
        // IHL below 5.
        let mut ip = good.clone();
        ip[0] = 0x44;
        assert_eq!(raw(&ip, false), Err(SkipReason::Malformed));
        // Wrong version for the link type.
        assert_eq!(
            one(&mut decoder(false), LinkType::IPV6, &good),
            Err(SkipReason::Malformed)
        );
        let mut ip = good.clone();
        ip[0] = 0x55;
        assert_eq!(raw(&ip, false), Err(SkipReason::Malformed));
        // TCP data offset below 5.
        let mut ip = good.clone();
        ip[20 + 12] = 0x40;
        assert_eq!(raw(&ip, false), Err(SkipReason::Malformed));
        // TCP header longer than the IP payload.
        let mut ip = good.clone();
        patch_v4(&mut ip, |ip| ip[2..4].copy_from_slice(&40u16.to_be_bytes()));
        assert_eq!(raw(&ip, false), Err(SkipReason::Malformed));
        // A bad IP header checksum wins over the transport verdict.
        let mut ip = good.clone();
        ip[8] ^= 1;
        let g = raw(&ip, true).unwrap();
        assert_eq!(g.checksum, BadIp);
        assert_eq!(tcp(&Ok(g)), (59856, 80, 4263588410, 0, 0x02, 0));
        // A zero total length (segmentation offload): usable only unverified.
        let mut ip = good.clone();
        patch_v4(&mut ip, |ip| ip[2..4].copy_from_slice(&[0, 0]));
        assert_eq!(raw(&ip, true), Err(SkipReason::Malformed));
        let g = raw(&ip, false).unwrap();
        assert_eq!((g.ip_len, g.checksum), (good.len() as u32, Unchecked));
        // Empty, and one byte.
        assert_eq!(raw(&[], true), Err(SkipReason::Truncated));
        assert_eq!(raw(&[0x45], true), Err(SkipReason::Truncated));
        assert_eq!(
            one(&mut decoder(true), LinkType(147), &good),
            Err(SkipReason::UnknownLinkType)
        );
    }

    #[test]
    fn tunnels_and_other_protocols() {
        let (o, _) = run("linktypes/tcpdump_pptp_bigendian.pcap", true);
        assert_eq!(o[15], Err(SkipReason::TunnelNotDecoded));
        let good = ip_bytes("zeek/tcp_bad_checksum/syn-bad.pcap", 1);
        for (proto, want) in [
            (4, Err(SkipReason::TunnelNotDecoded)),
            (41, Err(SkipReason::TunnelNotDecoded)),
        ] {
            let mut ip = good.clone();
            patch_v4(&mut ip, |ip| ip[9] = proto);
            assert_eq!(raw(&ip, true), want);
        }
        // ESP is a plain protocol for connection purposes.
        let mut ip = good.clone();
        patch_v4(&mut ip, |ip| ip[9] = 50);
        let g = raw(&ip, true).unwrap();
        assert_eq!((g.proto, g.checksum, g.t), (50, Good, T::Other { len: 44 }));
        // UDP to the Teredo and GTP-U ports is plain UDP.
        let (o, _) = run("zeek/teredo_tunnel/Teredo.pcap", true);
        assert_eq!(udp(&o[5]), (3797, 3544, 77));
        let (o, _) = run(
            "zeek/gtp_outer_ip_frag/gtp1_gn_normal_incl_fragmentation.pcap",
            true,
        );
        let g = o[0].as_ref().unwrap();
        assert_eq!(
            (g.src.as_str(), g.dst.as_str()),
            ("239.114.155.111", "63.94.149.181")
        );
        assert_eq!(udp(&o[0]), (2152, 2152, 60));
        // MPLS over something else than IP (first nibble 0: a control word).
        let p = nth("zeek/mpls_in_vlan/mpls-in-vlan.pcap", 2);
        let mut f = p.data.clone();
        f[22] = 0x00;
        assert_eq!(
            one(&mut decoder(true), p.linktype, &f),
            Err(SkipReason::TunnelNotDecoded)
        );
    }

    /// IPv4 fragments of the real DNS query in tcpdump_LINKTYPE_RAW_ipv4.pcap
    /// (payload 37 bytes, split at 8-byte boundaries), with fixed headers.
    fn v4_fragments(id: u16, sizes: &[usize]) -> (Vec<u8>, Vec<Vec<u8>>) {
        let whole = ip_bytes("linktypes/tcpdump_LINKTYPE_RAW_ipv4.pcap", 1);
        let payload = &whole[20..];
        let mut out = Vec::new();
        let mut off = 0;
        for (i, &n) in sizes.iter().enumerate() {
            let last = i + 1 == sizes.len();
            let end = if last { payload.len() } else { off + n };
            let mut f = whole[..20].to_vec();
            f.extend_from_slice(&payload[off..end]);
            patch_v4(&mut f, |f| {
                f[2..4].copy_from_slice(&((20 + end - off) as u16).to_be_bytes());
                f[4..6].copy_from_slice(&id.to_be_bytes());
                let fo = (off / 8) as u16 | if last { 0 } else { 0x2000 };
                f[6..8].copy_from_slice(&fo.to_be_bytes());
            });
            out.push(f);
            off = end;
        }
        (whole, out)
    }

    fn feed(d: &mut Decoder, frags: &[&[u8]], ts: &[i64]) -> Vec<R> {
        frags
            .iter()
            .zip(ts)
            .map(|(f, &t)| own(d.decode(LinkType::RAW, t, f)))
            .collect()
    }

    #[test]
    fn ipv4_fragment_orders() {
        let (whole, f) = v4_fragments(7, &[8, 16, 13]);
        let want = raw(&whole, true).unwrap();
        let mut want_re = want.clone();
        want_re.reassembled = true;
        assert_eq!(want.checksum, Good);
        let held = Err(SkipReason::FragmentHeld);
        let orders: &[&[usize]] = &[
            &[0, 1, 2],
            &[2, 1, 0],
            &[1, 0, 2],
            &[0, 0, 2, 2, 1],
            &[2, 0, 0, 1],
        ];
        for order in orders {
            let mut d = decoder(true);
            let seq: Vec<&[u8]> = order.iter().map(|&i| &f[i][..]).collect();
            let out = feed(&mut d, &seq, &vec![0; seq.len()]);
            let (last, rest) = out.split_last().unwrap();
            assert!(rest.iter().all(|r| *r == held), "{order:?}: {out:?}");
            assert_eq!(last, &Ok(want_re.clone()), "{order:?}");
            assert_eq!(d.fragments_held(), (0, 0));
            assert_eq!(d.stats().reassembled, 1);
        }
        // A first fragment alone is not a datagram.
        let mut d = decoder(true);
        assert_eq!(feed(&mut d, &[&f[0]], &[0]), vec![held.clone()]);
        // A fragment with a bad header checksum is reported, not held.
        let mut bad = f[1].clone();
        bad[8] ^= 1;
        assert_eq!(raw(&bad, true).unwrap().checksum, BadIp);
        assert_eq!(raw(&bad, true).unwrap().t, T::Other { len: 16 });
    }

    #[test]
    fn ipv4_fragment_overlap_first_wins() {
        let (whole, f) = v4_fragments(9, &[16, 8, 13]);
        // A rogue fragment covering bytes 8..24 with different content,
        // arriving after the genuine first piece: the genuine bytes are kept
        // where they overlap, the rogue ones fill the hole, so the UDP
        // checksum fails; arriving after everything, it changes nothing.
        let mut rogue = f[0].clone();
        for b in &mut rogue[20..] {
            *b = !*b;
        }
        patch_v4(&mut rogue, |r| {
            r[6..8].copy_from_slice(&(0x2000u16 | 1).to_be_bytes())
        });
        let mut d = decoder(true);
        let out = feed(&mut d, &[&f[0], &rogue, &f[1], &f[2]], &[0; 4]);
        assert_eq!(out[3].as_ref().unwrap().checksum, BadTransport);
        let mut d = decoder(true);
        let out = feed(&mut d, &[&f[0], &f[1], &rogue, &f[2]], &[0; 4]);
        let mut want = raw(&whole, true).unwrap();
        want.reassembled = true;
        assert_eq!(out[3], Ok(want));
    }

    #[test]
    fn ipv4_fragment_timeout_and_budget() {
        let (_, f) = v4_fragments(11, &[16, 8, 13]);
        let cfg = DecodeConfig {
            checksums: ChecksumMode::Verify,
            frag_timeout_ns: 1_000,
            frag_max_bytes: 1 << 20,
        };
        let mut d = Decoder::new(cfg);
        let out = feed(&mut d, &[&f[0], &f[1], &f[2]], &[0, 500, 1_001]);
        assert_eq!(out, vec![Err(SkipReason::FragmentHeld); 3]);
        assert_eq!(
            (d.stats().frag_timed_out, d.stats().frag_fragments_dropped),
            (1, 2)
        );

        // Room for one incomplete datagram only (256 bytes of overhead each):
        // a second one evicts the first.
        let (_, g) = v4_fragments(12, &[16, 8, 13]);
        let cfg = DecodeConfig {
            checksums: ChecksumMode::Verify,
            frag_timeout_ns: i64::MAX,
            frag_max_bytes: 300,
        };
        let mut d = Decoder::new(cfg);
        let out = feed(&mut d, &[&f[0], &g[0]], &[0; 2]);
        assert_eq!(out, vec![Err(SkipReason::FragmentHeld); 2]);
        assert_eq!(
            (d.stats().frag_evicted, d.stats().frag_fragments_dropped),
            (1, 1)
        );
        assert!(d.fragments_held().1 <= 300);
        // The datagram that stayed completes.
        let out = feed(&mut d, &[&g[1], &g[2]], &[0; 2]);
        assert!(out[1].as_ref().unwrap().reassembled);
        assert_eq!(d.fragments_held(), (0, 0));
        // A fragment bigger than the whole budget is dropped at once.
        let cfg = DecodeConfig {
            checksums: ChecksumMode::Verify,
            frag_timeout_ns: i64::MAX,
            frag_max_bytes: 100,
        };
        let mut d = Decoder::new(cfg);
        assert_eq!(
            feed(&mut d, &[&f[0]], &[0]),
            vec![Err(SkipReason::FragmentDropped)]
        );
    }

    #[test]
    fn ipv6_fragments() {
        let rel = "zeek/ipv6_frag_dns/ipv6-fragmented-dns.pcap";
        let pk = testpcap::read(rel);
        let want = Got {
            src: "2607:f740:b::f93".into(),
            dst: "2001:470:1f11:81f:d138:5f55:6d4:1fe2".into(),
            version: 6,
            proto: 17,
            ip_len: 3278,
            ttl: 53,
            vlan: None,
            inner_vlan: None,
            reassembled: true,
            checksum: Good,
            t: T::Udp {
                sport: 53,
                dport: 51851,
                len: 3230,
                cap: 3230,
            },
        };
        for order in [[5, 6, 7], [7, 6, 5], [6, 5, 7], [5, 5, 7]] {
            let mut d = decoder(true);
            let out: Vec<R> = order
                .iter()
                .map(|&i| own(d.decode(pk[i].linktype, pk[i].ts_ns, &pk[i].data)))
                .collect();
            if order == [5, 5, 7] {
                // Packet 7 (index 6) never came: still held.
                assert!(out.iter().all(|r| *r == Err(SkipReason::FragmentHeld)));
                continue;
            }
            assert_eq!(
                out[..2],
                [Err(SkipReason::FragmentHeld), Err(SkipReason::FragmentHeld)],
                "{order:?}"
            );
            assert_eq!(out[2], Ok(want.clone()), "{order:?}");
        }
        let (o, _) = run(rel, true);
        assert_eq!(o[3], Err(SkipReason::FragmentHeld));
        assert_eq!(o[7], Ok(want));
    }

    #[test]
    fn ipv4_fragments_from_capture() {
        let rel = "zeek/gtp_outer_ip_frag/gtp1_gn_normal_incl_fragmentation.pcap";
        let pk = testpcap::read(rel);
        for order in [[3, 4], [4, 3]] {
            let mut d = decoder(false);
            let out: Vec<R> = order
                .iter()
                .map(|&i| own(d.decode(pk[i].linktype, pk[i].ts_ns, &pk[i].data)))
                .collect();
            assert_eq!(out[0], Err(SkipReason::FragmentHeld));
            let g = out[1].as_ref().unwrap();
            assert_eq!(
                (
                    g.src.as_str(),
                    g.dst.as_str(),
                    g.ip_len,
                    g.ttl,
                    g.reassembled
                ),
                ("239.114.155.111", "63.94.149.181", 1516, 61, true)
            );
            assert_eq!(udp(&out[1]), (2152, 2152, 1488));
        }
    }

    /// Inserts extension headers between the IPv6 header and the TCP SYN of
    /// zeek/ftp_ipv6/ipv6.pcap; the checksum must still verify.
    #[test]
    fn ipv6_extension_headers() {
        let ip = ip_bytes("zeek/ftp_ipv6/ipv6.pcap", 1);
        let (hdr, tcp_seg) = ip.split_at(40);
        let build = |chain: &[(u8, Vec<u8>)], last: u8| {
            // chain: (type, body without the next-header byte)
            let mut v = hdr.to_vec();
            v[6] = chain.first().map_or(last, |c| c.0);
            for (i, (_, body)) in chain.iter().enumerate() {
                v.push(chain.get(i + 1).map_or(last, |c| c.0));
                v.extend_from_slice(body);
            }
            v.extend_from_slice(tcp_seg);
            let plen = (v.len() - 40) as u16;
            v[4..6].copy_from_slice(&plen.to_be_bytes());
            v
        };
        // Hop-by-hop (8 bytes, PadN), destination options (16), AH (len 4 =
        // 24 bytes), mobility-style header (8).
        let hbh = vec![0, 1, 4, 0, 0, 0, 0];
        let dst = {
            let mut b = vec![1, 1, 12];
            b.resize(15, 0);
            b
        };
        let ah = {
            let mut b = vec![4];
            b.resize(23, 0);
            b
        };
        let chain = vec![(0, hbh.clone()), (60, dst), (51, ah), (135, vec![0; 7])];
        let v = build(&chain, 6);
        let g = raw(&v, true).unwrap();
        assert_eq!((g.proto, g.ip_len, g.checksum), (6, 40 + 56 + 44, Good));
        assert_eq!(tcp(&Ok(g)), (49185, 21, 646610527, 0, 0x02, 0));
        // No next header after the options: nothing to decode, still counted.
        let v = build(&[(0, hbh.clone())], 59);
        let g = raw(&v, true).unwrap();
        assert_eq!((g.proto, g.t), (59, T::Other { len: 44 }));
        // An atomic fragment (offset 0, no more fragments) is a whole datagram.
        let v = build(&[(44, vec![0, 0, 0, 0, 0, 0, 1])], 6);
        let g = raw(&v, true).unwrap();
        assert_eq!((g.reassembled, g.checksum), (false, Good));
        // A routing header (type 2) names the final destination, which the
        // checksum uses: move the real destination there.
        let mut rh = vec![2, 2, 1, 0, 0, 0, 0];
        rh.extend_from_slice(&hdr[24..40]);
        let mut v = build(&[(43, rh)], 6);
        v[24..40].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        let g = raw(&v, true).unwrap();
        assert_eq!((g.dst.as_str(), g.checksum), ("2001:db8::1", Good));
        // An extension header running past the payload length is malformed;
        // past the capture, truncated.
        let mut v = build(&[(0, hbh.clone())], 6);
        v[4..6].copy_from_slice(&4u16.to_be_bytes());
        assert_eq!(raw(&v, false), Err(SkipReason::Malformed));
        let v = build(&[(0, hbh)], 6);
        assert_eq!(raw(&v[..44], false), Err(SkipReason::Truncated));
        // Payload length 0 (jumbogram or offload): the capture gives the length.
        let mut v = ip.clone();
        v[4..6].copy_from_slice(&[0, 0]);
        let g = raw(&v, true).unwrap();
        assert_eq!((g.ip_len, g.checksum), (84, Good));
    }

    /// Wraps a real IPv4 packet in link layers that no capture here has.
    #[test]
    fn synthetic_link_layers() {
        let ip = ip_bytes("zeek/tcp_bad_checksum/syn-bad.pcap", 1);
        let v6 = ip_bytes("zeek/ftp_ipv6/ipv6.pcap", 1);
        let want = raw(&ip, false).unwrap();
        let want6 = raw(&v6, false).unwrap();
        let mac = [0u8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
        let cat = |parts: &[&[u8]]| parts.concat();
        let dec = |lt: LinkType, f: &[u8]| one(&mut decoder(false), lt, f);

        // PPPoE session over Ethernet, with and without compressed protocol.
        let pppoe = [0x11, 0x00, 0x12, 0x34, 0x00, 0x2e];
        assert_eq!(
            dec(
                LinkType::ETHERNET,
                &cat(&[&mac, &[0x88, 0x64], &pppoe, &[0x00, 0x21], &ip])
            ),
            Ok(want.clone())
        );
        assert_eq!(
            dec(
                LinkType::ETHERNET,
                &cat(&[&mac, &[0x88, 0x64], &pppoe, &[0x00, 0x57], &v6])
            ),
            Ok(want6.clone())
        );
        assert_eq!(
            dec(
                LinkType::ETHERNET,
                &cat(&[&mac, &[0x88, 0x64], &pppoe, &[0xc0, 0x21], &ip])
            ),
            Err(SkipReason::NotIp)
        );
        assert_eq!(
            dec(LinkType::PPP_ETHER, &cat(&[&pppoe, &[0x00, 0x21], &ip])),
            Ok(want.clone())
        );
        // PPPoE discovery.
        assert_eq!(
            dec(
                LinkType::ETHERNET,
                &cat(&[&mac, &[0x88, 0x63], &pppoe, &ip])
            ),
            Err(SkipReason::NotIp)
        );
        // 802.3 with LLC/SNAP; LLC without SNAP (spanning tree).
        let len = ((8 + ip.len()) as u16).to_be_bytes();
        let snap = [0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00];
        assert_eq!(
            dec(LinkType::ETHERNET, &cat(&[&mac, &len, &snap, &ip])),
            Ok(want.clone())
        );
        assert_eq!(
            dec(
                LinkType::ETHERNET,
                &cat(&[&mac, &[0, 0x26], &[0x42, 0x42, 0x03], &[0; 35]])
            ),
            Err(SkipReason::NotIp)
        );
        assert_eq!(
            dec(
                LinkType::ETHERNET,
                &cat(&[&mac, &len, &[0xaa, 0xaa, 0x03, 0, 0]])
            ),
            Err(SkipReason::Truncated)
        );
        // 802.1ad + 802.1Q + 0x9100 triple tag: the outer two are kept.
        let f = cat(&[
            &mac,
            &[0x88, 0xa8, 0x00, 0x64],
            &[0x81, 0x00, 0x20, 0xc8],
            &[0x91, 0x00, 0x01, 0x2c],
            &[0x08, 0x00],
            &ip,
        ]);
        let g = dec(LinkType::ETHERNET, &f).unwrap();
        assert_eq!((g.vlan, g.inner_vlan), (Some(100), Some(200)));
        // MPLS label stack of two, bottom of stack on the second.
        let f = cat(&[
            &mac,
            &[0x88, 0x47],
            &[0, 0x10, 0x00, 64],
            &[0, 0x20, 0x01, 64],
            &v6,
        ]);
        assert_eq!(dec(LinkType::ETHERNET, &f), Ok(want6.clone()));
        // PPP: address/control present or not, protocol compressed or not.
        for hdr in [
            &[0xff, 0x03, 0x00, 0x21][..],
            &[0x00, 0x21],
            &[0x21],
            &[0xff, 0x03, 0x21],
        ] {
            assert_eq!(
                dec(LinkType::PPP, &cat(&[hdr, &ip])),
                Ok(want.clone()),
                "{hdr:?}"
            );
            assert_eq!(
                dec(LinkType::PPP_HDLC, &cat(&[hdr, &ip])),
                Ok(want.clone()),
                "{hdr:?}"
            );
        }
        assert_eq!(
            dec(LinkType::PPP, &cat(&[&[0xff, 0x03, 0x00, 0x57], &v6])),
            Ok(want6.clone())
        );
        assert_eq!(dec(LinkType::PPP, &[0xff]), Err(SkipReason::Truncated));
        assert_eq!(
            dec(LinkType::PPP, &[0xff, 0x03, 0x00]),
            Err(SkipReason::Truncated)
        );
        // Cisco HDLC, on its own link type and inside PPP_HDLC.
        for lt in [extra::C_HDLC, LinkType::PPP_HDLC] {
            assert_eq!(
                dec(lt, &cat(&[&[0x0f, 0x00, 0x08, 0x00], &ip])),
                Ok(want.clone())
            );
            assert_eq!(
                dec(lt, &cat(&[&[0x8f, 0x00, 0x86, 0xdd], &v6])),
                Ok(want6.clone())
            );
        }
        // BSD loopback: either byte order for NULL, network order for LOOP,
        // and the three AF_INET6 values.
        assert_eq!(
            dec(LinkType::NULL, &cat(&[&[2, 0, 0, 0], &ip])),
            Ok(want.clone())
        );
        assert_eq!(
            dec(LinkType::NULL, &cat(&[&[0, 0, 0, 2], &ip])),
            Ok(want.clone())
        );
        for af in [24u32, 28, 30] {
            assert_eq!(
                dec(LinkType::NULL, &cat(&[&af.to_le_bytes(), &v6])),
                Ok(want6.clone())
            );
            assert_eq!(
                dec(LinkType::NULL, &cat(&[&af.to_be_bytes(), &v6])),
                Ok(want6.clone())
            );
            assert_eq!(
                dec(LinkType::LOOP, &cat(&[&af.to_be_bytes(), &v6])),
                Ok(want6.clone())
            );
        }
        assert_eq!(
            dec(LinkType::LOOP, &cat(&[&2u32.to_le_bytes(), &ip])),
            Err(SkipReason::NotIp)
        );
        assert_eq!(
            dec(LinkType::NULL, &cat(&[&[7, 0, 0, 0], &ip])),
            Err(SkipReason::NotIp)
        );
        // Linux cooked v1 carrying LLC/SNAP (protocol 4), and netlink.
        let sll = |proto: [u8; 2], arphrd: [u8; 2]| {
            cat(&[&[0, 0], &arphrd, &[0, 6], &[1, 2, 3, 4, 5, 6, 0, 0], &proto])
        };
        assert_eq!(
            dec(
                LinkType::LINUX_SLL,
                &cat(&[&sll([0, 4], [0, 1]), &snap, &ip])
            ),
            Ok(want.clone())
        );
        assert_eq!(
            dec(
                LinkType::LINUX_SLL,
                &cat(&[&sll([0x08, 0], [0x03, 0x38]), &ip])
            ),
            Err(SkipReason::NotIp)
        );
        // Raw link types insist on their version.
        assert_eq!(dec(LinkType::IPV4, &v6), Err(SkipReason::Malformed));
        assert_eq!(dec(LinkType::RAW_BSD12, &v6), Ok(want6.clone()));
        assert_eq!(dec(LinkType::RAW_BSD14, &ip), Ok(want.clone()));
    }

    /// NFLOG TLVs in big-endian order (a capture from a big-endian host).
    #[test]
    fn nflog_big_endian() {
        let p = nth("linktypes/zeek_nflog_http.pcap", 6);
        let want = one(&mut decoder(true), p.linktype, &p.data);
        let mut be = p.data[..4].to_vec();
        let mut off = 4;
        while off + 4 <= p.data.len() {
            let len = usize::from(u16::from_le_bytes([p.data[off], p.data[off + 1]]));
            let ty = u16::from_le_bytes([p.data[off + 2], p.data[off + 3]]);
            be.extend_from_slice(&(len as u16).to_be_bytes());
            be.extend_from_slice(&ty.to_be_bytes());
            let next = (off + ((len + 3) & !3)).min(p.data.len());
            be.extend_from_slice(&p.data[off + 4..next]);
            off = next;
        }
        assert_eq!(be.len(), p.data.len());
        assert_ne!(be, p.data);
        assert_eq!(one(&mut decoder(true), p.linktype, &be), want);
        // A record without the payload TLV carries no packet; one cut before
        // it is truncated.
        let no_payload = cat4(&p.data[..4], &[8, 0, 1, 0, 0, 0, 0, 0]);
        assert_eq!(
            one(&mut decoder(true), p.linktype, &no_payload),
            Err(SkipReason::NotIp)
        );
        assert_eq!(
            one(&mut decoder(true), p.linktype, &no_payload[..10]),
            Err(SkipReason::Truncated)
        );
        assert_eq!(
            one(&mut decoder(true), p.linktype, &p.data[..4]),
            Err(SkipReason::Truncated)
        );
    }

    fn cat4(a: &[u8], b: &[u8]) -> Vec<u8> {
        [a, b].concat()
    }

    /// Every prefix of every packet of these captures decodes without
    /// panicking, to the same packet with the captured part shortened, or
    /// to `Truncated`.
    #[test]
    fn every_prefix_decodes() {
        let files = [
            "linktypes/tcpdump_tcp_handshake_nano_sll.pcap",
            "linktypes/zeek_linux_dlt_sll2.pcap",
            "linktypes/tcpdump_tcp_rst_diag_null.pcap",
            "linktypes/tcpdump_LINKTYPE_RAW_ipv6.pcap",
            "linktypes/tcpdump_LINKTYPE_IPV4.pcap",
            "linktypes/zeek_nflog_http.pcap",
            "linktypes/zeek_ppp_quic_interop_retry.pcap",
            "linktypes/tcpdump_pptp_bigendian.pcap",
            "zeek/vlan_qinq/q-in-q.pcap",
            "zeek/mpls_in_vlan/mpls-in-vlan.pcap",
            "zeek/ipv6_frag_dns/ipv6-fragmented-dns.pcap",
            "zeek/gtp_outer_ip_frag/gtp1_gn_normal_incl_fragmentation.pcap",
            "zeek/icmp_events/icmp-destunreach-udp.pcap",
            "zeek/checksums_ignore_nets/localhost-bad-chksum.pcap",
        ];
        let mut checked = 0;
        for rel in files {
            for (i, p) in testpcap::read(rel).iter().enumerate().take(12) {
                for verify in [false, true] {
                    let full = one(&mut decoder(verify), p.linktype, &p.data);
                    for n in 0..p.data.len() {
                        let cut = one(&mut decoder(verify), p.linktype, &p.data[..n]);
                        checked += 1;
                        let ctx = || format!("{rel} #{} cut at {n}: {cut:?} vs {full:?}", i + 1);
                        match (&full, &cut) {
                            (_, Err(SkipReason::Truncated)) => {}
                            // NFLOG cut exactly between TLVs looks like a
                            // record without the packet.
                            (_, Err(SkipReason::NotIp)) if p.linktype == LinkType::NFLOG => {}
                            (Err(a), Err(b)) => assert_eq!(a, b, "{}", ctx()),
                            (Ok(f), Ok(c)) => {
                                let mut c = c.clone();
                                // Only the captured lengths and the checksum verdict may differ.
                                c.t = match (c.t, &f.t) {
                                    (T::Tcp { cap, .. }, T::Tcp { cap: fc, .. }) if cap <= *fc => {
                                        f.t.clone()
                                    }
                                    (T::Udp { cap, .. }, T::Udp { cap: fc, .. }) if cap <= *fc => {
                                        f.t.clone()
                                    }
                                    (T::Icmp { cap, .. }, T::Icmp { cap: fc, .. })
                                        if cap <= *fc =>
                                    {
                                        f.t.clone()
                                    }
                                    (t, _) => t,
                                };
                                if c.checksum == Unchecked {
                                    c.checksum = f.checksum;
                                }
                                assert_eq!(&c, f, "{}", ctx());
                            }
                            _ => panic!("{}", ctx()),
                        }
                    }
                }
            }
        }
        assert!(checked > 10_000);
    }

    #[test]
    fn stats_by_reason() {
        let (_, st) = run("zeek/ipv6_frag_dns/ipv6-fragmented-dns.pcap", true);
        let v: Vec<(SkipReason, u64)> = st.skipped_iter().filter(|(_, n)| *n > 0).collect();
        assert_eq!(v, [(SkipReason::FragmentHeld, 3)]);
        assert_eq!(st.skipped(SkipReason::FragmentHeld), 3);
        assert_eq!(st.skipped_iter().count(), SkipReason::COUNT);
        for (i, r) in SkipReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
    }

    /// `WIRELOG_DUMP=path cargo test -p wirelog-decode dump -- --ignored --nocapture`
    /// prints what the decoder makes of a capture under shared/testdata.
    #[test]
    #[ignore]
    fn dump() {
        let path = std::env::var("WIRELOG_DUMP").unwrap_or_default();
        let (out, st) = run(&path, std::env::var("WIRELOG_NOVERIFY").is_err());
        for (i, r) in out.iter().enumerate() {
            println!("{} {r:?}", i + 1);
        }
        println!("{st:?}");
    }
}
