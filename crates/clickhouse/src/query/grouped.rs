//! The statement that groups in ClickHouse: one row per (interval, `--by`
//! values) with the sums the engine keeps and, for connections and
//! transactions, the duration (latency) histogram as runs of
//! (count, smallest, largest) per bucket of `wirelog_query::hist`.
//!
//! The engine merges these rows as if it had seen the records
//! ([`wirelog_query::Partial`]): the same sums and the same histogram
//! entries give the same answer, percentiles included, so nothing about
//! percentiles is approximated differently here than in the local store.

use std::fmt::Write;

use wirelog_query::{Agg, Order, QuerySpec, SortKey};
use wirelog_store::Kind;

use super::{conditions, where_clause};
use crate::client::Server;
use crate::schema::{ChType, Table};

/// The grouped statement and the shape of its rows.
pub(super) struct Grouped {
    pub sql: String,
    /// The key columns, named as the engine's batches name them.
    pub keys: Vec<(&'static str, ChType)>,
    /// The rows end with the histogram runs.
    pub hist: bool,
    /// ClickHouse ranked the groups and sent only the top N; each row then
    /// ends with the whole answer's group count, record count, five sums
    /// and largest weight.
    pub top: bool,
}

/// The sort order as SQL over the grouped row (`wl_t0`..`wl_t4`: the sums,
/// `wl_k*`: the keys in `--by` order), exactly the engine's: the sort key,
/// then every `--by` field ascending, unset values first (a field sorted
/// descending puts them last, as its reversed comparison does). Addresses
/// (IPv6 compares by bytes, big-endian), text (bytes), numbers and booleans
/// order alike in both. `None` for what only the engine ranks (percentiles,
/// the mean, time series).
fn order_sql(spec: &QuerySpec, keys: &[(&'static str, ChType)]) -> Option<String> {
    let desc = spec.sort.1 == Order::Desc;
    let dir = if desc { "DESC" } else { "ASC" };
    let key_of = |name: &str| keys.iter().position(|(n, _)| *n == name).map(|i| format!("wl_k{i}"));
    let first = match spec.sort.0 {
        SortKey::Agg(a) => {
            let v = match a {
                Agg::Bytes => "wl_t0 + wl_t2",
                Agg::BytesOut => "wl_t0",
                Agg::PktsOut | Agg::Errors => "wl_t1",
                Agg::BytesIn => "wl_t2",
                Agg::PktsIn => "wl_t3",
                Agg::Pkts => "wl_t1 + wl_t3",
                Agg::Conns => "wl_t4",
                Agg::P50 | Agg::P95 | Agg::P99 | Agg::Avg => return None,
            };
            format!("{v} {dir}")
        }
        SortKey::Field(f) => format!("{} {dir} NULLS {}", key_of(f.name())?, if desc { "LAST" } else { "FIRST" }),
        SortKey::Time => return None,
    };
    let mut parts = vec![first];
    for f in &spec.by {
        parts.push(format!("{} ASC NULLS FIRST", key_of(f.name())?));
    }
    Some(parts.join(", "))
}

/// Per kind, what the engine adds up for each record, as SQL over one row
/// (`wirelog_query`'s value columns: bytes out, packets out (errors for
/// transactions), bytes in, packets in (latency ns for transactions),
/// connections); unset values count 0, as in the engine.
fn sums(kind: Kind) -> [&'static str; 5] {
    // Transactions: each weighted by what it stands for (`weight`).
    match kind {
        Kind::Flows => ["`bytes_out`", "`pkts_out`", "`bytes_in`", "`pkts_in`", "`conns`"],
        Kind::Conns => ["ifNull(`orig_bytes`, 0)", "`orig_pkts`", "ifNull(`resp_bytes`, 0)", "`resp_pkts`", "1"],
        // Certificates: every slot is the handshake count.
        Kind::X509 => ["`handshakes`"; 5],
        _ => [
            "ifNull(`request_bytes`, 0) * ifNull(`sample_weight`, 1)",
            "(`status` = 'error') * ifNull(`sample_weight`, 1)",
            "ifNull(`response_bytes`, 0) * ifNull(`sample_weight`, 1)",
            "toUInt64(greatest(ifNull(`latency`, 0), 0)) * 1000 * ifNull(`sample_weight`, 1)",
            "ifNull(`sample_weight`, 1)",
        ],
    }
}

/// How many records a row stands for, as the engine weighs it
/// (`wirelog_query`'s weight column: transactions' `sample_weight`, unset
/// counting 1; 1 for the other kinds).
fn weight(kind: Kind) -> &'static str {
    if kind.is_tx() {
        "ifNull(`sample_weight`, 1)"
    } else {
        "1"
    }
}

/// The column of the percentiles (µs in ClickHouse).
fn hist_column(kind: Kind) -> Option<&'static str> {
    match kind {
        Kind::Flows | Kind::X509 => None,
        Kind::Conns => Some("duration"),
        _ => Some("latency"),
    }
}

/// `wirelog_query::hist::bucket` of a µs column as SQL: 16 one-µs buckets,
/// then 16 per power of two. ClickHouse has no count-leading-zeros, so the
/// exponent is log2's, corrected by one either way where the float is off
/// next to a power of two. -1 for an unset value.
fn bucket_sql(col: &str) -> String {
    format!(
        "WITH toUInt64(greatest(ifNull(`{col}`, 0), 0)) AS wl_u, toUInt8(floor(log2(wl_u))) AS wl_e0, \
         wl_e0 - (bitShiftLeft(toUInt64(1), wl_e0) > wl_u) + (wl_e0 < 63 AND bitShiftLeft(toUInt64(1), wl_e0 + 1) <= wl_u) AS wl_e \
         SELECT if(`{col}` IS NULL, -1, toInt32(if(wl_u < 16, wl_u, 16 + (wl_e - 4) * 16 + bitAnd(bitShiftRight(wl_u, wl_e - 4), 15)))) AS wl_hb"
    )
}

/// The grouped statement for `spec`; `None` when the interval is not whole
/// microseconds (ClickHouse's times are), and the records must come one by one.
pub(super) fn grouped_sql(server: &Server, spec: &QuerySpec, probes: &[String]) -> Option<Grouped> {
    let kind = spec.kind;
    let table = Table::Store(kind);
    let time = table.time_column();
    let mut keys: Vec<(&'static str, ChType)> = Vec::new();
    let mut exprs: Vec<String> = Vec::new();
    for f in &spec.by {
        let c = table.columns().find(|(n, _)| *n == f.name())?;
        if !keys.contains(&c) {
            keys.push(c);
            exprs.push(format!("`{}`", c.0));
        }
    }
    if let Some(every) = spec.every_ns {
        if every <= 0 || every % 1000 != 0 {
            return None;
        }
        // Grouping by the time itself already splits the intervals (and the
        // engine reads one time column for both).
        if !keys.iter().any(|(n, _)| *n == time) {
            // The interval start as the engine floors it (from the epoch,
            // downwards for times before it).
            let us = every / 1000;
            keys.push((time, ChType::Time));
            exprs.push(format!(
                "toUnixTimestamp64Micro(`{time}`) - positiveModulo(toUnixTimestamp64Micro(`{time}`), {us})"
            ));
        }
    }
    let hist_col = hist_column(kind).filter(|_| spec.percentiles);
    let aliases: Vec<String> = (0..keys.len()).map(|i| format!("wl_k{i}")).collect();
    let mut inner_select: Vec<String> = exprs.iter().zip(&aliases).map(|(e, a)| format!("{e} AS {a}")).collect();
    inner_select.push("count() AS wl_n".into());
    for (i, s) in sums(kind).iter().enumerate() {
        inner_select.push(format!("toUInt64(sum({s})) AS wl_s{i}"));
    }
    // The weighted count (the histogram's) and the largest weight (an
    // answer with one above 1 is an estimate).
    let w = weight(kind);
    inner_select.push(format!("toUInt64(sum({w})) AS wl_wn, toUInt64(max({w})) AS wl_mw"));
    let mut inner_keys = aliases.clone();
    let mut with = String::new();
    if let Some(d) = hist_col {
        let b = bucket_sql(d);
        let (w, sel) = b.split_once(" SELECT ").unwrap();
        with = format!("{w} ");
        inner_select.push(sel.to_string());
        inner_select.push(format!("min(`{d}`) AS wl_lo, max(`{d}`) AS wl_hi"));
        inner_keys.push("wl_hb".into());
    }
    let mut inner = format!("{with}SELECT {} FROM {}", inner_select.join(", "), server.table(table));
    inner.push_str(&where_clause(&conditions(table, spec, probes)));
    if !inner_keys.is_empty() {
        let _ = write!(inner, " GROUP BY {}", inner_keys.join(", "));
    }
    let mut outer: Vec<String> = aliases.clone();
    outer.push("toUInt64(sum(wl_n)) AS wl_r".into());
    outer.extend((0..5).map(|i| format!("toUInt64(sum(wl_s{i})) AS wl_t{i}")));
    outer.push("toUInt64(max(wl_mw)) AS wl_m".into());
    if hist_col.is_some() {
        outer.push(
            "groupArrayIf(tuple(toUInt64(wl_wn), toInt64(ifNull(wl_lo, 0)), toInt64(ifNull(wl_hi, 0))), wl_hb >= 0)".into(),
        );
    }
    // Top-N by a sum or a field: ranked here, so only N groups cross the
    // network; the totals and the group count of the whole answer ride
    // along (window functions over the groups, before the LIMIT).
    let top = match (spec.top, spec.every_ns, aliases.is_empty()) {
        (Some(n), None, false) => order_sql(spec, &keys).map(|o| (n, o)),
        _ => None,
    };
    if top.is_some() {
        outer.push("count() OVER ()".into());
        outer.push("toUInt64(sum(sum(wl_n)) OVER ())".into());
        outer.extend((0..5).map(|i| format!("toUInt64(sum(sum(wl_s{i})) OVER ())")));
        outer.push("toUInt64(max(max(wl_mw)) OVER ())".into());
    }
    let mut sql = format!("SELECT {} FROM ({inner})", outer.join(", "));
    if !aliases.is_empty() {
        let _ = write!(sql, " GROUP BY {}", aliases.join(", "));
    }
    if let Some((n, order)) = &top {
        let _ = write!(sql, " ORDER BY {order} LIMIT {n}");
    }
    Some(Grouped { sql, keys, hist: hist_col.is_some(), top: top.is_some() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sql(kind: Kind, by: &str, sort: Option<&str>, top: Option<usize>, every: Option<&str>) -> Grouped {
        let server = super::super::test_server();
        let spec = wirelog_query::parse_query(kind, None, Some(by), sort, top, every).unwrap();
        grouped_sql(&server, &spec, &[]).unwrap()
    }

    /// Top-N is ranked in SQL only where SQL's order is the engine's: by a
    /// sum or a field, no time series; a percentile or the mean is ranked
    /// by the engine over every group.
    #[test]
    fn top_n_in_sql_only_by_sums_and_fields() {
        let g = sql(Kind::Conns, "service,vlan", Some("bytes"), Some(3), None);
        assert!(g.top && g.hist);
        assert!(g.sql.ends_with("ORDER BY wl_t0 + wl_t2 DESC, wl_k0 ASC NULLS FIRST, wl_k1 ASC NULLS FIRST LIMIT 3"), "{}", g.sql);
        let g = sql(Kind::Conns, "service,vlan", Some("vlan desc"), Some(2), None);
        assert!(g.sql.ends_with("ORDER BY wl_k1 DESC NULLS LAST, wl_k0 ASC NULLS FIRST, wl_k1 ASC NULLS FIRST LIMIT 2"), "{}", g.sql);
        for (sort, top, every) in [(Some("p95"), Some(3), None), (Some("latency_avg"), Some(3), None), (None, Some(3), Some("5m")), (None, Some(0), None)] {
            let g = sql(Kind::Http, "host", sort, top, every);
            assert!(!g.top && !g.sql.contains("LIMIT"), "{sort:?} {top:?} {every:?}: {}", g.sql);
        }
        // Flows: no histogram; the interval is floored from the epoch.
        let g = sql(Kind::Flows, "dport", None, Some(0), Some("1m"));
        assert!(!g.hist && g.sql.contains("positiveModulo(toUnixTimestamp64Micro(`bucket`), 60000000)"), "{}", g.sql);
        assert_eq!(g.keys, [("server_port", ChType::U16), ("bucket", ChType::Time)]);
    }
}
