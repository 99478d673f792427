//! Writing rows to one Parquet file, atomically.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parquet::data_type::{
    BoolType, ByteArray, ByteArrayType, FixedLenByteArray, FixedLenByteArrayType, Int32Type,
    Int64Type,
};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::TypePtr;

use wirelog_record::{Proc, ProcOwner};

use crate::batch::Kind;
use crate::error::StoreError;
use crate::fsutil::{publish, remove_file_if_exists};

/// Values of one column in Parquet's physical representation: only the
/// non-null values, plus definition levels for optional columns.
pub(crate) enum PqCol {
    I32(Vec<i32>),
    I64(Vec<i64>),
    Bool(Vec<bool>),
    Flba(Vec<FixedLenByteArray>),
    Bytes(Vec<ByteArray>),
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
    /// Column `col` ([`crate::schema::file_columns`] order) of the given rows.
    fn values(&self, col: usize, rows: &[u32]) -> PqValues;
}

// ---- helpers to build column values ---------------------------------------

pub(crate) fn req_i64(rows: &[u32], f: impl Fn(usize) -> i64) -> PqValues {
    PqValues {
        col: PqCol::I64(rows.iter().map(|&r| f(r as usize)).collect()),
        def: None,
    }
}

pub(crate) fn req_i32(rows: &[u32], f: impl Fn(usize) -> i32) -> PqValues {
    PqValues {
        col: PqCol::I32(rows.iter().map(|&r| f(r as usize)).collect()),
        def: None,
    }
}

pub(crate) fn req_bool(rows: &[u32], f: impl Fn(usize) -> bool) -> PqValues {
    PqValues {
        col: PqCol::Bool(rows.iter().map(|&r| f(r as usize)).collect()),
        def: None,
    }
}

/// An OPTIONAL column: the present values, and a definition level per row.
fn optional<T>(
    rows: &[u32],
    f: impl Fn(usize) -> Option<T>,
    wrap: fn(Vec<T>) -> PqCol,
) -> PqValues {
    let mut vals = Vec::with_capacity(rows.len());
    let mut def = Vec::with_capacity(rows.len());
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

/// IPs: one shared buffer, each value a slice of it (no allocation per value).
pub(crate) fn req_ip(rows: &[u32], f: impl Fn(usize) -> [u8; 16]) -> PqValues {
    let mut buf = Vec::with_capacity(rows.len() * 16);
    for &r in rows {
        buf.extend_from_slice(&f(r as usize));
    }
    let buf = Bytes::from(buf);
    let vals = (0..rows.len())
        .map(|i| FixedLenByteArray::from(ByteArray::from(buf.slice(i * 16..i * 16 + 16))))
        .collect();
    PqValues {
        col: PqCol::Flba(vals),
        def: None,
    }
}

/// Strings: one shared buffer, each value a slice of it. `optional` columns
/// write `None` as null; required ones write it as "".
pub(crate) fn strings<'a>(
    rows: &[u32],
    optional: bool,
    f: impl Fn(usize) -> Option<&'a [u8]>,
) -> PqValues {
    let mut buf = Vec::new();
    let mut ends = Vec::with_capacity(rows.len());
    let mut def = Vec::with_capacity(if optional { rows.len() } else { 0 });
    for &r in rows {
        match f(r as usize) {
            Some(s) => {
                buf.extend_from_slice(s);
                ends.push(buf.len());
                if optional {
                    def.push(1);
                }
            }
            None if optional => def.push(0),
            None => ends.push(buf.len()),
        }
    }
    let buf = Bytes::from(buf);
    let mut start = 0;
    let vals = ends
        .into_iter()
        .map(|end| {
            let v = ByteArray::from(buf.slice(start..end));
            start = end;
            v
        })
        .collect();
    PqValues {
        col: PqCol::Bytes(vals),
        def: optional.then_some(def),
    }
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
/// temporary name, fsynced, renamed, and the directory fsynced.
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_file(
    dir: &Path,
    prefix: &str,
    src: &dyn RowSource,
    rows: &[u32],
    schema: &TypePtr,
    props: &Arc<WriterProperties>,
    row_group_rows: usize,
    kv: Vec<KeyValue>,
    sync: bool,
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
    let result = write_parquet(&tmp, file, src, rows, schema, props, row_group_rows, kv);
    let file = match result {
        Ok(f) => f,
        Err(e) => {
            let _ = remove_file_if_exists(&tmp);
            return Err(e);
        }
    };
    let bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    if let Err(e) = publish(&file, &tmp, &dst, sync) {
        let _ = remove_file_if_exists(&tmp);
        return Err(e);
    }
    Ok(WrittenFile {
        path: dst,
        rows: rows.len() as u64,
        bytes,
    })
}

#[allow(clippy::too_many_arguments)]
#[allow(clippy::too_many_arguments)]
fn write_parquet(
    path: &Path,
    file: File,
    src: &dyn RowSource,
    rows: &[u32],
    schema: &TypePtr,
    props: &Arc<WriterProperties>,
    row_group_rows: usize,
    kv: Vec<KeyValue>,
) -> Result<File, StoreError> {
    let buf = write_parquet_to(path, BufWriter::with_capacity(1 << 20, file), src, rows, schema, props, row_group_rows, kv)?;
    buf.into_inner()
        .map_err(|e| StoreError::io(path, "write", e.into_error()))
}

/// The rows as a Parquet file in memory, in the order given (the live
/// records of a running capture: `crate::live`), read back by the same
/// reader as the store's files.
pub(crate) fn encode_in_memory(
    src: &dyn RowSource,
    rows: &[u32],
    schema: &TypePtr,
    props: &Arc<WriterProperties>,
) -> Result<Vec<u8>, StoreError> {
    write_parquet_to(Path::new("(memory)"), Vec::new(), src, rows, schema, props, rows.len().max(1), Vec::new())
}

/// Writes the Parquet file to `out`; `path` names it in errors.
#[allow(clippy::too_many_arguments)]
fn write_parquet_to<W: std::io::Write + Send>(
    path: &Path,
    out: W,
    src: &dyn RowSource,
    rows: &[u32],
    schema: &TypePtr,
    props: &Arc<WriterProperties>,
    row_group_rows: usize,
    kv: Vec<KeyValue>,
) -> Result<W, StoreError> {
    // Writing the file is done by the Parquet writer: its I/O errors come
    // back wrapped, and are unwrapped so that a full disk is seen as such.
    let enc = |e: parquet::errors::ParquetError| match e {
        parquet::errors::ParquetError::External(inner) => match inner.downcast::<std::io::Error>() {
            Ok(io) => StoreError::io(path, "write", *io),
            Err(other) => StoreError::encode(path, other),
        },
        e => StoreError::encode(path, e),
    };
    let mut w = SerializedFileWriter::new(
        out,
        schema.clone(),
        props.clone(),
    )
    .map_err(enc)?;
    w.append_key_value_metadata(KeyValue::new(
        "wirelog.kind".into(),
        src.kind().as_str().to_string(),
    ));
    w.append_key_value_metadata(KeyValue::new(
        "wirelog.schema_version".into(),
        crate::schema::file_version(src.kind()).to_string(),
    ));
    for k in kv {
        w.append_key_value_metadata(k);
    }
    // The schema's columns: the kind's, or (in tests) a prefix of them.
    let ncols = schema.get_fields().len();
    for chunk in rows.chunks(row_group_rows.max(1)) {
        let mut rg = w.next_row_group().map_err(enc)?;
        for c in 0..ncols {
            let v = src.values(c, chunk);
            let mut cw = rg.next_column().map_err(enc)?.ok_or_else(|| {
                StoreError::encode(path, "schema has fewer columns than expected")
            })?;
            let def = v.def.as_deref();
            match &v.col {
                PqCol::I32(x) => cw.typed::<Int32Type>().write_batch(x, def, None),
                PqCol::I64(x) => cw.typed::<Int64Type>().write_batch(x, def, None),
                PqCol::Bool(x) => cw.typed::<BoolType>().write_batch(x, def, None),
                PqCol::Flba(x) => cw
                    .typed::<FixedLenByteArrayType>()
                    .write_batch(x, def, None),
                PqCol::Bytes(x) => cw.typed::<ByteArrayType>().write_batch(x, def, None),
            }
            .map_err(enc)?;
            cw.close().map_err(enc)?;
        }
        rg.close().map_err(enc)?;
    }
    w.into_inner().map_err(enc)
}
