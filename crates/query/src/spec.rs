//! A whole query: what the CLI flags say, checked and resolved.

use wirelog_store::Kind;

use crate::error::QueryError;
use crate::expr::{CmpOp, Expr, Operand, Test};
use crate::field::{Field, Ty};
use crate::key::{Layout, Part, MAX_WORDS};
use crate::parse::{parse_where, unknown_field};
use crate::time::parse_duration;
use crate::value::Net;

/// Rows shown when `--top` is not given (goQuery's default).
pub const DEFAULT_TOP: usize = 10;

/// The aggregates every group carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Agg {
    /// Bytes both ways.
    Bytes,
    /// Flows: client to server; connections: `orig_bytes`; transactions:
    /// `request_bytes`.
    BytesOut,
    /// Flows: server to client; connections: `resp_bytes`; transactions:
    /// `response_bytes`.
    BytesIn,
    Pkts,
    PktsOut,
    PktsIn,
    /// Connections: the flows' `conns` column summed, or connection records
    /// counted; transactions: `count`, the transactions.
    Conns,
    /// Duration percentiles (connections), latency percentiles (transactions).
    P50,
    P95,
    P99,
    /// Transactions whose status is "error" (transactions only).
    Errors,
    /// Mean latency of the transactions that have one (transactions only).
    Avg,
}

impl Agg {
    pub const ALL: [Agg; 12] = [
        Agg::Bytes,
        Agg::BytesOut,
        Agg::BytesIn,
        Agg::Pkts,
        Agg::PktsOut,
        Agg::PktsIn,
        Agg::Conns,
        Agg::P50,
        Agg::P95,
        Agg::P99,
        Agg::Errors,
        Agg::Avg,
    ];

    /// Whether a kind has this aggregate.
    pub fn available(self, kind: Kind) -> bool {
        if kind == Kind::X509 {
            return self == Agg::Conns;
        }
        match self {
            Agg::Bytes | Agg::BytesOut | Agg::BytesIn | Agg::Conns => true,
            Agg::Pkts | Agg::PktsOut | Agg::PktsIn => !kind.is_tx(),
            Agg::P50 | Agg::P95 | Agg::P99 => kind != Kind::Flows,
            Agg::Errors | Agg::Avg => kind.is_tx(),
        }
    }

    /// The output column name.
    pub fn name(self, kind: Kind) -> &'static str {
        let conns = kind == Kind::Conns;
        if kind == Kind::X509 {
            return "handshakes";
        }
        if kind.is_tx() {
            match self {
                Agg::BytesOut => return "request_bytes",
                Agg::BytesIn => return "response_bytes",
                Agg::Conns => return "count",
                Agg::P50 => return "latency_p50_s",
                Agg::P95 => return "latency_p95_s",
                Agg::P99 => return "latency_p99_s",
                _ => {}
            }
        }
        match self {
            Agg::Bytes => "bytes",
            Agg::BytesOut if conns => "orig_bytes",
            Agg::BytesOut => "bytes_out",
            Agg::BytesIn if conns => "resp_bytes",
            Agg::BytesIn => "bytes_in",
            Agg::Pkts => "pkts",
            Agg::PktsOut if conns => "orig_pkts",
            Agg::PktsOut => "pkts_out",
            Agg::PktsIn if conns => "resp_pkts",
            Agg::PktsIn => "pkts_in",
            Agg::Conns => "conns",
            Agg::P50 => "duration_p50_s",
            Agg::P95 => "duration_p95_s",
            Agg::P99 => "duration_p99_s",
            Agg::Errors => "errors",
            Agg::Avg => "latency_avg_s",
        }
    }

    fn lookup(kind: Kind, name: &str) -> Option<Agg> {
        let n = name.to_ascii_lowercase();
        if kind == Kind::X509 {
            return matches!(n.as_str(), "handshakes" | "count").then_some(Agg::Conns);
        }
        if kind.is_tx() {
            return Some(match n.as_str() {
                "count" | "transactions" | "requests" | "conns" => Agg::Conns,
                "errors" => Agg::Errors,
                "bytes" => Agg::Bytes,
                "request_bytes" | "req_bytes" | "bytes_out" => Agg::BytesOut,
                "response_bytes" | "resp_bytes" | "bytes_in" => Agg::BytesIn,
                "p50" | "latency_p50" | "latency_p50_s" | "p50_latency" | "median" => Agg::P50,
                "p95" | "latency_p95" | "latency_p95_s" | "p95_latency" => Agg::P95,
                "p99" | "latency_p99" | "latency_p99_s" | "p99_latency" => Agg::P99,
                "avg" | "mean" | "latency_avg" | "latency_avg_s" | "avg_latency" => Agg::Avg,
                _ => return None,
            });
        }
        Some(match n.as_str() {
            "bytes" => Agg::Bytes,
            "bytes_out" | "orig_bytes" => Agg::BytesOut,
            "bytes_in" | "resp_bytes" => Agg::BytesIn,
            "pkts" | "packets" => Agg::Pkts,
            "pkts_out" | "packets_out" | "orig_pkts" => Agg::PktsOut,
            "pkts_in" | "packets_in" | "resp_pkts" => Agg::PktsIn,
            "conns" | "count" => Agg::Conns,
            "p50" | "duration_p50" | "duration_p50_s" | "median" if kind == Kind::Conns => Agg::P50,
            "p95" | "duration_p95" | "duration_p95_s" if kind == Kind::Conns => Agg::P95,
            "p99" | "duration_p99" | "duration_p99_s" if kind == Kind::Conns => Agg::P99,
            _ => return None,
        })
    }

    pub fn is_percentile(self) -> bool {
        matches!(self, Agg::P50 | Agg::P95 | Agg::P99)
    }

    /// Computed from the duration/latency histogram (percentiles, mean).
    pub fn needs_hist(self) -> bool {
        self.is_percentile() || self == Agg::Avg
    }
}

/// What the result is sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Agg(Agg),
    /// A `--by` field.
    Field(Field),
    /// The interval of a time series.
    Time,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Asc,
    Desc,
}

/// A checked query. Build it with [`parse_query`], or by hand.
#[derive(Debug, Clone, PartialEq)]
pub struct QuerySpec {
    pub kind: Kind,
    pub filter: Option<Expr>,
    /// Group-by fields, in output order. Empty: one group (per interval).
    pub by: Vec<Field>,
    pub sort: (SortKey, Order),
    /// At most this many rows (series, for a time series); `None`: all.
    pub top: Option<usize>,
    /// Time series interval in ns.
    pub every_ns: Option<i64>,
    /// Keep duration (connections) or latency (transactions) histograms and
    /// report p50/p95/p99 (and the mean latency of transactions).
    pub percentiles: bool,
    /// Only rows whose time (`bucket`/`ts`) is in `[from, to)`, ns. The store
    /// prunes files with it; the engine applies it exactly per row.
    pub time_range: Option<(i64, i64)>,
}

/// Resolves the CLI flags of `wirelog query`:
///
/// - `where_`: the `--where` expression (see the crate docs for the grammar);
///   empty means no filter.
/// - `by`: fields separated by commas or spaces. Absent: see [`default_by`];
///   with `--every`, no fields (one total per interval).
/// - `sort`: `NAME`, `NAME:asc|desc` or `NAME asc|desc`, where `NAME` is an
///   aggregate or a `--by` field (`time` with `--every`). Aggregates sort
///   descending by default, fields and time ascending. Default: `bytes`
///   (transactions: `count`).
/// - `top`: `None` gives [`DEFAULT_TOP`]; `Some(0)` means no limit.
/// - `every`: a duration (`1m`, `5m`, `1h`) for a time series.
pub fn parse_query(
    kind: Kind,
    where_: Option<&str>,
    by: Option<&str>,
    sort: Option<&str>,
    top: Option<usize>,
    every: Option<&str>,
) -> Result<QuerySpec, QueryError> {
    if kind == Kind::Loss {
        return Err(QueryError::custom(
            "--kind",
            "loss",
            1,
            "a record kind",
            "the loss table is summed by `wirelog query loss` and /api/loss, every count a column (crate::loss)",
        ));
    }
    let filter = match where_ {
        Some(w) if !w.trim().is_empty() => Some(parse_where(kind, w)?),
        _ => None,
    };
    let every_ns = every.map(parse_every).transpose()?;
    let by = match by {
        Some(b) if !b.trim().is_empty() => parse_by(kind, b, every_ns)?,
        _ if every_ns.is_some() => Vec::new(),
        _ => default_by(kind),
    };
    let sort = match sort {
        Some(s) if !s.trim().is_empty() => parse_sort(kind, s, &by, every_ns.is_some())?,
        _ if kind.is_tx() || kind == Kind::X509 => (SortKey::Agg(Agg::Conns), Order::Desc),
        _ => (SortKey::Agg(Agg::Bytes), Order::Desc),
    };
    let top = match top {
        None => Some(DEFAULT_TOP),
        Some(0) => None,
        Some(n) => Some(n),
    };
    Ok(QuerySpec {
        kind,
        filter,
        by,
        sort,
        top,
        every_ns,
        percentiles: kind != Kind::Flows && kind != Kind::X509,
        time_range: None,
    })
}

/// The key without `--by`: goQuery's top talkers for flows and connections
/// (`sip,dip,dport,proto`, `orig_h,resp_h,resp_p,proto`); for transactions
/// what the protocol's declared columns say (`by`: http `host`, mysql and
/// pgsql `fingerprint`, redis `command`, dns `query,qtype_name`, tls
/// `server_name`); certificates by `subject, issuer, not_valid_after`.
pub fn default_by(kind: Kind) -> Vec<Field> {
    let names: &[&str] = match kind {
        Kind::Flows => &["client", "server", "server_port", "proto"],
        Kind::Conns => &["orig_h", "resp_h", "resp_p", "proto"],
        Kind::X509 => &["subject", "issuer", "not_valid_after"],
        Kind::Loss => &["source", "protocol"],
        _ => match kind.protocol() {
            Some(p) => wirelog_record::columns::of(p).by,
            None => unreachable!("every kind but flows, conns and x509 is a protocol's"),
        },
    };
    names.iter().map(|n| Field::col(kind, n)).collect()
}

fn parse_every(s: &str) -> Result<i64, QueryError> {
    match parse_duration(s, false) {
        Some(ns) if ns > 0 => Ok(ns),
        _ => Err(QueryError::new(
            "--every",
            s,
            1 + s.chars().take_while(|c| c.is_whitespace()).count(),
            "a positive duration such as 1m, 5m or 1h",
            &format!("'{}'", s.trim()),
        )),
    }
}

/// Words of `s` split on commas and white space, with 1-based columns.
fn words(s: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut start = 0;
    for (i, c) in s.chars().enumerate() {
        if c == ',' || c.is_whitespace() {
            if !cur.is_empty() {
                out.push((start, std::mem::take(&mut cur)));
            }
        } else {
            if cur.is_empty() {
                start = i + 1;
            }
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        out.push((start, cur));
    }
    out
}

fn parse_by(kind: Kind, s: &str, every_ns: Option<i64>) -> Result<Vec<Field>, QueryError> {
    let mut fields = Vec::new();
    let mut parts: Vec<Part> = Vec::new();
    if let Some(every) = every_ns {
        parts.push(Part::Bucket {
            time: Field::time(kind),
            every,
        });
    }
    for (col, w) in words(s) {
        let Some(f) = Field::lookup(kind, &w) else {
            if [
                "host", "net", "addr", "ip", "port", "bytes", "pkts", "packets",
            ]
            .contains(&w.to_ascii_lowercase().as_str())
            {
                return Err(QueryError::custom(
                    "--by",
                    s,
                    col,
                    "a field to group by",
                    format!(
                        "expected a field to group by, found '{w}', which stands for two fields (name one of them)"
                    ),
                ));
            }
            return Err(unknown_field(kind, "--by", s, col, &w, &[]));
        };
        // Naming a field twice adds nothing to the key.
        if !fields.contains(&f) {
            fields.push(f);
            parts.push(Part::Field(f));
            if let Err(words) = Layout::new(&parts) {
                return Err(QueryError::custom(
                    "--by",
                    s,
                    col,
                    format!("group-by fields fitting {} bits", MAX_WORDS * 64),
                    format!(
                        "the group key would need {} bits from here on, more than {}: group by fewer fields",
                        words * 64,
                        MAX_WORDS * 64
                    ),
                ));
            }
        }
    }
    Ok(fields)
}

fn parse_sort(
    kind: Kind,
    s: &str,
    by: &[Field],
    series: bool,
) -> Result<(SortKey, Order), QueryError> {
    let ws = words(&s.replace(':', " "));
    let (col, name) = ws.first().cloned().unwrap_or((1, String::new()));
    let order = match ws.get(1) {
        None => None,
        Some((_, o)) if o.eq_ignore_ascii_case("asc") => Some(Order::Asc),
        Some((_, o)) if o.eq_ignore_ascii_case("desc") => Some(Order::Desc),
        Some((c, o)) => {
            return Err(QueryError::new(
                "--sort",
                s,
                *c,
                "'asc' or 'desc'",
                &format!("'{o}'"),
            ))
        }
    };
    if let Some((c, o)) = ws.get(2) {
        return Err(QueryError::new(
            "--sort",
            s,
            *c,
            "end of input",
            &format!("'{o}'"),
        ));
    }
    let key = if let Some(a) = Agg::lookup(kind, &name) {
        SortKey::Agg(a)
    } else if series && name.eq_ignore_ascii_case("time") {
        SortKey::Time
    } else {
        match Field::lookup(kind, &name) {
            Some(f) if by.contains(&f) => SortKey::Field(f),
            _ => {
                let mut names: Vec<&str> = Agg::ALL
                    .iter()
                    .filter(|a| a.available(kind))
                    .map(|a| a.name(kind))
                    .collect();
                names.extend(by.iter().map(|f| f.name()));
                if series {
                    names.push("time");
                }
                return Err(QueryError::new(
                    "--sort",
                    s,
                    col,
                    format!("an aggregate or a --by field ({})", names.join(", ")),
                    &format!("'{name}'"),
                ));
            }
        }
    };
    let order = order.unwrap_or(if matches!(key, SortKey::Agg(_)) {
        Order::Desc
    } else {
        Order::Asc
    });
    Ok((key, order))
}

/// A closed range a filter implies for one field.
type Range = (Field, u128, u128);

/// The ranges every matching row's fields must lie in, as far as the filter
/// says so plainly (conjunctions of comparisons, `in` lists, CIDRs; `or`
/// keeps a field only when every branch bounds it).
fn implied(e: &Expr) -> Vec<Range> {
    match e {
        Expr::Pred(p) => {
            let Operand::Field(f) = p.operand else {
                return Vec::new();
            };
            let r = match &p.test {
                Test::UInt(op, v) => {
                    let v = *v as u128;
                    let max = u64::MAX as u128;
                    match op {
                        CmpOp::Eq => (v, v),
                        CmpOp::Lt if v == 0 => (1, 0),
                        CmpOp::Lt => (0, v - 1),
                        CmpOp::Le => (0, v),
                        CmpOp::Gt if v == max => (1, 0),
                        CmpOp::Gt => (v + 1, max),
                        CmpOp::Ge => (v, max),
                    }
                }
                Test::UIntIn(vs) if !vs.is_empty() => (
                    *vs.iter().min().unwrap() as u128,
                    *vs.iter().max().unwrap() as u128,
                ),
                Test::Net(nets) if !nets.is_empty() => {
                    let rs: Vec<(u128, u128)> = nets.iter().map(|n: &Net| n.range()).collect();
                    (
                        rs.iter().map(|r| r.0).min().unwrap(),
                        rs.iter().map(|r| r.1).max().unwrap(),
                    )
                }
                _ => return Vec::new(),
            };
            vec![(f, r.0, r.1)]
        }
        Expr::Not(_) => Vec::new(),
        Expr::And(es) => {
            let mut out: Vec<Range> = Vec::new();
            for r in es.iter().flat_map(implied) {
                match out.iter_mut().find(|o| o.0 == r.0) {
                    Some(o) => {
                        o.1 = o.1.max(r.1);
                        o.2 = o.2.min(r.2);
                    }
                    None => out.push(r),
                }
            }
            out
        }
        Expr::Or(es) => {
            let mut iter = es.iter().map(implied);
            let Some(mut out) = iter.next() else {
                return Vec::new();
            };
            for rs in iter {
                out = out
                    .into_iter()
                    .filter_map(|o| {
                        rs.iter().find(|r| r.0 == o.0).map(|r| {
                            // An empty branch adds nothing to the hull.
                            if r.1 > r.2 {
                                o
                            } else if o.1 > o.2 {
                                *r
                            } else {
                                (o.0, o.1.min(r.1), o.2.max(r.2))
                            }
                        })
                    })
                    .collect();
            }
            out
        }
    }
}

impl QuerySpec {
    /// The columns the engine reads, each once: filter, time, group-by,
    /// aggregates.
    pub fn needed_columns(&self) -> Vec<&'static str> {
        let mut fields = Vec::new();
        if let Some(f) = &self.filter {
            f.fields(&mut fields);
        }
        if self.every_ns.is_some() || self.time_range.is_some() {
            fields.push(Field::time(self.kind));
        }
        fields.extend(&self.by);
        let v = crate::field::value_cols(self.kind);
        let mut names: Vec<&'static str> = fields.iter().map(|f| f.name()).collect();
        names.extend([v.bytes_out, v.pkts_out, v.bytes_in, v.pkts_in]);
        names.extend(v.conns);
        names.extend(crate::field::weight_col(self.kind));
        if self.percentiles {
            names.extend(crate::field::hist_col(self.kind));
        }
        let mut out = Vec::new();
        for n in names {
            if !out.contains(&n) {
                out.push(n);
            }
        }
        out
    }

    /// Inclusive `(column, lo, hi)` ranges that every matching row satisfies,
    /// for unsigned integer columns (ports, protocol, counters, VLANs): the
    /// store can skip a row group whose min/max statistics miss one. `lo > hi`
    /// means no row can match. E.g. `dport = 443` gives `("server_port", 443, 443)`.
    pub fn numeric_ranges(&self) -> Vec<(&'static str, u64, u64)> {
        let Some(f) = &self.filter else {
            return Vec::new();
        };
        implied(f)
            .into_iter()
            .filter(|r| matches!(r.0.ty(), Ty::UInt { .. }))
            .map(|(f, lo, hi)| (f.name(), lo as u64, hi as u64))
            .collect()
    }

    /// The same for address columns, as 16-byte (v4-mapped) bounds:
    /// `sip in 10.0.0.0/8` gives `("client", ::ffff:10.0.0.0, ::ffff:10.255.255.255)`.
    pub fn ip_ranges(&self) -> Vec<(&'static str, [u8; 16], [u8; 16])> {
        let Some(f) = &self.filter else {
            return Vec::new();
        };
        implied(f)
            .into_iter()
            .filter(|r| r.0.ty() == Ty::Ip)
            .map(|(f, lo, hi)| (f.name(), lo.to_be_bytes(), hi.to_be_bytes()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::v4;

    fn q(
        kind: Kind,
        w: Option<&str>,
        by: Option<&str>,
        sort: Option<&str>,
        every: Option<&str>,
    ) -> Result<QuerySpec, QueryError> {
        parse_query(kind, w, by, sort, None, every)
    }

    #[test]
    fn defaults() {
        let s = q(Kind::Flows, None, None, None, None).unwrap();
        assert_eq!(
            s.by.iter().map(|f| f.name()).collect::<Vec<_>>(),
            ["client", "server", "server_port", "proto"]
        );
        assert_eq!(s.sort, (SortKey::Agg(Agg::Bytes), Order::Desc));
        assert_eq!(s.top, Some(DEFAULT_TOP));
        assert!(!s.percentiles);
        let s = q(Kind::Conns, Some("  "), None, None, None).unwrap();
        assert_eq!(
            s.by.iter().map(|f| f.name()).collect::<Vec<_>>(),
            ["orig_h", "resp_h", "resp_p", "proto"]
        );
        assert!(s.filter.is_none() && s.percentiles);
        let s = q(Kind::Flows, None, None, None, Some("5m")).unwrap();
        assert!(s.by.is_empty());
        assert_eq!(s.every_ns, Some(300_000_000_000));
        assert_eq!(
            parse_query(Kind::Flows, None, None, None, Some(0), None)
                .unwrap()
                .top,
            None
        );
        assert_eq!(
            parse_query(Kind::Flows, None, None, None, Some(3), None)
                .unwrap()
                .top,
            Some(3)
        );
    }

    #[test]
    fn by_and_sort() {
        let s = q(
            Kind::Flows,
            None,
            Some("sip, dport iface,sip"),
            Some("pkts:asc"),
            None,
        )
        .unwrap();
        assert_eq!(
            s.by.iter().map(|f| f.name()).collect::<Vec<_>>(),
            ["client", "server_port", "iface"]
        );
        assert_eq!(s.sort, (SortKey::Agg(Agg::Pkts), Order::Asc));
        let s = q(Kind::Flows, None, Some("sip,dport"), Some("dport"), None).unwrap();
        assert_eq!(
            s.sort,
            (
                SortKey::Field(Field::col(Kind::Flows, "server_port")),
                Order::Asc
            )
        );
        let s = q(Kind::Flows, None, Some("sip"), Some("sip desc"), None).unwrap();
        assert_eq!(s.sort.1, Order::Desc);
        let s = q(Kind::Conns, None, Some("service"), Some("p95"), None).unwrap();
        assert_eq!(s.sort.0, SortKey::Agg(Agg::P95));
        let s = q(Kind::Conns, None, Some("service"), Some("time"), Some("1h")).unwrap();
        assert_eq!(s.sort, (SortKey::Time, Order::Asc));

        let e = q(Kind::Flows, None, Some("sip,dprt"), None, None).unwrap_err();
        assert_eq!((e.flag, e.column), ("--by", 5));
        assert!(e.message.contains("did you mean 'dport'"), "{e}");
        let e = q(Kind::Flows, None, Some("host"), None, None).unwrap_err();
        assert_eq!(e.column, 1);
        let e = q(Kind::Flows, None, Some("sip"), Some("dport"), None).unwrap_err();
        assert_eq!((e.flag, e.column), ("--sort", 1));
        assert!(e.expected.contains("bytes_out"), "{e}");
        let e = q(Kind::Flows, None, None, Some("p95"), None).unwrap_err();
        assert_eq!(e.flag, "--sort");
        let e = q(Kind::Flows, None, None, Some("bytes sideways"), None).unwrap_err();
        assert_eq!(e.column, 7);
        let e = q(Kind::Flows, None, None, None, Some("5 minutes")).unwrap_err();
        assert_eq!((e.flag, e.column), ("--every", 1));
        assert!(q(Kind::Flows, None, None, None, Some("0s")).is_err());
    }

    #[test]
    fn columns_needed() {
        let mut s = q(
            Kind::Flows,
            Some("dport = 443 and bytes > 1k"),
            Some("sip"),
            None,
            Some("1m"),
        )
        .unwrap();
        assert_eq!(
            s.needed_columns(),
            [
                "server_port",
                "bytes_out",
                "bytes_in",
                "bucket",
                "client",
                "pkts_out",
                "pkts_in",
                "conns"
            ]
        );
        s.time_range = Some((0, 1));
        assert!(s.needed_columns().contains(&"bucket"));
        let s = q(Kind::Conns, None, Some("service"), None, None).unwrap();
        assert_eq!(
            s.needed_columns(),
            [
                "service",
                "orig_bytes",
                "orig_pkts",
                "resp_bytes",
                "resp_pkts",
                "duration"
            ]
        );
    }

    #[test]
    fn ranges_for_pruning() {
        let r = |w: &str| {
            q(Kind::Flows, Some(w), None, None, None)
                .unwrap()
                .numeric_ranges()
        };
        assert_eq!(r("dport = 443"), [("server_port", 443, 443)]);
        assert_eq!(
            r("dport >= 1000 and dport < 2000 and proto = tcp"),
            [("server_port", 1000, 1999), ("proto", 6, 6)]
        );
        assert_eq!(r("dport in (80, 443, 8080)"), [("server_port", 80, 8080)]);
        assert_eq!(r("dport = 80 or dport = 443"), [("server_port", 80, 443)]);
        assert_eq!(r("dport = 80 or proto = udp"), []);
        assert_eq!(r("not dport = 80"), []);
        assert_eq!(r("dport != 80"), []);
        assert_eq!(r("dport < 0"), [("server_port", 1, 0)]);
        assert_eq!(r("bytes > 5"), []);
        assert_eq!(r("bytes_out > 5"), [("bytes_out", 6, u64::MAX)]);
        assert_eq!(
            r("(dport = 1 and proto = tcp) or (dport = 5 and proto = udp)"),
            [("server_port", 1, 5), ("proto", 6, 17)]
        );
        let s = q(
            Kind::Flows,
            Some("sip in 10.0.0.0/8 and host = 1.2.3.4"),
            None,
            None,
            None,
        )
        .unwrap();
        assert_eq!(
            s.ip_ranges(),
            [("client", v4(10, 0, 0, 0), v4(10, 255, 255, 255))]
        );
        let s = q(
            Kind::Conns,
            Some("proto = 6 and dport = 53"),
            None,
            None,
            None,
        )
        .unwrap();
        assert_eq!(s.numeric_ranges(), [("ip_proto", 6, 6), ("resp_p", 53, 53)]);
    }
}
