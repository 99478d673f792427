//! `wirelog query --clickhouse` (and `serve --clickhouse`): the query
//! language over the ClickHouse tables, answering exactly as over the local
//! store.
//!
//! The filter (`--where`), the time range and `--probe` become a ClickHouse
//! `WHERE`, and the server groups (`GROUP BY` the `--by` fields and the
//! `--every` interval): one row per group crosses the network, with the
//! group's sums and, for connections and transactions, its duration
//! (latency) histogram in the engine's buckets ([`grouped`]). The engine
//! then merges those groups ([`wirelog_query::Partial`]) and does what is
//! left: the percentiles from the histogram, the order of a time series,
//! and top-N when it is by a percentile or the mean. Top-N by a sum or a
//! field is ranked by ClickHouse in the engine's order, and only N groups
//! cross, with the whole answer's totals and group count. The same sums and the same histogram give the same
//! answer, byte for byte, percentiles included.
//!
//! Only an `--every` that is not whole microseconds (ClickHouse keeps
//! times in µs) brings the matching records themselves, with just the
//! columns the query reads, through the same engine.

use std::fmt::Write;

use wirelog_query::value::Net;
use wirelog_query::{CmpOp, Engine, Expr, Operand, Partial, QuerySpec, ResultTable, Test};
use wirelog_store::{Batch, Column, Kind};

use crate::client::{runtime, ChError, Server};
use crate::schema::{literal, ChType, Table};

mod grouped;
mod loss;
mod rowbinary;

pub use loss::{loss, loss_sql};

use rowbinary::{empty, le, push, runs, stream, Cell};

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

/// The statement fetching the records `spec` reads, only the columns it
/// needs, with `probes` (empty: all).
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
    let sql = select_from(server, table, &cols, &conditions(table, spec, probes));
    (sql, cols)
}

/// `SELECT` of `cols` from `table`, with the conditions `conds` (all must hold).
fn select_from(server: &Server, table: Table, cols: &[(&'static str, ChType)], conds: &[String]) -> String {
    let names: Vec<String> = cols.iter().map(|(n, _)| format!("`{n}`")).collect();
    format!("SELECT {} FROM {}{}", names.join(", "), server.table(table), where_clause(conds))
}

/// ` WHERE` and `conds` joined by `AND`; nothing when there are none.
fn where_clause(conds: &[String]) -> String {
    if conds.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conds.join(" AND "))
    }
}

/// `probe IN (...)` of `probes`; `None` for all probes (empty).
fn probe_condition(probes: &[String]) -> Option<String> {
    if probes.is_empty() {
        return None;
    }
    let p: Vec<String> = probes.iter().map(|p| literal(p)).collect();
    Some(format!("probe IN ({})", p.join(", ")))
}

/// Probes and a time range (ns, the end excluded; `i64::MIN`/`MAX` for an
/// open side) as SQL conditions over `table`'s time column: what every
/// statement that reads records has, whatever else it filters.
fn scope_conditions(table: Table, probes: &[String], time_range: Option<(i64, i64)>) -> Vec<String> {
    let mut conds: Vec<String> = probe_condition(probes).into_iter().collect();
    if let Some((from, to)) = time_range {
        let t = format!("(toUnixTimestamp64Micro(`{}`) * 1000)", table.time_column());
        if from != i64::MIN {
            conds.push(format!("{t} >= {from}"));
        }
        if to != i64::MAX {
            conds.push(format!("{t} < {to}"));
        }
    }
    conds
}

/// Probes, time range and filter as SQL conditions.
fn conditions(table: Table, spec: &QuerySpec, probes: &[String]) -> Vec<String> {
    let mut conds = scope_conditions(table, probes, spec.time_range);
    if let Some(f) = &spec.filter {
        conds.push(where_sql(table, f));
    }
    conds
}

/// The rows of `sql`, whose columns are `cols`, as the engine's columns in
/// batches of [`BATCH_ROWS`] rows, each handed to `batch` with whether more
/// rows may follow it.
async fn stream_batches(
    server: &Server,
    client: &clickhouse::Client,
    sql: &str,
    cols: &[(&'static str, ChType)],
    mut batch: impl FnMut(Vec<(&'static str, Column)>, bool) -> Result<(), ChError>,
) -> Result<(), ChError> {
    let cells: Vec<Cell> = cols.iter().map(|&(_, t)| Cell::Col(t)).collect();
    let fresh = || cols.iter().map(|&(n, t)| (n, empty(t))).collect::<Vec<(&'static str, Column)>>();
    let mut columns = fresh();
    let mut rows = 0;
    stream(server, client, sql, &cells, |row| {
        for (i, ((_, col), &(_, ty))) in columns.iter_mut().zip(cols).enumerate() {
            push(col, ty, row.cell(i));
        }
        rows += 1;
        if rows >= BATCH_ROWS {
            batch(std::mem::replace(&mut columns, fresh()), true)?;
            rows = 0;
        }
        Ok(())
    })
    .await?;
    if rows > 0 {
        batch(columns, false)?;
    }
    Ok(())
}

/// Runs `spec` against ClickHouse, feeding the engine; returns its answer.
pub fn run(server: &Server, spec: QuerySpec, probes: &[String]) -> Result<ResultTable, ChError> {
    run_checked(server, spec, probes, &mut |_| Ok(()))
}

/// The whole answer's figures when ClickHouse sent only the top groups.
#[derive(Debug, Clone, Copy)]
struct Whole {
    groups: u64,
    records: u64,
    total: wirelog_query::Acc,
    /// Some record weighed more than 1.
    estimated: bool,
}

/// [`run`], with `check` called on the engine after each batch (a caller's
/// time or memory limit: its error stops the query).
pub fn run_checked(
    server: &Server,
    spec: QuerySpec,
    probes: &[String],
    check: &mut dyn FnMut(&Engine) -> Result<(), ChError>,
) -> Result<ResultTable, ChError> {
    if !Table::ALL.contains(&Table::Store(spec.kind)) {
        return Err(ChError(format!("{} is not sent to ClickHouse (ask the local store)", spec.kind.as_str())));
    }
    let rt = runtime().map_err(|e| ChError(format!("cannot start the ClickHouse client: {e}")))?;
    let client = server.client().with_compression(clickhouse::Compression::None);
    match grouped::grouped_sql(server, &spec, probes) {
        Some(g) => {
            // The server applied the filter and the time range to every
            // record before grouping; the engine only merges groups.
            let mut spec = spec;
            spec.filter = None;
            spec.time_range = None;
            let engine = Engine::new(spec).map_err(|e| ChError(e.to_string()))?;
            let (engine, whole) = rt.block_on(fetch_groups(server, &client, g, engine, check))?;
            let mut t = engine.finish();
            if let Some(w) = whole {
                t.groups = w.groups as usize;
                t.total = w.total;
                t.rows_matched = w.records;
                t.rows_scanned = w.records;
                t.estimated |= w.estimated;
            }
            Ok(t)
        }
        None => {
            let engine = Engine::new(spec.clone()).map_err(|e| ChError(e.to_string()))?;
            rt.block_on(fetch_records(server, &client, &spec, probes, engine, check)).map(Engine::finish)
        }
    }
}

/// The groups ClickHouse formed, merged into the engine batch by batch.
async fn fetch_groups(
    server: &Server,
    client: &clickhouse::Client,
    g: grouped::Grouped,
    mut engine: Engine,
    check: &mut dyn FnMut(&Engine) -> Result<(), ChError>,
) -> Result<(Engine, Option<Whole>), ChError> {
    let kind = engine.spec().kind;
    let mut cells: Vec<Cell> = g.keys.iter().map(|&(_, t)| Cell::Col(t)).collect();
    let n_keys = cells.len();
    // Records, the five sums, the largest weight.
    cells.extend([Cell::U64; 7]);
    if g.hist {
        cells.push(Cell::Runs);
    }
    let at_whole = cells.len();
    if g.top {
        cells.extend([Cell::U64; 8]);
    }
    let mut whole: Option<Whole> = None;
    let fresh = || g.keys.iter().map(|&(n, t)| (n, empty(t))).collect::<Vec<(&'static str, Column)>>();
    let mut keys = fresh();
    let mut sums: Vec<(wirelog_query::Acc, u64)> = Vec::new();
    let mut hist: Vec<(u32, u64, i64, i64)> = Vec::new();
    let mut estimated = false;
    let mut flush = |keys: &mut Vec<(&'static str, Column)>,
                     sums: &mut Vec<(wirelog_query::Acc, u64)>,
                     hist: &mut Vec<(u32, u64, i64, i64)>,
                     estimated: bool,
                     engine: &mut Engine|
     -> Result<(), ChError> {
        let batch = Batch { kind, columns: std::mem::replace(keys, fresh()) };
        engine
            .consume_partial(&Partial { keys: &batch, sums, hist, estimated })
            .map_err(|e| ChError(e.to_string()))?;
        sums.clear();
        hist.clear();
        check(engine)
    };
    stream(server, client, &g.sql, &cells, |row| {
        let u = |i: usize| u64::from_le_bytes(le(row.cell(n_keys + i)));
        if g.top && whole.is_none() {
            let w = |i: usize| u64::from_le_bytes(le(row.cell(at_whole + i)));
            let total = wirelog_query::Acc { bytes_out: w(2), pkts_out: w(3), bytes_in: w(4), pkts_in: w(5), conns: w(6) };
            whole = Some(Whole { groups: w(0), records: w(1), total, estimated: w(7) > 1 });
        }
        let records = u(0);
        // A question without `--by` or `--every` is one aggregate, which
        // SQL answers with a row even when nothing matched.
        if records == 0 {
            return Ok(());
        }
        let r = sums.len() as u32;
        for (i, ((_, col), &(_, ty))) in keys.iter_mut().zip(&g.keys).enumerate() {
            push(col, ty, row.cell(i));
        }
        let acc = wirelog_query::Acc { bytes_out: u(1), pkts_out: u(2), bytes_in: u(3), pkts_in: u(4), conns: u(5) };
        sums.push((acc, records));
        estimated |= u(6) > 1;
        if g.hist {
            for (count, lo, hi) in runs(row.cell(n_keys + 7)) {
                let (lo, hi) = (lo.saturating_mul(1000), hi.saturating_mul(1000));
                if wirelog_query::hist::bucket(lo) != wirelog_query::hist::bucket(hi) {
                    return Err(ChError(format!(
                        "ClickHouse put {lo} ns and {hi} ns in one histogram bucket; the engine does not (report this)"
                    )));
                }
                hist.push((r, count, lo, hi));
            }
        }
        if sums.len() >= BATCH_ROWS {
            flush(&mut keys, &mut sums, &mut hist, estimated, &mut engine)?;
        }
        Ok(())
    })
    .await?;
    if !sums.is_empty() {
        flush(&mut keys, &mut sums, &mut hist, estimated, &mut engine)?;
    }
    Ok((engine, whole))
}

/// The matching records, with the columns the query reads, into the engine.
async fn fetch_records(
    server: &Server,
    client: &clickhouse::Client,
    spec: &QuerySpec,
    probes: &[String],
    mut engine: Engine,
    check: &mut dyn FnMut(&Engine) -> Result<(), ChError>,
) -> Result<Engine, ChError> {
    let (sql, cols) = select_sql(server, spec, probes);
    let kind = spec.kind;
    stream_batches(server, client, &sql, &cols, |columns, more| {
        engine.consume(&Batch { kind, columns }).map_err(|e| ChError(e.to_string()))?;
        if more {
            check(&engine)?;
        }
        Ok(())
    })
    .await?;
    Ok(engine)
}

/// What one kind's table holds: rows, first and last record time (ns),
/// and its active parts and their compressed bytes (the whole table: parts
/// are not per probe).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableExtent {
    pub kind: Kind,
    pub rows: u64,
    pub first_ns: Option<i64>,
    pub last_ns: Option<i64>,
    pub parts: u64,
    pub bytes: u64,
}

/// Every kind's [`TableExtent`], of `probes` (empty: all), in one statement.
pub fn extent(server: &Server, probes: &[String]) -> Result<Vec<TableExtent>, ChError> {
    let filter = where_clause(&probe_condition(probes).into_iter().collect::<Vec<_>>());
    let parts: Vec<String> = Kind::ALL
        .iter()
        .filter(|&&k| Table::ALL.contains(&Table::Store(k)))
        .map(|&k| {
            let t = Table::Store(k);
            let time = t.time_column();
            format!(
                "SELECT {}, count(), toUnixTimestamp64Micro(min(`{time}`)), toUnixTimestamp64Micro(max(`{time}`)), \
                 (SELECT count(), sum(data_compressed_bytes) FROM system.parts WHERE active AND database = {} AND table = {}) \
                 FROM {}{filter}",
                literal(k.as_str()),
                literal(&server.database),
                literal(t.name()),
                server.table(t),
            )
        })
        .collect();
    let text = crate::client::run_sql(server, &[parts.join(" UNION ALL ")])?;
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let bad = || ChError(format!("unexpected extent row from ClickHouse: {line:?}"));
        let kind = f.first().and_then(|k| Kind::from_name(k)).ok_or_else(bad)?;
        let num = |i: usize| f.get(i).and_then(|v| v.trim_matches(|c| c == '(' || c == ')').parse::<i64>().ok());
        let rows = num(1).ok_or_else(bad)? as u64;
        // The parts' tuple comes as "(N,B)".
        let (parts, bytes) = f
            .get(4)
            .and_then(|t| t.trim_matches(|c| c == '(' || c == ')').split_once(','))
            .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
            .unwrap_or((0, 0));
        let time = |i: usize| num(i).filter(|_| rows > 0).map(|us| us.saturating_mul(1000));
        out.push(TableExtent { kind, rows, first_ns: time(2), last_ns: time(3), parts, bytes });
    }
    out.sort_by_key(|e| Kind::ALL.iter().position(|k| *k == e.kind));
    Ok(out)
}

/// A server for the statements' tests (nothing connects to it).
#[cfg(test)]
fn test_server() -> Server {
    Server {
        url: "http://127.0.0.1:8123".into(),
        user: None,
        password: None,
        database: "w".into(),
        timeout: std::time::Duration::from_secs(1),
    }
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

    /// Records and the loss table are scoped alike: the same probe list and
    /// the same range over each table's time column, an open side left out.
    #[test]
    fn records_and_loss_rows_get_the_same_probes_and_range() {
        let server = test_server();
        let probes = ["a".to_string(), "it's".to_string()];
        let mut spec = wirelog_query::parse_query(Kind::Conns, None, None, None, None, None).unwrap();
        spec.time_range = Some((1_000, 5_000));
        let (sql, _) = select_sql(&server, &spec, &probes);
        assert!(
            sql.ends_with(" WHERE probe IN ('a', 'it\\'s') AND (toUnixTimestamp64Micro(`ts`) * 1000) >= 1000 AND (toUnixTimestamp64Micro(`ts`) * 1000) < 5000"),
            "{sql}"
        );
        let mut q = wirelog_query::loss::LossQuery::parse(None, None, None).unwrap();
        q.time_range = Some((i64::MIN, 5_000));
        let (sql, cols) = loss_sql(&server, &q, &probes);
        assert!(sql.starts_with("SELECT `"), "{sql}");
        assert!(!cols.is_empty());
        let time = Table::Store(Kind::Loss).time_column();
        assert!(
            sql.ends_with(&format!(" WHERE probe IN ('a', 'it\\'s') AND (toUnixTimestamp64Micro(`{time}`) * 1000) < 5000")),
            "{sql}"
        );
        // No probes, no range: no WHERE at all.
        q.time_range = None;
        assert!(!loss_sql(&server, &q, &[]).0.contains("WHERE"));
    }
}
