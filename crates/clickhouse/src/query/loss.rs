//! `wirelog query --clickhouse loss`: the completeness record from
//! ClickHouse's `loss` table, summed by the same code as over the local
//! store (`wirelog_query::loss::LossSums`), so both give the same answer.
//!
//! The table has one row per minute, source and protocol: small (a day of
//! a probe is a few tens of thousands of rows), so its rows of the range
//! and probes cross the network as they are, every column, and the sums
//! (filter, buckets, keys) are formed here rather than in SQL.

use wirelog_query::loss::{LossQuery, LossTable};
use wirelog_store::{Batch, Kind};

use super::{scope_conditions, select_from, stream_batches};
use crate::client::{runtime, ChError, Server};
use crate::schema::{ChType, Table};

/// The statement reading the loss rows `q` needs (its columns, its range
/// widened to whole minutes as over the store) of `probes` (empty: all).
pub fn loss_sql(server: &Server, q: &LossQuery, probes: &[String]) -> (String, Vec<(&'static str, ChType)>) {
    let table = Table::Store(Kind::Loss);
    let cols: Vec<(&'static str, ChType)> = q
        .needed_columns()
        .into_iter()
        .filter_map(|name| table.columns().find(|(n, _)| *n == name))
        .collect();
    let sql = select_from(server, table, &cols, &scope_conditions(table, probes, q.time_range));
    (sql, cols)
}

/// Runs `q` against ClickHouse's `loss` table.
pub fn loss(server: &Server, q: &LossQuery, probes: &[String]) -> Result<LossTable, ChError> {
    let rt = runtime().map_err(|e| ChError(format!("cannot start the ClickHouse client: {e}")))?;
    let client = server.client().with_compression(clickhouse::Compression::None);
    let (sql, cols) = loss_sql(server, q, probes);
    let mut sums = q.sums();
    rt.block_on(stream_batches(server, &client, &sql, &cols, |columns, _| {
        sums.consume(&Batch { kind: Kind::Loss, columns }).map_err(|e| ChError(e.to_string()))
    }))?;
    Ok(sums.finish())
}
