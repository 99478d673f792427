//! The two block formats CQL frames are compressed with before protocol v5
//! (native_protocol_v4.spec, section 5: `lz4`, the body an [int] of the
//! uncompressed length then an LZ4 block; `snappy`, a Snappy block), and
//! v5's compressed segments (native_protocol_v5.spec, section 2.2: LZ4
//! blocks). Written from the formats' descriptions (lz4's
//! `doc/lz4_Block_format.md`, snappy's `format_description.txt`), not from
//! either library: a probe reads only a body's first bytes, so both stop
//! once `max` bytes are out, and a block cut short (a body kept only up to
//! the parser's cap) gives what its first bytes hold.
//!
//! Both return `None` for a block that breaks its format (a copy reaching
//! before the start); the caller counts it and leaves the body unread.

/// Appends the LZ4 block `src` decoded to `out`, stopping at `max` bytes.
pub(crate) fn lz4(src: &[u8], out: &mut Vec<u8>, max: usize) -> Option<()> {
    let start = out.len();
    let mut i = 0;
    while i < src.len() && out.len() - start < max {
        let token = src[i];
        i += 1;
        let mut lit = usize::from(token >> 4);
        if lit == 15 {
            lit += ext_len(src, &mut i)?;
        }
        let end = i.checked_add(lit)?;
        let avail = &src[i..end.min(src.len())];
        let room = max - (out.len() - start);
        out.extend_from_slice(&avail[..avail.len().min(room)]);
        if end >= src.len() {
            // The last sequence has literals only (or the block is cut).
            return Some(());
        }
        i = end;
        let Some(off) = src.get(i..i + 2) else { return Some(()) };
        let off = usize::from(u16::from_le_bytes([off[0], off[1]]));
        i += 2;
        let mut len = usize::from(token & 15);
        if len == 15 {
            len += ext_len(src, &mut i)?;
        }
        copy_back(out, start, off, len + 4, max)?;
    }
    Some(())
}

/// An LZ4 length's extension bytes (each 255 means another follows).
fn ext_len(src: &[u8], i: &mut usize) -> Option<usize> {
    let mut n = 0usize;
    loop {
        let b = *src.get(*i)?;
        *i += 1;
        n = n.checked_add(usize::from(b))?;
        if b != 255 {
            return Some(n);
        }
    }
}

/// Copies `len` bytes from `off` back in what was decoded (overlapping
/// copies repeat the pattern), up to `max` decoded bytes in all.
fn copy_back(out: &mut Vec<u8>, start: usize, off: usize, len: usize, max: usize) -> Option<()> {
    let have = out.len() - start;
    if off == 0 || off > have {
        return None;
    }
    let n = len.min(max - have);
    let from = out.len() - off;
    if off >= n {
        out.extend_from_within(from..from + n);
    } else {
        // Overlapping: the copy repeats the last `off` bytes.
        for k in 0..n {
            out.push(out[from + k]);
        }
    }
    Some(())
}

/// Appends the Snappy block `src` decoded to `out`, stopping at `max` bytes.
pub(crate) fn snappy(src: &[u8], out: &mut Vec<u8>, max: usize) -> Option<()> {
    let start = out.len();
    // The preamble: the uncompressed length, a varint (read past, not trusted).
    let mut i = 0;
    loop {
        let b = *src.get(i)?;
        i += 1;
        if b & 0x80 == 0 {
            break;
        }
        if i >= 5 {
            return None;
        }
    }
    while i < src.len() && out.len() - start < max {
        let tag = src[i];
        i += 1;
        let (off, len) = match tag & 3 {
            0 => {
                let mut lit = usize::from(tag >> 2);
                if lit >= 60 {
                    let k = lit - 59;
                    let b = src.get(i..i + k).unwrap_or(&src[i.min(src.len())..]);
                    if b.len() < k {
                        return Some(());
                    }
                    lit = b.iter().rev().fold(0usize, |v, &x| (v << 8) | usize::from(x));
                    i += k;
                }
                let end = i.checked_add(lit + 1)?;
                let avail = &src[i..end.min(src.len())];
                let room = max - (out.len() - start);
                out.extend_from_slice(&avail[..avail.len().min(room)]);
                i = end;
                continue;
            }
            1 => {
                let b = *src.get(i)?;
                i += 1;
                ((usize::from(tag >> 5) << 8) | usize::from(b), usize::from((tag >> 2) & 7) + 4)
            }
            2 => {
                let b = src.get(i..i + 2)?;
                i += 2;
                (usize::from(u16::from_le_bytes([b[0], b[1]])), usize::from(tag >> 2) + 1)
            }
            _ => {
                let b = src.get(i..i + 4)?;
                i += 4;
                (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize, usize::from(tag >> 2) + 1)
            }
        };
        copy_back(out, start, off, len, max)?;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lz4_literals_and_overlapping_matches() {
        // "abcabcabcabcX": literals "abc", a match of 9 at offset 3, then
        // the last literals "X".
        let block = [0x35, b'a', b'b', b'c', 3, 0, 0x10, b'X'];
        let mut out = Vec::new();
        lz4(&block, &mut out, 1000).unwrap();
        assert_eq!(out, b"abcabcabcabcX");
        // Stopped at a cap, and cut input gives its prefix.
        let mut out = Vec::new();
        lz4(&block, &mut out, 5).unwrap();
        assert_eq!(out, b"abcab");
        let mut out = Vec::new();
        lz4(&block[..3], &mut out, 100).unwrap();
        assert_eq!(out, b"ab");
        // An offset before the start.
        assert!(lz4(&[0x10, b'a', 9, 0], &mut Vec::new(), 100).is_none());
    }

    #[test]
    fn snappy_literals_and_copies() {
        // Length 13; literal "abc" (tag (3-1)<<2); copy-1 len 9 (tag
        // ((9-4)<<2)|1, offset 3); literal "X".
        let block = [13, 2 << 2, b'a', b'b', b'c', (5 << 2) | 1, 3, 0, b'X'];
        let mut out = Vec::new();
        snappy(&block, &mut out, 1000).unwrap();
        assert_eq!(out, b"abcabcabcabcX");
        // A copy-2 of 4 at offset 2 after "xy".
        let mut out = Vec::new();
        snappy(&[6, 1 << 2, b'x', b'y', (3 << 2) | 2, 2, 0], &mut out, 100).unwrap();
        assert_eq!(out, b"xyxyxy");
        assert!(snappy(&[4, (3 << 2) | 2, 2, 0], &mut Vec::new(), 100).is_none());
    }
}
