//! A hashed timer wheel driven by packet time.
//!
//! Connections are never touched by the wheel per packet: each one has a
//! single pending check (its earliest possible deadline). When that check
//! comes due the owner recomputes the real deadline from the connection's
//! state and either expires it or schedules the next check, so a busy
//! connection costs one wheel operation per timeout period, not per packet.
//! Entries of the slot that covers "now" move to a sorted run so deadlines
//! fire in exact time order, as Zeek's timer manager fires them.
//!
//! A pending check in a slot is 8 bytes (one per open connection): its
//! connection's index and the low 32 bits of its deadline's place in time,
//! the ns within its tick (30 bits) and two bits of the tick above the
//! slot's own nine. A slot's entries lie less than [`SPAN`] ticks ahead of
//! the current tick, so the tick is found again from those 11 bits; a
//! check farther ahead waits whole in a heap ([`TimerWheel::far`]) until it
//! comes within reach (issue 35: 16 bytes per connection before).
//!
//! A slot's checks are kept in chunks of [`CHUNK`] taken from a pool the
//! whole wheel shares ([`Slot`]), not in a `Vec` of its own: a `Vec` that
//! doubles holds up to twice its checks, and when a second's worth of new
//! connections lands in one or two slots that slack was another ~8 bytes
//! per connection (issue 35, ninth round). A chunk's slack is at most one
//! chunk per slot.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One tick is 2^30 ns (about 1.07 s).
const TICK_SHIFT: u32 = 30;
const SLOTS: usize = 512;
/// Ticks ahead a slot's entry may lie (four revolutions, ~36.6 min): its
/// tick modulo `SPAN` is the slot (9 bits) and two bits of the entry.
const SPAN: i64 = 4 * SLOTS as i64;

/// A pending check: the connection's table index and its deadline. The
/// owner tells a stale check (its connection rescheduled or gone) by the
/// deadline: the connection's pending deadline differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TimerEntry {
    pub deadline: i64,
    pub idx: u32,
}

/// Bytes of a pending check in a slot ([`pack`]).
pub const BYTES_PER_CHECK: usize = std::mem::size_of::<u64>();

/// Entries the `due` run and the `due_now` heap keep room for once drained (2 KiB).
const KEEP_SLOT_CAPACITY: usize = 256;

/// Checks per chunk of a slot (2 KiB): the most a slot holds unused.
const CHUNK: usize = 256;

/// Chunks kept for reuse once emptied (512 KiB); more are freed.
const KEEP_SPARE_CHUNKS: usize = 256;

/// A slot's packed checks ([`pack`]), in order of arrival, in chunks of
/// [`CHUNK`]; the last chunk is filled up to `len`.
#[derive(Default)]
struct Slot {
    chunks: Vec<Box<[u64]>>,
    len: usize,
}

impl Slot {
    /// Appends a check, taking a chunk from `spare` (or a new one) when the last is full.
    #[inline]
    fn push(&mut self, p: u64, spare: &mut Vec<Box<[u64]>>) {
        let at = self.len % CHUNK;
        if at == 0 {
            self.chunks.push(spare.pop().unwrap_or_else(|| vec![0; CHUNK].into_boxed_slice()));
        }
        if let Some(c) = self.chunks.last_mut() {
            c[at] = p;
        }
        self.len += 1;
    }

    /// Keeps the checks `keep` accepts, in their order; the emptied chunks go to `spare`.
    fn retain(&mut self, spare: &mut Vec<Box<[u64]>>, mut keep: impl FnMut(u64) -> bool) {
        let chunks = std::mem::take(&mut self.chunks);
        let mut left = self.len;
        self.len = 0;
        for c in chunks {
            let n = left.min(CHUNK);
            left -= n;
            for &p in &c[..n] {
                if keep(p) {
                    self.push(p, spare);
                }
            }
            spare.push(c);
        }
    }

    /// Every check, and the slot emptied (its chunks to `spare`).
    fn drain(&mut self, spare: &mut Vec<Box<[u64]>>, mut f: impl FnMut(u64)) {
        self.retain(spare, |p| {
            f(p);
            false
        });
    }

    /// Bytes the slot's chunks take.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.chunks.len() * CHUNK * std::mem::size_of::<u64>()
    }
}

/// A slot's entry: `idx << 32 | (tick / SLOTS mod 4) << 30 | ns within the tick`.
#[inline]
fn pack(e: TimerEntry) -> u64 {
    // Shifts, not divisions: a negative tick's bits as its modulo's.
    let hi = ((e.deadline >> (TICK_SHIFT + SLOTS.trailing_zeros())) & 3) as u64;
    u64::from(e.idx) << 32 | hi << TICK_SHIFT | (e.deadline & ((1 << TICK_SHIFT) - 1)) as u64
}

/// The entry [`pack`] made, found in slot `slot` by a wheel whose entries
/// lie at tick `base` or after (and less than [`SPAN`] ticks later).
#[inline]
fn unpack(p: u64, slot: usize, base: i64) -> TimerEntry {
    let low = p as u32;
    let tick_mod = i64::from(low >> TICK_SHIFT) * SLOTS as i64 + slot as i64;
    let tick = base + (tick_mod - base).rem_euclid(SPAN);
    TimerEntry { deadline: tick << TICK_SHIFT | i64::from(low & ((1 << TICK_SHIFT) - 1)), idx: (p >> 32) as u32 }
}

pub struct TimerWheel {
    /// Entries due in the next [`SPAN`] ticks, packed ([`pack`]), by tick modulo [`SLOTS`].
    slots: Vec<Slot>,
    /// Emptied chunks, for the next slot that needs one (at most
    /// [`KEEP_SPARE_CHUNKS`] are kept).
    spare: Vec<Box<[u64]>>,
    /// Entries [`SPAN`] ticks or more ahead when scheduled, earliest first:
    /// moved into `slots` as the wheel comes within reach.
    far: BinaryHeap<Reverse<TimerEntry>>,
    /// Entries of slots up to `current_tick`, sorted latest first (the next
    /// to fire is the last). A slot's entries are sorted once as they move
    /// here, instead of each being pushed into and popped out of a heap: at a
    /// million connections the heap's pops were 5.7% of the packet thread's
    /// time.
    due: Vec<TimerEntry>,
    /// Entries scheduled straight into the current tick (a heap: inserting
    /// them into `due` in order moved the whole run when a burst of new
    /// connections all landed in the wheel's first tick). Fired merged with
    /// `due` in deadline order.
    due_now: BinaryHeap<Reverse<TimerEntry>>,
    /// The earliest deadline in `due` and `due_now` (`i64::MAX` when both
    /// are empty), kept so the per-packet test reads one field.
    next_deadline: i64,
    current_tick: i64,
    started: bool,
    /// The earliest time advancing to which would do anything: the next
    /// tick's start or `next_deadline`, whichever comes first (`i64::MAX`
    /// before the first entry). Kept by [`TimerWheel::set_quiet_until`] so
    /// that the per-packet test is one compare: testing the three fields
    /// cost 6 instructions a packet more on the MySQL captures
    /// (BENCHMARKS.md, branch pkt53).
    quiet_until: i64,
    len: usize,
}

impl Default for TimerWheel {
    fn default() -> Self {
        Self::new()
    }
}

impl TimerWheel {
    pub fn new() -> Self {
        TimerWheel {
            slots: (0..SLOTS).map(|_| Slot::default()).collect(),
            spare: Vec::new(),
            far: BinaryHeap::new(),
            due: Vec::new(),
            due_now: BinaryHeap::new(),
            next_deadline: i64::MAX,
            current_tick: 0,
            started: false,
            quiet_until: i64::MAX,
            len: 0,
        }
    }

    /// Entries pending, stale ones (of ended connections) included.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Keeps only the entries `keep` accepts: removes the stale checks of
    /// connections ended early (evicted), which would otherwise stay until
    /// their deadline, however far, and grow with every eviction.
    pub fn retain(&mut self, mut keep: impl FnMut(&TimerEntry) -> bool) {
        let mut len = 0;
        let base = self.current_tick + 1;
        for (slot, s) in self.slots.iter_mut().enumerate() {
            s.retain(&mut self.spare, |p| keep(&unpack(p, slot, base)));
            len += s.len;
        }
        self.spare.truncate(KEEP_SPARE_CHUNKS);
        self.far.retain(|Reverse(e)| keep(e));
        self.due.retain(|e| keep(e));
        self.due_now.retain(|Reverse(e)| keep(e));
        len += self.far.len() + self.due.len() + self.due_now.len();
        self.next_deadline = self.next_due().map_or(i64::MAX, |e| e.deadline);
        self.set_quiet_until();
        self.len = len;
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn tick_of(t: i64) -> i64 {
        t >> TICK_SHIFT
    }

    /// Sets `quiet_until` from the fields it summarises; called by every
    /// method that moves `started`, `current_tick` or `next_deadline`.
    fn set_quiet_until(&mut self) {
        self.quiet_until = if self.started {
            // `tick_of(now) <= current_tick` is `now` before the next tick's start.
            let next_tick = (self.current_tick + 1).saturating_mul(1 << TICK_SHIFT);
            next_tick.min(self.next_deadline)
        } else {
            i64::MAX
        };
    }

    pub fn schedule(&mut self, e: TimerEntry) {
        if !self.started {
            // A tick before the first deadline: the checks of the new
            // connections that follow in that tick go to its slot, 8 bytes
            // each, not to `due_now`'s whole entries (16 bytes in a heap that
            // doubles; at the start of a capture, or of `wirelog-bench
            // conns`, a second's worth of connections).
            self.current_tick = Self::tick_of(e.deadline) - 1;
            self.started = true;
        }
        self.len += 1;
        let tick = Self::tick_of(e.deadline);
        if tick <= self.current_tick {
            self.due_now.push(Reverse(e));
            self.next_deadline = self.next_deadline.min(e.deadline);
        } else {
            self.place(e, tick);
        }
        self.set_quiet_until();
    }

    /// Puts an entry of a later tick than the current one in its slot, or
    /// in `far` when it lies beyond the slots' reach.
    #[inline]
    fn place(&mut self, e: TimerEntry, tick: i64) {
        if tick - self.current_tick < SPAN {
            self.slots[(tick as usize) % SLOTS].push(pack(e), &mut self.spare);
        } else {
            self.far.push(Reverse(e));
        }
    }

    /// Moves the entries of `far` that came within reach into their slots,
    /// and those due by the current tick to `due`.
    fn pull_far(&mut self) {
        while let Some(Reverse(e)) = self.far.peek().copied() {
            let tick = Self::tick_of(e.deadline);
            if tick - self.current_tick >= SPAN {
                break;
            }
            self.far.pop();
            if tick <= self.current_tick {
                self.due.push(e);
            } else {
                self.place(e, tick);
            }
        }
    }

    /// The earliest entry of the current tick, from either list.
    #[inline]
    fn next_due(&self) -> Option<TimerEntry> {
        match (self.due.last(), self.due_now.peek()) {
            (Some(a), Some(Reverse(b))) => Some(*a.min(b)),
            (Some(a), None) => Some(*a),
            (None, Some(Reverse(b))) => Some(*b),
            (None, None) => None,
        }
    }

    /// True when advancing to `now` would fire nothing (the per-packet fast path).
    #[inline]
    pub fn nothing_due(&self, now: i64) -> bool {
        now < self.quiet_until || !self.started
    }

    /// Moves the wheel to `now` and appends to `due` every entry whose
    /// deadline is `<= now`, in deadline order. Entries that land in a wheel
    /// slot but belong to a later revolution stay there. Cheap when nothing is due.
    #[inline]
    pub fn advance(&mut self, now: i64, due: &mut Vec<TimerEntry>) {
        if !self.started {
            return;
        }
        let target = Self::tick_of(now);
        if target <= self.current_tick && self.next_deadline > now {
            return;
        }
        self.advance_slow(now, target, due);
    }

    fn advance_slow(&mut self, now: i64, target: i64, due: &mut Vec<TimerEntry>) {
        // Jumping over more than a revolution: every slot is visited once.
        let steps = (target - self.current_tick).clamp(0, SLOTS as i64);
        let before = self.due.len();
        if steps > 0 {
            // Entries of `far` within reach of the ticks about to be visited.
            self.pull_far();
        }
        for _ in 0..steps {
            self.current_tick += 1;
            let slot = (self.current_tick as usize) % SLOTS;
            // The slot's entries lie at this tick or later (each was less
            // than SPAN ticks ahead of a tick before this one).
            let (current, due) = (self.current_tick, &mut self.due);
            self.slots[slot].retain(&mut self.spare, |p| {
                let e = unpack(p, slot, current);
                let now_due = Self::tick_of(e.deadline) <= target;
                if now_due {
                    due.push(e);
                }
                !now_due
            });
            // Emptied chunks wait for the next slot to fill, up to a bound:
            // a burst's worth kept would hold memory long after those
            // connections ended.
            self.spare.truncate(KEEP_SPARE_CHUNKS);
        }
        if target > self.current_tick {
            self.current_tick = target;
        }
        if steps > 0 {
            // After a jump: what is due now, or came within reach.
            self.pull_far();
        }
        if self.due.len() > before {
            self.due.sort_unstable_by(|a, b| b.cmp(a));
        }
        while let Some(e) = self.next_due() {
            if e.deadline > now {
                break;
            }
            match self.due_now.peek() {
                Some(Reverse(h)) if *h == e => {
                    self.due_now.pop();
                }
                _ => {
                    self.due.pop();
                }
            }
            self.len -= 1;
            due.push(e);
        }
        self.next_deadline = self.next_due().map_or(i64::MAX, |e| e.deadline);
        self.set_quiet_until();
        if self.due.is_empty() && self.due.capacity() > KEEP_SLOT_CAPACITY * 16 {
            self.due.shrink_to(KEEP_SLOT_CAPACITY);
        }
        if self.due_now.is_empty() && self.due_now.capacity() > KEEP_SLOT_CAPACITY * 16 {
            self.due_now.shrink_to(KEEP_SLOT_CAPACITY);
        }
    }

    /// Removes and returns every pending entry (end of input).
    pub fn drain_all(&mut self) -> Vec<TimerEntry> {
        let mut all: Vec<TimerEntry> = std::mem::take(&mut self.due);
        all.extend(self.due_now.drain().map(|Reverse(e)| e));
        all.extend(self.far.drain().map(|Reverse(e)| e));
        self.next_deadline = i64::MAX;
        self.set_quiet_until();
        let base = self.current_tick + 1;
        for (slot, s) in self.slots.iter_mut().enumerate() {
            s.drain(&mut self.spare, |p| all.push(unpack(p, slot, base)));
        }
        self.spare.truncate(KEEP_SPARE_CHUNKS);
        self.len = 0;
        all.sort();
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    #[test]
    fn fires_in_deadline_order_and_only_when_due() {
        let mut w = TimerWheel::new();
        let base = 1_700_000_000 * S;
        for (i, d) in [5, 1, 300, 2, 700].iter().enumerate() {
            w.schedule(TimerEntry {
                deadline: base + d * S,
                idx: i as u32
            });
        }
        let mut due = Vec::new();
        let idx = |due: &Vec<TimerEntry>| due.iter().map(|e| e.idx).collect::<Vec<_>>();
        w.advance(base + 3 * S, &mut due);
        assert_eq!(idx(&due), vec![1, 3]);
        w.advance(base + 299 * S, &mut due);
        assert_eq!(idx(&due), vec![1, 3, 0]);
        // 700 s is past one revolution of the wheel (~549 s): must not fire early.
        w.advance(base + 600 * S, &mut due);
        assert_eq!(idx(&due), vec![1, 3, 0, 2]);
        w.advance(base + 700 * S, &mut due);
        assert_eq!(idx(&due), vec![1, 3, 0, 2, 4]);
        assert!(w.is_empty());
    }

    /// `nothing_due`'s one compare against `quiet_until` answers what the
    /// three fields it summarises say, around every step of a run.
    #[test]
    fn nothing_due_matches_the_fields_it_summarises() {
        let old = |w: &TimerWheel, now: i64| {
            !w.started || (TimerWheel::tick_of(now) <= w.current_tick && w.next_deadline > now)
        };
        let mut w = TimerWheel::new();
        let base = 1_700_000_000 * S;
        let probe = |w: &TimerWheel| {
            for at in [-2 * S, -1, 0, 1, S / 2, S, 3 * S, 5 * S, 600 * S, 10_000 * S] {
                for d in [-1, 0, 1] {
                    let now = base + at + d;
                    assert_eq!(w.nothing_due(now), old(w, now), "at {now}");
                }
            }
            assert_eq!(w.nothing_due(i64::MAX), old(w, i64::MAX));
        };
        probe(&w);
        let mut due = Vec::new();
        for (i, d) in [5, 1, 300, 2, 700, 0].iter().enumerate() {
            w.schedule(TimerEntry { deadline: base + d * S, idx: i as u32 });
            probe(&w);
        }
        for t in [0, 1, 3, 299, 600, 700] {
            w.advance(base + t * S, &mut due);
            probe(&w);
        }
        w.retain(|_| true);
        probe(&w);
        let _ = w.drain_all();
        probe(&w);
    }

    #[test]
    fn entries_scheduled_into_the_current_tick_fire_in_order_with_the_rest() {
        let mut w = TimerWheel::new();
        let base = 1_700_000_000 * S;
        let e = |ms: i64, idx: u32| TimerEntry { deadline: base + ms * 1_000_000, idx };
        // A slot's worth, scheduled out of order, moves to the due run at once.
        for (i, ms) in [2900, 2100, 2500, 2300, 2700].iter().enumerate() {
            w.schedule(e(*ms, i as u32));
        }
        let mut due = Vec::new();
        w.advance(base + 2200 * 1_000_000, &mut due);
        assert_eq!(due.iter().map(|e| e.idx).collect::<Vec<_>>(), vec![1]);
        // Into the current tick: inserted between the entries already due.
        w.schedule(e(2400, 10));
        w.schedule(e(2950, 11));
        w.schedule(e(2300, 12)); // same deadline as idx 3: ordered by idx
        w.advance(base + 3000 * 1_000_000, &mut due);
        let got: Vec<u32> = due.iter().map(|e| e.idx).collect();
        assert_eq!(got, vec![1, 3, 12, 10, 2, 4, 0, 11]);
        assert!(w.is_empty());
    }

    #[test]
    fn a_burst_in_the_first_tick_fires_in_order() {
        let mut w = TimerWheel::new();
        let base = 1_700_000_000 * S;
        // All in the wheel's first tick (one slot: the wheel starts the tick before).
        for i in 0..10_000u32 {
            w.schedule(TimerEntry { deadline: base + (i as i64 * 7919) % 1_000_000, idx: i });
        }
        let mut due = Vec::new();
        w.advance(base + 2 * S, &mut due);
        assert_eq!(due.len(), 10_000);
        assert!(due.windows(2).all(|p| p[0] <= p[1]));
        assert!(w.is_empty());
    }

    #[test]
    fn rescheduling_from_fire_works() {
        let mut w = TimerWheel::new();
        w.schedule(TimerEntry {
            deadline: 10 * S,
            idx: 0,
        });
        let mut n = 0;
        let mut due = Vec::new();
        loop {
            due.clear();
            w.advance(100 * S, &mut due);
            if due.is_empty() {
                break;
            }
            for e in &due {
                n += 1;
                if e.deadline < 50 * S {
                    w.schedule(TimerEntry {
                        deadline: e.deadline + 10 * S,
                        ..*e
                    });
                }
            }
        }
        assert_eq!(n, 5);
    }

    /// Against a reference (every pending entry in a sorted list): deadlines
    /// near and far (past the slots' reach of SPAN ticks, and past i64's
    /// sign), advances by small steps and by jumps of many revolutions,
    /// entries scheduled while others fire: the same entries fire, at the
    /// same advance, in the same order, and `retain`/`drain_all` see the
    /// entries whole.
    #[test]
    fn packed_slots_and_far_entries_fire_as_a_sorted_list() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for base in [1_700_000_000 * S, -5 * S, 0] {
            let mut w = TimerWheel::new();
            let mut reference: Vec<TimerEntry> = Vec::new();
            let mut now = base;
            let mut idx = 0u32;
            for round in 0..400 {
                for _ in 0..(next() % 20) {
                    let ahead = match next() % 4 {
                        0 => (next() % (2 * S as u64)) as i64,
                        1 => (next() % (600 * S as u64)) as i64,
                        2 => (next() % (5_000 * S as u64)) as i64,
                        _ => (next() % (100_000 * S as u64)) as i64,
                    };
                    let e = TimerEntry { deadline: now + ahead, idx };
                    idx += 1;
                    w.schedule(e);
                    reference.push(e);
                }
                now += match next() % 8 {
                    0 => (next() % (3_000 * S as u64)) as i64,
                    1 => (next() % (50_000 * S as u64)) as i64,
                    _ => (next() % (3 * S as u64)) as i64,
                };
                let mut due = Vec::new();
                w.advance(now, &mut due);
                reference.sort();
                let n = reference.partition_point(|e| e.deadline <= now);
                let want: Vec<TimerEntry> = reference.drain(..n).collect();
                assert_eq!(due, want, "base {base}, round {round}");
                assert_eq!(w.len(), reference.len());
                if round % 50 == 49 {
                    // Drop every third entry, as a compaction of stale checks does.
                    w.retain(|e| e.idx % 3 != 0);
                    reference.retain(|e| e.idx % 3 != 0);
                    assert_eq!(w.len(), reference.len());
                }
            }
            reference.sort();
            assert_eq!(w.drain_all(), reference);
            assert!(w.is_empty());
        }
    }

    /// A slot's entry is 8 bytes: the wheel holds one per open connection.
    #[test]
    fn a_pending_check_is_eight_bytes() {
        assert_eq!(std::mem::size_of_val(&pack(TimerEntry { deadline: 5 * S, idx: 1 })), 8);
        let mut w = TimerWheel::new();
        w.schedule(TimerEntry { deadline: 0, idx: 0 });
        w.schedule(TimerEntry { deadline: 5 * S, idx: 1 });
        w.schedule(TimerEntry { deadline: 1, idx: 2 });
        // The first deadline's tick too: the wheel starts a tick before it.
        assert_eq!(w.slots.iter().map(|s| s.len).sum::<usize>(), 3);
        assert!(w.due_now.is_empty() && w.due.is_empty());
    }

    /// A million checks in two slots (a second's worth of new connections)
    /// take their 8 bytes each and at most one chunk of slack per slot,
    /// where slots of their own that doubled took up to 16; fired and
    /// rescheduled, they reuse the emptied chunks.
    #[test]
    fn slots_hold_their_checks_in_chunks() {
        let mut w = TimerWheel::new();
        let base = 1_700_000_000 * S;
        w.schedule(TimerEntry { deadline: base, idx: u32::MAX });
        let n = 1_000_000u32;
        for i in 0..n {
            w.schedule(TimerEntry { deadline: base + 5 * S + i64::from(i) * 1000, idx: i });
        }
        let bytes: usize = w.slots.iter().map(Slot::bytes).sum();
        let used = n as usize * 8;
        assert!(bytes >= used && bytes <= used + 2 * CHUNK * 8, "{bytes} bytes for {used}");
        let mut due = Vec::new();
        w.advance(base + 5 * S + 500_000_000, &mut due);
        // The first check, and i = 0..=500,000.
        assert_eq!(due.len(), 500_002);
        assert!(due.windows(2).all(|p| p[0] <= p[1]));
        // The fired half scheduled again, 300 s on: chunks the fired ones left.
        for e in due.drain(1..) {
            w.schedule(TimerEntry { deadline: e.deadline + 300 * S, idx: e.idx });
        }
        let bytes: usize = w.slots.iter().map(Slot::bytes).sum::<usize>() + w.spare.len() * CHUNK * 8;
        assert!(bytes <= used + 4 * CHUNK * 8 + KEEP_SPARE_CHUNKS * CHUNK * 8, "{bytes} bytes for {used}");
        w.advance(base + 400 * S, &mut due);
        assert_eq!(due.len(), 1 + n as usize);
        assert!(due[1..].windows(2).all(|p| p[0] <= p[1]));
        assert!(w.is_empty());
    }
}
