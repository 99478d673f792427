//! Which protocol a connection carries: by server port first, then by the
//! first bytes of a direction (so MySQL on 3307 or HTTP on 8080 is found).

use crate::{Dir, Protocol};

/// Server ports per protocol (configurable; defaults from [`Protocol::default_ports`]).
#[derive(Clone, Debug)]
pub struct PortMap {
    entries: Vec<(u16, Protocol)>,
}

impl Default for PortMap {
    fn default() -> Self {
        let mut entries = Vec::new();
        for p in Protocol::ALL {
            for &port in p.default_ports() {
                entries.push((port, p));
            }
        }
        PortMap { entries }
    }
}

impl PortMap {
    pub fn empty() -> Self {
        PortMap { entries: Vec::new() }
    }

    /// Replaces the ports of `proto` with `ports`.
    pub fn set(&mut self, proto: Protocol, ports: &[u16]) {
        self.entries.retain(|(_, p)| *p != proto);
        self.entries.extend(ports.iter().map(|&port| (port, proto)));
    }

    pub fn get(&self, port: u16) -> Option<Protocol> {
        self.entries.iter().find(|(p, _)| *p == port).map(|(_, proto)| *proto)
    }
}

/// The protocol whose first message `data` (the first bytes seen in `dir`)
/// looks like, checked from the most specific signature to the least.
pub fn by_content(dir: Dir, data: &[u8]) -> Option<Protocol> {
    if data.is_empty() {
        return None;
    }
    // First: a ClientHello record is the most specific signature, and its
    // first bytes could pass for a MySQL packet header.
    if crate::tls::looks_like(dir, data) {
        return Some(Protocol::Tls);
    }
    if crate::pgsql::looks_like(dir, data) {
        return Some(Protocol::Pgsql);
    }
    if crate::mysql::looks_like(dir, data) {
        return Some(Protocol::Mysql);
    }
    if crate::http::looks_like(dir, data) {
        return Some(Protocol::Http);
    }
    if crate::redis::looks_like(dir, data) {
        return Some(Protocol::Redis);
    }
    None
}

/// The protocol whose *server greeting* `data` is, when those are the first
/// bytes an originator sent: the tracker then has the roles backwards (the
/// capture missed the handshake and the server spoke first) and flips the
/// connection. Of the protocols parsed here only MySQL/MariaDB has a greeting
/// (handshake v10: a 4-byte header with sequence 0, protocol byte 0x0a, a
/// NUL-terminated version string); HTTP, PostgreSQL, Redis and DNS clients
/// speak first.
pub fn server_greeting(data: &[u8]) -> Option<Protocol> {
    crate::mysql::looks_like(Dir::ToClient, data).then_some(Protocol::Mysql)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(server_greeting(&pkt), Some(Protocol::Mysql));
        assert_eq!(by_content(Dir::ToServer, &pkt), None);
        assert_eq!(by_content(Dir::ToClient, &pkt), Some(Protocol::Mysql));
        // A client's first query is no greeting.
        let q = [6, 0, 0, 0, 3, b's', b'e', b'l', b'e', b'c'];
        assert_eq!(server_greeting(&q), None);
        assert_eq!(server_greeting(b"GET / HTTP/1.1\r\n\r\n"), None);
    }

    #[test]
    fn client_hello_is_tls() {
        // A ClientHello record header (TLS 1.0 record version, as clients
        // send) and the handshake type; the body does not matter here.
        let mut ch = vec![22, 3, 1, 0, 0x60, 1, 0, 0, 0x5c, 3, 3];
        ch.extend_from_slice(&[0; 32]);
        assert_eq!(by_content(Dir::ToServer, &ch), Some(Protocol::Tls));
        // A server's first record is not a client's.
        assert_eq!(by_content(Dir::ToClient, &ch), None);
        ch[5] = 2;
        assert_eq!(by_content(Dir::ToServer, &ch), None);
        // Not a record version.
        let mut bad = ch.clone();
        bad[5] = 1;
        bad[1] = 4;
        assert_eq!(by_content(Dir::ToServer, &bad), None);
    }
}
