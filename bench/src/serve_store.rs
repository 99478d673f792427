//! `wirelog-bench serve-store --conns N --tx N --hours H --out DIR`: a store
//! for the UI's large-store benchmark (`bench/serve_latency.py`) built from
//! `store::synth`'s deterministic rows: N connections spread evenly over the
//! last H hours, and N transactions split evenly over HTTP, MySQL,
//! PostgreSQL, Redis, DNS and TLS over the same hours.
//!
//! `--services S` (the map at scale): the servers are S services instead of
//! synth's few (`synth::service`), each connection and transaction going to
//! one of them in turn.

use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use wirelog_record::UidGenerator;
use wirelog_store::synth::{conn, to_service, tx_rows, tx_to_services};
use wirelog_store::{Store, StoreOptions};

/// Rows appended at a time (the store cuts its own row groups).
const CHUNK: u64 = 200_000;

pub fn build(conns: u64, txs: u64, hours: u64, services: Option<u64>, out: &Path) -> Result<(), String> {
    if services == Some(0) {
        return Err("serve-store: --services must be at least 1".into());
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_nanos() as i64;
    let span = hours.max(1) as i64 * 3_600_000_000_000;
    let start = now - span;
    let t0 = Instant::now();
    let mut st =
        Store::open(out, StoreOptions::default()).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut uids = UidGenerator::new(7);
    let step = span / conns.max(1) as i64;
    let mut i = 0;
    while i < conns {
        let n = CHUNK.min(conns - i);
        let recs: Vec<_> = (i..i + n)
            .map(|j| {
                let c = conn(j, start, step, &mut uids);
                match services {
                    Some(s) => to_service(c, j % s),
                    None => c,
                }
            })
            .collect();
        st.append_conns(&recs).map_err(|e| format!("conns: {e}"))?;
        i += n;
    }
    let kinds = wirelog_store::synth::SERVICE_KINDS;
    let per = txs / kinds.len() as u64;
    for (k, kind) in kinds.iter().enumerate() {
        let step = span / per.max(1) as i64;
        let mut i = 0;
        while i < per {
            let n = CHUNK.min(per - i);
            let mut rows = tx_rows(*kind, n, start + i as i64 * step, step, 1000 * k as u64 + i);
            if let Some(s) = services {
                tx_to_services(*kind, &mut rows, i, s).map_err(|e| format!("serve-store: {e}"))?;
            }
            st.append_tx(*kind, &rows)
                .map_err(|e| format!("{}: {e}", kind.as_str()))?;
            i += n;
        }
    }
    st.flush().map_err(|e| format!("flush: {e}"))?;
    eprintln!(
        "wrote {conns} connections and {} transactions over {hours} h to {} in {:.1} s",
        per * kinds.len() as u64,
        out.display(),
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}
