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
