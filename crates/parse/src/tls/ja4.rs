//! JA4 TLS client fingerprint (FoxIO, BSD-3-Clause method; implemented here
//! from the published description): `a_b_c` from one ClientHello.
//!
//! Choices where the reference implementations and the specification text
//! differ: a non-ASCII byte at either end of the first ALPN value becomes
//! `9` (what FoxIO's Rust and Python implementations and their tests do),
//! not the hex form the revised specification text describes.

use super::parser::{is_grease, ClientHello, EXT_ALPN, EXT_SERVER_NAME};
use wirelog_record::sha256::sha256;

/// The fingerprint and its raw (unhashed) form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ja4 {
    pub ja4: String,
    pub ja4_r: String,
}

fn version_code(v: u16) -> &'static str {
    match v {
        0x0304 => "13",
        0x0303 => "12",
        0x0302 => "11",
        0x0301 => "10",
        0x0300 => "s3",
        0x0002 => "s2",
        0xfeff => "d1",
        0xfefd => "d2",
        0xfefc => "d3",
        _ => "00",
    }
}

fn alpn_char(b: u8) -> char {
    if b.is_ascii() {
        b as char
    } else {
        '9'
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// `v` as 4-digit lower-case hex joined with `,` (by hand: `write!` per
/// value was most of JA4's cost).
fn hex_list(v: &[u16]) -> String {
    let mut s = String::with_capacity(v.len() * 5);
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        for shift in [12, 8, 4, 0] {
            s.push(HEX[(x >> shift) as usize & 15] as char);
        }
    }
    s
}

fn hash12(s: &str) -> String {
    let mut out = String::with_capacity(12);
    for b in &sha256(s.as_bytes())[..6] {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
    out
}

/// JA4 of a TLS-over-TCP ClientHello (transport `t`).
pub fn ja4(ch: &ClientHello) -> Ja4 {
    let version = ch
        .supported_versions
        .iter()
        .copied()
        .filter(|&v| !is_grease(v))
        .max()
        .unwrap_or(ch.version);
    let sni = if ch.extensions.contains(&EXT_SERVER_NAME) {
        'd'
    } else {
        'i'
    };
    let mut ciphers: Vec<u16> = ch
        .ciphers
        .iter()
        .copied()
        .filter(|&c| !is_grease(c))
        .collect();
    let ext_count = ch.extensions.iter().filter(|&&e| !is_grease(e)).count();
    let alpn = match ch.alpn.first() {
        Some(p) if !p.is_empty() => [alpn_char(p[0]), alpn_char(p[p.len() - 1])],
        _ => ['0', '0'],
    };
    let a = format!(
        "t{}{}{:02}{:02}{}{}",
        version_code(version),
        sni,
        ciphers.len().min(99),
        ext_count.min(99),
        alpn[0],
        alpn[1]
    );
    ciphers.sort_unstable();
    let mut exts: Vec<u16> = ch
        .extensions
        .iter()
        .copied()
        .filter(|&e| !is_grease(e) && e != EXT_SERVER_NAME && e != EXT_ALPN)
        .collect();
    exts.sort_unstable();
    let sigs: Vec<u16> = ch
        .signature_algorithms
        .iter()
        .copied()
        .filter(|&s| !is_grease(s))
        .collect();
    let cipher_s = hex_list(&ciphers);
    let mut ext_s = hex_list(&exts);
    if !sigs.is_empty() {
        ext_s.push('_');
        ext_s.push_str(&hex_list(&sigs));
    }
    let b = if ciphers.is_empty() {
        "000000000000".to_string()
    } else {
        hash12(&cipher_s)
    };
    let c = if exts.is_empty() {
        "000000000000".to_string()
    } else {
        hash12(&ext_s)
    };
    Ja4 {
        ja4: format!("{a}_{b}_{c}"),
        ja4_r: format!("{a}_{cipher_s}_{ext_s}"),
    }
}
