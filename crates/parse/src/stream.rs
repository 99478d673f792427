//! TCP stream reassembly for one direction of a connection.
//!
//! A [`Reassembler`] takes the segments of one direction in arrival order and
//! hands the in-order bytes to a sink as [`Chunk`]s. The common case (the
//! segment starts exactly where the stream stands) is delivered straight from
//! the caller's packet buffer: no copy, no allocation. Only segments that
//! arrive ahead of a hole are copied, into a per-stream list bounded both per
//! stream (`max_buffer`) and across all streams by a shared [`Budget`] the
//! caller owns, so total memory is fixed however many streams misbehave.
//!
//! When the bytes of a hole cannot be waited for any longer, the hole is
//! reported as a [`Chunk::Gap`] so the parser resynchronises; bytes are never
//! silently lost. That happens when the peer acknowledges bytes past the hole
//! ([`Reassembler::acked`]: the receiver has them, so only the capture missed
//! them and no retransmission will come, as Zeek's reassembler reasons), when
//! the buffer or budget is full, and at connection end ([`Reassembler::flush`]).
//! Retransmitted bytes are dropped with first-wins semantics: what was
//! delivered or buffered first is what the parser sees (like Zeek, unlike a
//! last-wins OS stack), so an overlap with different content cannot make the
//! parser see two versions of the same bytes.
//!
//! A segment cut by the capture's snap length (`--snaplen`, or a file's)
//! carries fewer bytes than its length on the wire
//! ([`Reassembler::segment_cut`]): its bytes past the cut are delivered as a
//! [`Chunk::Cut`], their place in the stream known, distinct from a gap (a
//! hole of unknown length and content left by packets the capture missed),
//! and counted apart ([`ReasmStats::cut_bytes`]).
//!
//! Sequence numbers are compared with wrapping arithmetic relative to the next
//! expected byte, so wraparound at 2^32 needs no special case.

/// Memory available for out-of-order bytes across every stream that shares it.
#[derive(Debug, Clone)]
pub struct Budget {
    limit: usize,
    used: usize,
    /// Parser state charged to the same budget (HTTP/2's HPACK tables and
    /// streams): it cannot be refused, so it may pass the limit; while it
    /// takes room, fewer out-of-order bytes are buffered.
    state: usize,
    /// Times a segment could not be buffered because the budget was spent
    /// (each one forced a gap somewhere).
    pub refused: u64,
}

impl Budget {
    pub fn new(limit_bytes: usize) -> Self {
        Budget {
            limit: limit_bytes,
            used: 0,
            state: 0,
            refused: 0,
        }
    }
    /// Out-of-order bytes buffered.
    pub fn used(&self) -> usize {
        self.used
    }
    /// Parser state bytes charged with [`Budget::charge_state`].
    pub fn state(&self) -> usize {
        self.state
    }
    /// A parser's state grew from `was` to `now` bytes (or shrank).
    pub fn charge_state(&mut self, was: usize, now: usize) {
        self.state = (self.state + now).saturating_sub(was);
    }
    /// Charges `n` more bytes of a parser's state if the budget has room
    /// for them, else charges nothing: whether it did. (A state that is
    /// made only if it fits: a parser, a signature stream.)
    #[must_use]
    pub fn try_charge_state(&mut self, n: usize) -> bool {
        let fits = self.room() >= n;
        if fits {
            self.state += n;
        }
        fits
    }
    fn room(&self) -> usize {
        self.limit.saturating_sub(self.used + self.state)
    }
    pub fn limit(&self) -> usize {
        self.limit
    }
    /// Moves the limit (the tracker lends the buffers' unused share of
    /// `--memory` to its tables and takes it back here). Bytes already
    /// buffered above a lowered limit stay; nothing more is taken until
    /// they fall below it.
    pub fn set_limit(&mut self, limit_bytes: usize) {
        self.limit = limit_bytes;
    }
    /// Bytes neither buffered nor charged as parser state: what a parser
    /// may still be granted.
    pub fn available(&self) -> usize {
        self.room()
    }
    fn has_room(&self, n: usize) -> bool {
        self.room() >= n
    }
    fn take(&mut self, n: usize) -> bool {
        if self.room() >= n {
            self.used += n;
            true
        } else {
            self.refused += 1;
            false
        }
    }
    fn give(&mut self, n: usize) {
        self.used = self.used.saturating_sub(n);
    }
}

/// What the reassembler delivers, in stream order.
#[derive(Debug, PartialEq, Eq)]
pub enum Chunk<'a> {
    /// The next in-order bytes, seen at `ts_ns` (the arrival time of the
    /// segment that carried them).
    Data { ts_ns: i64, data: &'a [u8] },
    /// `len` bytes are missing (never captured); the stream continues after them.
    Gap { ts_ns: i64, len: u64 },
    /// The next `len` bytes were sent, in the segment seen at `ts_ns`, but
    /// not captured: the segment was cut by the snap length. Their place in
    /// the stream is known (they end where the segment ends), only their
    /// content is not; the stream continues after them.
    Cut { ts_ns: i64, len: u64 },
}

/// TCP flags the reassembler cares about.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegFlags {
    /// The segment's sequence number is the ISN; its data starts one later.
    pub syn: bool,
    /// Marks where the stream ends ([`Reassembler::is_closed`]).
    pub fin: bool,
    /// Carried for the caller's convenience: a reset does not end reassembly
    /// by itself (a later retransmission may still fill holes); the caller
    /// decides when to [`Reassembler::flush`].
    pub rst: bool,
}

/// Counters of one stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReasmStats {
    /// Bytes handed to the sink as data.
    pub delivered: u64,
    /// Bytes reported missing, and in how many gaps.
    pub gap_bytes: u64,
    pub gaps: u64,
    /// Bytes dropped as already delivered or already buffered (retransmissions).
    pub dup_bytes: u64,
    /// Segments that had to wait for a hole to fill.
    pub ooo_segments: u64,
    /// Bytes beyond the snap length ([`Chunk::Cut`]), and in how many cuts:
    /// sent and in place, not captured; not in `gap_bytes`.
    pub cut_bytes: u64,
    pub cuts: u64,
}

struct Seg {
    seq: u32,
    ts_ns: i64,
    data: Vec<u8>,
    /// Bytes after `data` that the segment carried on the wire but the
    /// capture cut: the segment covers `data.len() + cut` bytes.
    cut: u32,
}

impl Seg {
    /// Sequence space the segment covers.
    fn span(&self) -> u64 {
        self.data.len() as u64 + self.cut as u64
    }
}

/// Segments further ahead than this (2^30) are taken for stale or bogus
/// rather than for data beyond a hole: a real window is far smaller, and
/// half the sequence space is where "ahead" and "behind" become ambiguous.
const MAX_AHEAD: u32 = 1 << 30;

use std::collections::VecDeque;

/// Reassembly state of one direction of one connection.
pub struct Reassembler {
    /// Next expected sequence number; `None` until a SYN or the first segment.
    next: Option<u32>,
    /// Sequence number just after the FIN, once seen.
    fin: Option<u32>,
    /// Out-of-order segments, sorted by sequence relative to `next`, not overlapping.
    ooo: VecDeque<Seg>,
    buffered: usize,
    max_buffer: usize,
    stats: ReasmStats,
}

impl Reassembler {
    /// `max_buffer`: out-of-order bytes this stream may hold (also bounded by the shared budget).
    pub fn new(max_buffer: usize) -> Self {
        Reassembler {
            next: None,
            fin: None,
            ooo: VecDeque::new(),
            buffered: 0,
            max_buffer,
            stats: ReasmStats::default(),
        }
    }

    pub fn stats(&self) -> ReasmStats {
        self.stats
    }

    /// Bytes held for out-of-order segments (charged to the budget).
    pub fn buffered(&self) -> usize {
        self.buffered
    }

    /// True once the FIN was seen and every byte before it delivered or reported.
    pub fn is_closed(&self) -> bool {
        matches!((self.fin, self.next), (Some(f), Some(n)) if f == n)
    }

    /// One segment of this direction. `seq` is the segment's sequence number
    /// as on the wire (for a SYN, the ISN; its data starts at ISN + 1).
    pub fn segment(
        &mut self,
        seq: u32,
        ts_ns: i64,
        payload: &[u8],
        flags: SegFlags,
        budget: &mut Budget,
        sink: &mut impl FnMut(Chunk<'_>),
    ) {
        self.segment_cut(seq, ts_ns, payload, payload.len() as u32, flags, budget, sink)
    }

    /// One segment whose payload was `wire_len` bytes on the wire, of which
    /// `payload` is what the capture kept (its first bytes). The bytes past
    /// the cut are delivered as a [`Chunk::Cut`] after the payload's. A
    /// `wire_len` below the payload's length is taken as the payload's.
    /// Inline: one call per parsed packet, from the tracker's
    /// `AppState::segment`, where the compiler stopped inlining it when the
    /// tracker's own code grew (+5.5 M instructions on mysql.pcap).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn segment_cut(
        &mut self,
        seq: u32,
        ts_ns: i64,
        payload: &[u8],
        wire_len: u32,
        flags: SegFlags,
        budget: &mut Budget,
        sink: &mut impl FnMut(Chunk<'_>),
    ) {
        let wire_len = wire_len.max(payload.len() as u32);
        let data_seq = if flags.syn { seq.wrapping_add(1) } else { seq };
        let next = match self.next {
            Some(n) => n,
            None => {
                // Mid-stream start: the first segment seen defines the stream's start.
                self.next = Some(data_seq);
                data_seq
            }
        };
        if flags.fin && self.fin.is_none() {
            self.fin = Some(data_seq.wrapping_add(wire_len));
        }
        if wire_len == 0 {
            return;
        }
        let ahead = data_seq.wrapping_sub(next);
        if ahead == 0 || ahead > u32::MAX - MAX_AHEAD {
            // At or behind the expected byte: deliver the new part in place.
            let skip = next.wrapping_sub(data_seq) as usize;
            if skip >= wire_len as usize {
                self.stats.dup_bytes += wire_len as u64;
                return;
            }
            self.stats.dup_bytes += skip as u64;
            self.deliver_from(ts_ns, payload, wire_len, skip, sink);
            self.drain(budget, sink);
            return;
        }
        if ahead >= MAX_AHEAD {
            // Too far ahead to be the same stream position: count, don't buffer.
            self.stats.dup_bytes += wire_len as u64;
            return;
        }
        self.stats.ooo_segments += 1;
        self.insert(data_seq, ts_ns, payload, wire_len, budget, sink);
    }

    /// Gives up on every hole: buffered segments are delivered in order with
    /// gaps for the holes between them (at connection end, RST, or when the
    /// caller decides a stream waited long enough). Returns buffer to the budget.
    pub fn flush(&mut self, ts_ns: i64, budget: &mut Budget, sink: &mut impl FnMut(Chunk<'_>)) {
        while !self.ooo.is_empty() {
            self.skip_to_first(ts_ns, sink);
            self.drain(budget, sink);
        }
        // A FIN beyond what was delivered: the bytes before it are lost.
        if let (Some(f), Some(n)) = (self.fin, self.next) {
            let missing = f.wrapping_sub(n);
            if missing > 0 && missing < MAX_AHEAD {
                self.report_gap(ts_ns, missing as u64, sink);
            }
        }
    }

    /// The other direction acknowledged every byte before `ack`. Bytes below
    /// it that this stream has not delivered were received by the peer but
    /// missed by the capture (a full ring, a lossy tap): waiting for them
    /// would only hold later segments back until the buffer overflows, so
    /// they become a gap now and what was buffered behind them is delivered.
    /// Inline for the reason [`Self::segment_cut`] is.
    #[inline(always)]
    pub fn acked(&mut self, ack: u32, ts_ns: i64, budget: &mut Budget, sink: &mut impl FnMut(Chunk<'_>)) {
        let Some(mut next) = self.next else {
            return;
        };
        // The FIN takes a sequence number but carries no byte: an ACK of the
        // FIN is not an ACK of a missing byte.
        let ack = match self.fin {
            Some(f) if ack.wrapping_sub(f).wrapping_sub(1) < MAX_AHEAD => f,
            _ => ack,
        };
        loop {
            let upto = ack.wrapping_sub(next);
            if upto == 0 || upto >= MAX_AHEAD {
                return;
            }
            // Missed: the bytes up to the first buffered segment, or up to
            // the ACK when nothing is buffered.
            let hole = self.ooo.front().map_or(upto, |s| s.seq.wrapping_sub(next));
            if hole > 0 && hole < MAX_AHEAD {
                self.report_gap(ts_ns, hole.min(upto) as u64, sink);
                if upto < hole || self.ooo.is_empty() {
                    return;
                }
            }
            self.drain(budget, sink);
            next = self.next.unwrap_or(ack);
        }
    }

    /// Drops buffered segments without delivering them (the connection is
    /// being forgotten), returning their memory to the budget.
    pub fn discard(&mut self, budget: &mut Budget) {
        budget.give(self.buffered);
        self.buffered = 0;
        self.ooo.clear();
    }

    fn deliver(&mut self, ts_ns: i64, data: &[u8], sink: &mut impl FnMut(Chunk<'_>)) {
        self.stats.delivered += data.len() as u64;
        self.next = Some(self.next.unwrap_or(0).wrapping_add(data.len() as u32));
        sink(Chunk::Data { ts_ns, data });
    }

    /// A segment of `wire_len` bytes whose first `payload.len()` were
    /// captured, from its byte `skip` on (`skip < wire_len`): its captured
    /// bytes, then the cut ones.
    fn deliver_from(&mut self, ts_ns: i64, payload: &[u8], wire_len: u32, skip: usize, sink: &mut impl FnMut(Chunk<'_>)) {
        if skip < payload.len() {
            self.deliver(ts_ns, &payload[skip..], sink);
        }
        let cut = (wire_len as usize).saturating_sub(skip.max(payload.len()));
        if cut > 0 {
            self.report_cut(ts_ns, cut as u64, sink);
        }
    }

    fn report_cut(&mut self, ts_ns: i64, len: u64, sink: &mut impl FnMut(Chunk<'_>)) {
        self.stats.cuts += 1;
        self.stats.cut_bytes += len;
        self.next = Some(self.next.unwrap_or(0).wrapping_add(len as u32));
        sink(Chunk::Cut { ts_ns, len });
    }

    fn report_gap(&mut self, ts_ns: i64, len: u64, sink: &mut impl FnMut(Chunk<'_>)) {
        self.stats.gaps += 1;
        self.stats.gap_bytes += len;
        self.next = Some(self.next.unwrap_or(0).wrapping_add(len as u32));
        sink(Chunk::Gap { ts_ns, len });
    }

    /// Declares the hole before the first buffered segment lost.
    fn skip_to_first(&mut self, ts_ns: i64, sink: &mut impl FnMut(Chunk<'_>)) {
        let (Some(first), Some(next)) = (self.ooo.front(), self.next) else {
            return;
        };
        let hole = first.seq.wrapping_sub(next);
        if hole > 0 && hole < MAX_AHEAD {
            self.report_gap(ts_ns, hole as u64, sink);
        }
    }

    /// Delivers buffered segments that the stream has reached.
    fn drain(&mut self, budget: &mut Budget, sink: &mut impl FnMut(Chunk<'_>)) {
        while let (Some(first), Some(next)) = (self.ooo.front(), self.next) {
            let ahead = first.seq.wrapping_sub(next);
            if ahead != 0 && ahead < MAX_AHEAD {
                break;
            }
            let Some(seg) = self.ooo.pop_front() else {
                break;
            };
            self.buffered -= seg.data.len();
            budget.give(seg.data.len());
            let skip = next.wrapping_sub(seg.seq) as usize;
            if (skip as u64) < seg.span() {
                self.stats.dup_bytes += skip as u64;
                self.deliver_from(seg.ts_ns, &seg.data, seg.data.len() as u32 + seg.cut, skip, sink);
            } else {
                self.stats.dup_bytes += seg.span();
            }
        }
    }

    /// Buffers the parts of an out-of-order segment not already buffered
    /// (first wins); when memory runs out, gives up on the oldest hole.
    /// A segment cut by the snap length (`wire_len` > `payload.len()`)
    /// covers its whole wire length: its cut bytes are kept as a count
    /// (`Seg::cut`), never charged to the buffers.
    fn insert(
        &mut self,
        seq: u32,
        ts_ns: i64,
        payload: &[u8],
        wire_len: u32,
        budget: &mut Budget,
        sink: &mut impl FnMut(Chunk<'_>),
    ) {
        let next = self.next.unwrap_or(seq);
        // Offsets relative to `next` are all in (0, MAX_AHEAD + 2^16): plain
        // integer comparisons from here on.
        let rel = |s: u32| s.wrapping_sub(next) as u64;
        let start = rel(seq);
        let end = start + wire_len as u64;
        // The captured bytes end here; the cut ones from here to `end`.
        let cap_end = start + payload.len() as u64;
        // After a hole, later segments arrive in order behind it: appending
        // past the last buffered byte needs no scan of the list.
        let after_last = self.ooo.back().is_none_or(|s| rel(s.seq) + s.span() <= start);
        if after_last {
            let n = payload.len();
            if self.buffered + n <= self.max_buffer && budget.has_room(n) {
                budget.used += n;
                self.buffered += n;
                self.ooo.push_back(Seg {
                    seq,
                    ts_ns,
                    data: payload.to_vec(),
                    cut: wire_len - payload.len() as u32,
                });
                return;
            }
        }
        let mut pieces: [(u64, u64); 8] = [(0, 0); 8];
        let mut npieces = 0usize;
        let mut cur = start;
        // A segment spanning more than 8 buffered ones keeps only its first 8
        // free pieces: the rest is counted as duplicate and later reported as
        // a gap, which keeps this path free of allocation for bookkeeping.
        for s in &self.ooo {
            let (a, b) = (rel(s.seq), rel(s.seq) + s.span());
            if b <= cur {
                continue;
            }
            if a >= end {
                break;
            }
            if a > cur && npieces < pieces.len() {
                pieces[npieces] = (cur, a);
                npieces += 1;
            }
            cur = cur.max(b);
        }
        if cur < end && npieces < pieces.len() {
            pieces[npieces] = (cur, end);
            npieces += 1;
        }
        let new_bytes: u64 = pieces[..npieces].iter().map(|(a, b)| b - a).sum();
        self.stats.dup_bytes += wire_len as u64 - new_bytes;
        if new_bytes == 0 {
            return;
        }
        // What the pieces hold of the captured bytes (the rest is cut).
        let captured = |&(a, b): &(u64, u64)| b.min(cap_end).saturating_sub(a);
        let n = pieces[..npieces].iter().map(captured).sum::<u64>() as usize;
        if self.buffered + n > self.max_buffer || !budget.take(n) {
            // No room: the oldest hole will not be filled. Deliver what is
            // buffered (with gaps), then this segment after its own hole.
            self.flush_holes(ts_ns, budget, sink);
            let next = self.next.unwrap_or(seq);
            let hole = seq.wrapping_sub(next);
            if hole > 0 && hole < MAX_AHEAD {
                self.report_gap(ts_ns, hole as u64, sink);
            }
            let skip = next.wrapping_sub(seq) as usize;
            if hole == 0 || hole >= MAX_AHEAD {
                if skip < wire_len as usize {
                    self.deliver_from(ts_ns, payload, wire_len, skip, sink);
                }
            } else {
                self.deliver_from(ts_ns, payload, wire_len, 0, sink);
            }
            return;
        }
        self.buffered += n;
        // Insert pieces in order; each piece lies in a free interval, so the
        // list stays sorted and non-overlapping.
        for &(a, b) in pieces[..npieces].iter().rev() {
            // The piece's captured bytes (none when it lies past the cut).
            let data_end = b.min(cap_end).max(a);
            let data = if a < cap_end {
                payload[(a - start) as usize..(data_end - start) as usize].to_vec()
            } else {
                Vec::new()
            };
            let seg = Seg {
                seq: next.wrapping_add(a as u32),
                ts_ns,
                data,
                cut: (b - data_end) as u32,
            };
            let pos = self
                .ooo
                .iter()
                .position(|s| rel(s.seq) > a)
                .unwrap_or(self.ooo.len());
            self.ooo.insert(pos, seg);
        }
    }

    /// Delivers every buffered segment, reporting the holes before them as gaps.
    fn flush_holes(&mut self, ts_ns: i64, budget: &mut Budget, sink: &mut impl FnMut(Chunk<'_>)) {
        while !self.ooo.is_empty() {
            self.skip_to_first(ts_ns, sink);
            self.drain(budget, sink);
        }
    }
}

#[cfg(any(test, feature = "fuzzing"))]
/// Fuzzing entry: `data` is a list of 4-byte segment descriptions for one
/// stream (sequence offset from the first byte, u16 LE; length; flags, where
/// bit 8 makes it an acknowledgement of that sequence number instead) with
/// tight memory limits. Must never panic, and memory accounting must balance.
pub fn fuzz(data: &[u8]) {
    static PAYLOAD: [u8; 256] = [b'x'; 256];
    let mut budget = Budget::new(600);
    let mut r = Reassembler::new(400);
    let base = 0xffff_ff00u32; // exercise wraparound
    let mut delivered = 0u64;
    for d in data.chunks_exact(4) {
        let seq = base.wrapping_add(u16::from_le_bytes([d[0], d[1]]) as u32);
        if d[3] & 8 != 0 {
            r.acked(seq, 0, &mut budget, &mut |c| {
                if let Chunk::Data { data, .. } = c {
                    delivered += data.len() as u64;
                }
            });
            assert!(budget.used() == r.buffered());
            continue;
        }
        let flags = SegFlags {
            syn: d[3] & 1 != 0,
            fin: d[3] & 2 != 0,
            rst: d[3] & 4 != 0,
        };
        r.segment(
            seq,
            0,
            &PAYLOAD[..d[2] as usize],
            flags,
            &mut budget,
            &mut |c| {
                if let Chunk::Data { data, .. } = c {
                    delivered += data.len() as u64;
                }
            },
        );
        assert!(r.buffered() <= 400 && budget.used() == r.buffered());
    }
    r.flush(0, &mut budget, &mut |c| {
        if let Chunk::Data { data, .. } = c {
            delivered += data.len() as u64;
        }
    });
    assert_eq!(budget.used(), 0);
    assert_eq!(r.stats().delivered, delivered);
}

#[cfg(test)]
mod test {
    use super::*;

    #[derive(Debug, PartialEq, Eq, Clone)]
    enum Out {
        D(Vec<u8>),
        G(u64),
        C(u64),
    }

    /// What a test keeps of a chunk the reassembler hands on.
    impl From<Chunk<'_>> for Out {
        fn from(c: Chunk<'_>) -> Out {
            match c {
                Chunk::Data { data, .. } => Out::D(data.to_vec()),
                Chunk::Gap { len, .. } => Out::G(len),
                Chunk::Cut { len, .. } => Out::C(len),
            }
        }
    }

    fn run(
        r: &mut Reassembler,
        b: &mut Budget,
        segs: &[(u32, &[u8], SegFlags)],
        out: &mut Vec<Out>,
    ) {
        for (seq, p, f) in segs {
            r.segment(*seq, 0, p, *f, b, &mut |c| out.push(c.into()));
        }
    }

    fn joined(out: &[Out]) -> Vec<u8> {
        let mut v = Vec::new();
        for o in out {
            match o {
                Out::D(d) => v.extend_from_slice(d),
                Out::G(n) => v.extend(std::iter::repeat_n(b'_', *n as usize)),
                Out::C(n) => v.extend(std::iter::repeat_n(b'#', *n as usize)),
            }
        }
        v
    }

    const N: SegFlags = SegFlags {
        syn: false,
        fin: false,
        rst: false,
    };
    const SYN: SegFlags = SegFlags {
        syn: true,
        fin: false,
        rst: false,
    };

    fn ack(r: &mut Reassembler, b: &mut Budget, ack: u32, out: &mut Vec<Out>) {
        r.acked(ack, 0, b, &mut |c| out.push(c.into()));
    }

    /// A state made only if it fits: charged whole when the room left
    /// holds it (out-of-order bytes take room too), else not at all.
    #[test]
    fn a_state_is_charged_only_if_it_fits() {
        let mut r = Reassembler::new(1000);
        let mut b = Budget::new(100);
        run(&mut r, &mut b, &[(99, b"", SYN), (120, b"0123456789", N)], &mut Vec::new());
        assert_eq!((b.used(), b.available()), (10, 90));
        assert!(b.try_charge_state(60));
        assert_eq!((b.state(), b.available()), (60, 30));
        assert!(!b.try_charge_state(31));
        assert_eq!((b.state(), b.available()), (60, 30));
        assert!(b.try_charge_state(30));
        assert_eq!((b.state(), b.available(), b.refused), (90, 0, 0));
        b.charge_state(90, 0);
        assert_eq!(b.available(), 90);
    }

    #[test]
    fn an_ack_past_a_hole_gives_the_hole_up_and_delivers_what_waited() {
        let mut r = Reassembler::new(1000);
        let mut b = Budget::new(1000);
        let mut out = Vec::new();
        // Bytes 10..20 were missed by the capture; 20..40 wait behind them.
        run(&mut r, &mut b, &[(99, b"", SYN), (100, b"0123456789", N), (120, b"abcdefghij", N), (130, b"klmnopqrst", N)], &mut out);
        assert_eq!(out, vec![Out::D(b"0123456789".to_vec())]);
        assert_eq!(b.used(), 20);
        // An ACK up to the hole's start, or behind it, changes nothing.
        ack(&mut r, &mut b, 110, &mut out);
        ack(&mut r, &mut b, 105, &mut out);
        assert_eq!(out.len(), 1);
        // The receiver has byte 29: the hole will never be filled.
        ack(&mut r, &mut b, 130, &mut out);
        assert_eq!(
            out[1..],
            [Out::G(10), Out::D(b"abcdefghij".to_vec()), Out::D(b"klmnopqrst".to_vec())]
        );
        assert_eq!((b.used(), r.buffered()), (0, 0));
        assert_eq!((r.stats().gaps, r.stats().gap_bytes), (1, 10));
        // A late retransmission of the hole is a duplicate now.
        run(&mut r, &mut b, &[(110, b"LATE......", N)], &mut out);
        assert_eq!(out.len(), 4);
    }

    #[test]
    fn an_ack_inside_a_hole_reports_only_what_it_covers() {
        let mut r = Reassembler::new(1000);
        let mut b = Budget::new(1000);
        let mut out = Vec::new();
        run(&mut r, &mut b, &[(99, b"", SYN), (100, b"0123456789", N), (130, b"abcdefghij", N)], &mut out);
        ack(&mut r, &mut b, 115, &mut out);
        assert_eq!(out[1..], [Out::G(5)]);
        // The rest of the hole may still arrive.
        run(&mut r, &mut b, &[(115, b"ABCDEFGHIJKLMNO", N)], &mut out);
        assert_eq!(out[2..], [Out::D(b"ABCDEFGHIJKLMNO".to_vec()), Out::D(b"abcdefghij".to_vec())]);
    }

    #[test]
    fn an_ack_of_bytes_never_seen_and_of_the_fin() {
        let mut r = Reassembler::new(1000);
        let mut b = Budget::new(1000);
        let mut out = Vec::new();
        let fin = SegFlags { fin: true, ..N };
        run(&mut r, &mut b, &[(99, b"", SYN), (100, b"0123456789", fin)], &mut out);
        // The FIN's sequence number carries no byte: acknowledging it loses nothing.
        ack(&mut r, &mut b, 111, &mut out);
        assert_eq!(out, vec![Out::D(b"0123456789".to_vec())]);
        assert!(r.is_closed());

        let mut r = Reassembler::new(1000);
        let mut out = Vec::new();
        run(&mut r, &mut b, &[(99, b"", SYN), (100, b"0123456789", N)], &mut out);
        // A whole segment missed, nothing behind it: the acknowledged bytes are a gap.
        ack(&mut r, &mut b, 125, &mut out);
        assert_eq!(out[1..], [Out::G(15)]);
        run(&mut r, &mut b, &[(125, b"next", N)], &mut out);
        assert_eq!(out[2..], [Out::D(b"next".to_vec())]);
        // Before any segment there is no position to measure from.
        let mut r = Reassembler::new(1000);
        ack(&mut r, &mut b, 5000, &mut out);
        assert_eq!(out.len(), 3);
    }

    #[test]
    fn segments_behind_a_hole_append_without_limit_but_the_buffer() {
        // Many small segments behind one hole (a capture drop on a busy
        // connection): each is appended, and the buffer limit still forces
        // the gap when nothing acknowledges.
        let mut r = Reassembler::new(4000);
        let mut b = Budget::new(1 << 20);
        let mut out = Vec::new();
        run(&mut r, &mut b, &[(99, b"", SYN), (100, b"x", N)], &mut out);
        for i in 0..1000u32 {
            run(&mut r, &mut b, &[(200 + 10 * i, b"0123456789", N)], &mut out);
        }
        let gaps = out.iter().filter(|o| matches!(o, Out::G(_))).count();
        assert_eq!(gaps, 1);
        assert_eq!(joined(&out).len() as u32 + r.buffered() as u32, 200 + 10 * 1000 - 100);
        assert!(r.buffered() <= 4000);
        assert_eq!(b.used(), r.buffered());
    }

    #[test]
    fn in_order_is_zero_copy() {
        let mut r = Reassembler::new(1000);
        let mut b = Budget::new(1000);
        let payload = b"hello".to_vec();
        r.segment(99, 0, &[], SYN, &mut b, &mut |_| panic!("nothing"));
        let mut seen_ptr = std::ptr::null();
        r.segment(100, 1, &payload, N, &mut b, &mut |c| {
            if let Chunk::Data { data, .. } = c {
                seen_ptr = data.as_ptr();
            }
        });
        assert_eq!(
            seen_ptr,
            payload.as_ptr(),
            "delivered from the caller's buffer"
        );
        assert_eq!(b.used(), 0);
        assert_eq!(r.stats().delivered, 5);
    }

    #[test]
    fn out_of_order_is_reordered() {
        let mut r = Reassembler::new(1000);
        let mut b = Budget::new(1000);
        let mut out = Vec::new();
        run(
            &mut r,
            &mut b,
            &[
                (0, b"", SYN),
                (7, b"world", N),
                (4, b"lo ", N),
                (1, b"hel", N),
            ],
            &mut out,
        );
        assert_eq!(joined(&out), b"hello world");
        assert_eq!(b.used(), 0);
        assert_eq!(r.buffered(), 0);
    }

    #[test]
    fn retransmits_and_partial_overlaps_first_wins() {
        let mut r = Reassembler::new(1000);
        let mut b = Budget::new(1000);
        let mut out = Vec::new();
        run(
            &mut r,
            &mut b,
            &[
                (1, b"abcd", N),
                (1, b"abcd", N),  // full retransmit
                (3, b"XXef", N),  // overlaps delivered "cd": only "ef" is new
                (10, b"jkl", N),  // ahead
                (9, b"YYYYm", N), // overlaps buffered "jkl" in its middle: i, m new
                (7, b"gh", N),    // fills the hole
            ],
            &mut out,
        );
        assert_eq!(joined(&out), b"abcdefghYjklm");
        assert_eq!(r.stats().dup_bytes, 4 + 2 + 3);
        assert_eq!(b.used(), 0);
    }

    #[test]
    fn wraparound() {
        let mut r = Reassembler::new(1000);
        let mut b = Budget::new(1000);
        let mut out = Vec::new();
        let isn = u32::MAX - 2;
        run(
            &mut r,
            &mut b,
            &[
                (isn, b"", SYN),
                (0, b"cd", N),
                (u32::MAX - 1, b"ab", N),
                (2, b"e", N),
            ],
            &mut out,
        );
        assert_eq!(joined(&out), b"abcde");
        // A retransmission from before the wrap is a duplicate, not data ahead.
        run(&mut r, &mut b, &[(u32::MAX - 1, b"ab", N)], &mut out);
        assert_eq!(joined(&out), b"abcde");
    }

    #[test]
    fn mid_stream_start_and_fin_hole() {
        let mut r = Reassembler::new(1000);
        let mut b = Budget::new(1000);
        let mut out = Vec::new();
        run(
            &mut r,
            &mut b,
            &[
                (5000, b"xyz", N),
                (5010, b"end", SegFlags { fin: true, ..N }),
            ],
            &mut out,
        );
        assert_eq!(joined(&out), b"xyz");
        assert!(!r.is_closed());
        r.flush(9, &mut b, &mut |c| out.push(c.into()));
        assert_eq!(
            out,
            vec![Out::D(b"xyz".to_vec()), Out::G(7), Out::D(b"end".to_vec())]
        );
        assert!(r.is_closed());
        assert_eq!(b.used(), 0);
    }

    #[test]
    fn budget_exhaustion_forces_gap() {
        let mut r1 = Reassembler::new(1000);
        let mut r2 = Reassembler::new(1000);
        let mut b = Budget::new(6);
        let mut o1 = Vec::new();
        let mut o2 = Vec::new();
        run(&mut r1, &mut b, &[(1, b"a", N), (5, b"efgh", N)], &mut o1);
        assert_eq!(b.used(), 4);
        run(&mut r2, &mut b, &[(1, b"a", N), (5, b"efgh", N)], &mut o2);
        // r2 could not buffer: its hole (3 bytes) is given up at once.
        assert_eq!(
            o2,
            vec![Out::D(b"a".to_vec()), Out::G(3), Out::D(b"efgh".to_vec())]
        );
        assert_eq!(b.refused, 1);
        assert_eq!(b.used(), 4);
        // The per-stream limit works the same way.
        let mut r3 = Reassembler::new(2);
        let mut b3 = Budget::new(100);
        let mut o3 = Vec::new();
        run(
            &mut r3,
            &mut b3,
            &[(1, b"a", N), (3, b"cd", N), (7, b"gh", N)],
            &mut o3,
        );
        assert_eq!(joined(&o3), b"a_cd__gh");
        assert_eq!(b3.used(), 0);
        r1.discard(&mut b);
        assert_eq!(b.used(), 0);
    }

    #[test]
    fn far_ahead_is_not_buffered() {
        let mut r = Reassembler::new(1000);
        let mut b = Budget::new(1000);
        let mut out = Vec::new();
        run(
            &mut r,
            &mut b,
            &[(1, b"a", N), (1 + (1 << 31), b"zz", N), (2, b"b", N)],
            &mut out,
        );
        assert_eq!(joined(&out), b"ab");
        assert_eq!(b.used(), 0);
    }

    fn run_cut(r: &mut Reassembler, b: &mut Budget, segs: &[(u32, &[u8], u32)], out: &mut Vec<Out>) {
        for (seq, p, wire) in segs {
            r.segment_cut(*seq, 0, p, *wire, N, b, &mut |c| out.push(c.into()));
        }
    }

    /// A segment cut by the snap length: its captured bytes, then a cut of
    /// the rest in place (not a gap), and the next segment follows at once.
    #[test]
    fn cut_segments_in_order() {
        let mut r = Reassembler::new(1000);
        let mut b = Budget::new(1000);
        let mut out = Vec::new();
        run_cut(&mut r, &mut b, &[(1, b"abc", 10), (11, b"de", 2), (13, b"", 4), (17, b"f", 1)], &mut out);
        assert_eq!(
            out,
            vec![Out::D(b"abc".to_vec()), Out::C(7), Out::D(b"de".to_vec()), Out::C(4), Out::D(b"f".to_vec())]
        );
        let st = r.stats();
        assert_eq!((st.cut_bytes, st.cuts, st.gap_bytes, st.gaps, st.ooo_segments), (11, 2, 0, 0, 0));
        assert_eq!(st.delivered, 6);
        // A retransmission of the cut segment, whole this time: first wins.
        run_cut(&mut r, &mut b, &[(1, b"abcdefghij", 10)], &mut out);
        assert_eq!(r.stats().dup_bytes, 10);
        // A cut segment that also carries the FIN: the FIN is after its wire length.
        let mut r = Reassembler::new(1000);
        r.segment_cut(1, 0, b"ab", 5, SegFlags { fin: true, ..N }, &mut b, &mut |_| {});
        assert!(r.is_closed());
    }

    /// A cut segment that arrives ahead of a hole waits with its cut (a
    /// count, not buffered bytes), and is delivered as data then cut.
    #[test]
    fn cut_segments_out_of_order() {
        let mut r = Reassembler::new(1000);
        let mut b = Budget::new(1000);
        let mut out = Vec::new();
        run_cut(&mut r, &mut b, &[(1, b"a", 1), (6, b"fg", 10), (16, b"", 3), (2, b"bc", 4)], &mut out);
        assert_eq!(b.used(), 0);
        assert_eq!(
            out,
            vec![
                Out::D(b"a".to_vec()),
                Out::D(b"bc".to_vec()),
                Out::C(2),
                Out::D(b"fg".to_vec()),
                Out::C(8),
                Out::C(3)
            ]
        );
        // Overlaps: a whole segment over a buffered cut one keeps the cut
        // (first wins) and fills around it.
        let mut r = Reassembler::new(1000);
        let mut out = Vec::new();
        run_cut(&mut r, &mut b, &[(1, b"a", 1), (5, b"ef", 4), (3, b"cdefghij", 8), (2, b"b", 1)], &mut out);
        assert_eq!(joined(&out), b"abcdef##ij");
        assert_eq!(r.stats().gaps, 0);
        // A hole before a cut segment, given up at flush: a gap, then the cut segment.
        let mut r = Reassembler::new(1000);
        let mut out = Vec::new();
        run_cut(&mut r, &mut b, &[(1, b"a", 1), (4, b"d", 3)], &mut out);
        r.flush(0, &mut b, &mut |c| out.push(c.into()));
        assert_eq!(joined(&out), b"a__d##");
        assert_eq!((r.stats().gap_bytes, r.stats().cut_bytes), (2, 2));
        assert_eq!(b.used(), 0);
    }

    /// Random segmentation, reordering and duplication with a random snap
    /// length: with enough buffer no gap, the stream's length, and each
    /// byte the stream's or a cut one.
    #[test]
    fn random_cut_shuffles() {
        let data: Vec<u8> = (0..3000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let mut rand = crate::xorshift(0x2545_f491_4f6c_dd1du64);
        for round in 0..200 {
            let snap = 1 + (rand() % 120) as usize;
            let isn = rand() as u32;
            let mut segs = Vec::new();
            let mut i = 0usize;
            while i < data.len() {
                let end = (i + 1 + (rand() % 300) as usize).min(data.len());
                segs.push((i, end));
                if rand().is_multiple_of(4) {
                    segs.push((i.saturating_sub((rand() % 50) as usize), end));
                }
                i = end;
            }
            for k in 0..segs.len() {
                let j = k + (rand() % 4) as usize;
                if j < segs.len() {
                    segs.swap(k, j);
                }
            }
            let mut r = Reassembler::new(1 << 20);
            let mut b = Budget::new(1 << 20);
            let mut out = Vec::new();
            r.segment(isn, 0, &[], SYN, &mut b, &mut |_| {});
            let mut sink = |c: Chunk<'_>| out.push(c.into());
            for (s, e) in &segs {
                let seq = isn.wrapping_add(1).wrapping_add(*s as u32);
                let cap = (*e - *s).min(snap);
                r.segment_cut(seq, 0, &data[*s..*s + cap], (*e - *s) as u32, N, &mut b, &mut sink);
            }
            r.flush(0, &mut b, &mut sink);
            let got = joined(&out);
            assert_eq!(b.used(), 0);
            assert_eq!(got.len(), data.len(), "round {round}");
            assert!(got.iter().zip(&data).all(|(g, d)| g == d || *g == b'#'), "round {round}");
            assert_eq!(r.stats().gaps, 0);
            assert_eq!(r.stats().cut_bytes + r.stats().delivered, data.len() as u64);
        }
    }

    /// Arbitrary sequence numbers, flags and sizes with tight limits: no
    /// panic, memory stays within both limits, all of it returned at flush.
    #[test]
    fn garbage_never_panics() {
        let mut rand = crate::xorshift(0x0123_4567_89ab_cdefu64);
        let payload = [0xaau8; 3000];
        let mut budget = Budget::new(5000);
        let mut rs: Vec<Reassembler> = (0..4).map(|_| Reassembler::new(2000)).collect();
        for _ in 0..20000 {
            let r = &mut rs[(rand() % 4) as usize];
            let base = r.next.unwrap_or(0);
            let seq = match rand() % 4 {
                0 => rand() as u32,
                _ => base.wrapping_add((rand() % 6000) as u32).wrapping_sub(1000),
            };
            let len = (rand() % 1500) as usize;
            let flags = SegFlags {
                syn: rand().is_multiple_of(50),
                fin: rand().is_multiple_of(50),
                rst: rand().is_multiple_of(100),
            };
            // Some segments cut by a snap length (wire length up to 3x the capture).
            let wire = if rand().is_multiple_of(3) { (len + (rand() % 3000) as usize) as u32 } else { len as u32 };
            r.segment_cut(seq, 0, &payload[..len], wire, flags, &mut budget, &mut |_| {});
            assert!(r.buffered() <= 2000);
            assert!(budget.used() <= 5000);
            assert_eq!(
                budget.used(),
                rs.iter().map(|r| r.buffered()).sum::<usize>()
            );
            if rand().is_multiple_of(500) {
                let r = &mut rs[(rand() % 4) as usize];
                r.flush(0, &mut budget, &mut |_| {});
            }
        }
        for r in &mut rs {
            r.flush(0, &mut budget, &mut |_| {});
        }
        assert_eq!(budget.used(), 0);
        for _ in 0..2000 {
            let g: Vec<u8> = (0..rand() % 400).map(|_| rand() as u8).collect();
            fuzz(&g);
        }
    }

    /// Random segmentation, reordering and duplication of a known stream:
    /// with enough buffer the output is the stream; never a panic.
    #[test]
    fn random_shuffles() {
        let data: Vec<u8> = (0..2000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut rand = crate::xorshift(0x1234_5678u64);
        for round in 0..200 {
            let isn = rand() as u32;
            let mut segs = Vec::new();
            let mut i = 0usize;
            while i < data.len() {
                let len = 1 + (rand() % 300) as usize;
                let end = (i + len).min(data.len());
                segs.push((i, end));
                if rand().is_multiple_of(4) {
                    // an overlapping retransmit
                    let s = i.saturating_sub((rand() % 50) as usize);
                    segs.push((s, end));
                }
                i = end;
            }
            for k in 0..segs.len() {
                let j = k + (rand() % 4) as usize;
                if j < segs.len() {
                    segs.swap(k, j);
                }
            }
            let small = round % 3 == 0;
            let mut r = Reassembler::new(if small { 200 } else { 1 << 20 });
            let mut b = Budget::new(1 << 20);
            let mut out = Vec::new();
            r.segment(isn, 0, &[], SYN, &mut b, &mut |_| {});
            for (s, e) in &segs {
                let seq = isn.wrapping_add(1).wrapping_add(*s as u32);
                r.segment(seq, 0, &data[*s..*e], N, &mut b, &mut |c| out.push(c.into()));
            }
            r.flush(0, &mut b, &mut |c| out.push(c.into()));
            let got = joined(&out);
            assert_eq!(b.used(), 0);
            if small {
                assert!(got.len() <= data.len());
                for (g, d) in got.iter().zip(&data) {
                    assert!(*g == b'_' || g == d);
                }
            } else {
                assert_eq!(got, data, "round {round}");
            }
        }
    }
}

/// Real captures through the reassembler into the HTTP parser, with segments
/// reordered and duplicated: the transactions must be those of the capture
/// read in order.
#[cfg(test)]
mod pcap_test {
    use super::*;
    use crate::http::{HttpParser, HttpTx};
    use crate::testutil::{run_parser, tcp_events, tcp_segments, Ev};
    use crate::{Detail, Dir, ParseConfig, StreamParser, Transaction};

    fn summary(t: &[Transaction]) -> Vec<(String, String, u16, u64, u64, u64)> {
        let mut v: Vec<_> = t
            .iter()
            .map(|t| {
                let Detail::Http(h) = &t.detail else { panic!() };
                let h: &HttpTx = h;
                (
                    h.method.to_string(),
                    h.uri.to_string(),
                    h.status_code,
                    h.request_body_len,
                    h.response_body_len + h.response_missing_bytes,
                    t.response.map_or(0, |s| s.bytes),
                )
            })
            .collect();
        v.sort();
        v
    }

    type Streams = std::collections::HashMap<(usize, Dir), Vec<u8>>;

    /// Per (connection, direction): the bytes, with `_` for each missing byte.
    fn expected_bytes(file: &str, port: u16) -> Streams {
        let mut m = Streams::new();
        for e in tcp_events(file, &[port]) {
            match e {
                Ev::Data {
                    conn, dir, data, ..
                } => m.entry((conn, dir)).or_default().extend_from_slice(&data),
                Ev::Gap { conn, dir, len, .. } => m
                    .entry((conn, dir))
                    .or_default()
                    .extend(std::iter::repeat_n(b'_', len as usize)),
            }
        }
        m
    }

    #[test]
    fn shuffled_captures_reassemble() {
        let mut rand = crate::xorshift(0xdead_beef_cafe_f00du64);
        let cases = [
            ("packetbeat/pcaps/wsgi_drum.pcap", 8888u16),
            ("packetbeat/pcaps/http_basicauth.pcap", 80),
            ("packetbeat/pcaps/http_10_connection_close.pcap", 8000),
            ("packetbeat/pcaps/http_get_2k_file.pcap", 8000),
            ("packetbeat/pcaps/gap_in_stream.pcap", 8000),
            ("zeek/http_no_crlf/no_crlf.pcap", 80),
            ("zeek/http_m57_long_gap/m57-long-49583-80.pcap", 80),
        ];
        let cfg = ParseConfig::default();
        for (file, port) in cases {
            let segs = tcp_segments(file, &[port]);
            // 1. In capture order, reassembler + parser = the in-order helper + parser.
            let want = summary(
                &run_parser(&tcp_events(file, &[port]), || {
                    Box::new(HttpParser::new(&cfg))
                })
                .concat(),
            );
            let mut budget = Budget::new(1 << 20);
            let mut streams: Vec<[Reassembler; 2]> = Vec::new();
            let mut parsers: Vec<HttpParser> = Vec::new();
            let mut out = Vec::new();
            let mut last = 0;
            for s in &segs {
                while streams.len() <= s.conn {
                    streams.push([Reassembler::new(256 * 1024), Reassembler::new(256 * 1024)]);
                    parsers.push(HttpParser::new(&cfg));
                }
                let d = if s.dir == Dir::ToServer { 0 } else { 1 };
                let p = &mut parsers[s.conn];
                streams[s.conn][d].segment(
                    s.seq,
                    s.ts_ns,
                    &s.payload,
                    s.flags,
                    &mut budget,
                    &mut |c| match c {
                        Chunk::Data { ts_ns, data } => p.data(s.dir, ts_ns, data, &mut out),
                        Chunk::Gap { ts_ns, len } => p.gap(s.dir, ts_ns, len, &mut out),
                        Chunk::Cut { ts_ns, len } => p.cut(s.dir, ts_ns, len, &mut out),
                    },
                );
                last = s.ts_ns;
            }
            for (c, p) in parsers.iter_mut().enumerate() {
                for (d, dir) in [Dir::ToServer, Dir::ToClient].into_iter().enumerate() {
                    streams[c][d].flush(last, &mut budget, &mut |ch| match ch {
                        Chunk::Data { ts_ns, data } => p.data(dir, ts_ns, data, &mut out),
                        Chunk::Gap { ts_ns, len } => p.gap(dir, ts_ns, len, &mut out),
                        Chunk::Cut { ts_ns, len } => p.cut(dir, ts_ns, len, &mut out),
                    });
                }
                p.finish(last, &mut out);
            }
            assert_eq!(budget.used(), 0, "{file}");
            assert_eq!(summary(&out), want, "{file}");

            // 2. Each direction reordered and duplicated: the same bytes come out.
            let want_bytes = expected_bytes(file, port);
            assert!(!want_bytes.is_empty());
            for round in 0..5 {
                let mut order: Vec<usize> = (0..segs.len()).collect();
                for k in 0..order.len() {
                    let j = k + (rand() % 8) as usize;
                    let (a, b) = (
                        &segs[order[k]],
                        segs.get(order.get(j).copied().unwrap_or(usize::MAX)),
                    );
                    // Keep each direction's SYN first so the ISN is learned from it.
                    if let Some(b) = b {
                        if a.conn == b.conn && a.dir == b.dir && !a.flags.syn && !b.flags.syn {
                            order.swap(k, j);
                        }
                    }
                }
                let dups: Vec<usize> = order.iter().copied().filter(|_| rand().is_multiple_of(8)).collect();
                for d in dups {
                    let at = (rand() as usize) % order.len();
                    let first = order.iter().position(|&o| o == d).unwrap_or(0);
                    order.insert(at.max(first + 1), d);
                }
                let mut budget = Budget::new(1 << 20);
                let mut streams: std::collections::HashMap<(usize, Dir), Reassembler> =
                    Default::default();
                let mut got = Streams::new();
                for &i in &order {
                    let s = &segs[i];
                    let r = streams
                        .entry((s.conn, s.dir))
                        .or_insert_with(|| Reassembler::new(512 * 1024));
                    let g = got.entry((s.conn, s.dir)).or_default();
                    r.segment(
                        s.seq,
                        s.ts_ns,
                        &s.payload,
                        s.flags,
                        &mut budget,
                        &mut |c| match c {
                            Chunk::Data { data, .. } => g.extend_from_slice(data),
                            Chunk::Gap { len, .. } | Chunk::Cut { len, .. } => {
                                g.extend(std::iter::repeat_n(b'_', len as usize))
                            }
                        },
                    );
                }
                for (k, r) in streams.iter_mut() {
                    let g = got.entry(*k).or_default();
                    r.flush(0, &mut budget, &mut |c| match c {
                        Chunk::Data { data, .. } => g.extend_from_slice(data),
                        Chunk::Gap { len, .. } | Chunk::Cut { len, .. } => {
                            g.extend(std::iter::repeat_n(b'_', len as usize))
                        }
                    });
                }
                got.retain(|_, v| !v.is_empty());
                assert_eq!(budget.used(), 0);
                for (k, v) in &want_bytes {
                    let g = got.get(k).map_or(&[][..], |g| &g[..]);
                    // The capture-order helper cannot see a hole at the very
                    // end (no later segment); the reassembler reports it at flush.
                    assert!(
                        g.starts_with(v) && g[v.len()..].iter().all(|&b| b == b'_'),
                        "{file} round {round} {k:?}: {} vs {}",
                        g.len(),
                        v.len()
                    );
                }
                assert_eq!(got.len(), want_bytes.len(), "{file}");
            }
        }
    }
}
