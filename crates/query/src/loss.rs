//! `wirelog query loss`: the completeness record (the store's `loss`
//! table, see `wirelog_record::loss`) summed per minute (or `--every`),
//! optionally per `source` and `protocol`, every count a column; and the
//! one line that says how complete a time range's data is
//! ([`Completeness`]), which the CLI prints under the table and the API and
//! UI show above every view.
//!
//! Its own small aggregation rather than the engine's: the engine sums a
//! fixed set of traffic measures (bytes, packets, connections), the loss
//! table has one count per cause, all summed.

use std::collections::BTreeMap;
use std::io::{self, Write};

use wirelog_record::{LossCount, LossCounts};
use wirelog_store::{Batch, Column, Kind};

use crate::error::QueryError;
use crate::field::{Field, Ty};
use crate::filter::{selected, Filter};
use crate::parse::parse_where;
use crate::render::Format;
use crate::time::format_rfc3339;

/// The columns a group can be keyed by besides time.
const KEYS: [&str; 2] = ["source", "protocol"];

/// A loss query: its filter, its time buckets and keys.
#[derive(Debug, Clone)]
pub struct LossQuery {
    filter: Option<crate::expr::Expr>,
    /// The width of a time bucket (ns); the table's rows are minutes.
    pub every_ns: i64,
    /// Keys besides time: `source`, `protocol`.
    pub by: Vec<&'static str>,
    /// [from, to) in ns.
    pub time_range: Option<(i64, i64)>,
}

impl LossQuery {
    /// `--where` as for other kinds (any loss column), `--by` among
    /// `source` and `protocol`, `--every` a duration of at least a minute
    /// (default: a minute).
    pub fn parse(where_: Option<&str>, by: Option<&str>, every: Option<&str>) -> Result<LossQuery, QueryError> {
        let filter = match where_ {
            Some(w) if !w.trim().is_empty() => Some(parse_where(Kind::Loss, w)?),
            _ => None,
        };
        let every_ns = match every {
            Some(e) => match crate::time::parse_duration(e, false) {
                Some(ns) if ns >= wirelog_record::loss::MINUTE_NS => ns,
                _ => {
                    return Err(QueryError::new(
                        "--every",
                        e,
                        1,
                        "a duration of at least 1m (loss rows are per minute): 1m, 5m, 1h",
                        &format!("'{}'", e.trim()),
                    ))
                }
            },
            None => wirelog_record::loss::MINUTE_NS,
        };
        let mut keys = Vec::new();
        for name in by.unwrap_or("").split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let f = Field::lookup(Kind::Loss, name).map(Field::name);
            match f.and_then(|f| KEYS.iter().copied().find(|k| *k == f)) {
                Some(k) if !keys.contains(&k) => keys.push(k),
                Some(_) => {}
                None => {
                    return Err(QueryError::new(
                        "--by",
                        by.unwrap_or(""),
                        1,
                        "source or protocol (loss rows are grouped by time and those)",
                        &format!("'{name}'"),
                    ))
                }
            }
        }
        Ok(LossQuery { filter, every_ns, by: keys, time_range: None })
    }

    /// Restricts the query to [from, to), widened to the minutes it
    /// touches (a row covers its whole minute: a range inside one still
    /// has it); returns the range to scan.
    pub fn set_range(&mut self, from: Option<i64>, to: Option<i64>) -> (Option<i64>, Option<i64>) {
        let from = from.map(wirelog_record::loss::minute_of);
        if from.is_some() || to.is_some() {
            self.time_range = Some((from.unwrap_or(i64::MIN), to.unwrap_or(i64::MAX)));
        }
        (from, to)
    }

    /// The columns a scan must read: all of them (every count is summed).
    pub fn needed_columns(&self) -> Vec<&'static str> {
        Field::all(Kind::Loss).map(Field::name).collect()
    }

    /// Where the rows are summed, batch by batch.
    pub fn sums(&self) -> LossSums {
        LossSums {
            filter: self.filter.as_ref().map(Filter::new),
            every_ns: self.every_ns,
            by: self.by.clone(),
            range: self.time_range,
            bitmap: Vec::new(),
            sel: Vec::new(),
            groups: BTreeMap::new(),
        }
    }
}

/// One row of the result: a time bucket, its keys, its sums.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LossRow {
    pub ts_ns: i64,
    pub keys: Vec<String>,
    pub counts: LossCounts,
}

/// The rows of a loss query, by time then keys.
#[derive(Debug, Clone)]
pub struct LossTable {
    pub by: Vec<&'static str>,
    pub rows: Vec<LossRow>,
}

/// The sums being formed.
pub struct LossSums {
    filter: Option<Filter>,
    every_ns: i64,
    by: Vec<&'static str>,
    range: Option<(i64, i64)>,
    bitmap: Vec<u64>,
    sel: Vec<u32>,
    groups: BTreeMap<(i64, Vec<String>), LossCounts>,
}

fn problem(what: &str) -> QueryError {
    QueryError::custom("loss", "", 1, "the loss table's columns", format!("the loss table's {what}"))
}

impl LossSums {
    /// Filters and sums one batch of the loss table.
    pub fn consume(&mut self, batch: &Batch) -> Result<(), QueryError> {
        let n = batch.rows();
        if n == 0 {
            return Ok(());
        }
        match &mut self.filter {
            Some(f) => {
                f.eval(batch, &mut self.bitmap).map_err(|e| problem(&e.to_string()))?;
                selected(&self.bitmap, &mut self.sel);
            }
            None => {
                self.sel.clear();
                self.sel.extend(0..n as u32);
            }
        }
        let Some(Column::I64(ts)) = batch.column("ts") else {
            return Err(problem("ts column is missing"));
        };
        let keys: Vec<&Vec<String>> = self
            .by
            .iter()
            .map(|k| match batch.column(k) {
                Some(Column::Str(v)) => Ok(v),
                _ => Err(problem(&format!("{k} column is missing"))),
            })
            .collect::<Result<_, _>>()?;
        let counts: Vec<Option<&Vec<u64>>> = LossCount::ALL
            .iter()
            .map(|c| match batch.column(c.name()) {
                Some(Column::U64(v)) => Some(v),
                _ => None,
            })
            .collect();
        for &r in &self.sel {
            let r = r as usize;
            if self.range.is_some_and(|(from, to)| ts[r] < from || ts[r] >= to) {
                continue;
            }
            let bucket = ts[r].div_euclid(self.every_ns) * self.every_ns;
            let key: Vec<String> = keys.iter().map(|v| v[r].clone()).collect();
            let g = self.groups.entry((bucket, key)).or_default();
            for (i, c) in counts.iter().enumerate() {
                // A file written before a count existed reads it as 0.
                if let Some(c) = c {
                    g.0[i] += c[r];
                }
            }
        }
        Ok(())
    }

    pub fn finish(self) -> LossTable {
        LossTable {
            by: self.by,
            rows: self.groups.into_iter().map(|((ts_ns, keys), counts)| LossRow { ts_ns, keys, counts }).collect(),
        }
    }
}

/// How complete a range's data is: the loss table's counts summed over it,
/// and the first and last minute parsing was sampled in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Completeness {
    /// Every count summed, by its column name.
    pub totals: Vec<(&'static str, u64)>,
    /// Share of the packets the kernel passed that the probe read (1.0
    /// without loss); `None` when no packets were counted.
    pub packets_seen: Option<f64>,
    /// First and last minute (ns) in which connections went unparsed
    /// because of sampling: the numbers of that span are estimates.
    pub sampled_from_ns: Option<i64>,
    pub sampled_to_ns: Option<i64>,
    /// Minutes with a loss row in the range.
    pub minutes: u64,
    /// The line for people.
    pub text: String,
}

impl Completeness {
    /// Sums a loss table (of any grouping) into the line.
    pub fn of(t: &LossTable) -> Completeness {
        let mut sum = LossCounts::default();
        let mut minutes = std::collections::BTreeSet::new();
        let (mut sampled_from, mut sampled_to) = (None, None);
        for r in &t.rows {
            for (i, n) in r.counts.0.iter().enumerate() {
                sum.0[i] += n;
            }
            minutes.insert(r.ts_ns);
            if r.counts.get(LossCount::Sampled) > 0 {
                sampled_from = Some(sampled_from.map_or(r.ts_ns, |f: i64| f.min(r.ts_ns)));
                sampled_to = Some(sampled_to.map_or(r.ts_ns, |f: i64| f.max(r.ts_ns)));
            }
        }
        let g = |c| sum.get(c);
        let passed = g(LossCount::KernelPackets);
        let lost = g(LossCount::KernelDrops);
        let packets_seen = (passed > 0).then(|| passed.saturating_sub(lost) as f64 / passed as f64);
        let mut parts = Vec::new();
        match packets_seen {
            // Rounded down: 99.96% seen is not "100%".
            Some(f) => parts.push(format!(
                "{}% of packets seen ({} of {} dropped by the kernel)",
                percent_floor(f),
                lost,
                passed
            )),
            None if t.rows.is_empty() => parts.push("no completeness record for this range".to_string()),
            None => parts.push("no packets counted".to_string()),
        }
        if let (Some(f), Some(to)) = (sampled_from, sampled_to) {
            parts.push(format!(
                "parsing sampled from {} to {} ({} connections not parsed): transaction counts there are estimates",
                hhmm(f),
                hhmm(to + wirelog_record::loss::MINUTE_NS),
                g(LossCount::Sampled)
            ));
        }
        let mut say = |c: LossCount, what: &str| {
            let n = g(c);
            if n > 0 {
                parts.push(format!("{n} {what}"));
            }
        };
        say(LossCount::Undecoded, "packets not decoded");
        say(LossCount::Evicted, "connections evicted");
        say(LossCount::FlowsEarly, "flows written early");
        say(LossCount::Gaps, "stream gaps");
        say(LossCount::MissedBytes, "bytes missed");
        say(LossCount::Malformed, "malformed messages");
        say(LossCount::GaveUp, "parsers gave up");
        say(LossCount::RecordsDropped, "records dropped by sinks");
        Completeness {
            totals: LossCount::ALL.iter().map(|c| (c.name(), g(*c))).collect(),
            packets_seen,
            sampled_from_ns: sampled_from,
            sampled_to_ns: sampled_to.map(|t| t + wirelog_record::loss::MINUTE_NS),
            minutes: minutes.len() as u64,
            text: parts.join("; "),
        }
    }
}

/// A share as a percentage with one decimal, rounded down.
fn percent_floor(f: f64) -> String {
    let tenths = (f * 1000.0).floor() / 10.0;
    format!("{tenths:.1}")
}

/// "10:02" (UTC) of a time in ns.
fn hhmm(ns: i64) -> String {
    let t = format_rfc3339(ns);
    t.get(11..16).unwrap_or(&t).to_string()
}

/// The header of a rendered loss table.
pub fn columns(t: &LossTable) -> Vec<&'static str> {
    std::iter::once("time").chain(t.by.iter().copied()).chain(LossCount::ALL.iter().map(|c| c.name())).collect()
}

/// Renders a loss table: every count in CSV and JSON; the table for people
/// leaves out counts that are zero in every row.
pub fn render(t: &LossTable, format: Format, out: &mut dyn Write) -> io::Result<()> {
    let shown: Vec<usize> = match format {
        Format::Table => (0..LossCount::ALL.len())
            .filter(|&i| i <= LossCount::KernelPackets as usize || t.rows.iter().any(|r| r.counts.0[i] > 0))
            .collect(),
        _ => (0..LossCount::ALL.len()).collect(),
    };
    let head: Vec<&str> = std::iter::once("time")
        .chain(t.by.iter().copied())
        .chain(shown.iter().map(|&i| LossCount::ALL[i].name()))
        .collect();
    let cells = |r: &LossRow| -> Vec<String> {
        std::iter::once(format_rfc3339(r.ts_ns))
            .chain(r.keys.iter().cloned())
            .chain(shown.iter().map(|&i| r.counts.0[i].to_string()))
            .collect()
    };
    match format {
        Format::Json => {
            writeln!(out, "[")?;
            for (n, r) in t.rows.iter().enumerate() {
                let c = cells(r);
                let fields: Vec<String> = head
                    .iter()
                    .zip(&c)
                    .enumerate()
                    .map(|(i, (h, v))| {
                        if i <= t.by.len() {
                            format!("\"{h}\":{}", json_str(v))
                        } else {
                            format!("\"{h}\":{v}")
                        }
                    })
                    .collect();
                let sep = if n + 1 < t.rows.len() { "," } else { "" };
                writeln!(out, "{{{}}}{sep}", fields.join(","))?;
            }
            writeln!(out, "]")
        }
        Format::Csv => {
            writeln!(out, "{}", head.join(","))?;
            for r in &t.rows {
                let c: Vec<String> = cells(r).iter().map(|v| csv(v)).collect();
                writeln!(out, "{}", c.join(","))?;
            }
            Ok(())
        }
        Format::Table => {
            let rows: Vec<Vec<String>> = t.rows.iter().map(cells).collect();
            let widths: Vec<usize> = head
                .iter()
                .enumerate()
                .map(|(i, h)| rows.iter().map(|r| r[i].len()).chain([h.len()]).max().unwrap_or(0))
                .collect();
            let line = |cols: Vec<&str>| -> String {
                let v: Vec<String> = cols
                    .iter()
                    .zip(&widths)
                    .enumerate()
                    .map(|(i, (c, w))| if i <= t.by.len() { format!("{c:<w$}") } else { format!("{c:>w$}") })
                    .collect();
                v.join("  ").trim_end().to_string()
            };
            writeln!(out, "{}", line(head.clone()))?;
            for r in &rows {
                writeln!(out, "{}", line(r.iter().map(String::as_str).collect()))?;
            }
            Ok(())
        }
    }
}

fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for ch in s.chars() {
        match ch {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn csv(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Whether a field is one a loss query can name (for the CLI's help).
pub fn is_key(f: Field) -> bool {
    f.kind() == Kind::Loss && f.ty() == Ty::Str
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirelog_record::loss::MINUTE_NS;

    fn batch(rows: &[(i64, &str, &str, &[(LossCount, u64)])]) -> Batch {
        let mut columns: Vec<(&'static str, Column)> = vec![
            ("ts", Column::I64(rows.iter().map(|r| r.0).collect())),
            ("source", Column::Str(rows.iter().map(|r| r.1.to_string()).collect())),
            ("protocol", Column::Str(rows.iter().map(|r| r.2.to_string()).collect())),
        ];
        for c in LossCount::ALL {
            let v = rows.iter().map(|r| r.3.iter().find(|(k, _)| *k == c).map_or(0, |(_, n)| *n)).collect();
            columns.push((c.name(), Column::U64(v)));
        }
        Batch { kind: Kind::Loss, columns }
    }

    #[test]
    fn sums_per_minute_and_says_how_complete() {
        use LossCount::*;
        let t0 = 1_700_000_040 * 1_000_000_000 / MINUTE_NS * MINUTE_NS;
        let b = batch(&[
            (t0, "eth0", "", &[(KernelPackets, 1000), (KernelDrops, 8), (Evicted, 3)]),
            (t0, "eth0", "http", &[(Gaps, 2)]),
            (t0 + MINUTE_NS, "eth0", "", &[(KernelPackets, 1000), (Sampled, 5)]),
            (t0 + MINUTE_NS, "sinks", "", &[(RecordsDropped, 7)]),
        ]);
        let q = LossQuery::parse(None, None, None).unwrap();
        let mut s = q.sums();
        s.consume(&b).unwrap();
        let t = s.finish();
        assert_eq!(t.rows.len(), 2);
        assert_eq!(t.rows[0].counts.get(Gaps), 2);
        assert_eq!(t.rows[1].counts.get(RecordsDropped), 7);
        let c = Completeness::of(&t);
        assert_eq!(c.packets_seen, Some(1992.0 / 2000.0));
        assert!(c.text.starts_with("99.6% of packets seen (8 of 2000 dropped by the kernel)"), "{}", c.text);
        assert!(c.text.contains("3 connections evicted"), "{}", c.text);
        assert!(c.text.contains("7 records dropped by sinks"), "{}", c.text);
        assert!(c.text.contains("(5 connections not parsed)"), "{}", c.text);
        assert_eq!(c.sampled_from_ns, Some(t0 + MINUTE_NS));

        // A filter and a key.
        let q = LossQuery::parse(Some("source = eth0 and kernel_drops > 0"), Some("source"), Some("1h")).unwrap();
        let mut s = q.sums();
        s.consume(&b).unwrap();
        let t = s.finish();
        assert_eq!(t.rows.len(), 1);
        assert_eq!(t.rows[0].keys, vec!["eth0".to_string()]);
        assert_eq!(t.rows[0].counts.get(KernelPackets), 1000);
        let mut out = Vec::new();
        render(&t, Format::Csv, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("time,source,packets,kernel_packets,kernel_drops,"), "{text}");
    }

    #[test]
    fn bad_groupings_are_refused() {
        assert!(LossQuery::parse(None, Some("kernel_drops"), None).is_err());
        assert!(LossQuery::parse(None, None, Some("10s")).is_err());
        assert!(LossQuery::parse(Some("nonsense > 1"), None, None).is_err());
    }
}
