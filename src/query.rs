//! `wirelog query`: a query over the store -> scan with pruning -> engine -> output.

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use wirelog_query::render::cut_note;
use wirelog_query::{default_format, parse_query, parse_time_arg, render, Engine, Format, ResultTable, DEFAULT_TOP};
use wirelog_store::{Scan, Store};

use crate::cli::{OutputFormat, QueryArgs, QueryKind};

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

pub fn run(args: QueryArgs) -> Result<ExitCode> {
    let QueryKind(kind) = args.kind;
    // The query errors print the expression with a caret under the problem.
    let fail = |e: wirelog_query::QueryError| anyhow::anyhow!("{e}");
    let (from, to) = time_range(&args.time)?;
    let where_ = match (args.expiring, args.where_.as_deref()) {
        (Some(_), _) if !matches!(kind, wirelog_store::Kind::X509 | wirelog_store::Kind::Tls) => {
            bail!("--expiring applies to `query x509` and `query tls` (certificates), not `query {}`", kind.as_str())
        }
        (Some(d), w) => {
            let until = now_ns() / 1_000_000_000 + d.as_secs() as i64;
            let cond = format!("not_valid_after < {until}");
            Some(match w.filter(|w| !w.trim().is_empty()) {
                Some(w) => format!("({w}) and {cond}"),
                None => cond,
            })
        }
        (None, w) => w.map(str::to_string),
    };
    if kind == wirelog_store::Kind::Loss {
        return run_loss(&args, where_.as_deref(), from, to);
    }
    let mut spec = parse_query(
        kind,
        where_.as_deref(),
        args.by.as_deref(),
        args.sort.as_deref(),
        args.top,
        args.every.as_deref(),
    )
    .map_err(fail)?;
    if from.is_some() || to.is_some() {
        spec.time_range = Some((from.unwrap_or(i64::MIN), to.unwrap_or(i64::MAX)));
    }
    if let Some(server) = crate::clickhouse::server(&args.clickhouse)? {
        let probes = probe_names(args.probe.as_deref());
        let table = wirelog_clickhouse::query::run(&server, spec, &probes)
            .map_err(|e| anyhow::anyhow!("clickhouse {}: {e}", server.url))?;
        return print(table, &args);
    }
    let engine = run_store(&args.store, spec, from, to)?;
    print(engine.finish(), &args)
}

/// `--last`, or `--from`/`--to`, as a range of ns since the epoch.
pub fn time_range(range: &crate::cli::TimeRangeArgs) -> Result<(Option<i64>, Option<i64>)> {
    let (last, from, to) = (range.last, range.from.as_deref(), range.to.as_deref());
    let now = now_ns();
    let fail = |e: wirelog_query::QueryError| anyhow::anyhow!("{e}");
    let (from, to) = match last {
        Some(d) => (Some(now - d.as_nanos() as i64), None),
        None => (
            from.map(|s| parse_time_arg("--from", s, now)).transpose().map_err(fail)?,
            to.map(|s| parse_time_arg("--to", s, now)).transpose().map_err(fail)?,
        ),
    };
    if let (Some(f), Some(t)) = (from, to) {
        if f >= t {
            bail!("--from must be before --to");
        }
    }
    Ok((from, to))
}

/// Runs `spec` over the store in `store`, restricted to `[from, to)`.
pub fn run_store(store: &std::path::Path, spec: wirelog_query::QuerySpec, from: Option<i64>, to: Option<i64>) -> Result<Engine> {
    let kind = spec.kind;
    let fail = |e: wirelog_query::QueryError| anyhow::anyhow!("{e}");
    if !store.is_dir() {
        bail!(
            "{}: no store here (write one with `wirelog read --store {}`)",
            store.display(),
            store.display()
        );
    }

    // Only the partitions in the range, the columns the query uses, and the
    // row groups whose statistics can match are read.
    let mut scan = Scan::new(kind)
        .columns(&spec.needed_columns())
        .time(from, to);
    for (col, lo, hi) in spec.numeric_ranges() {
        scan = scan.range(col, lo, hi);
    }
    let mut engine = Engine::new(spec).map_err(fail)?;
    scan_into(store, &scan, |batch| engine.consume(batch))?;
    Ok(engine)
}

/// Scans `store` and hands each batch to `consume`; the first error it
/// returns (a column of the wrong type) ends the command naming the store,
/// later batches are skipped. The store's warnings go to stderr.
fn scan_into<E: std::fmt::Display>(
    store: &std::path::Path,
    scan: &Scan,
    mut consume: impl FnMut(&wirelog_store::Batch) -> Result<(), E>,
) -> Result<()> {
    let mut problem = None;
    let stats = Store::scan_ref(store, scan, |batch| {
        if problem.is_none() {
            problem = consume(batch).err();
        }
        Ok(())
    })
    .with_context(|| format!("cannot read the store {}", store.display()))?;
    if let Some(e) = problem {
        bail!("{}: {e}", store.display());
    }
    for w in &stats.warnings {
        eprintln!("wirelog: warning: {w}");
    }
    Ok(())
}

/// `wirelog query loss`: the loss table summed per minute (or `--every`),
/// then the range's completeness line on standard error.
fn run_loss(args: &QueryArgs, where_: Option<&str>, from: Option<i64>, to: Option<i64>) -> Result<ExitCode> {
    if args.sort.is_some() || args.top.is_some() {
        bail!("query loss shows every minute in time order: --sort and --top do not apply (use --where, --by source,protocol, --every)");
    }
    let fail = |e: wirelog_query::QueryError| anyhow::anyhow!("{e}");
    let mut q = wirelog_query::loss::LossQuery::parse(where_, args.by.as_deref(), args.every.as_deref()).map_err(fail)?;
    let (from, to) = q.set_range(from, to);
    let table = match crate::clickhouse::server(&args.clickhouse)? {
        // ClickHouse's `loss` table, summed by the same code as the store's.
        Some(server) => {
            let probes = probe_names(args.probe.as_deref());
            wirelog_clickhouse::query::loss(&server, &q, &probes)
                .map_err(|e| anyhow::anyhow!("clickhouse {}: {e}", server.url))?
        }
        None => loss_table(&args.store, &q, from, to)?,
    };
    let format = match args.format {
        Some(OutputFormat::Table) => Format::Table,
        Some(OutputFormat::Csv) => Format::Csv,
        Some(OutputFormat::Json) => Format::Json,
        None => default_format(io::stdout().is_terminal()),
    };
    let mut out = io::BufWriter::new(io::stdout().lock());
    wirelog_query::loss::render(&table, format, &mut out)?;
    out.flush()?;
    eprintln!("wirelog: {}", wirelog_query::loss::Completeness::of(&table).text);
    Ok(ExitCode::SUCCESS)
}

/// The loss table of the store in `store` over `[from, to)`, summed as `q` says.
pub fn loss_table(
    store: &std::path::Path,
    q: &wirelog_query::loss::LossQuery,
    from: Option<i64>,
    to: Option<i64>,
) -> Result<wirelog_query::loss::LossTable> {
    if !store.is_dir() {
        bail!("{}: no store here (write one with `wirelog read --store {}`)", store.display(), store.display());
    }
    let scan = Scan::new(wirelog_store::Kind::Loss).columns(&q.needed_columns()).time(from, to);
    let mut sums = q.sums();
    scan_into(store, &scan, |batch| sums.consume(batch))?;
    Ok(sums.finish())
}

/// `--probe a,b`: the names, blanks dropped (none: every probe).
pub fn probe_names(arg: Option<&str>) -> Vec<String> {
    arg.map(|p| p.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect())
        .unwrap_or_default()
}

/// Renders the result in the chosen format (and says what --top left out).
fn print(table: ResultTable, args: &QueryArgs) -> Result<ExitCode> {
    let format = match args.format {
        Some(OutputFormat::Table) => Format::Table,
        Some(OutputFormat::Csv) => Format::Csv,
        Some(OutputFormat::Json) => Format::Json,
        None => default_format(io::stdout().is_terminal()),
    };
    let mut out = io::BufWriter::new(io::stdout().lock());
    render(&table, format, &mut out)?;
    out.flush()?;
    if let Some(note) = cut_note(&table, args.top.unwrap_or(DEFAULT_TOP)) {
        eprintln!("wirelog: {note}");
    }
    if let Some(note) = wirelog_query::render::estimated_note(&table) {
        eprintln!("wirelog: {note}");
    }
    Ok(ExitCode::SUCCESS)
}
