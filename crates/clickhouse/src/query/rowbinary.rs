//! Reading a RowBinary answer as it streams in: whole rows only, each cell
//! checked for length before it is decoded, so a truncated answer is an
//! error, never a panic.

use wirelog_store::Column;

use crate::client::{ChError, Server};
use crate::schema::ChType;

/// One cell of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cell {
    Col(ChType),
    /// `UInt64` (sums, counts).
    U64,
    /// `Array(Tuple(UInt64, Int64, Int64))`: histogram runs.
    Runs,
}

fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let (mut n, mut shift) = (0u64, 0);
    for (i, &byte) in b.iter().enumerate() {
        n |= ((byte & 0x7f) as u64) << shift;
        if byte & 0x80 == 0 {
            return Some((n, i + 1));
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
    None
}

/// Length of one RowBinary value of `cell` at the start of `b`; `None` when
/// `b` ends first.
fn cell_len(cell: Cell, b: &[u8]) -> Option<usize> {
    let fixed = |n: usize| (b.len() >= n).then_some(n);
    let ty = match cell {
        Cell::U64 => return fixed(8),
        Cell::Runs => {
            let (n, i) = varint(b)?;
            let end = (n as usize).checked_mul(24)?.checked_add(i)?;
            return fixed(end);
        }
        Cell::Col(ty) => ty,
    };
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
            let (n, i) = varint(b)?;
            let end = i.checked_add(n as usize)?;
            fixed(end)
        }
    }
}

pub(super) fn le<const N: usize>(b: &[u8]) -> [u8; N] {
    b[..N].try_into().unwrap()
}

/// An empty column of the engine's type for a ClickHouse type.
pub(super) fn empty(ty: ChType) -> Column {
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

/// Appends one value (whose length `cell_len` checked) to its column:
/// times and durations become ns, as in the store's batches.
pub(super) fn push(col: &mut Column, ty: ChType, b: &[u8]) {
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
            let start = varint(b).map_or(b.len(), |(_, i)| i);
            v.push(String::from_utf8_lossy(&b[start..]).into_owned());
        }
        (Column::Bool(v), _) => v.push(b[0] != 0),
        (c, ty) => unreachable!("column {c:?} for {ty:?}"),
    }
}

/// The runs of a `Cell::Runs` value: (count, smallest, largest), as sent.
pub(super) fn runs(b: &[u8]) -> impl Iterator<Item = (u64, i64, i64)> + '_ {
    let start = varint(b).map_or(b.len(), |(_, i)| i);
    b[start..].chunks_exact(24).map(|r| {
        (u64::from_le_bytes(le(r)), i64::from_le_bytes(le(&r[8..])), i64::from_le_bytes(le(&r[16..])))
    })
}

/// One whole row of an answer.
pub(super) struct RowRef<'a> {
    buf: &'a [u8],
    ends: &'a [(usize, usize)],
}

impl<'a> RowRef<'a> {
    /// The bytes of cell `i`.
    pub fn cell(&self, i: usize) -> &'a [u8] {
        let (s, e) = self.ends[i];
        &self.buf[s..e]
    }
}

/// Runs `sql` and hands each whole row to `row`, in order.
pub(super) async fn stream(
    server: &Server,
    client: &clickhouse::Client,
    sql: &str,
    cells: &[Cell],
    mut row: impl FnMut(RowRef) -> Result<(), ChError>,
) -> Result<(), ChError> {
    // Raw: a `?` inside a quoted value is text, not a bind placeholder.
    let mut cursor = client.query_raw(sql).fetch_bytes("RowBinary").map_err(|e| ChError(e.to_string()))?;
    let mut buf: Vec<u8> = Vec::new();
    let mut ends: Vec<(usize, usize)> = Vec::with_capacity(cells.len());
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
            ends.clear();
            let mut p = at;
            for &cell in cells {
                match cell_len(cell, &buf[p..]) {
                    Some(n) => {
                        ends.push((p, p + n));
                        p += n;
                    }
                    None => break 'rows,
                }
            }
            row(RowRef { buf: &buf, ends: &ends })?;
            at = p;
        }
        buf.drain(..at);
        if done {
            if !buf.is_empty() {
                return Err(ChError(format!("ClickHouse's answer ends inside a row ({} bytes left)", buf.len())));
            }
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_wait_for_all_their_bytes() {
        assert_eq!(cell_len(Cell::Runs, &[2]), None);
        let mut runs_bytes = vec![1u8];
        runs_bytes.extend(3u64.to_le_bytes());
        runs_bytes.extend((-5i64).to_le_bytes());
        runs_bytes.extend(9i64.to_le_bytes());
        assert_eq!(cell_len(Cell::Runs, &runs_bytes), Some(25));
        assert_eq!(runs(&runs_bytes).collect::<Vec<_>>(), [(3, -5, 9)]);
        assert_eq!(cell_len(Cell::Col(ChType::Str), &[3, b'a', b'b']), None);
        assert_eq!(cell_len(Cell::Col(ChType::Str), &[2, b'a', b'b']), Some(3));
        assert_eq!(cell_len(Cell::Col(ChType::Dur), &[1]), Some(1));
        assert_eq!(cell_len(Cell::Col(ChType::Dur), &[0, 1]), None);
        // A length that overflows is never taken as whole.
        assert_eq!(cell_len(Cell::Runs, &[0xff; 12]), None);
    }
}
