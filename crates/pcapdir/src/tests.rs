//! The writer end to end: rotation, the ring, the index and extraction.

use std::collections::HashSet;
use std::path::PathBuf;

use wirelog_record::UidGenerator;

use crate::{extract::{extract, Window}, index::read_index, list_pcaps, PcapDir, PcapDirConfig, RingLimits};

const SEC: i64 = 1_000_000_000;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wirelog-pcapdir-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn config(dir: &std::path::Path) -> PcapDirConfig {
    PcapDirConfig {
        dir: dir.to_path_buf(),
        file_size: 1 << 30,
        rotate_ns: None,
        ring: RingLimits::default(),
        snaplen: 65535,
        queue_batches: 1024,
    }
}

/// Records of a pcap file: (time, captured bytes).
fn records(p: &std::path::Path) -> Vec<(i64, Vec<u8>)> {
    let b = std::fs::read(p).unwrap();
    assert_eq!(u32::from_le_bytes(b[..4].try_into().unwrap()), 0xa1b2_3c4d);
    let mut at = 24;
    let mut out = Vec::new();
    while at + 16 <= b.len() {
        let w = |i: usize| u32::from_le_bytes(b[at + i..at + i + 4].try_into().unwrap());
        let (ts, cap) = (w(0) as i64 * SEC + w(4) as i64, w(8) as usize);
        out.push((ts, b[at + 16..at + 16 + cap].to_vec()));
        at += 16 + cap;
    }
    assert_eq!(at, b.len(), "{} ends inside a record", p.display());
    out
}

#[test]
fn rotates_by_size_and_by_aligned_time_and_indexes_every_connection() {
    let dir = scratch("rotate");
    let mut cfg = config(&dir);
    cfg.file_size = 24 + 10 * (16 + 100);
    cfg.rotate_ns = Some(60 * SEC);
    let pd = PcapDir::start(cfg).unwrap();
    let mut g = UidGenerator::new(3);
    let uids = [g.next_uid(), g.next_uid()];
    let mut tx = pd.sender();
    // 25 packets in the minute from 1000 s (rotated every 10 by size), then
    // 5 after the minute boundary at 1020 s.
    let t0 = 1000 * SEC;
    for i in 0..30i64 {
        let ts = if i < 25 { t0 + i * 100_000_000 } else { 1020 * SEC + i };
        tx.keep(ts, 200, 1, &[i as u8; 100], Some(uids[i as usize % 2]));
    }
    drop(tx);
    assert!(pd.finish().first_error.is_none());
    let files = list_pcaps(&dir).unwrap();
    let counts: Vec<usize> = files.iter().map(|f| records(&f.path).len()).collect();
    assert_eq!(counts, vec![10, 10, 5, 5]);
    assert_eq!(files[3].start_ns, 1020 * SEC + 25);
    // Every packet is indexed under its uid, at its record.
    for f in &files {
        let ix = read_index(&f.index_path(), |_| true).unwrap();
        assert!(!ix.torn_tail);
        let n: usize = ix.entries.iter().map(|e| e.offsets.len()).sum();
        assert_eq!(n, records(&f.path).len());
    }
    let mut out = Vec::new();
    let want: HashSet<String> = [uids[1].to_string()].into();
    let s = extract(&dir, &want, Window::default(), &mut out).unwrap();
    assert_eq!((s.packets, s.uids_found, s.files_read), (15, 1, 4));
    let p = dir.join("out.pcap");
    std::fs::write(&p, &out).unwrap();
    let got = records(&p);
    let firsts: Vec<u8> = got.iter().map(|(_, d)| d[0]).collect();
    assert_eq!(firsts, (0..30u8).filter(|i| i % 2 == 1).collect::<Vec<_>>());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ring_deletes_oldest_closed_files_by_count_size_and_age() {
    for (name, ring, left) in [
        ("count", RingLimits { count: Some(3), ..Default::default() }, 3),
        // Each file: 24 + 4 * 116 bytes and a 16-byte index: 3 of them fit
        // in 2000 bytes, 2 and an open one at its full size too.
        ("size", RingLimits { size: Some(2000), ..Default::default() }, 3),
        // Files start every 10 s: those whose successor began more than 25 s
        // before the newest packet (at 97.5 s) go: 70, 80 and 90 s stay.
        ("age", RingLimits { age_ns: Some(25 * SEC), ..Default::default() }, 3),
    ] {
        let dir = scratch(name);
        let mut cfg = config(&dir);
        cfg.file_size = 24 + 4 * 116;
        cfg.ring = ring;
        let pd = PcapDir::start(cfg).unwrap();
        let mut tx = pd.sender();
        for i in 0..40i64 {
            tx.keep(i * 2_500_000_000, 100, 1, &[0u8; 100], None);
            // One batch per packet: rotation sees them one by one.
            tx.flush();
        }
        drop(tx);
        assert!(pd.finish().first_error.is_none());
        let files = list_pcaps(&dir).unwrap();
        assert_eq!(files.len(), left, "{name}: {files:?}");
        // The newest files stay.
        assert_eq!(files.last().unwrap().start_ns, 36 * 2_500_000_000, "{name}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn a_full_queue_drops_and_counts_never_blocks() {
    let dir = scratch("queue");
    let mut cfg = config(&dir);
    cfg.queue_batches = 1;
    let pd = PcapDir::start(cfg).unwrap();
    let mut tx = pd.sender();
    for i in 0..200_000i64 {
        tx.keep(i, 1500, 1, &[0u8; 1500], None);
    }
    tx.flush();
    let c = pd.counters();
    drop(tx);
    pd.finish();
    use std::sync::atomic::Ordering::Relaxed;
    let (kept, dropped, written) = (c.kept.load(Relaxed), c.dropped.load(Relaxed), c.written.load(Relaxed));
    assert_eq!(kept + dropped, 200_000);
    assert_eq!(written, kept);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn closed_files_get_sorted_indexes_and_a_window_passes_over_other_files() {
    let dir = scratch("window");
    let mut cfg = config(&dir);
    cfg.rotate_ns = Some(60 * SEC);
    let pd = PcapDir::start(cfg).unwrap();
    let mut g = UidGenerator::new(5);
    let uids: Vec<_> = (0..3).map(|_| g.next_uid()).collect();
    let mut tx = pd.sender();
    // Connection i has 4 packets in the minute from i * 600 s.
    for (i, u) in uids.iter().enumerate() {
        for k in 0..4i64 {
            tx.keep(i as i64 * 600 * SEC + k * SEC, 100, 1, &[i as u8 * 10 + k as u8; 60], Some(*u));
        }
        tx.flush();
    }
    drop(tx);
    assert!(pd.finish().first_error.is_none());
    let files = list_pcaps(&dir).unwrap();
    assert_eq!(files.len(), 3);
    for f in &files {
        assert_eq!(std::fs::read(f.index_path()).unwrap()[8], 2, "{} is sorted", f.index_path().display());
    }
    let want: HashSet<String> = [uids[1].to_string()].into();
    let mut all = Vec::new();
    let s = extract(&dir, &want, Window::default(), &mut all).unwrap();
    assert_eq!((s.packets, s.files_indexed, s.files_read), (4, 3, 1));
    // Its record says 600 s to 603 s: the file after is passed over by its
    // name, the one before after its index's trailer.
    let mut windowed = Vec::new();
    let w = Window { from_ns: Some(600 * SEC), to_ns: Some(603 * SEC) };
    let s = extract(&dir, &want, w, &mut windowed).unwrap();
    assert_eq!((s.packets, s.files_indexed, s.files_read), (4, 2, 1));
    assert_eq!(windowed, all);
    assert!(s.index_bytes < 1024, "{} bytes of index read", s.index_bytes);
    let p = dir.join("out.pcap");
    std::fs::write(&p, &windowed).unwrap();
    let firsts: Vec<u8> = records(&p).iter().map(|(_, d)| d[0]).collect();
    assert_eq!(firsts, vec![10, 11, 12, 13]);
    std::fs::remove_dir_all(&dir).unwrap();
}
