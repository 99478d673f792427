//! Times and durations as the query language writes them: RFC 3339 in UTC,
//! and durations like `1h30m` or `500ms`. No time-zone database: a time
//! without an offset is UTC.

const NS: i64 = 1_000_000_000;

use wirelog_record::civil::{civil_from_days, days_from_civil};

/// `2024-05-01T12:00:00Z`; fractional seconds only when there are any
/// (trailing zeros cut, at most 9 digits).
pub fn format_rfc3339(ns: i64) -> String {
    let secs = ns.div_euclid(NS);
    let frac = ns.rem_euclid(NS);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    let mut s = format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    );
    if frac != 0 {
        let digits = format!("{frac:09}");
        s.push('.');
        s.push_str(digits.trim_end_matches('0'));
    }
    s.push('Z');
    s
}

fn num(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A point in time: RFC 3339 (`2024-05-01T12:00:00Z`, `2024-05-01T14:00:00+02:00`,
/// `2024-05-01T12:00`, a space instead of `T`), a date (`2024-05-01`, midnight
/// UTC) or Unix seconds (`1714564800`, `1714564800.5`).
pub fn parse_time(s: &str) -> Option<i64> {
    let s = s.trim();
    if s.bytes().next().is_some_and(|b| b.is_ascii_digit()) && !s.contains('-') {
        return parse_unix(s);
    }
    let (date, rest) = match s.find(['T', 't', ' ']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mut parts = date.split('-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    let (y, m, d) = (num(y)? as i64, num(m)?, num(d)?);
    if !(1..=12).contains(&m) || d == 0 || d > days_in_month(y, m) {
        return None;
    }
    let mut ns = days_from_civil(y, m, d).checked_mul(86_400 * NS)?;
    let Some(rest) = rest else { return Some(ns) };
    // Split off the offset: `Z`, `+hh:mm` or `-hh:mm`.
    let (clock, offset_s) = if let Some(c) = rest.strip_suffix(['Z', 'z']) {
        (c, 0)
    } else if let Some(i) = rest.rfind(['+', '-']) {
        let off = &rest[i + 1..];
        let (oh, om) = off
            .split_once(':')
            .unwrap_or((off.get(..2)?, off.get(2..)?));
        let (oh, om) = (num(oh)? as i64, num(om)? as i64);
        if oh > 23 || om > 59 {
            return None;
        }
        let sign = if &rest[i..i + 1] == "-" { -1 } else { 1 };
        (&rest[..i], sign * (oh * 3600 + om * 60))
    } else {
        (rest, 0)
    };
    let mut hms = clock.split(':');
    let h = num(hms.next()?)?;
    let mi = num(hms.next()?)?;
    let (sec, frac_ns) = match hms.next() {
        Some(sec) => {
            let (whole, frac) = sec.split_once('.').unwrap_or((sec, ""));
            (num(whole)?, parse_frac(frac)?)
        }
        None => (0, 0),
    };
    if hms.next().is_some() || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    ns =
        ns.checked_add((h as i64 * 3600 + mi as i64 * 60 + sec as i64 - offset_s) * NS + frac_ns)?;
    Some(ns)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Up to 9 digits after a decimal point, as ns.
fn parse_frac(frac: &str) -> Option<i64> {
    if frac.is_empty() {
        return Some(0);
    }
    if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(frac.parse::<i64>().ok()? * 10i64.pow(9 - frac.len() as u32))
}

fn parse_unix(s: &str) -> Option<i64> {
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    whole
        .parse::<i64>()
        .ok()?
        .checked_mul(NS)?
        .checked_add(parse_frac(frac)?)
}

/// A duration: a sequence of `<number><unit>` with units `ns`, `us` (or `µs`),
/// `ms`, `s`, `m`, `h`, `d`, e.g. `1h30m`, `1.5s`, `500ms`. A bare number is
/// seconds (Zeek's unit) when `bare_seconds`, else rejected.
pub fn parse_duration(s: &str, bare_seconds: bool) -> Option<i64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    if bare_seconds && s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return parse_unix(s);
    }
    let mut rest = s;
    let mut total: i64 = 0;
    while !rest.is_empty() {
        let n_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..n_end];
        rest = &rest[n_end..];
        let u_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..u_end];
        rest = &rest[u_end..];
        let scale: i64 = match unit {
            "ns" => 1,
            "us" | "µs" => 1_000,
            "ms" => 1_000_000,
            "s" => NS,
            "m" => 60 * NS,
            "h" => 3600 * NS,
            "d" => 86_400 * NS,
            _ => return None,
        };
        total = total.checked_add(scaled(number, scale)?)?;
    }
    Some(total)
}

/// `number * scale` for a decimal number, exactly when the fraction fits.
fn scaled(number: &str, scale: i64) -> Option<i64> {
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && frac.is_empty() {
        return None;
    }
    if !whole.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || frac.len() > 18
    {
        return None;
    }
    let w: i64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let mut v = w.checked_mul(scale)?;
    if !frac.is_empty() {
        let f: i128 = frac.parse().ok()?;
        v = v.checked_add((f * scale as i128 / 10i128.pow(frac.len() as u32)) as i64)?;
    }
    Some(v)
}

/// A duration for people: `850ns`, `12us`, `3.4ms`, `1.25s`, `2.5m`, `3.1h`.
pub fn format_duration(ns: i64) -> String {
    let a = ns.unsigned_abs() as f64;
    let sign = if ns < 0 { "-" } else { "" };
    if a < 1e3 {
        format!("{ns}ns")
    } else if a < 1e6 {
        format!("{sign}{:.0}us", a / 1e3)
    } else if a < 1e9 {
        format!("{sign}{:.1}ms", a / 1e6)
    } else if a < 60e9 {
        format!("{sign}{:.2}s", a / 1e9)
    } else if a < 3600e9 {
        format!("{sign}{:.1}m", a / 60e9)
    } else {
        format!("{sign}{:.1}h", a / 3600e9)
    }
}

/// A duration in the query language's own syntax (exact): `90s`, `1500ms`.
pub(crate) fn format_duration_exact(ns: i64) -> String {
    for (unit, scale) in [
        ("h", 3600 * NS),
        ("m", 60 * NS),
        ("s", NS),
        ("ms", 1_000_000),
        ("us", 1_000),
    ] {
        if ns != 0 && ns % scale == 0 {
            return format!("{}{unit}", ns / scale);
        }
    }
    format!("{ns}ns")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trip() {
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(1_714_564_800 * NS), "2024-05-01T12:00:00Z");
        assert_eq!(
            format_rfc3339(1_714_564_800 * NS + 250_000_000),
            "2024-05-01T12:00:00.25Z"
        );
        assert_eq!(format_rfc3339(-1), "1969-12-31T23:59:59.999999999Z");
        for ns in [
            0,
            1,
            951_782_400 * NS,
            1_709_164_800 * NS + 7,
            4_102_444_800 * NS,
        ] {
            assert_eq!(
                parse_time(&format_rfc3339(ns)),
                Some(ns),
                "{}",
                format_rfc3339(ns)
            );
        }
        // Every day over a few years, leap days included.
        for day in -800..2000 {
            let ns = day * 86_400 * NS;
            assert_eq!(parse_time(&format_rfc3339(ns)), Some(ns));
        }
    }

    #[test]
    fn time_forms() {
        let t = 1_714_564_800 * NS;
        assert_eq!(parse_time("2024-05-01T12:00:00Z"), Some(t));
        assert_eq!(parse_time("2024-05-01T12:00Z"), Some(t));
        assert_eq!(parse_time("2024-05-01 12:00:00"), Some(t));
        assert_eq!(parse_time("2024-05-01T14:00:00+02:00"), Some(t));
        assert_eq!(parse_time("2024-05-01T11:30:00-00:30"), Some(t));
        assert_eq!(parse_time("2024-05-01"), Some(t - 12 * 3600 * NS));
        assert_eq!(parse_time("1714564800"), Some(t));
        assert_eq!(parse_time("1714564800.5"), Some(t + NS / 2));
        for bad in [
            "2024-13-01",
            "2024-02-30",
            "2024-05-01T25:00Z",
            "24-05-01",
            "yesterday",
            "",
            "2024-05-01T12",
        ] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
        assert_eq!(
            parse_time("2024-02-29"),
            Some(days_from_civil(2024, 2, 29) * 86_400 * NS)
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms", false), Some(500_000_000));
        assert_eq!(parse_duration("1h30m", false), Some(5400 * NS));
        assert_eq!(parse_duration("1.5s", false), Some(1_500_000_000));
        assert_eq!(parse_duration("12us", false), Some(12_000));
        assert_eq!(parse_duration("12µs", false), Some(12_000));
        assert_eq!(parse_duration("5m", false), Some(300 * NS));
        assert_eq!(parse_duration("1d", false), Some(86_400 * NS));
        assert_eq!(parse_duration("2", true), Some(2 * NS));
        assert_eq!(parse_duration("0.25", true), Some(NS / 4));
        for bad in ["2", "1x", "ms", "", "1..2s", "-5s"] {
            assert_eq!(parse_duration(bad, false), None, "{bad}");
        }
        assert_eq!(format_duration_exact(5400 * NS), "90m");
        assert_eq!(format_duration_exact(1_500_000_000), "1500ms");
        assert_eq!(format_duration_exact(7), "7ns");
        assert_eq!(format_duration(850), "850ns");
        assert_eq!(format_duration(12_300), "12us");
        assert_eq!(format_duration(3_400_000), "3.4ms");
        assert_eq!(format_duration(1_250_000_000), "1.25s");
        assert_eq!(format_duration(150 * NS), "2.5m");
    }
}
