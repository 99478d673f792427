//! UDP header (RFC 768).

use crate::{be16, SkipReason};

mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
}

pub const HEADER_LEN: usize = field::CHECKSUM.end;

#[derive(Debug, Clone, Copy)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, SkipReason> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    #[inline]
    pub fn check_len(&self) -> Result<(), SkipReason> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(SkipReason::Truncated)
        } else {
            Ok(())
        }
    }

    /// The fixed part of the header as an array, so that getters compile
    /// without bounds checks. Only valid after `check_len`.
    #[inline(always)]
    fn fixed(&self) -> &[u8; HEADER_LEN] {
        match self.buffer.as_ref().first_chunk::<HEADER_LEN>() {
            Some(a) => a,
            None => &[0; HEADER_LEN],
        }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    pub fn src_port(&self) -> u16 {
        be16(self.fixed(), field::SRC_PORT.start)
    }

    #[inline]
    pub fn dst_port(&self) -> u16 {
        be16(self.fixed(), field::DST_PORT.start)
    }

    /// Header plus payload length as declared (0 in IPv6 jumbograms).
    #[inline]
    pub fn len(&self) -> u16 {
        be16(self.fixed(), field::LENGTH.start)
    }

    /// 0 means "not computed" over IPv4.
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.fixed(), field::CHECKSUM.start)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Captured bytes after the header (not cut at the length field).
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}
