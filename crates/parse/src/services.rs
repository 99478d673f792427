//! Services wirelog names in conn.log without parsing them: a protocol
//! Zeek's default analyzers confirm, recognised here from its
//! specification and confirmed the way Zeek's analyzer confirms it. Only
//! the service is kept (no transactions, no log of its own).
//!
//! Each service has its code in [`Service`]; a connection keeps the one
//! it confirmed in its [`crate::detect::Detection`] (four bits).

/// A service named by content; the discriminant is what a connection keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Service {
    /// DHCP (RFC 2131) over UDP.
    Dhcp = 1,
    /// FTP's control connection (RFC 959).
    Ftp = 2,
    /// NTP (RFC 5905) over UDP.
    Ntp = 3,
    /// SIP (RFC 3261) over UDP.
    Sip = 4,
}

impl Service {
    /// conn.log's name, as Zeek's analyzer writes it.
    pub fn name(self) -> &'static str {
        match self {
            Service::Dhcp => "dhcp",
            Service::Ftp => "ftp",
            Service::Ntp => "ntp",
            Service::Sip => "sip",
        }
    }

    pub(crate) fn from_code(c: u8) -> Option<Service> {
        match c {
            1 => Some(Service::Dhcp),
            2 => Some(Service::Ftp),
            3 => Some(Service::Ntp),
            4 => Some(Service::Sip),
            _ => None,
        }
    }
}

/// The UDP responder ports Zeek's DHCP analyzer is attached on: the
/// `server_ports` (67, 4011) and `client_ports` (68) both given to
/// `Analyzer::register_for_ports` in scripts/base/protocols/dhcp/main.zeek;
/// Zeek attaches a port's analyzer by the responder's port only
/// (`IPBasedAnalyzer::BuildSessionAnalyzerTree`,
/// src/packet_analysis/protocol/ip/IPBasedAnalyzer.cc).
pub const DHCP_RESP_PORTS: [u16; 3] = [67, 68, 4011];

/// Offset of the magic cookie: after the fixed BOOTP fields (RFC 2131
/// section 2: op, htype, hlen, hops 4 bytes; xid 4; secs, flags 4; ciaddr,
/// yiaddr, siaddr, giaddr 16; chaddr 16; sname 64; file 128).
const COOKIE_AT: usize = 236;
/// RFC 2131 section 3 / RFC 2132 section 2: 99.130.83.99.
const COOKIE: [u8; 4] = [99, 130, 83, 99];
/// RFC 2132 section 9.6: the DHCP Message Type option.
const OPT_MESSAGE_TYPE: u8 = 53;
const OPT_PAD: u8 = 0;
const OPT_END: u8 = 255;

/// Whether one UDP payload is a DHCP message as Zeek's analyzer confirms
/// one: the fixed fields, the magic cookie, then options that parse up to
/// the end option and hold a message type. (Zeek's binpac grammar,
/// src/analyzer/protocol/dhcp/dhcp-protocol.pac and `process_dhcp_message`
/// in dhcp-analyzer.pac, confirms on a single such message, since a DHCP
/// "connection" often has one; a wrong cookie, options cut short or no
/// message type are violations.)
pub fn is_dhcp(payload: &[u8]) -> bool {
    if payload.len() < COOKIE_AT + 4 || payload[COOKIE_AT..COOKIE_AT + 4] != COOKIE {
        return false;
    }
    let mut at = COOKIE_AT + 4;
    let mut message_type = false;
    while let Some(&code) = payload.get(at) {
        match code {
            OPT_END => return message_type,
            OPT_PAD => at += 1,
            _ => {
                let Some(&len) = payload.get(at + 1) else { return false };
                let end = at + 2 + len as usize;
                if end > payload.len() {
                    return false;
                }
                if code == OPT_MESSAGE_TYPE && len >= 1 {
                    message_type = true;
                }
                at = end;
            }
        }
    }
    false // no end option
}

/// The TCP responder ports Zeek's FTP analyzer is attached on: `FTP::ports`
/// (scripts/base/protocols/ftp/main.zeek), by the responder's port.
pub const FTP_RESP_PORTS: [u16; 2] = [21, 2811];

/// Zeek's `FTP::max_command_length` (scripts/base/init-bare.zeek): a longer
/// first word is not taken as a command.
const FTP_MAX_COMMAND: usize = 100;

/// Whether the client's first bytes on an FTP port open a command line as
/// Zeek's FTP analyzer confirms one (`FTP_Analyzer::DeliverStream` and
/// `is_ftp_cmd`, src/analyzer/protocol/ftp/FTP.cc; the line's first word
/// as `util::get_word` and `util::skip_whitespace`, src/util.cc, find it):
/// after spaces and tabs, a word of 3 to 100 printable characters ended by
/// white space (RFC 959 commands are 3 or 4 letters followed by a space
/// or CRLF). Zeek confirms on the first such request line.
pub fn is_ftp_command(client_first: &[u8]) -> bool {
    let line = &client_first[client_first.iter().position(|&b| b != b' ' && b != b'\t').unwrap_or(client_first.len())..];
    let len = line.iter().position(|&b| b.is_ascii_whitespace() || b == 0x0b || b == 0).unwrap_or(line.len());
    // The word must be whole: ended within these bytes by white space.
    let ended = line.get(len).is_some_and(|&b| b != 0);
    ended && (3..=FTP_MAX_COMMAND).contains(&len) && line[..len].iter().all(|&b| (0x21..=0x7e).contains(&b))
}

/// The UDP responder port Zeek's NTP analyzer is attached on: `NTP::ports`
/// (scripts/base/protocols/ntp/main.zeek:7, registered at line 135). Zeek
/// has no NTP signature, so NTP on another port is not named (nor here).
pub const NTP_RESP_PORT: u16 = 123;

/// RFC 5905 §7.3: the modes a client and a server send.
pub const NTP_MODE_CLIENT: u8 = 3;
pub const NTP_MODE_SERVER: u8 = 4;

/// The mode of one UDP payload if it is an NTP message as Zeek's grammar
/// parses one (src/analyzer/protocol/ntp/ntp-protocol.pac, `NTP_PDU`;
/// `proc_ntp_message` in ntp-analyzer.pac:141 confirms on each): the first
/// byte's low three bits are the mode (RFC 5905 §7.3); modes 1-5 carry
/// the 48-byte header (RFC 5905 figure 8) and, beyond 24 more bytes,
/// extension fields of at least 16 bytes each (RFC 7822 §3); mode 6 a
/// 12-byte control header and its count of data bytes (RFC 1305 appendix
/// B); mode 7 a 4-byte header and its 12-bit data length (ntp-mode7.pac:107);
/// mode 0 (reserved) whatever follows, as the grammar's `restofdata`.
pub fn ntp_mode(payload: &[u8]) -> Option<u8> {
    let &first = payload.first()?;
    let mode = first & 7;
    let ok = match mode {
        1..=5 => {
            if payload.len() < 48 {
                return None;
            }
            let mut at = 48;
            while payload.len() - at > 24 {
                let len = u16::from_be_bytes([*payload.get(at + 2)?, *payload.get(at + 3)?]) as usize;
                if len < 16 || at + len > payload.len() {
                    return None;
                }
                at += len;
            }
            true
        }
        6 => payload.len() >= 12 && payload.len() >= 12 + u16::from_be_bytes([payload[10], payload[11]]) as usize,
        7 => payload.len() >= 5 && payload.len() >= 5 + (u16::from_be_bytes([payload[3], payload[4]]) & 0x0fff) as usize,
        _ => true,
    };
    ok.then_some(mode)
}

/// The UDP responder port Zeek's SIP analyzer is attached on: `SIP::ports`
/// (scripts/base/protocols/sip/main.zeek:15, registered at line 126); on
/// other ports its signatures attach it (scripts/base/protocols/sip/dpd.sig:
/// a request line ending in the SIP version, or a status line).
pub const SIP_RESP_PORT: u16 = 5060;

/// Whether a responder's datagram opens with a SIP status line (RFC 3261
/// §7.2: `SIP-Version SP Status-Code SP Reason-Phrase CRLF`, the version
/// `SIP/` digits `.` digits, the code three digits). Zeek's SIP analyzer
/// reads the responder's datagrams as replies and confirms on the status
/// line (`proc_sip_reply`, src/analyzer/protocol/sip/sip-analyzer.pac:45;
/// the line's grammar is `SIP_ReplyLine` in sip-protocol.pac); a status
/// line also matches its response signature, so it names SIP on any port.
/// SIP over TCP is not analysed by Zeek (the TCP signature is commented out).
pub fn is_sip_status_line(payload: &[u8]) -> bool {
    let Some(rest) = payload.strip_prefix(b"SIP/") else { return false };
    let digits = |s: &[u8]| s.iter().take_while(|b| b.is_ascii_digit()).count();
    let major = digits(rest);
    if major == 0 || rest.get(major) != Some(&b'.') {
        return false;
    }
    let rest = &rest[major + 1..];
    let minor = digits(rest);
    if minor == 0 {
        return false;
    }
    let rest = &rest[minor..];
    let sp = rest.iter().take_while(|&&b| b == b' ' || b == b'\t').count();
    let code = &rest[sp..];
    sp > 0 && code.len() >= 4 && code[..3].iter().all(u8::is_ascii_digit) && matches!(code[3], b' ' | b'\t' | b'\r')
}

/// The TCP services Zeek names on any port by a signature on each side
/// (its DPD: the originator's pattern and the responder's, one requiring
/// the other, scripts/base/protocols/<p>/dpd.sig), then the analyzer's
/// confirmation. The patterns here are written from the specifications;
/// what each side's first bytes match is a bit set ([`client_half`],
/// [`server_half`]), and both halves make a [`TcpSignature`].
pub mod half {
    /// `SSH-1.x` version line other than 1.99 (RFC 4253 §4.2, §5.1).
    pub const SSH_V1: u16 = 1;
    /// `SSH-1.99`.
    pub const SSH_V199: u16 = 2;
    /// `SSH-2.x`.
    pub const SSH_V2: u16 = 4;
    pub const SSH: u16 = SSH_V1 | SSH_V199 | SSH_V2;
    /// SMTP: the server's 220 greeting, the client's EHLO or HELO.
    pub const SMTP: u16 = 8;
    /// POP3: the server's `+OK` greeting, a client command that opens a
    /// session (USER, APOP, CAPA, AUTH, STLS).
    pub const POP3: u16 = 16;
    /// FTP: the client's `USER` line ([`super::ftp_client_half`]), the
    /// server's 120 or 220 greeting ([`super::ftp_server_half`]).
    pub const FTP: u16 = 32;
    /// IRC: the client's `NICK` and `USER` lines, a numeric reply from the
    /// server ([`super::irc_client_half`], [`super::irc_server_half`]).
    pub const IRC: u16 = 64;
    /// LDAP: the client's first message a whole BindRequest, the server's
    /// first byte a BER SEQUENCE ([`super::ldap_client_half`]).
    pub const LDAP: u16 = 128;
    /// IRC between servers: a `SERVER` registration line, either side
    /// ([`super::irc_server_registration`]).
    pub const IRC_SERVER: u16 = 256;
}

/// A TCP service both sides' first bytes matched (XMPP: one side's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpSignature {
    /// Both sent an SSH version line; `first` is the side whose line came
    /// first (its watcher starts after it), with its version.
    Ssh { first: crate::Dir, version: crate::ssh::SshVersion },
    Smtp,
    Pop3,
    /// The client's `USER` and the server's greeting: confirmed once the
    /// server's 230 or 331 follows (the rest of Zeek's server signature).
    Ftp,
    /// The client's `NICK`/`USER` lines and a server's numeric reply.
    Irc,
    /// Two IRC servers registering with each other: a `SERVER` line each.
    IrcServers,
    /// The client's whole BindRequest and the server's SEQUENCE.
    Ldap,
    /// A stream header with a `jabber:` namespace, sent by the side `by`.
    Xmpp { by: crate::Dir },
}

fn ssh_half(data: &[u8]) -> u16 {
    use crate::ssh::SshVersion;
    // The version must be whole to tell 1.99 from 1.x: a line's start.
    match SshVersion::of_line(data) {
        Some(SshVersion::V1) if data.len() >= 8 || data.contains(&b'\n') => half::SSH_V1,
        Some(SshVersion::V1) => 0,
        Some(SshVersion::V199) => half::SSH_V199,
        Some(SshVersion::V2) => half::SSH_V2,
        None => 0,
    }
}

/// The lines of `data` (a direction's first bytes), each without its
/// leading white space (SMTP and POP3 commands are matched at a line's
/// start, RFC 5321 §4.1.1 and RFC 1939 §3).
fn lines(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    data.split(|&b| b == b'\n' || b == b'\r').map(|l| &l[l.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(l.len())..])
}

fn starts_with_word(line: &[u8], word: &[u8], then_space: bool) -> bool {
    line.len() >= word.len()
        && line[..word.len()].eq_ignore_ascii_case(word)
        && (!then_space || line.get(word.len()).is_some_and(|b| b.is_ascii_whitespace()))
}

/// SMTP's and POP3's client commands on one line (its leading white
/// space removed, [`lines`]).
fn command_line(l: &[u8]) -> u16 {
    let mut m = 0;
    // RFC 5321 §4.1.1.1: a session opens with EHLO (or HELO).
    if starts_with_word(l, b"EHLO", false) || starts_with_word(l, b"HELO", false) {
        m |= half::SMTP;
    }
    // RFC 1939 §7 (USER, APOP), RFC 2449 (CAPA), RFC 5034 (AUTH), RFC 2595 (STLS).
    if starts_with_word(l, b"USER", true)
        || starts_with_word(l, b"APOP", true)
        || starts_with_word(l, b"CAPA", false)
        || starts_with_word(l, b"AUTH", false)
        || starts_with_word(l, b"STLS", false)
    {
        m |= half::POP3;
    }
    m
}

/// What the originator's first bytes match (their first
/// [`SIGNATURE_BYTES`], as far as Zeek's signatures look).
pub fn client_half(data: &[u8]) -> u16 {
    let data = &data[..data.len().min(SIGNATURE_BYTES as usize)];
    let mut m = ssh_half(data);
    for l in lines(data) {
        m |= command_line(l);
    }
    if ftp_client_half(data) {
        m |= half::FTP;
    }
    if irc_client_half(data) {
        m |= half::IRC;
    }
    if ldap_client_half(data) {
        m |= half::LDAP;
    }
    if irc_server_registration(data) {
        m |= half::IRC_SERVER;
    }
    m
}

/// Whether `line` (leading blanks removed) opens with `word` followed by
/// at least one space and then a non-blank (`WORD +.+`).
fn word_then_arg(line: &[u8], word: &[u8]) -> bool {
    if !starts_with_word(line, word, false) || line.get(word.len()) != Some(&b' ') {
        return false;
    }
    line[word.len()..].iter().any(|&b| b != b' ')
}

/// The client half of Zeek's FTP signature (`dpd_ftp_client`,
/// scripts/base/protocols/ftp/dpd.sig:1-5): a line of the client's first
/// bytes that opens, after spaces, with `USER` and a space (RFC 959 §4.1.1:
/// the login's first command). Written here from RFC 959.
pub fn ftp_client_half(data: &[u8]) -> bool {
    data.split(|&b| b == b'\n' || b == b'\r').any(|l| ftp_user_line(strip_spaces(l)))
}

/// A line without its leading spaces.
fn strip_spaces(l: &[u8]) -> &[u8] {
    &l[l.iter().position(|&b| b != b' ').unwrap_or(l.len())..]
}

/// FTP's `USER` on one line (its leading spaces removed).
fn ftp_user_line(l: &[u8]) -> bool {
    starts_with_word(l, b"USER", false) && l.get(4) == Some(&b' ')
}

/// The first half of Zeek's FTP server signature (`dpd_ftp_server`,
/// dpd.sig:9-15, anchored at the stream's start): after CR, LF or spaces,
/// the greeting's reply code 120 or 220 (RFC 959 §5.4: a connection's
/// first reply) and a non-digit. The rest of that signature, a later
/// 230 or 331 line, is [`is_ftp_login_reply`].
pub fn ftp_server_half(data: &[u8]) -> bool {
    let g = &data[data.iter().position(|&b| !matches!(b, b'\n' | b'\r' | b' ')).unwrap_or(data.len())..];
    (g.starts_with(b"120") || g.starts_with(b"220")) && g.get(3).is_some_and(|b| !b.is_ascii_digit())
}

/// Whether a server line (its end of line removed) is the reply to the
/// login Zeek's server signature waits for (dpd.sig:12: after a line
/// break and spaces, 230 or 331 and a non-digit; RFC 959 §5.4: USER's
/// replies "230 User logged in" and "331 User name okay, need password").
pub fn is_ftp_login_reply(line: &[u8]) -> bool {
    let l = &line[line.iter().position(|&b| b != b' ').unwrap_or(line.len())..];
    (l.starts_with(b"230") || l.starts_with(b"331")) && l.get(3).is_none_or(|b| !b.is_ascii_digit())
}

/// The client half of Zeek's IRC signatures (`irc_client1`/`irc_client2`,
/// scripts/base/protocols/irc/dpd.sig:1-15): the client's first bytes hold
/// a `USER` line with an argument and a `NICK` line, in either order, each
/// ended (RFC 2812 §3.1: registration is NICK and USER). Written here from
/// RFC 2812.
pub fn irc_client_half(data: &[u8]) -> bool {
    let (mut user, mut nick) = (false, false);
    // Only whole lines: the last piece is unended unless data ends a line.
    let ended = data.last().is_some_and(|&b| b == b'\n' || b == b'\r');
    let mut pieces = data.split(|&b| b == b'\n' || b == b'\r').peekable();
    while let Some(l) = pieces.next() {
        if pieces.peek().is_none() && !ended {
            break;
        }
        let (u, n) = irc_registration_line(strip_spaces(l));
        user |= u;
        nick |= n;
    }
    user && nick
}

/// Whether one whole line (its leading spaces removed) is IRC's `USER`
/// with an argument, and whether it is its `NICK`.
fn irc_registration_line(l: &[u8]) -> (bool, bool) {
    (word_then_arg(l, b"USER"), starts_with_word(l, b"NICK", false) && l.get(4) == Some(&b' '))
}

/// The server half of Zeek's IRC signatures (`irc_server_reply`, dpd.sig:
/// 17-21): a line of the server's first bytes that is a numeric reply
/// (RFC 2812 §2.4: an optional `:prefix` and a space, three digits, a space).
pub fn irc_server_half(data: &[u8]) -> bool {
    data.split(|&b| b == b'\n' || b == b'\r').any(|l| irc_numeric_line(l, l.iter().position(|&b| b == b' ')))
}

/// Whether one line is IRC's numeric reply, given where its first space
/// is (if it has one).
fn irc_numeric_line(l: &[u8], first_space: Option<usize>) -> bool {
    let l = match l.first() {
        Some(b':') => match first_space {
            Some(sp) if sp > 1 => &l[sp + 1..],
            _ => return false,
        },
        _ => l,
    };
    l.len() >= 4 && l[..3].iter().all(u8::is_ascii_digit) && l[3] == b' '
}

/// Zeek's server-to-server IRC signatures (`irc_server_to_server1` and
/// `irc_server_to_server2`, scripts/base/protocols/irc/dpd.sig:23-32: the
/// same pattern on both sides, one requiring the other, no `tcp-state`):
/// a line of a side's first bytes that is a server's registration, RFC
/// 1459 §4.1.4 / RFC 2813 §4.1.2 `SERVER <servername> <hopcount> :<info>`
/// (after spaces; the command in any case; the name without spaces, the
/// hopcount digits, the info not empty; the line ended). Zeek's pattern
/// wants the `:info` right after the hopcount, so RFC 2813's form with a
/// token between them (a server introduced by another) is not one, nor
/// here. Written here from the RFCs.
pub fn irc_server_registration(data: &[u8]) -> bool {
    let ended = data.last().is_some_and(|&b| b == b'\n' || b == b'\r');
    let mut pieces = data.split(|&b| b == b'\n' || b == b'\r').peekable();
    while let Some(l) = pieces.next() {
        if pieces.peek().is_none() && !ended {
            break;
        }
        if server_registration_line(strip_spaces(l)) {
            return true;
        }
    }
    false
}

/// Whether one whole line (its leading spaces removed) is an IRC server's
/// registration ([`irc_server_registration`]).
fn server_registration_line(l: &[u8]) -> bool {
    if !starts_with_word(l, b"SERVER", false) || l.get(6) != Some(&b' ') {
        return false;
    }
    // Spaces, a name, spaces, digits, spaces, then `:` and at least one byte.
    let spaces = |x: &[u8]| x.iter().take_while(|&&b| b == b' ').count();
    let mut at = 6 + spaces(&l[6..]);
    let name = l[at..].iter().take_while(|&&b| b != b' ').count();
    at += name;
    let sp = spaces(&l[at..]);
    at += sp;
    let hops = l[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    at += hops;
    let sp2 = spaces(&l[at..]);
    at += sp2;
    name > 0 && sp > 0 && hops > 0 && sp2 > 0 && l.get(at) == Some(&b':') && l.len() > at + 1
}

/// The client half of Zeek's LDAP signature (`dpd_ldap_client_tcp`,
/// scripts/base/protocols/ldap/dpd.sig:13-16) as the analyzer then
/// confirms it: the client's first bytes are an LDAPMessage (RFC 4511
/// §4.1.1: a SEQUENCE, its length in one byte, then a messageID INTEGER
/// of one byte) whose protocolOp is a BindRequest (`[APPLICATION 0]`,
/// constructed: 0x60), the session's first operation (RFC 4511 §4.2), and
/// the message is whole: Zeek's LDAP analyzer confirms once it parsed a
/// whole message (`spicy::accept_input` on `LDAP::Message::%done`,
/// src/analyzer/protocol/ldap/ldap.spicy:1224).
pub fn ldap_client_half(data: &[u8]) -> bool {
    if data.len() < 6 || data[0] != 0x30 || data[2] != 0x02 || data[3] != 0x01 || data[5] != 0x60 {
        return false;
    }
    // The SEQUENCE's one length byte (short form) or a long form whose
    // count is data[1] & 0x7f: RFC 4511 §5.1 allows both; the signature's
    // byte layout leaves room only for the short form.
    // A SEQUENCE shorter than 3 bytes holds no BindRequest (and would end
    // before the body's slice starts).
    let len = data[1] as usize;
    if len & 0x80 != 0 || len < 3 || data.len() < 2 + len {
        return false;
    }
    // The BindRequest's own length must fit in the message.
    let body = &data[5..2 + len];
    match body.get(1) {
        Some(&l) if l & 0x80 == 0 => 2 + l as usize <= body.len(),
        Some(&l) => {
            let n = (l & 0x7f) as usize;
            if n == 0 || n > 4 || body.len() < 2 + n {
                return false;
            }
            2 + n + body[2..2 + n].iter().fold(0usize, |a, &x| a << 8 | x as usize) <= body.len()
        }
        None => false,
    }
}

/// Zeek's XMPP signature (`dpd_xmpp`, scripts/base/protocols/xmpp/
/// dpd.sig:1-5; one side, either): a stream's first bytes are an optional
/// XML declaration, blanks, then the stream header (RFC 6120 §4.7: the
/// `stream:stream` element) whose attributes, before the tag ends, include
/// a `jabber:` default namespace (RFC 6120 §4.8.2: `jabber:client` or
/// `jabber:server`) written with single quotes, the only quoting Zeek's
/// pattern takes. Written here from RFC 6120.
pub fn xmpp_stream_header(data: &[u8]) -> bool {
    let mut d = data;
    if d.starts_with(b"<?xml") {
        // `<?xml` and anything but `?` or `>` up to `?>`.
        let Some(end) = d[5..].iter().position(|&b| b == b'?' || b == b'>') else { return false };
        if d.get(5 + end..5 + end + 2) != Some(b"?>") {
            return false;
        }
        d = &d[5 + end + 2..];
    }
    let d = &d[d.iter().position(|&b| !matches!(b, b'\n' | b'\r' | b' ')).unwrap_or(d.len())..];
    let Some(attrs) = d.strip_prefix(b"<stream:stream ") else { return false };
    let attrs = &attrs[..attrs.iter().position(|&b| b == b'>').unwrap_or(attrs.len())];
    attrs.windows(14).any(|w| w == b"xmlns='jabber:")
}

/// RFC 5321 §4.2 / §3.1: the server's greeting is a 220 reply ("220 " or
/// "220-"), after any white space.
fn smtp_greeting(data: &[u8]) -> bool {
    let g = &data[data.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(data.len())..];
    g.starts_with(b"220") && g.get(3).is_some_and(|&b| b == b'-' || b.is_ascii_whitespace())
}

/// What the responder's first bytes match.
pub fn server_half(data: &[u8]) -> u16 {
    let mut m = ssh_half(data);
    if smtp_greeting(data) {
        m |= half::SMTP;
    }
    // RFC 1939 §4: the greeting is a positive response.
    if data.starts_with(b"+OK") {
        m |= half::POP3;
    }
    if ftp_server_half(data) {
        m |= half::FTP;
    }
    if irc_server_half(data) {
        m |= half::IRC;
    }
    // The server half of Zeek's LDAP signature (`dpd_ldap_server_tcp`,
    // dpd.sig:18-23): a BER SEQUENCE's tag first (RFC 4511 §4.1.1).
    if data.first() == Some(&0x30) {
        m |= half::LDAP;
    }
    if irc_server_registration(data) {
        m |= half::IRC_SERVER;
    }
    m
}

/// The service both halves agree on: `first` is the side looked at
/// first and `first_half` what it matched; `second` what the other side
/// matched. SMTP, POP3, FTP, IRC, LDAP, then SSH (a client's `USER`
/// line is POP3's and FTP's, but a server's greeting is one or the other).
pub fn tcp_signature(first: crate::Dir, first_half: u16, second_half: u16) -> Option<TcpSignature> {
    use crate::ssh::SshVersion;
    let (client, server) = if first == crate::Dir::ToServer { (first_half, second_half) } else { (second_half, first_half) };
    if client & server & half::SMTP != 0 {
        return Some(TcpSignature::Smtp);
    }
    if client & server & half::POP3 != 0 {
        return Some(TcpSignature::Pop3);
    }
    if client & server & half::FTP != 0 {
        return Some(TcpSignature::Ftp);
    }
    if client & server & half::IRC != 0 {
        return Some(TcpSignature::Irc);
    }
    if client & server & half::LDAP != 0 {
        return Some(TcpSignature::Ldap);
    }
    if client & server & half::IRC_SERVER != 0 {
        return Some(TcpSignature::IrcServers);
    }
    if first_half & half::SSH != 0 && second_half & half::SSH != 0 {
        let version = match first_half & half::SSH {
            half::SSH_V1 => SshVersion::V1,
            half::SSH_V199 => SshVersion::V199,
            _ => SshVersion::V2,
        };
        return Some(TcpSignature::Ssh { first, version });
    }
    None
}

/// Zeek's signature matching on a connection stops once it has seen
/// `dpd_buffer_size` (1024) payload bytes or `dpd_max_packets` (100)
/// packets (scripts/base/init-bare.zeek:507,519; `PIA::PIA_DeliverPacket`,
/// src/analyzer/protocol/pia/PIA.cc:80-104): a service found by signature on
/// a port no analyzer is registered for is looked for that far only. The
/// packet that crosses a bound is still matched (the state turns to
/// SKIPPING after it): a datagram is looked at when the bytes before it
/// are at most 1024 and at most 100 datagrams came before it. That is all
/// Zeek's UDP signatures need (DHCP's cookie and SIP's lines are each in
/// one datagram, scripts/base/protocols/{dhcp,sip}/dpd.sig).
pub const SIGNATURE_BYTES: i64 = 1024;
pub const SIGNATURE_PACKETS: u64 = 100;

/// Bytes of each direction's stream kept for the TCP signatures (Zeek's
/// `dpd_buffer_size`, scripts/base/init-bare.zeek:507).
pub const SIGNATURE_STREAM_BYTES: usize = SIGNATURE_BYTES as usize;

/// The first bytes of a TCP connection's two streams, in order, on which
/// the two-sided signatures ([`client_half`], [`server_half`],
/// [`tcp_signature`]) and XMPP's one-sided one ([`xmpp_stream_header`])
/// are matched, as Zeek's PIA matches its signatures on the reassembled
/// stream it buffers (`PIA_TCP::DeliverStream`, src/analyzer/protocol/pia/
/// PIA.cc:286-311: each delivered chunk is added to one buffer of both
/// directions and matched, the matcher keeping its state from one chunk
/// to the next; once the buffer holds more than `dpd_buffer_size` (1024)
/// bytes or more than `dpd_max_packets` (100) chunks, matching stops after
/// the chunk that crossed, `dpd_match_only_beginning` being T,
/// init-bare.zeek:507,519,529). So a registration sent in several
/// segments (`NICK`, then `USER`) is matched as one stream.
///
/// Bounded: at most [`SIGNATURE_STREAM_BYTES`] of each direction are kept
/// (of a chunk that crosses Zeek's bound, Zeek matches the whole chunk;
/// here its part within the direction's 1024 bytes). Only in-order bytes
/// are kept: a segment that arrives ahead of a hole is not held (the
/// reassembler that would hold it exists only once a parser does), so
/// that direction's stream stops there for matching (counted by the
/// caller, [`SigPush::hole`]). Made once per connection whose first
/// payloads no parser claimed, dropped once a signature matched or the
/// bound was reached; no allocation per packet.
///
/// Matching is incremental ([`HalfMatch`]): each segment's bytes are
/// looked at once, not the direction's whole buffer again (which made a
/// connection's matching quadratic in its first 1024 bytes); the answers
/// are the same as [`client_half`], [`server_half`] and
/// [`xmpp_stream_header`] on the whole buffer after each segment (the
/// differential test below keeps the whole-buffer matcher as reference).
pub struct SigStream {
    data: [[u8; SIGNATURE_STREAM_BYTES]; 2],
    len: [u16; 2],
    /// The next in-order sequence number per direction (client, server).
    next: [u32; 2],
    /// Bit per direction: `next` is known (its first payload was seen).
    started: u8,
    /// Bit per direction: a hole stopped that direction.
    stopped: u8,
    /// What each direction's bytes match so far ([`half`]).
    halves: [u16; 2],
    /// Each direction's matching state over its bytes so far.
    matchers: [HalfMatch; 2],
    /// Chunks and bytes taken, both directions (Zeek's `chunks`, `size`).
    chunks: u16,
    size: u16,
    /// The direction whose bytes came first (SSH's version order).
    first: Option<crate::Dir>,
}

/// What one segment did to a [`SigStream`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SigPush {
    /// A signature matched (the stream is no longer needed).
    pub found: Option<TcpSignature>,
    /// The bound was reached without a match: matching is over.
    pub done: bool,
    /// The segment was ahead of a hole: its direction stops here.
    pub hole: bool,
}

impl SigStream {
    pub fn new() -> Box<SigStream> {
        Box::new(SigStream {
            data: [[0; SIGNATURE_STREAM_BYTES]; 2],
            len: [0; 2],
            next: [0; 2],
            started: 0,
            stopped: 0,
            halves: [0; 2],
            matchers: [HalfMatch::new(); 2],
            chunks: 0,
            size: 0,
            first: None,
        })
    }

    /// One TCP segment's payload of `dir` starting at sequence number `seq`.
    pub fn push(&mut self, dir: crate::Dir, seq: u32, payload: &[u8]) -> SigPush {
        let d = (dir == crate::Dir::ToClient) as usize;
        let mut out = SigPush { found: None, done: false, hole: false };
        if payload.is_empty() || self.stopped & (1 << d) != 0 {
            return out;
        }
        if self.started & (1 << d) == 0 {
            self.started |= 1 << d;
            self.next[d] = seq;
        }
        // Relative to the next in-order byte: ahead is a hole, behind a
        // retransmission (only its new part counts).
        let ahead = seq.wrapping_sub(self.next[d]) as i32;
        if ahead > 0 {
            self.stopped |= 1 << d;
            out.hole = true;
            return out;
        }
        let old = ahead.unsigned_abs() as usize;
        if old >= payload.len() {
            return out;
        }
        let new = &payload[old..];
        self.next[d] = self.next[d].wrapping_add(new.len() as u32);
        self.first.get_or_insert(dir);
        let len = self.len[d] as usize;
        let take = new.len().min(SIGNATURE_STREAM_BYTES - len);
        self.data[d][len..len + take].copy_from_slice(&new[..take]);
        self.len[d] = (len + take) as u16;
        self.chunks += 1;
        self.size = self.size.saturating_add(new.len().min(u16::MAX as usize) as u16);
        let bytes = &self.data[d][..len + take];
        if take > 0 {
            let m = &mut self.matchers[d];
            if m.xmpp(bytes) {
                out.found = Some(TcpSignature::Xmpp { by: dir });
                return out;
            }
            self.halves[d] = m.advance(d == 0, bytes);
            if self.started == 3 {
                let first = self.first.unwrap_or(dir);
                let (a, b) = if first == crate::Dir::ToServer { (self.halves[0], self.halves[1]) } else { (self.halves[1], self.halves[0]) };
                out.found = tcp_signature(first, a, b);
                if out.found.is_some() {
                    return out;
                }
            }
        }
        out.done = self.size as i64 > SIGNATURE_BYTES || self.chunks as u64 > SIGNATURE_PACKETS;
        out
    }

    /// Both directions stopped at a hole: nothing more can match.
    pub fn stalled(&self) -> bool {
        self.stopped == 3
    }
}

/// Anchored patterns of [`HalfMatch::open`]: decided on a direction's
/// first bytes (after its leading blanks), then no longer looked at.
mod anchored {
    pub const SSH: u8 = 1;
    pub const LDAP: u8 = 2;
    pub const SMTP: u8 = 4;
    pub const POP3: u8 = 8;
    pub const FTP: u8 = 16;
}

/// `xmpp_stream_header`'s namespace: no stream without it matches.
const JABBER: &[u8; 14] = b"xmlns='jabber:";

/// One direction's progress through [`client_half`] / [`server_half`]
/// and [`xmpp_stream_header`], so that a segment costs its own bytes
/// rather than the whole buffer's. Every pattern there only ever gains a
/// match as bytes are added to the stream (a line's leading bytes, once
/// there, stay; an anchored pattern reads a fixed prefix), so the bits
/// found are kept and only what the new bytes can change is looked at:
/// - the line patterns (SMTP's and POP3's commands, FTP's `USER`, IRC's
///   numeric reply, on every line including the unended last one; IRC's
///   registration and server lines, on ended lines only) on each line once
///   it ends, and on the unended last line through offsets advanced over
///   the new bytes (its leading blanks, its first space);
/// - the anchored patterns (SSH's version, LDAP's BindRequest and
///   SEQUENCE, the SMTP/POP3/FTP greetings) until their prefix is whole;
/// - XMPP's header only once the stream holds its `xmlns='jabber:`.
#[derive(Clone, Copy)]
struct HalfMatch {
    /// What the bytes so far match ([`half`]).
    bits: u16,
    /// Bytes of the buffer looked at.
    at: u16,
    /// Anchored patterns not yet decided ([`anchored`]).
    open: u8,
    /// The stream's leading white space (SMTP's greeting) and its leading
    /// CR, LF and spaces (FTP's), as far as found.
    lead_ws: u16,
    lead_crlf: u16,
    /// The unended line's start and, within it, the end of its leading
    /// white space (the commands), of its leading spaces (FTP's `USER`),
    /// and its first space or how far one was looked for (IRC's prefix).
    line: u16,
    line_ws: u16,
    line_sp: u16,
    line_space: u16,
    /// IRC's registration lines seen (whole lines): `USER`, `NICK`.
    irc_user: bool,
    irc_nick: bool,
    /// How far `JABBER` was looked for, and whether it was found.
    jabber_at: u16,
    jabber: bool,
}

impl HalfMatch {
    const fn new() -> HalfMatch {
        HalfMatch {
            bits: 0,
            at: 0,
            open: anchored::SSH | anchored::LDAP | anchored::SMTP | anchored::POP3 | anchored::FTP,
            lead_ws: 0,
            lead_crlf: 0,
            line: 0,
            line_ws: 0,
            line_sp: 0,
            line_space: 0,
            irc_user: false,
            irc_nick: false,
            jabber_at: 0,
            jabber: false,
        }
    }

    /// [`xmpp_stream_header`] on `data` (the direction's buffer, which
    /// grows by its end only).
    fn xmpp(&mut self, data: &[u8]) -> bool {
        if !self.jabber {
            let from = (self.jabber_at as usize).saturating_sub(JABBER.len() - 1);
            self.jabber = data[from..].windows(JABBER.len()).any(|w| w == JABBER);
            self.jabber_at = data.len() as u16;
        }
        // Rare (a stream naming the namespace): the whole header again.
        self.jabber && xmpp_stream_header(data)
    }

    /// [`client_half`] (the originator's, `client`) or [`server_half`] on
    /// `data`, the direction's buffer, which grows by its end only.
    fn advance(&mut self, client: bool, data: &[u8]) -> u16 {
        let len = data.len();
        if self.open != 0 {
            self.anchored(client, data);
        }
        // Each line that ends in the new bytes, whole.
        let mut i = self.at as usize;
        while let Some(p) = data[i..].iter().position(|&b| b == b'\n' || b == b'\r') {
            let end = i + p;
            let l = &data[self.line as usize..end];
            if client {
                self.bits |= command_line(&l[l.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(l.len())..]);
                let l = strip_spaces(l);
                if ftp_user_line(l) {
                    self.bits |= half::FTP;
                }
                let (u, n) = irc_registration_line(l);
                self.irc_user |= u;
                self.irc_nick |= n;
                if self.irc_user && self.irc_nick {
                    self.bits |= half::IRC;
                }
            } else if irc_numeric_line(l, l.iter().position(|&b| b == b' ')) {
                self.bits |= half::IRC;
            }
            if server_registration_line(strip_spaces(l)) {
                self.bits |= half::IRC_SERVER;
            }
            i = end + 1;
            let next = i as u16;
            (self.line, self.line_ws, self.line_sp, self.line_space) = (next, next, next, next);
        }
        self.at = len as u16;
        // The unended last line, as far as it goes: its offsets advance
        // over the new bytes only.
        let start = self.line as usize;
        if start < len {
            if client {
                let mut ws = self.line_ws as usize;
                while ws < len && data[ws].is_ascii_whitespace() {
                    ws += 1;
                }
                self.line_ws = ws as u16;
                self.bits |= command_line(&data[ws..]);
                let mut sp = self.line_sp as usize;
                while sp < len && data[sp] == b' ' {
                    sp += 1;
                }
                self.line_sp = sp as u16;
                if ftp_user_line(&data[sp..]) {
                    self.bits |= half::FTP;
                }
            } else {
                let mut space = self.line_space as usize;
                while space < len && data[space] != b' ' {
                    space += 1;
                }
                self.line_space = space as u16;
                let first_space = (space < len).then_some(space - start);
                if irc_numeric_line(&data[start..], first_space) {
                    self.bits |= half::IRC;
                }
            }
        }
        self.bits
    }

    /// The patterns anchored at the stream's start, until decided.
    fn anchored(&mut self, client: bool, data: &[u8]) {
        let len = data.len();
        if self.open & anchored::SSH != 0 {
            self.bits |= ssh_half(data);
            // `SshVersion::of_line` reads `SSH-` and 4 bytes at most.
            if len >= 8 || !data.starts_with(&b"SSH-"[..len.min(4)]) {
                self.open &= !anchored::SSH;
            }
        }
        if client {
            if self.open & anchored::LDAP != 0 {
                if ldap_client_half(data) {
                    self.bits |= half::LDAP;
                }
                // `ldap_client_half` reads the message's first 6 bytes and
                // the SEQUENCE's short-form length of them.
                if data[0] != 0x30 || len >= 6 && (data[2..4] != [0x02, 0x01] || data[5] != 0x60 || data[1] & 0x80 != 0 || len >= 2 + data[1] as usize) {
                    self.open &= !anchored::LDAP;
                }
            }
            self.open &= anchored::SSH | anchored::LDAP;
            return;
        }
        if self.open & anchored::LDAP != 0 {
            if data[0] == 0x30 {
                self.bits |= half::LDAP;
            }
            self.open &= !anchored::LDAP;
        }
        if self.open & anchored::POP3 != 0 {
            if data.starts_with(b"+OK") {
                self.bits |= half::POP3;
            }
            if len >= 3 {
                self.open &= !anchored::POP3;
            }
        }
        if self.open & anchored::SMTP != 0 {
            let mut w = self.lead_ws as usize;
            while w < len && data[w].is_ascii_whitespace() {
                w += 1;
            }
            self.lead_ws = w as u16;
            if smtp_greeting(&data[w..]) {
                self.bits |= half::SMTP;
            }
            if len - w >= 4 {
                self.open &= !anchored::SMTP;
            }
        }
        if self.open & anchored::FTP != 0 {
            let mut w = self.lead_crlf as usize;
            while w < len && matches!(data[w], b'\n' | b'\r' | b' ') {
                w += 1;
            }
            self.lead_crlf = w as u16;
            if ftp_server_half(&data[w..]) {
                self.bits |= half::FTP;
            }
            if len - w >= 4 {
                self.open &= !anchored::FTP;
            }
        }
    }
}

/// What one UDP datagram did to a connection's service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UdpLook {
    /// Keep looking at the connection's datagrams.
    Continue,
    /// Nothing more to look for.
    Over,
    /// The service's rule says the roles are backwards (NTP): flip them.
    Flip,
}

/// One datagram of a UDP connection without a parser: DHCP, NTP or SIP
/// confirmed as Zeek's analyzers confirm them, by the responder's port
/// (the analyzers Zeek registers) or by signature on any port (DHCP's
/// cookie, SIP's status line) within the signature bounds; `before` is
/// the payload bytes and datagrams the connection had before this one.
pub fn udp_datagram(det: &mut crate::detect::Detection, resp_port: u16, dir: crate::Dir, payload: &[u8], before: (i64, u64)) -> UdpLook {
    let from_orig = dir == crate::Dir::ToServer;
    if resp_port == NTP_RESP_PORT {
        if det.service_flipped() {
            return UdpLook::Over; // confirmed, and flipped once
        }
        // Zeek's NTP analyzer confirms on every message it parses and flips
        // the roles, once, on a server's message from the originator or a
        // client's from the responder (ntp-analyzer.pac:141-150).
        if let Some(mode) = ntp_mode(payload) {
            det.confirm(Service::Ntp);
            let backwards = (mode == NTP_MODE_SERVER && from_orig) || (mode == NTP_MODE_CLIENT && !from_orig);
            if backwards && det.service_flip() {
                return UdpLook::Flip;
            }
        }
        return UdpLook::Continue;
    }
    if det.service().is_some() {
        return UdpLook::Over;
    }
    let by_port_dhcp = DHCP_RESP_PORTS.contains(&resp_port);
    let by_port_sip = resp_port == SIP_RESP_PORT;
    let signatures = before.0 <= SIGNATURE_BYTES && before.1 <= SIGNATURE_PACKETS;
    if (by_port_dhcp || signatures) && is_dhcp(payload) {
        det.confirm(Service::Dhcp);
        return UdpLook::Over;
    }
    if (by_port_sip || signatures) && !from_orig && is_sip_status_line(payload) {
        det.confirm(Service::Sip);
        return UdpLook::Over;
    }
    if by_port_dhcp || by_port_sip || signatures {
        UdpLook::Continue
    } else {
        UdpLook::Over
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole-buffer matcher as it was before matching became
    /// incremental (its doc comments left out; one fix: `ldap_client_half`
    /// panicked on a SEQUENCE shorter than 3 bytes): the reference the
    /// differential test holds [`SigStream`] to.
    mod reference {
        use super::super::{half, tcp_signature, SigPush, TcpSignature, SIGNATURE_BYTES, SIGNATURE_PACKETS, SIGNATURE_STREAM_BYTES};

        pub fn ssh_half(data: &[u8]) -> u16 {
            use crate::ssh::SshVersion;
            // The version must be whole to tell 1.99 from 1.x: a line's start.
            match SshVersion::of_line(data) {
                Some(SshVersion::V1) if data.len() >= 8 || data.contains(&b'\n') => half::SSH_V1,
                Some(SshVersion::V1) => 0,
                Some(SshVersion::V199) => half::SSH_V199,
                Some(SshVersion::V2) => half::SSH_V2,
                None => 0,
            }
        }

        pub fn lines(data: &[u8]) -> impl Iterator<Item = &[u8]> {
            data.split(|&b| b == b'\n' || b == b'\r').map(|l| &l[l.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(l.len())..])
        }

        pub fn starts_with_word(line: &[u8], word: &[u8], then_space: bool) -> bool {
            line.len() >= word.len()
                && line[..word.len()].eq_ignore_ascii_case(word)
                && (!then_space || line.get(word.len()).is_some_and(|b| b.is_ascii_whitespace()))
        }

        pub fn client_half(data: &[u8]) -> u16 {
            let data = &data[..data.len().min(SIGNATURE_BYTES as usize)];
            let mut m = ssh_half(data);
            for l in lines(data) {
                // RFC 5321 §4.1.1.1: a session opens with EHLO (or HELO).
                if starts_with_word(l, b"EHLO", false) || starts_with_word(l, b"HELO", false) {
                    m |= half::SMTP;
                }
                // RFC 1939 §7 (USER, APOP), RFC 2449 (CAPA), RFC 5034 (AUTH), RFC 2595 (STLS).
                if starts_with_word(l, b"USER", true)
                    || starts_with_word(l, b"APOP", true)
                    || starts_with_word(l, b"CAPA", false)
                    || starts_with_word(l, b"AUTH", false)
                    || starts_with_word(l, b"STLS", false)
                {
                    m |= half::POP3;
                }
            }
            if ftp_client_half(data) {
                m |= half::FTP;
            }
            if irc_client_half(data) {
                m |= half::IRC;
            }
            if ldap_client_half(data) {
                m |= half::LDAP;
            }
            if irc_server_registration(data) {
                m |= half::IRC_SERVER;
            }
            m
        }

        pub fn word_then_arg(line: &[u8], word: &[u8]) -> bool {
            if !starts_with_word(line, word, false) || line.get(word.len()) != Some(&b' ') {
                return false;
            }
            line[word.len()..].iter().any(|&b| b != b' ')
        }

        pub fn ftp_client_half(data: &[u8]) -> bool {
            data.split(|&b| b == b'\n' || b == b'\r').any(|l| {
                let l = &l[l.iter().position(|&b| b != b' ').unwrap_or(l.len())..];
                starts_with_word(l, b"USER", false) && l.get(4) == Some(&b' ')
            })
        }

        pub fn ftp_server_half(data: &[u8]) -> bool {
            let g = &data[data.iter().position(|&b| !matches!(b, b'\n' | b'\r' | b' ')).unwrap_or(data.len())..];
            (g.starts_with(b"120") || g.starts_with(b"220")) && g.get(3).is_some_and(|b| !b.is_ascii_digit())
        }

        pub fn irc_client_half(data: &[u8]) -> bool {
            let (mut user, mut nick) = (false, false);
            // Only whole lines: the last piece is unended unless data ends a line.
            let ended = data.last().is_some_and(|&b| b == b'\n' || b == b'\r');
            let mut pieces = data.split(|&b| b == b'\n' || b == b'\r').peekable();
            while let Some(l) = pieces.next() {
                if pieces.peek().is_none() && !ended {
                    break;
                }
                let l = &l[l.iter().position(|&b| b != b' ').unwrap_or(l.len())..];
                user |= word_then_arg(l, b"USER");
                nick |= starts_with_word(l, b"NICK", false) && l.get(4) == Some(&b' ');
            }
            user && nick
        }

        pub fn irc_server_half(data: &[u8]) -> bool {
            data.split(|&b| b == b'\n' || b == b'\r').any(|l| {
                let l = match l.first() {
                    Some(b':') => match l.iter().position(|&b| b == b' ') {
                        Some(sp) if sp > 1 => &l[sp + 1..],
                        _ => return false,
                    },
                    _ => l,
                };
                l.len() >= 4 && l[..3].iter().all(u8::is_ascii_digit) && l[3] == b' '
            })
        }

        pub fn irc_server_registration(data: &[u8]) -> bool {
            let ended = data.last().is_some_and(|&b| b == b'\n' || b == b'\r');
            let mut pieces = data.split(|&b| b == b'\n' || b == b'\r').peekable();
            while let Some(l) = pieces.next() {
                if pieces.peek().is_none() && !ended {
                    break;
                }
                let l = &l[l.iter().position(|&b| b != b' ').unwrap_or(l.len())..];
                if !starts_with_word(l, b"SERVER", false) || l.get(6) != Some(&b' ') {
                    continue;
                }
                // Spaces, a name, spaces, digits, spaces, then `:` and at least one byte.
                let spaces = |x: &[u8]| x.iter().take_while(|&&b| b == b' ').count();
                let mut at = 6 + spaces(&l[6..]);
                let name = l[at..].iter().take_while(|&&b| b != b' ').count();
                at += name;
                let sp = spaces(&l[at..]);
                at += sp;
                let hops = l[at..].iter().take_while(|b| b.is_ascii_digit()).count();
                at += hops;
                let sp2 = spaces(&l[at..]);
                at += sp2;
                if name > 0 && sp > 0 && hops > 0 && sp2 > 0 && l.get(at) == Some(&b':') && l.len() > at + 1 {
                    return true;
                }
            }
            false
        }

        pub fn ldap_client_half(data: &[u8]) -> bool {
            if data.len() < 6 || data[0] != 0x30 || data[2] != 0x02 || data[3] != 0x01 || data[5] != 0x60 {
                return false;
            }
            // The SEQUENCE's one length byte (short form) or a long form whose
            // count is data[1] & 0x7f: RFC 4511 §5.1 allows both; the signature's
            // byte layout leaves room only for the short form.
            let len = data[1] as usize;
            // The one change: a SEQUENCE shorter than 3 bytes panicked here.
            if len & 0x80 != 0 || len < 3 || data.len() < 2 + len {
                return false;
            }
            // The BindRequest's own length must fit in the message.
            let body = &data[5..2 + len];
            match body.get(1) {
                Some(&l) if l & 0x80 == 0 => 2 + l as usize <= body.len(),
                Some(&l) => {
                    let n = (l & 0x7f) as usize;
                    if n == 0 || n > 4 || body.len() < 2 + n {
                        return false;
                    }
                    2 + n + body[2..2 + n].iter().fold(0usize, |a, &x| a << 8 | x as usize) <= body.len()
                }
                None => false,
            }
        }

        pub fn xmpp_stream_header(data: &[u8]) -> bool {
            let mut d = data;
            if d.starts_with(b"<?xml") {
                // `<?xml` and anything but `?` or `>` up to `?>`.
                let Some(end) = d[5..].iter().position(|&b| b == b'?' || b == b'>') else { return false };
                if d.get(5 + end..5 + end + 2) != Some(b"?>") {
                    return false;
                }
                d = &d[5 + end + 2..];
            }
            let d = &d[d.iter().position(|&b| !matches!(b, b'\n' | b'\r' | b' ')).unwrap_or(d.len())..];
            let Some(attrs) = d.strip_prefix(b"<stream:stream ") else { return false };
            let attrs = &attrs[..attrs.iter().position(|&b| b == b'>').unwrap_or(attrs.len())];
            attrs.windows(14).any(|w| w == b"xmlns='jabber:")
        }

        pub fn server_half(data: &[u8]) -> u16 {
            let mut m = ssh_half(data);
            // RFC 5321 §4.2 / §3.1: the greeting is a 220 reply ("220 " or "220-").
            let g = &data[data.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(data.len())..];
            if g.starts_with(b"220") && g.get(3).is_some_and(|&b| b == b'-' || b.is_ascii_whitespace()) {
                m |= half::SMTP;
            }
            // RFC 1939 §4: the greeting is a positive response.
            if data.starts_with(b"+OK") {
                m |= half::POP3;
            }
            if ftp_server_half(data) {
                m |= half::FTP;
            }
            if irc_server_half(data) {
                m |= half::IRC;
            }
            // The server half of Zeek's LDAP signature (`dpd_ldap_server_tcp`,
            // dpd.sig:18-23): a BER SEQUENCE's tag first (RFC 4511 §4.1.1).
            if data.first() == Some(&0x30) {
                m |= half::LDAP;
            }
            if irc_server_registration(data) {
                m |= half::IRC_SERVER;
            }
            m
        }


        pub struct SigStream {
            pub data: [[u8; SIGNATURE_STREAM_BYTES]; 2],
            pub len: [u16; 2],
            next: [u32; 2],
            started: u8,
            stopped: u8,
            pub halves: [u16; 2],
            chunks: u16,
            size: u16,
            first: Option<crate::Dir>,
        }

        impl SigStream {
            pub fn new() -> Box<SigStream> {
                Box::new(SigStream {
                    data: [[0; SIGNATURE_STREAM_BYTES]; 2],
                    len: [0; 2],
                    next: [0; 2],
                    started: 0,
                    stopped: 0,
                    halves: [0; 2],
                    chunks: 0,
                    size: 0,
                    first: None,
                })
            }

            pub fn push(&mut self, dir: crate::Dir, seq: u32, payload: &[u8]) -> SigPush {
                let d = (dir == crate::Dir::ToClient) as usize;
                let mut out = SigPush { found: None, done: false, hole: false };
                if payload.is_empty() || self.stopped & (1 << d) != 0 {
                    return out;
                }
                if self.started & (1 << d) == 0 {
                    self.started |= 1 << d;
                    self.next[d] = seq;
                }
                // Relative to the next in-order byte: ahead is a hole, behind a
                // retransmission (only its new part counts).
                let ahead = seq.wrapping_sub(self.next[d]) as i32;
                if ahead > 0 {
                    self.stopped |= 1 << d;
                    out.hole = true;
                    return out;
                }
                let old = ahead.unsigned_abs() as usize;
                if old >= payload.len() {
                    return out;
                }
                let new = &payload[old..];
                self.next[d] = self.next[d].wrapping_add(new.len() as u32);
                self.first.get_or_insert(dir);
                let len = self.len[d] as usize;
                let take = new.len().min(SIGNATURE_STREAM_BYTES - len);
                self.data[d][len..len + take].copy_from_slice(&new[..take]);
                self.len[d] = (len + take) as u16;
                self.chunks += 1;
                self.size = self.size.saturating_add(new.len().min(u16::MAX as usize) as u16);
                let bytes = &self.data[d][..len + take];
                if take > 0 {
                    if xmpp_stream_header(bytes) {
                        out.found = Some(TcpSignature::Xmpp { by: dir });
                        return out;
                    }
                    self.halves[d] = if d == 0 { client_half(bytes) } else { server_half(bytes) };
                    if self.started == 3 {
                        let first = self.first.unwrap_or(dir);
                        let (a, b) = if first == crate::Dir::ToServer { (self.halves[0], self.halves[1]) } else { (self.halves[1], self.halves[0]) };
                        out.found = tcp_signature(first, a, b);
                        if out.found.is_some() {
                            return out;
                        }
                    }
                }
                out.done = self.size as i64 > SIGNATURE_BYTES || self.chunks as u64 > SIGNATURE_PACKETS;
                out
            }

            pub fn stalled(&self) -> bool {
                self.stopped == 3
            }
        }
    }

    /// A DHCPDISCOVER as RFC 2131 lays it out: BOOTREQUEST, Ethernet,
    /// the cookie, option 53 = 1 (DISCOVER), option 55 (parameter list), end.
    fn discover() -> Vec<u8> {
        let mut m = vec![0u8; COOKIE_AT];
        m[0] = 1; // op BOOTREQUEST
        m[1] = 1; // htype Ethernet
        m[2] = 6; // hlen
        m[4..8].copy_from_slice(&0x1234_5678u32.to_be_bytes());
        m[28..34].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
        m.extend_from_slice(&COOKIE);
        m.extend_from_slice(&[53, 1, 1, 55, 3, 1, 3, 6, 0, 255]);
        m
    }


    /// An NTPv4 message of `mode` as RFC 5905 figure 8 lays it out.
    fn ntp(mode: u8) -> Vec<u8> {
        let mut m = vec![0u8; 48];
        m[0] = (4 << 3) | mode; // LI 0, VN 4
        m[1] = 2; // stratum
        m
    }

    #[test]
    fn ntp_messages_as_zeeks_grammar_takes_them() {
        assert_eq!(ntp_mode(&ntp(NTP_MODE_CLIENT)), Some(3));
        assert_eq!(ntp_mode(&ntp(NTP_MODE_SERVER)), Some(4));
        assert_eq!(ntp_mode(&ntp(3)[..47]), None, "short of the 48-byte header");
        // A MAC after the header (20 bytes: not an extension field).
        let mut m = ntp(3);
        m.extend_from_slice(&[0; 20]);
        assert_eq!(ntp_mode(&m), Some(3));
        // More than 24 bytes after it must be extension fields.
        let mut m = ntp(3);
        m.extend_from_slice(&[0, 1, 0, 8]);
        m.extend_from_slice(&[0; 28]);
        assert_eq!(ntp_mode(&m), None, "an extension field shorter than 16 bytes");
        // Mode 6: a control header and its data count.
        let mut c = vec![(2 << 3) | 6, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 4];
        assert_eq!(ntp_mode(&c), None, "4 data bytes promised");
        c.extend_from_slice(b"abcd");
        assert_eq!(ntp_mode(&c), Some(6));
        assert_eq!(ntp_mode(b""), None);
    }

    #[test]
    fn sip_status_lines() {
        assert!(is_sip_status_line(b"SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP h\r\n\r\n"));
        assert!(is_sip_status_line(b"SIP/2.0 404 Not Found\r\n"));
        assert!(!is_sip_status_line(b"OPTIONS sip:a@b SIP/2.0\r\n"), "a request");
        assert!(!is_sip_status_line(b"SIP/2.0 20 OK\r\n"));
        assert!(!is_sip_status_line(b"SIP/2 200 OK\r\n"));
        assert!(!is_sip_status_line(b"HTTP/1.1 200 OK\r\n"));
    }

    #[test]
    fn both_halves_make_a_signature() {
        use crate::ssh::SshVersion;
        use crate::Dir::{ToClient, ToServer};
        let smtp_s = server_half(b"220 mail.example ESMTP Postfix\r\n");
        let smtp_c = client_half(b"EHLO client.example\r\n");
        assert_eq!(tcp_signature(ToClient, smtp_s, smtp_c), Some(TcpSignature::Smtp));
        assert_eq!(tcp_signature(ToClient, server_half(b"220-multi\r\n"), client_half(b"HELO x\r\n")), Some(TcpSignature::Smtp));
        let pop_s = server_half(b"+OK Dovecot ready.\r\n");
        assert_eq!(tcp_signature(ToClient, pop_s, client_half(b"CAPA\r\n")), Some(TcpSignature::Pop3));
        assert_eq!(tcp_signature(ToClient, pop_s, client_half(b"USER bob\r\n")), Some(TcpSignature::Pop3));
        assert_eq!(tcp_signature(ToClient, pop_s, smtp_c), None, "a POP3 greeting and an SMTP command");
        assert_eq!(tcp_signature(ToClient, smtp_s, client_half(b"GET / HTTP/1.1\r\n")), None);
        let ssh_s = server_half(b"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n");
        let ssh_c = client_half(b"SSH-2.0-OpenSSH_9.2p1\r\n");
        assert_eq!(tcp_signature(ToClient, ssh_s, ssh_c), Some(TcpSignature::Ssh { first: ToClient, version: SshVersion::V2 }));
        assert_eq!(tcp_signature(ToServer, client_half(b"SSH-1.99-x\r\n"), ssh_s), Some(TcpSignature::Ssh { first: ToServer, version: SshVersion::V199 }));
        assert_eq!(tcp_signature(ToClient, ssh_s, 0), None, "one side only");
    }

    #[test]
    fn ftp_irc_ldap_halves_and_xmpp_headers() {
        use crate::Dir::ToClient;
        // FTP: the greeting and USER; a reply 230/331 completes it later.
        let greet = server_half(b"220 (vsFTPd 3.0.3)\r\n");
        assert_eq!(greet & (half::FTP | half::SMTP), half::FTP | half::SMTP);
        assert_eq!(tcp_signature(ToClient, greet, client_half(b"USER anonymous\r\n")), Some(TcpSignature::Ftp));
        assert!(ftp_server_half(b"\r\n 120 soon\r\n"));
        assert!(!ftp_server_half(b"2201 x\r\n") && !ftp_server_half(b"331 x\r\n"));
        assert!(ftp_client_half(b"FEAT\r\n  user bob\r\n"));
        assert!(!ftp_client_half(b"USERS\r\n") && !ftp_client_half(b"\tUSER x\r\n"));
        assert!(is_ftp_login_reply(b"331 Please specify the password."));
        assert!(is_ftp_login_reply(b"  230") && !is_ftp_login_reply(b"2301 x") && !is_ftp_login_reply(b"530 no"));
        // An SMTP greeting and an EHLO stay SMTP.
        assert_eq!(tcp_signature(ToClient, greet, client_half(b"EHLO x\r\n")), Some(TcpSignature::Smtp));
        // IRC: NICK and USER lines (either order), a numeric reply.
        let reg = client_half(b"NICK wl\r\nUSER wl 0 * :wirelog\r\n");
        assert_ne!(reg & half::IRC, 0);
        assert_ne!(client_half(b"USER wl 0 * :x\nNICK wl\n") & half::IRC, 0);
        assert_eq!(client_half(b"NICK wl\r\n") & half::IRC, 0, "USER missing");
        assert_eq!(client_half(b"NICK wl\r\nUSER wl 0 * :x") & half::IRC, 0, "USER line not ended");
        let num = server_half(b":irc.test 001 wl :Welcome\r\n");
        assert_eq!(tcp_signature(ToClient, num, reg), Some(TcpSignature::Irc));
        assert!(irc_server_half(b":irc.test NOTICE * :hi\r\n433 * wl :taken\r\n"));
        assert!(!irc_server_half(b":irc.test NOTICE * :*** Looking up\r\n"));
        assert!(!irc_server_half(b"ERROR :Closing link\r\n"));
        // LDAP: a whole simple BindRequest (RFC 4511 §4.2), a SEQUENCE back.
        let bind = [0x30, 0x0c, 0x02, 0x01, 0x01, 0x60, 0x07, 0x02, 0x01, 0x03, 0x04, 0x00, 0x80, 0x00];
        assert_ne!(client_half(&bind) & half::LDAP, 0);
        assert_eq!(client_half(&bind[..10]) & half::LDAP, 0, "not whole");
        let mut search = bind;
        search[5] = 0x63; // a SearchRequest's tag: not a bind
        assert_eq!(client_half(&search) & half::LDAP, 0);
        // A SEQUENCE too short to hold a messageID: not a bind (it panicked).
        for short in 0..3 {
            assert_eq!(client_half(&[0x30, short, 0x02, 0x01, 0x01, 0x60, 0x00]) & half::LDAP, 0, "{short}");
        }
        let bound = server_half(&[0x30, 0x0c, 0x02, 0x01, 0x01, 0x61, 0x07]);
        assert_eq!(tcp_signature(ToClient, bound, client_half(&bind)), Some(TcpSignature::Ldap));
        assert_eq!(tcp_signature(ToClient, server_half(b"\x00"), client_half(&bind)), None);
        // XMPP: the stream header with a jabber: namespace in single quotes.
        assert!(xmpp_stream_header(b"<?xml version='1.0'?><stream:stream to='x' xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>"));
        assert!(xmpp_stream_header(b"\n <stream:stream xmlns='jabber:server'>"));
        assert!(!xmpp_stream_header(b"<stream:stream xmlns=\"jabber:client\">"), "double quotes: not Zeek's pattern");
        assert!(!xmpp_stream_header(b"<stream:stream to='x'>xmlns='jabber:client'"), "outside the tag");
        assert!(!xmpp_stream_header(b"<?xml version='1.0'?><root xmlns='jabber:client'>"));
    }

    /// Server registrations (RFC 1459 §4.1.4): the form Zeek's pattern
    /// takes, and the ones it does not (ngircd's own lines among them).
    #[test]
    fn irc_server_registrations() {
        use crate::Dir::{ToClient, ToServer};
        assert!(irc_server_registration(b"PASS secret 0210 IRC|\r\nSERVER a.test 1 :A server\r\n"));
        assert!(irc_server_registration(b"  server b.test  12  :x\n"));
        assert!(!irc_server_registration(b"SERVER b.wirelog.test :wirelog test B\r\n"), "no hopcount (ngircd's registration)");
        assert!(!irc_server_registration(b":a.test SERVER a.test 1 :A\r\n"), "a prefix: not at the line's start");
        assert!(!irc_server_registration(b"SERVER a.test 1 1 :A\r\n"), "RFC 2813's token before the info");
        assert!(!irc_server_registration(b"SERVER a.test 1 :\r\n"), "empty info");
        assert!(!irc_server_registration(b"SERVER a.test 1 :A"), "line not ended");
        let a = client_half(b"PASS pw 0210 IRC|\r\nSERVER a.test 1 :A\r\n");
        let b = server_half(b"PASS pw 0210 IRC|\r\nSERVER b.test 1 :B\r\n");
        assert_eq!(tcp_signature(ToServer, a, b), Some(TcpSignature::IrcServers));
        assert_eq!(tcp_signature(ToClient, b, a), Some(TcpSignature::IrcServers));
        assert_eq!(tcp_signature(ToServer, a, server_half(b":b.test 001 x :hi\r\n")), None, "one side only");
    }

    /// The signatures are matched on each direction's stream: lines split
    /// over segments, retransmissions, a hole, and the bound.
    #[test]
    fn signatures_on_the_stream() {
        use crate::Dir::{ToClient, ToServer};
        // IRC's registration in four segments, then the server's welcome.
        let mut s = SigStream::new();
        let mut seq = 1000u32;
        for piece in [&b"NI"[..], b"CK wl\r", b"\nUSER wl 0 * :wire", b"log\r\n"] {
            let r = s.push(ToServer, seq, piece);
            assert_eq!(r, SigPush { found: None, done: false, hole: false });
            seq += piece.len() as u32;
        }
        // A retransmission adds nothing.
        assert_eq!(s.push(ToServer, 1000, b"NICK").found, None);
        let r = s.push(ToClient, 5000, b":irc.test 001 wl :Welcome\r\n");
        assert_eq!(r.found, Some(TcpSignature::Irc));
        // The server's greeting split too: SMTP's 220 and EHLO.
        let mut s = SigStream::new();
        assert_eq!(s.push(ToClient, 1, b"22").found, None);
        assert_eq!(s.push(ToClient, 3, b"0 mail.test ESMTP\r\n").found, None);
        assert_eq!(s.push(ToServer, 7, b"EH").found, None);
        assert_eq!(s.push(ToServer, 9, b"LO c.test\r\n").found, Some(TcpSignature::Smtp));
        // A segment ahead of a hole stops its direction.
        let mut s = SigStream::new();
        s.push(ToServer, 1, b"NICK wl\r\n");
        let r = s.push(ToServer, 100, b"USER wl 0 * :x\r\n");
        assert!(r.hole && r.found.is_none());
        assert!(!s.stalled());
        s.push(ToClient, 1, b"x");
        assert!(s.push(ToClient, 50, b"y").hole);
        assert!(s.stalled());
        // Past 1024 bytes of both directions, or 100 chunks, matching stops
        // after the chunk that crossed.
        let mut s = SigStream::new();
        assert!(!s.push(ToServer, 0, &[b'x'; 1000]).done);
        assert!(!s.push(ToClient, 0, &[b'y'; 24]).done, "1024 bytes: not past");
        assert!(s.push(ToClient, 24, b"z").done);
        let mut s = SigStream::new();
        for i in 0..100u32 {
            assert!(!s.push(ToServer, i, b"x").done, "{i}");
        }
        assert!(s.push(ToServer, 100, b"x").done);
        // XMPP's header on one side, in two pieces.
        let mut s = SigStream::new();
        assert_eq!(s.push(ToServer, 0, b"<?xml version='1.0'?><stream:stream to='x' ").found, None);
        assert_eq!(s.push(ToServer, 43, b"xmlns='jabber:client'>").found, Some(TcpSignature::Xmpp { by: ToServer }));
    }

    /// xorshift64*: the differential test's repeatable randomness.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// The pieces random streams are made of: the patterns' words and
    /// their near misses, line ends, blanks, prefixes, BER bytes.
    const PIECES: &[&[u8]] = &[
        b"USER ", b"user\t", b"USER", b"USERS", b"NICK ", b"nick", b"SERVER ", b"server  ", b"EHLO", b"HELO ", b"CAPA",
        b"AUTH", b"STLS", b"APOP ", b"PASS ", b"220", b"220-", b"220 ", b"120 ", b"2201", b"230 ", b"+OK", b"+O", b"SSH-",
        b"SSH-1", b"1.99", b"2.0-x", b"1.5", b".9", b"\r\n", b"\n", b"\r", b" ", b"  ", b"\t", b"\x0c", b":", b":irc.test ",
        b": ", b"001 ", b"12 ", b"1 ", b"x", b"wl", b"0", b"*", b":A", b"<?xml", b"<?xml version='1.0'?>", b"?>", b"?",
        b">", b"<stream:stream ", b"<stream:stream", b"xmlns='jabber:", b"xmlns='jabber", b"client'", b"to='x' ",
        b"\x30", b"\x30\x0c\x02\x01\x01\x60\x07\x02\x01\x03\x04\x00\x80\x00", b"\x30\x02\x02\x01", b"\x60", b"\x81",
        b"\x02\x01",
    ];

    fn random_stream(r: &mut Rng) -> Vec<u8> {
        let n = [1, 3, 8, 30, 120, 600][r.below(6)];
        let mut v = Vec::new();
        for _ in 0..n {
            if r.below(6) == 0 {
                for _ in 0..1 + r.below(8) {
                    v.push(r.next() as u8);
                }
            } else {
                v.extend_from_slice(PIECES[r.below(PIECES.len())]);
            }
        }
        v
    }

    /// Both matchers fed the same segments, their answers compared after
    /// each: the same [`SigPush`], halves and stall.
    struct Both {
        new: Box<SigStream>,
        old: Box<reference::SigStream>,
        pushes: usize,
        /// What the pushes gave, a bit each ([`Both::outcome`]).
        seen: u16,
    }

    impl Both {
        fn new() -> Both {
            Both { new: SigStream::new(), old: reference::SigStream::new(), pushes: 0, seen: 0 }
        }

        /// A bit per signature found, the bound reached, a hole.
        fn outcome(p: SigPush) -> u16 {
            let found = match p.found {
                None => 0,
                Some(TcpSignature::Ssh { .. }) => 1,
                Some(TcpSignature::Smtp) => 2,
                Some(TcpSignature::Pop3) => 4,
                Some(TcpSignature::Ftp) => 8,
                Some(TcpSignature::Irc) => 16,
                Some(TcpSignature::IrcServers) => 32,
                Some(TcpSignature::Ldap) => 64,
                Some(TcpSignature::Xmpp { .. }) => 128,
            };
            found | (p.done as u16) << 8 | (p.hole as u16) << 9
        }

        fn push(&mut self, dir: crate::Dir, seq: u32, payload: &[u8], case: &str) {
            let a = self.new.push(dir, seq, payload);
            let b = self.old.push(dir, seq, payload);
            let d = (dir == crate::Dir::ToClient) as usize;
            let ctx = || format!("{case}, push {} ({dir:?}, {} bytes), buffer {:?}", self.pushes, payload.len(), String::from_utf8_lossy(&self.old.data[d][..self.old.len[d] as usize]));
            assert_eq!(a, b, "{}", ctx());
            assert_eq!(self.new.halves, self.old.halves, "{}", ctx());
            assert_eq!(self.new.stalled(), self.old.stalled(), "{}", ctx());
            self.pushes += 1;
            self.seen |= Both::outcome(a);
        }
    }

    /// Feeds a client stream and a server stream in random segments (sizes
    /// up to `max`), interleaved at random, with now and then a
    /// retransmission (overlapping new bytes or not), an empty segment or,
    /// if `holes`, a segment ahead of a hole; starting sequence numbers
    /// anywhere, around the wrap too.
    fn feed_random(r: &mut Rng, streams: [&[u8]; 2], max: usize, holes: bool, case: &str) -> u16 {
        use crate::Dir::{ToClient, ToServer};
        let mut both = Both::new();
        let base = [r.next() as u32, u32::MAX - r.below(3000) as u32];
        let mut at = [0usize; 2];
        for _ in 0..2000 {
            let open: Vec<usize> = (0..2).filter(|&d| at[d] < streams[d].len()).collect();
            if open.is_empty() {
                break;
            }
            let d = open[r.below(open.len())];
            let dir = if d == 0 { ToServer } else { ToClient };
            let s = streams[d];
            let size = 1 + r.below(max);
            match r.below(40) {
                0 if holes => {
                    let skip = 1 + r.below(50);
                    let from = (at[d] + skip).min(s.len() - 1);
                    let seq = base[d].wrapping_add(at[d] as u32 + skip as u32);
                    both.push(dir, seq, &s[from..(from + size).min(s.len())], case);
                }
                1 | 2 => {
                    let back = r.below(at[d] + 1);
                    let from = at[d] - back;
                    let to = (from + size).min(s.len());
                    both.push(dir, base[d].wrapping_add(from as u32), &s[from..to], case);
                    at[d] = at[d].max(to);
                }
                3 => both.push(dir, base[d].wrapping_add(at[d] as u32), b"", case),
                _ => {
                    let to = (at[d] + size).min(s.len());
                    both.push(dir, base[d].wrapping_add(at[d] as u32), &s[at[d]..to], case);
                    at[d] = to;
                }
            }
        }
        both.seen
    }

    /// Real openings (those of the tests above) and near misses, client
    /// stream then server stream.
    fn openings() -> Vec<(&'static [u8], &'static [u8])> {
        vec![
            (b"EHLO client.example\r\nMAIL FROM:<a@b>\r\n", b"220 mail.example ESMTP Postfix\r\n250-mail.example\r\n250 8BITMIME\r\n"),
            (b"HELO x\r\n", b"220-multi\r\n220 ready\r\n"),
            (b"CAPA\r\n", b"+OK Dovecot ready.\r\n"),
            (b"USER bob\r\nPASS x\r\n", b"+OK Dovecot ready.\r\n+OK\r\n"),
            (b"SSH-2.0-OpenSSH_9.2p1\r\n", b"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n"),
            (b"SSH-1.99-x\r\n", b"SSH-1.5-old\n"),
            (b"SSH-1\n", b"SSH-2.0-x\r\n"),
            (b"USER anonymous\r\nPASS x\r\n", b"220 (vsFTPd 3.0.3)\r\n331 Please specify the password.\r\n230 Login successful.\r\n"),
            (b"FEAT\r\n  user bob\r\n", b"\r\n 120 soon\r\n220 now\r\n"),
            (b"NICK wl\r\nUSER wl 0 * :wirelog\r\n", b":irc.test NOTICE * :*** Looking up\r\n:irc.test 001 wl :Welcome\r\n"),
            (b"USER wl 0 * :x\nNICK wl\n", b"433 * wl :taken\r\n"),
            (b"NICK wl\r\nUSER wl 0 * :x", b"ERROR :Closing link\r\n"),
            (b"PASS pw 0210 IRC|\r\nSERVER a.test 1 :A\r\n", b"PASS pw 0210 IRC|\r\nSERVER b.test 1 :B\r\n"),
            (b"  server b.test  12  :x\n", b"SERVER b.wirelog.test :wirelog test B\r\n"),
            (b"\x30\x0c\x02\x01\x01\x60\x07\x02\x01\x03\x04\x00\x80\x00", b"\x30\x0c\x02\x01\x01\x61\x07\x0a\x01\x00\x04\x00\x04\x00"),
            (b"\x30\x0c\x02\x01\x01\x63\x07\x02\x01\x03\x04\x00\x80\x00", b"\x00"),
            (b"\x30\x81\x0c\x02\x01\x01\x60\x07", b"\x30"),
            (
                b"<?xml version='1.0'?><stream:stream to='x' xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>",
                b"\n <stream:stream xmlns='jabber:server'>",
            ),
            (b"<stream:stream xmlns=\"jabber:client\">", b"<stream:stream to='x'>xmlns='jabber:client'"),
            (b"<?xml version='1.0'?><root xmlns='jabber:client'>", b"<?xml?>"),
            (b"GET / HTTP/1.1\r\nHost: x\r\nUser-Agent: y\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
        ]
    }

    /// The incremental matcher against the whole-buffer one it replaced
    /// (kept in [`reference`]): the protocols' openings split at every
    /// position and in random segments, and random streams of the
    /// patterns' pieces and random bytes (past 1024 bytes and 100
    /// segments too), with retransmissions and holes.
    #[test]
    fn incremental_matching_is_the_whole_buffer_matching() {
        use crate::Dir::{ToClient, ToServer};
        let (mut cases, mut seen) = (0, 0);
        for (i, &(c, s)) in openings().iter().enumerate() {
            // Each side split in two at every position; the other side
            // before, between and after the two pieces.
            for (d, one, other) in [(ToServer, c, s), (ToClient, s, c)] {
                let od = if d == ToServer { ToClient } else { ToServer };
                for k in 0..=one.len() {
                    for when in 0..3 {
                        let case = format!("opening {i}, {d:?} split at {k}, other side at {when}");
                        let mut both = Both::new();
                        if when == 0 {
                            both.push(od, 500, other, &case);
                        }
                        both.push(d, 1000, &one[..k], &case);
                        if when == 1 {
                            both.push(od, 500, other, &case);
                        }
                        both.push(d, 1000 + k as u32, &one[k..], &case);
                        if when == 2 {
                            both.push(od, 500, other, &case);
                        }
                        seen |= both.seen;
                        cases += 1;
                    }
                }
            }
        }
        let mut r = Rng(0x5eed_0034_c0ff_ee01);
        for round in 0..200 {
            for (i, &(c, s)) in openings().iter().enumerate() {
                let max = [1, 2, 3, 7, 40][round % 5];
                seen |= feed_random(&mut r, [c, s], max, round % 4 == 3, &format!("opening {i}, round {round}"));
                cases += 1;
            }
        }
        for case in 0..6000 {
            let (c, s) = (random_stream(&mut r), random_stream(&mut r));
            let max = [1, 3, 9, 30, 200, 1500][case % 6];
            seen |= feed_random(&mut r, [&c, &s], max, case % 5 == 4, &format!("random {case}"));
            cases += 1;
        }
        assert!(cases > 10_000, "{cases}");
        // Every signature was found, the bound reached and a hole met.
        assert_eq!(seen, 0x3ff, "{seen:#x}");
    }

    #[test]
    fn udp_services_by_port_and_by_signature() {
        use crate::detect::Detection;
        use crate::Dir::{ToClient, ToServer};
        // NTP on 123: confirmed; a server's message from the originator flips, once.
        let mut d = Detection::default();
        assert_eq!(udp_datagram(&mut d, 123, ToServer, &ntp(NTP_MODE_SERVER), (0, 0)), UdpLook::Flip);
        assert_eq!(d.service(), Some(Service::Ntp));
        assert_eq!(udp_datagram(&mut d, 123, ToServer, &ntp(NTP_MODE_CLIENT), (48, 1)), UdpLook::Over);
        let mut d = Detection::default();
        assert_eq!(udp_datagram(&mut d, 123, ToServer, &ntp(NTP_MODE_CLIENT), (0, 0)), UdpLook::Continue);
        assert_eq!(udp_datagram(&mut d, 123, ToClient, &ntp(NTP_MODE_SERVER), (48, 1)), UdpLook::Continue);
        assert_eq!(d.service(), Some(Service::Ntp));
        // NTP elsewhere is not named (Zeek has no NTP signature).
        let mut d = Detection::default();
        udp_datagram(&mut d, 1123, ToServer, &ntp(NTP_MODE_CLIENT), (0, 0));
        assert_eq!(d.service(), None);
        // SIP: a status line from the responder, on any port within the
        // signature bounds; on 5060 at any time.
        let ok = b"SIP/2.0 200 OK\r\n\r\n";
        let mut d = Detection::default();
        assert_eq!(udp_datagram(&mut d, 5080, ToServer, b"OPTIONS sip:x SIP/2.0\r\n\r\n", (0, 0)), UdpLook::Continue);
        assert_eq!(udp_datagram(&mut d, 5080, ToClient, ok, (26, 1)), UdpLook::Over);
        assert_eq!(d.service(), Some(Service::Sip));
        let mut d = Detection::default();
        assert_eq!(udp_datagram(&mut d, 5080, ToClient, ok, (2000, 3)), UdpLook::Over, "past the signature bytes");
        assert_eq!(d.service(), None);
        let mut d = Detection::default();
        udp_datagram(&mut d, 5060, ToClient, ok, (2000, 300));
        assert_eq!(d.service(), Some(Service::Sip));
        let mut d = Detection::default();
        udp_datagram(&mut d, 5080, ToServer, ok, (0, 0));
        assert_eq!(d.service(), None, "the originator's datagrams are requests to Zeek's analyzer");
        // DHCP's cookie on any port.
        let mut d = Detection::default();
        assert_eq!(udp_datagram(&mut d, 6767, ToServer, &discover(), (0, 0)), UdpLook::Over);
        assert_eq!(d.service(), Some(Service::Dhcp));
    }

    #[test]
    fn ftp_commands_as_zeek_takes_them() {
        assert!(is_ftp_command(b"USER anonymous\r\n"));
        assert!(is_ftp_command(b"  FEAT\r\n"));
        assert!(is_ftp_command(b"AUTH TLS\r\n"));
        assert!(!is_ftp_command(b"NO\r\n")); // shorter than 3
        assert!(!is_ftp_command(b"\x16\x03\x01\x02\x00\x01\r\n")); // a TLS record
        assert!(!is_ftp_command(b"USER")); // not ended yet
        assert!(!is_ftp_command(&[b'A'; 101].iter().copied().chain(*b" x\r\n").collect::<Vec<u8>>()));
        assert!(!is_ftp_command(b""));
    }

    #[test]
    fn a_discover_is_dhcp() {
        assert!(is_dhcp(&discover()));
        // Padding after the end option (clients pad to 300 bytes).
        let mut padded = discover();
        padded.resize(300, 0);
        assert!(is_dhcp(&padded));
    }

    #[test]
    fn what_zeek_would_reject_is_not() {
        let mut m = discover();
        m[COOKIE_AT] = 0; // plain BOOTP cookie missing
        assert!(!is_dhcp(&m));
        let m = discover();
        assert!(!is_dhcp(&m[..m.len() - 1])); // no end option
        let mut m = discover();
        let n = m.len();
        m[n - 9] = 99; // message type option renamed: none left
        assert!(!is_dhcp(&m));
        let mut m = discover()[..COOKIE_AT + 4].to_vec();
        m.extend_from_slice(&[53, 9, 1, 255]); // option longer than the payload
        assert!(!is_dhcp(&m));
        assert!(!is_dhcp(b"not dhcp"));
    }
}
