//! Page decoding straight into typed vectors for the encodings this store
//! writes (PLAIN, RLE_DICTIONARY / PLAIN_DICTIONARY, DELTA_BINARY_PACKED)
//! on REQUIRED INT32, INT64 and FIXED_LEN_BYTE_ARRAY(16) columns. Column
//! chunks with anything else go through the parquet crate's generic reader.
//!
//! Pages come decompressed from the crate's page reader; values are decoded
//! lazily, `n` at a time, so a batch never holds more than it needs.

use bytes::Bytes;
use parquet::basic::{Encoding, Type as PhysicalType};
use parquet::column::page::{Page, PageReader};
use parquet::errors::ParquetError;

type Result<T> = std::result::Result<T, ParquetError>;

fn err(m: impl Into<String>) -> ParquetError {
    ParquetError::General(m.into())
}

/// Whether the fast path can read a column chunk with these encodings.
pub(crate) fn supported(phys: PhysicalType, type_len: i32, encodings: impl Iterator<Item = Encoding>) -> bool {
    let phys_ok = matches!(phys, PhysicalType::INT32 | PhysicalType::INT64)
        || (phys == PhysicalType::FIXED_LEN_BYTE_ARRAY && type_len == 16);
    phys_ok
        && encodings.into_iter().all(|e| {
            matches!(e, Encoding::PLAIN | Encoding::PLAIN_DICTIONARY | Encoding::RLE_DICTIONARY | Encoding::RLE)
                || (e == Encoding::DELTA_BINARY_PACKED && phys != PhysicalType::FIXED_LEN_BYTE_ARRAY)
        })
}

#[inline]
fn uleb(buf: &[u8], pos: &mut usize) -> Result<u64> {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = *buf.get(*pos).ok_or_else(|| err("truncated varint"))?;
        *pos += 1;
        if shift < 64 {
            v |= ((b & 0x7f) as u64) << shift;
        }
        if b & 0x80 == 0 {
            return Ok(v);
        }
        shift += 7;
        if shift > 70 {
            return Err(err("varint too long"));
        }
    }
}

#[inline]
fn zigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Reads `bw`-bit little-endian packed values starting at bit `bit` of `buf`.
#[inline(always)]
fn get_bits(buf: &[u8], bit: usize, bw: u32) -> u64 {
    let byte = bit >> 3;
    let shift = (bit & 7) as u32;
    let word = if byte + 8 <= buf.len() {
        u64::from_le_bytes(buf[byte..byte + 8].try_into().unwrap())
    } else {
        let mut tmp = [0u8; 8];
        let avail = buf.len().saturating_sub(byte);
        tmp[..avail].copy_from_slice(&buf[byte..byte + avail]);
        u64::from_le_bytes(tmp)
    };
    // bw <= 32 here, so shift + bw <= 39 bits fit in the word.
    (word >> shift) & ((1u64 << bw) - 1)
}

/// Unpacks `out.len()` values of `bw` bits (<= 64) from `buf` at bit `bit`.
fn unpack(buf: &[u8], mut bit: usize, bw: u32, out: &mut [u64]) {
    if bw == 0 {
        out.fill(0);
        return;
    }
    if bw <= 32 {
        for o in out.iter_mut() {
            *o = get_bits(buf, bit, bw);
            bit += bw as usize;
        }
    } else {
        for o in out.iter_mut() {
            let lo = get_bits(buf, bit, 32);
            let hi = get_bits(buf, bit + 32, bw - 32);
            *o = lo | (hi << 32);
            bit += bw as usize;
        }
    }
}

#[inline(always)]
fn unpack_idx_bw<const BW: u32>(buf: &[u8], bit: usize, out: &mut [u32]) {
    if BW == 0 {
        out.fill(0);
        return;
    }
    let mask = (1u64 << BW) - 1;
    // Fast path while 8 bytes can be loaded at every value's byte offset.
    let safe_end = buf.len().saturating_sub(8);
    let mut b = bit;
    for o in out.iter_mut() {
        let byte = b >> 3;
        let v = if byte <= safe_end {
            // SAFETY: byte + 8 <= buf.len() checked just above.
            let w = unsafe { std::ptr::read_unaligned(buf.as_ptr().add(byte) as *const u64) };
            (u64::from_le(w) >> (b & 7)) & mask
        } else {
            get_bits(buf, b, BW)
        };
        *o = v as u32;
        b += BW as usize;
    }
}

/// Unpacks dictionary indices (bit width <= 32).
fn unpack_idx(buf: &[u8], bit: usize, bw: u32, out: &mut [u32]) {
    macro_rules! dispatch {
        ($($w:literal)*) => {
            match bw {
                $($w => unpack_idx_bw::<$w>(buf, bit, out),)*
                _ => unreachable!("bit width checked when the run was read"),
            }
        };
    }
    dispatch!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32)
}

/// Looks `idx` up in `dict`, appending to `out`; fails on an index out of range.
#[inline(always)]
fn gather<D: Copy, T>(dict: &[D], idx: &[u32], out: &mut Vec<T>, f: impl Fn(D) -> T) -> Result<()> {
    let max = idx.iter().copied().fold(0u32, u32::max);
    if idx.is_empty() {
        return Ok(());
    }
    if max as usize >= dict.len() {
        return Err(err("dictionary index out of range"));
    }
    // SAFETY: every index is below dict.len() (checked above).
    out.extend(idx.iter().map(|&i| f(unsafe { *dict.get_unchecked(i as usize) })));
    Ok(())
}

/// The RLE / bit-packing hybrid (dictionary indices).
struct Rle {
    buf: Bytes,
    pos: usize,
    bw: u32,
    rle_left: usize,
    rle_value: u32,
    /// Bit-packed run: start bit (absolute in buf), values left, next index.
    bp_bit: usize,
    bp_left: usize,
}

impl Rle {
    fn new(buf: Bytes, pos: usize, bw: u32) -> Result<Rle> {
        if bw > 32 {
            return Err(err(format!("dictionary index bit width {bw}")));
        }
        Ok(Rle { buf, pos, bw, rle_left: 0, rle_value: 0, bp_bit: 0, bp_left: 0 })
    }

    fn next_run(&mut self) -> Result<()> {
        let h = uleb(&self.buf, &mut self.pos)?;
        if h & 1 == 1 {
            let groups = (h >> 1) as usize;
            let bytes = groups * self.bw as usize;
            if self.pos + bytes > self.buf.len() {
                // Writers may end a page's last run early: use what is there.
                let avail = self.buf.len() - self.pos;
                self.bp_left = if self.bw == 0 { groups * 8 } else { avail * 8 / self.bw as usize };
            } else {
                self.bp_left = groups * 8;
            }
            self.bp_bit = self.pos * 8;
            self.pos += bytes.min(self.buf.len() - self.pos);
        } else {
            self.rle_left = (h >> 1) as usize;
            let nbytes = (self.bw as usize).div_ceil(8);
            if self.pos + nbytes > self.buf.len() {
                return Err(err("truncated RLE run"));
            }
            let mut v = 0u32;
            for i in 0..nbytes {
                v |= (self.buf[self.pos + i] as u32) << (8 * i);
            }
            self.pos += nbytes;
            self.rle_value = v;
        }
        Ok(())
    }

    /// Calls `f(index, count)` for runs covering exactly `n` values.
    #[inline]
    fn read(&mut self, mut n: usize, mut f: impl FnMut(Run<'_>) -> Result<()>) -> Result<()> {
        while n > 0 {
            if self.rle_left == 0 && self.bp_left == 0 {
                if self.pos >= self.buf.len() {
                    return Err(err("dictionary indices end early"));
                }
                self.next_run()?;
                continue;
            }
            if self.rle_left > 0 {
                let k = self.rle_left.min(n);
                f(Run::Repeat(self.rle_value, k))?;
                self.rle_left -= k;
                n -= k;
            } else {
                let k = self.bp_left.min(n);
                f(Run::Packed { buf: &self.buf, bit: self.bp_bit, bw: self.bw, count: k })?;
                self.bp_bit += k * self.bw as usize;
                self.bp_left -= k;
                n -= k;
            }
        }
        Ok(())
    }
}

enum Run<'a> {
    Repeat(u32, usize),
    Packed { buf: &'a [u8], bit: usize, bw: u32, count: usize },
}

/// DELTA_BINARY_PACKED.
struct Delta {
    buf: Bytes,
    pos: usize,
    block_size: usize,
    miniblocks: usize,
    per_mini: usize,
    left: usize,
    last: i64,
    first_pending: bool,
    min_delta: i64,
    widths: Vec<u8>,
    mini: usize,
    /// Decoded deltas of the current miniblock, and how many are used.
    vals: Vec<u64>,
    used: usize,
}

impl Delta {
    fn new(buf: Bytes, mut pos: usize) -> Result<Delta> {
        let block_size = uleb(&buf, &mut pos)? as usize;
        let miniblocks = uleb(&buf, &mut pos)? as usize;
        let total = uleb(&buf, &mut pos)? as usize;
        let first = zigzag(uleb(&buf, &mut pos)?);
        if miniblocks == 0 || block_size == 0 || !block_size.is_multiple_of(miniblocks) || block_size > 1 << 20 {
            return Err(err("bad DELTA_BINARY_PACKED header"));
        }
        let per_mini = block_size / miniblocks;
        Ok(Delta {
            buf,
            pos,
            block_size,
            miniblocks,
            per_mini,
            left: total,
            last: first,
            first_pending: total > 0,
            min_delta: 0,
            widths: Vec::new(),
            mini: usize::MAX,
            vals: vec![0; per_mini],
            used: per_mini,
        })
    }

    fn next_miniblock(&mut self) -> Result<()> {
        if self.mini == usize::MAX || self.mini + 1 >= self.miniblocks {
            // New block.
            self.min_delta = zigzag(uleb(&self.buf, &mut self.pos)?);
            if self.pos + self.miniblocks > self.buf.len() {
                return Err(err("truncated DELTA_BINARY_PACKED block"));
            }
            self.widths.clear();
            self.widths.extend_from_slice(&self.buf[self.pos..self.pos + self.miniblocks]);
            self.pos += self.miniblocks;
            self.mini = 0;
        } else {
            self.mini += 1;
        }
        let bw = self.widths[self.mini] as u32;
        if bw > 64 {
            return Err(err("DELTA_BINARY_PACKED bit width > 64"));
        }
        let bytes = self.per_mini * bw as usize / 8;
        let avail = self.buf.len().saturating_sub(self.pos);
        // The last miniblock may be cut short by a writer; missing bytes read as 0
        // (only values past the end would use them).
        unpack(&self.buf[self.pos..self.pos + bytes.min(avail)], 0, bw, &mut self.vals);
        self.pos += bytes.min(avail);
        self.used = 0;
        let _ = self.block_size;
        Ok(())
    }

    fn read<T: IntOut, const W32: bool>(&mut self, n: usize, out: &mut Vec<T>) -> Result<()> {
        if n > self.left {
            return Err(err("DELTA_BINARY_PACKED values end early"));
        }
        let mut n = n;
        if n > 0 && self.first_pending {
            out.push(T::conv::<W32>(self.last));
            self.first_pending = false;
            self.left -= 1;
            n -= 1;
        }
        while n > 0 {
            if self.used == self.per_mini {
                self.next_miniblock()?;
            }
            let k = (self.per_mini - self.used).min(n);
            let mut last = self.last;
            let md = self.min_delta;
            out.extend(self.vals[self.used..self.used + k].iter().map(|&d| {
                last = last.wrapping_add(md).wrapping_add(d as i64);
                T::conv::<W32>(last)
            }));
            self.last = last;
            self.used += k;
            self.left -= k;
            n -= k;
        }
        Ok(())
    }
}

/// Integer outputs: values are converted with `as`; `W32` first truncates
/// to i32 and sign-extends (INT32 columns decoded in 64-bit arithmetic).
pub(crate) trait IntOut: Copy {
    fn conv<const W32: bool>(v: i64) -> Self;
}

macro_rules! int_out {
    ($($t:ty),*) => {$(
        impl IntOut for $t {
            #[inline(always)]
            fn conv<const W32: bool>(v: i64) -> Self {
                if W32 { v as i32 as $t } else { v as $t }
            }
        }
    )*};
}
int_out!(i64, u64, u32, u16, u8);

enum PageState {
    Empty,
    Plain { buf: Bytes, pos: usize, left: usize },
    Dict { rle: Rle, left: usize },
    Delta { d: Delta, left: usize },
}

/// A fast reader over one REQUIRED column chunk.
pub(crate) struct FastReader {
    pages: Box<dyn PageReader>,
    phys: PhysicalType,
    dict_int: Vec<i64>,
    dict_ip: Vec<[u8; 16]>,
    state: PageState,
    idx: Vec<u32>,
}

impl FastReader {
    pub(crate) fn new(pages: Box<dyn PageReader>, phys: PhysicalType) -> FastReader {
        FastReader { pages, phys, dict_int: Vec::new(), dict_ip: Vec::new(), state: PageState::Empty, idx: Vec::new() }
    }

    fn width(&self) -> usize {
        match self.phys {
            PhysicalType::INT32 => 4,
            PhysicalType::INT64 => 8,
            _ => 16,
        }
    }

    fn load_dict(&mut self, buf: &[u8], n: usize) -> Result<()> {
        let w = self.width();
        if buf.len() < n * w {
            return Err(err("dictionary page shorter than its values"));
        }
        match self.phys {
            PhysicalType::INT32 => {
                self.dict_int =
                    buf[..n * 4].chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().unwrap()) as i64).collect()
            }
            PhysicalType::INT64 => {
                self.dict_int =
                    buf[..n * 8].chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect()
            }
            _ => self.dict_ip = buf[..n * 16].chunks_exact(16).map(|c| c.try_into().unwrap()).collect(),
        }
        Ok(())
    }

    /// Moves to the next data page (reading a dictionary page on the way).
    fn next_page(&mut self) -> Result<()> {
        loop {
            let page = self.pages.get_next_page()?.ok_or_else(|| err("column chunk ends early"))?;
            let (buf, num_values, encoding, skip) = match page {
                Page::DictionaryPage { buf, num_values, encoding, .. } => {
                    if !matches!(encoding, Encoding::PLAIN | Encoding::PLAIN_DICTIONARY) {
                        return Err(err(format!("dictionary page encoding {encoding}")));
                    }
                    self.load_dict(&buf, num_values as usize)?;
                    continue;
                }
                Page::DataPage { buf, num_values, encoding, .. } => (buf, num_values as usize, encoding, 0),
                Page::DataPageV2 {
                    buf,
                    num_values,
                    encoding,
                    def_levels_byte_len,
                    rep_levels_byte_len,
                    num_nulls,
                    ..
                } => {
                    if num_nulls != 0 {
                        return Err(err("nulls in a required column"));
                    }
                    (buf, num_values as usize, encoding, (def_levels_byte_len + rep_levels_byte_len) as usize)
                }
            };
            if skip > buf.len() {
                return Err(err("page levels longer than the page"));
            }
            self.state = match encoding {
                Encoding::PLAIN => {
                    if buf.len() - skip < num_values * self.width() {
                        return Err(err("PLAIN page shorter than its values"));
                    }
                    PageState::Plain { buf, pos: skip, left: num_values }
                }
                Encoding::PLAIN_DICTIONARY | Encoding::RLE_DICTIONARY => {
                    let bw = *buf.get(skip).ok_or_else(|| err("empty dictionary-encoded page"))? as u32;
                    PageState::Dict { rle: Rle::new(buf, skip + 1, bw)?, left: num_values }
                }
                Encoding::DELTA_BINARY_PACKED if self.phys != PhysicalType::FIXED_LEN_BYTE_ARRAY => {
                    PageState::Delta { d: Delta::new(buf, skip)?, left: num_values }
                }
                e => return Err(err(format!("unsupported page encoding {e}"))),
            };
            return Ok(());
        }
    }

    fn left(&self) -> usize {
        match &self.state {
            PageState::Empty => 0,
            PageState::Plain { left, .. } | PageState::Dict { left, .. } | PageState::Delta { left, .. } => *left,
        }
    }

    /// Appends `n` integer values to `out`, converted with `as` (INT32
    /// values are sign-extended first).
    pub(crate) fn read_ints<T: IntOut>(&mut self, n: usize, out: &mut Vec<T>) -> Result<()> {
        if self.phys == PhysicalType::INT32 {
            self.read_ints_w::<T, true>(n, out)
        } else {
            self.read_ints_w::<T, false>(n, out)
        }
    }

    fn read_ints_w<T: IntOut, const W32: bool>(&mut self, mut n: usize, out: &mut Vec<T>) -> Result<()> {
        out.reserve(n);
        while n > 0 {
            if self.left() == 0 {
                self.next_page()?;
                continue;
            }
            let k = self.left().min(n);
            match &mut self.state {
                PageState::Empty => unreachable!(),
                PageState::Plain { buf, pos, left } => {
                    if W32 {
                        out.extend(
                            buf[*pos..*pos + 4 * k]
                                .chunks_exact(4)
                                .map(|c| T::conv::<true>(i32::from_le_bytes(c.try_into().unwrap()) as i64)),
                        );
                        *pos += 4 * k;
                    } else {
                        out.extend(
                            buf[*pos..*pos + 8 * k]
                                .chunks_exact(8)
                                .map(|c| T::conv::<false>(i64::from_le_bytes(c.try_into().unwrap()))),
                        );
                        *pos += 8 * k;
                    }
                    *left -= k;
                }
                PageState::Dict { rle, left } => {
                    let dict = &self.dict_int;
                    let idx = &mut self.idx;
                    rle.read(k, |run| {
                        match run {
                            Run::Repeat(i, c) => {
                                let v = *dict.get(i as usize).ok_or_else(|| err("dictionary index out of range"))?;
                                out.extend(std::iter::repeat_n(T::conv::<W32>(v), c));
                            }
                            Run::Packed { buf, bit, bw, count } => {
                                idx.resize(count, 0);
                                unpack_idx(buf, bit, bw, idx);
                                gather(dict, idx, out, T::conv::<W32>)?;
                            }
                        }
                        Ok(())
                    })?;
                    *left -= k;
                }
                PageState::Delta { d, left } => {
                    d.read::<T, W32>(k, out)?;
                    *left -= k;
                }
            }
            n -= k;
        }
        Ok(())
    }

    /// Appends `n` 16-byte values to `out`.
    pub(crate) fn read_ips(&mut self, mut n: usize, out: &mut Vec<[u8; 16]>) -> Result<()> {
        out.reserve(n);
        while n > 0 {
            if self.left() == 0 {
                self.next_page()?;
                continue;
            }
            let k = self.left().min(n);
            match &mut self.state {
                PageState::Empty | PageState::Delta { .. } => unreachable!(),
                PageState::Plain { buf, pos, left } => {
                    out.extend(buf[*pos..*pos + 16 * k].chunks_exact(16).map(|c| <[u8; 16]>::try_from(c).unwrap()));
                    *pos += 16 * k;
                    *left -= k;
                }
                PageState::Dict { rle, left } => {
                    let dict = &self.dict_ip;
                    let idx = &mut self.idx;
                    rle.read(k, |run| {
                        match run {
                            Run::Repeat(i, c) => {
                                let v = *dict.get(i as usize).ok_or_else(|| err("dictionary index out of range"))?;
                                out.extend(std::iter::repeat_n(v, c));
                            }
                            Run::Packed { buf, bit, bw, count } => {
                                idx.resize(count, 0);
                                unpack_idx(buf, bit, bw, idx);
                                gather(dict, idx, out, |v| v)?;
                            }
                        }
                        Ok(())
                    })?;
                    *left -= k;
                }
            }
            n -= k;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits() {
        // values 1..=8 at 4 bits: bytes 0x21 0x43 0x65 0x87
        let buf = [0x21u8, 0x43, 0x65, 0x87];
        let mut out = [0u64; 8];
        unpack(&buf, 0, 4, &mut out);
        assert_eq!(out, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(zigzag(3), -2);
        assert_eq!(zigzag(4), 2);
    }
}
