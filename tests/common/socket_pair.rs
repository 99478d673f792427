//! `capture --socket-data` beside the packet path on one workload: two
//! captures of the same namespace's `lo` at once, one of the packets alone
//! and one with `--socket-data`, whose records are compared field by field
//! (times, uids, latencies and the columns only the second writes aside).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::live::LiveCapture;
use super::lo::LoNs;

pub type Row = HashMap<String, String>;

pub struct Pair {
    packets: LiveCapture,
    socket: LiveCapture,
    pub packet_logs: PathBuf,
    pub socket_logs: PathBuf,
}

impl Pair {
    /// Both captures running (logs under `dir/packets` and `dir/socket`).
    pub fn start(ns: &LoNs, dir: &Path) -> Pair {
        let (packet_logs, socket_logs) = (dir.join("packets"), dir.join("socket"));
        let packets = LiveCapture::lo_logs(&ns.name, &packet_logs, &[]);
        let socket = LiveCapture::lo_logs(&ns.name, &socket_logs, &["--socket-data"]);
        Pair { packets, socket, packet_logs, socket_logs }
    }

    /// Both stopped; the socket capture's stderr.
    pub fn stop(self) -> String {
        self.packets.stop();
        self.socket.stop()
    }
}

/// Fields that differ between the two captures of one connection by nature.
fn varies(field: &str) -> bool {
    matches!(field, "ts" | "uid" | "latency" | "first_byte_latency")
}

/// The rows of `log` on connections to `port`, by client port, each in
/// time order.
fn by_client_port(logs: &Path, log: &str, port: u16) -> HashMap<String, Vec<Row>> {
    let mut out: HashMap<String, Vec<Row>> = HashMap::new();
    for r in super::read_log(&logs.join(log)) {
        if r["id.resp_p"] == port.to_string() {
            out.entry(r["id.orig_p"].clone()).or_default().push(r);
        }
    }
    for v in out.values_mut() {
        v.sort_by(|a, b| a["ts"].parse::<f64>().unwrap().total_cmp(&b["ts"].parse::<f64>().unwrap()));
    }
    out
}

/// The packet capture's rows of `log` to `port` and the socket capture's
/// are the same records, field by field; the socket capture's come from
/// the socket (no packet-path duplicate) with the client's and server's
/// processes, on connections of its conn.log. Returns the socket rows.
pub fn assert_same(pair_logs: (&Path, &Path), log: &str, port: u16, client: &[&str], server: &str, err: &str) -> Vec<Row> {
    let (packets, socket) = (by_client_port(pair_logs.0, log, port), by_client_port(pair_logs.1, log, port));
    let mut keys: Vec<&String> = packets.keys().collect();
    keys.sort();
    let mut skeys: Vec<&String> = socket.keys().collect();
    skeys.sort();
    assert_eq!(keys, skeys, "the same connections in both {log}s\npackets: {packets:#?}\nsocket: {socket:#?}\n{err}");
    assert!(!keys.is_empty(), "no {log} rows to port {port}\n{err}");
    let conns = super::read_log(&pair_logs.1.join("conn.log"));
    let mut all = Vec::new();
    for k in keys {
        let (a, b) = (&packets[k], &socket[k]);
        assert_eq!(a.len(), b.len(), "client port {k}: packets {a:#?}\nsocket {b:#?}\n{err}");
        for (a, b) in a.iter().zip(b) {
            for (f, v) in a {
                if !varies(f) {
                    assert_eq!(Some(v), b.get(f), "{log} field {f}: packets {a:?}\nsocket {b:?}");
                }
            }
            assert_eq!(b["source"], "socket", "{b:?}");
            assert!(client.contains(&b["orig_proc"].as_str()), "{b:?}");
            assert_eq!(b["resp_proc"], server, "{b:?}");
            assert!(conns.iter().any(|c| c["uid"] == b["uid"]), "{b:?} is on no connection of conn.log");
            all.push(b.clone());
        }
    }
    all
}

/// The socket-data summary line of a capture's stderr.
pub fn stats(err: &str) -> &str {
    err.lines().find(|l| l.starts_with("wirelog: socket-data: ") && l.contains(" events (")).unwrap_or_else(|| panic!("no socket-data line: {err}"))
}

