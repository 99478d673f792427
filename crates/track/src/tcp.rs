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
//! Layout: a [`TcpConn`] is 52 bytes (test `tcp_state_is_fifty_two_bytes`):
//! per endpoint three sequence numbers, the reassembly's two bounds as 32-bit
//! relative sequence numbers, the states and flags in bits; and for both
//! endpoints one 4-byte index of a slot in [`ColdParts`], whose cold parts
//! ([`EndpointRare`]) hold what most connections never need: sequence-space
//! wraps, bounds past 4 GiB, positions of the last SYN/FIN/RST, the counters
//! behind scaled history letters, `missed_bytes` and data held above a hole.
//! Every method that may read or write a cold part takes the [`ColdParts`]
//! (an endpoint's own through [`Rare`]).

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
/// unused values are the niche that keeps `Option<TcpConn>` at 52 bytes.
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
}

impl Reassembly {
    fn new() -> Self {
        Reassembly {
            next_deliver: 1,
            trim: 1,
        }
    }

    #[inline(always)]
    fn next_deliver(&self, r: RareRef<'_>) -> u64 {
        if self.next_deliver != WIDE {
            self.next_deliver as u64
        } else {
            r.get().next_deliver
        }
    }

    #[inline(always)]
    fn trim(&self, r: RareRef<'_>) -> u64 {
        if self.trim != WIDE {
            self.trim as u64
        } else {
            r.get().trim
        }
    }

    /// Both bounds, `(trim, next_deliver)`, with one test when neither is
    /// wide (every stream's first 4 GiB): the packet path reads them once
    /// through this and works on the values.
    /// The cold part is reached (its slot read) only for a wide bound.
    #[inline(always)]
    fn bounds(&self, r: &Rare<'_>) -> (u64, u64) {
        // WIDE is u32::MAX: the larger field is WIDE when either is.
        if self.next_deliver.max(self.trim) != WIDE {
            (self.trim as u64, self.next_deliver as u64)
        } else {
            self.bounds_wide(r.parts, r.slot, r.side)
        }
    }

    #[cold]
    #[inline(never)]
    fn bounds_wide(&self, parts: &ColdParts, slot: &u32, side: u32) -> (u64, u64) {
        let r = RareRef { parts, slot: *slot, side };
        (self.trim(r), self.next_deliver(r))
    }

    #[inline(always)]
    fn set_next_deliver(&mut self, v: u64, r: &mut Rare<'_>) {
        if v < WIDE as u64 {
            self.next_deliver = v as u32;
        } else {
            self.set_wide(true, v, r.parts, r.slot, r.side);
        }
    }

    #[inline(always)]
    fn set_trim(&mut self, v: u64, r: &mut Rare<'_>) {
        if v < WIDE as u64 {
            self.trim = v as u32;
        } else {
            self.set_wide(false, v, r.parts, r.slot, r.side);
        }
    }

    /// A bound past 32 bits: whole in the cold part.
    #[cold]
    #[inline(never)]
    fn set_wide(&mut self, next_deliver: bool, v: u64, parts: &mut ColdParts, slot: &mut u32, side: u32) {
        let r = parts.get_mut(slot, side);
        if next_deliver {
            r.next_deliver = v;
            self.next_deliver = WIDE;
        } else {
            r.trim = v;
            self.trim = WIDE;
        }
    }

    /// Whether data above a hole is held.
    #[inline(always)]
    fn has_ranges(&self, r: RareRef<'_>) -> bool {
        r.exists() && !r.get().above_hole.is_empty()
    }

    /// Frees the above-hole list's memory once it holds nothing (the cold
    /// part itself stays: its counters are the endpoint's).
    fn drop_ranges_if_empty(&mut self, r: &mut Rare<'_>) {
        if r.exists() {
            let r = r.get_mut();
            if r.above_hole.is_empty() {
                r.above_hole = Vec::new();
            }
        }
    }

    /// Bytes held, delivered or not (Zeek's block list DataSize).
    #[inline(always)]
    fn buffered(&self, r: RareRef<'_>) -> u64 {
        let contiguous = self.next_deliver(r).saturating_sub(self.trim(r));
        contiguous + r.get().above_hole.iter().map(|(a, b)| b - a).sum::<u64>()
    }

    /// Bytes held above a hole (Zeek's NumUndeliveredBytes).
    fn undelivered_bytes(&self, r: RareRef<'_>) -> u64 {
        r.get()
            .above_hole
            .last()
            .map_or(0, |&(_, upper)| upper.saturating_sub(self.next_deliver(r)))
    }

    fn has_blocks(&self, r: RareRef<'_>) -> bool {
        self.next_deliver(r) > self.trim(r) || !r.get().above_hole.is_empty()
    }

    fn clear(&mut self, r: &mut Rare<'_>) {
        self.set_trim(self.next_deliver(r.by_ref()), r);
        if r.exists() {
            r.get_mut().above_hole = Vec::new();
        }
    }

    /// Records newly received data and delivers whatever became contiguous.
    /// Returns whether in-order delivery advanced.
    #[cfg(test)]
    fn insert(&mut self, seq: u64, upper: u64, r: &mut Rare<'_>) -> bool {
        self.insert_at(seq, upper, self.bounds(r), self.has_ranges(r.by_ref()), r).0
    }

    /// [`Self::insert`] given the bounds (`(trim, next_deliver)`, as
    /// [`Self::bounds`] reads them) and whether data is held above a hole
    /// ([`Self::has_ranges`]); returns whether in-order delivery advanced,
    /// and the bounds and that test after. Inline for in-order data; data
    /// above a hole goes out of line.
    #[inline(always)]
    fn insert_at(
        &mut self,
        seq: u64,
        upper: u64,
        (trim, next_deliver): (u64, u64),
        held: bool,
        r: &mut Rare<'_>,
    ) -> (bool, (u64, u64), bool) {
        if upper <= trim || upper <= next_deliver {
            return (false, (trim, next_deliver), held); // old or already delivered data
        }
        let seq = seq.max(trim);
        if seq <= next_deliver {
            self.set_next_deliver(upper, r);
            if held {
                self.absorb_ranges(r.parts, r.slot, r.side);
                return (true, self.bounds(r), self.has_ranges(r.by_ref()));
            }
            return (true, (trim, upper), false);
        }
        (Self::insert_above_hole(seq, upper, r.parts, r.slot, r.side), (trim, next_deliver), true)
    }

    #[inline(never)]
    fn insert_above_hole(seq: u64, upper: u64, parts: &mut ColdParts, slot: &mut u32, side: u32) -> bool {
        let ranges = &mut parts.get_mut(slot, side).above_hole;
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
    fn absorb(&mut self, r: &mut Rare<'_>) {
        if self.has_ranges(r.by_ref()) {
            self.absorb_ranges(r.parts, r.slot, r.side);
        }
    }

    #[cold]
    fn absorb_ranges(&mut self, parts: &mut ColdParts, slot: &mut u32, side: u32) {
        let r = &mut Rare { parts, slot, side };
        let mut next_deliver = self.next_deliver(r.by_ref());
        if r.exists() {
            let ranges = &mut r.get_mut().above_hole;
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
        self.set_next_deliver(next_deliver, r);
        self.drop_ranges_if_empty(r);
    }

    /// Releases data below `seq`, first reporting (through `gap`) any part of
    /// it that was never received. Mirrors DataBlockList::Trim +
    /// TCP_Reassembler::Undelivered.
    /// With `skip` (the endpoint's `skip_deliveries`), nothing held is delivered
    /// and no gap is reported.
    fn trim_to(&mut self, seq: u64, is_partial: bool, skip: bool, r: &mut Rare<'_>, mut gap: impl FnMut(u64)) {
        if seq > self.next_deliver(r.by_ref()) {
            self.undelivered(seq, is_partial, skip, r, &mut gap);
        }
        if r.exists() {
            r.get_mut().above_hole.retain(|r| r.1 > seq);
        }
        self.drop_ranges_if_empty(r);
        if seq > self.trim(r.by_ref()) {
            self.set_trim(seq, r);
        }
    }

    fn undelivered(&mut self, up_to: u64, is_partial: bool, skip: bool, r: &mut Rare<'_>, gap: &mut impl FnMut(u64)) {
        if up_to <= 2 && is_partial {
            // A partial connection's faked initial sequence number: the "missing"
            // first byte is an artefact, not a gap (Zeek ignores it the same way).
            return;
        }
        if !skip {
            // Deliver blocks that start below up_to, reporting the holes before them.
            while let Some(&(lo, _)) = r.get().above_hole.first() {
                if lo >= up_to {
                    break;
                }
                let next_deliver = self.next_deliver(r.by_ref());
                if lo > next_deliver {
                    gap(lo - next_deliver);
                }
                self.set_next_deliver(next_deliver.max(lo), r);
                self.absorb(r);
            }
            let next_deliver = self.next_deliver(r.by_ref());
            if up_to > next_deliver {
                gap(up_to - next_deliver);
            }
        }
        if up_to > self.next_deliver(r.by_ref()) {
            self.set_next_deliver(up_to, r);
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

/// One side of a TCP connection (Zeek's TCP_Endpoint), 24 bytes; its
/// cold part is its connection's ([`TcpConn`]'s `cold`, [`Rare`]).
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
    /// Delivery bounds.
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

/// A connection's `cold` before its first cold write.
const NO_COLD: u32 = u32::MAX;

/// The cold parts of the TCP connections that have one: a connection's two
/// endpoints' in one slot (originator first), taken at the first non-zero
/// write to either and freed with the connection
/// ([`ColdParts::free`]). A connection holds the slot's 4-byte index where
/// its endpoints held a pointer each (8 bytes), so [`TcpConn`] is 52 bytes.
pub struct ColdParts(crate::slab::Slab<[EndpointRare; 2]>);

impl ColdParts {
    /// Room for `capacity` connections' slots (address space only, in
    /// small pages: most connections never take one).
    pub fn with_capacity(capacity: usize) -> Self {
        ColdParts(crate::slab::Slab::with_capacity_small_pages(capacity))
    }

    /// Side `side`'s cold part in slot `slot` (all zero without one).
    #[inline]
    fn get(&self, slot: u32, side: u32) -> &EndpointRare {
        match self.0.get(slot) {
            Some(pair) => &pair[side as usize & 1],
            None => &NO_RARE,
        }
    }

    /// The same to write: a connection without a slot gets one now.
    #[inline]
    fn get_mut(&mut self, slot: &mut u32, side: u32) -> &mut EndpointRare {
        if self.0.get(*slot).is_none() {
            *slot = self.take_slot();
        }
        match self.0.get_mut(*slot) {
            Some(pair) => &mut pair[side as usize & 1],
            None => unreachable!("a slot was taken above"),
        }
    }

    #[cold]
    #[inline(never)]
    fn take_slot(&mut self) -> u32 {
        self.0.insert(Default::default())
    }

    /// The connection ended: its slot, if any, is free again.
    pub fn free(&mut self, slot: u32) {
        if slot != NO_COLD {
            self.0.remove(slot);
        }
    }

    /// Slots held (connections with a cold part).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

/// An endpoint's way to its cold part, to read: the cold parts, its
/// connection's slot and its side (0: the originator's place).
#[derive(Clone, Copy)]
struct RareRef<'a> {
    parts: &'a ColdParts,
    slot: u32,
    side: u32,
}

impl<'a> RareRef<'a> {
    #[inline]
    fn get(self) -> &'a EndpointRare {
        self.parts.get(self.slot, self.side)
    }

    /// The connection has a cold part (an endpoint without its own reads zeros).
    #[inline(always)]
    fn exists(self) -> bool {
        self.slot != NO_COLD
    }
}

/// The same, to write: a first write takes the connection a slot.
struct Rare<'a> {
    parts: &'a mut ColdParts,
    slot: &'a mut u32,
    side: u32,
}

impl Rare<'_> {
    #[inline(always)]
    fn by_ref(&self) -> RareRef<'_> {
        RareRef { parts: self.parts, slot: *self.slot, side: self.side }
    }

    #[inline]
    fn get(&self) -> &EndpointRare {
        self.parts.get(*self.slot, self.side)
    }

    #[inline]
    fn get_mut(&mut self) -> &mut EndpointRare {
        self.parts.get_mut(self.slot, self.side)
    }

    #[inline(always)]
    fn exists(&self) -> bool {
        *self.slot != NO_COLD
    }

    /// The peer endpoint's cold part (the other side of the same slot).
    #[inline(always)]
    fn peer(&mut self) -> Rare<'_> {
        Rare { parts: self.parts, slot: self.slot, side: 1 - self.side }
    }
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
    fn seq_wraps(&self, r: RareRef<'_>) -> u32 {
        if self.bits & WRAPPED == 0 {
            0
        } else {
            r.get().seq_wraps
        }
    }

    #[inline(always)]
    fn ack_wraps(&self, r: RareRef<'_>) -> u32 {
        if self.bits & WRAPPED == 0 {
            0
        } else {
            r.get().ack_wraps
        }
    }

    /// Stores a SYN/FIN/RST position; a zero into an absent cold part (the
    /// first SYN of every connection) takes no slot.
    #[inline]
    fn set_position(r: &mut Rare<'_>, field: fn(&mut EndpointRare) -> &mut u32, at: u32) {
        if at != 0 || r.exists() {
            *field(r.get_mut()) = at;
        }
    }

    /// Adds one to a counter of the cold part and returns it.
    #[inline]
    fn bump(r: &mut Rare<'_>, field: fn(&mut EndpointRare) -> &mut u32) -> u32 {
        let c = field(r.get_mut());
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
    fn update_last_seq(&mut self, seq: u32, r: &mut Rare<'_>) {
        if seq < self.last_seq {
            self.wrap(true, r.parts, r.slot, r.side);
        }
        self.last_seq = seq;
    }

    #[inline(always)]
    fn update_ack_seq(&mut self, seq: u32, r: &mut Rare<'_>) {
        if seq < self.ack_seq {
            self.wrap(false, r.parts, r.slot, r.side);
        }
        self.ack_seq = seq;
    }

    /// The sequence numbers (or the acknowledgements) wrapped past 2^32.
    #[cold]
    #[inline(never)]
    fn wrap(&mut self, seq: bool, parts: &mut ColdParts, slot: &mut u32, side: u32) {
        let r = parts.get_mut(slot, side);
        if seq {
            r.seq_wraps += 1;
        } else {
            r.ack_wraps += 1;
        }
        self.bits |= WRAPPED;
    }

    fn no_data_acked(&self, r: RareRef<'_>) -> bool {
        let ack = Self::full(self.ack_seq, self.ack_wraps(r));
        let start = self.start_seq as u64;
        ack == start || ack == start + 1
    }

    /// Payload bytes sent, from sequence numbers (Zeek's TCP_Endpoint::Size).
    fn size(&self, peer_state: EndpointState, r: RareRef<'_>) -> u64 {
        if self.prev_state() == SynSent
            && self.state() == Reset
            && peer_state == Inactive
            && !self.no_data_acked(r)
        {
            return 0;
        }
        let last = Self::full(self.last_seq, self.seq_wraps(r));
        let ack = Self::full(self.ack_seq, self.ack_wraps(r));
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

/// The TCP part of a connection: the two endpoints and their cold slot, 52
/// bytes in all. The connection's own flags (`C_*`: activity, partial
/// status, first packets seen, deferred close, the handshake passed, the
/// gap-reporting option, and the packet's effects `FX_*` above them) are
/// kept in the originator endpoint's `conn_bits`, where its layout has
/// room; [`TcpConn::flip`] leaves them there.
#[derive(Debug, Clone, PartialEq)]
pub struct TcpConn {
    pub orig: Endpoint,
    pub resp: Endpoint,
    /// Both endpoints' cold parts: their slot in the tracker's
    /// [`ColdParts`], [`NO_COLD`] until the first write to either.
    cold: u32,
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

/// What [`TcpConn::ack_in_order`] did with an acknowledgement.
enum AckIn {
    /// Nothing new was acknowledged.
    Old,
    /// Delivered data was acknowledged and trimmed.
    Trimmed,
    /// The acknowledgement may reveal a gap: [`TcpConn::ack_beyond_delivered`] at this sequence.
    Beyond(u64),
}

impl TcpConn {
    pub fn new(report_gaps_for_partial: bool) -> Self {
        let mut orig = Endpoint::new();
        orig.conn_bits = C_ACTIVE | if report_gaps_for_partial { C_REPORT_GAPS_FOR_PARTIAL } else { 0 };
        TcpConn { orig, resp: Endpoint::new(), cold: NO_COLD }
    }

    /// The connection's slot in the cold parts ([`ColdParts::free`] it when
    /// the connection ends).
    pub fn cold_slot(&self) -> u32 {
        self.cold
    }

    /// Side `is_orig`'s place in the cold slot (0: the originator's).
    #[inline(always)]
    fn side(is_orig: bool) -> u32 {
        !is_orig as u32
    }

    /// Side `is_orig`'s endpoint, its peer, and the endpoint's cold part.
    #[inline(always)]
    fn ep_rare<'a>(
        &'a mut self,
        is_orig: bool,
        parts: &'a mut ColdParts,
    ) -> (&'a mut Endpoint, &'a mut Endpoint, Rare<'a>) {
        let TcpConn { orig, resp, cold } = self;
        let (e, p) = if is_orig { (orig, resp) } else { (resp, orig) };
        (e, p, Rare { parts, slot: cold, side: Self::side(is_orig) })
    }

    /// Side `is_orig`'s cold part, to read.
    #[inline(always)]
    fn rare<'a>(&self, is_orig: bool, parts: &'a ColdParts) -> RareRef<'a> {
        RareRef { parts, slot: self.cold, side: Self::side(is_orig) }
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
    pub fn missed_bytes(&self, parts: &ColdParts) -> u64 {
        parts.get(self.cold, 0).missed_bytes + parts.get(self.cold, 1).missed_bytes
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
    pub fn flip(&mut self, parts: &mut ColdParts) {
        std::mem::swap(&mut self.orig, &mut self.resp);
        if let Some(pair) = parts.0.get_mut(self.cold) {
            pair.swap(0, 1);
        }
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
    pub fn checksum_error(&mut self, is_orig: bool, hist: &mut HistoryState, parts: &mut ColdParts) {
        let (_, _, mut r) = self.ep_rare(is_orig, parts);
        let n = Endpoint::bump(&mut r, |r| &mut r.chk_cnt);
        hist.scaled(is_orig, b'C', n);
    }

    /// Processes one good segment (Zeek's TCPSessionAdapter::Process).
    /// Returns whether the connection's last activity time advances, and the lifetime effects.
    /// The tracker calls its two halves itself ([`Self::process_if_established`],
    /// then [`Self::process_general`]), so that its common case tests no effect.
    #[cfg(test)]
    pub fn process(
        &mut self,
        is_orig: bool,
        seg: &Segment,
        hist: &mut HistoryState,
        parts: &mut ColdParts,
    ) -> (bool, Effects) {
        if self.process_if_established(is_orig, seg, hist, parts) {
            return (true, Effects::default());
        }
        self.process_general(is_orig, seg, hist, parts)
    }

    /// [`Self::process`]'s common case, if the segment is one: true when it
    /// was processed (the last activity time advances, no lifetime effect,
    /// and the connection cannot be left with a lone SYN: both sides were
    /// seen); false, nothing done, for [`Self::process_general`]. Apart so
    /// that the tracker tests none of the effects on this path.
    #[inline(always)]
    pub fn process_if_established(
        &mut self,
        is_orig: bool,
        seg: &Segment,
        hist: &mut HistoryState,
        parts: &mut ColdParts,
    ) -> bool {
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
            // Most established connections never take a cold slot: their
            // path reads none (no data held above a hole, nothing wide).
            if self.cold == NO_COLD {
                self.process_established::<false>(is_orig, seg, hist, parts);
            } else {
                self.process_established_cold(is_orig, seg, hist, parts);
            }
            return true;
        }
        false
    }

    /// [`Self::process_established`] for a connection with a cold slot,
    /// whose endpoints may hold data above a hole.
    #[inline(never)]
    fn process_established_cold(
        &mut self,
        is_orig: bool,
        seg: &Segment,
        hist: &mut HistoryState,
        parts: &mut ColdParts,
    ) {
        self.process_established::<true>(is_orig, seg, hist, parts)
    }

    /// The common case: a segment without SYN, FIN or RST on a connection whose
    /// two sides are established and open. It performs the same steps as
    /// [`Self::process_general`], minus those whose conditions cannot hold in
    /// that state (endpoint initialisation, partial-status and state-machine
    /// changes, FIN/RST bookkeeping, end-of-data checks). Neither endpoint's
    /// sequence numbers or acknowledgements have wrapped (`WRAPPED`, tested
    /// by [`Self::process`] with the other flags): the wrap counts are 0
    /// without reading them. `COLD`: the connection had a cold slot when
    /// the packet came; without one, neither endpoint holds data above a
    /// hole before this packet's own data, and no cold part is read.
    #[inline(always)]
    fn process_established<const COLD: bool>(
        &mut self,
        is_orig: bool,
        seg: &Segment,
        hist: &mut HistoryState,
        parts: &mut ColdParts,
    ) {
        let len = seg.len;
        let ack = seg.flags & ACK != 0;
        let (e, p, mut r) = self.ep_rare(is_orig, parts);
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
            let n = Endpoint::bump(&mut r, |r| &mut r.win0_cnt);
            hist.scaled(is_orig, b'W', n);
        }
        let mut rel_ack = 0;
        if ack {
            let (rel, underflow) =
                relative_seq(p.start_seq, seg.ack, p.ack_seq, 0, |s, w| {
                    p.to_relative(s, w)
                });
            if !underflow {
                rel_ack = rel;
                let delta = seq_delta(seg.ack, p.ack_seq);
                if !(seg.ack == 0 && delta > TOO_LARGE_SEQ_DELTA) && delta > 0 {
                    p.update_ack_seq(seg.ack, &mut r.peer());
                }
            }
        }
        if seq_delta(seq_one_past, e.last_seq) > 0 {
            e.update_last_seq(seq_one_past, &mut r);
        } else if len > 0 {
            let n = Endpoint::bump(&mut r, |r| &mut r.rxmt_cnt);
            hist.scaled(is_orig, b'T', n);
        }
        // The acknowledgement and the data go to the endpoints chosen above
        // (`p`, then `e`), not chosen again by side: the established path
        // ends without `ack_received` or `data_sent` (BENCHMARKS.md, branch pkt52).
        // The peer is established without a FIN, so that `check_eof` has
        // nothing to do after an in-order acknowledgement.
        let acked = if ack { Self::ack_in_order::<COLD>(p, &mut r.peer(), rel_ack) } else { AckIn::Old };
        let data = len > 0 && !seq_underflow && seg.payload_complete;
        if let AckIn::Beyond(seq) = acked {
            // Rare: the acknowledgement may reveal a gap (the whole connection's accounting).
            self.ack_beyond_delivered(!is_orig, seq, hist, parts);
            if data {
                self.data_sent::<COLD>(is_orig, rel_seq, len as u64, 0, parts);
            }
            return;
        }
        if data {
            Self::data_sent_to(e, p, &mut r, rel_seq, len as u64, 0, COLD);
        }
    }

    #[inline(never)]
    pub fn process_general(
        &mut self,
        is_orig: bool,
        seg: &Segment,
        hist: &mut HistoryState,
        parts: &mut ColdParts,
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
            let (e, r) = (if is_orig { &self.orig } else { &self.resp }, self.rare(is_orig, parts));
            relative_seq(e.start_seq, seg.seq, e.last_seq, e.seq_wraps(r), |s, w| {
                e.to_relative(s, w)
            })
        };

        update_history(flags, is_orig, &mut self.ep_rare(is_orig, parts).2, hist, rel_seq, len);

        // update_window: only zero windows reach the logs (history 'W').
        {
            let (e, p, mut r) = self.ep_rare(is_orig, parts);
            if seg.window == 0 && !rst && p.state() != Closed && e.state() != Reset {
                let n = Endpoint::bump(&mut r, |r| &mut r.win0_cnt);
                hist.scaled(is_orig, b'W', n);
            }
        }

        let update_last_time = !self.orig.did_close() || !self.resp.did_close();

        if fin {
            let (e, _, mut r) = self.ep_rare(is_orig, parts);
            e.set_flag(FIN_SEEN);
            r.get_mut().fin_seq = rel_seq.wrapping_add(seg_len as u64);
        }

        let mut rel_ack: u64 = 0;
        if ack {
            let (_, p, mut r) = self.ep_rare(is_orig, parts);
            let mut r = r.peer();
            if p.state() == Inactive {
                rel_ack = 1;
                p.start_seq = seg.ack.wrapping_sub(1);
                p.ack_seq = seg.ack.wrapping_sub(1);
                p.last_seq = seg.ack.wrapping_sub(1);
            } else {
                let (rel, underflow) =
                    relative_seq(p.start_seq, seg.ack, p.ack_seq, p.ack_wraps(r.by_ref()), |s, w| {
                        p.to_relative(s, w)
                    });
                if underflow {
                    rel_ack = 0;
                } else {
                    rel_ack = rel;
                    if !rst {
                        // update_ack_seq
                        let delta = seq_delta(seg.ack, p.ack_seq);
                        if seg.ack == 0 && delta > TOO_LARGE_SEQ_DELTA {
                        } else if delta > 0 {
                            p.update_ack_seq(seg.ack, &mut r);
                        }
                    }
                }
            }
        }

        // update_last_seq
        let delta_last = {
            let (e, _, mut r) = self.ep_rare(is_orig, parts);
            let delta_last = seq_delta(seq_one_past, e.last_seq);
            if (syn || rst) && !(-TOO_LARGE_SEQ_DELTA..=TOO_LARGE_SEQ_DELTA).contains(&delta_last) {
            } else if fin && e.last_seq == e.start_seq.wrapping_add(1) {
                e.update_last_seq(seq_one_past, &mut r);
            } else if e.state() == Reset {
            } else if delta_last > 0 {
                e.update_last_seq(seq_one_past, &mut r);
            } else if len > 0 {
                let n = Endpoint::bump(&mut r, |r| &mut r.rxmt_cnt);
                hist.scaled(is_orig, b'T', n);
            }
            delta_last
        };

        let (do_close, gen_event) = self.update_state_machine(is_orig, seg, delta_last);

        if ack {
            self.ack_received(!is_orig, rel_ack, hist, parts);
        }

        // CheckPIA_FirstPacket
        self.see_first_packet(is_orig);

        let rel_data_seq = if syn {
            rel_seq.wrapping_add(1)
        } else {
            rel_seq
        };
        if len > 0 && !rst && !seq_underflow && seg.payload_complete {
            let e = if is_orig { &self.orig } else { &self.resp };
            let ack_wraps = e.ack_wraps(self.rare(is_orig, parts));
            self.data_sent::<true>(is_orig, rel_data_seq, len as u64, ack_wraps, parts);
        }
        self.check_eof(is_orig, parts);

        if do_close {
            self.connection_closed(is_orig, gen_event, parts);
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
    /// `COLD`: the connection may have a cold part (false: it had none when
    /// the packet came, so nothing is held above a hole).
    #[inline(always)]
    fn data_sent<const COLD: bool>(
        &mut self,
        is_orig: bool,
        seq: u64,
        len: u64,
        ack_wraps: u32,
        parts: &mut ColdParts,
    ) {
        let (e, p, mut r) = self.ep_rare(is_orig, parts);
        Self::data_sent_to(e, p, &mut r, seq, len, ack_wraps, COLD);
    }

    /// [`Self::data_sent`] on an endpoint already chosen: `e` the sender,
    /// `p` its peer, `r` the sender's cold part; `cold` as `COLD` there.
    #[inline(always)]
    fn data_sent_to(
        e: &mut Endpoint,
        p: &Endpoint,
        r: &mut Rare<'_>,
        mut seq: u64,
        mut len: u64,
        ack_wraps: u32,
        cold: bool,
    ) {
        if e.skip_deliveries() {
            return;
        }
        debug_assert_eq!(ack_wraps, e.ack_wraps(r.by_ref()));
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
        let held = cold && e.reasm.has_ranges(r.by_ref());
        let (delivered, (mut trim, next_deliver), held) =
            e.reasm.insert_at(seq, upper, e.reasm.bounds(r), held, r);
        // BlockInserted's trimming when the peer seems not to acknowledge anything.
        let peer_state = p.state();
        // (The trim below moves no acknowledgement: one test serves both
        // uses. Endpoint::no_data_acked: the acknowledgement is the
        // initial sequence number or the one after, relative 0 or 1.)
        let no_data_acked = ack <= 1;
        if delivered && no_data_acked && e.size(peer_state, r.by_ref()) > MAX_INITIAL_WINDOW {
            // Release delivered data (Zeek's TrimToSeq(last_reassem_seq)).
            e.reasm.set_trim(next_deliver, r);
            trim = next_deliver;
        }
        // Without data above a hole nothing is undelivered, and what is
        // buffered is the delivered range alone.
        let too_much = if held {
            (no_data_acked && e.reasm.undelivered_bytes(r.by_ref()) > MAX_ABOVE_HOLE_WITHOUT_ACKS)
                || e.reasm.buffered(r.by_ref()) > EXCESSIVE_DATA_WITHOUT_ACKS
        } else {
            next_deliver.saturating_sub(trim) > EXCESSIVE_DATA_WITHOUT_ACKS
        };
        if too_much {
            e.reasm.clear(r);
            e.set_flag(SKIP_DELIVERIES);
        }
    }

    /// `endp_is_orig`'s data was acknowledged up to relative `seq` (Zeek's AckReceived).
    /// Inline for its common outcomes (nothing new acknowledged, or data that
    /// was all delivered in order), which need none of the gap accounting.
    #[inline(always)]
    fn ack_received(&mut self, endp_is_orig: bool, seq: u64, hist: &mut HistoryState, parts: &mut ColdParts) {
        let (e, _, mut r) = self.ep_rare(endp_is_orig, parts);
        match Self::ack_in_order::<true>(e, &mut r, seq) {
            AckIn::Old => {}
            AckIn::Trimmed => self.check_eof(endp_is_orig, parts),
            AckIn::Beyond(seq) => self.ack_beyond_delivered(endp_is_orig, seq, hist, parts),
        }
    }

    /// What an acknowledgement up to relative `seq` does on the acknowledged
    /// endpoint `e` (`r` its cold part) when it needs no gap accounting:
    /// nothing new acknowledged, or data all delivered in order (trimmed
    /// here); else the (possibly lowered) `seq` for
    /// [`Self::ack_beyond_delivered`]. `COLD`: the connection may have a
    /// cold part (false: it had none when the packet came, so the endpoint
    /// holds nothing above a hole and saw no FIN).
    #[inline(always)]
    fn ack_in_order<const COLD: bool>(e: &mut Endpoint, r: &mut Rare<'_>, mut seq: u64) -> AckIn {
        if COLD && e.fin_seen() && seq >= r.get().fin_seq {
            seq = r.get().fin_seq.wrapping_sub(1);
        }
        let (trim, next_deliver) = e.reasm.bounds(r);
        if seq <= trim {
            return AckIn::Old;
        }
        // Acknowledged up to delivered data with nothing held above a hole:
        // trim_to would find no gap and keep no range, only move the trim.
        if seq <= next_deliver && !(COLD && e.reasm.has_ranges(r.by_ref())) {
            e.reasm.set_trim(seq, r);
            return AckIn::Trimmed;
        }
        AckIn::Beyond(seq)
    }

    /// [`Self::ack_received`] when the acknowledgement may reveal a gap.
    #[inline(never)]
    fn ack_beyond_delivered(&mut self, endp_is_orig: bool, seq: u64, hist: &mut HistoryState, parts: &mut ColdParts) {
        let report = self.report_gap();
        let clean = self.orig.is_clean() && self.resp.is_clean();
        let is_partial = self.is_partial();
        let mut missed = 0u64;
        {
            let (e, _, mut r) = self.ep_rare(endp_is_orig, parts);
            let mut gaps = 0u32;
            let skip = e.skip_deliveries();
            e.reasm.trim_to(seq, is_partial, skip, &mut r, |n| {
                if clean {
                    gaps += 1;
                }
                if report {
                    missed += n;
                }
            });
            for _ in 0..gaps {
                let n = Endpoint::bump(&mut r, |r| &mut r.gap_cnt);
                hist.scaled(endp_is_orig, b'G', n);
            }
            if missed != 0 {
                r.get_mut().missed_bytes += missed;
            }
        }
        self.check_eof(endp_is_orig, parts);
    }

    /// Zeek's TCP_Reassembler::DataPending for `is_orig`'s side.
    fn data_pending(&self, is_orig: bool, parts: &ColdParts) -> bool {
        let (e, p) = if is_orig {
            (&self.orig, &self.resp)
        } else {
            (&self.resp, &self.orig)
        };
        if e.skip_deliveries() {
            return false;
        }
        let r = self.rare(is_orig, parts);
        let delivered = (e.start_seq as u64).wrapping_add(e.reasm.next_deliver(r));
        let last = Endpoint::full(e.last_seq, e.seq_wraps(r));
        if last < delivered {
            return false;
        }
        if delivered != last.wrapping_sub(1) && delivered != last {
            return true;
        }
        e.state() != Reset && p.reasm.has_blocks(self.rare(!is_orig, parts))
    }

    #[inline]
    fn check_eof(&mut self, is_orig: bool, parts: &mut ColdParts) {
        let e = if is_orig { &self.orig } else { &self.resp };
        // Cheap tests first, inline: data_pending only matters once this side is closing.
        if e.did_eof() || !(e.fin_seen() || e.state() == Closed || e.state() == Reset) {
            return;
        }
        self.check_eof_closing(is_orig, parts);
    }

    #[inline(never)]
    fn check_eof_closing(&mut self, is_orig: bool, parts: &mut ColdParts) {
        if self.data_pending(is_orig, parts) {
            return;
        }
        {
            let (e, _) = self.ep(is_orig);
            e.set_flag(DID_EOF);
            if self.flag(C_CLOSE_DEFERRED) {
                let gen = self.flag(C_DEFERRED_GEN_EVENT);
                self.set(C_CLOSE_DEFERRED, false);
                self.connection_closed(is_orig, gen, parts);
            }
        }
    }

    fn connection_closed(&mut self, is_orig: bool, gen_event: bool, parts: &ColdParts) {
        if self.data_pending(is_orig, parts) {
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
    pub fn conn_state(&self, history: &str, parts: &ColdParts) -> ConnState {
        let os = self.orig.state();
        let rs = self.resp.state();
        let o_inactive = matches!(os, Inactive | Partial);
        let r_inactive = matches!(rs, Inactive | Partial);
        if rs == Reset {
            if matches!(os, SynSent | SynAckSent)
                || (os == Reset && self.orig_size(parts) == 0 && self.resp_size(parts) == 0)
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

    pub fn orig_size(&self, parts: &ColdParts) -> u64 {
        self.orig.size(self.resp.state(), self.rare(true, parts))
    }

    pub fn resp_size(&self, parts: &ColdParts) -> u64 {
        self.resp.size(self.orig.state(), self.rare(false, parts))
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
    r: &mut Rare<'_>,
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
            if hist.check(is_orig, SYN_PKT, code) && rel_seq as u32 != r.get().hist_last_syn {
                hist.add(is_orig, code);
            }
            Endpoint::set_position(r, |r| &mut r.hist_last_syn, rel_seq as u32);
        }
        if fin {
            let at = rel_seq.wrapping_add(len as u64) as u32;
            if hist.check(is_orig, FIN_PKT, b'F') && at != r.get().hist_last_fin {
                hist.add(is_orig, b'F');
            }
            Endpoint::set_position(r, |r| &mut r.hist_last_fin, at);
        }
        if rst {
            if hist.check(is_orig, RST_PKT, b'R') && rel_seq as u32 != r.get().hist_last_rst {
                hist.add(is_orig, b'R');
            }
            Endpoint::set_position(r, |r| &mut r.hist_last_rst, rel_seq as u32);
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

    /// A cold slot for the tests of a [`Reassembly`] alone (the originator's side).
    struct Cold {
        parts: ColdParts,
        slot: u32,
    }

    impl Cold {
        fn new() -> Self {
            Cold { parts: ColdParts::with_capacity(0), slot: NO_COLD }
        }

        fn r(&mut self) -> Rare<'_> {
            Rare { parts: &mut self.parts, slot: &mut self.slot, side: 0 }
        }

        fn rr(&self) -> RareRef<'_> {
            RareRef { parts: &self.parts, slot: self.slot, side: 0 }
        }
    }

    #[test]
    fn reassembly_gaps_are_reported_once_acked() {
        let (mut r, mut c) = (Reassembly::new(), Cold::new());
        assert!(r.insert(1, 101, &mut c.r())); // in order
        assert!(!r.insert(201, 301, &mut c.r())); // above a hole
        assert!(!r.insert(50, 101, &mut c.r())); // retransmission
        assert_eq!(r.undelivered_bytes(c.rr()), 200);
        let mut gaps = Vec::new();
        r.trim_to(401, false, false, &mut c.r(), |n| gaps.push(n));
        assert_eq!(gaps, vec![100, 100]); // [101,201) and [301,401)
        assert_eq!(r.next_deliver(c.rr()), 401);
        assert!(!r.has_blocks(c.rr()));
        // Filling the hole before the ack: no gap.
        let (mut r, mut c) = (Reassembly::new(), Cold::new());
        r.insert(101, 201, &mut c.r());
        r.insert(1, 101, &mut c.r());
        assert_eq!(r.next_deliver(c.rr()), 201);
        let mut gaps = Vec::new();
        r.trim_to(201, false, false, &mut c.r(), |n| gaps.push(n));
        assert!(gaps.is_empty());
        assert_eq!(r.buffered(c.rr()), 0);
    }

    fn seg(flags: u8, seq: u32, ack: u32, len: u32) -> Segment {
        Segment { flags, seq, ack, window: 512, len, payload_complete: true }
    }

    /// The TCP state is 52 bytes, and stays 52 in the slab (the endpoint
    /// state's unused values give `Option<TcpConn>` its niche).
    #[test]
    fn tcp_state_is_fifty_two_bytes() {
        assert_eq!(std::mem::size_of::<Endpoint>(), 24);
        assert_eq!(std::mem::size_of::<TcpConn>(), 52);
        assert_eq!(std::mem::size_of::<Option<TcpConn>>(), 52);
    }

    /// The reassembly's 32-bit bounds pass 2^32 - 1 into the cold part
    /// and read back whole, in both directions of the escape.
    #[test]
    fn reassembly_bounds_past_32_bits() {
        let (mut r, mut c) = (Reassembly::new(), Cold::new());
        let base = (1u64 << 32) - 100;
        r.set_next_deliver(base, &mut c.r());
        r.set_trim(base, &mut c.r());
        assert!(!c.r().exists(), "below 2^32 - 1: inline");
        assert!(r.insert(base, base + 200, &mut c.r())); // crosses the boundary in order
        assert_eq!((r.next_deliver, r.next_deliver(c.rr())), (WIDE, base + 200));
        assert!(!r.insert(base + 300, base + 400, &mut c.r())); // above a hole, past 4 GiB
        let mut gaps = Vec::new();
        r.trim_to(base + 500, false, false, &mut c.r(), |n| gaps.push(n));
        assert_eq!(gaps, vec![100, 100]);
        assert_eq!((r.trim, r.trim(c.rr()), r.next_deliver(c.rr())), (WIDE, base + 500, base + 500));
        assert!(!r.has_blocks(c.rr()));
        // Exactly 2^32 - 1 is the escape's marker: kept wide too.
        r.set_trim(WIDE as u64, &mut c.r());
        assert_eq!((r.trim, r.trim(c.rr())), (WIDE, WIDE as u64));
        // A bound written back below the marker is inline again.
        r.set_next_deliver(7, &mut c.r());
        assert_eq!((r.next_deliver, r.next_deliver(c.rr())), (7, 7));
    }

    /// One connection through the whole of `process`: a handshake, then
    /// `bytes[0]` bytes from the originator, each segment acknowledged, and
    /// `bytes[1]` from the responder likewise; the segment at `gap_at` of
    /// each direction is never seen (its acknowledgement is), then FINs.
    /// Returns the connection and its history.
    fn long_stream(bytes: [u64; 2], gap_at: [u64; 2]) -> (TcpConn, HistoryState, ColdParts) {
        const L: u64 = 65_000;
        let isn = [0xF000_0000u32, 0x8000_0000u32]; // the originator's wraps after 256 MiB
        let (mut t, mut h, mut c) = (TcpConn::new(false), HistoryState::default(), ColdParts::with_capacity(0));
        t.process(true, &seg(SYN, isn[0], 0, 0), &mut h, &mut c);
        t.process(false, &seg(SYN | ACK, isn[1], isn[0].wrapping_add(1), 0), &mut h, &mut c);
        t.process(true, &seg(ACK, isn[0].wrapping_add(1), isn[1].wrapping_add(1), 0), &mut h, &mut c);
        let mut next = [isn[0].wrapping_add(1), isn[1].wrapping_add(1)];
        for side in 0..2 {
            let is_orig = side == 0;
            let mut sent = 0u64;
            while sent < bytes[side] {
                let len = L.min(bytes[side] - sent);
                let end = next[side].wrapping_add(len as u32);
                if sent != gap_at[side] {
                    t.process(is_orig, &seg(PSH | ACK, next[side], next[1 - side], len as u32), &mut h, &mut c);
                }
                // The peer acknowledges each segment (the missed one too:
                // only the capture lost it).
                t.process(!is_orig, &seg(ACK, next[1 - side], end, 0), &mut h, &mut c);
                next[side] = end;
                sent += len;
            }
        }
        t.process(true, &seg(FIN | ACK, next[0], next[1], 0), &mut h, &mut c);
        t.process(false, &seg(FIN | ACK, next[1], next[0].wrapping_add(1), 0), &mut h, &mut c);
        t.process(true, &seg(ACK, next[0].wrapping_add(1), next[1].wrapping_add(1), 0), &mut h, &mut c);
        (t, h, c)
    }

    /// A stream past 4 GiB in each direction, with a gap past 4 GiB in
    /// each, ends as the same exchange of a few MB does: the same history,
    /// state and missed bytes, and sizes that are the bytes sent; the
    /// reassembly's bounds went through the cold part ([`WIDE`]) on the way.
    #[test]
    fn streams_past_4_gib_each_way() {
        const L: u64 = 65_000;
        let small = [100 * L + 17, 80 * L + 5];
        let (t0, h0, c0) = long_stream(small, [50 * L, 40 * L]);
        let big = [(5u64 << 30) + 17, (9u64 << 29) + 5]; // 5 GiB and 4.5 GiB
        let gaps = [(4u64 << 30) / L * L + 10 * L, (4u64 << 30) / L * L + 20 * L];
        let (t1, h1, c1) = long_stream(big, gaps);
        assert_eq!(h1.letters().as_str(), h0.letters().as_str());
        assert_eq!(t1.conn_state(h1.letters().as_str(), &c1), t0.conn_state(h0.letters().as_str(), &c0));
        assert_eq!(t0.conn_state(h0.letters().as_str(), &c0), ConnState::SF);
        assert_eq!((t0.orig_size(&c0), t0.resp_size(&c0)), (small[0], small[1]));
        assert_eq!((t1.orig_size(&c1), t1.resp_size(&c1)), (big[0], big[1]));
        assert_eq!(t0.missed_bytes(&c0), 2 * L);
        assert_eq!(t1.missed_bytes(&c1), 2 * L);
        assert_eq!((t1.orig.seq_wraps(t1.rare(true, &c1)), t1.resp.seq_wraps(t1.rare(false, &c1))), (2, 1));
        for (e, r, n) in [(&t1.orig, t1.rare(true, &c1), big[0]), (&t1.resp, t1.rare(false, &c1), big[1])] {
            // Delivered and acknowledged to the FIN: both bounds past 4 GiB.
            assert_eq!((e.reasm.next_deliver, e.reasm.trim), (WIDE, WIDE));
            assert_eq!((e.reasm.next_deliver(r), e.reasm.trim(r)), (n + 1, n + 1));
        }
        for e in [&t0.orig, &t0.resp] {
            assert_ne!(e.reasm.next_deliver, WIDE);
        }
    }

    /// The cold part of a connection is made only by what needs it: a SYN
    /// (scan), a handshake and in-order data leave it without a slot; a
    /// retransmitted SYN, a FIN or a retransmission take one (the peer's
    /// half stays zero), and the history letters are those the counters
    /// and positions drive. The slot is free again once freed.
    #[test]
    fn cold_part_only_on_first_use() {
        let (mut t, mut h, mut c) = (TcpConn::new(false), HistoryState::default(), ColdParts::with_capacity(0));
        t.process(true, &seg(SYN, 100, 0, 0), &mut h, &mut c);
        assert_eq!((t.cold_slot(), c.len()), (NO_COLD, 0));
        t.process(true, &seg(SYN, 100, 0, 0), &mut h, &mut c); // same position: no new letter
        t.process(false, &seg(SYN | ACK, 5000, 101, 0), &mut h, &mut c);
        t.process(true, &seg(ACK, 101, 5001, 0), &mut h, &mut c);
        t.process(true, &seg(PSH | ACK, 101, 5001, 50), &mut h, &mut c);
        t.process(false, &seg(ACK, 5001, 151, 0), &mut h, &mut c);
        assert_eq!((t.cold_slot(), c.len()), (NO_COLD, 0));
        t.process(true, &seg(PSH | ACK, 101, 5001, 50), &mut h, &mut c); // retransmission
        assert_eq!(t.rare(true, &c).get().rxmt_cnt, 1);
        assert_eq!((t.rare(false, &c).get(), c.len()), (&EndpointRare::default(), 1));
        t.process(true, &seg(FIN | ACK, 151, 5001, 0), &mut h, &mut c);
        t.process(true, &seg(FIN | ACK, 151, 5001, 0), &mut h, &mut c); // same FIN: no new letter
        assert_eq!(t.rare(true, &c).get().fin_seq, 52);
        assert_eq!(h.letters().as_str(), "ShADaTF");
        // Flipped, the halves follow their endpoints.
        t.flip(&mut c);
        assert_eq!((t.rare(false, &c).get().fin_seq, t.rare(true, &c).get().fin_seq), (52, 0));
        c.free(t.cold_slot());
        assert_eq!(c.len(), 0);
    }

    /// Data above a hole on an established connection, through both of its
    /// paths: without a cold slot (`process_established::<false>`, whose
    /// first segment above the hole takes one) and with one (a
    /// retransmission took it first). The held data is delivered when the
    /// hole fills, and a hole acknowledged but never seen is a gap: the
    /// same bounds, missed bytes and letters either way (but the
    /// retransmission's `T`).
    #[test]
    fn holes_on_either_established_path() {
        let mut histories = Vec::new();
        for slot_first in [false, true] {
            let (mut t, mut h, mut c) = (TcpConn::new(false), HistoryState::default(), ColdParts::with_capacity(0));
            t.process(true, &seg(SYN, 100, 0, 0), &mut h, &mut c);
            t.process(false, &seg(SYN | ACK, 5000, 101, 0), &mut h, &mut c);
            t.process(true, &seg(ACK, 101, 5001, 0), &mut h, &mut c);
            t.process(true, &seg(PSH | ACK, 101, 5001, 50), &mut h, &mut c); // relative [1, 51)
            if slot_first {
                t.process(true, &seg(PSH | ACK, 101, 5001, 50), &mut h, &mut c); // retransmission
            }
            assert_eq!(t.cold_slot() != NO_COLD, slot_first);
            // [51, 101) not seen yet; [101, 201) held above it.
            t.process(true, &seg(PSH | ACK, 201, 5001, 50), &mut h, &mut c);
            assert_ne!(t.cold_slot(), NO_COLD, "held data takes a slot");
            t.process(true, &seg(PSH | ACK, 251, 5001, 50), &mut h, &mut c);
            let r = t.rare(true, &c);
            assert_eq!((t.orig.reasm.next_deliver(r), t.orig.reasm.undelivered_bytes(r)), (51, 150));
            assert!(t.orig.reasm.has_ranges(r));
            // The hole fills: everything delivered, acknowledged, nothing missed.
            t.process(true, &seg(PSH | ACK, 151, 5001, 50), &mut h, &mut c);
            t.process(false, &seg(ACK, 5001, 301, 0), &mut h, &mut c);
            let r = t.rare(true, &c);
            assert_eq!((t.orig.reasm.next_deliver(r), t.orig.reasm.trim(r)), (201, 201));
            assert!(!t.orig.reasm.has_ranges(r));
            assert_eq!(t.missed_bytes(&c), 0);
            // [201, 251) never seen, [251, 301) seen, both acknowledged: a gap of 50.
            t.process(true, &seg(PSH | ACK, 351, 5001, 50), &mut h, &mut c);
            t.process(false, &seg(ACK, 5001, 401, 0), &mut h, &mut c);
            let r = t.rare(true, &c);
            assert_eq!((t.orig.reasm.next_deliver(r), t.orig.reasm.trim(r)), (301, 301));
            assert!(!t.orig.reasm.has_ranges(r));
            assert_eq!(t.missed_bytes(&c), 50);
            assert_eq!(t.rare(true, &c).get().gap_cnt, 1);
            histories.push(h.letters().as_str().replace('T', ""));
            c.free(t.cold_slot());
            assert_eq!(c.len(), 0);
        }
        assert_eq!(histories[0], histories[1]);
        assert!(histories[0].contains('G'), "{}", histories[0]);
    }

    /// A first packet that is a bare SYN (whatever its other flags,
    /// acknowledgement field and non-zero window) leaves exactly
    /// `TcpConn::syn_sent`; a retransmitted one too; anything else does not.
    #[test]
    fn syn_sent_is_a_first_syn() {
        use wirelog_decode::tcp_flags::{ECE, URG};
        for rg in [false, true] {
            for (isn, flags, window) in [(0, SYN, 1), (100, SYN | PSH, 512), (u32::MAX, SYN | ECE | URG, 65535), (u32::MAX - 1, SYN, 7)] {
                let (mut t, mut h, mut c) = (TcpConn::new(rg), HistoryState::default(), ColdParts::with_capacity(0));
                let s = Segment { flags, seq: isn, ack: 12345, window, len: 0, payload_complete: true };
                t.process(true, &s, &mut h, &mut c);
                assert_eq!(t, TcpConn::syn_sent(isn, rg), "{isn} {flags:#x} {window}");
                assert_eq!(t.syn_sent_isn(), Some(isn));
                t.process(true, &s, &mut h, &mut c);
                assert_eq!(t.syn_sent_isn(), Some(isn), "retransmitted");
                assert_eq!(h.letters().as_str(), "S");
            }
            for (flags, window, len) in [(SYN, 0, 0), (SYN | ACK, 5, 0), (SYN, 5, 10), (SYN | FIN, 5, 0), (SYN | RST, 5, 0), (ACK, 5, 0)] {
                let (mut t, mut h, mut c) = (TcpConn::new(rg), HistoryState::default(), ColdParts::with_capacity(0));
                t.process(true, &Segment { flags, seq: 9, ack: 1, window, len, payload_complete: true }, &mut h, &mut c);
                assert_eq!(t.syn_sent_isn(), None, "{flags:#x} {window} {len}");
            }
            let (mut t, mut h, mut c) = (TcpConn::syn_sent(9, rg), HistoryState::default(), ColdParts::with_capacity(0));
            t.process(false, &seg(SYN | ACK, 500, 10, 0), &mut h, &mut c);
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
