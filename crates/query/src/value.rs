//! Literal values of the query language: addresses and networks, numbers with
//! units, booleans. Each parser returns `None` on bad input; the caller knows
//! the column and says what was expected.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use wirelog_record::IpAddr16;

use crate::field::{proto_number, Unit};

/// An address in the store's form: IPv4 v4-mapped into 16 bytes.
pub fn ip16(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// The text of a 16-byte address as conn.log writes it: a dotted quad for
/// a v4-mapped one (an IPv4 address in the store's form), else as Zeek
/// writes IPv6 ([`IpAddr16::v6_text`], which dots `::1.2.3.4` and
/// `::ffff:0:1.2.3.4` where std's `Display` writes hex): the query's
/// answers, the API and the UI show an address as the logs do.
pub fn format_ip(a: &[u8; 16]) -> String {
    match Ipv6Addr::from(*a).to_ipv4_mapped() {
        Some(v4) => v4.to_string(),
        None => IpAddr16::v6_string(*a),
    }
}

/// An address block. `prefix` counts bits of the 16-byte form, so an IPv4
/// `/8` is stored as `/104`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Net {
    pub addr: [u8; 16],
    pub prefix: u8,
}

impl Net {
    pub fn host(addr: [u8; 16]) -> Net {
        Net { addr, prefix: 128 }
    }

    pub fn mask(self) -> u128 {
        if self.prefix == 0 {
            0
        } else {
            u128::MAX << (128 - self.prefix as u32)
        }
    }

    /// The network address as a number (host bits cleared).
    pub fn base(self) -> u128 {
        u128::from_be_bytes(self.addr) & self.mask()
    }

    pub fn contains(self, a: &[u8; 16]) -> bool {
        u128::from_be_bytes(*a) & self.mask() == self.base()
    }

    /// Lowest and highest address of the block.
    pub fn range(self) -> (u128, u128) {
        (self.base(), self.base() | !self.mask())
    }
}

impl std::fmt::Display for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let base = self.base().to_be_bytes();
        let v4 = Ipv6Addr::from(base).to_ipv4_mapped().is_some() && self.prefix >= 96;
        match (self.prefix, v4) {
            (128, _) => f.write_str(&format_ip(&base)),
            (p, true) => write!(f, "{}/{}", format_ip(&base), p - 96),
            (p, false) => write!(f, "{}/{p}", IpAddr16::v6_string(base)),
        }
    }
}

/// Why a network literal was refused: for a precise "expected".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetError {
    Address,
    /// Prefix length out of range; holds the maximum (32 or 128).
    Prefix(u8),
}

/// `10.0.0.1`, `10.0.0.0/8`, `2001:db8::/32`, `::ffff:10.0.0.1`. Host bits
/// under the prefix are ignored (`10.1.2.3/8` is `10.0.0.0/8`).
pub fn parse_net(s: &str) -> Result<Net, NetError> {
    let (addr, prefix) = match s.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (s, None),
    };
    let ip: IpAddr = addr.parse().map_err(|_| NetError::Address)?;
    let (max, offset) = match ip {
        IpAddr::V4(_) => (32u8, 96u8),
        IpAddr::V6(_) => (128, 0),
    };
    let prefix = match prefix {
        None => max,
        Some(p) if !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()) => {
            let p: u8 = p.parse().map_err(|_| NetError::Prefix(max))?;
            if p > max {
                return Err(NetError::Prefix(max));
            }
            p
        }
        Some(_) => return Err(NetError::Prefix(max)),
    };
    Ok(Net {
        addr: ip16(ip),
        prefix: prefix + offset,
    })
}

/// An unsigned number of a field with `unit`, at most `bits` wide.
/// Bytes take decimal (`k`, `M`, `G`, `T`, optionally followed by `B`) and
/// binary (`KiB`, `MiB`, `GiB`, `TiB`) multipliers, counts take `k`, `M`, `G`;
/// a fraction is allowed with a multiplier (`1.5MB`). Protocols take names.
pub fn parse_uint(s: &str, unit: Unit, bits: u8) -> Option<u64> {
    let v = match unit {
        Unit::Plain => plain(s)?,
        Unit::Proto => match proto_number(s) {
            Some(p) => p as u64,
            None => plain(s)?,
        },
        Unit::Bytes | Unit::Count => with_multiplier(s, unit == Unit::Bytes)?,
    };
    (bits == 64 || v < 1u64 << bits).then_some(v)
}

fn plain(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn with_multiplier(s: &str, bytes: bool) -> Option<u64> {
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    let mult: u64 = match suffix {
        "" => 1,
        "B" | "b" if bytes => 1,
        "k" | "K" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" if bytes => 1_000_000_000_000,
        "kB" | "KB" | "kb" if bytes => 1_000,
        "MB" if bytes => 1_000_000,
        "GB" if bytes => 1_000_000_000,
        "TB" if bytes => 1_000_000_000_000,
        "KiB" | "Ki" if bytes => 1 << 10,
        "MiB" | "Mi" if bytes => 1 << 20,
        "GiB" | "Gi" if bytes => 1 << 30,
        "TiB" | "Ti" if bytes => 1 << 40,
        _ => return None,
    };
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty()
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    if !frac.is_empty() && mult == 1 {
        // A fraction of a byte or a packet is a typo, not a value.
        return None;
    }
    let w: u64 = whole.parse().ok()?;
    let mut v = w.checked_mul(mult)?;
    if !frac.is_empty() {
        let digits = &frac[..frac.len().min(18)];
        let f: u128 = digits.parse().ok()?;
        v = v.checked_add((f * mult as u128 / 10u128.pow(digits.len() as u32)) as u64)?;
    }
    Some(v)
}

/// `true`/`false`, Zeek's `T`/`F`, `yes`/`no`, `1`/`0`.
pub fn parse_bool(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "true" | "t" | "yes" | "1" => Some(true),
        "false" | "f" | "no" | "0" => Some(false),
        _ => None,
    }
}

/// `Ipv4Addr` helper for tests and callers building addresses.
pub fn v4(a: u8, b: u8, c: u8, d: u8) -> [u8; 16] {
    ip16(IpAddr::V4(Ipv4Addr::new(a, b, c, d)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers show an address as conn.log writes it (Zeek's rule, see
    /// `IpAddr16::v6_text`), and what they show parses back to the same
    /// address, so a value copied from an answer can be queried.
    #[test]
    fn addresses_as_conn_log_writes_them() {
        let cases = [
            ("10.0.0.1", "10.0.0.1"),
            ("::ffff:10.0.0.1", "10.0.0.1"),
            ("::102:304", "::1.2.3.4"),
            ("::ffff:0:506:708", "::ffff:0:5.6.7.8"),
            ("::2", "::2"),
            ("::1", "::1"),
            ("2001:db8::1", "2001:db8::1"),
            ("1::102:304", "1::102:304"),
        ];
        for (given, shown) in cases {
            let a = ip16(given.parse().unwrap());
            assert_eq!(format_ip(&a), shown, "{given}");
            assert_eq!(ip16(shown.parse().unwrap()), a, "{shown} parses back");
            assert_eq!(parse_net(shown).unwrap().to_string(), shown);
        }
        assert_eq!(parse_net("::1.2.3.0/120").unwrap().to_string(), "::1.2.3.0/120");
    }

    #[test]
    fn nets() {
        let n = parse_net("10.0.0.0/8").unwrap();
        assert_eq!(n.prefix, 104);
        assert!(n.contains(&v4(10, 1, 2, 3)));
        assert!(!n.contains(&v4(11, 0, 0, 0)));
        assert_eq!(n.to_string(), "10.0.0.0/8");
        assert_eq!(parse_net("10.1.2.3/8").unwrap().to_string(), "10.0.0.0/8");
        assert_eq!(parse_net("10.1.2.3").unwrap().to_string(), "10.1.2.3");
        assert_eq!(parse_net("0.0.0.0/0").unwrap().to_string(), "0.0.0.0/0");
        let v6 = parse_net("2001:db8::/32").unwrap();
        assert_eq!(v6.prefix, 32);
        assert!(v6.contains(&ip16("2001:db8:1::5".parse().unwrap())));
        assert!(!v6.contains(&ip16("2001:db9::5".parse().unwrap())));
        assert_eq!(v6.to_string(), "2001:db8::/32");
        let all = parse_net("::/0").unwrap();
        assert!(all.contains(&v4(1, 2, 3, 4)));
        assert_eq!(
            parse_net("::ffff:10.0.0.1").unwrap().to_string(),
            "10.0.0.1"
        );
        assert_eq!(parse_net("10.0.0.0/33"), Err(NetError::Prefix(32)));
        assert_eq!(parse_net("::/129"), Err(NetError::Prefix(128)));
        assert_eq!(parse_net("10.0.0.0/"), Err(NetError::Prefix(32)));
        assert_eq!(parse_net("10.0.0.256"), Err(NetError::Address));
        assert_eq!(parse_net("host"), Err(NetError::Address));
        assert_eq!(
            parse_net("10.0.0.0/8").unwrap().range(),
            (
                u128::from_be_bytes(v4(10, 0, 0, 0)),
                u128::from_be_bytes(v4(10, 255, 255, 255))
            )
        );
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_uint("443", Unit::Plain, 16), Some(443));
        assert_eq!(parse_uint("65536", Unit::Plain, 16), None);
        assert_eq!(parse_uint("10k", Unit::Plain, 64), None);
        assert_eq!(parse_uint("tcp", Unit::Proto, 8), Some(6));
        assert_eq!(parse_uint("UDP", Unit::Proto, 8), Some(17));
        assert_eq!(parse_uint("256", Unit::Proto, 8), None);
        assert_eq!(parse_uint("10k", Unit::Bytes, 64), Some(10_000));
        assert_eq!(parse_uint("5MB", Unit::Bytes, 64), Some(5_000_000));
        assert_eq!(parse_uint("1.5GB", Unit::Bytes, 64), Some(1_500_000_000));
        assert_eq!(parse_uint("2KiB", Unit::Bytes, 64), Some(2048));
        assert_eq!(parse_uint("1500B", Unit::Bytes, 64), Some(1500));
        assert_eq!(parse_uint("12k", Unit::Count, 64), Some(12_000));
        assert_eq!(parse_uint("12kB", Unit::Count, 64), None);
        assert_eq!(parse_uint("1.5", Unit::Count, 64), None);
        assert_eq!(parse_uint("10XB", Unit::Bytes, 64), None);
        assert_eq!(parse_uint("-1", Unit::Bytes, 64), None);
        assert_eq!(parse_uint("99999999999999999999", Unit::Bytes, 64), None);
        assert_eq!(parse_bool("T"), Some(true));
        assert_eq!(parse_bool("no"), Some(false));
        assert_eq!(parse_bool("maybe"), None);
    }
}
