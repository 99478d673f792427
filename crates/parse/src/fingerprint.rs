//! SQL fingerprints in the style of pt-query-digest (Percona Toolkit's
//! `QueryRewriter::fingerprint`) and literal redaction.
//!
//! Both walk the text once with a small lexer instead of pt's chain of
//! regular expressions: the lexer knows where a string literal ends (escaped
//! quotes, doubled quotes), so a quote inside a string never leaks the rest of
//! the string into the output, and the cost is linear in the input.
//!
//! Rules of [`fingerprint`] (pt-query-digest's, in its order):
//! - mysqldump's `SELECT /*!40001 SQL_NO_CACHE */ * FROM` -> `mysqldump`;
//!   `call proc(...)` -> `call proc`; `use db` -> `use ?`;
//! - comments `/* */` (not `/*! */` hints), `-- ` and `#` are dropped;
//! - string literals (`'..'`, `".."` in MySQL), numbers (also inside words,
//!   as pt does: `foo_1` -> `foo_?`), hex/bit literals, `NULL`, `TRUE`,
//!   `FALSE` -> `?`;
//! - whitespace collapsed to one space, everything lower-case;
//! - `IN (?, ?, ?)` -> `in(?+)`, `VALUES (?, ?), (?, ?)` -> `values(?+)`; a
//!   multi-row VALUES list keeps only its first row;
//! - `LIMIT ?, ?` and `LIMIT ? OFFSET ?` -> `limit ?`; `ASC` after `ORDER BY`
//!   dropped.
//!
//! Not done: pt's UNION folding (`/*repeat union*/`), which needs a
//! backreference over the whole query and is rare in practice.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// SQL dialect: what a double quote and a `$` mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// `"..."` is a string literal (MySQL's default sql_mode, and pt's view).
    Mysql,
    /// `"..."` is an identifier, `$1` a parameter, `$tag$...$tag$` a string.
    Postgres,
}

/// The query's shape (MySQL dialect): see the module doc.
pub fn fingerprint(sql: &str) -> String {
    fingerprint_dialect(sql, Dialect::Mysql)
}

/// The query's shape for `dialect`.
pub fn fingerprint_dialect(sql: &str, dialect: Dialect) -> String {
    let mut out = String::new();
    fingerprint_into(sql, dialect, &mut out);
    out
}

/// [`fingerprint_dialect`] written into `out` (cleared first), so that a
/// parser reuses one buffer for every statement.
pub(crate) fn fingerprint_into(sql: &str, dialect: Dialect, out: &mut String) {
    let mut bytes = std::mem::take(out).into_bytes();
    let end = fingerprint_bytes(sql, dialect, &mut bytes, &mut Vec::new());
    bytes.truncate(end);
    *out = into_string(bytes);
}

/// [`fingerprint_into`] as UTF-8 bytes: what a connection's
/// [`Fingerprints`] looks up, so that only a fingerprint it has not seen
/// yet is checked as UTF-8 (the check costs as much as a short statement's
/// lexing). The fingerprint is `out[..end]`, `end` returned: the bytes
/// after it are room the next statement writes over, so that a reused
/// buffer is not zeroed again for every statement.
/// `scratch` is room for the list rewrite (its contents are not kept).
fn fingerprint_bytes(sql: &str, dialect: Dialect, out: &mut Vec<u8>, scratch: &mut Vec<u8>) -> usize {
    // A statement that starts with a printable ASCII byte has no leading
    // white space (`str::trim_start` walks chars, a call per statement).
    let trimmed = match sql.as_bytes().first() {
        Some(&b) if b > b' ' && b < 0x80 => sql,
        _ => sql.trim_start(),
    };
    // The three whole-statement forms, told apart by their first byte.
    let whole: Option<std::borrow::Cow<'static, str>> = match trimmed.as_bytes().first() {
        Some(b'S') if trimmed.starts_with("SELECT /*!40001 SQL_NO_CACHE */ * FROM `") => Some("mysqldump".into()),
        Some(b'c' | b'C') => call_prefix(trimmed).map(Into::into),
        Some(b'u' | b'U') if use_db(trimmed) => Some("use ?".into()),
        _ => None,
    };
    if let Some(whole) = whole {
        out.clear();
        out.extend_from_slice(whole.as_bytes());
        return out.len();
    }
    let (seen, end) = lex::<true>(sql.as_bytes(), dialect, out);
    // Each rewrite runs only when the lexer wrote a word it looks for, so
    // a statement without lists, LIMIT or ORDER BY .. ASC is not rescanned.
    if !(seen.list || seen.limit || (seen.order && seen.asc)) {
        return end;
    }
    out.truncate(end);
    if seen.list {
        collapse_list_bytes(out, scratch);
    }
    if seen.limit {
        collapse_limit_bytes(out);
    }
    if seen.order && seen.asc {
        drop_order_by_asc_bytes(out);
    }
    out.len()
}

/// Fingerprints of one connection's statements: built in a reused buffer,
/// and handed out as one shared `Arc<str>` per distinct fingerprint, so a
/// connection repeating its statements allocates nothing for them. Each
/// shape also keeps the last short text recorded with it
/// ([`Fingerprints::recorded`]), so that a statement repeated word for word
/// (`BEGIN`, `COMMIT`, a query without literals) shares its text too.
#[derive(Debug, Default)]
pub(crate) struct Fingerprints {
    buf: Vec<u8>,
    /// Room for the rewrite of a statement's lists ([`collapse_list_bytes`]).
    scratch: Vec<u8>,
    seen: HashMap<Shape, Shared, BuildHasherDefault<WordHasher>>,
    /// Recent statements' texts and their fingerprints ([`Recent`]).
    recent: [Recent; RECENT_SHAPES],
    /// The slot the next text [`Recent`] remembers goes into (in turn).
    next_recent: usize,
    /// The slot whose text was taken last.
    last_recent: usize,
    /// Heap bytes of `seen`'s texts (each fingerprint and, at most, a
    /// shape's last text) and of the recent texts, for the memory budget
    /// ([`Fingerprints::held_bytes`]).
    kept: usize,
}

/// A statement's text, with its fingerprint, for the next statements that
/// differ from it only in the digits of their numbers (sysbench's `id=5012`
/// then `id=731`): theirs is the same, found by comparing the texts instead
/// of lexing. Only a text whose fingerprint cannot depend on its digits is
/// remembered ([`Recent::fits`]).
#[derive(Debug, Default)]
struct Recent {
    text: Vec<u8>,
    fp: Option<Arc<str>>,
    /// The text as recorded, for a text as long as its fingerprint (BEGIN,
    /// COMMIT, a query of names only), which the shape shares
    /// ([`Fingerprints::recorded`]): the same text again takes it here,
    /// without being lexed and its shape looked up.
    shared: Option<Arc<str>>,
    /// Where the text's digit runs start and end.
    runs: Vec<(u8, u8)>,
    /// The text's first eight bytes (fewer: zeros after them), and its
    /// last byte or, when that is a digit, `b'0'`: a text whose ends
    /// differ from these is of another shape (or differs in digits there,
    /// and is lexed), told without walking it.
    head: u64,
    last: u8,
}

/// Texts remembered per connection: an application's statement shapes
/// that carry numbers (sysbench's read-only transaction has seven shapes).
const RECENT_SHAPES: usize = 8;
/// The longest text remembered (per slot, held for the connection's life).
const MAX_RECENT_TEXT: usize = 128;

impl Recent {
    /// Can `text`'s fingerprint be told from another text that has the
    /// same bytes but for its runs of digits? Then the lexer's output
    /// cannot depend on the digits: every byte is a letter, `_`, a digit,
    /// ASCII white space or punctuation without a second meaning (no
    /// quote, comment, sign, dot, `$` or non-ASCII byte, which the lexer
    /// reads by their contents); no digit run is followed by what would
    /// make it a number of another form (`1.5`, `1e5`, `0x1f`, `0b1`); and
    /// the text starts with a letter but not as `call` or `use` (whose
    /// fingerprints keep their names, digits included). Then a digit run
    /// is one `?` whatever its digits, and whether it starts a token or
    /// continues a word is told by the byte before it, which both texts share.
    fn fits(text: &[u8]) -> bool {
        let Some(&first) = text.first() else {
            return false;
        };
        let starts = |w: &[u8]| text.get(..w.len()).is_some_and(|t| t.eq_ignore_ascii_case(w));
        if text.len() > MAX_RECENT_TEXT || CLASS[first as usize] != LETTER || starts(b"call") || starts(b"use") {
            return false;
        }
        text.iter().enumerate().all(|(k, &b)| match CLASS[b as usize] {
            LETTER | SPACE | PUNCT => true,
            DIGIT => !matches!(text.get(k + 1), Some(b'.' | b'e' | b'E' | b'x' | b'X' | b'b' | b'B')),
            _ => false,
        })
    }

    /// The first eight bytes of `text` and its last byte, as [`Recent`]
    /// keeps them.
    fn ends(text: &[u8]) -> (u64, u8) {
        let mut head = [0u8; 8];
        let n = text.len().min(8);
        head[..n].copy_from_slice(&text[..n]);
        let last = text.last().map_or(0, |&b| if b.is_ascii_digit() { b'0' } else { b });
        (u64::from_le_bytes(head), last)
    }

    /// Heap bytes the slot holds: its text, runs, fingerprint and shared
    /// text (counted with the shapes too, which may let them go first).
    fn held_bytes(&self) -> usize {
        let arc = |a: &Option<Arc<str>>| a.as_ref().map_or(0, |a| ARC_HEADER_BYTES + a.len());
        self.text.capacity() + 2 * self.runs.capacity() + arc(&self.fp) + arc(&self.shared)
    }

    /// Remembers `text` (which [`fits`](Recent::fits)), its fingerprint and,
    /// for a text as long as its fingerprint, the text as recorded.
    fn keep(&mut self, text: &[u8], fp: &Arc<str>, shared: Option<&Arc<str>>, ends: (u64, u8)) {
        self.text.clear();
        self.text.extend_from_slice(text);
        self.runs.clear();
        let mut k = 0;
        while k < text.len() {
            if text[k].is_ascii_digit() {
                let start = k;
                while k < text.len() && text[k].is_ascii_digit() {
                    k += 1;
                }
                // At most MAX_RECENT_TEXT (128), which fits a byte.
                self.runs.push((start as u8, k as u8));
            } else {
                k += 1;
            }
        }
        self.fp = Some(fp.clone());
        self.shared = shared.cloned();
        (self.head, self.last) = ends;
    }

    /// Is `text` this slot's text but for the digits of its digit runs (a
    /// run of any length where the slot has one)? The slot's ends first,
    /// which tell another shape of the application's apart at once; then,
    /// for a text as long as the slot's (an application's numbers of one
    /// width: sysbench's ids), the two compared eight bytes a step, where
    /// only bytes that are digits in both may differ ([`digits_apart`]);
    /// else (or when that fails: runs of other lengths that add up the
    /// same) the parts between the slot's digit runs, each compared whole,
    /// and a run of digits in `text` where the slot has one. The slot's text
    /// [`fits`](Recent::fits) and its parts hold no digit, so an equal part
    /// of `text` fits too, and the byte after each digit run is the same in
    /// both.
    fn same_shape(&self, text: &[u8], ends: (u64, u8)) -> bool {
        if ends != (self.head, self.last) || self.fp.is_none() {
            return false;
        }
        if text.len() == self.text.len() && digits_apart(text, &self.text) {
            return true;
        }
        let (mut at, mut from) = (0, 0);
        for &(start, end) in &self.runs {
            let part = &self.text[from..start as usize];
            if text.get(at..at + part.len()) != Some(part) {
                return false;
            }
            at += part.len();
            let digits = text.get(at..).map_or(0, |r| r.iter().take_while(|b| b.is_ascii_digit()).count());
            if digits == 0 {
                return false;
            }
            at += digits;
            from = end as usize;
        }
        text.get(at..) == Some(&self.text[from..])
    }
}

/// Do `text` and `kept`, of one length and with the same first eight bytes
/// (a recent slot's head, compared before), differ only in bytes that are
/// digits in both? Then their digit runs are where each other's are, of the
/// same lengths, and the bytes between them are equal: one shape but for
/// the digits, as [`Recent::same_shape`] asks. Eight bytes a step past the
/// head (the last step the last eight bytes, which may overlap the step
/// before): equal words at once, others by the xor of the two tested against
/// both words' digit bytes; instead of a comparison per part between runs
/// (a `memcmp` call each) and a walk of each run.
fn digits_apart(text: &[u8], kept: &[u8]) -> bool {
    let agree = |t: u64, k: u64| t == k || nonzero_bytes(t ^ k) & !(digit_bytes(t) & digit_bytes(k)) == 0;
    let word = |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().unwrap_or_default());
    let n = text.len();
    if n != kept.len() {
        return false;
    }
    if n <= 8 {
        return true;
    }
    let mut at = 8;
    while at + 8 <= n {
        if !agree(word(text, at), word(kept, at)) {
            return false;
        }
        at += 8;
    }
    at == n || agree(word(text, n - 8), word(kept, n - 8))
}

/// The bytes of `w` that are ASCII digits, each as its high bit (every byte
/// computed apart: no carry crosses into the next).
fn digit_bytes(w: u64) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    // A digit's byte becomes 0..=9; adding 0x76 to its low seven bits sets
    // the high bit from 10 up.
    let x = w ^ 0x3030_3030_3030_3030;
    !(((x & LOW7) + 0x7676_7676_7676_7676) | x) & 0x8080_8080_8080_8080
}

/// The bytes of `w` that are not zero, each as its high bit.
fn nonzero_bytes(w: u64) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    (((w & LOW7) + LOW7) | w) & 0x8080_8080_8080_8080
}

/// A shared fingerprint in [`Fingerprints`]' set, looked up by its bytes.
#[derive(Debug, PartialEq, Eq)]
struct Shape(Arc<str>);

impl std::hash::Hash for Shape {
    fn hash<H: Hasher>(&self, h: &mut H) {
        // As `[u8]` hashes, which `Borrow` requires.
        self.0.as_bytes().hash(h);
    }
}

impl std::borrow::Borrow<[u8]> for Shape {
    fn borrow(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// The set's hash: a word at a time (SipHash cost more than the rest of a
/// repeated statement's bookkeeping). Not proof against chosen collisions,
/// which the set's cap bounds to a few dozen comparisons. The tracker keys
/// its per-connection side maps (table indices, which it picks) with it too.
#[derive(Debug, Default, Clone, Copy)]
pub struct WordHasher(u64);

impl Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut h = self.0;
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let w = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
            h = (h.rotate_left(5) ^ w).wrapping_mul(K);
        }
        let mut tail = [0u8; 8];
        tail[..words.remainder().len()].copy_from_slice(words.remainder());
        self.0 = (h.rotate_left(5) ^ u64::from_le_bytes(tail)).wrapping_mul(K);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Distinct fingerprints a connection keeps (it starts over past this):
/// applications run a few dozen statement shapes.
const MAX_SHARED_FINGERPRINTS: usize = 64;
/// A buffer grown by one huge statement is given back rather than kept for
/// the connection's life.
const MAX_KEPT_BUFFER: usize = 64 * 1024;
/// The longest recorded text a shape keeps for the next statement of the
/// same shape to share: sysbench's BEGIN and COMMIT, a connection's queries
/// without literals. At most this much per shape is held past its records.
const MAX_SHARED_TEXT: usize = 64;
/// An `Arc<str>`'s reference counts, before its bytes.
const ARC_HEADER_BYTES: usize = 16;
/// A slot of `seen`'s table: the entry and its control byte.
const SEEN_ENTRY_BYTES: usize = std::mem::size_of::<(Shape, Shared)>() + 1;

impl Fingerprints {
    /// The fingerprint of `sql`, shared with the connection's earlier
    /// statements of the same shape (the parsers take it with their text,
    /// [`Fingerprints::recorded`]).
    #[cfg(test)]
    pub(crate) fn of(&mut self, sql: &str, dialect: Dialect) -> Arc<str> {
        let end = fingerprint_bytes(sql, dialect, &mut self.buf, &mut self.scratch);
        self.shared_buf(end)
    }

    /// [`command_group`]'s name for a command without SQL, shared the same way.
    pub(crate) fn group(&mut self, command: &str) -> Arc<str> {
        let name = if command == "startup" { "login" } else { command };
        self.buf.clear();
        self.buf.push(b'<');
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.push(b'>');
        self.shared_buf(self.buf.len())
    }

    /// `text` (made valid UTF-8 as `String::from_utf8_lossy` makes it),
    /// shared the same way: a connection's repeated short texts (PostgreSQL
    /// command tags) allocate once.
    pub(crate) fn text(&mut self, text: &[u8]) -> Arc<str> {
        self.buf.clear();
        self.buf.extend_from_slice(text);
        self.shared_buf(self.buf.len())
    }

    /// Heap bytes held (the buffers, the set of shapes and the recent
    /// texts), charged to the stream memory with the parser's state
    /// (`ConnParser::state_bytes`): up to 64 shapes and 8 recent texts a
    /// connection, and buffers up to 64 KiB each, are held for its life.
    pub(crate) fn held_bytes(&self) -> usize {
        self.buf.capacity() + self.scratch.capacity() + self.seen.capacity() * SEEN_ENTRY_BYTES + self.kept
    }

    /// SQL text as a transaction records it ([`recorded_text`]: redacted
    /// when asked, cut to `max_text_bytes`), whether it was cut, and its
    /// fingerprint from the whole text. The text is the one recorded with
    /// the shape's last statement when the two are equal and short, so a
    /// statement repeated word for word allocates nothing.
    ///
    /// Only a text as long as its fingerprint is compared with, or kept
    /// as, the shape's last one: a statement with a literal nearly always
    /// has a fingerprint of another length (`id=5012` is `id=?`), so it
    /// costs one length test, not a comparison of its bytes and an `Arc`
    /// kept per shape. Texts without literals (BEGIN, COMMIT, a query of
    /// names only) keep their length, as do one-byte literals.
    ///
    /// A text that differs from a recent one only in its digits takes that
    /// one's fingerprint without being lexed ([`Recent`]).
    pub(crate) fn recorded(&mut self, raw: &str, dialect: Dialect, cfg: &crate::ParseConfig) -> (Arc<str>, bool, Arc<str>) {
        let (text, cut) = recorded_text(raw, dialect, cfg);
        // The slot of the last text taken first: an application repeats
        // its statements of one shape in runs (sysbench's ten point selects).
        // The slots' ends are compared here, not in a call each: most slots
        // hold other shapes, told apart by their ends (BEGIN and COMMIT by
        // every slot); the last slot is not tried twice.
        let last = self.last_recent;
        let ends = Recent::ends(raw.as_bytes());
        let hit = |r: &Recent| (r.head, r.last) == ends && r.same_shape(raw.as_bytes(), ends);
        let found = if hit(&self.recent[last]) {
            Some(last)
        } else {
            (0..RECENT_SHAPES).find(|&k| k != last && hit(&self.recent[k]))
        };
        if let Some(k) = found {
            self.last_recent = k;
        }
        let recent = found.map(|k| &self.recent[k]);
        let known = recent.is_some();
        if let Some(Recent { fp: Some(fp), shared, .. }) = recent {
            if text.len() != fp.len() || fp.len() > MAX_SHARED_TEXT {
                return (Arc::from(&*text), cut, fp.clone());
            }
            // The same text as the slot's shared one (sysbench's BEGIN and
            // COMMIT): what the shape would give, without the lexer and the
            // shape's lookup (its hash, its compare).
            if let Some(shared) = shared.as_ref().filter(|t| ***t == *text) {
                return (shared.clone(), cut, fp.clone());
            }
        }
        let end = fingerprint_bytes(raw, dialect, &mut self.buf, &mut self.scratch);
        if text.len() != end || end > MAX_SHARED_TEXT {
            let fp = self.shared_buf(end);
            if !known {
                self.keep_recent(raw.as_bytes(), &fp, None, ends);
            }
            return (Arc::from(&*text), cut, fp);
        }
        let (fp, text) = self.shape(end, |shape| match &shape.last {
            Some(last) if **last == *text => last.clone(),
            _ => {
                let t: Arc<str> = Arc::from(&*text);
                shape.last = Some(t.clone());
                t
            }
        });
        if !known {
            self.keep_recent(raw.as_bytes(), &fp, Some(&text), ends);
        }
        (text, cut, fp)
    }

    /// Remembers `raw` in the next recent slot (in turn) if it
    /// [`fits`](Recent::fits), with its fingerprint and shared text.
    fn keep_recent(&mut self, raw: &[u8], fp: &Arc<str>, shared: Option<&Arc<str>>, ends: (u64, u8)) {
        if !Recent::fits(raw) {
            return;
        }
        let slot = &mut self.recent[self.next_recent];
        let was = slot.held_bytes();
        slot.keep(raw, fp, shared, ends);
        self.kept = self.kept + slot.held_bytes() - was;
        self.next_recent = (self.next_recent + 1) % RECENT_SHAPES;
    }

    /// Heap bytes a shape of `seen` holds: its fingerprint's allocation,
    /// and room for the last text it may keep (at most
    /// [`MAX_SHARED_TEXT`]), each with its reference counts.
    fn shape_bytes(fp: &Arc<str>) -> usize {
        2 * ARC_HEADER_BYTES + fp.len() + MAX_SHARED_TEXT
    }

    /// The shared text of `self.buf[..end]`.
    fn shared_buf(&mut self, end: usize) -> Arc<str> {
        self.shape(end, |_| ()).0
    }

    /// The shared text of `self.buf[..end]`, and what `f` makes of the
    /// shape's entry.
    #[inline(always)]
    fn shape<R>(&mut self, end: usize, f: impl FnOnce(&mut Shared) -> R) -> (Arc<str>, R) {
        let text = &self.buf[..end];
        let out = match self.seen.get_mut(text) {
            Some(shape) => (shape.fp.clone(), f(shape)),
            None => {
                // The lexer writes only whole UTF-8 sequences; the lossy
                // fallback keeps that a guarantee rather than an assumption.
                let fp: Arc<str> = match std::str::from_utf8(text) {
                    Ok(text) => Arc::from(text),
                    Err(_) => Arc::from(String::from_utf8_lossy(text).as_ref()),
                };
                let mut shape = Shared { fp: fp.clone(), last: None };
                let r = f(&mut shape);
                if self.seen.len() >= MAX_SHARED_FINGERPRINTS {
                    for s in self.seen.values() {
                        self.kept -= Self::shape_bytes(&s.fp);
                    }
                    self.seen.clear();
                }
                self.kept += Self::shape_bytes(&fp);
                self.seen.insert(Shape(fp.clone()), shape);
                (fp, r)
            }
        };
        if self.buf.capacity() > MAX_KEPT_BUFFER {
            self.buf = Vec::new();
        }
        if self.scratch.capacity() > MAX_KEPT_BUFFER {
            self.scratch = Vec::new();
        }
        out
    }
}

/// What [`Fingerprints`] keeps per shape: the shared fingerprint (the key's
/// own text, here to be handed out from a mutable lookup) and the last
/// short text recorded with it.
#[derive(Debug)]
struct Shared {
    fp: Arc<str>,
    last: Option<Arc<str>>,
}

/// `sql` with its literals (strings, numbers, hex and bit values) replaced by
/// `?`; everything else (case, spacing, comments, identifiers) is kept.
pub fn redact(sql: &str) -> String {
    redact_dialect(sql, Dialect::Mysql)
}

/// SQL text as a transaction records it: the text, redacted when
/// `cfg.redact`, cut to `cfg.max_text_bytes` (borrowed from `raw` when
/// neither changes it), and whether it was cut.
pub(crate) fn recorded_text<'a>(raw: &'a str, dialect: Dialect, cfg: &crate::ParseConfig) -> (Cow<'a, str>, bool) {
    if cfg.redact {
        let mut text = redact_dialect(raw, dialect);
        let cut = crate::truncate(&mut text, cfg.max_text_bytes);
        (Cow::Owned(text), cut)
    } else {
        let end = crate::char_floor(raw, cfg.max_text_bytes);
        (Cow::Borrowed(&raw[..end]), end < raw.len())
    }
}

/// (the text as [`recorded_text`] gives it; whether it was cut; its
/// fingerprint, always taken from the whole text).
pub(crate) fn recorded_sql(raw: &str, dialect: Dialect, cfg: &crate::ParseConfig) -> (String, bool, String) {
    let (text, cut) = recorded_text(raw, dialect, cfg);
    (text.into_owned(), cut, fingerprint_dialect(raw, dialect))
}

/// [`redact`] for `dialect`.
pub fn redact_dialect(sql: &str, dialect: Dialect) -> String {
    // The lexer keeps one byte of room past the input's length.
    let mut out = Vec::with_capacity(sql.len() + 1);
    let (_, end) = lex::<false>(sql.as_bytes(), dialect, &mut out);
    out.truncate(end);
    into_string(out)
}

/// The lexer's output as text. It only ever writes whole UTF-8 sequences
/// (tokens that do not decode are replaced), so the check never fails; the
/// lossy fallback only keeps that a guarantee rather than an assumption.
fn into_string(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// `call name(` -> `call name` (lower case), as pt does.
fn call_prefix(s: &str) -> Option<String> {
    let b = s.as_bytes();
    if b.len() < 5 || !b[..4].eq_ignore_ascii_case(b"call") || !b[4].is_ascii_whitespace() {
        return None;
    }
    let rest = s[4..].trim_start();
    let end = rest.find(|c: char| c.is_whitespace() || c == '(')?;
    if !rest[end..].starts_with('(') || end == 0 {
        return None;
    }
    Some(format!("call {}", rest[..end].to_ascii_lowercase()))
}

/// `use db` (one word, nothing after), whose fingerprint is `use ?`.
fn use_db(s: &str) -> bool {
    let t = s.trim_end().trim_end_matches(';').trim_end();
    let b = t.as_bytes();
    if b.len() < 5 || !b[..3].eq_ignore_ascii_case(b"use") || !b[3].is_ascii_whitespace() {
        return false;
    }
    let db = t[3..].trim_start();
    !db.is_empty() && !db.contains(char::is_whitespace)
}

/// End (exclusive) of a quoted literal opened at `i` by `q`: backslash
/// escapes (MySQL) and doubled quotes are inside; an unterminated literal runs
/// to the end.
fn quoted_end(s: &[u8], i: usize, q: u8, backslash: bool) -> usize {
    let mut j = i + 1;
    while j < s.len() {
        let c = s[j];
        if backslash && c == b'\\' {
            j += 2;
            continue;
        }
        if c == q {
            if s.get(j + 1) == Some(&q) {
                j += 2;
                continue;
            }
            return j + 1;
        }
        j += 1;
    }
    s.len()
}

/// End of a number literal starting at `i` (a digit, or `.` then a digit).
fn number_end(s: &[u8], i: usize) -> usize {
    let mut j = i;
    if s[j] == b'0' && matches!(s.get(j + 1), Some(b'x' | b'X' | b'b' | b'B')) {
        j += 2;
        while j < s.len() && s[j].is_ascii_hexdigit() {
            j += 1;
        }
        return j;
    }
    j += s[j..].iter().position(|&b| !(b.is_ascii_digit() || b == b'.')).unwrap_or(s.len() - j);
    if j < s.len() && (s[j] == b'e' || s[j] == b'E') {
        let mut k = j + 1;
        if k < s.len() && (s[k] == b'+' || s[k] == b'-') {
            k += 1;
        }
        if k < s.len() && s[k].is_ascii_digit() {
            j = k;
            while j < s.len() && s[j].is_ascii_digit() {
                j += 1;
            }
        }
    }
    j
}

/// Last non-space byte written so far.
fn last_sig(out: &[u8]) -> Option<u8> {
    out.iter().rev().copied().find(|b| !b.is_ascii_whitespace())
}

/// A sign right before a number is part of the literal when what precedes it
/// cannot end an operand (`= -5`, `(-1`, `, +2`, start of text).
fn sign_is_unary(out: &[u8]) -> bool {
    match last_sig(out) {
        None => true,
        Some(b) if is_ident(b) => {
            // After a keyword (`select -5`, `and -1`) the sign is unary.
            let t = out.trim_ascii_end();
            let w = t.rsplit(|c: &u8| !(c.is_ascii_alphanumeric() || *c == b'_')).next().unwrap_or(b"");
            const KW: [&str; 16] = [
                "select", "where", "and", "or", "not", "by", "then", "else", "when", "values", "in", "between", "like",
                "set", "limit", "return",
            ];
            KW.iter().any(|k| w.eq_ignore_ascii_case(k.as_bytes()))
        }
        Some(b) => matches!(b, b'=' | b'<' | b'>' | b'(' | b',' | b'+' | b'-' | b'*' | b'/'),
    }
}

// Byte classes of the lexer, one lookup in `CLASS` per byte. The word
// classes come first: `class <= HIGH` is `is_ident`, `class <= DOLLAR` a
// byte a fingerprint copies lower-cased as it scans a word, `class <=
// DIGIT` one a redaction copies as it is (`FP_COPY`, `REDACT_COPY`).

/// Letters and `_`.
const LETTER: u8 = 0;
/// `$`: a word byte in both dialects; at the start of a PostgreSQL token
/// also a parameter (`$1`) or a dollar quote ([`special_token`]).
const DOLLAR: u8 = 1;
const DIGIT: u8 = 2;
/// A byte of a multi-byte UTF-8 sequence (or one that does not decode).
const HIGH: u8 = 3;
/// ASCII whitespace (`u8::is_ascii_whitespace`).
const SPACE: u8 = 4;
/// Operators and punctuation without a second meaning: copied as runs.
const PUNCT: u8 = 5;
/// `'`: a string literal in both dialects.
const QUOTE: u8 = 6;
/// Bytes that may open a comment, literal, quoted name or signed number:
/// `/ - + # " ` .` ([`special_token`]).
const SPECIAL: u8 = 7;

const CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = if c.is_ascii_whitespace() {
            SPACE
        } else if c.is_ascii_digit() {
            DIGIT
        } else if c.is_ascii_alphabetic() || c == b'_' {
            LETTER
        } else if c >= 0x80 {
            HIGH
        } else if c == b'$' {
            DOLLAR
        } else if c == b'\'' {
            QUOTE
        } else if matches!(c, b'/' | b'-' | b'+' | b'#' | b'"' | b'`' | b'.') {
            SPECIAL
        } else {
            PUNCT
        };
        b += 1;
    }
    t
};

/// A word's byte as a fingerprint writes it while scanning the word:
/// letters, `_` and `$` lower-cased, 0 for every other byte (a digit, a
/// non-ASCII byte, the word's end), which the lexer then looks at.
const FP_COPY: [u8; 256] = copy_table(DOLLAR, true);
/// The same for a redaction: letters, `_`, `$` and digits as they are.
const REDACT_COPY: [u8; 256] = copy_table(DIGIT, false);

const fn copy_table(last_class: u8, lower: bool) -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        if CLASS[b] <= last_class {
            t[b] = if lower { (b as u8).to_ascii_lowercase() } else { b as u8 };
        }
        b += 1;
    }
    t
}

/// Which rewrites the lexer's output may need: set when a word they look
/// for was written (or a token, such as a quoted name, whose inside is not
/// looked at), so that a clear flag proves the rewrite would change nothing.
#[derive(Default, Clone, Copy)]
struct Rewrites {
    /// `in`, `value`, `values`: [`collapse_lists`].
    list: bool,
    /// `limit`: [`collapse_limit`].
    limit: bool,
    /// A word ending in `order`, and the word `asc`: [`drop_order_by_asc`].
    order: bool,
    asc: bool,
}

impl Rewrites {
    /// Notes the lower-cased ASCII letter run `w` (a word, or the part of
    /// a word before its first digit or after its last); true when it is
    /// `null`, `true` or `false`, which a whole word is a literal. One
    /// match on the length, then on the first letter: a word is compared
    /// with at most one of the words looked for.
    #[inline]
    fn word(&mut self, w: &[u8]) -> bool {
        match w.len() {
            0 | 1 => {}
            2 => self.list |= w == b"in",
            3 => self.asc |= w == b"asc",
            4 => return w == b"null" || w == b"true",
            5 => match w[0] {
                b'f' => return w == b"false",
                b'v' => self.list |= w == b"value",
                b'l' => self.limit |= w == b"limit",
                b'o' => self.order |= w == b"order",
                _ => {}
            },
            n => {
                self.list |= n == 6 && w == b"values";
                // `reorder by` counts: the rewrite looks for `order by `
                // anywhere.
                self.order |= w[n - 1] == b'r' && w.ends_with(b"order");
            }
        }
        false
    }

    fn all(&mut self) {
        *self = Rewrites { list: true, limit: true, order: true, asc: true };
    }
}

/// The owed space before a token, if any.
#[inline]
fn separate(out: &mut Vec<u8>, space: &mut bool) {
    if *space && !out.is_empty() {
        out.push(b' ');
    }
    *space = false;
}

/// Writes `t` lower-cased (ASCII fast; bytes that do not decode are
/// replaced) and notes it in `seen`.
#[inline]
fn push_lower(out: &mut Vec<u8>, t: &[u8], ascii: bool, seen: &mut Rewrites) {
    let start = out.len();
    if ascii {
        out.extend_from_slice(t);
        out[start..].make_ascii_lowercase();
        seen.word(&out[start..]);
        return;
    }
    match std::str::from_utf8(t) {
        Ok(t) => {
            let mut utf8 = [0u8; 4];
            for c in t.chars().flat_map(|c| c.to_lowercase()) {
                out.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
            }
        }
        Err(_) => out.extend_from_slice(String::from_utf8_lossy(t).as_bytes()),
    }
    // Unicode lower-casing can make ASCII letters (the Kelvin sign is `k`).
    seen.all();
}

/// Writes `t` as it is, replacing bytes that do not decode as UTF-8.
#[inline]
fn push_verbatim(out: &mut Vec<u8>, t: &[u8]) {
    if t.is_ascii() {
        out.extend_from_slice(t);
    } else {
        out.extend_from_slice(String::from_utf8_lossy(t).as_bytes());
    }
}

/// Writes `s`'s fingerprint (`FP`) or its redaction into `out` as UTF-8, in
/// one pass over the byte-class table [`CLASS`]. Both modes replace the
/// same literals; the fingerprint also drops comments, collapses
/// whitespace, lower-cases, and replaces NULL/TRUE/FALSE, `$1` parameters
/// and digits inside words, where a redaction keeps the text as it is. The
/// words the fingerprint's rewrites look for are noted on the way, so that
/// the rewrites run only when they may change something.
///
/// The common tokens are written straight into `out`'s bytes, kept at
/// least one longer than the input still to read: an ASCII token never
/// writes more than it reads, an owed space stands for a byte read before
/// it, so that room is checked once per token rather than per byte. A
/// word's bytes go out lower-cased as they are scanned (one table lookup),
/// each run of digits as one `?`; runs of spaces and of punctuation are
/// taken whole. What is rare (non-ASCII words, comments, quoted names,
/// signed numbers, PostgreSQL's `$`) goes through [`Vec`] pushes.
///
/// Writes from `out[0]` on and returns where the output ends: `out` may be
/// longer, the bytes past the end being room left from an earlier
/// statement (not zeroed again).
fn lex<const FP: bool>(s: &[u8], dialect: Dialect, out: &mut Vec<u8>) -> (Rewrites, usize) {
    let mysql = dialect == Dialect::Mysql;
    let n = s.len();
    let mut seen = Rewrites::default();
    // A space is owed before the next token (a fingerprint only).
    let mut space = false;
    // Bytes written: `out[..o]`; `out[o..]` is room.
    let mut o = 0;
    // What a word's bytes are written as while it is scanned.
    let copy = if FP { &FP_COPY } else { &REDACT_COPY };
    let mut i = 0;
    'tokens: while i < n {
        if out.len() < o + 1 + (n - i) {
            out.resize(o + 1 + (n - i), 0);
        }
        let mut c = s[i];
        let mut class = CLASS[c as usize];
        if class == SPACE {
            // Whitespace, then the token after it in the same turn.
            let mut j = i + 1;
            while j < n && CLASS[s[j] as usize] == SPACE {
                j += 1;
            }
            if FP {
                space = true;
            } else {
                out[o..o + (j - i)].copy_from_slice(&s[i..j]);
                o += j - i;
            }
            i = j;
            if i == n {
                break;
            }
            c = s[i];
            class = CLASS[c as usize];
        }
        match class {
            PUNCT => {
                let mut j = i + 1;
                while j < n && CLASS[s[j] as usize] == PUNCT {
                    j += 1;
                }
                o = owed_space(out, o, &mut space);
                out[o..o + (j - i)].copy_from_slice(&s[i..j]);
                o += j - i;
                i = j;
                continue;
            }
            QUOTE => {
                o = owed_space(out, o, &mut space);
                out[o] = b'?';
                o += 1;
                i = quoted_end(s, i, b'\'', mysql);
                continue;
            }
            DIGIT => {
                o = owed_space(out, o, &mut space);
                out[o] = b'?';
                o += 1;
                // Digits alone are the usual number; [`number_end`] for
                // the rest (fractions, exponents, hex and bit values).
                let mut j = i + 1;
                while j < n && CLASS[s[j] as usize] == DIGIT {
                    j += 1;
                }
                if j < n && matches!(s[j], b'.' | b'e' | b'E' | b'x' | b'X' | b'b' | b'B') {
                    j = number_end(s, i);
                }
                i = j;
                continue;
            }
            SPECIAL | DOLLAR if class == SPECIAL || !mysql => {
                out.truncate(o);
                let end = special_token::<FP>(s, i, dialect, out, &mut space, &mut seen);
                if end.is_none() && class == SPECIAL {
                    // A `-`, `+`, `/`, `.` or `#` that is only itself.
                    separate(out, &mut space);
                    out.push(c);
                }
                o = out.len();
                if let Some(end) = end.or((class == SPECIAL).then_some(i + 1)) {
                    i = end;
                    continue;
                }
                // A PostgreSQL `$` that opens a word.
                if out.len() < o + 1 + (n - i) {
                    out.resize(o + 1 + (n - i), 0);
                }
            }
            _ => {}
        }
        // Words: keywords, identifiers, literals' prefixes. Words joined by
        // single spaces are taken in one turn.
        o = owed_space(out, o, &mut space);
        // The current word: where it starts in `s` and in `out`.
        let mut word = i;
        let mut start = o;
        let mut j = i;
        // With `FP`, where the word's first and last letter runs end and
        // start when digits split it (the rewrites' words are looked for
        // in those: a run between two `?` is never one of them).
        let mut first_end = usize::MAX;
        let mut run = start;
        loop {
            // Letters (and with !FP digits): the room checked above covers
            // the rest of the input.
            let copied = {
                let src = &s[j..];
                let dst = &mut out[o..o + src.len()];
                let mut m = 0;
                // Eight bytes per length check while eight are left (the
                // block's bytes indexed without a check each), then one at
                // a time. One lookup a byte: the byte as written, or 0 to
                // stop.
                'copy: {
                    while let (Some(a), Some(d)) = (src.get(m..m + 8), dst.get_mut(m..m + 8)) {
                        for k in 0..8 {
                            let b = copy[a[k] as usize];
                            if b == 0 {
                                m += k;
                                break 'copy;
                            }
                            d[k] = b;
                        }
                        m += 8;
                    }
                    while m < src.len() {
                        let b = copy[src[m] as usize];
                        if b == 0 {
                            break;
                        }
                        dst[m] = b;
                        m += 1;
                    }
                }
                m
            };
            j += copied;
            o += copied;
            let next = if j < n { CLASS[s[j] as usize] } else { SPACE };
            if FP && next == DIGIT {
                // A run of digits inside a word is one `?` (pt does so: foo_1 -> foo_?).
                first_end = first_end.min(o);
                out[o] = b'?';
                o += 1;
                j += 1;
                while j < n && CLASS[s[j] as usize] == DIGIT {
                    j += 1;
                }
                run = o;
                continue;
            }
            // The word ends at `j`.
            if next == HIGH {
                // Not ASCII: the whole word again, through the general path.
                out.truncate(start);
                i = word_slow::<FP>(s, word, mysql, out, &mut seen);
                o = out.len();
                continue 'tokens;
            }
            if next == QUOTE && is_literal_prefix(&s[word..j]) {
                out[start] = b'?';
                o = start + 1;
                i = quoted_end(s, j, b'\'', mysql || s[word..j].eq_ignore_ascii_case(b"e"));
                continue 'tokens;
            }
            if FP {
                if first_end == usize::MAX {
                    if seen.word(&out[start..o]) {
                        out[start] = b'?';
                        o = start + 1;
                    }
                } else {
                    // Parts of a word: never a literal.
                    seen.word(&out[start..first_end]);
                    seen.word(&out[run..o]);
                }
            }
            // One space and a letter: the next word in this turn (the
            // space written in place of the one read).
            if j + 1 < n && s[j] == b' ' && CLASS[s[j + 1] as usize] == LETTER {
                out[o] = b' ';
                o += 1;
                j += 1;
                word = j;
                start = o;
                first_end = usize::MAX;
                run = o;
                continue;
            }
            i = j;
            break;
        }
    }
    (seen, o)
}

/// [`separate`] on the bytes `out[..o]` of [`lex`]: the new end.
#[inline(always)]
fn owed_space(out: &mut [u8], o: usize, space: &mut bool) -> usize {
    let owed = *space && o != 0;
    *space = false;
    if owed {
        out[o] = b' ';
        o + 1
    } else {
        o
    }
}

/// A word that is not all ASCII, from `i` (its owed space written): its
/// end.
#[cold]
fn word_slow<const FP: bool>(s: &[u8], i: usize, mysql: bool, out: &mut Vec<u8>, seen: &mut Rewrites) -> usize {
    let mut j = i;
    while j < s.len() && is_ident(s[j]) {
        j += 1;
    }
    let word = &s[i..j];
    if s.get(j) == Some(&b'\'') && is_literal_prefix(word) {
        out.push(b'?');
        return quoted_end(s, j, b'\'', mysql || word.eq_ignore_ascii_case(b"e"));
    }
    if !FP {
        push_verbatim(out, word);
        return j;
    }
    // Each run of digits one `?`, the rest lower-cased.
    let mut k = 0;
    while k < word.len() {
        let st = k;
        if word[k].is_ascii_digit() {
            while k < word.len() && word[k].is_ascii_digit() {
                k += 1;
            }
            out.push(b'?');
        } else {
            while k < word.len() && !word[k].is_ascii_digit() {
                k += 1;
            }
            push_lower(out, &word[st..k], word[st..k].is_ascii(), seen);
        }
    }
    seen.all();
    j
}

/// `x'..'`, `b'..'`, `n'..'`, `e'..'` and `_charset'..'` are literals.
fn is_literal_prefix(word: &[u8]) -> bool {
    (word.len() == 1 && matches!(word[0] | 0x20, b'x' | b'b' | b'n' | b'e')) || word[0] == b'_'
}

/// The token a [`SPECIAL`] byte at `i` opens, written into `out`; its end,
/// or `None` when the byte is not special here (a plain `-`, a word's `$`).
fn special_token<const FP: bool>(
    s: &[u8],
    i: usize,
    dialect: Dialect,
    out: &mut Vec<u8>,
    space: &mut bool,
    seen: &mut Rewrites,
) -> Option<usize> {
    let c = s[i];
    let next = s.get(i + 1).copied();
    let mysql = dialect == Dialect::Mysql;
    let end = match c {
        // Comments: a fingerprint drops them, except MySQL optimizer hints
        // `/*! ... */` (as pt does); a redaction keeps them all.
        b'/' if next == Some(b'*') && (s.get(i + 2) != Some(&b'!') || !FP) => {
            let end = s[i + 2..].windows(2).position(|w| w == b"*/").map_or(s.len(), |p| i + 2 + p + 2);
            return Some(comment::<FP>(s, i, end, out, space));
        }
        b'-' if next == Some(b'-') && s.get(i + 2).is_none_or(|b| b.is_ascii_whitespace()) => {
            return Some(comment::<FP>(s, i, line_end(s, i), out, space));
        }
        b'#' if mysql => return Some(comment::<FP>(s, i, line_end(s, i), out, space)),
        b'\'' => quoted_end(s, i, c, mysql),
        b'"' if mysql => quoted_end(s, i, c, true),
        b'`' | b'"' => {
            // Quoted names are kept as they are; the rewrites look inside.
            let end = quoted_end(s, i, c, false);
            separate(out, space);
            let name = &s[i..end];
            if FP {
                push_lower(out, name, name.is_ascii(), seen);
                seen.all();
            } else {
                push_verbatim(out, name);
            }
            return Some(end);
        }
        b'$' if !mysql => {
            if next.is_some_and(|b| b.is_ascii_digit()) {
                let mut j = i + 1;
                while j < s.len() && s[j].is_ascii_digit() {
                    j += 1;
                }
                if !FP {
                    // A redaction keeps parameters: they are not literals.
                    out.extend_from_slice(&s[i..j]);
                    return Some(j);
                }
                j
            } else {
                let mut j = i + 1;
                while j < s.len() && (s[j].is_ascii_alphanumeric() || s[j] == b'_') {
                    j += 1;
                }
                if j >= s.len() || s[j] != b'$' {
                    return None;
                }
                let tag = &s[i..=j];
                let body = j + 1;
                s[body..].windows(tag.len()).position(|w| w == tag).map_or(s.len(), |p| body + p + tag.len())
            }
        }
        b'.' if next.is_some_and(|b| b.is_ascii_digit()) => number_end(s, i),
        b'-' | b'+' if next.is_some_and(|b| b.is_ascii_digit()) && sign_is_unary(out) => number_end(s, i + 1),
        _ => return None,
    };
    separate(out, space);
    out.push(b'?');
    Some(end)
}

/// A comment from `i` to `end`: a fingerprint owes a space for it, a
/// redaction copies it.
#[inline]
fn comment<const FP: bool>(s: &[u8], i: usize, end: usize, out: &mut Vec<u8>, space: &mut bool) -> usize {
    if FP {
        *space = true;
    } else {
        push_verbatim(out, &s[i..end]);
    }
    end
}

fn line_end(s: &[u8], i: usize) -> usize {
    s[i..].iter().position(|&b| b == b'\n').map_or(s.len(), |p| i + p)
}

/// Is `s[at..at+w.len()]` the word `w` with word boundaries on both sides?
fn word_at(s: &[u8], at: usize, w: &[u8]) -> bool {
    s.len() >= at + w.len()
        && &s[at..at + w.len()] == w
        && (at == 0 || !is_ident(s[at - 1]))
        && s.get(at + w.len()).is_none_or(|&b| !is_ident(b))
}

/// End of a `( ... )` group opened at `i` (balanced, quotes already gone).
fn group_end(s: &[u8], i: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, &b) in s.iter().enumerate().skip(i) {
        match b {
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(k + 1);
                }
            }
            _ => {}
        }
    }
    None
}

fn skip_ws(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && s[i] == b' ' {
        i += 1;
    }
    i
}

/// The rewrites on text, as the reference in the tests chains them.
#[cfg(test)]
fn collapse_lists(fp: String) -> String {
    let mut b = fp.into_bytes();
    collapse_list_bytes(&mut b, &mut Vec::new());
    into_string(b)
}

#[cfg(test)]
fn collapse_limit(fp: String) -> String {
    let mut b = fp.into_bytes();
    collapse_limit_bytes(&mut b);
    into_string(b)
}

#[cfg(test)]
fn drop_order_by_asc(fp: String) -> String {
    let mut b = fp.into_bytes();
    drop_order_by_asc_bytes(&mut b);
    into_string(b)
}

/// `in (?, ?)` -> `in(?+)`; `values (?, ?), (?, ?)` -> `values(?+)`; other
/// multi-row VALUES lists keep their first row only. Most statements have no
/// such list: they are left as they are, without a copy. A statement with
/// one is rewritten into `scratch`, which is then swapped with `fp`: both
/// buffers keep their room, so a connection's INSERTs allocate nothing here
/// once the two have grown to its longest statement (a new vector per
/// INSERT, its list of groups and the lexer's regrowth of the buffer were
/// 0.6 allocations per PostgreSQL transaction on `gen_wire.py pgsql`).
fn collapse_list_bytes(fp: &mut Vec<u8>, scratch: &mut Vec<u8>) {
    let s = fp.as_slice();
    // Whether `scratch` holds the rewrite (from the first list on).
    let mut rewriting = false;
    let mut i = 0;
    while i < s.len() {
        let kw = if matches!(s[i], b'v' | b'i') {
            [&b"values"[..], b"value", b"in"].into_iter().find(|w| word_at(s, i, w))
        } else {
            None
        };
        let Some(kw) = kw else {
            if rewriting {
                scratch.push(s[i]);
            }
            i += 1;
            continue;
        };
        let after = i + kw.len();
        let mut j = skip_ws(s, after);
        if s.get(j) != Some(&b'(') {
            if rewriting {
                scratch.extend_from_slice(kw);
            }
            i = after;
            continue;
        }
        // Groups separated by commas: the first, where the last ends, and
        // whether all hold placeholders only.
        let mut first: Option<(usize, usize)> = None;
        let mut last_end = 0;
        let mut only_placeholders = true;
        while let Some(end) = group_end(s, j) {
            first.get_or_insert((j, end));
            last_end = end;
            only_placeholders &= s[j + 1..end - 1].iter().all(|&c| matches!(c, b'?' | b',' | b' '));
            let k = skip_ws(s, end);
            let k2 = skip_ws(s, k + 1);
            // Another row follows (`values (..), (..)`); IN has one list.
            if s.get(k) == Some(&b',') && s.get(k2) == Some(&b'(') && kw != b"in" {
                j = k2;
            } else {
                break;
            }
        }
        let Some((g0, g0_end)) = first else {
            if rewriting {
                scratch.extend_from_slice(kw);
            }
            i = after;
            continue;
        };
        if !rewriting {
            rewriting = true;
            scratch.clear();
            // As much as `fp` holds, so that the swap leaves the lexer
            // the room it had.
            scratch.reserve(fp.capacity());
            scratch.extend_from_slice(&s[..i]);
        }
        scratch.extend_from_slice(kw);
        if only_placeholders {
            scratch.extend_from_slice(b"(?+)");
        } else {
            scratch.extend_from_slice(&s[after..g0]);
            scratch.extend_from_slice(&s[g0..g0_end]);
        }
        i = last_end;
    }
    // Cut and joined at ASCII bytes only: still UTF-8.
    if rewriting {
        std::mem::swap(fp, scratch);
    }
}

/// `str::find` for the short ASCII needles here: sets up no searcher, which
/// costs more than scanning a statement's few dozen bytes.
fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    let first = *n.first()?;
    (0..(h.len() + 1).saturating_sub(n.len())).find(|&i| h[i] == first && h[i..].starts_with(n))
}

/// `limit ?, ?` / `limit ?,?` / `limit ? offset ?` -> `limit ?`.
fn collapse_limit_bytes(fp: &mut Vec<u8>) {
    let Some(p) = find(fp, b"limit ?") else {
        return;
    };
    if !word_at(fp, p, b"limit") {
        return;
    }
    let head = p + b"limit ?".len();
    for tail in [&b", ?"[..], b",?", b" offset ?"] {
        if fp[head..].starts_with(tail) {
            fp.drain(head..head + tail.len());
            return;
        }
    }
}

/// Drops ` asc` after the first `order by` (ascending is the default).
fn drop_order_by_asc_bytes(fp: &mut Vec<u8>) {
    let Some(p) = find(fp, b"order by ") else {
        return;
    };
    // Each ` asc` after it dropped in place (ASCII bytes: still UTF-8).
    let mut w = p;
    let mut i = p;
    while i < fp.len() {
        if fp[i] == b' ' && word_at(&fp[p..], i + 1 - p, b"asc") {
            i += 4;
            continue;
        }
        fp[w] = fp[i];
        w += 1;
        i += 1;
    }
    fp.truncate(w);
}

/// The fingerprint of a command that carries no SQL (handshake, quit, ping,
/// ...), so a group-by on fingerprints names its group instead of leaving
/// it empty: `<login>` for the connection handshake (MySQL `login`,
/// PostgreSQL `startup`), `<name>` for the others.
pub(crate) fn command_group(name: &str) -> String {
    let mut out = String::new();
    command_group_into(name, &mut out);
    out
}

fn command_group_into(name: &str, out: &mut String) {
    let name = if name == "startup" { "login" } else { name };
    out.push('<');
    out.push_str(name);
    out.push('>');
}

#[cfg(test)]
mod tests {
    use super::*;

    // Examples from pt-query-digest's documentation and Percona Toolkit's
    // QueryRewriter tests.
    #[test]
    fn a_connection_shares_one_fingerprint_per_shape() {
        let mut fps = Fingerprints::default();
        let a = fps.of("SELECT * FROM t WHERE id = 1", Dialect::Mysql);
        let b = fps.of("select *  from t where id = 22", Dialect::Mysql);
        assert_eq!(&*a, "select * from t where id = ?");
        assert!(Arc::ptr_eq(&a, &b), "same shape, same text");
        let c = fps.of("select * from u limit 5, 10", Dialect::Mysql);
        assert_eq!(&*c, fingerprint("select * from u limit 5, 10"));
        assert_eq!(&*fps.group("startup"), "<login>");
        assert_eq!(&*fps.group("ping"), "<ping>");
        // Past the cap the set starts over; fingerprints stay right.
        for i in 0..3 * MAX_SHARED_FINGERPRINTS {
            // Column names without digits (a digit would be a `?`).
            let col: String = i.to_string().bytes().map(|d| char::from(b'a' + d - b'0')).collect();
            let sql = format!("select {col} from t");
            assert_eq!(*fps.of(&sql, Dialect::Mysql), fingerprint(&sql));
        }
        assert!(fps.seen.len() <= MAX_SHARED_FINGERPRINTS);
    }

    #[test]
    fn pt_examples() {
        let cases = [
            ("SELECT name, password FROM user WHERE id='12823';", "select name, password from user where id=?;"),
            ("select name,   password from user\n   where id=5;", "select name, password from user where id=?;"),
            ("SELECT * FROM tbl WHERE id IN (1, 2, 3)", "select * from tbl where id in(?+)"),
            (
                "select * from foo where a in (5) and b in (5, 8,9 ,9 , 10)",
                "select * from foo where a in(?+) and b in(?+)",
            ),
            ("insert into foo(a, b, c) values(2, 4, 5)", "insert into foo(a, b, c) values(?+)"),
            ("insert into foo(a, b, c) values(2, 4, 5) , (2,4,5)", "insert into foo(a, b, c) values(?+)"),
            ("insert into foo(a, b, c) value(2, 4, 5)", "insert into foo(a, b, c) value(?+)"),
            ("insert into foo values (1, now()), (2, now())", "insert into foo values (?, now())"),
            ("select * from foo limit 5", "select * from foo limit ?"),
            ("select * from foo limit 5, 10", "select * from foo limit ?"),
            ("select * from foo limit 5 offset 10", "select * from foo limit ?"),
            ("SELECT * from foo where a = 5 ORDER BY b ASC", "select * from foo where a = ? order by b"),
            ("SELECT * from foo where a = 5 ORDER BY b ASC, c asc", "select * from foo where a = ? order by b, c"),
            ("use `foo`", "use ?"),
            ("USE foo", "use ?"),
            ("select 'hello'\n", "select ?"),
            ("select 'hello', \"hello\"", "select ?, ?"),
            ("select 'a\\'b' from x", "select ? from x"),
            ("select 'it''s' from x", "select ? from x"),
            ("SELECT * FROM tbl1 WHERE id = NULL", "select * from tbl? where id = ?"),
            (
                "select * from a where b = 0x123 and c = x'ff' and d = b'01'",
                "select * from a where b = ? and c = ? and d = ?",
            ),
            ("select * from t where a=1 -- comment", "select * from t where a=?"),
            ("select * from t /* hi */ where a=1 # mysql comment", "select * from t where a=?"),
            // pt keeps version hints but still replaces their number.
            ("select /*!40001 SQL_NO_CACHE */ c from t", "select /*!? sql_no_cache */ c from t"),
            ("select foo_1 from foo_2_3", "select foo_? from foo_?_?"),
            ("select -5, 1.5e10, .5 from t where x = -1", "select ?, ?, ? from t where x = ?"),
            ("select a-1 from t", "select a-? from t"),
            ("select true, FALSE from t", "select ?, ? from t"),
            ("CALL foo(1, 2, 3)", "call foo"),
            ("SELECT /*!40001 SQL_NO_CACHE */ * FROM `film`", "mysqldump"),
            ("   SELECT\t*\r\n FROM  t  ", "select * from t"),
        ];
        for (q, want) in cases {
            assert_eq!(fingerprint(q), want, "query {q:?}");
            assert_eq!(reference(q, Dialect::Mysql), want, "reference, query {q:?}");
        }
    }

    /// The edge cases of the lexer's fast paths (the unrolled word copy,
    /// the one match per word, the buffer not zeroed between statements),
    /// each checked against the reference lexer too.
    #[test]
    fn edge_cases_of_the_fast_paths() {
        let cases = [
            // Comments of the three kinds, with quotes inside them.
            ("SELECT /* it's */ a FROM t -- 'x WHERE b = 1", "select a from t"),
            ("SELECT /* it's */ a FROM t -- 'x\nWHERE b = 1", "select a from t where b = ?"),
            ("# note\nSELECT a FROM t", "select a from t"),
            ("SELECT a/*c*/FROM t", "select a from t"),
            // Quotes with escapes and doubled quotes, and one cut open.
            ("SELECT 'it\\'s', 'a''b', \"q\\\"x\" FROM t", "select ?, ?, ? from t"),
            ("SELECT a FROM t WHERE b = 'abc\\", "select a from t where b = ?"),
            // Numbers: exponents with signs, hex and bit values either case.
            ("SELECT 1e-5, 0x1F, 0X1f, 1.5E+3, .5e2, 0b101 FROM t", "select ?, ?, ?, ?, ?, ? from t"),
            ("SELECT a FROM t WHERE b > -1e-5", "select a from t where b > ?"),
            // A number cut after its `e`: the `e` is a word of its own.
            ("SELECT 1e", "select ?e"),
            // IN lists, with and without a space, and VALUES rows.
            (
                "SELECT * FROM t WHERE id IN (1, 2, 3) AND x in ('a','b')",
                "select * from t where id in(?+) and x in(?+)",
            ),
            ("SELECT * FROM t WHERE id IN(1)", "select * from t where id in(?+)"),
            ("INSERT INTO t VALUES (1, 'a'), (2, 'b')", "insert into t values(?+)"),
            // Multi-byte UTF-8: words lower-cased as Unicode, literals gone.
            ("SELECT Nöm, 'ü' FROM Tàble WHERE ñ = 'ä'", "select nöm, ? from tàble where ñ = ?"),
            // Words of 8 and more letters (the unrolled copy), at the
            // text's end and followed by digits.
            ("SELECT DISTINCT abcdefghijklmnop FROM abcdefgh", "select distinct abcdefghijklmnop from abcdefgh"),
            ("SELECT abcdefgh1ijklmnopq2 FROM t", "select abcdefgh?ijklmnopq? from t"),
            // The words the rewrites and literals look for, whole and in parts.
            ("SELECT NULL, null1, TRUE, FALSE, falsely FROM t", "select ?, null?, ?, ?, falsely from t"),
            ("SELECT a FROM t ORDER BY a ASC LIMIT 5 OFFSET 10", "select a from t order by a limit ?"),
            ("SELECT a FROM t REORDER BY a ASC", "select a from t reorder by a"),
            // Statements as a capture cuts them (`max_header_bytes`).
            ("SELECT a FROM t WHERE b = 'cut in the str", "select a from t where b = ?"),
            ("SELECT a FROM t /* cut in the comment", "select a from t"),
            ("SELECT a FROM t WHERE b IN (1, 2", "select a from t where b in (?, ?"),
            ("SELECT a FROM t WHERE b = x'0A", "select a from t where b = ?"),
        ];
        let mut fps = Fingerprints::default();
        for (q, want) in cases {
            assert_eq!(fingerprint(q), want, "query {q:?}");
            assert_eq!(reference(q, Dialect::Mysql), want, "reference, query {q:?}");
            assert_eq!(&*fps.of(q, Dialect::Mysql), want, "reused buffer, query {q:?}");
        }
    }

    /// A connection's buffer keeps what a longer statement wrote past a
    /// shorter one's end (it is not zeroed per statement): only the
    /// fingerprint's own bytes are looked up and shared.
    #[test]
    fn a_reused_buffer_ignores_what_a_longer_statement_left() {
        let mut fps = Fingerprints::default();
        let long = "SELECT abcdefghijklmnopqrstuvwxyz, b, c, d FROM some_table WHERE id = 12345";
        assert_eq!(
            &*fps.of(long, Dialect::Mysql),
            "select abcdefghijklmnopqrstuvwxyz, b, c, d from some_table where id = ?"
        );
        for (q, want) in [("SELECT a", "select a"), ("BEGIN", "begin"), ("", ""), ("x IN (1)", "x in(?+)")] {
            let fp = fps.of(q, Dialect::Mysql);
            assert_eq!(&*fp, want, "after a longer statement, query {q:?}");
            assert_eq!(&*fps.of(long, Dialect::Mysql), fingerprint(long));
            assert!(Arc::ptr_eq(&fp, &fps.of(q, Dialect::Mysql)), "shared again, query {q:?}");
        }
        let mut s = String::from("stale text that is longer than what follows");
        fingerprint_into("SELECT 1", Dialect::Mysql, &mut s);
        assert_eq!(s, "select ?");
    }

    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Mode {
        Fingerprint,
        Redact,
    }

    /// The lexer the one-pass [`lex`] replaced, kept as its reference: a
    /// token at a time, each mode's differences tested inline.
    fn reference_lex(s: &[u8], dialect: Dialect, mode: Mode, out: &mut Vec<u8>) {
        let fp = mode == Mode::Fingerprint;
        let mut i = 0;
        // A space is owed before the next token (fingerprint collapses runs).
        let mut space = false;
        let push_str = |out: &mut Vec<u8>, space: &mut bool, t: &[u8]| {
            if *space && !out.is_empty() {
                out.push(b' ');
            }
            *space = false;
            // Tokens are nearly always ASCII: copied whole, then lower-cased in
            // place (Unicode's mapping agrees with ASCII's there).
            if t.is_ascii() {
                let start = out.len();
                out.extend_from_slice(t);
                if fp {
                    out[start..].make_ascii_lowercase();
                }
                return;
            }
            // Input may not be UTF-8 in places: keep what decodes, replace the rest.
            match std::str::from_utf8(t) {
                Ok(t) if fp => {
                    let mut utf8 = [0u8; 4];
                    for c in t.chars().flat_map(|c| c.to_lowercase()) {
                        out.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
                    }
                }
                Ok(t) => out.extend_from_slice(t.as_bytes()),
                Err(_) => out.extend_from_slice(String::from_utf8_lossy(t).as_bytes()),
            }
        };
        while i < s.len() {
            let c = s[i];
            // Whitespace.
            if c.is_ascii_whitespace() {
                let mut j = i;
                while j < s.len() && s[j].is_ascii_whitespace() {
                    j += 1;
                }
                if fp {
                    space = true;
                } else {
                    push_str(out, &mut space, &s[i..j]);
                }
                i = j;
                continue;
            }
            // Comments (MySQL optimizer hints `/*! ... */` are kept, as pt does).
            if c == b'/' && s.get(i + 1) == Some(&b'*') && (s.get(i + 2) != Some(&b'!') || !fp) {
                let end = s[i + 2..].windows(2).position(|w| w == b"*/").map_or(s.len(), |p| i + 2 + p + 2);
                if fp {
                    space = true;
                } else {
                    push_str(out, &mut space, &s[i..end]);
                }
                i = end;
                continue;
            }
            let line_comment =
                (c == b'-' && s.get(i + 1) == Some(&b'-') && s.get(i + 2).is_none_or(|b| b.is_ascii_whitespace()))
                    || (c == b'#' && dialect == Dialect::Mysql);
            if line_comment {
                let end = s[i..].iter().position(|&b| b == b'\n').map_or(s.len(), |p| i + p);
                if fp {
                    space = true;
                } else {
                    push_str(out, &mut space, &s[i..end]);
                }
                i = end;
                continue;
            }
            // String literals.
            let string_quote = c == b'\'' || (c == b'"' && dialect == Dialect::Mysql);
            if string_quote {
                let end = quoted_end(s, i, c, dialect == Dialect::Mysql);
                push_str(out, &mut space, b"?");
                i = end;
                continue;
            }
            // Quoted identifiers.
            if c == b'`' || c == b'"' {
                let end = quoted_end(s, i, c, false);
                push_str(out, &mut space, &s[i..end]);
                i = end;
                continue;
            }
            // Postgres: $1 parameters and $tag$ ... $tag$ strings.
            if c == b'$' && dialect == Dialect::Postgres {
                if s.get(i + 1).is_some_and(|b| b.is_ascii_digit()) {
                    let mut j = i + 1;
                    while j < s.len() && s[j].is_ascii_digit() {
                        j += 1;
                    }
                    if fp {
                        push_str(out, &mut space, b"?");
                    } else {
                        push_str(out, &mut space, &s[i..j]);
                    }
                    i = j;
                    continue;
                }
                let mut j = i + 1;
                while j < s.len() && (s[j].is_ascii_alphanumeric() || s[j] == b'_') {
                    j += 1;
                }
                if j < s.len() && s[j] == b'$' {
                    let tag = &s[i..=j];
                    let body = j + 1;
                    let end = s[body..].windows(tag.len()).position(|w| w == tag).map_or(s.len(), |p| body + p + tag.len());
                    push_str(out, &mut space, b"?");
                    i = end;
                    continue;
                }
            }
            // Numbers (with a unary sign when one fits).
            let starts_number = c.is_ascii_digit() || (c == b'.' && s.get(i + 1).is_some_and(|b| b.is_ascii_digit()));
            let signed = (c == b'-' || c == b'+') && s.get(i + 1).is_some_and(|b| b.is_ascii_digit()) && sign_is_unary(out);
            if starts_number || signed {
                let start = if signed { i + 1 } else { i };
                let end = number_end(s, start);
                push_str(out, &mut space, b"?");
                i = end;
                continue;
            }
            // Words: keywords, identifiers, and literal prefixes (x'..', b'..', N'..', _utf8'..').
            if is_ident(c) {
                let mut j = i;
                while j < s.len() && is_ident(s[j]) {
                    j += 1;
                }
                let word = &s[i..j];
                if s.get(j) == Some(&b'\'')
                    && (word.eq_ignore_ascii_case(b"x")
                        || word.eq_ignore_ascii_case(b"b")
                        || word.eq_ignore_ascii_case(b"n")
                        || word.eq_ignore_ascii_case(b"e")
                        || word[0] == b'_')
                {
                    let end = quoted_end(s, j, b'\'', dialect == Dialect::Mysql || word.eq_ignore_ascii_case(b"e"));
                    push_str(out, &mut space, b"?");
                    i = end;
                    continue;
                }
                if fp {
                    if word.eq_ignore_ascii_case(b"null")
                        || word.eq_ignore_ascii_case(b"true")
                        || word.eq_ignore_ascii_case(b"false")
                    {
                        push_str(out, &mut space, b"?");
                    } else if word.iter().any(u8::is_ascii_digit) {
                        // pt replaces numbers inside words too (foo_1 -> foo_?).
                        if space && !out.is_empty() {
                            out.push(b' ');
                        }
                        space = false;
                        let mut k = 0;
                        while k < word.len() {
                            if word[k].is_ascii_digit() {
                                while k < word.len() && word[k].is_ascii_digit() {
                                    k += 1;
                                }
                                out.push(b'?');
                            } else {
                                let st = k;
                                while k < word.len() && !word[k].is_ascii_digit() {
                                    k += 1;
                                }
                                push_str(out, &mut space, &word[st..k]);
                            }
                        }
                    } else {
                        push_str(out, &mut space, word);
                    }
                } else {
                    push_str(out, &mut space, word);
                }
                i = j;
                continue;
            }
            // Any other byte (operators, punctuation); multi-byte UTF-8 is `is_ident`.
            push_str(out, &mut space, &s[i..i + 1]);
            i += 1;
        }
    }

    /// The fingerprint before the one-pass lexer: the reference lexer,
    /// then every rewrite over the whole text.
    fn reference(sql: &str, dialect: Dialect) -> String {
        let trimmed = sql.trim_start();
        if trimmed.starts_with("SELECT /*!40001 SQL_NO_CACHE */ * FROM `") {
            return "mysqldump".into();
        }
        if let Some(call) = call_prefix(trimmed) {
            return call;
        }
        if use_db(trimmed) {
            return "use ?".into();
        }
        let mut bytes = Vec::new();
        reference_lex(sql.as_bytes(), dialect, Mode::Fingerprint, &mut bytes);
        drop_order_by_asc(collapse_limit(collapse_lists(into_string(bytes))))
    }

    /// Pieces that meet every branch of the lexers and the rewrites,
    /// glued at random into statements (a fixed seed: failures repeat).
    const PIECES: [&str; 64] = [
        " ", "  ", "\t", "\n", "select", "SELECT", "from", "t1", "foo_2x", "where", "in", "IN", "(", ")", ",", "?",
        "values", "VALUE", "value", "limit", "LIMIT", "offset", "order", "reorder", "by", "ORDER BY", "asc", "ASC",
        "asc1", "1", "-", "+", "-5", "+2", ".5", "1.5e10", "1e+", "0x1f", "0b", "x'ff'", "'a''b'", "'a\\'b'",
        "\"s\"", "`Na me`", "`in (1)`", "/* c */", "/*!40001 ", "*/", "-- c\n", "--", "#x\n", "$1", "$a$q$a$",
        "a$b", "null", "TRUE", "false", "\u{e9}", "\u{212a}IN", "=", "<>", "k=k+1", "_utf8'x'", "e'\\n'",
    ];

    #[test]
    fn one_pass_lexer_matches_the_reference() {
        let mut next = crate::xorshift(0x2545_f491_4f6c_dd1du64);
        let mut fps = Fingerprints::default();
        // Texts recorded through another set, cut at 24 bytes.
        let mut recorded = Fingerprints::default();
        let cfg = crate::ParseConfig { max_text_bytes: 24, ..Default::default() };
        for n in 0..200_000 {
            let len = 1 + next() % 14;
            let sql: String = (0..len).map(|_| PIECES[(next() % PIECES.len() as u64) as usize]).collect();
            for dialect in [Dialect::Mysql, Dialect::Postgres] {
                let want = reference(&sql, dialect);
                assert_eq!(fingerprint_dialect(&sql, dialect), want, "query {sql:?} ({dialect:?}, case {n})");
                assert_eq!(&*fps.of(&sql, dialect), want, "reused buffer, query {sql:?}");
                let (text, cut, fp) = recorded.recorded(&sql, dialect, &cfg);
                assert_eq!((&*text, cut, &*fp), (&sql[..crate::char_floor(&sql, 24)], sql.len() > 24, &*want), "recorded, {sql:?}");
                let mut redacted = Vec::new();
                reference_lex(sql.as_bytes(), dialect, Mode::Redact, &mut redacted);
                assert_eq!(redact_dialect(&sql, dialect), into_string(redacted), "redaction of {sql:?} ({dialect:?})");
            }
        }
    }

    /// `sql` with each run of digits replaced by 1-4 random digits.
    fn other_digits(sql: &str, next: &mut impl FnMut() -> u64) -> String {
        let mut out = String::new();
        let mut in_run = false;
        for c in sql.chars() {
            if !c.is_ascii_digit() {
                out.push(c);
                in_run = false;
            } else if !in_run {
                in_run = true;
                for _ in 0..1 + next() % 4 {
                    out.push(char::from(b'0' + (next() % 10) as u8));
                }
            }
        }
        out
    }

    #[test]
    fn texts_of_a_recent_shape_take_its_fingerprint() {
        // Random statements, each followed by versions with other digits
        // (some of which make `0x1f` of `7x1f`, or `1e5` of `10e5`), all
        // through one set (hits of the recent texts), each against the
        // reference lexer, in both dialects.
        const MORE: [&str; 10] = ["id=5012", "sbtest3", " between 5 and 104", "k2j", "9x", "7e", "3.", "0b", "(12, 3)", "x9"];
        let mut next = crate::xorshift(0x9e37_79b9_7f4a_7c15u64);
        let mut fps = Fingerprints::default();
        let cfg = crate::ParseConfig::default();
        let (mut hits, mut total) = (0, 0);
        for n in 0..40_000 {
            let len = 1 + next() % 10;
            let sql: String = (0..len)
                .map(|_| {
                    let k = (next() % (PIECES.len() + MORE.len()) as u64) as usize;
                    if k < PIECES.len() { PIECES[k] } else { MORE[k - PIECES.len()] }
                })
                .collect();
            for v in 0..4 {
                let text = if v == 0 { sql.clone() } else { other_digits(&sql, &mut next) };
                for dialect in [Dialect::Mysql, Dialect::Postgres] {
                    let want = reference(&text, dialect);
                    let ends = Recent::ends(text.as_bytes());
                    let known = fps.recent.iter().any(|r| r.same_shape(text.as_bytes(), ends));
                    let (t, cut, fp) = fps.recorded(&text, dialect, &cfg);
                    assert_eq!((&*t, cut, &*fp), (&*text, false, &*want), "{text:?} ({dialect:?}, case {n}, of {sql:?})");
                    hits += known as u32;
                    total += 1;
                }
            }
        }
        // (8,950 of the 320,000: most random statements hold a quote, a
        // comment or a sign, which no recent text is taken for.)
        assert!(hits > 5_000, "recent texts taken: {hits} of {total}");
        // sysbench's statements: the second of a shape is not lexed (the
        // lexer's buffer still holds what it wrote last).
        let mut fps = Fingerprints::default();
        let (_, _, a) = fps.recorded("SELECT c FROM sbtest1 WHERE id=5012", Dialect::Mysql, &cfg);
        let (_, _, b) = fps.recorded("BEGIN", Dialect::Mysql, &cfg);
        let (t, _, c) = fps.recorded("SELECT c FROM sbtest12 WHERE id=7", Dialect::Mysql, &cfg);
        assert_eq!((&*a, &*b, &*t), ("select c from sbtest? where id=?", "begin", "SELECT c FROM sbtest12 WHERE id=7"));
        assert!(Arc::ptr_eq(&a, &c) && fps.buf.starts_with(b"begin"), "taken from the recent text, not lexed");
        // Not taken: another case, a number of another form, a name in quotes.
        for (first, then, want) in [
            ("SELECT c FROM t WHERE id=10", "select c FROM t WHERE id=10", "select c from t where id=?"),
            ("SELECT c FROM t WHERE id=15", "SELECT c FROM t WHERE id=0x1f", "select c from t where id=?"),
            ("SELECT c FROM `t1` WHERE id=15", "SELECT c FROM `t2` WHERE id=1", "select c from `t2` where id=?"),
            ("call p1(5)", "call p2(5)", "call p2"),
        ] {
            let mut fps = Fingerprints::default();
            fps.recorded(first, Dialect::Mysql, &cfg);
            assert_eq!(&*fps.recorded(then, Dialect::Mysql, &cfg).2, want, "{first:?} then {then:?}");
        }
    }

    /// `text` with each maximal digit run as one `#`: two texts of one
    /// shape but for their digits have the same.
    fn runs_as_one(text: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for (k, &b) in text.iter().enumerate() {
            if !b.is_ascii_digit() {
                out.push(b);
            } else if k == 0 || !text[k - 1].is_ascii_digit() {
                out.push(b'#');
            }
        }
        out
    }

    #[test]
    fn digit_and_nonzero_bytes_of_every_byte() {
        for b in 0..=255u8 {
            for at in 0..8 {
                // The byte among others of each kind, to catch a carry.
                for fill in [0u8, b'0', b'9', b'a', 0xff] {
                    let mut w = [fill; 8];
                    w[at] = b;
                    let w = u64::from_le_bytes(w);
                    let high = |m: u64| m >> (8 * at + 7) & 1 == 1;
                    assert_eq!(high(digit_bytes(w)), b.is_ascii_digit(), "{b:#x} at {at} among {fill:#x}");
                    assert_eq!(high(nonzero_bytes(w)), b != 0, "{b:#x} at {at} among {fill:#x}");
                    assert_eq!(digit_bytes(w) & !0x8080_8080_8080_8080, 0);
                }
            }
        }
    }

    #[test]
    fn a_text_of_the_kept_length_takes_the_word_compare_as_the_runs_would() {
        // `Recent::same_shape` against the rule it implements (the same
        // ends, the same bytes but for digit runs of any length where the
        // kept text has one), for kept texts of every length up to 48
        // bytes and statements made of them with other digits (runs of the
        // same widths, or other widths), or one byte changed, added or
        // dropped anywhere; `digits_apart` alone against its own rule.
        const WORDS: [&str; 12] = ["SELECT", " c", " FROM", " sbtest", "3", " WHERE", " id=", "50060", "k", "_", ",", " "];
        let mut next = crate::xorshift(0x1234_5678_9abc_def1u64);
        let (mut same, mut apart, mut total) = (0, 0, 0);
        for _ in 0..20_000 {
            let n = 1 + next() % 9;
            let kept: Vec<u8> = (0..n).flat_map(|_| WORDS[(next() % WORDS.len() as u64) as usize].bytes()).collect();
            if !Recent::fits(&kept) || kept.len() > 48 {
                continue;
            }
            let mut slot = Recent::default();
            slot.keep(&kept, &Arc::from("fp"), None, Recent::ends(&kept));
            for v in 0..7 {
                let mut text = kept.clone();
                match v {
                    // The same widths: each digit another.
                    0 | 1 => text.iter_mut().filter(|b| b.is_ascii_digit()).for_each(|b| *b = b'0' + (next() % 10) as u8),
                    2 => text = other_digits(std::str::from_utf8(&kept).unwrap_or(""), &mut next).into_bytes(),
                    _ => {
                        let at = (next() % text.len() as u64) as usize;
                        let b = b"0a9 _=x"[(next() % 7) as usize];
                        match v {
                            3 | 4 => text[at] = b,
                            5 => text.insert(at, b),
                            _ => drop(text.remove(at)),
                        }
                    }
                }
                let ends = Recent::ends(&text);
                let want = ends == Recent::ends(&kept) && runs_as_one(&text) == runs_as_one(&kept);
                let got = slot.same_shape(&text, ends);
                assert_eq!(got, want, "{:?} against kept {:?}", String::from_utf8_lossy(&text), String::from_utf8_lossy(&kept));
                // `digits_apart` is asked only past equal heads.
                let heads = text.len() == kept.len() && text[..text.len().min(8)] == kept[..kept.len().min(8)];
                let by_words = heads && text.iter().zip(&kept).all(|(t, k)| t == k || t.is_ascii_digit() && k.is_ascii_digit());
                if heads {
                    assert_eq!(digits_apart(&text, &kept), by_words, "{:?} against {:?}", String::from_utf8_lossy(&text), String::from_utf8_lossy(&kept));
                }
                same += got as u32;
                apart += by_words as u32;
                total += 1;
            }
        }
        assert!(same > total / 10 && same < total && apart > total / 10, "same shape {same}, by words {apart}, of {total}");
    }

    #[test]
    fn a_shape_shares_a_repeated_short_text() {
        let cfg = crate::ParseConfig::default();
        let mut fps = Fingerprints::default();
        let (a, cut, fa) = fps.recorded("BEGIN", Dialect::Mysql, &cfg);
        assert_eq!((&*a, cut, &*fa), ("BEGIN", false, "begin"));
        let (b, _, _) = fps.recorded("SELECT c FROM t WHERE id=1", Dialect::Mysql, &cfg);
        let (c, _, fc) = fps.recorded("BEGIN", Dialect::Mysql, &cfg);
        assert!(Arc::ptr_eq(&a, &c) && Arc::ptr_eq(&fa, &fc), "the same statement again shares its text");
        assert!(fps.buf.starts_with(b"select"), "taken from its recent slot, not lexed again");
        // Same shape, other text: its own text, which the shape keeps next.
        let (d, _, _) = fps.recorded("SELECT c FROM t WHERE id=2", Dialect::Mysql, &cfg);
        assert_eq!((&*b, &*d), ("SELECT c FROM t WHERE id=1", "SELECT c FROM t WHERE id=2"));
        let (e, _, _) = fps.recorded("SELECT c FROM t WHERE id=2", Dialect::Mysql, &cfg);
        assert!(Arc::ptr_eq(&d, &e));
        // Same shape, different case: not the same text.
        let (f, _, _) = fps.recorded("begin", Dialect::Mysql, &cfg);
        assert_eq!(&*f, "begin");
        // A long text is not kept.
        let long = format!("SELECT {} FROM t", "c, ".repeat(MAX_SHARED_TEXT));
        let (g, _, _) = fps.recorded(&long, Dialect::Mysql, &cfg);
        let (h, _, _) = fps.recorded(&long, Dialect::Mysql, &cfg);
        assert!(*g == *h && !Arc::ptr_eq(&g, &h));
        // A text whose fingerprint is of another length (a literal of more
        // than one byte) is neither compared nor kept: its own text each time.
        let (k, _, fk) = fps.recorded("SELECT c FROM t WHERE id=12", Dialect::Mysql, &cfg);
        let (l, _, fl) = fps.recorded("SELECT c FROM t WHERE id=12", Dialect::Mysql, &cfg);
        assert!(*k == *l && !Arc::ptr_eq(&k, &l) && Arc::ptr_eq(&fk, &fl), "the fingerprint is still shared");
        let (m, _, _) = fps.recorded("SELECT c FROM t WHERE id=2", Dialect::Mysql, &cfg);
        assert!(Arc::ptr_eq(&d, &m), "the shape's last text is still id=2's");
        // A redacted text is compared as recorded.
        let redact = crate::ParseConfig { redact: true, ..Default::default() };
        let (i, _, _) = fps.recorded("SELECT c FROM t WHERE id=3", Dialect::Mysql, &redact);
        let (j, _, _) = fps.recorded("SELECT c FROM t WHERE id=4", Dialect::Mysql, &redact);
        assert_eq!(&*i, "SELECT c FROM t WHERE id=?");
        assert!(Arc::ptr_eq(&i, &j), "equal once redacted");
    }

    #[test]
    fn list_rewrites_keep_both_buffers() {
        let mut fps = Fingerprints::default();
        let rows = "(1, 'a'), ".repeat(40);
        let sql = format!("INSERT INTO t (a, b) VALUES {rows}(2, 'b')");
        assert_eq!(&*fps.of(&sql, Dialect::Postgres), "insert into t (a, b) values(?+)");
        let caps = (fps.buf.capacity(), fps.scratch.capacity());
        for i in 0..10 {
            let sql = format!("INSERT INTO t (a, b) VALUES {rows}({i}, 'b')");
            assert_eq!(&*fps.of(&sql, Dialect::Postgres), "insert into t (a, b) values(?+)");
            assert_eq!(&*fps.of("select a from t where b in (1, 2)", Dialect::Postgres), "select a from t where b in(?+)");
            assert_eq!(&*fps.of(&format!("select {i}"), Dialect::Postgres), "select ?");
        }
        assert!(fps.buf.capacity().max(fps.scratch.capacity()) <= caps.0.max(caps.1), "no buffer grew again");
    }

    #[test]
    fn postgres_dialect() {
        assert_eq!(
            fingerprint_dialect("SELECT \"Col\" FROM t WHERE id = $1 AND s = $$x'y$$", Dialect::Postgres),
            "select \"col\" from t where id = ? and s = ?"
        );
        assert_eq!(fingerprint_dialect("select 1 # 2", Dialect::Postgres), "select ? # ?");
        assert_eq!(
            redact_dialect("SELECT * from test where id = $1", Dialect::Postgres),
            "SELECT * from test where id = $1"
        );
    }

    #[test]
    fn redact_keeps_text() {
        assert_eq!(
            redact("SELECT name FROM user WHERE id='12823' AND x = 5"),
            "SELECT name FROM user WHERE id=? AND x = ?"
        );
        assert_eq!(redact("insert into t1 (a) values (0xFF, -3, 'x''y')"), "insert into t1 (a) values (?, ?, ?)");
        assert_eq!(redact("select  a  /* c */ from t"), "select  a  /* c */ from t");
    }

    #[test]
    fn odd_input_never_panics() {
        for q in [
            "",
            "'",
            "\"",
            "`",
            "/*",
            "--",
            "x'",
            "$",
            "$a",
            "$a$",
            "0x",
            "1e",
            "1e+",
            "in (",
            "values (",
            "limit ?",
            "order by asc",
            "\u{e9}1\u{e9}",
            "call ",
            "use",
        ] {
            let _ = fingerprint(q);
            let _ = redact(q);
            let _ = fingerprint_dialect(q, Dialect::Postgres);
        }
    }
}
