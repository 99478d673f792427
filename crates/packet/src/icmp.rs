//! ICMP request/reply pairing: which message type answers which. The
//! tracker keys ICMP "connections" on it and the Community ID hashes it, so
//! it sits below both (the decoder reads ICMP headers; records need only
//! this table).

/// The message type that answers `icmp_type` (echo request <-> reply,
/// timestamp, information, router solicitation/advertisement, address mask;
/// for ICMPv6 also neighbor discovery, MLD, node information and home agent
/// discovery), or None for one-way messages such as errors. Zeek keys ICMP
/// "connections" on this pair, and the Community ID spec uses the same table.
pub fn counterpart(v6: bool, icmp_type: u8) -> Option<u8> {
    let c = if v6 {
        match icmp_type {
            128 => 129,
            129 => 128,
            133 => 134,
            134 => 133,
            135 => 136,
            136 => 135,
            130 => 131,
            131 => 130,
            139 => 140,
            140 => 139,
            144 => 145,
            145 => 144,
            _ => return None,
        }
    } else {
        match icmp_type {
            8 => 0,
            0 => 8,
            13 => 14,
            14 => 13,
            15 => 16,
            16 => 15,
            10 => 9,
            9 => 10,
            17 => 18,
            18 => 17,
            _ => return None,
        }
    };
    Some(c)
}

