//! The Packetbeat scoreboard: Packetbeat's own system tests (pcaps, options
//! and asserts from shared/testdata/packetbeat/manifest.json) run against
//! wirelog by `tests/packetbeat_scoreboard.py`. Fails when an assert that
//! does not hold has no accepted reason in `tests/packetbeat_reasons.json`,
//! or when a listed reason is stale.
//!
//! `cargo test --release --test packetbeat -- --nocapture` prints the board.
//! Skipped (loudly) without python3 unless WIRELOG_REQUIRE_ALL_TESTS=1.

use std::path::Path;
use std::process::Command;

#[test]
fn packetbeat_scoreboard() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/packetbeat_scoreboard.py");
    let have_python = Command::new("python3")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !have_python {
        if std::env::var("WIRELOG_REQUIRE_ALL_TESTS").as_deref() == Ok("1") {
            panic!("python3 is missing and WIRELOG_REQUIRE_ALL_TESTS=1");
        }
        println!("SKIPPED packetbeat_scoreboard: python3 not found");
        return;
    }
    let out = Command::new("python3")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_wirelog"))
        .output()
        .expect("run python3");
    println!("{}", String::from_utf8_lossy(&out.stdout));
    let err = String::from_utf8_lossy(&out.stderr);
    if !err.is_empty() {
        println!("stderr:\n{err}");
    }
    assert!(
        out.status.success(),
        "packetbeat_scoreboard.py failed ({}); see the output above",
        out.status
    );
}
