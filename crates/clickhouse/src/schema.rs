//! The ClickHouse tables: the store's columns (same names, so one query
//! language reads both) plus the probe's identity, and the DDL `wirelog
//! clickhouse init` runs, versioned.

use std::fmt::Write;
use std::time::Duration;

use wirelog_store::schema::ColType;
use wirelog_store::{ColSpec, Kind};

/// The schema version this wirelog writes; `init` records it in
/// `wirelog_schema` and upgrades older databases: tables a version added
/// are created, columns it added are added (in their place), and
/// [`MIGRATIONS`] holds whatever else a version needs.
///
/// - 1: flows, conns, one table per transaction kind, health.
/// - 2: the owner columns (`orig_pid` ... `resp_pod`, `capture --processes`)
///   at the end of every transaction table.
/// - 3: the `x509` table (certificates TLS handshakes showed), a
///   `SummingMergeTree` on `handshakes`.
/// - 4: the `loss` table (the completeness record, per minute and source).
/// - 5: the `source` column (`packets` or `tls-library`: see
///   `wirelog_record::columns::EVERY_TX`) of every transaction table, after
///   the kind's own columns; rows inserted before read it as `''`.
/// - 6: `sample_weight` after `first_byte_latency` in every transaction
///   table (`capture --cpu-budget`'s 1-in-N parsing; rows from before it
///   read as unset, which queries count as 1); `parsed` at the end of
///   `loss` (connections parsed per protocol, beside `sampled`).
/// - 7: `parse_stopped` at the end of `loss` (parsed connections whose
///   parsing `capture --cpu-budget` step 1b stopped part way).
/// - 8: `beyond_snaplen_bytes` at the end of `loss` (bytes past the snap
///   length: not loss, said apart from it).
/// - 9: `no_memory` at the end of `loss` (connections not parsed because
///   the stream memory had no room for a parser's state).
pub const SCHEMA_VERSION: u32 = 9;

/// Statements beyond added tables and columns that take a database from
/// version `n - 1` to `n` (index `n - 2`; version 1 is created whole).
pub const MIGRATIONS: &[&[&str]] = &[
    &[],
    &[],
    &[],
    // 5: the `source` column is added by `init` in its place; nothing else.
    &[],
    // 6: `sample_weight` and loss's `parsed` are added by `init` in their places.
    &[],
    // 7: loss's `parse_stopped` is added by `init` in its place.
    &[],
    // 8: loss's `beyond_snaplen_bytes`, likewise.
    &[],
    // 9: loss's `no_memory`, likewise.
    &[],
];

/// A column's ClickHouse type, which also decides its RowBinary encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChType {
    /// `DateTime64(6, 'UTC')`: the store keeps microseconds too.
    Time,
    /// `Nullable(Int64)`, microseconds (the store's duration unit).
    Dur,
    U8,
    U16,
    U32,
    U64,
    /// `Nullable(UInt64)`.
    OptU64,
    /// `Nullable(UInt16)`.
    OptU16,
    /// `IPv6` (IPv4 as v4-mapped, like the store).
    Ip,
    /// `String`: random or free text (uids, URIs, queries).
    Str,
    /// `LowCardinality(String)`: names, methods, states, codes.
    Lc,
    Bool,
}

impl ChType {
    pub fn sql(self) -> &'static str {
        match self {
            ChType::Time => "DateTime64(6, 'UTC')",
            ChType::Dur => "Nullable(Int64)",
            ChType::U8 => "UInt8",
            ChType::U16 => "UInt16",
            ChType::U32 => "UInt32",
            ChType::U64 => "UInt64",
            ChType::OptU64 => "Nullable(UInt64)",
            ChType::OptU16 => "Nullable(UInt16)",
            ChType::Ip => "IPv6",
            ChType::Str => "String",
            ChType::Lc => "LowCardinality(String)",
            ChType::Bool => "Bool",
        }
    }

    /// Codecs by what the values look like: times close together within a
    /// part compress as deltas, everything through ZSTD; LowCardinality is
    /// already a dictionary.
    fn codec(self) -> &'static str {
        match self {
            ChType::Time => " CODEC(Delta, ZSTD(1))",
            ChType::Lc | ChType::Bool => "",
            ChType::U8 | ChType::U16 | ChType::U32 | ChType::U64 => " CODEC(T64, ZSTD(1))",
            _ => " CODEC(ZSTD(1))",
        }
    }
}

use ChType::*;

/// Columns as (name, type), in insert order.
type Cols = &'static [(&'static str, ChType)];

/// Identity of the row's probe, first in every table so one table holds a fleet.
const IDENTITY: &[(&str, ChType)] = &[("probe", Lc), ("iface", Lc)];

/// The ClickHouse type of a store column: the store's schema
/// (`wirelog_store::schema`) is the one list of columns, so a column added
/// there reaches ClickHouse (and `clickhouse init` adds it to an existing
/// table) by itself. Text the store keeps as a dictionary is
/// `LowCardinality`, unless the column's declaration says it takes too many
/// values (query fingerprints, DNS names: a day's part passes the ~10k
/// distinct values where ClickHouse advises against it); other text plain
/// `String`.
pub fn ch_type(c: &ColSpec) -> ChType {
    match (c.col_type(), c.is_optional()) {
        (ColType::TimeUs, _) => Time,
        (ColType::DurUs, _) => Dur,
        (ColType::U8, _) => U8,
        (ColType::U16, false) => U16,
        (ColType::U16, true) => OptU16,
        (ColType::U32, _) => U32,
        (ColType::U64, false) => U64,
        (ColType::U64, true) => OptU64,
        (ColType::Ip, _) => Ip,
        (ColType::Bool, _) => Bool,
        (ColType::Str, _) if c.is_dictionary() && !c.has_many_values() => Lc,
        (ColType::Str, _) => Str,
    }
}

/// The probe's own health, one row a minute while capturing: what a fleet
/// view sums (CPU) and averages (RSS) over a group of probes.
const HEALTH: &[(&str, ChType)] = &[
    ("ts", Time),
    ("interval_s", U32),
    ("cpu_s", Dur),
    ("rss_bytes", U64),
    ("packets", U64),
    ("bytes", U64),
    ("kernel_drops", U64),
    ("probe_drops", U64),
    ("evictions", U64),
    ("parse_errors", U64),
    ("sink_dropped_rows", U64),
    ("spool_bytes", U64),
];

/// A table the sink writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Table {
    Store(Kind),
    Health,
}

impl Table {
    /// A table per store kind ([`Kind::ALL`] order), then health.
    pub const ALL: [Table; Kind::ALL.len() + 1] = {
        let mut all = [Table::Health; Kind::ALL.len() + 1];
        let mut i = 0;
        while i < Kind::ALL.len() {
            all[i] = Table::Store(Kind::ALL[i]);
            i += 1;
        }
        all
    };

    pub fn name(self) -> &'static str {
        match self {
            Table::Store(k) => k.as_str(),
            Table::Health => "health",
        }
    }

    pub fn from_name(name: &str) -> Option<Table> {
        Table::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Every column in insert order: the probe's identity, then the store
    /// kind's columns (its `iface` is the identity's) or the health row's.
    pub fn columns(self) -> impl Iterator<Item = (&'static str, ChType)> {
        let (store, health): (&'static [ColSpec], Cols) = match self {
            Table::Store(k) => (wirelog_store::schema::columns(k), &[]),
            Table::Health => (&[], HEALTH),
        };
        IDENTITY
            .iter()
            .copied()
            .chain(store.iter().filter(|c| c.name != "iface").map(move |c| (c.name, ch_type(c))))
            .chain(health.iter().copied())
    }

    pub fn time_column(self) -> &'static str {
        match self {
            Table::Store(Kind::Flows) => "bucket",
            _ => "ts",
        }
    }

    /// The sort key: the probe first (a fleet's tables are read per probe or
    /// per group), then what queries filter on most: the server (and port)
    /// for flows, connections and transactions, then time.
    fn order_by(self) -> &'static str {
        match self {
            Table::Store(Kind::Flows) => "probe, server, server_port, bucket",
            Table::Store(Kind::Conns) => "probe, resp_h, resp_p, ts",
            // What a certificate row is about, per hour: the rows the
            // SummingMergeTree folds into one.
            Table::Store(Kind::X509) => "probe, fingerprint, role, host_cert, toStartOfHour(ts)",
            // Read per probe and source over time.
            Table::Store(Kind::Loss) => "probe, source, ts",
            Table::Store(_) => "probe, server, server_port, ts",
            Table::Health => "probe, ts",
        }
    }

    /// Certificates are counted, not listed: rows of one certificate, role
    /// and hour (one per flush of a probe's batch) are summed into one as
    /// ClickHouse merges (their other columns are the certificate's, the
    /// same in each; `ts` is one of theirs). Until then queries sum
    /// (`wirelog query` always does).
    fn summed(self) -> Option<&'static str> {
        matches!(self, Table::Store(Kind::X509)).then_some("handshakes")
    }

    /// The MergeTree family of the table's engine.
    fn family(self) -> &'static str {
        match self.summed() {
            Some(_) => "SummingMergeTree",
            None => "MergeTree",
        }
    }

    /// Which shard of a Distributed table a row goes to: one certificate's
    /// rows to one shard, so they fold there; the rest spread at random.
    fn sharding_key(self) -> &'static str {
        match self.summed() {
            Some(_) => "cityHash64(fingerprint)",
            None => "rand()",
        }
    }
}

/// How `init` lays the tables out.
#[derive(Debug, Clone)]
pub struct Layout {
    pub database: String,
    /// `--cluster NAME`: ReplicatedMergeTree tables `<name>_local` on every
    /// node and Distributed tables `<name>` over them.
    pub cluster: Option<String>,
    /// Rows older than this are deleted by ClickHouse (TTL); `None` keeps all.
    pub retain: Option<Duration>,
    /// Retried inserts the server remembers per table to drop as duplicates
    /// (by their `insert_deduplication_token`).
    pub dedup_window: u32,
}

/// Quotes an identifier for ClickHouse SQL.
pub fn ident(name: &str) -> String {
    format!("`{}`", name.replace('\\', "\\\\").replace('`', "\\`"))
}

/// Quotes a string literal for ClickHouse SQL.
pub fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

impl Layout {
    fn on_cluster(&self) -> String {
        self.cluster.as_deref().map(|c| format!(" ON CLUSTER {}", ident(c))).unwrap_or_default()
    }

    /// The table inserts go to and queries read: the Distributed one on a cluster.
    pub fn table(&self, t: Table) -> String {
        format!("{}.{}", ident(&self.database), ident(t.name()))
    }

    fn local_name(&self, name: &str) -> String {
        if self.cluster.is_some() {
            format!("{name}_local")
        } else {
            name.to_string()
        }
    }

    fn engine(&self, family: &str, summed: Option<&str>, local: &str) -> String {
        let sum = summed.map(|c| format!("({c})"));
        match &self.cluster {
            // `{shard}`/`{replica}` are the nodes' macros; the path names
            // database and table so two wirelog databases never share one.
            Some(_) => format!(
                "Replicated{family}('/clickhouse/tables/{{shard}}/{}/{}', '{{replica}}'{})",
                self.database,
                local,
                summed.map(|c| format!(", {c}")).unwrap_or_default()
            ),
            None => format!("{family}{}", sum.unwrap_or_default()),
        }
    }

    /// `CREATE DATABASE` and every table of this schema version, `IF NOT EXISTS`.
    pub fn create_statements(&self) -> Vec<String> {
        let db = ident(&self.database);
        let on = self.on_cluster();
        let mut out = vec![format!("CREATE DATABASE IF NOT EXISTS {db}{on}")];
        for t in Table::ALL {
            let local = self.local_name(t.name());
            let mut sql = format!("CREATE TABLE IF NOT EXISTS {db}.{}{on}\n(\n", ident(&local));
            for (i, (name, ty)) in t.columns().enumerate() {
                let sep = if i == 0 { "" } else { ",\n" };
                let _ = write!(sql, "{sep}    {} {}{}", ident(name), ty.sql(), ty.codec());
            }
            let time = t.time_column();
            let _ = write!(
                sql,
                "\n)\nENGINE = {}\nPARTITION BY toDate({time})\nORDER BY ({})\n",
                self.engine(t.family(), t.summed(), &local),
                t.order_by()
            );
            if let Some(r) = self.retain {
                let _ = writeln!(sql, "TTL toDateTime({time}) + INTERVAL {} SECOND DELETE", r.as_secs());
            }
            // Retries carry the batch's token; without a window a
            // non-replicated MergeTree would not remember any.
            let _ = write!(
                sql,
                "SETTINGS non_replicated_deduplication_window = {w}, replicated_deduplication_window = {w}",
                w = self.dedup_window
            );
            out.push(sql);
            if let Some(c) = &self.cluster {
                out.push(format!(
                    "CREATE TABLE IF NOT EXISTS {db}.{}{on} AS {db}.{}\nENGINE = Distributed({}, {}, {}, {})",
                    ident(t.name()),
                    ident(&local),
                    ident(c),
                    ident(&self.database),
                    ident(&local),
                    t.sharding_key()
                ));
            }
        }
        let version = self.local_name("wirelog_schema");
        out.push(format!(
            "CREATE TABLE IF NOT EXISTS {db}.{}{on}\n(\n    version UInt32,\n    applied DateTime DEFAULT now(),\n    wirelog String\n)\nENGINE = {}\nORDER BY version",
            ident(&version),
            self.engine("MergeTree", None, &version)
        ));
        if let Some(c) = &self.cluster {
            out.push(format!(
                "CREATE TABLE IF NOT EXISTS {db}.wirelog_schema{on} AS {db}.{}\nENGINE = Distributed({}, {}, {})",
                ident(&version),
                ident(c),
                ident(&self.database),
                ident(&version)
            ));
        }
        out
    }

    /// Records that the database is at `version`.
    pub fn record_version(&self, version: u32) -> String {
        format!(
            "INSERT INTO {}.wirelog_schema (version, wirelog) VALUES ({version}, {})",
            ident(&self.database),
            literal(env!("CARGO_PKG_VERSION"))
        )
    }

    /// The TTL statement for `--retain` on an existing table.
    pub fn ttl_statements(&self) -> Vec<String> {
        let db = ident(&self.database);
        let on = self.on_cluster();
        Table::ALL
            .iter()
            .map(|t| {
                let local = ident(&self.local_name(t.name()));
                match self.retain {
                    Some(r) => format!(
                        "ALTER TABLE {db}.{local}{on} MODIFY TTL toDateTime({}) + INTERVAL {} SECOND DELETE",
                        t.time_column(),
                        r.as_secs()
                    ),
                    None => format!("ALTER TABLE {db}.{local}{on} REMOVE TTL"),
                }
            })
            .collect()
    }

    /// The engine family a table must have in this layout (checked by `init`
    /// against an existing database: one laid out without `--cluster` cannot
    /// be made replicated in place).
    pub fn expected_engine(&self, t: Table) -> (String, String) {
        match &self.cluster {
            Some(_) => (format!("{}_local", t.name()), format!("Replicated{}", t.family())),
            None => (t.name().to_string(), t.family().to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_tables_have_the_store_columns_in_its_order() {
        for k in Kind::ALL {
            let ours: Vec<&str> = Table::Store(k).columns().skip(2).map(|(n, _)| n).collect();
            // Flows carry their interface in the store too; here it is the identity's.
            let store: Vec<&str> =
                wirelog_store::schema::columns(k).iter().map(|c| c.name).filter(|n| *n != "iface").collect();
            assert_eq!(ours, store, "{}", k.as_str());
        }
    }

    /// The types derived from the store's schema are the ones a version 1
    /// database has (so `init` upgrades it instead of refusing), and the
    /// owner columns end every transaction table.
    #[test]
    fn derived_types() {
        let ty = |k: Kind, c: &str| {
            Table::Store(k).columns().find(|(n, _)| *n == c).map(|(_, t)| t.sql()).unwrap_or("missing")
        };
        for (k, c, want) in [
            (Kind::Flows, "bucket", "DateTime64(6, 'UTC')"),
            (Kind::Flows, "server_port", "UInt16"),
            (Kind::Flows, "conns", "UInt32"),
            (Kind::Conns, "uid", "String"),
            (Kind::Conns, "service", "LowCardinality(String)"),
            (Kind::Conns, "duration", "Nullable(Int64)"),
            (Kind::Conns, "vlan", "Nullable(UInt16)"),
            (Kind::Conns, "orig_pid", "Nullable(UInt64)"),
            (Kind::Conns, "community_id", "String"),
            (Kind::Http, "status_code", "Nullable(UInt16)"),
            (Kind::Http, "uri", "String"),
            (Kind::Mysql, "fingerprint", "String"),
            (Kind::Pgsql, "fingerprint", "String"),
            (Kind::Dns, "query", "String"),
            (Kind::Dns, "aa", "Bool"),
            (Kind::Tls, "subject", "LowCardinality(String)"),
            (Kind::Tls, "cert_chain_fps", "String"),
            (Kind::Tls, "resp_proc", "LowCardinality(String)"),
        ] {
            assert_eq!(ty(k, c), want, "{}.{c}", k.as_str());
        }
        for k in Kind::TX {
            let names: Vec<&str> = Table::Store(k).columns().map(|(n, _)| n).collect();
            assert_eq!(names[names.len() - 12..][0], "orig_pid", "{}", k.as_str());
            assert_eq!(*names.last().unwrap(), "resp_pod", "{}", k.as_str());
        }
        assert_eq!(Table::ALL.len(), Kind::ALL.len() + 1);
        assert_eq!(ty(Kind::X509, "handshakes"), "UInt64");
        assert_eq!(ty(Kind::X509, "fingerprint"), "String");
        assert_eq!(ty(Kind::X509, "not_valid_after"), "Nullable(UInt64)");
    }

    #[test]
    fn cluster_layout_is_replicated_local_tables_and_distributed_ones() {
        let l = Layout {
            database: "wl".into(),
            cluster: Some("c1".into()),
            retain: Some(Duration::from_secs(86400)),
            dedup_window: 100,
        };
        let sql = l.create_statements().join(";\n");
        assert!(sql.contains("CREATE DATABASE IF NOT EXISTS `wl` ON CLUSTER `c1`"));
        assert!(sql.contains("CREATE TABLE IF NOT EXISTS `wl`.`flows_local` ON CLUSTER `c1`"));
        assert!(sql.contains("ReplicatedMergeTree('/clickhouse/tables/{shard}/wl/flows_local', '{replica}')"));
        assert!(sql.contains("ENGINE = Distributed(`c1`, `wl`, `flows_local`, rand())"));
        assert!(sql.contains("ReplicatedSummingMergeTree('/clickhouse/tables/{shard}/wl/x509_local', '{replica}', handshakes)"));
        assert!(sql.contains("ENGINE = Distributed(`c1`, `wl`, `x509_local`, cityHash64(fingerprint))"));
        assert!(sql.contains("TTL toDateTime(bucket) + INTERVAL 86400 SECOND DELETE"));
        assert!(!sql.contains("ENGINE = MergeTree"));
    }
}
