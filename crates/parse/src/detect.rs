//! Which protocol a connection carries: by server port first, then by the
//! first bytes of a direction (so MySQL on 3307 or HTTP on 8080 is found).
//!
//! Each protocol's module has its content probe (`http::probe`, ...: is
//! this protocol X, or not for it, or X's server speaking first); [`probe`]
//! lists them, [`PROBE_ORDER`] says which is tried first, and [`Detection`]
//! is a connection's progress (one look per direction), so the tracker only
//! acts on the answer: start a parser, or flip the roles.

use crate::{Dir, Protocol};

/// Server ports per protocol (configurable; defaults from [`Protocol::default_ports`]).
#[derive(Clone)]
pub struct PortMap {
    entries: Vec<(u16, Protocol)>,
    /// A bit per port: set when `entries` holds the port. The tracker asks
    /// for every packet of a connection with no parser yet, and most ports
    /// are no protocol's: those are answered here, without the scan.
    any: Box<[u64; 1024]>,
}

/// The entries only: the bitmap is derived from them (1,024 words).
impl std::fmt::Debug for PortMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PortMap").field("entries", &self.entries).finish_non_exhaustive()
    }
}

impl Default for PortMap {
    fn default() -> Self {
        let mut m = PortMap::empty();
        for p in Protocol::ALL {
            m.add(p, p.default_ports());
        }
        m
    }
}

impl PortMap {
    pub fn empty() -> Self {
        PortMap {
            entries: Vec::new(),
            any: Box::new([0; 1024]),
        }
    }

    /// Replaces the ports of `proto` with `ports`.
    pub fn set(&mut self, proto: Protocol, ports: &[u16]) {
        self.entries.retain(|(_, p)| *p != proto);
        self.any.fill(0);
        for &(port, _) in &self.entries {
            self.any[usize::from(port >> 6)] |= 1 << (port & 63);
        }
        self.add(proto, ports);
    }

    fn add(&mut self, proto: Protocol, ports: &[u16]) {
        for &port in ports {
            self.entries.push((port, proto));
            self.any[usize::from(port >> 6)] |= 1 << (port & 63);
        }
    }

    /// The first protocol given `port` (the defaults' order, then each `set` in turn).
    pub fn get(&self, port: u16) -> Option<Protocol> {
        if self.any[usize::from(port >> 6)] & (1 << (port & 63)) == 0 {
            return None;
        }
        self.entries.iter().find(|(p, _)| *p == port).map(|(_, proto)| *proto)
    }
}

/// What one protocol's probe says of the first bytes of one direction
/// (the model is Retina's `ProbeResult`; written here). There is no "not
/// sure yet": each direction is looked at once, at its first payload,
/// because a parser starts at the bytes it is given and would miss what a
/// later look passed over; a protocol that cannot tell from those bytes
/// says `NotForUs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// This protocol's first message, sent the way the tracker has the roles.
    Certain,
    /// This protocol's *server greeting*, sent by the originator: the
    /// capture missed the handshake and the server spoke first, so the
    /// roles are backwards (only MySQL/MariaDB has a greeting).
    Reversed,
    /// Not this protocol.
    NotForUs,
}

impl Probe {
    /// `Certain` when a protocol's signature matched, else `NotForUs`.
    pub fn certain_if(matched: bool) -> Probe {
        if matched {
            Probe::Certain
        } else {
            Probe::NotForUs
        }
    }
}

/// Each protocol's content probe, in its own module. The one list of them:
/// an exhaustive match, so a new row in the protocol table does not build
/// until its probe is named here.
pub fn probe(protocol: Protocol, dir: Dir, data: &[u8]) -> Probe {
    match protocol {
        Protocol::Http => crate::http::probe(dir, data),
        Protocol::Mysql => crate::mysql::probe(dir, data),
        Protocol::Pgsql => crate::pgsql::probe(dir, data),
        Protocol::Redis => crate::redis::probe(dir, data),
        // Found by port only: a DNS message over TCP has no signature
        // specific enough to claim an unknown port's bytes.
        Protocol::Dns => Probe::NotForUs,
        Protocol::Tls => crate::tls::probe(dir, data),
        Protocol::Memcached => crate::memcached::probe(dir, data),
        Protocol::Mongodb => crate::mongodb::probe(dir, data),
        Protocol::Mqtt => crate::mqtt::probe(dir, data),
        Protocol::Amqp => crate::amqp::probe(dir, data),
        Protocol::Kafka => crate::kafka::probe(dir, data),
        Protocol::Cassandra => crate::cassandra::probe(dir, data),
        // The HTTP/2 preface is HTTP's signature (its parser hands over);
        // gRPC is told from HTTP/2 per stream, by content type.
        Protocol::Grpc => Probe::NotForUs,
    }
}

/// The order the probes are tried in, from the most specific signature to
/// the least: a ClientHello record's first bytes could pass for a MySQL
/// packet header, a PostgreSQL startup message for one too; a MongoDB
/// header (length, ids, a known opcode) is checked before MySQL's, whose
/// 3-byte length a MongoDB length can pass for. Every protocol
/// once (a test checks it; the length follows the table).
pub const PROBE_ORDER: [Protocol; Protocol::ALL.len()] =
    [Protocol::Tls, Protocol::Pgsql, Protocol::Mongodb, Protocol::Mysql, Protocol::Http, Protocol::Redis, Protocol::Dns, Protocol::Memcached, Protocol::Mqtt, Protocol::Amqp, Protocol::Kafka, Protocol::Grpc, Protocol::Cassandra];

/// What the probes together say of the first bytes of one direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detected {
    /// The first protocol (in [`PROBE_ORDER`]) that was certain.
    Protocol(Protocol),
    /// None was certain, and these bytes are this protocol's server
    /// greeting sent by the originator: flip the roles, then look again
    /// from the server's side.
    Reversed(Protocol),
    /// No protocol's.
    Nothing,
}

/// Runs every probe on `data`, the first bytes seen in `dir`.
pub fn by_content(dir: Dir, data: &[u8]) -> Detected {
    if data.is_empty() {
        return Detected::Nothing;
    }
    let mut reversed = None;
    for p in PROBE_ORDER {
        match probe(p, dir, data) {
            Probe::Certain => return Detected::Protocol(p),
            Probe::Reversed => reversed = reversed.or(Some(p)),
            Probe::NotForUs => {}
        }
    }
    reversed.map_or(Detected::Nothing, Detected::Reversed)
}

/// A connection's content detection so far, two bytes in the tracker's
/// connection entry: which directions' first payloads the parsers' probes
/// looked at, whether the service signatures are still matched on the
/// stream (the tracker then holds the connection's
/// [`crate::services::SigStream`]) or are done, and whether detection is
/// over (parsing is off, nothing can be found, or the protocol is known);
/// bits 4-7 hold a service confirmed without a parser
/// ([`crate::services::Service`]). (Two bytes: the connection entry had
/// them as padding.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Detection(u16);

const LOOKED_TO_SERVER: u16 = 1;
const LOOKED_TO_CLIENT: u16 = 2;
const OVER: u16 = 4;
/// Roles were flipped by a service's rule (NTP's), which Zeek does once.
const SERVICE_FLIPPED: u16 = 8;
const SERVICE_SHIFT: u16 = 4;
/// The tracker holds a `SigStream` for the connection.
const SIG_STREAM: u16 = 1 << 8;
/// Signature matching is over (found, bound reached, or no room).
const SIG_DONE: u16 = 1 << 9;

impl Detection {
    /// Detection that is over before it began (parsing is off).
    pub const OVER: Detection = Detection(OVER);

    /// Nothing more to detect: the connection's bytes are not wanted for
    /// detection (they may still be for its parser, if it has one).
    pub fn is_over(self) -> bool {
        self.0 & OVER != 0
    }

    pub fn end(&mut self) {
        self.0 |= OVER;
    }

    /// Detection from the start again (the roles were flipped), keeping a
    /// service already confirmed.
    pub fn restart(&mut self) {
        self.0 &= (0xf << SERVICE_SHIFT) | SERVICE_FLIPPED;
    }

    /// A service's rule flipped the roles before.
    pub fn service_flipped(self) -> bool {
        self.0 & SERVICE_FLIPPED != 0
    }

    /// Notes that a service's rule flipped the roles; false if one did before.
    pub fn service_flip(&mut self) -> bool {
        let first = self.0 & SERVICE_FLIPPED == 0;
        self.0 |= SERVICE_FLIPPED;
        first
    }

    /// Records a service confirmed without a parser.
    pub fn confirm(&mut self, s: crate::services::Service) {
        self.0 = (self.0 & !(0xf << SERVICE_SHIFT)) | ((s as u16) << SERVICE_SHIFT);
    }

    /// The service confirmed without a parser, if any.
    pub fn service(self) -> Option<crate::services::Service> {
        crate::services::Service::from_code((self.0 >> SERVICE_SHIFT) as u8 & 0xf)
    }

    /// Looks at `data`, a payload of `dir`, with the parsers' probes if it
    /// is that direction's first look; [`Detected::Nothing`] for a
    /// direction looked at before. What the probes do not claim is for the
    /// service signatures, matched on the stream by the caller
    /// ([`crate::services::SigStream`]); detection is over once both
    /// directions were looked at in vain and the signatures are done
    /// ([`Detection::signatures_done`]).
    pub fn look(&mut self, dir: Dir, data: &[u8]) -> Detected {
        let bit = match dir {
            Dir::ToServer => LOOKED_TO_SERVER,
            Dir::ToClient => LOOKED_TO_CLIENT,
        };
        if self.0 & bit != 0 {
            return Detected::Nothing;
        }
        self.0 |= bit;
        by_content(dir, data)
    }

    /// Both directions' first payloads were looked at.
    pub fn looked_both(self) -> bool {
        self.0 & (LOOKED_TO_SERVER | LOOKED_TO_CLIENT) == LOOKED_TO_SERVER | LOOKED_TO_CLIENT
    }

    /// The caller holds a signature stream for the connection.
    pub fn has_sig_stream(self) -> bool {
        self.0 & SIG_STREAM != 0
    }

    pub fn set_sig_stream(&mut self, on: bool) {
        if on {
            self.0 |= SIG_STREAM;
        } else {
            self.0 &= !SIG_STREAM;
        }
    }

    /// Signature matching is over for this connection.
    pub fn signatures_done(self) -> bool {
        self.0 & SIG_DONE != 0
    }

    /// Ends signature matching (the stream is dropped by the caller), and
    /// detection with it once both directions were looked at.
    pub fn end_signatures(&mut self) {
        self.0 = (self.0 | SIG_DONE) & !SIG_STREAM;
        if self.looked_both() {
            self.0 |= OVER;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_map_answers_as_the_scan_does() {
        // Every port, default map and after `set`: the bitmap's answer is
        // the first entry's, as a plain scan of the entries gives it.
        let scan = |m: &PortMap, port: u16| m.entries.iter().find(|(p, _)| *p == port).map(|(_, proto)| *proto);
        let mut m = PortMap::default();
        assert_eq!(m.get(53), Some(Protocol::Dns));
        assert_eq!(m.get(3306), Some(Protocol::Mysql));
        assert_eq!(m.get(5000), None);
        m.set(Protocol::Mysql, &[13306, 53]);
        assert_eq!((m.get(3306), m.get(13306), m.get(53)), (None, Some(Protocol::Mysql), Some(Protocol::Dns)));
        m.set(Protocol::Dns, &[]);
        assert_eq!(m.get(53), Some(Protocol::Mysql));
        for port in 0..=u16::MAX {
            assert_eq!(m.get(port), scan(&m, port), "port {port}");
        }
        let e = PortMap::empty();
        assert!((0..=u16::MAX).all(|p| e.get(p).is_none()));
    }

    #[test]
    fn greeting_is_not_a_request() {
        // MariaDB 10.11's handshake v10 as captured (scramble bytes zeroed).
        let mut g = vec![0x0a];
        g.extend_from_slice(b"5.5.5-10.11.6-MariaDB-0+deb12u1\0");
        g.extend_from_slice(&[0x08, 0, 0, 0]);
        g.extend_from_slice(&[0x41; 8]);
        g.push(0);
        g.extend_from_slice(&[0xfe, 0xf7, 0x2d, 0x02, 0x00, 0xff, 0x81, 0x15]);
        g.extend_from_slice(&[0; 10]);
        g.extend_from_slice(&[0x42; 12]);
        g.push(0);
        g.extend_from_slice(b"mysql_native_password\0");
        let mut pkt = (g.len() as u32).to_le_bytes()[..3].to_vec();
        pkt.push(0);
        pkt.extend_from_slice(&g);
        assert_eq!(by_content(Dir::ToServer, &pkt), Detected::Reversed(Protocol::Mysql));
        assert_eq!(by_content(Dir::ToClient, &pkt), Detected::Protocol(Protocol::Mysql));
        // A client's first query is no greeting.
        let q = [6, 0, 0, 0, 3, b's', b'e', b'l', b'e', b'c'];
        assert_eq!(by_content(Dir::ToServer, &q), Detected::Protocol(Protocol::Mysql));
        assert_eq!(by_content(Dir::ToServer, b"GET / HTTP/1.1\r\n\r\n"), Detected::Protocol(Protocol::Http));
        assert_eq!(by_content(Dir::ToServer, b"\x00\x01junk"), Detected::Nothing);
    }

    #[test]
    fn every_protocol_is_probed_once() {
        let mut order = PROBE_ORDER.to_vec();
        order.sort_by_key(|p| p.name());
        order.dedup();
        assert_eq!(order.len(), Protocol::ALL.len(), "{PROBE_ORDER:?}");
    }

    /// One look per direction; after both looked in vain and the
    /// signatures are done, detection is over; a direction looked at
    /// before is not looked at again (its later bytes are not the start
    /// of a message).
    #[test]
    fn each_direction_is_looked_at_once() {
        let mut d = Detection::default();
        assert_eq!(d.look(Dir::ToServer, b"\x00junk"), Detected::Nothing);
        assert!(!d.is_over());
        assert_eq!(d.look(Dir::ToServer, b"GET / HTTP/1.1\r\n\r\n"), Detected::Nothing, "looked at already");
        assert_eq!(d.look(Dir::ToClient, b"HTTP/1.1 200 OK\r\n"), Detected::Protocol(Protocol::Http));
        assert!(!d.is_over());
        let mut d = Detection::default();
        d.look(Dir::ToClient, b"\x00junk");
        d.set_sig_stream(true);
        d.end_signatures();
        assert!(!d.is_over() && d.signatures_done() && !d.has_sig_stream(), "one direction looked at");
        d.look(Dir::ToServer, b"\x00junk");
        assert!(d.looked_both() && !d.is_over());
        d.end_signatures();
        assert!(d.is_over());
        assert!(Detection::OVER.is_over() && !Detection::default().is_over());
    }

    #[test]
    fn client_hello_is_tls() {
        // A ClientHello record header (TLS 1.0 record version, as clients
        // send) and the handshake type; the body does not matter here.
        let mut ch = vec![22, 3, 1, 0, 0x60, 1, 0, 0, 0x5c, 3, 3];
        ch.extend_from_slice(&[0; 32]);
        assert_eq!(by_content(Dir::ToServer, &ch), Detected::Protocol(Protocol::Tls));
        // A server's first record is not a client's.
        assert_eq!(by_content(Dir::ToClient, &ch), Detected::Nothing);
        ch[5] = 2;
        assert_eq!(by_content(Dir::ToServer, &ch), Detected::Nothing);
        // Not a record version.
        let mut bad = ch.clone();
        bad[5] = 1;
        bad[1] = 4;
        assert_eq!(by_content(Dir::ToServer, &bad), Detected::Nothing);
    }
}
