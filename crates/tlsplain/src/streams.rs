//! From events to transactions: each event is placed on its TCP connection
//! (the socket the fd program read; an event of a call that made no system
//! call takes the connection its `SSL` was last on), and each
//! connection's plaintext is fed, in order, to the parser its first bytes
//! call for (the packet path's content detection and parsers; a message
//! read in pieces, as mariadbd reads a packet's header apart from its
//! body, is looked at whole: see [`Hold`]), with gaps
//! where bytes are missing (lost ring records, messages longer than an
//! event carries, events out of order).
//!
//! When both ends of a connection are on this host, both processes' calls
//! are seen, and each end's view is parsed on its own: the client's
//! transactions are kept (sizes and latency as the client saw them; a server
//! may answer without reading a whole request), the server's only when no
//! client was seen on the connection (a remote client). A server's
//! transactions wait for the next tick (half a second) before they go, so
//! that a client seen a moment after the server still wins.
//! A connection is keyed by its network namespace and tuple, so the same
//! addresses in two namespaces are two connections.
//!
//! The socket system calls' events (`--socket-data`) go to a `Streams` of
//! their own (source `socket`), so a TLS connection's ciphertext from the
//! socket and its plaintext from the library are two views, not one. There
//! a connection is followed only when its first event names its protocol
//! (the socket sees a connection from its first byte; one whose start was
//! missed, or that speaks no protocol a parser knows, is left to the
//! packets), and each connection followed is claimed (`claims`) so the
//! packet path's transactions of it are not written twice.

use std::collections::HashMap;
use std::sync::Arc;

use wirelog_parse::detect::{self, Detected};
use wirelog_parse::mysql;
use wirelog_parse::{ConnParser, Dir, ParseConfig, Protocol, ProtocolParser, StreamParser, Transaction};
use wirelog_procs::Users;
use wirelog_record::{IpAddr16, Proc, ProcOwner, Proto, TxRecord, TxSource, UidGenerator};

use crate::claims::{Claims, Tuple};
use crate::programs::{Event, Sock, DIR_READ};
use crate::sockets::Roles;
use crate::Stats;

/// First messages looked at for a protocol before a connection is given up.
const DETECT_TRIES: u8 = 4;
/// Bytes of a view's first events held while its protocol is unknown.
/// mariadbd reads a packet's 4-byte header, then its body, in two
/// SSL_read calls: its login inside TLS (which names the protocol) is two
/// events, looked at together. A few hundred bytes: the detectors decide on
/// a message's first bytes.
const HOLD_BYTES: usize = 512;
/// Connections followed at once; beyond, new ones are counted, not followed.
pub const MAX_CONNS: usize = 65_536;
/// A connection with no event for this long is finished (its pending
/// requests reported unanswered) and forgotten.
pub const IDLE_NS: i64 = 60_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnKey {
    pub netns: u32,
    pub orig: [u8; 16],
    pub orig_port: u16,
    pub resp: [u8; 16],
    pub resp_port: u16,
}

impl ConnKey {
    fn tuple(&self) -> Tuple {
        (self.orig, self.orig_port, self.resp, self.resp_port)
    }

    fn of(s: &Sock, server: bool) -> ConnKey {
        if server {
            ConnKey { netns: s.netns, orig: s.remote, orig_port: s.remote_port, resp: s.local, resp_port: s.local_port }
        } else {
            ConnKey { netns: s.netns, orig: s.local, orig_port: s.local_port, resp: s.remote, resp_port: s.remote_port }
        }
    }
}

/// Which connection an `SSL` of a process was last seen on.
#[derive(Debug, Clone, Copy)]
struct Binding {
    sock: Sock,
    key: ConnKey,
    server: bool,
}

enum Parsing {
    Detecting(Hold),
    On(Box<ConnParser>),
    Off,
}

/// A view's events looked at so far for its protocol, and the last ones
/// (whole, in one direction, [`HOLD_BYTES`] at most), which are looked at
/// again with the next event's bytes after them, and given to the parser
/// first when the protocol is found.
#[derive(Default)]
struct Hold {
    tries: u8,
    dir: Option<Dir>,
    bytes: Vec<u8>,
    /// Each held event's time and length, in order.
    events: Vec<(i64, u32)>,
}

impl Hold {
    /// The held bytes are not followed by the next event's (bytes lost,
    /// an event out of order, another direction, an event too long).
    fn drop_held(&mut self) {
        self.bytes.clear();
        self.events.clear();
    }
}

/// The parser a view's first bytes `data` (sent in `dir`) call for, if
/// they name a protocol. `in_tls`: the bytes are a TLS library's plaintext,
/// where a MySQL connection opens with the handshake response.
fn parser_for(cfg: &ParseConfig, in_tls: bool, dir: Dir, data: &[u8]) -> Option<ConnParser> {
    match detect::by_content(dir, data) {
        // A MySQL connection switches to TLS after its greeting and SSL
        // request (in the clear, not seen here): its plaintext opens with
        // the handshake response.
        _ if in_tls && dir == Dir::ToServer && mysql::looks_like_login_in_tls(data) => Some(ConnParser::Mysql(mysql::MysqlParser::in_tls(cfg))),
        // TLS inside TLS is not followed.
        Detected::Protocol(p) if p != Protocol::Tls => Some(p.stream_parser(cfg)),
        _ => None,
    }
}

/// One end's view of a connection: the (process, SSL) whose calls it
/// parses.
struct View {
    id: (u32, u64),
    parsing: Parsing,
    last_mono: u64,
}

const CLIENT: usize = 0;
const SERVER: usize = 1;

struct Conn {
    /// The client's view, then the server's.
    views: [Option<View>; 2],
    orig_proc: Proc,
    resp_proc: Proc,
    last_ns: i64,
    /// The socket source parses it (a claim is open in `Streams::claims`).
    claimed: bool,
}

/// The reader thread's state.
pub struct Streams {
    cfg: ParseConfig,
    roles: Roles,
    ssls: HashMap<(u32, u64), Binding>,
    conns: HashMap<ConnKey, Conn>,
    owners: HashMap<u32, Proc>,
    users: Users,
    uids: UidGenerator,
    scratch: Vec<Transaction>,
    /// Transactions made, with their connection, until the next tick: the
    /// other end's process (both ends on this host) may be seen a moment
    /// after the parsed end completed the transaction.
    ready: Vec<(ConnKey, usize, Transaction)>,
    /// CLOCK_REALTIME - CLOCK_MONOTONIC, ns: event times to record times.
    pub mono_to_real: i64,
    /// Where the bytes come from: the TLS library, or the socket.
    source: TxSource,
    /// The socket source's claims on the connections it parses.
    claims: Option<Arc<Claims>>,
}

impl Streams {
    pub fn new(cfg: ParseConfig) -> Streams {
        Streams {
            cfg,
            roles: Roles::default(),
            ssls: HashMap::new(),
            conns: HashMap::new(),
            owners: HashMap::new(),
            users: Users::default(),
            uids: UidGenerator::from_entropy(),
            scratch: Vec::new(),
            ready: Vec::new(),
            mono_to_real: clock_offset(),
            source: TxSource::TlsLibrary,
            claims: None,
        }
    }

    /// The socket system calls' streams (`--socket-data`): records of
    /// source `socket`, each connection parsed claimed in `claims`.
    pub fn sockets(cfg: ParseConfig, claims: Arc<Claims>) -> Streams {
        Streams { source: TxSource::Socket, claims: Some(claims), ..Streams::new(cfg) }
    }

    /// Takes one event; transactions it completes go to `out`.
    pub fn event(&mut self, ev: &Event, stats: &Stats) {
        stats.add(&stats.events, 1);
        stats.add(&stats.bytes, ev.len as u64);
        let Some(b) = self.bind(ev, stats) else {
            stats.add(&stats.unplaced_events, 1);
            stats.add(&stats.unplaced_bytes, ev.len as u64);
            return;
        };
        let ts = ev.mono_ns as i64 + self.mono_to_real;
        if !self.conns.contains_key(&b.key) {
            if self.conns.len() >= MAX_CONNS {
                stats.add(&stats.conns_over_limit, 1);
                return;
            }
            stats.add(&stats.conns, 1);
            let c = Conn { views: [None, None], orig_proc: None, resp_proc: None, last_ns: ts, claimed: false };
            self.conns.insert(b.key, c);
        }
        let owner = self.owner(ev.tgid, &ev.comm);
        let Some(c) = self.conns.get_mut(&b.key) else { return };
        c.last_ns = c.last_ns.max(ts);
        let proc = if b.server { &mut c.resp_proc } else { &mut c.orig_proc };
        if proc.is_none() {
            *proc = owner;
        }
        let side = if b.server { SERVER } else { CLIENT };
        let v = c.views[side].get_or_insert(View { id: (ev.tgid, ev.ssl), parsing: Parsing::Detecting(Hold::default()), last_mono: 0 });
        if v.id != (ev.tgid, ev.ssl) {
            // A second process (or SSL) on the same end: one view is parsed.
            stats.add(&stats.other_end_events, 1);
            return;
        }
        let server = b.server;
        let dir_of = |read: bool| if read != server { Dir::ToClient } else { Dir::ToServer };
        let dir = dir_of(ev.dir == DIR_READ);
        let scratch = &mut self.scratch;
        // Bytes lost before this event (ring full), then this event.
        for (lost, read) in [(ev.lost_read, true), (ev.lost_write, false)] {
            if lost > 0 {
                stats.add(&stats.gaps, 1);
                stats.add(&stats.gap_bytes, lost);
                match &mut v.parsing {
                    Parsing::On(p) => p.gap(dir_of(read), ts, lost, scratch),
                    Parsing::Detecting(hold) => hold.drop_held(),
                    Parsing::Off => {}
                }
            }
        }
        if ev.mono_ns < v.last_mono {
            // Out of order: its bytes belong before bytes already parsed.
            stats.add(&stats.out_of_order, 1);
            stats.add(&stats.gaps, 1);
            stats.add(&stats.gap_bytes, ev.len as u64);
            match &mut v.parsing {
                Parsing::On(p) => p.gap(dir, ts, ev.len as u64, scratch),
                Parsing::Detecting(hold) => hold.drop_held(),
                Parsing::Off => {}
            }
        } else {
            v.last_mono = ev.mono_ns;
            if let Parsing::Detecting(hold) = &mut v.parsing {
                let socket = self.source == TxSource::Socket;
                if hold.dir != Some(dir) {
                    hold.drop_held();
                    hold.dir = Some(dir);
                }
                // The held bytes and this event's as one message, from the
                // first held event on, or from a later one (the earlier
                // ones were no message's start); failing that, this
                // event's alone.
                let mut held = None;
                let mut parser = None;
                if !hold.events.is_empty() {
                    let n = ev.data.len().min(HOLD_BYTES.saturating_sub(hold.bytes.len()));
                    hold.bytes.extend_from_slice(&ev.data[..n]);
                    let mut at = 0;
                    for (i, &(_, len)) in hold.events.iter().enumerate() {
                        parser = parser_for(&self.cfg, !socket, dir, &hold.bytes[at..]);
                        if parser.is_some() {
                            held = Some((i, at));
                            break;
                        }
                        at += len as usize;
                    }
                    hold.bytes.truncate(hold.bytes.len() - n);
                }
                if parser.is_none() {
                    parser = parser_for(&self.cfg, !socket, dir, ev.data);
                }
                v.parsing = match parser {
                    Some(mut p) => {
                        stats.add(&stats.parsed_conns, 1);
                        if let (Some(claims), false) = (&self.claims, c.claimed) {
                            claims.claim(b.key.tuple(), ts);
                            c.claimed = true;
                        }
                        // The held events the message starts in first, as
                        // they came.
                        if let Some((first, mut at)) = held {
                            for &(t, n) in &hold.events[first..] {
                                p.data(dir, t, &hold.bytes[at..at + n as usize], scratch);
                                at += n as usize;
                            }
                        }
                        Parsing::On(Box::new(p))
                    }
                    // The socket's first event of a connection names its
                    // protocol, or the packets keep it.
                    None if socket || hold.tries + 1 >= DETECT_TRIES => {
                        stats.add(&stats.undetected_conns, 1);
                        Parsing::Off
                    }
                    None => {
                        hold.tries += 1;
                        let whole = ev.data.len() as u64 == ev.len as u64;
                        if whole && hold.bytes.len() + ev.data.len() <= HOLD_BYTES {
                            hold.bytes.extend_from_slice(ev.data);
                            hold.events.push((ts, ev.data.len() as u32));
                        } else {
                            hold.drop_held();
                        }
                        Parsing::Detecting(std::mem::take(hold))
                    }
                };
            }
            if let Parsing::On(p) = &mut v.parsing {
                p.data(dir, ts, ev.data, scratch);
                let missing = (ev.len as u64).saturating_sub(ev.data.len() as u64);
                if missing > 0 {
                    stats.add(&stats.truncated, 1);
                    stats.add(&stats.gaps, 1);
                    stats.add(&stats.gap_bytes, missing);
                    p.gap(dir, ts, missing, scratch);
                }
            }
        }
        self.emit(b.key, side);
    }

    /// Where the event's `SSL` is: the socket its call went through, or
    /// (a call served from OpenSSL's buffer makes no system call) where the
    /// same `SSL` was last. An `SSL` moved to another socket (reused) is
    /// bound again.
    fn bind(&mut self, ev: &Event, stats: &Stats) -> Option<Binding> {
        let id = (ev.tgid, ev.ssl);
        let Some(s) = ev.sock else {
            let b = self.ssls.get(&id).copied();
            if b.is_none() {
                // An fd that the program could not follow is not a TCP
                // socket (a pipe, a file, a UNIX socket).
                stats.add(if ev.fd >= 0 { &stats.not_socket } else { &stats.no_fd }, 1);
            }
            return b;
        };
        if let Some(b) = self.ssls.get(&id) {
            if b.sock == s || (s.local_port == 0 && b.sock.unbound() == s) {
                return Some(*b);
            }
        }
        if s.local_port == 0 {
            // A socket the connection's end closed under it (a reset: see
            // `Sock::unbound`), its `SSL` not seen on it before: which
            // connection it was is not known.
            stats.add(&stats.closed_socket, 1);
            return None;
        }
        let server = self.roles.server(ev.tgid, &s);
        let b = Binding { sock: s, key: ConnKey::of(&s, server), server };
        self.ssls.insert(id, b);
        Some(b)
    }

    /// The process's owner fields, read once; a process already gone is
    /// named by the `comm` its event carries.
    fn owner(&mut self, pid: u32, comm: &[u8; 16]) -> Proc {
        if let Some(o) = self.owners.get(&pid) {
            return o.clone();
        }
        let o = wirelog_procs::read_owner(pid, &mut self.users).unwrap_or_else(|| {
            let end = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
            ProcOwner { pid, name: String::from_utf8_lossy(&comm[..end]).into_owned(), ..ProcOwner::default() }
        });
        let o = Some(Arc::new(o));
        self.owners.insert(pid, o.clone());
        o
    }

    /// Transactions the parser made wait for the next tick.
    fn emit(&mut self, key: ConnKey, side: usize) {
        self.ready.extend(self.scratch.drain(..).map(|tx| (key, side, tx)));
    }

    /// The transactions made since the last tick, as records of their
    /// connections with the processes known now; the server's view only
    /// where no client was seen.
    fn flush(&mut self, out: &mut Vec<TxRecord>, stats: &Stats) {
        self.flush_some(out, stats, true);
    }

    /// The client views' transactions go at once (the server reads a
    /// request before it answers, so its process is known by then); the
    /// servers' wait for the tick.
    pub fn flush_clients(&mut self, out: &mut Vec<TxRecord>, stats: &Stats) {
        if self.ready.iter().any(|r| r.1 == CLIENT) {
            self.flush_some(out, stats, false);
        }
    }

    fn flush_some(&mut self, out: &mut Vec<TxRecord>, stats: &Stats, all: bool) {
        let ready = std::mem::take(&mut self.ready);
        for (key, side, tx) in ready {
            if !all && side == SERVER {
                self.ready.push((key, side, tx));
                continue;
            }
            let c = self.conns.get(&key);
            if side == SERVER && c.is_some_and(|c| c.views[CLIENT].is_some()) {
                stats.add(&stats.server_view_txs, 1);
                continue;
            }
            let (orig_proc, resp_proc) = c.map_or((None, None), |c| (c.orig_proc.clone(), c.resp_proc.clone()));
            out.push(TxRecord {
                // Replaced by the connection's own when the join finds it.
                uid: self.uids.next_uid(),
                orig_h: IpAddr16(key.orig),
                orig_p: key.orig_port,
                resp_h: IpAddr16(key.resp),
                resp_p: key.resp_port,
                transport: Proto::Tcp,
                protocol: tx.detail.protocol(),
                tx,
                orig_proc,
                resp_proc,
                source: self.source,
                sample_weight: 1,
            });
        }
    }

    /// Time passed (about once a second, `now_ns` the wall clock): parsers
    /// expire requests without answer; idle connections are finished and
    /// forgotten, with what the caches held for them.
    pub fn tick(&mut self, now_ns: i64, out: &mut Vec<TxRecord>, stats: &Stats) {
        self.mono_to_real = clock_offset();
        self.each_parser(|p, idle, scratch| if idle { p.finish(now_ns, scratch) } else { p.expire(now_ns, scratch) }, now_ns);
        self.flush(out, stats);
        let claims = self.claims.as_deref();
        self.conns.retain(|k, c| {
            let keep = now_ns - c.last_ns <= IDLE_NS;
            if let (false, true, Some(claims)) = (keep, c.claimed, claims) {
                claims.end(k.tuple(), c.last_ns);
            }
            keep
        });
        if let Some(claims) = claims {
            claims.prune(now_ns);
        }
        self.ssls.retain(|_, b| self.conns.contains_key(&b.key));
        // Owners are read again for processes seen after this.
        if self.owners.len() > 4096 {
            self.owners.clear();
        }
    }

    /// The end: every connection finished.
    pub fn finish(&mut self, now_ns: i64, out: &mut Vec<TxRecord>, stats: &Stats) {
        self.each_parser(|p, _, scratch| p.finish(now_ns, scratch), i64::MAX);
        self.flush(out, stats);
        if let Some(claims) = &self.claims {
            for (k, c) in self.conns.iter().filter(|(_, c)| c.claimed) {
                claims.end(k.tuple(), c.last_ns);
            }
        }
        self.conns.clear();
    }

    /// Runs `f` on each view's parser (with whether its connection has been
    /// idle past [`IDLE_NS`] at `now_ns`), collecting what it emits.
    fn each_parser(&mut self, mut f: impl FnMut(&mut ConnParser, bool, &mut Vec<Transaction>), now_ns: i64) {
        let keys: Vec<ConnKey> = self.conns.keys().copied().collect();
        for k in keys {
            for side in [CLIENT, SERVER] {
                let Some(c) = self.conns.get_mut(&k) else { continue };
                let idle = now_ns.saturating_sub(c.last_ns) > IDLE_NS;
                if let Some(View { parsing: Parsing::On(p), .. }) = &mut c.views[side] {
                    f(p, idle, &mut self.scratch);
                }
                self.emit(k, side);
            }
        }
    }
}

/// CLOCK_REALTIME - CLOCK_MONOTONIC now, in ns.
pub fn clock_offset() -> i64 {
    let now = |clock| {
        let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes one timespec we own.
        unsafe { libc::clock_gettime(clock, &mut t) };
        t.tv_sec * 1_000_000_000 + t.tv_nsec
    };
    let m1 = now(libc::CLOCK_MONOTONIC);
    let r = now(libc::CLOCK_REALTIME);
    let m2 = now(libc::CLOCK_MONOTONIC);
    r - (m1 + (m2 - m1) / 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirelog_parse::TxStatus;
    use wirelog_record::Detail;

    /// A MySQL packet: 3-byte length, sequence id, payload.
    fn pkt(seq: u8, payload: &[u8]) -> Vec<u8> {
        let mut p = (payload.len() as u32).to_le_bytes()[..3].to_vec();
        p.push(seq);
        p.extend_from_slice(payload);
        p
    }

    /// The handshake response that opens a MySQL connection's plaintext
    /// inside TLS (sequence id 2: greeting and SSL request went before),
    /// user `w`, database `shop`.
    fn login_in_tls() -> Vec<u8> {
        // PROTOCOL_41, SSL, SECURE_CONNECTION, CONNECT_WITH_DB, PLUGIN_AUTH.
        let caps: u32 = 0x200 | 0x800 | 0x8000 | 0x8 | 0x8_0000;
        let mut b = caps.to_le_bytes().to_vec();
        b.extend((1u32 << 24).to_le_bytes());
        b.push(45);
        b.extend([0u8; 23]);
        b.extend(b"w\0");
        b.push(20);
        b.extend([7u8; 20]);
        b.extend(b"shop\0mysql_native_password\0");
        pkt(2, &b)
    }

    /// A server's view: its calls read from a remote client (port 40000)
    /// on its port 3306, in a namespace no process here is in (the ports
    /// decide the roles).
    fn event<'a>(t: u64, read: bool, data: &'a [u8]) -> Event<'a> {
        let sock = Sock { netns: 1, local: [1; 16], local_port: 3306, remote: [2; 16], remote_port: 40000 };
        Event {
            mono_ns: t,
            tgid: u32::MAX,
            ssl: 7,
            fd: 5,
            dir: if read { DIR_READ } else { crate::programs::DIR_WRITE },
            socket: false,
            len: data.len() as u32,
            lost_read: 0,
            lost_write: 0,
            sock: Some(sock),
            comm: *b"mariadbd\0\0\0\0\0\0\0\0",
            data,
        }
    }

    fn commands(txs: &[TxRecord]) -> Vec<(&str, Option<&str>, Option<&str>)> {
        txs.iter()
            .map(|r| match &r.tx.detail {
                Detail::Mysql(m) => (m.command, m.query.as_deref(), m.user()),
                d => panic!("not MySQL: {d:?}"),
            })
            .collect()
    }

    /// The server's calls (`reads` splits each packet it reads into its
    /// 4-byte header and its body, as mariadbd does) on a MySQL connection
    /// inside TLS: login, a query and its OK.
    fn server_view(split: bool) -> (Vec<TxRecord>, Stats) {
        let ok = |seq| pkt(seq, &[0, 0, 0, 2, 0, 0, 0]);
        let mut query = vec![3];
        query.extend(b"do 1");
        let calls: Vec<(bool, Vec<u8>)> = vec![(true, login_in_tls()), (false, ok(3)), (true, pkt(0, &query)), (false, ok(1))];
        let mut s = Streams::new(ParseConfig::default());
        let stats = Stats::default();
        let mut t = 1_000;
        for (read, bytes) in &calls {
            let pieces = if *read && split { vec![&bytes[..4], &bytes[4..]] } else { vec![&bytes[..]] };
            for piece in pieces {
                t += 1_000;
                s.event(&event(t, *read, piece), &stats);
            }
        }
        let mut out = Vec::new();
        s.finish(i64::MAX, &mut out, &stats);
        (out, stats)
    }

    /// Two clients (two processes, ports 40000 and 40002) each send a
    /// request to port 8443 and read the server's response only after the
    /// server's reset took their local port back (read as 0, as gnutls-cli
    /// does after nginx's reset): each response is its own connection's,
    /// not a third connection's (where the second would have been "a second
    /// process on an end"). A reset socket whose `SSL` was never seen
    /// places nothing, counted.
    #[test]
    fn a_response_read_after_a_reset_stays_on_its_connection() {
        let mut s = Streams::new(ParseConfig::default());
        let stats = Stats::default();
        let client = |t: u64, tgid: u32, port: u16, read: bool, data: &'static [u8]| Event {
            tgid,
            ssl: 9,
            comm: *b"gnutls-cli\0\0\0\0\0\0",
            sock: Some(Sock { netns: 1, local: [2; 16], local_port: port, remote: [1; 16], remote_port: 8443 }),
            ..event(t, read, data)
        };
        let req: &[u8] = b"GET /small HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
        let resp: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
        s.event(&client(1_000, 100, 40000, false, req), &stats);
        s.event(&client(2_000, 101, 40002, false, req), &stats);
        s.event(&client(3_000, 100, 0, true, resp), &stats);
        s.event(&client(4_000, 101, 0, true, resp), &stats);
        // Another process's reset socket, its SSL never seen.
        s.event(&client(5_000, 102, 0, true, resp), &stats);
        let mut out = Vec::new();
        s.finish(i64::MAX, &mut out, &stats);
        let g = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
        let mut got: Vec<(u16, TxStatus)> = out.iter().map(|r| (r.orig_p, r.tx.status)).collect();
        got.sort_by_key(|g| g.0);
        assert_eq!(got, [(40000, TxStatus::Ok), (40002, TxStatus::Ok)], "{out:#?}");
        assert_eq!((g(&stats.conns), g(&stats.other_end_events)), (2, 0));
        assert_eq!((g(&stats.unplaced_events), g(&stats.closed_socket)), (1, 1));
    }

    #[test]
    fn a_login_read_header_then_body_is_detected_as_one_message() {
        for split in [false, true] {
            let (out, stats) = server_view(split);
            assert_eq!(commands(&out), [("login", None, Some("w")), ("query", Some("do 1"), Some("w"))], "split {split}: {out:#?}");
            assert_eq!(stats.parsed_conns.load(std::sync::atomic::Ordering::Relaxed), 1);
            assert_eq!(stats.undetected_conns.load(std::sync::atomic::Ordering::Relaxed), 0);
            // The held header is parsed with its own time: the login's
            // request runs from it to its body, all its bytes counted.
            let req = out[0].tx.request.expect("the login's request");
            assert_eq!(req.bytes, login_in_tls().len() as u64, "{req:?}");
            assert_eq!(req.first_ns < req.last_ns, split, "{req:?}");
        }
    }

    /// Held bytes that start no message do not hide the message held
    /// after them; bytes in the other direction are not held with them.
    #[test]
    fn held_bytes_that_are_no_message_leave_the_next_event_alone() {
        let mut s = Streams::new(ParseConfig::default());
        let stats = Stats::default();
        let login = login_in_tls();
        s.event(&event(1_000, false, b"\x09\x09"), &stats);
        s.event(&event(2_000, true, b"\x01\x02\x03"), &stats);
        s.event(&event(3_000, true, &login[..4]), &stats);
        s.event(&event(4_000, true, &login[4..]), &stats);
        s.event(&event(5_000, false, &pkt(3, &[0, 0, 0, 2, 0, 0, 0])), &stats);
        let mut out = Vec::new();
        s.finish(i64::MAX, &mut out, &stats);
        assert_eq!(commands(&out), [("login", None, Some("w"))], "{out:#?}");
    }
}
