//! One tracked connection and its conversion to a conn record.

use wirelog_decode::IpAddr16;
use wirelog_record::{CommunityId, ConnRecord, ConnState, Proto, Uid};

use crate::history::HistoryState;
use crate::key::ConnKey;
use crate::tcp::{ColdParts, TcpConn};

/// UDP and ICMP keep only what Zeek's session adapters keep: payload sizes
/// per side (-1 until that side sent anything). Their checksum-error counts
/// (non-zero only after a bad checksum, never with checksums ignored) are in
/// the tracker's [`Overflow`], so the datagram state is 16 bytes. It is
/// 4-aligned (`packed(4)`: the two `i64`s are read and written whole, by
/// value, an unaligned load on x86 costs the same), so [`ProtoState`] fits
/// in 20 bytes beside TCP's part (whose flags hold the enum's tag) and the
/// entry in 112: with 8-aligned sizes the enum took 24.
#[derive(Debug, Clone, Copy)]
#[repr(C, packed(4))]
pub struct DatagramState {
    pub orig_len: i64,
    pub resp_len: i64,
}

impl DatagramState {
    pub fn new() -> Self {
        DatagramState { orig_len: -1, resp_len: -1 }
    }

    pub fn add(&mut self, is_orig: bool, len: i64) {
        // By value: a reference to a field of a packed struct may be unaligned.
        let l = if is_orig { self.orig_len } else { self.resp_len };
        let l = if l < 0 { len } else { l + len };
        if is_orig {
            self.orig_len = l;
        } else {
            self.resp_len = l;
        }
    }
}

impl Default for DatagramState {
    fn default() -> Self {
        Self::new()
    }
}

/// TCP's part of a connection entry: where its endpoint state is, and the
/// timers only TCP has. Beside the datagram state in the same enum, it
/// costs the entry nothing. A timer is kept as its distance in ns from the
/// connection's start plus the timer's usual delay ([`TimerBases`]): a
/// timer set within ~4.3 s of the delay's own start (every attempt timer of
/// a connection opened by its SYN, the close timers of short connections)
/// fits in 32 bits; any other is [`TIMER_WIDE`] and whole in the tracker's
/// [`Overflow`] (one map entry for such a connection, written when set).
#[derive(Debug, Clone, Copy)]
pub struct TcpPart {
    /// The connection's [`TcpConn`] in the tracker's TCP slab; with
    /// `syn_sent`, the initial sequence number of its only state instead.
    /// Read through [`TcpStates`].
    slab: u32,
    /// Connection-attempt timer, removal time once closed or reset, and an
    /// extra expiry check after a half close ([`Timer`] orders them):
    /// [`TIMER_UNSET`], [`TIMER_WIDE`] or the distance from their base.
    timers: [u32; 3],
    /// The connection is in [`TcpConn::syn_sent`]'s state (a SYN and
    /// nothing else yet, as every connection of a port scan or SYN flood):
    /// it holds no slab entry, `slab` is the SYN's sequence number.
    syn_sent: bool,
    /// The analyzer timers were cancelled by a complete close.
    pub timers_cancelled: bool,
}

/// A TCP timer of [`TcpPart`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timer {
    /// Connection-attempt timer.
    Attempt = 0,
    /// Removal time once closed or reset.
    Delete = 1,
    /// An extra expiry check after a half close.
    ExpireExtra = 2,
}

/// A timer not set (`i64::MAX` when read).
const TIMER_UNSET: u32 = u32::MAX;
/// A timer whose distance from its base does not fit: whole in [`Overflow`].
const TIMER_WIDE: u32 = u32::MAX - 1;

/// What each TCP timer's distance is counted from, less the connection's
/// start: the delay the timer is usually set to (the tracker's
/// configuration), so a timer set at the connection's first packet is 0.
#[derive(Debug, Clone, Copy, Default)]
pub struct TimerBases(pub [i64; 3]);

impl TcpPart {
    fn new(slab: u32) -> Self {
        TcpPart { slab, timers: [TIMER_UNSET; 3], syn_sent: false, timers_cancelled: false }
    }

    /// The connection is in the state a lone SYN leaves, without a slab entry.
    #[inline(always)]
    pub fn syn_only(&self) -> bool {
        self.syn_sent
    }

    /// Whether timer `t` is set (without reading its time).
    #[inline(always)]
    pub fn is_set(&self, t: Timer) -> bool {
        self.timers[t as usize] != TIMER_UNSET
    }

    /// Timer `t` of connection `idx` started at `start_ns` (`i64::MAX` when not set).
    #[inline]
    pub fn timer(&self, t: Timer, idx: u32, start_ns: i64, bases: &TimerBases, ovf: &Overflow) -> i64 {
        match self.timers[t as usize] {
            TIMER_UNSET => i64::MAX,
            TIMER_WIDE => ovf.timer(idx, t),
            d => start_ns.wrapping_add(bases.0[t as usize]).wrapping_add(i64::from(d)),
        }
    }

    /// Sets timer `t` to `at` (`i64::MAX`: not set).
    #[inline]
    pub fn set_timer(&mut self, t: Timer, at: i64, idx: u32, start_ns: i64, bases: &TimerBases, ovf: &mut Overflow) {
        let d = at.wrapping_sub(start_ns.wrapping_add(bases.0[t as usize])) as u64;
        let was_wide = self.timers[t as usize] == TIMER_WIDE;
        self.timers[t as usize] = if at == i64::MAX {
            TIMER_UNSET
        } else if d < u64::from(TIMER_WIDE) {
            d as u32
        } else {
            ovf.set_timer(idx, t, at);
            TIMER_WIDE
        };
        if was_wide && self.timers[t as usize] != TIMER_WIDE {
            ovf.clear_timer(idx, t);
        }
    }
}

/// The TCP connections' endpoint states: a slab of [`TcpConn`] (52 bytes
/// each, and their cold parts in [`ColdParts`]), except for the connections in the state a lone SYN leaves
/// ([`TcpConn::syn_sent`]), which keep only its sequence number in their
/// [`TcpPart`]. A connection's state enters the slab when a packet changes
/// it from that one ([`TcpStates::get_mut`]), and leaves it when a packet
/// leaves it in that one ([`TcpStates::settle`]).
pub struct TcpStates {
    slab: crate::slab::Slab<TcpConn>,
    /// The endpoints' cold parts of the connections that have one.
    cold: ColdParts,
    report_gaps_for_partial: bool,
}

impl TcpStates {
    pub fn with_capacity(capacity: usize, report_gaps_for_partial: bool) -> Self {
        TcpStates {
            slab: crate::slab::Slab::with_capacity(capacity),
            cold: ColdParts::with_capacity(capacity),
            report_gaps_for_partial,
        }
    }

    /// The cold parts, to read beside a state from [`TcpStates::get`].
    pub fn cold(&self) -> &ColdParts {
        &self.cold
    }

    /// A new connection's part, its state fresh in the slab.
    pub fn insert(&mut self) -> TcpPart {
        TcpPart::new(self.slab.insert(TcpConn::new(self.report_gaps_for_partial)))
    }

    /// The connection's state, made for the moment when it has none in the slab.
    #[inline]
    pub fn get(&self, part: &TcpPart) -> Option<std::borrow::Cow<'_, TcpConn>> {
        if part.syn_sent {
            Some(std::borrow::Cow::Owned(TcpConn::syn_sent(part.slab, self.report_gaps_for_partial)))
        } else {
            self.slab.get(part.slab).map(std::borrow::Cow::Borrowed)
        }
    }

    /// `f` of the connection's state ([`TcpStates::get`]), out of line: a
    /// state made for the moment has drop code that the packet path, whose
    /// registers are scarce, should not hold.
    #[inline(never)]
    pub fn with<R>(&self, part: &TcpPart, f: impl FnOnce(&TcpConn) -> R) -> Option<R> {
        self.get(part).map(|t| f(&t))
    }

    /// The same, for what reads the endpoints' cold parts too.
    #[inline(never)]
    pub fn with_cold<R>(&self, part: &TcpPart, f: impl FnOnce(&TcpConn, &ColdParts) -> R) -> Option<R> {
        self.get(part).map(|t| f(&t, &self.cold))
    }

    /// The connection's state to change (one without a slab entry gets
    /// one), and the cold parts its methods take.
    #[inline(always)]
    pub fn get_mut(&mut self, part: &mut TcpPart) -> Option<(&mut TcpConn, &mut ColdParts)> {
        if part.syn_sent {
            self.enter(part);
        }
        Some((self.slab.get_mut(part.slab)?, &mut self.cold))
    }

    #[cold]
    #[inline(never)]
    fn enter(&mut self, part: &mut TcpPart) {
        part.slab = self.slab.insert(TcpConn::syn_sent(part.slab, self.report_gaps_for_partial));
        part.syn_sent = false;
    }

    /// After a packet that may have left the connection in the state of a
    /// lone SYN: if it did, its slab entry is freed and the part keeps the
    /// sequence number. Out of line: called after a state change only,
    /// it kept the packet path's code in `Tracker::deliver` larger.
    #[inline(never)]
    pub fn settle(&mut self, part: &mut TcpPart) {
        if part.syn_sent {
            return;
        }
        if let Some(isn) = self.slab.get(part.slab).and_then(TcpConn::syn_sent_isn) {
            self.slab.remove(part.slab);
            part.slab = isn;
            part.syn_sent = true;
        }
    }

    /// The connection ended: its slab entry and cold slot, if any, are freed.
    pub fn remove(&mut self, part: &TcpPart) {
        if !part.syn_sent {
            if let Some(t) = self.slab.take(part.slab) {
                self.cold.free(t.cold_slot());
            }
        }
    }

    /// Slab entries held (TCP connections open, but those with a lone SYN).
    pub fn len(&self) -> usize {
        self.slab.len()
    }

    /// Bytes a connection's state takes at most.
    pub const fn bytes_per_value() -> usize {
        crate::slab::Slab::<TcpConn>::bytes_per_value()
    }
}

#[derive(Debug, Clone)]
pub enum ProtoState {
    Tcp(TcpPart),
    Udp(DatagramState),
    Icmp(DatagramState),
}

pub struct Conn {
    pub start_ns: i64,
    /// Last time the connection made progress (Zeek's LastTime).
    pub last_ns: i64,
    /// Time of the latest packet of any kind (timers never fire before it),
    /// as its distance from `last_ns` in ns (never negative: `last_ns` is a
    /// packet's time, and `seen` the latest of them); [`SEEN_WIDE`] when
    /// that is 4.3 s or more, and the time is in the tracker's [`Overflow`].
    /// Read and written through [`Overflow::seen`], [`Overflow::set_times`].
    pub(crate) seen_after_last: u32,
    /// Packets per side (0: originator, 1: responder), the low 16 bits:
    /// the carries of a connection that passes 65,535 on a side are in
    /// the tracker's [`Overflow`] (one map entry for such a connection,
    /// written once per 65,536 packets). Read whole with [`Overflow::counts`].
    pub pkts: [u16; 2],
    /// IP bytes per side, the low 32 bits (carries as for `pkts`).
    pub ip_bytes: [u32; 2],
    pub hist: HistoryState,
    /// Outer and inner VLAN ids (12 bits), [`NO_VLAN`] when absent.
    vlans: [u16; 2],
    pub state: ProtoState,
    /// This connection's flow in the current bucket.
    pub flow: crate::flow::FlowSlot,
    /// The deadline of the pending wheel entry (a wheel entry with another
    /// deadline is stale).
    pub scheduled_at: i64,
    /// Application parsing, for connections whose protocol was recognised:
    /// the index of its state in the tracker's slab of parsers (`Tracker::apps`),
    /// [`NO_APP`] for the others (4 bytes where a box pointer took 8).
    pub(crate) app: u32,
    /// Content-detection progress (over when parsing is off, nothing was
    /// recognised, or the protocol is known).
    pub(crate) detection: wirelog_parse::detect::Detection,
}

/// `Conn::app` of a connection without a parser.
pub const NO_APP: u32 = u32::MAX;

/// `seen_after_last` when the distance does not fit in it.
const SEEN_WIDE: u32 = u32::MAX;

/// A VLAN slot without an id (ids are 12 bits: the decoder masks the tag's
/// priority bits off, `wirelog_decode::link` and the ring's `tp_vlan_tci`).
pub const NO_VLAN: u16 = u16::MAX;

impl Conn {
    /// A connection whose first packet came at `ts`.
    pub fn new(ts: i64, vlan: Option<u16>, inner_vlan: Option<u16>, state: ProtoState, detection: wirelog_parse::detect::Detection) -> Self {
        let id = |v: Option<u16>| v.map_or(NO_VLAN, |v| v & 0x0fff);
        Conn {
            start_ns: ts,
            last_ns: ts,
            seen_after_last: 0,
            pkts: [0; 2],
            ip_bytes: [0; 2],
            hist: HistoryState::default(),
            vlans: [id(vlan), id(inner_vlan)],
            state,
            flow: crate::flow::FlowSlot::NONE,
            scheduled_at: i64::MAX,
            app: NO_APP,
            detection,
        }
    }

    /// The connection has a parser (its state in the tracker's slab).
    #[inline(always)]
    pub fn has_app(&self) -> bool {
        self.app != NO_APP
    }

    /// The outer and inner VLAN ids.
    pub fn vlans(&self) -> (Option<u16>, Option<u16>) {
        let v = |id: u16| (id != NO_VLAN).then_some(id);
        (v(self.vlans[0]), v(self.vlans[1]))
    }

    /// Counts one packet of `ip_len` bytes from `side` (0: originator);
    /// true when a counter wrapped, and its carry must go to [`Overflow::carry`].
    #[inline(always)]
    #[must_use]
    pub fn count(&mut self, side: usize, ip_len: u32) -> bool {
        let (p, po) = self.pkts[side].overflowing_add(1);
        let (b, bo) = self.ip_bytes[side].overflowing_add(ip_len);
        self.pkts[side] = p;
        self.ip_bytes[side] = b;
        po | bo
    }
}

/// What does not fit in a connection entry, by table index, for the few
/// connections that need it: the upper bits of the packet and byte
/// counters of those that passed 2^16 packets or 2^32 bytes (4 GiB) on one
/// side, and the latest packet time of those whose latest packet came
/// 4.3 s or more after their last progress (`Conn::seen_after_last`). The
/// entry keeps the low 16 bits of packets, the low 32 of bytes and a 32-bit
/// distance, which saves 24 bytes in every entry for a hash-map entry in
/// these few. Each counter's words are `[pkts orig, bytes orig, pkts resp,
/// bytes resp]`: carries of 2^16 for packets, of 2^32 for bytes.
#[derive(Default)]
pub struct Overflow {
    counts: std::collections::HashMap<u32, [u32; 4]>,
    seen: std::collections::HashMap<u32, i64>,
    /// TCP timers whose distance from their base does not fit in
    /// [`TcpPart`] ([`TIMER_WIDE`]), by [`Timer`].
    timers: std::collections::HashMap<u32, [i64; 3]>,
    /// UDP checksum-error counts per side, of connections that had one.
    chk: std::collections::HashMap<u32, [u32; 2]>,
}

impl Overflow {
    /// After [`Conn::count`] said a counter of `side` wrapped: a wrapped
    /// low half is 0 (packets) or below the packet's length (bytes).
    #[cold]
    #[inline(never)]
    pub fn carry(&mut self, idx: u32, c: &Conn, side: usize, ip_len: u32) {
        let hi = self.counts.entry(idx).or_default();
        hi[2 * side] += (c.pkts[side] == 0) as u32;
        hi[2 * side + 1] += (c.ip_bytes[side] < ip_len) as u32;
    }

    /// The four counters whole: `[orig pkts, orig bytes, resp pkts, resp bytes]`.
    #[inline]
    pub fn counts(&self, idx: u32, c: &Conn) -> [u64; 4] {
        let hi = if self.counts.is_empty() { [0; 4] } else { self.counts.get(&idx).copied().unwrap_or_default() };
        [
            u64::from(hi[0]) << 16 | u64::from(c.pkts[0]),
            u64::from(hi[1]) << 32 | u64::from(c.ip_bytes[0]),
            u64::from(hi[2]) << 16 | u64::from(c.pkts[1]),
            u64::from(hi[3]) << 32 | u64::from(c.ip_bytes[1]),
        ]
    }

    /// Sets the four counters (as [`Overflow::counts`] orders them).
    pub fn set(&mut self, idx: u32, c: &mut Conn, v: [u64; 4]) {
        c.pkts = [v[0] as u16, v[2] as u16];
        c.ip_bytes = [v[1] as u32, v[3] as u32];
        // Packets past 2^48 on a side (never: 2^48 minimal frames take
        // years at 100 Gb/s) would lose their top bits.
        let hi = [(v[0] >> 16) as u32, (v[1] >> 32) as u32, (v[2] >> 16) as u32, (v[3] >> 32) as u32];
        if hi != [0; 4] {
            self.counts.insert(idx, hi);
        } else if !self.counts.is_empty() {
            self.counts.remove(&idx);
        }
    }

    /// Adds `pkts` packets of `bytes` bytes to `side` (kernel accounting's merge).
    pub fn add(&mut self, idx: u32, c: &mut Conn, side: usize, pkts: u64, bytes: u64) {
        let mut v = self.counts(idx, c);
        v[2 * side] += pkts;
        v[2 * side + 1] += bytes;
        self.set(idx, c, v);
    }

    /// Swaps the sides' counters (a flip of the roles).
    pub fn swap_sides(&mut self, idx: u32, c: &mut Conn) {
        let [a, b, x, y] = self.counts(idx, c);
        self.set(idx, c, [x, y, a, b]);
    }

    /// The time of the connection's latest packet.
    #[inline(always)]
    pub fn seen(&self, idx: u32, c: &Conn) -> i64 {
        self.seen_of(idx, c.last_ns, c.seen_after_last)
    }

    /// [`Overflow::seen`] from the two fields (so that the caller may hold
    /// the connection's protocol state).
    #[inline(always)]
    fn seen_of(&self, idx: u32, last_ns: i64, after: u32) -> i64 {
        if after != SEEN_WIDE {
            last_ns + i64::from(after)
        } else {
            self.seen_wide(idx, last_ns)
        }
    }

    #[cold]
    #[inline(never)]
    fn seen_wide(&self, idx: u32, last_ns: i64) -> i64 {
        debug_assert!(self.seen.contains_key(&idx), "connection {idx}'s latest time is lost");
        self.seen.get(&idx).copied().unwrap_or(last_ns)
    }

    /// A packet at `ts` that made progress: it is the last progress, and
    /// the latest packet unless a later one came before it. The common case
    /// (packets in time order, no wide distance) is two stores after one
    /// compare, and a packet that takes it computes no latest time first
    /// (1.2 instructions a packet fewer on the MySQL captures, 3.4 on
    /// http.pcap: BENCHMARKS.md, branch pkt53).
    #[inline(always)]
    pub fn progress(&mut self, idx: u32, last_ns: &mut i64, after: &mut u32, ts: i64) {
        if *after != SEEN_WIDE && ts >= *last_ns + i64::from(*after) {
            *last_ns = ts;
            *after = 0;
        } else {
            let seen = self.seen_of(idx, *last_ns, *after).max(ts);
            self.set_times(idx, last_ns, after, ts, seen);
        }
    }

    /// A packet at `ts` that made no progress: only the latest time moves.
    #[inline(always)]
    pub fn touch(&mut self, idx: u32, last_ns: &mut i64, after: &mut u32, ts: i64) {
        let seen = self.seen_of(idx, *last_ns, *after).max(ts);
        let last = *last_ns;
        self.set_times(idx, last_ns, after, last, seen);
    }

    /// Sets the time of the last progress and of the latest packet
    /// (`seen >= last`) of connection `idx`: its `last_ns` and `seen_after_last`
    /// (the two fields, so that the caller may hold its protocol state).
    #[inline(always)]
    pub fn set_times(&mut self, idx: u32, last_ns: &mut i64, after: &mut u32, last: i64, seen: i64) {
        // Negative distances wrap to large ones: wide too.
        let d = seen.wrapping_sub(last) as u64;
        if d < u64::from(SEEN_WIDE) && *after != SEEN_WIDE {
            *last_ns = last;
            *after = d as u32;
        } else {
            self.set_seen_wide(idx, last_ns, after, last, seen);
        }
    }

    #[cold]
    #[inline(never)]
    fn set_seen_wide(&mut self, idx: u32, last_ns: &mut i64, after: &mut u32, last: i64, seen: i64) {
        *last_ns = last;
        match u32::try_from(seen.wrapping_sub(last)) {
            Ok(d) if d != SEEN_WIDE => {
                self.seen.remove(&idx);
                *after = d;
            }
            _ => {
                self.seen.insert(idx, seen);
                *after = SEEN_WIDE;
            }
        }
    }

    /// A TCP timer kept whole ([`TIMER_WIDE`]).
    #[cold]
    #[inline(never)]
    fn timer(&self, idx: u32, t: Timer) -> i64 {
        debug_assert!(self.timers.contains_key(&idx), "connection {idx}'s timer is lost");
        self.timers.get(&idx).map_or(i64::MAX, |v| v[t as usize])
    }

    #[cold]
    #[inline(never)]
    fn set_timer(&mut self, idx: u32, t: Timer, at: i64) {
        self.timers.entry(idx).or_insert([i64::MAX; 3])[t as usize] = at;
    }

    #[cold]
    #[inline(never)]
    fn clear_timer(&mut self, idx: u32, t: Timer) {
        if let Some(v) = self.timers.get_mut(&idx) {
            v[t as usize] = i64::MAX;
            if *v == [i64::MAX; 3] {
                self.timers.remove(&idx);
            }
        }
    }

    /// One more checksum error on `side` (0: originator) of UDP connection
    /// `idx`: the side's count after it.
    #[cold]
    #[inline(never)]
    pub fn checksum_error(&mut self, idx: u32, side: usize) -> u32 {
        let c = &mut self.chk.entry(idx).or_default()[side];
        *c = c.wrapping_add(1);
        *c
    }

    /// The connection at `idx` is gone.
    #[inline]
    pub fn forget(&mut self, idx: u32) {
        if !self.counts.is_empty() {
            self.counts.remove(&idx);
        }
        if !self.seen.is_empty() {
            self.seen.remove(&idx);
        }
        if !self.timers.is_empty() {
            self.timers.remove(&idx);
        }
        if !self.chk.is_empty() {
            self.chk.remove(&idx);
        }
    }

    /// Connections with a counter carry, and with a wide latest time.
    #[cfg(test)]
    pub fn len(&self) -> (usize, usize) {
        (self.counts.len(), self.seen.len())
    }

    /// Connections with a wide TCP timer, and with a UDP checksum error.
    #[cfg(test)]
    pub fn len_rare(&self) -> (usize, usize) {
        (self.timers.len(), self.chk.len())
    }
}

/// Zeek's `Site::private_address_space` (scripts/base/utils/site.zeek, the
/// IANA IPv4 and IPv6 special-purpose registries), which Zeek copies into
/// `Site::local_nets` by default (`private_address_space_is_local`): the
/// networks behind `local_orig`/`local_resp`. IPv4 blocks, as (network, prefix).
const PRIVATE_V4: &[([u8; 4], u8)] = &[
    ([0, 0, 0, 0], 8),         // "this network", RFC 791
    ([10, 0, 0, 0], 8),        // private use, RFC 1918
    ([100, 64, 0, 0], 10),     // shared address space (CGN), RFC 6598
    ([127, 0, 0, 0], 8),       // loopback, RFC 1122
    ([169, 254, 0, 0], 16),    // link local, RFC 3927
    ([172, 16, 0, 0], 12),     // private use, RFC 1918
    ([192, 0, 0, 0], 24),      // IETF protocol assignments, RFC 6890
    ([192, 0, 2, 0], 24),      // TEST-NET-1, RFC 5737
    ([192, 168, 0, 0], 16),    // private use, RFC 1918
    ([198, 18, 0, 0], 15),     // benchmarking, RFC 2544
    ([198, 51, 100, 0], 24),   // TEST-NET-2, RFC 5737
    ([203, 0, 113, 0], 24),    // TEST-NET-3, RFC 5737
    ([240, 0, 0, 0], 4),       // reserved, RFC 1112
    ([255, 255, 255, 255], 32), // limited broadcast, RFC 919/8190
];

/// The IPv6 blocks of the same list (each IPv4 block above also appears
/// there as its 6to4 form, 2002:V4::/16+prefix, handled from `PRIVATE_V4`).
const PRIVATE_V6: &[([u8; 16], u8)] = &[
    ([0; 16], 128),                                                  // unspecified, RFC 4291
    ([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], 128),         // loopback, RFC 4291
    ([0, 0x64, 0xff, 0x9b, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 48), // IPv4-IPv6 translation, RFC 8215
    ([1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 64),          // discard-only, RFC 6666
    ([0x20, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 23),       // IETF protocol assignments, RFC 2928
    ([0x20, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 48),       // benchmarking, RFC 5180
    ([0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 32), // documentation, RFC 3849
    ([0xfc, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 7),        // unique local, RFC 4193
    ([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 10),    // link-local unicast, RFC 4291
];

/// True when the first `bits` bits of `a` and `net` agree.
fn prefix_match(a: &[u8], net: &[u8], bits: u8) -> bool {
    let (whole, rest) = (usize::from(bits / 8), bits % 8);
    a[..whole] == net[..whole]
        && (rest == 0 || (a[whole] ^ net[whole]) & (0xff << (8 - rest)) == 0)
}

/// Is `a` in Zeek's private address space (which Zeek counts as local by default)?
pub fn is_private(a: &IpAddr16) -> bool {
    let v4_private = |v4: &[u8]| PRIVATE_V4.iter().any(|(net, bits)| prefix_match(v4, net, *bits));
    if a.is_v4() {
        return v4_private(&a.0[12..]);
    }
    let b = &a.0;
    // 6to4 (2002::/16) embeds an IPv4 address in bits 16..48: Zeek lists the
    // 6to4 form of every IPv4 block.
    if b[0] == 0x20 && b[1] == 0x02 && v4_private(&b[2..6]) {
        return true;
    }
    PRIVATE_V6.iter().any(|(net, bits)| prefix_match(b, net, *bits))
}

impl Conn {
    /// The conn record; `uid` is minted by the caller (uids are random, so
    /// minting one when the record is written is as good as at the first
    /// packet). `tcp` is the connection's TCP state (from the slab), if TCP.
    /// `counts`: the counters whole ([`Overflow::counts`]).
    /// `tcp`: a TCP connection's state and the cold parts it reads.
    pub fn to_record(
        &self,
        key: &ConnKey,
        tcp: Option<(&TcpConn, &ColdParts)>,
        uid: Uid,
        counts: [u64; 4],
    ) -> ConnRecord {
        let history = self.hist.letters();
        let dur = self.last_ns - self.start_ns;
        let (proto, orig_size, resp_size, conn_state, missed) = match (&self.state, tcp) {
            (ProtoState::Tcp(_), Some((t, cold))) => (
                Proto::Tcp,
                t.orig_size(cold),
                t.resp_size(cold),
                t.conn_state(history.as_str(), cold),
                t.missed_bytes(cold),
            ),
            // Never: a TCP entry's slab state lives as long as the entry.
            // A release build still writes the record (sizes unknown, OTH)
            // rather than lose it; a debug build says where it went wrong.
            (ProtoState::Tcp(_), None) => {
                debug_assert!(false, "TCP connection {key:?} has no slab state");
                (Proto::Tcp, 0, 0, ConnState::OTH, 0)
            }
            (ProtoState::Udp(d), _) => {
                let (orig_len, resp_len) = (d.orig_len, d.resp_len);
                let st = match (orig_len >= 0, resp_len >= 0) {
                    (true, true) => ConnState::SF,
                    (true, false) => ConnState::S0,
                    (false, true) => ConnState::SHR,
                    (false, false) => ConnState::OTH,
                };
                (
                    Proto::Udp,
                    d.orig_len.max(0) as u64,
                    d.resp_len.max(0) as u64,
                    st,
                    0,
                )
            }
            (ProtoState::Icmp(d), _) => (
                Proto::Icmp,
                d.orig_len.max(0) as u64,
                d.resp_len.max(0) as u64,
                ConnState::OTH,
                0,
            ),
        };
        let has_dur = dur > 0;
        ConnRecord {
            ts_ns: self.start_ns,
            uid,
            orig_h: key.src,
            orig_p: key.sport,
            resp_h: key.dst,
            resp_p: key.dport,
            proto,
            service: None,
            duration_ns: has_dur.then_some(dur),
            orig_bytes: has_dur.then_some(orig_size),
            resp_bytes: has_dur.then_some(resp_size),
            conn_state,
            local_orig: is_private(&key.src),
            local_resp: is_private(&key.dst),
            missed_bytes: missed,
            history,
            orig_pkts: counts[0],
            orig_ip_bytes: counts[1],
            resp_pkts: counts[2],
            resp_ip_bytes: counts[3],
            ip_proto: key.proto,
            // The output stage computes it (SHA-1, ~1,500 instructions) off the packet thread.
            community_id: CommunityId::PENDING,
            vlan: self.vlans().0,
            inner_vlan: self.vlans().1,
            empty_tcp_skipped: false,
            orig_proc: None,
            resp_proc: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn private(s: &str) -> bool {
        let ip: std::net::IpAddr = s.parse().unwrap();
        let a = match ip {
            std::net::IpAddr::V4(v4) => IpAddr16::from_v4(v4.octets()),
            std::net::IpAddr::V6(v6) => IpAddr16(v6.octets()),
        };
        is_private(&a)
    }

    /// Edges of Zeek's Site::private_address_space blocks.
    #[test]
    fn zeek_private_address_space() {
        for yes in [
            "0.0.0.0", "0.255.255.255", "10.1.2.3", "100.64.0.1", "100.127.255.255", "127.0.0.1",
            "169.254.1.1", "172.31.255.255", "192.0.0.9", "192.0.2.1", "192.168.1.1", "198.19.0.1",
            "198.51.100.7", "203.0.113.9", "240.0.0.1", "255.255.255.254", "255.255.255.255", "::",
            "::1", "64:ff9b:1::1", "100::1", "2001::1", "2001:1ff::1", "2001:2::1", "2001:db8::1",
            "fd00::1", "fe80::1", "febf::1", "2002:a01:203::1", "2002:c0a8:101::", "2002:ffff:ffff::",
            "2002:6440::", "2002:7f00::1",
        ] {
            assert!(private(yes), "{yes}");
        }
        for no in [
            "1.1.1.1", "100.128.0.1", "100.63.255.255", "172.32.0.1", "192.0.1.1", "192.169.0.1",
            "198.20.0.1", "223.255.255.255", "8.8.8.8", "2001:200::1", "2001:4860::8888", "fec0::1",
            "2002:808:808::", "::2", "2a00::1",
        ] {
            assert!(!private(no), "{no}");
        }
    }

    fn conn() -> Conn {
        Conn::new(1_000, Some(7), None, ProtoState::Udp(DatagramState::new()), wirelog_parse::detect::Detection::OVER)
    }

    /// The entry keeps the low bits (16 of packets, 32 of bytes): a counter
    /// passing them (packets by one, bytes by a packet's length, or a kernel
    /// merge) carries into the side table, and the sum read back is exact;
    /// flips swap whole counters.
    #[test]
    fn tcp_timers_are_exact_near_and_far() {
        const S: i64 = 1_000_000_000;
        let bases = TimerBases([5 * S, 5 * S, 6 * S]);
        let mut o = Overflow::default();
        let start = 1_700_000_000 * S + 123;
        let mut p = TcpPart::new(0);
        for t in [Timer::Attempt, Timer::Delete, Timer::ExpireExtra] {
            assert!(!p.is_set(t));
            assert_eq!(p.timer(t, 9, start, &bases, &o), i64::MAX);
        }
        // Near their base (in the entry), below it, far above it, before
        // 1970 and at the edges of the 32-bit distance: read back exactly;
        // only the ones that do not fit take a map entry.
        let base = start + 5 * S;
        let cases = [
            (start + 5 * S, false),
            (start + 5 * S + 1, false),
            (base + i64::from(u32::MAX) - 2, false),
            (base + i64::from(u32::MAX) - 1, true),
            (base + i64::from(u32::MAX), true),
            (start + 4 * S, true),
            (start + 3_600 * S, true),
            (-7 * S, true),
            (i64::MAX - 1, true),
        ];
        for (at, wide) in cases {
            p.set_timer(Timer::Delete, at, 9, start, &bases, &mut o);
            assert!(p.is_set(Timer::Delete));
            assert_eq!(p.timer(Timer::Delete, 9, start, &bases, &o), at, "{at}");
            assert_eq!(o.len_rare().0, wide as usize, "{at}");
        }
        // A second wide timer shares the entry; unsetting both frees it.
        p.set_timer(Timer::ExpireExtra, start - 1, 9, start, &bases, &mut o);
        p.set_timer(Timer::Attempt, start + 5 * S, 9, start, &bases, &mut o);
        assert_eq!(o.len_rare().0, 1);
        assert_eq!(p.timer(Timer::ExpireExtra, 9, start, &bases, &o), start - 1);
        assert_eq!(p.timer(Timer::Delete, 9, start, &bases, &o), i64::MAX - 1);
        assert_eq!(p.timer(Timer::Attempt, 9, start, &bases, &o), start + 5 * S);
        // Another connection's wide timers are its own.
        let mut q = TcpPart::new(1);
        q.set_timer(Timer::Delete, -S, 10, start, &bases, &mut o);
        assert_eq!(o.len_rare().0, 2);
        p.set_timer(Timer::Delete, i64::MAX, 9, start, &bases, &mut o);
        assert_eq!(o.len_rare().0, 2);
        p.set_timer(Timer::ExpireExtra, start + 6 * S + 10, 9, start, &bases, &mut o);
        assert_eq!(o.len_rare().0, 1, "connection 9's last wide timer went back inline");
        assert_eq!(p.timer(Timer::ExpireExtra, 9, start, &bases, &o), start + 6 * S + 10);
        assert!(!p.is_set(Timer::Delete));
        assert_eq!(q.timer(Timer::Delete, 10, start, &bases, &o), -S);
        o.forget(10);
        assert_eq!(o.len_rare().0, 0);
    }

    #[test]
    fn udp_checksum_errors_count_per_side_and_connection() {
        let mut o = Overflow::default();
        assert_eq!(o.checksum_error(3, 0), 1);
        assert_eq!(o.checksum_error(3, 0), 2);
        assert_eq!(o.checksum_error(3, 1), 1);
        assert_eq!(o.checksum_error(4, 1), 1);
        assert_eq!(o.len_rare().1, 2);
        o.forget(3);
        assert_eq!(o.len_rare().1, 1);
        assert_eq!(o.checksum_error(3, 0), 1, "a new connection at a reused index starts at 0");
    }

    /// The datagram state, 4-aligned, keeps whole `i64` sizes (past 32
    /// bits, and -1 for a side that sent nothing) and lets [`ProtoState`]
    /// be 20 bytes.
    #[test]
    fn datagram_sizes_are_whole_in_twenty_bytes() {
        assert_eq!(std::mem::size_of::<ProtoState>(), 20);
        assert_eq!(std::mem::align_of::<ProtoState>(), 4);
        let mut d = DatagramState::new();
        assert_eq!((d.orig_len, d.resp_len), (-1, -1));
        d.add(true, 0);
        assert_eq!((d.orig_len, d.resp_len), (0, -1));
        for _ in 0..3 {
            d.add(false, 3_000_000_000);
        }
        d.add(true, 7);
        assert_eq!((d.orig_len, d.resp_len), (7, 9_000_000_000));
        let mut c = Conn::new(0, None, None, ProtoState::Udp(d), wirelog_parse::detect::Detection::OVER);
        c.last_ns = 5; // a duration: the record has sizes
        if let ProtoState::Udp(d) = &mut c.state {
            d.add(true, i64::from(u32::MAX));
        }
        let k = crate::key::ConnKey {
            src: IpAddr16::from_v4([10, 0, 0, 1]),
            dst: IpAddr16::from_v4([10, 0, 0, 2]),
            sport: 1,
            dport: 2,
            proto: 17,
        };
        let r = c.to_record(&k, None, wirelog_record::UidGenerator::new(1).next_uid(), [2, 0, 3, 0]);
        assert_eq!((r.orig_bytes, r.resp_bytes, r.conn_state), (Some(7 + u64::from(u32::MAX)), Some(9_000_000_000), ConnState::SF));
    }

    #[test]
    fn counters_carry_past_their_low_bits() {
        let (mut o, mut c) = (Overflow::default(), conn());
        let mut want = [0u64; 4];
        // Start both sides near the top of their low bits.
        o.add(3, &mut c, 0, u64::from(u16::MAX) - 1, u64::from(u32::MAX) - 100);
        o.add(3, &mut c, 1, 5, 500);
        want[0] = u64::from(u16::MAX) - 1;
        want[1] = u64::from(u32::MAX) - 100;
        want[2] = 5;
        want[3] = 500;
        assert_eq!(o.counts(3, &c), want);
        assert_eq!(o.len().0, 0);
        for len in [60, 1500, 40, 9000] {
            if c.count(0, len) {
                o.carry(3, &c, 0, len);
            }
            want[0] += 1;
            want[1] += u64::from(len);
            assert_eq!(o.counts(3, &c), want, "after a packet of {len}");
        }
        assert_eq!(o.len().0, 1);
        // Another connection's counters are its own.
        assert_eq!(o.counts(4, &conn()), [0; 4]);
        o.add(3, &mut c, 1, 1 << 33, 7 << 40);
        want[2] += 1 << 33;
        want[3] += 7 << 40;
        assert_eq!(o.counts(3, &c), want);
        o.swap_sides(3, &mut c);
        assert_eq!(o.counts(3, &c), [want[2], want[3], want[0], want[1]]);
        o.set(3, &mut c, [1, 2, 3, 4]);
        assert_eq!((o.counts(3, &c), o.len().0), ([1, 2, 3, 4], 0));
        o.add(3, &mut c, 0, 1 << 32, 0);
        o.forget(3);
        assert_eq!(o.len(), (0, 0));
        // Packets one by one past 2^16 and 2^17 on one side: a carry each time.
        let mut c = conn();
        let mut want = 0u64;
        for _ in 0..140_000 {
            if c.count(1, 40) {
                o.carry(8, &c, 1, 40);
            }
            want += 1;
        }
        assert_eq!(o.counts(8, &c), [0, 0, want, want * 40]);
        assert_eq!(o.len().0, 1);
    }

    /// The latest packet time is kept as a 32-bit distance from the last
    /// progress, and exactly in the side table when it is farther (or
    /// earlier: never, but then it still reads back as written).
    #[test]
    fn latest_time_escapes_when_far_from_the_last_progress() {
        let (mut o, mut c) = (Overflow::default(), conn());
        assert_eq!(o.seen(9, &c), 1_000);
        let set = |o: &mut Overflow, c: &mut Conn, last: i64, seen: i64| {
            o.set_times(9, &mut c.last_ns, &mut c.seen_after_last, last, seen);
            assert_eq!((c.last_ns, o.seen(9, c)), (last, seen));
        };
        set(&mut o, &mut c, 1_000, 1_000 + i64::from(u32::MAX) - 1);
        assert_eq!(o.len().1, 0);
        for (last, seen) in [(1_000, 1_000 + i64::from(u32::MAX)), (5, 10_000_000_000_000), (-3, 400), (10, 5), (10, 10)] {
            set(&mut o, &mut c, last, seen);
        }
        assert_eq!(o.len().1, 0, "a distance that fits again leaves the side table");
        set(&mut o, &mut c, 0, i64::MAX);
        assert_eq!(o.len().1, 1);
        o.forget(9);
        assert_eq!(o.len(), (0, 0));
    }

    /// `progress` and `touch` store what `set_times` would with the latest
    /// time computed first, in time order, out of it, and across a wide distance.
    #[test]
    fn progress_and_touch_match_set_times() {
        let far = i64::from(u32::MAX) + 7;
        let steps: [(bool, i64); 9] =
            [(true, 2_000), (false, 1_500), (true, 1_800), (false, 3_000), (true, 2_500), (false, far), (true, 4_000), (true, far + 9), (false, far + 3)];
        let (mut a, mut ca) = (Overflow::default(), conn());
        let (mut b, mut cb) = (Overflow::default(), conn());
        for (made_progress, ts) in steps {
            let seen = b.seen(9, &cb).max(ts);
            let last = if made_progress { ts } else { cb.last_ns };
            b.set_times(9, &mut cb.last_ns, &mut cb.seen_after_last, last, seen);
            if made_progress {
                a.progress(9, &mut ca.last_ns, &mut ca.seen_after_last, ts);
            } else {
                a.touch(9, &mut ca.last_ns, &mut ca.seen_after_last, ts);
            }
            assert_eq!((ca.last_ns, ca.seen_after_last, a.seen(9, &ca)), (cb.last_ns, cb.seen_after_last, b.seen(9, &cb)), "at {ts}");
            assert_eq!(a.len(), b.len());
        }
    }

    #[test]
    fn vlan_ids_round_trip() {
        for v in [(None, None), (Some(0), None), (Some(4095), Some(0)), (Some(13), Some(10))] {
            let c = Conn::new(0, v.0, v.1, ProtoState::Icmp(DatagramState::new()), wirelog_parse::detect::Detection::OVER);
            assert_eq!(c.vlans(), v);
        }
    }
}
