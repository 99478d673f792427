//! A bounded DER reader: just what a certificate needs (definite lengths,
//! low tag numbers). Every length is checked against what is left, so no
//! input can make it read out of bounds or panic; an error names the field
//! being read and what was wrong with it.

use super::{X509Error, X509ErrorKind};

/// One element: its identifier octet, its contents and its whole encoding.
#[derive(Clone, Copy, Debug)]
pub(super) struct Tlv<'a> {
    pub tag: u8,
    pub content: &'a [u8],
    /// Identifier, length and contents, as in the input.
    pub raw: &'a [u8],
}

pub(super) const BOOLEAN: u8 = 0x01;
pub(super) const INTEGER: u8 = 0x02;
pub(super) const BIT_STRING: u8 = 0x03;
pub(super) const OCTET_STRING: u8 = 0x04;
pub(super) const OID: u8 = 0x06;
pub(super) const UTC_TIME: u8 = 0x17;
pub(super) const GENERALIZED_TIME: u8 = 0x18;
pub(super) const SEQUENCE: u8 = 0x30;
pub(super) const SET: u8 = 0x31;

/// A cursor over a run of DER elements.
#[derive(Clone, Copy, Debug)]
pub(super) struct Der<'a> {
    rest: &'a [u8],
}

impl<'a> Der<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Der { rest: data }
    }

    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// Identifier octet of the next element, if any.
    pub fn peek_tag(&self) -> Option<u8> {
        self.rest.first().copied()
    }

    /// The next element, whatever its tag.
    pub fn any(&mut self, field: &'static str) -> Result<Tlv<'a>, X509Error> {
        let err = |kind| X509Error { field, kind };
        let (&tag, after) = self
            .rest
            .split_first()
            .ok_or(err(X509ErrorKind::Truncated))?;
        if tag & 0x1f == 0x1f {
            return Err(err(X509ErrorKind::HighTagNumber));
        }
        let (&first, mut after) = after.split_first().ok_or(err(X509ErrorKind::Truncated))?;
        let len = if first < 0x80 {
            first as usize
        } else if first == 0x80 {
            return Err(err(X509ErrorKind::IndefiniteLength));
        } else {
            let n = (first & 0x7f) as usize;
            // Four length octets describe 4 GiB, far more than any input.
            if n > 4 {
                return Err(err(X509ErrorKind::BadLength));
            }
            if after.len() < n {
                return Err(err(X509ErrorKind::Truncated));
            }
            let (octets, tail) = after.split_at(n);
            after = tail;
            octets.iter().fold(0usize, |acc, &b| acc << 8 | b as usize)
        };
        if len > after.len() {
            return Err(err(X509ErrorKind::Truncated));
        }
        let header = self.rest.len() - after.len();
        let raw = &self.rest[..header + len];
        let content = &after[..len];
        self.rest = &after[len..];
        Ok(Tlv { tag, content, raw })
    }

    /// The next element, which must carry `tag`.
    pub fn expect(&mut self, tag: u8, field: &'static str) -> Result<Tlv<'a>, X509Error> {
        match self.peek_tag() {
            Some(t) if t != tag => Err(X509Error {
                field,
                kind: X509ErrorKind::UnexpectedTag {
                    expected: tag,
                    found: t,
                },
            }),
            _ => self.any(field),
        }
    }

    /// The contents of a constructed element with `tag`, as a new cursor.
    pub fn enter(&mut self, tag: u8, field: &'static str) -> Result<Der<'a>, X509Error> {
        Ok(Der::new(self.expect(tag, field)?.content))
    }

    /// The next element if it carries `tag`.
    pub fn optional(&mut self, tag: u8, field: &'static str) -> Result<Option<Tlv<'a>>, X509Error> {
        if self.peek_tag() == Some(tag) {
            self.any(field).map(Some)
        } else {
            Ok(None)
        }
    }
}

/// The contents of a BIT STRING without its unused-bits octet.
pub(super) fn bit_string<'a>(
    content: &'a [u8],
    field: &'static str,
) -> Result<&'a [u8], X509Error> {
    match content.split_first() {
        Some((&unused, bits)) if unused < 8 && (unused == 0 || !bits.is_empty()) => Ok(bits),
        Some(_) => Err(X509Error {
            field,
            kind: X509ErrorKind::BadValue,
        }),
        None => Err(X509Error {
            field,
            kind: X509ErrorKind::Truncated,
        }),
    }
}

/// An INTEGER's contents as OpenSSL keeps them (`c2i_ASN1_INTEGER`): the
/// magnitude without the sign octet, and whether it is negative. Empty
/// contents and superfluous padding make OpenSSL reject the certificate, so
/// they are errors here too.
pub(super) fn integer(content: &[u8], field: &'static str) -> Result<(Vec<u8>, bool), X509Error> {
    let err = |kind| X509Error { field, kind };
    let (&first, rest) = content.split_first().ok_or(err(X509ErrorKind::BadValue))?;
    let neg = first & 0x80 != 0;
    if rest.is_empty() {
        return Ok((
            vec![if neg {
                (first ^ 0xff).wrapping_add(1)
            } else {
                first
            }],
            neg,
        ));
    }
    let pad = match first {
        0 => true,
        // 0xff followed by zeros only is the smallest negative number of
        // that length, not padding.
        0xff => rest.iter().any(|&b| b != 0),
        _ => false,
    };
    if pad && (neg == (rest[0] & 0x80 != 0)) {
        return Err(err(X509ErrorKind::BadValue));
    }
    let body = if pad { rest } else { content };
    if !neg {
        return Ok((body.to_vec(), false));
    }
    // Two's complement of the body gives the magnitude.
    let mut mag: Vec<u8> = body.iter().map(|b| !b).collect();
    for b in mag.iter_mut().rev() {
        let (v, carry) = b.overflowing_add(1);
        *b = v;
        if !carry {
            break;
        }
    }
    Ok((mag, true))
}

/// `ASN1_INTEGER_get`: the value as a signed 64-bit number, or -1 when it
/// does not fit (OpenSSL's error value).
pub(super) fn small_integer(content: &[u8], field: &'static str) -> Result<i64, X509Error> {
    let (mag, neg) = integer(content, field)?;
    let mag = match mag.iter().position(|&b| b != 0) {
        Some(i) => &mag[i..],
        None => return Ok(0),
    };
    if mag.len() > 8 {
        return Ok(-1);
    }
    let v = mag.iter().fold(0u64, |acc, &b| acc << 8 | b as u64);
    if v > i64::MAX as u64 {
        return Ok(-1);
    }
    Ok(if neg { -(v as i64) } else { v as i64 })
}

/// Number of significant bits of a big-endian magnitude (`BN_num_bits`).
pub(super) fn num_bits(mag: &[u8]) -> u32 {
    match mag.iter().position(|&b| b != 0) {
        Some(i) => (mag.len() - i - 1) as u32 * 8 + (8 - mag[i].leading_zeros()),
        None => 0,
    }
}

/// A big-endian magnitude in decimal (`BN_bn2dec`).
pub(super) fn decimal(mag: &[u8]) -> String {
    // Base 10^9 limbs, least significant first.
    let mut limbs: Vec<u32> = Vec::new();
    for &byte in mag {
        let mut carry = byte as u64;
        for l in limbs.iter_mut() {
            let v = (*l as u64) * 256 + carry;
            *l = (v % 1_000_000_000) as u32;
            carry = v / 1_000_000_000;
        }
        while carry > 0 {
            limbs.push((carry % 1_000_000_000) as u32);
            carry /= 1_000_000_000;
        }
    }
    let mut out = match limbs.last() {
        Some(top) => top.to_string(),
        None => return "0".into(),
    };
    for l in limbs.iter().rev().skip(1) {
        out.push_str(&format!("{l:09}"));
    }
    out
}
