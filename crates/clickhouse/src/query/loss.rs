//! `wirelog query --clickhouse loss`: the completeness record from
//! ClickHouse's `loss` table, summed by the same code as over the local
//! store (`wirelog_query::loss::LossSums`), so both give the same answer.
//!
//! The table has one row per minute, source and protocol: small (a day of
//! a probe is a few tens of thousands of rows), so its rows of the range
//! and probes cross the network as they are, every column, and the sums
//! (filter, buckets, keys) are formed here rather than in SQL.

use std::fmt::Write;

use wirelog_query::loss::{LossQuery, LossTable};
use wirelog_store::{Batch, Column, Kind};

use super::rowbinary::{empty, push, stream, Cell};
use super::BATCH_ROWS;
use crate::client::{runtime, ChError, Server};
use crate::schema::{literal, ChType, Table};

/// The statement reading the loss rows `q` needs (its columns, its range
/// widened to whole minutes as over the store) of `probes` (empty: all).
pub fn loss_sql(server: &Server, q: &LossQuery, probes: &[String]) -> (String, Vec<(&'static str, ChType)>) {
    let table = Table::Store(Kind::Loss);
    let cols: Vec<(&'static str, ChType)> = q
        .needed_columns()
        .into_iter()
        .filter_map(|name| table.columns().find(|(n, _)| *n == name))
        .collect();
    let mut conds = Vec::new();
    if !probes.is_empty() {
        let p: Vec<String> = probes.iter().map(|p| literal(p)).collect();
        conds.push(format!("probe IN ({})", p.join(", ")));
    }
    if let Some((from, to)) = q.time_range {
        let t = format!("(toUnixTimestamp64Micro(`{}`) * 1000)", table.time_column());
        if from != i64::MIN {
            conds.push(format!("{t} >= {from}"));
        }
        if to != i64::MAX {
            conds.push(format!("{t} < {to}"));
        }
    }
    let names: Vec<String> = cols.iter().map(|(n, _)| format!("`{n}`")).collect();
    let mut sql = format!("SELECT {} FROM {}", names.join(", "), server.table(table));
    if !conds.is_empty() {
        let _ = write!(sql, " WHERE {}", conds.join(" AND "));
    }
    (sql, cols)
}

/// Runs `q` against ClickHouse's `loss` table.
pub fn loss(server: &Server, q: &LossQuery, probes: &[String]) -> Result<LossTable, ChError> {
    let rt = runtime().map_err(|e| ChError(format!("cannot start the ClickHouse client: {e}")))?;
    let client = server.client().with_compression(clickhouse::Compression::None);
    let (sql, cols) = loss_sql(server, q, probes);
    let cells: Vec<Cell> = cols.iter().map(|&(_, t)| Cell::Col(t)).collect();
    let fresh = || cols.iter().map(|&(n, t)| (n, empty(t))).collect::<Vec<(&'static str, Column)>>();
    let mut sums = q.sums();
    let mut columns = fresh();
    let mut rows = 0;
    let consume = |columns: Vec<(&'static str, Column)>, sums: &mut wirelog_query::loss::LossSums| {
        sums.consume(&Batch { kind: Kind::Loss, columns }).map_err(|e| ChError(e.to_string()))
    };
    rt.block_on(stream(server, &client, &sql, &cells, |row| {
        for (i, ((_, col), &(_, ty))) in columns.iter_mut().zip(&cols).enumerate() {
            push(col, ty, row.cell(i));
        }
        rows += 1;
        if rows >= BATCH_ROWS {
            consume(std::mem::replace(&mut columns, fresh()), &mut sums)?;
            rows = 0;
        }
        Ok(())
    }))?;
    if rows > 0 {
        consume(columns, &mut sums)?;
    }
    Ok(sums.finish())
}
