//! `wirelog-bench serve-store --conns N --tx N --hours H --out DIR`: a store
//! for the UI's large-store benchmark (`bench/serve_latency.py`) built from
//! `store::synth`'s deterministic rows: N connections spread evenly over the
//! last H hours, and N transactions split evenly over HTTP, MySQL,
//! PostgreSQL, Redis, DNS and TLS over the same hours.

use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use wirelog_record::UidGenerator;
use wirelog_store::synth::{conn, tx_rows};
use wirelog_store::{Kind, Store, StoreOptions};

/// Rows appended at a time (the store cuts its own row groups).
const CHUNK: u64 = 200_000;

pub fn build(conns: u64, txs: u64, hours: u64, out: &Path) -> Result<(), String> {
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
            .map(|j| conn(j, start, step, &mut uids))
            .collect();
        st.append_conns(&recs).map_err(|e| format!("conns: {e}"))?;
        i += n;
    }
    let kinds = [
        Kind::Http,
        Kind::Mysql,
        Kind::Pgsql,
        Kind::Redis,
        Kind::Dns,
        Kind::Tls,
    ];
    let per = txs / kinds.len() as u64;
    for (k, kind) in kinds.iter().enumerate() {
        let step = span / per.max(1) as i64;
        let mut i = 0;
        while i < per {
            let n = CHUNK.min(per - i);
            let rows = tx_rows(*kind, n, start + i as i64 * step, step, 1000 * k as u64 + i);
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
