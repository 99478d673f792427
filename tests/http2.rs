//! HTTP/2 and gRPC end to end: `wirelog read` on the shared h2c and gRPC
//! captures (../shared/testdata/http2, with tshark's per-stream reference),
//! the logs, the store and `wirelog query grpc`; and one capture cut so it
//! starts in the middle of its connection.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const CAPTURES: [&str; 4] = ["h2c_nghttp_files", "h2c_h2load", "h2c_nginx_prior_knowledge", "grpc_unary_stream_errors"];

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata/http2").join(rel)
}

fn expected(name: &str) -> Value {
    let p = data(&format!("expected/{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).unwrap()
}

fn wirelog(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_wirelog")).args(args).output().expect("run wirelog");
    assert!(out.status.success(), "wirelog {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn tmp(tag: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("http2-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// (client port, stream id) of a reference transaction.
fn key(w: &Value) -> (String, String) {
    let port = w["client"].as_str().unwrap().rsplit(':').next().unwrap().to_string();
    (port, w["stream_id"].to_string())
}

/// Every stream of the four captures is one record: HTTP/2 streams in
/// http.log with version 2, gRPC calls in grpc.log, with tshark's method,
/// path, status and grpc-status; conn.log names the service; the store
/// answers `wirelog query grpc --by service,method --sort p99_latency`.
#[test]
fn captures_give_every_stream() {
    let dir = tmp("all");
    let logs = dir.join("logs");
    let store = dir.join("store");
    let mut args = vec!["read", "-C", "--quiet", "--logs", logs.to_str().unwrap(), "--store", store.to_str().unwrap()];
    let pcaps: Vec<String> = CAPTURES.iter().map(|c| data(&format!("pcaps/{c}.pcap")).to_string_lossy().into_owned()).collect();
    args.extend(pcaps.iter().map(String::as_str));
    wirelog(&args);
    let http = common::read_log(&logs.join("http.log"));
    let grpc = common::read_log(&logs.join("grpc.log"));
    let mut http_by: HashMap<(String, String), &HashMap<String, String>> = HashMap::new();
    for r in &http {
        assert_eq!(r["version"], "2");
        assert!(http_by.insert((r["id.orig_p"].clone(), r["stream_id"].clone()), r).is_none(), "{r:?} twice");
    }
    let mut grpc_by: HashMap<(String, String), &HashMap<String, String>> = HashMap::new();
    for r in &grpc {
        assert!(grpc_by.insert((r["id.orig_p"].clone(), r["stream_id"].clone()), r).is_none(), "{r:?} twice");
    }
    let mut streams = 0;
    for c in CAPTURES {
        for w in expected(c)["transactions"].as_array().unwrap() {
            streams += 1;
            let k = key(w);
            if let Some(code) = w["grpc_status"].as_u64() {
                let r = grpc_by.get(&k).unwrap_or_else(|| panic!("{c}: gRPC call {k:?} missing"));
                assert_eq!(format!("/{}/{}", r["service"], r["method"]), w["path"].as_str().unwrap());
                assert_eq!(r["grpc_status"], code.to_string(), "{c} {k:?}");
                assert_eq!(r["grpc_status_name"], w["grpc_status_name"].as_str().unwrap(), "{c} {k:?}");
                assert_eq!(r["http_status"], w["status"].to_string());
                assert_eq!(r["end_state"], "complete");
            } else {
                let r = http_by.get(&k).unwrap_or_else(|| panic!("{c}: stream {k:?} missing"));
                assert_eq!(r["method"], w["method"].as_str().unwrap(), "{c} {k:?}");
                assert_eq!(r["uri"], w["path"].as_str().unwrap(), "{c} {k:?}");
                assert_eq!(r["status_code"], w["status"].to_string(), "{c} {k:?}");
                assert_eq!(r["response_body_len"], w["response_data_bytes"].to_string(), "{c} {k:?}");
                assert_eq!(r["end_state"], "complete");
            }
        }
    }
    assert_eq!(streams, 267);
    assert_eq!(http.len() + grpc.len(), streams);
    // The one gRPC message that was percent-encoded on the wire.
    assert!(grpc.iter().any(|r| r["grpc_message"] == "internal: \u{fc} 100% broken"), "grpc_message decoded");
    let conns = common::read_log(&logs.join("conn.log"));
    let services: Vec<&str> = conns.iter().map(|r| r["service"].as_str()).collect();
    assert_eq!(services.iter().filter(|s| **s == "grpc").count(), 1, "{services:?}");
    assert_eq!(services.iter().filter(|s| **s == "http2").count(), 14, "{services:?}");

    let q = wirelog(&["query", "grpc", "--store", store.to_str().unwrap(), "--by", "service,method", "--sort", "p99_latency", "--format", "csv"]);
    let mut lines = q.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| head.iter().position(|h| *h == n).unwrap_or_else(|| panic!("{n} in {head:?}"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let counts: HashMap<&str, (&str, &str)> = rows.iter().map(|r| (r[col("method")], (r[col("count")], r[col("errors")]))).collect();
    assert_eq!(counts["Echo"], ("30", "0"), "{q}");
    assert_eq!(counts["Count"], ("10", "0"), "{q}");
    assert_eq!(counts["Fail"], ("10", "10"), "{q}");
    let p99: Vec<f64> = rows.iter().map(|r| r[col("latency_p99_s")].parse().unwrap()).collect();
    assert!(p99.windows(2).all(|w| w[0] >= w[1]), "sorted by p99: {q}");
    let h = wirelog(&["query", "http", "--store", store.to_str().unwrap(), "--by", "version,end_state", "--format", "csv"]);
    assert!(h.lines().any(|l| l.starts_with("2,complete,217,")), "{h}");
}

/// The gRPC capture without its first `cut` packets (the handshake, the
/// server's SETTINGS, the client's preface and first HEADERS, the first
/// calls): no call is given another's method or status. Cut before the
/// client's first HEADERS every call comes back whole; cut later, the
/// client's HPACK entries for :path are never seen, so calls come back
/// (known as gRPC from the response's content type) without their method,
/// or, later still, as HTTP/2 streams with what the static table gives.
/// Cuts start at a client packet: a capture whose first packet is the
/// server's makes the tracker take the server for the originator.
#[test]
fn capture_begun_late_misattributes_nothing() {
    let exp = expected("grpc_unary_stream_errors");
    let want: HashMap<String, &Value> = exp["transactions"].as_array().unwrap().iter().map(|w| (w["stream_id"].to_string(), w)).collect();
    let pcap = std::fs::read(data("pcaps/grpc_unary_stream_errors.pcap")).unwrap();
    for cut in [4, 5, 8, 10, 13, 23] {
        let dir = tmp(&format!("late{cut}"));
        let cut_pcap = dir.join("late.pcap");
        std::fs::write(&cut_pcap, drop_packets(&pcap, cut)).unwrap();
        let logs = dir.join("logs");
        wirelog(&["read", "-C", "--quiet", "--no-store", "--logs", logs.to_str().unwrap(), cut_pcap.to_str().unwrap()]);
        let read = |f: &str| if logs.join(f).exists() { common::read_log(&logs.join(f)) } else { Vec::new() };
        let grpc = read("grpc.log");
        // Joined after both sides' entries for the content type went by,
        // a call is an HTTP/2 stream with what its literals and the
        // static table give.
        let http = read("http.log");
        assert!(grpc.len() + http.len() >= 40, "cut {cut}: {} calls, {} streams", grpc.len(), http.len());
        for r in &http {
            let w = want.get(&r["stream_id"]).unwrap_or_else(|| panic!("cut {cut}: stream {} does not exist", r["stream_id"]));
            if r["uri"] != "-" {
                assert_eq!(r["uri"], w["path"].as_str().unwrap(), "cut {cut}");
            }
            if r["status_code"] != "-" {
                assert_eq!(r["status_code"], w["status"].to_string(), "cut {cut}");
            }
        }
        let mut whole = 0;
        for r in &grpc {
            let w = want.get(&r["stream_id"]).unwrap_or_else(|| panic!("cut {cut}: stream {} does not exist", r["stream_id"]));
            if r["method"] != "-" {
                assert_eq!(format!("/{}/{}", r["service"], r["method"]), w["path"].as_str().unwrap(), "cut {cut}");
                whole += 1;
            }
            if r["grpc_status"] != "-" {
                assert_eq!(r["grpc_status"], w["grpc_status"].to_string(), "cut {cut} stream {}", r["stream_id"]);
            }
        }
        if cut <= 8 {
            assert_eq!((grpc.len(), whole), (50, 50), "cut {cut}");
        }
    }
}

/// A classic pcap without its first `n` packets.
fn drop_packets(pcap: &[u8], n: usize) -> Vec<u8> {
    assert_eq!(&pcap[..4], &[0xd4, 0xc3, 0xb2, 0xa1], "little-endian microsecond pcap");
    let mut out = pcap[..24].to_vec();
    let mut pos = 24;
    let mut i = 0;
    while pos + 16 <= pcap.len() {
        let caplen = u32::from_le_bytes(pcap[pos + 8..pos + 12].try_into().unwrap()) as usize;
        let end = pos + 16 + caplen;
        if i >= n {
            out.extend_from_slice(&pcap[pos..end]);
        }
        pos = end;
        i += 1;
    }
    out
}
