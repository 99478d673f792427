//! Output: an aligned table for people, CSV and JSON for programs, all
//! three with the same values in the same words.
//!
//! Columns, in order: `time` (time series only), the `--by` fields, then
//! `conns`, packets out/in/total, bytes out/in/total (for connections named as
//! Zeek does: `orig_pkts`, `resp_bytes`, ...), and for connections
//! `duration_p50_s`, `duration_p95_s`, `duration_p99_s`. Transactions have
//! `count`, `errors`, `request_bytes`, `response_bytes`, `bytes`,
//! `latency_p50_s`, `latency_p95_s`, `latency_p99_s` and `latency_avg_s`
//! instead. The table adds `%` (share of all matching bytes) after `bytes` and
//! a summary line at the end.
//!
//! One vocabulary in every format:
//! - counts and bytes are exact integers (bytes in bytes);
//! - durations and latencies are seconds with 6 decimals (Zeek's unit), in
//!   columns whose name ends in `_s` (a `--by` duration field keeps its name);
//! - `proto` is the protocol's name (`tcp`, `udp`, `icmp`, `ipv6-icmp`, ...; a
//!   number only when it has no name);
//! - times are RFC 3339 UTC, addresses in their usual form (v4-mapped as IPv4).
//!
//! Unset values are `-` in the table, empty in CSV, `null` in JSON. CSV is
//! RFC 4180 with a header row; JSON is one array, one object per row and per
//! line (`[`, rows separated by `,\n`, `]`), valid JSON and still greppable.

use std::io::{self, Write};
use std::str::FromStr;

use crate::engine::{ResultTable, Row};
use crate::field::{proto_name, Field, Ty, Unit};
use crate::key::KeyValue;
use crate::spec::Agg;
use crate::table::Acc;
use crate::time::format_rfc3339;
use crate::value::format_ip;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Csv,
    Json,
}

impl FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Format, String> {
        match s.to_ascii_lowercase().as_str() {
            "table" => Ok(Format::Table),
            "csv" => Ok(Format::Csv),
            "json" => Ok(Format::Json),
            _ => Err(format!("expected table, csv or json, found '{s}'")),
        }
    }
}

/// `table` when stdout is a terminal, else `csv`.
pub fn default_format(is_terminal: bool) -> Format {
    if is_terminal {
        Format::Table
    } else {
        Format::Csv
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Style {
    Human,
    Raw,
}

/// A cell: its text, and whether JSON writes it bare (numbers, booleans)
/// rather than as a string.
struct Cell {
    text: String,
    bare: bool,
    null: bool,
}

fn cell(text: String, bare: bool) -> Cell {
    Cell {
        text,
        bare,
        null: false,
    }
}

fn null(style: Style) -> Cell {
    Cell {
        text: if style == Style::Human {
            "-".into()
        } else {
            String::new()
        },
        bare: false,
        null: true,
    }
}

fn seconds(ns: i64) -> String {
    format!(
        "{}{}.{:06}",
        if ns < 0 { "-" } else { "" },
        ns.unsigned_abs() / 1_000_000_000,
        ns.unsigned_abs() % 1_000_000_000 / 1000
    )
}

fn key_cell(f: Field, v: &KeyValue, style: Style) -> Cell {
    match (v, f.ty()) {
        (KeyValue::Null, _) => null(style),
        (KeyValue::Ip(a), _) => cell(format_ip(a), false),
        (KeyValue::UInt(n), Ty::UInt { unit: Unit::Proto, .. }) => {
            cell(proto_name(*n as u8).map_or_else(|| n.to_string(), str::to_string), false)
        }
        (KeyValue::UInt(n), _) => cell(n.to_string(), true),
        (KeyValue::Int(t), Ty::Time) => cell(format_rfc3339(*t), false),
        (KeyValue::Int(d), _) => cell(seconds(*d), true),
        (KeyValue::Str(s), _) if style == Style::Human && s.is_empty() => null(style),
        (KeyValue::Str(s), _) => cell(s.clone(), false),
        (KeyValue::Bool(b), _) => cell(b.to_string(), true),
    }
}

const SUMS: [Agg; 7] = [
    Agg::Conns,
    Agg::PktsOut,
    Agg::PktsIn,
    Agg::Pkts,
    Agg::BytesOut,
    Agg::BytesIn,
    Agg::Bytes,
];
const TX_SUMS: [Agg; 5] = [
    Agg::Conns,
    Agg::Errors,
    Agg::BytesOut,
    Agg::BytesIn,
    Agg::Bytes,
];
const PCTS: [Agg; 3] = [Agg::P50, Agg::P95, Agg::P99];
/// Certificates: the handshakes that showed them.
const X509_SUMS: [Agg; 1] = [Agg::Conns];

/// The summed columns of a kind, in output order.
fn sums(kind: wirelog_store::Kind) -> &'static [Agg] {
    if kind == wirelog_store::Kind::X509 {
        &X509_SUMS
    } else if kind.is_tx() {
        &TX_SUMS
    } else {
        &SUMS
    }
}

fn sum_value(acc: &Acc, a: Agg) -> u64 {
    match a {
        Agg::Conns => acc.conns,
        Agg::Errors => acc.errors(),
        Agg::PktsOut => acc.pkts_out,
        Agg::PktsIn => acc.pkts_in,
        Agg::Pkts => acc.pkts(),
        Agg::BytesOut => acc.bytes_out,
        Agg::BytesIn => acc.bytes_in,
        Agg::Bytes => acc.bytes(),
        _ => 0,
    }
}

/// Column names, and whether each is right-aligned (numbers) in the table.
fn header(t: &ResultTable, style: Style) -> Vec<(String, bool)> {
    let mut h = Vec::new();
    if t.every_ns.is_some() {
        h.push(("time".to_string(), false));
    }
    for f in &t.by {
        let numeric = matches!(
            f.ty(),
            Ty::Duration
                | Ty::UInt {
                    unit: Unit::Plain | Unit::Bytes | Unit::Count,
                    ..
                }
        );
        h.push((f.name().to_string(), numeric));
    }
    for &a in sums(t.kind) {
        h.push((a.name(t.kind).to_string(), true));
        if a == Agg::Bytes && style == Style::Human {
            h.push(("%".to_string(), true));
        }
    }
    if t.percentiles {
        h.extend(PCTS.iter().map(|a| (a.name(t.kind).to_string(), true)));
        if t.kind.is_tx() {
            h.push((Agg::Avg.name(t.kind).to_string(), true));
        }
    }
    h
}

fn row_cells(t: &ResultTable, row: &Row, style: Style) -> Vec<Cell> {
    let human = style == Style::Human;
    let mut c = Vec::new();
    if let Some(time) = row.time {
        c.push(cell(format_rfc3339(time), false));
    }
    for (f, v) in t.by.iter().zip(&row.key) {
        c.push(key_cell(*f, v, style));
    }
    for &a in sums(t.kind) {
        let v = sum_value(&row.acc, a);
        c.push(cell(v.to_string(), true));
        if a == Agg::Bytes && human {
            let total = t.total.bytes();
            let pct = if total == 0 {
                0.0
            } else {
                v as f64 * 100.0 / total as f64
            };
            c.push(cell(format!("{pct:.2}"), true));
        }
    }
    if t.percentiles {
        for i in 0..3 {
            match row.duration {
                Some(d) => c.push(cell(seconds(d[i]), true)),
                None => c.push(null(style)),
            }
        }
        if t.kind.is_tx() {
            match row.avg {
                Some(d) => c.push(cell(seconds(d), true)),
                None => c.push(null(style)),
            }
        }
    }
    c
}

/// Writes `table` in `format`.
pub fn render(table: &ResultTable, format: Format, out: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Table => render_table(table, out),
        Format::Csv => render_csv(table, out),
        Format::Json => render_json(table, out),
    }
}

fn render_table(t: &ResultTable, out: &mut dyn Write) -> io::Result<()> {
    let head = header(t, Style::Human);
    let rows: Vec<Vec<Cell>> = t
        .rows
        .iter()
        .map(|r| row_cells(t, r, Style::Human))
        .collect();
    let mut width: Vec<usize> = head.iter().map(|h| h.0.chars().count()).collect();
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.text.chars().count());
        }
    }
    let numeric: Vec<bool> = head.iter().map(|h| h.1).collect();
    let line = |cells: &mut dyn Iterator<Item = &str>| -> String {
        let mut s = String::new();
        for (i, text) in cells.enumerate() {
            if i > 0 {
                s.push_str("  ");
            }
            let pad = width[i].saturating_sub(text.chars().count());
            if numeric[i] {
                s.push_str(&" ".repeat(pad));
                s.push_str(text);
            } else {
                s.push_str(text);
                s.push_str(&" ".repeat(pad));
            }
        }
        s.truncate(s.trim_end().len());
        s
    };
    writeln!(out, "{}", line(&mut head.iter().map(|h| h.0.as_str())))?;
    for r in &rows {
        writeln!(out, "{}", line(&mut r.iter().map(|c| c.text.as_str())))?;
    }
    let (shown, what) = shown(t);
    if t.kind == wirelog_store::Kind::X509 {
        return writeln!(
            out,
            "{shown} of {} {what}; {} of {} certificate rows matched; total {} handshakes",
            t.groups, t.rows_matched, t.rows_scanned, t.total.conns,
        );
    }
    if t.kind.is_tx() {
        return writeln!(
            out,
            "{shown} of {} {what}; {} of {} records matched; total {} transactions, {} errors, {} bytes{}",
            t.groups,
            t.rows_matched,
            t.rows_scanned,
            t.total.conns,
            t.total.errors(),
            t.total.bytes(),
            if t.estimated { " (estimated: see below)" } else { "" },
        );
    }
    writeln!(
        out,
        "{shown} of {} {what}; {} of {} records matched; total {} conns, {} pkts, {} bytes",
        t.groups,
        t.rows_matched,
        t.rows_scanned,
        t.total.conns,
        t.total.pkts(),
        t.total.bytes(),
    )
}

/// Groups (or series of a time series) shown, and which of the two.
fn shown(t: &ResultTable) -> (usize, &'static str) {
    if t.every_ns.is_some() {
        let series = t.rows.iter().map(|r| &r.key).collect::<std::collections::BTreeSet<_>>().len();
        (series, "series")
    } else {
        (t.rows.len(), "groups")
    }
}

/// When some matching record stood for several (`capture --cpu-budget`
/// parsed its connection 1 in N): the line that says the numbers are
/// estimates (for standard error, whatever the format).
pub fn estimated_note(t: &ResultTable) -> Option<&'static str> {
    t.estimated.then_some(
        "estimated: some transactions were parsed 1 in N (capture --cpu-budget); counts, sums and rates are \
         extrapolated by their sample_weight, latencies and percentiles are of the weighted sample",
    )
}

/// When `--top` left groups out: the line that says so (for standard
/// error, whatever the format, so a script counting rows is not misled).
pub fn cut_note(t: &ResultTable, top: usize) -> Option<String> {
    let (shown, what) = shown(t);
    (shown < t.groups).then(|| {
        format!("{shown} of {} {what} shown (--top {top}; --top 0 shows all)", t.groups)
    })
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn render_csv(t: &ResultTable, out: &mut dyn Write) -> io::Result<()> {
    let head: Vec<String> = header(t, Style::Raw)
        .iter()
        .map(|h| csv_field(&h.0))
        .collect();
    writeln!(out, "{}", head.join(","))?;
    for r in &t.rows {
        let cells: Vec<String> = row_cells(t, r, Style::Raw)
            .iter()
            .map(|c| csv_field(&c.text))
            .collect();
        writeln!(out, "{}", cells.join(","))?;
    }
    Ok(())
}

fn json_string(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn render_json(t: &ResultTable, out: &mut dyn Write) -> io::Result<()> {
    let head = header(t, Style::Raw);
    if t.rows.is_empty() {
        return writeln!(out, "[]");
    }
    writeln!(out, "[")?;
    for (i, r) in t.rows.iter().enumerate() {
        let sep = if i + 1 < t.rows.len() { "," } else { "" };
        writeln!(out, "{}{sep}", json_object(t, &head, r))?;
    }
    writeln!(out, "]")
}

fn json_object(t: &ResultTable, head: &[(String, bool)], r: &Row) -> String {
    let cells = row_cells(t, r, Style::Raw);
    let fields: Vec<String> = head
        .iter()
        .zip(&cells)
        .map(|(h, c)| {
            let v = if c.null {
                "null".to_string()
            } else if c.bare {
                c.text.clone()
            } else {
                json_string(&c.text)
            };
            format!("{}:{v}", json_string(&h.0))
        })
        .collect();
    format!("{{{}}}", fields.join(","))
}

/// The column names of `table` as CSV and JSON write them, in order (also
/// when there are no rows).
pub fn columns(table: &ResultTable) -> Vec<String> {
    header(table, Style::Raw).into_iter().map(|h| h.0).collect()
}

/// One row as the JSON object [`render`] writes for it with
/// [`Format::Json`] (the HTTP API answers in the same words as the CLI).
pub fn json_row(table: &ResultTable, row: &Row) -> String {
    json_object(table, &header(table, Style::Raw), row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(seconds(1_500_000), "0.001500");
        assert_eq!(seconds(61_000_000_000), "61.000000");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(json_string("a\"b\\\n\u{1}"), "\"a\\\"b\\\\\\n\\u0001\"");
        assert_eq!(default_format(true), Format::Table);
        assert_eq!(default_format(false), Format::Csv);
        assert_eq!("JSON".parse::<Format>(), Ok(Format::Json));
        assert!("xml".parse::<Format>().is_err());
    }
}
