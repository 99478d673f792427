//! Columnar batches: what the store reads back and what queries run on.
//!
//! A batch holds rows of one record kind as typed column vectors, so a
//! filter or an aggregate is a loop over a slice of integers, not a walk
//! over rows of dynamic values.

use wirelog_record::Protocol;

/// Declares [`Kind`] from the protocol table's rows (see
/// `wirelog_record::protocol_table`): one kind per protocol, after flows and
/// connections.
macro_rules! kinds {
    ($($(#[$doc:meta])* $v:ident { $($row:tt)* })*) => {
        /// The record kinds the store keeps, one table (and directory) each:
        /// flows, connections, the transactions of each protocol
        /// ([`Protocol::ALL`]), whose rows are [`crate::TxRow`]s, and the
        /// certificates TLS handshakes showed (outside the protocol table:
        /// they come from TLS transactions, not from a parser of their own).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Kind {
            Flows,
            Conns,
            $($(#[$doc])* $v,)*
            /// X.509 certificates, one row per certificate, role and hour.
            X509,
            /// The completeness record: what each capture source lost, per
            /// minute and cause (`wirelog_record::loss`).
            Loss,
        }

        impl Kind {
            /// Every kind, in directory (and retention tie-break) order.
            pub const ALL: [Kind; 4 + Protocol::ALL.len()] = [Kind::Flows, Kind::Conns, $(Kind::$v,)* Kind::X509, Kind::Loss];

            /// The transaction kinds, in [`Protocol::ALL`] order.
            pub const TX: [Kind; Protocol::ALL.len()] = [$(Kind::$v),*];

            /// The kind of a protocol's transactions.
            pub const fn tx(p: Protocol) -> Kind {
                match p {
                    $(Protocol::$v => Kind::$v,)*
                }
            }

            /// The protocol of a transaction kind.
            pub const fn protocol(self) -> Option<Protocol> {
                match self {
                    Kind::Flows | Kind::Conns | Kind::X509 | Kind::Loss => None,
                    $(Kind::$v => Some(Protocol::$v),)*
                }
            }
        }
    };
}

wirelog_record::protocol_table!(kinds);

impl Kind {
    /// The directory name under the store, also the `wirelog.kind` of its files.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Flows => "flows",
            Kind::Conns => "conns",
            Kind::X509 => "x509",
            Kind::Loss => "loss",
            _ => self.protocol().expect("a transaction kind").name(),
        }
    }

    /// The kind whose [`Kind::as_str`] is `name`.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Whether rows of this kind are application transactions.
    pub fn is_tx(self) -> bool {
        self.protocol().is_some()
    }
}

/// One column. Times are nanoseconds since the epoch (stored as microseconds).
/// A missing value (Zeek's unset field) is `None` in the optional variants.
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    OptU64(Vec<Option<u64>>),
    I64(Vec<i64>),
    OptI64(Vec<Option<i64>>),
    /// IP addresses, IPv4 stored v4-mapped (::ffff:a.b.c.d).
    Ip(Vec<[u8; 16]>),
    Str(Vec<String>),
    Bool(Vec<bool>),
}

impl Column {
    pub fn len(&self) -> usize {
        match self {
            Column::U8(v) => v.len(),
            Column::U16(v) => v.len(),
            Column::U32(v) => v.len(),
            Column::U64(v) => v.len(),
            Column::OptU64(v) => v.len(),
            Column::I64(v) => v.len(),
            Column::OptI64(v) => v.len(),
            Column::Ip(v) => v.len(),
            Column::Str(v) => v.len(),
            Column::Bool(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends `other`'s values. Returns false, appending nothing, when the
    /// two columns hold different types.
    #[must_use]
    pub fn append(&mut self, other: Column) -> bool {
        match (self, other) {
            (Column::U8(a), Column::U8(b)) => a.extend(b),
            (Column::U16(a), Column::U16(b)) => a.extend(b),
            (Column::U32(a), Column::U32(b)) => a.extend(b),
            (Column::U64(a), Column::U64(b)) => a.extend(b),
            (Column::OptU64(a), Column::OptU64(b)) => a.extend(b),
            (Column::I64(a), Column::I64(b)) => a.extend(b),
            (Column::OptI64(a), Column::OptI64(b)) => a.extend(b),
            (Column::Ip(a), Column::Ip(b)) => a.extend(b),
            (Column::Str(a), Column::Str(b)) => a.extend(b),
            (Column::Bool(a), Column::Bool(b)) => a.extend(b),
            _ => return false,
        }
        true
    }
}

impl Column {
    /// The values at `rows`, in that order.
    pub(crate) fn select(&self, rows: &[usize]) -> Column {
        fn pick<T: Clone>(v: &[T], rows: &[usize]) -> Vec<T> {
            rows.iter().map(|&r| v[r].clone()).collect()
        }
        match self {
            Column::U8(v) => Column::U8(pick(v, rows)),
            Column::U16(v) => Column::U16(pick(v, rows)),
            Column::U32(v) => Column::U32(pick(v, rows)),
            Column::U64(v) => Column::U64(pick(v, rows)),
            Column::OptU64(v) => Column::OptU64(pick(v, rows)),
            Column::I64(v) => Column::I64(pick(v, rows)),
            Column::OptI64(v) => Column::OptI64(pick(v, rows)),
            Column::Ip(v) => Column::Ip(pick(v, rows)),
            Column::Str(v) => Column::Str(pick(v, rows)),
            Column::Bool(v) => Column::Bool(pick(v, rows)),
        }
    }
}

/// Rows of one kind, as named columns of equal length.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    pub kind: Kind,
    pub columns: Vec<(&'static str, Column)>,
}

impl Batch {
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, |(_, c)| c.len())
    }

    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, c)| c)
    }
}
