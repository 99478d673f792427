//! A small, fast, seeded hash: the folded 64x64->128 multiply that foldhash
//! and wyhash are built on. Keys here are a few machine words (packed group
//! keys) or short strings, where SipHash would cost more than the table probe.
//!
//! The seed comes from std's `RandomState`, so traffic crafted to collide in
//! one run does not collide in the next.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

pub(crate) const K1: u64 = 0x9e37_79b9_7f4a_7c15;
const K2: u64 = 0xc2b2_ae3d_27d4_eb4f;

#[inline(always)]
pub(crate) fn mix(a: u64, b: u64) -> u64 {
    let r = (a as u128) * (b as u128);
    (r as u64) ^ ((r >> 64) as u64)
}

/// Hash of a byte string (unseeded: callers mix it into a seeded hash).
#[inline]
pub(crate) fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h = FastHasher { h: K2 };
    h.write(bytes);
    h.h
}

/// A per-engine random seed.
pub(crate) fn random_seed() -> u64 {
    RandomState::new().hash_one(0x5eed_u64) | 1
}

/// Hash of a packed key of `N` words.
#[inline(always)]
pub(crate) fn hash_words<const N: usize>(key: &[u64; N], seed: u64) -> u64 {
    let mut h = seed;
    for &w in key {
        h = mix(h ^ w, K1);
    }
    mix(h, K2 ^ seed)
}

/// `Hasher` for the crate's internal maps (string dictionaries, histograms).
#[derive(Clone, Copy)]
pub(crate) struct FastHasher {
    h: u64,
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.h = mix(self.h ^ u64::from_le_bytes(c.try_into().unwrap()), K1);
        }
        let rem = chunks.remainder();
        let mut last = [0u8; 8];
        last[..rem.len()].copy_from_slice(rem);
        self.h = mix(
            self.h ^ u64::from_le_bytes(last) ^ ((bytes.len() as u64) << 56),
            K1,
        );
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.h = mix(self.h ^ i, K1);
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.write_u64(i as u64);
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.write_u64(i as u64);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        mix(self.h, K2)
    }
}

#[derive(Clone, Copy)]
pub(crate) struct FastBuild {
    seed: u64,
}

impl FastBuild {
    pub(crate) fn new() -> FastBuild {
        FastBuild {
            seed: random_seed(),
        }
    }
}

impl BuildHasher for FastBuild {
    type Hasher = FastHasher;

    fn build_hasher(&self) -> FastHasher {
        FastHasher { h: self.seed }
    }
}

pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, FastBuild>;

pub(crate) fn fast_map<K, V>() -> FastMap<K, V> {
    std::collections::HashMap::with_hasher(FastBuild::new())
}
