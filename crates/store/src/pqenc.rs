//! Parquet value encodings, write side: the RLE / bit-packing hybrid
//! (definition levels and dictionary indices), DELTA_BINARY_PACKED (sorted
//! times) and bit-packed booleans. As specified in Apache Parquet's
//! `Encodings.md` (parquet-format); read back by `fastdecode` and by every
//! Parquet reader.

/// Bits needed for values up to `max` (0 for 0).
pub(crate) fn bit_width(max: u64) -> u32 {
    64 - max.leading_zeros()
}

fn uleb(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Appends `vals` bit-packed, `bw` bits each, least significant bit first
/// (the order both the hybrid's bit-packed runs and DELTA's miniblocks use).
fn pack(out: &mut Vec<u8>, vals: impl Iterator<Item = u64>, bw: u32) {
    if bw == 0 {
        return;
    }
    if bw <= 16 {
        // Eight values fill exactly `bw` bytes (at most 128 bits): one
        // write per eight values instead of a byte at a time.
        let mut acc: u128 = 0;
        let mut k = 0u32;
        for v in vals {
            acc |= (v as u128) << (k * bw);
            k += 1;
            if k == 8 {
                out.extend_from_slice(&acc.to_le_bytes()[..bw as usize]);
                acc = 0;
                k = 0;
            }
        }
        if k > 0 {
            out.extend_from_slice(&acc.to_le_bytes()[..(k * bw).div_ceil(8) as usize]);
        }
        return;
    }
    let mut acc: u128 = 0;
    let mut bits = 0u32;
    for v in vals {
        acc |= (v as u128) << bits;
        bits += bw;
        while bits >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            bits -= 8;
        }
    }
    if bits > 0 {
        out.push(acc as u8);
    }
}

/// A value the hybrid encodes: dictionary indices (`u32`) and definition
/// levels (`i16`, never negative), read as they are buffered.
pub(crate) trait Hybrid: Copy + Eq {
    fn u(self) -> u32;
}

impl Hybrid for u32 {
    #[inline(always)]
    fn u(self) -> u32 {
        self
    }
}

impl Hybrid for i16 {
    #[inline(always)]
    fn u(self) -> u32 {
        self as u32
    }
}

/// Appends `vals` (each < 2^`bw`) as the RLE / bit-packing hybrid, without
/// a length prefix: runs of 8 or more equal values as RLE runs, the rest in
/// bit-packed groups of 8 (the last group padded with zeros; readers take
/// the value count from the page header).
pub(crate) fn rle_hybrid<T: Hybrid>(out: &mut Vec<u8>, vals: &[T], bw: u32) {
    let n = vals.len();
    let value_bytes = bw.div_ceil(8) as usize;
    let mut lit = 0; // start of values not yet written
    let mut i = 0;
    while i < n {
        let v = vals[i];
        let mut j = i + 1;
        while j < n && vals[j] == v {
            j += 1;
        }
        if j - i >= 8 {
            // Literals before the run fill whole groups of 8, taking the
            // run's first values if they must.
            let pad = (8 - (i - lit) % 8) % 8;
            let start = i + pad;
            if j - start >= 8 || (pad == 0) {
                bitpacked(out, &vals[lit..start], bw);
                let len = j - start;
                uleb(out, (len as u64) << 1);
                out.extend_from_slice(&v.u().to_le_bytes()[..value_bytes]);
                lit = j;
            }
        }
        i = j;
    }
    bitpacked(out, &vals[lit..n], bw);
}

/// `n` copies of `v` as [`rle_hybrid`] writes them (the same bytes),
/// without a slice to scan: the definition levels of a page without nulls.
pub(crate) fn rle_run(out: &mut Vec<u8>, n: usize, v: u32, bw: u32) {
    if n >= 8 {
        uleb(out, (n as u64) << 1);
        out.extend_from_slice(&v.to_le_bytes()[..bw.div_ceil(8) as usize]);
    } else {
        bitpacked(out, &[v; 8][..n], bw);
    }
}

/// `n` zeros as [`rle_hybrid`] writes them (the same bytes), without a
/// slice of zeros to scan: one RLE run, or one padded bit-packed group
/// below 8.
pub(crate) fn rle_zeros(out: &mut Vec<u8>, n: usize, bw: u32) {
    if n >= 8 {
        uleb(out, (n as u64) << 1);
        out.extend(std::iter::repeat_n(0, bw.div_ceil(8) as usize));
    } else if n > 0 && bw > 0 {
        uleb(out, (1 << 1) | 1);
        out.extend(std::iter::repeat_n(0, bw as usize));
    } else if n > 0 {
        uleb(out, (1 << 1) | 1);
    }
}

/// One bit-packed run of `vals` (groups of 8, the last padded).
fn bitpacked<T: Hybrid>(out: &mut Vec<u8>, vals: &[T], bw: u32) {
    if vals.is_empty() {
        return;
    }
    let groups = vals.len().div_ceil(8);
    uleb(out, ((groups as u64) << 1) | 1);
    let pad = groups * 8 - vals.len();
    pack(out, vals.iter().map(|&v| v.u() as u64).chain(std::iter::repeat_n(0, pad)), bw);
}

/// Booleans as PLAIN writes them: one bit each, least significant first.
pub(crate) fn plain_bools(out: &mut Vec<u8>, vals: &[bool]) {
    pack(out, vals.iter().map(|&b| b as u64), 1);
}

const BLOCK: usize = 128;
const MINIBLOCKS: usize = 4;
const MINI: usize = BLOCK / MINIBLOCKS;

/// INT64 values as DELTA_BINARY_PACKED: blocks of 128 deltas in 4
/// miniblocks of 32, each miniblock bit-packed at its own width above the
/// block's smallest delta. Sorted times cost a few bits a row.
pub(crate) fn delta_binary_packed(out: &mut Vec<u8>, vals: &[i64]) {
    uleb(out, BLOCK as u64);
    uleb(out, MINIBLOCKS as u64);
    uleb(out, vals.len() as u64);
    let Some(&first) = vals.first() else {
        uleb(out, 0);
        return;
    };
    uleb(out, zigzag(first));
    let mut deltas = [0i64; BLOCK];
    let mut prev = first;
    let mut rest = &vals[1..];
    while !rest.is_empty() {
        let n = rest.len().min(BLOCK);
        for (d, &v) in deltas.iter_mut().zip(&rest[..n]) {
            *d = v.wrapping_sub(prev);
            prev = v;
        }
        rest = &rest[n..];
        let min = deltas[..n].iter().copied().min().unwrap_or(0);
        uleb(out, zigzag(min));
        let mut widths = [0u32; MINIBLOCKS];
        for (m, w) in widths.iter_mut().enumerate() {
            let part = &deltas[(m * MINI).min(n)..((m + 1) * MINI).min(n)];
            let max = part.iter().map(|&d| d.wrapping_sub(min) as u64).max().unwrap_or(0);
            *w = bit_width(max);
        }
        out.extend(widths.iter().map(|&w| w as u8));
        // Miniblocks past the last value have a width but no bytes.
        for (m, &w) in widths.iter().enumerate().take(n.div_ceil(MINI)) {
            let part = &deltas[m * MINI..((m + 1) * MINI).min(n)];
            let pad = MINI - part.len();
            pack(
                out,
                part.iter().map(|&d| d.wrapping_sub(min) as u64).chain(std::iter::repeat_n(0, pad)),
                w,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of zeros written directly is the bytes the hybrid writes for it.
    #[test]
    fn zeros_as_the_hybrid_writes_them() {
        for bw in 0..=12 {
            for n in 0..300 {
                let (mut a, mut b) = (Vec::new(), Vec::new());
                rle_hybrid(&mut a, &vec![0u32; n], bw);
                rle_zeros(&mut b, n, bw);
                assert_eq!(a, b, "{n} zeros, {bw} bits");
                for v in [1u32, (1 << bw) - 1] {
                    let (mut a, mut b) = (Vec::new(), Vec::new());
                    rle_hybrid(&mut a, &vec![v; n], bw.max(1));
                    rle_run(&mut b, n, v, bw.max(1));
                    assert_eq!(a, b, "{n} x {v}, {bw} bits");
                }
            }
        }
    }

    /// The hybrid as read by its definition (a reference decoder here).
    fn decode_hybrid(mut buf: &[u8], bw: u32, n: usize) -> Vec<u32> {
        let mut out = Vec::new();
        let read_uleb = |buf: &mut &[u8]| {
            let (mut v, mut s) = (0u64, 0);
            loop {
                let b = buf[0];
                *buf = &buf[1..];
                v |= ((b & 0x7f) as u64) << s;
                s += 7;
                if b & 0x80 == 0 {
                    return v;
                }
            }
        };
        while out.len() < n {
            let h = read_uleb(&mut buf);
            if h & 1 == 0 {
                let nb = bw.div_ceil(8) as usize;
                let mut v = [0u8; 4];
                v[..nb].copy_from_slice(&buf[..nb]);
                buf = &buf[nb..];
                out.extend(std::iter::repeat_n(u32::from_le_bytes(v), (h >> 1) as usize));
            } else {
                let count = (h >> 1) as usize * 8;
                for k in 0..count {
                    let bit = k * bw as usize;
                    let mut v = 0u64;
                    for b in 0..bw as usize {
                        let at = bit + b;
                        v |= (((buf[at / 8] >> (at % 8)) & 1) as u64) << b;
                    }
                    out.push(v as u32);
                }
                buf = &buf[count * bw as usize / 8..];
            }
        }
        out.truncate(n);
        out
    }

    /// Eight values at a time are the bytes of one value at a time.
    #[test]
    fn packing_by_eight_is_packing_by_bits() {
        let mut x = 987654321u64;
        for bw in 1..=24u32 {
            for n in 0..40usize {
                let vals: Vec<u64> = (0..n)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x & ((1u64 << bw) - 1)
                    })
                    .collect();
                let mut want = Vec::new();
                let (mut acc, mut bits) = (0u128, 0u32);
                for &v in &vals {
                    acc |= (v as u128) << bits;
                    bits += bw;
                    while bits >= 8 {
                        want.push(acc as u8);
                        acc >>= 8;
                        bits -= 8;
                    }
                }
                if bits > 0 {
                    want.push(acc as u8);
                }
                let mut got = Vec::new();
                pack(&mut got, vals.iter().copied(), bw);
                assert_eq!(got, want, "{n} values of {bw} bits");
            }
        }
    }

    #[test]
    fn hybrid_round_trips() {
        let mut cases: Vec<(Vec<u32>, u32)> = vec![
            (vec![], 1),
            (vec![0; 100], 0),
            (vec![1; 3], 1),
            ((0..37).map(|i| i % 5).collect(), 3),
            ((0..50).map(|i| if i < 13 { i } else { 7 }).collect(), 4),
            ((0..50).map(|i| if (20..29).contains(&i) { 9 } else { i }).collect(), 6),
            ((0..200).map(|i| (i / 9) as u32).collect(), 5),
        ];
        let mut x = 12345u32;
        cases.push(((0..1000).map(|_| { x = x.wrapping_mul(1103515245).wrapping_add(12345); (x >> 16) % 3 }).collect(), 2));
        cases.push(((0..300).map(|i| i * 70_001).collect(), 25));
        for (vals, bw) in cases {
            let mut out = Vec::new();
            rle_hybrid(&mut out, &vals, bw);
            assert_eq!(decode_hybrid(&out, bw, vals.len()), vals, "bw {bw}");
        }
    }

    #[test]
    fn long_runs_are_rle() {
        let mut out = Vec::new();
        rle_hybrid(&mut out, &[1u32; 1000], 1);
        assert_eq!(out, [0xD0, 0x0F, 1]); // 1000 << 1 as uleb, then the value
    }

    #[test]
    fn bools_pack_lsb_first() {
        let mut out = Vec::new();
        plain_bools(&mut out, &[true, false, true, true, false, false, false, false, true]);
        assert_eq!(out, [0b1101, 1]);
    }
}
