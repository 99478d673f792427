//! Byte sources under the parsers: a memory-mapped file walked in place, or a
//! stream (gzip, stdin, pipes) read through one reusable buffer.
//!
//! Both present a window starting at the next unread byte. The mapped window is
//! the rest of the file and never needs filling; the stream's is refilled on a
//! parser's `Need`, and the buffer grows only when it is full of real data, so a
//! lying length field costs at most a few times the bytes actually present.

use std::io::{self, Read};

use flate2::read::MultiGzDecoder;
use memmap2::Mmap;

/// What the record walk needs from a byte source.
pub(crate) trait Source {
    /// Unread bytes.
    fn window(&self) -> &[u8];
    /// Index of `window()[0]` in `bytes()`.
    fn window_start(&self) -> usize;
    /// The whole buffer the window is a part of, for borrowing packet data.
    fn bytes(&self) -> &[u8];
    /// Offset of `window()[0]` in the (uncompressed) input.
    fn offset(&self) -> u64;
    /// No more bytes will arrive beyond the window.
    fn eof(&self) -> bool;
    fn consume(&mut self, n: usize);
    /// Makes the window at least `need` bytes long, or reaches end of input.
    fn fill(&mut self, need: usize) -> io::Result<()>;
}

pub(crate) struct Mapped {
    map: Mmap,
    pos: usize,
}

impl Mapped {
    pub(crate) fn new(map: Mmap) -> Mapped {
        // Purely a readahead hint; failure changes nothing.
        #[cfg(unix)]
        let _ = map.advise(memmap2::Advice::Sequential);
        Mapped { map, pos: 0 }
    }

    pub(crate) fn position(&self) -> u64 {
        self.pos as u64
    }
}

impl Source for Mapped {
    #[inline]
    fn window(&self) -> &[u8] {
        self.map.get(self.pos..).unwrap_or(&[])
    }
    #[inline]
    fn window_start(&self) -> usize {
        self.pos
    }
    #[inline]
    fn bytes(&self) -> &[u8] {
        &self.map
    }
    #[inline]
    fn offset(&self) -> u64 {
        self.pos as u64
    }
    #[inline]
    fn eof(&self) -> bool {
        true
    }
    #[inline]
    fn consume(&mut self, n: usize) {
        self.pos = self.pos.saturating_add(n).min(self.map.len());
    }
    fn fill(&mut self, _need: usize) -> io::Result<()> {
        Ok(())
    }
}

/// Counts bytes read from the underlying input, for progress on compressed files.
pub(crate) struct Counting<R> {
    inner: R,
    count: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count += n as u64;
        Ok(n)
    }
}

type BoxRead = Box<dyn Read + Send>;

enum Src {
    Plain(Counting<BoxRead>),
    Gzip(MultiGzDecoder<Counting<BoxRead>>),
}

impl Src {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Src::Plain(r) => r.read(buf),
            Src::Gzip(r) => r.read(buf),
        }
    }

    fn raw_count(&self) -> u64 {
        match self {
            Src::Plain(r) => r.count,
            Src::Gzip(r) => r.get_ref().count,
        }
    }
}

/// Big enough that refills are rare, small enough that opening many files is cheap.
pub(crate) const DEFAULT_BUF: usize = 256 * 1024;

pub(crate) struct Stream {
    src: Src,
    buf: Vec<u8>,
    /// Window is `buf[start..end]`.
    start: usize,
    end: usize,
    /// Input offset of `buf[0]`.
    base: u64,
    eof: bool,
}

impl Stream {
    pub(crate) fn new(r: BoxRead, buf_size: usize) -> Stream {
        Stream {
            src: Src::Plain(Counting { inner: r, count: 0 }),
            buf: vec![0; buf_size.max(64)],
            start: 0,
            end: 0,
            base: 0,
            eof: false,
        }
    }

    /// Re-reads everything so far, buffered bytes first, through a gzip decoder.
    /// Only valid before anything was consumed.
    pub(crate) fn into_gzip(self) -> Stream {
        let Src::Plain(c) = self.src else { return self };
        let prefix = self.buf[self.start..self.end].to_vec();
        let raw: BoxRead = Box::new(io::Cursor::new(prefix).chain(c.inner));
        Stream {
            src: Src::Gzip(MultiGzDecoder::new(Counting {
                inner: raw,
                count: 0,
            })),
            buf: self.buf,
            start: 0,
            end: 0,
            base: 0,
            eof: false,
        }
    }

    pub(crate) fn is_gzip(&self) -> bool {
        matches!(self.src, Src::Gzip(_))
    }

    /// Bytes taken from the underlying input (compressed bytes for gzip).
    pub(crate) fn position(&self) -> u64 {
        self.src.raw_count()
    }

    #[cfg(test)]
    pub(crate) fn buf_len(&self) -> usize {
        self.buf.len()
    }
}

impl Source for Stream {
    #[inline]
    fn window(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }
    #[inline]
    fn window_start(&self) -> usize {
        self.start
    }
    #[inline]
    fn bytes(&self) -> &[u8] {
        &self.buf
    }
    #[inline]
    fn offset(&self) -> u64 {
        self.base + self.start as u64
    }
    #[inline]
    fn eof(&self) -> bool {
        self.eof
    }
    #[inline]
    fn consume(&mut self, n: usize) {
        self.start = self.start.saturating_add(n).min(self.end);
    }

    fn fill(&mut self, need: usize) -> io::Result<()> {
        while self.end - self.start < need && !self.eof {
            if self.end == self.buf.len() {
                if self.start >= self.buf.len() / 2 {
                    // Copies at most half the buffer, and only after at least half
                    // of it was consumed, so compaction stays linear overall.
                    self.buf.copy_within(self.start..self.end, 0);
                    self.base += self.start as u64;
                    self.end -= self.start;
                    self.start = 0;
                } else {
                    // Full of real, mostly unconsumed data: only now does growing
                    // cost memory the input has actually supplied.
                    let new_len = self.buf.len().saturating_mul(2);
                    self.buf.resize(new_len, 0);
                }
            }
            let room = &mut self.buf[self.end..];
            match self.src.read(room) {
                Ok(0) => self.eof = true,
                // min(): a Read impl that over-reports must not make us index past the buffer.
                Ok(n) => self.end += n.min(room.len()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // Whatever is buffered is all we will get.
                    self.eof = true;
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Trickle;

    #[test]
    fn fill_compacts_and_keeps_offsets() {
        let data: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let mut s = Stream::new(Box::new(Trickle::new(data.clone(), 7)), 64);
        let mut off = 0usize;
        // Consume in odd steps; the window must always show the right bytes.
        while !(s.eof() && s.window().is_empty()) {
            s.fill(50).unwrap();
            let w = s.window();
            assert_eq!(s.offset(), off as u64);
            assert_eq!(w, &data[off..off + w.len()]);
            let n = w.len().min(13);
            s.consume(n);
            off += n;
        }
        assert_eq!(off, data.len());
        assert_eq!(s.position(), data.len() as u64);
        // 50-byte windows never need more than the initial 64 bytes doubled once.
        assert!(s.buf_len() <= 128, "{}", s.buf_len());
    }

    #[test]
    fn lying_need_grows_only_with_real_data() {
        let data = vec![1u8; 1000];
        let mut s = Stream::new(Box::new(Trickle::new(data, 100)), 64);
        s.fill(usize::MAX).unwrap();
        assert!(s.eof());
        assert_eq!(s.window().len(), 1000);
        assert!(s.buf_len() <= 2048, "{}", s.buf_len());
    }

    #[test]
    fn read_errors_end_the_stream() {
        struct Fails(bool);
        impl Read for Fails {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if std::mem::replace(&mut self.0, true) {
                    Err(io::Error::other("boom"))
                } else {
                    buf[..3].copy_from_slice(b"abc");
                    Ok(3)
                }
            }
        }
        let mut s = Stream::new(Box::new(Fails(false)), 64);
        assert!(s.fill(10).is_err());
        assert!(s.eof());
        assert_eq!(s.window(), b"abc");
    }
}
