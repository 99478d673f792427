//! Every place a protocol's columns reach has the columns its declaration
//! (`wirelog_record::columns`, beside the protocol's transaction type) gives,
//! by name and type, not by count: the log's `#fields`/`#types`, the store's
//! schema, the query fields, the API's `/api/schema` and ClickHouse's table.
//! Two swapped columns of one type would pass a count; here their names and
//! types are checked one by one, and a value written under one column is
//! read back under the same name (see `tx_values_land_under_their_names`).

use wirelog_clickhouse::Table;
use wirelog_query::{Field, Ty, Unit};
use wirelog_record::columns::{self, Card, Column, Item, Type};
use wirelog_record::Protocol;
use wirelog_sink::{LogFormat, TxLogWriter};
use wirelog_store::schema::{self, ColType};
use wirelog_store::Kind;

/// The log's fields and types between the common head (ts .. id.resp_p)
/// and tail (status .. first_byte_latency).
fn log_fields(p: Protocol, policies: &[&str]) -> Vec<(String, String)> {
    let mut w = TxLogWriter::with_policies(Vec::new(), LogFormat::Tsv, p, policies);
    w.finish().unwrap();
    let text = String::from_utf8(std::mem::take(w.get_mut())).unwrap();
    let line = |tag: &str| -> Vec<String> {
        let l = text.lines().find(|l| l.starts_with(tag)).unwrap();
        l.split('\t').skip(1).map(String::from).collect()
    };
    let (names, types) = (line("#fields"), line("#types"));
    assert_eq!(names.len(), types.len());
    let all: Vec<(String, String)> = names.into_iter().zip(types).collect();
    assert_eq!(all[..6].iter().map(|f| f.0.as_str()).collect::<Vec<_>>(), ["ts", "uid", "id.orig_h", "id.orig_p", "id.resp_h", "id.resp_p"]);
    let tail = ["status", "request_bytes", "response_bytes", "latency", "first_byte_latency"];
    assert_eq!(all[all.len() - 5..].iter().map(|f| f.0.as_str()).collect::<Vec<_>>(), tail);
    all[6..all.len() - 5].to_vec()
}

/// Zeek's type name for what a column holds.
fn zeek_type(ty: Type) -> &'static str {
    match ty {
        Type::Text => "string",
        Type::Enum => "enum",
        Type::Count { .. } => "count",
        Type::Bool => "bool",
        Type::Interval => "interval",
        Type::TimeSecs => "time",
        Type::List(Item::Text) => "vector[string]",
        Type::List(Item::Count) => "vector[count]",
        Type::List(Item::Secs) => "vector[interval]",
    }
}

fn store_type(ty: Type) -> ColType {
    match ty {
        Type::Text | Type::Enum | Type::List(_) => ColType::Str,
        Type::Count { bits: 16, .. } => ColType::U16,
        Type::Count { .. } | Type::TimeSecs => ColType::U64,
        Type::Bool => ColType::Bool,
        Type::Interval => ColType::DurUs,
    }
}

/// A column's query type: a count stored wider than its values declare
/// (`fits`) is queried at its values' width.
fn query_type(c: &columns::Column) -> Ty {
    match c.ty {
        Type::Text | Type::Enum | Type::List(_) => Ty::Str,
        Type::Count { bits, unit } => Ty::UInt {
            bits: c.fits_bits.unwrap_or(bits),
            unit: match unit {
                columns::Unit::Plain => Unit::Plain,
                columns::Unit::Bytes => Unit::Bytes,
                columns::Unit::Count => Unit::Count,
            },
        },
        Type::TimeSecs => Ty::UInt { bits: 64, unit: Unit::Plain },
        Type::Bool => Ty::Bool,
        Type::Interval => Ty::Duration,
    }
}

fn api_type(c: &columns::Column) -> &'static str {
    match query_type(c) {
        Ty::UInt { unit: Unit::Bytes, .. } => "bytes",
        Ty::UInt { unit: Unit::Count, .. } => "count",
        Ty::UInt { .. } => "uint",
        Ty::Str => "string",
        Ty::Bool => "bool",
        Ty::Duration => "duration",
        t => panic!("{t:?}"),
    }
}

fn clickhouse_type(c: &Column) -> &'static str {
    match (c.ty, c.store) {
        (Type::Text | Type::Enum | Type::List(_), Some(Card::Low)) => "LowCardinality(String)",
        (Type::Text | Type::Enum | Type::List(_), _) => "String",
        (Type::Count { bits: 16, .. }, _) => "Nullable(UInt16)",
        (Type::Count { .. } | Type::TimeSecs, _) => "Nullable(UInt64)",
        (Type::Bool, _) => "Bool",
        (Type::Interval, _) => "Nullable(Int64)",
    }
}

/// The kind's own columns in a list that starts with the 13 common
/// transaction columns (the last the sample weight) and ends with the 12
/// owner columns.
fn own<T: Clone>(all: &[T]) -> Vec<T> {
    all[schema::TX_COMMON..all.len() - schema::OWNER_COLS].to_vec()
}

#[test]
fn every_place_has_the_declared_columns() {
    let api = wirelog_serve::schema_json();
    for p in Protocol::ALL {
        let decl = columns::of(p);
        let kind = Kind::tx(p);

        // The log: every logged column, in the declaration's order, under
        // its log name, with Zeek's type; a Zeek policy's columns only with
        // that policy turned on (--zeek-policy).
        let field = |c: &Column| Some((c.log?.to_string(), zeek_type(c.ty).to_string()));
        let want: Vec<(String, String)> = decl.columns.iter().filter(|c| c.policy.is_none()).filter_map(field).collect();
        assert_eq!(log_fields(p, &[]), want, "{p:?}: log");
        let every: Vec<&str> = columns::ZEEK_POLICIES.iter().map(|(n, _)| *n).collect();
        let want: Vec<(String, String)> = decl.columns.iter().filter_map(field).collect();
        assert_eq!(log_fields(p, &every), want, "{p:?}: log with every Zeek policy");

        // The store, in its order.
        let stored = decl.stored();
        let want: Vec<(&str, ColType, bool)> = stored.iter().map(|c| (c.name, store_type(c.ty), c.ty != Type::Bool)).collect();
        let got: Vec<(&str, ColType, bool)> =
            schema::tx_columns(kind).iter().map(|c| (c.name, c.col_type(), c.is_optional())).collect();
        assert_eq!(got, want, "{p:?}: store");

        // The query fields: names, aliases, types.
        let fields: Vec<Field> = Field::all(kind).collect();
        let got: Vec<(&str, Ty, Vec<&str>)> = own(&fields).iter().map(|f| (f.name(), f.ty(), f.aliases().to_vec())).collect();
        let want: Vec<(&str, Ty, Vec<&str>)> = stored.iter().map(|c| (c.name, query_type(c), c.aliases.to_vec())).collect();
        assert_eq!(got, want, "{p:?}: query");

        // The API's schema.
        let k = api["kinds"].as_array().unwrap().iter().find(|k| k["kind"] == p.name()).unwrap();
        assert_eq!(k["protocol"], true);
        let cols = k["columns"].as_array().unwrap();
        let got: Vec<(String, String, String)> = own(cols)
            .iter()
            .map(|c| (c["name"].as_str().unwrap().into(), c["type"].as_str().unwrap().into(), c["doc"].as_str().unwrap().into()))
            .collect();
        let want: Vec<(String, String, String)> =
            stored.iter().map(|c| (c.name.into(), api_type(c).into(), c.doc.into())).collect();
        assert_eq!(got, want, "{p:?}: api");

        // ClickHouse: the probe's identity, the store's columns but `iface`
        // (here the identity's), the owners.
        let ch: Vec<(&str, &str)> = Table::Store(kind).columns().map(|(n, t)| (n, t.sql())).collect();
        let start = ch.iter().position(|(n, _)| *n == "sample_weight").unwrap() + 1;
        let got = &ch[start..start + stored.len()];
        let want: Vec<(&str, &str)> = stored.iter().map(|c| (c.name, clickhouse_type(c))).collect();
        assert_eq!(got, &want[..], "{p:?}: clickhouse");
        assert_eq!(ch[start + stored.len()].0, "orig_pid", "{p:?}: clickhouse");
    }
}

/// The one column every transaction kind has that is declared with the
/// columns, `sample_weight` (`columns::SAMPLE_WEIGHT`), ends the common head
/// of every place, under its name and with its type: the store (optional,
/// so files from before it read as unset), the query fields, the API's
/// schema (with its doc), ClickHouse (after `first_byte_latency`, where
/// `clickhouse init` adds it), and the log's last field when asked.
#[test]
fn the_sample_weight_is_declared_once_and_everywhere() {
    let w = &columns::SAMPLE_WEIGHT;
    let api = wirelog_serve::schema_json();
    for p in Protocol::ALL {
        let kind = Kind::tx(p);
        let at = schema::TX_COMMON - 1;
        let s = &schema::columns(kind)[at];
        assert_eq!((s.name, s.col_type(), s.is_optional()), (w.name, store_type(w.ty), true), "{p:?}: store");
        let f = Field::all(kind).nth(at).unwrap();
        assert_eq!((f.name(), f.ty()), (w.name, query_type(w)), "{p:?}: query");
        let k = api["kinds"].as_array().unwrap().iter().find(|k| k["kind"] == p.name()).unwrap();
        let c = &k["columns"].as_array().unwrap()[at];
        assert_eq!((c["name"].as_str(), c["doc"].as_str()), (Some(w.name), Some(w.doc)), "{p:?}: api");
        let ch: Vec<(&str, &str)> = Table::Store(kind).columns().map(|(n, t)| (n, t.sql())).collect();
        let i = ch.iter().position(|(n, _)| *n == "first_byte_latency").unwrap() + 1;
        assert_eq!(ch[i], (w.name, clickhouse_type(w)), "{p:?}: clickhouse");
        let mut log = TxLogWriter::new(Vec::new(), LogFormat::Tsv, p).with_weights(true);
        log.finish().unwrap();
        let text = String::from_utf8(std::mem::take(log.get_mut())).unwrap();
        let field = |tag: &str| text.lines().find(|l| l.starts_with(tag)).unwrap().rsplit('\t').next().unwrap().to_string();
        assert_eq!((field("#fields"), field("#types")), (w.name.to_string(), zeek_type(w.ty).to_string()), "{p:?}: log");
    }
}
