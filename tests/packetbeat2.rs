//! The Packetbeat scoreboard's second set: Packetbeat's own system tests
//! for MongoDB and Memcached over TCP, text and binary (pcaps, options and asserts from
//! shared/testdata/packetbeat2/manifest.json) run against wirelog by
//! `tests/packetbeat2_scoreboard.py`, which fails when an assert that does
//! not hold has no accepted reason in `tests/packetbeat2_reasons.json`, or
//! a listed reason is stale. Beside it, what wirelog says where Packetbeat
//! asserts its own log lines (the reason 'log lines'): malformed messages
//! counted in the run's summary.
//!
//! `cargo test --release --test packetbeat2 -- --nocapture` prints the board.
//! Skipped (loudly) without python3 unless WIRELOG_REQUIRE_ALL_TESTS=1.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata/packetbeat2")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn packetbeat2_scoreboard() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/packetbeat2_scoreboard.py");
    let have_python = Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success());
    if !have_python {
        common::live::skip("python3 is missing");
        return;
    }
    let out = Command::new("python3").arg(&script).arg(env!("CARGO_BIN_EXE_wirelog")).output().expect("run python3");
    println!("{}", text(&out));
    assert!(out.status.success(), "packetbeat2_scoreboard.py failed ({}); see the output above", out.status);
}

/// Reads `pcap` (under packetbeat2/pcaps) with `args`: the run's stderr and
/// the logs' directory.
fn read(tag: &str, pcap: &str, args: &[&str]) -> (String, PathBuf) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("pb2-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let o = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args(["read", "--no-store", "--logs"])
        .arg(&dir)
        .args(args)
        .arg(data().join("pcaps").join(pcap))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    (String::from_utf8_lossy(&o.stderr).into_owned(), dir)
}

/// Packetbeat logs "Unknown operation code: 2269" once per opcode and drops
/// the stream; wirelog skips each such message by its length and counts it:
/// one per connection here. OP_MSG (2013) is known: none counted, and
/// every request of the capture is a transaction (on port 9991, named).
#[test]
fn mongodb_unknown_opcodes_are_counted_and_op_msg_is_read() {
    let (err, _) = read("2269", "mongodb_invalid_opcode_2269.pcap", &[]);
    assert!(err.contains("wirelog: parsers: 3 malformed messages"), "{err}");
    let (err, dir) = read("opmsg", "mongodb_op_msg_opcode.pcap", &["--ports", "mongodb=9991"]);
    assert!(!err.contains("malformed"), "{err}");
    let rows = common::read_log(&dir.join("mongodb.log"));
    assert_eq!(rows.len(), 101, "{err}");
    assert!(rows.iter().all(|r| r["op"] == "msg" && r["status"] != "no_response" && r["status"] != "no_request"));
    let conns = common::read_log(&dir.join("conn.log"));
    assert!(conns.iter().all(|c| c["service"] == "mongodb"), "{conns:?}");
}
