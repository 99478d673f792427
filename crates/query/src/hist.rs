//! Duration percentiles per group from a log-bucketed histogram.
//!
//! A duration is first truncated to whole microseconds (the store keeps
//! microseconds). Below 16 µs each microsecond is its own bucket; above, every
//! power of two is split into 16 equal buckets, so a bucket is at most 1/16 as
//! wide as its lower bound. A percentile is reported as the midpoint of the
//! bucket holding the nearest-rank sample, hence:
//!
//! **error bound: |reported − exact| ≤ max(exact / 32, 500 ns)**, i.e. within
//! 3.125 % (or half a microsecond for durations under 16 µs), where "exact" is
//! the nearest-rank percentile (the ⌈p·n/100⌉-th smallest duration).
//!
//! A reported percentile is also clamped to the group's observed minimum and
//! maximum (which only brings it closer to the exact value): a group of one
//! reports its own value, never a bucket midpoint beside it.
//!
//! Only non-empty buckets are stored, in one map keyed by (group, bucket), so a
//! group with a few distinct durations costs a few entries, not a fixed array.

use crate::hash::{fast_map, FastMap};

/// The percentiles reported: p50, p95, p99.
pub const PERCENTILES: [u64; 3] = [50, 95, 99];

/// The histogram bucket of a duration in ns (public so that another
/// backend grouping durations by bucket can check it agrees).
#[inline]
pub fn bucket(ns: i64) -> u16 {
    let us = (ns.max(0) / 1000) as u64;
    if us < 16 {
        return us as u16;
    }
    let e = 63 - us.leading_zeros(); // >= 4
    let m = (us >> (e - 4)) & 15;
    (16 + (e - 4) * 16 + m as u32) as u16
}

/// The bucket's [lo, hi) range in µs.
fn bounds_us(b: u16) -> (u64, u64) {
    if b < 16 {
        return (b as u64, b as u64 + 1);
    }
    let e = (b as u32 - 16) / 16 + 4;
    let m = (b as u64 - 16) % 16;
    ((16 + m) << (e - 4), (17 + m) << (e - 4))
}

/// What a bucket reports: its midpoint, in ns.
pub(crate) fn representative(b: u16) -> i64 {
    let (lo, hi) = bounds_us(b);
    ((lo + hi) * 500) as i64
}

/// The percentiles of a group, and how many values they were taken over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pct {
    /// p50, p95, p99, ns.
    pub p: [i64; 3],
    pub n: u64,
}

/// Per (group, bucket): how many values, the smallest and the largest (ns).
#[derive(Debug)]
pub(crate) struct Hist {
    counts: FastMap<u64, (u64, i64, i64)>,
}

impl Hist {
    pub(crate) fn new() -> Hist {
        Hist { counts: fast_map() }
    }

    #[inline]
    pub(crate) fn add(&mut self, group: u32, ns: i64) {
        let e = self
            .counts
            .entry((group as u64) << 16 | bucket(ns) as u64)
            .or_insert((0, ns, ns));
        e.0 += 1;
        e.1 = e.1.min(ns);
        e.2 = e.2.max(ns);
    }

    /// Adds `count` values of one bucket whose smallest is `lo` and largest
    /// `hi` (ns), as `count` calls of [`Hist::add`] would; the caller makes
    /// sure `bucket(lo) == bucket(hi)`.
    pub(crate) fn add_run(&mut self, group: u32, count: u64, lo: i64, hi: i64) {
        let e = self
            .counts
            .entry((group as u64) << 16 | bucket(lo) as u64)
            .or_insert((0, lo, hi));
        e.0 += count;
        e.1 = e.1.min(lo);
        e.2 = e.2.max(hi);
    }

    /// Percentiles per target, and how many values it holds, where
    /// `target(group)` maps a group to an output index (or `None` to skip
    /// it): several groups may merge into one target (the series of a time
    /// series).
    pub(crate) fn percentiles(
        &self,
        targets: usize,
        target: impl Fn(u32) -> Option<u32>,
    ) -> Vec<Option<Pct>> {
        let mut entries: Vec<(u32, u16, u64, i64, i64)> = self
            .counts
            .iter()
            .filter_map(|(&k, &(c, lo, hi))| {
                target((k >> 16) as u32).map(|t| (t, k as u16, c, lo, hi))
            })
            .collect();
        entries.sort_unstable();
        let mut out = vec![None; targets];
        let mut i = 0;
        while i < entries.len() {
            let t = entries[i].0;
            let j = i + entries[i..].iter().take_while(|e| e.0 == t).count();
            let run = &entries[i..j];
            let n: u64 = run.iter().map(|e| e.2).sum();
            let lo = run.iter().map(|e| e.3).min().unwrap_or(0);
            let hi = run.iter().map(|e| e.4).max().unwrap_or(0);
            let mut res = [0i64; 3];
            for (r, p) in res.iter_mut().zip(PERCENTILES) {
                let rank = (p * n).div_ceil(100).max(1);
                let mut cum = 0;
                for e in run {
                    cum += e.2;
                    if cum >= rank {
                        *r = representative(e.1).clamp(lo, hi);
                        break;
                    }
                }
            }
            out[t as usize] = Some(Pct { p: res, n });
            i = j;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A group of one reports its own value; a group's percentiles never
    /// leave its [min, max].
    #[test]
    fn percentiles_within_observed_range() {
        let mut h = Hist::new();
        h.add(0, 29_000_000);
        for ns in [1_000_123, 1_000_456, 1_000_789] {
            h.add(1, ns);
        }
        let out = h.percentiles(2, Some);
        assert_eq!(out[0].unwrap().p, [29_000_000; 3]);
        let p = out[1].unwrap().p;
        assert!(p.iter().all(|v| (1_000_123..=1_000_789).contains(v)), "{p:?}");
    }

    #[test]
    fn buckets_are_monotonic_and_bounded() {
        let mut prev = 0;
        for us in 0..100_000u64 {
            let b = bucket(us as i64 * 1000);
            assert!(b >= prev);
            prev = b;
            let (lo, hi) = bounds_us(b);
            assert!(lo <= us && us < hi, "{us} in bucket {b} [{lo}, {hi})");
        }
        assert!(bucket(i64::MAX) < u16::MAX);
        assert_eq!(bucket(-5), 0);
    }

    #[test]
    fn representative_within_bound() {
        // Every ns value in a sweep over 1 ns .. 10^5 s, geometric steps.
        let mut v = 1f64;
        while v < 1e14 {
            let ns = v as i64;
            let rep = representative(bucket(ns));
            let err = (rep - ns).abs() as f64;
            assert!(err <= (ns as f64 / 32.0).max(500.0), "{ns}: {rep}");
            v *= 1.0007;
        }
    }

    #[test]
    fn nearest_rank() {
        let mut h = Hist::new();
        for ms in 1..=100 {
            h.add(0, ms * 1_000_000);
        }
        h.add(1, 5_000);
        let p = h.percentiles(2, Some);
        let [p50, p95, p99] = p[0].unwrap().p;
        assert_eq!(p[0].unwrap().n, 100);
        for (got, want) in [(p50, 50e6), (p95, 95e6), (p99, 99e6)] {
            assert!((got as f64 - want).abs() <= want / 32.0, "{got} vs {want}");
        }
        // A group of one: its own value, not the bucket midpoint (5.5 µs).
        assert_eq!(p[1].unwrap().p, [5_000; 3]);
        // Merging groups into one target.
        let p = h.percentiles(1, |_| Some(0));
        assert!(p[0].unwrap().p[0] > 40_000_000);
        // Skipped groups.
        let p = h.percentiles(2, |g| (g == 1).then_some(1));
        assert!(p[0].is_none() && p[1].is_some());
    }
}
