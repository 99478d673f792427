//! UTC calendar arithmetic for partition names (no time-zone database needed).

pub(crate) const NS_PER_US: i64 = 1_000;
pub(crate) const NS_PER_HOUR: i64 = 3_600_000_000_000;

pub(crate) use wirelog_record::civil::{civil_from_days, days_from_civil};

/// The hour (hours since the epoch) a time in ns falls in.
#[inline]
pub(crate) fn hour_of(ns: i64) -> i64 {
    ns.div_euclid(NS_PER_HOUR)
}

/// `date=YYYY-MM-DD/hour=HH` of an hour since the epoch.
pub(crate) fn partition_name(hour: i64) -> (String, String) {
    let (y, m, d) = civil_from_days(hour.div_euclid(24));
    (
        format!("date={y:04}-{m:02}-{d:02}"),
        format!("hour={:02}", hour.rem_euclid(24)),
    )
}

/// Parses `date=YYYY-MM-DD` into days since the epoch.
pub(crate) fn parse_date_dir(name: &str) -> Option<i64> {
    let s = name.strip_prefix("date=")?;
    let mut it = s.splitn(3, '-');
    let y: i64 = it.next()?.parse().ok()?;
    let m: u32 = it.next()?.parse().ok()?;
    let d: u32 = it.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    Some(days_from_civil(y, m, d))
}

/// Parses `hour=HH`.
pub(crate) fn parse_hour_dir(name: &str) -> Option<i64> {
    let h: i64 = name.strip_prefix("hour=")?.parse().ok()?;
    (0..24).contains(&h).then_some(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_round_trip() {
        for days in [
            -800_000i64,
            -1,
            0,
            1,
            59,
            60,
            365,
            10_957,
            20_779,
            2_932_896,
        ] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_779), (2026, 11, 22));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn partition_names() {
        // 2026-11-22T13:05:00Z
        let ns = 1_795_352_700_000_000_000i64;
        let (d, h) = partition_name(hour_of(ns));
        assert_eq!((d.as_str(), h.as_str()), ("date=2026-11-22", "hour=13"));
        assert_eq!(parse_date_dir(&d), Some(20_779));
        assert_eq!(parse_hour_dir(&h), Some(13));
        assert_eq!(parse_hour_dir("hour=24"), None);
        assert_eq!(parse_date_dir("date=2026-13-01"), None);
    }
}
