//! A full disk, made for real: tmpfs data directories of a few MB (mounted
//! by the test, unmounted by a guard), a synthetic capture of many UDP
//! connections, and `wirelog read` writing the store, the logs or both.
//! Whatever is written is whole (no half line in a log, every Parquet file
//! readable by DuckDB, no temporary left), what could not be written is
//! counted exactly (written + dropped = produced, produced taken from a run
//! on a roomy disk), the summary is printed and the exit code is the
//! documented 3. A second run frees space during the run and loses nothing.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

mod common;

use common::live::{is_root, skip};
use common::{synthetic_pcap, synthetic_pcap_at};

const BIN: &str = env!("CARGO_BIN_EXE_wirelog");
const EXIT_PARTIAL: i32 = 3;

/// A tmpfs of `size` mounted on a fresh directory, unmounted on drop.
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    fn mount(name: &str, size: &str) -> Tmpfs {
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("full-disk-{}-{name}-{seq}", std::process::id()));
        let _ = Command::new("umount").arg(&dir).output();
        std::fs::create_dir_all(&dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "mount tmpfs: {}", String::from_utf8_lossy(&out.stderr));
        Tmpfs { dir }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
        let _ = std::fs::remove_dir(&self.dir);
    }
}

struct Run {
    code: Option<i32>,
    stderr: String,
}

/// `wirelog read -` fed `pcap` on stdin; `midway` runs after the first
/// `split` bytes, once stderr said `wait_for` (if given).
fn read(args: &[&str], pcap: &[u8], split: Option<(usize, &str, &dyn Fn())>) -> Run {
    let mut child = Command::new(BIN)
        .arg("read")
        .args(args)
        .args(["--udp-timeout", "1s", "--seed", "1", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let mut stdin = child.stdin.take().unwrap();
    match split {
        Some((at, wait_for, midway)) => {
            stdin.write_all(&pcap[..at]).unwrap();
            stdin.flush().unwrap();
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            loop {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                match rx.recv_timeout(left) {
                    Ok(l) if l.contains(wait_for) => break,
                    Ok(_) => {}
                    Err(_) => {
                        let _ = child.kill();
                        panic!("wirelog never said {wait_for:?}");
                    }
                }
            }
            midway();
            stdin.write_all(&pcap[at..]).unwrap();
        }
        None => stdin.write_all(pcap).unwrap(),
    }
    drop(stdin);
    let status = child.wait().unwrap();
    Run { code: status.code(), stderr: reader.join().unwrap() }
}

/// Record lines of a log; every line of it must be whole (the header's
/// field count), and the file must end with a line end.
fn log_records(path: &Path) -> u64 {
    let Ok(text) = std::fs::read_to_string(path) else {
        return 0;
    };
    assert!(text.is_empty() || text.ends_with('\n'), "{} ends inside a line", path.display());
    let fields = text
        .lines()
        .find(|l| l.starts_with("#fields"))
        .map(|l| l.split('\t').count() - 1);
    let mut n = 0;
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        if let Some(f) = fields {
            assert_eq!(l.split('\t').count(), f, "a cut line in {}: {l:?}", path.display());
        }
        n += 1;
    }
    n
}

/// Rows of a kind in a store, as DuckDB reads the files (each must be readable).
fn store_rows(store: &Path, kind: &str) -> u64 {
    store_rows_in(store, kind, "*")
}

/// Rows of a kind in the partitions of dates matching `date` (a glob).
fn store_rows_in(store: &Path, kind: &str, date: &str) -> u64 {
    let glob = store.join(kind).join(format!("date={date}")).join("*/*.parquet");
    let glob = if date == "*" { store.join(kind).join("*/*/*.parquet") } else { glob };
    if std::fs::read_dir(store.join(kind)).map_or(true, |mut d| d.next().is_none()) {
        return 0;
    }
    let script = format!(
        "import duckdb,glob\nprint(duckdb.connect().execute(\"select count(*) from read_parquet('{0}')\").fetchone()[0] if glob.glob('{0}') else 0)",
        glob.display()
    );
    let out = Command::new("python3").arg("-c").arg(&script).output().unwrap();
    assert!(out.status.success(), "duckdb on {}: {}", glob.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

fn no_temporaries(dir: &Path) {
    let out = Command::new("find").arg(dir).args(["-name", "*.tmp"]).output().unwrap();
    assert!(out.stdout.is_empty(), "temporaries left: {}", String::from_utf8_lossy(&out.stdout));
}

/// "store conns 120, conn.log 7" from the summary's dropped line.
fn dropped(stderr: &str, what: &str) -> u64 {
    let Some(line) = stderr.lines().find(|l| l.contains("could not be written")) else {
        return 0;
    };
    let list = line.rsplit(": ").next().unwrap();
    list.split(", ")
        .filter_map(|p| p.rsplit_once(' '))
        .find(|(name, _)| *name == what)
        .map_or(0, |(_, n)| n.parse().unwrap())
}

/// What a roomy disk holds after the same run.
struct Expected {
    conn_log: u64,
    flows_log: u64,
    conns: u64,
    flows: u64,
}

fn roomy(pcap: &[u8]) -> Expected {
    let t = Tmpfs::mount("roomy", "256m");
    let (s, l) = (t.dir.join("store"), t.dir.join("logs"));
    let r = read(&["--store", s.to_str().unwrap(), "--logs", l.to_str().unwrap()], pcap, None);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let e = Expected {
        conn_log: log_records(&l.join("conn.log")),
        flows_log: log_records(&l.join("flows.log")),
        conns: store_rows(&s, "conns"),
        flows: store_rows(&s, "flows"),
    };
    assert!(e.conn_log >= 40_000 && e.conns == e.conn_log && e.flows > 0, "{}", r.stderr);
    e
}

#[test]
fn a_full_disk_loses_nothing_written_and_counts_the_rest() {
    if !is_root() {
        return skip("mounting tmpfs needs root");
    }
    let pcap = synthetic_pcap(40_000);
    let want = roomy(&pcap);

    // The store alone on a 1 MB disk (conn records go to stdout).
    let t = Tmpfs::mount("store", "1m");
    let s = t.dir.join("store");
    let r = read(&["--store", s.to_str().unwrap()], &pcap, None);
    assert_eq!(r.code, Some(EXIT_PARTIAL), "{}", r.stderr);
    assert!(r.stderr.contains("wirelog: 40000 packets"), "summary printed: {}", r.stderr);
    assert_eq!(store_rows(&s, "conns") + dropped(&r.stderr, "store conns"), want.conns, "{}", r.stderr);
    assert_eq!(store_rows(&s, "flows") + dropped(&r.stderr, "store flows"), want.flows, "{}", r.stderr);
    assert!(dropped(&r.stderr, "store conns") > 0, "the disk was too small: {}", r.stderr);
    no_temporaries(&t.dir);
    drop(t);

    // The logs alone on a 2 MB disk.
    let t = Tmpfs::mount("logs", "2m");
    let l = t.dir.join("logs");
    let r = read(&["--no-store", "--logs", l.to_str().unwrap()], &pcap, None);
    assert_eq!(r.code, Some(EXIT_PARTIAL), "{}", r.stderr);
    assert!(r.stderr.contains("wirelog: 40000 packets"), "{}", r.stderr);
    assert!(r.stderr.contains("conn.log"), "the warning names the file: {}", r.stderr);
    assert_eq!(log_records(&l.join("conn.log")) + dropped(&r.stderr, "conn.log"), want.conn_log, "{}", r.stderr);
    assert_eq!(log_records(&l.join("flows.log")) + dropped(&r.stderr, "flows.log"), want.flows_log, "{}", r.stderr);
    // The default floor (5%) is kept: the disk is never filled to its last byte.
    let avail = free_bytes(&t.dir);
    assert!(avail > 0, "the disk was filled to the last byte");
    drop(t);

    // Both on one 3 MB disk, no floor: real ENOSPC errors.
    let t = Tmpfs::mount("both", "3m");
    let (s, l) = (t.dir.join("store"), t.dir.join("logs"));
    let r = read(&["--min-free", "0", "--store", s.to_str().unwrap(), "--logs", l.to_str().unwrap()], &pcap, None);
    assert_eq!(r.code, Some(EXIT_PARTIAL), "{}", r.stderr);
    assert!(r.stderr.contains("No space left on device"), "{}", r.stderr);
    assert_eq!(log_records(&l.join("conn.log")) + dropped(&r.stderr, "conn.log"), want.conn_log, "{}", r.stderr);
    assert_eq!(store_rows(&s, "conns") + dropped(&r.stderr, "store conns"), want.conns, "{}", r.stderr);
    assert_eq!(store_rows(&s, "flows") + dropped(&r.stderr, "store flows"), want.flows, "{}", r.stderr);
    no_temporaries(&t.dir);
    // `query` reads what was written, and says nothing is wrong with it.
    let q = Command::new(BIN).args(["query", "conns", "--by", "proto", "--format", "csv", "--store"]).arg(&s).output().unwrap();
    assert!(q.status.success(), "{}", String::from_utf8_lossy(&q.stderr));
}

fn free_bytes(dir: &Path) -> u64 {
    let out = Command::new("df").args(["-B1", "--output=avail"]).arg(dir).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().nth(1).unwrap().trim().parse().unwrap()
}

#[test]
fn space_freed_during_the_run_loses_nothing() {
    if !is_root() {
        return skip("mounting tmpfs needs root");
    }
    let pcap = synthetic_pcap(40_000);
    let want = roomy(&pcap);
    let t = Tmpfs::mount("freed", "16m");
    // A filler takes most of the disk; it is deleted once wirelog reports
    // that it waits for space.
    let filler = t.dir.join("filler");
    std::fs::write(&filler, vec![0u8; 15 << 20]).unwrap();
    let (s, l) = (t.dir.join("store"), t.dir.join("logs"));
    let free = || std::fs::remove_file(&filler).unwrap();
    let r = read(
        &["--min-free", "0", "--store", s.to_str().unwrap(), "--logs", l.to_str().unwrap()],
        &pcap,
        Some((pcap.len() * 3 / 4, "records wait in memory", &free)),
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stderr.contains("writing resumed"), "{}", r.stderr);
    assert!(!r.stderr.contains("could not be written"), "{}", r.stderr);
    assert_eq!(log_records(&l.join("conn.log")), want.conn_log);
    assert_eq!(log_records(&l.join("flows.log")), want.flows_log);
    assert_eq!(store_rows(&s, "conns"), want.conns);
    assert_eq!(store_rows(&s, "flows"), want.flows);
    no_temporaries(&t.dir);
}

/// Fills a file system until `left` bytes are available.
fn fill_until(dir: &Path, left: u64) -> PathBuf {
    let filler = dir.join("filler");
    let n = free_bytes(dir).saturating_sub(left);
    std::fs::write(&filler, vec![0u8; n as usize]).unwrap();
    filler
}

#[test]
fn the_free_space_floor_deletes_oldest_partitions_or_pauses() {
    if !is_root() {
        return skip("mounting tmpfs needs root");
    }
    let old = synthetic_pcap_at(40_000, 1_600_000_000); // 2020
    let new = synthetic_pcap(40_000); // 2023
    let t = Tmpfs::mount("floor", "12m");
    let s = t.dir.join("store");
    let store = s.to_str().unwrap();
    let r = read(&["--store", store], &old, None);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(store_rows_in(&s, "conns", "2020-*"), 40_000);

    // Below the floor and no retention limit: nothing is deleted, writing
    // pauses, and what could not be written is counted (exit 3).
    let filler = fill_until(&t.dir, 1 << 20);
    let r = read(&["--store", store, "--min-free", "2M"], &new, None);
    assert_eq!(r.code, Some(EXIT_PARTIAL), "{}", r.stderr);
    assert!(r.stderr.contains("below --min-free"), "{}", r.stderr);
    assert_eq!(store_rows_in(&s, "conns", "2020-*"), 40_000, "nothing old deleted");
    assert_eq!(store_rows_in(&s, "conns", "2023-*") + dropped(&r.stderr, "store conns"), 40_000);
    assert!(free_bytes(&t.dir) >= 1 << 19, "the floor held");

    // With a retention limit, the oldest partitions make room.
    let r = read(&["--store", store, "--min-free", "2M", "--retain-size", "1T"], &new, None);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stderr.contains("store partitions deleted to keep it"), "{}", r.stderr);
    assert!(store_rows_in(&s, "conns", "2020-*") < 40_000, "old partitions went first");
    assert!(store_rows_in(&s, "conns", "2023-*") >= 40_000, "the new rows are all there");
    no_temporaries(&t.dir);
    drop(std::fs::remove_file(filler));
}

/// `--pcap-dir` on a disk too small for the packets: the pcap writer loses
/// packets, counted and named, and never a record; what it wrote reads
/// back as input packets; no half-made file is left; the run is partial.
#[test]
fn a_full_pcap_dir_loses_packets_counted_never_records() {
    use common::kept::{kept_files, read_index, read_pcap, strip};
    if !is_root() {
        return skip("mounting tmpfs needs root");
    }
    let pcap = synthetic_pcap(40_000);
    let want = roomy(&pcap);
    let input = Tmpfs::mount("pcap-input", "16m");
    let input_file = input.dir.join("in.pcap");
    std::fs::write(&input_file, &pcap).unwrap();
    let (input_recs, _) = read_pcap(&input_file);

    let logs = Tmpfs::mount("pcap-logs", "64m");
    let t = Tmpfs::mount("pcap", "1m");
    let (l, pd) = (logs.dir.join("logs"), t.dir.join("pcap"));
    let r = read(&["--no-store", "--logs", l.to_str().unwrap(), "--pcap-dir", pd.to_str().unwrap(), "--pcap-file-size", "256K"], &pcap, None);
    assert_eq!(r.code, Some(EXIT_PARTIAL), "{}", r.stderr);
    assert!(r.stderr.contains("No space left on device"), "the error is named: {}", r.stderr);
    // Every record is written: the pcap is not the records.
    assert_eq!(log_records(&l.join("conn.log")), want.conn_log, "{}", r.stderr);
    assert_eq!(log_records(&l.join("flows.log")), want.flows_log, "{}", r.stderr);

    // "pcap: K packets kept, ..., W written (...) to F files, ..., L lost to write errors"
    let line = r.stderr.lines().find(|l| l.contains("packets kept")).unwrap_or_else(|| panic!("{}", r.stderr));
    let num = |after: &str| -> u64 {
        let (head, _) = line.split_once(after).unwrap_or_else(|| panic!("{after:?} in {line}"));
        head.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let (kept, written, lost) = (num(" packets kept"), num(" written ("), num(" lost to write errors"));
    assert_eq!(kept, 40_000, "{line}");
    assert_eq!(written + lost, kept, "reading waits for the writer, so nothing is dropped: {line}");
    assert!(written > 0 && lost > 0, "{line}");

    // What is on disk reads back as input packets, in order, exactly the
    // ones counted written (a write cut by ENOSPC is cut back to its last
    // whole record), and no file ends inside a record.
    let files = kept_files(&pd);
    assert!(files.iter().all(|f| !read_pcap(f).1), "a file ends inside a record");
    let on_disk: Vec<_> = files.iter().flat_map(|f| read_pcap(f).0).collect();
    assert_eq!(on_disk.len() as u64, written, "{line}");
    let want_recs = strip(&input_recs);
    let mut at = 0;
    for rec in strip(&on_disk) {
        at += want_recs[at..].iter().position(|w| *w == rec).expect("a kept record is an input packet, in order");
    }
    // No half-made file: every pcap has its index and the reverse, no
    // `.part`, and no index entry points past its file's data.
    for e in std::fs::read_dir(&pd).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(!name.ends_with(".part"), "left behind: {name}");
    }
    for f in &files {
        let idx = f.with_extension("idx");
        assert!(idx.exists(), "{} has no index", f.display());
        let len = std::fs::metadata(f).unwrap().len();
        let (uids, _) = read_index(&idx);
        assert!(uids.values().flatten().all(|o| *o < len), "{} points past its data", idx.display());
    }
}

/// Logs on a 256 KB disk, then on a disk with no byte left: a log holds its
/// whole Zeek header or does not exist (no 0-byte or headerless file, no
/// temporary left), and its records, written or dropped, are all counted.
#[test]
fn a_log_holds_its_header_or_does_not_exist() {
    if !is_root() {
        return skip("mounting tmpfs needs root");
    }
    let pcap = synthetic_pcap(40_000);
    let want = roomy(&pcap);
    for no_byte_left in [false, true] {
        let t = Tmpfs::mount("header", "256k");
        let l = t.dir.join("logs");
        std::fs::create_dir(&l).unwrap();
        let _filler = no_byte_left.then(|| fill_until(&t.dir, 0));
        let r = read(&["--no-store", "--min-free", "0", "--logs", l.to_str().unwrap()], &pcap, None);
        assert_eq!(r.code, Some(EXIT_PARTIAL), "{}", r.stderr);
        for e in std::fs::read_dir(&l).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            assert!(!name.starts_with('.'), "a temporary was left: {name}");
            let text = std::fs::read_to_string(e.path()).unwrap();
            assert!(
                text.starts_with("#separator") && text.lines().any(|l| l.starts_with("#types")),
                "{name} ({} bytes) has no whole header",
                text.len()
            );
        }
        if no_byte_left {
            assert_eq!(std::fs::read_dir(&l).unwrap().count(), 0, "a log appeared on a disk with no byte left");
            assert!(r.stderr.contains("conn.log"), "the warning names the log: {}", r.stderr);
        }
        assert_eq!(log_records(&l.join("conn.log")) + dropped(&r.stderr, "conn.log"), want.conn_log, "{}", r.stderr);
        assert_eq!(log_records(&l.join("flows.log")) + dropped(&r.stderr, "flows.log"), want.flows_log, "{}", r.stderr);
    }
}

/// A store flush on a disk too small for a kind's whole file writes what
/// fits in smaller files and drops (counting) only the rest: the disk is
/// left nearly full, not with most of it free.
#[test]
fn a_store_flush_writes_what_fits() {
    if !is_root() {
        return skip("mounting tmpfs needs root");
    }
    let pcap = synthetic_pcap(40_000);
    let want = roomy(&pcap);
    let t = Tmpfs::mount("fits", "1m");
    let s = t.dir.join("store");
    let r = read(&["--min-free", "0", "--store", s.to_str().unwrap()], &pcap, None);
    assert_eq!(r.code, Some(EXIT_PARTIAL), "{}", r.stderr);
    let (conns, flows) = (store_rows(&s, "conns"), store_rows(&s, "flows"));
    let left = free_bytes(&t.dir);
    eprintln!("1 MB disk: {conns} of {} conns and {flows} of {} flows kept, {left} bytes left free", want.conns, want.flows);
    assert_eq!(conns + dropped(&r.stderr, "store conns"), want.conns, "{}", r.stderr);
    assert_eq!(flows + dropped(&r.stderr, "store flows"), want.flows, "{}", r.stderr);
    assert!(conns > 0 && flows > 0, "a kind's flush kept nothing: {}", r.stderr);
    assert!(dropped(&r.stderr, "store conns") + dropped(&r.stderr, "store flows") > 0, "the disk was too small: {}", r.stderr);
    // Less than one smallest file (1024 rows) would take stays free.
    assert!(left < 128 << 10, "{left} bytes stayed free while rows were dropped: {}", r.stderr);
    assert!(r.stderr.contains("the store's writing is paused"), "the pause is said: {}", r.stderr);
    no_temporaries(&t.dir);
}

/// `capture --pcap-dir` on a 256 KB tmpfs while UDP traffic flows in a
/// namespace: the disk fills mid-record, yet every file ends with a whole
/// record (tcpdump reads each to its end), its index lists exactly the
/// records it holds, and the counts say what the files hold and what was
/// lost.
#[test]
fn a_full_pcap_dir_during_a_live_capture_keeps_whole_indexed_records() {
    use common::kept::{kept_files, read_index, read_pcap};
    use common::live::LiveCapture;
    use common::lo::{have, LoNs};
    if !is_root() {
        return skip("mounting tmpfs and namespaces need root");
    }
    for prog in ["ip", "python3", "tcpdump"] {
        if !have(prog) {
            return skip(&format!("{prog} is not installed"));
        }
    }
    let t = Tmpfs::mount("pcap-live", "256k");
    let logs = Tmpfs::mount("pcap-live-logs", "16m");
    let pd = t.dir.join("pcap");
    let ns = LoNs::new("pcapfull");
    let logs_dir = logs.dir.join("logs");
    let args = ["--no-store", "--logs", logs_dir.to_str().unwrap(), "--pcap-dir", pd.to_str().unwrap(), "--pcap-file-size", "64K"];
    let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    let cap = LiveCapture::start(&ns.name, "lo", &args);
    // 8 UDP conversations, 4,000 datagrams of 700 to 1,300 bytes (about
    // 4 MB: sixteen times the disk), paced so the capture takes them all.
    let sender = "import socket,time\n\
        r=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); r.bind(('127.0.0.1',7000))\n\
        ss=[socket.socket(socket.AF_INET,socket.SOCK_DGRAM) for _ in range(8)]\n\
        for i in range(4000):\n\
        \x20   ss[i%8].sendto(bytes(700+(i*37)%600),('127.0.0.1',7000))\n\
        \x20   if i%20==0: time.sleep(0.002)\n";
    ns.run(&["python3", "-c", sender]);
    std::thread::sleep(Duration::from_millis(500));
    let (status, err) = cap.interrupt();
    assert_eq!(status.code(), Some(EXIT_PARTIAL), "{err}");
    let line = err.lines().rev().find(|l| l.contains("packets kept")).unwrap_or_else(|| panic!("{err}"));
    let num = |after: &str| -> u64 {
        let (head, _) = line.split_once(after).unwrap_or_else(|| panic!("{after:?} in {line}"));
        head.rsplit(' ').next().unwrap().trim_start_matches('(').parse().unwrap()
    };
    let (kept, dropped, written, bytes) = (num(" packets kept"), num(" dropped"), num(" written ("), num(" bytes)"));
    let lost = if line.contains("lost to write errors") { num(" lost to write errors") } else { 0 };
    assert!(kept >= 4000, "{line}");
    assert!(lost > 0 && written > 0, "the disk filled and some packets were written: {line}");
    assert_eq!(kept, dropped + written + lost, "{line}");
    assert!(err.contains("No space left on device"), "the error is named: {err}");

    let files = kept_files(&pd);
    let (mut on_disk, mut on_disk_bytes) = (0u64, 0u64);
    for f in &files {
        // tcpdump reads the file to its end: no "truncated dump file".
        let o = Command::new("tcpdump").args(["-r", f.to_str().unwrap(), "-nn"]).output().unwrap();
        let tcpdump_err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success() && !tcpdump_err.contains("truncated"), "{}: {tcpdump_err}", f.display());
        let (recs, torn) = read_pcap(f);
        assert!(!torn, "{} ends inside a record", f.display());
        assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), recs.len(), "{}", f.display());
        // The index lists every record the file holds (each is of a UDP
        // conversation, so has a uid), and nothing else.
        let (uids, torn_index) = read_index(&f.with_extension("idx"));
        assert!(!torn_index, "{}: a torn index block", f.display());
        let mut indexed: Vec<u64> = uids.into_values().flatten().collect();
        indexed.sort();
        let held: Vec<u64> = recs.iter().map(|r| r.offset).collect();
        assert_eq!(indexed, held, "{}: the index lists exactly the file's records", f.display());
        on_disk += recs.len() as u64;
        on_disk_bytes += std::fs::metadata(f).unwrap().len() - 24;
    }
    assert_eq!(on_disk, written, "the files hold what the counts say: {line}");
    assert_eq!(on_disk_bytes, bytes, "{line}");
}

/// The store alone on a 1 MB disk: the records it could not write are in
/// its own loss table (written into the room the free-space floor keeps),
/// as many as the summary says were dropped.
#[test]
fn records_a_full_store_dropped_are_in_its_loss_table() {
    if !is_root() {
        return skip("mounting tmpfs needs root");
    }
    let pcap = synthetic_pcap(40_000);
    let t = Tmpfs::mount("loss", "1m");
    let s = t.dir.join("store");
    let r = read(&["--store", s.to_str().unwrap()], &pcap, None);
    assert_eq!(r.code, Some(EXIT_PARTIAL), "{}", r.stderr);
    let line = r.stderr.lines().find(|l| l.contains("could not be written")).unwrap_or_else(|| panic!("{}", r.stderr));
    let summary: u64 = line.trim_start_matches("wirelog: ").split(' ').next().unwrap().parse().unwrap();
    assert!(summary > 0, "{}", r.stderr);
    let q = Command::new(BIN)
        .args(["query", "loss", "--every", "1h", "--format", "csv", "--store"])
        .arg(&s)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&q.stderr);
    assert!(q.status.success(), "{err}");
    let csv = String::from_utf8_lossy(&q.stdout);
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let at = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let (dropped_at, packets_at) = (at("records_dropped"), at("kernel_packets"));
    let (mut dropped, mut packets) = (0u64, 0u64);
    for l in lines {
        let v: Vec<&str> = l.split(',').collect();
        dropped += v[dropped_at].parse::<u64>().unwrap();
        packets += v[packets_at].parse::<u64>().unwrap();
    }
    assert_eq!(dropped, summary, "loss table:\n{csv}\nrun:\n{}", r.stderr);
    assert_eq!(packets, 40_000, "{csv}");
    assert!(err.contains(&format!("{summary} records dropped by sinks")), "{err}");
    no_temporaries(&t.dir);
}
