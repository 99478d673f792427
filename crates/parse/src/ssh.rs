//! SSH named in conn.log as Zeek names it: both sides' version lines
//! (RFC 4253 §4.2, `SSH-protoversion-softwareversion`), then the binary
//! packets of the key exchange (RFC 4253 §6: `uint32 packet_length, byte
//! padding_length, byte msg_type, ...`) walked by their lengths until a
//! side sends SSH_MSG_NEWKEYS (21, RFC 4253 §7.3); SSH-1 (draft 1.5)
//! packets are walked the same way until SSH_CMSG_SESSION_KEY (3).
//!
//! That is where Zeek's SSH analyzer confirms the protocol
//! (`proc_newkeys`, src/analyzer/protocol/ssh/ssh-analyzer.pac:344, called
//! for `MSG_NEWKEYS` and `SSH_CMSG_SESSION_KEY` at lines 375-381); its
//! packets are framed by the version both sides agree on
//! (`update_version`, src/analyzer/protocol/ssh/ssh-protocol.pac:374, so a
//! capture of one side only never confirms), and nothing is analysed after
//! a gap (`SSH_Analyzer::DeliverStream`, src/analyzer/protocol/ssh/SSH.cc:35).
//! Nothing is buffered: only a packet's first bytes are kept while they
//! arrive, the rest is skipped by count.

use crate::{Dir, ParseStats, StreamParser, TxSink};

/// The protocol version a version line announces, as Zeek sorts them
/// (`update_version`): `SSH-2.x`, `SSH-1.99` (both), other `SSH-1.x`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SshVersion {
    V1,
    V199,
    V2,
}

impl SshVersion {
    /// The version of a line that starts with `SSH-`, None for any other
    /// line (or a version Zeek does not sort, such as `SSH-3.0`).
    pub fn of_line(line: &[u8]) -> Option<SshVersion> {
        let v = line.strip_prefix(b"SSH-")?;
        match v.first()? {
            b'2' => Some(SshVersion::V2),
            b'1' if v.get(1..4) == Some(b".99") => Some(SshVersion::V199),
            b'1' => Some(SshVersion::V1),
            _ => None,
        }
    }

    /// The version the connection speaks, given both sides' (RFC 4253
    /// §5.1: 1.99 speaks either; 1 and 2 cannot talk).
    fn agreed(a: SshVersion, b: SshVersion) -> Option<SshVersion> {
        use SshVersion::*;
        match (a, b) {
            (V199, V199) | (V2, V2) | (V199, V2) | (V2, V199) => Some(V2),
            (V1, V1) | (V1, V199) | (V199, V1) => Some(V1),
            (V1, V2) | (V2, V1) => None,
        }
    }
}

/// Longest run of lines a server may send before its version line (RFC
/// 4253 §4.2 allows other lines first) and longest version line looked
/// at; more is not SSH as far as this watcher goes.
const MAX_BANNER: usize = 8192;
/// Largest packet walked: RFC 4253 §6.1 has every implementation take
/// 35000 bytes; key-exchange packets (post-quantum ones included) are far
/// below this.
const MAX_PACKET: u32 = 256 * 1024;
/// Key-exchange bytes walked per direction before giving up on a NEWKEYS.
const MAX_KEX_BYTES: u64 = 1 << 20;
const MSG_NEWKEYS: u8 = 21;
const SSH1_CMSG_SESSION_KEY: u8 = 3;

#[derive(Clone, Copy, Debug)]
enum Side {
    /// Reading lines up to the version line: bytes of lines so far, and
    /// the current line's first bytes.
    Banner { seen: usize, line: [u8; 8], len: usize },
    /// Walking binary packets: the current packet's first bytes, and
    /// how many bytes of it are still to skip once its header is read.
    Packets { head: [u8; 13], have: usize, skip: u64, walked: u64 },
    /// Nothing more to read on this side.
    Done,
}

/// The TCP responder port Zeek's SSH analyzer is attached on: `SSH::ports`
/// (scripts/base/protocols/ssh/main.zeek:13, registered at line 142); on
/// other ports both sides' version lines attach it (its signatures,
/// scripts/base/protocols/ssh/dpd.sig).
pub const SSH_RESP_PORT: u16 = 22;

/// Where a watcher starts: at the connection's first bytes (by port), or
/// after one side's version line (by signature).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SshStart {
    AtStart,
    AfterVersion(Dir, SshVersion),
}

/// Watches a TCP connection for SSH's confirmation.
pub struct SshConn {
    side: [Side; 2],
    version: [Option<SshVersion>; 2],
    confirmed: bool,
    stopped: bool,
    stats: ParseStats,
}

fn idx(dir: Dir) -> usize {
    (dir == Dir::ToClient) as usize
}

impl SshConn {
    /// A watcher from the connection's start.
    pub fn new() -> Self {
        let b = Side::Banner { seen: 0, line: [0; 8], len: 0 };
        SshConn { side: [b, b], version: [None; 2], confirmed: false, stopped: false, stats: ParseStats::default() }
    }

    /// A watcher that starts after `dir`'s version line, already seen
    /// (content detection matched it before the watcher existed).
    pub fn after_version(dir: Dir, v: SshVersion) -> Self {
        let mut s = SshConn::new();
        s.version[idx(dir)] = Some(v);
        s.side[idx(dir)] = Side::Packets { head: [0; 13], have: 0, skip: 0, walked: 0 };
        s
    }

    pub fn start(at: SshStart) -> Self {
        match at {
            SshStart::AtStart => SshConn::new(),
            SshStart::AfterVersion(dir, v) => SshConn::after_version(dir, v),
        }
    }

    /// SSH was confirmed (conn.log says `ssh`).
    pub fn confirmed(&self) -> bool {
        self.confirmed
    }

    /// Watching ended: confirmed, or not SSH as Zeek's analyzer would read it.
    pub fn done(&self) -> bool {
        self.stopped
    }

    fn stop(&mut self) {
        self.stopped = true;
        self.side = [Side::Done, Side::Done];
    }

    /// Reads `data` on side `i`; returns false when the watcher stopped.
    fn read(&mut self, i: usize, mut data: &[u8]) {
        while !data.is_empty() && !self.stopped {
            match &mut self.side[i] {
                Side::Done => return,
                Side::Banner { seen, line, len } => {
                    let nl = data.iter().position(|&b| b == b'\n');
                    let take = nl.map_or(data.len(), |p| p + 1);
                    let n = take.min(line.len() - *len);
                    line[*len..*len + n].copy_from_slice(&data[..n]);
                    *len += n;
                    *seen += take;
                    data = &data[take..];
                    if *seen > MAX_BANNER {
                        self.stats.unparsed_bytes += *seen as u64;
                        self.stop();
                        return;
                    }
                    if nl.is_none() {
                        continue;
                    }
                    let first = *line;
                    let first = &first[..*len];
                    *len = 0;
                    match SshVersion::of_line(first) {
                        Some(v) => {
                            self.version[i] = Some(v);
                            self.side[i] = Side::Packets { head: [0; 13], have: 0, skip: 0, walked: 0 };
                        }
                        // A client's first line is its version (RFC
                        // 4253 §4.2; Zeek's `SSH_Version_Client` too).
                        None if i == 0 => {
                            self.stats.malformed += 1;
                            self.stop();
                        }
                        None => {}
                    }
                }
                Side::Packets { head, have, skip, walked } => {
                    if *skip > 0 {
                        let n = (*skip).min(data.len() as u64);
                        *skip -= n;
                        data = &data[n as usize..];
                        continue;
                    }
                    // Packets are framed as this side's version says
                    // (1.99 speaks 2); whether both sides agree is asked
                    // at the confirming message, as the other side's
                    // line may come later than this side's first packet.
                    let v = match self.version[i] {
                        Some(SshVersion::V1) => SshVersion::V1,
                        _ => SshVersion::V2,
                    };
                    let need = match v {
                        SshVersion::V1 if *have >= 4 => 4 + ssh1_padding(be32(head)) as usize + 1,
                        SshVersion::V1 => 4,
                        _ => 6,
                    };
                    if *have < need {
                        let n = (need - *have).min(data.len());
                        head[*have..*have + n].copy_from_slice(&data[..n]);
                        *have += n;
                        data = &data[n..];
                        if *have < need || (v == SshVersion::V1 && need == 4) {
                            continue;
                        }
                    }
                    let len = be32(head);
                    if !(2..=MAX_PACKET).contains(&len) {
                        self.stats.malformed += 1;
                        self.stop();
                        return;
                    }
                    let (total, msg, confirming) = match v {
                        SshVersion::V1 => {
                            let pad = ssh1_padding(len) as u64;
                            (4 + pad + len as u64, head[4 + pad as usize], SSH1_CMSG_SESSION_KEY)
                        }
                        _ => (4 + len as u64, head[5], MSG_NEWKEYS),
                    };
                    *walked += total;
                    *skip = total - *have as u64;
                    *have = 0;
                    if msg == confirming {
                        // With the other side's version line not read yet
                        // (its bytes come later here), the other side's
                        // own confirming message is waited for.
                        if let (Some(a), Some(b)) = (self.version[0], self.version[1]) {
                            self.confirmed = SshVersion::agreed(a, b) == Some(v);
                            if !self.confirmed {
                                self.stats.malformed += 1;
                            }
                            self.stop();
                            return;
                        }
                        self.side[i] = Side::Done;
                        return;
                    }
                    if *walked > MAX_KEX_BYTES {
                        self.stop();
                        return;
                    }
                }
            }
        }
    }
}

impl Default for SshConn {
    fn default() -> Self {
        SshConn::new()
    }
}

fn be32(b: &[u8; 13]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// SSH-1's padding before the packet type: 8 - length % 8 (1 to 8 bytes).
fn ssh1_padding(len: u32) -> u32 {
    8 - len % 8
}

impl StreamParser for SshConn {
    fn data(&mut self, dir: Dir, _ts_ns: i64, data: &[u8], _out: &mut dyn TxSink) {
        self.read(idx(dir), data);
    }

    fn gap(&mut self, _dir: Dir, _ts_ns: i64, len: u64, _out: &mut dyn TxSink) {
        // Zeek analyses nothing more after a gap (`had_gap`).
        self.stats.gaps += 1;
        self.stats.unparsed_bytes += len;
        self.stop();
    }

    fn expire(&mut self, _now_ns: i64, _out: &mut dyn TxSink) {}

    fn finish(&mut self, _ts_ns: i64, _out: &mut dyn TxSink) {}

    fn gave_up(&self) -> bool {
        self.stopped
    }

    fn stats(&self) -> ParseStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An SSH-2 binary packet of `msg` with `body` and 4 bytes of padding.
    fn packet(msg: u8, body: &[u8]) -> Vec<u8> {
        let len = (1 + 1 + body.len() + 4) as u32;
        let mut p = len.to_be_bytes().to_vec();
        p.push(4);
        p.push(msg);
        p.extend_from_slice(body);
        p.extend_from_slice(&[0; 4]);
        p
    }

    fn exchange(client_banner: &[u8], server_banner: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let mut c = client_banner.to_vec();
        let mut s = server_banner.to_vec();
        c.extend(packet(20, &[7; 300])); // KEXINIT
        s.extend(packet(20, &[8; 400]));
        c.extend(packet(30, &[1; 36])); // KEX_ECDH_INIT
        s.extend(packet(31, &[2; 500])); // KEX_ECDH_REPLY
        s.extend(packet(MSG_NEWKEYS, &[]));
        c.extend(packet(MSG_NEWKEYS, &[]));
        (c, s)
    }

    fn run(w: &mut SshConn, c: &[u8], s: &[u8], chunk: usize) {
        let mut out = Vec::new();
        // The server's banner first, then the two sides in turns.
        let (mut ci, mut si) = (0, 0);
        while ci < c.len() || si < s.len() {
            if si < s.len() {
                let n = chunk.min(s.len() - si);
                w.data(Dir::ToClient, 0, &s[si..si + n], &mut out);
                si += n;
            }
            if ci < c.len() {
                let n = chunk.min(c.len() - ci);
                w.data(Dir::ToServer, 0, &c[ci..ci + n], &mut out);
                ci += n;
            }
        }
        assert!(out.is_empty());
    }

    #[test]
    fn newkeys_after_both_versions_confirms_in_any_split() {
        let (c, s) = exchange(b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n", b"SSH-2.0-OpenSSH_9.2p1\r\n");
        for chunk in [1, 2, 5, 7, 64, 100_000] {
            let mut w = SshConn::new();
            run(&mut w, &c, &s, chunk);
            assert!(w.confirmed(), "chunk {chunk}");
        }
        // Lines before the server's version line are allowed.
        let (c, s) = exchange(b"SSH-2.0-x\r\n", b"Welcome\r\nSSH-1.99-old\r\n");
        let mut w = SshConn::new();
        run(&mut w, &c, &s, 3);
        assert!(w.confirmed());
    }

    #[test]
    fn one_side_or_incompatible_versions_do_not() {
        let (c, _) = exchange(b"SSH-2.0-x\r\n", b"");
        let mut w = SshConn::new();
        run(&mut w, &c, b"", 50);
        assert!(!w.confirmed(), "half duplex: the server's version never seen");
        let (c, s) = exchange(b"SSH-1.5-x\r\n", b"SSH-2.0-y\r\n");
        let mut w = SshConn::new();
        run(&mut w, &c, &s, 50);
        assert!(!w.confirmed());
        let (c, s) = exchange(b"HELO x\r\n", b"SSH-2.0-y\r\n");
        let mut w = SshConn::new();
        run(&mut w, &c, &s, 50);
        assert!(!w.confirmed() && w.done(), "a client's first line must be its version");
    }

    #[test]
    fn a_gap_or_no_newkeys_does_not() {
        let (c, s) = exchange(b"SSH-2.0-x\r\n", b"SSH-2.0-y\r\n");
        let mut w = SshConn::new();
        let mut out = Vec::new();
        w.data(Dir::ToClient, 0, &s[..30], &mut out);
        w.gap(Dir::ToServer, 0, 10, &mut out);
        w.data(Dir::ToServer, 0, &c, &mut out);
        assert!(!w.confirmed() && w.done());
        // Cut before either NEWKEYS.
        let mut w = SshConn::new();
        run(&mut w, &c[..c.len() - 16], &s[..s.len() - 16], 9);
        assert!(!w.confirmed() && !w.done());
    }

    #[test]
    fn seeded_after_the_first_version_line() {
        let (c, s) = exchange(b"SSH-2.0-x\r\n", b"SSH-2.0-y\r\n");
        let mut w = SshConn::after_version(Dir::ToClient, SshVersion::V2);
        run(&mut w, &c, &s[b"SSH-2.0-y\r\n".len()..], 11);
        assert!(w.confirmed());
    }

    #[test]
    fn ssh1_session_key_confirms() {
        // SSH-1 packet: length, 8 - length % 8 padding bytes, type, data, crc.
        fn p1(msg: u8, data: &[u8]) -> Vec<u8> {
            let len = (1 + data.len() + 4) as u32;
            let mut p = len.to_be_bytes().to_vec();
            p.extend(std::iter::repeat_n(0, ssh1_padding(len) as usize));
            p.push(msg);
            p.extend_from_slice(data);
            p.extend_from_slice(&[0; 4]);
            p
        }
        let mut c = b"SSH-1.5-x\n".to_vec();
        let mut s = b"SSH-1.99-y\n".to_vec();
        s.extend(p1(2, &[5; 200])); // SMSG_PUBLIC_KEY
        c.extend(p1(SSH1_CMSG_SESSION_KEY, &[6; 100]));
        let mut w = SshConn::new();
        run(&mut w, &c, &s, 4);
        assert!(w.confirmed());
    }
}
