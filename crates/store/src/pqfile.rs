//! A Parquet file written by our own code: column chunks of typed values
//! (dictionary pages and RLE_DICTIONARY indices, DELTA_BINARY_PACKED times,
//! PLAIN otherwise), data pages v1 compressed with zstd where it pays (stored
//! in raw zstd blocks where only the chunk's dictionary page pays), min/max
//! statistics per chunk, and the footer in the Thrift compact protocol
//! ([`thrift`]).
//!
//! The structures and their field ids are Apache Parquet's
//! (`src/main/thrift/parquet.thrift` in parquet-format); the layout is
//! `PAR1`, the row groups' pages, the footer, its length (u32 LE), `PAR1`.
//! Dictionaries are per column chunk (the format keeps one per chunk: a
//! row group of a file, not an hour of files).

use std::collections::HashMap;
use std::hash::Hash;
use std::io::Write;

use crate::batch::Kind;
use crate::encode::{PqCol, PqValues, RowSource, Texts};
use crate::pqenc::{bit_width, delta_binary_packed, plain_bools, rle_hybrid, rle_run, rle_zeros};
use crate::schema::{ColSpec, ColType};
use crate::thrift::{self, Ty};

type FastMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

/// A data page holds at most about this many bytes before compression
/// (and at most `PAGE_ROWS` rows).
const PAGE_BYTES: usize = 1 << 20;
const PAGE_ROWS: usize = 1 << 20;
/// A dictionary larger than this is not worth it: the chunk is written PLAIN.
pub(crate) const DICT_BYTES: usize = 1 << 20;

// Parquet's enums (parquet.thrift).
const T_BOOLEAN: i32 = 0;
const T_INT32: i32 = 1;
const T_INT64: i32 = 2;
const T_BYTE_ARRAY: i32 = 6;
const T_FLBA: i32 = 7;
const E_PLAIN: i32 = 0;
const E_RLE: i32 = 3;
const E_DELTA_BINARY_PACKED: i32 = 5;
const E_RLE_DICTIONARY: i32 = 8;
const CODEC_UNCOMPRESSED: i32 = 0;
const CODEC_ZSTD: i32 = 6;
const PAGE_DATA: i32 = 0;
const PAGE_DICTIONARY: i32 = 2;

/// How a kind's files are written.
#[derive(Clone)]
pub(crate) struct Format {
    pub kind: Kind,
    /// The file's columns, in order (a kind's, or in tests a prefix).
    pub cols: &'static [ColSpec],
    /// zstd level of address columns (the others at most `FAST_LEVEL`);
    /// `None`: pages uncompressed (the live records, decoded at once).
    pub zstd: Option<i32>,
    pub row_group_rows: usize,
    /// Whether the rows come in the kind's file order (declared in the footer).
    pub sorted: bool,
}

impl Format {
    /// The physical type of a column.
    fn phys(c: &ColSpec) -> i32 {
        match c.col_type() {
            ColType::TimeUs | ColType::DurUs | ColType::U64 => T_INT64,
            ColType::U8 | ColType::U16 | ColType::U32 => T_INT32,
            ColType::Ip => T_FLBA,
            ColType::Str => T_BYTE_ARRAY,
            ColType::Bool => T_BOOLEAN,
        }
    }

    /// The columns the rows are sorted by (file order), as indices.
    fn sorting(&self) -> Vec<i32> {
        if !self.sorted {
            return Vec::new();
        }
        let names: &[&str] = match self.kind {
            Kind::Flows => &["bucket", "server", "server_port", "proto", "client"],
            _ => &["ts"],
        };
        names
            .iter()
            .filter_map(|n| self.cols.iter().position(|c| c.name == *n).map(|i| i as i32))
            .collect()
    }
}

/// Min/max of a chunk, as Parquet's statistics hold them (plain bytes).
struct Stats {
    /// (min, max); `None` when every value is null.
    min_max: Option<(Vec<u8>, Vec<u8>)>,
    nulls: i64,
}

/// What the footer says of one column chunk.
struct ChunkMeta {
    phys: i32,
    name: &'static str,
    encodings: Vec<i32>,
    num_values: i64,
    uncompressed: i64,
    compressed: i64,
    start: i64,
    data_page_offset: i64,
    dict_page_offset: Option<i64>,
    stats: Option<Stats>,
    /// `CODEC_ZSTD` or `CODEC_UNCOMPRESSED`: chosen per chunk.
    codec: i32,
}

struct RowGroupMeta {
    chunks: Vec<ChunkMeta>,
    rows: i64,
}

/// Buffers a thread's files reuse from one page, column and file to the
/// next (a flush does not grow them again), and its zstd context.
#[derive(Default)]
struct Scratch {
    page: Vec<u8>,
    packed: Vec<u8>,
    header: Vec<u8>,
    idx: Vec<u32>,
    dict: Vec<u8>,
    /// A whole dictionary page compressed as the codec's sample
    /// ([`FileWriter::choose_codec`]): written as it is, not compressed again.
    dict_packed: Vec<u8>,
    /// The zstd contexts, and the levels they are set to: `[ADDR_CTX]` at
    /// the file's level (address columns), `[FAST_CTX]` at [`FAST_LEVEL`]
    /// or below (every other column).
    zstd: [Option<(i32, zstd::bulk::Compressor<'static>)>; 2],
}

/// The context of address columns: the file's zstd level.
const ADDR_CTX: usize = 0;
/// The context of every other column.
const FAST_CTX: usize = 1;
/// The zstd level of every column but the addresses, when the file's level
/// is higher. Measured on mysql_text's store (BENCHMARKS.md, "Issue 36, the
/// encoder (branch enc36b)"): level 1 makes the query text, latencies and
/// counts about as small as level 3 does (the file 0.8% larger), zstd's
/// instructions a row 1,512 -> 1,305; only the addresses of many distinct
/// clients need level 3 (121.4 kB at 3, 161.3 kB at 1 on
/// tests/full_disk.rs's 40,000 conns).
const FAST_LEVEL: i32 = 1;

thread_local! {
    /// The scratch of the thread's last file (the store's writer thread,
    /// compaction's): taken by a file while it is written, given back after.
    static SCRATCH: std::cell::Cell<Option<Box<Scratch>>> = const { std::cell::Cell::new(None) };
}

/// Compression pays for a chunk only when it saves at least this share of
/// its bytes (a tenth, estimated on a sample): otherwise the chunk is
/// written uncompressed and costs no zstd time to write or read. Not a
/// fifth: the times (`ts`, deltas of microseconds) save 14-19% on the
/// peers' captures, and a fifth would leave them uncompressed for ~38
/// instructions a mysql_text row at +2.7-4.2% store bytes (BENCHMARKS.md,
/// "Issue 36: the store's cost per row (branch store40)"): bytes bound how
/// much history a store of a given size keeps, so they were kept.
const MIN_SAVING: f64 = 0.10;
/// Bytes of a page compressed to estimate what zstd saves on its chunk.
const SAMPLE_BYTES: usize = 16 << 10;
/// A page of at most this many bytes is its own sample: compressed whole
/// once, and written so when zstd pays (a sample of a larger page is
/// compressed again with the rest). Pages of 16-32 KiB (the indices of
/// 49,202 rows at 2-3 bits: sizes, fingerprints) cost a sample and their
/// whole again; a page that does not pay costs up to twice a sample.
const WHOLE_SAMPLE_BYTES: usize = 2 * SAMPLE_BYTES;
/// Pages smaller than this are not compressed (zstd's frame alone takes
/// ~10 bytes).
const MIN_COMPRESS_BYTES: usize = 64;

/// A chunk's codec, as [`FileWriter::choose_codec`] found it from its samples.
#[derive(Clone, Copy)]
struct Codec {
    /// The chunk is zstd's (else UNCOMPRESSED).
    zstd: bool,
    /// The whole dictionary page was its sample: compressed in `dict_packed`.
    dict_done: bool,
    /// The whole first data page was its sample: compressed in `page`.
    first_done: bool,
    /// The data pages' own sample saves at least [`MIN_SAVING`].
    data_pays: bool,
}

/// How a page's body is written.
#[derive(Clone, Copy)]
enum PageMode {
    /// As it is (an UNCOMPRESSED chunk).
    Plain,
    /// Compressed (`done`: its compressed bytes are already in `page`).
    Zstd { done: bool },
    /// In a zstd chunk, a zstd frame of raw blocks ([`zstd_stored`]): a copy,
    /// no compression tried.
    Stored,
}

/// The largest raw block of a zstd frame (RFC 8878, `Block_Maximum_Size`).
const ZSTD_BLOCK_MAX: usize = 128 << 10;

/// `body` as one zstd frame (RFC 8878) of raw (stored) blocks into `out`:
/// what every zstd decoder reads back as `body`, for a page in a zstd chunk
/// that compression would leave nearly the same size. A single-segment frame
/// (its window is its content) with the content size and no checksum.
fn zstd_stored(out: &mut Vec<u8>, body: &[u8]) {
    out.clear();
    out.reserve(18 + 3 * (body.len() / ZSTD_BLOCK_MAX + 1) + body.len());
    out.extend_from_slice(&0xFD2F_B528u32.to_le_bytes());
    // Frame header descriptor: Single_Segment_flag (0x20) and the content
    // size's field: 1 byte (flag 0), 2 bytes less 256 (flag 1) or 4 bytes.
    let n = body.len();
    if n < 256 {
        out.push(0x20);
        out.push(n as u8);
    } else if n < 256 + 65536 {
        out.push(0x60);
        out.extend_from_slice(&((n - 256) as u16).to_le_bytes());
    } else {
        out.push(0xA0);
        out.extend_from_slice(&(n as u32).to_le_bytes());
    }
    let mut blocks = body.chunks(ZSTD_BLOCK_MAX).peekable();
    if blocks.peek().is_none() {
        // An empty page: one empty last block.
        out.extend_from_slice(&[1, 0, 0]);
    }
    while let Some(b) = blocks.next() {
        // Block header: Last_Block (bit 0), Block_Type 0 = raw, Block_Size.
        let header = (b.len() as u32) << 3 | u32::from(blocks.peek().is_none());
        out.extend_from_slice(&header.to_le_bytes()[..3]);
        out.extend_from_slice(b);
    }
}

/// Writes the rows `rows` of `src` as a Parquet file to `out`, counting
/// the bytes it writes.
pub(crate) struct FileWriter<'f, W: Write> {
    out: W,
    pos: i64,
    fmt: &'f Format,
    groups: Vec<RowGroupMeta>,
    s: Box<Scratch>,
    /// The zstd context of the chunk being written ([`ADDR_CTX`] or
    /// [`FAST_CTX`]).
    ctx: usize,
}

/// An I/O error, or what went wrong encoding.
pub(crate) enum WriteError {
    Io(std::io::Error),
    Encode(String),
}

impl From<std::io::Error> for WriteError {
    fn from(e: std::io::Error) -> Self {
        WriteError::Io(e)
    }
}

type Result<T> = std::result::Result<T, WriteError>;

/// Writes `rows` of `src` (in that order) as a whole file to `out`, with the
/// key-value pairs `kv` after the store's own (`wirelog.kind`, version).
pub(crate) fn write<W: Write>(
    out: W,
    src: &dyn RowSource,
    rows: &[u32],
    fmt: &Format,
    kv: &[(String, String)],
) -> Result<W> {
    let mut s = SCRATCH.take().unwrap_or_default();
    if let Some(level) = fmt.zstd {
        for (ctx, level) in [(ADDR_CTX, level), (FAST_CTX, level.min(FAST_LEVEL))] {
            if s.zstd[ctx].as_ref().is_none_or(|(l, _)| *l != level) {
                let z = zstd::bulk::Compressor::new(level).map_err(|e| WriteError::Encode(format!("zstd level {level}: {e}")))?;
                s.zstd[ctx] = Some((level, z));
            }
        }
    }
    let mut w = FileWriter::new(out, fmt, s)?;
    let written = rows
        .chunks(fmt.row_group_rows.max(1))
        .try_for_each(|chunk| w.row_group(src, chunk))
        .and_then(|()| w.finish(kv));
    SCRATCH.set(Some(w.s));
    written.map(|()| w.out)
}

impl<'f, W: Write> FileWriter<'f, W> {
    fn new(out: W, fmt: &'f Format, s: Box<Scratch>) -> Result<Self> {
        let mut w = FileWriter { out, pos: 0, fmt, groups: Vec::new(), s, ctx: ADDR_CTX };
        w.put(b"PAR1")?;
        Ok(w)
    }

    fn put(&mut self, b: &[u8]) -> Result<()> {
        self.out.write_all(b)?;
        self.pos += b.len() as i64;
        Ok(())
    }

    fn row_group(&mut self, src: &dyn RowSource, rows: &[u32]) -> Result<()> {
        let mut chunks = Vec::with_capacity(self.fmt.cols.len());
        // The rows' runs, found once for every column.
        // (A transaction buffer's columns are copied a run at a time.)
        let runs = if src.kind().is_tx() { crate::encode::runs(rows) } else { Vec::new() };
        for (c, spec) in self.fmt.cols.iter().enumerate() {
            let v = src.values_in_runs(c, rows, &runs);
            let chunk = self.chunk(spec, &v, rows.len());
            crate::encode::recycle(v);
            chunks.push(chunk?);
        }
        self.groups.push(RowGroupMeta { chunks, rows: rows.len() as i64 });
        Ok(())
    }

    /// One column chunk: its dictionary page (when a dictionary pays) and
    /// its data pages, compressed when a sample says zstd saves enough.
    fn chunk(&mut self, spec: &ColSpec, v: &PqValues, nrows: usize) -> Result<ChunkMeta> {
        let start = self.pos;
        let def = v.def.as_deref();
        let nulls = match def {
            None => 0,
            Some(d) => d.len() - values_len(&v.col),
        } as i64;
        let mut meta = ChunkMeta {
            phys: Format::phys(spec),
            name: spec.name,
            encodings: Vec::new(),
            num_values: nrows as i64,
            uncompressed: 0,
            compressed: 0,
            start,
            data_page_offset: start,
            dict_page_offset: None,
            stats: None,
            codec: CODEC_UNCOMPRESSED,
        };
        let with_stats = spec.has_statistics();
        self.ctx = if spec.col_type() == ColType::Ip { ADDR_CTX } else { FAST_CTX };
        // Dictionary: the indices of every present value, and the values once.
        // (A free-text column whose builder found a dictionary that pays
        // hands it as one: `DictText::free_text_values`.)
        let dict_len = if (spec.is_dictionary() && !matches!(v.col, PqCol::Bool(_))) || matches!(v.col, PqCol::Dict { .. }) {
            self.dictionary(&v.col)
        } else {
            None
        };
        // The indices the data pages take: the builder's own when it made
        // the dictionary (not copied again), else those `dictionary` found.
        let found = std::mem::take(&mut self.s.idx);
        let idx: &[u32] = match &v.col {
            PqCol::Dict { idx, .. } => idx,
            _ => &found,
        };
        let encoding = match dict_len {
            Some(_) => {
                if with_stats {
                    meta.stats = dict_stats(&v.col, idx, spec, nulls);
                }
                E_RLE_DICTIONARY
            }
            None => {
                if with_stats {
                    meta.stats = plain_stats(&v.col, spec, nulls);
                }
                match (&v.col, spec.encoding_is_delta()) {
                    (PqCol::I64(_), true) => E_DELTA_BINARY_PACKED,
                    _ => E_PLAIN,
                }
            }
        };
        let bw = dict_len.map_or(0, |n| bit_width(n.saturating_sub(1) as u64));
        // The first data page, built before anything of the chunk is
        // written: it and the dictionary decide the chunk's codec.
        let mut body = std::mem::take(&mut self.s.packed);
        let (mut r1, mut v1, mut page_enc) = self.page_body(v, def, idx, dict_len.is_some(), encoding, bw, nrows, 0, 0, &mut body);
        // The encodings the data pages take (a page of deltas wider than
        // PLAIN is written PLAIN).
        let mut encs = vec![page_enc];
        let mut dict = std::mem::take(&mut self.s.dict);
        let codec = self.choose_codec(dict_len.map(|_| &dict[..]), &body);
        meta.codec = if codec.zstd { CODEC_ZSTD } else { CODEC_UNCOMPRESSED };
        // Data pages zstd leaves nearly as they are, in a chunk compressed for
        // its dictionary page: stored in zstd frames of raw blocks.
        let data_mode = match codec {
            Codec { zstd: false, .. } => PageMode::Plain,
            Codec { data_pays: false, .. } => PageMode::Stored,
            Codec { first_done, .. } => PageMode::Zstd { done: first_done },
        };
        let mut r = Ok(());
        if let Some(n) = dict_len {
            meta.dict_page_offset = Some(self.pos);
            // The dictionary page is compressed in (or, when its sample was
            // the whole page, taken from) its own buffer: the first data
            // page's compressed sample stays in `page` for it.
            std::mem::swap(&mut self.s.page, &mut self.s.dict_packed);
            let mode = if codec.zstd { PageMode::Zstd { done: codec.dict_done } } else { PageMode::Plain };
            r = self.page(PAGE_DICTIONARY, &dict, n, 0, &mut meta, mode);
            std::mem::swap(&mut self.s.page, &mut self.s.dict_packed);
        }
        dict.clear();
        self.s.dict = dict;
        meta.data_page_offset = self.pos;
        // Data pages, cut by rows.
        let (mut r0, mut v0) = (0usize, 0usize);
        let mut first = true;
        while r.is_ok() && r0 < nrows {
            if !first {
                (r1, v1, page_enc) = self.page_body(v, def, idx, dict_len.is_some(), encoding, bw, nrows, r0, v0, &mut body);
                if !encs.contains(&page_enc) {
                    encs.push(page_enc);
                }
            }
            let mode = match data_mode {
                PageMode::Zstd { done } => PageMode::Zstd { done: first && done },
                mode => mode,
            };
            r = self.page(PAGE_DATA, &body, r1 - r0, page_enc, &mut meta, mode);
            first = false;
            (r0, v0) = (r1, v1);
        }
        self.s.packed = body;
        self.s.idx = found;
        r?;
        if dict_len.is_some() {
            encs.push(E_PLAIN);
        }
        // Levels of data pages v1 are RLE, whether written or not.
        encs.push(E_RLE);
        encs.sort_unstable();
        meta.encodings = encs;
        Ok(meta)
    }

    /// The body of the data page that starts at row `r0` (value `v0`) into
    /// `body`: as many rows as fit [`PAGE_BYTES`] and [`PAGE_ROWS`]; returns
    /// the row and value it ends before, and the page's encoding
    /// (`encoding`, or PLAIN for deltas that would take more room); `idx`:
    /// each present value's dictionary index when `dict`.
    #[allow(clippy::too_many_arguments)]
    fn page_body(
        &mut self,
        v: &PqValues,
        def: Option<&[i16]>,
        idx: &[u32],
        dict: bool,
        encoding: i32,
        bw: u32,
        nrows: usize,
        r0: usize,
        v0: usize,
        body: &mut Vec<u8>,
    ) -> (usize, usize, i32) {
        // A column with no value (every row null: the owner columns of a
        // capture without `--processes`) has pages of PAGE_ROWS rows and
        // levels that are one run of zeros: nothing to look at per row.
        let nvals = values_len(&v.col);
        let all_null = def.is_some() && nvals == 0;
        let (mut r1, mut v1, mut est) = (r0, v0, 0usize);
        if all_null {
            r1 = nrows.min(r0 + PAGE_ROWS);
        } else if r0 == 0 && nrows <= PAGE_ROWS && chunk_bytes(&v.col, dict) < PAGE_BYTES {
            // The whole chunk fits one page: the rows are not looked at
            // one by one (the loop below would end at the last row).
            (r1, v1) = (nrows, nvals);
        } else if let (false, PqCol::Plain(t) | PqCol::Bytes(t)) = (dict, &v.col) {
            // Text larger than a page (a statement's, a URI): the values the
            // page takes found from the offsets, then the rows that hold
            // them counted; the same cut as the loop below, without a look
            // at each value's size (~41 instructions a row on mysql_text).
            let take = text_page_values(t, matches!(v.col, PqCol::Bytes(_)), v0).unwrap_or(usize::MAX);
            let end = nrows.min(r0 + PAGE_ROWS);
            match def {
                None => {
                    r1 = end.min(r0.saturating_add(take));
                    v1 = v0 + (r1 - r0);
                }
                Some(d) => {
                    while r1 < end && v1 - v0 < take {
                        v1 += usize::from(d[r1] != 0);
                        r1 += 1;
                    }
                }
            }
        } else {
            while r1 < nrows && est < PAGE_BYTES && r1 - r0 < PAGE_ROWS {
                if def.is_none_or(|d| d[r1] != 0) {
                    est += if dict { 4 } else { value_size(&v.col, v1) };
                    v1 += 1;
                }
                r1 += 1;
            }
        }
        body.clear();
        if let Some(d) = def {
            let at = body.len();
            body.extend_from_slice(&[0; 4]);
            if all_null {
                rle_zeros(body, r1 - r0, 1);
            } else if r1 - r0 == v1 - v0 {
                // No null in the page: one run of ones.
                rle_run(body, r1 - r0, 1, 1);
            } else {
                rle_hybrid(body, &d[r0..r1], 1);
            }
            let len = (body.len() - at - 4) as u32;
            body[at..at + 4].copy_from_slice(&len.to_le_bytes());
        }
        match encoding {
            E_RLE_DICTIONARY => {
                body.push(bw as u8);
                if bw == 0 {
                    // One value: every index is 0, one run (the same bytes).
                    rle_zeros(body, v1 - v0, 0);
                } else {
                    rle_hybrid(body, &idx[v0..v1], bw);
                }
            }
            E_DELTA_BINARY_PACKED => {
                let PqCol::I64(x) = &v.col else { unreachable!("delta only on INT64") };
                let at = body.len();
                delta_binary_packed(body, &x[v0..v1]);
                // Values whose deltas need (nearly) all 64 bits: PLAIN is
                // smaller, and every reader takes either per page.
                if body.len() - at > 8 * (v1 - v0) {
                    body.truncate(at);
                    plain(body, &v.col, v0..v1);
                    return (r1, v1, E_PLAIN);
                }
            }
            _ => plain(body, &v.col, v0..v1),
        }
        (r1, v1, encoding)
    }

    /// Whether the chunk is compressed: zstd run on its dictionary page and
    /// first data page (each whole up to [`WHOLE_SAMPLE_BYTES`], else its
    /// first [`SAMPLE_BYTES`]) saves at least [`MIN_SAVING`] of their bytes.
    /// The whole dictionary page, and the whole first data page, when they
    /// were the samples, have their compressed bytes in `self.s.dict_packed`
    /// and `self.s.page` (not compressed twice: the pages of most chunks are
    /// no larger, and zstd gives the same bytes for the same page).
    fn choose_codec(&mut self, dict: Option<&[u8]>, first: &[u8]) -> Codec {
        let none = Codec { zstd: false, dict_done: false, first_done: false, data_pays: false };
        if self.fmt.zstd.is_none() {
            return none;
        }
        let Some((_, z)) = self.s.zstd[self.ctx].as_mut() else {
            return none;
        };
        let total = dict.map_or(0, <[u8]>::len) + first.len();
        if total < MIN_COMPRESS_BYTES {
            return none;
        }
        let mut sample = |b: &[u8], out: &mut Vec<u8>| -> Option<f64> {
            let part = if b.len() <= WHOLE_SAMPLE_BYTES { b } else { &b[..SAMPLE_BYTES] };
            out.clear();
            out.reserve(zstd::zstd_safe::compress_bound(part.len()));
            let n = z.compress_to_buffer(part, out).ok()?;
            Some(n as f64 / part.len().max(1) as f64)
        };
        // What the chunk's bytes would shrink to, by each page's sample.
        let mut after = 0.0;
        let mut dict_whole = false;
        if let Some(d) = dict.filter(|d| !d.is_empty()) {
            let Some(ratio) = sample(d, &mut self.s.dict_packed) else { return none };
            after += ratio * d.len() as f64;
            dict_whole = d.len() <= WHOLE_SAMPLE_BYTES;
        }
        let Some(first_ratio) = sample(first, &mut self.s.page) else { return none };
        after += first_ratio * first.len() as f64;
        let zstd = after <= (1.0 - MIN_SAVING) * total as f64;
        // A chunk without a dictionary page is compressed for its data pages
        // alone; with one, its data pages are compressed only when their own
        // sample pays too (mysql_text's statement indices: 15 bits a row,
        // ~5% saved, ~35 instructions a row of zstd).
        let data_pays = dict.is_none() || first.len() < MIN_COMPRESS_BYTES || first_ratio <= 1.0 - MIN_SAVING;
        Codec { zstd, dict_done: zstd && dict_whole, first_done: zstd && first.len() <= WHOLE_SAMPLE_BYTES, data_pays }
    }

    /// Fills `self.s.idx` with each present value's dictionary index and
    /// `self.s.dict` with the dictionary (PLAIN); `None` when it would
    /// outgrow [`DICT_BYTES`]. A builder's dictionary ([`PqCol::Dict`])
    /// keeps its indices where they are: only its page is written.
    fn dictionary(&mut self, col: &PqCol) -> Option<usize> {
        let (idx, dict) = (&mut self.s.idx, &mut self.s.dict);
        idx.clear();
        dict.clear();
        fn build<K: Hash + Eq + Copy>(
            vals: impl Iterator<Item = K>,
            idx: &mut Vec<u32>,
            dict: &mut Vec<u8>,
            put: impl Fn(&mut Vec<u8>, K),
        ) -> Option<usize> {
            let mut map: FastMap<K, u32> = HashMap::with_hasher(foldhash::fast::FixedState::with_seed(0x77_69_72_65));
            for v in vals {
                let n = map.len() as u32;
                let i = *map.entry(v).or_insert_with(|| {
                    put(dict, v);
                    n
                });
                if dict.len() > DICT_BYTES {
                    return None;
                }
                idx.push(i);
            }
            Some(map.len())
        }
        match col {
            PqCol::I32(x) => build(x.iter().copied(), idx, dict, |d, v| d.extend_from_slice(&v.to_le_bytes())),
            PqCol::I64(x) => build(x.iter().copied(), idx, dict, |d, v| d.extend_from_slice(&v.to_le_bytes())),
            PqCol::Flba(x) => build(x.iter().copied(), idx, dict, |d, v| d.extend_from_slice(&v)),
            PqCol::Bytes(s) => build(s.iter(), idx, dict, |d, v: &[u8]| {
                d.extend_from_slice(&(v.len() as u32).to_le_bytes());
                d.extend_from_slice(v);
            }),
            PqCol::Plain(s) => build(s.iter(), idx, dict, |d, v: &[u8]| d.extend_from_slice(v)),
            PqCol::Bool(_) => None,
            // The builder made the dictionary: its values are the page, its
            // indices the data, no value hashed again.
            PqCol::Dict { values, .. } => {
                plain(dict, values, 0..values_len(values));
                if dict.len() > DICT_BYTES {
                    return None;
                }
                Some(values_len(values))
            }
        }
    }

    /// Writes one page (`body` uncompressed) with its header, as `mode`
    /// says.
    fn page(&mut self, ty: i32, body: &[u8], values: usize, encoding: i32, meta: &mut ChunkMeta, mode: PageMode) -> Result<()> {
        let mut packed = std::mem::take(&mut self.s.page);
        let data: &[u8] = match (self.s.zstd[self.ctx].as_mut(), mode) {
            (_, PageMode::Stored) => {
                zstd_stored(&mut packed, body);
                &packed
            }
            (Some((_, z)), PageMode::Zstd { done }) => {
                if !done {
                    packed.clear();
                    packed.reserve(zstd::zstd_safe::compress_bound(body.len()));
                    if let Err(e) = z.compress_to_buffer(body, &mut packed) {
                        self.s.page = packed;
                        return Err(WriteError::Encode(format!("zstd: {e}")));
                    }
                }
                &packed
            }
            _ => body,
        };
        let mut h = std::mem::take(&mut self.s.header);
        h.clear();
        let mut t = thrift::Writer::new(&mut h);
        t.i32(1, ty);
        let sizes = to_i32(body.len()).and_then(|b| Ok((b, to_i32(data.len())?, to_i32(values)?)));
        let (body_len, data_len, values) = match sizes {
            Ok(x) => x,
            Err(e) => {
                self.s.header = h;
                self.s.page = packed;
                return Err(e);
            }
        };
        t.i32(2, body_len);
        t.i32(3, data_len);
        if ty == PAGE_DICTIONARY {
            t.begin(7);
            t.i32(1, values);
            t.i32(2, E_PLAIN);
            t.end();
        } else {
            t.begin(5);
            t.i32(1, values);
            t.i32(2, encoding);
            t.i32(3, E_RLE);
            t.i32(4, E_RLE);
            t.end();
        }
        t.finish();
        let r = self.put(&h).and_then(|()| {
            meta.uncompressed += (h.len() + body.len()) as i64;
            meta.compressed += (h.len() + data.len()) as i64;
            self.put(data)
        });
        self.s.header = h;
        self.s.page = packed;
        r
    }

    /// The footer, and the file's end.
    fn finish(&mut self, kv: &[(String, String)]) -> Result<()> {
        let mut f = Vec::with_capacity(1024);
        let mut t = thrift::Writer::new(&mut f);
        let fmt = self.fmt;
        t.i32(1, 1);
        t.list(2, Ty::Struct, fmt.cols.len() + 1);
        t.open();
        t.binary(4, format!("wirelog_{}", fmt.kind.as_str()).as_bytes());
        t.i32(5, fmt.cols.len() as i32);
        t.end();
        for c in fmt.cols {
            schema_element(&mut t, c);
        }
        t.i64(3, self.groups.iter().map(|g| g.rows).sum());
        t.list(4, Ty::Struct, self.groups.len());
        let sorting = fmt.sorting();
        for (ordinal, g) in self.groups.iter().enumerate() {
            t.open();
            t.list(1, Ty::Struct, g.chunks.len());
            for c in &g.chunks {
                column_chunk(&mut t, c);
            }
            t.i64(2, g.chunks.iter().map(|c| c.uncompressed).sum());
            t.i64(3, g.rows);
            if !sorting.is_empty() {
                t.list(4, Ty::Struct, sorting.len());
                for &i in &sorting {
                    t.open();
                    t.i32(1, i);
                    t.bool(2, false);
                    t.bool(3, false);
                    t.end();
                }
            }
            t.i64(5, g.chunks.first().map_or(0, |c| c.start));
            t.i64(6, g.chunks.iter().map(|c| c.compressed).sum());
            t.i16(7, ordinal.min(i16::MAX as usize) as i16);
            t.end();
        }
        let version = crate::schema::file_version(fmt.kind).to_string();
        let own = [("wirelog.kind", fmt.kind.as_str()), ("wirelog.schema_version", version.as_str())];
        t.list(5, Ty::Struct, own.len() + kv.len());
        for (k, v) in own.iter().map(|(k, v)| (*k, *v)).chain(kv.iter().map(|(k, v)| (k.as_str(), v.as_str()))) {
            t.open();
            t.binary(1, k.as_bytes());
            t.binary(2, v.as_bytes());
            t.end();
        }
        t.binary(6, format!("wirelog-store {}", env!("CARGO_PKG_VERSION")).as_bytes());
        // Every column's min/max follow its type's order (unsigned for the
        // unsigned integers, bytes for text and addresses).
        t.list(7, Ty::Struct, fmt.cols.len());
        for _ in fmt.cols {
            t.open();
            t.begin(1);
            t.end();
            t.end();
        }
        t.finish();
        let len = to_i32(f.len())? as u32;
        self.put(&f)?;
        self.put(&len.to_le_bytes())?;
        self.put(b"PAR1")
    }
}

fn to_i32(n: usize) -> Result<i32> {
    i32::try_from(n).map_err(|_| WriteError::Encode(format!("a page or footer of {n} bytes: more than Parquet's 2 GiB")))
}

fn schema_element(t: &mut thrift::Writer<'_>, c: &ColSpec) {
    t.open();
    t.i32(1, Format::phys(c));
    if c.col_type() == ColType::Ip {
        t.i32(2, 16);
    }
    t.i32(3, if c.is_optional() { 1 } else { 0 });
    t.binary(4, c.name.as_bytes());
    // ConvertedType for older readers, LogicalType for newer ones.
    // LogicalType's union field, with IntType's bit width and signedness.
    type Logical = Option<(i16, Option<(i8, bool)>)>;
    let (converted, logical): (Option<i32>, Logical) = match c.col_type() {
        ColType::TimeUs => (Some(10), Some((8, None))),
        ColType::U8 => (Some(11), Some((10, Some((8, false))))),
        ColType::U16 => (Some(12), Some((10, Some((16, false))))),
        ColType::U32 => (Some(13), Some((10, Some((32, false))))),
        ColType::U64 => (Some(14), Some((10, Some((64, false))))),
        ColType::Str => (Some(0), Some((1, None))),
        ColType::DurUs | ColType::Ip | ColType::Bool => (None, None),
    };
    if let Some(ct) = converted {
        t.i32(6, ct);
    }
    if let Some((variant, int)) = logical {
        t.begin(10);
        t.begin(variant);
        match (variant, int) {
            (8, _) => {
                // TIMESTAMP(isAdjustedToUTC = true, MICROS)
                t.bool(1, true);
                t.begin(2);
                t.begin(2);
                t.end();
                t.end();
            }
            (_, Some((bits, signed))) => {
                t.i8(1, bits);
                t.bool(2, signed);
            }
            _ => {}
        }
        t.end();
        t.end();
    }
    t.end();
}

fn column_chunk(t: &mut thrift::Writer<'_>, c: &ChunkMeta) {
    t.open();
    t.i64(2, c.start);
    t.begin(3);
    t.i32(1, c.phys);
    t.list(2, Ty::I32, c.encodings.len());
    for &e in &c.encodings {
        t.elem_i32(e);
    }
    t.list(3, Ty::Binary, 1);
    t.elem_binary(c.name.as_bytes());
    t.i32(4, c.codec);
    t.i64(5, c.num_values);
    t.i64(6, c.uncompressed);
    t.i64(7, c.compressed);
    t.i64(9, c.data_page_offset);
    if let Some(d) = c.dict_page_offset {
        t.i64(11, d);
    }
    if let Some(s) = &c.stats {
        t.begin(12);
        t.i64(3, s.nulls);
        if let Some((min, max)) = &s.min_max {
            t.binary(5, max);
            t.binary(6, min);
        }
        t.end();
    }
    t.end();
    t.end();
}

/// Bytes a value takes PLAIN (to cut pages).
fn value_size(col: &PqCol, i: usize) -> usize {
    match col {
        PqCol::I32(_) => 4,
        PqCol::I64(_) => 8,
        PqCol::Bool(_) => 1,
        PqCol::Flba(_) => 16,
        PqCol::Bytes(s) => 4 + s.get(i).len(),
        PqCol::Plain(s) => s.get(i).len(),
        PqCol::Dict { values, idx } => value_size(values, idx[i] as usize),
    }
}

/// How many of the values from `v0` on a text page takes: up to and with
/// the one that brings the page's PLAIN bytes (with each value's 4-byte
/// length when `with_len`) to [`PAGE_BYTES`], as [`value_size`] counts them;
/// `None` when all the rest stays below.
fn text_page_values(t: &Texts, with_len: bool, v0: usize) -> Option<usize> {
    let base = if v0 == 0 { 0 } else { t.ends[v0 - 1] };
    let ends = &t.ends[v0..];
    let per = if with_len { 4 } else { 0 };
    // The bytes of the first k + 1 values grow with k: the first k where
    // they reach PAGE_BYTES, by bisection.
    let (mut lo, mut hi) = (0, ends.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if ends[mid] - base + per * (mid + 1) < PAGE_BYTES {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    (lo < ends.len()).then_some(lo + 1)
}

/// Bytes the column's values take as a page counts them (`dict`: 4 a
/// value, as dictionary indices); `usize::MAX` for a builder's dictionary
/// written PLAIN (counted row by row).
fn chunk_bytes(col: &PqCol, dict: bool) -> usize {
    let n = values_len(col);
    if dict {
        return 4 * n;
    }
    match col {
        PqCol::I32(_) => 4 * n,
        PqCol::I64(_) => 8 * n,
        PqCol::Bool(_) => n,
        PqCol::Flba(_) => 16 * n,
        PqCol::Bytes(s) => 4 * n + s.data.len(),
        PqCol::Plain(s) => s.data.len(),
        PqCol::Dict { .. } => usize::MAX,
    }
}

/// How many values a column holds (present ones).
fn values_len(col: &PqCol) -> usize {
    match col {
        PqCol::I32(x) => x.len(),
        PqCol::I64(x) => x.len(),
        PqCol::Bool(x) => x.len(),
        PqCol::Flba(x) => x.len(),
        PqCol::Bytes(s) | PqCol::Plain(s) => s.ends.len(),
        PqCol::Dict { idx, .. } => idx.len(),
    }
}

/// PLAIN values `range` of a column.
fn plain(out: &mut Vec<u8>, col: &PqCol, range: std::ops::Range<usize>) {
    match col {
        PqCol::I32(x) => x[range].iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        PqCol::I64(x) => x[range].iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        PqCol::Flba(x) => x[range].iter().for_each(|v| out.extend_from_slice(v)),
        PqCol::Bool(x) => plain_bools(out, &x[range]),
        PqCol::Bytes(s) => {
            for i in range {
                let v = s.get(i);
                out.extend_from_slice(&(v.len() as u32).to_le_bytes());
                out.extend_from_slice(v);
            }
        }
        // Already PLAIN: the values' bytes in one piece.
        PqCol::Plain(s) if !range.is_empty() => {
            let start = if range.start == 0 { 0 } else { s.ends[range.start - 1] };
            out.extend_from_slice(&s.data[start..s.ends[range.end - 1]]);
        }
        PqCol::Plain(_) => {}
        // A dictionary past `DICT_BYTES`: its values written out in full.
        PqCol::Dict { values, idx } => {
            for &i in &idx[range] {
                plain(out, values, i as usize..i as usize + 1);
            }
        }
    }
}

/// Whether the column's integers order as unsigned (its logical type).
fn unsigned(spec: &ColSpec) -> bool {
    matches!(spec.col_type(), ColType::U8 | ColType::U16 | ColType::U32 | ColType::U64)
}

/// Min/max over `vals` in the column's order, as plain bytes.
fn min_max<'v, T: Copy + 'v, K: Ord>(vals: impl Iterator<Item = &'v T>, key: impl Fn(T) -> K) -> Option<(T, T)> {
    let mut it = vals.copied();
    let first = it.next()?;
    let (mut lo, mut hi) = (first, first);
    let (mut klo, mut khi) = (key(first), key(first));
    for v in it {
        let k = key(v);
        if k < klo {
            lo = v;
            klo = key(v);
        } else if k > khi {
            hi = v;
            khi = key(v);
        }
    }
    Some((lo, hi))
}

fn stats_of(col: &PqCol, spec: &ColSpec, pick: Option<&[u32]>) -> Option<(Vec<u8>, Vec<u8>)> {
    let uns = unsigned(spec);
    let (min, max) = match col {
        PqCol::I32(x) => {
            let (lo, hi) = if uns { min_max(x.iter(), |v| v as u32)? } else { min_max(x.iter(), |v| v)? };
            (lo.to_le_bytes().to_vec(), hi.to_le_bytes().to_vec())
        }
        PqCol::I64(x) => {
            let (lo, hi) = if uns { min_max(x.iter(), |v| v as u64)? } else { min_max(x.iter(), |v| v)? };
            (lo.to_le_bytes().to_vec(), hi.to_le_bytes().to_vec())
        }
        PqCol::Bool(x) => {
            let (lo, hi) = min_max(x.iter(), |v| v)?;
            (vec![lo as u8], vec![hi as u8])
        }
        PqCol::Flba(x) => {
            let (lo, hi) = min_max(x.iter(), |v| v)?;
            (lo.to_vec(), hi.to_vec())
        }
        // Each value without its length.
        PqCol::Plain(s) => {
            let mut it = s.iter().map(|v| &v[4..]);
            let first = it.next()?;
            let (lo, hi) = it.fold((first, first), |(lo, hi), v| (lo.min(v), hi.max(v)));
            (lo.to_vec(), hi.to_vec())
        }
        PqCol::Bytes(s) => {
            let (lo, hi) = match pick {
                Some(first_of_each) => {
                    let lo = first_of_each.iter().map(|&i| s.get(i as usize)).min()?;
                    let hi = first_of_each.iter().map(|&i| s.get(i as usize)).max()?;
                    (lo, hi)
                }
                None => {
                    let mut it = s.iter();
                    let first = it.next()?;
                    it.fold((first, first), |(lo, hi), v| (lo.min(v), hi.max(v)))
                }
            };
            (lo.to_vec(), hi.to_vec())
        }
        // Every distinct value is used by some row: the min/max of the
        // values are the column's.
        PqCol::Dict { values, .. } => return stats_of(values, spec, None),
    };
    Some((min, max))
}

/// Statistics of a column written PLAIN (or as deltas): over every value;
/// only the null count when every value is null.
fn plain_stats(col: &PqCol, spec: &ColSpec, nulls: i64) -> Option<Stats> {
    Some(Stats { min_max: stats_of(col, spec, None), nulls })
}

/// Statistics of a dictionary-encoded column: text over each distinct
/// value once (its first row), numbers over the values (as cheap).
fn dict_stats(col: &PqCol, idx: &[u32], spec: &ColSpec, nulls: i64) -> Option<Stats> {
    if let PqCol::Bytes(_) = col {
        let mut seen = 0u32;
        let mut firsts = Vec::new();
        for (row, &i) in idx.iter().enumerate() {
            if i == seen {
                firsts.push(row as u32);
                seen += 1;
            }
        }
        return Some(Stats { min_max: stats_of(col, spec, Some(&firsts)), nulls });
    }
    plain_stats(col, spec, nulls)
}

#[cfg(test)]
mod tests {
    use std::fs::File;

    use parquet::basic::{Compression, Encoding};
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::file::statistics::Statistics;

    use crate::schema::{self, ColType};
    use crate::{Cell, Column, Kind, Scan, Store, StoreOptions, TxRow};
    use wirelog_record::IpAddr16;

    const ROWS: usize = 3000;

    /// Row `i` of a kind: every own column set from `i` (text long and
    /// distinct, so its dictionary outgrows `DICT_BYTES` and its pages
    /// `PAGE_BYTES`), counts above `i64::MAX`, and every third value unset.
    fn row(kind: Kind, i: usize) -> TxRow {
        let extra = schema::tx_columns(kind)
            .iter()
            .map(|c| match c.col_type() {
                ColType::Str if i.is_multiple_of(3) => Cell::Str(None),
                ColType::Str => Cell::Str(Some(format!("{i:06}-{}", "x".repeat(1000)))),
                ColType::Bool => Cell::Bool(i.is_multiple_of(2)),
                ColType::DurUs => Cell::Dur((!i.is_multiple_of(3)).then_some(i as i64 * 1000)),
                ColType::U16 => Cell::U64((!i.is_multiple_of(3)).then_some(i as u64 % 65536)),
                _ => Cell::U64((!i.is_multiple_of(3)).then_some(u64::MAX - i as u64)),
            })
            .collect();
        TxRow {
            ts_ns: 1_800_000_000_000_000_000 + i as i64 * 1_000_000,
            uid: format!("C{i:017}"),
            client: IpAddr16::from_v4([10, 0, (i >> 8) as u8, i as u8]),
            client_port: 40000,
            server: IpAddr16::from_v4([10, 0, 0, 1]),
            server_port: 3306,
            transport: 6,
            status: if i.is_multiple_of(2) { "ok" } else { "error" },
            request_bytes: (!i.is_multiple_of(3)).then_some(u64::MAX - i as u64),
            response_bytes: None,
            latency_ns: Some(i as i64 * 1000),
            first_byte_latency_ns: None,
            sample_weight: 1,
            extra,
            orig_proc: None,
            resp_proc: None,
        }
    }

    /// A page stored in a zstd frame of raw blocks is read back as the page
    /// by zstd: empty, each content-size field's width and its edges, and
    /// pages of several blocks.
    #[test]
    fn stored_frames_decompress_to_the_page() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut out = Vec::new();
        for n in [0, 1, 255, 256, 257, 65_791, 65_792, 65_793, super::ZSTD_BLOCK_MAX, super::ZSTD_BLOCK_MAX + 1, 300_000] {
            let body: Vec<u8> = (0..n)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            super::zstd_stored(&mut out, &body);
            let blocks = n.div_ceil(super::ZSTD_BLOCK_MAX).max(1);
            assert!(out.len() <= n + 9 + 3 * blocks, "{n}: {} bytes", out.len());
            assert_eq!(zstd::bulk::decompress(&out, n).unwrap(), body, "{n}");
            assert_eq!(zstd::stream::decode_all(&out[..]).unwrap(), body, "{n}");
        }
    }

    /// A text column whose dictionary zstd shrinks but whose indices it
    /// does not (4,096 statements of one shape, used in a scrambled order):
    /// a zstd chunk whose data pages are stored frames, read back whole by
    /// the parquet crate and by our reader.
    #[test]
    fn stored_data_pages_read_back() {
        use parquet::record::RowAccessor;
        let kind = Kind::Mysql;
        let dir = std::env::temp_dir().join(format!("wirelog-pqstored-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut st = Store::open(&dir, StoreOptions { sync: false, ..Default::default() }).unwrap();
        let own = schema::tx_columns(kind);
        let q = own.iter().position(|c| c.name == "query").unwrap();
        let texts: Vec<String> = (0..20_000u64)
            .map(|i| {
                let mut h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                h ^= h >> 29;
                h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
                h ^= h >> 32;
                format!("select name, email from users where id = {} and state = 'active'", h % 4096)
            })
            .collect();
        let rows: Vec<TxRow> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut r = row(kind, i);
                r.extra.iter_mut().for_each(|c| {
                    if matches!(c, Cell::Str(_)) {
                        *c = Cell::Str(None);
                    }
                });
                r.extra[q] = Cell::Str(Some(t.clone()));
                r
            })
            .collect();
        st.append_tx(kind, &rows).unwrap();
        st.close().unwrap();

        let parts = crate::list_partitions(&dir, kind).unwrap();
        let (files, _) = crate::partition_files(&parts[0].path).unwrap();
        assert_eq!(files.len(), 1);
        let r = SerializedFileReader::new(File::open(&files[0]).unwrap()).unwrap();
        let cols = schema::columns(kind);
        let at = cols.iter().position(|c| c.name == "query").unwrap();
        let chunk = r.metadata().row_group(0).column(at);
        assert!(matches!(chunk.compression(), Compression::ZSTD(_)));
        assert!(chunk.dictionary_page_offset().is_some());
        // The data pages (12-bit indices of 20,000 rows: 30,000 bytes) are
        // not smaller than their indices: stored, not compressed.
        let data = chunk.compressed_size() - (chunk.data_page_offset() - chunk.dictionary_page_offset().unwrap());
        assert!(data >= 30_000, "{data}");
        let mut got = Vec::new();
        for row in r.get_row_iter(None).unwrap() {
            got.push(row.unwrap().get_string(at).unwrap().clone());
        }
        assert_eq!(got, texts);

        let mut ours = Vec::new();
        Store::scan(&dir, &Scan::new(kind).columns(&["query"]), |b| {
            let Column::Str(v) = b.column("query").unwrap() else { panic!() };
            ours.extend(v.iter().cloned());
            Ok(())
        })
        .unwrap();
        assert_eq!(ours, texts);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A text page's cut, found from the offsets, is the one the look at
    /// each value's size makes: the page ends with the value that brings it
    /// to PAGE_BYTES (or at PAGE_ROWS rows, or the end), takes the null rows
    /// before that value and, when the bytes stay below, those after the
    /// last value; with and without nulls, lengths counted or not.
    #[test]
    fn text_pages_cut_as_each_value_counted() {
        use super::{FileWriter, PAGE_BYTES, PAGE_ROWS, PqCol, PqValues, Texts, value_size};
        let fmt = schema::file_format(Kind::Mysql, 3, 1000).unwrap();
        let mut w = FileWriter::new(Vec::new(), &fmt, Box::default()).ok().unwrap();
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for case in 0..24 {
            // Values of 0-3000 bytes (a few of 200 kB), 2.5 MB in all or
            // less; every case ends on its own pattern of nulls.
            let nrows = if case % 3 == 0 { 300 } else { 3000 };
            let nulls = case % 4;
            let def: Vec<i16> = (0..nrows)
                .map(|r| match nulls {
                    0 => 1,
                    1 => i16::from(next() % 7 != 0),
                    2 => i16::from(r < nrows - 50 && next() % 3 != 0),
                    _ => i16::from(r % 500 == 0),
                })
                .collect();
            let mut t = Texts { data: Vec::new(), ends: Vec::new() };
            for _ in def.iter().filter(|&&d| d != 0) {
                let n = match next() % 100 {
                    0 => 200_000,
                    x if case % 2 == 0 => (x as usize) * 30,
                    _ => (next() % 1000) as usize,
                };
                t.data.extend(std::iter::repeat_n(b'q', n));
                t.ends.push(t.data.len());
            }
            let col = if case % 6 < 3 { PqCol::Plain(t) } else { PqCol::Bytes(t) };
            let def = (nulls != 0).then_some(def);
            let v = PqValues { col, def };
            let d = v.def.as_deref();
            let (mut r0, mut v0, mut body) = (0, 0, Vec::new());
            while r0 < nrows {
                // The reference: each value's size counted.
                let (mut r1, mut v1, mut est) = (r0, v0, 0usize);
                while r1 < nrows && est < PAGE_BYTES && r1 - r0 < PAGE_ROWS {
                    if d.is_none_or(|d| d[r1] != 0) {
                        est += value_size(&v.col, v1);
                        v1 += 1;
                    }
                    r1 += 1;
                }
                let (g1, h1, _) = w.page_body(&v, d, &[], false, super::E_PLAIN, 0, nrows, r0, v0, &mut body);
                assert_eq!((g1, h1), (r1, v1), "case {case} page at row {r0}");
                (r0, v0) = (r1, v1);
            }
        }
    }

    /// Integers without a dictionary are written as deltas (latencies,
    /// MySQL's insert id), unless the deltas of a page take more room than
    /// PLAIN (values that jump across the whole 64 bits): that page is
    /// PLAIN. Either way the parquet crate and our reader give every value
    /// back.
    #[test]
    fn integers_as_deltas_unless_plain_is_smaller() {
        let kind = Kind::Mysql;
        let dir = std::env::temp_dir().join(format!("wirelog-pqdelta-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let own = schema::tx_columns(kind);
        let jumpy = own.iter().position(|c| c.name == "insert_id").expect("mysql's insert_id");
        assert!(!own[jumpy].is_dictionary() && own[jumpy].col_type() == ColType::U64);
        let rows: Vec<TxRow> = (0..ROWS)
            .map(|i| {
                let mut r = row(kind, i);
                // Scattered over the 64 bits: so are the deltas.
                let mut x = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                x = (x ^ (x >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                r.extra[jumpy] = Cell::U64(Some(x ^ (x >> 29)));
                r
            })
            .collect();
        let mut st = Store::open(&dir, StoreOptions { sync: false, ..Default::default() }).unwrap();
        st.append_tx(kind, &rows).unwrap();
        st.close().unwrap();
        let parts = crate::list_partitions(&dir, kind).unwrap();
        let (files, _) = crate::partition_files(&parts[0].path).unwrap();
        let r = SerializedFileReader::new(File::open(&files[0]).unwrap()).unwrap();
        let cols = schema::columns(kind);
        let encs = |name: &str| -> Vec<Encoding> {
            let i = cols.iter().position(|c| c.name == name).unwrap();
            r.metadata().row_group(0).column(i).encodings().collect()
        };
        assert!(encs("latency").contains(&Encoding::DELTA_BINARY_PACKED), "{:?}", encs("latency"));
        let e = encs("insert_id");
        assert!(e.contains(&Encoding::PLAIN) && !e.contains(&Encoding::DELTA_BINARY_PACKED), "{e:?}");
        let names = ["latency", "insert_id"];
        let mut got = Vec::new();
        Store::scan(&dir, &Scan::new(kind).columns(&names), |b| {
            got.push(b);
            Ok(())
        })
        .unwrap();
        let (mut lat, mut ids) = (Vec::new(), Vec::new());
        for b in &got {
            let (Column::OptI64(l), Column::OptU64(v)) = (b.column("latency").unwrap(), b.column("insert_id").unwrap()) else {
                panic!("column types")
            };
            lat.extend(l.iter().copied());
            ids.extend(v.iter().copied());
        }
        assert_eq!(lat, rows.iter().map(|r| r.latency_ns).collect::<Vec<_>>());
        let want: Vec<Option<u64>> = rows.iter().map(|r| match r.extra[jumpy] { Cell::U64(v) => v, _ => None }).collect();
        assert_eq!(ids, want);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Every type, nulls, dictionaries that fall back to PLAIN, several
    /// pages a chunk, unsigned statistics: the parquet crate reads what we
    /// wrote (footer, encodings, statistics) and the store's own reader
    /// gives every value back.
    #[test]
    fn files_read_back_with_the_parquet_crate_and_our_reader() {
        let kind = Kind::Mysql;
        let dir = std::env::temp_dir().join(format!("wirelog-pqfile-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut st = Store::open(&dir, StoreOptions { sync: false, row_group_rows: 2000, ..Default::default() }).unwrap();
        let rows: Vec<TxRow> = (0..ROWS).map(|i| row(kind, i)).collect();
        st.append_tx(kind, &rows).unwrap();
        st.close().unwrap();

        let parts = crate::list_partitions(&dir, kind).unwrap();
        let (files, bad) = crate::partition_files(&parts[0].path).unwrap();
        assert!(bad.is_empty() && files.len() == 1, "{files:?} {bad:?}");
        let r = SerializedFileReader::new(File::open(&files[0]).unwrap()).unwrap();
        let md = r.metadata();
        assert_eq!(md.file_metadata().num_rows(), ROWS as i64);
        assert_eq!(md.num_row_groups(), 2);
        let kv = md.file_metadata().key_value_metadata().unwrap();
        assert!(kv.iter().any(|k| k.key == "wirelog.kind" && k.value.as_deref() == Some("mysql")));
        let cols = schema::columns(kind);
        let rg = md.row_group(0);
        assert_eq!(rg.num_rows(), 2000);
        for (c, spec) in rg.columns().iter().zip(cols) {
            assert_eq!(c.column_path().string(), spec.name);
            let encs: Vec<Encoding> = c.encodings().collect();
            match spec.name {
                "ts" | "latency" => assert!(encs.contains(&Encoding::DELTA_BINARY_PACKED), "{encs:?}"),
                "status" | "server" => assert!(encs.contains(&Encoding::RLE_DICTIONARY), "{encs:?}"),
                // A transaction's uid repeats per connection: a dictionary
                // (these 2000 distinct ones fit its 1 MiB).
                "uid" => assert!(encs.contains(&Encoding::RLE_DICTIONARY), "{encs:?}"),
                _ => {}
            }
            // Each chunk's codec by what zstd saves on it: nothing on the one
            // value of `server` and `transport` (an RLE run), much on the
            // uids' numbered text.
            match spec.name {
                "server" | "transport" => assert_eq!(c.compression(), Compression::UNCOMPRESSED, "{}", spec.name),
                "uid" => assert!(matches!(c.compression(), Compression::ZSTD(_)), "{}", spec.name),
                _ => {}
            }
            let own = schema::tx_columns(kind).iter().any(|o| o.name == spec.name);
            if own && spec.col_type() == ColType::Str && spec.is_dictionary() {
                // 1334 distinct texts of 1 kB: past the dictionary limit.
                assert!(!encs.contains(&Encoding::RLE_DICTIONARY), "{}: {encs:?}", spec.name);
                assert!(matches!(c.compression(), Compression::ZSTD(_)), "{}", spec.name);
            }
        }
        let stat = |name: &str| {
            let i = cols.iter().position(|c| c.name == name).unwrap();
            rg.column(i).statistics().cloned()
        };
        match stat("request_bytes") {
            // Unsigned order: the smallest is u64::MAX - 1999 (row 1999 is set).
            Some(Statistics::Int64(s)) => {
                assert_eq!(*s.min_opt().unwrap() as u64, u64::MAX - 1999);
                assert_eq!(*s.max_opt().unwrap() as u64, u64::MAX - 1);
                assert_eq!(s.null_count_opt(), Some(667));
            }
            other => panic!("{other:?}"),
        }
        match stat("status") {
            Some(Statistics::ByteArray(s)) => {
                assert_eq!(s.min_opt().unwrap().data(), b"error");
                assert_eq!(s.max_opt().unwrap().data(), b"ok");
            }
            other => panic!("{other:?}"),
        }
        match stat("ts") {
            Some(Statistics::Int64(s)) => assert_eq!(*s.min_opt().unwrap(), 1_800_000_000_000_000),
            other => panic!("{other:?}"),
        }
        assert!(stat("uid").is_none());

        // Our reader: every value back.
        let names: Vec<&'static str> = cols.iter().map(|c| c.name).collect();
        let mut got = Vec::new();
        Store::scan(&dir, &Scan::new(kind).columns(&names), |b| {
            got.push(b);
            Ok(())
        })
        .unwrap();
        let n: usize = got.iter().map(|b| b.rows()).sum();
        assert_eq!(n, ROWS);
        let col = |name: &str| -> Vec<Column> { got.iter().map(|b| b.column(name).unwrap().clone()).collect() };
        let mut req = Vec::new();
        for c in col("request_bytes") {
            let Column::OptU64(v) = c else { panic!() };
            req.extend(v);
        }
        assert_eq!(req, rows.iter().map(|r| r.request_bytes).collect::<Vec<_>>());
        let own = schema::tx_columns(kind);
        for (k, spec) in own.iter().enumerate() {
            let mut vals = Vec::new();
            for c in col(spec.name) {
                match c {
                    Column::Str(v) => vals.extend(v.into_iter().map(|s| Cell::Str((!s.is_empty()).then_some(s)))),
                    Column::OptU64(v) => vals.extend(v.into_iter().map(Cell::U64)),
                    Column::OptI64(v) => vals.extend(v.into_iter().map(Cell::Dur)),
                    Column::Bool(v) => vals.extend(v.into_iter().map(Cell::Bool)),
                    other => panic!("{}: {other:?}", spec.name),
                }
            }
            let want: Vec<Cell> = rows.iter().map(|r| r.extra[k].clone()).collect();
            assert_eq!(vals, want, "{}", spec.name);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
