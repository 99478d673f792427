//! `wirelog serve`: the web UI, the API and the metrics over a store (or
//! ClickHouse, `--clickhouse`), until killed.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{anyhow, bail, Result};
use wirelog_query::{QuerySpec, ResultTable};
use wirelog_serve::{Backend, BackendError, KindExtent, Limits, Options};

use crate::cli::ServeArgs;

pub fn run(args: ServeArgs) -> Result<ExitCode> {
    let token = args.token.token()?;
    wirelog_serve::check_listen(&args.listen, token.as_deref(), "--listen").map_err(|e| anyhow!(e))?;
    crate::limits::duration_in_range(
        "--query-timeout",
        args.query_timeout,
        std::time::Duration::from_millis(100),
        std::time::Duration::from_secs(3600),
    )?;
    crate::limits::in_range("--max-rows", args.max_rows as u64, 1, 1_000_000)?;
    let backend = match crate::clickhouse::server(&args.clickhouse)? {
        Some(server) => {
            let probes = crate::query::probe_names(args.probe.as_deref());
            // Fail now, not on the first page: is it there, are the tables?
            wirelog_clickhouse::query::extent(&server, &probes)
                .map_err(|e| anyhow!("clickhouse {}: {e}", server.url))?;
            Some(std::sync::Arc::new(ClickHouse { server, probes }) as std::sync::Arc<dyn Backend>)
        }
        None => None,
    };
    if let Some(d) = args.pcap_dir.as_ref().filter(|d| !d.is_dir()) {
        bail!("--pcap-dir {}: no such directory (the directory `read` or `capture --pcap-dir` wrote)", d.display());
    }
    if backend.is_none() && !args.store.is_dir() {
        bail!(
            "{}: no store here (write one with `wirelog read --store {}`)",
            args.store.display(),
            args.store.display()
        );
    }
    let what = backend.as_ref().map(|b| b.name());
    let server = wirelog_serve::start(Options {
        listen: args.listen,
        store: backend.is_none().then(|| args.store.clone()),
        backend,
        token,
        api: true,
        live: None,
        records: None,
        limits: Limits {
            max_rows: args.max_rows,
            timeout: args.query_timeout,
            ..Limits::default()
        },
        pcap_dir: args.pcap_dir.clone(),
    })
    .map_err(|e| anyhow!(e))?;
    // The listening address comes first: scripts take the first URL.
    match what {
        Some(b) => eprintln!("wirelog: serving on http://{}/ (API under /api/, metrics at /metrics), answered by {b}", server.addr()),
        None => eprintln!(
            "wirelog: serving {} on http://{}/ (API under /api/, metrics at /metrics)",
            args.store.display(),
            server.addr()
        ),
    }
    server.join().map_err(|e| anyhow!(e))?;
    Ok(ExitCode::SUCCESS)
}

/// `serve --clickhouse`: the API's queries run by ClickHouse (grouped there)
/// and finished by the same engine.
struct ClickHouse {
    server: wirelog_clickhouse::Server,
    probes: Vec<String>,
}

impl Backend for ClickHouse {
    fn name(&self) -> String {
        format!("ClickHouse {} (database {})", self.server.url, self.server.database)
    }

    fn run(&self, spec: QuerySpec, deadline: Instant, max_bytes: usize) -> Result<ResultTable, BackendError> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(BackendError::Time);
        }
        // No request to ClickHouse outlives the API's own deadline.
        let mut server = self.server.clone();
        server.timeout = server.timeout.min(left);
        let mut over = None;
        let mut check = |e: &wirelog_query::Engine| {
            if Instant::now() > deadline {
                over = Some(BackendError::Time);
            } else if e.heap_bytes() > max_bytes {
                over = Some(BackendError::Memory);
            }
            match over {
                Some(_) => Err(wirelog_clickhouse::ChError("stopped".into())),
                None => Ok(()),
            }
        };
        let res = wirelog_clickhouse::query::run_checked(&server, spec, &self.probes, &mut check);
        match (res, over) {
            (Ok(table), _) => Ok(table),
            (Err(_), Some(why)) => Err(why),
            (Err(_), None) if Instant::now() >= deadline => Err(BackendError::Time),
            (Err(e), None) => Err(BackendError::Failed(e.to_string())),
        }
    }

    fn extent(&self) -> Result<Vec<KindExtent>, String> {
        let e = wirelog_clickhouse::query::extent(&self.server, &self.probes).map_err(|e| e.to_string())?;
        Ok(e
            .into_iter()
            .map(|t| KindExtent {
                kind: t.kind.as_str(),
                files: t.parts,
                rows: t.rows,
                bytes: t.bytes,
                first_ns: t.first_ns,
                last_ns: t.last_ns,
                in_memory: 0,
            })
            .collect())
    }
}

/// `capture --listen` / `--metrics-listen`: servers on their own thread and
/// runtime, reading the workers' counters (relaxed atomics the workers
/// already publish once per block) only when a page or a scrape asks.
pub fn start_in_capture(
    capture: &crate::cli::CaptureArgs,
    store: Option<std::path::PathBuf>,
    counters: &[std::sync::Arc<wirelog_counters::WorkerCounters>],
    interfaces: &[String],
    dropped: &std::sync::Arc<std::sync::atomic::AtomicU64>,
    output: std::sync::Arc<wirelog_sink::Live>,
    records: Option<std::sync::Arc<wirelog_store::LiveRecords>>,
) -> Result<Vec<(wirelog_serve::Server, bool)>> {
    let (args, pcap_dir) = (&capture.serve, &capture.pcap.pcap_dir);
    let (counters, interfaces, dropped) = (counters.to_vec(), interfaces.to_vec(), dropped.clone());
    let has_store = store.is_some();
    let live: std::sync::Arc<dyn wirelog_serve::Live> = std::sync::Arc::new(move || wirelog_serve::LiveSnapshot {
        interfaces: interfaces.clone(),
        workers: counters
            .iter()
            .map(|c| c.snapshot())
            .collect(),
        records_dropped: dropped.load(std::sync::atomic::Ordering::Relaxed),
        ..output_snapshot(&output, has_store)
    });
    let token = args.token.token()?;
    let mut servers = Vec::new();
    for (addr, api) in [(args.listen, true), (args.metrics_listen, false)] {
        let Some(addr) = addr else { continue };
        let s = wirelog_serve::start(Options {
            listen: addr,
            // The metrics-only server reads the store's footers too (rows, files, bytes).
            store: store.clone(),
            backend: None,
            token: token.clone(),
            api,
            live: Some(live.clone()),
            limits: Limits::default(),
            pcap_dir: pcap_dir.clone().filter(|_| api),
            records: records.clone().filter(|_| api),
        })
        .map_err(|e| anyhow!(e))?;
        servers.push((s, api));
    }
    Ok(servers)
}

/// The output thread's figures: connections per state, transactions per
/// protocol and status, the store's writes and flush times.
fn output_snapshot(o: &wirelog_sink::Live, has_store: bool) -> wirelog_serve::LiveSnapshot {
    use wirelog_sink::{FLUSH_BUCKETS, TX_STATUS};
    use std::sync::atomic::Ordering::Relaxed;
    let conns_ended = wirelog_record::ConnState::ALL
        .iter()
        .zip(&o.states)
        .map(|(s, a)| (s.as_str(), a.load(Relaxed)))
        .collect();
    let mut transactions = Vec::new();
    for (p, row) in wirelog_parse::Protocol::ALL.iter().zip(&o.txs) {
        for (s, a) in TX_STATUS.iter().zip(row) {
            transactions.push((p.name(), s.as_str(), a.load(Relaxed)));
        }
    }
    let store = has_store.then(|| wirelog_serve::StoreWritten {
        rows: o.store_rows.load(Relaxed),
        bytes: o.store_bytes.load(Relaxed),
        files: o.store_files.load(Relaxed),
        flush_buckets: FLUSH_BUCKETS
            .iter()
            .copied()
            .chain([f64::MAX])
            .zip(&o.flushes)
            .map(|(b, a)| (b, a.load(Relaxed)))
            .collect(),
        flush_seconds: o.flush_ns.load(Relaxed) as f64 / 1e9,
        waits: o.sink_waits.load(Relaxed),
    });
    wirelog_serve::LiveSnapshot { conns_ended, transactions, store, ..Default::default() }
}

/// The line per server, after the capture's own "capturing on" line.
pub fn announce(servers: &[(wirelog_serve::Server, bool)]) {
    for (s, api) in servers {
        let what = if *api { "web UI, API and metrics" } else { "metrics" };
        eprintln!("wirelog: {what} on http://{}/", s.addr());
    }
}
