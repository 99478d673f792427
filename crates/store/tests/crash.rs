//! kill -9 at random moments: a writer (with a background compactor) is
//! killed again and again; after each kill the store must open, hold only
//! whole files and no temporaries, and contain exactly records 0..k of the
//! writer's sequence, k at least what the writer had reported flushed.
//!
//! The writer is this test binary itself, started with an environment
//! variable that makes `crash_child` run it (and every other test a no-op).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use wirelog_record::UidGenerator;
use wirelog_store::synth::{self, Rng};
use wirelog_store::{Column, CompactOptions, Compactor, CompactorOptions, Kind, Scan, Store, StoreOptions};

const CHILD_ENV: &str = "WIRELOG_STORE_CRASH_CHILD";
/// Records 10 ms apart: 360 000 per hour partition.
const STEP_NS: i64 = 10_000_000;
/// The writer stops (and idles) after this many records of each kind.
const MAX_RECORDS: u64 = 400_000;
const BATCH: u64 = 700;

/// The writer, when started by the test below; nothing otherwise.
#[test]
fn crash_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else { return };
    let mut it = spec.split('|');
    let dir = std::path::PathBuf::from(it.next().unwrap());
    let mut nf: u64 = it.next().unwrap().parse().unwrap();
    let mut nc: u64 = it.next().unwrap().parse().unwrap();
    let mut store = Store::open(&dir, StoreOptions::default()).unwrap();
    let _compactor = Compactor::start(
        dir.clone(),
        CompactorOptions {
            interval: Duration::from_millis(5),
            settle: Duration::ZERO,
            compact: CompactOptions { small_file_rows: 100_000, max_merge_rows: 200_000, ..Default::default() },
        },
    );
    let mut uids = UidGenerator::new(nc);
    let mut out = std::io::stdout();
    loop {
        if nf >= MAX_RECORDS && nc >= MAX_RECORDS {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        let flows: Vec<_> = (nf..nf + BATCH).map(|i| flow(i, T0 + i as i64 * STEP_NS)).collect();
        let conns: Vec<_> = (nc..nc + BATCH / 2).map(|i| synth::conn(i, T0, STEP_NS, &mut uids)).collect();
        store.append_flows(&flows).unwrap();
        store.append_conns(&conns).unwrap();
        store.flush().unwrap();
        nf += BATCH;
        nc += BATCH / 2;
        writeln!(out, "FLUSHED {nf} {nc}").unwrap();
        out.flush().unwrap();
    }
}

/// The record numbers in the store: flows' bytes_out, conns' orig_pkts.
fn numbers(dir: &Path, kind: Kind, col: &'static str) -> Vec<u64> {
    let mut v = Vec::new();
    let stats = Store::scan_ref(dir, &Scan::new(kind).columns(&[col]), |b| {
        match b.column(col).unwrap() {
            Column::U64(x) => v.extend_from_slice(x),
            _ => unreachable!(),
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(stats.corrupt_files, 0, "{:?}", stats.warnings);
    v.sort_unstable();
    v
}

fn assert_prefix(v: &[u64], what: &str) -> u64 {
    for (i, &x) in v.iter().enumerate() {
        assert_eq!(x, i as u64, "{what}: record {i} missing or duplicated (found {x})");
    }
    v.len() as u64
}

#[test]
fn kill_9_at_random_points_loses_only_unflushed_records() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempdir("crash");
    let exe = std::env::current_exe().unwrap();
    let mut rng = Rng::new(2026);
    let (mut kf, mut kc) = (0u64, 0u64);
    let started = Instant::now();
    let rounds = 30;
    let mut kills_mid_write = 0;
    for round in 0..rounds {
        let mut child = Command::new(&exe)
            .args(["crash_child", "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, format!("{}|{kf}|{kc}", dir.display()))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Wait for the first flush (the child is up), then a random while.
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut reported = (kf, kc);
        for line in lines.by_ref() {
            let line = line.unwrap();
            if let Some(rest) = line.strip_prefix("FLUSHED ") {
                let mut p = rest.split(' ').map(|x| x.parse::<u64>().unwrap());
                reported = (p.next().unwrap(), p.next().unwrap());
                break;
            }
        }
        std::thread::sleep(Duration::from_micros(rng.below(150_000)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        for line in lines {
            let Ok(line) = line else { break };
            if let Some(rest) = line.strip_prefix("FLUSHED ") {
                let mut p = rest.split(' ').map(|x| x.parse::<u64>().unwrap());
                reported = (p.next().unwrap(), p.next().unwrap());
            }
        }
        // What a crash may leave: temporaries, replaced files.
        let leftovers = all_files(&dir).iter().filter(|f| f.to_string_lossy().ends_with(".tmp")).count();
        if leftovers > 0 {
            kills_mid_write += 1;
        }
        // Opening cleans up; then everything left is whole.
        drop(Store::open(&dir, StoreOptions::default()).unwrap());
        for f in all_files(&dir) {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            assert!(!name.ends_with(".tmp") && !name.starts_with(".del-"), "round {round}: {name} left after open");
            if name.ends_with(".parquet") {
                wirelog_store::verify_file(&f).unwrap_or_else(|e| panic!("round {round}: {e}"));
            }
        }
        let nf = assert_prefix(&numbers(&dir, Kind::Flows, "bytes_out"), "flows");
        let nc = assert_prefix(&numbers(&dir, Kind::Conns, "orig_pkts"), "conns");
        assert!(nf >= reported.0 && nc >= reported.1, "round {round}: flushed {reported:?}, found ({nf}, {nc})");
        assert!(nf >= kf && nc >= kc, "round {round}: went back from ({kf}, {kc}) to ({nf}, {nc})");
        kf = nf;
        kc = nc;
        assert!(started.elapsed() < Duration::from_secs(120), "crash test too slow");
    }
    eprintln!(
        "crash test: {rounds} kills, {kills_mid_write} left temporaries, {kf} flows and {kc} conns survived, {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(kf > 0 && kc > 0);
    std::fs::remove_dir_all(&dir).unwrap();
}
