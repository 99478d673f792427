//! IPv4 and IPv6 fragment reassembly.
//!
//! Incomplete datagrams live in a hash map keyed by (source, destination,
//! identification, protocol for IPv4), bounded in memory and in packet time:
//!
//! - Overlaps are resolved first-wins: bytes already held are kept and a later
//!   fragment only fills the holes. That is what Zeek's reassembler does, so
//!   both see the same datagram; duplicates fall out of the same rule.
//! - A datagram times out `timeout_ns` of packet time after its first fragment
//!   arrived. Expiry is checked lazily, only when a fragment is inserted, by
//!   looking at the oldest datagrams: packets that are not fragments never pay
//!   for it.
//! - Memory is charged as the datagram's buffer length plus a fixed overhead;
//!   when a fragment would take the total over the budget, the oldest
//!   datagrams are evicted until it fits.
//!
//! The insertion order is a `VecDeque` of (key, generation). Entries whose
//! datagram completed stay in it until they reach the front or the deque is
//! compacted (when it grows past twice the live count), which keeps removal
//! O(1) without an intrusive list.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};

use crate::{DecodeStats, IpAddr16, TimestampNs};

/// Charged per incomplete datagram on top of its buffer (map and deque
/// entries, range list), so that many empty datagrams also hit the budget.
pub(crate) const DATAGRAM_OVERHEAD: usize = 256;

/// Largest payload a datagram can reassemble to (the IP length fields are 16 bits).
pub(crate) const MAX_PAYLOAD: u32 = 65535;

/// More disjoint pieces than this in one datagram is an attack or garbage,
/// and would make each insertion slow: the datagram is dropped.
const MAX_PIECES: usize = 64;

/// Buffers kept for reuse, so that steady fragment traffic does not allocate.
const POOL_LEN: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct FragKey {
    pub src: IpAddr16,
    pub dst: IpAddr16,
    pub id: u32,
    /// IPv4 protocol; 0 for IPv6, whose key has no protocol (RFC 8200).
    pub proto: u8,
    pub v6: bool,
}

/// What the offset-0 fragment says about the whole datagram.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FirstInfo {
    /// IPv4 header length, or 40 + the unfragmentable extension headers.
    pub hdr_len: u32,
    /// Protocol of the fragmentable part.
    pub proto: u8,
    pub ttl: u8,
    /// IPv6: destination for the pseudo-header (a routing header may change it).
    pub final_dst: [u8; 16],
}

/// One fragment's payload (after the IPv4 header or the IPv6 fragment header).
pub(crate) struct Fragment<'a> {
    pub offset: u32,
    pub more: bool,
    pub data: &'a [u8],
}

pub(crate) enum Insert {
    Held,
    Dropped,
    /// The datagram is whole: `data` is its payload, exactly `total` bytes.
    Complete {
        data: Vec<u8>,
        first: FirstInfo,
    },
}

struct Datagram {
    gen: u64,
    first_ts: TimestampNs,
    /// Payload bytes at their offsets; the length is the furthest end seen.
    data: Vec<u8>,
    /// Received byte ranges, sorted, disjoint and not adjacent.
    have: Vec<(u32, u32)>,
    /// Payload length, known once the last fragment (MF = 0) arrived.
    total: Option<u32>,
    first: Option<FirstInfo>,
    frags: u64,
}

impl Datagram {
    fn cost(&self) -> usize {
        DATAGRAM_OVERHEAD + self.data.len()
    }

    fn is_complete(&self) -> bool {
        match (self.total, self.first) {
            (Some(0), Some(_)) => true,
            (Some(t), Some(_)) => self.have.len() == 1 && self.have[0] == (0, t),
            _ => false,
        }
    }
}

pub(crate) struct FragTable {
    map: HashMap<FragKey, Datagram>,
    order: VecDeque<(FragKey, u64)>,
    next_gen: u64,
    bytes: usize,
    max_bytes: usize,
    timeout_ns: i64,
    data_pool: Vec<Vec<u8>>,
    range_pool: Vec<Vec<(u32, u32)>>,
}

impl FragTable {
    pub fn new(max_bytes: usize, timeout_ns: i64) -> Self {
        FragTable {
            map: HashMap::new(),
            order: VecDeque::new(),
            next_gen: 0,
            bytes: 0,
            max_bytes,
            timeout_ns,
            data_pool: Vec::new(),
            range_pool: Vec::new(),
        }
    }

    /// Incomplete datagrams held, and the bytes charged for them.
    pub fn held(&self) -> (usize, usize) {
        (self.map.len(), self.bytes)
    }

    /// Gives back a buffer (a previous reassembled datagram) for reuse.
    pub fn recycle(&mut self, mut buf: Vec<u8>) {
        if self.data_pool.len() < POOL_LEN && buf.capacity() <= MAX_PAYLOAD as usize + 1 {
            buf.clear();
            self.data_pool.push(buf);
        }
    }

    fn release(&mut self, d: Datagram, stats: &mut DecodeStats) {
        self.bytes -= d.cost();
        stats.frag_fragments_dropped += d.frags;
        self.recycle(d.data);
        let mut have = d.have;
        if self.range_pool.len() < POOL_LEN {
            have.clear();
            self.range_pool.push(have);
        }
    }

    /// Removes the oldest live datagram.
    fn pop_oldest(&mut self) -> Option<(FragKey, Datagram)> {
        while let Some((key, gen)) = self.order.pop_front() {
            if self.map.get(&key).is_some_and(|d| d.gen == gen) {
                return self.map.remove(&key).map(|d| (key, d));
            }
        }
        None
    }

    /// Drops datagrams whose first fragment is older than the timeout.
    fn expire(&mut self, now: TimestampNs, stats: &mut DecodeStats) {
        while let Some(&(key, gen)) = self.order.front() {
            match self.map.get(&key) {
                Some(d) if d.gen == gen => {
                    if now.saturating_sub(d.first_ts) <= self.timeout_ns {
                        return;
                    }
                    if let Some(d) = self.map.remove(&key) {
                        stats.frag_timed_out += 1;
                        self.release(d, stats);
                    }
                }
                // A datagram that completed or was dropped since.
                _ => {}
            }
            self.order.pop_front();
        }
    }

    fn compact(&mut self) {
        if self.order.len() > 2 * self.map.len() + 64 {
            let map = &self.map;
            self.order.retain(|(k, g)| map.get(k).is_some_and(|d| d.gen == *g));
        }
    }

    pub fn insert(
        &mut self,
        key: FragKey,
        now: TimestampNs,
        frag: Fragment<'_>,
        first: Option<FirstInfo>,
        stats: &mut DecodeStats,
    ) -> Insert {
        self.expire(now, stats);
        let start = frag.offset;
        let end = start + frag.data.len() as u32;
        debug_assert!(end <= MAX_PAYLOAD);

        let have_len = self.map.get(&key).map(|d| d.data.len());
        let need = (end as usize).saturating_sub(have_len.unwrap_or(0))
            + if have_len.is_none() { DATAGRAM_OVERHEAD } else { 0 };
        if need > self.max_bytes {
            return Insert::Dropped;
        }
        while self.bytes + need > self.max_bytes {
            let Some((victim, d)) = self.pop_oldest() else { break };
            stats.frag_evicted += 1;
            self.release(d, stats);
            if victim == key {
                // The datagram this fragment belongs to was the oldest: it is
                // gone, and so is this fragment.
                return Insert::Dropped;
            }
        }

        let d = match self.map.entry(key) {
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(v) => {
                let gen = self.next_gen;
                self.next_gen += 1;
                self.order.push_back((key, gen));
                self.bytes += DATAGRAM_OVERHEAD;
                v.insert(Datagram {
                    gen,
                    first_ts: now,
                    data: self.data_pool.pop().unwrap_or_default(),
                    have: self.range_pool.pop().unwrap_or_default(),
                    total: None,
                    first: None,
                    frags: 0,
                })
            }
        };

        // A fragment that contradicts the datagram's known end is dropped;
        // the datagram keeps what it has (first wins here too).
        let furthest = d.have.last().map_or(0, |r| r.1);
        let consistent = match (frag.more, d.total) {
            (false, Some(t)) => t == end,
            (false, None) => furthest <= end,
            (true, Some(t)) => end <= t,
            (true, None) => true,
        };
        if !consistent {
            return Insert::Dropped;
        }

        if start < end {
            let (s, e) = (start as usize, end as usize);
            if d.data.len() < e {
                self.bytes += e - d.data.len();
                d.data.resize(e, 0);
            }
            // Copy only into holes: bytes already held win.
            let first_overlap = d.have.partition_point(|r| r.1 <= start);
            let mut pos = s;
            for &(a, b) in &d.have[first_overlap..] {
                let (a, b) = (a as usize, b as usize);
                if a >= e {
                    break;
                }
                if a > pos {
                    d.data[pos..a].copy_from_slice(&frag.data[pos - s..a - s]);
                }
                pos = pos.max(b);
            }
            if pos < e {
                d.data[pos..e].copy_from_slice(&frag.data[pos - s..]);
            }
            add_range(&mut d.have, start, end);
        }
        if !frag.more {
            d.total = Some(end);
        }
        if start == 0 && d.first.is_none() {
            d.first = first;
        }
        d.frags += 1;

        if d.have.len() > MAX_PIECES {
            if let Some(d) = self.map.remove(&key) {
                self.release(d, stats);
            }
            self.compact();
            return Insert::Dropped;
        }
        if !d.is_complete() {
            return Insert::Held;
        }
        let Some(d) = self.map.remove(&key) else { return Insert::Held };
        self.bytes -= d.cost();
        let Datagram { data, mut have, first, .. } = d;
        if self.range_pool.len() < POOL_LEN {
            have.clear();
            self.range_pool.push(have);
        }
        self.compact();
        match first {
            Some(first) => Insert::Complete { data, first },
            None => Insert::Held,
        }
    }
}

/// Adds [s, e) to sorted disjoint ranges, merging what it touches.
fn add_range(have: &mut Vec<(u32, u32)>, s: u32, e: u32) {
    let i = have.partition_point(|r| r.1 < s);
    let mut j = i;
    let (mut ns, mut ne) = (s, e);
    while j < have.len() && have[j].0 <= e {
        ns = ns.min(have[j].0);
        ne = ne.max(have[j].1);
        j += 1;
    }
    have.splice(i..j, std::iter::once((ns, ne)));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: u32) -> FragKey {
        FragKey {
            src: IpAddr16::from_v4([10, 0, 0, 1]),
            dst: IpAddr16::from_v4([10, 0, 0, 2]),
            id,
            proto: 17,
            v6: false,
        }
    }

    fn first() -> Option<FirstInfo> {
        Some(FirstInfo { hdr_len: 20, proto: 17, ttl: 64, final_dst: [0; 16] })
    }

    fn put(t: &mut FragTable, st: &mut DecodeStats, id: u32, ts: i64, off: u32, more: bool, data: &[u8]) -> Insert {
        let f = if off == 0 { first() } else { None };
        t.insert(key(id), ts, Fragment { offset: off, more, data }, f, st)
    }

    fn complete(r: Insert) -> Vec<u8> {
        match r {
            Insert::Complete { data, .. } => data,
            Insert::Held => panic!("held"),
            Insert::Dropped => panic!("dropped"),
        }
    }

    #[test]
    fn ranges_merge() {
        let mut h = Vec::new();
        add_range(&mut h, 8, 16);
        add_range(&mut h, 24, 32);
        assert_eq!(h, [(8, 16), (24, 32)]);
        add_range(&mut h, 16, 24);
        assert_eq!(h, [(8, 32)]);
        add_range(&mut h, 0, 4);
        add_range(&mut h, 40, 48);
        add_range(&mut h, 2, 44);
        assert_eq!(h, [(0, 48)]);
    }

    #[test]
    fn in_order_reversed_and_duplicates() {
        let payload: Vec<u8> = (0..40u8).collect();
        let mut st = DecodeStats::default();
        let mut t = FragTable::new(1 << 20, 1_000);
        assert!(matches!(put(&mut t, &mut st, 1, 0, 0, true, &payload[..16]), Insert::Held));
        assert!(matches!(put(&mut t, &mut st, 1, 0, 16, true, &payload[16..32]), Insert::Held));
        assert_eq!(complete(put(&mut t, &mut st, 1, 0, 32, false, &payload[32..])), payload);
        assert_eq!(t.held(), (0, 0));

        assert!(matches!(put(&mut t, &mut st, 2, 0, 32, false, &payload[32..]), Insert::Held));
        assert!(matches!(put(&mut t, &mut st, 2, 0, 32, false, &payload[32..]), Insert::Held));
        assert!(matches!(put(&mut t, &mut st, 2, 0, 16, true, &payload[16..32]), Insert::Held));
        assert_eq!(complete(put(&mut t, &mut st, 2, 0, 0, true, &payload[..16])), payload);
        assert_eq!(t.held(), (0, 0));
    }

    #[test]
    fn overlap_first_wins() {
        let mut st = DecodeStats::default();
        let mut t = FragTable::new(1 << 20, 1_000);
        assert!(matches!(put(&mut t, &mut st, 1, 0, 8, true, &[1; 16]), Insert::Held));
        // Overlaps both ends of the held piece with different bytes.
        assert!(matches!(put(&mut t, &mut st, 1, 0, 0, true, &[2; 32]), Insert::Held));
        let got = complete(put(&mut t, &mut st, 1, 0, 32, false, &[3; 8]));
        let mut want = vec![2; 8];
        want.extend_from_slice(&[1; 16]);
        want.extend_from_slice(&[2; 8]);
        want.extend_from_slice(&[3; 8]);
        assert_eq!(got, want);
    }

    #[test]
    fn inconsistent_end_dropped() {
        let mut st = DecodeStats::default();
        let mut t = FragTable::new(1 << 20, 1_000);
        assert!(matches!(put(&mut t, &mut st, 1, 0, 16, false, &[1; 8]), Insert::Held));
        assert!(matches!(put(&mut t, &mut st, 1, 0, 16, false, &[1; 16]), Insert::Dropped));
        assert!(matches!(put(&mut t, &mut st, 1, 0, 24, true, &[1; 8]), Insert::Dropped));
        assert_eq!(complete(put(&mut t, &mut st, 1, 0, 0, true, &[0; 16])).len(), 24);
    }

    #[test]
    fn timeout() {
        let mut st = DecodeStats::default();
        let mut t = FragTable::new(1 << 20, 1_000);
        assert!(matches!(put(&mut t, &mut st, 1, 0, 0, true, &[0; 8]), Insert::Held));
        assert!(matches!(put(&mut t, &mut st, 2, 500, 0, true, &[0; 8]), Insert::Held));
        // Datagram 1 is too old by now: its first piece is gone.
        assert!(matches!(put(&mut t, &mut st, 1, 1_001, 8, false, &[0; 8]), Insert::Held));
        assert_eq!(st.frag_timed_out, 1);
        assert_eq!(st.frag_fragments_dropped, 1);
        assert_eq!(t.held().0, 2);
        // Datagram 2 is still within its time.
        assert_eq!(complete(put(&mut t, &mut st, 2, 1_400, 8, false, &[0; 8])).len(), 16);
    }

    #[test]
    fn budget_evicts_oldest() {
        let mut st = DecodeStats::default();
        let budget = 3 * (DATAGRAM_OVERHEAD + 1000);
        let mut t = FragTable::new(budget, i64::MAX);
        for id in 0..3 {
            assert!(matches!(put(&mut t, &mut st, id, 0, 0, true, &[0; 1000]), Insert::Held));
        }
        assert_eq!(t.held(), (3, budget));
        assert!(matches!(put(&mut t, &mut st, 3, 0, 0, true, &[0; 1000]), Insert::Held));
        assert_eq!(st.frag_evicted, 1);
        assert_eq!(t.held(), (3, budget));
        // Datagram 0 went: its last piece starts a new datagram that never completes.
        assert!(matches!(put(&mut t, &mut st, 0, 0, 1000, false, &[0; 8]), Insert::Held));
        assert!(t.held().1 <= budget);
        // A fragment bigger than the whole budget is refused outright.
        let mut small = FragTable::new(512, i64::MAX);
        assert!(matches!(put(&mut small, &mut st, 9, 0, 0, true, &[0; 1000]), Insert::Dropped));
        assert_eq!(small.held(), (0, 0));
    }

    #[test]
    fn too_many_pieces() {
        let mut st = DecodeStats::default();
        let mut t = FragTable::new(1 << 20, i64::MAX);
        let mut last = Insert::Held;
        for i in 0..=MAX_PIECES as u32 {
            last = put(&mut t, &mut st, 1, 0, 8 + i * 16, true, &[0; 8]);
        }
        assert!(matches!(last, Insert::Dropped));
        assert_eq!(t.held(), (0, 0));
    }

    #[test]
    fn deque_stays_bounded() {
        let mut st = DecodeStats::default();
        let mut t = FragTable::new(1 << 20, i64::MAX);
        // One datagram that never completes pins the front of the deque.
        put(&mut t, &mut st, u32::MAX, 0, 0, true, &[0; 8]);
        for id in 0..10_000 {
            put(&mut t, &mut st, id, 0, 8, false, &[0; 8]);
            complete(put(&mut t, &mut st, id, 0, 0, true, &[0; 8]));
        }
        assert!(t.order.len() < 200, "{}", t.order.len());
    }
}
