//! The group table: open addressing with linear probing over 8-byte slots,
//! each holding a 32-bit hash tag and a 32-bit group index; the groups
//! themselves (packed key next to its sums) sit densely in a `Vec` in
//! insertion order.
//!
//! Why not a `HashMap<[u64; N], Acc>`: at 2 M groups its slots would hold key
//! and sums at 75 % load or less, ~2x the memory of the dense vector, and the
//! whole table is copied on every resize. Here a resize rebuilds only the
//! 8-byte slots, the dense vector grows by `realloc`, and the tag settles
//! almost every mismatch without touching the group.

use crate::hash::{hash_words, random_seed};

/// Sums of one group.
///
/// Transactions reuse the packet slots (the group table stays as small as
/// for flows): `pkts_out` counts errors ([`Acc::errors`]), `pkts_in` sums
/// latencies in ns ([`Acc::latency_sum_ns`]); `conns` counts transactions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Acc {
    pub bytes_out: u64,
    pub pkts_out: u64,
    pub bytes_in: u64,
    pub pkts_in: u64,
    /// Connections: the flows' `conns` summed, or connection records counted.
    pub conns: u64,
}

impl Acc {
    pub fn bytes(&self) -> u64 {
        self.bytes_out.wrapping_add(self.bytes_in)
    }

    pub fn pkts(&self) -> u64 {
        self.pkts_out.wrapping_add(self.pkts_in)
    }

    /// Transactions: how many had status "error".
    pub fn errors(&self) -> u64 {
        self.pkts_out
    }

    /// Transactions: the sum of their latencies, ns.
    pub fn latency_sum_ns(&self) -> u64 {
        self.pkts_in
    }

    pub(crate) fn add(&mut self, o: &Acc) {
        self.bytes_out = self.bytes_out.wrapping_add(o.bytes_out);
        self.pkts_out = self.pkts_out.wrapping_add(o.pkts_out);
        self.bytes_in = self.bytes_in.wrapping_add(o.bytes_in);
        self.pkts_in = self.pkts_in.wrapping_add(o.pkts_in);
        self.conns = self.conns.wrapping_add(o.conns);
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Group<const N: usize> {
    pub key: [u64; N],
    pub acc: Acc,
}

pub(crate) struct Table<const N: usize> {
    /// 0: empty; else `tag << 32 | (index + 1)`.
    slots: Vec<u64>,
    mask: usize,
    pub groups: Vec<Group<N>>,
    seed: u64,
}

const MIN_SLOTS: usize = 1 << 10;

#[inline(always)]
#[allow(unsafe_code)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults, whatever the address.
    #[allow(unused_unsafe)]
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Key equality without a call to `memcmp` (which `==` on arrays becomes):
/// the words are OR-ed XORs, branch-free and inlined.
#[inline(always)]
pub(crate) fn same<const N: usize>(a: &[u64; N], b: &[u64; N]) -> bool {
    let mut diff = 0;
    for i in 0..N {
        diff |= a[i] ^ b[i];
    }
    diff == 0
}

impl<const N: usize> Table<N> {
    pub fn new() -> Self {
        Table {
            slots: vec![0; MIN_SLOTS],
            mask: MIN_SLOTS - 1,
            groups: Vec::new(),
            seed: random_seed(),
        }
    }

    #[inline(always)]
    pub fn hash(&self, key: &[u64; N]) -> u64 {
        hash_words(key, self.seed)
    }

    /// Hints the CPU to load the slot `h` starts probing at.
    #[inline(always)]
    pub fn prefetch_slot(&self, h: u64) {
        prefetch(self.slots.as_ptr().wrapping_add(h as usize & self.mask) as *const u8);
    }

    /// Hints the CPU to load the group the slot of `h` points to (its key
    /// and its sums). Call it a few rows after `prefetch_slot`, when the slot
    /// has arrived: the group is the second dependent miss of a lookup.
    #[inline(always)]
    pub fn prefetch_group(&self, h: u64) {
        let s = self.slots[h as usize & self.mask];
        if s != 0 {
            let p = self
                .groups
                .as_ptr()
                .wrapping_add((s as u32 as usize).wrapping_sub(1)) as *const u8;
            prefetch(p);
            prefetch(p.wrapping_add(64));
        }
    }

    /// The index of `key`'s group (hash `h`), inserted with zero sums if new.
    #[inline(always)]
    pub fn find_or_insert(&mut self, key: &[u64; N], h: u64) -> usize {
        let tag = h >> 32;
        let mut i = h as usize & self.mask;
        loop {
            let s = self.slots[i];
            if s == 0 {
                return self.insert(i, tag, key);
            }
            if s >> 32 == tag {
                let g = (s as u32 - 1) as usize;
                if same(&self.groups[g].key, key) {
                    return g;
                }
            }
            i = (i + 1) & self.mask;
        }
    }

    #[inline(never)]
    fn insert(&mut self, slot: usize, tag: u64, key: &[u64; N]) -> usize {
        let g = self.groups.len();
        assert!(g < u32::MAX as usize - 1, "more than 4 billion groups");
        self.groups.push(Group {
            key: *key,
            acc: Acc::default(),
        });
        self.slots[slot] = tag << 32 | (g as u64 + 1);
        // At most 3/4 full: linear probing stays short.
        if self.groups.len() * 4 > self.slots.len() * 3 {
            self.grow();
        }
        g
    }

    fn grow(&mut self) {
        let n = self.slots.len() * 2;
        self.slots = vec![0; n];
        self.mask = n - 1;
        for (g, grp) in self.groups.iter().enumerate() {
            let h = hash_words(&grp.key, self.seed);
            let mut i = h as usize & self.mask;
            while self.slots[i] != 0 {
                i = (i + 1) & self.mask;
            }
            self.slots[i] = (h >> 32) << 32 | (g as u64 + 1);
        }
    }

    /// Bytes held, for the benchmark's accounting.
    pub fn heap_bytes(&self) -> usize {
        self.slots.capacity() * 8 + self.groups.capacity() * std::mem::size_of::<Group<N>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_what_it_inserted_across_growth() {
        let mut t = Table::<2>::new();
        for i in 0..100_000u64 {
            let k = [i % 50_000, i / 50_000 * 7];
            let h = t.hash(&k);
            let g = t.find_or_insert(&k, h);
            t.groups[g].acc.conns += 1;
        }
        assert_eq!(t.groups.len(), 100_000);
        for i in 0..100_000u64 {
            let k = [i % 50_000, i / 50_000 * 7];
            let h = t.hash(&k);
            let g = t.find_or_insert(&k, h);
            assert_eq!(t.groups[g].key, k);
            assert_eq!(t.groups[g].acc.conns, 1);
        }
        assert_eq!(t.groups.len(), 100_000);
    }
}
