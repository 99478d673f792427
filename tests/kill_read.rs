//! SIGKILL at random moments during `wirelog read --store`: after every
//! kill, each Parquet file of the store is readable by DuckDB and by
//! `wirelog query`, and after the next run no temporary file is left.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::synthetic_pcap;

const BIN: &str = env!("CARGO_BIN_EXE_wirelog");
const KILLS: usize = 10;

fn read(store: &Path, pcap: &Path) -> std::process::Child {
    Command::new(BIN)
        // --again: every run reads the same capture into the same store on purpose.
        .args(["read", "-q", "--again", "--udp-timeout", "1s", "--store"])
        .arg(store)
        .arg(pcap)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Rows of every file of `kind` read by DuckDB (fails on any unreadable file).
fn duckdb_rows(store: &Path, kind: &str) -> u64 {
    let glob = store.join(kind).join("*/*/*.parquet");
    let script = format!(
        "import duckdb,glob\nprint(duckdb.connect().execute(\"select count(*) from read_parquet('{0}')\").fetchone()[0] if glob.glob('{0}') else 0)",
        glob.display()
    );
    let out = Command::new("python3").arg("-c").arg(&script).output().unwrap();
    assert!(out.status.success(), "DuckDB cannot read {}: {}", glob.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

fn temporaries(dir: &Path) -> String {
    let out = Command::new("find").arg(dir).args(["-name", ".*.tmp"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn ten_kills_during_read_store_leave_only_readable_files() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("kill-read-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("many.pcap");
    std::fs::write(&pcap, synthetic_pcap(150_000)).unwrap();
    let store = dir.join("store");

    // How long a whole run takes: kills land anywhere inside it.
    let t = Instant::now();
    assert!(read(&store, &pcap).wait().unwrap().success());
    let whole = t.elapsed().as_micros().max(1000) as u64;
    let mut seed = (std::process::id() as u64) ^ (whole << 20) | 1;
    for k in 0..KILLS {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let at = Duration::from_micros(seed % whole);
        let mut child = read(&store, &pcap);
        std::thread::sleep(at);
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        for kind in ["conns", "flows"] {
            duckdb_rows(&store, kind);
        }
        let q = Command::new(BIN).args(["query", "conns", "--by", "proto", "--format", "csv", "--store"]).arg(&store).output().unwrap();
        let err = String::from_utf8_lossy(&q.stderr);
        assert!(q.status.success() && !err.contains("corrupt"), "kill {k} at {at:?}: {err}");
    }
    // The next run cleans what the kills left, and adds a whole run's rows.
    let before = duckdb_rows(&store, "conns");
    assert!(read(&store, &pcap).wait().unwrap().success());
    assert_eq!(temporaries(&store), "", "temporaries left after the next run");
    assert_eq!(duckdb_rows(&store, "conns"), before + 150_000);
    std::fs::remove_dir_all(&dir).unwrap();
}
