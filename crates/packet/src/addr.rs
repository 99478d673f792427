//! The address type every layer above the decoder keys on (connections,
//! flows, records, the store), kept here so that the record side of the
//! graph shares it without linking the decoder.

/// An IP address stored as 16 bytes; IPv4 is stored v4-mapped (::ffff:a.b.c.d).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct IpAddr16(pub [u8; 16]);

impl IpAddr16 {
    #[inline]
    pub fn from_v4(b: [u8; 4]) -> Self {
        // Built in a register: byte stores followed by a 16-byte load of the
        // same array defeat store forwarding on the hot path. Little-endian
        // conversions are free on the machines this runs on.
        IpAddr16(((u128::from(u32::from_le_bytes(b)) << 96) | (0xffff_u128 << 80)).to_le_bytes())
    }
    pub fn is_v4(&self) -> bool {
        self.0[..10] == [0; 10] && self.0[10] == 0xff && self.0[11] == 0xff
    }
    /// 255.255.255.255, as Zeek's `IPAddr::IsBroadcast` (src/IPAddr.h): an
    /// IPv4 address whose four bytes are all 0xff (no IPv6 address is).
    #[inline]
    pub fn is_ipv4_broadcast(&self) -> bool {
        self.is_v4() && self.0[12..] == [0xff; 4]
    }
    /// The dotted quad of the IPv4 address `b` (`Ipv4Addr`'s text, as
    /// Zeek's logs write an address), left-aligned in 16 bytes, and its
    /// length (7 to 15): each octet's text copied from a table as one
    /// 4-byte block, the next overwriting what lies past its dot. The one
    /// IPv4 formatter of the logs and of DNS answers.
    #[inline(always)]
    pub fn v4_text(b: [u8; 4]) -> ([u8; 16], usize) {
        let mut t = [0u8; 16];
        let mut n = 0;
        for o in b {
            let (d, len) = OCTETS[o as usize];
            // n <= 12 before the last octet (three of at most 4 bytes).
            t[n & 15..(n & 15) + 4].copy_from_slice(&d);
            n += len as usize;
        }
        // Without the last dot.
        (t, n - 1)
    }

    /// [`IpAddr16::v6_text`] as a `String` (for answers and records that hold
    /// text; the logs' writers take the bytes).
    pub fn v6_string(b: [u8; 16]) -> String {
        let mut s = String::with_capacity(39);
        Self::push_v6(b, &mut s);
        s
    }

    /// [`IpAddr16::v6_text`] appended to `out` (a DNS answer's text). The
    /// text is ASCII by construction, so it is checked as UTF-8 in one pass
    /// and copied whole; pushed a char at a time it cost ~440 instructions
    /// an address (goProbe's capture, BENCHMARKS.md 2026-12-01). The
    /// fallback is never taken and loses nothing if it were.
    pub fn push_v6(b: [u8; 16], out: &mut String) {
        let (t, n) = Self::v6_text(b);
        match std::str::from_utf8(&t[..n]) {
            Ok(text) => out.push_str(text),
            Err(_) => out.extend(t[..n].iter().map(|&c| char::from(c))),
        }
    }

    /// The text of the IPv6 address `b` as Zeek writes it in its logs (`IPAddr::AsString`,
    /// zeek/src/IPAddr.cc, through `zeek_inet_ntop6` of zeek/zeek-3rdparty's
    /// zeek_inet_ntop.c): lowercase hexadecimal groups without leading zeros, the first
    /// longest run of two or more zero groups as `::` (RFC 5952, as `Ipv6Addr`'s `Display`),
    /// and, unlike `Display`, the last 32 bits as a dotted quad when the run starts the address
    /// and is 6 groups long (IPv4-compatible, `::1.2.3.4`), 5 followed by `ffff` (IPv4-mapped,
    /// `::ffff:1.2.3.4`) or 4 followed by `ffff:0` (`::ffff:0:1.2.3.4`). Zeek's test for a run
    /// of 7 (`::0.0.0.2`) sits where its loop never reaches (the group it checks at is inside
    /// the run), so `::2` stays hexadecimal. Left-aligned in 48 bytes, with its length (at
    /// most 39). Composed without `fmt`, whose machinery cost about 2,000 instructions an
    /// address in the logs' writers.
    pub fn v6_text(b: [u8; 16]) -> ([u8; 48], usize) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut t = [0u8; 48];
        let group = |i: usize| u16::from_be_bytes([b[2 * i], b[2 * i + 1]]);
        // The first longest run of zero groups (std's `Ipv6Addr` takes the first too).
        let (mut run_at, mut run_len, mut cur_at, mut cur_len) = (0, 0, 0, 0);
        for i in 0..8 {
            if group(i) == 0 {
                if cur_len == 0 {
                    cur_at = i;
                }
                cur_len += 1;
                if cur_len > run_len {
                    (run_at, run_len) = (cur_at, cur_len);
                }
            } else {
                cur_len = 0;
            }
        }
        let dotted_from_6 = run_at == 0
            && (run_len == 6
                || (run_len == 5 && group(5) == 0xffff)
                || (run_len == 4 && group(4) == 0xffff && group(5) == 0));
        let mut n = 0;
        let mut i = 0;
        while i < 8 {
            if i == 6 && dotted_from_6 {
                if t[n - 1] != b':' {
                    t[n] = b':';
                    n += 1;
                }
                let (q, len) = Self::v4_text([b[12], b[13], b[14], b[15]]);
                t[n..n + 16].copy_from_slice(&q);
                return (t, n + len);
            }
            if run_len > 1 && i == run_at {
                t[n..n + 2].copy_from_slice(b"::");
                n += 2;
                i += run_len;
                continue;
            }
            // A colon between groups; none after `::` (no digit is a colon).
            if n > 0 && t[n - 1] != b':' {
                t[n] = b':';
                n += 1;
            }
            let g = group(i);
            let digits = 1 + usize::from(g >= 0x10) + usize::from(g >= 0x100) + usize::from(g >= 0x1000);
            for k in (0..digits).rev() {
                t[n] = HEX[usize::from(g >> (4 * k)) & 0xf];
                n += 1;
            }
            i += 1;
        }
        (t, n)
    }

    pub fn to_std(&self) -> std::net::IpAddr {
        if self.is_v4() {
            std::net::IpAddr::V4(std::net::Ipv4Addr::new(
                self.0[12], self.0[13], self.0[14], self.0[15],
            ))
        } else {
            std::net::IpAddr::V6(std::net::Ipv6Addr::from(self.0))
        }
    }
}


/// Each byte value as dotted-quad text followed by a dot, and its length
/// with the dot: "7." is ([b'7', b'.', 0, 0], 2).
const OCTETS: [([u8; 4], u8); 256] = {
    let mut t = [([0u8; 4], 0u8); 256];
    let mut o = 0;
    while o < 256 {
        let mut d = [0u8; 4];
        let mut n = 0;
        if o >= 100 {
            d[n] = b'0' + (o / 100) as u8;
            n += 1;
        }
        if o >= 10 {
            d[n] = b'0' + (o / 10 % 10) as u8;
            n += 1;
        }
        d[n] = b'0' + (o % 10) as u8;
        d[n + 1] = b'.';
        t[o] = (d, n as u8 + 2);
        o += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    use super::*;

    /// Every octet value in every position, as `Ipv4Addr` writes it.
    #[test]
    fn v4_text_as_the_standard_library_writes_it() {
        for x in 0..=255u8 {
            for a in [[x, 0, 0, 0], [1, x, 10, 255], [100, 99, 9, x], [x, x, x, x], [255, 255, 255, x], [x, 200, 0, 99]] {
                let (t, n) = IpAddr16::v4_text(a);
                assert_eq!(&t[..n], std::net::Ipv4Addr::from(a).to_string().as_bytes(), "{a:?}");
            }
        }
    }

    /// Zeek's text of `b` from a description of its rule independent of the code above: the
    /// standard library's, except a dotted quad after 6 zero groups, after 5 and `ffff`, or
    /// after 4 and `ffff:0` (zeek_inet_ntop.c, `zeek_inet_ntop6`).
    fn zeek_text(b: [u8; 16]) -> String {
        let quad = std::net::Ipv4Addr::new(b[12], b[13], b[14], b[15]);
        let head = if b[..12] == [0; 12] && b[12..14] != [0, 0] {
            "::"
        } else if b[..10] == [0; 10] && b[10..12] == [0xff, 0xff] {
            "::ffff:"
        } else if b[..8] == [0; 8] && b[8..12] == [0xff, 0xff, 0, 0] {
            "::ffff:0:"
        } else {
            return std::net::Ipv6Addr::from(b).to_string();
        };
        format!("{head}{quad}")
    }

    /// Every pattern of zero and non-zero groups (runs of zeros of every length and place,
    /// ties between runs), groups of every digit count, and IPv4-mapped addresses, as Zeek
    /// writes them.
    #[test]
    fn v6_text_as_zeek_writes_it() {
        let values = [1u16, 0xf, 0x10, 0xab, 0x100, 0xfff, 0x1000, 0xffff, 0x2001, 0xdb8];
        for zeros in 0..=255u32 {
            for (vi, _) in values.iter().enumerate() {
                let mut b = [0u8; 16];
                for i in 0..8 {
                    if zeros >> i & 1 == 0 {
                        b[2 * i..2 * i + 2].copy_from_slice(&values[(vi + i) % values.len()].to_be_bytes());
                    }
                }
                let (t, n) = IpAddr16::v6_text(b);
                assert_eq!(&t[..n], zeek_text(b).as_bytes(), "{b:?}");
            }
        }
        for a in [[0u8, 0, 0, 0], [10, 0, 0, 1], [255, 255, 255, 255], [192, 168, 1, 200]] {
            let b = IpAddr16::from_v4(a).0;
            let (t, n) = IpAddr16::v6_text(b);
            assert_eq!(&t[..n], std::net::Ipv6Addr::from(b).to_string().as_bytes(), "{b:?}");
        }
        // Zeek's own forms, written out (its rule read in zeek_inet_ntop.c).
        for (addr, text) in [
            ("::102:304", "::1.2.3.4"),
            ("::ffff:0:102:304", "::ffff:0:1.2.3.4"),
            ("::ffff:0:0:0", "::ffff:0:0.0.0.0"),
            ("::ffff:a00:1", "::ffff:10.0.0.1"),
            ("::2", "::2"),
            ("::1", "::1"),
            ("::", "::"),
            ("1::102:304", "1::102:304"),
            ("::1:0:0:102:304", "::1:0:0:102:304"),
        ] {
            let b = addr.parse::<std::net::Ipv6Addr>().unwrap().octets();
            let (t, n) = IpAddr16::v6_text(b);
            assert_eq!(std::str::from_utf8(&t[..n]).unwrap(), text, "{addr}");
        }
    }
}
