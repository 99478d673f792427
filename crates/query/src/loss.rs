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
            sampling: BTreeMap::new(),
            stopped: BTreeMap::new(),
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
    /// Per protocol whose parsing was sampled in the range, whatever the
    /// grouping: what the completeness line says of it.
    pub sampling: Vec<Sampling>,
    /// Per protocol whose parsed connections the CPU budget stopped
    /// parsing part way (step 1b) in the range.
    pub stopped: Vec<Stopped>,
}

/// Parsed connections of one protocol whose parsing `capture
/// --cpu-budget` stopped part way (step 1b, `parse_stopped`): the rows
/// that say so, summed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    pub protocol: String,
    /// First and last minute with a connection stopped (ns; `to_ns` is the
    /// end of the last).
    pub from_ns: i64,
    pub to_ns: i64,
    pub connections: u64,
}

/// How one protocol's parsing was sampled over a range: the rows (minute,
/// source) in which some of its connections were sampled out, summed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sampling {
    pub protocol: String,
    /// First and last minute with a connection sampled out (ns; `to_ns` is
    /// the end of the last).
    pub from_ns: i64,
    pub to_ns: i64,
    /// Connections parsed and sampled out in those rows.
    pub parsed: u64,
    pub sampled: u64,
}

impl Sampling {
    /// N of "1 in N": connections found per connection parsed (`None`
    /// when none was parsed).
    pub fn one_in(&self) -> Option<f64> {
        (self.parsed > 0).then(|| (self.parsed + self.sampled) as f64 / self.parsed as f64)
    }
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
    sampling: BTreeMap<String, Sampling>,
    stopped: BTreeMap<String, Stopped>,
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
        // The protocol of each row (files before the column: none).
        let protocol = match batch.column("protocol") {
            Some(Column::Str(v)) => Some(v),
            _ => None,
        };
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
            let n = |c: LossCount| counts[c as usize].map_or(0, |v| v[r]);
            let p = protocol.map_or("", |p| p[r].as_str());
            if !p.is_empty() && n(LossCount::Sampled) > 0 {
                let minute = wirelog_record::loss::minute_of(ts[r]);
                let s = self.sampling.entry(p.to_string()).or_insert(Sampling {
                    protocol: p.to_string(),
                    from_ns: minute,
                    to_ns: minute,
                    parsed: 0,
                    sampled: 0,
                });
                s.from_ns = s.from_ns.min(minute);
                s.to_ns = s.to_ns.max(minute + wirelog_record::loss::MINUTE_NS);
                s.parsed += n(LossCount::Parsed);
                s.sampled += n(LossCount::Sampled);
            }
            if !p.is_empty() && n(LossCount::ParseStopped) > 0 {
                let minute = wirelog_record::loss::minute_of(ts[r]);
                let s = self.stopped.entry(p.to_string()).or_insert(Stopped {
                    protocol: p.to_string(),
                    from_ns: minute,
                    to_ns: minute,
                    connections: 0,
                });
                s.from_ns = s.from_ns.min(minute);
                s.to_ns = s.to_ns.max(minute + wirelog_record::loss::MINUTE_NS);
                s.connections += n(LossCount::ParseStopped);
            }
        }
        Ok(())
    }

    pub fn finish(self) -> LossTable {
        LossTable {
            by: self.by,
            rows: self.groups.into_iter().map(|((ts_ns, keys), counts)| LossRow { ts_ns, keys, counts }).collect(),
            sampling: self.sampling.into_values().collect(),
            stopped: self.stopped.into_values().collect(),
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
    /// Per sampled protocol: 1 in N, and when.
    pub sampling: Vec<Sampling>,
    /// Per protocol: parsed connections the CPU budget stopped parsing
    /// part way, and when.
    pub stopped: Vec<Stopped>,
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
        // Per protocol where the rows say which ("HTTP sampled 1 in 4 from
        // 10:02 to 10:07"); rows from before that only have the total.
        let per_protocol: Vec<String> = t
            .sampling
            .iter()
            .map(|s| {
                let name = s.protocol.to_uppercase();
                let (from, to) = (hhmm(s.from_ns), hhmm(s.to_ns));
                match s.one_in() {
                    // Whole from 10 up; below, one decimal ("1 in 1.1", not "1 in 1").
                    Some(n) if n >= 9.95 => format!("{name} sampled 1 in {n:.0} from {from} to {to}"),
                    Some(n) => {
                        let n = format!("{n:.1}");
                        format!("{name} sampled 1 in {} from {from} to {to}", n.trim_end_matches(".0"))
                    }
                    None => format!("{name} not parsed from {from} to {to} ({} connections sampled out)", s.sampled),
                }
            })
            .collect();
        if !per_protocol.is_empty() {
            parts.push(format!(
                "{} ({} connections not parsed): transaction counts there are estimates",
                per_protocol.join(", "),
                g(LossCount::Sampled)
            ));
        } else if let (Some(f), Some(to)) = (sampled_from, sampled_to) {
            parts.push(format!(
                "parsing sampled from {} to {} ({} connections not parsed): transaction counts there are estimates",
                hhmm(f),
                hhmm(to + wirelog_record::loss::MINUTE_NS),
                g(LossCount::Sampled)
            ));
        }
        // Step 1b: "MYSQL: 3 connections no longer parsed from 10:02 to
        // 10:05". The connections kept from the draw weigh for them, so
        // the counts are estimates, not complete.
        if !t.stopped.is_empty() {
            let each: Vec<String> = t
                .stopped
                .iter()
                .map(|s| {
                    format!(
                        "{}: {} connections no longer parsed from {} to {}",
                        s.protocol.to_uppercase(),
                        s.connections,
                        hhmm(s.from_ns),
                        hhmm(s.to_ns)
                    )
                })
                .collect();
            parts.push(format!(
                "{} (the CPU budget stopped their parsing; the connections still parsed weigh for them): transaction counts from then on are estimates",
                each.join(", ")
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
        say(LossCount::NoMemory, "connections not parsed for want of stream memory");
        say(LossCount::RecordsDropped, "records dropped by sinks");
        Completeness {
            totals: LossCount::ALL.iter().map(|c| (c.name(), g(*c))).collect(),
            packets_seen,
            // The protocols' minutes where they are known (a table summed
            // per hour has only the hour of its rows).
            sampled_from_ns: t.sampling.iter().map(|s| s.from_ns).min().or(sampled_from),
            sampled_to_ns: t.sampling.iter().map(|s| s.to_ns).max().or(sampled_to.map(|t| t + wirelog_record::loss::MINUTE_NS)),
            sampling: t.sampling.clone(),
            stopped: t.stopped.clone(),
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

    /// A row: its time, two key columns, and its counts.
    type Row<'a> = (i64, &'a str, &'a str, &'a [(LossCount, u64)]);

    fn batch(rows: &[Row<'_>]) -> Batch {
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
        assert!(t.sampling.is_empty(), "only a source row sampled: no protocol to name");

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

    /// The completeness line names each sampled protocol, its "1 in N" over
    /// the rows that sampled it (parsed + sampled over parsed) and their
    /// minutes, whatever the table is grouped by.
    #[test]
    fn sampling_per_protocol_in_the_line() {
        use LossCount::*;
        let t0 = 1_700_000_040 * 1_000_000_000 / MINUTE_NS * MINUTE_NS;
        let b = batch(&[
            (t0, "eth0", "", &[(KernelPackets, 1000)]),
            (t0, "eth0", "http", &[(Parsed, 40)]),
            (t0 + MINUTE_NS, "eth0", "http", &[(Parsed, 10), (Sampled, 30)]),
            (t0 + 5 * MINUTE_NS, "eth1", "http", &[(Parsed, 15), (Sampled, 45)]),
            (t0 + 2 * MINUTE_NS, "eth0", "dns", &[(Parsed, 50), (Sampled, 50)]),
            (t0 + 3 * MINUTE_NS, "eth0", "mysql", &[(Sampled, 3)]),
            (t0 + 3 * MINUTE_NS, "eth0", "redis", &[(Parsed, 90), (Sampled, 10)]),
        ]);
        for by in [None, Some("source"), Some("source,protocol")] {
            let q = LossQuery::parse(None, by, Some("1h")).unwrap();
            let mut s = q.sums();
            s.consume(&b).unwrap();
            let t = s.finish();
            let http = t.sampling.iter().find(|s| s.protocol == "http").unwrap();
            assert_eq!((http.parsed, http.sampled, http.one_in()), (25, 75, Some(4.0)));
            assert_eq!((http.from_ns, http.to_ns), (t0 + MINUTE_NS, t0 + 6 * MINUTE_NS));
            let c = Completeness::of(&t);
            let at = |m: i64| hhmm(t0 + m * MINUTE_NS);
            for want in [
                format!("DNS sampled 1 in 2 from {} to {}", at(2), at(3)),
                format!("HTTP sampled 1 in 4 from {} to {}", at(1), at(6)),
                format!("MYSQL not parsed from {} to {} (3 connections sampled out)", at(3), at(4)),
                format!("REDIS sampled 1 in 1.1 from {} to {}", at(3), at(4)),
                "(138 connections not parsed): transaction counts there are estimates".to_string(),
            ] {
                assert!(c.text.contains(&want), "{want} not in {}", c.text);
            }
            assert_eq!(c.sampled_from_ns, Some(t0 + MINUTE_NS), "{by:?}");
        }
    }

    /// Connections the budget stopped parsing part way (step 1b) are named
    /// per protocol with their minutes, and make the range an estimate.
    #[test]
    fn stopped_connections_in_the_line() {
        use LossCount::*;
        let t0 = 1_700_000_040 * 1_000_000_000 / MINUTE_NS * MINUTE_NS;
        let b = batch(&[
            (t0, "eth0", "", &[(KernelPackets, 1000)]),
            (t0, "eth0", "mysql", &[(Parsed, 4)]),
            (t0 + 2 * MINUTE_NS, "eth0", "mysql", &[(ParseStopped, 2)]),
            (t0 + 4 * MINUTE_NS, "eth0", "mysql", &[(ParseStopped, 1)]),
        ]);
        for by in [None, Some("source,protocol")] {
            let q = LossQuery::parse(None, by, Some("1h")).unwrap();
            let mut s = q.sums();
            s.consume(&b).unwrap();
            let t = s.finish();
            assert!(t.sampling.is_empty());
            let c = Completeness::of(&t);
            let at = |m: i64| hhmm(t0 + m * MINUTE_NS);
            let want = format!("MYSQL: 3 connections no longer parsed from {} to {}", at(2), at(5));
            assert!(c.text.contains(&want), "{want} not in {}", c.text);
            assert!(c.text.contains("transaction counts from then on are estimates"), "{}", c.text);
            assert_eq!(c.stopped.len(), 1);
            assert_eq!(c.totals.iter().find(|(n, _)| *n == "parse_stopped"), Some(&("parse_stopped", 3)));
        }
    }

    #[test]
    fn bad_groupings_are_refused() {
        assert!(LossQuery::parse(None, Some("kernel_drops"), None).is_err());
        assert!(LossQuery::parse(None, None, Some("10s")).is_err());
        assert!(LossQuery::parse(Some("nonsense > 1"), None, None).is_err());
    }
}
