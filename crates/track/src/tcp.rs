//! TCP connection state with Zeek's semantics.
//!
//! This follows Zeek's TCP analyzer (TCPSessionAdapter, TCP_Endpoint and the
//! TCP reassembler's gap accounting) rule by rule, because the point of the
//! conn records is that they agree with Zeek's conn.log field for field:
//! endpoint states drive `conn_state`, sequence numbers drive the byte
//! counts, and acknowledgements of data never seen drive `missed_bytes`.
//! Only what influences a logged field or the connection's lifetime is kept;
//! Zeek's weirds and events are not modelled.
//!
//! Layout: a [`TcpConn`] is one cache line (64 bytes, test
//! `tcp_state_is_one_cache_line`): per endpoint three sequence numbers, the
//! reassembly's two bounds as 32-bit relative sequence numbers, the states
//! and flags in bits, and one pointer to a cold part ([`EndpointRare`]) that
//! holds what most connections never need: sequence-space wraps, bounds past
//! 4 GiB, positions of the last SYN/FIN/RST, the counters behind scaled
//! history letters, `missed_bytes` and data held above a hole.

use wirelog_decode::tcp_flags::{ACK, FIN, RST, SYN};
use wirelog_record::ConnState;

use crate::history::HistoryState;

mod kernel;
pub(crate) use kernel::KernelView;

/// Zeek's `TOO_LARGE_SEQ_DELTA`: sequence jumps beyond this on SYN/RST are not trusted.
const TOO_LARGE_SEQ_DELTA: i32 = 1_048_576;
/// `tcp_max_initial_window`: unacked data after which delivered data is released.
const MAX_INITIAL_WINDOW: u64 = 16_384;
/// `tcp_max_above_hole_without_any_acks`.
const MAX_ABOVE_HOLE_WITHOUT_ACKS: u64 = 16_384;
/// `tcp_excessive_data_without_further_acks`.
const EXCESSIVE_DATA_WITHOUT_ACKS: u64 = 10 * 1024 * 1024;

/// An endpoint's state; the discriminant is what [`Endpoint`] keeps in 3
/// bits for the previous state. The state itself is a field of its own: its
/// unused values are the niche that keeps `Option<TcpConn>` at 64 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum EndpointState {
    Inactive = 0,
    SynSent = 1,
    SynAckSent = 2,
    Partial = 3,
    Established = 4,
    Closed = 5,
    Reset = 6,
}

use EndpointState::*;

/// 3 bits back to a state (7 is never written).
const STATES: [EndpointState; 8] = [Inactive, SynSent, SynAckSent, Partial, Established, Closed, Reset, Reset];

#[inline]
fn seq_delta(a: u32, b: u32) -> i32 {
    a.wrapping_sub(b) as i32
}

/// A reassembly bound that does not fit in 32 bits: its value is in the
/// endpoint's cold part.
const WIDE: u32 = u32::MAX;

/// What Zeek's reassembler holds for one endpoint, as byte ranges (the data
/// itself does not matter for the logged fields). Everything delivered and
/// not yet acknowledged is the single range `[trim, next_deliver)`: gaps are
/// only declared when acknowledgements pass them, which trims past them too.
/// So only data above a hole needs a list, and that list exists only while
/// out-of-order data is held: it lives in the endpoint's cold part
/// ([`EndpointRare`]), which the reassembly holds so that its own methods
/// reach the list without the endpoint.
///
/// The two bounds are relative sequence numbers (offsets from the
/// endpoint's initial sequence number, Zeek's relative sequence space) kept
/// in 32 bits: a stream's first 4 GiB. A bound of 2^32 - 1 or more is kept
/// whole in the cold part and its 32-bit field says [`WIDE`]; every read
/// and write goes through [`Reassembly::next_deliver`], [`Reassembly::trim`]
/// and their setters, so a stream past 4 GiB is handled as before (test
/// `streams_past_4_gib_each_way`).
#[derive(Debug, Clone, PartialEq)]
struct Reassembly {
    /// Next relative sequence number to deliver (Zeek's last_reassem_seq, starts at 1).
    next_deliver: u32,
    /// Everything below this has been acknowledged and released (Zeek's trim_seq).
    trim: u32,
    /// The endpoint's cold part: absent on most connections, allocated on
    /// first non-zero write (one pointer instead of 88 bytes inline).
    rare: Option<Box<EndpointRare>>,
}

impl Reassembly {
    fn new() -> Self {
        Reassembly {
            next_deliver: 1,
            trim: 1,
            rare: None,
        }
    }

    #[inline(always)]
    fn next_deliver(&self) -> u64 {
        if self.next_deliver != WIDE {
            self.next_deliver as u64
        } else {
            self.rare.as_ref().map_or(0, |r| r.next_deliver)
        }
    }

    #[inline(always)]
    fn trim(&self) -> u64 {
        if self.trim != WIDE {
            self.trim as u64
        } else {
            self.rare.as_ref().map_or(0, |r| r.trim)
        }
    }

    /// Both bounds, `(trim, next_deliver)`, with one test when neither is
    /// wide (every stream's first 4 GiB): the packet path reads them once
    /// through this and works on the values.
    #[inline(always)]
    fn bounds(&self) -> (u64, u64) {
        // WIDE is u32::MAX: the larger field is WIDE when either is.
        if self.next_deliver.max(self.trim) != WIDE {
            (self.trim as u64, self.next_deliver as u64)
        } else {
            self.bounds_wide()
        }
    }

    #[cold]
    #[inline(never)]
    fn bounds_wide(&self) -> (u64, u64) {
        (self.trim(), self.next_deliver())
    }

    #[inline(always)]
    fn set_next_deliver(&mut self, v: u64) {
        if v < WIDE as u64 {
            self.next_deliver = v as u32;
        } else {
            self.set_wide(true, v);
        }
    }

    #[inline(always)]
    fn set_trim(&mut self, v: u64) {
        if v < WIDE as u64 {
            self.trim = v as u32;
        } else {
            self.set_wide(false, v);
        }
    }

    /// A bound past 32 bits: whole in the cold part.
    #[cold]
    #[inline(never)]
    fn set_wide(&mut self, next_deliver: bool, v: u64) {
        let r = self.rare_mut();
        if next_deliver {
            r.next_deliver = v;
            self.next_deliver = WIDE;
        } else {
            r.trim = v;
            self.trim = WIDE;
        }
    }

    /// Received ranges above `next_deliver`, sorted and merged.
    fn ranges(&self) -> &[(u64, u64)] {
        match &self.rare {
            Some(r) => &r.above_hole,
            None => &[],
        }
    }

    /// Whether data above a hole is held.
    #[inline(always)]
    fn has_ranges(&self) -> bool {
        matches!(&self.rare, Some(r) if !r.above_hole.is_empty())
    }

    /// The cold part, allocated now if this is its first use.
    #[inline]
    fn rare_mut(&mut self) -> &mut EndpointRare {
        if self.rare.is_none() {
            self.alloc_rare();
        }
        match &mut self.rare {
            Some(r) => r,
            None => unreachable!("allocated above"),
        }
    }

    #[cold]
    #[inline(never)]
    fn alloc_rare(&mut self) {
        self.rare = Some(Box::default());
    }

    /// Frees the above-hole list's memory once it holds nothing (the cold
    /// part itself stays: its counters are the endpoint's).
    fn drop_ranges_if_empty(&mut self) {
        if let Some(r) = &mut self.rare {
            if r.above_hole.is_empty() {
                r.above_hole = Vec::new();
            }
        }
    }

    /// Bytes held, delivered or not (Zeek's block list DataSize).
    #[inline(always)]
    fn buffered(&self) -> u64 {
        let contiguous = self.next_deliver().saturating_sub(self.trim());
        match &self.rare {
            None => contiguous,
            Some(r) => contiguous + r.above_hole.iter().map(|(a, b)| b - a).sum::<u64>(),
        }
    }

    /// Bytes held above a hole (Zeek's NumUndeliveredBytes).
    fn undelivered_bytes(&self) -> u64 {
        self.ranges()
            .last()
            .map_or(0, |&(_, upper)| upper.saturating_sub(self.next_deliver()))
    }

    fn has_blocks(&self) -> bool {
        self.next_deliver() > self.trim() || !self.ranges().is_empty()
    }

    fn clear(&mut self) {
        self.set_trim(self.next_deliver());
        if let Some(r) = &mut self.rare {
            r.above_hole = Vec::new();
        }
    }

    /// Records newly received data and delivers whatever became contiguous.
    /// Returns whether in-order delivery advanced.
    #[cfg(test)]
    fn insert(&mut self, seq: u64, upper: u64) -> bool {
        self.insert_at(seq, upper, self.bounds(), self.has_ranges()).0
    }

    /// [`Self::insert`] given the bounds (`(trim, next_deliver)`, as
    /// [`Self::bounds`] reads them) and whether data is held above a hole
    /// ([`Self::has_ranges`]); returns whether in-order delivery advanced,
    /// and the bounds and that test after. Inline for in-order data; data
    /// above a hole goes out of line.
    #[inline(always)]
    fn insert_at(&mut self, seq: u64, upper: u64, (trim, next_deliver): (u64, u64), held: bool) -> (bool, (u64, u64), bool) {
        if upper <= trim || upper <= next_deliver {
            return (false, (trim, next_deliver), held); // old or already delivered data
        }
        let seq = seq.max(trim);
        if seq <= next_deliver {
            self.set_next_deliver(upper);
            if held {
                self.absorb_ranges();
                return (true, self.bounds(), self.has_ranges());
            }
            return (true, (trim, upper), false);
        }
        (self.insert_above_hole(seq, upper), (trim, next_deliver), true)
    }

    #[inline(never)]
    fn insert_above_hole(&mut self, seq: u64, upper: u64) -> bool {
        let ranges = &mut self.rare_mut().above_hole;
        let i = ranges.partition_point(|r| r.1 < seq);
        let (mut lo, mut hi) = (seq, upper);
        while i < ranges.len() && ranges[i].0 <= hi {
            lo = lo.min(ranges[i].0);
            hi = hi.max(ranges[i].1);
            ranges.remove(i);
        }
        ranges.insert(i, (lo, hi));
        false
    }

    /// Moves ranges that became contiguous into the delivered range.
    /// Inline: almost every stream has no hole, and then this is one test.
    #[inline]
    fn absorb(&mut self) {
        if self.has_ranges() {
            self.absorb_ranges();
        }
    }

    #[cold]
    fn absorb_ranges(&mut self) {
        let mut next_deliver = self.next_deliver();
        if let Some(r) = &mut self.rare {
            let ranges = &mut r.above_hole;
            let mut n = 0;
            for &(lo, hi) in ranges.iter() {
                if lo > next_deliver {
                    break;
                }
                next_deliver = next_deliver.max(hi);
                n += 1;
            }
            ranges.drain(..n);
        }
        self.set_next_deliver(next_deliver);
        self.drop_ranges_if_empty();
    }

    /// Releases data below `seq`, first reporting (through `gap`) any part of
    /// it that was never received. Mirrors DataBlockList::Trim +
    /// TCP_Reassembler::Undelivered.
    /// With `skip_deliveries` (the endpoint's), nothing held is delivered
    /// and no gap is reported.
    fn trim_to(&mut self, seq: u64, is_partial: bool, skip_deliveries: bool, mut gap: impl FnMut(u64)) {
        if seq > self.next_deliver() {
            self.undelivered(seq, is_partial, skip_deliveries, &mut gap);
        }
        if let Some(r) = &mut self.rare {
            r.above_hole.retain(|r| r.1 > seq);
        }
        self.drop_ranges_if_empty();
        if seq > self.trim() {
            self.set_trim(seq);
        }
    }

    fn undelivered(&mut self, up_to: u64, is_partial: bool, skip_deliveries: bool, gap: &mut impl FnMut(u64)) {
        if up_to <= 2 && is_partial {
            // A partial connection's faked initial sequence number: the "missing"
            // first byte is an artefact, not a gap (Zeek ignores it the same way).
            return;
        }
        if !skip_deliveries {
            // Deliver blocks that start below up_to, reporting the holes before them.
            while let Some(&(lo, _)) = self.ranges().first() {
                if lo >= up_to {
                    break;
                }
                let next_deliver = self.next_deliver();
                if lo > next_deliver {
                    gap(lo - next_deliver);
                }
                self.set_next_deliver(next_deliver.max(lo));
                self.absorb();
            }
            let next_deliver = self.next_deliver();
            if up_to > next_deliver {
                gap(up_to - next_deliver);
            }
        }
        if up_to > self.next_deliver() {
            self.set_next_deliver(up_to);
        }
    }
}

// `Endpoint::bits`: the previous state (bits 0-2), and flags.
const PREV_STATE_BITS: u8 = 0o7;
const DID_CLOSE: u8 = 1 << 3;
/// A FIN was seen (Zeek keeps FIN_cnt, which is only ever compared with 0).
const FIN_SEEN: u8 = 1 << 4;
const DID_EOF: u8 = 1 << 5;
/// Reassembly stopped (Zeek's SetSkipDeliveries).
const SKIP_DELIVERIES: u8 = 1 << 6;
/// The sequence numbers or the acknowledgements wrapped: their wrap counts
/// are in the cold part (without this bit, both are zero and the cold part,
/// if any, is not read for them).
const WRAPPED: u8 = 1 << 7;

/// One side of a TCP connection (Zeek's TCP_Endpoint), 32 bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    start_seq: u32,
    last_seq: u32,
    ack_seq: u32,
    state: EndpointState,
    /// The previous state and flags (`PREV_STATE_BITS`, `DID_CLOSE`, ...).
    bits: u8,
    /// Not this endpoint's: the connection's flags ([`TcpConn`]'s `C_*`
    /// bits), kept in the originator's endpoint where the layout has room.
    conn_bits: u16,
    /// Delivery bounds, and (in `reasm.rare`) this endpoint's cold part.
    reasm: Reassembly,
}

/// The cold part of an endpoint: positions, counters, wide values and
/// out-of-order data that stay zero or empty on most connections until they
/// close (always on a SYN-only one), so an open connection does not carry
/// them inline.
#[derive(Debug, Clone, PartialEq, Default)]
struct EndpointRare {
    /// Received ranges above the reassembly's `next_deliver`, sorted and merged.
    above_hole: Vec<(u64, u64)>,
    fin_seq: u64,
    /// The reassembly's bounds when they do not fit in 32 bits ([`WIDE`]).
    next_deliver: u64,
    trim: u64,
    /// Bytes this endpoint's stream missed (the connection's `missed_bytes`
    /// is the sum of both endpoints'): non-zero only after a gap.
    missed_bytes: u64,
    /// Times the sequence numbers (and the acknowledgements of this
    /// endpoint's data) wrapped past 2^32: zero on streams that start
    /// below 2^32 - their length.
    seq_wraps: u32,
    ack_wraps: u32,
    // Low 32 bits of the relative sequence numbers of the last SYN/FIN/RST:
    // enough to tell a retransmission from a new one.
    hist_last_syn: u32,
    hist_last_fin: u32,
    hist_last_rst: u32,
    chk_cnt: u32,
    rxmt_cnt: u32,
    win0_cnt: u32,
    gap_cnt: u32,
}

/// What an endpoint without a cold part reads: every field zero.
static NO_RARE: EndpointRare = EndpointRare {
    above_hole: Vec::new(),
    fin_seq: 0,
    next_deliver: 0,
    trim: 0,
    missed_bytes: 0,
    seq_wraps: 0,
    ack_wraps: 0,
    hist_last_syn: 0,
    hist_last_fin: 0,
    hist_last_rst: 0,
    chk_cnt: 0,
    rxmt_cnt: 0,
    win0_cnt: 0,
    gap_cnt: 0,
};

impl Endpoint {
    fn new() -> Self {
        Endpoint {
            start_seq: 0,
            last_seq: 0,
            ack_seq: 0,
            state: Inactive,
            bits: Inactive as u8,
            conn_bits: 0,
            reasm: Reassembly::new(),
        }
    }

    #[inline(always)]
    pub fn state(&self) -> EndpointState {
        self.state
    }

    #[inline(always)]
    pub fn prev_state(&self) -> EndpointState {
        STATES[(self.bits & PREV_STATE_BITS) as usize]
    }

    #[inline(always)]
    pub fn did_close(&self) -> bool {
        self.bits & DID_CLOSE != 0
    }

    #[inline(always)]
    fn fin_seen(&self) -> bool {
        self.bits & FIN_SEEN != 0
    }

    #[inline(always)]
    fn did_eof(&self) -> bool {
        self.bits & DID_EOF != 0
    }

    #[inline(always)]
    fn skip_deliveries(&self) -> bool {
        self.bits & SKIP_DELIVERIES != 0
    }

    /// Sets one of the flags (`DID_CLOSE`, `FIN_SEEN`, `DID_EOF`, `SKIP_DELIVERIES`).
    #[inline(always)]
    fn set_flag(&mut self, flag: u8) {
        self.bits |= flag;
    }

    #[inline(always)]
    fn seq_wraps(&self) -> u32 {
        if self.bits & WRAPPED == 0 {
            0
        } else {
            self.rare().seq_wraps
        }
    }

    #[inline(always)]
    fn ack_wraps(&self) -> u32 {
        if self.bits & WRAPPED == 0 {
            0
        } else {
            self.rare().ack_wraps
        }
    }

    #[inline]
    fn rare(&self) -> &EndpointRare {
        self.reasm.rare.as_deref().unwrap_or(&NO_RARE)
    }

    #[inline]
    fn rare_mut(&mut self) -> &mut EndpointRare {
        self.reasm.rare_mut()
    }

    /// Stores a SYN/FIN/RST position; a zero into an absent cold part (the
    /// first SYN of every connection) allocates nothing.
    #[inline]
    fn set_position(&mut self, field: fn(&mut EndpointRare) -> &mut u32, at: u32) {
        if at != 0 || self.reasm.rare.is_some() {
            *field(self.rare_mut()) = at;
        }
    }

    /// Adds one to a counter of the cold part and returns it.
    #[inline]
    fn bump(&mut self, field: fn(&mut EndpointRare) -> &mut u32) -> u32 {
        let c = field(self.rare_mut());
        *c += 1;
        *c
    }

    #[inline]
    fn full(seq: u32, wraps: u32) -> u64 {
        ((wraps as u64) << 32) + seq as u64
    }

    #[inline]
    fn to_relative(&self, seq: u32, wraps: u32) -> u64 {
        Self::full(seq, wraps).wrapping_sub(self.start_seq as u64)
    }

    fn init_seqs(&mut self, start: u32, last: u32) {
        self.start_seq = start;
        self.ack_seq = start;
        self.last_seq = last;
    }

    #[inline(always)]
    fn update_last_seq(&mut self, seq: u32) {
        if seq < self.last_seq {
            self.wrap(true);
        }
        self.last_seq = seq;
    }

    #[inline(always)]
    fn update_ack_seq(&mut self, seq: u32) {
        if seq < self.ack_seq {
            self.wrap(false);
        }
        self.ack_seq = seq;
    }

    /// The sequence numbers (or the acknowledgements) wrapped past 2^32.
    #[cold]
    #[inline(never)]
    fn wrap(&mut self, seq: bool) {
        let r = self.rare_mut();
        if seq {
            r.seq_wraps += 1;
        } else {
            r.ack_wraps += 1;
        }
        self.bits |= WRAPPED;
    }

    fn no_data_acked(&self) -> bool {
        let ack = Self::full(self.ack_seq, self.ack_wraps());
        let start = self.start_seq as u64;
        ack == start || ack == start + 1
    }

    /// Payload bytes sent, from sequence numbers (Zeek's TCP_Endpoint::Size).
    pub fn size(&self, peer_state: EndpointState) -> u64 {
        if self.prev_state() == SynSent
            && self.state() == Reset
            && peer_state == Inactive
            && !self.no_data_acked()
        {
            return 0;
        }
        let last = Self::full(self.last_seq, self.seq_wraps());
        let ack = Self::full(self.ack_seq, self.ack_wraps());
        let start = self.start_seq as u64;
        let mut size = if last > ack {
            last.wrapping_sub(start)
        } else {
            ack.wrapping_sub(start)
        };
        size = size.saturating_sub(1);
        if self.fin_seen() && size != 0 {
            size -= 1;
        }
        size
    }

    fn set_state(&mut self, s: EndpointState) {
        if s != self.state {
            self.bits = (self.bits & !PREV_STATE_BITS) | self.state as u8;
            self.state = s;
        }
    }

    fn is_clean(&self) -> bool {
        let s = self.state();
        s == Established || (s == Closed && self.prev_state() == Established)
    }
}

fn is_handshake(s: EndpointState) -> bool {
    matches!(s, Inactive | SynSent | SynAckSent)
}

/// What a packet did to the connection's lifetime, for the tracker's timers.
#[derive(Debug, Default, Clone, Copy)]
pub struct Effects {
    /// The connection is now fully closed: delete it `close_delay` after its last activity.
    pub close_complete: bool,
    /// A RST after a FIN: delete `reset_delay` after this packet.
    pub reset_timer: bool,
    /// A half close: check for expiry one session-timer period after the last activity.
    pub expire_check: bool,
    /// First SYN of the originator: schedule the connection-attempt timer.
    pub attempt_timer: bool,
    /// A SYN answered a SYN-ACK that came first: swap the roles.
    pub flip: bool,
    /// An endpoint changed state or closed: timers that depend on the state
    /// (attempt, expiry) may now be due earlier.
    pub state_changed: bool,
}

const FX_CLOSE_COMPLETE: u8 = 1;
const FX_RESET_TIMER: u8 = 2;
const FX_EXPIRE_CHECK: u8 = 4;
const FX_ATTEMPT_TIMER: u8 = 8;
const FX_FLIP: u8 = 16;
const FX_STATE_CHANGED: u8 = 32;

impl Effects {
    fn from_bits(b: u8) -> Effects {
        Effects {
            close_complete: b & FX_CLOSE_COMPLETE != 0,
            reset_timer: b & FX_RESET_TIMER != 0,
            expire_check: b & FX_EXPIRE_CHECK != 0,
            attempt_timer: b & FX_ATTEMPT_TIMER != 0,
            flip: b & FX_FLIP != 0,
            state_changed: b & FX_STATE_CHANGED != 0,
        }
    }
}

/// The TCP part of a connection: the two endpoints, 64 bytes in all (one
/// cache line). The connection's own flags (`C_*`: activity, partial
/// status, first packets seen, deferred close, the handshake passed, the
/// gap-reporting option, and the packet's effects `FX_*` above them) are
/// kept in the originator endpoint's `conn_bits`, where its layout has
/// room; [`TcpConn::flip`] leaves them there.
#[derive(Debug, Clone, PartialEq)]
pub struct TcpConn {
    pub orig: Endpoint,
    pub resp: Endpoint,
}

const C_ACTIVE: u16 = 1;
const C_PARTIAL: u16 = 1 << 1;
const C_CLOSE_DEFERRED: u16 = 1 << 2;
const C_DEFERRED_GEN_EVENT: u16 = 1 << 3;
/// Both endpoints left the handshake: the long inactivity timeout applies.
const C_PAST_HANDSHAKE: u16 = 1 << 4;
const C_REPORT_GAPS_FOR_PARTIAL: u16 = 1 << 5;
/// Zeek's first-packet bits (CheckPIA_FirstPacket): bit 6 the originator's, bit 7 the responder's.
const C_SEEN_SHIFT: u16 = 6;
/// The effects gathered while processing one packet (`FX_*` bits), taken by the tracker.
const C_FX_SHIFT: u16 = 8;

/// A TCP segment's fields that matter for tracking.
#[derive(Debug, Clone, Copy)]
pub struct Segment {
    pub flags: u8,
    pub seq: u32,
    pub ack: u32,
    pub window: u16,
    /// Payload length from the IP length fields.
    pub len: u32,
    /// Whether the whole payload was captured (the reassembler only takes complete segments).
    pub payload_complete: bool,
}

impl TcpConn {
    pub fn new(report_gaps_for_partial: bool) -> Self {
        let mut orig = Endpoint::new();
        orig.conn_bits = C_ACTIVE | if report_gaps_for_partial { C_REPORT_GAPS_FOR_PARTIAL } else { 0 };
        TcpConn { orig, resp: Endpoint::new() }
    }

    #[inline(always)]
    fn flag(&self, f: u16) -> bool {
        self.orig.conn_bits & f != 0
    }

    #[inline(always)]
    fn set(&mut self, f: u16, on: bool) {
        if on {
            self.orig.conn_bits |= f;
        } else {
            self.orig.conn_bits &= !f;
        }
    }

    /// Zeek's first-packet bits: 1 the originator's packet seen, 2 the responder's.
    #[inline(always)]
    fn first_packet_seen(&self) -> u16 {
        (self.orig.conn_bits >> C_SEEN_SHIFT) & 3
    }

    #[inline(always)]
    fn see_first_packet(&mut self, is_orig: bool) {
        self.orig.conn_bits |= (if is_orig { 1 } else { 2 }) << C_SEEN_SHIFT;
    }

    /// Adds `FX_*` effects of the packet being processed.
    #[inline(always)]
    fn fx(&mut self, fx: u8) {
        self.orig.conn_bits |= (fx as u16) << C_FX_SHIFT;
    }

    /// The effects gathered, cleared.
    #[inline(always)]
    fn take_fx(&mut self) -> u8 {
        let fx = (self.orig.conn_bits >> C_FX_SHIFT) as u8;
        self.orig.conn_bits &= (1 << C_FX_SHIFT) - 1;
        fx
    }

    /// Zeek's `is_active`: cleared when the connection finished or was reset.
    pub fn is_active(&self) -> bool {
        self.flag(C_ACTIVE)
    }

    /// Both endpoints left the handshake: the long inactivity timeout applies.
    pub fn past_handshake(&self) -> bool {
        self.flag(C_PAST_HANDSHAKE)
    }

    /// Bytes the capture missed in either direction (conn.log's
    /// `missed_bytes`), from the endpoints' cold parts.
    pub fn missed_bytes(&self) -> u64 {
        self.orig.rare().missed_bytes + self.resp.rare().missed_bytes
    }

    /// The state a bare SYN leaves on a new connection (the originator in
    /// SYN_SENT at `isn`, nothing else seen): what [`Self::process`] makes
    /// of a first packet with SYN, without ACK, FIN or RST, no payload and a
    /// window that is not zero (test `syn_sent_is_a_first_syn`). A port
    /// scan's or SYN flood's connection holds this until it ends, so the
    /// tracker keeps only `isn` for it (`conn::TcpStates`).
    pub fn syn_sent(isn: u32, report_gaps_for_partial: bool) -> Self {
        let mut t = TcpConn::new(report_gaps_for_partial);
        t.orig.set_state(SynSent);
        t.orig.init_seqs(isn, isn.wrapping_add(1));
        t.see_first_packet(true);
        t
    }

    /// The initial sequence number of a connection in the state of
    /// [`Self::syn_sent`], or None in any other state.
    #[inline]
    pub fn syn_sent_isn(&self) -> Option<u32> {
        let isn = self.orig.start_seq;
        (self.first_packet_seen() == 1
            && self.orig.state() == SynSent
            && *self == TcpConn::syn_sent(isn, self.flag(C_REPORT_GAPS_FOR_PARTIAL)))
        .then_some(isn)
    }

    /// Zeek's `IsPartial`: the originator's first packet was not a bare
    /// SYN, or the responder's (after a bare SYN) no SYN
    /// (`SetPartialStatus`, TCPSessionAdapter.cc:709-718); cleared when the
    /// handshake turns out reversed (a SYN answering a SYN-ACK, :752) or
    /// completed after a missed SYN (the ACK of a SYN-ACK, :832). Several
    /// of Zeek's analyzers read nothing while it holds.
    pub fn is_partial(&self) -> bool {
        self.flag(C_PARTIAL)
    }

    /// Swaps the roles of the endpoints (Zeek's FlipRoles on the TCP
    /// adapter), keeping the partial status. Zeek's `FlipRoles` clears it
    /// (TCPSessionAdapter.cc:1045), but Zeek flips a TCP connection only
    /// before its first packet is processed (`WantConnection`,
    /// src/packet_analysis/protocol/tcp/TCP.cc:41-70; the key is reversed
    /// here before this state exists) or at a SYN/SYN-ACK reversal, which
    /// clears it itself (:752, `process_general` here). wirelog's own flip
    /// by content (a MySQL greeting from the originator,
    /// `wirelog_parse::detect::Probe::Reversed`) is no flip of Zeek's, whose
    /// connection stays partial: clearing it there named a partial
    /// connection's service that Zeek's analyzer never read.
    pub fn flip(&mut self) {
        std::mem::swap(&mut self.orig, &mut self.resp);
        // The connection's flags stay in the originator's endpoint; its
        // first-packet bits swap with the roles.
        std::mem::swap(&mut self.orig.conn_bits, &mut self.resp.conn_bits);
        let seen = self.first_packet_seen();
        let swapped = ((seen & 1) << 1) | ((seen & 2) >> 1);
        self.orig.conn_bits = (self.orig.conn_bits & !(3 << C_SEEN_SHIFT)) | swapped << C_SEEN_SHIFT;
    }

    fn ep(&mut self, is_orig: bool) -> (&mut Endpoint, &mut Endpoint) {
        if is_orig {
            (&mut self.orig, &mut self.resp)
        } else {
            (&mut self.resp, &mut self.orig)
        }
    }

    fn set_state(&mut self, is_orig: bool, s: EndpointState) {
        self.fx(FX_STATE_CHANGED);
        let (e, p) = self.ep(is_orig);
        if s != e.state() && !is_handshake(s) && is_handshake(e.state()) && is_handshake(p.state()) {
            self.set(C_PAST_HANDSHAKE, true);
        }
        let (e, _) = self.ep(is_orig);
        e.set_state(s);
    }

    fn set_peer_state(&mut self, is_orig: bool, s: EndpointState) {
        self.set_state(!is_orig, s)
    }

    /// Whether a SYN on an existing connection starts a new one: Zeek's
    /// `TCPSessionAdapter::IsReuse` (src/packet_analysis/protocol/tcp/
    /// TCPSessionAdapter.cc), called by `IPBasedAnalyzer::AnalyzePacket`
    /// (src/packet_analysis/protocol/ip/IPBasedAnalyzer.cc) for every packet
    /// of a known tuple. Only a SYN (or, on a half connection whose
    /// originator said nothing, a SYN-ACK) can; on a connection that is
    /// not closed (no FIN or RST seen) it must carry a different initial
    /// sequence number and not be the SYN of a SYN/SYN-ACK pair seen in
    /// reverse order; once either side closed (FIN or RST: a refused
    /// connect, a reset, a finished exchange) every SYN starts a new
    /// connection, whatever its sequence number and however soon (Zeek only
    /// names the soon and still-active cases in weirds:
    /// `premature_connection_reuse`, `active_connection_reuse`). A connection
    /// idle past its inactivity timeout is gone before the SYN arrives
    /// (the timer), so the SYN creates a new one without asking.
    ///
    /// One departure: `stamped_at_start` (the SYN's time is not after the
    /// connection's start) with the connection's own SYN (same ISN) is a
    /// copy of that SYN in a capture that holds each packet more than once
    /// and out of order (Packetbeat's wsgi_loopback.pcap repeats the first
    /// SYN, with its original timestamp, after the FIN): an attempt that
    /// replaces a connection cannot predate it. Zeek, which keeps no such
    /// time, starts a new connection there.
    pub fn is_reuse(&self, seg: &Segment, stamped_at_start: bool) -> bool {
        if seg.flags & SYN == 0 {
            return false;
        }
        let mut conn_orig = &self.orig;
        if seg.flags & ACK != 0 {
            if self.orig.state() != Inactive {
                return false; // not a half connection
            }
            conn_orig = &self.resp;
        }
        // Zeek's IsClosed(): orig->did_close || resp->did_close.
        let is_closed = self.orig.did_close() || self.resp.did_close();
        if is_closed && stamped_at_start && seg.flags & ACK == 0 && seg.seq == conn_orig.start_seq {
            return false;
        }
        if !is_closed {
            if seg.seq == conn_orig.start_seq {
                return false;
            }
            if seg.flags & ACK == 0
                && conn_orig.state() == SynAckSent
                && self.resp.state() == Inactive
                && seg.seq == self.resp.start_seq
            {
                // A SYN and SYN-ACK seen in reversed order: not a reuse.
                return false;
            }
        }
        true
    }

    /// A segment whose checksum failed: only history and the counter change.
    pub fn checksum_error(&mut self, is_orig: bool, hist: &mut HistoryState) {
        let (e, _) = self.ep(is_orig);
        let n = e.bump(|r| &mut r.chk_cnt);
        hist.scaled(is_orig, b'C', n);
    }

    /// Processes one good segment (Zeek's TCPSessionAdapter::Process).
    /// Returns whether the connection's last activity time advances, and the lifetime effects.
    #[inline(always)]
    pub fn process(
        &mut self,
        is_orig: bool,
        seg: &Segment,
        hist: &mut HistoryState,
    ) -> (bool, Effects) {
        let (e, p) = if is_orig {
            (&self.orig, &self.resp)
        } else {
            (&self.resp, &self.orig)
        };
        if seg.flags & (SYN | FIN | RST) == 0
            && self.first_packet_seen() == 3
            && e.state() == Established
            && p.state() == Established
            && (e.bits | p.bits) & (DID_CLOSE | FIN_SEEN | WRAPPED) == 0
        {
            self.process_established(is_orig, seg, hist);
            return (true, Effects::default());
        }
        self.process_general(is_orig, seg, hist)
    }

    /// The common case: a segment without SYN, FIN or RST on a connection whose
    /// two sides are established and open. It performs the same steps as
    /// [`Self::process_general`], minus those whose conditions cannot hold in
    /// that state (endpoint initialisation, partial-status and state-machine
    /// changes, FIN/RST bookkeeping, end-of-data checks). Neither endpoint's
    /// sequence numbers or acknowledgements have wrapped (`WRAPPED`, tested
    /// by [`Self::process`] with the other flags): the wrap counts are 0
    /// without reading them.
    #[inline(always)]
    fn process_established(&mut self, is_orig: bool, seg: &Segment, hist: &mut HistoryState) {
        let len = seg.len;
        let ack = seg.flags & ACK != 0;
        let (e, p) = if is_orig {
            (&mut self.orig, &mut self.resp)
        } else {
            (&mut self.resp, &mut self.orig)
        };
        let seq_one_past = seg.seq.wrapping_add(len);
        let (rel_seq, seq_underflow) =
            relative_seq(e.start_seq, seg.seq, e.last_seq, 0, |s, w| {
                e.to_relative(s, w)
            });
        if len > 0 {
            hist.check(is_orig, crate::history::mask::DATA_PKT, b'D');
        } else if ack {
            hist.check(is_orig, crate::history::mask::ACK_PKT, b'A');
        }
        if seg.window == 0 {
            let n = e.bump(|r| &mut r.win0_cnt);
            hist.scaled(is_orig, b'W', n);
        }
        let mut rel_ack = 0;
        if ack {
            let (r, underflow) =
                relative_seq(p.start_seq, seg.ack, p.ack_seq, 0, |s, w| {
                    p.to_relative(s, w)
                });
            if !underflow {
                rel_ack = r;
                let delta = seq_delta(seg.ack, p.ack_seq);
                if !(seg.ack == 0 && delta > TOO_LARGE_SEQ_DELTA) && delta > 0 {
                    p.update_ack_seq(seg.ack);
                }
            }
        }
        if seq_delta(seq_one_past, e.last_seq) > 0 {
            e.update_last_seq(seq_one_past);
        } else if len > 0 {
            let n = e.bump(|r| &mut r.rxmt_cnt);
            hist.scaled(is_orig, b'T', n);
        }
        if ack {
            self.ack_received_in(!is_orig, rel_ack, hist, true);
        }
        if len > 0 && !seq_underflow && seg.payload_complete {
            self.data_sent(is_orig, rel_seq, len as u64, 0);
        }
    }

    #[inline(never)]
    fn process_general(
        &mut self,
        is_orig: bool,
        seg: &Segment,
        hist: &mut HistoryState,
    ) -> (bool, Effects) {
        let flags = seg.flags;
        let syn = flags & SYN != 0;
        let fin = flags & FIN != 0;
        let rst = flags & RST != 0;
        let ack = flags & ACK != 0;
        let len = seg.len;
        self.take_fx();

        // SetPartialStatus
        if is_orig {
            if self.first_packet_seen() & 1 == 0 {
                self.set(C_PARTIAL, !syn || ack);
            }
        } else if self.first_packet_seen() & 2 == 0 && !self.is_partial() {
            self.set(C_PARTIAL, !syn);
        }

        let mut seg_len: i64 = len as i64;
        if syn {
            seg_len += 1;
        }
        if fin {
            seg_len += 1;
        }
        if rst {
            seg_len -= len as i64;
        }
        let seq_one_past = seg.seq.wrapping_add(seg_len as u32);

        // init_endpoint
        {
            let (e, _) = self.ep(is_orig);
            match e.state() {
                Inactive => {
                    if syn {
                        e.ack_seq = seg.seq;
                        e.start_seq = seg.seq;
                        e.last_seq = seq_one_past;
                    } else {
                        e.ack_seq = seg.seq.wrapping_sub(1);
                        e.start_seq = seg.seq.wrapping_sub(1);
                        e.last_seq = seg.seq;
                    }
                }
                SynSent | SynAckSent => {
                    if syn && seg.seq != e.start_seq {
                        e.init_seqs(seg.seq, seq_one_past);
                    }
                }
                Established | Partial => {
                    if syn {
                        e.init_seqs(seg.seq, seq_one_past);
                    }
                }
                Reset => {
                    if syn && e.prev_state() == Inactive {
                        e.init_seqs(seg.seq, seq_one_past);
                    }
                }
                Closed => {}
            }
        }

        // get_relative_seq
        let (rel_seq, seq_underflow) = {
            let (e, _) = self.ep(is_orig);
            relative_seq(e.start_seq, seg.seq, e.last_seq, e.seq_wraps(), |s, w| {
                e.to_relative(s, w)
            })
        };

        update_history(flags, is_orig, self.ep(is_orig).0, hist, rel_seq, len);

        // update_window: only zero windows reach the logs (history 'W').
        {
            let (e, p) = self.ep(is_orig);
            if seg.window == 0 && !rst && p.state() != Closed && e.state() != Reset {
                let n = e.bump(|r| &mut r.win0_cnt);
                hist.scaled(is_orig, b'W', n);
            }
        }

        let update_last_time = !self.orig.did_close() || !self.resp.did_close();

        if fin {
            let (e, _) = self.ep(is_orig);
            e.set_flag(FIN_SEEN);
            e.rare_mut().fin_seq = rel_seq.wrapping_add(seg_len as u64);
        }

        let mut rel_ack: u64 = 0;
        if ack {
            let (_, p) = self.ep(is_orig);
            if p.state() == Inactive {
                rel_ack = 1;
                p.start_seq = seg.ack.wrapping_sub(1);
                p.ack_seq = seg.ack.wrapping_sub(1);
                p.last_seq = seg.ack.wrapping_sub(1);
            } else {
                let (r, underflow) =
                    relative_seq(p.start_seq, seg.ack, p.ack_seq, p.ack_wraps(), |s, w| {
                        p.to_relative(s, w)
                    });
                if underflow {
                    rel_ack = 0;
                } else {
                    rel_ack = r;
                    if !rst {
                        // update_ack_seq
                        let delta = seq_delta(seg.ack, p.ack_seq);
                        if seg.ack == 0 && delta > TOO_LARGE_SEQ_DELTA {
                        } else if delta > 0 {
                            p.update_ack_seq(seg.ack);
                        }
                    }
                }
            }
        }

        // update_last_seq
        let delta_last = {
            let (e, _) = self.ep(is_orig);
            let delta_last = seq_delta(seq_one_past, e.last_seq);
            if (syn || rst) && !(-TOO_LARGE_SEQ_DELTA..=TOO_LARGE_SEQ_DELTA).contains(&delta_last) {
            } else if fin && e.last_seq == e.start_seq.wrapping_add(1) {
                e.update_last_seq(seq_one_past);
            } else if e.state() == Reset {
            } else if delta_last > 0 {
                e.update_last_seq(seq_one_past);
            } else if len > 0 {
                let n = e.bump(|r| &mut r.rxmt_cnt);
                hist.scaled(is_orig, b'T', n);
            }
            delta_last
        };

        let (do_close, gen_event) = self.update_state_machine(is_orig, seg, delta_last);

        if ack {
            self.ack_received(!is_orig, rel_ack, hist);
        }

        // CheckPIA_FirstPacket
        self.see_first_packet(is_orig);

        let rel_data_seq = if syn {
            rel_seq.wrapping_add(1)
        } else {
            rel_seq
        };
        if len > 0 && !rst && !seq_underflow && seg.payload_complete {
            let ack_wraps = self.ep(is_orig).0.ack_wraps();
            self.data_sent(is_orig, rel_data_seq, len as u64, ack_wraps);
        }
        self.check_eof(is_orig);

        if do_close {
            self.connection_closed(is_orig, gen_event);
        }
        (update_last_time, Effects::from_bits(self.take_fx()))
    }

    fn update_state_machine(
        &mut self,
        is_orig: bool,
        seg: &Segment,
        delta_last: i32,
    ) -> (bool, bool) {
        let flags = seg.flags;
        let syn = flags & SYN != 0;
        let fin = flags & FIN != 0;
        let rst = flags & RST != 0;
        let ack = flags & ACK != 0;
        let mut do_close = false;
        let mut gen_event = false;
        let (state, peer_state) = {
            let (e, p) = self.ep(is_orig);
            (e.state(), p.state())
        };
        match state {
            Inactive => {
                if syn {
                    if is_orig {
                        self.set_state(is_orig, if ack { SynAckSent } else { SynSent });
                        self.fx(FX_ATTEMPT_TIMER);
                    } else {
                        if !ack {
                            let base_is_start = seg.seq == self.ep(is_orig).0.start_seq;
                            if peer_state == SynAckSent && base_is_start {
                                // A SYN/SYN-ACK reversal: Zeek flips and establishes. The
                                // tracker performs the flip (it owns the key and history).
                                self.set(C_PARTIAL, false);
                                self.set_peer_state(is_orig, Established);
                                self.see_first_packet(is_orig);
                                self.fx(FX_FLIP);
                            }
                        }
                        if self.ep(is_orig).1.state() == SynSent {
                            self.set_peer_state(is_orig, Established);
                        }
                        self.set_state(is_orig, Established);
                    }
                }
                if fin {
                    self.set_state(is_orig, Closed);
                    do_close = true;
                    gen_event = true;
                }
                if rst {
                    self.set_state(is_orig, Reset);
                    let peer_state = self.ep(is_orig).1.state();
                    let is_reject = if is_orig {
                        peer_state == Established
                    } else {
                        matches!(peer_state, SynSent | SynAckSent)
                    };
                    do_close = true;
                    gen_event = !is_reject;
                }
                if self.ep(is_orig).0.state() == Inactive {
                    let orig_state = self.orig.state();
                    let peer_state = self.ep(is_orig).1.state();
                    if !is_orig && seg.len == 0 && orig_state == SynSent {
                        // An early ACK of the SYN before the SYN-ACK: not a partial connection.
                    } else if ack && peer_state == Established {
                        self.set_state(is_orig, Established);
                        self.set(C_PARTIAL, false);
                        self.see_first_packet(is_orig);
                    } else {
                        self.set_state(is_orig, Partial);
                    }
                }
            }
            SynSent | SynAckSent => {
                if fin {
                    self.set_state(is_orig, Closed);
                    do_close = true;
                    gen_event = true;
                }
                if rst {
                    self.set_state(is_orig, Reset);
                    self.set(C_ACTIVE, false); // ConnectionReset
                    do_close = true;
                }
            }
            Established | Partial => {
                if syn && state == Partial && peer_state == Inactive && !ack {
                    self.set_state(is_orig, SynSent);
                }
                if fin && !rst {
                    self.set_state(is_orig, Closed);
                    let p = self.ep(is_orig).1;
                    if p.state() == Reset && p.prev_state() == Closed {
                        // A FIN followed by a RST from the peer: that was a normal close.
                        self.set_peer_state(is_orig, Closed);
                    }
                    do_close = true;
                    gen_event = true;
                }
                if rst {
                    self.set_state(is_orig, Reset);
                    do_close = true;
                    let p = self.ep(is_orig).1;
                    if p.state() != Reset || p.prev_state() != Established {
                        self.set(C_ACTIVE, false);
                    }
                }
            }
            Closed => {
                let _ = delta_last;
                if rst && self.ep(is_orig).1.state() != Closed {
                    self.set_state(is_orig, Reset);
                    if !self.ep(is_orig).0.did_close() {
                        do_close = true;
                    }
                    self.fx(FX_RESET_TIMER);
                }
            }
            Reset => {}
        }
        (do_close, gen_event)
    }

    fn report_gap(&self) -> bool {
        self.flag(C_REPORT_GAPS_FOR_PARTIAL) || (self.orig.is_clean() && self.resp.is_clean())
    }

    /// Data from `is_orig`'s side at relative sequence `seq` (Zeek's
    /// TCP_Reassembler::DataSent). `ack_wraps`: the endpoint's
    /// (`Endpoint::ack_wraps`, which the established path knows is 0).
    /// The reassembly's bounds are read once ([`Reassembly::bounds`]) and
    /// carried as values.
    #[inline(always)]
    fn data_sent(&mut self, is_orig: bool, mut seq: u64, mut len: u64, ack_wraps: u32) {
        let (e, p) = self.ep(is_orig);
        if e.skip_deliveries() {
            return;
        }
        debug_assert_eq!(ack_wraps, e.ack_wraps());
        let ack_full = Endpoint::full(e.ack_seq, ack_wraps);
        let start = e.start_seq as u64;
        let ack = ack_full.wrapping_sub(start);
        let upper = seq + len;
        if seq < ack {
            if upper <= ack {
                return;
            }
            len -= ack - seq;
            seq = ack;
        }
        let _ = len;
        let (delivered, (mut trim, next_deliver), held) =
            e.reasm.insert_at(seq, upper, e.reasm.bounds(), e.reasm.has_ranges());
        // BlockInserted's trimming when the peer seems not to acknowledge anything.
        let peer_state = p.state();
        // (The trim below moves no acknowledgement: one test serves both
        // uses. Endpoint::no_data_acked: the acknowledgement is the
        // initial sequence number or the one after, relative 0 or 1.)
        let no_data_acked = ack <= 1;
        if delivered && no_data_acked && e.size(peer_state) > MAX_INITIAL_WINDOW {
            // Release delivered data (Zeek's TrimToSeq(last_reassem_seq)).
            e.reasm.set_trim(next_deliver);
            trim = next_deliver;
        }
        // Without data above a hole nothing is undelivered, and what is
        // buffered is the delivered range alone.
        let too_much = if held {
            (no_data_acked && e.reasm.undelivered_bytes() > MAX_ABOVE_HOLE_WITHOUT_ACKS)
                || e.reasm.buffered() > EXCESSIVE_DATA_WITHOUT_ACKS
        } else {
            next_deliver.saturating_sub(trim) > EXCESSIVE_DATA_WITHOUT_ACKS
        };
        if too_much {
            e.reasm.clear();
            e.set_flag(SKIP_DELIVERIES);
        }
    }

    /// `endp_is_orig`'s data was acknowledged up to relative `seq` (Zeek's AckReceived).
    /// Inline for its common outcomes (nothing new acknowledged, or data that
    /// was all delivered in order), which need none of the gap accounting.
    #[inline(always)]
    fn ack_received(&mut self, endp_is_orig: bool, seq: u64, hist: &mut HistoryState) {
        self.ack_received_in(endp_is_orig, seq, hist, false)
    }

    /// [`Self::ack_received`]; `established`: called from
    /// [`Self::process_established`], where the endpoint is established
    /// without a FIN, so that `check_eof` has nothing to do.
    #[inline(always)]
    fn ack_received_in(&mut self, endp_is_orig: bool, mut seq: u64, hist: &mut HistoryState, established: bool) {
        {
            let e = if endp_is_orig { &mut self.orig } else { &mut self.resp };
            if e.fin_seen() && seq >= e.rare().fin_seq {
                seq = e.rare().fin_seq.wrapping_sub(1);
            }
            let (trim, next_deliver) = e.reasm.bounds();
            if seq <= trim {
                return;
            }
            // Acknowledged up to delivered data with nothing held above a hole:
            // trim_to would find no gap and keep no range, only move the trim.
            if seq <= next_deliver && !e.reasm.has_ranges() {
                e.reasm.set_trim(seq);
                if !established {
                    self.check_eof(endp_is_orig);
                }
                return;
            }
        }
        self.ack_beyond_delivered(endp_is_orig, seq, hist);
    }

    /// [`Self::ack_received`] when the acknowledgement may reveal a gap.
    #[inline(never)]
    fn ack_beyond_delivered(&mut self, endp_is_orig: bool, seq: u64, hist: &mut HistoryState) {
        let report = self.report_gap();
        let clean = self.orig.is_clean() && self.resp.is_clean();
        let is_partial = self.is_partial();
        let mut missed = 0u64;
        {
            let (e, _) = self.ep(endp_is_orig);
            let mut gaps = 0u32;
            let skip = e.skip_deliveries();
            e.reasm.trim_to(seq, is_partial, skip, |n| {
                if clean {
                    gaps += 1;
                }
                if report {
                    missed += n;
                }
            });
            for _ in 0..gaps {
                let n = e.bump(|r| &mut r.gap_cnt);
                hist.scaled(endp_is_orig, b'G', n);
            }
            if missed != 0 {
                e.rare_mut().missed_bytes += missed;
            }
        }
        self.check_eof(endp_is_orig);
    }

    /// Zeek's TCP_Reassembler::DataPending for `is_orig`'s side.
    fn data_pending(&self, is_orig: bool) -> bool {
        let (e, p) = if is_orig {
            (&self.orig, &self.resp)
        } else {
            (&self.resp, &self.orig)
        };
        if e.skip_deliveries() {
            return false;
        }
        let delivered = (e.start_seq as u64).wrapping_add(e.reasm.next_deliver());
        let last = Endpoint::full(e.last_seq, e.seq_wraps());
        if last < delivered {
            return false;
        }
        if delivered != last.wrapping_sub(1) && delivered != last {
            return true;
        }
        e.state() != Reset && p.reasm.has_blocks()
    }

    #[inline]
    fn check_eof(&mut self, is_orig: bool) {
        let e = if is_orig { &self.orig } else { &self.resp };
        // Cheap tests first, inline: data_pending only matters once this side is closing.
        if e.did_eof() || !(e.fin_seen() || e.state() == Closed || e.state() == Reset) {
            return;
        }
        self.check_eof_closing(is_orig);
    }

    #[inline(never)]
    fn check_eof_closing(&mut self, is_orig: bool) {
        if self.data_pending(is_orig) {
            return;
        }
        {
            let (e, _) = self.ep(is_orig);
            e.set_flag(DID_EOF);
            if self.flag(C_CLOSE_DEFERRED) {
                let gen = self.flag(C_DEFERRED_GEN_EVENT);
                self.set(C_CLOSE_DEFERRED, false);
                self.connection_closed(is_orig, gen);
            }
        }
    }

    fn connection_closed(&mut self, is_orig: bool, gen_event: bool) {
        if self.data_pending(is_orig) {
            self.set(C_CLOSE_DEFERRED, true);
            if !self.flag(C_DEFERRED_GEN_EVENT) {
                self.set(C_DEFERRED_GEN_EVENT, gen_event);
            }
            return;
        }
        self.set(C_CLOSE_DEFERRED, false);
        let (e, p) = self.ep(is_orig);
        if e.did_close() {
            return;
        }
        e.set_flag(DID_CLOSE);
        let close_complete = e.state() == Reset || p.did_close() || p.state() == Inactive;
        let interesting = e.prev_state() != Inactive || p.state() != Inactive;
        let half_close_after_activity = e.prev_state() != Inactive;
        self.fx(FX_STATE_CHANGED);
        if close_complete {
            if interesting {
                let gen = gen_event || self.flag(C_DEFERRED_GEN_EVENT);
                self.set(C_DEFERRED_GEN_EVENT, false);
                if gen {
                    self.set(C_ACTIVE, false); // ConnectionFinished
                }
            }
            self.fx(FX_CLOSE_COMPLETE);
        } else if half_close_after_activity {
            self.fx(FX_EXPIRE_CHECK);
        }
    }

    /// Zeek's conn_state for TCP, a pure function of the endpoint states and history.
    pub fn conn_state(&self, history: &str) -> ConnState {
        let os = self.orig.state();
        let rs = self.resp.state();
        let o_inactive = matches!(os, Inactive | Partial);
        let r_inactive = matches!(rs, Inactive | Partial);
        if rs == Reset {
            if matches!(os, SynSent | SynAckSent)
                || (os == Reset && self.orig.size(rs) == 0 && self.resp.size(os) == 0)
            {
                ConnState::REJ
            } else if o_inactive {
                ConnState::RSTRH
            } else {
                ConnState::RSTR
            }
        } else if os == Reset {
            if r_inactive {
                if history_is_rstos0(history) {
                    ConnState::RSTOS0
                } else {
                    ConnState::OTH
                }
            } else {
                ConnState::RSTO
            }
        } else if rs == Closed && os == Closed {
            ConnState::SF
        } else if os == Closed {
            if r_inactive {
                ConnState::SH
            } else {
                ConnState::S2
            }
        } else if rs == Closed {
            if o_inactive {
                ConnState::SHR
            } else {
                ConnState::S3
            }
        } else if os == SynSent && rs == Inactive {
            ConnState::S0
        } else if os == Established && rs == Established {
            ConnState::S1
        } else {
            ConnState::OTH
        }
    }

    /// Zeek's ExpireTimer condition: true when the connection may be removed
    /// once it has been idle for the linger period.
    pub fn expire_condition(&self) -> bool {
        let (o, r) = (&self.orig, &self.resp);
        if (o.did_close() || r.did_close())
            && ((o.did_close() && r.did_close())
                || o.state() == Reset
                || r.state() == Reset
                || o.state() == Inactive
                || r.state() == Inactive)
        {
            return true;
        }
        o.state() == Inactive && r.state() == Inactive
    }

    /// Zeek's AttemptTimer condition: a SYN that got no answer.
    pub fn attempt_condition(&self) -> bool {
        self.is_active()
            && matches!(self.orig.state(), SynSent | SynAckSent)
            && self.resp.state() == Inactive
    }

    pub fn orig_size(&self) -> u64 {
        self.orig.size(self.resp.state())
    }

    pub fn resp_size(&self) -> u64 {
        self.resp.size(self.orig.state())
    }
}

/// The regular expression `^?S[^HAFGIQ]*R.*` of Zeek's conn_state, by hand.
fn history_is_rstos0(h: &str) -> bool {
    let b = h.as_bytes();
    let mut i = 0;
    if b.first() == Some(&b'^') {
        i = 1;
    }
    if b.get(i) != Some(&b'S') {
        return false;
    }
    for &c in &b[i + 1..] {
        if c == b'R' {
            return true;
        }
        if matches!(c, b'H' | b'A' | b'F' | b'G' | b'I' | b'Q') {
            return false;
        }
    }
    false
}

/// Zeek's get_relative_seq: the 64-bit sequence number relative to the
/// endpoint's initial one, and whether it fell below it.
#[inline(always)]
fn relative_seq(
    start: u32,
    cur: u32,
    last: u32,
    mut wraps: u32,
    to_rel: impl Fn(u32, u32) -> u64,
) -> (u64, bool) {
    let delta = seq_delta(cur, last);
    if delta < 0 {
        if wraps > 0 && cur > last {
            wraps -= 1;
        }
    } else if delta > 0 && cur < last {
        wraps += 1;
    }
    if wraps == 0 {
        let d = seq_delta(cur, start);
        return (d as i64 as u64, d < 0);
    }
    (to_rel(cur, wraps), false)
}

fn update_history(
    flags: u8,
    is_orig: bool,
    e: &mut Endpoint,
    hist: &mut HistoryState,
    rel_seq: u64,
    len: u32,
) {
    use crate::history::mask::*;
    let syn = flags & SYN != 0;
    let fin = flags & FIN != 0;
    let rst = flags & RST != 0;
    let bits = syn as u8 + fin as u8 + rst as u8;
    if bits > 1 {
        if fin && rst {
            hist.check(is_orig, FIN_RST_PKT, b'I');
        } else {
            hist.check(is_orig, MULTI_FLAG_PKT, b'Q');
        }
    } else if bits == 1 {
        if syn {
            let code = if flags & ACK != 0 { b'H' } else { b'S' };
            if hist.check(is_orig, SYN_PKT, code) && rel_seq as u32 != e.rare().hist_last_syn {
                hist.add(is_orig, code);
            }
            e.set_position(|r| &mut r.hist_last_syn, rel_seq as u32);
        }
        if fin {
            let at = rel_seq.wrapping_add(len as u64) as u32;
            if hist.check(is_orig, FIN_PKT, b'F') && at != e.rare().hist_last_fin {
                hist.add(is_orig, b'F');
            }
            e.set_position(|r| &mut r.hist_last_fin, at);
        }
        if rst {
            if hist.check(is_orig, RST_PKT, b'R') && rel_seq as u32 != e.rare().hist_last_rst {
                hist.add(is_orig, b'R');
            }
            e.set_position(|r| &mut r.hist_last_rst, rel_seq as u32);
        }
    } else if len > 0 {
        hist.check(is_orig, DATA_PKT, b'D');
    } else if flags & ACK != 0 {
        hist.check(is_orig, ACK_PKT, b'A');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirelog_decode::tcp_flags::PSH;

    #[test]
    fn reassembly_gaps_are_reported_once_acked() {
        let mut r = Reassembly::new();
        assert!(r.insert(1, 101)); // in order
        assert!(!r.insert(201, 301)); // above a hole
        assert!(!r.insert(50, 101)); // retransmission
        assert_eq!(r.undelivered_bytes(), 200);
        let mut gaps = Vec::new();
        r.trim_to(401, false, false, |n| gaps.push(n));
        assert_eq!(gaps, vec![100, 100]); // [101,201) and [301,401)
        assert_eq!(r.next_deliver(), 401);
        assert!(!r.has_blocks());
        // Filling the hole before the ack: no gap.
        let mut r = Reassembly::new();
        r.insert(101, 201);
        r.insert(1, 101);
        assert_eq!(r.next_deliver(), 201);
        let mut gaps = Vec::new();
        r.trim_to(201, false, false, |n| gaps.push(n));
        assert!(gaps.is_empty());
        assert_eq!(r.buffered(), 0);
    }

    fn seg(flags: u8, seq: u32, ack: u32, len: u32) -> Segment {
        Segment { flags, seq, ack, window: 512, len, payload_complete: true }
    }

    /// The TCP state is one cache line, and stays one in the slab (the
    /// cold part's pointer gives `Option<TcpConn>` its niche).
    #[test]
    fn tcp_state_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Endpoint>(), 32);
        assert_eq!(std::mem::size_of::<TcpConn>(), 64);
        assert_eq!(std::mem::size_of::<Option<TcpConn>>(), 64);
    }

    /// The reassembly's 32-bit bounds pass 2^32 - 1 into the cold part
    /// and read back whole, in both directions of the escape.
    #[test]
    fn reassembly_bounds_past_32_bits() {
        let mut r = Reassembly::new();
        let base = (1u64 << 32) - 100;
        r.set_next_deliver(base);
        r.set_trim(base);
        assert!(r.rare.is_none(), "below 2^32 - 1: inline");
        assert!(r.insert(base, base + 200)); // crosses the boundary in order
        assert_eq!((r.next_deliver, r.next_deliver()), (WIDE, base + 200));
        assert!(!r.insert(base + 300, base + 400)); // above a hole, past 4 GiB
        let mut gaps = Vec::new();
        r.trim_to(base + 500, false, false, |n| gaps.push(n));
        assert_eq!(gaps, vec![100, 100]);
        assert_eq!((r.trim, r.trim(), r.next_deliver()), (WIDE, base + 500, base + 500));
        assert!(!r.has_blocks());
        // Exactly 2^32 - 1 is the escape's marker: kept wide too.
        r.set_trim(WIDE as u64);
        assert_eq!((r.trim, r.trim()), (WIDE, WIDE as u64));
        // A bound written back below the marker is inline again.
        r.set_next_deliver(7);
        assert_eq!((r.next_deliver, r.next_deliver()), (7, 7));
    }

    /// One connection through the whole of `process`: a handshake, then
    /// `bytes[0]` bytes from the originator, each segment acknowledged, and
    /// `bytes[1]` from the responder likewise; the segment at `gap_at` of
    /// each direction is never seen (its acknowledgement is), then FINs.
    /// Returns the connection and its history.
    fn long_stream(bytes: [u64; 2], gap_at: [u64; 2]) -> (TcpConn, HistoryState) {
        const L: u64 = 65_000;
        let isn = [0xF000_0000u32, 0x8000_0000u32]; // the originator's wraps after 256 MiB
        let (mut t, mut h) = (TcpConn::new(false), HistoryState::default());
        t.process(true, &seg(SYN, isn[0], 0, 0), &mut h);
        t.process(false, &seg(SYN | ACK, isn[1], isn[0].wrapping_add(1), 0), &mut h);
        t.process(true, &seg(ACK, isn[0].wrapping_add(1), isn[1].wrapping_add(1), 0), &mut h);
        let mut next = [isn[0].wrapping_add(1), isn[1].wrapping_add(1)];
        for side in 0..2 {
            let is_orig = side == 0;
            let mut sent = 0u64;
            while sent < bytes[side] {
                let len = L.min(bytes[side] - sent);
                let end = next[side].wrapping_add(len as u32);
                if sent != gap_at[side] {
                    t.process(is_orig, &seg(PSH | ACK, next[side], next[1 - side], len as u32), &mut h);
                }
                // The peer acknowledges each segment (the missed one too:
                // only the capture lost it).
                t.process(!is_orig, &seg(ACK, next[1 - side], end, 0), &mut h);
                next[side] = end;
                sent += len;
            }
        }
        t.process(true, &seg(FIN | ACK, next[0], next[1], 0), &mut h);
        t.process(false, &seg(FIN | ACK, next[1], next[0].wrapping_add(1), 0), &mut h);
        t.process(true, &seg(ACK, next[0].wrapping_add(1), next[1].wrapping_add(1), 0), &mut h);
        (t, h)
    }

    /// A stream past 4 GiB in each direction, with a gap past 4 GiB in
    /// each, ends as the same exchange of a few MB does: the same history,
    /// state and missed bytes, and sizes that are the bytes sent; the
    /// reassembly's bounds went through the cold part ([`WIDE`]) on the way.
    #[test]
    fn streams_past_4_gib_each_way() {
        const L: u64 = 65_000;
        let small = [100 * L + 17, 80 * L + 5];
        let (t0, h0) = long_stream(small, [50 * L, 40 * L]);
        let big = [(5u64 << 30) + 17, (9u64 << 29) + 5]; // 5 GiB and 4.5 GiB
        let gaps = [(4u64 << 30) / L * L + 10 * L, (4u64 << 30) / L * L + 20 * L];
        let (t1, h1) = long_stream(big, gaps);
        assert_eq!(h1.letters().as_str(), h0.letters().as_str());
        assert_eq!(t1.conn_state(h1.letters().as_str()), t0.conn_state(h0.letters().as_str()));
        assert_eq!(t0.conn_state(h0.letters().as_str()), ConnState::SF);
        assert_eq!((t0.orig_size(), t0.resp_size()), (small[0], small[1]));
        assert_eq!((t1.orig_size(), t1.resp_size()), (big[0], big[1]));
        assert_eq!(t0.missed_bytes(), 2 * L);
        assert_eq!(t1.missed_bytes(), 2 * L);
        assert_eq!((t1.orig.seq_wraps(), t1.resp.seq_wraps()), (2, 1));
        for (e, n) in [(&t1.orig, big[0]), (&t1.resp, big[1])] {
            // Delivered and acknowledged to the FIN: both bounds past 4 GiB.
            assert_eq!((e.reasm.next_deliver, e.reasm.trim), (WIDE, WIDE));
            assert_eq!((e.reasm.next_deliver(), e.reasm.trim()), (n + 1, n + 1));
        }
        for e in [&t0.orig, &t0.resp] {
            assert_ne!(e.reasm.next_deliver, WIDE);
        }
    }

    /// The cold part of an endpoint is made only by what needs it: a SYN
    /// (scan), a handshake and in-order data leave both endpoints without
    /// one; a retransmitted SYN, a FIN or a retransmission make one, and
    /// the history letters are those the counters and positions drive.
    #[test]
    fn cold_part_only_on_first_use() {
        let (mut t, mut h) = (TcpConn::new(false), HistoryState::default());
        t.process(true, &seg(SYN, 100, 0, 0), &mut h);
        assert!(t.orig.reasm.rare.is_none() && t.resp.reasm.rare.is_none());
        t.process(true, &seg(SYN, 100, 0, 0), &mut h); // same position: no new letter
        t.process(false, &seg(SYN | ACK, 5000, 101, 0), &mut h);
        t.process(true, &seg(ACK, 101, 5001, 0), &mut h);
        t.process(true, &seg(PSH | ACK, 101, 5001, 50), &mut h);
        t.process(false, &seg(ACK, 5001, 151, 0), &mut h);
        assert!(t.orig.reasm.rare.is_none() && t.resp.reasm.rare.is_none());
        t.process(true, &seg(PSH | ACK, 101, 5001, 50), &mut h); // retransmission
        assert_eq!(t.orig.rare().rxmt_cnt, 1);
        assert!(t.resp.reasm.rare.is_none());
        t.process(true, &seg(FIN | ACK, 151, 5001, 0), &mut h);
        t.process(true, &seg(FIN | ACK, 151, 5001, 0), &mut h); // same FIN: no new letter
        assert_eq!(t.orig.rare().fin_seq, 52);
        assert_eq!(h.letters().as_str(), "ShADaTF");
    }

    /// A first packet that is a bare SYN (whatever its other flags,
    /// acknowledgement field and non-zero window) leaves exactly
    /// `TcpConn::syn_sent`; a retransmitted one too; anything else does not.
    #[test]
    fn syn_sent_is_a_first_syn() {
        use wirelog_decode::tcp_flags::{ECE, URG};
        for rg in [false, true] {
            for (isn, flags, window) in [(0, SYN, 1), (100, SYN | PSH, 512), (u32::MAX, SYN | ECE | URG, 65535), (u32::MAX - 1, SYN, 7)] {
                let (mut t, mut h) = (TcpConn::new(rg), HistoryState::default());
                let s = Segment { flags, seq: isn, ack: 12345, window, len: 0, payload_complete: true };
                t.process(true, &s, &mut h);
                assert_eq!(t, TcpConn::syn_sent(isn, rg), "{isn} {flags:#x} {window}");
                assert_eq!(t.syn_sent_isn(), Some(isn));
                t.process(true, &s, &mut h);
                assert_eq!(t.syn_sent_isn(), Some(isn), "retransmitted");
                assert_eq!(h.letters().as_str(), "S");
            }
            for (flags, window, len) in [(SYN, 0, 0), (SYN | ACK, 5, 0), (SYN, 5, 10), (SYN | FIN, 5, 0), (SYN | RST, 5, 0), (ACK, 5, 0)] {
                let (mut t, mut h) = (TcpConn::new(rg), HistoryState::default());
                t.process(true, &Segment { flags, seq: 9, ack: 1, window, len, payload_complete: true }, &mut h);
                assert_eq!(t.syn_sent_isn(), None, "{flags:#x} {window} {len}");
            }
            let (mut t, mut h) = (TcpConn::syn_sent(9, rg), HistoryState::default());
            t.process(false, &seg(SYN | ACK, 500, 10, 0), &mut h);
            assert_eq!(t.syn_sent_isn(), None, "answered");
        }
    }

    #[test]
    fn rstos0_pattern() {
        assert!(history_is_rstos0("SR"));
        assert!(history_is_rstos0("^SdR"));
        assert!(history_is_rstos0("SaR"));
        assert!(!history_is_rstos0("SaFR"));
        assert!(!history_is_rstos0("R"));
        assert!(history_is_rstos0("ShR")); // lowercase letters are not excluded
    }
}
