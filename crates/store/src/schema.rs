//! The Parquet schemas of the two tables, and how each column is typed,
//! encoded and handed to queries.

use std::sync::Arc;

use parquet::basic::{Compression, Encoding, LogicalType, Repetition, TimeUnit, Type as PhysicalType, ZstdLevel};
use parquet::file::metadata::SortingColumn;
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
use parquet::schema::types::{ColumnPath, Type, TypePtr};

use crate::batch::Kind;
use crate::error::StoreError;

/// What a column holds; decides its Parquet types and its batch variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ColType {
    /// INT64 TIMESTAMP(MICROS, UTC); batch `I64` in ns.
    TimeUs,
    /// INT64 microseconds (no logical type: Parquet has no usable duration);
    /// batch `OptI64` in ns.
    DurUs,
    /// INT32 INTEGER(8, unsigned); batch `U8`.
    U8,
    /// INT32 INTEGER(16, unsigned); batch `U16`, or `OptU64` when optional.
    U16,
    /// INT32 INTEGER(32, unsigned); batch `U32`.
    U32,
    /// INT64 INTEGER(64, unsigned); batch `U64`, or `OptU64` when optional.
    U64,
    /// FIXED_LEN_BYTE_ARRAY(16), IPv4 v4-mapped; batch `Ip`.
    Ip,
    /// BYTE_ARRAY UTF8; batch `Str` (a missing optional value reads as "").
    Str,
    /// BOOLEAN; batch `Bool`.
    Bool,
}

/// One column of a table.
#[derive(Debug, Clone, Copy)]
pub struct ColSpec {
    pub name: &'static str,
    pub(crate) ty: ColType,
    pub(crate) optional: bool,
    /// Dictionary encoding (falls back to `encoding` when the dictionary grows too big).
    pub(crate) dict: bool,
    pub(crate) encoding: Encoding,
}

const fn col(name: &'static str, ty: ColType, optional: bool, dict: bool, encoding: Encoding) -> ColSpec {
    ColSpec { name, ty, optional, dict, encoding }
}

use ColType::*;
use Encoding::{DELTA_BINARY_PACKED as DELTA, PLAIN};

/// Flows: goProbe-style per-bucket counters. Rows are sorted by
/// (bucket, client, server, server_port, proto, iface) within a file.
pub const FLOWS: &[ColSpec] = &[
    // Encodings chosen by measurement on Zipf-like traffic (store_bench):
    // the sorted bucket as deltas; keys and heavy-tailed byte counters as
    // dictionaries (fallback plain when a dictionary outgrows 1 MiB);
    // small counters, the sorted client and `last` plain (zstd does better
    // on their bytes than bit packing).
    col("bucket", TimeUs, false, false, DELTA),
    col("iface", Str, false, true, PLAIN),
    col("client", Ip, false, false, PLAIN),
    col("server", Ip, false, true, PLAIN),
    col("server_port", U16, false, true, PLAIN),
    col("proto", U8, false, true, PLAIN),
    col("bytes_out", U64, false, true, PLAIN),
    col("pkts_out", U64, false, true, PLAIN),
    col("bytes_in", U64, false, true, PLAIN),
    col("pkts_in", U64, false, true, PLAIN),
    col("first", TimeUs, false, false, DELTA),
    col("last", TimeUs, false, false, DELTA),
    col("conns", U32, false, true, PLAIN),
];

/// Connections: Zeek conn.log fields. Rows are sorted by ts within a file.
pub const CONNS: &[ColSpec] = &[
    col("ts", TimeUs, false, false, DELTA),
    // Random strings: plain (a dictionary would only grow).
    col("uid", Str, false, false, PLAIN),
    col("orig_h", Ip, false, true, PLAIN),
    // Ephemeral ports are close to random: plain.
    col("orig_p", U16, false, false, PLAIN),
    col("resp_h", Ip, false, true, PLAIN),
    col("resp_p", U16, false, true, PLAIN),
    col("proto", Str, false, true, PLAIN),
    col("service", Str, true, true, PLAIN),
    col("duration", DurUs, true, false, PLAIN),
    col("orig_bytes", U64, true, true, PLAIN),
    col("resp_bytes", U64, true, true, PLAIN),
    col("conn_state", Str, false, true, PLAIN),
    col("local_orig", Bool, false, false, PLAIN),
    col("local_resp", Bool, false, false, PLAIN),
    col("missed_bytes", U64, false, true, PLAIN),
    col("history", Str, false, true, PLAIN),
    col("orig_pkts", U64, false, true, PLAIN),
    col("orig_ip_bytes", U64, false, true, PLAIN),
    col("resp_pkts", U64, false, true, PLAIN),
    col("resp_ip_bytes", U64, false, true, PLAIN),
    col("ip_proto", U8, false, true, PLAIN),
    col("community_id", Str, false, false, PLAIN),
    col("vlan", U16, true, true, PLAIN),
    col("inner_vlan", U16, true, true, PLAIN),
];

/// The columns of a kind, in file order.
pub fn columns(kind: Kind) -> &'static [ColSpec] {
    match kind {
        Kind::Flows => FLOWS,
        Kind::Conns => CONNS,
    }
}

/// The time column a kind is partitioned and pruned by.
pub fn time_column(kind: Kind) -> &'static str {
    match kind {
        Kind::Flows => "bucket",
        Kind::Conns => "ts",
    }
}

pub(crate) fn col_index(kind: Kind, name: &str) -> Option<usize> {
    columns(kind).iter().position(|c| c.name == name)
}

pub(crate) fn parquet_schema(kind: Kind) -> TypePtr {
    let fields = columns(kind)
        .iter()
        .map(|c| {
            let (phys, logical) = match c.ty {
                TimeUs => (PhysicalType::INT64, Some(LogicalType::timestamp(true, TimeUnit::MICROS))),
                DurUs => (PhysicalType::INT64, None),
                U8 => (PhysicalType::INT32, Some(LogicalType::integer(8, false))),
                U16 => (PhysicalType::INT32, Some(LogicalType::integer(16, false))),
                U32 => (PhysicalType::INT32, Some(LogicalType::integer(32, false))),
                U64 => (PhysicalType::INT64, Some(LogicalType::integer(64, false))),
                Ip => (PhysicalType::FIXED_LEN_BYTE_ARRAY, None),
                Str => (PhysicalType::BYTE_ARRAY, Some(LogicalType::String)),
                Bool => (PhysicalType::BOOLEAN, None),
            };
            let mut b = Type::primitive_type_builder(c.name, phys)
                .with_repetition(if c.optional { Repetition::OPTIONAL } else { Repetition::REQUIRED })
                .with_logical_type(logical);
            if c.ty == Ip {
                b = b.with_length(16);
            }
            Arc::new(b.build().expect("static schema is valid"))
        })
        .collect();
    Arc::new(
        Type::group_type_builder(if kind == Kind::Flows { "wirelog_flows" } else { "wirelog_conns" })
            .with_fields(fields)
            .build()
            .expect("static schema is valid"),
    )
}

pub(crate) fn writer_properties(
    kind: Kind,
    zstd_level: i32,
    row_group_rows: usize,
) -> Result<Arc<WriterProperties>, StoreError> {
    let level = ZstdLevel::try_new(zstd_level).map_err(|e| StoreError::Invalid(format!("zstd level: {e}")))?;
    let mut b = WriterProperties::builder()
        // Data pages v1: read by every Parquet reader, old and new.
        .set_writer_version(WriterVersion::PARQUET_1_0)
        .set_created_by(format!("wirelog-store {}", env!("CARGO_PKG_VERSION")))
        .set_compression(Compression::ZSTD(level))
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_max_row_group_row_count(Some(row_group_rows.max(1)))
        .set_data_page_size_limit(1 << 20)
        .set_data_page_row_count_limit(1 << 20)
        .set_dictionary_page_size_limit(1 << 20)
        .set_write_batch_size(8192);
    for c in columns(kind) {
        let path = ColumnPath::from(c.name);
        let (dict, enc) = (c.dict, c.encoding);
        b = b.set_column_dictionary_enabled(path.clone(), dict);
        if enc != PLAIN {
            b = b.set_column_encoding(path.clone(), enc);
        }
        if matches!(c.name, "uid" | "community_id") {
            // Random strings: min/max prune nothing.
            b = b.set_column_statistics_enabled(path, EnabledStatistics::None);
        }
    }
    if kind == Kind::Flows {
        let sorted = ["bucket", "client", "server", "server_port"];
        b = b.set_sorting_columns(Some(
            sorted
                .iter()
                .map(|n| SortingColumn {
                    column_idx: col_index(kind, n).unwrap() as i32,
                    descending: false,
                    nulls_first: false,
                })
                .collect(),
        ));
    } else {
        b = b.set_sorting_columns(Some(vec![SortingColumn {
            column_idx: col_index(kind, "ts").unwrap() as i32,
            descending: false,
            nulls_first: false,
        }]));
    }
    Ok(Arc::new(b.build()))
}
