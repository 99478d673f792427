//! HPACK's Huffman code (RFC 7541 Appendix B), decoding only.
//!
//! The code is canonical: within one length the codes rise with the symbol,
//! and every code of one length is numerically below the codes of the next
//! length shifted to it. So the table is its 257 code lengths (the RFC's
//! `len` column, symbol 256 being EOS) and the codes follow from them; a test
//! checks codes the RFC lists.

/// Code length in bits of each symbol 0..=255 and of EOS (256).
const LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
    30,
];

const MAX_LEN: usize = 30;
/// The shortest code (5 bits: '0', '1', '2', 'a', 'c', 'e', 'i', 'o', 's', 't').
const MIN_LEN: usize = 5;
const EOS: u16 = 256;

/// The canonical decoding tables: per length, the first code, how many
/// codes it has, and where its symbols start in `symbols`.
struct Canon {
    first: [u32; MAX_LEN + 1],
    count: [u16; MAX_LEN + 1],
    start: [u16; MAX_LEN + 1],
    symbols: [u16; 257],
}

const fn canon() -> Canon {
    let mut count = [0u16; MAX_LEN + 1];
    let mut i = 0;
    while i < 257 {
        count[LENGTHS[i] as usize] += 1;
        i += 1;
    }
    let mut first = [0u32; MAX_LEN + 1];
    let mut start = [0u16; MAX_LEN + 1];
    let mut code = 0u32;
    let mut pos = 0u16;
    let mut len = 1;
    while len <= MAX_LEN {
        code = (code + count[len - 1] as u32) << 1;
        first[len] = code;
        start[len] = pos;
        pos += count[len];
        len += 1;
    }
    let mut symbols = [0u16; 257];
    let mut next = start;
    let mut s = 0;
    while s < 257 {
        let l = LENGTHS[s] as usize;
        symbols[next[l] as usize] = s as u16;
        next[l] += 1;
        s += 1;
    }
    Canon { first, count, start, symbols }
}

static CANON: Canon = canon();

/// Why a Huffman string did not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HuffmanError {
    /// The EOS symbol inside the string (RFC 7541 §5.2: an error).
    Eos,
    /// Padding longer than 7 bits, or not the EOS code's leading ones.
    Padding,
}

/// Decodes `src` and appends the bytes to `out`.
pub fn decode(src: &[u8], out: &mut Vec<u8>) -> Result<(), HuffmanError> {
    let c = &CANON;
    // The bits of the symbol being read, and how many.
    let mut code = 0u32;
    let mut len = 0usize;
    for &byte in src {
        for bit in (0..8).rev() {
            code = (code << 1) | ((byte >> bit) & 1) as u32;
            len += 1;
            if len < MIN_LEN {
                // No code is shorter.
                continue;
            }
            if len > MAX_LEN {
                return Err(HuffmanError::Padding);
            }
            let off = code.wrapping_sub(c.first[len]);
            if code >= c.first[len] && off < c.count[len] as u32 {
                let sym = c.symbols[(c.start[len] as u32 + off) as usize];
                if sym == EOS {
                    return Err(HuffmanError::Eos);
                }
                out.push(sym as u8);
                code = 0;
                len = 0;
            }
        }
    }
    // What is left must be a prefix of EOS (all ones) shorter than a byte.
    if len > 7 || code != (1u32 << len) - 1 {
        return Err(HuffmanError::Padding);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The code of `sym`, rebuilt from the canonical tables.
    fn code_of(sym: u16) -> (u32, usize) {
        let c = &CANON;
        let len = LENGTHS[sym as usize] as usize;
        let from = c.start[len] as usize;
        let k = c.symbols[from..from + c.count[len] as usize].iter().position(|&s| s == sym).unwrap();
        (c.first[len] + k as u32, len)
    }

    #[test]
    fn codes_are_the_rfcs() {
        // Rows of RFC 7541 Appendix B: (sym, code as hex, len).
        for (sym, code, len) in [
            (0u16, 0x1ff8u32, 13usize),
            (1, 0x7fffd8, 23),
            (9, 0xffffea, 24),
            (10, 0x3ffffffc, 30),
            (32, 0x14, 6),
            (48, 0x0, 5),
            (b'a' as u16, 0x3, 5),
            (b'e' as u16, 0x5, 5),
            (b'z' as u16, 0x7b, 7),
            (255, 0x3ffffee, 26),
            (256, 0x3fffffff, 30),
        ] {
            assert_eq!(code_of(sym), (code, len), "symbol {sym}");
        }
    }

    #[test]
    fn shortest_code_is_min_len() {
        assert_eq!(LENGTHS.iter().min(), Some(&(MIN_LEN as u8)));
    }

    #[test]
    fn decodes_rfc_examples() {
        // RFC 7541 C.4.1: "www.example.com".
        let wire = [0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff];
        let mut out = Vec::new();
        decode(&wire, &mut out).unwrap();
        assert_eq!(out, b"www.example.com");
        // C.4.2: "no-cache".
        out.clear();
        decode(&[0xa8, 0xeb, 0x10, 0x64, 0x9c, 0xbf], &mut out).unwrap();
        assert_eq!(out, b"no-cache");
        out.clear();
        assert_eq!(decode(&[], &mut out), Ok(()));
    }

    #[test]
    fn bad_padding_and_eos_are_errors() {
        let mut out = Vec::new();
        // A whole byte of ones after the string is padding longer than 7 bits.
        assert_eq!(decode(&[0xa8, 0xeb, 0x10, 0x64, 0x9c, 0xbf, 0xff], &mut out), Err(HuffmanError::Padding));
        // Padding of zeros ('0' is 00000: a symbol, then 3 zero bits).
        out.clear();
        assert_eq!(decode(&[0x00], &mut out), Err(HuffmanError::Padding));
        // EOS itself: 30 ones.
        out.clear();
        assert_eq!(decode(&[0xff, 0xff, 0xff, 0xfc], &mut out), Err(HuffmanError::Eos));
    }
}
