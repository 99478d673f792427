//! Writing rows to one Parquet file, atomically.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use wirelog_record::{Proc, ProcOwner};

use crate::batch::Kind;
use crate::error::StoreError;
use crate::fsutil::{publish_synced, remove_file_if_exists};
use crate::pqfile::{self, Format, WriteError};

/// Values of one column in Parquet's physical representation: only the
/// non-null values, plus definition levels for optional columns.
pub(crate) enum PqCol {
    I32(Vec<i32>),
    I64(Vec<i64>),
    Bool(Vec<bool>),
    Flba(Vec<[u8; 16]>),
    Bytes(Texts),
    /// Byte strings already in PLAIN form: each value is its length (u32
    /// LE) then its bytes, so a page's values are one copy (a transaction
    /// buffer's free text, `crate::tx`).
    Plain(Texts),
    /// Already dictionary-encoded by a column builder (`crate::dict`): the
    /// distinct values the rows given use, each once (`values`, never
    /// itself a `Dict`; in the buffer's arrival order when the rows are all
    /// the buffer's, else in order of first use), and each present value's
    /// index into them.
    Dict { values: Box<PqCol>, idx: Vec<u32> },
}

/// Byte strings in one buffer: value `i` is `data[ends[i-1]..ends[i]]`.
#[derive(Default)]
pub(crate) struct Texts {
    pub data: Vec<u8>,
    pub ends: Vec<usize>,
}

impl Texts {
    pub(crate) fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.data[start..self.ends[i]]
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let v = &self.data[start..end];
            start = end;
            v
        })
    }
}

pub(crate) struct PqValues {
    pub col: PqCol,
    pub def: Option<Vec<i16>>,
}

/// Rows to be written: the write buffers and merged batches implement it.
pub(crate) trait RowSource {
    fn kind(&self) -> Kind;
    fn len(&self) -> usize;
    /// The partitioning time of a row (ns).
    fn time_ns(&self, row: usize) -> i64;
    /// Sorts row indices into file order.
    fn sort_rows(&self, rows: &mut [u32]);
    /// Whether file order ([`RowSource::sort_rows`]) is by
    /// [`RowSource::time_ns`]: a sorted row's time is never before the
    /// row's before it (the writer then finds an hour's rows by bisection).
    fn sorted_by_time(&self) -> bool {
        false
    }
    /// Column `col` ([`crate::schema::file_columns`] order) of the given rows.
    fn values(&self, col: usize, rows: &[u32]) -> PqValues;
    /// [`RowSource::values`], with `runs` the rows' runs of consecutive
    /// buffer rows ([`runs`], found once for all the columns of a row
    /// group): a source whose columns are vectors in buffer order copies a
    /// run at a time instead of looking each row up.
    fn values_in_runs(&self, col: usize, rows: &[u32], runs: &[Run]) -> PqValues {
        let _ = runs;
        self.values(col, rows)
    }
}

/// Rows `first..first + len` of a buffer, taken one after the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    pub first: u32,
    pub len: u32,
}

impl Run {
    pub(crate) fn range(self) -> std::ops::Range<usize> {
        self.first as usize..(self.first + self.len) as usize
    }
}

/// The runs of consecutive buffer rows that `rows` (a file's order) is made
/// of, in its order: a transaction buffer is nearly in time order (2.4% of
/// mysql_text's rows arrive late), so its files are a few long runs.
pub(crate) fn runs(rows: &[u32]) -> Vec<Run> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        let first = rows[i];
        let mut j = i + 1;
        while j < rows.len() && rows[j] == first.wrapping_add((j - i) as u32) {
            j += 1;
        }
        out.push(Run { first, len: (j - i) as u32 });
        i = j;
    }
    out
}

/// Whether `rows` (made of `runs`) are better taken one by one than a run at
/// a time: a run costs a call and its bounds (~40 instructions) however short
/// it is, and a buffer's late rows cut its runs short (mysql_text: 49,202
/// rows in 9,745 runs, 5 rows a run), where a row costs ~5.
pub(crate) fn runs_are_short(rows: &[u32], runs: &[Run]) -> bool {
    runs.len().saturating_mul(SHORT_RUN) > rows.len()
}

/// A run of fewer rows than this on average: the rows are taken one by one
/// ([`runs_are_short`]).
const SHORT_RUN: usize = 16;

/// The entries of `rows` of `src` appended to `out` as they are: a run of
/// rows at a time (`runs`, the runs of `rows`), each run one slice, or row
/// by row when the runs are short ([`runs_are_short`]).
pub(crate) fn copy_in_runs<T: Copy>(rows: &[u32], runs: &[Run], src: &[T], out: &mut Vec<T>) {
    if runs_are_short(rows, runs) {
        out.extend(rows.iter().map(|&r| src[r as usize]));
        return;
    }
    for r in runs {
        out.extend_from_slice(&src[r.range()]);
    }
}

/// An OPTIONAL column's `rows` of `src`: the present values (`value` of a
/// row's entry, `None` for an unset row) appended to `vals`, and a
/// definition level per row to `def` when it is given; what [`opt_i64`]
/// gives row by row. Taken a run of rows at a time (`runs`, the runs of
/// `rows`) in two passes over each, the levels written without a check of
/// the vector's room per row (the length is the run's), then the values;
/// or, when the runs are short ([`runs_are_short`]), row by row in the same
/// two passes.
#[inline]
pub(crate) fn optional_in_runs<S: Copy, U>(
    rows: &[u32],
    runs: &[Run],
    src: &[S],
    value: impl Fn(S) -> Option<U>,
    vals: &mut Vec<U>,
    mut def: Option<&mut Vec<i16>>,
) {
    if runs_are_short(rows, runs) {
        if let Some(def) = def {
            def.extend(rows.iter().map(|&r| i16::from(value(src[r as usize]).is_some())));
        }
        vals.extend(rows.iter().filter_map(|&r| value(src[r as usize])));
        return;
    }
    for r in runs {
        let part = &src[r.range()];
        if let Some(def) = def.as_deref_mut() {
            def.extend(part.iter().map(|&x| i16::from(value(x).is_some())));
        }
        vals.extend(part.iter().filter_map(|&x| value(x)));
    }
}

/// `f` of each row of `runs` of `src`, appended to `out` a run at a time
/// (each run a slice: no bounds check per row).
#[inline]
pub(crate) fn gather<T: Copy, U>(out: &mut Vec<U>, runs: &[Run], src: &[T], f: impl Fn(T) -> U) {
    for r in runs {
        out.extend(src[r.range()].iter().map(|&x| f(x)));
    }
}

// ---- buffers reused from one column chunk to the next -----------------------

/// Value buffers the writer handed back once their column chunk was written
/// ([`recycle`]), taken again by the next column or file of the thread
/// ([`buf`]): a flush neither allocates its columns anew nor grows them by
/// `realloc` as they fill.
#[derive(Default)]
pub(crate) struct Pool {
    bytes: Vec<Vec<u8>>,
    ends: Vec<Vec<usize>>,
    levels: Vec<Vec<i16>>,
    i64s: Vec<Vec<i64>>,
    i32s: Vec<Vec<i32>>,
    u32s: Vec<Vec<u32>>,
}

/// Buffers kept per element type: a column chunk holds at most three of a
/// type at once (values, ends or indices, levels).
const POOL_KEEP: usize = 4;
/// A buffer larger than this (one huge file) is freed rather than kept.
const POOL_MAX_BYTES: usize = 32 << 20;

thread_local! {
    static POOL: std::cell::RefCell<Pool> = std::cell::RefCell::new(Pool::default());
}

/// An element type [`Pool`] keeps buffers of.
pub(crate) trait Pooled: Sized {
    fn shelf(p: &mut Pool) -> &mut Vec<Vec<Self>>;
}

macro_rules! pooled {
    ($($t:ty => $f:ident),*) => {
        $(impl Pooled for $t {
            fn shelf(p: &mut Pool) -> &mut Vec<Vec<$t>> {
                &mut p.$f
            }
        })*
    };
}
pooled!(u8 => bytes, usize => ends, i16 => levels, i64 => i64s, i32 => i32s, u32 => u32s);

/// An empty buffer with room for `cap` elements, reused when the thread
/// has one.
pub(crate) fn buf<T: Pooled>(cap: usize) -> Vec<T> {
    let mut v = POOL.with_borrow_mut(|p| T::shelf(p).pop()).unwrap_or_default();
    v.clear();
    if v.capacity() < cap {
        // A new buffer rather than `reserve`: a cleared buffer grown by
        // `realloc` would have its old bytes copied for nothing.
        v = Vec::with_capacity(cap);
    }
    v
}

/// Gives `v` back to the thread's pool.
pub(crate) fn give<T: Pooled>(v: Vec<T>) {
    if v.capacity() == 0 || v.capacity() * std::mem::size_of::<T>() > POOL_MAX_BYTES {
        return;
    }
    POOL.with_borrow_mut(|p| {
        let shelf = T::shelf(p);
        if shelf.len() < POOL_KEEP {
            shelf.push(v);
        }
    });
}

/// Gives a written column's buffers back to the thread's pool.
pub(crate) fn recycle(v: PqValues) {
    fn col(c: PqCol) {
        match c {
            PqCol::I32(x) => give(x),
            PqCol::I64(x) => give(x),
            PqCol::Bytes(t) | PqCol::Plain(t) => {
                give(t.data);
                give(t.ends);
            }
            PqCol::Dict { values, idx } => {
                col(*values);
                give(idx);
            }
            PqCol::Bool(_) | PqCol::Flba(_) => {}
        }
    }
    col(v.col);
    if let Some(d) = v.def {
        give(d);
    }
}

// ---- helpers to build column values ---------------------------------------

pub(crate) fn req_i64(rows: &[u32], f: impl Fn(usize) -> i64) -> PqValues {
    let mut v = buf(rows.len());
    v.extend(rows.iter().map(|&r| f(r as usize)));
    PqValues { col: PqCol::I64(v), def: None }
}

pub(crate) fn req_i32(rows: &[u32], f: impl Fn(usize) -> i32) -> PqValues {
    let mut v = buf(rows.len());
    v.extend(rows.iter().map(|&r| f(r as usize)));
    PqValues { col: PqCol::I32(v), def: None }
}

pub(crate) fn req_bool(rows: &[u32], f: impl Fn(usize) -> bool) -> PqValues {
    PqValues {
        col: PqCol::Bool(rows.iter().map(|&r| f(r as usize)).collect()),
        def: None,
    }
}

/// An OPTIONAL column: the present values, and a definition level per row.
fn optional<T: Pooled>(
    rows: &[u32],
    f: impl Fn(usize) -> Option<T>,
    wrap: fn(Vec<T>) -> PqCol,
) -> PqValues {
    let mut vals = buf(rows.len());
    let mut def = buf(rows.len());
    for &r in rows {
        match f(r as usize) {
            Some(v) => {
                vals.push(v);
                def.push(1);
            }
            None => def.push(0),
        }
    }
    PqValues {
        col: wrap(vals),
        def: Some(def),
    }
}

pub(crate) fn opt_i64(rows: &[u32], f: impl Fn(usize) -> Option<i64>) -> PqValues {
    optional(rows, f, PqCol::I64)
}

pub(crate) fn opt_i32(rows: &[u32], f: impl Fn(usize) -> Option<i32>) -> PqValues {
    optional(rows, f, PqCol::I32)
}

/// IPs, 16 bytes each.
pub(crate) fn req_ip(rows: &[u32], f: impl Fn(usize) -> [u8; 16]) -> PqValues {
    PqValues {
        col: PqCol::Flba(rows.iter().map(|&r| f(r as usize)).collect()),
        def: None,
    }
}

/// Strings: one shared buffer. `optional` columns
/// write `None` as null; required ones write it as "".
pub(crate) fn strings<'a>(
    rows: &[u32],
    optional: bool,
    f: impl Fn(usize) -> Option<&'a [u8]>,
) -> PqValues {
    let mut data = buf(0);
    let mut ends = buf(rows.len());
    let mut def = buf(if optional { rows.len() } else { 0 });
    for &r in rows {
        match f(r as usize) {
            Some(s) => {
                data.extend_from_slice(s);
                ends.push(data.len());
                if optional {
                    def.push(1);
                }
            }
            None if optional => def.push(0),
            None => ends.push(data.len()),
        }
    }
    PqValues {
        col: PqCol::Bytes(Texts { data, ends }),
        def: optional.then_some(def),
    }
}

/// An owner column of `rows` rows, every one null (no row has an owner).
pub(crate) fn null_owner(name: &str, rows: usize) -> PqValues {
    let col = if name.ends_with("_pid") { PqCol::I64(Vec::new()) } else { PqCol::Bytes(Texts::default()) };
    let mut def = buf(rows);
    def.resize(rows, 0);
    PqValues { col, def: Some(def) }
}

/// An owner column (`orig_pid`, `resp_proc`, ...: see `schema::with_owners!`)
/// of connections or transactions, from each row's two owners; unknown
/// owners and empty names are null.
pub(crate) fn owner_values(name: &str, orig: &[Proc], resp: &[Proc], rows: &[u32]) -> PqValues {
    let (procs, field) = match (name.strip_prefix("orig_"), name.strip_prefix("resp_")) {
        (Some(f), _) => (orig, f),
        (_, Some(f)) => (resp, f),
        _ => unreachable!("owner column {name}"),
    };
    // Without `capture --processes` no row has an owner: all null, at the
    // cost of a check per row instead of a value's.
    if rows.iter().all(|&r| procs[r as usize].is_none()) {
        return null_owner(name, rows.len());
    }
    let text = |f: fn(&ProcOwner) -> &str| {
        strings(rows, true, move |r| {
            procs[r].as_deref().map(f).filter(|s| !s.is_empty()).map(str::as_bytes)
        })
    };
    match field {
        "pid" => opt_i64(rows, |r| procs[r].as_ref().map(|o| o.pid as i64)),
        "proc" => text(|o| &o.name),
        "exe" => text(|o| &o.exe),
        "user" => text(|o| &o.user),
        "container" => text(|o| &o.container),
        "pod" => text(|o| &o.pod),
        other => unreachable!("owner column {name} ({other})"),
    }
}

// ---- files -----------------------------------------------------------------

static SEQ: AtomicU64 = AtomicU64::new(0);

fn unix_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// A file written into a partition.
#[derive(Debug, Clone)]
pub struct WrittenFile {
    pub path: PathBuf,
    pub rows: u64,
    pub bytes: u64,
}

/// Writes `rows` (already in file order) of `src` to a new file in `dir`
/// (`<prefix>-<unix_nanos>-<seq>.parquet`): written under a hidden
/// temporary name, fsynced, renamed, and the directory fsynced (`sync_dir`
/// false: left to the caller, a staged run's commit).
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_file(
    dir: &Path,
    prefix: &str,
    src: &dyn RowSource,
    rows: &[u32],
    fmt: &Format,
    kv: &[(String, String)],
    sync: bool,
    sync_dir: bool,
) -> Result<WrittenFile, StoreError> {
    let (tmp, dst) = loop {
        let stem = format!(
            "{prefix}-{:019}-{:06}",
            unix_nanos(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let dst = dir.join(format!("{stem}.parquet"));
        if !dst.exists() {
            break (dir.join(format!(".{stem}.tmp")), dst);
        }
    };
    let file = crate::fsutil::create_new(&tmp)?;
    let result = write_parquet(&tmp, file, src, rows, fmt, kv);
    let file = match result {
        Ok(f) => f,
        Err(e) => {
            let _ = remove_file_if_exists(&tmp);
            return Err(e);
        }
    };
    let bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    if let Err(e) = publish_synced(&file, &tmp, &dst, sync, sync && sync_dir) {
        let _ = remove_file_if_exists(&tmp);
        return Err(e);
    }
    Ok(WrittenFile {
        path: dst,
        rows: rows.len() as u64,
        bytes,
    })
}

fn write_parquet(
    path: &Path,
    file: File,
    src: &dyn RowSource,
    rows: &[u32],
    fmt: &Format,
    kv: &[(String, String)],
) -> Result<File, StoreError> {
    let buf = write_parquet_to(path, BufWriter::with_capacity(1 << 20, file), src, rows, fmt, kv)?;
    buf.into_inner()
        .map_err(|e| StoreError::io(path, "write", e.into_error()))
}

/// The rows as a Parquet file in memory, in the order given (the live
/// records of a running capture: `crate::live`), read back by the same
/// reader as the store's files.
pub(crate) fn encode_in_memory(
    src: &dyn RowSource,
    rows: &[u32],
    fmt: &Format,
) -> Result<Vec<u8>, StoreError> {
    let fmt = Format { row_group_rows: rows.len().max(1), ..fmt.clone() };
    write_parquet_to(Path::new("(memory)"), Vec::new(), src, rows, &fmt, &[])
}

/// Writes the Parquet file to `out`; `path` names it in errors (an I/O
/// error stays one, so that a full disk is seen as such).
fn write_parquet_to<W: std::io::Write>(
    path: &Path,
    out: W,
    src: &dyn RowSource,
    rows: &[u32],
    fmt: &Format,
    kv: &[(String, String)],
) -> Result<W, StoreError> {
    pqfile::write(out, src, rows, fmt, kv).map_err(|e| match e {
        WriteError::Io(io) => StoreError::io(path, "write", io),
        WriteError::Encode(what) => StoreError::encode(path, what),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A column taken a run at a time and one row at a time (short runs) is
    /// the column taken row by row (`opt_i64`; for a required one, each
    /// row's entry), in any row order: optional with its levels, without
    /// them (a dictionary's required column takes its present indices
    /// alone), and copied as it is.
    #[test]
    fn columns_in_runs_are_row_by_row() {
        let some_unset: Vec<Option<u64>> = (0..300u64).map(|i| (i % 9 != 2).then_some(i * 37 % 101)).collect();
        let all_set: Vec<Option<u64>> = (0..300u64).map(|i| Some(i * 13 % 7)).collect();
        let n = 300u32;
        let fwd: Vec<u32> = (0..n).collect();
        let rev: Vec<u32> = (0..n).rev().collect();
        let mixed: Vec<u32> = (0..n).map(|r| (r + 50) % n).collect();
        let swapped: Vec<u32> = (0..n).map(|r| r ^ 1).collect();
        let few = fwd[..7].to_vec();
        // Both ways of taking rows are among the cases.
        let short = |rows: &[u32]| runs_are_short(rows, &runs(rows));
        assert!([&fwd, &mixed].iter().all(|r| !short(r)) && [&rev, &swapped, &few].iter().all(|r| short(r)));
        for src in [&some_unset, &all_set] {
            for rows in [&fwd, &rev, &mixed, &swapped, &few] {
                let runs = runs(rows);
                let want = opt_i64(rows, |r| src[r].map(|x| x as i64));
                let PqCol::I64(want_vals) = &want.col else { panic!("not INT64") };
                let (mut vals, mut def) = (Vec::new(), Vec::new());
                optional_in_runs(rows, &runs, src, |x| x.map(|x| x as i64), &mut vals, Some(&mut def));
                assert_eq!((&vals, Some(&def)), (want_vals, want.def.as_ref()), "rows {rows:?}");
                let mut alone = Vec::new();
                optional_in_runs(rows, &runs, src, |x| x.map(|x| x as i64), &mut alone, None);
                assert_eq!(&alone, want_vals, "rows {rows:?}");
                let mut copied = Vec::new();
                copy_in_runs(rows, &runs, src, &mut copied);
                assert_eq!(copied, rows.iter().map(|&r| src[r as usize]).collect::<Vec<_>>(), "rows {rows:?}");
            }
        }
    }
}
