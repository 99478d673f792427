//! The service map: nodes are client hosts and `host:port` services, edges
//! the calls between them per protocol, from the transactions (count,
//! errors, bytes, latency percentiles) and, where no transaction was parsed,
//! from the connections (count and bytes, protocol = Zeek's service).
//!
//! At scale (hundreds of services, thousands of clients) the map is summed
//! here, over every pair of the range, not in the browser over a top-N:
//! nodes are grouped (by host, service port, process, container, or /24 and
//! /64 subnet), the grouped edges ranked (by calls, bytes, errors or
//! latency), the first `top` kept and the rest summed into one "other" edge
//! between two "other" nodes that say how many edges and nodes they hold.
//! So the edges shown, the other edge included, always add up to every call
//! of the range.
//!
//! With owners in the records (`capture --processes`), each node also lists
//! the processes (and containers) behind it, busiest first, so the map
//! names programs, not only addresses.

use std::collections::{BTreeMap, HashMap, HashSet};

/// The tables below hash ends and pairs by the hundred thousand: foldhash
/// (the store's dictionary hash), not SipHash. No table's order reaches the
/// answer (what is shown is sorted, the rest summed).
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
type FastSet<K> = HashSet<K, foldhash::fast::RandomState>;
use std::net::Ipv6Addr;

use serde_json::{json, Value};
use wirelog_query::value::format_ip;
use wirelog_query::{KeyValue, ResultTable};

/// How nodes are grouped (`/api/map?group=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Group {
    /// Each client address, each `address:port` service.
    Host,
    /// Services by port (`*:3306`); clients by address.
    Service,
    /// Each end by its busiest process (services keep their port:
    /// `mysqld:3306`); an end without a known process by its address.
    Process,
    /// Each end by its container (else its process, else its address).
    Container,
    /// Addresses by /24 (IPv4) or /64 (IPv6); services keep their port.
    Subnet,
}

impl Group {
    pub(crate) const NAMES: &'static [&'static str] = &["host", "service", "process", "container", "subnet"];

    pub(crate) fn from_name(s: &str) -> Option<Group> {
        Some(match s {
            "host" => Group::Host,
            "service" => Group::Service,
            "process" => Group::Process,
            "container" => Group::Container,
            "subnet" => Group::Subnet,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        Group::NAMES[self as usize]
    }
}

/// What ranks the edges (`/api/map?rank=`), largest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rank {
    Calls,
    Bytes,
    Errors,
    /// The edge's p95 latency (a grouped edge: see [`percentiles`]).
    Latency,
}

impl Rank {
    pub(crate) const NAMES: &'static [&'static str] = &["calls", "bytes", "errors", "latency"];

    pub(crate) fn from_name(s: &str) -> Option<Rank> {
        Some(match s {
            "calls" => Rank::Calls,
            "bytes" => Rank::Bytes,
            "errors" => Rank::Errors,
            "latency" => Rank::Latency,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        Rank::NAMES[self as usize]
    }
}

/// What the map is asked for.
#[derive(Debug, Clone)]
pub(crate) struct Ask {
    pub group: Group,
    pub rank: Rank,
    /// Edges shown (the rest summed into one).
    pub top: usize,
    /// Only edges with an end whose id or process contains this (lower case).
    pub find: Option<String>,
}

/// One end as the query gave it: an address (the store), or text (a
/// backend that gives addresses as strings).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum End {
    Ip([u8; 16]),
    Text(String),
}

fn end(k: &KeyValue) -> End {
    match k {
        KeyValue::Ip(a) => End::Ip(*a),
        KeyValue::Str(s) => End::Text(s.clone()),
        _ => End::Text("-".into()),
    }
}

/// An end's text and its /24 or /64.
fn addr(e: &End) -> (String, String) {
    match e {
        End::Ip(a) => {
            let v6 = Ipv6Addr::from(*a);
            let subnet = match v6.to_ipv4_mapped() {
                Some(v4) => {
                    let o = v4.octets();
                    format!("{}.{}.{}.0/24", o[0], o[1], o[2])
                }
                None => {
                    let mut b = *a;
                    b[8..].fill(0);
                    format!("{}/64", format_ip(&b))
                }
            };
            (format_ip(a), subnet)
        }
        End::Text(s) => (s.clone(), s.clone()),
    }
}

/// `host:port`, IPv6 in brackets.
fn service(host: &str, port: u64) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn uint(k: &KeyValue) -> u64 {
    match k {
        KeyValue::UInt(n) => *n,
        KeyValue::Int(n) => *n as u64,
        _ => 0,
    }
}

fn text(k: &KeyValue) -> Option<&str> {
    match k {
        KeyValue::Str(s) if !s.is_empty() && s != "-" => Some(s),
        _ => None,
    }
}

/// One pair's calls of one protocol, before grouping.
struct Pair {
    client: End,
    server: End,
    port: u64,
    protocol: u32,
    count: u64,
    errors: Option<u64>,
    bytes: u64,
    /// p50, p95, p99 latency, ns (transactions only).
    latency: Option<[i64; 3]>,
}

/// A process (and container) behind an end, with the connections it had.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Owner {
    proc: String,
    container: Option<String>,
}

/// A grouped edge's p50, p95 and p99 from its pairs' own: percentiles do
/// not add, so each pair stands as points at its p50 (half its calls), p95
/// (45 %) and p99 (5 %), and the group's percentiles are those of the
/// points. Exact when each pair holds one call or the pairs agree; an
/// estimate otherwise (the engine's histograms are per pair).
fn percentiles(points: &mut [(i64, f64)]) -> Option<[i64; 3]> {
    let all: f64 = points.iter().map(|p| p.1).sum();
    if points.is_empty() || all <= 0.0 {
        return None;
    }
    points.sort_unstable_by_key(|p| p.0);
    let at = |q: f64| {
        let mut seen = 0.0;
        for p in points.iter() {
            seen += p.1;
            if seen >= q * all - 1e-9 {
                return p.0;
            }
        }
        points[points.len() - 1].0
    };
    Some([at(0.5), at(0.95), at(0.99)])
}

#[derive(Default)]
struct Node {
    id: String,
    service: bool,
    calls_in: u64,
    calls_out: u64,
    bytes: u64,
    members: u64,
    procs: BTreeMap<Owner, u64>,
}

#[derive(Default)]
struct Edge {
    count: u64,
    errors: Option<u64>,
    bytes: u64,
    latency: Option<[i64; 3]>,
    pairs: u64,
}

impl Edge {
    fn add(&mut self, count: u64, errors: Option<u64>, bytes: u64, pairs: u64) {
        self.count += count;
        self.bytes += bytes;
        if let Some(x) = errors {
            self.errors = Some(self.errors.unwrap_or(0) + x);
        }
        self.pairs += pairs;
    }
}

/// Ends to their groups: each end (address, or address and port) is named
/// and grouped once, however many pairs it is in; groups are numbered.
struct Groups<'a> {
    ask: &'a Ask,
    owners: &'a FastMap<String, BTreeMap<Owner, u64>>,
    of_end: FastMap<(End, Option<u64>), u32>,
    by_id: FastMap<String, u32>,
    nodes: Vec<Node>,
}

impl Groups<'_> {
    fn busiest(&self, id: &str) -> Option<&Owner> {
        self.owners
            .get(id)
            .and_then(|m| m.iter().max_by_key(|(o, n)| (**n, std::cmp::Reverse(*o))).map(|(o, _)| o))
    }

    /// The group of an end: a client (`port` None) or a service.
    fn of(&mut self, e: &End, port: Option<u64>) -> u32 {
        if let Some(&g) = self.of_end.get(&(e.clone(), port)) {
            return g;
        }
        let (text, subnet) = addr(e);
        let id = match port {
            Some(p) => service(&text, p),
            None => text,
        };
        let with_port = |s: &str| match port {
            Some(p) => format!("{s}:{p}"),
            None => s.to_string(),
        };
        let group = match self.ask.group {
            Group::Host => id.clone(),
            Group::Service => match port {
                Some(p) => format!("*:{p}"),
                None => id.clone(),
            },
            Group::Subnet => with_port(&subnet),
            Group::Process => match self.busiest(&id) {
                Some(o) => with_port(&o.proc),
                None => id.clone(),
            },
            Group::Container => match self.busiest(&id) {
                Some(Owner { container: Some(c), .. }) => with_port(c),
                Some(o) => with_port(&o.proc),
                None => id.clone(),
            },
        };
        let g = match self.by_id.get(&group) {
            Some(&g) => g,
            None => {
                let g = self.nodes.len() as u32;
                self.nodes.push(Node { id: group.clone(), ..Node::default() });
                self.by_id.insert(group, g);
                g
            }
        };
        let n = &mut self.nodes[g as usize];
        n.members += 1;
        for (o, c) in self.owners.get(&id).into_iter().flatten() {
            *n.procs.entry(o.clone()).or_default() += c;
        }
        self.of_end.insert((e.clone(), port), g);
        g
    }
}

/// The connection questions of the map: the pairs (`orig_h, resp_h,
/// resp_p, service`), and the owners of each end, only over the
/// connections that have one (`orig_h, orig_proc, orig_container` and
/// `resp_h, resp_p, resp_proc, resp_container`). One question grouped by
/// all eight fields gave the same sums, with a key of eight words and five
/// strings built for every connection of the range although most ends
/// have no known owner.
pub(crate) const CONN_PAIRS: &str = "orig_h,resp_h,resp_p,service";
pub(crate) const ORIG_OWNERS: (&str, &str) = ("orig_h,orig_proc,orig_container", "orig_proc != \"\"");
pub(crate) const RESP_OWNERS: (&str, &str) = ("resp_h,resp_p,resp_proc,resp_container", "resp_proc != \"\"");

/// `conns`: connections grouped by [`CONN_PAIRS`], every group of the
/// range; `owners`: the connections grouped by [`ORIG_OWNERS`] and by
/// [`RESP_OWNERS`]; `txs`: each transaction kind grouped by `client,
/// server, server_port`.
pub(crate) fn build(conns: &ResultTable, owners: [&ResultTable; 2], txs: &[ResultTable], ask: &Ask) -> Value {
    // Protocols by name and source: a connection's service (`http` from
    // Zeek's detection) is never summed with the transactions of that name.
    let mut protocols: Vec<(String, &'static str)> = Vec::new();
    let mut proto = |name: &str, source: &'static str| -> u32 {
        match protocols.iter().position(|p| p.0 == name && p.1 == source) {
            Some(i) => i as u32,
            None => {
                protocols.push((name.to_string(), source));
                (protocols.len() - 1) as u32
            }
        }
    };
    // Sized once: the range's pairs number in the hundred thousands, and
    // growing these tables cost a tenth of the map's time.
    let tx_rows: usize = txs.iter().map(|t| t.rows.len()).sum();
    let mut pairs: Vec<Pair> = Vec::with_capacity(tx_rows + conns.rows.len());
    let mut parsed: FastSet<(End, End, u64)> = FastSet::with_capacity_and_hasher(tx_rows, Default::default());
    for t in txs {
        let protocol = proto(t.kind.as_str(), t.kind.as_str());
        for r in &t.rows {
            let (client, server, port) = (end(&r.key[0]), end(&r.key[1]), uint(&r.key[2]));
            parsed.insert((client.clone(), server.clone(), port));
            pairs.push(Pair {
                client,
                server,
                port,
                protocol,
                count: r.acc.conns,
                errors: Some(r.acc.errors()),
                bytes: r.acc.bytes(),
                latency: r.duration,
            });
        }
    }
    // Owners per node id (a client's address, a service's address:port),
    // with their connections.
    let mut by_id: FastMap<String, BTreeMap<Owner, u64>> = FastMap::default();
    for r in &owners[0].rows {
        if let Some(proc) = text(&r.key[1]) {
            let o = Owner { proc: proc.to_string(), container: text(&r.key[2]).map(str::to_string) };
            *by_id.entry(addr(&end(&r.key[0])).0).or_default().entry(o).or_default() += r.acc.conns;
        }
    }
    for r in &owners[1].rows {
        if let Some(proc) = text(&r.key[2]) {
            let o = Owner { proc: proc.to_string(), container: text(&r.key[3]).map(str::to_string) };
            let id = service(&addr(&end(&r.key[0])).0, uint(&r.key[1]));
            *by_id.entry(id).or_default().entry(o).or_default() += r.acc.conns;
        }
    }
    let owners = by_id;
    // The pairs of the connections where no transaction was parsed: each
    // pair and named service is one row of `conns`; the services without a
    // name ("" and "-") are one pair of protocol "other".
    let mut unnamed: FastMap<(End, End, u64), usize> = FastMap::default();
    for r in &conns.rows {
        let (client, server, port) = (end(&r.key[0]), end(&r.key[1]), uint(&r.key[2]));
        if parsed.contains(&(client.clone(), server.clone(), port)) {
            continue;
        }
        let name = text(&r.key[3]);
        let protocol = proto(name.unwrap_or("other"), "conns");
        if name.is_none() {
            if let Some(&i) = unnamed.get(&(client.clone(), server.clone(), port)) {
                pairs[i].count += r.acc.conns;
                pairs[i].bytes += r.acc.bytes();
                continue;
            }
            unnamed.insert((client.clone(), server.clone(), port), pairs.len());
        }
        pairs.push(Pair { client, server, port, protocol, count: r.acc.conns, errors: None, bytes: r.acc.bytes(), latency: None });
    }
    drop(unnamed);
    let mut groups = Groups { ask, owners: &owners, of_end: FastMap::default(), by_id: FastMap::default(), nodes: Vec::new() };
    let mut edges: FastMap<(u32, u32, u32), Edge> = FastMap::with_capacity_and_hasher(pairs.len(), Default::default());
    // Each pair's edge, so that the latency points of an edge are gathered
    // only for the edges that need them (shown, or all when ranked by latency).
    let mut pair_edge: Vec<(u32, u32, u32)> = Vec::with_capacity(pairs.len());
    let mut total = Edge::default();
    for p in &pairs {
        let from = groups.of(&p.client, None);
        let to = groups.of(&p.server, Some(p.port));
        let n = &mut groups.nodes[from as usize];
        n.calls_out += p.count;
        n.bytes += p.bytes;
        let n = &mut groups.nodes[to as usize];
        n.service = true;
        n.calls_in += p.count;
        n.bytes += p.bytes;
        let e = edges.entry((from, to, p.protocol)).or_default();
        e.add(p.count, p.errors, p.bytes, 1);
        pair_edge.push((from, to, p.protocol));
        total.add(p.count, p.errors, p.bytes, 1);
    }
    // The pairs' percentiles as weighted points (see [`percentiles`]), per
    // edge, for the edges `want` keeps, in the pairs' order.
    let points = |want: &dyn Fn(&(u32, u32, u32)) -> bool| {
        let mut m: FastMap<(u32, u32, u32), Vec<(i64, f64)>> = FastMap::default();
        for (p, k) in pairs.iter().zip(&pair_edge) {
            if let Some(l) = p.latency.filter(|_| want(k)) {
                let w = p.count.max(1) as f64;
                m.entry(*k).or_default().extend([(l[0], 0.5 * w), (l[1], 0.45 * w), (l[2], 0.05 * w)]);
            }
        }
        m
    };
    let nodes = groups.nodes;
    let id = |g: u32| nodes[g as usize].id.as_str();
    let matches = |g: u32| -> bool {
        let Some(f) = &ask.find else { return true };
        let n = &nodes[g as usize];
        n.id.to_lowercase().contains(f)
            || n.procs.keys().any(|o| {
                o.proc.to_lowercase().contains(f)
                    || o.container.as_deref().is_some_and(|c| c.to_lowercase().contains(f))
            })
    };
    let mut ranked: Vec<((u32, u32, u32), Edge)> = edges
        .into_iter()
        .filter(|((from, to, _), _)| matches(*from) || matches(*to))
        .collect();
    let edges_found = ranked.len();
    // The p95 ranks by latency: the percentiles of the edges that may be shown first.
    if ask.rank == Rank::Latency {
        let mut pts = points(&|_| true);
        for (k, e) in ranked.iter_mut() {
            e.latency = pts.get_mut(k).and_then(|p| percentiles(p));
        }
    }
    let score = |e: &Edge| -> u64 {
        match ask.rank {
            Rank::Calls => e.count,
            Rank::Bytes => e.bytes,
            Rank::Errors => e.errors.unwrap_or(0),
            Rank::Latency => e.latency.map_or(0, |l| l[1].max(0) as u64),
        }
    };
    // Ties by calls, then by name: the same answer every time. Node ids
    // are unique, and so are protocols by (name, source): their places in
    // name order compare as the names do, without comparing strings
    // (counts tie often: pairs of one connection).
    let name = |k: &(u32, u32, u32)| (id(k.0), id(k.1), protocols[k.2 as usize].0.as_str(), protocols[k.2 as usize].1);
    let order_of = |n: usize, key: &dyn Fn(usize, usize) -> std::cmp::Ordering| {
        let mut idx: Vec<u32> = (0..n as u32).collect();
        idx.sort_unstable_by(|&a, &b| key(a as usize, b as usize));
        let mut place = vec![0u32; n];
        for (i, &x) in idx.iter().enumerate() {
            place[x as usize] = i as u32;
        }
        place
    };
    let node_place = order_of(nodes.len(), &|a, b| nodes[a].id.cmp(&nodes[b].id));
    let proto_place = order_of(protocols.len(), &|a, b| {
        (protocols[a].0.as_str(), protocols[a].1).cmp(&(protocols[b].0.as_str(), protocols[b].1))
    });
    let place = |k: &(u32, u32, u32)| (node_place[k.0 as usize], node_place[k.1 as usize], proto_place[k.2 as usize]);
    let top = ask.top.min(ranked.len());
    let cmp = |a: &((u32, u32, u32), Edge), b: &((u32, u32, u32), Edge)| {
        score(&b.1)
            .cmp(&score(&a.1))
            .then(b.1.count.cmp(&a.1.count))
            .then_with(|| place(&a.0).cmp(&place(&b.0)))
    };
    if top < ranked.len() && top > 0 {
        ranked.select_nth_unstable_by(top - 1, cmp);
    }
    let rest: Vec<_> = ranked.split_off(top);
    ranked.sort_by(cmp);
    let secs = |ns: Option<i64>| ns.map(|n| n as f64 / 1e9);
    let edge_json = |(from, to, protocol, source): (&str, &str, &str, &str), e: &Edge, other: bool| {
        let l = e.latency;
        json!({
            "from": from, "to": to, "protocol": protocol, "source": source,
            "count": e.count, "errors": e.errors, "bytes": e.bytes,
            "p50_s": secs(l.map(|l| l[0])), "p95_s": secs(l.map(|l| l[1])), "p99_s": secs(l.map(|l| l[2])),
            "pairs": e.pairs, "other": other,
        })
    };
    let mut shown: HashSet<u32> = HashSet::new();
    let mut out_edges: Vec<Value> = Vec::new();
    let mut pts = match ask.rank {
        Rank::Latency => FastMap::default(),
        _ => {
            let keys: FastSet<(u32, u32, u32)> = ranked.iter().map(|(k, _)| *k).collect();
            points(&|k| keys.contains(k))
        }
    };
    for (k, e) in ranked.iter_mut() {
        shown.insert(k.0);
        shown.insert(k.1);
        if e.latency.is_none() {
            e.latency = pts.get_mut(k).and_then(|p| percentiles(p));
        }
        out_edges.push(edge_json(name(k), e, false));
    }
    // The rest, summed: one edge between two "other" nodes.
    const OTHER_CLIENTS: &str = "other clients";
    const OTHER_SERVICES: &str = "other services";
    let mut other = Edge::default();
    let (mut other_from, mut other_to): (HashSet<u32>, HashSet<u32>) = (HashSet::new(), HashSet::new());
    for ((from, to, _), e) in &rest {
        other.add(e.count, e.errors, e.bytes, e.pairs);
        if !shown.contains(from) {
            other_from.insert(*from);
        }
        if !shown.contains(to) {
            other_to.insert(*to);
        }
    }
    let node_json = |id: &str, n: &Node| {
        let mut procs: Vec<(&Owner, &u64)> = n.procs.iter().collect();
        procs.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let named = procs.first().map(|(o, _)| match &o.container {
            Some(c) => format!("{} ({c})", o.proc),
            None => o.proc.clone(),
        });
        json!({"id": id, "kind": if n.service { "service" } else { "host" },
               "calls_in": n.calls_in, "calls_out": n.calls_out, "bytes": n.bytes,
               "members": n.members, "name": named,
               "procs": procs.iter().take(8).map(|(o, c)| json!({"proc": o.proc, "container": o.container, "conns": c})).collect::<Vec<_>>()})
    };
    let mut shown: Vec<u32> = shown.into_iter().collect();
    shown.sort_by(|a, b| id(*a).cmp(id(*b)));
    let mut out_nodes: Vec<Value> = shown.iter().map(|&g| node_json(id(g), &nodes[g as usize])).collect();
    if !rest.is_empty() {
        let sum = |ids: &HashSet<u32>, out: bool| {
            let mut s = Node { service: !out, ..Node::default() };
            for &g in ids {
                let n = &nodes[g as usize];
                s.calls_in += n.calls_in;
                s.calls_out += n.calls_out;
                s.bytes += n.bytes;
            }
            let mut v = node_json(if out { OTHER_CLIENTS } else { OTHER_SERVICES }, &s);
            v["members"] = json!(ids.len());
            v["other"] = json!(true);
            v
        };
        out_nodes.push(sum(&other_from, true));
        out_nodes.push(sum(&other_to, false));
        let mut e = edge_json((OTHER_CLIENTS, OTHER_SERVICES, "other", "other"), &other, true);
        e["edges"] = json!(rest.len());
        out_edges.push(e);
    }
    json!({
        "group": ask.group.name(),
        "rank": ask.rank.name(),
        "top": ask.top,
        "edges_found": edges_found,
        "other_edges": rest.len(),
        "total": {"count": total.count, "errors": total.errors, "bytes": total.bytes, "pairs": total.pairs},
        "nodes": out_nodes,
        "edges": out_edges,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirelog_query::{parse_query, Acc, Row};
    use wirelog_store::Kind;

    fn ip(s: &str) -> KeyValue {
        KeyValue::Ip(wirelog_query::value::ip16(s.parse().unwrap()))
    }

    fn table(kind: Kind, by: &str, rows: Vec<Row>) -> ResultTable {
        let spec = parse_query(kind, None, Some(by), None, Some(1000), None).unwrap();
        ResultTable {
            kind,
            by: spec.by.clone(),
            every_ns: None,
            percentiles: true,
            sort: spec.sort,
            groups: rows.len(),
            rows,
            total: Acc::default(),
            rows_scanned: 0,
            rows_matched: 0,
            estimated: false,
        }
    }

    fn row(key: Vec<KeyValue>, n: u64, errors: u64, p95_ms: i64) -> Row {
        Row {
            time: None,
            key,
            acc: Acc { conns: n, pkts_out: errors, bytes_out: 10 * n, ..Acc::default() },
            duration: (p95_ms > 0).then_some([p95_ms * 500_000, p95_ms * 1_000_000, p95_ms * 2_000_000]),
            avg: None,
        }
    }

    const CONN_BY: &str = "orig_h,resp_h,resp_p,service,orig_proc,orig_container,resp_proc,resp_container";

    fn conn(c: &str, s: &str, port: u64, svc: &str, n: u64, sproc: &str) -> Row {
        let st = |x: &str| KeyValue::Str(x.into());
        row(vec![ip(c), ip(s), KeyValue::UInt(port), st(svc), st(""), st(""), st(sproc), st("")], n, 0, 0)
    }

    /// The map's three connection tables from rows grouped by all of
    /// [`CONN_BY`] (the one question the map asked before): summed per pair
    /// and service, and per end and owner over the rows that have one.
    fn split(rows: &[Row]) -> [ResultTable; 3] {
        let mut out = [BTreeMap::new(), BTreeMap::new(), BTreeMap::new()];
        for r in rows {
            let k = &r.key;
            let keys = [
                Some(vec![k[0].clone(), k[1].clone(), k[2].clone(), k[3].clone()]),
                (k[4] != KeyValue::Str(String::new())).then(|| vec![k[0].clone(), k[4].clone(), k[5].clone()]),
                (k[6] != KeyValue::Str(String::new())).then(|| vec![k[1].clone(), k[2].clone(), k[6].clone(), k[7].clone()]),
            ];
            for (m, key) in out.iter_mut().zip(keys) {
                if let Some(key) = key {
                    m.entry(key).or_insert_with(Acc::default).add_row(&r.acc);
                }
            }
        }
        let [a, b, c] = out;
        let t = |by: &str, m: BTreeMap<Vec<KeyValue>, Acc>| {
            table(Kind::Conns, by, m.into_iter().map(|(key, acc)| Row { time: None, key, acc, duration: None, avg: None }).collect())
        };
        [t(CONN_PAIRS, a), t(ORIG_OWNERS.0, b), t(RESP_OWNERS.0, c)]
    }

    trait AddRow {
        fn add_row(&mut self, o: &Acc);
    }

    impl AddRow for Acc {
        fn add_row(&mut self, o: &Acc) {
            self.bytes_out += o.bytes_out;
            self.bytes_in += o.bytes_in;
            self.pkts_out += o.pkts_out;
            self.pkts_in += o.pkts_in;
            self.conns += o.conns;
        }
    }

    fn build8(c: &[ResultTable; 3], t: &[ResultTable], a: &Ask) -> Value {
        build(&c[0], [&c[1], &c[2]], t, a)
    }

    fn sample() -> ([ResultTable; 3], Vec<ResultTable>) {
        let conns = split(
            &[
                conn("10.0.0.1", "192.168.1.1", 3306, "mysql", 5, "mysqld"),
                conn("10.0.0.2", "192.168.1.2", 3306, "mysql", 3, "mysqld"),
                conn("10.0.1.1", "192.168.2.1", 53, "dns", 7, ""),
                conn("10.0.1.1", "fd00::1", 443, "ssl", 2, ""),
            ],
        );
        let mysql = table(
            Kind::Mysql,
            "client,server,server_port",
            vec![
                row(vec![ip("10.0.0.1"), ip("192.168.1.1"), KeyValue::UInt(3306)], 50, 4, 20),
                row(vec![ip("10.0.0.2"), ip("192.168.1.2"), KeyValue::UInt(3306)], 30, 1, 90),
            ],
        );
        (conns, vec![mysql])
    }

    fn ask(group: Group, rank: Rank, top: usize) -> Ask {
        Ask { group, rank, top, find: None }
    }

    fn counts(v: &Value) -> Vec<(String, String, u64)> {
        v["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["from"].as_str().unwrap().into(), e["to"].as_str().unwrap().into(), e["count"].as_u64().unwrap()))
            .collect()
    }

    #[test]
    fn transactions_replace_their_connections_and_hosts_keep_every_pair() {
        let (c, t) = sample();
        let v = build8(&c, &t, &ask(Group::Host, Rank::Calls, 10));
        assert_eq!((v["edges"][0]["source"].as_str(), v["edges"][3]["source"].as_str()), (Some("mysql"), Some("conns")));
        assert_eq!(
            counts(&v),
            vec![
                ("10.0.0.1".into(), "192.168.1.1:3306".into(), 50),
                ("10.0.0.2".into(), "192.168.1.2:3306".into(), 30),
                ("10.0.1.1".into(), "192.168.2.1:53".into(), 7),
                ("10.0.1.1".into(), "[fd00::1]:443".into(), 2),
            ]
        );
        assert_eq!(v["total"]["count"], 89);
        let n = v["nodes"].as_array().unwrap().iter().find(|n| n["id"] == "192.168.1.1:3306").unwrap();
        assert_eq!(n["name"], "mysqld");
    }

    #[test]
    fn subnets_sum_their_pairs_and_the_rest_is_one_edge_that_says_what_it_holds() {
        let (c, t) = sample();
        let v = build8(&c, &t, &ask(Group::Subnet, Rank::Calls, 1));
        assert_eq!(
            counts(&v),
            vec![
                ("10.0.0.0/24".into(), "192.168.1.0/24:3306".into(), 80),
                ("other clients".into(), "other services".into(), 9),
            ]
        );
        let e = &v["edges"][0];
        assert_eq!((e["errors"].as_u64(), e["pairs"].as_u64()), (Some(5), Some(2)));
        // 50 calls at p95 20 ms, 30 at p95 90 ms: the group's p95 lies
        // in the slower pair's tail, its p50 in the busier pair's body.
        assert_eq!(e["p95_s"].as_f64(), Some(0.09));
        assert_eq!(e["p50_s"].as_f64(), Some(0.02));
        let other = &v["edges"][1];
        assert_eq!((other["edges"].as_u64(), other["other"].as_bool()), (Some(2), Some(true)));
        let ids: Vec<_> = v["nodes"].as_array().unwrap().iter().map(|n| (n["id"].as_str().unwrap().to_string(), n["members"].as_u64().unwrap())).collect();
        assert_eq!(
            ids,
            vec![
                ("10.0.0.0/24".into(), 2),
                ("192.168.1.0/24:3306".into(), 2),
                ("other clients".into(), 1),
                ("other services".into(), 2),
            ]
        );
        assert!(v["nodes"].as_array().unwrap().iter().any(|n| n["id"] == "other services" && n["calls_in"] == 9));
        assert_eq!(v["total"]["count"], 89);
    }

    #[test]
    fn ranks_by_latency_errors_and_bytes_and_groups_by_process_and_port() {
        let (c, t) = sample();
        let v = build8(&c, &t, &ask(Group::Host, Rank::Latency, 1));
        assert_eq!(counts(&v)[0].1, "192.168.1.2:3306");
        let v = build8(&c, &t, &ask(Group::Host, Rank::Errors, 1));
        assert_eq!(counts(&v)[0].1, "192.168.1.1:3306");
        let v = build8(&c, &t, &ask(Group::Process, Rank::Calls, 10));
        assert_eq!(counts(&v)[0], ("10.0.0.1".into(), "mysqld:3306".into(), 50));
        let v = build8(&c, &t, &ask(Group::Service, Rank::Bytes, 10));
        assert_eq!(counts(&v)[0], ("10.0.0.1".into(), "*:3306".into(), 50));
        let mut a = ask(Group::Host, Rank::Calls, 10);
        a.find = Some("mysqld".into());
        assert_eq!(counts(&build8(&c, &t, &a)).len(), 2);
    }

    /// On a store: the map's connection questions (the pairs, and each
    /// end's owners over the connections that have one) give the map the
    /// one question grouped by all eight fields gave, for every grouping
    /// and rank, with ends with and without owners, counts that tie (every
    /// connection counts 1) and more edges than shown; and the records API's
    /// top-k over the same store gives the rows and count of grouping every
    /// record.
    #[test]
    fn map_questions_on_a_store_give_the_eight_field_map() {
        use crate::api::{execute, Shape};
        use std::sync::Arc;
        use std::time::{Duration, Instant};
        use wirelog_record::{ProcOwner, UidGenerator};
        use wirelog_store::{synth, Store, StoreOptions};

        let dir = std::env::temp_dir().join(format!("wirelog-serve-map-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut st = Store::open(&dir, StoreOptions::default()).unwrap();
        let mut uids = UidGenerator::new(5);
        let curl = Arc::new(ProcOwner { pid: 7, name: "curl".into(), container: "docker:cli".into(), ..ProcOwner::default() });
        let t0 = 1_700_000_000_000_000_000;
        let conns: Vec<_> = (0..6000u64)
            .map(|i| {
                let mut c = synth::conn(i, t0, 50_000_000, &mut uids);
                if i % 3 != 0 {
                    c = synth::to_service(c, i % 40);
                }
                if i % 5 == 0 {
                    c.orig_proc = Some(curl.clone());
                }
                c
            })
            .collect();
        st.append_conns(&conns).unwrap();
        st.close().unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        let q = |by: &str, where_: Option<&str>, sort: &str, top: usize, shape: Shape| {
            let mut spec = wirelog_query::parse_query(Kind::Conns, where_, Some(by), Some(sort), Some(top), None).unwrap();
            spec.percentiles = false;
            execute(Some(&dir), None, None, spec, crate::Limits::default(), deadline, shape).unwrap().0
        };
        let old = q(CONN_BY, None, "conns", 2_000_000, Shape::Groups);
        assert!(old.groups > 3000, "{}", old.groups);
        let new = [
            q(CONN_PAIRS, None, "conns", 2_000_000, Shape::Groups),
            q(ORIG_OWNERS.0, Some(ORIG_OWNERS.1), "conns", 2_000_000, Shape::Groups),
            q(RESP_OWNERS.0, Some(RESP_OWNERS.1), "conns", 2_000_000, Shape::Groups),
        ];
        assert!(new[1].groups > 0 && new[2].groups > 0);
        let reference = split(&old.rows);
        for group in [Group::Host, Group::Service, Group::Process, Group::Container, Group::Subnet] {
            for rank in [Rank::Calls, Rank::Bytes, Rank::Errors, Rank::Latency] {
                for top in [1, 25, 5000] {
                    let a = Ask { group, rank, top, find: None };
                    let (got, want) = (build8(&new, &[], &a), build8(&reference, &[], &a));
                    assert_eq!(got, want, "{group:?} {rank:?} {top}");
                    if top == 25 {
                        assert!(got["other_edges"].as_u64().unwrap() > 0, "{group:?}: more edges than shown");
                    }
                }
            }
        }
        let a = Ask { group: Group::Host, rank: Rank::Calls, top: 10, find: Some("curl".into()) };
        assert_eq!(build8(&new, &[], &a), build8(&reference, &[], &a));
        // Records sorted by a sum: the top-k's page and count are the plain engine's.
        let fields = crate::api::record_fields(Kind::Conns);
        for sort in ["bytes", "orig_bytes:asc", "conns", "pkts"] {
            for top in [1, 100, 5000, 7000] {
                let topk = q(&fields, None, sort, top, Shape::Records);
                let plain = q(&fields, None, sort, top, Shape::Groups);
                assert_eq!(topk, plain, "records sorted by {sort}, top {top}");
                assert_eq!(topk.groups, 6000);
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
