//! Packetbeat's AMQP system tests (pcaps, options and asserts from
//! shared/testdata/packetbeat2/manifest.json) run against wirelog by
//! `tests/packetbeat2_amqp.py`. Fails when an assert does not hold, when a
//! field it names has no accepted reason in
//! `tests/packetbeat2_amqp_reasons.json`, or when a listed reason is stale.
//!
//! `cargo test --release --test packetbeat2_amqp -- --nocapture` prints the facts.

use std::path::Path;
use std::process::Command;

#[test]
fn packetbeat_amqp_facts() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/packetbeat2_amqp.py");
    let have_python = Command::new("python3").arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    if !have_python {
        if std::env::var("WIRELOG_REQUIRE_ALL_TESTS").as_deref() == Ok("1") {
            panic!("python3 is missing and WIRELOG_REQUIRE_ALL_TESTS=1");
        }
        println!("SKIPPED packetbeat_amqp_facts: python3 not found");
        return;
    }
    let out = Command::new("python3").arg(&script).arg(env!("CARGO_BIN_EXE_wirelog")).output().expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    let err = String::from_utf8_lossy(&out.stderr);
    if !err.is_empty() {
        println!("stderr:\n{err}");
    }
    assert!(out.status.success(), "packetbeat2_amqp.py failed ({}); see the output above", out.status);
    assert!(stdout.contains(" agree, 0 disagree"), "{stdout}");
}
