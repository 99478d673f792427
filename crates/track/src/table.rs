//! The connection table: open addressing over a slab of connections.
//!
//! Slots hold `(tag << 32) | (index + 1)`; the tag is the upper half of the
//! hash, so most non-matching slots are rejected without touching the slab.
//! Linear probing with backward-shift deletion keeps chains short without
//! tombstones. The slot array is kept at most 3/4 full (`MAX_LOAD`): at 1/2 a
//! table just past a power of two held twice the slots it needed (16 MiB for
//! 540 k connections, 31 bytes each); at 3/4 a lookup that misses reads 8.5
//! slots on average, mostly in one cache line, rejected by their tag
//! (BENCHMARKS.md, "Issue 36: memory per connection (branch rss41)").
//! The slot array starts small and doubles (rehashing from the
//! hashes kept in the slab) while the table fills, up to the size the
//! connection budget needs: a probe tracking a few thousand connections keeps
//! its slots in a few cache-resident pages instead of spreading them over a
//! 16 MiB array sized for a million (BENCHMARKS.md, "Live capture": the A/B
//! with 5,000 connections). Growth happens at most log2(budget / 4096) times.
//!
//! A slot's home is taken from its tag's low bits, so the slot alone says
//! where it belongs: deletion and growth move slots without reading the
//! entries they point to (at a million connections each such read was a
//! cache miss). An entry keeps no hash: deletion hashes its tuple again
//! to find its slot ([`ConnTable::remove_with`]).

use wirelog_decode::IpAddr16;

use crate::key::{match_side, ConnKey, Side};
use crate::slab::Slab;

/// The first slot array: 32 KiB.
const MIN_SLOTS: usize = 1 << 12;

/// The slot array's highest load, as (numerator, denominator): it doubles
/// before an insert would pass it.
const MAX_LOAD: (usize, usize) = (3, 4);

/// Slots a table of `len` connections needs at [`MAX_LOAD`].
const fn slots_for(len: usize) -> usize {
    (len * MAX_LOAD.1).div_ceil(MAX_LOAD.0)
}

/// Bytes of the slot array a connection is charged at full load (8-byte
/// slots at [`MAX_LOAD`], rounded up).
pub const SLOT_BYTES_PER_CONNECTION: usize = (8 * MAX_LOAD.1).div_ceil(MAX_LOAD.0);

pub struct ConnTable<T> {
    slots: Vec<u64>,
    mask: usize,
    /// The slot count at full capacity (load <= [`MAX_LOAD`]); `slots` grows to it.
    max_slots: usize,
    entries: Vec<Option<Entry<T>>>,
    free: Vec<u32>,
    len: usize,
    capacity: usize,
    /// Address pairs of the entries whose key is not IPv4 (see [`StoredKey`]).
    v6: V6Pairs,
    /// The IPv4 connection the last lookup found or the last insert made, and its
    /// index ([`NO_RECENT`] when none): a busy link carries runs of packets of one
    /// connection, which [`ConnTable::find_recent`] finds without a hash or a probe.
    /// Cleared when its entry is removed, turned when its key is reversed.
    recent: (StoredKey, u32),
}

pub struct Entry<T> {
    pub key: StoredKey,
    pub value: T,
}

/// A connection's tuple as the table keeps it, in originator order: two
/// integers (16 bytes instead of [`ConnKey`]'s 38), so that a lookup
/// compares two words per direction, and the reverse direction of a
/// packet's key is two rotates made once per lookup. Two IPv4 addresses
/// (the common case) are kept inline; any other pair (IPv6, or one IPv4
/// and one IPv6 address) sits in the table's [`V6Pairs`], whose index
/// takes the addresses' place and whose flag bit no IPv4 key has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredKey {
    /// The originator's IPv4 address in the low half, the responder's in
    /// the high half (each its four bytes read little-endian, as
    /// [`v4_parts`] gives them); for a non-IPv4 key, its pair's index.
    addrs: u64,
    /// The originator's port in bits 0..16, the responder's in 16..32, the
    /// protocol in 32..40, [`V6_FLAG`] for a key whose addresses are in [`V6Pairs`].
    rest: u64,
}

/// `StoredKey::rest`'s bit for a key whose addresses are in [`V6Pairs`].
const V6_FLAG: u64 = 1 << 40;

/// `ConnTable::recent` when it names no connection: its flag bit is one
/// no IPv4 key (the only kind compared with it) has.
const NO_RECENT: (StoredKey, u32) = (StoredKey { addrs: 0, rest: u64::MAX }, u32::MAX);

/// Whether an [`IpAddr16`] is IPv4-mapped (`::ffff:a.b.c.d`), and its last
/// four bytes as a little-endian `u32`. Read as a little-endian `u128` (no
/// byte swaps; bytes 10 and 11 are bits 80..96), as `IpAddr16::from_v4` builds it.
#[inline(always)]
fn v4_parts(a: &IpAddr16) -> (bool, u32) {
    let v = u128::from_le_bytes(a.0);
    (v & ((1u128 << 96) - 1) == 0xffff_u128 << 80, (v >> 96) as u32)
}

/// A packet's IPv4 tuple in the table's form ([`StoredKey`]'s integers), made
/// straight from the decoder's fields: the tracker compares it with the
/// table's last connection ([`ConnTable::find_recent`]) before it builds the
/// packet's full key, which only a hash and a probe need.
#[derive(Debug, Clone, Copy)]
pub struct V4Tuple(StoredKey);

impl V4Tuple {
    /// The tuple of a packet whose addresses the decoder read from an IPv4
    /// header (`IpPacket::ip_version` 4), so v4-mapped: their last four bytes
    /// are taken as [`v4_parts`] takes them, without its test of the first twelve.
    #[inline(always)]
    pub fn of_ipv4(src: &IpAddr16, dst: &IpAddr16, sport: u16, dport: u16, proto: u8) -> V4Tuple {
        let word = |a: &IpAddr16| u32::from_le_bytes([a.0[12], a.0[13], a.0[14], a.0[15]]);
        V4Tuple(StoredKey::v4(word(src), word(dst), sport, dport, proto))
    }
}

impl StoredKey {
    /// An IPv4 tuple's key (addresses as [`v4_parts`] gives them).
    #[inline(always)]
    fn v4(src: u32, dst: u32, sport: u16, dport: u16, proto: u8) -> StoredKey {
        StoredKey {
            addrs: u64::from(src) | u64::from(dst) << 32,
            rest: u64::from(sport) | u64::from(dport) << 16 | u64::from(proto) << 32,
        }
    }

    /// The same tuple seen from the other side: the address halves and the
    /// port halves swapped (two rotates; a non-IPv4 key's pair is swapped
    /// in [`V6Pairs`] by the caller).
    #[inline(always)]
    fn reversed(self) -> StoredKey {
        let ports = (self.rest as u32).rotate_left(16);
        StoredKey {
            addrs: if self.is_v6() { self.addrs } else { self.addrs.rotate_left(32) },
            rest: self.rest & !0xffff_ffff | u64::from(ports),
        }
    }

    #[inline(always)]
    fn is_v6(&self) -> bool {
        self.rest & V6_FLAG != 0
    }

    /// The index of a non-IPv4 key's address pair in [`V6Pairs`].
    #[inline(always)]
    fn pair(&self) -> u32 {
        self.addrs as u32
    }

    pub fn sport(&self) -> u16 {
        self.rest as u16
    }

    #[inline(always)]
    pub fn dport(&self) -> u16 {
        (self.rest >> 16) as u16
    }

    pub fn proto(&self) -> u8 {
        (self.rest >> 32) as u8
    }

    /// The full tuple (`pairs`: the table's, for a non-IPv4 key).
    #[inline]
    pub fn full(&self, pairs: &V6Pairs) -> ConnKey {
        let (src, dst) = if self.is_v6() {
            pairs.0.get(self.pair()).map_or((IpAddr16([0; 16]), IpAddr16([0; 16])), |p| (p[0], p[1]))
        } else {
            (IpAddr16::from_v4((self.addrs as u32).to_le_bytes()), IpAddr16::from_v4(((self.addrs >> 32) as u32).to_le_bytes()))
        };
        ConnKey { src, dst, sport: self.sport(), dport: self.dport(), proto: self.proto() }
    }
}

/// The address pairs of the table's non-IPv4 keys (32 bytes each, and the
/// slab's 5 of bookkeeping), freed with their entry.
pub struct V6Pairs(Slab<[IpAddr16; 2]>);

impl V6Pairs {
    /// The full tuple of a stored key.
    #[inline]
    pub fn full(&self, k: &StoredKey) -> ConnKey {
        k.full(self)
    }

    /// Pairs held (non-IPv4 connections open).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

impl<T> ConnTable<T> {
    /// A table for up to `capacity` connections (load factor <= [`MAX_LOAD`]).
    pub fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.max(16);
        let max_slots = slots_for(capacity).next_power_of_two();
        // Homes come from the 32-bit tag.
        assert!(max_slots <= 1 << 32, "connection budget too large");
        let nslots = max_slots.min(MIN_SLOTS);
        let mut slots = vec![0; nslots];
        let mut entries = Vec::with_capacity(capacity.min(1 << 20));
        // Lookups land anywhere in these arrays: with 4 KiB pages every one is
        // also a TLB miss once the table is large. Huge pages remove most of them.
        advise_huge_pages(&mut slots);
        advise_huge_pages(&mut entries);
        ConnTable {
            slots,
            mask: nslots - 1,
            max_slots,
            entries,
            free: Vec::new(),
            len: 0,
            capacity,
            v6: V6Pairs(Slab::with_capacity(0)),
            recent: NO_RECENT,
        }
    }

    /// The key a packet's tuple is stored under (its IPv6 pair, if any, put in the side slab).
    fn store_key(&mut self, k: &ConnKey) -> StoredKey {
        match (v4_parts(&k.src), v4_parts(&k.dst)) {
            ((true, a), (true, b)) => StoredKey::v4(a, b, k.sport, k.dport, k.proto),
            _ => {
                let i = self.v6.0.insert([k.src, k.dst]);
                let mut st = StoredKey::v4(i, 0, k.sport, k.dport, k.proto);
                st.rest |= V6_FLAG;
                st
            }
        }
    }

    /// The full tuple of the entry at `idx`, in originator order.
    #[inline]
    pub fn key(&self, idx: u32) -> Option<ConnKey> {
        self.get(idx).map(|e| e.key.full(&self.v6))
    }

    /// The entry at `idx` and what turns its key into the full tuple.
    #[inline]
    pub fn get_mut_keys(&mut self, idx: u32) -> Option<(&mut Entry<T>, &V6Pairs)> {
        let e = self.entries.get_mut(idx as usize).and_then(|e| e.as_mut())?;
        Some((e, &self.v6))
    }

    /// Swaps the originator and responder of the entry at `idx` (Zeek's FlipRoles).
    pub fn reverse_key(&mut self, idx: u32) {
        let Some(e) = self.entries.get_mut(idx as usize).and_then(|e| e.as_mut()) else { return };
        if e.key.is_v6() {
            if let Some(p) = self.v6.0.get_mut(e.key.pair()) {
                p.swap(0, 1);
            }
        }
        e.key = e.key.reversed();
        if self.recent.1 == idx {
            self.recent.0 = e.key;
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Most connections the table holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn is_full(&self) -> bool {
        self.len >= self.capacity
    }

    /// The slot a hash's probe sequence starts at: the tag's low bits.
    #[inline]
    fn home(tag: u64, mask: usize) -> usize {
        tag as usize & mask
    }

    #[cfg(feature = "bench")]
    /// Hints the CPU to load the first slot of `hash`'s probe sequence.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        let i = Self::home(hash >> 32, self.mask);
        #[cfg(target_arch = "x86_64")]
        unsafe {
            // SAFETY: prefetch is a hint and never faults; the index is masked in bounds.
            std::arch::x86_64::_mm_prefetch(
                self.slots.as_ptr().add(i) as *const i8,
                std::arch::x86_64::_MM_HINT_T0,
            );
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = i;
    }

    #[cfg(feature = "bench")]
    /// Second prefetch stage, a few packets after [`ConnTable::prefetch`]: the
    /// slot is cached by now, so read it and load the start of its entry.
    #[inline]
    pub fn prefetch_entry(&self, hash: u64) {
        let s = self.slots[Self::home(hash >> 32, self.mask)];
        if s != 0 && s >> 32 == hash >> 32 {
            let idx = (s as u32).wrapping_sub(1) as usize;
            if idx < self.entries.len() {
                #[cfg(target_arch = "x86_64")]
                unsafe {
                    // SAFETY: prefetches never fault; the pointer is within the slab.
                    let p = self.entries.as_ptr().add(idx) as *const i8;
                    for line in 0..4 {
                        std::arch::x86_64::_mm_prefetch(
                            p.wrapping_add(line * 64),
                            std::arch::x86_64::_MM_HINT_T0,
                        );
                    }
                }
            }
        }
    }

    /// Finds the connection a packet with key `k` (hash `hash`) belongs to.
    /// An IPv4 tuple is compared as two words per direction with the
    /// stored keys (a non-IPv4 key never equals it: its flag bit); any
    /// other tuple with the full addresses of the non-IPv4 keys.
    /// An IPv4 connection found is remembered for [`ConnTable::find_recent`].
    #[inline]
    pub fn find(&mut self, k: &ConnKey, hash: u64) -> Option<(u32, Side)> {
        match (v4_parts(&k.src), v4_parts(&k.dst)) {
            ((true, a), (true, b)) => {
                let fwd = StoredKey::v4(a, b, k.sport, k.dport, k.proto);
                let rev = fwd.reversed();
                let found = self.probe(hash, |st| {
                    if *st == fwd {
                        Some(Side::Orig)
                    } else if *st == rev {
                        Some(Side::Resp)
                    } else {
                        None
                    }
                });
                if let Some((idx, side)) = found {
                    self.recent = (if side == Side::Orig { fwd } else { rev }, idx);
                }
                found
            }
            _ => self.find_v6(k, hash),
        }
    }

    /// [`ConnTable::find_recent`] for a full key (None for a tuple that is not two IPv4 addresses).
    #[cfg(test)]
    fn find_recent_key(&self, k: &ConnKey) -> Option<(u32, Side)> {
        let ((true, a), (true, b)) = (v4_parts(&k.src), v4_parts(&k.dst)) else {
            return None;
        };
        self.find_recent(V4Tuple(StoredKey::v4(a, b, k.sport, k.dport, k.proto)))
    }

    /// The connection of an IPv4 tuple if it is the one the last lookup found
    /// (or the last insert made), without hashing the tuple or walking the slots;
    /// None for any other tuple, which [`ConnTable::find`] then looks up.
    #[inline(always)]
    pub fn find_recent(&self, t: V4Tuple) -> Option<(u32, Side)> {
        let fwd = t.0;
        let (stored, idx) = self.recent;
        if fwd == stored {
            Some((idx, Side::Orig))
        } else if fwd.reversed() == stored {
            Some((idx, Side::Resp))
        } else {
            None
        }
    }

    /// [`ConnTable::find`] for a tuple that is not two IPv4 addresses.
    #[inline(never)]
    fn find_v6(&self, k: &ConnKey, hash: u64) -> Option<(u32, Side)> {
        self.probe(hash, |st| if st.is_v6() { match_side(&st.full(&self.v6), k) } else { None })
    }

    /// Walks `hash`'s probe sequence until `side` names a stored key's side.
    #[inline(always)]
    fn probe(&self, hash: u64, side: impl Fn(&StoredKey) -> Option<Side>) -> Option<(u32, Side)> {
        let tag = hash >> 32;
        let mut i = Self::home(tag, self.mask);
        loop {
            let s = self.slots[i];
            if s == 0 {
                return None;
            }
            if s >> 32 == tag {
                let idx = (s as u32).wrapping_sub(1);
                if let Some(Some(e)) = self.entries.get(idx as usize) {
                    if let Some(side) = side(&e.key) {
                        return Some((idx, side));
                    }
                }
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Inserts a connection known to be absent. The caller ensures `!is_full()`.
    pub fn insert(&mut self, key: ConnKey, hash: u64, value: T) -> u32 {
        debug_assert!(!self.is_full());
        if slots_for(self.len + 1) > self.slots.len() && self.slots.len() < self.max_slots {
            self.grow();
        }
        let key = self.store_key(&key);
        let idx = match self.free.pop() {
            Some(i) => {
                self.entries[i as usize] = Some(Entry { key, value });
                i
            }
            None => {
                self.entries.push(Some(Entry { key, value }));
                (self.entries.len() - 1) as u32
            }
        };
        let mut i = Self::home(hash >> 32, self.mask);
        while self.slots[i] != 0 {
            i = (i + 1) & self.mask;
        }
        self.slots[i] = (hash >> 32) << 32 | (idx as u64 + 1);
        self.len += 1;
        if !key.is_v6() {
            self.recent = (key, idx);
        }
        idx
    }

    #[inline]
    pub fn get(&self, idx: u32) -> Option<&Entry<T>> {
        self.entries.get(idx as usize).and_then(|e| e.as_ref())
    }

    #[inline]
    pub fn get_mut(&mut self, idx: u32) -> Option<&mut Entry<T>> {
        self.entries.get_mut(idx as usize).and_then(|e| e.as_mut())
    }

    /// Removes the entry at `idx` after passing it and its full tuple to
    /// `f`, without moving it out. `hash_of` is the hash the entry was
    /// inserted with, of its tuple (direction-independent, so a reversed
    /// key's is the same): the entry keeps no hash, its slot is found again
    /// from the tuple's (one hash per connection instead of 4 bytes, and
    /// their padding, in every entry).
    pub fn remove_with<R>(&mut self, idx: u32, hash_of: impl FnOnce(&ConnKey) -> u64, f: impl FnOnce(&Entry<T>, &ConnKey) -> R) -> Option<R> {
        let e = self.entries.get(idx as usize)?.as_ref()?;
        let full = e.key.full(&self.v6);
        let r = f(e, &full);
        let key = e.key;
        self.remove_slot(idx, hash_of(&full) >> 32)?;
        if self.recent.1 == idx {
            self.recent = NO_RECENT;
        }
        if key.is_v6() {
            self.v6.0.remove(key.pair());
        }
        self.entries[idx as usize] = None;
        Some(r)
    }

    /// Doubles the slot array and re-links every occupied slot at its new home.
    #[cold]
    fn grow(&mut self) {
        let n = (self.slots.len() * 2).min(self.max_slots);
        let mut slots = vec![0u64; n];
        advise_huge_pages(&mut slots);
        let mask = n - 1;
        for &s in self.slots.iter().filter(|&&s| s != 0) {
            let mut i = Self::home(s >> 32, mask);
            while slots[i] != 0 {
                i = (i + 1) & mask;
            }
            slots[i] = s;
        }
        self.slots = slots;
        self.mask = mask;
    }

    /// Unlinks `idx`, whose hash has `tag` in its upper half, from the
    /// slot array and frees its slab index (the entry itself stays).
    fn remove_slot(&mut self, idx: u32, tag: u64) -> Option<()> {
        self.entries.get(idx as usize)?.as_ref()?;
        let want = idx as u64 + 1;
        let mut i = Self::home(tag, self.mask);
        while self.slots[i] as u32 as u64 != want {
            i = (i + 1) & self.mask;
        }
        // Backward-shift deletion: pull later members of the run into the hole
        // when their home slot allows it, so lookups never need tombstones.
        let mut hole = i;
        let mut j = (i + 1) & self.mask;
        loop {
            let s = self.slots[j];
            if s == 0 {
                break;
            }
            let home = Self::home(s >> 32, self.mask);
            // Move if home is not in the cyclic range (hole, j].
            let in_range = if hole <= j {
                home > hole && home <= j
            } else {
                home > hole || home <= j
            };
            if !in_range {
                self.slots[hole] = s;
                hole = j;
            }
            j = (j + 1) & self.mask;
        }
        self.slots[hole] = 0;
        self.free.push(idx);
        self.len -= 1;
        Some(())
    }

    /// Up to `max` live entries at index `from` or after, and the index to
    /// go on from: ending a large table in steps visits each slab entry once.
    pub fn live_from(&self, from: usize, max: usize) -> (Vec<u32>, usize) {
        let mut out = Vec::new();
        let mut i = from;
        while i < self.entries.len() && out.len() < max {
            if self.entries[i].is_some() {
                out.push(i as u32);
            }
            i += 1;
        }
        (out, i)
    }

    /// A few live entries near a pseudo-random position: candidates for
    /// eviction when the table is full (sampled LRU, as Redis does).
    pub fn sample(&self, start: usize, n: usize, out: &mut Vec<u32>) {
        out.clear();
        let len = self.entries.len();
        if len == 0 {
            return;
        }
        let mut i = start % len;
        let mut looked = 0;
        while out.len() < n && looked < len.min(64 * n) {
            if self.entries[i].is_some() {
                out.push(i as u32);
            }
            i = (i + 1) % len;
            looked += 1;
        }
    }

    /// Mean slots read by a lookup that finds its entry and by one that
    /// does not (from a uniformly drawn home).
    #[cfg(test)]
    fn mean_probes(&self) -> (f64, f64) {
        let n = self.slots.len();
        let (mut hit, mut miss) = (0usize, 0usize);
        for (i, &s) in self.slots.iter().enumerate().filter(|(_, &s)| s != 0) {
            hit += (i.wrapping_sub(Self::home(s >> 32, self.mask)) & self.mask) + 1;
        }
        // A miss from home h reads the run from h to its first empty slot.
        let start = self.slots.iter().position(|&s| s == 0).expect("never full");
        let mut run = 0;
        for k in (0..n).rev() {
            let i = (start + 1 + k) & self.mask;
            run = if self.slots[i] == 0 { 0 } else { run + 1 };
            miss += run + 1;
        }
        (hit as f64 / self.len as f64, miss as f64 / n as f64)
    }

    /// Bytes held per tracked connection by a full table (slab entry +
    /// slots), for an IPv4 connection; an IPv6 one adds
    /// [`ConnTable::V6_BYTES`].
    pub fn bytes_per_connection(&self) -> usize {
        std::mem::size_of::<Option<Entry<T>>>() + self.max_slots * 8 / self.capacity
    }

    /// Bytes a non-IPv4 connection's address pair takes beside its entry.
    pub const V6_BYTES: usize = Slab::<[IpAddr16; 2]>::bytes_per_value();

    /// Non-IPv4 connections open (each with its address pair in the side slab).
    #[cfg(test)]
    pub fn v6_len(&self) -> usize {
        self.v6.len()
    }
}

/// Asks for transparent huge pages on the 2 MiB-aligned interior of a Vec's
/// buffer (madvise needs an aligned start; the allocator's block is not).
pub(crate) fn advise_huge_pages<X>(v: &mut Vec<X>) {
    const HUGE: usize = 2 << 20;
    let start = v.as_mut_ptr() as usize;
    let end = start + v.capacity() * std::mem::size_of::<X>();
    let aligned = (start + HUGE - 1) & !(HUGE - 1);
    if end > aligned + HUGE {
        // SAFETY: advice about memory this Vec owns; the kernel may ignore it.
        unsafe {
            libc::madvise(
                aligned as *mut libc::c_void,
                (end - aligned) & !(HUGE - 1),
                libc::MADV_HUGEPAGE,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirelog_decode::IpAddr16;

    fn key(i: u32) -> ConnKey {
        ConnKey {
            src: IpAddr16::from_v4(i.to_be_bytes()),
            dst: IpAddr16::from_v4([192, 168, 0, 1]),
            sport: (i % 60000) as u16,
            dport: 443,
            proto: 6,
        }
    }

    #[test]
    fn slots_grow_with_the_table_up_to_the_budget() {
        let mut t: ConnTable<u32> = ConnTable::with_capacity(100_000);
        assert_eq!(t.slots.len(), MIN_SLOTS);
        let h = |i: u32| key(i).symmetric_hash(7);
        for i in 0..60_000u32 {
            t.insert(key(i), h(i), i);
            // Removals between growths: backward shifts and rehashes interleave.
            if i % 2 == 1 {
                let (idx, _) = t.find(&key(i - 1), h(i - 1)).expect("present");
                t.remove_with(idx, |k| k.symmetric_hash(7), |_, _| ());
            }
            assert!(slots_for(t.len()) <= t.slots.len());
        }
        // Up to the capacity: 30,000 left of the first 60,000, and 70,000 more.
        for i in 60_000..130_000u32 {
            t.insert(key(i), h(i), i);
        }
        assert_eq!(t.len(), 100_000);
        assert!(slots_for(t.len()) <= t.slots.len() && t.slots.len() == t.max_slots);
        for i in 0..130_000u32 {
            let found = t.find(&key(i), h(i)).map(|(idx, _)| t.get(idx).unwrap().value);
            assert_eq!(found, (i >= 60_000 || i % 2 == 1).then_some(i), "{i}");
        }
        assert_eq!(t.bytes_per_connection(), std::mem::size_of::<Option<Entry<u32>>>() + 262_144 * 8 / 100_000);
        // 540 k connections (goProbe's corpus) fit 2^20 slots at 3/4, where 1/2 took 2^21.
        assert_eq!(ConnTable::<u32>::with_capacity(540_000).max_slots, 1 << 20);
    }

    /// Slots a lookup reads, from the slot array alone: a hit reads its
    /// slot's distance from its home plus one; a miss, from any home, up to
    /// and with the next empty slot. Printed (`-- --nocapture`) at the
    /// loads a growing table passes through; bounded by linear probing's
    /// expectation at 3/4 (2.5 for a hit, 8.5 for a miss) with room for chance.
    #[test]
    fn probes_per_lookup_stay_short_at_the_highest_load() {
        // 3/4 of 2^20 slots: the table fills to its highest load.
        let mut t: ConnTable<u32> = ConnTable::with_capacity(786_432);
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut checked = 0;
        for i in 0..786_432u32 {
            // Random tuples: the hash's quality is not what this measures.
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            t.insert(key(i), rng, i);
            let n = t.len();
            if n == 540_000 || n == 1 << 19 || n * 4 == t.slots.len() * 3 {
                let (hit, miss) = t.mean_probes();
                println!("{n:7} connections, {:7} slots (load {:.3}): {hit:.2} slots read a hit, {miss:.2} a miss",
                    t.slots.len(), n as f64 / t.slots.len() as f64);
                assert!(hit < 3.0 && miss < 10.0, "{n}: {hit} {miss}");
                checked += 1;
            }
        }
        assert!(checked >= 3, "{checked}");
    }

    #[test]
    fn insert_find_remove_many() {
        let mut t: ConnTable<u32> = ConnTable::with_capacity(5000);
        let mut ids = Vec::new();
        for i in 0..5000u32 {
            let k = key(i);
            let h = k.symmetric_hash(1) & 0x0000_03ff_ffff_ffff; // force collisions: 10-bit tags, so homes and tags repeat
            assert!(t.find(&k, h).is_none());
            ids.push(t.insert(k, h, i));
        }
        assert!(t.is_full());
        for i in (0..5000u32).step_by(3) {
            let k = key(i);
            let h = k.symmetric_hash(1) & 0x0000_03ff_ffff_ffff;
            let (idx, side) = t.find(&k.reversed(), h).expect("present");
            assert_eq!(side, Side::Resp);
            assert_eq!(t.remove_with(idx, |k| k.symmetric_hash(1) & 0x0000_03ff_ffff_ffff, |e, full| (e.value, *full)), Some((i, k)));
        }
        for i in 0..5000u32 {
            let k = key(i);
            let h = k.symmetric_hash(1) & 0x0000_03ff_ffff_ffff;
            let found = t.find(&k, h).map(|(idx, _)| t.get(idx).unwrap().value);
            if i % 3 == 0 {
                assert_eq!(found, None);
            } else {
                assert_eq!(found, Some(i));
            }
        }
    }

    /// IPv6 (and mixed) tuples are stored in the side slab, IPv4 ones
    /// inline: each is found from both directions, flipped, given back
    /// whole, and its pair freed with it.
    #[test]
    fn ipv6_pairs_live_beside_the_table() {
        let v6 = |last: u8| {
            let mut a = [0u8; 16];
            a[0] = 0x20;
            a[1] = 0x01;
            a[15] = last;
            IpAddr16(a)
        };
        let keys = [
            key(7),
            ConnKey { src: v6(1), dst: v6(2), sport: 5353, dport: 53, proto: 17 },
            ConnKey { src: IpAddr16::from_v4([10, 0, 0, 1]), dst: v6(3), sport: 1, dport: 2, proto: 6 },
            // The same ports and v4-mapped addresses as an inline key's, but one side v6.
            ConnKey { src: key(7).src, dst: v6(4), sport: key(7).sport, dport: 443, proto: 6 },
        ];
        let mut t: ConnTable<usize> = ConnTable::with_capacity(64);
        let h = |k: &ConnKey| k.symmetric_hash(3);
        let idx: Vec<u32> = keys.iter().enumerate().map(|(i, k)| t.insert(*k, h(k), i)).collect();
        assert_eq!(t.v6_len(), 3);
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(t.find(k, h(k)), Some((idx[i], Side::Orig)), "{k:?}");
            assert_eq!(t.find(&k.reversed(), h(k)), Some((idx[i], Side::Resp)), "{k:?}");
            assert_eq!(t.key(idx[i]), Some(*k));
            let mut other = *k;
            other.dst.0[15] ^= 0x80;
            assert_eq!(t.find(&other, h(&other)), None);
        }
        t.reverse_key(idx[1]);
        t.reverse_key(idx[0]);
        assert_eq!(t.key(idx[1]), Some(keys[1].reversed()));
        assert_eq!(t.key(idx[0]), Some(keys[0].reversed()));
        assert_eq!(t.find(&keys[1], h(&keys[1])), Some((idx[1], Side::Resp)));
        assert_eq!(t.find(&keys[0], h(&keys[0])), Some((idx[0], Side::Resp)));
        assert_eq!(t.remove_with(idx[2], h, |e, k| (e.value, *k)), Some((2, keys[2])));
        assert_eq!(t.v6_len(), 2);
        assert_eq!(t.find(&keys[2], h(&keys[2])), None);
        assert_eq!(t.find(&keys[3], h(&keys[3])), Some((idx[3], Side::Orig)));
    }

    /// The recent connection answers only for its own tuple (either
    /// direction), follows lookups, inserts and a reversed key, and is
    /// forgotten with its entry, so that a slab index given to another
    /// connection never answers for the old tuple.
    #[test]
    fn the_recent_connection_is_the_last_found_and_forgotten_with_its_entry() {
        let mut t: ConnTable<u32> = ConnTable::with_capacity(64);
        let h = |k: &ConnKey| k.symmetric_hash(5);
        assert_eq!(t.find_recent_key(&key(1)), None);
        let a = t.insert(key(1), h(&key(1)), 1);
        assert_eq!(t.find_recent_key(&key(1)), Some((a, Side::Orig)));
        assert_eq!(t.find_recent_key(&key(1).reversed()), Some((a, Side::Resp)));
        let b = t.insert(key(2), h(&key(2)), 2);
        assert_eq!(t.find_recent_key(&key(1)), None);
        assert_eq!(t.find_recent_key(&key(2).reversed()), Some((b, Side::Resp)));
        // A lookup's connection, found from the responder's side.
        assert_eq!(t.find(&key(1).reversed(), h(&key(1))), Some((a, Side::Resp)));
        assert_eq!(t.find_recent_key(&key(1)), Some((a, Side::Orig)));
        assert_eq!(t.find_recent_key(&key(2)), None);
        let mut other = key(1);
        other.proto = 17;
        assert_eq!(t.find_recent_key(&other), None);
        other = key(1);
        other.dport ^= 1;
        assert_eq!(t.find_recent_key(&other), None);
        // Reversed: the other side is now the originator.
        t.reverse_key(a);
        assert_eq!(t.find_recent_key(&key(1)), Some((a, Side::Resp)));
        assert_eq!(t.find_recent_key(&key(1).reversed()), Some((a, Side::Orig)));
        // Removed, its index reused: the old tuple is looked up again, and not found.
        t.remove_with(a, h, |_, _| ());
        assert_eq!(t.find_recent_key(&key(1)), None);
        let c = t.insert(key(3), h(&key(3)), 3);
        assert_eq!(c, a);
        t.find(&key(2), h(&key(2)));
        assert_eq!(t.find_recent_key(&key(1)), None);
        assert_eq!(t.find(&key(1), h(&key(1))), None);
        assert_eq!(t.find_recent_key(&key(2)), Some((b, Side::Orig)));
        // A tuple that is not two IPv4 addresses is never answered, nor remembered.
        let mut v6 = key(4);
        v6.dst.0[0] = 0x20;
        let d = t.insert(v6, h(&v6), 4);
        assert_eq!(t.find(&v6, h(&v6)), Some((d, Side::Orig)));
        assert_eq!(t.find_recent_key(&v6), None);
        assert_eq!(t.find_recent_key(&key(2)), Some((b, Side::Orig)));
    }
}
