//! Compaction (counts and totals unchanged, crash-safe, reader-consistent)
//! and retention (by age and by size).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use parquet::file::reader::FileReader;
use parquet::file::serialized_reader::SerializedFileReader;
use wirelog_store::compact::{compact_closed_partitions, compact_partition};
use wirelog_store::{
    list_partitions, retention, CompactOptions, Compactor, CompactorOptions, Kind, Store,
    StoreOptions,
};

fn small_files_store(
    name: &str,
    hours: i64,
    flushes_per_hour: i64,
    rows_per_flush: u64,
) -> std::path::PathBuf {
    let dir = tempdir(name);
    let mut s = Store::open(&dir, fast_opts()).unwrap();
    let mut i = 0u64;
    for h in 0..hours {
        for f in 0..flushes_per_hour {
            let t = T0 + h * HOUR + f * (HOUR / flushes_per_hour);
            let recs: Vec<_> = (0..rows_per_flush).map(|k| flow(i + k, t)).collect();
            i += rows_per_flush;
            s.append_flows(&recs).unwrap();
            s.append_conns(&conns(rows_per_flush / 4, t, 1_000_000))
                .unwrap();
            s.flush().unwrap();
        }
    }
    s.close().unwrap();
    dir
}

fn opts() -> CompactOptions {
    CompactOptions {
        sync: false,
        ..Default::default()
    }
}

#[test]
fn compaction_keeps_counts_and_totals() {
    let dir = small_files_store("compact", 3, 12, 500);
    let before_f = sum_u64(&dir, Kind::Flows, "bytes_out");
    let before_p = sum_u64(&dir, Kind::Flows, "pkts_in");
    let before_c = sum_u64(&dir, Kind::Conns, "orig_ip_bytes");
    assert_eq!(before_f.0, 3 * 12 * 500);
    assert_eq!(data_files(&dir).len(), 2 * 36);

    for kind in [Kind::Flows, Kind::Conns] {
        for p in list_partitions(&dir, kind).unwrap() {
            let r = compact_partition(&p.path, &opts()).unwrap();
            assert_eq!(r.files_merged, 12);
            assert_eq!(r.files_written, 1);
            assert!(r.bytes_after < r.bytes_before, "{r:?}");
        }
    }
    let files = data_files(&dir);
    assert_eq!(files.len(), 6, "{files:?}");
    for f in &files {
        assert!(f
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("compact-"));
        let r = SerializedFileReader::new(std::fs::File::open(f).unwrap()).unwrap();
        let kv = r.metadata().file_metadata().key_value_metadata().unwrap();
        let replaces = kv
            .iter()
            .find(|k| k.key == "wirelog.replaces")
            .unwrap()
            .value
            .clone()
            .unwrap();
        assert_eq!(replaces.lines().count(), 12);
        wirelog_store::verify_file(f).unwrap();
    }
    assert_eq!(sum_u64(&dir, Kind::Flows, "bytes_out"), before_f);
    assert_eq!(sum_u64(&dir, Kind::Flows, "pkts_in"), before_p);
    assert_eq!(sum_u64(&dir, Kind::Conns, "orig_ip_bytes"), before_c);

    // Nothing left to do: a second pass changes nothing.
    let p = &list_partitions(&dir, Kind::Flows).unwrap()[0];
    let r = compact_partition(&p.path, &opts()).unwrap();
    assert_eq!((r.files_merged, r.files_written), (0, 0));

    // Late data into a compacted hour, then compaction again: the new
    // merged file replaces the old merged one and the late file.
    let mut s = Store::open(&dir, fast_opts()).unwrap();
    s.append_flows(
        &(0..100)
            .map(|k| flow(1_000_000 + k, T0 + 5))
            .collect::<Vec<_>>(),
    )
    .unwrap();
    s.close().unwrap();
    let r = compact_partition(&p.path, &opts()).unwrap();
    assert_eq!((r.files_merged, r.files_written), (2, 1));
    let (rows, sum) = sum_u64(&dir, Kind::Flows, "bytes_out");
    assert_eq!(rows, before_f.0 + 100);
    assert_eq!(sum, before_f.1 + (1_000_000..1_000_100).sum::<u64>());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn compaction_leaves_unreadable_files_alone() {
    let dir = small_files_store("compact-corrupt", 1, 5, 300);
    let before = sum_u64(&dir, Kind::Flows, "bytes_out");
    let p = &list_partitions(&dir, Kind::Flows).unwrap()[0];
    // A file whose footer is garbage, and one whose pages are damaged.
    std::fs::write(p.path.join("part-0-bad.parquet"), b"not parquet at all").unwrap();
    let files = data_files(&p.path);
    let victim = files
        .iter()
        .find(|f| !f.ends_with("part-0-bad.parquet"))
        .unwrap()
        .clone();
    let mut b = std::fs::read(&victim).unwrap();
    let len = b.len();
    for i in (100..len / 2).step_by(13) {
        b[i] ^= 0xff;
    }
    std::fs::write(&victim, &b).unwrap();
    let r = compact_partition(&p.path, &opts()).unwrap();
    assert_eq!(r.unreadable, 2, "{r:?}");
    assert_eq!(r.files_merged, 4, "{r:?}");
    assert!(
        r.errors.iter().any(|e| e.contains("part-0-bad.parquet")),
        "{r:?}"
    );
    // The bad files are still there, untouched; the good rows all readable.
    assert!(p.path.join("part-0-bad.parquet").exists());
    assert_eq!(std::fs::read(&victim).unwrap(), b);
    let (rows, _) = {
        let mut n = 0u64;
        let stats = Store::scan(
            &dir,
            &wirelog_store::Scan::new(Kind::Flows).columns(&["bytes_out"]),
            |b| {
                n += b.rows() as u64;
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(stats.corrupt_files, 2, "{stats:?}");
        (n, ())
    };
    assert_eq!(rows, before.0 - 300);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn crash_mid_compaction_loses_and_duplicates_nothing() {
    let dir = small_files_store("compact-crash", 2, 6, 300);
    let before = sum_u64(&dir, Kind::Flows, "bytes_out");
    let parts = list_partitions(&dir, Kind::Flows).unwrap();
    let p = &parts[0];
    // Keep copies of the originals, compact, then put them back: the state a
    // crash after the rename and before the deletions leaves.
    let originals: Vec<_> = data_files(&p.path)
        .into_iter()
        .map(|f| (f.clone(), std::fs::read(&f).unwrap()))
        .collect();
    compact_partition(&p.path, &opts()).unwrap();
    for (f, b) in &originals {
        std::fs::write(f, b).unwrap();
    }
    // And a crash before the rename: a half-written hidden temporary.
    std::fs::write(p.path.join(".compact-1-2.tmp"), b"PAR1 half written").unwrap();
    assert_eq!(data_files(&p.path).len(), 7);
    // Readers see every row once.
    assert_eq!(sum_u64(&dir, Kind::Flows, "bytes_out"), before);
    let stats = Store::scan(
        &dir,
        &wirelog_store::Scan::new(Kind::Flows).columns(&["bucket"]),
        |_| Ok(()),
    )
    .unwrap();
    assert_eq!(stats.files_replaced, 6);
    // Opening the store cleans up: originals and temporary gone.
    drop(Store::open(&dir, fast_opts()).unwrap());
    assert_eq!(data_files(&p.path).len(), 1);
    assert!(all_files(&p.path)
        .iter()
        .all(|f| !f.to_string_lossy().ends_with(".tmp")));
    assert_eq!(sum_u64(&dir, Kind::Flows, "bytes_out"), before);
    // So does the next compaction, when the store is not reopened.
    let q = &parts[1];
    let originals: Vec<_> = data_files(&q.path)
        .into_iter()
        .map(|f| (f.clone(), std::fs::read(&f).unwrap()))
        .collect();
    compact_partition(&q.path, &opts()).unwrap();
    for (f, b) in &originals {
        std::fs::write(f, b).unwrap();
    }
    let r = compact_partition(&q.path, &opts()).unwrap();
    assert_eq!(r.leftovers_removed, 6);
    assert_eq!(data_files(&q.path).len(), 1);
    assert_eq!(sum_u64(&dir, Kind::Flows, "bytes_out"), before);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn readers_see_consistent_totals_while_compaction_runs() {
    let dir = small_files_store("compact-concurrent", 6, 20, 200);
    let before = sum_u64(&dir, Kind::Flows, "bytes_out");
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..2 {
        let (dir, stop) = (dir.clone(), stop.clone());
        readers.push(std::thread::spawn(move || {
            let mut scans = 0;
            while !stop.load(Ordering::Relaxed) || scans < 3 {
                assert_eq!(
                    sum_u64(&dir, Kind::Flows, "bytes_out"),
                    before,
                    "scan {scans}"
                );
                scans += 1;
            }
            scans
        }));
    }
    // Compact hour by hour, several times over (each pass re-merges with a
    // small max so merged files get merged again).
    for round in 0..3 {
        let o = CompactOptions {
            max_merge_rows: 1000 * (round + 1),
            ..opts()
        };
        for p in list_partitions(&dir, Kind::Flows).unwrap() {
            compact_partition(&p.path, &o).unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() >= 3);
    }
    assert_eq!(sum_u64(&dir, Kind::Flows, "bytes_out"), before);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn background_compactor_merges_closed_partitions_while_writing() {
    let dir = small_files_store("compactor", 2, 8, 250);
    let before = sum_u64(&dir, Kind::Flows, "bytes_out");
    let c = Compactor::start(
        dir.clone(),
        CompactorOptions {
            interval: Duration::from_millis(20),
            settle: Duration::ZERO,
            compact: opts(),
        },
    );
    // The writer keeps writing (into the current hour) meanwhile.
    let now = retention::now_ns();
    let mut s = Store::open(&dir, fast_opts()).unwrap();
    for k in 0..10u64 {
        s.append_flows(&[flow(5_000_000 + k, now)]).unwrap();
        s.flush().unwrap();
    }
    let status = c.wait_passes(3, Duration::from_secs(30));
    assert!(status.passes >= 3, "{status:?}");
    let status = c.stop();
    assert!(status.last_error.is_none(), "{status:?}");
    s.close().unwrap();
    assert!(status.totals.files_merged >= 2 * 8 * 2, "{status:?}");
    for p in list_partitions(&dir, Kind::Flows).unwrap() {
        if p.end_ns() <= now {
            assert_eq!(data_files(&p.path).len(), 1, "{}", p.path.display());
        }
    }
    let (rows, sum) = sum_u64(&dir, Kind::Flows, "bytes_out");
    assert_eq!(rows, before.0 + 10);
    assert_eq!(sum, before.1 + (5_000_000..5_000_010).sum::<u64>());

    // The pass function on its own: nothing to do now.
    let mut seen = Default::default();
    let r = compact_closed_partitions(&dir, now, Duration::ZERO, &opts(), &mut seen).unwrap();
    assert_eq!(r.files_merged, 0);
    // Once the current hour is closed, its 10 small files are merged too.
    let r =
        compact_closed_partitions(&dir, now + HOUR, Duration::ZERO, &opts(), &mut seen).unwrap();
    assert_eq!(r.files_merged, 10);
    assert_eq!(sum_u64(&dir, Kind::Flows, "bytes_out"), (rows, sum));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn retention_by_age_and_size_deletes_whole_oldest_partitions() {
    let dir = small_files_store("retention", 10, 2, 400);
    let parts = list_partitions(&dir, Kind::Flows).unwrap();
    assert_eq!(parts.len(), 10);
    let mut s = Store::open(
        &dir,
        StoreOptions {
            retain_age: Some(Duration::from_secs(3 * 3600)),
            ..fast_opts()
        },
    )
    .unwrap();
    // "Now" is the end of hour 9: hours ending more than 3 h ago (0..=6) go.
    let now = T0 + 10 * HOUR;
    let r = s.enforce_retention(now).unwrap();
    assert_eq!(r.partitions_deleted, 2 * 7, "{r:?}");
    let left = list_partitions(&dir, Kind::Flows).unwrap();
    assert_eq!(
        left.iter().map(|p| p.hour).collect::<Vec<_>>(),
        parts[7..].iter().map(|p| p.hour).collect::<Vec<_>>()
    );
    // Rows of the kept hours are all there.
    let (rows, _) = sum_u64(&dir, Kind::Flows, "bytes_out");
    assert_eq!(rows, 3 * 2 * 400);
    drop(s);

    // By size: keep at most about half of what is left.
    let total: u64 = [Kind::Flows, Kind::Conns]
        .iter()
        .flat_map(|&k| list_partitions(&dir, k).unwrap())
        .map(|p| retention::dir_bytes(&p.path).unwrap())
        .sum();
    let r = retention::enforce_retention(&dir, now, None, Some(total / 2)).unwrap();
    assert!(r.bytes_kept <= total / 2, "{r:?}");
    assert!(r.partitions_deleted >= 2, "{r:?}");
    let left = list_partitions(&dir, Kind::Flows).unwrap();
    assert_eq!(left.last().unwrap().hour, parts[9].hour, "newest kept");
    // No hidden leftovers, no empty date directories.
    assert!(all_files(&dir)
        .iter()
        .all(|f| !f.to_string_lossy().contains(".del-")));

    // Automatic retention on flush.
    let mut s = Store::open(
        &dir,
        StoreOptions {
            retain_bytes: Some(1),
            retention_interval: Duration::ZERO,
            ..fast_opts()
        },
    )
    .unwrap();
    s.append_flows(&[flow(1, T0)]).unwrap();
    s.flush().unwrap();
    s.close().unwrap();
    assert!(list_partitions(&dir, Kind::Flows).unwrap().is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A free-space floor that cannot be met pauses every kind but the loss
/// table (which is written into the floor's room). The loss table's write
/// must not end the other kinds' wait: the store still says it is waiting,
/// and at the end their rows are counted as dropped, none written.
#[test]
fn the_loss_tables_write_does_not_end_another_kinds_wait() {
    let dir = tempdir("floor-per-kind");
    let mut s = Store::open(&dir, StoreOptions { min_free_bytes: u64::MAX, ..fast_opts() }).unwrap();
    s.append_conns(&conns(10, T0, 1_000_000)).unwrap();
    let mut counts = wirelog_record::LossCounts::default();
    counts.set(wirelog_record::LossCount::Packets, 5);
    let loss = wirelog_record::LossRecord { ts_ns: T0, source: "lo".to_string(), protocol: None, counts };
    s.append_losses(&[loss]).unwrap();
    s.flush().unwrap();
    assert!(s.waiting(), "conns wait for space although the loss table was written");
    assert!(s.stats().pauses >= 1);
    s.retry().unwrap();
    assert!(s.waiting(), "a retry before the deadline keeps the wait");
    let files = data_files(&dir);
    let stats = s.finish().unwrap();
    let slot = Kind::ALL.iter().position(|k| *k == Kind::Conns).unwrap();
    assert_eq!(stats.dropped[slot], 10, "the conns never written are counted");
    s.close().unwrap();
    assert!(!files.is_empty(), "the loss table was written into the floor's room");
}
