//! The fields a query can name, per record kind: the store's columns, their
//! aliases (goQuery's names for flows, Zeek's for connections), and what kind
//! of value each one takes.
//!
//! The table here is the single place the parser, the filter compiler, the
//! key packer and the renderer ask; a protocol's own fields come from its
//! declared columns ([`wirelog_record::columns`]).

use std::sync::OnceLock;

use wirelog_record::columns::{self, Column, Type as Holds};
use wirelog_record::Protocol;
use wirelog_store::Kind;

/// What a field holds, as far as the query language is concerned. The batch
/// variant may be wider (an optional `U16` column arrives as `OptU64`); every
/// integer variant is accepted for a `UInt` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ty {
    /// Unsigned integer of at most `bits` bits (8, 16, 32 or 64).
    UInt {
        bits: u8,
        unit: Unit,
    },
    /// A point in time, ns since the epoch (`I64`).
    Time,
    /// A duration in ns (`OptI64`: Zeek leaves it unset for some connections).
    Duration,
    /// An IPv4 (v4-mapped) or IPv6 address.
    Ip,
    Str,
    Bool,
}

/// How an unsigned value is written and shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// Plain integer (ports, VLAN ids).
    Plain,
    /// Byte count: accepts `10k`, `5MB`, `2GiB`; shown as `1.2 MB`.
    Bytes,
    /// Packet or connection count: accepts `12k`, `3M`; shown as `12.3k`.
    Count,
    /// IP protocol number: accepts names (`tcp`); shown as a name.
    Proto,
}

#[derive(Clone, Copy)]
struct Def {
    /// The store's column name, also the canonical name in output.
    name: &'static str,
    ty: Ty,
    aliases: &'static [&'static str],
    /// The store may leave it unset (`OptU64`/`OptI64`); optional text reads as "".
    nullable: bool,
}

const U8P: Ty = Ty::UInt {
    bits: 8,
    unit: Unit::Proto,
};
const U16: Ty = Ty::UInt {
    bits: 16,
    unit: Unit::Plain,
};
const U32C: Ty = Ty::UInt {
    bits: 32,
    unit: Unit::Count,
};
const U64B: Ty = Ty::UInt {
    bits: 64,
    unit: Unit::Bytes,
};
const U64C: Ty = Ty::UInt {
    bits: 64,
    unit: Unit::Count,
};

const U64: Ty = Ty::UInt {
    bits: 64,
    unit: Unit::Plain,
};

const fn def(name: &'static str, ty: Ty, aliases: &'static [&'static str]) -> Def {
    Def {
        name,
        ty,
        aliases,
        nullable: false,
    }
}

/// A field the store may leave unset.
const fn opt(name: &'static str, ty: Ty, aliases: &'static [&'static str]) -> Def {
    Def {
        name,
        ty,
        aliases,
        nullable: true,
    }
}

static FLOWS: &[Def] = &[
    def("bucket", Ty::Time, &["time"]),
    def("iface", Ty::Str, &[]),
    def("client", Ty::Ip, &["sip", "src"]),
    def("server", Ty::Ip, &["dip", "dst"]),
    def("server_port", U16, &["dport"]),
    def("proto", U8P, &[]),
    def("bytes_out", U64B, &[]),
    def("pkts_out", U64C, &["packets_out"]),
    def("bytes_in", U64B, &[]),
    def("pkts_in", U64C, &["packets_in"]),
    def("first", Ty::Time, &[]),
    def("last", Ty::Time, &[]),
    def("conns", U32C, &[]),
];

/// The owners of both ends (`capture --processes`), the last columns of
/// connections and of every transaction kind.
const OWNERS: [Def; 12] = [
    opt("orig_pid", U64, &[]),
    def("orig_proc", Ty::Str, &[]),
    def("orig_exe", Ty::Str, &[]),
    def("orig_user", Ty::Str, &[]),
    def("orig_container", Ty::Str, &[]),
    def("orig_pod", Ty::Str, &[]),
    opt("resp_pid", U64, &[]),
    def("resp_proc", Ty::Str, &[]),
    def("resp_exe", Ty::Str, &[]),
    def("resp_user", Ty::Str, &[]),
    def("resp_container", Ty::Str, &[]),
    def("resp_pod", Ty::Str, &[]),
];

/// A kind's fields, then the [`OWNERS`].
macro_rules! with_owners {
    ($($def:expr),* $(,)?) => {
        &[
            $($def,)*
            OWNERS[0], OWNERS[1], OWNERS[2], OWNERS[3], OWNERS[4], OWNERS[5],
            OWNERS[6], OWNERS[7], OWNERS[8], OWNERS[9], OWNERS[10], OWNERS[11],
        ]
    };
}

static CONNS: &[Def] = with_owners![
    def("ts", Ty::Time, &["time"]),
    def("uid", Ty::Str, &[]),
    def("orig_h", Ty::Ip, &["id.orig_h", "sip", "src"]),
    def("orig_p", U16, &["id.orig_p", "sport"]),
    def("resp_h", Ty::Ip, &["id.resp_h", "dip", "dst"]),
    def("resp_p", U16, &["id.resp_p", "dport"]),
    // Zeek's transport name; a number given for `proto` compares `ip_proto`.
    def("proto", Ty::Str, &[]),
    def("service", Ty::Str, &[]),
    opt("duration", Ty::Duration, &[]),
    opt("orig_bytes", U64B, &[]),
    opt("resp_bytes", U64B, &[]),
    def("conn_state", Ty::Str, &["state"]),
    def("local_orig", Ty::Bool, &[]),
    def("local_resp", Ty::Bool, &[]),
    def("missed_bytes", U64B, &[]),
    def("history", Ty::Str, &[]),
    def("orig_pkts", U64C, &[]),
    def("orig_ip_bytes", U64B, &[]),
    def("resp_pkts", U64C, &[]),
    def("resp_ip_bytes", U64B, &[]),
    def("ip_proto", U8P, &[]),
    def("community_id", Ty::Str, &[]),
    opt("vlan", U16, &[]),
    opt("inner_vlan", U16, &[]),
    def("empty_tcp_skipped", Ty::Bool, &[]),
];

/// The fields every transaction kind starts with; its own follow (declared
/// beside the protocol's transaction type: [`wirelog_record::columns`]),
/// then the [`OWNERS`].
const TX_HEAD: [Def; 12] = [
    def("ts", Ty::Time, &["time"]),
    def("uid", Ty::Str, &[]),
    def("client", Ty::Ip, &["sip", "src", "orig_h", "id.orig_h"]),
    def("client_port", U16, &["sport", "orig_p", "id.orig_p"]),
    def("server", Ty::Ip, &["dip", "dst", "resp_h", "id.resp_h"]),
    def("server_port", U16, &["dport", "resp_p", "id.resp_p"]),
    def("transport", U8P, &["proto"]),
    def("status", Ty::Str, &[]),
    opt("request_bytes", U64B, &["req_bytes"]),
    opt("response_bytes", U64B, &["resp_bytes"]),
    opt("latency", Ty::Duration, &[]),
    opt("first_byte_latency", Ty::Duration, &["ttfb"]),
];

/// The query field of a declared column: text for text and lists, the
/// count's width and unit, a time in seconds as their number; nullable
/// unless text or a flag.
fn declared(c: &Column) -> Def {
    let ty = match c.ty {
        Holds::Text | Holds::Enum | Holds::List(_) => Ty::Str,
        // A count stored wider than its values (DNS's 16-bit fields, RFC 1035
        // 4.1.1, 4.1.2) is queried at its values' width.
        Holds::Count { bits, unit } => Ty::UInt {
            bits: c.fits_bits.unwrap_or(bits),
            unit: match unit {
                columns::Unit::Plain => Unit::Plain,
                columns::Unit::Bytes => Unit::Bytes,
                columns::Unit::Count => Unit::Count,
            },
        },
        Holds::TimeSecs => U64,
        Holds::Bool => Ty::Bool,
        Holds::Interval => Ty::Duration,
    };
    Def {
        name: c.name,
        ty,
        aliases: c.aliases,
        nullable: c.optional() && ty != Ty::Str,
    }
}

/// Each protocol's fields, built once from its declaration.
fn tx_defs(p: Protocol) -> &'static [Def] {
    static DEFS: OnceLock<Vec<Vec<Def>>> = OnceLock::new();
    &DEFS.get_or_init(|| {
        Protocol::ALL
            .iter()
            .map(|&p| {
                let own = columns::of(p).stored().into_iter().map(declared);
                let weight = declared(&columns::SAMPLE_WEIGHT);
                TX_HEAD.iter().copied().chain([weight]).chain(own).chain(OWNERS).collect()
            })
            .collect()
    })[p.index()]
}

/// Certificates (the store's x509 kind); times in Unix seconds.
static X509: &[Def] = &[
    def("ts", Ty::Time, &["time"]),
    def("fingerprint", Ty::Str, &["fp"]),
    def("role", Ty::Str, &[]),
    def("host_cert", Ty::Bool, &[]),
    def("handshakes", U64C, &[]),
    def("version", U64, &[]),
    def("serial", Ty::Str, &[]),
    def("subject", Ty::Str, &[]),
    def("issuer", Ty::Str, &[]),
    opt("not_valid_before", U64, &[]),
    opt("not_valid_after", U64, &["expires"]),
    def("key_alg", Ty::Str, &[]),
    def("sig_alg", Ty::Str, &[]),
    def("key_type", Ty::Str, &[]),
    opt("key_length", U64, &[]),
    def("exponent", Ty::Str, &[]),
    def("curve", Ty::Str, &[]),
    def("san_dns", Ty::Str, &["san"]),
    def("san_uri", Ty::Str, &[]),
    def("san_email", Ty::Str, &[]),
    def("san_ip", Ty::Str, &[]),
    def("basic_constraints_ca", Ty::Bool, &["ca"]),
    opt("basic_constraints_path_len", U64, &["path_len"]),
];

/// The loss table (`wirelog query loss`): its minute, source, protocol,
/// and one count per [`wirelog_record::LossCount`].
fn loss_defs() -> &'static [Def] {
    static DEFS: OnceLock<Vec<Def>> = OnceLock::new();
    DEFS.get_or_init(|| {
        let head = [def("ts", Ty::Time, &["time", "minute"]), def("source", Ty::Str, &["iface", "file"]), def("protocol", Ty::Str, &[])];
        let counts = wirelog_record::LossCount::ALL.iter().map(|c| {
            let ty = if c.name().ends_with("bytes") { U64B } else { U64C };
            def(c.name(), ty, &[])
        });
        head.into_iter().chain(counts).collect()
    })
}

fn defs(kind: Kind) -> &'static [Def] {
    match kind {
        Kind::Flows => FLOWS,
        Kind::Conns => CONNS,
        Kind::X509 => X509,
        Kind::Loss => loss_defs(),
        _ => match kind.protocol() {
            Some(p) => tx_defs(p),
            None => unreachable!("every kind but flows, conns, x509 and loss is a protocol's"),
        },
    }
}

/// One column of a record kind. Small and `Copy`: it is an index into the
/// kind's static schema table.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Field {
    kind: Kind,
    idx: u8,
}

impl std::fmt::Debug for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.kind.as_str(), self.name())
    }
}

impl std::fmt::Display for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Field {
    /// The field called `name` (a column name or an alias, any case).
    pub fn lookup(kind: Kind, name: &str) -> Option<Field> {
        let lower = name.to_ascii_lowercase();
        defs(kind)
            .iter()
            .position(|d| d.name == lower || d.aliases.contains(&lower.as_str()))
            .map(|i| Field { kind, idx: i as u8 })
    }

    /// The field whose column is `name` exactly. Panics on an unknown name:
    /// only for names that are constants in this crate.
    pub(crate) fn col(kind: Kind, name: &str) -> Field {
        let idx = defs(kind)
            .iter()
            .position(|d| d.name == name)
            .expect("known column");
        Field {
            kind,
            idx: idx as u8,
        }
    }

    /// All fields of a kind, in the store's column order.
    pub fn all(kind: Kind) -> impl Iterator<Item = Field> {
        (0..defs(kind).len()).map(move |i| Field { kind, idx: i as u8 })
    }

    pub fn kind(self) -> Kind {
        self.kind
    }

    /// The store's column name.
    pub fn name(self) -> &'static str {
        defs(self.kind)[self.idx as usize].name
    }

    pub fn ty(self) -> Ty {
        defs(self.kind)[self.idx as usize].ty
    }

    pub fn aliases(self) -> &'static [&'static str] {
        defs(self.kind)[self.idx as usize].aliases
    }

    /// Whether the store may leave the value unset (an optional Parquet
    /// column, read as `OptU64`/`OptI64`).
    pub fn nullable(self) -> bool {
        defs(self.kind)[self.idx as usize].nullable
    }

    /// The column a kind's time series and time ranges use.
    pub fn time(kind: Kind) -> Field {
        Field::col(kind, if kind == Kind::Flows { "bucket" } else { "ts" })
    }

    /// Every name a user may type for this kind, for "did you mean" hints.
    pub(crate) fn all_names(kind: Kind) -> impl Iterator<Item = &'static str> {
        defs(kind)
            .iter()
            .flat_map(|d| std::iter::once(d.name).chain(d.aliases.iter().copied()))
    }
}

/// The per-direction value columns a kind's aggregates sum.
///
/// Transactions reuse the slots: `bytes_out`/`bytes_in` are the request and
/// response bytes, `pkts_out` is [`ERRORS`] (rows whose `status` is
/// "error" count 1), `pkts_in` the `latency` (ns, unset counts 0), and every
/// row is one transaction.
pub(crate) struct ValueCols {
    pub bytes_out: &'static str,
    pub pkts_out: &'static str,
    pub bytes_in: &'static str,
    pub pkts_in: &'static str,
    /// `None`: every row is one connection (transaction).
    pub conns: Option<&'static str>,
}

/// The column that says how many records a row stands for: transactions'
/// `sample_weight` (1, or N for a connection parsed 1 in N under
/// `capture --cpu-budget`; unset in files from before it, counting 1).
/// Counts, sums and the latency histogram weigh each row by it.
pub(crate) fn weight_col(kind: Kind) -> Option<&'static str> {
    kind.is_tx().then_some(wirelog_record::columns::SAMPLE_WEIGHT.name)
}

/// The value column of transactions that counts errors.
pub(crate) const ERRORS: &str = "status";

/// The status value [`ERRORS`] counts.
pub(crate) const ERROR_STATUS: &str = "error";

/// The column whose values feed the percentile histogram: connections'
/// `duration`, transactions' `latency`.
pub(crate) fn hist_col(kind: Kind) -> Option<&'static str> {
    match kind {
        Kind::Flows | Kind::X509 => None,
        Kind::Conns => Some("duration"),
        _ => Some("latency"),
    }
}

pub(crate) fn value_cols(kind: Kind) -> ValueCols {
    match kind {
        Kind::Flows => ValueCols {
            bytes_out: "bytes_out",
            pkts_out: "pkts_out",
            bytes_in: "bytes_in",
            pkts_in: "pkts_in",
            conns: Some("conns"),
        },
        Kind::Conns => ValueCols {
            bytes_out: "orig_bytes",
            pkts_out: "orig_pkts",
            bytes_in: "resp_bytes",
            pkts_in: "resp_pkts",
            conns: None,
        },
        // Certificates have no bytes or packets: every slot reads the
        // handshake count, and only its sum is shown (`handshakes`).
        Kind::X509 => ValueCols {
            bytes_out: "handshakes",
            pkts_out: "handshakes",
            bytes_in: "handshakes",
            pkts_in: "handshakes",
            conns: Some("handshakes"),
        },
        _ => ValueCols {
            bytes_out: "request_bytes",
            pkts_out: ERRORS,
            bytes_in: "response_bytes",
            pkts_in: "latency",
            conns: None,
        },
    }
}

/// IP protocol names accepted for `proto`, and shown for its numbers.
pub(crate) const PROTO_NAMES: &[(&str, u8)] = &[
    ("icmp", 1),
    ("igmp", 2),
    ("tcp", 6),
    ("udp", 17),
    ("gre", 47),
    ("esp", 50),
    ("ah", 51),
    ("icmp6", 58),
    ("icmpv6", 58),
    ("ipv6-icmp", 58),
    ("ospf", 89),
    ("pim", 103),
    ("vrrp", 112),
    ("sctp", 132),
];

pub(crate) fn proto_number(name: &str) -> Option<u8> {
    let lower = name.to_ascii_lowercase();
    PROTO_NAMES
        .iter()
        .find(|(n, _)| *n == lower)
        .map(|&(_, p)| p)
}

pub(crate) fn proto_name(p: u8) -> Option<&'static str> {
    PROTO_NAMES
        .iter()
        .find(|&&(_, n)| n == p)
        .map(|&(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_resolve() {
        assert_eq!(Field::lookup(Kind::Flows, "sip").unwrap().name(), "client");
        assert_eq!(
            Field::lookup(Kind::Flows, "DPORT").unwrap().name(),
            "server_port"
        );
        assert_eq!(Field::lookup(Kind::Flows, "time").unwrap().name(), "bucket");
        assert_eq!(
            Field::lookup(Kind::Conns, "id.orig_h").unwrap().name(),
            "orig_h"
        );
        assert_eq!(
            Field::lookup(Kind::Conns, "dport").unwrap().name(),
            "resp_p"
        );
        assert_eq!(
            Field::lookup(Kind::Conns, "sport").unwrap().name(),
            "orig_p"
        );
        assert!(Field::lookup(Kind::Flows, "history").is_none());
    }

    #[test]
    fn schema_matches_store() {
        // The store's schema is the source of truth for column names and order.
        for kind in Kind::ALL {
            let ours: Vec<_> = Field::all(kind).map(Field::name).collect();
            let store: Vec<_> = wirelog_store::schema::columns(kind)
                .iter()
                .map(|c| c.name)
                .collect();
            assert_eq!(ours, store, "{kind:?}");
        }
        for kind in Kind::ALL {
            for n in Field::all_names(kind) {
                assert_eq!(n, n.to_ascii_lowercase());
                // A name means one field.
                assert_eq!(
                    Field::all_names(kind).filter(|m| *m == n).count(),
                    1,
                    "{kind:?} {n}"
                );
            }
            // Nullable exactly where the store's column is optional and not text.
            for (f, c) in Field::all(kind).zip(wirelog_store::schema::columns(kind)) {
                assert_eq!(
                    f.nullable(),
                    c.is_optional() && f.ty() != Ty::Str,
                    "{kind:?} {}",
                    f.name()
                );
            }
        }
    }
}
