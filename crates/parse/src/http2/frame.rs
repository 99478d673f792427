//! HTTP/2 frames (RFC 9113 §4.1, §6): the 9-byte header, the frame types and
//! flags wirelog reads, error code names, and the plausibility test used to
//! find a frame boundary again after a gap or in a capture begun late.

pub const HEADER_LEN: usize = 9;

pub const DATA: u8 = 0;
pub const HEADERS: u8 = 1;
pub const PRIORITY: u8 = 2;
pub const RST_STREAM: u8 = 3;
pub const SETTINGS: u8 = 4;
pub const PUSH_PROMISE: u8 = 5;
pub const PING: u8 = 6;
pub const GOAWAY: u8 = 7;
pub const WINDOW_UPDATE: u8 = 8;
pub const CONTINUATION: u8 = 9;

pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY_FLAG: u8 = 0x20;

/// SETTINGS_MAX_FRAME_SIZE's initial value (§6.5.2).
pub const DEFAULT_MAX_FRAME: u32 = 16_384;
/// Its largest allowed value.
pub const LARGEST_FRAME: u32 = (1 << 24) - 1;

/// SETTINGS identifiers read (§6.5.2).
pub const SETTINGS_HEADER_TABLE_SIZE: u16 = 1;
pub const SETTINGS_MAX_FRAME_SIZE: u16 = 5;

/// A frame's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub len: u32,
    pub ty: u8,
    pub flags: u8,
    /// Stream identifier (the reserved bit cleared).
    pub stream: u32,
    /// The reserved bit was set.
    pub reserved: bool,
}

impl Header {
    pub fn parse(b: &[u8; HEADER_LEN]) -> Header {
        let sid = u32::from_be_bytes([b[5], b[6], b[7], b[8]]);
        Header {
            len: u32::from_be_bytes([0, b[0], b[1], b[2]]),
            ty: b[3],
            flags: b[4],
            stream: sid & 0x7fff_ffff,
            reserved: sid & 0x8000_0000 != 0,
        }
    }

    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// Whether this header could start a frame a peer really sent, checked
    /// strictly (defined flags only, the stream-0 rules, fixed lengths), so
    /// that a position found by scanning is very likely a boundary. A
    /// CONTINUATION is refused: without its HEADERS it is of no use.
    pub fn plausible(&self, max_frame: u32) -> bool {
        if self.reserved || self.len > max_frame {
            return false;
        }
        let s0 = self.stream == 0;
        let (flags, ok) = match self.ty {
            DATA => (END_STREAM | PADDED, !s0),
            HEADERS => (END_STREAM | END_HEADERS | PADDED | PRIORITY_FLAG, !s0),
            PRIORITY => (0, !s0 && self.len == 5),
            RST_STREAM => (0, !s0 && self.len == 4),
            SETTINGS => (ACK, s0 && self.len.is_multiple_of(6) && (self.flags & ACK == 0 || self.len == 0)),
            PUSH_PROMISE => (END_HEADERS | PADDED, !s0 && self.len >= 4),
            PING => (ACK, s0 && self.len == 8),
            GOAWAY => (0, s0 && self.len >= 8),
            WINDOW_UPDATE => (0, self.len == 4),
            _ => (0, false),
        };
        ok && self.flags & !flags == 0
    }
}

/// The name of an HTTP/2 error code (§7).
pub fn error_name(code: u32) -> &'static str {
    match code {
        0x0 => "NO_ERROR",
        0x1 => "PROTOCOL_ERROR",
        0x2 => "INTERNAL_ERROR",
        0x3 => "FLOW_CONTROL_ERROR",
        0x4 => "SETTINGS_TIMEOUT",
        0x5 => "STREAM_CLOSED",
        0x6 => "FRAME_SIZE_ERROR",
        0x7 => "REFUSED_STREAM",
        0x8 => "CANCEL",
        0x9 => "COMPRESSION_ERROR",
        0xa => "CONNECT_ERROR",
        0xb => "ENHANCE_YOUR_CALM",
        0xc => "INADEQUATE_SECURITY",
        0xd => "HTTP_1_1_REQUIRED",
        _ => "UNKNOWN_ERROR",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_plausibility() {
        // nghttpd's first SETTINGS (3 settings), and its ACK.
        let h = Header::parse(&[0, 0, 18, 4, 0, 0, 0, 0, 0]);
        assert_eq!((h.len, h.ty, h.flags, h.stream), (18, SETTINGS, 0, 0));
        assert!(h.plausible(DEFAULT_MAX_FRAME));
        assert!(Header::parse(&[0, 0, 0, 4, 1, 0, 0, 0, 0]).plausible(DEFAULT_MAX_FRAME));
        // SETTINGS on a stream, an ACK with a payload, an undefined flag.
        assert!(!Header::parse(&[0, 0, 6, 4, 0, 0, 0, 0, 1]).plausible(DEFAULT_MAX_FRAME));
        assert!(!Header::parse(&[0, 0, 6, 4, 1, 0, 0, 0, 0]).plausible(DEFAULT_MAX_FRAME));
        assert!(!Header::parse(&[0, 0, 4, 1, 0x40, 0, 0, 0, 1]).plausible(DEFAULT_MAX_FRAME));
        // HEADERS on stream 1 with END_STREAM|END_HEADERS; too long; stream 0.
        let h = Header::parse(&[0, 0, 30, 1, 5, 0x80, 0, 0, 1]);
        assert!(h.reserved && h.stream == 1 && !h.plausible(DEFAULT_MAX_FRAME));
        assert!(Header::parse(&[0, 0, 30, 1, 5, 0, 0, 0, 1]).plausible(DEFAULT_MAX_FRAME));
        assert!(!Header::parse(&[0, 0x40, 1, 1, 5, 0, 0, 0, 1]).plausible(DEFAULT_MAX_FRAME));
        assert!(!Header::parse(&[0, 0, 30, 1, 5, 0, 0, 0, 0]).plausible(DEFAULT_MAX_FRAME));
        assert!(!Header::parse(&[0, 0, 30, CONTINUATION, 4, 0, 0, 0, 1]).plausible(DEFAULT_MAX_FRAME));
        assert_eq!(error_name(8), "CANCEL");
        assert_eq!(error_name(99), "UNKNOWN_ERROR");
    }
}
