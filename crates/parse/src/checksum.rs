//! The checksums protocols put around their messages, for parsers that
//! verify them (a mismatch is counted as malformed, the message still read):
//! CRC-32C (Castagnoli) of MongoDB's OP_MSG `checksumPresent` (the server
//! computes it with WiredTiger's crc32c over the whole message before the
//! checksum: src/mongo/rpc/op_msg.cpp, `calculateChecksum`), and Cassandra's
//! v5 segment CRC24 (header) and CRC32 (payload)
//! (src/java/org/apache/cassandra/net/Crc.java, `crc24` and `crc32`).
//!
//! One byte at a time through a 256-entry table built at compile time: the
//! checked messages are few and small beside the packets.

/// A reflected CRC-32's table for the reversed polynomial `poly`.
const fn table32(poly: u32) -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ poly } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

/// CRC-32C: the Castagnoli polynomial 0x1EDC6F41, reflected (RFC 3720,
/// appendix B.4), initial and final xor all ones.
static CRC32C: [u32; 256] = table32(0x82F6_3B78);
/// CRC-32 of zlib/Ethernet: 0x04C11DB7, reflected.
static CRC32: [u32; 256] = table32(0xEDB8_8320);

fn update32(table: &[u32; 256], mut crc: u32, data: &[u8]) -> u32 {
    for &b in data {
        crc = table[((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// CRC-32C of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    !update32(&CRC32C, !0, data)
}

/// Cassandra's v5 payload CRC32: the zlib CRC-32 of four fixed bytes
/// (0xFA 0x2D 0x55 0xCA, `Crc.initialBytes`) then `data`.
pub fn cassandra_crc32(data: &[u8]) -> u32 {
    let crc = update32(&CRC32, !0, &[0xFA, 0x2D, 0x55, 0xCA]);
    !update32(&CRC32, crc, data)
}

/// Cassandra's v5 header CRC24 of the first `data.len()` header bytes in
/// wire order (their least significant byte first): initial value 0x875060,
/// polynomial 0x1974F0B, most significant bit first, not reflected
/// (native_protocol_v5.spec, 2.1).
pub fn cassandra_crc24(data: &[u8]) -> u32 {
    let mut crc: u32 = 0x87_5060;
    for &b in data {
        crc ^= u32::from(b) << 16;
        for _ in 0..8 {
            crc <<= 1;
            if crc & 0x100_0000 != 0 {
                crc ^= 0x197_4F0B;
            }
        }
    }
    crc & 0xff_ffff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_values() {
        // The catalogue's check values of "123456789" (CRC RevEng:
        // CRC-32/ISCSI 0xE3069283, CRC-32/ISO-HDLC 0xCBF43926).
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(!update32(&CRC32, !0, b"123456789"), 0xCBF4_3926);
        // RFC 3720 B.4: 32 bytes of zeros.
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(&[0xffu8; 32]), 0x62A8_AB43);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn cassandra_crcs_stay_in_range() {
        // The CRC24 is 24 bits wide whatever the header.
        for h in [[0u8; 3], [0xff; 3], [0x12, 0x34, 0x56]] {
            assert!(cassandra_crc24(&h) <= 0xff_ffff);
        }
        // The fixed prefix makes the payload CRC differ from plain CRC-32.
        assert_ne!(cassandra_crc32(b""), 0);
    }
}
