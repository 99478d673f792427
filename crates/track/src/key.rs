//! Connection keys and their direction-independent hash.

use wirelog_decode::IpAddr16;

/// A connection's tuple as seen in one packet (source first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnKey {
    pub src: IpAddr16,
    pub dst: IpAddr16,
    pub sport: u16,
    pub dport: u16,
    pub proto: u8,
}

impl ConnKey {
    #[inline]
    pub fn reversed(&self) -> ConnKey {
        ConnKey { src: self.dst, dst: self.src, sport: self.dport, dport: self.sport, proto: self.proto }
    }

    /// Hash that is the same for both directions of a connection, so one probe
    /// sequence finds the entry whichever side sent the packet: the "reverse
    /// lookup" costs a second key compare in the slot we already loaded, never
    /// a second walk of the table.
    #[inline]
    pub fn symmetric_hash(&self, seed: u64) -> u64 {
        let s = u128::from_ne_bytes(self.src.0);
        let d = u128::from_ne_bytes(self.dst.0);
        // Any total order works, as long as both directions pick the same endpoint first.
        let (a, pa, b, pb) = if (s, self.sport) <= (d, self.dport) { (s, self.sport, d, self.dport) } else { (d, self.dport, s, self.sport) };
        // A multiply-xorshift mix over the 37 key bytes: the seed is random
        // per process, so crafted tuples cannot aim at one probe chain.
        let mut h = seed ^ ((pa as u64) << 16 | (pb as u64) << 32 | self.proto as u64);
        for v in [a as u64, (a >> 64) as u64, b as u64, (b >> 64) as u64] {
            h = (h ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            h ^= h >> 29;
        }
        h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h ^ (h >> 32)
    }
}

/// Orientation of a packet relative to a stored connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Orig,
    Resp,
}

/// Compares a packet's key with a connection stored in originator order.
#[inline]
pub fn match_side(stored: &ConnKey, pkt: &ConnKey) -> Option<Side> {
    if stored.proto != pkt.proto {
        return None;
    }
    if stored.sport == pkt.sport && stored.dport == pkt.dport && stored.src == pkt.src && stored.dst == pkt.dst {
        Some(Side::Orig)
    } else if stored.sport == pkt.dport && stored.dport == pkt.sport && stored.src == pkt.dst && stored.dst == pkt.src {
        Some(Side::Resp)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_direction_independent() {
        let k = ConnKey {
            src: IpAddr16::from_v4([10, 0, 0, 1]),
            dst: IpAddr16::from_v4([10, 0, 0, 2]),
            sport: 40000,
            dport: 80,
            proto: 6,
        };
        assert_eq!(k.symmetric_hash(7), k.reversed().symmetric_hash(7));
        assert_ne!(k.symmetric_hash(7), k.symmetric_hash(8));
        let mut other = k;
        other.sport = 40001;
        assert_ne!(k.symmetric_hash(7), other.symmetric_hash(7));
        assert_eq!(match_side(&k, &k), Some(Side::Orig));
        assert_eq!(match_side(&k, &k.reversed()), Some(Side::Resp));
        assert_eq!(match_side(&k, &other), None);
    }
}
