//! The web UI in a real browser: headless Chromium (Debian `chromium`),
//! driven over its DevTools pipe by tests/serve_ui.py, loads every view of
//! `wirelog serve` over a store built from the demo capture, checks the
//! numbers each page shows against the API, drags across the timeline with
//! mouse events and checks that the selection lands in the URL and drives
//! the other views. Screenshots go to target/test-artifacts/ui/
//! (`WIRELOG_UPDATE_DOCS=1` also copies them to docs/ for the README).

mod common;

use std::path::Path;
use std::process::Command;

#[test]
fn ui_views_show_what_the_api_says() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The store and kept packets (the sequence view links to them).
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve-ui");
    let _ = std::fs::remove_dir_all(&base);
    let (st, pd) = (base.join("store"), base.join("pcap"));
    let read = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args(["read", "-C", "--quiet", "--store"])
        .arg(&st)
        .arg("--logs")
        .arg(base.join("logs"))
        .arg("--pcap-dir")
        .arg(&pd)
        .arg(root.join("samples/sample.pcap.gz"))
        .output()
        .unwrap();
    assert!(read.status.success(), "{}", String::from_utf8_lossy(&read.stderr));
    let srv = common::serve::start(&["serve", "--store", st.to_str().unwrap(), "--pcap-dir", pd.to_str().unwrap(), "--listen", "127.0.0.1:0"]);
    let out = root.join("target/test-artifacts/ui");
    let status = Command::new("timeout")
        .args(["600", "python3"])
        .arg(root.join("tests/serve_ui.py"))
        .arg(format!("http://{}", srv.addr))
        .arg(&out)
        .status()
        .expect("run tests/serve_ui.py");
    assert!(status.success(), "UI checks failed (see the FAIL lines above)");
    for v in ["overview", "selection", "transactions", "connections", "sequence", "map", "health", "dark"] {
        let png = out.join(format!("ui-{v}.png"));
        let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
        assert!(bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000, "{} is not a screenshot", png.display());
        if std::env::var_os("WIRELOG_UPDATE_DOCS").is_some() {
            std::fs::create_dir_all(root.join("docs")).unwrap();
            std::fs::copy(&png, root.join(format!("docs/ui-{v}.png"))).unwrap();
        }
    }
}

/// Every shared capture in one store: its records run from 1970 (a capture
/// with zero timestamps) to 2026. The default window is the last 15 minutes
/// of data, the whole store draws too, and every view renders with no error
/// and with the API's numbers.
#[test]
fn ui_works_on_a_store_spanning_1970_to_2026() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pcaps = Vec::new();
    let mut dirs = vec![root.join("../shared/testdata")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if p.is_dir() {
                dirs.push(p);
            } else if [".pcap", ".pcapng", ".pcap.gz", ".cap", ".trace"].iter().any(|x| name.ends_with(x)) {
                pcaps.push(p);
            }
        }
    }
    pcaps.sort();
    assert!(pcaps.len() > 100, "{} shared captures", pcaps.len());
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve-ui-span");
    let _ = std::fs::remove_dir_all(&base);
    let st = base.join("store");
    // --again: two suites ship some of the same files.
    let read = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args(["read", "-C", "--quiet", "--again", "--store"])
        .arg(&st)
        .arg("--logs")
        .arg(base.join("logs"))
        .args(&pcaps)
        .output()
        .unwrap();
    assert!(st.join("conns").is_dir(), "{}", String::from_utf8_lossy(&read.stderr));
    let srv = common::serve::start(&["serve", "--store", st.to_str().unwrap(), "--listen", "127.0.0.1:0"]);
    let out = root.join("target/test-artifacts/ui-span");
    let status = Command::new("timeout")
        .args(["600", "python3"])
        .arg(root.join("tests/serve_ui.py"))
        .arg(format!("http://{}", srv.addr))
        .arg(&out)
        .arg("--any-span")
        .status()
        .expect("run tests/serve_ui.py");
    assert!(status.success(), "UI checks on the 1970..2026 store failed (see the FAIL lines above)");
    let png = out.join("ui-any-span.png");
    let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
    assert!(bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000);
    if std::env::var_os("WIRELOG_UPDATE_DOCS").is_some() {
        std::fs::copy(&png, root.join("docs/ui-any-span.png")).unwrap();
    }
}

/// With a token, a link carrying `?token=` opens the UI: its scripts and API
/// calls then go through with the cookie it sets.
#[test]
fn ui_works_with_a_token() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let st = common::serve::store("ui-token", &[&root.join("samples/sample.pcap.gz")]);
    let token = "ui-test-token-0123456789abcdef";
    let srv = common::serve::start(&["serve", "--store", st.to_str().unwrap(), "--listen", "0.0.0.0:0", "--token", token]);
    let out = root.join("target/test-artifacts/ui-token");
    let status = Command::new("timeout")
        .args(["600", "python3"])
        .arg(root.join("tests/serve_ui.py"))
        .arg(format!("http://127.0.0.1:{}", srv.addr.port()))
        .arg(&out)
        .args(["--token", token])
        .status()
        .expect("run tests/serve_ui.py");
    assert!(status.success(), "UI checks with a token failed");
}

/// The map at scale: 200 services (`synth::service`: 4 /24 subnets, six
/// kinds, processes and containers behind them) called by thousands of
/// clients. The page stays a fixed-height window (stated in
/// tests/serve_ui.py --map-scale) with at most 2 x top + 2 nodes, nodes are
/// named by their process, grouping by subnet gives the sums the test
/// computes itself from /api/query, and the wheel, a drag, the keys and the
/// buttons move the viewBox. Screenshots in target/test-artifacts/ui-map/.
#[test]
fn ui_map_of_200_services() {
    use wirelog_record::UidGenerator;
    use wirelog_store::synth::{conn, to_service, tx_rows, tx_to_services, SERVICE_KINDS};
    use wirelog_store::{Store, StoreOptions};
    const SERVICES: u64 = 200;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve-ui-map");
    let _ = std::fs::remove_dir_all(&base);
    let st = base.join("store");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    // 20,000 connections and 6 x 2,000 transactions over the last 10 minutes.
    let (conns, per_kind, span) = (20_000u64, 2_000u64, 600_000_000_000i64);
    let start = now - span;
    let mut store = Store::open(&st, StoreOptions::default()).unwrap();
    let mut uids = UidGenerator::new(7);
    let recs: Vec<_> = (0..conns)
        .map(|i| to_service(conn(i, start, span / conns as i64, &mut uids), i % SERVICES))
        .collect();
    store.append_conns(&recs).unwrap();
    for (k, kind) in SERVICE_KINDS.iter().enumerate() {
        let step = span / per_kind as i64;
        let mut rows = tx_rows(*kind, per_kind, start, step, 1000 * k as u64);
        tx_to_services(*kind, &mut rows, 0, SERVICES).unwrap();
        store.append_tx(*kind, &rows).unwrap();
    }
    store.flush().unwrap();
    drop(store);
    let srv = common::serve::start(&["serve", "--store", st.to_str().unwrap(), "--listen", "127.0.0.1:0", "--max-rows", "100000"]);
    let out = root.join("target/test-artifacts/ui-map");
    let t0 = std::time::Instant::now();
    let status = Command::new("timeout")
        .args(["600", "python3"])
        .arg(root.join("tests/serve_ui.py"))
        .arg(format!("http://{}", srv.addr))
        .arg(&out)
        .args(["--map-scale", &SERVICES.to_string()])
        .status()
        .expect("run tests/serve_ui.py");
    eprintln!("map checks took {:.1} s", t0.elapsed().as_secs_f64());
    assert!(status.success(), "map-at-scale checks failed (see the FAIL lines above)");
    for v in ["map-scale", "map-subnet", "map-zoomed"] {
        let png = out.join(format!("ui-{v}.png"));
        let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
        assert!(bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000, "{} is not a screenshot", png.display());
        // README shows the whole map; the others stay test artifacts.
        if std::env::var_os("WIRELOG_UPDATE_DOCS").is_some() && v == "map-scale" {
            std::fs::copy(&png, root.join(format!("docs/ui-{v}.png"))).unwrap();
        }
    }
}
