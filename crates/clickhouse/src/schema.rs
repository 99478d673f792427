//! The ClickHouse tables: the store's columns (same names, so one query
//! language reads both) plus the probe's identity, and the DDL `wirelog
//! clickhouse init` runs, versioned.

use std::fmt::Write;
use std::time::Duration;

use wirelog_store::Kind;

/// The schema version this wirelog writes; `init` records it in
/// `wirelog_schema` and upgrades older databases with [`MIGRATIONS`].
pub const SCHEMA_VERSION: u32 = 1;

/// Statements that take a database from version `n - 1` to `n` (index
/// `n - 2`; version 1 is created whole). Empty while there is one version.
pub const MIGRATIONS: &[&[&str]] = &[];

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

const FLOWS: &[(&str, ChType)] = &[
    ("bucket", Time),
    ("client", Ip),
    ("server", Ip),
    ("server_port", U16),
    ("proto", U8),
    ("bytes_out", U64),
    ("pkts_out", U64),
    ("bytes_in", U64),
    ("pkts_in", U64),
    ("first", Time),
    ("last", Time),
    ("conns", U32),
];

const CONNS: &[(&str, ChType)] = &[
    ("ts", Time),
    ("uid", Str),
    ("orig_h", Ip),
    ("orig_p", U16),
    ("resp_h", Ip),
    ("resp_p", U16),
    ("proto", Lc),
    ("service", Lc),
    ("duration", Dur),
    ("orig_bytes", OptU64),
    ("resp_bytes", OptU64),
    ("conn_state", Lc),
    ("local_orig", Bool),
    ("local_resp", Bool),
    ("missed_bytes", U64),
    ("history", Lc),
    ("orig_pkts", U64),
    ("orig_ip_bytes", U64),
    ("resp_pkts", U64),
    ("resp_ip_bytes", U64),
    ("ip_proto", U8),
    ("community_id", Str),
    ("vlan", OptU16),
    ("inner_vlan", OptU16),
    ("empty_tcp_skipped", Bool),
    ("orig_pid", OptU64),
    ("orig_proc", Lc),
    ("orig_exe", Lc),
    ("orig_user", Lc),
    ("orig_container", Lc),
    ("orig_pod", Lc),
    ("resp_pid", OptU64),
    ("resp_proc", Lc),
    ("resp_exe", Lc),
    ("resp_user", Lc),
    ("resp_container", Lc),
    ("resp_pod", Lc),
];

/// The columns every transaction table starts with (the store's `TxRow` fields).
const TX_COMMON: &[(&str, ChType)] = &[
    ("ts", Time),
    ("uid", Str),
    ("client", Ip),
    ("client_port", U16),
    ("server", Ip),
    ("server_port", U16),
    ("transport", U8),
    ("status", Lc),
    ("request_bytes", OptU64),
    ("response_bytes", OptU64),
    ("latency", Dur),
    ("first_byte_latency", Dur),
];

const HTTP: &[(&str, ChType)] = &[
    ("method", Lc),
    ("host", Lc),
    ("uri", Str),
    ("version", Lc),
    ("user_agent", Lc),
    ("status_code", OptU16),
    ("reason", Lc),
    ("request_body_len", OptU64),
    ("response_body_len", OptU64),
];

const MYSQL: &[(&str, ChType)] = &[
    ("command", Lc),
    ("query", Str),
    ("fingerprint", Str),
    ("database", Lc),
    ("user", Lc),
    ("affected_rows", OptU64),
    ("insert_id", OptU64),
    ("num_rows", OptU64),
    ("num_fields", OptU64),
    ("error_code", OptU64),
    ("sql_state", Lc),
    ("error_message", Str),
];

const PGSQL: &[(&str, ChType)] = &[
    ("command", Lc),
    ("query", Str),
    ("fingerprint", Str),
    ("database", Lc),
    ("user", Lc),
    ("command_tag", Lc),
    ("rows", OptU64),
    ("num_fields", OptU64),
    ("error_severity", Lc),
    ("error_code", Lc),
    ("error_message", Str),
];

const REDIS: &[(&str, ChType)] = &[("command", Lc), ("args", Str), ("reply_type", Lc), ("reply", Str)];

const DNS: &[(&str, ChType)] = &[
    ("query", Str),
    ("qtype", OptU64),
    ("qtype_name", Lc),
    ("qclass", OptU64),
    ("rcode", OptU64),
    ("rcode_name", Lc),
    ("trans_id", OptU64),
    ("answers", Str),
    ("ttls", Str),
    ("aa", Bool),
    ("tc", Bool),
    ("rd", Bool),
    ("ra", Bool),
];

const TLS: &[(&str, ChType)] = &[
    ("version", Lc),
    ("cipher", Lc),
    ("curve", Lc),
    ("server_name", Lc),
    ("resumed", Bool),
    ("last_alert", Lc),
    ("next_protocol", Lc),
    ("established", Bool),
    ("ssl_history", Lc),
    ("cert_chain_fps", Str),
    ("client_cert_chain_fps", Str),
    ("subject", Lc),
    ("issuer", Lc),
    ("not_valid_after", OptU64),
    ("ja4", Lc),
    ("ja3", Lc),
    ("ja3s", Lc),
    ("client_versions", Lc),
    ("client_alpn", Lc),
];

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
    pub const ALL: [Table; 9] = [
        Table::Store(Kind::Flows),
        Table::Store(Kind::Conns),
        Table::Store(Kind::Http),
        Table::Store(Kind::Mysql),
        Table::Store(Kind::Pgsql),
        Table::Store(Kind::Redis),
        Table::Store(Kind::Dns),
        Table::Store(Kind::Tls),
        Table::Health,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Table::Store(k) => k.as_str(),
            Table::Health => "health",
        }
    }

    pub fn from_name(name: &str) -> Option<Table> {
        Table::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The table's own columns after `probe` and `iface`.
    fn own(self) -> (Cols, Cols) {
        match self {
            Table::Store(Kind::Flows) => (FLOWS, &[]),
            Table::Store(Kind::Conns) => (CONNS, &[]),
            Table::Store(Kind::Http) => (TX_COMMON, HTTP),
            Table::Store(Kind::Mysql) => (TX_COMMON, MYSQL),
            Table::Store(Kind::Pgsql) => (TX_COMMON, PGSQL),
            Table::Store(Kind::Redis) => (TX_COMMON, REDIS),
            Table::Store(Kind::Dns) => (TX_COMMON, DNS),
            Table::Store(Kind::Tls) => (TX_COMMON, TLS),
            Table::Health => (HEALTH, &[]),
        }
    }

    /// Every column in insert order.
    pub fn columns(self) -> impl Iterator<Item = (&'static str, ChType)> {
        let (a, b) = self.own();
        IDENTITY.iter().chain(a).chain(b).copied()
    }

    /// The kind's own transaction columns (after the common ones), whose
    /// values come from the store's `TxRow::extra` cells in this order.
    pub fn tx_extra(self) -> &'static [(&'static str, ChType)] {
        self.own().1
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
            Table::Store(_) => "probe, server, server_port, ts",
            Table::Health => "probe, ts",
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

    fn engine(&self, local: &str) -> String {
        match &self.cluster {
            // `{shard}`/`{replica}` are the nodes' macros; the path names
            // database and table so two wirelog databases never share one.
            Some(_) => format!(
                "ReplicatedMergeTree('/clickhouse/tables/{{shard}}/{}/{}', '{{replica}}')",
                self.database, local
            ),
            None => "MergeTree".to_string(),
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
                self.engine(&local),
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
                    "CREATE TABLE IF NOT EXISTS {db}.{}{on} AS {db}.{}\nENGINE = Distributed({}, {}, {}, rand())",
                    ident(t.name()),
                    ident(&local),
                    ident(c),
                    ident(&self.database),
                    ident(&local)
                ));
            }
        }
        let version = self.local_name("wirelog_schema");
        out.push(format!(
            "CREATE TABLE IF NOT EXISTS {db}.{}{on}\n(\n    version UInt32,\n    applied DateTime DEFAULT now(),\n    wirelog String\n)\nENGINE = {}\nORDER BY version",
            ident(&version),
            self.engine(&version)
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
    pub fn expected_engine(&self, t: Table) -> (String, &'static str) {
        match &self.cluster {
            Some(_) => (format!("{}_local", t.name()), "ReplicatedMergeTree"),
            None => (t.name().to_string(), "MergeTree"),
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
        assert!(sql.contains("TTL toDateTime(bucket) + INTERVAL 86400 SECOND DELETE"));
        assert!(!sql.contains("ENGINE = MergeTree"));
    }
}
