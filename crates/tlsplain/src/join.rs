//! The join of the TLS library's transactions with the packet path's
//! connections, on the output thread (`record::TxJoin`): a transaction
//! from the library waits until the record of its connection (same tuple,
//! its time within the connection's) passes, then takes that connection's
//! uid, and the connection's service gains the protocol (`ssl,http`).
//!
//! The connection's record usually comes last: the plaintext is read as
//! the application hands it over, the record when the connection ends. But
//! a short connection's record can pass before the reader has handed over
//! its last transactions (a server's view waits for the reader's tick, the
//! reader looks at its ring every 10 ms). The rule: **the record of a TCP
//! connection that the packet path saw speak TLS (its service names `ssl`)
//! waits here [`CONN_WAIT`]** before it goes to the sinks, so that its
//! transactions still name their protocol in its service (`ssl,http`);
//! connections without TLS are not held. A transaction that comes after its
//! connection's record went (the reader was further behind) takes the uid
//! from the connections seen in the last [`RECENT`], without changing a
//! service already written (counted as joined late). One whose connection
//! does not come within [`HOLD`] (a connection the capture's interfaces do
//! not see, or one still open) is written with a uid of its own; both are
//! counted.
//!
//! The socket source's transactions (`--socket-data`) are joined the same
//! way. With it, **each TCP connection's transactions come from one
//! source**: the packet path's transactions on TCP wait here until the
//! reader has read its ring past their last byte (`claims`, at most
//! [`PACKET_WAIT`]), then go to the sinks, unless the socket source claimed
//! their connection at their time: then they are dropped (counted), the
//! socket's stand for them, and their uid tells the socket's transactions
//! of that connection their uid at once (a long-lived connection's record
//! comes only when it ends).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wirelog_record::{Batch, ConnRecord, Proto, TxJoin, TxRecord, TxSource, Uid};

use crate::claims::Claims;

/// How long a transaction waits for its connection's record.
pub const HOLD: Duration = Duration::from_secs(120);
/// How long a connection's uid is remembered after its record passed.
pub const RECENT: Duration = Duration::from_secs(120);
/// Transactions held at most; beyond, the oldest go out unjoined.
pub const MAX_HELD: usize = 100_000;
/// How long the record of a connection that spoke TLS waits for the
/// reader's last transactions of it: the reader's server-side tick (0.5 s)
/// and its ring polls, with room for a busy machine. Records are released
/// on the output thread's tick (every second), so they go 2-3 s late.
pub const CONN_WAIT: Duration = Duration::from_secs(2);
/// Connection records held at most; beyond, they go at once (counted).
pub const MAX_HELD_CONNS: usize = 100_000;
/// A transaction's time may be this far outside its connection's (clocks
/// read in different places).
const SLACK_NS: i64 = 2_000_000_000;
/// With `--socket-data`: how long a packet-path transaction waits at most
/// for the reader to catch up (a reader that stalls does not hold the
/// packet path's records back longer; counted).
pub const PACKET_WAIT: Duration = Duration::from_secs(2);
/// Packet-path transactions waiting at most; beyond, the oldest go
/// undecided (counted).
pub const MAX_PACKET_HELD: usize = 100_000;

type Key = ([u8; 16], u16, [u8; 16], u16);

/// What the join did, readable while it runs.
#[derive(Debug, Default)]
pub struct JoinStats {
    /// Transactions given their connection's uid when its record passed,
    /// and after it had passed.
    pub joined: AtomicU64,
    pub joined_late: AtomicU64,
    /// Transactions written with a uid of their own (no record of their
    /// connection came in time, or too many were held).
    pub unjoined: AtomicU64,
    /// TLS connections' records held for [`CONN_WAIT`], and those that
    /// went at once because [`MAX_HELD_CONNS`] were waiting.
    pub conns_held: AtomicU64,
    pub conns_not_held: AtomicU64,
    /// `--socket-data`: the packet path's transactions dropped because the
    /// socket source parsed their connection, and those let go before the
    /// reader had read past them (it stalled, or too many waited).
    pub packet_txs_left_for_socket: AtomicU64,
    pub packet_txs_undecided: AtomicU64,
}

impl std::fmt::Display for JoinStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} joined with their connection, {} after its record was written, {} without their connection's record (a uid of their own); {} TLS connection records held for their last transactions ({} not: too many held)",
            self.joined.load(Relaxed),
            self.joined_late.load(Relaxed),
            self.unjoined.load(Relaxed),
            self.conns_held.load(Relaxed),
            self.conns_not_held.load(Relaxed)
        )?;
        let (left, undecided) = (self.packet_txs_left_for_socket.load(Relaxed), self.packet_txs_undecided.load(Relaxed));
        if left + undecided > 0 {
            write!(f, "; {left} packet-path transactions left for the socket's, {undecided} let go before the socket reader caught up")?;
        }
        Ok(())
    }
}

pub struct Join {
    held: HashMap<Key, Vec<(TxRecord, Instant)>>,
    n_held: usize,
    /// Connections whose record passed: uid, first and last ns, when seen.
    recent: HashMap<Key, Vec<(Uid, i64, i64, Instant)>>,
    /// conn.log services with the protocol found inside ("ssl,http"): each
    /// combination made once.
    services: HashMap<(&'static str, &'static str), &'static str>,
    /// Records of connections that spoke TLS, waiting [`CONN_WAIT`] for
    /// their last transactions, by uid.
    conns: HashMap<Uid, (ConnRecord, Instant)>,
    conn_wait: Duration,
    stats: Arc<JoinStats>,
    /// `--socket-data`: the reader's claims, and the packet path's TCP
    /// transactions waiting for its word, oldest first.
    claims: Option<Arc<Claims>>,
    packet_txs: std::collections::VecDeque<(TxRecord, Instant)>,
}

impl Join {
    pub fn new(stats: Arc<JoinStats>) -> Join {
        Join {
            held: HashMap::new(),
            n_held: 0,
            recent: HashMap::new(),
            services: HashMap::new(),
            conns: HashMap::new(),
            conn_wait: CONN_WAIT,
            stats,
            claims: None,
            packet_txs: std::collections::VecDeque::new(),
        }
    }

    /// With `--socket-data`: one source of transactions per connection,
    /// decided with the reader's `claims`.
    pub fn with_socket_claims(stats: Arc<JoinStats>, claims: Arc<Claims>) -> Join {
        Join { claims: Some(claims), ..Join::new(stats) }
    }

    /// The packet path's waiting transactions the reader has read past (or
    /// that waited [`PACKET_WAIT`], or all at the end): dropped when the
    /// socket source claimed their connection, else into `batch`. A
    /// dropped one's uid is remembered for the socket's transactions of its
    /// connection.
    fn decide_packet_txs(&mut self, batch: &mut Batch, all: bool) {
        let Some(claims) = self.claims.clone() else { return };
        let now = Instant::now();
        let watermark = claims.watermark();
        let over = self.packet_txs.len().saturating_sub(MAX_PACKET_HELD);
        let mut n = 0;
        while let Some((t, since)) = self.packet_txs.front() {
            let end = t.tx.request.iter().chain(t.tx.response.iter()).map(|s| s.last_ns).max().unwrap_or(0);
            let read_past = end + crate::claims::SLACK_NS <= watermark;
            let forced = now.duration_since(*since) >= PACKET_WAIT || n < over;
            if !(all || read_past || forced) {
                break;
            }
            n += 1;
            let (t, _) = self.packet_txs.pop_front().expect("front");
            let key = (t.orig_h.0, t.orig_p, t.resp_h.0, t.resp_p);
            if claims.covers(&key, t.tx.ts_ns()) {
                self.stats.packet_txs_left_for_socket.fetch_add(1, Relaxed);
                self.remember(key, t.uid, t.tx.ts_ns(), end, now, batch);
            } else {
                if !read_past {
                    self.stats.packet_txs_undecided.fetch_add(1, Relaxed);
                }
                batch.txs.push(t);
            }
        }
    }

    /// A live connection's uid learnt from one of its packet-path
    /// transactions: remembered as a passed record's is, and the socket's
    /// transactions waiting for it take it.
    fn remember(&mut self, key: Key, uid: Uid, first: i64, last: i64, now: Instant, batch: &mut Batch) {
        let r = self.recent.entry(key).or_default();
        match r.last_mut() {
            Some(c) if c.0 == uid => {
                c.1 = c.1.min(first);
                c.2 = c.2.max(last);
                c.3 = now;
            }
            _ => r.push((uid, first, last, now)),
        }
        let Some(waiting) = self.held.get_mut(&key) else { return };
        let mut j = 0;
        while j < waiting.len() {
            let ts = waiting[j].0.tx.ts_ns();
            if ts >= first - SLACK_NS && ts <= last + SLACK_NS {
                let (mut t, _) = waiting.swap_remove(j);
                t.uid = uid;
                batch.txs.push(t);
                self.n_held -= 1;
                self.stats.joined_late.fetch_add(1, Relaxed);
            } else {
                j += 1;
            }
        }
        if waiting.is_empty() {
            self.held.remove(&key);
        }
    }

    fn service(&mut self, outer: Option<&'static str>, inner: &'static str) -> &'static str {
        let outer = outer.unwrap_or("");
        if outer.split(',').any(|s| s == inner) {
            return if outer.is_empty() { inner } else { self.intern(outer, "") };
        }
        self.intern(outer, inner)
    }

    fn intern(&mut self, outer: &'static str, inner: &'static str) -> &'static str {
        if inner.is_empty() {
            return outer;
        }
        let s: &mut &'static str = self.services.entry((outer, inner)).or_insert_with(|| {
            let s = if outer.is_empty() { inner.to_string() } else { format!("{outer},{inner}") };
            // Bounded: one string per (service, protocol) pair ever seen.
            Box::leak(s.into_boxed_str())
        });
        s
    }

    fn release(&mut self, batch: &mut Batch, all: bool) {
        let now = Instant::now();
        let over = self.n_held.saturating_sub(MAX_HELD);
        let mut released = 0;
        for v in self.held.values_mut() {
            let before = v.len();
            let mut i = 0;
            while i < v.len() {
                if all || now.duration_since(v[i].1) >= HOLD || released < over {
                    batch.txs.push(v.swap_remove(i).0);
                    released += 1;
                } else {
                    i += 1;
                }
            }
            self.n_held -= before - v.len();
        }
        self.held.retain(|_, v| !v.is_empty());
        self.stats.unjoined.fetch_add(released as u64, Relaxed);
    }

    /// The held connection records whose wait is over (all of them at the
    /// end) go out with `batch`.
    fn release_conns(&mut self, batch: &mut Batch, all: bool) {
        let now = Instant::now();
        let wait = self.conn_wait;
        let before = batch.conns.len();
        self.conns.retain(|_, (c, since)| {
            let go = all || now.duration_since(*since) >= wait;
            if go {
                batch.conns.push(c.clone());
            }
            !go
        });
        // Records in time order, as the tracker hands them over.
        batch.conns[before..].sort_by_key(|c| c.ts_ns);
    }
}

/// Whether a connection's record waits here for its last transactions: a
/// TCP connection the packet path saw speak TLS.
fn spoke_tls(c: &ConnRecord) -> bool {
    c.proto == Proto::Tcp && c.service.is_some_and(|s| s.split(',').any(|s| s == "ssl"))
}

impl TxJoin for Join {
    fn join(&mut self, batch: &mut Batch) {
        let now = Instant::now();
        // With --socket-data, the packet path's TCP transactions wait for
        // the reader's word on their connection (decided at the end).
        if self.claims.is_some() {
            let packets = batch.txs.extract_if(.., |t| t.source == TxSource::Packets && t.transport == Proto::Tcp);
            self.packet_txs.extend(packets.map(|t| (t, now)));
        }
        // The library's (and the socket's) transactions: joined with a
        // connection already seen, else held.
        let mut i = 0;
        while i < batch.txs.len() {
            if batch.txs[i].source == TxSource::Packets || batch.txs[i].transport != Proto::Tcp {
                i += 1;
                continue;
            }
            let t = &mut batch.txs[i];
            let key = (t.orig_h.0, t.orig_p, t.resp_h.0, t.resp_p);
            let ts = t.tx.ts_ns();
            let seen = self.recent.get(&key).and_then(|v| v.iter().rev().find(|c| ts >= c.1 - SLACK_NS && ts <= c.2 + SLACK_NS));
            if let Some(c) = seen {
                let uid = c.0;
                t.uid = uid;
                let inner = t.protocol.service();
                if let Some(outer) = self.conns.get(&uid).map(|h| h.0.service) {
                    // Its record is still held: it names the protocol too.
                    let s = self.service(outer, inner);
                    if let Some(h) = self.conns.get_mut(&uid) {
                        h.0.service = Some(s);
                    }
                    self.stats.joined.fetch_add(1, Relaxed);
                } else {
                    self.stats.joined_late.fetch_add(1, Relaxed);
                }
                i += 1;
                continue;
            }
            let t = batch.txs.swap_remove(i);
            self.held.entry(key).or_default().push((t, now));
            self.n_held += 1;
        }
        // The packet path's connections: each takes what waits for it.
        let mut joined = Vec::new();
        for c in batch.conns.iter_mut().filter(|c| c.proto == Proto::Tcp) {
            let key = (c.orig_h.0, c.orig_p, c.resp_h.0, c.resp_p);
            let (start, end) = (c.ts_ns, c.ts_ns + c.duration_ns.unwrap_or(0));
            let r = self.recent.entry(key).or_default();
            r.push((c.uid, start, end, now));
            let Some(waiting) = self.held.get_mut(&key) else { continue };
            let mut j = 0;
            while j < waiting.len() {
                let ts = waiting[j].0.tx.ts_ns();
                if ts >= start - SLACK_NS && ts <= end + SLACK_NS {
                    let (mut t, _) = waiting.swap_remove(j);
                    t.uid = c.uid;
                    joined.push((t, c.uid));
                } else {
                    j += 1;
                }
            }
            if waiting.is_empty() {
                self.held.remove(&key);
            }
        }
        self.n_held -= joined.len();
        self.stats.joined.fetch_add(joined.len() as u64, Relaxed);
        // Services: each connection's gains its transactions' protocols.
        for (t, uid) in &joined {
            let inner = t.protocol.service();
            if let Some(c) = batch.conns.iter().position(|c| c.uid == *uid) {
                let s = self.service(batch.conns[c].service, inner);
                batch.conns[c].service = Some(s);
            }
        }
        batch.txs.extend(joined.into_iter().map(|(t, _)| t));
        if self.n_held > MAX_HELD {
            self.release(batch, false);
        }
        self.decide_packet_txs(batch, false);
        // The records of connections that spoke TLS wait for the reader.
        if batch.conns.iter().any(spoke_tls) {
            for c in std::mem::take(&mut batch.conns) {
                if !spoke_tls(&c) {
                    batch.conns.push(c);
                } else if self.conns.len() >= MAX_HELD_CONNS {
                    self.stats.conns_not_held.fetch_add(1, Relaxed);
                    batch.conns.push(c);
                } else {
                    self.stats.conns_held.fetch_add(1, Relaxed);
                    self.conns.insert(c.uid, (c, now));
                }
            }
        }
    }

    fn tick(&mut self, batch: &mut Batch) {
        self.decide_packet_txs(batch, false);
        self.release(batch, false);
        self.release_conns(batch, false);
        let now = Instant::now();
        for v in self.recent.values_mut() {
            v.retain(|c| now.duration_since(c.3) < RECENT);
        }
        self.recent.retain(|_, v| !v.is_empty());
    }

    fn finish(&mut self, batch: &mut Batch) {
        self.decide_packet_txs(batch, true);
        self.release(batch, true);
        self.release_conns(batch, true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirelog_record::http::HttpTx;
    use wirelog_record::{CommunityId, ConnRecord, ConnState, Detail, History, IpAddr16, Protocol, Span, Transaction, TxStatus, UidGenerator};

    fn tx(uids: &mut UidGenerator, ts: i64, port: u16) -> TxRecord {
        TxRecord {
            uid: uids.next_uid(),
            orig_h: IpAddr16([1; 16]),
            orig_p: port,
            resp_h: IpAddr16([2; 16]),
            resp_p: 443,
            transport: Proto::Tcp,
            protocol: Protocol::Http,
            tx: Transaction {
                request: Some(Span { first_ns: ts, last_ns: ts, bytes: 10 }),
                response: None,
                status: TxStatus::NoResponse,
                detail: Detail::Http(HttpTx::default()),
            },
            orig_proc: None,
            resp_proc: None,
            source: TxSource::TlsLibrary,
            sample_weight: 1,
        }
    }

    fn conn(uid: Uid, ts: i64, dur: i64, port: u16, service: Option<&'static str>) -> ConnRecord {
        ConnRecord {
            ts_ns: ts,
            uid,
            orig_h: IpAddr16([1; 16]),
            orig_p: port,
            resp_h: IpAddr16([2; 16]),
            resp_p: 443,
            proto: Proto::Tcp,
            service,
            duration_ns: Some(dur),
            orig_bytes: None,
            resp_bytes: None,
            conn_state: ConnState::SF,
            local_orig: true,
            local_resp: true,
            missed_bytes: 0,
            history: History::new(),
            orig_pkts: 0,
            orig_ip_bytes: 0,
            resp_pkts: 0,
            resp_ip_bytes: 0,
            ip_proto: 6,
            community_id: CommunityId::PENDING,
            vlan: None,
            inner_vlan: None,
            empty_tcp_skipped: false,
            orig_proc: None,
            resp_proc: None,
        }
    }

    #[test]
    fn transactions_wait_for_their_connection_and_take_its_uid_and_service() {
        let mut uids = UidGenerator::new(1);
        let stats = Arc::new(JoinStats::default());
        let mut j = Join::new(stats.clone());
        let t_ns = 1_000_000_000_000;
        let mut b = Batch::default();
        b.txs.push(tx(&mut uids, t_ns + 5, 40000));
        b.txs.push(tx(&mut uids, t_ns + 6, 40001));
        j.join(&mut b);
        assert!(b.txs.is_empty(), "held until the connection comes");
        let conn_uid = uids.next_uid();
        let mut b = Batch::default();
        b.conns.push(conn(conn_uid, t_ns, 1_000, 40000, None));
        j.join(&mut b);
        assert_eq!(b.txs.len(), 1);
        assert_eq!(b.txs[0].uid, conn_uid);
        assert_eq!(b.conns[0].service, Some("http"));
        // A late transaction of the same connection takes its uid too; the
        // record went (no TLS seen on it: not held), its service stays.
        let mut b = Batch::default();
        b.txs.push(tx(&mut uids, t_ns + 7, 40000));
        j.join(&mut b);
        assert_eq!(b.txs.len(), 1);
        assert_eq!(b.txs[0].uid, conn_uid);
        // The other one never sees its connection: out at the end, counted.
        let mut b = Batch::default();
        j.finish(&mut b);
        assert_eq!(b.txs.len(), 1);
        assert_eq!(b.txs[0].orig_p, 40001);
        assert_eq!(
            (stats.joined.load(Relaxed), stats.joined_late.load(Relaxed), stats.unjoined.load(Relaxed)),
            (1, 1, 1)
        );
    }

    #[test]
    fn a_reused_tuple_joins_the_connection_whose_time_holds_the_transaction() {
        let mut uids = UidGenerator::new(2);
        let mut j = Join::new(Arc::default());
        let s = 1_000_000_000_000i64;
        let mut b = Batch::default();
        b.txs.push(tx(&mut uids, s + 100_000_000_000, 40000));
        j.join(&mut b);
        let (old, new) = (uids.next_uid(), uids.next_uid());
        let mut b = Batch::default();
        // An earlier connection on the same tuple, over long before.
        b.conns.push(conn(old, s, 1_000_000_000, 40000, Some("ssl")));
        b.conns.push(conn(new, s + 99_000_000_000, 2_000_000_000, 40000, Some("ssl")));
        j.join(&mut b);
        assert_eq!(b.txs.len(), 1);
        assert_eq!(b.txs[0].uid, new);
        // Both spoke TLS: their records wait, and go at the end.
        assert!(b.conns.is_empty());
        let mut b = Batch::default();
        j.finish(&mut b);
        assert_eq!(b.conns.len(), 2);
        assert_eq!(b.conns[0].service, Some("ssl"));
        assert_eq!(b.conns[1].service, Some("ssl,http"));
    }

    /// The record of a connection that spoke TLS passes before the reader
    /// hands over its last transaction: the record waits, the transaction
    /// takes its uid and the record's service names the protocol; after
    /// the wait, a tick lets the record go. A connection without TLS goes
    /// at once.
    #[test]
    fn a_tls_connections_record_waits_for_its_last_transactions() {
        let mut uids = UidGenerator::new(3);
        let stats = Arc::new(JoinStats::default());
        let mut j = Join::new(stats.clone());
        j.conn_wait = Duration::from_millis(50);
        let s = 1_000_000_000_000i64;
        let (tls, clear) = (uids.next_uid(), uids.next_uid());
        let mut b = Batch::default();
        b.conns.push(conn(tls, s, 1_000_000_000, 40000, Some("ssl")));
        b.conns.push(conn(clear, s, 1_000_000_000, 40001, None));
        j.join(&mut b);
        assert_eq!(b.conns.len(), 1);
        assert_eq!(b.conns[0].uid, clear);
        // A tick before the wait is over keeps it.
        let mut b = Batch::default();
        j.tick(&mut b);
        assert!(b.conns.is_empty());
        // Its transaction, from the reader, after the record passed.
        let mut b = Batch::default();
        b.txs.push(tx(&mut uids, s + 500_000_000, 40000));
        j.join(&mut b);
        assert_eq!(b.txs.len(), 1);
        assert_eq!(b.txs[0].uid, tls);
        std::thread::sleep(Duration::from_millis(60));
        let mut b = Batch::default();
        j.tick(&mut b);
        assert_eq!(b.conns.len(), 1);
        assert_eq!(b.conns[0].uid, tls);
        assert_eq!(b.conns[0].service, Some("ssl,http"));
        // After its record went, a transaction still takes the uid; the
        // service written stays (counted as late).
        let mut b = Batch::default();
        b.txs.push(tx(&mut uids, s + 600_000_000, 40000));
        j.join(&mut b);
        assert_eq!(b.txs[0].uid, tls);
        assert_eq!(
            (stats.joined.load(Relaxed), stats.joined_late.load(Relaxed), stats.conns_held.load(Relaxed)),
            (1, 1, 1)
        );
    }

    /// `--socket-data`: a packet-path transaction waits for the reader to
    /// read past it; on a connection the socket source claimed, it is
    /// dropped and its uid goes to the socket's transaction of it (waiting
    /// for its connection's record); elsewhere it goes out as it was.
    #[test]
    fn with_socket_data_each_connection_has_one_source_of_transactions() {
        let mut uids = UidGenerator::new(4);
        let stats = Arc::new(JoinStats::default());
        let claims = Arc::new(Claims::default());
        let mut j = Join::with_socket_claims(stats.clone(), claims.clone());
        let s = 1_000_000_000_000i64;
        let conn_uid = uids.next_uid();
        let packet = |uids: &mut UidGenerator, port: u16, uid: Option<Uid>| {
            let mut t = tx(uids, s + 1_000, port);
            t.source = TxSource::Packets;
            if let Some(u) = uid {
                t.uid = u;
            }
            t
        };
        // The socket source parses the connection on port 40000 from s.
        claims.claim(([1; 16], 40000, [2; 16], 443), s);
        let mut socket_tx = tx(&mut uids, s + 2_000, 40000);
        socket_tx.source = TxSource::Socket;
        let mut b = Batch::default();
        b.txs.push(socket_tx);
        b.txs.push(packet(&mut uids, 40000, Some(conn_uid)));
        b.txs.push(packet(&mut uids, 40001, None));
        j.join(&mut b);
        assert!(b.txs.is_empty(), "both wait: the reader has not read past them {:?}", b.txs);
        // The reader has read past them.
        claims.set_watermark(s + 1_000_000_000);
        let mut b = Batch::default();
        j.tick(&mut b);
        assert_eq!(b.txs.len(), 2, "{:#?}", b.txs);
        let other = b.txs.iter().find(|t| t.orig_p == 40001).expect("the unclaimed connection's packet transaction");
        assert_eq!(other.source, TxSource::Packets);
        let mine = b.txs.iter().find(|t| t.orig_p == 40000).expect("the socket's transaction");
        assert_eq!(mine.source, TxSource::Socket);
        assert_eq!(mine.uid, conn_uid, "the dropped packet transaction's uid");
        assert_eq!(stats.packet_txs_left_for_socket.load(Relaxed), 1);
        assert_eq!(stats.packet_txs_undecided.load(Relaxed), 0);
        // A reader that never catches up holds packet transactions at most
        // PACKET_WAIT; at the end, all are decided.
        let mut b = Batch::default();
        for (port, uid) in [(40002, None), (40000, Some(conn_uid))] {
            let mut t = packet(&mut uids, port, uid);
            t.tx.request = Some(Span { first_ns: s + 5_000_000_000, last_ns: s + 5_000_000_000, bytes: 10 });
            b.txs.push(t);
        }
        j.join(&mut b);
        assert!(b.txs.is_empty());
        let mut b = Batch::default();
        j.finish(&mut b);
        assert_eq!(b.txs.len(), 1, "{:#?}", b.txs);
        assert_eq!(b.txs[0].orig_p, 40002);
        assert_eq!(stats.packet_txs_left_for_socket.load(Relaxed), 2);
    }
}
