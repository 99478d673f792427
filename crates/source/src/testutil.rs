//! Helpers shared by the unit tests: where the shared captures live, a reader
//! that trickles bytes, temporary directories, a minimal JSON reader for the
//! manifests, and an independent record walker used to derive expectations.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::CaptureReader;

/// `/work/shared/testdata` seen from this crate (read in place, never copied).
pub(crate) fn testdata() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata");
    assert!(p.is_dir(), "shared test data not found at {}", p.display());
    p
}

/// Hands out at most `chunk` bytes per read, to exercise every refill path.
pub(crate) struct Trickle {
    data: Vec<u8>,
    pos: usize,
    chunk: usize,
}

impl Trickle {
    pub(crate) fn new(data: Vec<u8>, chunk: usize) -> Trickle {
        Trickle {
            data,
            pos: 0,
            chunk: chunk.max(1),
        }
    }
}

impl Read for Trickle {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(self.chunk).min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// A directory under the system temp dir, removed on drop.
pub(crate) struct TempDir(pub PathBuf);

impl TempDir {
    pub(crate) fn new() -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("wirelog-source-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub(crate) fn write(&self, name: &str, data: &[u8]) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, data).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What a full read produced, compact enough to compare two reads of big files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Summary {
    pub count: u64,
    pub hash: u64,
    pub first_ts: Option<i64>,
    pub last_ts: Option<i64>,
    pub problems: Vec<crate::ProblemKind>,
}

pub(crate) fn drain(r: &mut CaptureReader) -> Summary {
    let mut h = DefaultHasher::new();
    let (mut first_ts, mut last_ts) = (None, None);
    while let Some(p) = r.next_packet() {
        assert!(
            p.wire_len as usize >= p.data.len(),
            "{}: wire_len < data",
            r.name()
        );
        (p.ts_ns, p.wire_len, p.linktype.0, p.if_id, p.data).hash(&mut h);
        first_ts.get_or_insert(p.ts_ns);
        last_ts = Some(p.ts_ns);
    }
    // The end is sticky.
    assert!(r.next_packet().is_none());
    Summary {
        count: r.packets(),
        hash: h.finish(),
        first_ts,
        last_ts,
        problems: r.problems().iter().map(|p| p.kind).collect(),
    }
}

/// Minimal JSON, enough for the manifests.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    pub(crate) fn parse(s: &str) -> Json {
        let b = s.as_bytes();
        Json::value(b, &mut 0)
    }

    fn ws(b: &[u8], i: &mut usize) {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    }

    fn value(b: &[u8], i: &mut usize) -> Json {
        Json::ws(b, i);
        match b[*i] {
            b'{' => {
                *i += 1;
                let mut v = Vec::new();
                loop {
                    Json::ws(b, i);
                    if b[*i] == b'}' {
                        *i += 1;
                        return Json::Obj(v);
                    }
                    if b[*i] == b',' {
                        *i += 1;
                        continue;
                    }
                    let Json::Str(k) = Json::value(b, i) else {
                        panic!("key")
                    };
                    Json::ws(b, i);
                    assert_eq!(b[*i], b':');
                    *i += 1;
                    v.push((k, Json::value(b, i)));
                }
            }
            b'[' => {
                *i += 1;
                let mut v = Vec::new();
                loop {
                    Json::ws(b, i);
                    if b[*i] == b']' {
                        *i += 1;
                        return Json::Arr(v);
                    }
                    if b[*i] == b',' {
                        *i += 1;
                        continue;
                    }
                    v.push(Json::value(b, i));
                }
            }
            b'"' => {
                *i += 1;
                let mut s = Vec::new();
                while b[*i] != b'"' {
                    if b[*i] == b'\\' {
                        *i += 1;
                        match b[*i] {
                            b'n' => s.push(b'\n'),
                            b't' => s.push(b'\t'),
                            b'u' => {
                                let hex = std::str::from_utf8(&b[*i + 1..*i + 5]).unwrap();
                                let c = char::from_u32(u32::from_str_radix(hex, 16).unwrap())
                                    .unwrap_or('?');
                                s.extend_from_slice(c.to_string().as_bytes());
                                *i += 4;
                            }
                            c => s.push(c),
                        }
                    } else {
                        s.push(b[*i]);
                    }
                    *i += 1;
                }
                *i += 1;
                Json::Str(String::from_utf8(s).unwrap())
            }
            b't' => {
                *i += 4;
                Json::Bool(true)
            }
            b'f' => {
                *i += 5;
                Json::Bool(false)
            }
            b'n' => {
                *i += 4;
                Json::Null
            }
            _ => {
                let start = *i;
                while *i < b.len()
                    && matches!(b[*i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    *i += 1;
                }
                Json::Num(std::str::from_utf8(&b[start..*i]).unwrap().parse().unwrap())
            }
        }
    }

    pub(crate) fn get(&self, key: &str) -> &Json {
        match self {
            Json::Obj(v) => v
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v)
                .unwrap_or(&Json::Null),
            _ => &Json::Null,
        }
    }

    pub(crate) fn arr(&self) -> &[Json] {
        match self {
            Json::Arr(v) => v,
            _ => &[],
        }
    }

    pub(crate) fn str(&self) -> &str {
        match self {
            Json::Str(s) => s,
            _ => "",
        }
    }

    /// Numbers, and numbers written as strings (the manifests' "packets").
    pub(crate) fn u64(&self) -> Option<u64> {
        match self {
            Json::Num(n) => Some(*n as u64),
            Json::Str(s) => s.parse().ok(),
            _ => None,
        }
    }
}

pub(crate) fn manifest(rel: &str) -> Json {
    Json::parse(&std::fs::read_to_string(testdata().join(rel)).unwrap())
}

/// One record or block as found by [`records`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rec {
    pub end: usize,
    pub btype: u32,
    pub is_packet: bool,
}

/// Independent walk of a well-formed capture: (file header length, records).
/// Deliberately naive, and sharing no code with the parsers under test.
pub(crate) fn records(b: &[u8]) -> (usize, Vec<Rec>) {
    let rd = |be: bool, off: usize| {
        let a = [b[off], b[off + 1], b[off + 2], b[off + 3]];
        if be {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    };
    let mut out = Vec::new();
    if b[..4] == [0x0a, 0x0d, 0x0d, 0x0a] {
        let mut be = false;
        let mut off = 0;
        while off + 12 <= b.len() {
            if b[off..off + 4] == [0x0a, 0x0d, 0x0d, 0x0a] {
                be = b[off + 8] == 0x1a;
            }
            let btype = rd(be, off);
            let len = rd(be, off + 4) as usize;
            off += len;
            out.push(Rec {
                end: off,
                btype,
                is_packet: matches!(btype, 2 | 3 | 6),
            });
        }
        (0, out)
    } else {
        let be = b[0] == 0xa1;
        let mut off = 24;
        while off + 16 <= b.len() {
            off += 16 + rd(be, off + 8) as usize;
            out.push(Rec {
                end: off,
                btype: 0,
                is_packet: true,
            });
        }
        (24, out)
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
pub(crate) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[test]
fn json_and_civil_helpers() {
    let j = Json::parse(r#"[{"a": "1", "b": [1, 2.5, true, null], "c\"d": "\u0041"}]"#);
    assert_eq!(j.arr()[0].get("a").u64(), Some(1));
    assert_eq!(j.arr()[0].get("b").arr().len(), 4);
    assert_eq!(j.arr()[0].get("c\"d").str(), "A");
    assert_eq!(days_from_civil(1970, 1, 1), 0);
    assert_eq!(days_from_civil(2000, 3, 1), 11_017);
}
