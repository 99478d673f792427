//! Columnar batches: what the store reads back and what queries run on.
//!
//! A batch holds rows of one record kind as typed column vectors, so a
//! filter or an aggregate is a loop over a slice of integers, not a walk
//! over rows of dynamic values.

/// The record kinds the store keeps, one table (and directory) each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Flows,
    Conns,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Flows => "flows",
            Kind::Conns => "conns",
        }
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
        self.columns.iter().find(|(n, _)| *n == name).map(|(_, c)| c)
    }
}
