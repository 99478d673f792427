//! `/api/loss` and `/api/completeness`: the loss table (`wirelog query
//! loss`) over a time range, and the line every view of the UI shows above
//! its numbers, computed here from the same sums (`wirelog_query::loss`).
//! A running capture's loss rows in memory (`capture --listen`) are read
//! after the store's, each once, as the other kinds are.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Query, State as AxState};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};
use wirelog_query::loss::{Completeness, LossQuery, LossTable};
use wirelog_query::time::format_rfc3339;
use wirelog_record::LossCount;
use wirelog_store::{Kind, Scan, Store};

use crate::api::{json_response, store_dir, ApiError, Params, State};

/// Sums the loss rows of the store (and of the running capture) as `q` says.
async fn table(state: &Arc<State>, q: LossQuery, from: Option<i64>, to: Option<i64>) -> Result<LossTable, ApiError> {
    if state.opts.backend.is_some() {
        return Err(ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            None,
            "the loss table is read from a store; in ClickHouse query its `loss` table with SQL",
        ));
    }
    let records = state.opts.records.clone();
    let cache = state.cache.clone();
    let dir = match store_dir(state) {
        Ok(d) => Some(d),
        Err(_) if records.is_some() => None,
        Err(e) => return Err(e),
    };
    let _permit = state
        .gate()
        .acquire()
        .await
        .map_err(|_| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, None, "the server is stopping"))?;
    let deadline = Instant::now() + state.opts.limits.timeout;
    tokio::task::spawn_blocking(move || {
        let view = records.map(|r| r.view(Kind::Loss));
        let mut sums = q.sums();
        let mut problem = None;
        if let Some(dir) = dir.filter(|d| d.join(Kind::Loss.as_str()).is_dir()) {
            let mut scan = Scan::new(Kind::Loss).columns(&q.needed_columns()).time(from, to).cache(cache);
            if let Some(v) = &view {
                scan = scan.live_upto(v.run(), v.committed);
            }
            Store::scan_ref(&dir, &scan, |b| {
                if problem.is_none() {
                    problem = sums.consume(b).err();
                }
                match Instant::now() > deadline {
                    true => Err(wirelog_store::StoreError::Callback("time".into())),
                    false => Ok(()),
                }
            })
            .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, None, format!("the loss table: {e}")))?;
        }
        for b in view.iter().flat_map(|v| v.batches.iter()) {
            if problem.is_none() {
                problem = sums.consume(b).err();
            }
        }
        match problem {
            Some(e) => Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, None, e.to_string())),
            None => Ok(sums.finish()),
        }
    })
    .await
    .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, None, "the loss query failed"))?
}

fn completeness_json(c: &Completeness) -> Value {
    let totals: serde_json::Map<String, Value> = c.totals.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    json!({
        "text": c.text,
        "packets_seen": c.packets_seen,
        // Numbers of this span are extrapolated from a sample.
        "estimated": c.sampled_from_ns.is_some() || !c.stopped.is_empty(),
        "sampled_from": c.sampled_from_ns.map(format_rfc3339),
        "sampled_to": c.sampled_to_ns.map(format_rfc3339),
        // Per protocol: "1 in N" and when.
        "sampling": c.sampling.iter().map(|s| json!({
            "protocol": s.protocol,
            "one_in": s.one_in(),
            "from": format_rfc3339(s.from_ns),
            "to": format_rfc3339(s.to_ns),
            "parsed": s.parsed,
            "sampled": s.sampled,
        })).collect::<Vec<_>>(),
        // Per protocol: parsed connections the CPU budget stopped parsing
        // part way (step 1b), and when.
        "stopped": c.stopped.iter().map(|s| json!({
            "protocol": s.protocol,
            "from": format_rfc3339(s.from_ns),
            "to": format_rfc3339(s.to_ns),
            "connections": s.connections,
        })).collect::<Vec<_>>(),
        "minutes": c.minutes,
        "totals": totals,
    })
}

/// `/api/loss?where=&by=&every=&from=&to=`: `columns`, `rows` (one object
/// per minute and key, as `wirelog query loss --format json`) and the
/// range's `completeness`.
pub(crate) async fn rows(
    AxState(state): AxState<Arc<State>>,
    Query(raw): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let p = Params::new(raw, &["where", "by", "every", "from", "to"])?;
    let (from, to) = p.range()?;
    let mut q = LossQuery::parse(p.get("where"), p.get("by"), p.get("every")).map_err(ApiError::query)?;
    let (from, to) = q.set_range(from, to);
    let t = table(&state, q, from, to).await?;
    let columns: Vec<&str> = wirelog_query::loss::columns(&t);
    let rows: Vec<Value> = t
        .rows
        .iter()
        .map(|r| {
            let mut o = serde_json::Map::new();
            o.insert("time".into(), json!(format_rfc3339(r.ts_ns)));
            for (k, v) in t.by.iter().zip(&r.keys) {
                o.insert(k.to_string(), json!(v));
            }
            for c in LossCount::ALL {
                o.insert(c.name().into(), json!(r.counts.get(c)));
            }
            Value::Object(o)
        })
        .collect();
    let body = json!({
        "columns": columns,
        "rows": rows,
        "completeness": completeness_json(&Completeness::of(&t)),
        "elapsed_ms": started.elapsed().as_secs_f64() * 1000.0,
    });
    Ok(json_response(body.to_string()))
}

/// `/api/completeness?from=&to=`: how complete the range's data is (the
/// UI's header line), from the loss table summed over the range.
pub(crate) async fn completeness(
    AxState(state): AxState<Arc<State>>,
    Query(raw): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let p = Params::new(raw, &["from", "to"])?;
    let (from, to) = p.range()?;
    let mut q = LossQuery::parse(None, None, None).map_err(ApiError::query)?;
    let (from, to) = q.set_range(from, to);
    let t = table(&state, q, from, to).await?;
    Ok(json_response(completeness_json(&Completeness::of(&t)).to_string()))
}
