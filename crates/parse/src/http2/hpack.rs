//! HPACK (RFC 7541), the decoder: integers (§5.1), strings plain or Huffman
//! (§5.2), the four field representations (§6), the static table
//! (Appendix A) and one dynamic table per direction, bounded by what the
//! peer allowed and by [`MAX_TABLE`].
//!
//! A decoder that starts in the middle of a connection (a capture begun
//! late, a gap) cannot know the entries inserted before it: it keeps the
//! entries it saw inserted, which sit at the newest indices, so a reference
//! to one of them is exact, and a reference past them is reported as
//! [`Field::Unknown`], never as another entry. Once an eviction proves the
//! unseen entries gone (or a size update to 0 emptied the table), the
//! decoder is in step again and a reference past the table is an error.

use std::collections::VecDeque;

use super::huffman;

/// The largest dynamic table wirelog keeps per direction, whatever the peer
/// allowed (RFC 7541 §4.2 lets a decoder announce any size; 64 KiB is 16x
/// the default and well past what nghttp2, Go and gRPC use).
pub const MAX_TABLE: usize = 64 * 1024;

/// SETTINGS_HEADER_TABLE_SIZE's initial value (RFC 9113 §6.5.2).
pub const DEFAULT_TABLE: usize = 4096;

/// Longest name or value kept while decoding (longer ones are an error: a
/// header block is bounded by the parser's `max_header_bytes` anyway).
const MAX_STRING: usize = 1 << 20;

/// The static table (RFC 7541 Appendix A), index 1 first.
const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// One decoded header field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field<'a> {
    Known { name: &'a [u8], value: &'a [u8] },
    /// A field whose name (and so meaning) depends on a dynamic table entry
    /// inserted before this decoder started: not reported as any header.
    Unknown,
}

/// Why a header block did not decode (the fields before the error were
/// reported; the table is no longer trusted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HpackError {
    /// The block ends inside a field.
    Truncated,
    /// An integer beyond 2^28.
    Integer,
    /// Index 0, or past the tables of a decoder in step.
    Index,
    /// A Huffman string that does not decode.
    Huffman,
    /// A size update above the announced limit, or after the first field.
    SizeUpdate,
    /// A string longer than the decoder keeps.
    TooLong,
}

/// A dynamic table entry: name and value in one allocation; `None` when
/// inserted with a name this decoder could not know.
struct Entry {
    bytes: Option<Box<[u8]>>,
    name_len: usize,
    /// RFC 7541 §4.1: name + value + 32 (with an unknown name: its value + 32).
    size: usize,
}

/// One direction's decoder.
pub struct Decoder {
    /// Newest first (index 62 is `table[0]`).
    table: VecDeque<Entry>,
    size: usize,
    /// The table's maximum size as the encoder last set it.
    max_size: usize,
    /// The largest size the decoding side announced (SETTINGS), capped.
    limit: usize,
    /// Every entry the encoder can refer to is in `table`.
    in_step: bool,
    /// The encoder's `max_size` is known (a fresh connection, or a size
    /// update seen): evictions then happen here as on the wire.
    max_known: bool,
    /// Entries in `table` with an unknown name.
    unknown_entries: usize,
    name: Vec<u8>,
    value: Vec<u8>,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new()
    }
}

impl Decoder {
    /// A decoder for a connection seen from its start.
    pub fn new() -> Decoder {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max_size: DEFAULT_TABLE,
            limit: DEFAULT_TABLE,
            in_step: true,
            max_known: true,
            unknown_entries: 0,
            name: Vec::new(),
            value: Vec::new(),
        }
    }

    /// A decoder joining a connection in its middle.
    pub fn mid_stream() -> Decoder {
        let mut d = Decoder::new();
        d.lost();
        d
    }

    /// The table's earlier contents can no longer be known (a gap, a
    /// decoding error): keep nothing, and call references past what is
    /// inserted from now on unknown.
    pub fn lost(&mut self) {
        self.table.clear();
        self.size = 0;
        self.in_step = false;
        self.max_known = false;
        self.unknown_entries = 0;
    }

    /// Whether every reference can be resolved.
    pub fn in_step(&self) -> bool {
        self.in_step
    }

    /// The decoding side announced SETTINGS_HEADER_TABLE_SIZE = `n`.
    pub fn set_limit(&mut self, n: u32) {
        self.limit = self.limit.max(n as usize);
    }

    /// Bytes this decoder holds (the table and its scratch buffers), at
    /// most a few per entry over. The entries' bytes are taken as the
    /// table's RFC size (name + value + 32 each, never less than what an
    /// entry's allocation holds) so that this is O(1): it is asked after
    /// every segment for the memory budget.
    pub fn memory(&self) -> usize {
        self.size + self.table.capacity() * std::mem::size_of::<Entry>() + self.name.capacity() + self.value.capacity()
    }

    /// Decodes one complete header block, handing each field to `f` in
    /// order. After an error the table is no longer trusted ([`Decoder::lost`]).
    pub fn decode(&mut self, block: &[u8], f: &mut impl FnMut(Field<'_>)) -> Result<(), HpackError> {
        let r = self.decode_inner(block, f);
        if r.is_err() {
            self.lost();
        }
        r
    }

    fn decode_inner(&mut self, block: &[u8], f: &mut impl FnMut(Field<'_>)) -> Result<(), HpackError> {
        let mut pos = 0;
        let mut first = true;
        while pos < block.len() {
            let b = block[pos];
            if b & 0x80 != 0 {
                let idx = int(block, &mut pos, 7)?;
                match lookup(&self.table, self.in_step, idx)? {
                    Some((n, v)) => f(Field::Known { name: n, value: v }),
                    None => f(Field::Unknown),
                }
            } else if b & 0xe0 == 0x20 {
                // Dynamic table size update (§6.3): only before the first field.
                let n = int(block, &mut pos, 5)? as usize;
                if !first || n > self.limit {
                    return Err(HpackError::SizeUpdate);
                }
                self.resize(n);
                continue;
            } else {
                // Literals: with incremental indexing (01), without (0000),
                // never indexed (0001).
                let (prefix, index) = if b & 0x40 != 0 { (6, true) } else { (4, false) };
                let name_idx = int(block, &mut pos, prefix)?;
                let name_known = if name_idx == 0 {
                    self.name.clear();
                    string(block, &mut pos, &mut self.name)?;
                    true
                } else {
                    match lookup(&self.table, self.in_step, name_idx)? {
                        Some((n, _)) => {
                            self.name.clear();
                            self.name.extend_from_slice(n);
                            true
                        }
                        None => false,
                    }
                };
                self.value.clear();
                string(block, &mut pos, &mut self.value)?;
                if name_known {
                    f(Field::Known { name: &self.name, value: &self.value });
                } else {
                    f(Field::Unknown);
                }
                if index {
                    self.insert(name_known);
                }
            }
            first = false;
        }
        Ok(())
    }

    /// Inserts the field just decoded (in `name`/`value`).
    fn insert(&mut self, name_known: bool) {
        let size = if name_known { self.name.len() } else { 0 } + self.value.len() + 32;
        let evicts = self.size + size > self.max_size;
        if evicts && self.max_known && !self.in_step && self.unknown_entries == 0 {
            // The table on the wire held what was unseen, then these
            // entries: evicting here means the unseen ones went first.
            self.in_step = true;
        }
        self.evict_to(self.max_size.saturating_sub(size));
        if size > self.max_size {
            // RFC 7541 §4.4: an entry larger than the table empties it.
            return;
        }
        let entry = if name_known {
            let mut b = Vec::with_capacity(self.name.len() + self.value.len());
            b.extend_from_slice(&self.name);
            b.extend_from_slice(&self.value);
            Entry { bytes: Some(b.into_boxed_slice()), name_len: self.name.len(), size }
        } else {
            self.unknown_entries += 1;
            Entry { bytes: None, name_len: 0, size }
        };
        self.size += size;
        self.table.push_front(entry);
    }

    fn resize(&mut self, n: usize) {
        if n == 0 && !self.in_step {
            // An empty table on the wire: in step from here.
            self.in_step = true;
            self.unknown_entries = 0;
        }
        // Past our cap the table is kept smaller than the wire's: later
        // references to what was evicted here are unknown, not errors.
        if n > MAX_TABLE {
            self.in_step = false;
        }
        self.max_size = n.min(MAX_TABLE);
        self.max_known = n <= MAX_TABLE;
        self.evict_to(self.max_size);
    }

    fn evict_to(&mut self, max: usize) {
        while self.size > max {
            match self.table.pop_back() {
                Some(e) => {
                    self.size -= e.size;
                    if e.bytes.is_none() {
                        self.unknown_entries -= 1;
                    }
                }
                None => {
                    self.size = 0;
                    break;
                }
            }
        }
    }
}

#[cfg(any(test, feature = "fuzzing"))]
/// Fuzzing entry: the first byte picks a fresh or a mid-stream decoder; the
/// rest is header blocks separated by 0xff 0xff (a block may be empty).
/// Must never panic, and no table may outgrow its limit.
pub fn fuzz(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else { return };
    let mut d = if first & 1 == 0 { Decoder::new() } else { Decoder::mid_stream() };
    d.set_limit(first as u32 * 64);
    let mut i = 0;
    let mut start = 0;
    while i <= rest.len() {
        if i == rest.len() || (rest[i] == 0xff && rest.get(i + 1) == Some(&0xff)) {
            let _ = d.decode(&rest[start..i], &mut |_| {});
            assert!(d.size <= d.max_size.max(1) && d.max_size <= MAX_TABLE);
            start = i + 2;
            i += 2;
        } else {
            i += 1;
        }
    }
}

/// A header field's name and value.
type NameValue<'a> = (&'a [u8], &'a [u8]);

/// The entry at `idx` of the static table and `table`: `Ok(None)` when it
/// is one a decoder not `in_step` cannot know.
fn lookup(table: &VecDeque<Entry>, in_step: bool, idx: u64) -> Result<Option<NameValue<'_>>, HpackError> {
    if idx == 0 {
        return Err(HpackError::Index);
    }
    if idx <= STATIC.len() as u64 {
        let (n, v) = STATIC[idx as usize - 1];
        return Ok(Some((n.as_bytes(), v.as_bytes())));
    }
    let i = (idx - STATIC.len() as u64 - 1) as usize;
    match table.get(i) {
        Some(Entry { bytes: Some(b), name_len, .. }) => Ok(Some(b.split_at(*name_len))),
        Some(Entry { bytes: None, .. }) => Ok(None),
        None if in_step => Err(HpackError::Index),
        None => Ok(None),
    }
}

/// An integer with an `n`-bit prefix (RFC 7541 §5.1) at `*pos`.
fn int(buf: &[u8], pos: &mut usize, n: u8) -> Result<u64, HpackError> {
    let mask = (1u64 << n) - 1;
    let first = *buf.get(*pos).ok_or(HpackError::Truncated)? as u64 & mask;
    *pos += 1;
    if first < mask {
        return Ok(first);
    }
    let mut v = mask;
    let mut shift = 0;
    loop {
        let b = *buf.get(*pos).ok_or(HpackError::Truncated)?;
        *pos += 1;
        v += ((b & 0x7f) as u64) << shift;
        if b & 0x80 == 0 {
            return if v > 1 << 28 { Err(HpackError::Integer) } else { Ok(v) };
        }
        shift += 7;
        if shift > 28 {
            return Err(HpackError::Integer);
        }
    }
}

/// A string literal (RFC 7541 §5.2) at `*pos`, appended to `out`.
fn string(buf: &[u8], pos: &mut usize, out: &mut Vec<u8>) -> Result<(), HpackError> {
    let huffman = *buf.get(*pos).ok_or(HpackError::Truncated)? & 0x80 != 0;
    let len = int(buf, pos, 7)? as usize;
    if len > MAX_STRING {
        return Err(HpackError::TooLong);
    }
    let end = pos.checked_add(len).filter(|&e| e <= buf.len()).ok_or(HpackError::Truncated)?;
    let raw = &buf[*pos..end];
    *pos = end;
    if huffman {
        huffman::decode(raw, out).map_err(|_| HpackError::Huffman)
    } else {
        out.extend_from_slice(raw);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    fn fields(d: &mut Decoder, block: &[u8]) -> Result<Vec<Option<(String, String)>>, HpackError> {
        let mut v = Vec::new();
        d.decode(block, &mut |f| {
            v.push(match f {
                Field::Known { name, value } => Some((String::from_utf8_lossy(name).into_owned(), String::from_utf8_lossy(value).into_owned())),
                Field::Unknown => None,
            })
        })?;
        Ok(v)
    }

    fn known(v: &[(&str, &str)]) -> Vec<Option<(String, String)>> {
        v.iter().map(|(n, v)| Some((n.to_string(), v.to_string()))).collect()
    }

    /// RFC 7541 C.3: requests without Huffman, one decoder, the table
    /// carrying over.
    #[test]
    fn rfc_c3_requests() {
        let mut d = Decoder::new();
        let r1 = fields(&mut d, &hex("828684410f7777772e6578616d706c652e636f6d")).unwrap();
        assert_eq!(r1, known(&[(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "www.example.com")]));
        assert_eq!(d.size, 57);
        let r2 = fields(&mut d, &hex("828684be58086e6f2d6361636865")).unwrap();
        assert_eq!(r2, known(&[(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "www.example.com"), ("cache-control", "no-cache")]));
        let r3 = fields(&mut d, &hex("828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565")).unwrap();
        assert_eq!(r3, known(&[(":method", "GET"), (":scheme", "https"), (":path", "/index.html"), (":authority", "www.example.com"), ("custom-key", "custom-value")]));
        assert_eq!(d.size, 164);
    }

    /// RFC 7541 C.6: responses with Huffman and a 256-byte table that evicts.
    #[test]
    fn rfc_c6_responses_evict() {
        let mut d = Decoder::new();
        d.resize(256);
        d.max_known = true;
        let r1 = fields(&mut d, &hex("488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863c78f0b97c8e9ae82ae43d3")).unwrap();
        assert_eq!(r1, known(&[(":status", "302"), ("cache-control", "private"), ("date", "Mon, 21 Oct 2013 20:13:21 GMT"), ("location", "https://www.example.com")]));
        assert_eq!(d.size, 222);
        let r2 = fields(&mut d, &hex("4883640effc1c0bf")).unwrap();
        assert_eq!(r2[0], Some((":status".into(), "307".into())));
        assert_eq!(d.size, 222);
        let r3 = fields(&mut d, &hex("88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007")).unwrap();
        assert_eq!(r3[5], Some(("set-cookie".into(), "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1".into())));
        assert_eq!(d.size, 215);
    }

    #[test]
    fn mid_stream_marks_unknown_and_resyncs() {
        let mut d = Decoder::mid_stream();
        // Indexed 62 (unknown), static :method GET.
        assert_eq!(fields(&mut d, &[0xbe, 0x82]).unwrap(), vec![None, Some((":method".into(), "GET".into()))]);
        // Literal with incremental indexing, new name: known, inserted.
        let mut b = vec![0x40, 3];
        b.extend_from_slice(b"x-a");
        b.push(1);
        b.push(b'1');
        assert_eq!(fields(&mut d, &b).unwrap(), known(&[("x-a", "1")]));
        // 62 is now the entry seen inserted; 63 still unknown.
        assert_eq!(fields(&mut d, &[0xbe, 0xbf]).unwrap(), vec![Some(("x-a".into(), "1".into())), None]);
        // Indexed name that is unknown: the field and its entry are unknown.
        assert_eq!(fields(&mut d, &[0x7f, 0x02, 1, b'v']).unwrap(), vec![None]);
        assert!(!d.in_step());
        // A size update to 0 empties the table on the wire: in step again,
        // and a reference past the table is now an error.
        assert_eq!(fields(&mut d, &[0x20, 0x82]).unwrap(), known(&[(":method", "GET")]));
        assert!(d.in_step());
        assert_eq!(fields(&mut d, &[0xbe]), Err(HpackError::Index));
    }

    #[test]
    fn fuzz_entry_holds_on_junk() {
        for seed in 0..200u32 {
            let junk: Vec<u8> = (0..600u32).map(|i| (i.wrapping_mul(2654435761).wrapping_add(seed * 7919) >> (seed % 25)) as u8).collect();
            fuzz(&junk);
        }
        fuzz(&hex("00828684410f7777772e6578616d706c652e636f6dffff828684be58086e6f2d6361636865"));
    }

    #[test]
    fn bad_blocks_are_errors() {
        let mut d = Decoder::new();
        assert_eq!(fields(&mut d, &[0x80]), Err(HpackError::Index));
        let mut d = Decoder::new();
        assert_eq!(fields(&mut d, &[0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]), Err(HpackError::Integer));
        let mut d = Decoder::new();
        assert_eq!(fields(&mut d, &[0x40, 10, b'a']), Err(HpackError::Truncated));
        let mut d = Decoder::new();
        // A size update after a field, and one above the limit.
        assert_eq!(fields(&mut d, &[0x82, 0x20]), Err(HpackError::SizeUpdate));
        let mut d = Decoder::new();
        assert_eq!(fields(&mut d, &[0x3f, 0xe1, 0x3f]), Err(HpackError::SizeUpdate));
    }
}
