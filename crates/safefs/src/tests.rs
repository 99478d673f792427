use super::*;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};

/// Giving created files away is process-wide: the tests run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wirelog-safefs-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A victim outside the directory, with its content, mode and owner.
fn victim(d: &Path) -> (PathBuf, std::fs::Metadata) {
    let v = d.join("victim");
    std::fs::write(&v, b"precious\n").unwrap();
    std::fs::set_permissions(&v, std::fs::Permissions::from_mode(0o640)).unwrap();
    (v.clone(), std::fs::metadata(&v).unwrap())
}

fn untouched(v: &Path, before: &std::fs::Metadata) {
    let m = std::fs::metadata(v).unwrap();
    assert_eq!(std::fs::read(v).unwrap(), b"precious\n");
    assert_eq!((m.mode(), m.uid(), m.gid()), (before.mode(), before.uid(), before.gid()));
}

#[test]
fn a_planted_symlink_is_never_followed() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = scratch("symlink");
    let (v, before) = victim(&d);
    let logs = d.join("logs");
    std::fs::create_dir(&logs).unwrap();
    std::os::unix::fs::symlink(&v, logs.join("conn.log")).unwrap();
    std::os::unix::fs::symlink(d.join("nothing-here"), logs.join("dns.log")).unwrap();
    let dir = Dir::open(&logs).unwrap();
    let e = dir.create_new("conn.log").unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");
    assert!(e.to_string().contains("logs/conn.log"), "{e}");
    let e = dir.open_file("conn.log", true).unwrap_err();
    assert!(e.to_string().contains("logs/conn.log: a symbolic link: refused"), "{e}");
    // A dangling link: nothing is created at its target.
    assert!(dir.create_new("dns.log").is_err());
    assert!(dir.open_lock("dns.log").is_err());
    assert!(!d.join("nothing-here").exists());
    // Replacing by rename replaces the link itself.
    let mut f = dir.create_new(".conn.log.tmp").unwrap();
    f.write_all(b"#fields\n").unwrap();
    dir.rename(".conn.log.tmp", "conn.log").unwrap();
    assert!(!std::fs::symlink_metadata(logs.join("conn.log")).unwrap().file_type().is_symlink());
    untouched(&v, &before);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_directory_link_is_refused_by_name() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = scratch("dirlink");
    std::fs::create_dir(d.join("real")).unwrap();
    std::os::unix::fs::symlink(d.join("real"), d.join("store")).unwrap();
    let e = Dir::open(&d.join("store")).unwrap_err();
    assert!(e.to_string().contains("store: a symbolic link, not a directory: refused"), "{e}");
    let e = Dir::create(&d.join("store")).unwrap_err();
    assert!(e.to_string().contains("refused"), "{e}");
    let parent = Dir::open(&d).unwrap();
    assert!(parent.open_dir("store").is_err());
    assert!(parent.create_dir("store").is_err());
    assert_eq!(std::fs::read_dir(d.join("real")).unwrap().count(), 0);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_hard_link_or_a_fifo_is_refused() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = scratch("hardlink");
    let (v, before) = victim(&d);
    let store = d.join("store");
    std::fs::create_dir(&store).unwrap();
    std::fs::hard_link(&v, store.join(".writer.lock")).unwrap();
    let dir = Dir::open(&store).unwrap();
    let e = dir.open_lock(".writer.lock").unwrap_err();
    assert!(e.to_string().contains(".writer.lock: 2 hard links"), "{e}");
    let c = CString::new(store.join("fifo").as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let e = dir.open_file("fifo", false).unwrap_err();
    assert!(e.to_string().contains("fifo: not a regular file: refused"), "{e}");
    untouched(&v, &before);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_world_writable_directory_needs_the_sticky_bit() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = scratch("ww");
    let ww = d.join("ww");
    std::fs::create_dir(&ww).unwrap();
    std::fs::set_permissions(&ww, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = Dir::open(&ww).unwrap_err();
    assert!(e.to_string().contains("ww: world-writable directory without the sticky bit"), "{e}");
    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
    // Creating below it is refused too.
    let e = Dir::create(&ww.join("logs")).unwrap_err();
    assert!(e.to_string().contains("sticky"), "{e}");
    assert!(!ww.join("logs").exists());
    std::fs::set_permissions(&ww, std::fs::Permissions::from_mode(0o1777)).unwrap();
    Dir::open(&ww).unwrap();
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn create_makes_missing_parents_and_reopens_existing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = scratch("create");
    let deep = d.join("a/b/c");
    let dir = Dir::create(&deep).unwrap();
    assert!(deep.is_dir());
    let mut f = dir.create_new("x").unwrap();
    f.write_all(b"1").unwrap();
    assert_eq!(dir.create_new("x").unwrap_err().kind(), io::ErrorKind::AlreadyExists);
    let mut s = String::new();
    Dir::create(&deep).unwrap().open_file("x", false).unwrap().read_to_string(&mut s).unwrap();
    assert_eq!(s, "1");
    assert!(dir.remove_file("x").unwrap());
    assert!(!dir.remove_file("x").unwrap());
    assert!(dir.create_new("../escape").is_err());
    std::fs::remove_dir_all(&d).unwrap();
}

/// Only what is created is given away, through its descriptor; an
/// existing directory and its files keep their owner.
#[test]
fn only_what_is_created_is_given_away() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if sys::geteuid() != 0 {
        return;
    }
    let d = scratch("give");
    let old = d.join("old");
    std::fs::create_dir(&old).unwrap();
    std::fs::write(old.join("auth.log"), b"x").unwrap();
    give_created_to(65534, 65534);
    let dir = Dir::create(&old).unwrap();
    let new = dir.create_dir("new").unwrap();
    new.create_new("f").unwrap();
    dir.open_lock("auth.log").unwrap();
    keep_created();
    let owner = |p: &Path| std::fs::metadata(p).unwrap().uid();
    assert_eq!(owner(&old), 0);
    assert_eq!(owner(&old.join("auth.log")), 0);
    assert_eq!(owner(&old.join("new")), 65534);
    assert_eq!(owner(&old.join("new/f")), 65534);
    std::fs::remove_dir_all(&d).unwrap();
}
