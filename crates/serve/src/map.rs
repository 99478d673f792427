//! The service map: nodes are client hosts and `host:port` services, edges
//! the calls between them per protocol, from the transactions (count,
//! errors, bytes, latency percentiles) and, where no transaction was parsed,
//! from the connections (count and bytes, protocol = Zeek's service).
//! With owners in the records (`capture --processes`), each node also lists
//! the processes (and containers) behind it, busiest first, so the map
//! names programs, not only addresses.

use std::collections::{BTreeMap, HashSet};

use serde_json::{json, Value};
use wirelog_query::render::json_row;
use wirelog_query::ResultTable;

/// `host:port`, IPv6 in brackets.
fn service(host: &str, port: &Value) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// `tables`: the edges' groups (connections, then each transaction kind);
/// `owners`: connections grouped by (orig_h, orig_proc, orig_container) and
/// by (resp_h, resp_p, resp_proc, resp_container).
pub(crate) fn build(tables: &[ResultTable], owners: &[ResultTable]) -> Value {
    let mut edges: Vec<Value> = Vec::new();
    let mut seen: HashSet<(String, String)> = HashSet::new();
    let mut conn_edges = Vec::new();
    for t in tables {
        let conns = t.kind == wirelog_store::Kind::Conns;
        for r in &t.rows {
            let v: Value = serde_json::from_str(&json_row(t, r)).unwrap_or(Value::Null);
            let s = |k: &str| v[k].as_str().unwrap_or("").to_string();
            if conns {
                let to = service(&s("resp_h"), &v["resp_p"]);
                let proto = match s("service") {
                    x if x.is_empty() => "other".to_string(),
                    x => x,
                };
                conn_edges.push(json!({
                    "from": s("orig_h"), "to": to, "protocol": proto,
                    "count": v["conns"], "errors": null, "bytes": v["bytes"],
                    "p50_s": null, "p95_s": null, "p99_s": null, "source": "conns",
                }));
            } else {
                let to = service(&s("server"), &v["server_port"]);
                seen.insert((s("client"), to.clone()));
                edges.push(json!({
                    "from": s("client"), "to": to, "protocol": t.kind.as_str(),
                    "count": v["count"], "errors": v["errors"], "bytes": v["bytes"],
                    "p50_s": v["latency_p50_s"], "p95_s": v["latency_p95_s"], "p99_s": v["latency_p99_s"],
                    "source": t.kind.as_str(),
                }));
            }
        }
    }
    for e in conn_edges {
        let key = (
            e["from"].as_str().unwrap_or("").to_string(),
            e["to"].as_str().unwrap_or("").to_string(),
        );
        if !seen.contains(&key) {
            edges.push(e);
        }
    }
    #[derive(Default)]
    struct Node {
        service: bool,
        calls_in: u64,
        calls_out: u64,
        bytes: u64,
        procs: Vec<Value>,
    }
    let mut nodes: BTreeMap<String, Node> = BTreeMap::new();
    for e in &edges {
        let n = e["count"].as_u64().unwrap_or(0);
        let b = e["bytes"].as_u64().unwrap_or(0);
        let from = nodes
            .entry(e["from"].as_str().unwrap_or("").to_string())
            .or_default();
        from.calls_out += n;
        from.bytes += b;
        let to = nodes
            .entry(e["to"].as_str().unwrap_or("").to_string())
            .or_default();
        to.service = true;
        to.calls_in += n;
        to.bytes += b;
    }
    for t in owners {
        for r in &t.rows {
            let v: Value = serde_json::from_str(&json_row(t, r)).unwrap_or(Value::Null);
            let known = |k: &str| v[k].as_str().filter(|x| !x.is_empty() && *x != "-").map(str::to_string);
            let (id, side) = match v.get("resp_p") {
                Some(port) => (service(&known("resp_h").unwrap_or_default(), port), "resp"),
                None => (known("orig_h").unwrap_or_default(), "orig"),
            };
            let Some(proc) = known(&format!("{side}_proc")) else { continue };
            // Only nodes of the map's edges are named.
            if let Some(n) = nodes.get_mut(&id) {
                n.procs.push(json!({
                    "proc": proc,
                    "container": known(&format!("{side}_container")),
                    "conns": v["conns"],
                }));
            }
        }
    }
    let nodes: Vec<Value> = nodes
        .into_iter()
        .map(|(id, mut n)| {
            n.procs.sort_by_key(|p| std::cmp::Reverse(p["conns"].as_u64().unwrap_or(0)));
            json!({"id": id, "kind": if n.service { "service" } else { "host" },
                   "calls_in": n.calls_in, "calls_out": n.calls_out, "bytes": n.bytes,
                   "procs": n.procs})
        })
        .collect();
    json!({"nodes": nodes, "edges": edges})
}
