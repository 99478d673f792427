//! Length-prefixed messages out of one direction's in-order bytes: the
//! framing MQTT (a variable-length remaining length), AMQP 0-9-1 (a frame
//! header with a 32-bit size) and Kafka (a 32-bit size) share.
//!
//! A protocol says, from a message's first bytes, how long the whole message
//! is ([`Frame`]); the [`Framer`] hands each message to the protocol once its
//! last byte arrived, with its first bytes (at most a cap: what the protocol
//! reads of it) and its length. A message inside one slice is handed over
//! borrowed from it; only a message cut by a segment boundary is copied, and
//! only up to the cap (the rest is counted past, never kept).
//!
//! A gap inside a message whose length is known keeps the framing (the
//! message goes out marked [`Msg::holed`], its first bytes only up to the
//! gap); a gap anywhere else loses it, and the direction's later bytes are
//! counted as unparsed (these protocols have no marker to find a message
//! boundary again).

/// What a message's first bytes say of its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    /// More bytes are needed to tell.
    Need,
    /// The whole message (header included) is this many bytes.
    Len(u64),
    /// The same, but only its first [`SHORT_HEAD`] bytes are wanted (a
    /// message body that is counted, not read).
    Short(u64),
    /// Not a message of this protocol: the framing is lost.
    Bad,
}

/// What is kept of a [`Frame::Short`] message.
pub(crate) const SHORT_HEAD: usize = 16;

/// One whole message.
#[derive(Debug)]
pub(crate) struct Msg<'a> {
    /// Its first bytes, at most the cap the caller gave (fewer after a gap).
    pub head: &'a [u8],
    /// Its whole length on the wire.
    pub len: u64,
    /// When its first and last bytes were seen.
    pub first_ns: i64,
    pub last_ns: i64,
    /// Bytes of it were missing (a gap): `head` may be short and its end
    /// is not the message's.
    pub holed: bool,
}

/// Reading the messages of one direction.
#[derive(Debug, Default)]
pub(crate) struct Framer {
    /// The current message's first bytes (up to the cap) when it spans calls.
    buf: Vec<u8>,
    /// Its whole length once known (0: its header is still incomplete).
    len: u64,
    /// Its bytes seen so far.
    seen: u64,
    first_ns: i64,
    /// A gap fell inside it.
    holed: bool,
    /// How many of its first bytes are kept.
    cap: usize,
    /// The framing is lost: nothing more is read.
    lost: bool,
}

impl Framer {
    /// The framing was lost (bad header, gap outside a message).
    pub fn lost(&self) -> bool {
        self.lost
    }

    /// Heap bytes it holds (the buffer of a message cut by a segment).
    pub fn held_bytes(&self) -> usize {
        self.buf.capacity()
    }

    /// Gives back a buffer an earlier message grew past `max`, when no
    /// message is in progress (so an idle connection holds none).
    pub fn shrink(&mut self, max: usize) {
        if self.seen == 0 && self.buf.capacity() > max {
            self.buf = Vec::new();
        }
    }

    /// Reads `data`, seen at `ts_ns`, handing each message that ends in it
    /// to `on`, with at most `cap` of its first bytes. Returns the bytes it
    /// could not read (after the framing was lost).
    pub fn feed(&mut self, mut data: &[u8], ts_ns: i64, cap: usize, frame: impl Fn(&[u8]) -> Frame, mut on: impl FnMut(Msg<'_>)) -> u64 {
        let full = cap.max(SHORT_HEAD);
        // A message's length, and how much of it to keep.
        let frame = |b: &[u8]| match frame(b) {
            Frame::Short(n) => (Frame::Len(n), SHORT_HEAD),
            f => (f, full),
        };
        while !data.is_empty() {
            if self.lost {
                return data.len() as u64;
            }
            if self.seen == 0 {
                // At a message boundary: the whole message in `data` is
                // read where it lies.
                let (f, cap) = frame(data);
                self.cap = cap;
                match f {
                    Frame::Len(n) if n as usize <= data.len() && n > 0 => {
                        let n = n as usize;
                        on(Msg { head: &data[..n.min(cap)], len: n as u64, first_ns: ts_ns, last_ns: ts_ns, holed: false });
                        data = &data[n..];
                    }
                    Frame::Len(0) | Frame::Bad | Frame::Short(_) => {
                        self.lost = true;
                    }
                    Frame::Len(n) => {
                        self.buf.clear();
                        self.buf.extend_from_slice(&data[..data.len().min(cap)]);
                        self.len = n;
                        self.seen = data.len() as u64;
                        self.first_ns = ts_ns;
                        return 0;
                    }
                    Frame::Need => {
                        self.buf.clear();
                        self.buf.extend_from_slice(data);
                        self.len = 0;
                        self.seen = data.len() as u64;
                        self.first_ns = ts_ns;
                        if self.buf.len() >= full {
                            self.lost = true;
                        }
                        return 0;
                    }
                }
                continue;
            }
            if self.len == 0 {
                // The header is cut: add what may finish it.
                let before = self.buf.len();
                let k = data.len().min(full.saturating_sub(before).max(1));
                self.buf.extend_from_slice(&data[..k]);
                let (f, cap) = frame(&self.buf);
                self.cap = cap;
                match f {
                    Frame::Need => {
                        self.seen += k as u64;
                        data = &data[k..];
                        if self.buf.len() >= full {
                            self.lost = true;
                        }
                    }
                    Frame::Len(0) | Frame::Bad | Frame::Short(_) => {
                        self.lost = true;
                        self.reset();
                    }
                    Frame::Len(n) if n <= self.buf.len() as u64 => {
                        let used = n as usize - before;
                        self.buf.truncate(n as usize);
                        let head = std::mem::take(&mut self.buf);
                        on(Msg { head: &head, len: n, first_ns: self.first_ns, last_ns: ts_ns, holed: false });
                        self.buf = head;
                        self.reset();
                        data = &data[used..];
                    }
                    Frame::Len(n) => {
                        self.len = n;
                        self.seen = self.buf.len() as u64;
                        self.buf.truncate(cap);
                        data = &data[k..];
                    }
                }
                continue;
            }
            let take = (self.len - self.seen).min(data.len() as u64) as usize;
            if !self.holed {
                let room = self.cap.saturating_sub(self.buf.len()).min(take);
                self.buf.extend_from_slice(&data[..room]);
            }
            self.seen += take as u64;
            data = &data[take..];
            if self.seen == self.len {
                self.emit(ts_ns, &mut on);
            }
        }
        0
    }

    fn emit(&mut self, ts_ns: i64, on: &mut impl FnMut(Msg<'_>)) {
        let head = std::mem::take(&mut self.buf);
        on(Msg { head: &head, len: self.len, first_ns: self.first_ns, last_ns: ts_ns, holed: self.holed });
        self.buf = head;
        self.reset();
    }

    fn reset(&mut self) {
        self.buf.clear();
        self.len = 0;
        self.seen = 0;
        self.holed = false;
    }

    /// `len` bytes are missing. Inside a message of known length that they
    /// do not overrun, the framing holds (the message is marked holed, and
    /// handed to `on` if the gap was its end); else it is lost. Returns
    /// whether the framing holds.
    pub fn gap(&mut self, len: u64, ts_ns: i64, mut on: impl FnMut(Msg<'_>)) -> bool {
        if self.lost {
            return false;
        }
        if self.len > 0 && self.seen + len <= self.len {
            self.seen += len;
            self.holed = true;
            if self.seen == self.len {
                self.emit(ts_ns, &mut on);
            }
            return true;
        }
        self.reset();
        self.lost = true;
        false
    }
}

/// A reader over a message's bytes: big-endian numbers and byte runs, each
/// `None` past the end (a short or cut message is never read past).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rd<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Rd<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        Rd { b, at: 0 }
    }

    /// Bytes read so far.
    pub fn pos(&self) -> usize {
        self.at
    }

    /// What is left.
    pub fn rest(&self) -> &'a [u8] {
        &self.b[self.at.min(self.b.len())..]
    }

    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.b.get(self.at..end)?;
        self.at = end;
        Some(s)
    }

    /// Skips `n` bytes, which need not all be there (a message cut to its
    /// first bytes): false when they were not.
    pub fn skip(&mut self, n: usize) -> bool {
        self.at = self.at.saturating_add(n);
        self.at <= self.b.len()
    }

    pub fn u8(&mut self) -> Option<u8> {
        Some(self.bytes(1)?[0])
    }

    pub fn u16(&mut self) -> Option<u16> {
        Some(u16::from_be_bytes(self.bytes(2)?.try_into().ok()?))
    }

    pub fn u32(&mut self) -> Option<u32> {
        Some(u32::from_be_bytes(self.bytes(4)?.try_into().ok()?))
    }

    pub fn u64(&mut self) -> Option<u64> {
        Some(u64::from_be_bytes(self.bytes(8)?.try_into().ok()?))
    }
}

/// `b` as text cut to at most `max` bytes (on a character boundary;
/// invalid UTF-8 replaced).
pub(crate) fn text(b: &[u8], max: usize) -> String {
    let s = String::from_utf8_lossy(b);
    s[..crate::char_floor(&s, max)].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-byte length header: the message is that byte plus as many.
    fn frame(b: &[u8]) -> Frame {
        match b.first() {
            None => Frame::Need,
            Some(0xff) => Frame::Bad,
            Some(&n) => Frame::Len(1 + n as u64),
        }
    }

    fn feed_all(f: &mut Framer, parts: &[&[u8]], cap: usize) -> Vec<(Vec<u8>, u64, i64, i64, bool)> {
        let mut got = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            f.feed(p, i as i64, cap, frame, |m| got.push((m.head.to_vec(), m.len, m.first_ns, m.last_ns, m.holed)));
        }
        got
    }

    #[test]
    fn whole_split_and_capped_messages() {
        let mut f = Framer::default();
        let got = feed_all(&mut f, &[b"\x02ab\x03cd", b"e\x00", b"\x20", &[7u8; 32]], 16);
        assert_eq!(got.len(), 4);
        assert_eq!(got[0], (b"\x02ab".to_vec(), 3, 0, 0, false));
        assert_eq!(got[1], (b"\x03cde".to_vec(), 4, 0, 1, false));
        assert_eq!(got[2], (b"\x00".to_vec(), 1, 1, 1, false));
        // Cut to the cap, its length whole.
        assert_eq!((got[3].0.len(), got[3].1, got[3].2, got[3].3), (16, 33, 2, 3));
        assert_eq!(f.seen, 0);
    }

    #[test]
    fn a_gap_inside_a_message_keeps_the_framing() {
        let mut f = Framer::default();
        let mut got = Vec::new();
        f.feed(b"\x05ab", 0, 64, frame, |m| got.push((m.head.to_vec(), m.holed)));
        assert!(f.gap(2, 1, |m| got.push((m.head.to_vec(), m.holed))));
        f.feed(b"z\x01q", 2, 64, frame, |m| got.push((m.head.to_vec(), m.holed)));
        assert_eq!(got, [(b"\x05ab".to_vec(), true), (b"\x01q".to_vec(), false)]);
        // A gap at a boundary loses it.
        assert!(!f.gap(1, 3, |_| panic!()));
        assert_eq!(f.feed(b"\x01q", 4, 64, frame, |_| panic!()), 2);
        assert!(f.lost());
    }

    #[test]
    fn a_bad_header_loses_the_framing() {
        let mut f = Framer::default();
        let got = feed_all(&mut f, &[b"\x01a\xffzz"], 64);
        assert_eq!(got.len(), 1);
        assert!(f.lost());
    }
}
