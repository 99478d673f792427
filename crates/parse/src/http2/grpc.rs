//! gRPC over HTTP/2 (grpc/doc/PROTOCOL-HTTP2.md): the 5-byte
//! length-prefixed messages of each direction counted as DATA streams by,
//! `:path` split into service and method, `grpc-timeout` and
//! `grpc-message`'s percent-encoding.

/// Counts the length-prefixed messages of one direction's DATA bytes
/// (flag byte, 4-byte big-endian length, message), without buffering them.
#[derive(Clone, Debug, Default)]
pub struct Messages {
    prefix: [u8; 5],
    have: u8,
    /// Bytes of the current message still to come.
    left: u64,
    pub count: u32,
    pub bytes: u64,
    pub compressed: bool,
    /// Bytes went missing: message boundaries are no longer known.
    lost: bool,
}

impl Messages {
    /// Bytes of this direction were lost: stop counting.
    pub fn lost(&mut self) {
        self.lost = true;
    }

    pub fn feed(&mut self, mut data: &[u8]) {
        if self.lost {
            return;
        }
        while !data.is_empty() {
            if self.left > 0 {
                let n = (self.left.min(data.len() as u64)) as usize;
                self.left -= n as u64;
                data = &data[n..];
                continue;
            }
            let n = (5 - self.have as usize).min(data.len());
            self.prefix[self.have as usize..self.have as usize + n].copy_from_slice(&data[..n]);
            self.have += n as u8;
            data = &data[n..];
            if self.have == 5 {
                self.have = 0;
                let len = u32::from_be_bytes([self.prefix[1], self.prefix[2], self.prefix[3], self.prefix[4]]) as u64;
                self.count += 1;
                self.bytes += len;
                self.compressed |= self.prefix[0] & 1 != 0;
                self.left = len;
            }
        }
    }
}

/// `/<service>/<method>` split; `None` for another shape.
pub fn service_method(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix('/')?;
    let (service, method) = rest.split_once('/')?;
    (!service.is_empty() && !method.is_empty() && !method.contains('/')).then_some((service, method))
}

/// `grpc-timeout`: up to 8 digits and a unit (H M S m u n), in ns.
pub fn timeout_ns(v: &[u8]) -> Option<i64> {
    let (&unit, digits) = v.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: i64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    let per = match unit {
        b'H' => 3_600_000_000_000,
        b'M' => 60_000_000_000,
        b'S' => 1_000_000_000,
        b'm' => 1_000_000,
        b'u' => 1_000,
        b'n' => 1,
        _ => return None,
    };
    n.checked_mul(per)
}

/// `grpc-message` percent-decoded (a `%` not followed by two hex digits is
/// kept as it is, as the spec asks of a receiver); invalid UTF-8 is replaced.
pub fn percent_decode(v: &[u8]) -> String {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        if v[i] == b'%' && i + 2 < v.len() {
            if let (Some(h), Some(l)) = (hex(v[i + 1]), hex(v[i + 2])) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(v[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_across_chunks() {
        let mut m = Messages::default();
        // Two messages (3 and 0 bytes) split at every position.
        let wire = [0, 0, 0, 0, 3, b'a', b'b', b'c', 1, 0, 0, 0, 0];
        for cut in 0..wire.len() {
            let mut m2 = Messages::default();
            m2.feed(&wire[..cut]);
            m2.feed(&wire[cut..]);
            assert_eq!((m2.count, m2.bytes, m2.compressed), (2, 3, true), "cut {cut}");
        }
        m.feed(&wire[..7]);
        assert_eq!(m.count, 1);
    }

    #[test]
    fn texts() {
        assert_eq!(service_method("/wirelog.test.Probe/Echo"), Some(("wirelog.test.Probe", "Echo")));
        assert_eq!(service_method("/index.html"), None);
        assert_eq!(timeout_ns(b"100m"), Some(100_000_000));
        assert_eq!(timeout_ns(b"5S"), Some(5_000_000_000));
        assert_eq!(timeout_ns(b"123456789S"), None);
        assert_eq!(timeout_ns(b"S"), None);
        assert_eq!(percent_decode(b"internal: %C3%BC 100%25 broken"), "internal: \u{fc} 100% broken");
        assert_eq!(percent_decode(b"50% off %"), "50% off %");
    }
}
