//! Files as a careful root daemon writes them (issue 28), as the probe ran
//! it: links and hard links planted (as root) in the directories wirelog
//! writes, `--logs`, `--store`, `--pcap-dir` and the ClickHouse spool, and
//! an existing tree given to `capture`. No file outside is touched (the
//! victim keeps its content, mode and owner; nothing appears at a link's
//! target), and what is refused is named.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;

use common::live::{is_root, skip};

const BIN: &str = env!("CARGO_BIN_EXE_wirelog");

fn wirelog(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A file outside the directories wirelog writes: root:adm 0640.
struct Victim {
    path: PathBuf,
    meta: std::fs::Metadata,
}

impl Victim {
    fn plant(dir: &Path) -> Victim {
        let path = dir.join("victim");
        std::fs::write(&path, b"root's own\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let _ = std::os::unix::fs::chown(&path, Some(0), Some(adm_gid()));
        let meta = std::fs::metadata(&path).unwrap();
        Victim { path, meta }
    }

    fn untouched(&self) {
        let m = std::fs::metadata(&self.path).unwrap();
        assert_eq!(std::fs::read(&self.path).unwrap(), b"root's own\n", "{} was written", self.path.display());
        assert_eq!((m.mode(), m.uid(), m.gid()), (self.meta.mode(), self.meta.uid(), self.meta.gid()));
    }
}

fn adm_gid() -> u32 {
    let out = Command::new("getent").args(["group", "adm"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).split(':').nth(2).and_then(|g| g.parse().ok()).unwrap_or(4)
}

fn symlink(target: &Path, link: &Path) {
    std::os::unix::fs::symlink(target, link).unwrap();
}

/// `ww/conn.log -> victim` in a world-writable directory without the
/// sticky bit: `read --logs ww` refuses the directory, naming it.
#[test]
fn a_world_writable_log_directory_is_refused() {
    let d = common::scratch("safe_files", "ww");
    let pcap = common::sample_pcap(&d);
    let v = Victim::plant(&d);
    let ww = d.join("ww");
    std::fs::create_dir(&ww).unwrap();
    std::fs::set_permissions(&ww, std::fs::Permissions::from_mode(0o777)).unwrap();
    symlink(&v.path, &ww.join("conn.log"));
    let o = wirelog(&["read", "--no-store", "--logs", s(&ww), s(&pcap)]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains(&format!("{}: world-writable directory without the sticky bit", ww.display())), "{e}");
    v.untouched();
    assert!(std::fs::symlink_metadata(ww.join("conn.log")).unwrap().file_type().is_symlink());
    // With the sticky bit the directory is used; the planted link is
    // replaced by the log, never followed.
    std::fs::set_permissions(&ww, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let o = wirelog(&["read", "--no-store", "--logs", s(&ww), s(&pcap)]);
    assert!(o.status.success(), "{}", stderr(&o));
    v.untouched();
    let conn = std::fs::read_to_string(ww.join("conn.log")).unwrap();
    assert!(conn.starts_with("#separator"), "{conn}");
}

/// Links and a hard link planted under the names of logs: each log
/// replaces its name; no victim is written, nothing appears at a dangling
/// link's target; a log directory that is a link is refused.
#[test]
fn planted_log_links_are_replaced_never_followed() {
    let d = common::scratch("safe_files", "logs");
    let pcap = common::sample_pcap(&d);
    let v = Victim::plant(&d);
    let logs = d.join("logs");
    std::fs::create_dir(&logs).unwrap();
    symlink(&v.path, &logs.join("conn.log"));
    symlink(&d.join("made-by-root"), &logs.join("flows.log"));
    symlink(&d.join("made-by-root-too"), &logs.join(".dns.log.part"));
    std::fs::hard_link(&v.path, logs.join("dns.log")).unwrap();
    let o = wirelog(&["read", "--no-store", "--logs", s(&logs), s(&pcap)]);
    assert!(o.status.success(), "{}", stderr(&o));
    v.untouched();
    assert!(!d.join("made-by-root").exists() && !d.join("made-by-root-too").exists());
    for name in ["conn.log", "flows.log", "dns.log"] {
        let m = std::fs::symlink_metadata(logs.join(name)).unwrap();
        assert!(m.file_type().is_file() && m.nlink() == 1, "{name}: {m:?}");
        let text = std::fs::read_to_string(logs.join(name)).unwrap();
        assert!(text.starts_with("#separator"), "{name}: {text}");
    }
    // The log directory itself a link: refused, named.
    let link = d.join("logs-link");
    symlink(&logs, &link);
    let o = wirelog(&["read", "--no-store", "--logs", s(&link), s(&pcap)]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains(&format!("{}: a symbolic link, not a directory: refused", link.display())), "{}", stderr(&o));
}

/// `.writer.lock -> victim` (and a dangling one, and a hard link) in a
/// store: refused, named; no file created at the link's target.
#[test]
fn a_planted_store_lock_is_refused() {
    let d = common::scratch("safe_files", "lock");
    let pcap = common::sample_pcap(&d);
    let v = Victim::plant(&d);
    let store = d.join("store");
    std::fs::create_dir(&store).unwrap();
    let lock = store.join(".writer.lock");
    for plant in [0, 1, 2] {
        let _ = std::fs::remove_file(&lock);
        match plant {
            0 => symlink(&d.join("created-by-root"), &lock),
            1 => symlink(&v.path, &lock),
            _ => std::fs::hard_link(&v.path, &lock).unwrap(),
        }
        let o = wirelog(&["read", "--store", s(&store), "--logs", s(&d.join("logs")), s(&pcap)]);
        assert!(!o.status.success(), "plant {plant}");
        let e = stderr(&o);
        let why = if plant == 2 { "2 hard links" } else { "a symbolic link: refused" };
        assert!(e.contains(&format!("{}: {why}", lock.display())), "plant {plant}: {e}");
        assert!(!d.join("created-by-root").exists());
        v.untouched();
    }
}

/// A store whose `ingested.tsv`, a temporary or a partition directory is a
/// planted link: the list is refused (named) rather than read from the
/// victim; a temporary's link is replaced; a partition link is refused.
#[test]
fn planted_store_files_and_directories_are_not_followed() {
    let d = common::scratch("safe_files", "store");
    let pcap = common::sample_pcap(&d);
    let v = Victim::plant(&d);
    let store = d.join("store");
    std::fs::create_dir(&store).unwrap();
    symlink(&v.path, &store.join("ingested.tsv"));
    let o = wirelog(&["read", "--store", s(&store), "--logs", s(&d.join("logs")), s(&pcap)]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("ingested.tsv: a symbolic link: refused"), "{}", stderr(&o));
    v.untouched();

    // The list's temporary planted: replaced; the run records the capture.
    std::fs::remove_file(store.join("ingested.tsv")).unwrap();
    symlink(&v.path, &store.join(".ingested.tsv.tmp"));
    let o = wirelog(&["read", "--store", s(&store), "--logs", s(&d.join("logs")), s(&pcap)]);
    assert!(o.status.success(), "{}", stderr(&o));
    v.untouched();
    let listed = std::fs::symlink_metadata(store.join("ingested.tsv")).unwrap();
    assert!(listed.file_type().is_file() && listed.nlink() == 1);

    // A kind's directory a link to somewhere else: refused, named.
    let fresh = d.join("store2");
    std::fs::create_dir(&fresh).unwrap();
    let elsewhere = d.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    symlink(&elsewhere, &fresh.join("conns"));
    let o = wirelog(&["read", "--store", s(&fresh), "--logs", s(&d.join("logs2")), s(&pcap)]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains(&format!("{}: a symbolic link, not a directory: refused", fresh.join("conns").display())), "{e}");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0, "files written through the link");
}

/// `--pcap-dir`: a link as the directory and links planted under its
/// working names: refused or replaced; the victim is never written.
#[test]
fn planted_pcap_dir_links_are_not_followed() {
    let d = common::scratch("safe_files", "pcapdir");
    let pcap = common::sample_pcap(&d);
    let v = Victim::plant(&d);
    let real = d.join("kept");
    std::fs::create_dir(&real).unwrap();
    let link = d.join("kept-link");
    symlink(&real, &link);
    let o = wirelog(&["read", "--no-store", "--logs", s(&d.join("logs")), "--pcap-dir", s(&link), s(&pcap)]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains(&format!("{}: a symbolic link, not a directory: refused", link.display())), "{}", stderr(&o));
    assert_eq!(std::fs::read_dir(&real).unwrap().count(), 0);

    symlink(&v.path, &real.join(".wirelog-write-test"));
    let o = wirelog(&["read", "--no-store", "--logs", s(&d.join("logs")), "--pcap-dir", s(&real), s(&pcap)]);
    assert!(o.status.success(), "{}", stderr(&o));
    v.untouched();
    let kept = std::fs::read_dir(&real).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned());
    let kept: Vec<String> = kept.collect();
    assert!(kept.iter().any(|n| n.ends_with(".pcap")), "{kept:?}");
    for e in std::fs::read_dir(&real).unwrap() {
        let m = std::fs::symlink_metadata(e.unwrap().path()).unwrap();
        assert!(m.file_type().is_file() && m.nlink() == 1, "{m:?}");
    }
}

/// The ClickHouse spool: its `LOCK` planted as a link or a hard link to the
/// victim is refused, named (`clickhouse flush` opens the spool first).
#[test]
fn a_planted_spool_lock_is_refused() {
    let d = common::scratch("safe_files", "spool");
    let v = Victim::plant(&d);
    let spool = d.join("spool");
    std::fs::create_dir(&spool).unwrap();
    for hard in [false, true] {
        let lock = spool.join("LOCK");
        let _ = std::fs::remove_file(&lock);
        if hard {
            std::fs::hard_link(&v.path, &lock).unwrap();
        } else {
            symlink(&v.path, &lock);
        }
        let o = wirelog(&["clickhouse", "flush", "--clickhouse", "http://127.0.0.1:9", "--spool-dir", s(&spool)]);
        assert!(!o.status.success());
        let why = if hard { "2 hard links" } else { "a symbolic link: refused" };
        assert!(stderr(&o).contains(&format!("{}: {why}", lock.display())), "{}", stderr(&o));
        v.untouched();
    }
}

/// `capture` given an existing tree (a root-only `auth.log`, root:adm
/// 0640, and a hard link to a file outside): nothing existing changes
/// owner. A log directory the unprivileged user cannot write is refused,
/// named; one given to it is used, and only what wirelog creates there is
/// the user's.
#[test]
fn capture_gives_away_only_what_it_creates() {
    if !is_root() {
        return skip("capture and chown need root");
    }
    let d = std::env::temp_dir().join(format!("wirelog-safe-files-{}-capture", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let v = Victim::plant(&d);
    let logs = d.join("logs");
    std::fs::create_dir(&logs).unwrap();
    let auth = logs.join("auth.log");
    std::fs::write(&auth, b"secret\n").unwrap();
    std::fs::set_permissions(&auth, std::fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::chown(&auth, Some(0), Some(adm_gid())).unwrap();
    std::fs::hard_link(&v.path, logs.join("linked")).unwrap();
    let store = d.join("store");
    let capture = |logs: &Path| {
        Command::new("unshare")
            .args(["-n", "sh", "-c", "ip link set lo up && exec \"$0\" \"$@\"", BIN, "capture", "-i", "lo", "-q"])
            .args(["--duration", "1s", "--stats-interval", "0", "--logs", s(logs), "--store", s(&store)])
            .output()
            .unwrap()
    };
    let owners = || {
        let m = |p: &Path| std::fs::metadata(p).map(|m| (m.uid(), m.gid(), m.mode())).unwrap();
        (m(&logs), m(&auth), m(&v.path))
    };
    let before = owners();
    // Root's directory: refused before any packet is read, named.
    let o = capture(&logs);
    assert!(!o.status.success());
    assert!(stderr(&o).contains(&format!("{} is not writable by nobody", logs.display())), "{}", stderr(&o));
    assert_eq!(owners(), before);
    v.untouched();

    // Given to nobody by the administrator: used; what exists keeps its owner.
    let nobody = 65534;
    std::os::unix::fs::chown(&logs, Some(nobody), Some(nobody)).unwrap();
    let _ = std::fs::remove_dir_all(&store);
    let before = owners();
    let o = capture(&logs);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(owners(), before);
    v.untouched();
    assert_eq!(std::fs::metadata(logs.join("linked")).unwrap().uid(), 0);
    // What wirelog created is nobody's: the logs, the store and its directories.
    for p in [logs.join("conn.log"), store.clone(), store.join("conns"), store.join(".writer.lock")] {
        assert_eq!(std::fs::metadata(&p).map(|m| m.uid()).unwrap(), nobody, "{}", p.display());
    }
    std::fs::remove_dir_all(&d).unwrap();
}
