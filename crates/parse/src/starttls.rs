//! STARTTLS on the protocols wirelog names but does not otherwise parse
//! (SMTP, IMAP, POP3, XMPP, LDAP, FTP, IRC): the cleartext is read just far
//! enough to confirm the protocol (as Zeek's analyzer confirms it) and to
//! see the client ask for TLS and the server agree; the TLS parser then
//! reads the rest of the connection ([`crate::tls::TlsConn`], which names
//! the connection `smtp,ssl` once it found a handshake).
//!
//! What each protocol's upgrade is, written from its specification, with
//! the Zeek analyzer that decides the same thing (read for agreement):
//!
//! | protocol | client asks (spec) | server agrees | Zeek |
//! |---|---|---|---|
//! | SMTP | `STARTTLS` (RFC 3207 §4) | reply 220 | `SMTP_Analyzer::UpdateState`, src/analyzer/protocol/smtp/SMTP.cc |
//! | IMAP | `tag STARTTLS` (RFC 3501 §6.2.1) | `tag OK` | `proc_imap_token`, src/analyzer/protocol/imap/imap-analyzer.pac |
//! | POP3 | `STLS` (RFC 2595 §4) | `+OK` | `POP3_Analyzer::ProcessReply`, src/analyzer/protocol/pop3/POP3.cc |
//! | XMPP | `<starttls xmlns=...xmpp-tls/>` (RFC 6120 §5.4.2) | `<proceed .../>` | `proc_xmpp_token`, src/analyzer/protocol/xmpp/xmpp-analyzer.pac |
//! | LDAP | ExtendedRequest 1.3.6.1.4.1.1466.20037 (RFC 4511 §4.14) | ExtendedResponse success (0) | `ExtendedRequest`/`ExtendedResponse`, src/analyzer/protocol/ldap/ldap.spicy |
//! | FTP | `AUTH TLS` (RFC 4217 §4) | reply 234 | `FTP_Analyzer::DeliverStream`, src/analyzer/protocol/ftp/FTP.cc |
//! | IRC | `STARTTLS` (IRCv3 tls extension) | numeric 670 | `IRC_Analyzer::DeliverStream`, src/analyzer/protocol/irc/IRC.cc |
//!
//! The cleartext is bounded: a line (or LDAP message) longer than
//! [`MAX_LINE`] is skipped and counted, and after the TLS limits'
//! `max_preamble` bytes of cleartext without an upgrade the connection is
//! left alone (the protocol stays named if it was confirmed).

use crate::tls::{TlsConn, TlsLimits};
use crate::{Dir, ParseStats, StreamParser, TxSink};

/// A cleartext protocol that can turn to TLS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cleartext {
    Smtp,
    Imap,
    Pop3,
    Xmpp,
    Ldap,
    Ftp,
    Irc,
}

/// Longest cleartext line (or LDAP message) looked at. SMTP's longest text
/// line is 1000 bytes (RFC 5321 §4.5.3.1.6); IMAP and XMPP lines before
/// STARTTLS are capabilities and stream headers, well under this.
pub const MAX_LINE: usize = 8192;

impl Cleartext {
    /// The protocol a TCP connection to `port` is watched for. The ports
    /// are those Zeek's default scripts register the analyzers on
    /// (`Analyzer::register_for_ports` in scripts/base/protocols/<p>/main.zeek,
    /// tabled in wirelog_track::zeek_ports): SMTP 25, 587; IMAP 143; XMPP
    /// 5222, 5269; LDAP 389, 3268; FTP 21, 2811; IRC 6666-6669. POP3 has no
    /// port registration in Zeek (its DPD signature finds it); 110 is its
    /// port by RFC 1939.
    pub fn by_port(port: u16) -> Option<Cleartext> {
        Some(match port {
            25 | 587 => Cleartext::Smtp,
            143 => Cleartext::Imap,
            110 => Cleartext::Pop3,
            5222 | 5269 => Cleartext::Xmpp,
            389 | 3268 => Cleartext::Ldap,
            21 | 2811 => Cleartext::Ftp,
            6666..=6669 => Cleartext::Irc,
            _ => return None,
        })
    }

    /// conn.log's name, as Zeek's analyzer writes it.
    pub fn service(self) -> &'static str {
        match self {
            Cleartext::Smtp => "smtp",
            Cleartext::Imap => "imap",
            Cleartext::Pop3 => "pop3",
            Cleartext::Xmpp => "xmpp",
            Cleartext::Ldap => "ldap",
            Cleartext::Ftp => "ftp",
            Cleartext::Irc => "irc",
        }
    }

    /// conn.log's name once TLS was found inside: both analyzers.
    pub fn service_over_tls(self) -> &'static str {
        match self {
            Cleartext::Smtp => "smtp,ssl",
            Cleartext::Imap => "imap,ssl",
            Cleartext::Pop3 => "pop3,ssl",
            Cleartext::Xmpp => "xmpp,ssl",
            Cleartext::Ldap => "ldap,ssl",
            Cleartext::Ftp => "ftp,ssl",
            Cleartext::Irc => "irc,ssl",
        }
    }
}

/// SMTP commands (RFC 5321 §4.1, RFC 3207 STARTTLS, RFC 4954 AUTH, RFC 3030
/// BDAT, RFC 1985 ETRN, RFC 821's SEND/SOML/SAML/TURN): a client line whose
/// first word is one confirms SMTP, as Zeek confirms on a request.
const SMTP_COMMANDS: &[&str] = &[
    "EHLO",
    "HELO",
    "MAIL",
    "RCPT",
    "DATA",
    "RSET",
    "VRFY",
    "EXPN",
    "HELP",
    "NOOP",
    "QUIT",
    "STARTTLS",
    "AUTH",
    "BDAT",
    "ETRN",
    "SEND",
    "SOML",
    "SAML",
    "TURN",
    "X-ANONYMOUSTLS",
];

/// IRC client commands whose line confirms IRC: those RFC 2812 §3-4 and
/// RFC 1459 §4-5 define and the extensions servers take (CNOTICE,
/// CPRIVMSG, ENCAP, KNOCK, RULES, SETNAME, SILENCE, IRCv3's STARTTLS), the
/// set Zeek's analyzer confirms on (`IRC_Analyzer::IsValidClientCommand`,
/// src/analyzer/protocol/irc/IRC.cc:43-52; confirmation at line 155).
const IRC_COMMANDS: &[&str] = &[
    "ADMIN", "AWAY", "CNOTICE", "CPRIVMSG", "CONNECT", "DIE", "ENCAP", "ERROR", "INFO", "INVITE",
    "ISON", "JOIN", "KICK", "KILL", "KNOCK", "LINKS", "LIST", "LUSERS", "MODE", "MOTD", "NAMES",
    "NICK", "NOTICE", "OPER", "PART", "PASS", "PING", "PONG", "PRIVMSG", "QUIT", "REHASH", "RULES",
    "SERVER", "SERVICE", "SERVLIST", "SETNAME", "SILENCE", "SQUERY", "SQUIT", "STATS", "SUMMON",
    "TIME", "TOPIC", "TRACE", "USER", "USERHOST", "USERS", "VERSION", "WALLOPS", "WHO", "WHOIS",
    "WHOWAS", "STARTTLS",
];

/// How a watcher starts: on the protocol's port (confirmed as its
/// analyzer confirms, from the first bytes it is given), or after a
/// signature matched both sides' first bytes (`crate::services`), which
/// it is not given again: those bytes may already confirm the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// By port, or a signature whose bytes confirm nothing yet.
    Fresh,
    /// The signature's bytes hold what the analyzer confirms on: Zeek's
    /// analyzer, attached by the signature, is handed the bytes the
    /// signature matched first (`PIA_TCP::ActivateAnalyzer` replays its
    /// buffer, src/analyzer/protocol/pia/PIA.cc:328-360).
    Confirmed,
    /// FTP by signature: the client's `USER` line (a command: confirmed,
    /// FTP.cc:122) and the server's greeting matched; Zeek's server
    /// signature also wants a 230 or 331 line within its buffer
    /// (scripts/base/protocols/ftp/dpd.sig:9-15) before the analyzer is
    /// attached at all.
    FtpAwaitsLogin,
}

/// RFC 4511 §4.14.1: the StartTLS extended operation's name.
const LDAP_STARTTLS_OID: &[u8] = b"1.3.6.1.4.1.1466.20037";

/// A POP3 command whose `+OK` confirms POP3 (Zeek confirms on the reply
/// to USER, CAPA and STLS).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pop3Asked {
    None,
    Confirming,
    Stls,
}

/// The cleartext part of a connection that may turn to TLS.
pub struct StarttlsConn {
    proto: Cleartext,
    limits: TlsLimits,
    /// Unconsumed bytes of each direction (a line or LDAP message not yet whole).
    buf: [Vec<u8>; 2],
    /// The direction is skipping a line longer than [`MAX_LINE`] to its end.
    skipping: [bool; 2],
    confirmed: bool,
    /// FTP by signature: the server's login reply is still awaited.
    awaits_login: bool,
    /// The client asked for TLS (and the server has not refused).
    asked: bool,
    /// IMAP: the tag of the client's STARTTLS.
    tag: Vec<u8>,
    pop3: Pop3Asked,
    /// Where TLS starts in the last chunk given: the server agreed.
    upgrade_at: Option<usize>,
    /// Cleartext bytes seen.
    seen: usize,
    /// Left alone: no upgrade within the bound, or a gap in the cleartext.
    stopped: bool,
    stats: ParseStats,
}

fn idx(dir: Dir) -> usize {
    (dir == Dir::ToClient) as usize
}

/// The first word of `line` after leading blanks, and what follows it
/// (blanks skipped).
fn word(line: &[u8]) -> (&[u8], &[u8]) {
    let line = trim_start(line);
    let end = line
        .iter()
        .position(|b| b.is_ascii_whitespace())
        .unwrap_or(line.len());
    (&line[..end], trim_start(&line[end..]))
}

fn trim_start(s: &[u8]) -> &[u8] {
    &s[s.iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(s.len())..]
}

fn trim_end(s: &[u8]) -> &[u8] {
    &s[..s
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(0, |p| p + 1)]
}

/// A reply line's code (`250 ok`, `220-...`): the code and whether it is
/// the reply's last line (a space or the line's end after the digits, RFC
/// 5321 §4.2.1 and RFC 959 §4.2).
fn reply_code(line: &[u8]) -> Option<(u16, bool)> {
    let d = line.get(..3)?;
    if !d.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let code = d.iter().fold(0u16, |a, &b| a * 10 + (b - b'0') as u16);
    Some((code, line.get(3) != Some(&b'-')))
}

/// The name of an XML element's tag: `<starttls xmlns=...` gives
/// `starttls`, `<stream:stream ...` gives `stream:stream`.
fn xml_name(fragment: &[u8]) -> Option<&[u8]> {
    let start = fragment.iter().position(|&b| b == b'<')? + 1;
    let rest = &fragment[start..];
    let end = rest
        .iter()
        .position(|&b| b.is_ascii_whitespace() || b == b'/' || b == b'>')
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

/// The name without a namespace prefix (`tls:proceed` -> `proceed`).
fn local_name(name: &[u8]) -> &[u8] {
    name.iter()
        .position(|&b| b == b':')
        .map_or(name, |p| &name[p + 1..])
}

/// A BER element's header at the start of `b`: (tag, header length, body
/// length); None while it is incomplete, `Some(Err)` when malformed.
fn ber_header(b: &[u8]) -> Option<Result<(u8, usize, usize), ()>> {
    let tag = *b.first()?;
    let l0 = *b.get(1)?;
    if l0 & 0x80 == 0 {
        return Some(Ok((tag, 2, l0 as usize)));
    }
    let n = (l0 & 0x7f) as usize;
    if n == 0 || n > 4 {
        return Some(Err(())); // indefinite length is not allowed in LDAP (RFC 4511 §5.1)
    }
    let bytes = b.get(2..2 + n)?;
    Some(Ok((
        tag,
        2 + n,
        bytes.iter().fold(0usize, |a, &x| a << 8 | x as usize),
    )))
}

/// The protocolOp of a whole LDAPMessage body (RFC 4511 §4.2: SEQUENCE {
/// messageID INTEGER, protocolOp CHOICE, ... }): its tag and contents.
fn ldap_op(msg: &[u8]) -> Option<(u8, &[u8])> {
    let (tag, h, n) = ber_header(msg)?.ok()?;
    if tag != 0x02 {
        return None; // messageID
    }
    let rest = msg.get(h + n..)?;
    let (op, h, n) = ber_header(rest)?.ok()?;
    Some((op, rest.get(h..h + n)?))
}

impl StarttlsConn {
    pub fn new(proto: Cleartext, limits: TlsLimits) -> Self {
        StarttlsConn::starting(proto, Start::Fresh, limits)
    }

    /// A watcher started as `start` says (by port: [`Start::Fresh`]).
    pub fn starting(proto: Cleartext, start: Start, limits: TlsLimits) -> Self {
        StarttlsConn {
            proto,
            limits,
            buf: [Vec::new(), Vec::new()],
            skipping: [false; 2],
            confirmed: start != Start::Fresh,
            awaits_login: start == Start::FtpAwaitsLogin,
            asked: false,
            tag: Vec::new(),
            pop3: Pop3Asked::None,
            upgrade_at: None,
            seen: 0,
            stopped: false,
            stats: ParseStats::default(),
        }
    }

    pub fn protocol(&self) -> Cleartext {
        self.proto
    }

    /// The protocol was confirmed (conn.log names it).
    pub fn confirmed(&self) -> bool {
        self.confirmed && !self.awaits_login
    }

    /// The server agreed to TLS within the last chunk given: the offset in
    /// that chunk where TLS starts, and the TLS parser that takes over.
    pub fn take_upgrade(&mut self) -> Option<(usize, TlsConn)> {
        let at = self.upgrade_at.take()?;
        let tls = TlsConn::after_cleartext(
            self.limits,
            self.proto.service(),
            self.proto.service_over_tls(),
            self.stats,
        );
        Some((at, tls))
    }

    /// Watching stopped without an upgrade, as it should (a bound reached),
    /// not because the bytes could not be read.
    pub fn done(&self) -> bool {
        self.stopped
    }

    fn client_line(&mut self, line: &[u8]) {
        let (w, arg) = word(line);
        match self.proto {
            Cleartext::Smtp => {
                if SMTP_COMMANDS
                    .iter()
                    .any(|c| c.as_bytes().eq_ignore_ascii_case(w))
                {
                    self.confirmed = true;
                }
                if w.eq_ignore_ascii_case(b"STARTTLS") || w.eq_ignore_ascii_case(b"X-ANONYMOUSTLS")
                {
                    self.asked = true;
                }
            }
            Cleartext::Imap => {
                let (cmd, _) = word(arg);
                if cmd.eq_ignore_ascii_case(b"CAPABILITY") || cmd.eq_ignore_ascii_case(b"STARTTLS")
                {
                    self.confirmed = true;
                }
                if cmd.eq_ignore_ascii_case(b"STARTTLS") && !w.is_empty() && w.len() <= 64 {
                    self.asked = true;
                    self.tag.clear();
                    self.tag.extend_from_slice(w);
                }
            }
            Cleartext::Pop3 => {
                self.pop3 = if w.eq_ignore_ascii_case(b"STLS") {
                    Pop3Asked::Stls
                } else if w.eq_ignore_ascii_case(b"USER") || w.eq_ignore_ascii_case(b"CAPA") {
                    Pop3Asked::Confirming
                } else {
                    Pop3Asked::None
                };
            }
            Cleartext::Xmpp => {
                if let Some(name) = xml_name(line) {
                    if name == b"stream:stream" {
                        self.confirmed = true;
                    }
                    if local_name(name) == b"starttls" {
                        self.asked = true;
                    }
                }
            }
            Cleartext::Ftp => {
                if crate::services::is_ftp_command(line) {
                    self.confirmed = true;
                }
                // RFC 4217 §4: `AUTH TLS`; Zeek starts TLS only for this
                // argument (FTP.cc compares it with "TLS").
                if w.eq_ignore_ascii_case(b"AUTH") {
                    self.asked = trim_end(arg) == b"TLS";
                }
            }
            Cleartext::Irc => {
                // The command after IRCv3 tags (`@a=b;c `) and a `:prefix`,
                // as Zeek's analyzer skips them (IRC.cc:88-110); lines over
                // 512 bytes (RFC 2812 §2.3) it does not read (IRC.cc:67).
                let mut l = trim_start(line);
                if l.len() > 512 {
                    return;
                }
                if l.first() == Some(&b'@') {
                    l = word(l).1;
                }
                if l.first() == Some(&b':') {
                    l = word(l).1;
                }
                let (w, _) = word(l);
                if IRC_COMMANDS
                    .iter()
                    .any(|c| c.as_bytes().eq_ignore_ascii_case(w))
                {
                    self.confirmed = true;
                }
                if w.eq_ignore_ascii_case(b"STARTTLS") {
                    self.asked = true;
                }
            }
            Cleartext::Ldap => {}
        }
    }

    /// A server line; true when it agrees to TLS.
    fn server_line(&mut self, line: &[u8]) -> bool {
        match self.proto {
            Cleartext::Ftp if self.awaits_login => {
                self.awaits_login = !crate::services::is_ftp_login_reply(line);
                false
            }
            Cleartext::Smtp | Cleartext::Ftp => {
                let want = if self.proto == Cleartext::Smtp {
                    220
                } else {
                    234
                };
                match reply_code(line) {
                    Some((code, true)) if self.asked => {
                        self.asked = false;
                        code == want
                    }
                    _ => false,
                }
            }
            Cleartext::Imap => {
                let (tag, rest) = word(line);
                let (status, _) = word(rest);
                let ok = status.eq_ignore_ascii_case(b"OK");
                if tag == b"*" && ok {
                    self.confirmed = true;
                }
                if self.asked && tag == self.tag.as_slice() {
                    self.asked = false;
                    return ok;
                }
                false
            }
            Cleartext::Pop3 => {
                let (status, _) = word(line);
                let asked = std::mem::replace(&mut self.pop3, Pop3Asked::None);
                if status != b"+OK" {
                    return false;
                }
                if asked != Pop3Asked::None {
                    self.confirmed = true;
                }
                asked == Pop3Asked::Stls
            }
            Cleartext::Xmpp => {
                let proceed = xml_name(line).is_some_and(|n| local_name(n) == b"proceed");
                proceed && std::mem::replace(&mut self.asked, false)
            }
            Cleartext::Irc => {
                // `:server 670 nick :STARTTLS successful` (a prefix, then
                // the numeric); Zeek starts TLS on 670 alone.
                let line = trim_start(line);
                let rest = if line.first() == Some(&b':') {
                    word(line).1
                } else {
                    line
                };
                let (cmd, _) = word(rest);
                cmd == b"670"
            }
            Cleartext::Ldap => false,
        }
    }

    /// One whole LDAPMessage's body; true when it is the server's success
    /// for a StartTLS the client asked for.
    fn ldap_message(&mut self, client: bool, body: &[u8]) -> bool {
        let Some((op, contents)) = ldap_op(body) else {
            self.stats.malformed += 1;
            return false;
        };
        // [APPLICATION n], constructed or primitive (UnbindRequest, DelRequest).
        if op & 0xc0 != 0x40 {
            self.stats.malformed += 1;
            return false;
        }
        self.confirmed = true;
        match (client, op) {
            // ExtendedRequest [APPLICATION 23] { requestName [0] LDAPOID, ... }
            (true, 0x77) => {
                if let Some(Ok((0x80, h, n))) = ber_header(contents) {
                    self.asked = contents.get(h..h + n) == Some(LDAP_STARTTLS_OID);
                }
                false
            }
            // ExtendedResponse [APPLICATION 24] { resultCode ENUMERATED, ... }
            (false, 0x78) if self.asked => {
                self.asked = false;
                matches!(ber_header(contents), Some(Ok((0x0a, h, 1))) if contents.get(h) == Some(&0))
            }
            _ => false,
        }
    }

    /// Consumes whole units (lines, XMPP tags, LDAP messages) of `buf`;
    /// Some(end) of the unit after which TLS starts.
    fn units(&mut self, i: usize) -> (usize, Option<usize>) {
        let buf = std::mem::take(&mut self.buf[i]);
        let mut at = 0;
        let mut upgrade = None;
        if self.proto == Cleartext::Ldap {
            while let Some(h) = ber_header(&buf[at..]) {
                let Ok((tag, hl, n)) = h else {
                    self.stats.malformed += 1;
                    self.stopped = true;
                    break;
                };
                if tag != 0x30 || hl + n > MAX_LINE {
                    // Not an LDAPMessage, or more than is looked at.
                    self.stats.unparsed_bytes += (buf.len() - at) as u64;
                    self.stopped = true;
                    at = buf.len();
                    break;
                }
                if buf.len() - at < hl + n {
                    break;
                }
                let end = at + hl + n;
                let agreed = self.ldap_message(i == 0, &buf[at + hl..end]);
                at = end;
                if agreed {
                    upgrade = Some(at);
                    break;
                }
            }
        } else {
            // XMPP's units end at `>`, the others' at the end of a line.
            let end_byte = if self.proto == Cleartext::Xmpp {
                b'>'
            } else {
                b'\n'
            };
            while let Some(p) = buf[at..].iter().position(|&b| b == end_byte) {
                let line = &buf[at..at + p + 1];
                at += p + 1;
                if std::mem::replace(&mut self.skipping[i], false) {
                    continue;
                }
                let line = trim_end(line);
                if i == 0 {
                    self.client_line(line);
                } else if self.server_line(line) {
                    upgrade = Some(at);
                    break;
                }
            }
            if upgrade.is_none() && buf.len() - at > MAX_LINE {
                self.stats.unparsed_bytes += (buf.len() - at) as u64;
                self.skipping[i] = true;
                at = buf.len();
            }
        }
        let mut buf = buf;
        buf.drain(..at);
        self.buf[i] = buf;
        (at, upgrade)
    }
}

impl StreamParser for StarttlsConn {
    fn data(&mut self, dir: Dir, _ts_ns: i64, data: &[u8], _out: &mut dyn TxSink) {
        if self.stopped || self.upgrade_at.is_some() {
            return;
        }
        let i = idx(dir);
        let prior = self.buf[i].len();
        self.buf[i].extend_from_slice(data);
        let (_, upgrade) = self.units(i);
        if let Some(end) = upgrade {
            // The unit that agreed ends in this chunk (it ends at a byte
            // that arrived now); TLS starts right after it.
            self.upgrade_at = Some(end.saturating_sub(prior));
            self.buf = [Vec::new(), Vec::new()];
            return;
        }
        self.seen += data.len();
        if self.awaits_login && self.seen as i64 > crate::services::SIGNATURE_BYTES {
            // Zeek's signature matching stops at its buffer's end
            // (`dpd_buffer_size`): FTP's server signature never matched.
            self.stopped = true;
            self.buf = [Vec::new(), Vec::new()];
            return;
        }
        if self.seen > self.limits.max_preamble && !self.asked {
            self.stopped = true;
            self.buf = [Vec::new(), Vec::new()];
        }
    }

    fn gap(&mut self, _dir: Dir, _ts_ns: i64, len: u64, _out: &mut dyn TxSink) {
        // A hole in the cleartext: its lines cannot be trusted to be whole.
        self.stats.gaps += 1;
        self.stats.unparsed_bytes += len;
        self.stopped = true;
        self.buf = [Vec::new(), Vec::new()];
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

    /// Runs a transcript (direction, bytes) through a watcher, handing over
    /// to TLS as the tracker's parser does; the service at the end and the
    /// bytes the TLS parser got in each direction.
    fn run(proto: Cleartext, steps: &[(Dir, &[u8])]) -> (bool, Option<[Vec<u8>; 2]>) {
        let mut w = StarttlsConn::new(proto, TlsLimits::default());
        let mut out = Vec::new();
        let mut tls_bytes: Option<[Vec<u8>; 2]> = None;
        for &(dir, d) in steps {
            if let Some(t) = tls_bytes.as_mut() {
                t[idx(dir)].extend_from_slice(d);
                continue;
            }
            w.data(dir, 0, d, &mut out);
            if let Some((at, _)) = w.take_upgrade() {
                let mut t = [Vec::new(), Vec::new()];
                t[idx(dir)].extend_from_slice(&d[at..]);
                tls_bytes = Some(t);
            }
        }
        (w.confirmed(), tls_bytes)
    }

    const HELLO: &[u8] = b"\x16\x03\x01\x00\x05hello";
    use Dir::{ToClient as S, ToServer as C};

    #[test]
    fn smtp_upgrade_after_220() {
        let (ok, tls) = run(
            Cleartext::Smtp,
            &[
                (S, b"220 mx ESMTP\r\n"),
                (C, b"EHLO me\r\n"),
                (S, b"250-mx\r\n250-STARTTLS\r\n250 8BITMIME\r\n"),
                (C, b"STARTTLS\r\n"),
                (S, b"220 2.0.0 Ready to start TLS\r\n"),
                (C, HELLO),
            ],
        );
        assert!(ok);
        assert_eq!(tls.unwrap()[0], HELLO);
    }

    #[test]
    fn smtp_refused_starttls_stays_cleartext() {
        let (ok, tls) = run(
            Cleartext::Smtp,
            &[
                (C, b"EHLO me\r\n"),
                (C, b"STARTTLS\r\n"),
                (S, b"454 4.7.0 TLS not available\r\n"),
                (S, b"220 x\r\n"),
            ],
        );
        assert!(ok && tls.is_none());
    }

    #[test]
    fn imap_tagged_ok_split_over_chunks() {
        let (ok, tls) = run(
            Cleartext::Imap,
            &[
                (S, b"* OK [CAPABILITY IMAP4rev1 STARTTLS] ready\r\n"),
                (C, b"a1 STARTTLS\r\n"),
                (S, b"a1 O"),
                (S, b"K Begin TLS negotiation now\r\n\x16\x03\x03"),
            ],
        );
        assert!(ok);
        assert_eq!(tls.unwrap()[1], b"\x16\x03\x03");
        // Another tag's OK is not the answer.
        let (_, tls) = run(
            Cleartext::Imap,
            &[(C, b"a1 STARTTLS\r\n"), (S, b"a0 OK done\r\n")],
        );
        assert!(tls.is_none());
    }

    #[test]
    fn pop3_stls_and_confirmation() {
        let (ok, tls) = run(
            Cleartext::Pop3,
            &[
                (S, b"+OK ready\r\n"),
                (C, b"CAPA\r\n"),
                (S, b"+OK\r\nSTLS\r\n.\r\n"),
                (C, b"STLS\r\n"),
                (S, b"+OK Begin TLS\r\n"),
            ],
        );
        assert!(ok && tls.is_some());
        // A greeting alone does not confirm POP3 (Zeek waits for a reply to USER, CAPA or STLS).
        let (ok, _) = run(Cleartext::Pop3, &[(S, b"+OK ready\r\n")]);
        assert!(!ok);
    }

    #[test]
    fn xmpp_proceed() {
        let (ok, tls) = run(
            Cleartext::Xmpp,
            &[
                (C, b"<?xml version='1.0'?><stream:stream to='example.com' xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>"),
                (S, b"<?xml version='1.0'?><stream:stream from='example.com' id='x' version='1.0'><stream:features><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'><required/></starttls></stream:features>"),
                (C, b"<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>"),
                (S, b"<proceed xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>"),
                (C, HELLO),
            ],
        );
        assert!(ok);
        assert_eq!(tls.unwrap()[0], HELLO);
        // The server's advertised <starttls> is not the client asking.
        let (_, tls) = run(
            Cleartext::Xmpp,
            &[
                (S, b"<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>"),
                (S, b"<proceed/>"),
            ],
        );
        assert!(tls.is_none());
    }

    /// LDAPMessage { messageID 1, ExtendedRequest { [0] StartTLS OID } }
    /// and the server's success, as RFC 4511 §4.14 lays them out.
    #[test]
    fn ldap_extended_starttls() {
        let mut req = vec![
            0x30,
            0,
            0x02,
            0x01,
            0x01,
            0x77,
            (LDAP_STARTTLS_OID.len() + 2) as u8,
            0x80,
            LDAP_STARTTLS_OID.len() as u8,
        ];
        req.extend_from_slice(LDAP_STARTTLS_OID);
        req[1] = (req.len() - 2) as u8;
        let resp = [
            0x30, 0x0c, 0x02, 0x01, 0x01, 0x78, 0x07, 0x0a, 0x01, 0x00, 0x04, 0x00, 0x04, 0x00,
        ];
        let mut server = resp.to_vec();
        server.extend_from_slice(b"\x16\x03\x03");
        let (ok, tls) = run(
            Cleartext::Ldap,
            &[(C, &req[..4]), (C, &req[4..]), (S, &server)],
        );
        assert!(ok);
        assert_eq!(tls.unwrap()[1], b"\x16\x03\x03");
        // An error result (2, protocolError) is no upgrade.
        let mut bad = resp;
        bad[9] = 2;
        let (_, tls) = run(Cleartext::Ldap, &[(C, &req), (S, &bad)]);
        assert!(tls.is_none());
    }

    #[test]
    fn ftp_auth_tls_and_irc_670() {
        let (ok, tls) = run(
            Cleartext::Ftp,
            &[
                (S, b"220 ftp\r\n"),
                (C, b"AUTH TLS\r\n"),
                (S, b"234 AUTH TLS successful\r\n"),
            ],
        );
        assert!(ok && tls.is_some());
        let (_, tls) = run(Cleartext::Ftp, &[(C, b"AUTH SSL\r\n"), (S, b"234 ok\r\n")]);
        assert!(tls.is_none(), "Zeek upgrades on AUTH TLS only");
        let (ok, tls) = run(
            Cleartext::Irc,
            &[
                (C, b"STARTTLS\r\n"),
                (S, b":irc.example 670 * :STARTTLS successful, go ahead\r\n"),
            ],
        );
        assert!(ok && tls.is_some());
    }

    /// Watchers a signature started (`crate::services`): FTP's is named
    /// only once the server's 230/331 completes the signature within its
    /// bytes; IRC and LDAP by the signature's bytes; XMPP by the
    /// originator's stream header only.
    #[test]
    fn started_by_signature() {
        let feed = |w: &mut StarttlsConn, steps: &[(Dir, &[u8])]| {
            let mut out = Vec::new();
            for &(d, b) in steps {
                w.data(d, 0, b, &mut out);
            }
        };
        let limits = TlsLimits::default();
        let mut w = StarttlsConn::starting(Cleartext::Ftp, Start::FtpAwaitsLogin, limits);
        assert!(!w.confirmed());
        feed(&mut w, &[(S, b"331 Please specify the pass"), (S, b"word.\r\n")]);
        assert!(w.confirmed());
        let mut w = StarttlsConn::starting(Cleartext::Ftp, Start::FtpAwaitsLogin, limits);
        feed(&mut w, &[(S, b"530 This FTP server is anonymous only.\r\n"), (C, b"QUIT\r\n"), (S, b"221 Goodbye.\r\n")]);
        assert!(!w.confirmed(), "no login reply: Zeek's server signature does not match");
        let mut w = StarttlsConn::starting(Cleartext::Ftp, Start::FtpAwaitsLogin, limits);
        feed(&mut w, &[(S, &[b'x'; 1100]), (S, b"\r\n331 late\r\n")]);
        assert!(!w.confirmed() && w.done(), "past the signature's 1024 bytes");
        assert!(StarttlsConn::starting(Cleartext::Irc, Start::Confirmed, limits).confirmed());
        let mut w = StarttlsConn::starting(Cleartext::Xmpp, Start::Fresh, limits);
        feed(&mut w, &[(C, b"<?xml version='1.0'?><stream:stream to='x' xmlns='jabber:client' version='1.0'>")]);
        assert!(w.confirmed());
        // IRC on its port: Zeek's commands, after tags and a prefix.
        let (ok, _) = run(Cleartext::Irc, &[(C, b"@time=x :me PRIVMSG #a :hi\r\n")]);
        assert!(ok);
        let (ok, _) = run(Cleartext::Irc, &[(C, b"CAP LS 302\r\n")]);
        assert!(!ok, "CAP is not among the commands Zeek confirms on");
    }

    /// A line longer than the bound is skipped to its end, counted, and
    /// what follows is read again; cleartext past the preamble bound
    /// without an upgrade ends the watch.
    #[test]
    fn bounds() {
        let mut w = StarttlsConn::new(Cleartext::Smtp, TlsLimits::default());
        let mut out = Vec::new();
        w.data(C, 0, &vec![b'x'; MAX_LINE + 10], &mut out);
        assert!(w.stats().unparsed_bytes > 0 && w.buf[0].is_empty());
        w.data(C, 0, b"yyy\r\nEHLO me\r\n", &mut out);
        assert!(w.confirmed());
        for _ in 0..100 {
            w.data(S, 0, &[b'2'; 1000], &mut out);
        }
        assert!(w.gave_up() && w.done());
    }

    /// Arbitrary bytes in arbitrary chunks, both directions, gaps: never a
    /// panic, and a direction never holds more than a unit's bound plus
    /// one chunk.
    #[test]
    fn arbitrary_input_is_bounded() {
        let protos = [
            Cleartext::Smtp,
            Cleartext::Imap,
            Cleartext::Pop3,
            Cleartext::Xmpp,
            Cleartext::Ldap,
            Cleartext::Ftp,
            Cleartext::Irc,
        ];
        let mut next = crate::xorshift(0x9e37_79b9_7f4a_7c15);
        // Bytes drawn mostly from what the protocols' units are made of.
        let alphabet = b"\r\n<>:/ 0123456789+OKSTARTLS\x30\x02\x01\x77\x78\x0a\x80\x84\xff\x16\x03";
        for round in 0..2000 {
            let proto = protos[round % protos.len()];
            let mut w = StarttlsConn::new(proto, TlsLimits::default());
            let mut out = Vec::new();
            for _ in 0..(next() % 40) {
                let dir = if next().is_multiple_of(2) { C } else { S };
                if next().is_multiple_of(50) {
                    w.gap(dir, 0, next() % 100, &mut out);
                    continue;
                }
                let n = (next() % 3000) as usize;
                let chunk: Vec<u8> = (0..n)
                    .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                    .collect();
                w.data(dir, 0, &chunk, &mut out);
                if let Some((at, _)) = w.take_upgrade() {
                    assert!(at <= chunk.len());
                    break;
                }
                assert!(
                    w.buf.iter().all(|b| b.len() <= MAX_LINE + 3000),
                    "{proto:?}"
                );
            }
            assert!(out.is_empty());
        }
    }
}
