//! The store: records in time-partitioned Parquet files under one directory,
//! and the columnar batches that queries read them back as.
//!
//! # Layout
//!
//! ```text
//! <dir>/flows/date=YYYY-MM-DD/hour=HH/part-<unix_nanos>-<seq>.parquet     one per flush
//! <dir>/flows/date=YYYY-MM-DD/hour=HH/compact-<unix_nanos>-<seq>.parquet  small files merged
//! <dir>/conns/date=YYYY-MM-DD/hour=HH/...
//! <dir>/{http,mysql,pgsql,redis,dns}/date=YYYY-MM-DD/hour=HH/...   (transactions)
//! ```
//!
//! Partitions are hours (UTC) of the record's time: `bucket` for flows, `ts`
//! for connections and transactions. Files are plain Parquet (data pages v1, zstd, min/max
//! statistics per row group; written by this crate's own encoder, `pqfile`: dictionary
//! pages with RLE_DICTIONARY indices per column chunk, DELTA_BINARY_PACKED times, PLAIN
//! otherwise) readable as they are by DuckDB
//! (`read_parquet('<dir>/flows/*/*/*.parquet', hive_partitioning=true)`),
//! ClickHouse's `file()`/`s3()`, pandas/pyarrow and Polars. Names starting
//! with `.` are work in progress (temporaries, partitions being deleted) and
//! must be ignored by readers; globbing `*.parquet` does that.
//!
//! # Column types
//!
//! | content | Parquet | batch ([`Column`]) |
//! |---|---|---|
//! | times (`bucket`, `ts`) | INT64 TIMESTAMP(MICROS, UTC) | `I64`, ns |
//! | flows' `first_offset_s`, `duration_s` (read as `first`, `last`) | INT32 INTEGER(32, unsigned), whole seconds | `I64`, ns |
//! | `duration` (conns) | INT64, microseconds, OPTIONAL | `OptI64`, ns |
//! | ports | INT32 INTEGER(16, unsigned) | `U16` (`vlan`, `inner_vlan`: OPTIONAL, `OptU64`) |
//! | `proto` (flows), `ip_proto` | INT32 INTEGER(8, unsigned) | `U8` |
//! | `conns` (flows) | INT32 INTEGER(32, unsigned) | `U32` |
//! | counters | INT64 INTEGER(64, unsigned) | `U64` (`orig_bytes`, `resp_bytes`: OPTIONAL, `OptU64`) |
//! | IP addresses | FIXED_LEN_BYTE_ARRAY(16), IPv4 as v4-mapped `::ffff:a.b.c.d` | `Ip` |
//! | strings | BYTE_ARRAY UTF8 (`service` OPTIONAL: null reads as "") | `Str` |
//! | `local_orig`, `local_resp`, `empty_tcp_skipped` | BOOLEAN | `Bool` |
//!
//! A flow file keeps `first` and `last` to the second, as seconds from the
//! row's bucket start and `last - first` (files written before keep them as
//! microsecond timestamps; both forms read as `first`/`last`, and compaction
//! rewrites the old form). Flow rows are sorted by (bucket, server,
//! server_port, proto, client, iface) within a file, connection and
//! transaction rows by ts. See [`schema::FLOWS`] and [`schema::CONNS`].
//!
//! # Transactions
//!
//! [`Kind::Http`], [`Kind::Mysql`], [`Kind::Pgsql`], [`Kind::Redis`] and
//! [`Kind::Dns`] share twelve leading columns (`ts`, `uid`, `client`,
//! `client_port`, `server`, `server_port`, `transport`, `status`,
//! `request_bytes`, `response_bytes`, `latency`, `first_byte_latency`: the
//! named fields of [`TxRow`]) followed by the kind's own ([`tx_columns`],
//! given as [`Cell`]s in `TxRow::extra`): see [`schema::HTTP`],
//! [`schema::MYSQL`], [`schema::PGSQL`], [`schema::REDIS`], [`schema::DNS`].
//! [`Store::append_tx`] checks every row against them first; a wrong number
//! or type of cells is a [`StoreError::BadRow`] naming the kind and column.
//! Unset text is written as null and read back as "". Transactions are
//! compacted and retained like the other kinds.
//!
//! # Certificates
//!
//! [`Kind::X509`] (`<dir>/x509/...`, outside the protocol table) holds the
//! certificates TLS transactions showed, x509.log's columns (see
//! [`schema::X509`]), one row per (fingerprint, role, host_cert) and hour
//! with the count of handshakes that showed it; [`Store::append_tx_records`]
//! fills it from TLS records, decoding each certificate once. Handshakes
//! after a flush (or in another run) add a row for the same hour with
//! their count: an hour's count is the sum of its rows ([`CertRows`]),
//! which compaction folds into one.
//!
//! # Writing
//!
//! [`Store`] buffers records as columns and writes one file per kind and
//! hour partition touched when a buffer fills ([`StoreOptions::flush_rows`],
//! [`StoreOptions::flush_bytes`]) or on [`Store::flush`]. One writer per
//! directory (flock). [`Store::enforce_retention`] deletes whole hour
//! partitions by age and size (also run by `flush` once a minute when limits
//! are set); a [`Compactor`] thread merges the small files of closed hours.
//!
//! # Reading
//!
//! [`Store::scan`] / [`Store::scan_ref`] (no `Store` needed, readers take no
//! lock) deliver [`Batch`]es of at most [`BATCH_ROWS`] rows with the
//! requested columns in the requested order. Partitions outside the time
//! range are not opened, row groups are skipped by their min/max statistics
//! (time, and the `ranges` of the [`Scan`]), rows outside [from, to) are
//! never returned, and only the requested columns are decoded (common
//! encodings by this crate's own decoder straight into the typed vectors).
//! `scan_ref` lends each batch and reuses its vectors: prefer it in loops.
//!
//! # Guarantees
//!
//! Files appear atomically (hidden temporary, fsync, rename, directory
//! fsync): a crash loses at most the rows not yet flushed and never leaves a
//! file a reader would trust half-written. Compaction and retention keep
//! this crate's readers consistent (see [`compact`] and [`retention`]);
//! tools that glob the files may count a partition twice during the instant
//! between a merged file's rename and the removal of the files it replaces.

mod batch;
mod colcache;
pub mod compact;
mod dict;
mod encode;
mod error;
mod fastdecode;
mod flow_time;
mod fsutil;
pub mod ingest;
pub mod layout;
pub mod pcap_dirs;
mod pqenc;
mod pqfile;
pub mod live;
mod loss;
mod reader;
pub mod retention;
pub mod schema;
mod sink;
pub mod staging;
#[cfg(feature = "synth")]
pub mod synth;
mod time;
mod thrift;
mod tx;
mod tx_record;
mod writer;
mod x509;

pub use batch::{Batch, Column, Kind};
pub use colcache::{ColumnCache, ColumnCacheStats};
pub use compact::{CompactOptions, CompactReport, Compactor, CompactorOptions, CompactorStatus};
pub use error::StoreError;
pub use ingest::{earlier_ingests_of, identify, identify_v1, read_ingests, Ingest};
pub use fsutil::{disk_space, DiskSpace};
pub use layout::{list_partitions, Partition};
pub use pcap_dirs::read_pcap_dirs;
pub use live::{LiveRecords, LiveSink, LiveStats, LiveView};
pub use reader::{file_summary, partition_files, scan_ref, verify_file, FileSummary, Scan, ScanStats, BATCH_ROWS};
pub use retention::RetentionReport;
pub use schema::{tx_columns, ColSpec};
pub use sink::StoreSink;
pub use tx::{Cell, CellRef, TxRow};
pub use tx_record::tx_kind;
pub use wirelog_record::IpAddr16;
pub use writer::{Store, StoreOptions, WriteStats};
pub use x509::{CertRows, CertValue};

use std::path::Path;

impl Store {
    /// Reads the store in `dir` (no `Store` needed: readers never lock).
    /// Partitions outside the time range are not opened, row groups whose
    /// statistics exclude the time range or a `ranges` constraint are
    /// skipped, only the requested columns are decoded. Corrupt files are
    /// skipped and counted in [`ScanStats::corrupt_files`] with a warning.
    pub fn scan(
        dir: &Path,
        scan: &Scan,
        each: impl FnMut(Batch) -> Result<(), StoreError>,
    ) -> Result<ScanStats, StoreError> {
        reader::scan(dir, scan, each)
    }

    /// Like [`Store::scan`], but lends each batch and reuses its column
    /// vectors for the next one: no allocation per batch (the fast path).
    pub fn scan_ref(
        dir: &Path,
        scan: &Scan,
        each: impl FnMut(&Batch) -> Result<(), StoreError>,
    ) -> Result<ScanStats, StoreError> {
        reader::scan_ref(dir, scan, each)
    }

    /// Merges the small files of a closed hour partition into one (see
    /// [`compact`] for the scheme), with default options.
    pub fn compact_partition(path: &Path) -> Result<CompactReport, StoreError> {
        compact::compact_partition(path, &CompactOptions::default())
    }
}

/// The crate's randomized tests' generator (xorshift, deterministic from
/// `seed`): each call gives a value below its argument.
#[cfg(test)]
pub(crate) fn test_rng(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |m| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % m
    }
}
