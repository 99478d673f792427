//! `wirelog query --clickhouse`: the query language over the ClickHouse
//! tables, answering exactly as over the local store.
//!
//! The filter (`--where`), the time range and `--probe` are translated to a
//! ClickHouse `WHERE` and only the columns the query reads are selected, so
//! the server scans, prunes (partitions by day, the primary key) and filters;
//! the rows that match come back as RowBinary and go through the same engine
//! as the store's batches (grouping, top-N with the rest, percentiles, time
//! series). The answers are therefore identical, percentiles included.
//!
//! Flows, whose aggregates are all sums, are also grouped by the server
//! (`GROUP BY` the `--by` fields and the `--every` interval, `sum()` of the
//! counters), so one row per group crosses the network. Connections and
//! transactions (counts per row, duration and latency percentiles) come row
//! by row, with only the columns the query needs.

use std::fmt::Write;

use wirelog_query::value::Net;
use wirelog_query::{CmpOp, Engine, Expr, Operand, QuerySpec, Test};
use wirelog_store::{Batch, Column, Kind};

use crate::client::{runtime, ChError, Server};
use crate::schema::{literal, ChType, Table};

/// Rows handed to the engine at a time.
const BATCH_ROWS: usize = 65_536;

fn ip_literal(a: &[u8; 16]) -> String {
    let mut s = String::from("toIPv6('");
    for i in 0..8 {
        if i > 0 {
            s.push(':');
        }
        let _ = write!(s, "{:x}", u16::from_be_bytes([a[2 * i], a[2 * i + 1]]));
    }
    s.push_str("')");
    s
}

fn net_sql(col: &str, n: &Net) -> String {
    let mut lo = n.addr;
    let mut hi = n.addr;
    for (i, (l, h)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
        let bits = (n.prefix as usize).saturating_sub(i * 8).min(8);
        let mask = if bits == 0 { 0u8 } else { 0xffu8 << (8 - bits) };
        *l &= mask;
        *h |= !mask;
    }
    format!("({col} BETWEEN {} AND {})", ip_literal(&lo), ip_literal(&hi))
}

fn op(o: CmpOp) -> &'static str {
    o.as_str()
}

/// A column's value as the engine sees it: times and durations in ns.
fn operand_sql(table: Table, o: Operand) -> String {
    let col = |name: &str| {
        let ty = table.columns().find(|(n, _)| *n == name).map(|(_, t)| t);
        match ty {
            Some(ChType::Time) => format!("(toUnixTimestamp64Micro(`{name}`) * 1000)"),
            Some(ChType::Dur) => format!("(`{name}` * 1000)"),
            _ => format!("`{name}`"),
        }
    };
    match o {
        Operand::Field(f) => col(f.name()),
        Operand::Sum(a, b) => format!("(ifNull({}, 0) + ifNull({}, 0))", col(a.name()), col(b.name())),
    }
}

fn list<T: ToString>(v: &[T]) -> String {
    v.iter().map(T::to_string).collect::<Vec<_>>().join(", ")
}

/// The filter as SQL. Each condition is `coalesce(..., false)`: an unset
/// value passes no comparison, and `not` of it then holds, as in the engine.
pub fn where_sql(table: Table, e: &Expr) -> String {
    match e {
        Expr::Pred(p) => {
            let x = operand_sql(table, p.operand);
            let c = match &p.test {
                Test::UInt(o, v) => format!("{x} {} {v}", op(*o)),
                Test::UIntIn(vs) => format!("{x} IN ({})", list(vs)),
                Test::Int(o, v) => format!("{x} {} {v}", op(*o)),
                Test::IntIn(vs) => format!("{x} IN ({})", list(vs)),
                Test::Net(nets) => {
                    let parts: Vec<String> = nets.iter().map(|n| net_sql(&x, n)).collect();
                    format!("({})", parts.join(" OR "))
                }
                Test::StrIn(ss) => {
                    let parts: Vec<String> = ss.iter().map(|s| literal(s)).collect();
                    format!("{x} IN ({})", parts.join(", "))
                }
                Test::StrMatch { pat, start, end } => match (start, end) {
                    (true, true) => format!("{x} = {}", literal(pat)),
                    (true, false) => format!("startsWith({x}, {})", literal(pat)),
                    (false, true) => format!("endsWith({x}, {})", literal(pat)),
                    (false, false) => format!("position({x}, {}) > 0", literal(pat)),
                },
                Test::Bool(b) => format!("{x} = {b}"),
            };
            format!("coalesce({c}, false)")
        }
        Expr::Not(e) => format!("NOT {}", where_sql(table, e)),
        Expr::And(es) | Expr::Or(es) => {
            let sep = if matches!(e, Expr::And(_)) { " AND " } else { " OR " };
            let parts: Vec<String> = es.iter().map(|x| where_sql(table, x)).collect();
            format!("({})", parts.join(sep))
        }
    }
}

/// Flows' aggregates are sums of their columns (connections, packets and
/// bytes per direction), so ClickHouse can add them up per group: the
/// engine then adds up partial sums, which gives the same totals. Rows come
/// back one per group (and interval), not one per flow record.
const FLOW_SUMS: [&str; 5] = ["conns", "pkts_out", "pkts_in", "bytes_out", "bytes_in"];

/// The grouped statement for a flows query; `None` when the rows must come
/// one by one (other kinds: counts and percentiles need each row).
pub fn flows_sql(server: &Server, spec: &QuerySpec, probes: &[String]) -> Option<(String, Vec<(&'static str, ChType)>)> {
    if spec.kind != Kind::Flows || spec.every_ns.is_some_and(|e| e % 1000 != 0 || e <= 0) {
        return None;
    }
    let table = Table::Store(Kind::Flows);
    let mut cols: Vec<(&'static str, ChType)> = Vec::new();
    let mut exprs: Vec<String> = Vec::new();
    if let Some(every) = spec.every_ns {
        // The interval start, as the engine floors it (from the epoch).
        let us = every / 1000;
        cols.push(("bucket", ChType::Time));
        exprs.push(format!(
            "fromUnixTimestamp64Micro(intDiv(toUnixTimestamp64Micro(`bucket`), {us}) * {us}, 'UTC') AS `bucket`"
        ));
    }
    for f in &spec.by {
        let c = table.columns().find(|(n, _)| *n == f.name())?;
        if FLOW_SUMS.contains(&c.0) {
            return None;
        }
        if !cols.contains(&c) {
            cols.push(c);
            exprs.push(format!("`{}`", c.0));
        }
    }
    let keys: Vec<String> = cols.iter().map(|(n, _)| format!("`{n}`")).collect();
    for s in FLOW_SUMS {
        cols.push((s, ChType::U64));
        exprs.push(format!("sum(`{s}`)"));
    }
    let mut sql = format!("SELECT {} FROM {}", exprs.join(", "), server.table(table));
    let conds = conditions(table, spec, probes);
    if !conds.is_empty() {
        let _ = write!(sql, " WHERE {}", conds.join(" AND "));
    }
    if !keys.is_empty() {
        let _ = write!(sql, " GROUP BY {}", keys.join(", "));
    }
    Some((sql, cols))
}

/// The statement fetching what `spec` reads, with `probes` (empty: all).
pub fn select_sql(server: &Server, spec: &QuerySpec, probes: &[String]) -> (String, Vec<(&'static str, ChType)>) {
    let table = Table::Store(spec.kind);
    let mut cols: Vec<(&'static str, ChType)> = Vec::new();
    for name in spec.needed_columns() {
        if let Some(c) = table.columns().find(|(n, _)| *n == name) {
            if !cols.contains(&c) {
                cols.push(c);
            }
        }
    }
    if cols.is_empty() {
        // A count of rows still needs one column to count.
        cols.push(table.columns().nth(2).unwrap());
    }
    let conds = conditions(table, spec, probes);
    let names: Vec<String> = cols.iter().map(|(n, _)| format!("`{n}`")).collect();
    let mut sql = format!("SELECT {} FROM {}", names.join(", "), server.table(table));
    if !conds.is_empty() {
        let _ = write!(sql, " WHERE {}", conds.join(" AND "));
    }
    (sql, cols)
}

/// Probes, time range and filter as SQL conditions.
fn conditions(table: Table, spec: &QuerySpec, probes: &[String]) -> Vec<String> {
    let mut conds = Vec::new();
    if !probes.is_empty() {
        let p: Vec<String> = probes.iter().map(|p| literal(p)).collect();
        conds.push(format!("probe IN ({})", p.join(", ")));
    }
    if let Some((from, to)) = spec.time_range {
        let t = format!("(toUnixTimestamp64Micro(`{}`) * 1000)", table.time_column());
        if from != i64::MIN {
            conds.push(format!("{t} >= {from}"));
        }
        if to != i64::MAX {
            conds.push(format!("{t} < {to}"));
        }
    }
    if let Some(f) = &spec.filter {
        conds.push(where_sql(table, f));
    }
    conds
}

/// Flows' `conns` column is 32 bits in the engine's batches: a group's sum
/// beyond that is handed over as several rows of the same group.
fn conns_to_u32(columns: &mut [(&'static str, Column)]) {
    let Some(i) = columns.iter().position(|(n, _)| *n == "conns") else {
        return;
    };
    let Column::U64(sums) = std::mem::replace(&mut columns[i].1, Column::U32(Vec::new())) else {
        return;
    };
    let mut out: Vec<u32> = Vec::with_capacity(sums.len());
    let mut extra: Vec<(usize, u32)> = Vec::new();
    for (r, mut c) in sums.into_iter().enumerate() {
        out.push(c.min(u32::MAX as u64) as u32);
        c -= c.min(u32::MAX as u64);
        while c > 0 {
            let part = c.min(u32::MAX as u64);
            extra.push((r, part as u32));
            c -= part;
        }
    }
    columns[i].1 = Column::U32(out);
    for (r, part) in extra {
        for (j, (_, col)) in columns.iter_mut().enumerate() {
            match col {
                Column::U32(v) if j == i => v.push(part),
                Column::U64(v) => v.push(0),
                Column::U8(v) => v.push(v[r]),
                Column::U16(v) => v.push(v[r]),
                Column::U32(v) => v.push(v[r]),
                Column::I64(v) => v.push(v[r]),
                Column::Ip(v) => v.push(v[r]),
                Column::Str(v) => v.push(v[r].clone()),
                Column::Bool(v) => v.push(v[r]),
                Column::OptU64(v) => v.push(v[r]),
                Column::OptI64(v) => v.push(v[r]),
            }
        }
    }
}

fn empty(ty: ChType) -> Column {
    match ty {
        ChType::Time => Column::I64(Vec::new()),
        ChType::Dur => Column::OptI64(Vec::new()),
        ChType::U8 => Column::U8(Vec::new()),
        ChType::U16 => Column::U16(Vec::new()),
        ChType::U32 => Column::U32(Vec::new()),
        ChType::U64 => Column::U64(Vec::new()),
        ChType::OptU64 | ChType::OptU16 => Column::OptU64(Vec::new()),
        ChType::Ip => Column::Ip(Vec::new()),
        ChType::Str | ChType::Lc => Column::Str(Vec::new()),
        ChType::Bool => Column::Bool(Vec::new()),
    }
}

/// Length of one RowBinary value of `ty` at the start of `b`; `None` when
/// `b` ends first.
fn value_len(ty: ChType, b: &[u8]) -> Option<usize> {
    let fixed = |n: usize| (b.len() >= n).then_some(n);
    match ty {
        ChType::Time | ChType::U64 => fixed(8),
        ChType::U8 | ChType::Bool => fixed(1),
        ChType::U16 => fixed(2),
        ChType::U32 => fixed(4),
        ChType::Ip => fixed(16),
        ChType::Dur | ChType::OptU64 => match b.first()? {
            0 => fixed(9),
            _ => Some(1),
        },
        ChType::OptU16 => match b.first()? {
            0 => fixed(3),
            _ => Some(1),
        },
        ChType::Str | ChType::Lc => {
            let (mut n, mut shift, mut i) = (0u64, 0, 0);
            loop {
                let byte = *b.get(i)?;
                n |= ((byte & 0x7f) as u64) << shift;
                i += 1;
                if byte & 0x80 == 0 {
                    break;
                }
                shift += 7;
                if shift > 63 {
                    return None;
                }
            }
            let end = i.checked_add(n as usize)?;
            (b.len() >= end).then_some(end)
        }
    }
}

fn le<const N: usize>(b: &[u8]) -> [u8; N] {
    b[..N].try_into().unwrap()
}

/// Appends one value (whose length `value_len` checked) to its column.
fn push(col: &mut Column, ty: ChType, b: &[u8]) {
    match (col, ty) {
        (Column::I64(v), ChType::Time) => v.push(i64::from_le_bytes(le(b)) * 1000),
        (Column::OptI64(v), _) => v.push((b[0] == 0).then(|| i64::from_le_bytes(le(&b[1..])) * 1000)),
        (Column::U8(v), _) => v.push(b[0]),
        (Column::U16(v), _) => v.push(u16::from_le_bytes(le(b))),
        (Column::U32(v), _) => v.push(u32::from_le_bytes(le(b))),
        (Column::U64(v), _) => v.push(u64::from_le_bytes(le(b))),
        (Column::OptU64(v), ChType::OptU16) => v.push((b[0] == 0).then(|| u16::from_le_bytes(le(&b[1..])) as u64)),
        (Column::OptU64(v), _) => v.push((b[0] == 0).then(|| u64::from_le_bytes(le(&b[1..])))),
        (Column::Ip(v), _) => v.push(le(b)),
        (Column::Str(v), _) => {
            let start = b.iter().position(|x| x & 0x80 == 0).map_or(b.len(), |i| i + 1);
            v.push(String::from_utf8_lossy(&b[start..]).into_owned());
        }
        (Column::Bool(v), _) => v.push(b[0] != 0),
        (c, ty) => unreachable!("column {c:?} for {ty:?}"),
    }
}

/// Runs `spec` against ClickHouse, feeding the engine; returns the engine.
pub fn run(server: &Server, spec: QuerySpec, probes: &[String]) -> Result<Engine, ChError> {
    let kind: Kind = spec.kind;
    if !Table::ALL.contains(&Table::Store(kind)) {
        return Err(ChError(format!("{} is not sent to ClickHouse (ask the local store)", kind.as_str())));
    }
    let mut spec = spec;
    let (sql, cols, grouped) = match flows_sql(server, &spec, probes) {
        Some((sql, cols)) => {
            // The server applied the filter and the time range to every
            // row before adding them up; the engine only merges groups.
            spec.filter = None;
            spec.time_range = None;
            (sql, cols, true)
        }
        None => {
            let (sql, cols) = select_sql(server, &spec, probes);
            (sql, cols, false)
        }
    };
    let mut engine = Engine::new(spec).map_err(|e| ChError(e.to_string()))?;
    let rt = runtime().map_err(|e| ChError(format!("cannot start the ClickHouse client: {e}")))?;
    let client = server.client().with_compression(clickhouse::Compression::None);
    rt.block_on(async {
        let mut cursor = client.query(&sql).fetch_bytes("RowBinary").map_err(|e| ChError(e.to_string()))?;
        let mut buf: Vec<u8> = Vec::new();
        let mut columns: Vec<(&'static str, Column)> = cols.iter().map(|(n, t)| (*n, empty(*t))).collect();
        let mut rows = 0;
        let mut flush = |columns: &mut Vec<(&'static str, Column)>, rows: &mut usize| -> Result<(), ChError> {
            let mut full = std::mem::replace(columns, cols.iter().map(|(n, t)| (*n, empty(*t))).collect());
            if grouped {
                conns_to_u32(&mut full);
            }
            engine.consume(&Batch { kind, columns: full }).map_err(|e| ChError(e.to_string()))?;
            *rows = 0;
            Ok(())
        };
        loop {
            let chunk = tokio::time::timeout(server.timeout, cursor.next())
                .await
                .map_err(|_| ChError(format!("no data from ClickHouse within {:?}", server.timeout)))?
                .map_err(|e| ChError(e.to_string()))?;
            let done = chunk.is_none();
            if let Some(c) = chunk {
                buf.extend_from_slice(&c);
            }
            let mut at = 0;
            'rows: loop {
                // A row is taken only when all of it has arrived.
                let mut ends = Vec::with_capacity(cols.len());
                let mut p = at;
                for (_, ty) in &cols {
                    match value_len(*ty, &buf[p..]) {
                        Some(n) => {
                            ends.push((p, p + n));
                            p += n;
                        }
                        None => break 'rows,
                    }
                }
                for ((_, col), ((_, ty), (s, e))) in columns.iter_mut().zip(cols.iter().zip(ends)) {
                    push(col, *ty, &buf[s..e]);
                }
                at = p;
                rows += 1;
                if rows >= BATCH_ROWS {
                    flush(&mut columns, &mut rows)?;
                }
            }
            buf.drain(..at);
            if done {
                if !buf.is_empty() {
                    return Err(ChError(format!("ClickHouse's answer ends inside a row ({} bytes left)", buf.len())));
                }
                break;
            }
        }
        if rows > 0 {
            flush(&mut columns, &mut rows)?;
        }
        Ok::<(), ChError>(())
    })?;
    Ok(engine)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_translate_with_unset_values_and_blocks() {
        let spec = wirelog_query::parse_query(
            Kind::Conns,
            Some("orig_bytes != 5 and sip in 10.0.0.0/8 and history ~ '^Sh' and proto = tcp"),
            None,
            None,
            None,
            None,
        )
        .unwrap();
        let sql = where_sql(Table::Store(Kind::Conns), spec.filter.as_ref().unwrap());
        assert!(sql.contains("NOT coalesce(`orig_bytes` = 5, false)"), "{sql}");
        assert!(
            sql.contains("`orig_h` BETWEEN toIPv6('0:0:0:0:0:ffff:a00:0') AND toIPv6('0:0:0:0:0:ffff:aff:ffff')"),
            "{sql}"
        );
        assert!(sql.contains("startsWith(`history`, 'Sh')"), "{sql}");
    }
}

#[cfg(test)]
mod split_tests {
    use super::*;

    #[test]
    fn a_connection_sum_beyond_32_bits_becomes_several_rows_of_its_group() {
        let mut cols = vec![
            ("server_port", Column::U16(vec![443, 80])),
            ("conns", Column::U64(vec![u32::MAX as u64 * 2 + 5, 7])),
            ("bytes_out", Column::U64(vec![100, 200])),
        ];
        conns_to_u32(&mut cols);
        assert_eq!(cols[0].1, Column::U16(vec![443, 80, 443, 443]));
        assert_eq!(cols[1].1, Column::U32(vec![u32::MAX, 7, u32::MAX, 5]));
        assert_eq!(cols[2].1, Column::U64(vec![100, 200, 0, 0]));
    }
}
