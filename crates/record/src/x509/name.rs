//! Distinguished names as Zeek logs them: OpenSSL's
//! `X509_NAME_print_ex(.., XN_FLAG_RFC2253)`, read back with `BIO_gets`
//! into a 2048-byte buffer. That is: attributes last to first, `,` between
//! RDNs and `+` inside a multi-valued one, short attribute names, values
//! escaped RFC 2253 style (`\,` `\+` `\"` `\\` `\<` `\>` `\;`, a leading `#`
//! or space and a trailing space with `\`), control characters and every
//! byte above 0x7f as `\XX`. String types are first made UTF-8 (a
//! BMPString, UniversalString or T61String, read as Latin-1, is converted;
//! a UTF8String is taken byte for byte), so non-ASCII text shows as the
//! `\XX` escapes of its UTF-8 bytes. Values of other types, and every value
//! of an attribute OpenSSL does not know (printed as a dotted OID), are
//! dumped as `#` and the hex of their DER encoding.

use super::der::{Der, OID, SEQUENCE, SET};
use super::{oid, X509Error};

/// `BIO_gets` into Zeek's `char buf[2048]` keeps at most 2047 bytes.
const MAX_TEXT: usize = 2047;

const ESC_2253: u8 = 1;
const ESC_CTRL: u8 = 2;
const FIRST: u8 = 0x20;
const LAST: u8 = 0x40;

/// How OpenSSL's RFC 2253 printer treats an ASCII character (a subset of
/// its `char_type` table: only the bits the RFC 2253 flags look at).
fn char_class(c: u8) -> u8 {
    match c {
        0..=0x1f | 0x7f => ESC_CTRL,
        b' ' => FIRST | LAST,
        b'#' => FIRST,
        b'"' | b'+' | b',' | b';' | b'<' | b'>' | b'\\' => ESC_2253,
        _ => 0,
    }
}

/// One byte of a value; `edge` is FIRST or LAST for the first and last
/// character of the value.
fn push_escaped(out: &mut String, c: u8, edge: u8) {
    if c > 0x7f {
        out.push_str(&format!("\\{c:02X}"));
        return;
    }
    let class = char_class(c) & (ESC_2253 | ESC_CTRL | edge);
    if class & (ESC_2253 | FIRST | LAST) != 0 {
        out.push('\\');
        out.push(c as char);
    } else if class & ESC_CTRL != 0 {
        out.push_str(&format!("\\{c:02X}"));
    } else {
        out.push(c as char);
    }
}

/// A code point as the UTF-8 bytes OpenSSL's `UTF8_putc` writes; nothing for
/// values it refuses.
fn utf8_bytes(c: u32, buf: &mut [u8; 4]) -> &[u8] {
    match char::from_u32(c) {
        Some(ch) => ch.encode_utf8(buf).as_bytes(),
        None => &[],
    }
}

/// Prints one value (`do_print_ex`); false when OpenSSL would give up (a
/// BMPString or UniversalString whose length is not a multiple of its
/// character width), leaving `out` as far as it got.
fn print_value(out: &mut String, tag: u8, content: &[u8], raw: &[u8], dump: bool) -> bool {
    // Bytes per character by universal tag, as OpenSSL's `tag2nbyte`:
    // 0 = UTF8String (taken as bytes), -1 = dump the DER.
    let width: i8 = if dump || tag & 0xe0 != 0 {
        -1
    } else {
        match tag {
            12 => 0,
            18..=27 => 1,
            28 => 4,
            30 => 2,
            _ => -1,
        }
    };
    if width < 0 {
        out.push('#');
        for b in raw {
            out.push_str(&format!("{b:02X}"));
        }
        return true;
    }
    let width = width as usize;
    if width > 1 && !content.len().is_multiple_of(width) {
        return false;
    }
    // UTF8String bytes and 1-byte strings (converted from Latin-1) differ
    // only for bytes above 0x7f, which are escaped either way, but the
    // conversion doubles them: é in a T61String prints as \C3\A9.
    let chars: Vec<u32> = match width {
        0 | 1 => content.iter().map(|&b| b as u32).collect(),
        2 => content
            .chunks_exact(2)
            .map(|c| u16::from_be_bytes([c[0], c[1]]) as u32)
            .collect(),
        _ => content
            .chunks_exact(4)
            .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    };
    let n = chars.len();
    for (i, &c) in chars.iter().enumerate() {
        // The last character's flag wins for a one-character value.
        let edge = if i + 1 == n {
            LAST
        } else if i == 0 {
            FIRST
        } else {
            0
        };
        if width == 0 {
            push_escaped(out, c as u8, edge);
        } else {
            let mut buf = [0u8; 4];
            let bytes = utf8_bytes(c, &mut buf);
            // A multi-byte sequence is all above 0x7f: the edge flags
            // cannot matter for it.
            for &b in bytes {
                push_escaped(out, b, edge);
            }
        }
    }
    true
}

/// One attribute of a name: which RDN it belongs to, its type and value.
struct Entry<'a> {
    set: usize,
    oid: String,
    tag: u8,
    content: &'a [u8],
    raw: &'a [u8],
}

fn entries<'a>(name: &'a [u8], field: &'static str) -> Result<Vec<Entry<'a>>, X509Error> {
    let mut rdns = Der::new(name);
    let mut out = Vec::new();
    let mut set = 0;
    while !rdns.is_empty() {
        let mut atvs = rdns.enter(SET, field)?;
        while !atvs.is_empty() {
            let mut atv = atvs.enter(SEQUENCE, field)?;
            let oid = oid::dotted(atv.expect(OID, field)?.content, field)?;
            let v = atv.any(field)?;
            out.push(Entry {
                set,
                oid,
                tag: v.tag,
                content: v.content,
                raw: v.raw,
            });
        }
        set += 1;
    }
    Ok(out)
}

/// The text of a Name's contents (the elements inside its SEQUENCE).
pub(super) fn format(name: &[u8], field: &'static str) -> Result<String, X509Error> {
    let entries = entries(name, field)?;
    let mut out = String::new();
    let mut prev = None;
    for e in entries.iter().rev() {
        if let Some(p) = prev {
            out.push(if p == e.set { '+' } else { ',' });
        }
        prev = Some(e.set);
        let known = oid::attribute_name(&e.oid);
        out.push_str(known.unwrap_or(&e.oid));
        out.push('=');
        if !print_value(&mut out, e.tag, e.content, e.raw, known.is_none()) {
            break;
        }
    }
    if out.len() > MAX_TEXT {
        out.truncate(MAX_TEXT);
    }
    Ok(out)
}

/// The last commonName of a Name as `ASN1_STRING_print` and `BIO_gets`
/// give it to Zeek: the raw bytes, every one outside printable ASCII (bar
/// CR and LF) as `.`, cut after the first LF.
pub(super) fn last_common_name(
    name: &[u8],
    field: &'static str,
) -> Result<Option<String>, X509Error> {
    let entries = entries(name, field)?;
    let Some(e) = entries.iter().rev().find(|e| e.oid == oid::COMMON_NAME) else {
        return Ok(None);
    };
    // ASN1_STRING keeps a SEQUENCE or SET value as its whole encoding.
    let data = if e.tag == SEQUENCE || e.tag == SET {
        e.raw
    } else {
        e.content
    };
    let mut out = String::new();
    for &b in data {
        let c = if b > b'~' || (b < b' ' && b != b'\n' && b != b'\r') {
            '.'
        } else {
            b as char
        };
        out.push(c);
        if c == '\n' || out.len() == MAX_TEXT {
            break;
        }
    }
    Ok(Some(out))
}
