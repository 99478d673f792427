//! Scans: the partitions of a time range, the row groups their statistics
//! cannot exclude, and only the requested columns, decoded into batches.

use std::collections::HashSet;
use std::fs::File;
use std::path::{Path, PathBuf};

use parquet::column::reader::{ColumnReader, ColumnReaderImpl};
use parquet::data_type::{
    BoolType, ByteArray, ByteArrayType, FixedLenByteArray, FixedLenByteArrayType, Int32Type,
    Int64Type,
};
use parquet::errors::ParquetError;
use parquet::file::metadata::RowGroupMetaData;
use parquet::file::reader::{ChunkReader, FileReader, RowGroupReader};
use parquet::file::serialized_reader::SerializedFileReader;
use parquet::file::statistics::Statistics;

use crate::batch::{Batch, Column, Kind};
use crate::colcache::{ColumnCache, FileId};
use crate::error::StoreError;
use crate::flow_time;
use crate::fastdecode::{self, FastReader};
use crate::fsutil::{is_data_file, list_dir};
use crate::layout::list_partitions;
use crate::schema::{self, ColSpec, ColType};
use crate::time::NS_PER_US;

/// Rows per batch handed to the callback (a row group is cut into batches
/// this size, so decoded columns stay in cache while a query consumes them).
pub const BATCH_ROWS: usize = 64 * 1024;

/// What to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan {
    pub kind: Kind,
    /// Rows with time (flows: `bucket`, conns: `ts`) >= from_ns ...
    pub from_ns: Option<i64>,
    /// ... and < to_ns. Exact: rows outside are never returned.
    pub to_ns: Option<i64>,
    /// Columns to decode, in the order the batches carry them.
    pub columns: Vec<&'static str>,
    /// (column, min, max): row groups whose statistics show no value in
    /// [min, max] are skipped. Only for pruning: rows in the row groups that
    /// are read are not filtered (the query does that). Applies to unsigned
    /// integer columns (ports, proto, counters, vlan); ignored on others.
    pub ranges: Vec<(&'static str, u64, u64)>,
    /// A running capture's files written after a moment: `(run, upto)`
    /// skips this run's files whose rows reach past record number `upto`
    /// of the kind (their rows are answered from memory: see
    /// [`crate::live`]).
    pub live: Option<(String, u64)>,
    /// Decoded column chunks kept between scans ([`ColumnCache`]): the
    /// batches are the same with or without it.
    pub cache: Option<ColumnCache>,
}

impl Scan {
    /// A scan of every row of `kind`, no columns yet.
    pub fn new(kind: Kind) -> Scan {
        Scan {
            kind,
            from_ns: None,
            to_ns: None,
            columns: Vec::new(),
            ranges: Vec::new(),
            live: None,
            cache: None,
        }
    }
    /// A scan of every column of `kind`, in schema order.
    pub fn all_columns(kind: Kind) -> Scan {
        Scan {
            columns: schema::columns(kind).iter().map(|c| c.name).collect(),
            ..Scan::new(kind)
        }
    }
    pub fn columns(mut self, cols: &[&'static str]) -> Scan {
        self.columns = cols.to_vec();
        self
    }
    pub fn time(mut self, from_ns: Option<i64>, to_ns: Option<i64>) -> Scan {
        self.from_ns = from_ns;
        self.to_ns = to_ns;
        self
    }
    pub fn range(mut self, col: &'static str, min: u64, max: u64) -> Scan {
        self.ranges.push((col, min, max));
        self
    }
    /// Leaves out the files of the running capture `run` written after its
    /// store had `upto` records of this kind (see [`Scan::live`]).
    pub fn live_upto(mut self, run: &str, upto: u64) -> Scan {
        self.live = Some((run.to_string(), upto));
        self
    }
    /// Takes decoded column chunks from `cache` and keeps the ones it
    /// decodes there (see [`ColumnCache`]).
    pub fn cache(mut self, cache: ColumnCache) -> Scan {
        self.cache = Some(cache);
        self
    }
}

/// What a scan did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanStats {
    /// Hour partitions listed and opened.
    pub partitions: u64,
    /// Hour partitions outside the time range (not opened).
    pub partitions_skipped: u64,
    /// Files whose footer was read.
    pub files: u64,
    /// Files skipped because a compacted file in the same partition replaces them.
    pub files_replaced: u64,
    pub row_groups_read: u64,
    pub row_groups_skipped: u64,
    /// Rows delivered in batches.
    pub rows: u64,
    /// Compressed bytes of the column chunks read.
    pub bytes_read: u64,
    /// Files skipped (entirely or from the point of damage) as unreadable.
    pub corrupt_files: u64,
    /// Files of the running capture left out because their rows were
    /// answered from its live records ([`Scan::live`]).
    pub files_live: u64,
    /// One line per corrupt file: its path and what is wrong.
    pub warnings: Vec<String>,
}

pub(crate) struct OpenFile {
    pub name: String,
    pub path: PathBuf,
    pub reader: SerializedFileReader<File>,
    pub replaces: Vec<String>,
    /// The running capture that wrote it and how many records of the kind
    /// its store had been given then (see [`crate::live`]).
    pub live: Option<(String, u64)>,
    /// The version of the file opened (for [`ColumnCache`]); `None` when
    /// its metadata could not be read (then nothing of it is cached).
    pub id: Option<FileId>,
}

pub(crate) const REPLACES_KEY: &str = "wirelog.replaces";

/// The key of a flushed file's `run:records` (see [`crate::live`]).
pub(crate) const LIVE_KEY: &str = "wirelog.live";

fn live_of(r: &SerializedFileReader<File>) -> Option<(String, u64)> {
    let kv = r.metadata().file_metadata().key_value_metadata()?;
    let v = kv.iter().find(|k| k.key == LIVE_KEY)?.value.as_ref()?;
    let (run, n) = v.rsplit_once(':')?;
    Some((run.to_string(), n.parse().ok()?))
}

fn replaces_of(r: &SerializedFileReader<File>) -> Vec<String> {
    r.metadata()
        .file_metadata()
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|k| k.key == REPLACES_KEY))
        .and_then(|k| k.value.as_ref())
        .map(|v| {
            v.lines()
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The live files of a partition, opened: files replaced by a compacted
/// file are left out. The listing is checked against a second one taken
/// after opening, so a concurrent compaction (new merged file, originals
/// deleted) cannot make a file seem missing; a reader sees the partition
/// either before or after it.
pub(crate) fn snapshot(
    pdir: &Path,
    files_replaced: &mut u64,
    corrupt: &mut Vec<(PathBuf, String)>,
) -> Result<Vec<OpenFile>, StoreError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let names: Vec<(String, PathBuf)> = list_dir(pdir)?
            .into_iter()
            .filter(|(n, _)| is_data_file(n))
            .collect();
        let mut files = Vec::with_capacity(names.len());
        let mut bad = Vec::new();
        let mut vanished = false;
        for (name, path) in &names {
            let f = match File::open(path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    vanished = true;
                    break;
                }
                Err(e) => return Err(StoreError::io(path, "open", e)),
            };
            // Read from the open file: the version the reader reads.
            let id = f.metadata().ok().map(|m| FileId::of(path, &m));
            match guard(|| SerializedFileReader::new(f).map_err(|e| e.to_string())) {
                Ok(reader) => {
                    let replaces = replaces_of(&reader);
                    let live = live_of(&reader);
                    files.push(OpenFile {
                        name: name.clone(),
                        path: path.clone(),
                        reader,
                        replaces,
                        live,
                        id,
                    });
                }
                Err(e) => bad.push((name.clone(), path.clone(), e.to_string())),
            }
        }
        let churn = if vanished {
            true
        } else {
            let again = list_dir(pdir)?;
            again.iter().any(|(n, _)| {
                n.starts_with("compact-") && is_data_file(n) && !names.iter().any(|(m, _)| m == n)
            })
        };
        if churn && attempt < 10 {
            continue;
        }
        let replaced: HashSet<&str> = files
            .iter()
            .flat_map(|f| f.replaces.iter().map(String::as_str))
            .collect();
        let replaced: HashSet<String> = replaced.into_iter().map(str::to_string).collect();
        let before = files.len();
        files.retain(|f| !replaced.contains(&f.name));
        *files_replaced += (before - files.len()) as u64;
        for (name, path, what) in bad {
            if !replaced.contains(&name) {
                corrupt.push((path, what));
            }
        }
        return Ok(files);
    }
}

// ---- decoding ------------------------------------------------------------------

enum Typed {
    I32(ColumnReaderImpl<Int32Type>),
    I64(ColumnReaderImpl<Int64Type>),
    Bool(ColumnReaderImpl<BoolType>),
    Flba(ColumnReaderImpl<FixedLenByteArrayType>),
    Bytes(ColumnReaderImpl<ByteArrayType>),
    /// Our own decoder for the common required numeric and IP columns.
    Fast(FastReader),
}

impl Typed {
    fn new(r: ColumnReader) -> Result<Typed, String> {
        Ok(match r {
            ColumnReader::Int32ColumnReader(r) => Typed::I32(r),
            ColumnReader::Int64ColumnReader(r) => Typed::I64(r),
            ColumnReader::BoolColumnReader(r) => Typed::Bool(r),
            ColumnReader::FixedLenByteArrayColumnReader(r) => Typed::Flba(r),
            ColumnReader::ByteArrayColumnReader(r) => Typed::Bytes(r),
            _ => return Err("unexpected physical type".into()),
        })
    }

    /// The reader for column `idx` of a row group: the fast one when the
    /// column is required and its encodings are ones it knows.
    fn open(
        rgr: &dyn RowGroupReader,
        rg: &RowGroupMetaData,
        idx: usize,
        spec: &ColSpec,
    ) -> Result<Typed, String> {
        let cc = rg.column(idx);
        let descr = cc.column_descr();
        let fast_type = matches!(
            spec.ty,
            ColType::TimeUs
                | ColType::U8
                | ColType::U16
                | ColType::U32
                | ColType::U64
                | ColType::Ip
        );
        if fast_type
            && !spec.optional
            && descr.max_def_level() == 0
            && descr.max_rep_level() == 0
            && fastdecode::supported(descr.physical_type(), descr.type_length(), cc.encodings())
        {
            let pages = rgr.get_column_page_reader(idx).map_err(|e| e.to_string())?;
            return Ok(Typed::Fast(FastReader::new(pages, descr.physical_type())));
        }
        rgr.get_column_reader(idx)
            .map_err(|e| e.to_string())
            .and_then(Typed::new)
    }
}

/// Buffers reused across batches.
#[derive(Default)]
struct Scratch {
    def: Vec<i16>,
    i32s: Vec<i32>,
    i64s: Vec<i64>,
    flba: Vec<FixedLenByteArray>,
    bytes: Vec<ByteArray>,
}

fn short(what: &str, got: usize, want: usize) -> ParquetError {
    ParquetError::General(format!("column {what} ended after {got} of {want} rows"))
}

fn check(name: &str, (recs, _, _): (usize, usize, usize), n: usize) -> Result<(), ParquetError> {
    if recs != n {
        return Err(short(name, recs, n));
    }
    Ok(())
}

/// Spreads `vals` (non-null values only) over `def` levels into `out`.
fn spread<T: Copy, U>(out: &mut Vec<Option<U>>, def: &[i16], vals: &[T], f: impl Fn(T) -> U) {
    let mut it = vals.iter();
    out.extend(def.iter().map(|&d| {
        if d > 0 {
            it.next().map(|&v| f(v))
        } else {
            None
        }
    }));
}

fn type_err(name: &str) -> ParquetError {
    ParquetError::General(format!("column {name} has an unexpected physical type"))
}

/// An empty column of the variant a column decodes to.
pub(crate) fn empty_column(spec: &ColSpec) -> Column {
    match (spec.ty, spec.optional) {
        (ColType::TimeUs, _) => Column::I64(Vec::new()),
        (ColType::DurUs, _) => Column::OptI64(Vec::new()),
        (ColType::U8, _) => Column::U8(Vec::new()),
        (ColType::U16, false) => Column::U16(Vec::new()),
        (ColType::U32, _) => Column::U32(Vec::new()),
        (ColType::U64, false) => Column::U64(Vec::new()),
        (ColType::U16 | ColType::U64, true) => Column::OptU64(Vec::new()),
        (ColType::Ip, _) => Column::Ip(Vec::new()),
        (ColType::Str, _) => Column::Str(Vec::new()),
        (ColType::Bool, _) => Column::Bool(Vec::new()),
    }
}

fn clear_column(c: &mut Column) {
    match c {
        Column::U8(v) => v.clear(),
        Column::U16(v) => v.clear(),
        Column::U32(v) => v.clear(),
        Column::U64(v) => v.clear(),
        Column::OptU64(v) => v.clear(),
        Column::I64(v) => v.clear(),
        Column::OptI64(v) => v.clear(),
        Column::Ip(v) => v.clear(),
        Column::Str(v) => v.clear(),
        Column::Bool(v) => v.clear(),
    }
}

/// Whether a column reads back with an unset value (a missing optional
/// number or duration, text read as "").
fn can_be_unset(spec: &ColSpec) -> bool {
    spec.optional && matches!(spec.ty, ColType::DurUs | ColType::U16 | ColType::U64 | ColType::Str)
}

/// `n` rows of an optional column a file does not have, all unset.
fn unset_column(spec: &ColSpec, n: usize, col: &mut Column) {
    if std::mem::discriminant(col) != std::mem::discriminant(&empty_column(spec)) {
        *col = empty_column(spec);
    }
    clear_column(col);
    match col {
        Column::OptU64(v) => v.resize(n, None),
        Column::OptI64(v) => v.resize(n, None),
        Column::Str(v) => v.resize(n, String::new()),
        _ => unreachable!("{}: only optional columns may be missing", spec.name),
    }
}

/// Decodes the next `n` rows of a column into `col` (its buffer reused).
fn decode_into(
    r: &mut Typed,
    spec: &ColSpec,
    n: usize,
    s: &mut Scratch,
    col: &mut Column,
) -> Result<(), ParquetError> {
    if std::mem::discriminant(col) != std::mem::discriminant(&empty_column(spec)) {
        *col = empty_column(spec);
    }
    clear_column(col);
    let name = spec.name;
    // Integer values of the fast reader or the generic INT32/INT64 readers.
    let ints = |r: &mut Typed, s: &mut Scratch, opt: bool| -> Result<(), ParquetError> {
        s.i64s.clear();
        s.def.clear();
        match r {
            Typed::Fast(f) => f.read_ints(n, &mut s.i64s),
            Typed::I64(r) => check(
                name,
                r.read_records(n, opt.then_some(&mut s.def), None, &mut s.i64s)?,
                n,
            ),
            Typed::I32(r) => {
                s.i32s.clear();
                check(
                    name,
                    r.read_records(n, opt.then_some(&mut s.def), None, &mut s.i32s)?,
                    n,
                )?;
                s.i64s.extend(s.i32s.iter().map(|&v| v as i64));
                Ok(())
            }
            _ => Err(type_err(name)),
        }
    };
    match (spec.ty, col) {
        (ColType::TimeUs, Column::I64(v)) => {
            match r {
                Typed::Fast(f) => f.read_ints(n, v)?,
                Typed::I64(r) => check(name, r.read_records(n, None, None, v)?, n)?,
                _ => return Err(type_err(name)),
            }
            for x in v.iter_mut() {
                *x = x.wrapping_mul(NS_PER_US);
            }
        }
        (ColType::DurUs, Column::OptI64(v)) => {
            ints(r, s, true)?;
            spread(v, &s.def, &s.i64s, |x: i64| x.wrapping_mul(NS_PER_US));
        }
        (ColType::U64, Column::U64(v)) => match r {
            Typed::Fast(f) => f.read_ints(n, v)?,
            _ => {
                ints(r, s, false)?;
                v.extend(s.i64s.iter().map(|&x| x as u64));
            }
        },
        (ColType::U64, Column::OptU64(v)) => {
            ints(r, s, true)?;
            spread(v, &s.def, &s.i64s, |x: i64| x as u64);
        }
        (ColType::U32, Column::U32(v)) => match r {
            Typed::Fast(f) => f.read_ints(n, v)?,
            _ => {
                ints(r, s, false)?;
                v.extend(s.i64s.iter().map(|&x| x as u32));
            }
        },
        (ColType::U16, Column::U16(v)) => match r {
            Typed::Fast(f) => f.read_ints(n, v)?,
            _ => {
                ints(r, s, false)?;
                v.extend(s.i64s.iter().map(|&x| x as u16));
            }
        },
        (ColType::U16, Column::OptU64(v)) => {
            ints(r, s, true)?;
            spread(v, &s.def, &s.i64s, |x: i64| x as u16 as u64);
        }
        (ColType::U8, Column::U8(v)) => match r {
            Typed::Fast(f) => f.read_ints(n, v)?,
            _ => {
                ints(r, s, false)?;
                v.extend(s.i64s.iter().map(|&x| x as u8));
            }
        },
        (ColType::Ip, Column::Ip(v)) => match r {
            Typed::Fast(f) => f.read_ips(n, v)?,
            Typed::Flba(r) => {
                s.flba.clear();
                check(name, r.read_records(n, None, None, &mut s.flba)?, n)?;
                for x in &s.flba {
                    let b: [u8; 16] = x.data().try_into().map_err(|_| {
                        ParquetError::General(format!("column {name}: value is not 16 bytes"))
                    })?;
                    v.push(b);
                }
            }
            _ => return Err(type_err(name)),
        },
        (ColType::Str, Column::Str(v)) => {
            let Typed::Bytes(r) = r else {
                return Err(type_err(name));
            };
            s.bytes.clear();
            s.def.clear();
            check(
                name,
                r.read_records(n, spec.optional.then_some(&mut s.def), None, &mut s.bytes)?,
                n,
            )?;
            let text = |b: &ByteArray| match std::str::from_utf8(b.data()) {
                Ok(t) => t.to_string(),
                Err(_) => String::from_utf8_lossy(b.data()).into_owned(),
            };
            if spec.optional {
                let mut it = s.bytes.iter();
                v.extend(s.def.iter().map(|&d| {
                    if d > 0 {
                        it.next().map(text).unwrap_or_default()
                    } else {
                        String::new()
                    }
                }));
            } else {
                v.extend(s.bytes.iter().map(text));
            }
        }
        (ColType::Bool, Column::Bool(v)) => {
            let Typed::Bool(r) = r else {
                return Err(type_err(name));
            };
            check(name, r.read_records(n, None, None, v)?, n)?;
        }
        _ => return Err(type_err(name)),
    }
    Ok(())
}

fn retain<T>(v: &mut Vec<T>, keep: &[bool]) {
    let mut i = 0;
    v.retain(|_| {
        let k = keep[i];
        i += 1;
        k
    });
}

fn filter_column(c: &mut Column, keep: &[bool]) {
    match c {
        Column::U8(v) => retain(v, keep),
        Column::U16(v) => retain(v, keep),
        Column::U32(v) => retain(v, keep),
        Column::U64(v) => retain(v, keep),
        Column::OptU64(v) => retain(v, keep),
        Column::I64(v) => retain(v, keep),
        Column::OptI64(v) => retain(v, keep),
        Column::Ip(v) => retain(v, keep),
        Column::Str(v) => retain(v, keep),
        Column::Bool(v) => retain(v, keep),
    }
}

// ---- pruning ---------------------------------------------------------------------

/// min/max of a row group's column as i128 (signed for times, unsigned for
/// unsigned integers), None when there are no statistics.
fn stat_range(rg: &RowGroupMetaData, idx: usize, ty: ColType) -> Option<(i128, i128)> {
    match rg.column(idx).statistics()? {
        Statistics::Int64(s) => {
            let (lo, hi) = (*s.min_opt()?, *s.max_opt()?);
            Some(if ty == ColType::U64 {
                (lo as u64 as i128, hi as u64 as i128)
            } else {
                (lo as i128, hi as i128)
            })
        }
        Statistics::Int32(s) => {
            let (lo, hi) = (*s.min_opt()?, *s.max_opt()?);
            Some(match ty {
                ColType::U8 | ColType::U16 | ColType::U32 => (lo as u32 as i128, hi as u32 as i128),
                _ => (lo as i128, hi as i128),
            })
        }
        _ => None,
    }
}

/// Where a requested column comes from in one file.
#[derive(Clone, Copy)]
enum Src {
    /// The file column at this index.
    File(usize),
    /// An optional column the file predates: every row unset.
    Unset,
    /// A flow's `first` (no `duration`) or `last`, from the file's bucket
    /// and second offsets (see [`flow_time`]): (bucket, first_offset_s,
    /// duration_s) file column indices.
    FlowTime {
        bucket: usize,
        offset: usize,
        duration: Option<usize>,
    },
}

/// Where the needed columns are in one file.
struct FilePlan {
    /// (spec, source) of the requested columns.
    out: Vec<(&'static ColSpec, Src)>,
    /// File column index of the time column.
    time_idx: usize,
    /// Position of the time column among `out`, if requested.
    time_out: Option<usize>,
    /// (file column index, type, min, max) pruning constraints.
    ranges: Vec<(usize, ColType, u64, u64)>,
}

fn plan_file<R: ChunkReader + 'static>(r: &SerializedFileReader<R>, kind: Kind, scan: &Scan) -> Result<FilePlan, String> {
    let descr = r.metadata().file_metadata().schema_descr();
    let exact = |name: &str| (0..descr.num_columns()).find(|&i| descr.column(i).name() == name);
    // A column renamed since (a declared rename) is read under its old name.
    let find = |name: &str| exact(name).or_else(|| schema::old_names(kind, name).find_map(exact));
    let spec = |name: &str| {
        schema::columns(kind)
            .iter()
            .find(|c| c.name == name)
            .expect("validated")
    };
    let mut out = Vec::with_capacity(scan.columns.len());
    for &c in &scan.columns {
        let sp = spec(c);
        let src = match find(c) {
            Some(i) => Src::File(i),
            // Flow files since schema version 2 keep first/last as offsets.
            None if kind == Kind::Flows && matches!(c, "first" | "last") => {
                let need = |n: &str| find(n).ok_or_else(|| format!("no column {c} nor {n}"));
                Src::FlowTime {
                    bucket: need("bucket")?,
                    offset: need(flow_time::FIRST_OFFSET)?,
                    duration: if c == "last" {
                        Some(need(flow_time::DURATION)?)
                    } else {
                        None
                    },
                }
            }
            // A file written before an optional column existed reads as if
            // every row left it unset; a required column must be there.
            None if can_be_unset(sp) => Src::Unset,
            None => return Err(format!("no column {c}")),
        };
        out.push((sp, src));
    }
    let tname = schema::time_column(kind);
    let time_idx = find(tname).ok_or_else(|| format!("no column {tname}"))?;
    let time_out = scan.columns.iter().position(|&c| c == tname);
    let mut ranges = Vec::new();
    for &(c, lo, hi) in &scan.ranges {
        let sp = spec(c);
        if matches!(
            sp.ty,
            ColType::U8 | ColType::U16 | ColType::U32 | ColType::U64
        ) {
            if let Some(i) = find(c) {
                ranges.push((i, sp.ty, lo, hi));
            }
        }
    }
    Ok(FilePlan {
        out,
        time_idx,
        time_out,
        ranges,
    })
}

/// Runs parquet decoding so that a panic inside the parquet crate on a
/// damaged file becomes an error about that file, never a crash.
fn guard<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied())
                .unwrap_or("unknown");
            Err(format!("decoder failed: {msg}"))
        }
    }
}

enum FileOutcome {
    Done,
    Corrupt(String),
}

type Each<'a> = dyn FnMut(&mut Batch) -> Result<(), StoreError> + 'a;

/// State reused across files and batches of one scan.
struct Work {
    scratch: Scratch,
    batch: Batch,
    times: Column,
    keep: Vec<bool>,
    flow_parts: FlowParts,
}

/// A row group's readers of one requested column.
// One per requested column, kept for the whole read: boxing would add an
// indirection to every value read and save nothing that counts.
#[allow(clippy::large_enum_variant)]
enum Reader {
    File(Typed),
    Unset,
    FlowTime {
        bucket: Typed,
        offset: Typed,
        duration: Option<Typed>,
    },
}

/// The stored parts of flows' first/last, decoded (buffers reused).
struct FlowParts {
    bucket: Column,
    offset: Column,
    duration: Column,
}

fn file_spec(name: &str) -> &'static ColSpec {
    schema::FLOWS_FILE
        .iter()
        .find(|c| c.name == name)
        .expect("a flow file column")
}

/// Decodes `n` rows of a flow's `first` (no `duration` reader) or `last`
/// from a file's bucket and second offsets, as ns like a stored time.
fn decode_flow_time(
    bucket: &mut Typed,
    offset: &mut Typed,
    duration: Option<&mut Typed>,
    n: usize,
    s: &mut Scratch,
    parts: &mut FlowParts,
    col: &mut Column,
) -> Result<(), ParquetError> {
    decode_into(bucket, file_spec("bucket"), n, s, &mut parts.bucket)?;
    decode_into(offset, file_spec(flow_time::FIRST_OFFSET), n, s, &mut parts.offset)?;
    let (Column::I64(b), Column::U32(off)) = (&parts.bucket, &parts.offset) else {
        unreachable!("bucket decodes as I64, offsets as U32")
    };
    let Column::I64(out) = col else {
        unreachable!("first/last decode as I64")
    };
    out.clear();
    match duration {
        None => out.extend(b.iter().zip(off).map(|(&b, &o)| flow_time::first_ns(b, o))),
        Some(d) => {
            decode_into(d, file_spec(flow_time::DURATION), n, s, &mut parts.duration)?;
            let Column::U32(dur) = &parts.duration else {
                unreachable!("durations decode as U32")
            };
            out.extend(
                b.iter()
                    .zip(off)
                    .zip(dur)
                    .map(|((&b, &o), &d)| flow_time::last_ns(b, o, d)),
            );
        }
    }
    Ok(())
}

impl Work {
    fn new(kind: Kind) -> Work {
        Work {
            scratch: Scratch::default(),
            batch: Batch {
                kind,
                columns: Vec::new(),
            },
            times: Column::I64(Vec::new()),
            keep: Vec::new(),
            flow_parts: FlowParts {
                bucket: Column::I64(Vec::new()),
                offset: Column::U32(Vec::new()),
                duration: Column::U32(Vec::new()),
            },
        }
    }
}

/// Whether the scan reads row group `rg` (time and range pruning by the
/// group's statistics): `None` when it is skipped, else `Some(inside)`,
/// `inside` when every row of the group is in the time range.
fn wanted(rg: &RowGroupMetaData, plan: &FilePlan, scan: &Scan) -> Option<bool> {
    let from_us = scan.from_ns.map(|t| t.div_euclid(NS_PER_US) as i128);
    // Rows have t < to_ns exactly when t_us < ceil(to_ns / 1000).
    let to_us = scan
        .to_ns
        .map(|t| (t as i128 + NS_PER_US as i128 - 1).div_euclid(NS_PER_US as i128));
    let mut inside = true;
    match stat_range(rg, plan.time_idx, ColType::TimeUs) {
        Some((lo, hi)) => {
            if from_us.is_some_and(|f| hi < f) || to_us.is_some_and(|t| lo >= t) {
                return None;
            }
            if from_us.is_some_and(|f| lo < f) || to_us.is_some_and(|t| hi >= t) {
                inside = false;
            }
        }
        None => inside = from_us.is_none() && to_us.is_none(),
    }
    for &(idx, ty, lo, hi) in &plan.ranges {
        if let Some((smin, smax)) = stat_range(rg, idx, ty) {
            if smax < lo as i128 || smin > hi as i128 {
                return None;
            }
        }
    }
    Some(inside)
}

/// About how many bytes the columns `scan` reads from `reader` take
/// decoded: rows times the decoded value's size (a string's: its header
/// and about its share of the encoded chunk).
fn decoded_estimate<R: ChunkReader + 'static>(reader: &SerializedFileReader<R>, scan: &Scan) -> u64 {
    let Ok(plan) = plan_file(reader, scan.kind, scan) else { return 0 };
    let meta = reader.metadata();
    let mut total = 0u64;
    for rgi in 0..meta.num_row_groups() {
        let rg = meta.row_group(rgi);
        if wanted(rg, &plan, scan).is_none() {
            continue;
        }
        let n = rg.num_rows().max(0) as u64;
        let mut chunk = |idx: usize, spec: &ColSpec| {
            use std::mem::size_of;
            let width = match empty_column(spec) {
                Column::U8(_) | Column::Bool(_) => 1,
                Column::U16(_) => 2,
                Column::U32(_) => 4,
                Column::U64(_) | Column::I64(_) => 8,
                Column::OptU64(_) => size_of::<Option<u64>>(),
                Column::OptI64(_) => size_of::<Option<i64>>(),
                Column::Ip(_) => 16,
                // Their text: about the encoded page's size.
                Column::Str(_) => size_of::<String>() + rg.column(idx).uncompressed_size().max(0) as usize / n.max(1) as usize,
            };
            total += n * width as u64;
        };
        for &(spec, src) in &plan.out {
            if let Src::File(idx) = src {
                chunk(idx, spec);
            }
        }
        if plan.time_out.is_none() {
            let time = schema::columns(scan.kind).iter().find(|c| c.name == schema::time_column(scan.kind)).unwrap();
            chunk(plan.time_idx, time);
        }
    }
    total
}

/// Reads the row groups of one file the scan needs.
fn scan_file<R: ChunkReader + 'static>(
    reader: &SerializedFileReader<R>,
    file: Option<&FileId>,
    use_cache: bool,
    scan: &Scan,
    stats: &mut ScanStats,
    w: &mut Work,
    each: &mut Each<'_>,
) -> Result<FileOutcome, StoreError> {
    let plan = match plan_file(reader, scan.kind, scan) {
        Ok(p) => p,
        Err(e) => {
            return Ok(FileOutcome::Corrupt(format!(
                "not a {} file of this store: {e}",
                scan.kind.as_str()
            )))
        }
    };
    let time_spec = schema::columns(scan.kind)
        .iter()
        .find(|c| c.name == schema::time_column(scan.kind))
        .unwrap();
    let meta = reader.metadata();
    for rgi in 0..meta.num_row_groups() {
        let rg = meta.row_group(rgi);
        let n = rg.num_rows().max(0) as usize;
        let inside = match wanted(rg, &plan, scan) {
            Some(inside) if n > 0 => inside,
            _ => {
                stats.row_groups_skipped += 1;
                continue;
            }
        };
        stats.row_groups_read += 1;
        if let (Some(cache), Some(fid), true) = (&scan.cache, file, use_cache) {
            if plan.out.iter().all(|(_, src)| matches!(src, Src::File(_) | Src::Unset)) {
                let at = Chunk { reader, cache, file: fid, rgi, n };
                match at.scan(&plan, time_spec, inside, scan, stats, w, each)? {
                    FileOutcome::Done => continue,
                    corrupt => return Ok(corrupt),
                }
            }
        }
        let rgr = match guard(|| reader.get_row_group(rgi).map_err(|e| e.to_string())) {
            Ok(r) => r,
            Err(e) => return Ok(FileOutcome::Corrupt(format!("row group {rgi}: {e}"))),
        };
        let mut readers = Vec::with_capacity(plan.out.len());
        for &(spec, src) in &plan.out {
            let mut open = |idx: usize, spec: &ColSpec| {
                stats.bytes_read += rg.column(idx).compressed_size().max(0) as u64;
                guard(|| Typed::open(&*rgr, rg, idx, spec))
                    .map_err(|e| format!("row group {rgi}, column {}: {e}", spec.name))
            };
            let r = match src {
                Src::File(idx) => open(idx, spec).map(Reader::File),
                Src::Unset => Ok(Reader::Unset),
                Src::FlowTime {
                    bucket,
                    offset,
                    duration,
                } => (|| {
                    Ok(Reader::FlowTime {
                        bucket: open(bucket, file_spec("bucket"))?,
                        offset: open(offset, file_spec(flow_time::FIRST_OFFSET))?,
                        duration: match duration {
                            Some(d) => Some(open(d, file_spec(flow_time::DURATION))?),
                            None => None,
                        },
                    })
                })(),
            };
            match r {
                Ok(r) => readers.push(r),
                Err(e) => return Ok(FileOutcome::Corrupt(e)),
            }
        }
        let mut time_reader = None;
        if !inside && plan.time_out.is_none() {
            stats.bytes_read += rg.column(plan.time_idx).compressed_size().max(0) as u64;
            match guard(|| Typed::open(&*rgr, rg, plan.time_idx, time_spec)) {
                Ok(r) => time_reader = Some(r),
                Err(e) => {
                    return Ok(FileOutcome::Corrupt(format!(
                        "row group {rgi}, time column: {e}"
                    )))
                }
            }
        }
        let mut done = 0;
        while done < n {
            let m = BATCH_ROWS.min(n - done);
            // The batch keeps its column buffers from one batch to the next,
            // unless the callback took them (`scan` hands batches over).
            let same_shape = w.batch.columns.len() == plan.out.len()
                && w.batch
                    .columns
                    .iter()
                    .zip(&plan.out)
                    .all(|((n, _), (spec, _))| *n == spec.name);
            if !same_shape {
                w.batch.columns = plan
                    .out
                    .iter()
                    .map(|(spec, _)| (spec.name, empty_column(spec)))
                    .collect();
            }
            for (r, (&(spec, _), (_, col))) in readers
                .iter_mut()
                .zip(plan.out.iter().zip(w.batch.columns.iter_mut()))
            {
                let (scratch, parts) = (&mut w.scratch, &mut w.flow_parts);
                let res = match r {
                    Reader::Unset => {
                        unset_column(spec, m, col);
                        continue;
                    }
                    Reader::File(r) => {
                        guard(|| decode_into(r, spec, m, scratch, col).map_err(|e| e.to_string()))
                    }
                    Reader::FlowTime {
                        bucket,
                        offset,
                        duration,
                    } => guard(|| {
                        decode_flow_time(bucket, offset, duration.as_mut(), m, scratch, parts, col)
                            .map_err(|e| e.to_string())
                    }),
                };
                if let Err(e) = res {
                    return Ok(FileOutcome::Corrupt(format!(
                        "row group {rgi}, column {}: {e}",
                        spec.name
                    )));
                }
            }
            if !inside {
                if let Some(r) = time_reader.as_mut() {
                    let (scratch, times) = (&mut w.scratch, &mut w.times);
                    if let Err(e) = guard(|| {
                        decode_into(r, time_spec, m, scratch, times).map_err(|e| e.to_string())
                    }) {
                        return Ok(FileOutcome::Corrupt(format!(
                            "row group {rgi}, time column: {e}"
                        )));
                    }
                }
                let times: &[i64] = match plan.time_out {
                    Some(i) => match &w.batch.columns[i].1 {
                        Column::I64(v) => v,
                        _ => unreachable!("time columns decode as I64"),
                    },
                    None => match &w.times {
                        Column::I64(v) => v,
                        _ => unreachable!("time columns decode as I64"),
                    },
                };
                w.keep.clear();
                w.keep.extend(times.iter().map(|&t| {
                    scan.from_ns.is_none_or(|f| t >= f) && scan.to_ns.is_none_or(|to| t < to)
                }));
                if !w.keep.iter().all(|&k| k) {
                    for (_, c) in w.batch.columns.iter_mut() {
                        filter_column(c, &w.keep);
                    }
                }
            }
            done += m;
            let rows = w.batch.rows();
            if rows > 0 {
                stats.rows += rows as u64;
                each(&mut w.batch)?;
            }
        }
    }
    Ok(FileOutcome::Done)
}

/// One row group of a file read through a [`ColumnCache`]: each needed
/// column chunk decoded whole (or taken from the cache), then cut into the
/// same batches as [`scan_file`]'s streaming path gives.
struct Chunk<'a, R: ChunkReader + 'static> {
    reader: &'a SerializedFileReader<R>,
    cache: &'a ColumnCache,
    file: &'a FileId,
    rgi: usize,
    n: usize,
}

impl<R: ChunkReader + 'static> Chunk<'_, R> {
    /// The column chunk `idx`, whole, from the cache or decoded (and kept).
    fn column(&self, idx: usize, spec: &ColSpec, stats: &mut ScanStats, s: &mut Scratch) -> Result<std::sync::Arc<Column>, String> {
        if let Some(c) = self.cache.get(self.file, self.rgi, idx) {
            if c.len() == self.n {
                return Ok(c);
            }
        }
        let rg = self.reader.metadata().row_group(self.rgi);
        stats.bytes_read += rg.column(idx).compressed_size().max(0) as u64;
        let rgr = guard(|| self.reader.get_row_group(self.rgi).map_err(|e| e.to_string()))?;
        let mut r = guard(|| Typed::open(&*rgr, rg, idx, spec))?;
        let mut col = empty_column(spec);
        guard(|| decode_into(&mut r, spec, self.n, s, &mut col).map_err(|e| e.to_string()))?;
        let col = std::sync::Arc::new(col);
        self.cache.put(self.file, self.rgi, idx, col.clone());
        Ok(col)
    }

    #[allow(clippy::too_many_arguments)]
    fn scan(
        &self,
        plan: &FilePlan,
        time_spec: &ColSpec,
        inside: bool,
        scan: &Scan,
        stats: &mut ScanStats,
        w: &mut Work,
        each: &mut Each<'_>,
    ) -> Result<FileOutcome, StoreError> {
        let rgi = self.rgi;
        let mut cols = Vec::with_capacity(plan.out.len());
        for &(spec, src) in &plan.out {
            cols.push(match src {
                Src::File(idx) => match self.column(idx, spec, stats, &mut w.scratch) {
                    Ok(c) => Some(c),
                    Err(e) => return Ok(FileOutcome::Corrupt(format!("row group {rgi}, column {}: {e}", spec.name))),
                },
                _ => None,
            });
        }
        let times = match (inside, plan.time_out) {
            (true, _) => None,
            (false, Some(i)) => cols[i].clone(),
            (false, None) => match self.column(plan.time_idx, time_spec, stats, &mut w.scratch) {
                Ok(c) => Some(c),
                Err(e) => return Ok(FileOutcome::Corrupt(format!("row group {rgi}, time column: {e}"))),
            },
        };
        let times: Option<&[i64]> = match times.as_deref() {
            None => None,
            Some(Column::I64(v)) => Some(v),
            Some(_) => unreachable!("time columns decode as I64"),
        };
        let mut lo = 0;
        while lo < self.n {
            let hi = (lo + BATCH_ROWS).min(self.n);
            let mut keep = None;
            if let Some(t) = times {
                w.keep.clear();
                w.keep.extend(t[lo..hi].iter().map(|&t| {
                    scan.from_ns.is_none_or(|f| t >= f) && scan.to_ns.is_none_or(|to| t < to)
                }));
                let kept = w.keep.iter().filter(|&&k| k).count();
                if kept == 0 {
                    lo = hi;
                    continue;
                }
                if kept < hi - lo {
                    keep = Some(kept);
                }
            }
            w.batch.columns.resize_with(plan.out.len(), || ("", Column::Bool(Vec::new())));
            for ((spec, _), ((name, col), cached)) in plan.out.iter().zip(w.batch.columns.iter_mut().zip(&cols)) {
                *name = spec.name;
                match cached {
                    Some(c) => copy_rows(c, lo, hi, keep.map(|_| &w.keep[..]), col),
                    None => unset_column(spec, keep.unwrap_or(hi - lo), col),
                }
            }
            let rows = w.batch.rows();
            if rows > 0 {
                stats.rows += rows as u64;
                each(&mut w.batch)?;
            }
            lo = hi;
        }
        Ok(FileOutcome::Done)
    }
}

/// Rows `lo..hi` of `src` (those `keep` marks, when given) into `dst`, its
/// buffer reused when it holds the same type (for strings, each string's
/// own buffer too: no allocation per value once the batch has warmed up).
fn copy_rows(src: &Column, lo: usize, hi: usize, keep: Option<&[bool]>, dst: &mut Column) {
    if let (Column::Str(s), Column::Str(d)) = (src, &mut *dst) {
        let mut n = 0;
        let mut put = |v: &String| {
            match d.get_mut(n) {
                Some(x) => x.clone_from(v),
                None => d.push(v.clone()),
            }
            n += 1;
        };
        match keep {
            None => s[lo..hi].iter().for_each(&mut put),
            Some(k) => s[lo..hi].iter().zip(k).filter(|(_, &k)| k).for_each(|(v, _)| put(v)),
        }
        d.truncate(n);
        return;
    }
    macro_rules! copy {
        ($($v:ident),*) => {
            match src {
                $(Column::$v(s) => {
                    if !matches!(dst, Column::$v(_)) {
                        *dst = Column::$v(Vec::new());
                    }
                    let Column::$v(d) = dst else { unreachable!("just made one") };
                    d.clear();
                    match keep {
                        None => d.extend_from_slice(&s[lo..hi]),
                        Some(k) => d.extend(s[lo..hi].iter().zip(k).filter(|(_, &k)| k).map(|(x, _)| x.clone())),
                    }
                })*
            }
        };
    }
    copy!(U8, U16, U32, U64, OptU64, I64, OptI64, Ip, Str, Bool)
}

fn scan_core(dir: &Path, scan: &Scan, each: &mut Each<'_>) -> Result<ScanStats, StoreError> {
    if scan.columns.is_empty() {
        return Err(StoreError::Invalid(
            "a scan needs at least one column".into(),
        ));
    }
    for &c in scan
        .columns
        .iter()
        .chain(scan.ranges.iter().map(|(c, _, _)| c))
    {
        if schema::col_index(scan.kind, c).is_none() {
            return Err(StoreError::UnknownColumn {
                kind: scan.kind.as_str(),
                column: c.to_string(),
            });
        }
    }
    let mut stats = ScanStats::default();
    let mut w = Work::new(scan.kind);
    let mut corrupt = Vec::new();
    let mut files = Vec::new();
    for p in list_partitions(dir, scan.kind)? {
        if scan.from_ns.is_some_and(|f| p.end_ns() <= f)
            || scan.to_ns.is_some_and(|t| p.start_ns() >= t)
        {
            stats.partitions_skipped += 1;
            continue;
        }
        stats.partitions += 1;
        for f in snapshot(&p.path, &mut stats.files_replaced, &mut corrupt)? {
            if let (Some((run, upto)), Some((by, n))) = (&scan.live, &f.live) {
                if run == by && n > upto {
                    stats.files_live += 1;
                    continue;
                }
            }
            files.push(f);
        }
    }
    // A scan whose decoded columns would not fit in half the cache streams
    // around it: decoding its chunks whole, copying them out and evicting
    // the short ranges' chunks to keep them cost more than they save (the
    // next such scan would not find them either).
    let use_cache = scan.cache.as_ref().is_some_and(|c| {
        let mut total = 0u64;
        files.iter().all(|f| {
            total += decoded_estimate(&f.reader, scan);
            total <= c.max_bytes() as u64 / 2
        })
    });
    for f in &files {
        stats.files += 1;
        if let FileOutcome::Corrupt(what) = scan_file(&f.reader, f.id.as_ref(), use_cache, scan, &mut stats, &mut w, each)? {
            corrupt.push((f.path.clone(), what));
        }
    }
    for (path, what) in corrupt {
        stats.corrupt_files += 1;
        stats.warnings.push(format!(
            "store: skipped corrupt file {}: {what}",
            path.display()
        ));
    }
    Ok(stats)
}

/// Scans the store in `dir`: see [`Scan`]. Batches come partition by
/// partition, oldest hour first; within an hour, file by file. Each batch is
/// handed over (owned); `scan_ref` is faster as it reuses the buffers.
pub fn scan(
    dir: &Path,
    scan: &Scan,
    mut each: impl FnMut(Batch) -> Result<(), StoreError>,
) -> Result<ScanStats, StoreError> {
    scan_core(dir, scan, &mut |b: &mut Batch| {
        each(Batch {
            kind: b.kind,
            columns: std::mem::take(&mut b.columns),
        })
    })
}

/// Like [`Store::scan`](crate::Store::scan), but lends each batch: its column vectors are reused for
/// the next batch, so decoding allocates nothing once warmed up.
pub fn scan_ref(
    dir: &Path,
    scan: &Scan,
    mut each: impl FnMut(&Batch) -> Result<(), StoreError>,
) -> Result<ScanStats, StoreError> {
    scan_core(dir, scan, &mut |b: &mut Batch| each(b))
}

/// Reads every column of every row of one file, to check it is whole.
/// Returns its kind and row count.
pub fn verify_file(path: &Path) -> Result<(Kind, u64), StoreError> {
    let f = File::open(path).map_err(|e| StoreError::io(path, "open", e))?;
    let reader = guard(|| SerializedFileReader::new(f).map_err(|e| e.to_string()))
        .map_err(|e| StoreError::corrupt(path, e))?;
    let name = reader
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|k| k.key == "wirelog.kind"))
        .and_then(|k| k.value.as_deref());
    let kind = match name.and_then(Kind::from_name) {
        Some(k) => k,
        None => {
            return Err(StoreError::corrupt(
                path,
                format!("unknown wirelog.kind {name:?}"),
            ))
        }
    };
    let of = OpenFile {
        name: String::new(),
        path: path.to_path_buf(),
        reader,
        replaces: Vec::new(),
        live: None,
        id: None,
    };
    let scan = Scan::all_columns(kind);
    let mut stats = ScanStats::default();
    let mut rows = 0u64;
    match scan_file(
        &of.reader,
        None,
        false,
        &scan,
        &mut stats,
        &mut Work::new(kind),
        &mut |b: &mut Batch| {
            rows += b.rows() as u64;
            Ok(())
        },
    )? {
        FileOutcome::Done => {}
        FileOutcome::Corrupt(what) => return Err(StoreError::corrupt(path, what)),
    }
    let expect = of.reader.metadata().file_metadata().num_rows().max(0) as u64;
    if rows != expect {
        return Err(StoreError::corrupt(
            path,
            format!("read {rows} rows, footer says {expect}"),
        ));
    }
    Ok((kind, rows))
}

/// What a file's footer says: its kind, rows, and the range of its time
/// column (ns; None without statistics). Reads no data pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSummary {
    pub kind: Kind,
    pub rows: u64,
    pub time_range: Option<(i64, i64)>,
}

/// The footer of one file (see [`FileSummary`]).
pub fn file_summary(path: &Path) -> Result<FileSummary, StoreError> {
    let f = File::open(path).map_err(|e| StoreError::io(path, "open", e))?;
    let reader = guard(|| SerializedFileReader::new(f).map_err(|e| e.to_string()))
        .map_err(|e| StoreError::corrupt(path, e))?;
    let meta = reader.metadata();
    let name = meta
        .file_metadata()
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|k| k.key == "wirelog.kind"))
        .and_then(|k| k.value.as_deref());
    let Some(kind) = name.and_then(Kind::from_name) else {
        return Err(StoreError::corrupt(path, format!("unknown wirelog.kind {name:?}")));
    };
    let descr = meta.file_metadata().schema_descr();
    let tname = schema::time_column(kind);
    let idx = (0..descr.num_columns())
        .find(|&i| descr.column(i).name() == tname)
        .ok_or_else(|| StoreError::corrupt(path, format!("no column {tname}")))?;
    let mut range: Option<(i64, i64)> = None;
    for rg in meta.row_groups() {
        // Times are stored in microseconds.
        let Some((lo, hi)) = stat_range(rg, idx, ColType::TimeUs) else {
            range = None;
            break;
        };
        let (lo, hi) = ((lo as i64).saturating_mul(1000), (hi as i64).saturating_mul(1000));
        range = Some(range.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
    }
    Ok(FileSummary { kind, rows: meta.file_metadata().num_rows().max(0) as u64, time_range: range })
}

/// Files of a partition that do not open as Parquet, with what is wrong.
pub type BadFiles = Vec<(PathBuf, String)>;

/// The live data files of a partition directory (files a finished
/// compaction replaced left out), and the ones that do not open as Parquet.
pub fn partition_files(pdir: &Path) -> Result<(Vec<PathBuf>, BadFiles), StoreError> {
    let mut replaced = 0;
    let mut corrupt = Vec::new();
    let files = snapshot(pdir, &mut replaced, &mut corrupt)?;
    Ok((files.into_iter().map(|f| f.path).collect(), corrupt))
}

/// Every row of an in-memory file (written by `encode::encode_in_memory`),
/// every column, as one batch: the live records of a running capture,
/// decoded by the code that decodes the store's files.
pub(crate) fn decode_in_memory(bytes: Vec<u8>, kind: Kind) -> Result<Batch, StoreError> {
    let what = Path::new("(live records in memory)");
    let reader = SerializedFileReader::new(bytes::Bytes::from(bytes)).map_err(|e| StoreError::corrupt(what, e.to_string()))?;
    let scan = Scan::all_columns(kind);
    let mut stats = ScanStats::default();
    let mut out: Option<Batch> = None;
    let outcome = scan_file(&reader, None, false, &scan, &mut stats, &mut Work::new(kind), &mut |b: &mut Batch| {
        match out.as_mut() {
            None => out = Some(Batch { kind: b.kind, columns: std::mem::take(&mut b.columns) }),
            Some(o) => {
                for ((_, a), (_, c)) in o.columns.iter_mut().zip(b.columns.iter_mut()) {
                    if !a.append(std::mem::replace(c, Column::Bool(Vec::new()))) {
                        return Err(StoreError::corrupt(what, "columns of different types"));
                    }
                }
                // The next batch gets fresh columns of the right shape.
                b.columns.clear();
            }
        }
        Ok(())
    })?;
    if let FileOutcome::Corrupt(why) = outcome {
        return Err(StoreError::corrupt(what, why));
    }
    Ok(out.unwrap_or_else(|| Batch {
        kind,
        columns: scan.columns.iter().map(|&c| (c, empty_column(schema::columns(kind).iter().find(|s| s.name == c).expect("a column of the kind")))).collect(),
    }))
}

/// Reads all rows of the given open files (every column), for compaction.
pub(crate) fn read_all(files: &[OpenFile], kind: Kind) -> Result<Vec<Batch>, StoreError> {
    let scan = Scan::all_columns(kind);
    let mut stats = ScanStats::default();
    let mut w = Work::new(kind);
    let mut out = Vec::new();
    for f in files {
        match scan_file(&f.reader, None, false, &scan, &mut stats, &mut w, &mut |b: &mut Batch| {
            out.push(Batch {
                kind: b.kind,
                columns: std::mem::take(&mut b.columns),
            });
            Ok(())
        })? {
            FileOutcome::Done => {}
            FileOutcome::Corrupt(what) => return Err(StoreError::corrupt(&f.path, what)),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use wirelog_record::{FlowRecord, IpAddr16};

    use super::*;
    use crate::encode::{req_i32, req_i64, req_ip, strings, write_file, PqValues, RowSource};

    const S: i64 = 1_000_000_000;
    const B: i64 = 1_800_000_000 * S;

    fn rec(n: u64, first_ns: i64, last_ns: i64) -> FlowRecord {
        FlowRecord {
            bucket_ns: B,
            iface: Arc::from("eth0"),
            client: IpAddr16::from_v4([10, 0, 0, n as u8]),
            server: IpAddr16::from_v4([192, 168, 0, 1]),
            server_port: 443,
            proto: 6,
            bytes_out: n,
            pkts_out: 1,
            bytes_in: 2,
            pkts_in: 1,
            first_ns,
            last_ns,
            conns: 1,
        }
    }

    /// Flows as files held them before second offsets: first/last as
    /// microsecond timestamps (the scan columns, written as they are).
    struct OldFlows(Vec<FlowRecord>);

    impl RowSource for OldFlows {
        fn kind(&self) -> Kind {
            Kind::Flows
        }
        fn len(&self) -> usize {
            self.0.len()
        }
        fn time_ns(&self, row: usize) -> i64 {
            self.0[row].bucket_ns
        }
        fn sort_rows(&self, _: &mut [u32]) {}
        fn values(&self, col: usize, rows: &[u32]) -> PqValues {
            let r = |i: usize| &self.0[i];
            let us = |ns: i64| ns / NS_PER_US;
            match schema::FLOWS[col].name {
                "bucket" => req_i64(rows, |i| us(r(i).bucket_ns)),
                "iface" => strings(rows, false, |i| Some(r(i).iface.as_bytes())),
                "client" => req_ip(rows, |i| r(i).client.0),
                "server" => req_ip(rows, |i| r(i).server.0),
                "server_port" => req_i32(rows, |i| r(i).server_port as i32),
                "proto" => req_i32(rows, |i| r(i).proto as i32),
                "bytes_out" => req_i64(rows, |i| r(i).bytes_out as i64),
                "pkts_out" => req_i64(rows, |i| r(i).pkts_out as i64),
                "bytes_in" => req_i64(rows, |i| r(i).bytes_in as i64),
                "pkts_in" => req_i64(rows, |i| r(i).pkts_in as i64),
                "first" => req_i64(rows, |i| us(r(i).first_ns)),
                "last" => req_i64(rows, |i| us(r(i).last_ns)),
                "conns" => req_i32(rows, |i| r(i).conns as i32),
                other => unreachable!("{other}"),
            }
        }
    }

    /// (bytes_out, first, last) of every flow row, by bytes_out.
    fn times(dir: &Path, cols: &[&'static str]) -> Vec<(u64, i64, i64)> {
        let mut out = Vec::new();
        scan_ref(dir, &Scan::new(Kind::Flows).columns(cols), |b| {
            let n = b.rows();
            let get = |name| match b.column(name) {
                Some(Column::I64(v)) => v.clone(),
                _ => vec![0; n],
            };
            let (first, last) = (get("first"), get("last"));
            let Some(Column::U64(id)) = b.column("bytes_out") else { panic!() };
            out.extend((0..n).map(|i| (id[i], first[i], last[i])));
            Ok(())
        })
        .unwrap();
        out.sort();
        out
    }

    fn file_columns_of(path: &Path) -> Vec<String> {
        let r = SerializedFileReader::new(File::open(path).unwrap()).unwrap();
        let d = r.metadata().file_metadata().schema_descr_ptr();
        (0..d.num_columns()).map(|i| d.column(i).name().to_string()).collect()
    }

    /// Every batch of a scan, in order, and its row count.
    fn batches(dir: &Path, s: &Scan) -> (Vec<Batch>, u64) {
        let mut out = Vec::new();
        let stats = scan(dir, s, |b| {
            out.push(b);
            Ok(())
        })
        .unwrap();
        (out, stats.rows)
    }

    /// Scans through a column cache give the very batches of scans without
    /// one, cold and warm: over files of several hours cut into several row
    /// groups, ranges inside and across row groups and hours, an optional
    /// column a file may lack, a file written after the cache was filled
    /// (as while serving), and after retention deleted the oldest hour.
    #[test]
    fn cached_scans_equal_plain_ones() {
        let dir = std::env::temp_dir().join(format!("wirelog-colcache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        const H: i64 = 3600 * S;
        let t0 = (B / H) * H;
        let opts = crate::StoreOptions {
            sync: false,
            row_group_rows: 300,
            retain_age: Some(std::time::Duration::from_secs(3 * 3600)),
            ..Default::default()
        };
        let mut st = crate::Store::open(&dir, opts).unwrap();
        let mut uids = wirelog_record::UidGenerator::new(3);
        let step = 4 * H / 6000;
        let mut conns = |lo: u64, hi: u64| (lo..hi).map(|j| crate::synth::conn(j, t0, step, &mut uids)).collect::<Vec<_>>();
        st.append_conns(&conns(0, 3000)).unwrap();
        st.flush().unwrap();
        st.append_conns(&conns(3000, 5000)).unwrap();
        st.flush().unwrap();
        let cache = ColumnCache::new(64 << 20);
        let cols: &[&[&'static str]] = &[
            &["ts"],
            &["orig_bytes", "resp_p"],
            &["ts", "uid", "orig_h", "service", "duration", "conn_state", "orig_proc", "resp_container"],
        ];
        let ranges = [
            (None, None),
            (Some(t0 + H / 2), Some(t0 + 2 * H + 123)),
            (Some(t0 + 3 * H + 7 * S), None),
            (None, Some(t0 + 10 * S)),
            (Some(t0 - H), Some(t0 - 1)),
        ];
        let check = |what: &str| {
            for c in cols {
                for &(f, t) in &ranges {
                    let s = Scan::new(Kind::Conns).columns(c).time(f, t);
                    let plain = batches(&dir, &s);
                    let cold = batches(&dir, &s.clone().cache(cache.clone()));
                    let warm = batches(&dir, &s.clone().cache(cache.clone()));
                    assert!(plain == cold, "{what}: {c:?} {f:?}..{t:?}: cold cache differs ({} vs {} rows)", plain.1, cold.1);
                    assert!(plain == warm, "{what}: {c:?} {f:?}..{t:?}: warm cache differs ({} vs {} rows)", plain.1, warm.1);
                }
            }
        };
        check("two flushes");
        // A scan larger than half the cache goes around it: equal batches,
        // nothing decoded into the cache nor taken from it.
        let small = ColumnCache::new(4096);
        for c in cols {
            let s = Scan::new(Kind::Conns).columns(c);
            assert!(batches(&dir, &s) == batches(&dir, &s.clone().cache(small.clone())), "{c:?}: around a small cache differs");
        }
        assert_eq!(small.stats(), crate::ColumnCacheStats::default());
        let s = cache.stats();
        assert!(s.hits > 0 && s.misses > 0 && s.chunks > 0, "{s:?}");
        st.append_conns(&conns(5000, 6000)).unwrap();
        st.flush().unwrap();
        check("a file written since");
        let r = st.enforce_retention(t0 + 4 * H + 300 * S).unwrap();
        assert!(r.partitions_deleted >= 1, "{r:?}");
        check("the oldest hour deleted");
        let all = batches(&dir, &Scan::new(Kind::Conns).columns(&["ts"]).cache(cache.clone()));
        assert!(all.1 > 0 && all.1 < 6000, "{}", all.1);
        drop(st);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A store with a flow file of each form: both read as first/last, the
    /// old one to the microsecond, the new one to the second; compaction
    /// writes the new form.
    #[test]
    fn old_and_new_flow_files_read_together() {
        let dir = std::env::temp_dir().join(format!("wirelog-flowform-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let old = rec(1, B + 12_345_678_000, B + 250_000_001_000);
        let new = rec(2, B + 7_999_999_999, B + 299_500_000_000);
        let pdir = crate::layout::partition_path(&dir, Kind::Flows, crate::time::hour_of(B));
        std::fs::create_dir_all(&pdir).unwrap();
        write_file(
            &pdir,
            "part",
            &OldFlows(vec![old.clone()]),
            &[0],
            &crate::pqfile::Format { cols: schema::FLOWS, ..schema::file_format(Kind::Flows, 3, 1000).unwrap() },
            &[],
            false,
            false,
        )
        .unwrap();
        let mut st = crate::Store::open(&dir, crate::StoreOptions { sync: false, ..Default::default() }).unwrap();
        st.append_flows(std::slice::from_ref(&new)).unwrap();
        st.close().unwrap();

        let (files, bad) = partition_files(&pdir).unwrap();
        assert!(bad.is_empty());
        let mut forms: Vec<bool> =
            files.iter().map(|f| file_columns_of(f).iter().any(|c| c == "first")).collect();
        forms.sort();
        assert_eq!(forms, [false, true], "one file of each form");

        let want = vec![
            (1, old.first_ns, old.last_ns),
            (2, B + 7 * S, B + 299 * S),
        ];
        assert_eq!(times(&dir, &["bytes_out", "first", "last"]), want);
        // One of them alone, and in another order.
        assert_eq!(
            times(&dir, &["last", "bytes_out"]),
            want.iter().map(|&(i, _, l)| (i, 0, l)).collect::<Vec<_>>()
        );
        assert_eq!(
            times(&dir, &["first", "bytes_out"]),
            want.iter().map(|&(i, f, _)| (i, f, 0)).collect::<Vec<_>>()
        );
        for f in &files {
            assert_eq!(verify_file(f).unwrap(), (Kind::Flows, 1));
        }

        // Compaction rewrites both in the new form (the old row to the second).
        let report = crate::Store::compact_partition(&pdir).unwrap();
        assert_eq!(report.files_merged, 2, "{report:?}");
        let (files, _) = partition_files(&pdir).unwrap();
        assert_eq!(files.len(), 1);
        let cols = file_columns_of(&files[0]);
        assert!(cols.iter().any(|c| c == flow_time::FIRST_OFFSET) && !cols.iter().any(|c| c == "first"));
        assert_eq!(
            times(&dir, &["bytes_out", "first", "last"]),
            vec![(1, B + 12 * S, B + 250 * S), (2, B + 7 * S, B + 299 * S)]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
