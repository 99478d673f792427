//! gRPC made here, checked against what the client saw: a Python grpcio
//! server and client (the .proto below, written for this test) in a network
//! namespace; unary, server-streaming, client-streaming, failing, cancelled
//! and deadline-exceeded calls, made one after the other on one channel
//! (so call k is stream 2k+1); tcpdump captures the loopback, `wirelog read`
//! makes grpc.log and a store, and each call is one record with the status
//! the client got and a latency within the client's measured time.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::live::text;
use common::lo::{have, settle, wait_for, LoNs};

const PROTO: &str = r#"
syntax = "proto3";
package wltest;
message Msg { string text = 1; int32 n = 2; }
service Calls {
  rpc Echo (Msg) returns (Msg);
  rpc Count (Msg) returns (stream Msg);
  rpc Sum (stream Msg) returns (Msg);
  rpc Fail (Msg) returns (Msg);
  rpc Slow (Msg) returns (Msg);
}
"#;

const SERVER: &str = r#"
import time, grpc
from concurrent import futures
import calls_pb2 as pb, calls_pb2_grpc as rpc
class S(rpc.CallsServicer):
    def Echo(self, m, c): return pb.Msg(text=m.text.upper(), n=len(m.text))
    def Count(self, m, c):
        for i in range(m.n): yield pb.Msg(n=i)
    def Sum(self, it, c): return pb.Msg(n=sum(m.n for m in it))
    def Fail(self, m, c): c.abort(next(s for s in grpc.StatusCode if s.value[0] == m.n), m.text)
    def Slow(self, m, c):
        time.sleep(m.n / 1000); return pb.Msg(text="late")
s = grpc.server(futures.ThreadPoolExecutor(4))
rpc.add_CallsServicer_to_server(S(), s)
s.add_insecure_port("127.0.0.1:50051")
s.start(); print("ready", flush=True); s.wait_for_termination()
"#;

/// Prints one line per call: `method<TAB>code<TAB>client µs`.
const CLIENT: &str = r#"
import time, grpc
import calls_pb2 as pb, calls_pb2_grpc as rpc
ch = grpc.insecure_channel("127.0.0.1:50051", options=[("grpc.enable_http_proxy", 0)])
st = rpc.CallsStub(ch)
def call(name, f):
    t = time.perf_counter()
    try:
        r = f(); code = 0
        if hasattr(r, "__iter__") and not isinstance(r, pb.Msg): list(r)
    except grpc.RpcError as e:
        code = e.code().value[0]
    except grpc.FutureCancelledError:
        code = 1
    print(f"{name}\t{code}\t{int((time.perf_counter() - t) * 1e6)}", flush=True)
for k in range(12):
    call("Echo", lambda: st.Echo(pb.Msg(text=f"hello {k}")))
for n in (0, 1, 4):
    call("Count", lambda: st.Count(pb.Msg(n=n)))
call("Sum", lambda: st.Sum(iter([pb.Msg(n=i) for i in range(5)])))
for code, msg in ((5, "no such item"), (3, "bad: 100%"), (13, "internal: ü")):
    call("Fail", lambda: st.Fail(pb.Msg(n=code, text=msg)))
call("Slow", lambda: st.Slow(pb.Msg(n=500), timeout=0.1))
def cancelled():
    f = st.Slow.future(pb.Msg(n=500)); time.sleep(0.1); f.cancel(); return f.result()
call("Slow", cancelled)
call("Echo", lambda: st.Echo(pb.Msg(text="last")))
"#;

#[test]
fn calls_match_what_the_client_saw() {
    let grpc_ok = Command::new("python3").args(["-c", "import grpc, grpc_tools"]).output().is_ok_and(|o| o.status.success());
    if !(grpc_ok && have("tcpdump") && common::live::is_root()) {
        common::live::skip("needs root, tcpdump and Python grpcio + grpcio-tools");
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("grpc-live-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("calls.proto"), PROTO).unwrap();
    std::fs::write(dir.join("server.py"), SERVER).unwrap();
    std::fs::write(dir.join("client.py"), CLIENT).unwrap();
    let gen = Command::new("python3")
        .current_dir(&dir)
        .args(["-m", "grpc_tools.protoc", "-I.", "--python_out=.", "--grpc_python_out=.", "calls.proto"])
        .output()
        .unwrap();
    assert!(gen.status.success(), "protoc: {}", text(&gen));
    let ns = LoNs::new("grpc");
    let pcap = dir.join("grpc.pcap");
    let tcpdump = ns.tcpdump(&pcap, &["tcp", "port", "50051"]);
    let d = dir.to_str().unwrap();
    let log = dir.join("server.log");
    let _server = ns.spawn("grpc server", &["sh", "-c", &format!("cd {d} && exec python3 server.py")], &log);
    wait_for("grpc server", Duration::from_secs(30), || std::fs::read_to_string(&log).unwrap_or_default().contains("ready"));
    let o = ns.cmd(&["sh", "-c", &format!("cd {d} && exec python3 client.py")]).output().unwrap();
    assert!(o.status.success(), "client: {}", text(&o));
    settle(&pcap);
    tcpdump.interrupt();
    let calls: Vec<(String, u32, i64)> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f[0].to_string(), f[1].parse().unwrap(), f[2].parse().unwrap())
        })
        .collect();
    assert_eq!(calls.len(), 22, "{calls:?}");

    let logs = dir.join("logs");
    let store = dir.join("store");
    common::read_pcap(&pcap, &logs, Some(&store), &["--quiet"]);
    let rows = common::read_log(&logs.join("grpc.log"));
    assert_eq!(rows.len(), calls.len(), "{rows:#?}");
    for (k, (method, code, client_us)) in calls.iter().enumerate() {
        let id = (2 * k + 1).to_string();
        let r = rows.iter().find(|r| r["stream_id"] == id).unwrap_or_else(|| panic!("call {k} ({method}): stream {id} missing"));
        assert_eq!((r["service"].as_str(), r["method"].as_str()), ("wltest.Calls", method.as_str()), "call {k}: {r:?}");
        match code {
            // The server's deadline can fire before the client's: its
            // Trailers-Only DEADLINE_EXCEEDED then ends the call on the wire.
            4 if r["end_state"] == "complete" => {
                assert_eq!((r["grpc_status"].as_str(), r["trailers_only"].as_str(), r["status"].as_str()), ("4", "T", "error"), "call {k}: {r:?}");
            }
            // CANCELLED and DEADLINE_EXCEEDED: the client reset the stream,
            // a non-OK call without a grpc-status.
            1 | 4 => {
                assert_eq!((r["end_state"].as_str(), r["h2_error"].as_str(), r["grpc_status"].as_str()), ("reset_by_client", "CANCEL", "-"), "call {k}: {r:?}");
                assert_eq!(r["status"], "error", "call {k}: {r:?}");
                if *code == 4 {
                    // grpc-timeout says what is left of the 100 ms when sent, rounded up
                    // to its unit (gRPC Python sent `101m`).
                    let t: f64 = r["timeout"].parse().unwrap_or_else(|_| panic!("call {k}: {r:?}"));
                    assert!(t > 0.05 && t <= 0.11, "call {k}: {r:?}");
                }
            }
            c => {
                assert_eq!((r["end_state"].as_str(), r["grpc_status"].as_str()), ("complete", c.to_string().as_str()), "call {k}: {r:?}");
                let lat_us = (r["latency"].parse::<f64>().unwrap() * 1e6) as i64;
                assert!(lat_us <= *client_us, "call {k}: latency {lat_us} µs > client's {client_us} µs");
                assert_eq!(r["status"], if *c == 0 { "ok" } else { "error" }, "call {k}: {r:?}");
            }
        }
        let (rq, rs) = (r["request_messages"].as_str(), r["response_messages"].as_str());
        match method.as_str() {
            "Sum" => assert_eq!((rq, r["call_type"].as_str()), ("5", "client_streaming"), "{r:?}"),
            "Count" => assert_eq!(rq, "1", "{r:?}"),
            "Echo" => assert_eq!((rq, rs, r["call_type"].as_str()), ("1", "1", "unary"), "{r:?}"),
            _ => {}
        }
    }
    let counts: Vec<&str> = rows.iter().filter(|r| r["method"] == "Count").map(|r| r["response_messages"].as_str()).collect();
    assert_eq!(counts, ["0", "1", "4"]);
    assert!(rows.iter().any(|r| r["grpc_message"] == "internal: \u{fc}"), "{rows:#?}");
    assert!(rows.iter().any(|r| r["grpc_message"] == "bad: 100%"), "{rows:#?}");

    let csv = common::query_csv(&store, "grpc", &["--by", "service,method", "--sort", "p99_latency"]);
    assert!(csv.lines().any(|l| l.starts_with("wltest.Calls,Echo,13,0,")), "{csv}");
    assert!(csv.lines().any(|l| l.starts_with("wltest.Calls,Fail,3,3,")), "{csv}");
    let conns = common::read_log(&logs.join("conn.log"));
    assert!(conns.iter().any(|c| c["service"] == "grpc"), "{conns:?}");

    // The UI's data: `wirelog serve` on the same store. The map has one
    // grpc edge, client to server, with every call and as errors the calls
    // the client saw fail; the records of kind grpc page through the calls
    // with their service, method and grpc_status.
    let server = common::serve::start(&["serve", "--store", store.to_str().unwrap(), "--listen", "127.0.0.1:0"]);
    let json = |path: &str| -> serde_json::Value {
        let (code, body) = common::serve::get(server.addr, path);
        assert_eq!(code, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
    };
    let map = json("/api/map");
    let edges: Vec<&serde_json::Value> = map["edges"].as_array().unwrap().iter().filter(|e| e["protocol"] == "grpc").collect();
    assert_eq!(edges.len(), 1, "{map}");
    let e = edges[0];
    let not_ok = calls.iter().filter(|c| c.1 != 0).count() as u64;
    assert_eq!(not_ok, 5, "{calls:?}");
    assert_eq!((e["from"].as_str(), e["to"].as_str(), e["source"].as_str()), (Some("127.0.0.1"), Some("127.0.0.1:50051"), Some("grpc")), "{e}");
    assert_eq!((e["count"].as_u64(), e["errors"].as_u64()), (Some(calls.len() as u64), Some(not_ok)), "{e}");
    let mut seen: Vec<(String, String, String)> = Vec::new();
    for offset in (0..calls.len()).step_by(8) {
        let page = json(&format!("/api/records?kind=grpc&limit=8&offset={offset}"));
        let rows = page["rows"].as_array().unwrap();
        assert_eq!(rows.len(), (calls.len() - offset).min(8), "offset {offset}: {page}");
        for r in rows {
            assert_eq!(r["count"], 1, "{r}");
            let st = match &r["grpc_status"] {
                serde_json::Value::Null => "-".to_string(),
                v => v.to_string(),
            };
            seen.push((r["service"].as_str().unwrap().to_string(), r["method"].as_str().unwrap().to_string(), st));
        }
    }
    let mut want: Vec<(String, String, String)> = rows
        .iter()
        .map(|r| (r["service"].clone(), r["method"].clone(), r["grpc_status"].clone()))
        .collect();
    seen.sort();
    want.sort();
    assert_eq!(seen, want);
}
