//! `/metrics`: Prometheus text (OpenMetrics) from `prometheus-client`.
//!
//! Nothing is counted here: each scrape builds a registry from the figures
//! of the moment (a capture's worker counters, the store's footers, this
//! process's /proc), so the packet path never touches a metric. Counters end
//! in `_total`, sizes are in bytes, times in seconds, and no label holds an
//! address.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};

use crate::api::State as AppState;
use crate::procstat;

type Labels = Vec<(String, String)>;

/// A histogram whose buckets were counted elsewhere (the output thread's
/// atomics): `prometheus-client`'s own only counts by `observe`.
#[derive(Debug)]
struct ConstHistogram {
    sum: f64,
    count: u64,
    /// (upper bound, count), not cumulative; `f64::MAX` is +Inf.
    buckets: Vec<(f64, u64)>,
}

impl EncodeMetric for ConstHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_histogram::<NoLabelSet>(self.sum, self.count, &self.buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

fn label(k: &str, v: &str) -> Labels {
    vec![(k.to_string(), v.to_string())]
}

fn counters(
    reg: &mut Registry,
    name: &str,
    help: &str,
    unit: Option<Unit>,
    values: &[(Labels, u64)],
) {
    let fam: Family<Labels, Counter> = Family::default();
    for (l, v) in values {
        fam.get_or_create(l).inc_by(*v);
    }
    match unit {
        Some(u) => reg.register_with_unit(name, help, u, fam),
        None => reg.register(name, help, fam),
    }
}

fn gauges(
    reg: &mut Registry,
    name: &str,
    help: &str,
    unit: Option<Unit>,
    values: &[(Labels, i64)],
) {
    let fam: Family<Labels, Gauge> = Family::default();
    for (l, v) in values {
        fam.get_or_create(l).set(*v);
    }
    match unit {
        Some(u) => reg.register_with_unit(name, help, u, fam),
        None => reg.register(name, help, fam),
    }
}

/// A counter family of seconds (float).
fn seconds(reg: &mut Registry, name: &str, help: &str, values: &[(Labels, f64)]) {
    let fam: Family<Labels, Counter<f64, std::sync::atomic::AtomicU64>> = Family::default();
    for (l, v) in values {
        fam.get_or_create(l).inc_by(*v);
    }
    reg.register_with_unit(name, help, Unit::Seconds, fam);
}

pub(crate) fn text(state: &AppState) -> String {
    let mut reg = Registry::default();
    reg.register(
        "wirelog_build",
        "wirelog's version",
        Info::new(vec![(
            "version".to_string(),
            env!("CARGO_PKG_VERSION").to_string(),
        )]),
    );
    let (cpu, rss) = procstat::read();
    let cpu_c: Counter<f64, std::sync::atomic::AtomicU64> = Counter::default();
    cpu_c.inc_by(cpu);
    reg.register_with_unit(
        "process_cpu",
        "CPU time of this process, user + system",
        Unit::Seconds,
        cpu_c,
    );
    let rss_g: Gauge = Gauge::default();
    rss_g.set(rss as i64);
    reg.register_with_unit(
        "process_resident_memory",
        "Resident memory of this process",
        Unit::Bytes,
        rss_g,
    );

    if let Some(live) = &state.opts.live {
        let s = live.snapshot();
        let per = |f: fn(&crate::WorkerLive) -> u64| -> Vec<(Labels, u64)> {
            s.workers
                .iter()
                .enumerate()
                .map(|(i, w)| (vec![("worker".to_string(), i.to_string())], f(w)))
                .collect()
        };
        counters(
            &mut reg,
            "wirelog_packets",
            "Packets taken from the rings (after the kernel filter)",
            None,
            &per(|w| w.packets),
        );
        counters(
            &mut reg,
            "wirelog_captured",
            "Wire length of the packets taken",
            Some(Unit::Bytes),
            &per(|w| w.bytes),
        );
        counters(
            &mut reg,
            "wirelog_kernel_packets",
            "Packets the kernel passed to the sockets (with the drops)",
            None,
            &per(|w| w.kernel_packets),
        );
        counters(
            &mut reg,
            "wirelog_kernel_drops",
            "Packets the kernel dropped because a ring was full or the CPU budget shed them",
            None,
            &per(|w| w.kernel_drops),
        );
        counters(
            &mut reg,
            "wirelog_shed_kernel_dropped",
            "Packets of wirelog_kernel_drops the socket program refused while the worker paused at its CPU budget (step 4)",
            None,
            &per(|w| w.shed_packets),
        );
        counters(
            &mut reg,
            "wirelog_kernel_ring_full",
            "Times a ring was full",
            None,
            &per(|w| w.kernel_freezes),
        );
        counters(
            &mut reg,
            "wirelog_connections_evicted",
            "Connections ended early because the table was full (probe drops)",
            None,
            &per(|w| w.evicted),
        );
        counters(
            &mut reg,
            "wirelog_flows_written_early",
            "Flows written before their bucket ended because the flow table was full",
            None,
            &per(|w| w.flows_early),
        );
        counters(
            &mut reg,
            "wirelog_packets_not_ip",
            "Packets that are not IP",
            None,
            &per(|w| w.not_ip),
        );
        counters(
            &mut reg,
            "wirelog_packets_not_decoded",
            "IP packets not decoded (truncated, malformed, tunnels, fragments dropped)",
            None,
            &per(|w| w.not_decoded),
        );
        counters(
            &mut reg,
            "wirelog_checksum_bad",
            "Packets with a bad IP or transport checksum",
            None,
            &per(|w| w.checksum_bad),
        );
        counters(
            &mut reg,
            "wirelog_checksum_offloaded",
            "Packets whose transport checksum was offloaded",
            None,
            &per(|w| w.checksum_offloaded),
        );
        let open: Vec<(Labels, i64)> =
            per(|w| w.conns_open).into_iter().map(|(l, v)| (l, v as i64)).collect();
        gauges(&mut reg, "wirelog_connections_open", "Connections tracked now", None, &open);
        let ended: Vec<(Labels, u64)> = s.conns_ended.iter().map(|(st, n)| (label("state", st), *n)).collect();
        counters(
            &mut reg,
            "wirelog_connections_ended",
            "Connections ended and written, by Zeek conn_state",
            None,
            &ended,
        );
        let txs: Vec<(Labels, u64)> = s
            .transactions
            .iter()
            .map(|(p, st, n)| {
                (vec![("protocol".to_string(), p.to_string()), ("status".to_string(), st.to_string())], *n)
            })
            .collect();
        counters(
            &mut reg,
            "wirelog_transactions",
            "Transactions written, by protocol and status",
            None,
            &txs,
        );
        counters(
            &mut reg,
            "wirelog_parse_streams",
            "Connections given to an application parser",
            None,
            &per(|w| w.streams_parsed),
        );
        counters(
            &mut reg,
            "wirelog_parse_gaps",
            "Gaps (missing bytes) in parsed streams, over ended connections",
            None,
            &per(|w| w.parse_gaps),
        );
        counters(
            &mut reg,
            "wirelog_parse_unparsed",
            "Stream bytes the parsers could not parse, over ended connections",
            Some(Unit::Bytes),
            &per(|w| w.unparsed_bytes),
        );
        counters(
            &mut reg,
            "wirelog_parse_gave_up",
            "Parsers that gave up on their connection (compression, not the protocol)",
            None,
            &per(|w| w.parsers_gave_up),
        );
        counters(
            &mut reg,
            "wirelog_parse_no_memory",
            "Connections not parsed because the stream memory had no room for a parser's state (--stream-memory)",
            None,
            &per(|w| w.parse_no_memory),
        );
        // The loss table's counts that no other metric has (the rest are
        // the kernel, decode, eviction, parse and records_dropped ones).
        counters(
            &mut reg,
            "wirelog_missed_bytes",
            "Bytes missing from TCP streams (conn.log's missed_bytes), over ended connections",
            Some(Unit::Bytes),
            &per(|w| w.missed_bytes),
        );
        // Its `sampled` count is the budget's `wirelog_shed_sampled_out` below.
        counters(
            &mut reg,
            "wirelog_output_waits",
            "Times a capture worker waited for the output thread (its held records were full)",
            None,
            &per(|w| w.output_waits),
        );
        // capture --cpu-budget: what each worker used and what it shed,
        // by step (the steps' numbers are the README's shedding order).
        let secs = |f: fn(&crate::WorkerLive) -> u64| -> Vec<(Labels, f64)> {
            s.workers
                .iter()
                .enumerate()
                .map(|(i, w)| (vec![("worker".to_string(), i.to_string())], f(w) as f64 / 1e9))
                .collect()
        };
        seconds(&mut reg, "wirelog_budget_worker_cpu", "CPU time of each capture worker thread (measured with --cpu-budget)", &secs(|w| w.cpu_ns));
        seconds(&mut reg, "wirelog_shed_sampling", "Time step 1 (parse sampling of new connections) was on", &secs(|w| w.shed_sampling_ns));
        seconds(&mut reg, "wirelog_shed_thinning", "Time step 1b (parsed connections kept 1 in K, the others no longer parsed) was on", &secs(|w| w.shed_thinning_ns));
        seconds(&mut reg, "wirelog_shed_skip_empty_tcp", "Time step 2 (empty TCP segments dropped in the kernel) was on", &secs(|w| w.shed_skip_empty_ns));
        seconds(&mut reg, "wirelog_shed_kernel_accounting", "Time step 3 (established TCP connections counted in the kernel) was on", &secs(|w| w.shed_kernel_ns));
        seconds(&mut reg, "wirelog_shed_paused", "Time step 4 was on: the worker left its rings to the kernel, which dropped what did not fit", &secs(|w| w.shed_paused_ns));
        let sample: Vec<(Labels, i64)> = per(|w| w.sample_n.max(1)).into_iter().map(|(l, v)| (l, v as i64)).collect();
        gauges(&mut reg, "wirelog_shed_sample_n", "New connections are parsed 1 in this many now (1: all)", None, &sample);
        counters(
            &mut reg,
            "wirelog_shed_sampled_out",
            "Connections found but not parsed because of parse sampling",
            None,
            &per(|w| w.sampled_out),
        );
        let thin: Vec<(Labels, i64)> = per(|w| w.thin_k.max(1)).into_iter().map(|(l, v)| (l, v as i64)).collect();
        gauges(&mut reg, "wirelog_shed_thin_k", "Connections already parsed go on being parsed 1 in this many now (1: all)", None, &thin);
        counters(
            &mut reg,
            "wirelog_shed_parse_stopped",
            "Parsed connections whose parsing stopped part way because of step 1b",
            None,
            &per(|w| w.parse_stopped),
        );
        counters(&mut reg, "wirelog_shed_pauses", "Times a worker left its rings to the kernel (budget spent)", None, &per(|w| w.shed_pauses));
        if let Some(st) = &s.store {
            let one = |v: u64| vec![(Labels::new(), v)];
            counters(&mut reg, "wirelog_store_written_rows", "Rows this run wrote to the store", None, &one(st.rows));
            counters(
                &mut reg,
                "wirelog_store_written",
                "Parquet bytes this run wrote to the store",
                Some(Unit::Bytes),
                &one(st.bytes),
            );
            counters(&mut reg, "wirelog_store_written_files", "Files this run wrote to the store", None, &one(st.files));
            counters(
                &mut reg,
                "wirelog_store_waits",
                "Times the output thread waited for the store's writer thread (it was more records behind than the output thread keeps for it)",
                None,
                &one(st.waits),
            );
            reg.register_with_unit(
                "wirelog_store_flush",
                "Time of each store flush (buffers to Parquet files)",
                Unit::Seconds,
                ConstHistogram {
                    sum: st.flush_seconds,
                    count: st.flush_buckets.iter().map(|(_, n)| n).sum(),
                    buckets: st.flush_buckets.clone(),
                },
            );
        }
        let dropped: Counter = Counter::default();
        dropped.inc_by(s.records_dropped);
        reg.register(
            "wirelog_records_dropped",
            "Records the output could not write (disk full)",
            dropped,
        );
    }

    if let Some(r) = &state.opts.records {
        let st = r.stats();
        let one = |v: u64| vec![(Labels::new(), v as i64)];
        gauges(
            &mut reg,
            "wirelog_live_records_memory",
            "Memory held by the capture's records not yet in the store (bounded by --live-memory)",
            Some(Unit::Bytes),
            &one(st.bytes),
        );
        gauges(&mut reg, "wirelog_live_records", "Records of the capture in memory, not yet in the store", None, &one(st.records));
        counters(
            &mut reg,
            "wirelog_live_records_evicted",
            "Records evicted from memory (--live-memory) before the store had them: the API lacks them until the store's next flush",
            None,
            &[(Labels::new(), st.evicted)],
        );
    }
    if state.opts.store.is_some() {
        let e = state.extent().unwrap_or_default();
        let by_kind = |f: fn(&crate::health::KindExtent) -> u64| -> Vec<(Labels, i64)> {
            e.iter()
                .map(|k| (vec![("kind".to_string(), k.kind.to_string())], f(k) as i64))
                .collect()
        };
        gauges(
            &mut reg,
            "wirelog_store_rows",
            "Rows in the store",
            None,
            &by_kind(|k| k.rows),
        );
        gauges(
            &mut reg,
            "wirelog_store_files",
            "Parquet files in the store",
            None,
            &by_kind(|k| k.files),
        );
        gauges(
            &mut reg,
            "wirelog_store_size",
            "Size of the store's files",
            Some(Unit::Bytes),
            &by_kind(|k| k.bytes),
        );
    }
    let mut out = String::new();
    let _ = encode(&mut out, &reg);
    out
}

pub(crate) async fn handler(
    State(state): State<Arc<AppState>>,
    axum::extract::Query(raw): axum::extract::Query<Vec<(String, String)>>,
) -> Response {
    if let Err(e) = crate::api::Params::new(raw, &[]) {
        return e.into_response();
    }
    let s = state.clone();
    let body = tokio::task::spawn_blocking(move || text(&s))
        .await
        .unwrap_or_default();
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
        .into_response()
}
