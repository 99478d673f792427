//! The JSON API: one endpoint per question, each answered by the query
//! engine of `wirelog query` over the store.
//!
//! | endpoint | answer |
//! |---|---|
//! | `/api/query?kind=&where=&by=&sort=&top=&every=&from=&to=` | `wirelog query`'s rows, plus `other` (the groups `top` left out, summed) and `total` |
//! | `/api/records?kind=&where=&from=&to=&limit=&offset=&sort=` | the records behind a chart (grouped by every field that tells records apart), a page at a time, newest first or by any column |
//! | `/api/sequence?uid=&offset=&limit=` | the connection and its transactions, in order, a page at a time (`total`, `truncated`), with their timing (and `pcap`, the download link of its packets, when packets are kept) |
//! | `/api/pcap?uid=` | the connection's packets as a pcap file (with `--pcap-dir`) |
//! | `/api/map?from=&to=&group=&rank=&top=&find=` | service map over every pair of the range: nodes (hosts, services, or their groups by service port, process, container, subnet; with the processes behind them when known) and the top edges (calls per protocol) by calls, bytes, errors or latency, the rest summed into one `other` edge |
//! | `/api/extent` | per kind: rows, files, bytes, first and last time |
//! | `/api/health` | the process (and a live capture's counters), now and over time |
//! | `/api/loss?where=&by=&every=&from=&to=` | the loss table per minute (`wirelog query loss`), with the range's completeness |
//! | `/api/completeness?from=&to=` | how complete the range's data is: the line every view shows, and its numbers |

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Query, State as AxState};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};
use wirelog_query::render::{columns, json_row};
use wirelog_query::{
    Field, Ty, Unit,
    parse_query, parse_time_arg, Engine, KeyValue, QueryError, QuerySpec, ResultTable, Row,
};
use wirelog_record::columns;
use wirelog_store::{Kind, Scan, Store, StoreError};

use crate::health::Sample;
use crate::{auth, health, map, metrics, ui, Limits, Options};

/// Engine memory one query may hold (group table and histograms).
const MAX_QUERY_BYTES: usize = 256 << 20;

/// Decoded store columns kept between questions ([`wirelog_store::ColumnCache`]):
/// the questions of one page read the same few files.
pub(crate) const COLUMN_CACHE_BYTES: usize = 256 << 20;

tokio::task_local! {
    /// What the queries of the request being answered could not read
    /// (corrupt or unreadable store files), for its answer's `warnings`.
    static WARNINGS: Arc<Mutex<Vec<String>>>;
}

/// Gives a JSON object answer a `warnings` list when its queries skipped
/// store files they could not read: a partial answer never looks whole.
pub(crate) async fn with_warnings(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let w = Arc::new(Mutex::new(Vec::new()));
    let resp = WARNINGS.scope(w.clone(), next.run(req)).await;
    let warnings = std::mem::take(&mut *w.lock().unwrap_or_else(|e| e.into_inner()));
    let json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if warnings.is_empty() || !json {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, None, "the answer could not be read back").into_response();
    };
    let list = serde_json::to_string(&warnings).unwrap_or_default();
    let body = match bytes.strip_prefix(b"{") {
        Some(rest) => {
            let sep = if rest.trim_ascii_start().starts_with(b"}") { "" } else { "," };
            [format!("{{\"warnings\":{list}{sep}").as_bytes(), rest].concat()
        }
        None => bytes.to_vec(),
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(body))
}

/// Notes, for the request's answer, the files a query could not read.
fn note_warnings(found: Vec<String>) {
    let _ = WARNINGS.try_with(|w| {
        let mut w = w.lock().unwrap_or_else(|e| e.into_inner());
        for f in found {
            if !w.contains(&f) {
                w.push(f);
            }
        }
    });
}

pub(crate) struct State {
    pub opts: Options,
    pub token: Option<Vec<u8>>,
    pub started: Instant,
    pub history: Mutex<VecDeque<Sample>>,
    gate: tokio::sync::Semaphore,
    extent: Mutex<Option<(Instant, Arc<Vec<health::KindExtent>>)>>,
    /// Shared by every question's scan of the store.
    pub cache: wirelog_store::ColumnCache,
}

impl State {
    pub fn new(opts: Options) -> State {
        State {
            token: opts.token.as_ref().map(|t| t.as_bytes().to_vec()),
            opts,
            started: Instant::now(),
            history: Mutex::new(VecDeque::new()),
            gate: tokio::sync::Semaphore::new(crate::QUERY_THREADS),
            extent: Mutex::new(None),
            cache: wirelog_store::ColumnCache::new(COLUMN_CACHE_BYTES),
        }
    }

    /// Bounds the blocking work (queries, pcap indexes) running at once.
    pub fn gate(&self) -> &tokio::sync::Semaphore {
        &self.gate
    }

    /// The store's extent, read from the files' footers (or asked of the
    /// backend) at most every 5 s.
    pub fn extent(&self) -> Result<Arc<Vec<health::KindExtent>>, String> {
        let mut g = self.extent.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, e)) = g.as_ref() {
            if at.elapsed() < Duration::from_secs(5) {
                return Ok(e.clone());
            }
        }
        let e = Arc::new(match (&self.opts.backend, &self.opts.store) {
            (Some(b), _) => b.extent()?,
            (None, Some(dir)) => health::extent(dir),
            (None, None) => Vec::new(),
        });
        *g = Some((Instant::now(), e.clone()));
        Ok(e)
    }
}

pub(crate) fn router(state: Arc<State>) -> Router {
    let mut r = Router::new().route("/metrics", get(metrics::handler));
    if state.opts.api {
        r = r
            .route("/api/query", get(query))
            .route("/api/records", get(records))
            .route("/api/sequence", get(sequence))
            .route("/api/pcap", get(crate::pcap::download))
            .route("/api/map", get(service_map))
            .route("/api/extent", get(extent))
            .route("/api/schema", get(schema))
            .route("/api/health", get(health_now))
            .route("/api/loss", get(crate::loss::rows))
            .route("/api/completeness", get(crate::loss::completeness))
            .route("/", get(ui::index))
            .route("/ui/{file}", get(ui::asset));
    }
    r.fallback(not_found)
        // Warnings join the JSON before it is compressed: the gzip layer is the outer one.
        .layer(axum::middleware::from_fn(with_warnings))
        .layer(axum::middleware::from_fn(crate::gzip::layer))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::check,
        ))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        None,
        "no such endpoint (see /api/... in the README)",
    )
}

/// A refused request: the status, the parameter at fault, and why.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    parameter: Option<String>,
    message: String,
}

impl ApiError {
    pub fn new(
        status: StatusCode,
        parameter: Option<&str>,
        message: impl Into<String>,
    ) -> ApiError {
        ApiError {
            status,
            parameter: parameter.map(str::to_string),
            message: message.into(),
        }
    }

    pub fn bad(parameter: &str, message: impl Into<String>) -> ApiError {
        let m = message.into();
        ApiError::new(
            StatusCode::BAD_REQUEST,
            Some(parameter),
            format!("parameter '{parameter}': {m}"),
        )
    }

    pub(crate) fn query(e: QueryError) -> ApiError {
        let p = e.flag.trim_start_matches('-');
        let mut a = ApiError::bad(p, e.to_string());
        a.parameter = Some(p.to_string());
        a
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": self.message, "parameter": self.parameter});
        (
            self.status,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response()
    }
}

pub(crate) fn json_response(body: String) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

/// The query string, each name once, only names the endpoint knows.
pub(crate) struct Params(HashMap<String, String>);

impl Params {
    pub(crate) fn new(raw: Vec<(String, String)>, known: &[&str]) -> Result<Params, ApiError> {
        let mut m = HashMap::new();
        for (k, v) in raw {
            if k == "token" {
                continue;
            }
            if !known.contains(&k.as_str()) {
                let takes = match known {
                    [] => "no parameters".to_string(),
                    _ => known.join(", "),
                };
                return Err(ApiError::bad(&k, format!("unknown; this endpoint takes {takes}")));
            }
            if m.insert(k.clone(), v).is_some() {
                return Err(ApiError::bad(&k, "given twice"));
            }
        }
        Ok(Params(m))
    }

    pub(crate) fn get(&self, k: &str) -> Option<&str> {
        self.0
            .get(k)
            .map(String::as_str)
            .filter(|s| !s.trim().is_empty())
    }

    /// `uid`: a connection's uid (letters and digits).
    pub(crate) fn uid(&self) -> Result<&str, ApiError> {
        let uid = self
            .get("uid")
            .ok_or_else(|| ApiError::bad("uid", "missing (a connection's uid, e.g. C1a2b3...)"))?;
        if uid.len() > 64 || !uid.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(ApiError::bad(
                "uid",
                format!("'{uid}' is not a uid (letters and digits)"),
            ));
        }
        Ok(uid)
    }

    fn kind(&self) -> Result<Kind, ApiError> {
        let kinds = || Kind::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ");
        let k = self.get("kind").ok_or_else(|| ApiError::bad("kind", format!("missing; one of {}", kinds())))?;
        Kind::from_name(k).ok_or_else(|| ApiError::bad("kind", format!("'{k}' is not one of {}", kinds())))
    }

    fn usize(&self, k: &str, max: usize) -> Result<Option<usize>, ApiError> {
        match self.get(k) {
            None => Ok(None),
            Some(s) => match s.trim().parse::<usize>() {
                Ok(n) if n <= max => Ok(Some(n)),
                Ok(_) => Err(ApiError::bad(k, format!("at most {max}"))),
                Err(_) => Err(ApiError::bad(k, format!("'{s}' is not a whole number"))),
            },
        }
    }

    /// `from`/`to` as ns: the times `wirelog query --from/--to` takes.
    pub(crate) fn range(&self) -> Result<(Option<i64>, Option<i64>), ApiError> {
        let now = now_ns();
        let t = |k: &'static str, flag: &'static str| {
            self.get(k)
                .map(|s| parse_time_arg(flag, s, now))
                .transpose()
                .map_err(ApiError::query)
        };
        let (from, to) = (t("from", "--from")?, t("to", "--to")?);
        if let (Some(f), Some(t)) = (from, to) {
            if f >= t {
                return Err(ApiError::bad("from", "must be before 'to'"));
            }
        }
        Ok((from, to))
    }
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

pub(crate) fn store_dir(state: &State) -> Result<PathBuf, ApiError> {
    state.opts.store.clone().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            None,
            "this server has no store (capture --no-store)",
        )
    })
}

/// Runs one query on a blocking thread, within the limits.
pub(crate) async fn run(state: &Arc<State>, spec: QuerySpec) -> Result<ResultTable, ApiError> {
    run_by(state, spec, Instant::now() + state.opts.limits.timeout).await
}

/// Like [`run`], for a request that runs several queries: they share one
/// deadline, so the request as a whole keeps the time limit.
pub(crate) async fn run_by(
    state: &Arc<State>,
    spec: QuerySpec,
    deadline: Instant,
) -> Result<ResultTable, ApiError> {
    run_as(state, spec, deadline, Shape::Groups).await
}

/// How the store's rows are fed to the engine ([`execute`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// [`Engine::new`]: every group of the range.
    Groups,
    /// Records sorted by a sum: [`Engine::records`] (a bounded top-k),
    /// the plain engine when the query has another shape or two rows were
    /// the same record.
    Records,
}

pub(crate) async fn run_as(
    state: &Arc<State>,
    spec: QuerySpec,
    deadline: Instant,
    shape: Shape,
) -> Result<ResultTable, ApiError> {
    let backend = state.opts.backend.clone();
    let records = state.opts.records.clone().filter(|r| r.covers(spec.kind));
    let dir = match (&backend, store_dir(state)) {
        (Some(_), _) => None,
        (None, Ok(d)) => Some(d),
        // capture --no-store --listen: the records in memory only.
        (None, Err(_)) if records.is_some() => None,
        (None, Err(e)) => return Err(e),
    };
    let limits = state.opts.limits;
    let cache = state.cache.clone();
    let _permit = state.gate.acquire().await.map_err(|_| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            None,
            "the server is stopping",
        )
    })?;
    let (table, warnings) = tokio::task::spawn_blocking(move || match backend {
        Some(b) => b
            .run(spec, deadline, MAX_QUERY_BYTES)
            .map(|t| (t, Vec::new()))
            .map_err(|e| backend_error(&*b, e, limits)),
        None => {
            // Taken before the store is listed (see wirelog_store::live).
            let view = records.map(|r| r.view(spec.kind));
            execute(dir.as_deref(), view.as_ref(), Some(cache), spec, limits, deadline, shape)
        }
    })
    .await
    .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, None, "the query failed"))??;
    note_warnings(warnings);
    Ok(table)
}

fn too_long(limits: Limits) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        None,
        format!(
            "the query ran longer than {} s and was stopped; narrow 'from'/'to' or 'where'",
            limits.timeout.as_secs_f64()
        ),
    )
}

fn too_big() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        None,
        format!(
            "the query needed more than {} MiB of groups and was stopped; group by fewer fields or narrow 'where'",
            MAX_QUERY_BYTES >> 20
        ),
    )
}

/// A backend's failure as the API says it: the limits as for the store; a
/// failure of the server behind us as 502, naming it.
fn backend_error(b: &dyn crate::Backend, e: crate::BackendError, limits: Limits) -> ApiError {
    match e {
        crate::BackendError::Time => too_long(limits),
        crate::BackendError::Memory => too_big(),
        crate::BackendError::Failed(m) => {
            ApiError::new(StatusCode::BAD_GATEWAY, None, format!("{}: {m}", b.name()))
        }
    }
}

/// What `wirelog query` does: prune by time and ranges, read only the
/// needed columns, feed the engine; abandoned past the time or memory limit.
/// With the table, the store's warnings about files it could not read.
/// A running capture's records in memory (`view`) are fed after the store's,
/// whose files written after the view was taken are left out: each record
/// is counted once.
pub(crate) fn execute(
    dir: Option<&Path>,
    view: Option<&wirelog_store::LiveView>,
    cache: Option<wirelog_store::ColumnCache>,
    spec: QuerySpec,
    limits: Limits,
    deadline: Instant,
    shape: Shape,
) -> Result<(ResultTable, Vec<String>), ApiError> {
    if shape == Shape::Records {
        if let Some(engine) = Engine::records(spec.clone()).map_err(ApiError::query)? {
            let (mut engine, warnings) = feed(dir, view, cache.clone(), engine, limits, deadline)?;
            if !engine.records_unsure() {
                return Ok((engine.finish(), warnings));
            }
            // Rows alike in every field whose sum the one pass does not
            // know (see `Engine::records`): the plain engine sums them into
            // one group, as `wirelog query` does.
        }
    }
    let engine = Engine::new(spec).map_err(ApiError::query)?;
    let (engine, warnings) = feed(dir, view, cache, engine, limits, deadline)?;
    Ok((engine.finish(), warnings))
}

/// The store's rows of the engine's range, then `view`'s, fed to `engine`.
fn feed(
    dir: Option<&Path>,
    view: Option<&wirelog_store::LiveView>,
    cache: Option<wirelog_store::ColumnCache>,
    mut engine: Engine,
    limits: Limits,
    deadline: Instant,
) -> Result<(Engine, Vec<String>), ApiError> {
    let spec = engine.spec().clone();
    let (from, to) = match spec.time_range {
        Some((f, t)) => ((f != i64::MIN).then_some(f), (t != i64::MAX).then_some(t)),
        None => (None, None),
    };
    let kind = spec.kind;
    let mut scan = Scan::new(kind)
        .columns(&spec.needed_columns())
        .time(from, to);
    for (col, lo, hi) in spec.numeric_ranges() {
        scan = scan.range(col, lo, hi);
    }
    if let Some(v) = view {
        scan = scan.live_upto(v.run(), v.committed);
    }
    if let Some(c) = cache {
        scan = scan.cache(c);
    }
    let mut problem = None;
    let mut warnings = Vec::new();
    if let Some(v) = view.filter(|v| v.missing > 0) {
        warnings.push(format!(
            "live: {} {} records of the running capture were evicted from memory (--live-memory) before the store had them; \
             they are not in this answer until the store's next flush (never without a store)",
            v.missing,
            kind.as_str()
        ));
    }
    let from_memory = |engine: &mut Engine| -> Result<(), ApiError> {
        for b in view.map(|v| v.batches.as_slice()).unwrap_or_default() {
            if let Err(e) = engine.consume(b) {
                return Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, None, format!("live records: {e}")));
            }
            if Instant::now() > deadline {
                return Err(too_long(limits));
            }
        }
        Ok(())
    };
    let Some(dir) = dir.filter(|d| d.join(kind.as_str()).is_dir()) else {
        from_memory(&mut engine)?;
        return Ok((engine, warnings));
    };
    let res = Store::scan_ref(dir, &scan, |batch| {
        if let Err(e) = engine.consume(batch) {
            problem = Some(e.to_string());
            return Err(StoreError::Callback("schema".into()));
        }
        if Instant::now() > deadline {
            return Err(StoreError::Callback("time".into()));
        }
        if engine.heap_bytes() > MAX_QUERY_BYTES {
            return Err(StoreError::Callback("memory".into()));
        }
        Ok(())
    });
    match res {
        Ok(stats) => {
            from_memory(&mut engine)?;
            warnings.extend(stats.warnings);
            Ok((engine, warnings))
        }
        Err(StoreError::Callback(why)) if why == "time" => Err(too_long(limits)),
        Err(StoreError::Callback(why)) if why == "memory" => Err(too_big()),
        Err(StoreError::Callback(_)) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            None,
            format!("{}: {}", dir.display(), problem.unwrap_or_default()),
        )),
        Err(e) => Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, None, format!("cannot read the store: {e}"))),
    }
}

/// A table holding `rows`, for rendering a summary row without `time`.
fn plain(t: &ResultTable) -> ResultTable {
    ResultTable {
        kind: t.kind,
        by: t.by.clone(),
        every_ns: None,
        percentiles: t.percentiles,
        sort: t.sort,
        rows: Vec::new(),
        total: t.total,
        groups: t.groups,
        rows_scanned: t.rows_scanned,
        rows_matched: t.rows_matched,
        estimated: t.estimated,
    }
}

fn summary_row(t: &ResultTable, acc: wirelog_query::Acc) -> Row {
    Row {
        time: None,
        key: vec![KeyValue::Null; t.by.len()],
        acc,
        duration: None,
        avg: None,
    }
}

/// The envelope: `columns`, `rows` (the objects of `wirelog query --format
/// json`), `other` (sums of the groups `top` left out; not for time series),
/// `total`, and the counts.
pub(crate) fn table_json(t: &ResultTable, truncated: bool, started: Instant) -> String {
    let rows: Vec<String> = t.rows.iter().map(|r| json_row(t, r)).collect();
    let p = plain(t);
    let total = json_row(&p, &summary_row(t, t.total));
    let other = if t.every_ns.is_none() && t.rows.len() < t.groups {
        let mut shown = wirelog_query::Acc::default();
        for r in &t.rows {
            shown.bytes_out += r.acc.bytes_out;
            shown.bytes_in += r.acc.bytes_in;
            shown.pkts_out += r.acc.pkts_out;
            shown.pkts_in += r.acc.pkts_in;
            shown.conns += r.acc.conns;
        }
        let rest = wirelog_query::Acc {
            bytes_out: t.total.bytes_out.saturating_sub(shown.bytes_out),
            bytes_in: t.total.bytes_in.saturating_sub(shown.bytes_in),
            pkts_out: t.total.pkts_out.saturating_sub(shown.pkts_out),
            pkts_in: t.total.pkts_in.saturating_sub(shown.pkts_in),
            conns: t.total.conns.saturating_sub(shown.conns),
        };
        json_row(&p, &summary_row(t, rest))
    } else {
        "null".to_string()
    };
    let series = if t.every_ns.is_some() {
        t.rows
            .iter()
            .map(|r| &r.key)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    } else {
        t.rows.len()
    };
    format!(
        "{{\"kind\":\"{}\",\"columns\":{},\"rows\":[{}],\"other\":{},\"total\":{},\"groups\":{},\"shown\":{},\"rows_scanned\":{},\"rows_matched\":{},\"estimated\":{},\"truncated\":{},\"every_s\":{},\"elapsed_ms\":{:.3}}}",
        t.kind.as_str(),
        serde_json::to_string(&columns(t)).unwrap_or_default(),
        rows.join(",\n"),
        other,
        total,
        t.groups,
        series,
        t.rows_scanned,
        t.rows_matched,
        t.estimated,
        truncated,
        t.every_ns.map_or("null".to_string(), |e| (e as f64 / 1e9).to_string()),
        started.elapsed().as_secs_f64() * 1e3,
    )
}

const QUERY_PARAMS: &[&str] = &["kind", "where", "by", "sort", "top", "every", "from", "to"];

/// Parses `/api/query`'s parameters as `wirelog query` parses its flags.
fn parse_spec(p: &Params, limits: &Limits) -> Result<QuerySpec, ApiError> {
    let kind = p.kind()?;
    let top = p.usize("top", limits.max_rows)?;
    let top = match top {
        Some(0) => Some(limits.max_rows),
        t => t,
    };
    let mut spec = parse_query(
        kind,
        p.get("where"),
        p.get("by"),
        p.get("sort"),
        top,
        p.get("every"),
    )
    .map_err(ApiError::query)?;
    let (from, to) = p.range()?;
    if from.is_some() || to.is_some() {
        spec.time_range = Some((from.unwrap_or(i64::MIN), to.unwrap_or(i64::MAX)));
    }
    if let (Some(every), Some(f), Some(t)) = (spec.every_ns, from, to) {
        let n = (t - f) / every.max(1);
        if n as usize > limits.max_intervals {
            return Err(ApiError::bad(
                "every",
                format!(
                    "{n} intervals between 'from' and 'to'; at most {}",
                    limits.max_intervals
                ),
            ));
        }
    }
    Ok(spec)
}

/// The interval cap when `from` or `to` is not given: the span is then
/// unknown beforehand (and a store may span years with records in a few
/// minutes of them), so the intervals the answer holds are counted;
/// `every=1us` over thousands of records is refused as it is with both
/// ends given.
fn intervals_held(spec_every: Option<i64>, open: bool, t: &ResultTable, max: usize) -> Result<(), ApiError> {
    if spec_every.is_none() || !open {
        return Ok(());
    }
    let n = t.rows.iter().filter_map(|r| r.time).collect::<std::collections::HashSet<_>>().len();
    if n > max {
        return Err(ApiError::bad(
            "every",
            format!("{n} intervals hold records (no 'from'/'to' given); at most {max}: give a longer 'every' or narrow 'from'/'to'"),
        ));
    }
    Ok(())
}

/// Cuts a time series to the row limit (series x intervals).
fn cap(mut t: ResultTable, max: usize) -> (ResultTable, bool) {
    let cut = t.rows.len() > max;
    t.rows.truncate(max);
    (t, cut)
}

async fn query(
    AxState(state): AxState<Arc<State>>,
    Query(raw): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let p = Params::new(raw, QUERY_PARAMS)?;
    let spec = parse_spec(&p, &state.opts.limits)?;
    let (every, open) = (spec.every_ns, spec.time_range.is_none_or(|(f, t)| f == i64::MIN || t == i64::MAX));
    let t = run(&state, spec).await?;
    intervals_held(every, open, &t, state.opts.limits.max_intervals)?;
    let (t, cut) = cap(t, state.opts.limits.max_rows);
    Ok(json_response(table_json(&t, cut, started)))
}

/// The fields that tell one record from another, for the drill-down
/// (grouping by them gives the records themselves, through the same engine),
/// with the programs, users and containers behind both ends (empty unless
/// the capture had `--processes`; the UI shows those columns only when a
/// row has them). For a protocol: the transaction's time, ends, status and
/// latency, then the columns its declaration marks brief.
pub(crate) fn record_fields(kind: Kind) -> String {
    const OWNERS: &str = "orig_proc,orig_user,orig_container,resp_proc,resp_container";
    match kind.protocol() {
        Some(p) => {
            let brief = columns::of(p).stored().into_iter().filter(|c| c.brief).map(|c| c.name);
            ["ts", "uid", "client", "client_port", "server", "server_port", "status", "latency"]
                .into_iter()
                .chain(brief)
                .chain([OWNERS])
                .collect::<Vec<_>>()
                .join(",")
        }
        None => match kind {
            Kind::Flows => "bucket,client,server,server_port,proto".to_string(),
            Kind::Conns => format!("ts,uid,orig_h,orig_p,resp_h,resp_p,proto,service,duration,conn_state,history,{OWNERS}"),
            Kind::Loss => "ts,source,protocol,packets,kernel_packets,kernel_drops,evicted,gaps,missed_bytes,records_dropped".to_string(),
            _ => "ts,fingerprint,role,host_cert,subject,issuer,not_valid_before,not_valid_after,san_dns".to_string(),
        },
    }
}

/// A query field's type as `/api/schema` names it.
fn type_name(ty: Ty) -> &'static str {
    match ty {
        Ty::UInt { unit: Unit::Bytes, .. } => "bytes",
        Ty::UInt { unit: Unit::Count, .. } => "count",
        Ty::UInt { unit: Unit::Proto, .. } => "ip_proto",
        Ty::UInt { .. } => "uint",
        Ty::Time => "time",
        Ty::Duration => "duration",
        Ty::Ip => "ip",
        Ty::Str => "string",
        Ty::Bool => "bool",
    }
}

/// `GET /api/schema`: every record kind (flows, conns, each protocol's
/// transactions, x509) with its columns: name, type, whether it may be
/// unset, the other names queries accept, and for a protocol's own columns
/// the declaration's documentation and the column's name in the protocol's
/// log. The UI takes its list of protocols from it.
pub fn schema_json() -> Value {
    let kinds: Vec<Value> = Kind::ALL
        .iter()
        .map(|&kind| {
            let decl = kind.protocol().map(columns::of);
            let cols: Vec<Value> = Field::all(kind)
                .map(|f| {
                    let weight = &columns::SAMPLE_WEIGHT;
                    let d = decl
                        .and_then(|d| d.stored_column(f.name()))
                        .or_else(|| (kind.is_tx() && f.name() == weight.name).then_some(weight));
                    json!({
                        "name": f.name(),
                        "type": type_name(f.ty()),
                        "nullable": f.nullable(),
                        "aliases": f.aliases(),
                        "doc": d.map(|c| c.doc),
                        "log": d.and_then(|c| c.log),
                    })
                })
                .collect();
            json!({
                "kind": kind.as_str(),
                "protocol": kind.is_tx(),
                "what": kind.protocol().map(|p| p.what()),
                "log": kind.protocol().map(|p| format!("{}.log", p.log())),
                "record_fields": record_fields(kind),
                "by": wirelog_query::default_by(kind).iter().map(|f| f.name()).collect::<Vec<_>>(),
                "shape": kind.protocol().map(|p| columns::of(p).shape),
                "columns": cols,
            })
        })
        .collect();
    json!({ "kinds": kinds })
}

async fn schema(Query(raw): Query<Vec<(String, String)>>) -> Result<Response, ApiError> {
    Params::new(raw, &[])?;
    Ok(json_response(schema_json().to_string()))
}

fn time_field(kind: Kind) -> &'static str {
    if kind == Kind::Flows {
        "bucket"
    } else {
        "ts"
    }
}

/// Records a page at a time: `sort` is any record field or aggregate
/// (`NAME`, `NAME:asc|desc`; default newest first), `offset` the rows
/// skipped, `limit` the rows given. The engine keeps the first
/// `offset + limit` groups in sort order (ties broken by every field, so
/// pages neither overlap nor skip), and the page is cut from them.
async fn records(
    AxState(state): AxState<Arc<State>>,
    Query(raw): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let p = Params::new(raw, &["kind", "where", "from", "to", "limit", "offset", "sort"])?;
    let kind = p.kind()?;
    let limit = p
        .usize("limit", state.opts.limits.max_rows)?
        .unwrap_or(100)
        .max(1);
    let offset = p.usize("offset", MAX_OFFSET)?.unwrap_or(0);
    let newest_first = format!("{}:desc", time_field(kind));
    let mut spec = parse_query(
        kind,
        p.get("where"),
        Some(&record_fields(kind)),
        Some(p.get("sort").unwrap_or(&newest_first)),
        Some(offset + limit),
        None,
    )
    .map_err(ApiError::query)?;
    // A record is a group of one: its percentiles repeat its own duration or
    // latency (a column of the record) and cost a histogram per record, so
    // they are kept only when the sort asks for one.
    use wirelog_query::{Agg, SortKey};
    if !matches!(spec.sort.0, SortKey::Agg(Agg::P50 | Agg::P95 | Agg::P99 | Agg::Avg)) {
        spec.percentiles = false;
    }
    let (from, to) = p.range()?;
    if from.is_some() || to.is_some() {
        spec.time_range = Some((from.unwrap_or(i64::MIN), to.unwrap_or(i64::MAX)));
    }
    let by_time = matches!(spec.sort.0, wirelog_query::SortKey::Field(f) if f.name() == time_field(kind));
    let mut t = match (from, to) {
        (Some(f), Some(t)) if by_time => {
            let desc = spec.sort.1 == wirelog_query::Order::Desc;
            newest_page(&state, spec, (f, t), desc, offset + limit).await?
        }
        _ => run_as(&state, spec, Instant::now() + state.opts.limits.timeout, Shape::Records).await?,
    };
    t.rows.drain(..offset.min(t.rows.len()));
    let cut = offset + t.rows.len() < t.groups;
    let body = table_json(&t, cut, started);
    // The envelope of /api/query with the page's first row number first.
    Ok(json_response(format!("{{\"offset\":{offset},{}", &body[1..])))
}

/// A page in time order without grouping every record of a long range: the
/// records of the last (or first) 1/1024 of the range, then 8 times more
/// until the page is full or the range is covered; the count and the sums
/// over the whole range come from one cheap query (its matched rows: every
/// record is a group of one, told apart by ts and uid).
async fn newest_page(
    state: &Arc<State>,
    spec: QuerySpec,
    (from, to): (i64, i64),
    desc: bool,
    need: usize,
) -> Result<ResultTable, ApiError> {
    let span = to.saturating_sub(from).max(1);
    let mut width = (span / 1024).max(1_000_000_000);
    let deadline = Instant::now() + state.opts.limits.timeout;
    let mut page = loop {
        let sub = if desc {
            (to.saturating_sub(width).max(from), to)
        } else {
            (from, from.saturating_add(width).min(to))
        };
        let mut s = spec.clone();
        s.time_range = Some(sub);
        let t = run_by(state, s, deadline).await?;
        if t.groups >= need || width >= span {
            break t;
        }
        width = width.saturating_mul(8);
    };
    let mut count = spec.clone();
    count.by = Vec::new();
    count.every_ns = None;
    count.top = Some(1);
    count.percentiles = false;
    count.sort = (wirelog_query::SortKey::Agg(wirelog_query::Agg::Conns), wirelog_query::Order::Desc);
    let all = run_by(state, count, deadline).await?;
    page.groups = all.rows_matched as usize;
    page.total = all.total;
    page.rows_matched = all.rows_matched;
    page.rows_scanned += all.rows_scanned;
    Ok(page)
}

/// Rows a page may start at (a page is still at most `max_rows`).
const MAX_OFFSET: usize = 100_000_000;

/// A connection and its calls in time order, a page at a time: each kind
/// gives its first `offset + limit` calls by time, and the page is cut from
/// their merge (so it is the same page as from one list of every call);
/// `total` counts every call of the connection.
async fn sequence(
    AxState(state): AxState<Arc<State>>,
    Query(raw): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let p = Params::new(raw, &["uid", "offset", "limit"])?;
    let uid = p.uid()?;
    let max = state.opts.limits.max_rows;
    let limit = p.usize("limit", max)?.unwrap_or(max).max(1);
    let offset = p.usize("offset", MAX_OFFSET)?.unwrap_or(0);
    let deadline = Instant::now() + state.opts.limits.timeout;
    let mut conn = Value::Null;
    let mut calls: Vec<Value> = Vec::new();
    let mut total = 0usize;
    for kind in std::iter::once(Kind::Conns).chain(Kind::TX) {
        let top = if kind == Kind::Conns { 1 } else { offset + limit };
        let spec = parse_query(
            kind,
            Some(&format!("uid = \"{uid}\"")),
            Some(&record_fields(kind)),
            Some("ts"),
            Some(top),
            None,
        )
        .map_err(ApiError::query)?;
        let t = run_by(&state, spec, deadline).await?;
        if kind != Kind::Conns {
            total += t.groups;
        }
        for r in &t.rows {
            let mut v: Value = serde_json::from_str(&json_row(&t, r)).unwrap_or(Value::Null);
            if kind == Kind::Conns {
                conn = v;
                continue;
            }
            if let Value::Object(m) = &mut v {
                m.insert("kind".into(), Value::String(kind.as_str().into()));
            }
            calls.push(v);
        }
    }
    // RFC 3339 times of one form sort as strings; ties keep the kinds' order.
    calls.sort_by(|a, b| a["ts"].as_str().cmp(&b["ts"].as_str()));
    let calls: Vec<Value> = calls.into_iter().skip(offset).take(limit).collect();
    let pcap = state
        .opts
        .pcap_dir
        .as_ref()
        .map(|_| format!("/api/pcap?uid={uid}"));
    Ok(json_response(
        json!({"uid": uid, "conn": conn, "calls": calls, "offset": offset, "total": total,
               "truncated": offset + calls.len() < total, "pcap": pcap})
        .to_string(),
    ))
}

/// Edges the map may show (the rest are summed into one).
const MAP_MAX_TOP: usize = 2000;
/// Groups each of the map's queries may hold: every pair of the range is
/// needed for sums that are whole; past this the answer says it is partial.
const MAP_MAX_PAIRS: usize = 2_000_000;

/// `GET /api/map`: the pairs of every kind over the range, grouped and
/// ranked by [`map::build`]. The queries run at once (within the gate) and
/// share one deadline.
async fn service_map(
    AxState(state): AxState<Arc<State>>,
    Query(raw): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let p = Params::new(raw, &["from", "to", "top", "group", "rank", "find"])?;
    let (from, to) = p.range()?;
    let top = match p.usize("top", MAP_MAX_TOP)? {
        Some(0) => return Err(ApiError::bad("top", format!("at least 1 (and at most {MAP_MAX_TOP})"))),
        t => t.unwrap_or(200),
    };
    let named = |k: &str, names: &[&str]| -> Result<Option<String>, ApiError> {
        match p.get(k) {
            None => Ok(None),
            Some(v) if names.contains(&v) => Ok(Some(v.to_string())),
            Some(v) => Err(ApiError::bad(k, format!("'{v}' is not one of {}", names.join(", ")))),
        }
    };
    let group = named("group", map::Group::NAMES)?.and_then(|g| map::Group::from_name(&g)).unwrap_or(map::Group::Host);
    let rank = named("rank", map::Rank::NAMES)?.and_then(|r| map::Rank::from_name(&r)).unwrap_or(map::Rank::Calls);
    let find = match p.get("find") {
        Some(f) if f.chars().count() > 200 => return Err(ApiError::bad("find", "at most 200 characters")),
        f => f.map(|f| f.trim().to_lowercase()),
    };
    let range = (from.is_some() || to.is_some())
        .then(|| (from.unwrap_or(i64::MIN), to.unwrap_or(i64::MAX)));
    let deadline = Instant::now() + state.opts.limits.timeout;
    // Connections by both ends and their service, the owners of each end
    // (they name the nodes) over the connections that have one, each
    // transaction kind by its ends. No percentiles for the connections:
    // the map shows none, and their histograms cost memory.
    let conns = [(map::CONN_PAIRS, None), (map::ORIG_OWNERS.0, Some(map::ORIG_OWNERS.1)), (map::RESP_OWNERS.0, Some(map::RESP_OWNERS.1))];
    let mut specs = Vec::new();
    for (kind, by, where_) in conns.iter().map(|&(by, w)| (Kind::Conns, by, w)).chain(Kind::TX.iter().map(|&k| (k, "client,server,server_port", None))) {
        // The map ranks the pairs itself: the sort only decides which pairs a
        // range of more than MAP_MAX_PAIRS keeps. By bytes for connections,
        // whose counts are mostly 1 (a sort by them is mostly tie-breaks).
        let sort = if kind == Kind::Conns { "bytes" } else { "count" };
        let mut spec = parse_query(kind, where_, Some(by), Some(sort), Some(MAP_MAX_PAIRS), None)
            .map_err(ApiError::query)?;
        spec.time_range = range;
        spec.percentiles = kind != Kind::Conns;
        specs.push(spec);
    }
    let mut tables = run_all(&state, specs, deadline).await?;
    let partial = tables.iter().any(|t| t.rows.len() < t.groups);
    let txs = tables.split_off(conns.len());
    let ask = map::Ask { group, rank, top, find };
    let body = tokio::task::spawn_blocking(move || {
        let mut v = map::build(&tables[0], [&tables[1], &tables[2]], &txs, &ask);
        v["partial"] = json!(partial);
        v
    })
    .await
    .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, None, "the map could not be built"))?;
    let mut body = body;
    body["elapsed_ms"] = json!(started.elapsed().as_secs_f64() * 1e3);
    Ok(json_response(body.to_string()))
}

/// Runs queries at once (as many as the gate lets through), in the
/// request's warnings scope, and gives their tables in order.
async fn run_all(state: &Arc<State>, specs: Vec<QuerySpec>, deadline: Instant) -> Result<Vec<ResultTable>, ApiError> {
    let warnings = WARNINGS.try_with(Arc::clone).ok();
    let mut set = tokio::task::JoinSet::new();
    for (i, spec) in specs.into_iter().enumerate() {
        let st = state.clone();
        let q = async move { (i, run_by(&st, spec, deadline).await) };
        match &warnings {
            Some(w) => set.spawn(WARNINGS.scope(w.clone(), q)),
            None => set.spawn(q),
        };
    }
    let mut out: Vec<Option<ResultTable>> = Vec::new();
    while let Some(done) = set.join_next().await {
        let (i, t) = done.map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, None, "a query failed"))?;
        if out.len() <= i {
            out.resize_with(i + 1, || None);
        }
        out[i] = Some(t?);
    }
    Ok(out.into_iter().flatten().collect())
}

async fn extent(
    AxState(state): AxState<Arc<State>>,
    Query(raw): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    Params::new(raw, &[])?;
    if state.opts.backend.is_none() && state.opts.records.is_none() {
        store_dir(&state)?;
    }
    let s = state.clone();
    let e = tokio::task::spawn_blocking(move || s.extent())
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                None,
                "cannot read the store",
            )
        })?
        .map_err(|m| {
            let name = state.opts.backend.as_ref().map(|b| b.name()).unwrap_or_default();
            ApiError::new(StatusCode::BAD_GATEWAY, None, format!("/api/extent: {name}: {m}"))
        })?;
    let e = match &state.opts.records {
        Some(r) => health::with_records(&e, r),
        None => (*e).clone(),
    };
    Ok(json_response(
        serde_json::to_string(&e).unwrap_or_default(),
    ))
}

async fn health_now(
    AxState(state): AxState<Arc<State>>,
    Query(raw): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    Params::new(raw, &[])?;
    let s = state.clone();
    let body = tokio::task::spawn_blocking(move || health::report(&s))
        .await
        .unwrap_or(Value::Null);
    Ok(json_response(body.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirelog_store::synth::FlowGen;
    use wirelog_store::StoreOptions;

    fn flows_store(tag: &str, buckets: usize) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("wirelog-serve-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut st = Store::open(&dir, StoreOptions::default()).unwrap();
        let mut g = FlowGen::new(7, 1000, 1_700_000_000_000_000_000);
        for _ in 0..buckets {
            st.append_flows(&g.bucket(20_000)).unwrap();
        }
        st.flush().unwrap();
        dir
    }

    #[test]
    fn a_query_past_its_deadline_is_stopped_with_503() {
        let dir = flows_store("limits", 20);
        let spec = parse_query(Kind::Flows, None, Some("sip,dip"), None, Some(10), None).unwrap();
        let limits = Limits::default();
        let done = execute(
            Some(&dir),
            None,
            None,
            spec.clone(),
            limits,
            Instant::now() + Duration::from_secs(60),
            Shape::Groups,
        )
        .unwrap()
        .0;
        assert!(done.rows_scanned >= 400_000, "{}", done.rows_scanned);
        let e = execute(Some(&dir), None, None, spec, limits, Instant::now(), Shape::Groups).unwrap_err();
        assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(e.message.contains("longer than 10 s"), "{}", e.message);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn params_name_what_is_wrong() {
        let raw = |v: &[(&str, &str)]| {
            v.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect::<Vec<_>>()
        };
        let e = Params::new(raw(&[("kind", "x"), ("kind", "y")]), &["kind"])
            .err()
            .unwrap();
        assert_eq!(e.parameter.as_deref(), Some("kind"));
        let p = Params::new(
            raw(&[("kind", "conns"), ("top", "12"), ("token", "ignored")]),
            &["kind", "top"],
        )
        .unwrap();
        assert_eq!(p.kind().unwrap(), Kind::Conns);
        assert_eq!(
            p.usize("top", 10).err().unwrap().parameter.as_deref(),
            Some("top")
        );
        assert_eq!(p.usize("top", 100).unwrap(), Some(12));
    }
}
