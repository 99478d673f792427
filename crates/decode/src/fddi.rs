//! FDDI (LINKTYPE_FDDI, 10): frame control byte and two MAC addresses, then an
//! 802.2 LLC header (SNAP for IP). Zeek decodes it, and old traces use it.

use crate::link::{Net, Vlans};
use crate::{ethernet, SkipReason};

mod field {
    use core::ops::Range;
    pub const FRAME_CONTROL: usize = 0;
    pub const DESTINATION: Range<usize> = 1..7;
    pub const SOURCE: Range<usize> = 7..13;
    pub const PAYLOAD: usize = SOURCE.end;
}

pub const HEADER_LEN: usize = field::PAYLOAD;

#[derive(Debug, Clone, Copy)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Frame { buffer }
    }

    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, SkipReason> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    #[inline]
    pub fn check_len(&self) -> Result<(), SkipReason> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(SkipReason::Truncated)
        } else {
            Ok(())
        }
    }

    #[inline]
    pub fn frame_control(&self) -> u8 {
        self.buffer.as_ref()[field::FRAME_CONTROL]
    }

    /// Frame control format bits `CLFFZZZZ` with FF = 01: an LLC frame (the
    /// others are MAC and station management frames).
    #[inline]
    pub fn is_llc(&self) -> bool {
        self.frame_control() & 0x30 == 0x10
    }

    /// Addresses as on the wire (FDDI captures may be bit-swapped; we never
    /// interpret them).
    #[inline]
    pub fn destination(&self) -> [u8; 6] {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DESTINATION]);
        a
    }

    #[inline]
    pub fn source(&self) -> [u8; 6] {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SOURCE]);
        a
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Frame<&'a T> {
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

#[inline]
pub(crate) fn network<'a>(data: &'a [u8], vlans: &mut Vlans) -> Result<(Net, &'a [u8]), SkipReason> {
    let f = Frame::new_checked(data)?;
    if !f.is_llc() {
        return Err(SkipReason::NotIp);
    }
    ethernet::llc_network(f.payload(), vlans)
}
