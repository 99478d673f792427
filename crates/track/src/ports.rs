//! Ports where a server is likely to listen, for guessing the originator of
//! a connection whose first packet was not a SYN (Zeek's likely_server_ports).

/// A set of ports as a bitmap (8 KiB): membership is one load.
#[derive(Clone)]
pub struct PortSet {
    bits: Box<[u64; 1024]>,
}

impl PortSet {
    pub fn empty() -> Self {
        PortSet {
            bits: Box::new([0; 1024]),
        }
    }

    pub fn from_ports(ports: &[u16]) -> Self {
        let mut s = Self::empty();
        for &p in ports {
            s.insert(p);
        }
        s
    }

    pub fn insert(&mut self, p: u16) {
        self.bits[(p >> 6) as usize] |= 1 << (p & 63);
    }

    #[inline]
    pub fn contains(&self, p: u16) -> bool {
        self.bits[(p >> 6) as usize] & (1 << (p & 63)) != 0
    }
}

// Zeek's `likely_server_ports` is what the scripts `zeek -r` loads by
// default put there: every `server_ports` argument of
// `Analyzer::register_for_ports` (scripts/base/frameworks/analyzer/main.zeek)
// and `PacketAnalyzer::register_for_ports` (scripts/base/packet-protocols/
// main.zeek). `crate::zeek_ports` is that set, generated from Zeek's scripts
// by scripts/zeek_server_ports.py, each port with the script and line that
// wrote it and the registration that added it; nothing is added or left out
// here. (wirelog's own parsers register their ports the same way, see
// `--server-ports default` in the binary: the analogue of a Zeek analyzer's
// registration, done where the parsers' port table is known.)

pub use crate::zeek_ports::{ZeekServerPort, ZEEK_SERVER_PORTS};

/// TCP ports of Zeek's `likely_server_ports` (generated).
pub const DEFAULT_TCP_SERVER_PORTS: &[u16] = crate::zeek_ports::ZEEK_TCP_SERVER_PORTS;

/// UDP ports of Zeek's `likely_server_ports` (generated). 68/udp (DHCP's
/// client port) is registered as a non-server port and is not here: a
/// reply from 67 to 68 keeps 67 as the responder.
pub const DEFAULT_UDP_SERVER_PORTS: &[u16] = crate::zeek_ports::ZEEK_UDP_SERVER_PORTS;

impl PortSet {
    /// Parses a server-port list for one protocol: `default`, `none`, or a
    /// comma-separated list of `PORT`, `tcp/PORT`, `udp/PORT` or `LOW-HIGH`
    /// (a bare port applies to both protocols). Returns (tcp, udp).
    pub fn parse_list(spec: &str) -> Result<(PortSet, PortSet), String> {
        if matches!(spec.trim(), "none" | "") {
            return Ok((PortSet::empty(), PortSet::empty()));
        }
        let (mut tcp, mut udp) = (PortSet::empty(), PortSet::empty());
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            // `default` in a list extends the defaults: `default,tcp/13001`.
            if item == "default" {
                DEFAULT_TCP_SERVER_PORTS.iter().for_each(|&p| tcp.insert(p));
                DEFAULT_UDP_SERVER_PORTS.iter().for_each(|&p| udp.insert(p));
                continue;
            }
            if item == "none" {
                return Err("'none' cannot be combined with other ports".to_string());
            }
            let (proto, range) = match item.split_once('/') {
                Some((p, r)) => (Some(p), r),
                None => (None, item),
            };
            let (lo, hi) = match range.split_once('-') {
                Some((a, b)) => (a, b),
                None => (range, range),
            };
            let parse = |s: &str| {
                s.trim()
                    .parse::<u16>()
                    .map_err(|_| format!("'{item}': '{s}' is not a port number"))
            };
            let (lo, hi) = (parse(lo)?, parse(hi)?);
            if lo > hi {
                return Err(format!("'{item}': empty port range"));
            }
            for p in lo..=hi {
                match proto {
                    Some("tcp") => tcp.insert(p),
                    Some("udp") => udp.insert(p),
                    None => {
                        tcp.insert(p);
                        udp.insert(p);
                    }
                    Some(other) => {
                        return Err(format!(
                            "'{item}': unknown protocol '{other}' (use tcp or udp)"
                        ))
                    }
                }
            }
        }
        Ok((tcp, udp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_lists() {
        let (t, u) = PortSet::parse_list("tcp/80, udp/53, 6666-6669, 8080").unwrap();
        assert!(t.contains(80) && !u.contains(80));
        assert!(u.contains(53) && !t.contains(53));
        assert!(t.contains(6668) && u.contains(6668) && t.contains(8080));
        assert!(!t.contains(81));
        let (t, u) = PortSet::parse_list("none").unwrap();
        assert!(!t.contains(80) && !u.contains(53));
        assert!(PortSet::parse_list("sctp/5").is_err());
        assert!(PortSet::parse_list("99999").is_err());
        assert!(PortSet::parse_list("default").unwrap().0.contains(443));
        let (t, u) = PortSet::parse_list("default,tcp/13001").unwrap();
        assert!(t.contains(13001) && t.contains(443) && u.contains(53) && !u.contains(13001));
        assert!(PortSet::parse_list("default,none").is_err());
        // Zeek's registrations, a few from each script family.
        let (t, u) = PortSet::parse_list("default").unwrap();
        for p in [79, 135, 502, 1883, 2811, 3268, 3389, 5222, 20000] {
            assert!(t.contains(p), "tcp/{p}");
        }
        for p in [67, 123, 161, 514, 1812, 3389, 3544, 4011, 4789, 5060, 5072, 6081, 20000] {
            assert!(u.contains(p), "udp/{p}");
        }
        // Registered only (a server port through register_for_ports).
        assert!(t.contains(1434) && t.contains(3306) && t.contains(514));
        // Client ports Zeek registers as non-server ports, and ports no
        // default script registers (POP3 has only a signature).
        for p in [68, 546, 784, 853, 69, 500] {
            assert!(!u.contains(p), "udp/{p}");
        }
        assert!(!t.contains(110) && !t.contains(23) && !t.contains(11211));
    }

    #[test]
    fn the_table_and_the_sets_agree() {
        for e in ZEEK_SERVER_PORTS {
            let set = match e.proto {
                "tcp" => DEFAULT_TCP_SERVER_PORTS,
                "udp" => DEFAULT_UDP_SERVER_PORTS,
                other => panic!("{other}"),
            };
            assert!(set.contains(&e.port), "{}/{} ({}:{})", e.port, e.proto, e.script, e.line);
            assert!(e.script.starts_with("scripts/") && e.line > 0 && e.registered_line > 0);
        }
        for (proto, set) in [("tcp", DEFAULT_TCP_SERVER_PORTS), ("udp", DEFAULT_UDP_SERVER_PORTS)] {
            for &p in set {
                assert!(ZEEK_SERVER_PORTS.iter().any(|e| e.proto == proto && e.port == p), "{p}/{proto}");
            }
            assert!(set.windows(2).all(|w| w[0] < w[1]), "{proto}: sorted, each once");
        }
    }
}
