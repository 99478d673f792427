//! A renamed store column (a rename declared with its protocol's columns:
//! MySQL's `num_rows` is `rows`, Zeek's and PostgreSQL's name) reads from
//! files written before the rename. `tests/data/main-store` holds the MySQL
//! file wirelog wrote (before the rename, commit a2cfeef) for packetbeat's
//! `mysql_connection.pcap`; this binary's store of the same capture must
//! answer the same queries the same way, by the new name and the old.

mod common;

use std::path::Path;
use std::process::Command;

fn query(store: &Path, by: &str) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args(["query", "mysql", "--store"])
        .arg(store)
        .args(["--by", by, "--top", "100", "--format", "csv"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn old_files_read_renamed_columns() {
    let pcap = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata/packetbeat/pcaps/mysql_connection.pcap");
    if !pcap.exists() {
        common::live::skip("needs ../shared/testdata");
        return;
    }
    let dir = common::scratch("store_renames", "old_files");
    let old = dir.join("old");
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/main-store"), &old);
    let new = dir.join("new");
    let o = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args(["read", "--quiet", "--seed", "1", "--store"])
        .arg(&new)
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let by_new = query(&old, "command,rows");
    assert!(by_new.starts_with("command,rows,"), "{by_new}");
    // The counts are there (not read as unset): one query returned a row.
    assert!(by_new.lines().any(|l| l.starts_with("query,1,")), "{by_new}");
    assert_eq!(by_new, query(&new, "command,rows"));
    // The old name is an alias of the new one.
    assert_eq!(query(&old, "command,num_rows"), by_new);
    // A filter on it prunes and reads the old files' column too.
    let o = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args(["query", "mysql", "--store"])
        .arg(&old)
        .args(["--where", "rows >= 1", "--by", "command", "--format", "csv"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().nth(1).map(|l| l.split(',').take(2).collect::<Vec<_>>()), Some(vec!["query", "2"]));
}
