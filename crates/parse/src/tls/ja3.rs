//! JA3 / JA3S (Salesforce, BSD-3-Clause method): decimal fields of the
//! hellos joined with `,` and `-`, GREASE removed, and their MD5.

use std::fmt::Write;

use wirelog_record::md5::md5_hex;
use super::parser::{is_grease, ClientHello, ServerHello};

/// A JA3 or JA3S string and its MD5.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ja3 {
    pub string: String,
    pub md5: String,
}

fn join(out: &mut String, v: impl Iterator<Item = u32>) {
    for (i, x) in v.enumerate() {
        if i > 0 {
            out.push('-');
        }
        let _ = write!(out, "{x}");
    }
}

fn no_grease(v: &[u16]) -> impl Iterator<Item = u32> + '_ {
    v.iter().filter(|&&x| !is_grease(x)).map(|&x| x as u32)
}

/// `version,ciphers,extensions,groups,point_formats` of a ClientHello.
pub fn ja3(ch: &ClientHello) -> Ja3 {
    let mut s = format!("{},", ch.version);
    join(&mut s, no_grease(&ch.ciphers));
    s.push(',');
    join(&mut s, no_grease(&ch.extensions));
    s.push(',');
    join(&mut s, no_grease(&ch.groups));
    s.push(',');
    join(&mut s, ch.point_formats.iter().map(|&x| x as u32));
    Ja3 {
        md5: md5_hex(s.as_bytes()),
        string: s,
    }
}

/// `version,cipher,extensions` of a ServerHello.
pub fn ja3s(sh: &ServerHello) -> Ja3 {
    let mut s = format!("{},{},", sh.version, sh.cipher);
    join(&mut s, no_grease(&sh.extensions));
    Ja3 {
        md5: md5_hex(s.as_bytes()),
        string: s,
    }
}
