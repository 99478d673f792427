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
        ConnKey {
            src: self.dst,
            dst: self.src,
            sport: self.dport,
            dport: self.sport,
            proto: self.proto,
        }
    }

    /// Hash that is the same for both directions of a connection, so one probe
    /// sequence finds the entry whichever side sent the packet: the "reverse
    /// lookup" costs a second key compare in the slot we already loaded, never
    /// a second walk of the table.
    ///
    /// Each endpoint (address, port) is mixed on its own and the two mixes are
    /// added: addition commutes, so both directions agree without first
    /// ordering the endpoints (two 128-bit compares and four selects per
    /// packet). Every mixing step is a bijection keyed by the per-process
    /// seed, so crafted tuples still cannot aim at one probe chain.
    #[inline]
    pub fn symmetric_hash(&self, seed: u64) -> u64 {
        let a = endpoint_mix(&self.src, self.sport, seed);
        let b = endpoint_mix(&self.dst, self.dport, seed);
        let h = (a.wrapping_add(b) ^ self.proto as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h ^ (h >> 32)
    }
}

/// A multiply-xorshift mix of one endpoint's 18 bytes, starting from `seed`.
#[inline(always)]
fn endpoint_mix(addr: &IpAddr16, port: u16, seed: u64) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let v = u128::from_ne_bytes(addr.0);
    let mut h = seed;
    for w in [v as u64, (v >> 64) as u64, port as u64] {
        h = (h ^ w).wrapping_mul(K);
        h ^= h >> 29;
    }
    h
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
    if stored.sport == pkt.sport
        && stored.dport == pkt.dport
        && stored.src == pkt.src
        && stored.dst == pkt.dst
    {
        Some(Side::Orig)
    } else if stored.sport == pkt.dport
        && stored.dport == pkt.sport
        && stored.src == pkt.dst
        && stored.dst == pkt.src
    {
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
