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
}

impl Service {
    /// conn.log's name, as Zeek's analyzer writes it.
    pub fn name(self) -> &'static str {
        match self {
            Service::Dhcp => "dhcp",
            Service::Ftp => "ftp",
        }
    }

    pub(crate) fn from_code(c: u8) -> Option<Service> {
        match c {
            1 => Some(Service::Dhcp),
            2 => Some(Service::Ftp),
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

#[cfg(test)]
mod tests {
    use super::*;

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
