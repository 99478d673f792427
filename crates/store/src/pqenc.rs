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
    // `i` starts a run of equal values. A run of 8 or more that starts at
    // or after `i` holds the value at `i + 7`, so only that value's run is
    // measured (back to `i`, and forward), and the next look is 8 past its
    // end: the same runs as measuring every run from its start, without a
    // comparison per value where values change every row (dictionary
    // indices of statements, ports, sizes).
    let mut i = 0;
    while i + 7 < n {
        let p = i + 7;
        let v = vals[p];
        let mut start = p;
        while start > i && vals[start - 1] == v {
            start -= 1;
        }
        let mut j = p + 1;
        while j < n && vals[j] == v {
            j += 1;
        }
        if j - start >= 8 {
            // Literals before the run fill whole groups of 8, taking the
            // run's first values if they must.
            let pad = (8 - (start - lit) % 8) % 8;
            let first = start + pad;
            if j - first >= 8 || (pad == 0) {
                bitpacked(out, &vals[lit..first], bw);
                let len = j - first;
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
    if bw > 16 {
        let pad = groups * 8 - vals.len();
        pack(out, vals.iter().map(|&v| v.u() as u64).chain(std::iter::repeat_n(0, pad)), bw);
        return;
    }
    // A group of eight at a time from the slice, the last one padded with
    // zeros in place: no chained iterator and no count of values per value
    // (the dictionary indices and levels of every page: ~13 instructions a
    // value on mysql_text through `pack`).
    out.reserve(groups * bw as usize);
    let mut eights = vals.chunks_exact(8);
    for g in &mut eights {
        pack8(out, [g[0].u(), g[1].u(), g[2].u(), g[3].u(), g[4].u(), g[5].u(), g[6].u(), g[7].u()], bw);
    }
    let rest = eights.remainder();
    if !rest.is_empty() {
        let mut last = [0u32; 8];
        for (l, &v) in last.iter_mut().zip(rest) {
            *l = v.u();
        }
        pack8(out, last, bw);
    }
}

/// Eight values of `bw` <= 16 bits packed as [`pack`] packs them: `bw`
/// bytes, in a 64-bit word when they fit one.
#[inline(always)]
fn pack8(out: &mut Vec<u8>, g: [u32; 8], bw: u32) {
    if bw <= 8 {
        let mut acc = 0u64;
        for (k, &v) in g.iter().enumerate() {
            acc |= u64::from(v) << (k as u32 * bw);
        }
        out.extend_from_slice(&acc.to_le_bytes()[..bw as usize]);
    } else {
        // Four values fill at most 64 bits: each half packed in a 64-bit
        // word, joined by one 128-bit shift (a 128-bit shift per value cost
        // ~5 instructions: 1.61 M of mysql_text's flush, dictionary indices
        // of 9-16 bits and latencies' deltas).
        let (mut lo, mut hi) = (0u64, 0u64);
        for k in 0..4 {
            lo |= u64::from(g[k]) << (k as u32 * bw);
            hi |= u64::from(g[k + 4]) << (k as u32 * bw);
        }
        let acc = u128::from(lo) | u128::from(hi) << (4 * bw);
        out.extend_from_slice(&acc.to_le_bytes()[..bw as usize]);
    }
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
        // Each miniblock's smallest and largest delta in one pass, the
        // block's smallest the least of them: a miniblock's widest value
        // above the block's minimum is its largest delta's (`d - min` is
        // the same in u64 as in exact integers, so it grows with `d`).
        // (Was a pass for the minimum, then one per miniblock for the
        // largest difference: ~7 instructions a value.)
        let minis = n.div_ceil(MINI);
        let (mut lows, mut highs) = ([i64::MAX; MINIBLOCKS], [i64::MIN; MINIBLOCKS]);
        for (m, part) in deltas[..n].chunks(MINI).enumerate() {
            for &d in part {
                lows[m] = lows[m].min(d);
                highs[m] = highs[m].max(d);
            }
        }
        let min = lows[..minis].iter().copied().min().unwrap_or(0);
        uleb(out, zigzag(min));
        let mut widths = [0u32; MINIBLOCKS];
        for (w, &high) in widths.iter_mut().zip(&highs[..minis]) {
            *w = bit_width(high.wrapping_sub(min) as u64);
        }
        out.extend(widths.iter().map(|&w| w as u8));
        // Miniblocks past the last value have a width but no bytes.
        for (m, &w) in widths.iter().enumerate().take(n.div_ceil(MINI)) {
            let part = &deltas[m * MINI..((m + 1) * MINI).min(n)];
            if w <= 16 {
                // Times and latencies: groups of eight from the miniblock,
                // zero-padded in place ([`pack8`], the bytes `pack` writes).
                let mut mini = [0u32; MINI];
                for (x, &d) in mini.iter_mut().zip(part) {
                    *x = d.wrapping_sub(min) as u32;
                }
                for g in 0..MINI / 8 {
                    pack8(out, std::array::from_fn(|k| mini[8 * g + k]), w);
                }
                continue;
            }
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
        let mut rnd = crate::test_rng(987654321u64);
        for bw in 1..=24u32 {
            for n in 0..40usize {
                let vals: Vec<u64> = (0..n)
                    .map(|_| rnd(1u64 << bw))
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

    /// A bit-packed run written a group at a time is the bytes of the
    /// values packed one at a time with the last group's zeros, for every
    /// width and a partial last group of each length.
    #[test]
    fn bitpacked_groups_are_packing_by_bits() {
        let mut rnd = crate::test_rng(123456789u64);
        for bw in 1..=24u32 {
            for n in 1..40usize {
                let vals: Vec<u32> = (0..n)
                    .map(|_| rnd(1u64 << bw) as u32)
                    .collect();
                let groups = n.div_ceil(8);
                let mut want = Vec::new();
                uleb(&mut want, ((groups as u64) << 1) | 1);
                pack(&mut want, vals.iter().map(|&v| u64::from(v)).chain(std::iter::repeat_n(0, groups * 8 - n)), bw);
                let mut got = Vec::new();
                bitpacked(&mut got, &vals, bw);
                assert_eq!(got, want, "{n} values of {bw} bits");
                let levels: Vec<i16> = vals.iter().map(|&v| (v & 1) as i16).collect();
                let (mut a, mut b) = (Vec::new(), Vec::new());
                bitpacked(&mut a, &levels, 1);
                uleb(&mut b, ((groups as u64) << 1) | 1);
                pack(&mut b, levels.iter().map(|&v| v as u64).chain(std::iter::repeat_n(0, groups * 8 - n)), 1);
                assert_eq!(a, b, "{n} levels");
            }
        }
    }

    /// The hybrid as written by measuring every run of equal values from
    /// its start (the encoder before it looked only at every eighth value).
    fn rle_hybrid_every_run(out: &mut Vec<u8>, vals: &[u32], bw: u32) {
        let n = vals.len();
        let value_bytes = bw.div_ceil(8) as usize;
        let mut lit = 0;
        let mut i = 0;
        while i < n {
            let v = vals[i];
            let mut j = i + 1;
            while j < n && vals[j] == v {
                j += 1;
            }
            if j - i >= 8 {
                let pad = (8 - (i - lit) % 8) % 8;
                let start = i + pad;
                if j - start >= 8 || (pad == 0) {
                    bitpacked(out, &vals[lit..start], bw);
                    uleb(out, ((j - start) as u64) << 1);
                    out.extend_from_slice(&v.to_le_bytes()[..value_bytes]);
                    lit = j;
                }
            }
            i = j;
        }
        bitpacked(out, &vals[lit..n], bw);
    }

    /// Runs of every length (1 to 40) at every offset, among values that
    /// change every row and short runs: the same bytes as measuring every
    /// run, and they decode to the values.
    #[test]
    fn runs_found_from_every_eighth_value_are_every_run() {
        let mut rnd = crate::test_rng(0x9e37_79b9_7f4a_7c15u64);
        for case in 0..3000 {
            let n = rnd(300) as usize;
            let mut vals = Vec::with_capacity(n);
            while vals.len() < n {
                let len = match rnd(4) {
                    0 => 1 + rnd(40) as usize,
                    1 => 6 + rnd(5) as usize,
                    _ => 1,
                };
                let v = rnd(if case % 3 == 0 { 2 } else { 1000 }) as u32;
                vals.extend(std::iter::repeat_n(v, len.min(n - vals.len())));
            }
            let bw = bit_width(vals.iter().copied().max().unwrap_or(0) as u64).max(1);
            let (mut got, mut want) = (Vec::new(), Vec::new());
            rle_hybrid(&mut got, &vals, bw);
            rle_hybrid_every_run(&mut want, &vals, bw);
            assert_eq!(got, want, "{vals:?}");
            assert_eq!(decode_hybrid(&got, bw, vals.len()), vals);
        }
    }

    /// DELTA_BINARY_PACKED as written with every miniblock through the
    /// generic [`pack`] (before narrow miniblocks went eight at a time).
    fn delta_by_bits(out: &mut Vec<u8>, vals: &[i64]) {
        uleb(out, BLOCK as u64);
        uleb(out, MINIBLOCKS as u64);
        uleb(out, vals.len() as u64);
        let Some(&first) = vals.first() else {
            uleb(out, 0);
            return;
        };
        uleb(out, zigzag(first));
        let deltas: Vec<i64> = vals.windows(2).map(|w| w[1].wrapping_sub(w[0])).collect();
        for block in deltas.chunks(BLOCK) {
            let min = block.iter().copied().min().unwrap_or(0);
            uleb(out, zigzag(min));
            let minis: Vec<&[i64]> = block.chunks(MINI).collect();
            let widths: Vec<u32> = (0..MINIBLOCKS)
                .map(|m| minis.get(m).map_or(0, |p| bit_width(p.iter().map(|&d| d.wrapping_sub(min) as u64).max().unwrap_or(0))))
                .collect();
            out.extend(widths.iter().map(|&w| w as u8));
            for (p, &w) in minis.iter().zip(&widths) {
                pack(out, p.iter().map(|&d| d.wrapping_sub(min) as u64).chain(std::iter::repeat_n(0, MINI - p.len())), w);
            }
        }
    }

    /// Sorted times, small and wide deltas (past 16 bits, negative, the
    /// whole i64 range) and partial last blocks: the same bytes as packing
    /// each miniblock value by value.
    #[test]
    fn narrow_miniblocks_by_eight_are_packing_by_bits() {
        let mut rnd = crate::test_rng(0x1234_5678_9abc_def1u64);
        for case in 0..400 {
            let n = rnd(700) as usize;
            let spread = [2, 1 << 10, 1 << 16, 1 << 17, 1 << 40][case % 5];
            let mut t = rnd(1 << 50) as i64;
            let vals: Vec<i64> = (0..n)
                .map(|_| {
                    t = t.wrapping_add(rnd(spread) as i64 - if case % 2 == 0 { 0 } else { spread as i64 / 2 });
                    if rnd(500) == 0 { rnd(u64::MAX) as i64 } else { t }
                })
                .collect();
            let (mut got, mut want) = (Vec::new(), Vec::new());
            delta_binary_packed(&mut got, &vals);
            delta_by_bits(&mut want, &vals);
            assert_eq!(got, want, "case {case}, {n} values");
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
