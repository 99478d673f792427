//! Memcached over UDP (protocol.txt, "UDP protocol"): every datagram starts
//! with an 8-byte frame header (request id, sequence number, total
//! datagrams in this message, reserved; 16 bits each, big-endian), then a
//! part of a text or binary message. A request's response carries its
//! request id, and may span several datagrams (sequence 0 to total - 1,
//! arriving in any order); a client may have many requests out at once.
//!
//! Pairing is by request id: a message waits until all its datagrams are
//! in; a request is handed to the flow's [`MemcachedParser`] (which reads
//! text and binary messages as on TCP, into the same records) together
//! with its response, so responses that arrive out of order still answer
//! their own request. A request no response comes for (`noreply`, quiet
//! binary commands, a lost datagram) is handed over alone when it times
//! out or the flow ends, and recorded as the TCP parser records a request
//! without its answer.

use super::MemcachedParser;
use crate::{Dir, ParseConfig, ParseStats, StreamParser, TxSink};

/// The frame header's length.
const HEADER: usize = 8;

/// Messages being assembled or waiting for their answer, per flow.
const MAX_WAITING: usize = 256;

/// Bytes one message may hold while its datagrams come in (memcached
/// answers a large get in many datagrams); a larger one is counted, not
/// read.
const MAX_MESSAGE: usize = 1 << 20;

/// One message of one direction, by request id.
struct Message {
    id: u16,
    total: u16,
    /// Datagrams in, by sequence number: (time, payload after the header).
    parts: Vec<(u16, i64, Vec<u8>)>,
    bytes: usize,
    first_ns: i64,
}

impl Message {
    fn complete(&self) -> bool {
        self.parts.len() == usize::from(self.total)
    }

    /// What the message holds, for the memory budget: itself, its list of
    /// datagrams and their payloads.
    fn held_bytes(&self) -> usize {
        std::mem::size_of::<Message>()
            + self.parts.capacity() * std::mem::size_of::<(u16, i64, Vec<u8>)>()
            + self.parts.iter().map(|p| p.2.capacity()).sum::<usize>()
    }
}

/// Memcached datagrams of one UDP flow.
pub struct UdpMemcached {
    parser: MemcachedParser,
    /// Requests (complete or not) waiting for their responses.
    requests: Vec<Message>,
    /// Responses still missing datagrams.
    responses: Vec<Message>,
    /// `Message::held_bytes` summed over `requests` and `responses`, kept
    /// as messages come and go: asked at every datagram, it would be a
    /// walk of up to 2 x [`MAX_WAITING`] messages. (In the place of the
    /// timeout, now the parser's: the box charged per flow stays its size.)
    messages_bytes: usize,
    stats: ParseStats,
}

impl UdpMemcached {
    pub fn new(cfg: &ParseConfig) -> Self {
        UdpMemcached {
            parser: MemcachedParser::new(cfg),
            requests: Vec::new(),
            responses: Vec::new(),
            messages_bytes: 0,
            stats: ParseStats::default(),
        }
    }

    /// Heap bytes held beyond the fixed state: the requests and responses
    /// waiting for their other half or their datagrams, for the memory
    /// budget.
    pub fn held_bytes(&self) -> usize {
        self.spare_slots_bytes() + self.messages_bytes
    }

    /// The lists' slots not holding a message.
    fn spare_slots_bytes(&self) -> usize {
        (self.requests.capacity() - self.requests.len() + self.responses.capacity() - self.responses.len())
            * std::mem::size_of::<Message>()
    }

    /// [`UdpMemcached::held_bytes`] by a walk of every waiting message: the
    /// reference the running count is tested against.
    #[cfg(test)]
    fn held_bytes_walked(&self) -> usize {
        self.spare_slots_bytes() + self.requests.iter().chain(&self.responses).map(Message::held_bytes).sum::<usize>()
    }

    /// A message leaves the lists (answered, alone, expired, pushed out):
    /// what it held leaves the running count. Of the count alone, not of
    /// `self`: an expiry calls it while it takes messages out of a list.
    fn gone(messages_bytes: &mut usize, m: &Message) {
        *messages_bytes -= m.held_bytes();
    }

    /// One datagram of the flow, in `dir` (ToServer: to the Memcached port).
    pub fn datagram(&mut self, dir: Dir, ts_ns: i64, data: &[u8], out: &mut dyn TxSink) {
        let Some((h, payload)) = data.split_first_chunk::<HEADER>() else {
            self.stats.malformed += 1;
            self.stats.unparsed_bytes += data.len() as u64;
            return;
        };
        let (id, seq, total) = (u16::from_be_bytes([h[0], h[1]]), u16::from_be_bytes([h[2], h[3]]), u16::from_be_bytes([h[4], h[5]]));
        if total == 0 || seq >= total {
            self.stats.malformed += 1;
            self.stats.unparsed_bytes += data.len() as u64;
            return;
        }
        let list = match dir {
            Dir::ToServer => &mut self.requests,
            Dir::ToClient => &mut self.responses,
        };
        let at = match list.iter().position(|m| m.id == id && !(dir == Dir::ToServer && m.complete())) {
            Some(at) => at,
            None => {
                if list.len() >= MAX_WAITING {
                    let old = list.remove(0);
                    Self::gone(&mut self.messages_bytes, &old);
                    self.stats.unparsed_bytes += old.bytes as u64;
                    if dir == Dir::ToServer {
                        self.alone(old, out);
                    }
                }
                let list = match dir {
                    Dir::ToServer => &mut self.requests,
                    Dir::ToClient => &mut self.responses,
                };
                list.push(Message { id, total, parts: Vec::new(), bytes: 0, first_ns: ts_ns });
                self.messages_bytes += std::mem::size_of::<Message>();
                list.len() - 1
            }
        };
        let list = match dir {
            Dir::ToServer => &mut self.requests,
            Dir::ToClient => &mut self.responses,
        };
        let m = &mut list[at];
        if m.total != total || m.parts.iter().any(|p| p.0 == seq) || m.bytes + payload.len() > MAX_MESSAGE {
            // A repeated or inconsistent datagram, or a message too large.
            self.stats.malformed += 1;
            self.stats.unparsed_bytes += data.len() as u64;
            return;
        }
        m.bytes += payload.len();
        let (slots, part) = (m.parts.capacity(), payload.to_vec());
        self.messages_bytes += part.capacity();
        m.parts.push((seq, ts_ns, part));
        self.messages_bytes += (m.parts.capacity() - slots) * std::mem::size_of::<(u16, i64, Vec<u8>)>();
        if dir == Dir::ToClient && m.complete() {
            let resp = list.remove(at);
            Self::gone(&mut self.messages_bytes, &resp);
            self.answer(resp, out);
        }
    }

    /// A complete response: its request and it go to the parser.
    fn answer(&mut self, mut resp: Message, out: &mut dyn TxSink) {
        let Some(at) = self.requests.iter().position(|r| r.id == resp.id && r.complete()) else {
            // No request seen: the parser reports the response alone.
            self.feed(Dir::ToClient, &mut resp, out);
            return;
        };
        let mut req = self.requests.remove(at);
        Self::gone(&mut self.messages_bytes, &req);
        self.feed(Dir::ToServer, &mut req, out);
        self.feed(Dir::ToClient, &mut resp, out);
    }

    /// A request no response came for, handed over by itself.
    fn alone(&mut self, mut req: Message, out: &mut dyn TxSink) {
        if req.complete() {
            self.feed(Dir::ToServer, &mut req, out);
        } else {
            self.stats.unparsed_bytes += req.bytes as u64;
        }
    }

    /// The message's datagrams in sequence order; the first is fed at the
    /// earliest datagram's time and the last at the latest's, so the
    /// message spans the time its datagrams did, whatever their order.
    fn feed(&mut self, dir: Dir, m: &mut Message, out: &mut dyn TxSink) {
        m.parts.sort_by_key(|p| p.0);
        let first = m.parts.iter().map(|p| p.1).min().unwrap_or(0);
        let last = m.parts.iter().map(|p| p.1).max().unwrap_or(0);
        let n = m.parts.len();
        for (i, (_, ts, data)) in m.parts.iter().enumerate() {
            let ts = if i + 1 == n { last } else if i == 0 { first } else { (*ts).clamp(first, last) };
            self.parser.data(dir, ts, data, out);
        }
    }

    pub fn expire(&mut self, now_ns: i64, out: &mut dyn TxSink) {
        let timeout = self.parser.timeout_ns();
        let old = |m: &Message| now_ns - m.first_ns > timeout;
        if self.requests.iter().any(old) {
            let gone: Vec<Message> = self.requests.extract_if(.., |m| old(m)).collect();
            for m in gone {
                Self::gone(&mut self.messages_bytes, &m);
                self.alone(m, out);
            }
        }
        // A response whose datagrams were lost: not read.
        for m in self.responses.extract_if(.., |m| old(m)) {
            Self::gone(&mut self.messages_bytes, &m);
            self.stats.unparsed_bytes += m.bytes as u64;
        }
        self.parser.expire(now_ns, out);
    }

    pub fn finish(&mut self, ts_ns: i64, out: &mut dyn TxSink) {
        for m in std::mem::take(&mut self.requests) {
            self.alone(m, out);
        }
        for m in std::mem::take(&mut self.responses) {
            self.stats.unparsed_bytes += m.bytes as u64;
        }
        self.messages_bytes = 0;
        self.parser.finish(ts_ns, out);
    }

    pub fn stats(&self) -> ParseStats {
        let p = self.parser.stats();
        ParseStats {
            unparsed_bytes: p.unparsed_bytes + self.stats.unparsed_bytes,
            gaps: p.gaps + self.stats.gaps,
            resyncs: p.resyncs + self.stats.resyncs,
            malformed: p.malformed + self.stats.malformed,
            cut_bytes: p.cut_bytes + self.stats.cut_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::udp_datagrams;
    use crate::{Detail, Transaction, TxStatus};

    fn run(rel: &str) -> Vec<Transaction> {
        let mut flows: Vec<UdpMemcached> = Vec::new();
        let mut out = Vec::new();
        let mut last = 0;
        for d in udp_datagrams(&format!("packetbeat2/pcaps/memcache/{rel}"), &[11211]) {
            while flows.len() <= d.flow {
                flows.push(UdpMemcached::new(&ParseConfig::default()));
            }
            flows[d.flow].datagram(d.dir, d.ts_ns, &d.data, &mut out);
            last = d.ts_ns;
        }
        for f in &mut flows {
            f.finish(last, &mut out);
        }
        out
    }

    fn mc(t: &Transaction) -> &super::super::MemcachedTx {
        match &t.detail {
            Detail::Memcached(m) => m,
            _ => panic!("not memcached"),
        }
    }

    /// Packetbeat's UDP captures (requests only, or requests and their
    /// answers): every request a transaction.
    #[test]
    fn packetbeats_udp_captures() {
        let s = run("memcache_text_udp_single_store.pcap");
        assert_eq!(s.len(), 1, "{s:#?}");
        assert_eq!((mc(&s[0]).command, mc(&s[0]).protocol), ("set", "text"));
        let m = run("memcache_text_udp_multi_store.pcap");
        assert_eq!(m.iter().map(|t| mc(t).command).collect::<Vec<_>>(), ["set", "set", "set"], "{m:#?}");
        let b = run("memcache_bin_udp_counter_ops.pcap");
        assert_eq!(b.len(), 3, "{b:#?}");
        assert!(b.iter().all(|t| mc(t).protocol == "binary"));
    }

    fn dgram(id: u16, seq: u16, total: u16, body: &[u8]) -> Vec<u8> {
        [&id.to_be_bytes()[..], &seq.to_be_bytes(), &total.to_be_bytes(), &[0, 0], body].concat()
    }

    /// The running count of what the waiting messages hold is what a walk
    /// of them finds, after every datagram of a random mix: requests and
    /// responses of one or more datagrams (repeated, inconsistent, out of
    /// order, never completed), more ids than `MAX_WAITING` (the oldest
    /// pushed out), time jumps past the timeout (expiries), and the end.
    #[test]
    fn held_bytes_counted_as_it_goes_equals_the_walk() {
        let cfg = ParseConfig::default();
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut out = Vec::new();
        // Each path taken: messages pushed out, expired (requests and
        // responses apart: two loops in `expire`), answered.
        let (mut full, mut expired_requests, mut expired_responses, mut answered) = (0, 0, 0, 0);
        for round in 0..8 {
            let mut u = UdpMemcached::new(&cfg);
            let mut ts = 0i64;
            let ids = [16, 64, 400, 1000][round % 4];
            for i in 0..4_000 {
                let id = next(ids) as u16;
                let total = [1, 1, 2, 3][next(4) as usize];
                let seq = next(u64::from(total) + 1) as u16;
                let dir = if next(2) == 0 { Dir::ToServer } else { Dir::ToClient };
                let body = match (next(3), dir) {
                    (0, _) => vec![b'x'; next(300) as usize],
                    (_, Dir::ToServer) => b"get a\r\n".to_vec(),
                    (_, Dir::ToClient) => b"END\r\n".to_vec(),
                };
                ts += if next(2_000) == 0 { cfg.transaction_timeout_ns + 1 } else { next(1_000_000) as i64 };
                if next(50) == 0 {
                    u.datagram(dir, ts, &[1, 2, 3], &mut out);
                } else {
                    u.datagram(dir, ts, &dgram(id, seq, total, &body), &mut out);
                }
                assert_eq!(u.held_bytes(), u.held_bytes_walked(), "round {round}, datagram {i}");
                full += (u.requests.len() == MAX_WAITING || u.responses.len() == MAX_WAITING) as u32;
                answered += out.iter().filter(|t| t.response.is_some()).count();
                if next(20) == 0 {
                    let (requests, responses) = (u.requests.len(), u.responses.len());
                    u.expire(ts, &mut out);
                    expired_requests += requests - u.requests.len();
                    expired_responses += responses - u.responses.len();
                    assert_eq!(u.held_bytes(), u.held_bytes_walked(), "round {round}, expiry after {i}");
                }
                out.clear();
            }
            assert!(u.requests.len() + u.responses.len() > 0, "round {round}: nothing waited");
            u.finish(ts, &mut out);
            assert_eq!((u.messages_bytes, u.held_bytes()), (0, u.held_bytes_walked()), "round {round}");
        }
        assert!(
            full > 0 && expired_requests > 0 && expired_responses > 0 && answered > 0,
            "full {full}, expired requests {expired_requests}, responses {expired_responses}, answered {answered}"
        );
    }

    /// Two gets out at once, answered in the other order, the second in
    /// two datagrams that arrive last part first; a noreply set never
    /// answered.
    #[test]
    fn pairs_by_request_id_across_datagrams() {
        let mut u = UdpMemcached::new(&ParseConfig::default());
        let mut out = Vec::new();
        u.datagram(Dir::ToServer, 1, &dgram(1, 0, 1, b"get a\r\n"), &mut out);
        u.datagram(Dir::ToServer, 2, &dgram(2, 0, 1, b"get bb\r\n"), &mut out);
        u.datagram(Dir::ToServer, 3, &dgram(3, 0, 1, b"set c 0 0 1 noreply\r\nx\r\n"), &mut out);
        u.datagram(Dir::ToClient, 4, &dgram(2, 1, 2, b"yz\r\nEND\r\n"), &mut out);
        u.datagram(Dir::ToClient, 5, &dgram(2, 0, 2, b"VALUE bb 0 4\r\nwx"), &mut out);
        u.datagram(Dir::ToClient, 6, &dgram(1, 0, 1, b"END\r\n"), &mut out);
        u.datagram(Dir::ToClient, 7, &[1, 2, 3], &mut out);
        u.finish(8, &mut out);
        let got: Vec<_> = out.iter().map(|t| (mc(t).key.as_deref(), mc(t).result, t.status)).collect();
        assert_eq!(got, [(Some("bb"), Some("hit"), TxStatus::Ok), (Some("a"), Some("miss"), TxStatus::Ok), (Some("c"), None, TxStatus::NoResponse)], "{out:#?}");
        assert_eq!(mc(&out[0]).value_bytes, Some(4));
        assert_eq!((out[0].request.unwrap().first_ns, out[0].response.unwrap().first_ns, out[0].response.unwrap().last_ns), (2, 4, 5));
        assert_eq!(u.stats().malformed, 1);
    }
}
