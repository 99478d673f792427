//! The Parquet schemas of the two tables, and how each column is typed,
//! encoded and handed to queries.

use std::sync::OnceLock;

use wirelog_record::columns::{Card, Column, Type as Holds};
use wirelog_record::Protocol;

use crate::batch::Kind;
use crate::error::StoreError;
use crate::pqfile::Format;

/// How a column's values are written when not as a dictionary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    Plain,
    /// DELTA_BINARY_PACKED (INT64 columns: sorted times).
    DeltaBinaryPacked,
}

/// What a column holds; decides its Parquet types and its batch variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColType {
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
    /// The Parquet column name (also the query field name).
    pub name: &'static str,
    pub(crate) ty: ColType,
    pub(crate) optional: bool,
    /// Dictionary encoding (falls back to `encoding` when the dictionary grows too big).
    pub(crate) dict: bool,
    pub(crate) encoding: Encoding,
    /// Dictionary-encoded here but with too many values for ClickHouse's
    /// `LowCardinality` (a declared column's `Card::Mid`).
    pub(crate) many_values: bool,
}

impl ColSpec {
    /// What the column holds, as the [`crate::Cell`] variant a transaction's
    /// `extra` must give for it: "u64", "duration", "string" or "bool".
    pub fn cell_type(&self) -> &'static str {
        match self.ty {
            ColType::DurUs => "duration",
            ColType::Str => "string",
            ColType::Bool => "bool",
            _ => "u64",
        }
    }

    /// Whether the value may be unset (an OPTIONAL Parquet column).
    pub fn is_optional(&self) -> bool {
        self.optional
    }

    /// What the column holds (its Parquet and batch types follow from it).
    pub fn col_type(&self) -> ColType {
        self.ty
    }

    /// Whether the column is dictionary-encoded: chosen for values that
    /// repeat (names, codes, states), not for random or free text.
    pub fn is_dictionary(&self) -> bool {
        self.dict
    }

    /// Repeats (a dictionary here) but takes too many values for a
    /// low-cardinality type elsewhere (ClickHouse).
    pub fn has_many_values(&self) -> bool {
        self.many_values
    }

    /// Written as deltas (when not as a dictionary).
    pub(crate) fn encoding_is_delta(&self) -> bool {
        self.encoding == Encoding::DeltaBinaryPacked
    }

    /// Files keep the column's min/max per row group: not for random
    /// strings and free text, whose min/max prune nothing.
    pub(crate) fn has_statistics(&self) -> bool {
        !(matches!(self.name, "uid" | "community_id") || (self.ty == Str && !self.dict))
    }
}

const fn col(
    name: &'static str,
    ty: ColType,
    optional: bool,
    dict: bool,
    encoding: Encoding,
) -> ColSpec {
    ColSpec {
        name,
        ty,
        optional,
        dict,
        encoding,
        many_values: false,
    }
}

use ColType::*;
use Encoding::{DeltaBinaryPacked as DELTA, Plain as PLAIN};

/// The owners of a record's two ends (`capture --processes`: connections
/// and every transaction kind), their table's last columns, unset when
/// unknown or not local, and in files written before they existed. Few
/// programs and users per host: dictionaries.
const OWNERS: [ColSpec; OWNER_COLS] = [
    col("orig_pid", U64, true, true, PLAIN),
    col("orig_proc", Str, true, true, PLAIN),
    col("orig_exe", Str, true, true, PLAIN),
    col("orig_user", Str, true, true, PLAIN),
    col("orig_container", Str, true, true, PLAIN),
    col("orig_pod", Str, true, true, PLAIN),
    col("resp_pid", U64, true, true, PLAIN),
    col("resp_proc", Str, true, true, PLAIN),
    col("resp_exe", Str, true, true, PLAIN),
    col("resp_user", Str, true, true, PLAIN),
    col("resp_container", Str, true, true, PLAIN),
    col("resp_pod", Str, true, true, PLAIN),
];

/// A table whose last columns are the [`OWNERS`].
macro_rules! with_owners {
    ($($col:expr),* $(,)?) => {
        &[
            $($col,)*
            OWNERS[0], OWNERS[1], OWNERS[2], OWNERS[3], OWNERS[4], OWNERS[5],
            OWNERS[6], OWNERS[7], OWNERS[8], OWNERS[9], OWNERS[10], OWNERS[11],
        ]
    };
}

/// How many owner columns end a connection or transaction table (see
/// `with_owners!`).
pub const OWNER_COLS: usize = 12;

/// Flows: goProbe-style per-bucket counters, as queries, the API and
/// ClickHouse see them: `first` and `last` are times. Files keep them in
/// whole seconds as [`FLOWS_FILE`]'s offsets (see [`crate::flow_time`]);
/// files written before that keep them as timestamps.
pub const FLOWS: &[ColSpec] = &[
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

/// Flows as files hold them: [`FLOWS`] with `first`/`last` replaced by
/// `first_offset_s` (seconds after `bucket`) and `duration_s` (`last -
/// first`), both floored to the second. Rows are sorted by (bucket, server,
/// server_port, proto, client, iface) within a file.
pub const FLOWS_FILE: &[ColSpec] = &[
    // Encodings chosen by measurement on Zipf-like traffic (store_bench,
    // bench/flow_rows.py): the sorted bucket as deltas; keys and
    // heavy-tailed byte counters as dictionaries (fallback plain when a
    // dictionary outgrows 1 MiB); the client (no longer the sorted key) and
    // the second offsets as dictionaries too (plain measured 8.48 B/row
    // against 7.61).
    col("bucket", TimeUs, false, false, DELTA),
    col("iface", Str, false, true, PLAIN),
    col("client", Ip, false, true, PLAIN),
    col("server", Ip, false, true, PLAIN),
    col("server_port", U16, false, true, PLAIN),
    col("proto", U8, false, true, PLAIN),
    col("bytes_out", U64, false, true, PLAIN),
    col("pkts_out", U64, false, true, PLAIN),
    col("bytes_in", U64, false, true, PLAIN),
    col("pkts_in", U64, false, true, PLAIN),
    col(crate::flow_time::FIRST_OFFSET, U32, false, true, PLAIN),
    col(crate::flow_time::DURATION, U32, false, true, PLAIN),
    col("conns", U32, false, true, PLAIN),
];

/// Connections: Zeek conn.log fields. Rows are sorted by ts within a file.
pub const CONNS: &[ColSpec] = with_owners![
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
    // capture --skip-empty-tcp: packet counts and history lack pure ACKs.
    col("empty_tcp_skipped", Bool, false, false, PLAIN),
];

/// The columns every transaction kind starts with (filled from
/// [`crate::TxRow`]'s named fields); its own follow (filled from
/// `TxRow::extra`, declared beside the protocol's transaction type:
/// [`wirelog_record::columns`]), then the [`OWNERS`] of both ends (`TxRow`'s
/// `orig_proc`/`resp_proc`). Rows are sorted by ts within a file.
const TX_HEAD: [ColSpec; TX_COMMON - 1] = [
    col("ts", TimeUs, false, false, DELTA),
    // A connection's uid and client port repeat for each of its
    // transactions: dictionaries (2 bits a row for mysql_text's 4
    // connections, against 22 and 4 bytes plain before zstd; a flush of
    // one-transaction connections outgrows the 1 MiB dictionary and falls
    // back to plain). Plain types in ClickHouse (`many_values`).
    ColSpec { many_values: true, ..col("uid", Str, false, true, PLAIN) },
    col("client", Ip, false, true, PLAIN),
    ColSpec { many_values: true, ..col("client_port", U16, false, true, PLAIN) },
    col("server", Ip, false, true, PLAIN),
    col("server_port", U16, false, true, PLAIN),
    col("transport", U8, false, true, PLAIN),
    col("status", Str, false, true, PLAIN),
    col("request_bytes", U64, true, true, PLAIN),
    col("response_bytes", U64, true, true, PLAIN),
    // Latencies: few bits each (mysql_text's are 7-1,125 µs); as deltas,
    // bit-packed, they need no zstd (which cost ~150 instructions a value on
    // their 8 bytes PLAIN; BENCHMARKS.md, "Issue 36, the store's row cost").
    col("latency", DurUs, true, false, DELTA),
    col("first_byte_latency", DurUs, true, false, DELTA),
];

/// How many columns every transaction kind starts with (it ends with
/// [`OWNER_COLS`] more): [`TX_HEAD`] and the sample weight.
pub const TX_COMMON: usize = 13;

/// The store type of what a declared column holds (a const fn: the record
/// fill of `crate::tx_record` reads it at compile time).
pub(crate) const fn held_type(h: Holds) -> ColType {
    match h {
        Holds::Text | Holds::Enum | Holds::List(_) => Str,
        Holds::Count { bits: 16, .. } => U16,
        Holds::Count { .. } | Holds::TimeSecs => U64,
        Holds::Bool => Bool,
        Holds::Interval => DurUs,
    }
}

/// Whether a declared column is stored as a dictionary: unless its values
/// are free text (`Card::High`, or not stored) or a flag. A const fn: the
/// record fill of `crate::tx_record` picks each column's builder from it at
/// compile time.
pub(crate) const fn declared_dict(c: &Column) -> bool {
    match c.store {
        Some(Card::High) | None => false,
        Some(_) => !matches!(held_type(c.ty), Bool),
    }
}

/// The store column of a declared one: its type from what it holds (a list
/// is its items joined by `,`; a time in whole seconds is their number), a
/// dictionary unless its values are free text or a flag, optional unless a
/// flag; a 64-bit integer or duration without a dictionary as deltas (a
/// page whose deltas take more room than PLAIN is written PLAIN).
fn declared(c: &Column) -> ColSpec {
    let ty = held_type(c.ty);
    let card = c.store.unwrap_or(Card::High);
    let dict = declared_dict(c);
    ColSpec {
        name: c.name,
        ty,
        optional: c.optional(),
        dict,
        encoding: if !dict && matches!(ty, U64 | DurUs) { DELTA } else { PLAIN },
        many_values: card == Card::Mid,
    }
}

/// Each protocol's table, built once from its declaration.
fn tx_table(p: Protocol) -> &'static [ColSpec] {
    static TABLES: OnceLock<Vec<Vec<ColSpec>>> = OnceLock::new();
    let tables = TABLES.get_or_init(|| {
        Protocol::ALL
            .iter()
            .map(|&p| {
                let own = wirelog_record::columns::of(p).stored().into_iter().map(declared);
                // The sample weight (declared with the columns, one for
                // every protocol) ends the common head.
                let weight = declared(&wirelog_record::columns::SAMPLE_WEIGHT);
                TX_HEAD.iter().copied().chain([weight]).chain(own).chain(OWNERS).collect()
            })
            .collect()
    });
    &tables[p.index()]
}

/// The names a kind's column had in earlier files (declared renames).
pub fn old_names(kind: Kind, name: &str) -> impl Iterator<Item = &'static str> + '_ {
    let renamed = kind.protocol().map_or(&[][..], |p| wirelog_record::columns::of(p).renamed);
    renamed.iter().filter(move |(_, new)| *new == name).map(|(old, _)| *old)
}

/// Certificates TLS handshakes showed in plaintext (TLS <= 1.2): x509.log's
/// columns, one row per (fingerprint, role, host_cert) and hour, with when
/// it was first seen in that hour and how many handshakes showed it.
pub const X509: &[ColSpec] = &[
    col("ts", TimeUs, false, false, DELTA),
    // SHA-256 hex: random.
    col("fingerprint", Str, false, false, PLAIN),
    // "server" or "client": whose Certificate message it was in.
    col("role", Str, false, true, PLAIN),
    // The first certificate of its chain (Zeek's host_cert for servers).
    col("host_cert", Bool, false, false, PLAIN),
    col("handshakes", U64, false, true, PLAIN),
    col("version", U64, false, true, PLAIN),
    col("serial", Str, false, false, PLAIN),
    col("subject", Str, false, true, PLAIN),
    col("issuer", Str, false, true, PLAIN),
    // Unix seconds (unset before 1970): certificates reach year 9999,
    // past what a nanosecond time holds.
    col("not_valid_before", U64, true, true, PLAIN),
    col("not_valid_after", U64, true, true, PLAIN),
    col("key_alg", Str, false, true, PLAIN),
    col("sig_alg", Str, false, true, PLAIN),
    col("key_type", Str, true, true, PLAIN),
    col("key_length", U64, true, true, PLAIN),
    col("exponent", Str, true, true, PLAIN),
    col("curve", Str, true, true, PLAIN),
    // Subject alternative names, comma-joined.
    col("san_dns", Str, true, false, PLAIN),
    col("san_uri", Str, true, false, PLAIN),
    col("san_email", Str, true, false, PLAIN),
    col("san_ip", Str, true, false, PLAIN),
    // Basic constraints: ca is false when the extension is absent.
    col("basic_constraints_ca", Bool, false, false, PLAIN),
    col("basic_constraints_path_len", U64, true, true, PLAIN),
];

/// The completeness record (`wirelog_record::loss`): per minute, capture
/// source and (for the parsers' counts) protocol, how much each cause of
/// loss counted; one column per [`wirelog_record::LossCount`], in its order.
pub fn loss_columns() -> &'static [ColSpec] {
    static LOSS: OnceLock<Vec<ColSpec>> = OnceLock::new();
    LOSS.get_or_init(|| {
        let head = [
            col("ts", TimeUs, false, false, DELTA),
            // Interfaces, files, `sinks`: few values.
            col("source", Str, false, true, PLAIN),
            // Unset on a source's row.
            col("protocol", Str, true, true, PLAIN),
        ];
        let counts = wirelog_record::LossCount::ALL.iter().map(|c| col(c.name(), U64, false, true, PLAIN));
        head.into_iter().chain(counts).collect()
    })
}

/// The columns of a kind as scans, queries and ClickHouse see them (for
/// flows not quite the file's: see [`file_columns`]).
pub fn columns(kind: Kind) -> &'static [ColSpec] {
    match kind {
        Kind::Flows => FLOWS,
        Kind::Conns => CONNS,
        Kind::X509 => X509,
        Kind::Loss => loss_columns(),
        _ => match kind.protocol() {
            Some(p) => tx_table(p),
            None => unreachable!("every kind but flows, conns, x509 and loss is a protocol's"),
        },
    }
}

/// The columns a kind's files are written with, in file order: [`FLOWS_FILE`]
/// for flows, [`columns`] for the others.
pub fn file_columns(kind: Kind) -> &'static [ColSpec] {
    match kind {
        Kind::Flows => FLOWS_FILE,
        _ => columns(kind),
    }
}

/// What a file's `wirelog.schema_version` says: 2 for flow files with
/// second offsets ([`FLOWS_FILE`]), 1 for the rest. Readers go by the
/// columns a file has, so this is for people and other tools.
pub(crate) fn file_version(kind: Kind) -> u32 {
    match kind {
        Kind::Flows => 2,
        _ => 1,
    }
}

/// The columns of a transaction kind that come from `TxRow::extra`, in the
/// order the cells must be given. Empty for flows and connections.
pub fn tx_columns(kind: Kind) -> &'static [ColSpec] {
    if kind.is_tx() {
        let all = columns(kind);
        &all[TX_COMMON..all.len() - OWNER_COLS]
    } else {
        &[]
    }
}

/// The time column a kind is partitioned and pruned by.
pub fn time_column(kind: Kind) -> &'static str {
    match kind {
        Kind::Flows => "bucket",
        _ => "ts",
    }
}

pub(crate) fn col_index(kind: Kind, name: &str) -> Option<usize> {
    columns(kind).iter().position(|c| c.name == name)
}

/// How a kind's files are written: its file columns, zstd pages at
/// `zstd_level` (1..=22), rows in file order.
pub(crate) fn file_format(kind: Kind, zstd_level: i32, row_group_rows: usize) -> Result<Format, StoreError> {
    if !(1..=22).contains(&zstd_level) {
        return Err(StoreError::Invalid(format!("zstd level: {zstd_level} is not in 1..=22")));
    }
    Ok(Format { kind, cols: file_columns(kind), zstd: Some(zstd_level), row_group_rows: row_group_rows.max(1), sorted: true })
}

/// The format of the live records' in-memory files (`crate::live`): the
/// store's encodings, no compression (they are decoded at once), rows in
/// arrival order (so not declared sorted).
pub(crate) fn live_format(kind: Kind, row_group_rows: usize) -> Format {
    Format { kind, cols: file_columns(kind), zstd: None, row_group_rows: row_group_rows.max(1), sorted: false }
}
