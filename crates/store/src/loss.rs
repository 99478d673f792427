//! The loss table's write buffer: [`LossRecord`]s as rows of
//! [`schema::loss_columns`] (see `wirelog_record::loss` for what they count).

use wirelog_record::LossRecord;

use crate::batch::Kind;
use crate::encode::{req_i64, strings, PqValues, RowSource};
use crate::time::NS_PER_US;

/// Columns before the counts: ts, source, protocol.
const HEAD: usize = 3;

#[derive(Default)]
pub(crate) struct LossRows {
    pub(crate) rows: Vec<LossRecord>,
}

impl RowSource for LossRows {
    fn kind(&self) -> Kind {
        Kind::Loss
    }
    fn len(&self) -> usize {
        self.rows.len()
    }
    fn time_ns(&self, row: usize) -> i64 {
        self.rows[row].ts_ns
    }
    fn sort_rows(&self, rows: &mut [u32]) {
        rows.sort_by_key(|&r| self.rows[r as usize].ts_ns);
    }
    fn values(&self, col: usize, rows: &[u32]) -> PqValues {
        let r = |i: usize| &self.rows[i];
        match col {
            0 => req_i64(rows, |i| r(i).ts_ns.div_euclid(NS_PER_US)),
            1 => strings(rows, false, |i| Some(r(i).source.as_bytes())),
            2 => strings(rows, true, |i| r(i).protocol.map(|p| p.name().as_bytes())),
            c => req_i64(rows, |i| r(i).counts.0[c - HEAD] as i64),
        }
    }
}
