//! wirelog's query language and engine: `wirelog query <flows|conns|http|mysql|pgsql|redis|dns> [--where
//! EXPR] [--by FIELDS] [--sort FIELD] [--top N] [--every DUR]` over the store's
//! columnar batches.
//!
//! ```
//! use wirelog_query::{parse_query, render, Engine, Format};
//! use wirelog_store::{Batch, Column, Kind};
//!
//! let spec = parse_query(Kind::Flows, Some("dport = 443 and sip in 10.0.0.0/8"), Some("sip"), None, None, None)?;
//! // The store reads only these columns (and may prune row groups by `spec.numeric_ranges()`).
//! assert!(spec.needed_columns().contains(&"server_port"));
//! let mut engine = Engine::new(spec)?;
//! let ip = |d: u8| wirelog_query::value::v4(10, 0, 0, d);
//! let batch = Batch {
//!     kind: Kind::Flows,
//!     columns: vec![
//!         ("server_port", Column::U16(vec![443, 443, 80])),
//!         ("client", Column::Ip(vec![ip(1), ip(1), ip(2)])),
//!         ("bytes_out", Column::U64(vec![100, 200, 300])),
//!         ("pkts_out", Column::U64(vec![1, 2, 3])),
//!         ("bytes_in", Column::U64(vec![1000, 2000, 3000])),
//!         ("pkts_in", Column::U64(vec![1, 2, 3])),
//!         ("conns", Column::U32(vec![1, 1, 1])),
//!     ],
//! };
//! engine.consume(&batch)?;
//! let table = engine.finish();
//! assert_eq!(table.rows.len(), 1);
//! assert_eq!(table.rows[0].acc.bytes(), 3300);
//! let mut out = Vec::new();
//! render(&table, Format::Csv, &mut out)?;
//! assert_eq!(String::from_utf8(out)?, "client,conns,pkts_out,pkts_in,pkts,bytes_out,bytes_in,bytes\n10.0.0.1,2,3,3,6,300,3000,3300\n");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The `--where` language
//!
//! ```text
//! expr      = and_expr , { ( "or" | "||" ) , and_expr } ;
//! and_expr  = unary , { ( "and" | "&&" ) , unary } ;
//! unary     = ( "not" | "!" ) , unary | primary ;
//! primary   = "(" , expr , ")" | condition ;
//! condition = field , op , value
//!           | field , [ "not" ] , "in" , ( value | "(" , value , { "," , value } , ")" ) ;
//! op        = "=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">=" | "~" | "!~" ;
//! field     = word ;
//! value     = word | quoted ;
//! word      = { any character except white space and ( ) , " ' = ! < > ~ & | } ;
//! quoted    = '"' , { char | '\"' | '\\' } , '"' | "'" , { char } , "'" ;
//! ```
//!
//! `not` binds tightest, then `and`, then `or`; keywords are case-insensitive.
//!
//! **Fields.** Every store column by name, plus aliases: for flows goQuery's
//! `sip`, `dip`, `dport`, `time` (client, server, server_port, bucket); for
//! connections Zeek's `id.orig_h`, `id.orig_p`, `id.resp_h`, `id.resp_p`, the
//! short `orig_h`..., and `sip`, `dip`, `sport`, `dport`, `time`, `state`.
//! Names covering two columns: `host`/`net`/`addr` (either address), `port`
//! (either port on connections; `server_port` on flows), `bytes` and
//! `pkts`/`packets` (out + in).
//!
//! Transactions (`http`, `mysql`, `pgsql`, `redis`, `dns`): the store's
//! columns by name, with `sip`/`src`/`orig_h` (client), `dip`/`dst`/`resp_h`
//! (server), `sport`, `dport`, `proto` (transport), `time` (ts), `ttfb`
//! (first_byte_latency) and a few per kind (`code` for `status_code`, `fp`
//! for `fingerprint`, `db`, `cmd`, `qname`, ...). `ip`/`net`/`addr` are
//! either address, and so is `host` except for http, whose `host` is the
//! Host header; `port` is either port, `bytes` request + response.
//!
//! **Values**, checked against the field:
//! - addresses: `10.0.0.1`, `2001:db8::1`, CIDRs `10.0.0.0/8`, `fe80::/10`;
//!   `=` with a CIDR means "in the block"; operators `=`, `!=`, `in`, `not in`;
//! - numbers: ports, VLANs plain; byte counts with `k`, `M`, `G`, `T` (×1000,
//!   optional `B`) or `KiB`, `MiB`, `GiB`, `TiB`; packet counts with `k`, `M`, `G`;
//! - `proto`: names (`tcp`, `udp`, `icmp`, `icmp6`, ...) or numbers. On
//!   connections a name compares Zeek's `proto` text and a number `ip_proto`;
//! - times: RFC 3339 (`2024-05-01T12:00:00Z`, with an offset, or without one
//!   for UTC), a date (`2024-05-01`), or Unix seconds;
//! - durations: `500ms`, `1.5s`, `2m`, `1h30m`; a bare number is seconds;
//! - text: a bare word or a quoted string; `=` is exact (case-sensitive), `~`
//!   is "contains", anchored with a leading `^` (starts with) and/or a
//!   trailing `$` (ends with); no regular expressions. Zeek's unset `service`
//!   is the empty string: `service = ""`;
//! - booleans: `true`/`false`, `T`/`F`, `yes`/`no`, `1`/`0`.
//!
//! **Unset values** (Zeek's `-` in `duration`, `orig_bytes`, `resp_bytes`,
//! `vlan`, `inner_vlan`) pass no comparison; `!=`, `!~` and `not in` are the
//! negations of `=`, `~` and `in`, so they do match them.
//!
//! Errors point at the column of the offending token and say what was
//! expected there ([`QueryError`]).
//!
//! # Aggregation
//!
//! Each group sums bytes and packets per direction and counts connections
//! (flows' `conns` column; connection records). For connections it keeps
//! duration p50/p95/p99 from a log-bucketed histogram, within
//! max(3.125 %, 500 ns) of the exact nearest-rank value ([`hist`]).
//! Transactions have `count`, `errors` (status "error"), `request_bytes`,
//! `response_bytes`, `bytes`, latency p50/p95/p99 from the same histogram
//! (`--sort` accepts `p99`, `latency_p99` and `p99_latency`) and
//! `latency_avg` (exact mean over the rows with a latency); default key http
//! `host`, mysql/pgsql `fingerprint`, redis `command`, dns
//! `query,qtype_name`, sorted by count.
//! `--every` adds the interval start (time floored to a multiple of the
//! interval) to the key; `--top` then counts series, ranked by their total
//! over the whole range, and rows come by time, then by series rank.
//! Intervals without rows are absent, not zero.
//!
//! Ties in the sort order are broken by the group-by values ascending, so the
//! output is deterministic.

// The one exception is `table::prefetch` (a cache hint, x86 intrinsic),
// allowed there; everything else is safe code.
#![deny(unsafe_code)]

pub mod engine;
pub mod error;
pub mod expr;
pub mod field;
mod filter;
mod hash;
pub mod loss;
pub mod hist;
pub mod key;
pub mod parse;
pub mod render;
pub mod spec;
pub mod table;
pub mod time;
pub mod value;

#[cfg(test)]
mod tests;

pub use engine::{Engine, Partial, ResultTable, Row};
pub use error::{QueryError, SchemaError, SchemaProblem};
pub use expr::{CmpOp, Expr, Operand, Pred, Test};
pub use field::{Field, Ty, Unit};
pub use key::KeyValue;
pub use parse::parse_where;
pub use render::{default_format, render, Format};
pub use spec::{default_by, parse_query, Agg, Order, QuerySpec, SortKey, DEFAULT_TOP};
pub use table::Acc;

/// Parses a `--last` duration (`15m`, `24h`, `7d`) into ns.
pub fn parse_last(s: &str) -> Result<i64, QueryError> {
    match time::parse_duration(s, false) {
        Some(ns) if ns > 0 => Ok(ns),
        _ => Err(QueryError::new(
            "--last",
            s,
            1,
            "a positive duration such as 15m, 24h or 7d",
            &format!("'{}'", s.trim()),
        )),
    }
}

/// Parses a `--from`/`--to` time: RFC 3339, a date, Unix seconds, `now`, or
/// `now-DUR` / `-DUR` relative to `now_ns`.
pub fn parse_time_arg(flag: &'static str, s: &str, now_ns: i64) -> Result<i64, QueryError> {
    let t = s.trim();
    let rel = t.strip_prefix("now").unwrap_or(t);
    let parsed = if t == "now" {
        Some(now_ns)
    } else if let Some(d) = rel.strip_prefix('-') {
        time::parse_duration(d, false).map(|d| now_ns.saturating_sub(d))
    } else {
        time::parse_time(t)
    };
    parsed.ok_or_else(|| {
        QueryError::new(
            flag,
            s,
            1,
            "a time (2024-05-01T12:00:00Z, 2024-05-01, Unix seconds, now, or now-1h)",
            &format!("'{t}'"),
        )
    })
}
