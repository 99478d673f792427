/// Zeek-style connection uids: "C" followed by a base62 rendering of 96 random bits.
///
/// A small xorshift generator is enough: uids must be unique within a run and
/// unpredictable across runs, not cryptographically strong.
pub struct UidGenerator {
    state: [u64; 2],
}

impl UidGenerator {
    pub fn new(seed: u64) -> Self {
        // splitmix64 to spread a weak seed over both state words
        let mut z = seed;
        let mut next = || {
            z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut x = z;
            x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            x ^ (x >> 31)
        };
        let a = next();
        let b = next();
        UidGenerator { state: [a | 1, b] }
    }

    /// Seeds from the clock and the process id.
    pub fn from_entropy() -> Self {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Self::new(t ^ ((std::process::id() as u64) << 32))
    }

    fn next_u64(&mut self) -> u64 {
        // xorshift128+
        let mut s1 = self.state[0];
        let s0 = self.state[1];
        self.state[0] = s0;
        s1 ^= s1 << 23;
        self.state[1] = s1 ^ s0 ^ (s1 >> 17) ^ (s0 >> 26);
        self.state[1].wrapping_add(s0)
    }

    /// A new uid, as Zeek writes them (e.g. `CHhAvVGS1DHFjwGM9`): "C" and the
    /// base62 digits of 96 random bits, kept as a 64-bit and a 32-bit part so
    /// the conversion needs no 128-bit division.
    pub fn next_uid(&mut self) -> Uid {
        const DIGITS: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
        let mut hi = self.next_u64();
        let mut lo = self.next_u64() & 0xffff_ffff;
        let mut buf = [0u8; 18];
        buf[0] = b'C';
        // 62^11 > 2^64 and 62^6 > 2^32: 11 + 6 digits hold 96 bits.
        let mut digits = [0u8; 17];
        for d in digits[..6].iter_mut() {
            *d = DIGITS[(lo % 62) as usize];
            lo /= 62;
        }
        for d in digits[6..].iter_mut() {
            *d = DIGITS[(hi % 62) as usize];
            hi /= 62;
        }
        // Most significant first, leading zeros dropped (as Zeek does).
        let mut n = 17;
        while n > 1 && digits[n - 1] == b'0' {
            n -= 1;
        }
        for i in 0..n {
            buf[1 + i] = digits[n - 1 - i];
        }
        Uid {
            bytes: buf,
            len: (n + 1) as u8,
        }
    }
}

/// A connection uid, stored inline (no allocation).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Uid {
    bytes: [u8; 18],
    len: u8,
}

impl Uid {
    pub fn as_str(&self) -> &str {
        // Only ASCII base62 digits are ever written.
        std::str::from_utf8(self.as_bytes()).unwrap_or("C")
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// The uid's bytes padded to a fixed size (past `len`, unspecified) and
    /// its length: a log line copies it as one fixed-size block.
    pub fn padded(&self) -> ([u8; 18], usize) {
        (self.bytes, self.len as usize)
    }
}

impl std::fmt::Debug for Uid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for Uid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_look_like_zeeks_and_differ() {
        let mut g = UidGenerator::new(42);
        let a = g.next_uid();
        let b = g.next_uid();
        assert!(a.as_str().starts_with('C'));
        assert!(a.as_str().len() >= 12 && a.as_str().len() <= 18, "{}", a);
        assert!(a.as_str()[1..].bytes().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(a, b);
    }

    /// `read` seeds the tracker's uids from the capture's identity: the
    /// same seed must give the same uids, in the same order, in every run.
    #[test]
    fn the_same_seed_gives_the_same_uids() {
        let run = |seed| {
            let mut g = UidGenerator::new(seed);
            (0..1000).map(|_| g.next_uid()).collect::<Vec<_>>()
        };
        assert_eq!(run(0x5eed_1234), run(0x5eed_1234));
        assert_ne!(run(0x5eed_1234), run(0x5eed_1235));
        let mut all = run(7);
        all.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        all.dedup();
        assert_eq!(all.len(), 1000, "unique within a run");
    }
}
