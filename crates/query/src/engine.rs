//! The engine: filter each batch to a selection, pack the group keys of the
//! selected rows, hash them into the group table and add their counters; at
//! the end, sort the groups and keep the top N.
//!
//! Per batch, dynamic dispatch happens once (`Box<dyn Grouper>`, chosen by key
//! width); per row, the work is a hash of a few words, a probe and five adds.

use std::cmp::Ordering;

use wirelog_store::{Batch, Column};

use crate::error::{QueryError, SchemaError, SchemaProblem};
use crate::expr::{CmpOp, Expr, Operand, Pred, Test};
use crate::field::{hist_col, value_cols, weight_col, Field, ERRORS, ERROR_STATUS};
use crate::filter::{column, selected, Filter};
use crate::hist::{Hist, Pct};
use crate::key::{KeyValue, Layout, Part, MAX_WORDS};
use crate::spec::{Agg, Order, QuerySpec, SortKey};
use crate::table::{same, Acc, Group, Table};

/// One output row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// Start of the interval (time series only), ns.
    pub time: Option<i64>,
    /// The `--by` values, in `--by` order.
    pub key: Vec<KeyValue>,
    pub acc: Acc,
    /// Duration (connections) or latency (transactions) p50, p95, p99 in
    /// ns; `None` when no row of the group had one.
    pub duration: Option<[i64; 3]>,
    /// Transactions: the mean latency in ns over the rows that have one
    /// (`None` for other kinds, or when no row had a latency).
    pub avg: Option<i64>,
}

/// What a query returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultTable {
    pub kind: wirelog_store::Kind,
    pub by: Vec<Field>,
    pub every_ns: Option<i64>,
    pub percentiles: bool,
    pub sort: (SortKey, Order),
    /// Sorted, at most `top` (for a time series: all intervals of the top
    /// series, by time then by the series' rank).
    pub rows: Vec<Row>,
    /// Sums over every matching row, not only the rows shown.
    pub total: Acc,
    /// Groups found (series, for a time series) before `top` cut them.
    pub groups: usize,
    pub rows_scanned: u64,
    pub rows_matched: u64,
    /// Some matching row stood for more than one record (a transaction of a
    /// connection parsed 1 in N under `capture --cpu-budget`): the counts,
    /// sums and rates are extrapolated by the weights, estimates, and the
    /// percentiles are of the weighted sample.
    pub estimated: bool,
}

/// Groups another backend already formed (a database's `GROUP BY` over the
/// records that passed the filter and the time range), merged as if their
/// records had been consumed one by one: the same sums, the same
/// histograms, so the same answer.
#[derive(Debug, Clone, Copy)]
pub struct Partial<'a> {
    /// One row per group: the `--by` columns and, for a time series, the
    /// time column (any time in the interval; the engine floors it).
    pub keys: &'a Batch,
    /// Per row: the group's sums and how many records it holds.
    pub sums: &'a [(Acc, u64)],
    /// Histogram runs: (row, count, smallest, largest), durations
    /// (latencies) in ns, all of one run in one [`crate::hist::bucket`].
    pub hist: &'a [(u32, u64, i64, i64)],
    /// Some record behind these groups weighed more than 1 (its sums and
    /// histogram counts are already weighted): see [`ResultTable::estimated`].
    pub estimated: bool,
}

trait Grouper: Send {
    fn consume(&mut self, batch: &Batch, sel: &[u32]) -> Result<(), SchemaError>;
    fn merge(&mut self, p: &Partial) -> Result<(), SchemaError>;
    fn finish(self: Box<Self>, spec: &QuerySpec) -> (Vec<Row>, Acc, usize);
    fn heap_bytes(&self) -> usize;
    fn groups(&self) -> usize;
    /// Only [`TopRows`]: its one-pass answer may not be [`Engine::new`]'s.
    fn repeated(&mut self) -> bool {
        false
    }
}

/// Runs one query over any number of batches.
pub struct Engine {
    spec: QuerySpec,
    filter: Option<Filter>,
    bitmap: Vec<u64>,
    sel: Vec<u32>,
    grouper: Box<dyn Grouper>,
    rows_scanned: u64,
    rows_matched: u64,
    estimated: bool,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("spec", &self.spec)
            .field("rows_scanned", &self.rows_scanned)
            .finish()
    }
}

impl Engine {
    /// Fails only when the group key is too wide (more than 1024 bits of
    /// `--by` fields), which `parse_query` already rejects.
    pub fn new(spec: QuerySpec) -> Result<Engine, QueryError> {
        let mut parts: Vec<Part> = Vec::new();
        if let Some(every) = spec.every_ns {
            parts.push(Part::Bucket {
                time: Field::time(spec.kind),
                every: every.max(1),
            });
        }
        parts.extend(spec.by.iter().map(|&f| Part::Field(f)));
        let layout = Layout::new(&parts).map_err(|words| key_too_wide(&spec, words))?;
        let hist = (spec.percentiles && hist_col(spec.kind).is_some()).then(Hist::new);
        let grouper: Box<dyn Grouper> = match layout.words {
            1 => Box::new(GroupBy::<1>::new(spec.kind, layout, hist)),
            2 => Box::new(GroupBy::<2>::new(spec.kind, layout, hist)),
            3 => Box::new(GroupBy::<3>::new(spec.kind, layout, hist)),
            4 => Box::new(GroupBy::<4>::new(spec.kind, layout, hist)),
            5 => Box::new(GroupBy::<5>::new(spec.kind, layout, hist)),
            6 => Box::new(GroupBy::<6>::new(spec.kind, layout, hist)),
            7 | 8 => Box::new(GroupBy::<8>::new(spec.kind, layout, hist)),
            9..=12 => Box::new(GroupBy::<12>::new(spec.kind, layout, hist)),
            _ => Box::new(GroupBy::<MAX_WORDS>::new(spec.kind, layout, hist)),
        };
        let time = Field::time(spec.kind);
        let range = spec.time_range.map(|(from, to)| {
            let p = |op, v| {
                Expr::Pred(Pred {
                    operand: Operand::Field(time),
                    test: Test::Int(op, v),
                })
            };
            Expr::And(vec![p(CmpOp::Ge, from), p(CmpOp::Lt, to)])
        });
        let filter = match (&spec.filter, range) {
            (Some(f), Some(r)) => Some(Filter::new(&Expr::And(vec![r, f.clone()]))),
            (Some(f), None) => Some(Filter::new(f)),
            (None, Some(r)) => Some(Filter::new(&r)),
            (None, None) => None,
        };
        Ok(Engine {
            spec,
            filter,
            bitmap: Vec::new(),
            sel: Vec::new(),
            grouper,
            rows_scanned: 0,
            rows_matched: 0,
            estimated: false,
        })
    }

    /// An engine for a query whose groups are records (`--by` every field
    /// that tells records apart, as the API's record pages ask), sorted by
    /// a sum (bytes, packets, count, errors) and cut to `top`: it keeps the
    /// best `top` rows as it goes (a bounded candidate list) instead of a
    /// group for every row, and sums every row into the total. `None` when
    /// the query is not of that shape (a time series, no `top`, a sort by a
    /// field or a percentile, percentiles asked).
    ///
    /// Rows alike in every `--by` field are one group, summed as
    /// [`Engine::new`] sums them, when the list holds that group from its
    /// first row on (a group of the page, or near it); `groups` counts the
    /// distinct keys. Whether the one pass could answer is known only at
    /// the end: check [`Engine::records_unsure`] before [`Engine::finish`],
    /// and when it says so (a repeated key the list did not hold from its
    /// first row, whose sum it does not know), ask [`Engine::new`] instead.
    pub fn records(spec: QuerySpec) -> Result<Option<Engine>, QueryError> {
        let SortKey::Agg(agg) = spec.sort.0 else { return Ok(None) };
        let top = match spec.top {
            Some(k) if k > 0 => k,
            _ => return Ok(None),
        };
        if agg.needs_hist()
            || spec.every_ns.is_some()
            || spec.by.is_empty()
            || (spec.percentiles && hist_col(spec.kind).is_some())
        {
            return Ok(None);
        }
        let parts: Vec<Part> = spec.by.iter().map(|&f| Part::Field(f)).collect();
        let layout = Layout::new(&parts).map_err(|words| key_too_wide(&spec, words))?;
        let desc = spec.sort.1 == Order::Desc;
        let (kind, w) = (spec.kind, layout.words);
        let grouper: Box<dyn Grouper> = match w {
            1 => Box::new(TopRows::<1>::new(kind, layout, agg, desc, top)),
            2 => Box::new(TopRows::<2>::new(kind, layout, agg, desc, top)),
            3 => Box::new(TopRows::<3>::new(kind, layout, agg, desc, top)),
            4 => Box::new(TopRows::<4>::new(kind, layout, agg, desc, top)),
            5 => Box::new(TopRows::<5>::new(kind, layout, agg, desc, top)),
            6 => Box::new(TopRows::<6>::new(kind, layout, agg, desc, top)),
            7 | 8 => Box::new(TopRows::<8>::new(kind, layout, agg, desc, top)),
            9..=12 => Box::new(TopRows::<12>::new(kind, layout, agg, desc, top)),
            _ => Box::new(TopRows::<MAX_WORDS>::new(kind, layout, agg, desc, top)),
        };
        let mut e = Engine::new(QuerySpec { by: Vec::new(), ..spec.clone() })?;
        e.spec = spec;
        e.grouper = grouper;
        Ok(Some(e))
    }

    /// An engine made by [`Engine::records`]: whether its answer may not be
    /// [`Engine::new`]'s (see there; always false for other engines).
    pub fn records_unsure(&mut self) -> bool {
        self.grouper.repeated()
    }

    pub fn spec(&self) -> &QuerySpec {
        &self.spec
    }

    /// Filters and aggregates one batch.
    pub fn consume(&mut self, batch: &Batch) -> Result<(), SchemaError> {
        if batch.kind != self.spec.kind {
            return Err(SchemaError {
                column: "",
                problem: SchemaProblem::WrongKind,
            });
        }
        let n = batch.rows();
        if n == 0 {
            return Ok(());
        }
        if n > u32::MAX as usize {
            return Err(SchemaError {
                column: batch.columns[0].0,
                problem: SchemaProblem::Length,
            });
        }
        self.rows_scanned += n as u64;
        match &mut self.filter {
            Some(f) => {
                f.eval(batch, &mut self.bitmap)?;
                selected(&self.bitmap, &mut self.sel);
            }
            None => {
                self.sel.clear();
                self.sel.extend(0..n as u32);
            }
        }
        self.rows_matched += self.sel.len() as u64;
        if self.sel.is_empty() {
            return Ok(());
        }
        if !self.estimated {
            if let Some(w) = weight_col(batch.kind).and_then(|w| batch.column(w)) {
                self.estimated = match w {
                    Column::OptU64(w) => self.sel.iter().any(|&r| w[r as usize].is_some_and(|w| w > 1)),
                    Column::U64(w) => self.sel.iter().any(|&r| w[r as usize] > 1),
                    _ => false,
                };
            }
        }
        self.grouper.consume(batch, &self.sel)
    }

    /// Merges groups formed elsewhere ([`Partial`]). The filter and the
    /// time range are not applied to them: the backend that formed them
    /// did, so give this engine a spec without them.
    pub fn consume_partial(&mut self, p: &Partial) -> Result<(), SchemaError> {
        if p.keys.kind != self.spec.kind {
            return Err(SchemaError {
                column: "",
                problem: SchemaProblem::WrongKind,
            });
        }
        let n = p.sums.len();
        if n == 0 {
            return Ok(());
        }
        if n > u32::MAX as usize
            || p.keys.columns.iter().any(|(_, c)| c.len() != n)
            || p.hist.iter().any(|h| h.0 as usize >= n)
        {
            return Err(SchemaError {
                column: p.keys.columns.first().map_or("", |c| c.0),
                problem: SchemaProblem::Length,
            });
        }
        let records: u64 = p.sums.iter().map(|s| s.1).sum();
        self.rows_scanned += records;
        self.rows_matched += records;
        self.estimated |= p.estimated;
        self.grouper.merge(p)
    }

    /// Groups so far.
    pub fn groups(&self) -> usize {
        self.grouper.groups()
    }

    /// Heap bytes held by the group table (not counting string dictionaries
    /// and histograms).
    pub fn heap_bytes(&self) -> usize {
        self.grouper.heap_bytes() + self.bitmap.capacity() * 8 + self.sel.capacity() * 4
    }

    pub fn finish(self) -> ResultTable {
        let (rows, total, groups) = self.grouper.finish(&self.spec);
        ResultTable {
            kind: self.spec.kind,
            by: self.spec.by.clone(),
            every_ns: self.spec.every_ns,
            percentiles: self.spec.percentiles && hist_col(self.spec.kind).is_some(),
            sort: self.spec.sort,
            rows,
            total,
            groups,
            rows_scanned: self.rows_scanned,
            rows_matched: self.rows_matched,
            estimated: self.estimated,
        }
    }
}

fn key_too_wide(spec: &QuerySpec, words: usize) -> QueryError {
    let names: Vec<&str> = spec.by.iter().map(|f| f.name()).collect();
    let input = names.join(",");
    QueryError::custom(
        "--by",
        &input,
        1,
        format!("group-by fields fitting {} bits", MAX_WORDS * 64),
        format!(
            "the group key needs {} bits, more than {}: group by fewer fields",
            words * 64,
            MAX_WORDS * 64
        ),
    )
}

/// A column as `&[u64]`: borrowed when it is `U64`, else widened into `buf`
/// (an unset value counting 0, a negative duration 0); transactions'
/// [`ERRORS`] column as 1 for an error, else 0.
fn as_u64<'a>(
    col: &'a Column,
    buf: &'a mut Vec<u64>,
    name: &'static str,
) -> Result<&'a [u64], SchemaError> {
    let widen = |buf: &'a mut Vec<u64>, it: &mut dyn Iterator<Item = u64>| {
        buf.clear();
        buf.extend(it);
        &buf[..]
    };
    Ok(match col {
        Column::U64(v) => v,
        Column::U32(v) => widen(buf, &mut v.iter().map(|&x| x as u64)),
        Column::U16(v) => widen(buf, &mut v.iter().map(|&x| x as u64)),
        Column::U8(v) => widen(buf, &mut v.iter().map(|&x| x as u64)),
        Column::OptU64(v) => widen(buf, &mut v.iter().map(|x| x.unwrap_or(0))),
        Column::OptI64(v) => widen(buf, &mut v.iter().map(|x| x.unwrap_or(0).max(0) as u64)),
        Column::Str(v) if name == ERRORS => {
            widen(buf, &mut v.iter().map(|s| (s == ERROR_STATUS) as u64))
        }
        _ => {
            return Err(SchemaError {
                column: name,
                problem: SchemaProblem::WrongType,
            })
        }
    })
}

/// A weight column as `&[u64]` (see [`weight_col`]): an unset weight, or
/// none at all (a batch from before the column), counts 1.
fn as_weights<'a>(col: Option<&'a Column>, n: usize, buf: &'a mut Vec<u64>, name: &'static str) -> Result<&'a [u64], SchemaError> {
    buf.clear();
    match col {
        None => buf.resize(n, 1),
        Some(Column::U64(v)) => return Ok(v),
        Some(Column::OptU64(v)) => buf.extend(v.iter().map(|w| w.unwrap_or(1))),
        Some(Column::U32(v)) => buf.extend(v.iter().map(|&w| w as u64)),
        Some(_) => {
            return Err(SchemaError {
                column: name,
                problem: SchemaProblem::WrongType,
            })
        }
    }
    Ok(buf)
}

enum Durations<'a> {
    Opt(&'a [Option<i64>]),
    Set(&'a [i64]),
}

/// How far ahead the probe loop prefetches table slots (and half as far,
/// the groups they point to).
const PREFETCH: usize = 16;

struct GroupBy<const N: usize> {
    kind: wirelog_store::Kind,
    layout: Layout,
    table: Table<N>,
    keys: Vec<[u64; N]>,
    hashes: Vec<u64>,
    hist: Option<Hist>,
    bufs: [Vec<u64>; 6],
    /// `merge`'s rows, then their groups.
    sel: Vec<u32>,
}

impl<const N: usize> GroupBy<N> {
    fn new(kind: wirelog_store::Kind, layout: Layout, hist: Option<Hist>) -> Self {
        GroupBy {
            kind,
            layout,
            table: Table::new(),
            keys: Vec::new(),
            hashes: Vec::new(),
            hist,
            bufs: Default::default(),
            sel: Vec::new(),
        }
    }
}

impl<const N: usize> Grouper for GroupBy<N> {
    fn consume(&mut self, batch: &Batch, sel: &[u32]) -> Result<(), SchemaError> {
        let m = sel.len();
        self.keys.clear();
        self.keys.resize(m, [0; N]);
        self.layout.write(&mut self.keys, batch, sel)?;
        let table = &mut self.table;
        self.hashes.clear();
        self.hashes.extend(self.keys.iter().map(|k| table.hash(k)));

        let v = value_cols(self.kind);
        let [b0, b1, b2, b3, b4, b5] = &mut self.bufs;
        let bytes_out = as_u64(column(batch, v.bytes_out)?, b0, v.bytes_out)?;
        let pkts_out = as_u64(column(batch, v.pkts_out)?, b1, v.pkts_out)?;
        let bytes_in = as_u64(column(batch, v.bytes_in)?, b2, v.bytes_in)?;
        let pkts_in = as_u64(column(batch, v.pkts_in)?, b3, v.pkts_in)?;
        let conns = match v.conns {
            Some(c) => Some(as_u64(column(batch, c)?, b4, c)?),
            None => None,
        };
        let weights = match weight_col(self.kind) {
            Some(w) => Some(as_weights(batch.column(w), batch.rows(), b5, w)?),
            None => None,
        };
        // Checked before the loop, so a bad batch leaves the sums untouched.
        let durations = match (&self.hist, hist_col(self.kind)) {
            (Some(_), Some(name)) => match column(batch, name)? {
                Column::OptI64(d) => Some(Durations::Opt(d)),
                Column::I64(d) => Some(Durations::Set(d)),
                _ => {
                    return Err(SchemaError {
                        column: name,
                        problem: SchemaProblem::WrongType,
                    })
                }
            },
            _ => None,
        };
        let (keys, hashes) = (&self.keys, &self.hashes);
        let mut g = usize::MAX;
        for i in 0..m {
            if let Some(&h) = hashes.get(i + PREFETCH) {
                table.prefetch_slot(h);
            }
            if let Some(&h) = hashes.get(i + PREFETCH / 2) {
                table.prefetch_group(h);
            }
            // The store sorts flows by (bucket, client, server, port): runs of
            // one key are common, and the group of the previous row is at hand.
            if i == 0 || hashes[i] != hashes[i - 1] || !same(&keys[i], &keys[i - 1]) {
                g = table.find_or_insert(&keys[i], hashes[i]);
            }
            let r = sel[i] as usize;
            // A sampled transaction stands for `w` (its sums extrapolated).
            let w = weights.map_or(1, |w| w[r]);
            let acc = &mut table.groups[g].acc;
            acc.bytes_out = acc.bytes_out.wrapping_add(bytes_out[r].wrapping_mul(w));
            acc.pkts_out = acc.pkts_out.wrapping_add(pkts_out[r].wrapping_mul(w));
            acc.bytes_in = acc.bytes_in.wrapping_add(bytes_in[r].wrapping_mul(w));
            acc.pkts_in = acc.pkts_in.wrapping_add(pkts_in[r].wrapping_mul(w));
            acc.conns = acc.conns.wrapping_add(match conns {
                Some(c) => c[r],
                None => w,
            });
            if let (Some(h), Some(d)) = (&mut self.hist, &durations) {
                let d = match d {
                    Durations::Opt(d) => d[r],
                    Durations::Set(d) => Some(d[r]),
                };
                match d {
                    Some(d) if w == 1 => h.add(g as u32, d),
                    Some(d) => h.add_run(g as u32, w, d, d),
                    None => {}
                }
            }
        }
        Ok(())
    }

    fn merge(&mut self, p: &Partial) -> Result<(), SchemaError> {
        let m = p.sums.len();
        self.sel.clear();
        self.sel.extend(0..m as u32);
        self.keys.clear();
        self.keys.resize(m, [0; N]);
        self.layout.write(&mut self.keys, p.keys, &self.sel)?;
        // `sel` now maps each row to its group.
        for (i, (acc, _)) in p.sums.iter().enumerate() {
            let h = self.table.hash(&self.keys[i]);
            let g = self.table.find_or_insert(&self.keys[i], h);
            self.table.groups[g].acc.add(acc);
            self.sel[i] = g as u32;
        }
        if let Some(h) = &mut self.hist {
            for &(row, count, lo, hi) in p.hist {
                h.add_run(self.sel[row as usize], count, lo, hi);
            }
        }
        Ok(())
    }

    fn heap_bytes(&self) -> usize {
        self.table.heap_bytes() + self.keys.capacity() * N * 8 + self.hashes.capacity() * 8
    }

    fn groups(&self) -> usize {
        self.table.groups.len()
    }

    fn finish(self: Box<Self>, spec: &QuerySpec) -> (Vec<Row>, Acc, usize) {
        let this = *self;
        let groups = &this.table.groups;
        let layout = &this.layout;
        let mut total = Acc::default();
        for g in groups {
            total.add(&g.acc);
        }
        let by_pct = matches!(spec.sort.0, SortKey::Agg(a) if a.needs_hist());
        let tx = this.kind.is_tx();
        // The mean latency of a transaction row: the latency sum over the
        // number of latencies.
        let avg = |acc: &Acc, p: Option<Pct>| {
            p.filter(|_| tx)
                .map(|p| (acc.latency_sum_ns() / p.n.max(1)) as i64)
        };
        let mut rows = Vec::new();
        let n_groups;
        match layout.bucket_word() {
            None => {
                n_groups = groups.len();
                let pct = match (&this.hist, by_pct) {
                    (Some(h), true) => Some(h.percentiles(groups.len(), Some)),
                    _ => None,
                };
                let order = ranked(groups, pct.as_deref(), layout, spec.sort, spec.top);
                let mut row_of = vec![u32::MAX; groups.len()];
                for (i, &g) in order.iter().enumerate() {
                    row_of[g as usize] = i as u32;
                }
                let row_pct = this.hist.as_ref().map(|h| {
                    h.percentiles(order.len(), |g| {
                        Some(row_of[g as usize]).filter(|&r| r != u32::MAX)
                    })
                });
                for (i, &g) in order.iter().enumerate() {
                    let grp = &groups[g as usize];
                    let p = row_pct.as_ref().and_then(|p| p[i]);
                    rows.push(Row {
                        time: None,
                        key: layout.decode(&grp.key),
                        acc: grp.acc,
                        duration: p.map(|p| p.p),
                        avg: avg(&grp.acc, p),
                    });
                }
            }
            Some(bw) => {
                // Series: the key without its interval.
                let mut series = Table::<N>::new();
                let mut series_of = Vec::with_capacity(groups.len());
                for g in groups {
                    let mut k = g.key;
                    k[bw] = 0;
                    let h = series.hash(&k);
                    let s = series.find_or_insert(&k, h);
                    series.groups[s].acc.add(&g.acc);
                    series_of.push(s as u32);
                }
                n_groups = series.groups.len();
                let pct = match (&this.hist, by_pct) {
                    (Some(h), true) => {
                        Some(h.percentiles(series.groups.len(), |g| Some(series_of[g as usize])))
                    }
                    _ => None,
                };
                let series_sort = match spec.sort {
                    (SortKey::Time, _) => (SortKey::Time, Order::Asc),
                    s => s,
                };
                let order = ranked(
                    &series.groups,
                    pct.as_deref(),
                    layout,
                    series_sort,
                    spec.top,
                );
                let mut rank = vec![u32::MAX; series.groups.len()];
                for (i, &s) in order.iter().enumerate() {
                    rank[s as usize] = i as u32;
                }
                let mut chosen: Vec<(i64, u32, u32)> = groups
                    .iter()
                    .enumerate()
                    .filter_map(|(g, grp)| {
                        let r = rank[series_of[g] as usize];
                        (r != u32::MAX).then(|| (layout.bucket(&grp.key).unwrap_or(0), r, g as u32))
                    })
                    .collect();
                let time_desc = spec.sort == (SortKey::Time, Order::Desc);
                chosen.sort_unstable_by(|a, b| {
                    let t = if time_desc {
                        b.0.cmp(&a.0)
                    } else {
                        a.0.cmp(&b.0)
                    };
                    t.then(a.1.cmp(&b.1))
                });
                let mut row_of = vec![u32::MAX; groups.len()];
                for (i, c) in chosen.iter().enumerate() {
                    row_of[c.2 as usize] = i as u32;
                }
                let row_pct = this.hist.as_ref().map(|h| {
                    h.percentiles(chosen.len(), |g| {
                        Some(row_of[g as usize]).filter(|&r| r != u32::MAX)
                    })
                });
                for (i, &(t, _, g)) in chosen.iter().enumerate() {
                    let grp = &groups[g as usize];
                    let p = row_pct.as_ref().and_then(|p| p[i]);
                    rows.push(Row {
                        time: Some(t),
                        key: layout.decode(&grp.key),
                        acc: grp.acc,
                        duration: p.map(|p| p.p),
                        avg: avg(&grp.acc, p),
                    });
                }
            }
        }
        (rows, total, n_groups)
    }
}

/// The columns a row's sums come from, checked once per batch.
struct Sums<'a> {
    bytes_out: &'a [u64],
    pkts_out: &'a [u64],
    bytes_in: &'a [u64],
    pkts_in: &'a [u64],
    conns: Option<&'a [u64]>,
    weights: Option<&'a [u64]>,
}

impl<'a> Sums<'a> {
    fn of(kind: wirelog_store::Kind, batch: &'a Batch, bufs: &'a mut [Vec<u64>; 6]) -> Result<Sums<'a>, SchemaError> {
        let v = value_cols(kind);
        let [b0, b1, b2, b3, b4, b5] = bufs;
        Ok(Sums {
            bytes_out: as_u64(column(batch, v.bytes_out)?, b0, v.bytes_out)?,
            pkts_out: as_u64(column(batch, v.pkts_out)?, b1, v.pkts_out)?,
            bytes_in: as_u64(column(batch, v.bytes_in)?, b2, v.bytes_in)?,
            pkts_in: as_u64(column(batch, v.pkts_in)?, b3, v.pkts_in)?,
            conns: match v.conns {
                Some(c) => Some(as_u64(column(batch, c)?, b4, c)?),
                None => None,
            },
            weights: match weight_col(kind) {
                Some(w) => Some(as_weights(batch.column(w), batch.rows(), b5, w)?),
                None => None,
            },
        })
    }

    /// Row `r` as a group of one: what [`GroupBy::consume`] adds for it.
    #[inline]
    fn row(&self, r: usize) -> Acc {
        let w = self.weights.map_or(1, |w| w[r]);
        Acc {
            bytes_out: self.bytes_out[r].wrapping_mul(w),
            pkts_out: self.pkts_out[r].wrapping_mul(w),
            bytes_in: self.bytes_in[r].wrapping_mul(w),
            pkts_in: self.pkts_in[r].wrapping_mul(w),
            conns: match self.conns {
                Some(c) => c[r],
                None => w,
            },
        }
    }
}

/// The best `top` rows by a sum, for [`Engine::records`]: a row is
/// compared with the worst value the list kept so far (`bar`) and only a
/// row at or above it has its key built; the list is cut back to `top`
/// when it doubles. Every row's key is hashed, and a candidate is a key
/// with a count: a row whose hash is a candidate's is summed into it (its
/// key compared), whatever its own value, so that rows alike in every
/// field are one group as [`Engine::new`] makes them, in the same pass.
/// What one pass cannot know is said by [`TopRows::unsure`].
struct TopRows<const N: usize> {
    kind: wirelog_store::Kind,
    layout: Layout,
    agg: Agg,
    desc: bool,
    top: usize,
    cand: Vec<Cand<N>>,
    /// A candidate's key hash to its place in `cand`.
    index: crate::hash::FastMap<u64, u32>,
    /// Rows whose value is above it cannot be shown (once `top` are held).
    bar: Option<u64>,
    total: Acc,
    rows: usize,
    hashes: Vec<u64>,
    seed: u64,
    bufs: [Vec<u64>; 6],
    pick: Vec<u32>,
    /// Per picked row: its value, sums and key hash.
    picked: Vec<(u64, Acc, u64)>,
    keys: Vec<[u64; N]>,
    /// Something one pass cannot answer for happened (see [`TopRows::unsure`]).
    doubt: bool,
    /// The end's count of distinct keys and whether it is unsure, once known.
    checked: Option<(usize, bool)>,
}

/// A candidate group: its sort value (as an ascending u64), key, sums, how
/// many rows were summed into it, and its key hash.
#[derive(Clone, Copy)]
struct Cand<const N: usize> {
    v: u64,
    key: [u64; N],
    acc: Acc,
    n: u64,
    hash: u64,
}

impl<const N: usize> TopRows<N> {
    fn new(kind: wirelog_store::Kind, layout: Layout, agg: Agg, desc: bool, top: usize) -> Self {
        TopRows {
            kind,
            layout,
            agg,
            desc,
            top,
            cand: Vec::new(),
            index: crate::hash::fast_map(),
            bar: None,
            total: Acc::default(),
            rows: 0,
            hashes: Vec::new(),
            seed: crate::hash::random_seed(),
            bufs: Default::default(),
            pick: Vec::new(),
            picked: Vec::new(),
            keys: Vec::new(),
            doubt: false,
            checked: None,
        }
    }

    /// Keeps the best `top` candidates (in [`ranked`]'s order: the value,
    /// then the group-by fields) and sets the bar to the worst of them.
    fn cut(&mut self) {
        let layout = &self.layout;
        let cmp = |a: &Cand<N>, b: &Cand<N>| a.v.cmp(&b.v).then_with(|| layout.cmp_fields(&a.key, &b.key));
        if self.cand.len() > self.top {
            self.cand.select_nth_unstable_by(self.top - 1, cmp);
            self.cand.truncate(self.top);
            self.index.clear();
            for (j, c) in self.cand.iter().enumerate() {
                self.index.insert(c.hash, j as u32);
            }
        }
        if self.cand.len() == self.top {
            self.bar = self.cand.iter().map(|c| c.v).max();
        }
    }

    /// The number of distinct keys (rows less the repeats), and whether the
    /// one-pass answer is unsure: a key of several rows that is not a
    /// candidate holding all of them (a row of it came before the bar
    /// let it in, or after a cut dropped it: its sum is not known), two
    /// keys of one hash, or a bar that no longer holds (an ascending sort
    /// whose candidate grew after the bar was set; a batch whose repeats
    /// left fewer than `top` candidates at the bar). Then ask
    /// [`Engine::new`]. Before the final cut (a candidate cut there lost
    /// with its sum whole).
    fn unsure(&mut self) -> (usize, bool) {
        if let Some(c) = self.checked {
            return c;
        }
        self.hashes.sort_unstable();
        let (mut distinct, mut doubt) = (0, self.doubt);
        let mut i = 0;
        while i < self.hashes.len() {
            let h = self.hashes[i];
            let m = self.hashes[i..].iter().take_while(|&&x| x == h).count();
            distinct += 1;
            if m > 1 && self.index.get(&h).is_none_or(|&j| self.cand[j as usize].n != m as u64) {
                doubt = true;
            }
            i += m;
        }
        self.checked = Some((distinct, doubt));
        (distinct, doubt)
    }
}

impl<const N: usize> Grouper for TopRows<N> {
    fn consume(&mut self, batch: &Batch, sel: &[u32]) -> Result<(), SchemaError> {
        let first = self.hashes.len();
        self.hashes.resize(first + sel.len(), self.seed);
        // Checked before anything is added, so a bad batch leaves the sums untouched.
        self.layout.hash_rows(&mut self.hashes[first..], batch, sel)?;
        let sums = Sums::of(self.kind, batch, &mut self.bufs)?;
        self.pick.clear();
        self.picked.clear();
        for (i, &r) in sel.iter().enumerate() {
            let acc = sums.row(r as usize);
            self.total.add(&acc);
            let v = agg_value(&acc, self.agg);
            let v = if self.desc { !v } else { v };
            let h = self.hashes[first + i];
            // A row of a candidate's key is summed into it, whatever its value.
            if self.bar.is_none_or(|b| v <= b) || self.index.contains_key(&h) {
                self.pick.push(r);
                self.picked.push((v, acc, h));
            }
        }
        self.rows += sel.len();
        if self.pick.is_empty() {
            return Ok(());
        }
        // More picked than can be shown (the first batch, before there is a
        // bar): at least `top` of them are at or below the top-th value, so
        // no row above it is shown; its key is never built. (Unless some of
        // them are one key: checked below, once they are summed.)
        let mut bar_set = false;
        if self.picked.len() > self.top {
            let mut vals: Vec<u64> = self.picked.iter().map(|p| p.0).collect();
            let (_, &mut kth, _) = vals.select_nth_unstable(self.top - 1);
            self.bar = Some(self.bar.map_or(kth, |b| b.min(kth)));
            bar_set = true;
            let mut j = 0;
            for i in 0..self.pick.len() {
                if self.picked[i].0 <= kth || self.index.contains_key(&self.picked[i].2) {
                    self.pick[j] = self.pick[i];
                    self.picked[j] = self.picked[i];
                    j += 1;
                }
            }
            self.pick.truncate(j);
            self.picked.truncate(j);
        }
        self.keys.clear();
        self.keys.resize(self.pick.len(), [0; N]);
        self.layout.write(&mut self.keys, batch, &self.pick)?;
        for i in 0..self.keys.len() {
            let (v, acc, h) = self.picked[i];
            if let Some(&j) = self.index.get(&h) {
                let c = &mut self.cand[j as usize];
                if !same(&c.key, &self.keys[i]) {
                    // Two keys of one hash: the plain engine tells them apart.
                    self.doubt = true;
                    continue;
                }
                c.acc.add(&acc);
                c.n += 1;
                let nv = agg_value(&c.acc, self.agg);
                let nv = if self.desc { !nv } else { nv };
                // Ascending: a candidate that grew may now be worse than
                // rows the bar turned away.
                if nv > c.v && self.bar.is_some() {
                    self.doubt = true;
                }
                c.v = nv;
            } else if self.bar.is_none_or(|b| v <= b) {
                self.index.insert(h, self.cand.len() as u32);
                self.cand.push(Cand { v, key: self.keys[i], acc, n: 1, hash: h });
                if self.cand.len() >= 2 * self.top.max(512) {
                    self.cut();
                }
            }
        }
        if bar_set {
            // The bar from the rows holds if `top` distinct keys are at or below it.
            let bar = self.bar.unwrap_or(u64::MAX);
            if self.cand.iter().filter(|c| c.v <= bar).count() < self.top {
                self.doubt = true;
            }
        }
        Ok(())
    }

    fn merge(&mut self, _p: &Partial) -> Result<(), SchemaError> {
        // `Engine::records` is for the store's rows; groups formed
        // elsewhere are not records.
        Err(SchemaError {
            column: "",
            problem: SchemaProblem::WrongKind,
        })
    }

    fn heap_bytes(&self) -> usize {
        self.hashes.capacity() * 8
            + self.cand.capacity() * std::mem::size_of::<Cand<N>>()
            + self.index.capacity() * 16
            + self.keys.capacity() * N * 8
    }

    fn groups(&self) -> usize {
        self.rows
    }

    fn repeated(&mut self) -> bool {
        self.unsure().1
    }

    fn finish(self: Box<Self>, _spec: &QuerySpec) -> (Vec<Row>, Acc, usize) {
        let mut this = *self;
        let (groups, _) = this.unsure();
        this.cut();
        let layout = &this.layout;
        this.cand.sort_unstable_by(|a, b| a.v.cmp(&b.v).then_with(|| layout.cmp_fields(&a.key, &b.key)));
        let rows = this
            .cand
            .iter()
            .map(|c| Row {
                time: None,
                key: layout.decode(&c.key),
                acc: c.acc,
                duration: None,
                avg: None,
            })
            .collect();
        (rows, this.total, groups)
    }
}

fn agg_value(acc: &Acc, a: Agg) -> u64 {
    match a {
        Agg::Bytes => acc.bytes(),
        Agg::BytesOut => acc.bytes_out,
        Agg::BytesIn => acc.bytes_in,
        Agg::Pkts => acc.pkts(),
        Agg::PktsOut => acc.pkts_out,
        Agg::PktsIn => acc.pkts_in,
        Agg::Conns => acc.conns,
        Agg::Errors => acc.errors(),
        Agg::P50 | Agg::P95 | Agg::P99 | Agg::Avg => 0,
    }
}

/// The indices of the groups to show, in output order: by the sort key, ties
/// broken by the group-by values ascending, so the result never depends on
/// hashing or batch order. A partial sort keeps the top N.
fn ranked<const N: usize>(
    groups: &[Group<N>],
    pct: Option<&[Option<Pct>]>,
    layout: &Layout,
    (key, order): (SortKey, Order),
    top: Option<usize>,
) -> Vec<u32> {
    let slot = match key {
        SortKey::Field(f) => layout.slot_of(f),
        _ => None,
    };
    // The aggregate sorted by, as an ascending u64 (complemented for
    // descending order), next to the group index: the partial sort then
    // compares a dense array and touches the groups only on ties.
    let desc = order == Order::Desc;
    let value = |i: usize, g: &Group<N>| -> u64 {
        let v = match key {
            SortKey::Agg(agg) if agg.needs_hist() => {
                // Groups without durations sort below every duration.
                pct.and_then(|p| p[i]).map_or(0, |p| {
                    let v = match agg {
                        Agg::P50 => p.p[0],
                        Agg::P95 => p.p[1],
                        Agg::P99 => p.p[2],
                        _ => (g.acc.latency_sum_ns() / p.n.max(1)) as i64,
                    };
                    v.max(0) as u64 + 1
                })
            }
            SortKey::Agg(agg) => agg_value(&g.acc, agg),
            SortKey::Field(_) | SortKey::Time => return 0,
        };
        if desc {
            !v
        } else {
            v
        }
    };
    let cmp = |a: &(u64, u32), b: &(u64, u32)| -> Ordering {
        a.0.cmp(&b.0).then_with(|| {
            let (ka, kb) = (&groups[a.1 as usize].key, &groups[b.1 as usize].key);
            let field = slot.map_or(Ordering::Equal, |s| layout.cmp_slot(s, ka, kb));
            let field = if desc { field.reverse() } else { field };
            field.then_with(|| layout.cmp_fields(ka, kb))
        })
    };
    let mut idx: Vec<(u64, u32)> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| (value(i, g), i as u32))
        .collect();
    match top {
        Some(n) if n < idx.len() => {
            idx.select_nth_unstable_by(n, cmp);
            idx.truncate(n);
            idx.sort_unstable_by(cmp);
        }
        _ => idx.sort_unstable_by(cmp),
    }
    idx.into_iter().map(|(_, i)| i).collect::<Vec<u32>>()
}
