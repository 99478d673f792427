//! How a flow row's `first` and `last` are kept in a file: whole seconds,
//! `first_offset_s` after the row's bucket start and `duration_s` from
//! `first` to `last`.
//!
//! A flow row aggregates a bucket's connections; its first/last only place
//! that activity inside the bucket (the exact time of each connection is in
//! the connections table), so seconds are enough, and two small offsets cost
//! about a tenth of two microsecond timestamps (BENCHMARKS.md, issue 18).
//! Files written before this form keep `first`/`last` as microsecond
//! timestamps; the reader gives both forms the same `first`/`last` columns.

const NS_PER_S: i64 = 1_000_000_000;

/// File column: seconds from the bucket start to the flow's first packet.
pub(crate) const FIRST_OFFSET: &str = "first_offset_s";
/// File column: seconds from the flow's first packet to its last (both
/// floored to the second).
pub(crate) const DURATION: &str = "duration_s";

/// `first`, floored to the second, as seconds after the bucket start. A
/// first packet before its bucket start (a clock that stepped back) counts
/// as the bucket start: the offset is never negative.
#[inline]
pub(crate) fn first_offset_s(bucket_ns: i64, first_ns: i64) -> u32 {
    let off = first_ns.div_euclid(NS_PER_S) - bucket_ns.div_euclid(NS_PER_S);
    off.clamp(0, u32::MAX as i64) as u32
}

/// `last - first`, both floored to the second (and clamped as in
/// [`first_offset_s`]), so `last >= first` holds after the round trip.
#[inline]
pub(crate) fn duration_s(bucket_ns: i64, first_ns: i64, last_ns: i64) -> u32 {
    let first = bucket_ns.div_euclid(NS_PER_S) + first_offset_s(bucket_ns, first_ns) as i64;
    let dur = last_ns.div_euclid(NS_PER_S) - first;
    dur.clamp(0, u32::MAX as i64) as u32
}

/// `first` (ns) back from the bucket start and the stored offset.
#[inline]
pub(crate) fn first_ns(bucket_ns: i64, offset_s: u32) -> i64 {
    bucket_ns.div_euclid(NS_PER_S) * NS_PER_S + offset_s as i64 * NS_PER_S
}

/// `last` (ns) back from the bucket start and the stored offset and duration.
#[inline]
pub(crate) fn last_ns(bucket_ns: i64, offset_s: u32, duration_s: u32) -> i64 {
    first_ns(bucket_ns, offset_s) + duration_s as i64 * NS_PER_S
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: i64 = 1_700_000_100 * NS_PER_S;

    #[test]
    fn floors_both_ends_to_the_second() {
        let (first, last) = (B + 12_999_999_999, B + 299_000_000_001);
        let off = first_offset_s(B, first);
        let dur = duration_s(B, first, last);
        assert_eq!((off, dur), (12, 287));
        assert_eq!(first_ns(B, off), B + 12 * NS_PER_S);
        assert_eq!(last_ns(B, off, dur), B + 299 * NS_PER_S);
    }

    #[test]
    fn one_instant_flow_has_no_duration() {
        let t = B + 5_500_000_000;
        assert_eq!((first_offset_s(B, t), duration_s(B, t, t)), (5, 0));
    }

    #[test]
    fn first_before_the_bucket_counts_from_its_start() {
        let (first, last) = (B - 2 * NS_PER_S, B + 3_200_000_000);
        assert_eq!(first_offset_s(B, first), 0);
        assert_eq!(duration_s(B, first, last), 3);
        // last before the bucket too: last = first = bucket start.
        assert_eq!(duration_s(B, B - 5, B - 1), 0);
    }
}
