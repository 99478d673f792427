//! Dictionary column builders: a dictionary-encoded column (names, codes,
//! addresses, sizes: `ColSpec::is_dictionary`) is dictionary-encoded as its
//! rows are buffered, so a value is looked up once, when it arrives (hashed,
//! or compared with each entry of a dictionary of at most [`SCANNED`]), and
//! its text copied once, the first time it is seen; a file of all the buffer's
//! rows takes the dictionary as it is, one of some of them the dictionary
//! of its own rows by renumbering (an array lookup per row, no hashing:
//! [`Dict::file_order`]).
//!
//! A dictionary lives as long as the write buffer's rows (until the buffer
//! is flushed): Parquet keeps one dictionary per column chunk, so each file
//! (each row group) carries its own anyway; a dictionary kept across
//! flushes would only save hashing the first row of each value again.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};

use hashbrown::HashTable;

use crate::encode::{PqCol, PqValues, Run, Texts};

/// The index of an unset value.
const NULL: u32 = u32::MAX;

/// Up to this many entries a dictionary finds a value by comparing it with
/// each entry instead of hashing it: most columns hold a few distinct
/// values (mysql_text: 4 uids and client ports, 8 fingerprints and request
/// sizes), where a scan costs less than the hash and the table's probe.
const SCANNED: usize = 8;

/// How much a buffer grows when full: to four times its length (the
/// standard library doubles), so a buffer's first fill copies its values
/// a third as often as doubling does (the copies were ~300 instructions
/// a mysql_text row); the room is reserved, not touched, until used.
pub(crate) const GROWTH: usize = 4;

/// Room for `n` more values in `v`, grown by [`GROWTH`] when short.
#[inline(always)]
pub(crate) fn room<T>(v: &mut Vec<T>, n: usize) {
    if v.capacity() - v.len() < n {
        grow(v, n);
    }
}

#[inline(never)]
fn grow<T>(v: &mut Vec<T>, n: usize) {
    v.reserve_exact(n.max(v.len() * (GROWTH - 1)).max(64));
}

/// Appends `x` to `v` in room reserved before: `Vec::push` without its
/// capacity test and growth path (a write buffer's row takes ~25 pushes;
/// its room is reserved for every per-row vector at once, `TxBuf`'s `room`).
///
/// # Safety
/// `v.len() < v.capacity()`.
#[inline(always)]
pub(crate) unsafe fn push_reserved<T>(v: &mut Vec<T>, x: T) {
    debug_assert!(v.len() < v.capacity(), "a push without reserved room");
    let len = v.len();
    // SAFETY: slot `len` is inside the allocation (the caller's promise)
    // and holds no value; once written, the first `len + 1` are initialised.
    unsafe {
        v.as_mut_ptr().add(len).write(x);
        v.set_len(len + 1);
    }
}

/// Moves the last value of `v` to `at`, the values from `at` one later
/// (`rotate_right(1)` of `v[at..]`: a late row placed among the few rows
/// it arrived after, `TxBuf::place_last`). Up to three values are moved
/// one by one (3 of 4 of mysql_text's late rows: a call to `memmove` and
/// its set-up cost ~30 instructions a column), further ones as one block.
#[inline]
pub(crate) fn move_last<T: Copy>(v: &mut [T], at: usize) {
    let s = &mut v[at..];
    let last = s.len() - 1;
    let x = s[last];
    match last {
        0 => {}
        1 => s[1] = s[0],
        2 => {
            s[2] = s[1];
            s[1] = s[0];
        }
        3 => {
            s[3] = s[2];
            s[2] = s[1];
            s[1] = s[0];
        }
        _ => s.copy_within(0..last, 1),
    }
    s[0] = x;
}

/// The dictionaries' hash: foldhash (fast on short keys; the values come
/// from the probe's own records, so no flooding concern).
type Hasher = foldhash::fast::FixedState;

fn hasher() -> Hasher {
    foldhash::fast::FixedState::with_seed(0x77_69_72_65)
}

/// Each row's index into a dictionary, and the renumbering into a file's.
struct Dict {
    /// Per row: the index of its value, [`NULL`] when unset.
    rows: Vec<u32>,
    /// The index of the last row's value (most rows repeat it: one
    /// comparison instead of a hash), [`NULL`] when none.
    last: u32,
    /// How many rows are unset.
    nulls: usize,
}

impl Dict {
    fn clear(&mut self) {
        self.rows.clear();
        self.last = NULL;
        self.nulls = 0;
    }

    /// Appends a row's index; unset rows are counted by the caller (in
    /// its branch for them: no test per row).
    ///
    /// # Safety
    /// Room for the row was reserved ([`Dict::spare`] > 0).
    #[inline(always)]
    unsafe fn push(&mut self, i: u32) {
        // SAFETY: the caller's promise.
        unsafe { push_reserved(&mut self.rows, i) }
    }

    /// Room for `n` more rows ([`room`]).
    fn reserve(&mut self, n: usize) {
        room(&mut self.rows, n);
    }

    /// Moves the last row to row `at`, the rows from `at` one later.
    fn move_last(&mut self, at: usize) {
        move_last(&mut self.rows, at);
    }

    /// How many more rows fit without growing.
    fn spare(&self) -> usize {
        self.rows.capacity() - self.rows.len()
    }

    /// The indices of `rows`' present values renumbered in order of first
    /// use (as a file's dictionary lists them), the entries that order
    /// takes (`order`), and the definition levels when `optional`.
    ///
    /// A file of every buffered row (a buffer flushed within one hour: the
    /// writer hands a permutation of all its rows) uses every entry, so it
    /// takes the dictionary in arrival order instead ([`Dict::arrival`]):
    /// Parquet asks no order of a dictionary page, and no reader of ours
    /// (`fastdecode`, the query engine) or test relies on one.
    fn file_order(&self, entries: usize, rows: &[u32], runs: &[Run], optional: bool, order: &mut Vec<u32>) -> (Vec<u32>, Option<Vec<i16>>) {
        if entries <= 1 {
            self.one_value(entries, rows, optional, order)
        } else if rows.len() == self.rows.len() {
            self.arrival(entries, rows, runs, optional, order)
        } else {
            self.renumber(entries, rows, optional, order)
        }
    }

    /// [`Dict::file_order`] of a file of every buffered row: the buffer's
    /// dictionary as it is (`order` = every entry, in arrival order), each
    /// row's index read as it was buffered, with no renumbering: copied a
    /// run of `rows` at a time (`runs`, the runs of `rows`), each run's
    /// indices one slice, or row by row when the runs are short
    /// (`encode::copy_in_runs`, `encode::optional_in_runs`).
    fn arrival(&self, entries: usize, rows: &[u32], runs: &[Run], optional: bool, order: &mut Vec<u32>) -> (Vec<u32>, Option<Vec<i16>>) {
        order.extend(0..entries as u32);
        let mut idx = crate::encode::buf(rows.len() - self.nulls.min(rows.len()));
        let mut def = crate::encode::buf(if optional { rows.len() } else { 0 });
        debug_assert_eq!(runs.iter().map(|r| r.len as usize).sum::<usize>(), rows.len());
        if self.nulls == 0 {
            crate::encode::copy_in_runs(rows, runs, &self.rows, &mut idx);
            if optional {
                def.resize(rows.len(), 1);
            }
        } else {
            // Unset rows among them: the set rows' indices, and the levels.
            let set = |e: u32| (e != NULL).then_some(e);
            crate::encode::optional_in_runs(rows, runs, &self.rows, set, &mut idx, optional.then_some(&mut def));
        }
        (idx, optional.then_some(def))
    }

    /// [`Dict::file_order`], each row's index looked up in the file's.
    fn renumber(&self, entries: usize, rows: &[u32], optional: bool, order: &mut Vec<u32>) -> (Vec<u32>, Option<Vec<i16>>) {
        // Each entry's index in the file (one allocation per file and column).
        let mut remap = crate::encode::buf(entries);
        remap.resize(entries, NULL);
        let mut idx = crate::encode::buf(rows.len());
        let mut def = crate::encode::buf(if optional { rows.len() } else { 0 });
        // One index a row (written without a check of the vector's room
        // per row), unset rows marked and taken out after when there are any.
        let mut nulls = 0usize;
        idx.extend(rows.iter().map(|&r| {
            let e = self.rows[r as usize];
            if e == NULL {
                nulls += 1;
                return NULL;
            }
            let m = &mut remap[e as usize];
            if *m == NULL {
                *m = order.len() as u32;
                order.push(e);
            }
            *m
        }));
        crate::encode::give(remap);
        if nulls > 0 {
            idx.retain(|&i| i != NULL);
        }
        if optional {
            if nulls == 0 {
                def.resize(rows.len(), 1);
            } else {
                def.extend(rows.iter().map(|&r| i16::from(self.rows[r as usize] != NULL)));
            }
        }
        (idx, optional.then_some(def))
    }

    /// [`Dict::file_order`] of a column with at most one distinct value
    /// (the server, the transport, a status, the user of most files):
    /// every present row's index is 0, nothing renumbered or looked up
    /// per row unless some rows are unset.
    fn one_value(&self, entries: usize, rows: &[u32], optional: bool, order: &mut Vec<u32>) -> (Vec<u32>, Option<Vec<i16>>) {
        let mut def = crate::encode::buf(if optional { rows.len() } else { 0 });
        let present = if self.nulls == self.rows.len() {
            // Every buffered row unset (an error code where no statement
            // failed): levels of zeros, no row looked up.
            if optional {
                def.resize(rows.len(), 0);
            }
            0
        } else if self.nulls == 0 {
            if optional {
                def.resize(rows.len(), 1);
            }
            rows.len()
        } else if optional {
            def.extend(rows.iter().map(|&r| i16::from(self.rows[r as usize] != NULL)));
            def.iter().filter(|&&d| d != 0).count()
        } else {
            rows.iter().filter(|&&r| self.rows[r as usize] != NULL).count()
        };
        if entries == 1 && present > 0 {
            order.push(0);
        }
        let mut idx = crate::encode::buf(present);
        idx.resize(present, 0);
        (idx, optional.then_some(def))
    }
}

/// A text column being dictionary-encoded: each distinct value once, in
/// arrival order, in one buffer.
pub(crate) struct DictText {
    dict: Dict,
    /// Entry `i` is `bytes[ends[i-1]..ends[i]]`.
    bytes: Vec<u8>,
    ends: Vec<usize>,
    /// Entry indices, found by the entry's bytes.
    table: HashTable<u32>,
    hash: Hasher,
    /// Whether the column may be unset (else an unset value is written "").
    optional: bool,
    /// Bytes the present rows' values take PLAIN (each with its 4-byte
    /// length): what a free-text column's dictionary is weighed against
    /// ([`DictText::free_text_values`]); counted by
    /// [`DictText::push_free`] only.
    held: usize,
    /// Where the last row's entry is in `bytes` (its start and end): the
    /// repeat of the last value is compared without finding its entry.
    /// Always within `bytes` (read unchecked by [`DictText::index`]).
    last_at: (usize, usize),
}

fn entry<'b>(bytes: &'b [u8], ends: &[usize], i: u32) -> &'b [u8] {
    let i = i as usize;
    let start = if i == 0 { 0 } else { ends[i - 1] };
    &bytes[start..ends[i]]
}

/// Whether two texts are equal, those of at most 32 bytes compared in place
/// as two overlapping words or halves (most compared texts are short: a
/// uid, a status, a command, a name; `==` calls `memcmp` for each).
#[inline(always)]
fn same(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    fn w8(s: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(s[at..at + 8].try_into().expect("8 bytes"))
    }
    fn w4(s: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(s[at..at + 4].try_into().expect("4 bytes"))
    }
    match n {
        0 => true,
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=7 => w4(a, 0) == w4(b, 0) && w4(a, n - 4) == w4(b, n - 4),
        8..=16 => w8(a, 0) == w8(b, 0) && w8(a, n - 8) == w8(b, n - 8),
        17..=32 => {
            (w8(a, 0) ^ w8(b, 0)) | (w8(a, 8) ^ w8(b, 8)) | (w8(a, n - 16) ^ w8(b, n - 16)) | (w8(a, n - 8) ^ w8(b, n - 8)) == 0
        }
        _ => a == b,
    }
}

impl DictText {
    pub(crate) fn new(optional: bool) -> DictText {
        DictText { dict: Dict { rows: Vec::new(), last: NULL, nulls: 0 }, bytes: Vec::new(), ends: Vec::new(), table: HashTable::new(), hash: hasher(), optional, held: 0, last_at: (0, 0) }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.dict.rows.len()
    }

    /// Appends a row's value. Inlined into each column's fill: the
    /// repeat of the last value costs a comparison, not a call; any other
    /// value is looked up out of line ([`DictText::lookup`]).
    ///
    /// # Safety
    /// Room for the row was reserved ([`DictText::spare`] > 0).
    #[inline(always)]
    pub(crate) unsafe fn push_reserved(&mut self, v: Option<&[u8]>) {
        // SAFETY: the caller's promise.
        unsafe { self.push_row_reserved(v) };
    }

    /// [`DictText::push_reserved`] of a free-text column's value, its PLAIN
    /// bytes counted (`held`: only a free-text column's dictionary is weighed,
    /// [`DictText::free_text_values`]; a declared one's rows skip the count).
    ///
    /// # Safety
    /// As [`DictText::push_reserved`].
    #[inline(always)]
    pub(crate) unsafe fn push_free_reserved(&mut self, v: Option<&[u8]>) {
        if v.is_some() || !self.optional {
            self.held += 4 + v.map_or(0, <[u8]>::len);
        }
        // SAFETY: the caller's promise.
        unsafe { self.push_row_reserved(v) };
    }

    /// [`DictText::push_reserved`], returning the row's index ([`NULL`] when
    /// unset).
    ///
    /// # Safety
    /// As [`DictText::push_reserved`].
    #[inline(always)]
    pub(crate) unsafe fn push_row_reserved(&mut self, v: Option<&[u8]>) -> u32 {
        let i = match v {
            None if self.optional => {
                self.dict.nulls += 1;
                NULL
            }
            None => self.index(b""),
            Some(s) => self.index(s),
        };
        // SAFETY: the caller's promise (a lookup grows the entries, not the rows).
        unsafe { self.dict.push(i) };
        i
    }

    /// [`DictText::push_reserved`] with its room made first.
    #[cfg(test)]
    fn push(&mut self, v: Option<&[u8]>) {
        self.push_row(v);
    }

    /// [`DictText::push_free_reserved`] with its room made first.
    #[cfg(test)]
    fn push_free(&mut self, v: Option<&[u8]>) {
        self.reserve(1);
        // SAFETY: room for one row was just made.
        unsafe { self.push_free_reserved(v) }
    }

    /// [`DictText::push_row_reserved`] with its room made first.
    #[cfg(test)]
    fn push_row(&mut self, v: Option<&[u8]>) -> u32 {
        self.reserve(1);
        // SAFETY: room for one row was just made.
        unsafe { self.push_row_reserved(v) }
    }

    /// Room for `n` more rows.
    pub(crate) fn reserve(&mut self, n: usize) {
        self.dict.reserve(n);
    }

    /// How many more rows fit without growing.
    pub(crate) fn spare(&self) -> usize {
        self.dict.spare()
    }

    /// Moves the last row to row `at` ([`move_last`]): the entries stay,
    /// and so does the last value looked up (a repeat test of an entry,
    /// not of a row).
    pub(crate) fn move_last(&mut self, at: usize) {
        self.dict.move_last(at);
    }

    #[inline(always)]
    fn index(&mut self, s: &[u8]) -> u32 {
        let last = self.dict.last;
        // SAFETY: `last_at` lies within `bytes` (`lookup` sets it to an
        // entry's place, `clear` to (0, 0); `bytes` only grows in between):
        // the repeat test of every text value of a row skips the slice's
        // bounds checks.
        if last != NULL && same(unsafe { self.bytes.get_unchecked(self.last_at.0..self.last_at.1) }, s) {
            return last;
        }
        self.lookup(s)
    }

    /// The index of a value other than the last row's: compared with each
    /// entry while there are at most [`SCANNED`], else hashed (the table
    /// holds every entry either way).
    #[inline(never)]
    fn lookup(&mut self, s: &[u8]) -> u32 {
        let (bytes, ends) = (&mut self.bytes, &mut self.ends);
        let mut found = None;
        let scanned = ends.len() <= SCANNED;
        if scanned {
            let mut start = 0;
            for (i, &end) in ends.iter().enumerate() {
                if end - start == s.len() && same(&bytes[start..end], s) {
                    found = Some(i as u32);
                    break;
                }
                start = end;
            }
        }
        let i = match found {
            Some(i) => i,
            None => {
                let h = self.hash.hash_one(s);
                let hash = &self.hash;
                match if scanned { None } else { self.table.find(h, |&i| same(entry(bytes, ends, i), s)) } {
                    Some(&i) => i,
                    None => {
                        let i = ends.len() as u32;
                        room(bytes, s.len());
                        room(ends, 1);
                        bytes.extend_from_slice(s);
                        ends.push(bytes.len());
                        if self.table.len() == self.table.capacity() {
                            // Grown by GROWTH too: each growth hashes every entry's text again.
                            let more = self.table.len().max(16) * (GROWTH - 1);
                            self.table.reserve(more, |&j| hash.hash_one(entry(bytes, ends, j)));
                        }
                        self.table.insert_unique(h, i, |&j| hash.hash_one(entry(bytes, ends, j)));
                        i
                    }
                }
            }
        };
        self.dict.last = i;
        let i = i as usize;
        self.last_at = (if i == 0 { 0 } else { self.ends[i - 1] }, self.ends[i]);
        i as u32
    }

    /// The row's value (`None`: unset).
    #[cfg(test)]
    fn get(&self, r: usize) -> Option<&[u8]> {
        let i = self.dict.rows[r];
        (i != NULL).then(|| entry(&self.bytes, &self.ends, i))
    }

    pub(crate) fn clear(&mut self) {
        self.dict.clear();
        self.bytes.clear();
        self.ends.clear();
        self.table.clear();
        self.held = 0;
        self.last_at = (0, 0);
    }

    /// Whether a free-text column's dictionary pays: its page (each
    /// distinct value once, with its length) fits the writer's limit
    /// (`pqfile::DICT_BYTES`: past it the chunk would be written PLAIN from
    /// the dictionary, a value at a time)
    /// and, with about 2 bytes of index a row, takes at most 3/4 of the
    /// values' PLAIN bytes. mysql_text's statements (19,472 distinct in
    /// 48,674): 1.03 MB of 2.09 MB; prepared ones (mysql, 22 distinct in
    /// 96,452) or an HTTP benchmark's URIs (9 in 11,667): a few hundred bytes.
    fn dictionary_pays(&self) -> bool {
        let page = self.bytes.len() + 4 * self.ends.len();
        page <= crate::pqfile::DICT_BYTES && page + 2 * self.dict.rows.len() <= self.held / 4 * 3
    }

    /// The rows' values of a free-text column (a statement, a URI; not a
    /// declared dictionary), buffered as a dictionary: dictionary-encoded
    /// when that pays ([`DictText::dictionary_pays`]: the file's text is
    /// then compressed once per distinct value), else PLAIN
    /// ([`PqCol::Plain`], each row's value with its length) as any free
    /// text is written.
    pub(crate) fn free_text_values(&self, rows: &[u32], runs: &[Run]) -> PqValues {
        if self.dictionary_pays() {
            return self.values(rows, runs);
        }
        if self.optional && self.dict.nulls == self.dict.rows.len() {
            // Every buffered row unset (an error message where no statement
            // failed): levels of zeros, no row looked at.
            let mut def = crate::encode::buf(rows.len());
            def.resize(rows.len(), 0);
            let (data, ends) = (crate::encode::buf(0), crate::encode::buf(0));
            return PqValues { col: PqCol::Plain(Texts { data, ends }), def: Some(def) };
        }
        let mut data = crate::encode::buf(self.held);
        let mut ends = crate::encode::buf(rows.len());
        let mut def = crate::encode::buf(if self.optional { rows.len() } else { 0 });
        for run in runs {
            for &e in &self.dict.rows[run.range()] {
                if e == NULL {
                    def.push(0);
                    continue;
                }
                if self.optional {
                    def.push(1);
                }
                let v = entry(&self.bytes, &self.ends, e);
                data.extend_from_slice(&(v.len() as u32).to_le_bytes());
                data.extend_from_slice(v);
                ends.push(data.len());
            }
        }
        PqValues { col: PqCol::Plain(Texts { data, ends }), def: self.optional.then_some(def) }
    }

    /// The rows' values, dictionary-encoded in their order (`runs`: the
    /// runs of `rows`, [`crate::encode::runs`]).
    pub(crate) fn values(&self, rows: &[u32], runs: &[Run]) -> PqValues {
        let mut order = crate::encode::buf(0);
        let (idx, def) = self.dict.file_order(self.ends.len(), rows, runs, self.optional, &mut order);
        let (mut data, mut ends);
        if order.len() == self.ends.len() && order.iter().enumerate().all(|(k, &e)| e as usize == k) {
            // Every entry in arrival order (a file of every buffered row): the
            // buffer's text and offsets as they are, one copy each, not an
            // entry at a time (mysql_text's 19,472 statements).
            data = crate::encode::buf(self.bytes.len());
            data.extend_from_slice(&self.bytes);
            ends = crate::encode::buf(self.ends.len());
            ends.extend_from_slice(&self.ends);
        } else {
            data = crate::encode::buf(order.iter().map(|&e| entry(&self.bytes, &self.ends, e).len()).sum());
            ends = crate::encode::buf(order.len());
            for &e in &order {
                data.extend_from_slice(entry(&self.bytes, &self.ends, e));
                ends.push(data.len());
            }
        }
        crate::encode::give(order);
        PqValues { col: PqCol::Dict { values: Box::new(PqCol::Bytes(Texts { data, ends })), idx }, def }
    }
}

/// A column of numbers or addresses being dictionary-encoded.
pub(crate) struct DictNum<K> {
    dict: Dict,
    entries: Vec<K>,
    map: HashMap<K, u32, Hasher>,
}

impl<K: Copy + Eq + Hash> DictNum<K> {
    pub(crate) fn new() -> DictNum<K> {
        DictNum { dict: Dict { rows: Vec::new(), last: NULL, nulls: 0 }, entries: Vec::new(), map: HashMap::with_hasher(hasher()) }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.dict.rows.len()
    }

    /// Appends a row's value. Inlined into each column's fill: the
    /// repeat of the last value costs a comparison, not a call (was ~40
    /// instructions a call on mysql_text); any other value is looked up out
    /// of line ([`DictNum::lookup`]).
    ///
    /// # Safety
    /// Room for the row was reserved ([`DictNum::spare`] > 0).
    #[inline(always)]
    pub(crate) unsafe fn push_reserved(&mut self, v: Option<K>) {
        let i = match v {
            None => {
                self.dict.nulls += 1;
                NULL
            }
            Some(v) => {
                let last = self.dict.last;
                if last != NULL && self.entries[last as usize] == v {
                    last
                } else {
                    self.lookup(v)
                }
            }
        };
        // SAFETY: the caller's promise (a lookup grows the entries, not the rows).
        unsafe { self.dict.push(i) };
    }

    /// [`DictNum::push_reserved`] with its room made first.
    #[cfg(test)]
    fn push(&mut self, v: Option<K>) {
        self.reserve(1);
        // SAFETY: room for one row was just made.
        unsafe { self.push_reserved(v) }
    }

    /// Appends a row whose value is entry `i` (known from another column:
    /// a connection's ends from its uid's entry, `TxBuf::push_common`).
    ///
    /// # Safety
    /// As [`DictNum::push_reserved`].
    #[inline(always)]
    pub(crate) unsafe fn push_index(&mut self, i: u32) {
        self.dict.last = i;
        // SAFETY: the caller's promise.
        unsafe { self.dict.push(i) };
    }

    /// The index of the last row pushed (one must have been).
    #[inline(always)]
    pub(crate) fn last_row(&self) -> u32 {
        self.dict.rows[self.dict.rows.len() - 1]
    }

    /// Room for `n` more rows.
    pub(crate) fn reserve(&mut self, n: usize) {
        self.dict.reserve(n);
    }

    /// How many more rows fit without growing.
    pub(crate) fn spare(&self) -> usize {
        self.dict.spare()
    }

    /// Moves the last row to row `at` ([`move_last`]): the entries stay,
    /// and so does the last value looked up (a repeat test of an entry,
    /// not of a row).
    pub(crate) fn move_last(&mut self, at: usize) {
        self.dict.move_last(at);
    }

    /// The index of a value other than the last row's: compared with each
    /// entry while there are at most [`SCANNED`], else hashed.
    #[inline(never)]
    fn lookup(&mut self, v: K) -> u32 {
        if self.entries.len() <= SCANNED {
            if let Some(i) = self.entries.iter().position(|&e| e == v) {
                self.dict.last = i as u32;
                return i as u32;
            }
        }
        let n = self.entries.len() as u32;
        let i = *self.map.entry(v).or_insert(n);
        if i == n {
            self.entries.push(v);
        }
        self.dict.last = i;
        i
    }

    /// The row's value.
    #[cfg(test)]
    fn get(&self, r: usize) -> Option<K> {
        let i = self.dict.rows[r];
        (i != NULL).then(|| self.entries[i as usize])
    }

    pub(crate) fn clear(&mut self) {
        self.dict.clear();
        self.entries.clear();
        self.map.clear();
    }

    /// The rows' values, dictionary-encoded in their order, each written as
    /// `wrap` holds it; definition levels when `optional`.
    pub(crate) fn values<T>(&self, rows: &[u32], runs: &[Run], optional: bool, conv: impl Fn(K) -> T, wrap: fn(Vec<T>) -> PqCol) -> PqValues {
        let mut order = crate::encode::buf(0);
        let (idx, def) = self.dict.file_order(self.entries.len(), rows, runs, optional, &mut order);
        let values = order.iter().map(|&e| conv(self.entries[e as usize])).collect();
        crate::encode::give(order);
        PqValues { col: PqCol::Dict { values: Box::new(wrap(values)), idx }, def }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::runs;

    /// The in-place comparison of short texts is `==`: every length up to
    /// 40, texts equal and differing in one byte at each position.
    #[test]
    fn same_is_equality() {
        let mut rnd = crate::test_rng(0x9e37_79b9_7f4a_7c15);
        for n in 0..=40usize {
            for _ in 0..20 {
                let a: Vec<u8> = (0..n).map(|_| rnd(4) as u8).collect();
                assert!(same(&a, &a.clone()), "{a:?}");
                for at in 0..n {
                    let mut b = a.clone();
                    b[at] ^= 1 << rnd(8);
                    assert!(!same(&a, &b) && !same(&b, &a), "{a:?} {b:?}");
                }
                let c: Vec<u8> = (0..n).map(|_| rnd(2) as u8).collect();
                assert_eq!(same(&a, &c), a == c, "{a:?} {c:?}");
                assert!(!same(&a, &a[..n.saturating_sub(1)]) || n == 0);
            }
        }
    }

    /// Values found by comparison (a dictionary of at most `SCANNED`
    /// entries) and by hash (a larger one) get the index the first row of
    /// the value got, whatever the number of distinct values.
    #[test]
    fn scanned_and_hashed_lookups_agree() {
        let mut rnd = crate::test_rng(0x1234_5678_9abc_def1);
        for distinct in [1u64, 3, SCANNED as u64, SCANNED as u64 + 1, 40] {
            let (mut t, mut nums) = (DictText::new(true), DictNum::<u64>::new());
            let mut first: HashMap<u64, u32> = HashMap::new();
            for r in 0..2_000 {
                let v = rnd(distinct);
                let text = format!("value {v}").into_bytes();
                let i = t.push_row(Some(&text));
                nums.push(Some(v));
                let want = *first.entry(v).or_insert(i);
                assert_eq!((i, nums.dict.rows[r]), (want, want), "{distinct} distinct, row {r}");
                assert_eq!(t.get(r), Some(&text[..]));
                assert_eq!(nums.get(r), Some(v));
            }
            assert_eq!(t.ends.len() as u64, distinct.min(first.len() as u64));
        }
    }

    fn text_values(col: &PqCol) -> (Vec<Vec<u8>>, Vec<u32>) {
        let PqCol::Dict { values, idx } = col else { panic!("not a dictionary") };
        let PqCol::Bytes(t) = &**values else { panic!("not text") };
        (t.iter().map(<[u8]>::to_vec).collect(), idx.clone())
    }

    /// A file's dictionary lists the values its rows use, in the order they
    /// first appear in the file's row order, whatever order they arrived in.
    #[test]
    fn a_file_takes_the_dictionary_of_its_own_rows() {
        let mut d = DictText::new(true);
        for v in [Some("b"), Some("a"), None, Some("b"), Some("c"), Some("a")] {
            d.push(v.map(str::as_bytes));
        }
        assert_eq!(d.get(2), None);
        assert_eq!(d.get(3), Some(&b"b"[..]));
        let v = d.values(&[5, 2, 0, 1, 3], &runs(&[5, 2, 0, 1, 3]));
        let (vals, idx) = text_values(&v.col);
        assert_eq!(vals, [b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(idx, [0, 1, 0, 1]);
        assert_eq!(v.def, Some(vec![1, 0, 1, 1, 1]));
        // Required text: unset is "" (a value of its own).
        let mut r = DictText::new(false);
        r.push(None);
        r.push(Some(b"x"));
        r.push(Some(b""));
        let v = r.values(&[0, 1, 2], &runs(&[0, 1, 2]));
        assert_eq!(text_values(&v.col), (vec![b"".to_vec(), b"x".to_vec()], vec![0, 1, 0]));
        assert_eq!(v.def, None);
    }

    /// A file of every buffered row takes the buffer's dictionary in
    /// arrival order: each row reads the same value, with the same
    /// definition level, as when the dictionary is renumbered in the file's
    /// order of first use, and every entry is used.
    #[test]
    fn arrival_order_reads_as_renumbering() {
        // Long enough for runs taken whole (forward, `mixed`) and one by one
        // (reversed, pairs swapped: `encode::runs_are_short`).
        let long: Vec<Option<u64>> = (0..300u64).map(|i| (i % 11 != 4).then_some(i % 7)).collect();
        let long_set: Vec<Option<u64>> = (0..300u64).map(|i| Some(i % 5)).collect();
        let cases: [&[Option<u64>]; 6] = [
            &[Some(9), Some(7), Some(9), Some(8), Some(7)],
            &[None, Some(7), Some(3), None, Some(7), Some(5)],
            &[Some(1), Some(2)],
            &[None, Some(4), Some(6)],
            &long,
            &long_set,
        ];
        for vals in cases {
            let mut n = DictNum::<u64>::new();
            vals.iter().for_each(|&v| n.push(v));
            let fwd: Vec<u32> = (0..vals.len() as u32).collect();
            let rev: Vec<u32> = fwd.iter().rev().copied().collect();
            let mixed: Vec<u32> = fwd.iter().map(|&r| (r + 2) % vals.len() as u32).collect();
            let swapped: Vec<u32> = fwd.iter().map(|&r| if (r ^ 1) < vals.len() as u32 { r ^ 1 } else { r }).collect();
            for rows in [&fwd, &rev, &mixed, &swapped] {
                let mut sorted = rows.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, fwd, "a permutation");
                for optional in [true, false] {
                    if !optional && vals.contains(&None) {
                        continue;
                    }
                    let (mut o1, mut o2) = (Vec::new(), Vec::new());
                    let (i1, d1) = n.dict.arrival(n.entries.len(), rows, &runs(rows), optional, &mut o1);
                    let (i2, d2) = n.dict.renumber(n.entries.len(), rows, optional, &mut o2);
                    assert_eq!(d1, d2, "{vals:?} rows {rows:?}");
                    let read = |idx: &[u32], order: &[u32]| idx.iter().map(|&i| n.entries[order[i as usize] as usize]).collect::<Vec<_>>();
                    assert_eq!(read(&i1, &o1), read(&i2, &o2), "{vals:?} rows {rows:?}");
                    let mut used = o1.clone();
                    used.sort_unstable();
                    assert_eq!(used, (0..n.entries.len() as u32).collect::<Vec<_>>());
                    assert!(i1.iter().all(|&i| (i as usize) < o1.len()));
                }
            }
            // What `values` hands the writer picks the arrival order for all rows.
            let v = n.values(&rev, &runs(&rev), true, |x| x as i64, PqCol::I64);
            let PqCol::Dict { values, .. } = v.col else { panic!() };
            let PqCol::I64(e) = *values else { panic!() };
            assert_eq!(e, n.entries.iter().map(|&x| x as i64).collect::<Vec<_>>());
        }
    }

    /// A column of one value (or none), with and without unset rows, in any
    /// row order: the shortcut gives what renumbering row by row gives.
    #[test]
    fn one_value_is_renumbering() {
        let cases: [&[Option<u64>]; 5] = [
            &[Some(7), Some(7), Some(7)],
            &[None, Some(7), None, Some(7)],
            &[None, None],
            &[Some(7)],
            &[],
        ];
        for vals in cases {
            let mut n = DictNum::<u64>::new();
            vals.iter().for_each(|&v| n.push(v));
            let all: Vec<u32> = (0..vals.len() as u32).rev().collect();
            for rows in [&all[..], &all[all.len().min(1)..]] {
                for optional in [true, false] {
                    if !optional && vals.contains(&None) {
                        continue;
                    }
                    let (mut o1, mut o2) = (Vec::new(), Vec::new());
                    let a = n.dict.one_value(n.entries.len(), rows, optional, &mut o1);
                    let b = n.dict.renumber(n.entries.len(), rows, optional, &mut o2);
                    assert_eq!((a, o1), (b, o2), "{vals:?} rows {rows:?} optional {optional}");
                }
            }
        }
    }

    /// A free-text column reads back, row by row in the file's order, the
    /// values it was given (null or "" for unset ones as it is optional or
    /// not): as a dictionary when few distinct values repeat, PLAIN (each
    /// value with its length, as `encode::strings` takes them row by row)
    /// when they do not, in any row order.
    #[test]
    fn free_text_is_a_dictionary_only_when_it_pays() {
        let repeated: Vec<Option<String>> =
            (0..400).map(|i| if i % 7 == 3 { None } else { Some(format!("select * from t where id = {}", i % 5)) }).collect();
        let distinct: Vec<Option<String>> =
            (0..400).map(|i| if i % 7 == 3 { None } else { Some(format!("select * from t where id = {i}")) }).collect();
        // Every row unset (an error message where none failed): no value
        // when optional, else one repeated "" (a dictionary that pays).
        let unset: Vec<Option<String>> = vec![None; 400];
        for (vals, pays_optional, pays_required) in [(&repeated, true, true), (&distinct, false, false), (&unset, false, true)] {
            for optional in [true, false] {
                let pays = if optional { pays_optional } else { pays_required };
                let mut d = DictText::new(optional);
                vals.iter().for_each(|v| d.push_free(v.as_deref().map(str::as_bytes)));
                assert_eq!(d.dictionary_pays(), pays, "optional {optional}");
                let n = vals.len() as u32;
                let fwd: Vec<u32> = (0..n).collect();
                let mixed: Vec<u32> = (0..n).map(|r| if r % 10 == 9 { n - 1 - r } else { r }).collect();
                let rev: Vec<u32> = (0..n).rev().collect();
                for rows in [&fwd, &mixed, &rev, &fwd[..100].to_vec()] {
                    let got = d.free_text_values(rows, &runs(rows));
                    let want = crate::encode::strings(rows, optional, |r| Some(vals[r].as_deref().unwrap_or("").as_bytes()).filter(|_| !optional || vals[r].is_some()));
                    assert_eq!(got.def, want.def, "optional {optional}");
                    let PqCol::Bytes(w) = &want.col else { panic!() };
                    let read: Vec<Vec<u8>> = match &got.col {
                        PqCol::Dict { values, idx } => {
                            assert!(pays);
                            let PqCol::Bytes(t) = &**values else { panic!() };
                            idx.iter().map(|&i| t.get(i as usize).to_vec()).collect()
                        }
                        PqCol::Plain(t) => {
                            assert!(!pays);
                            t.iter().map(|v| {
                                assert_eq!(v[..4], (v.len() as u32 - 4).to_le_bytes());
                                v[4..].to_vec()
                            })
                            .collect()
                        }
                        _ => panic!("neither a dictionary nor PLAIN"),
                    };
                    assert_eq!(read, w.iter().map(<[u8]>::to_vec).collect::<Vec<_>>(), "optional {optional} pays {pays}");
                }
            }
        }
    }

    /// Many distinct values (the table grows and rehashes from the stored
    /// entries) and runs of one value (the last-value shortcut) index alike.
    #[test]
    fn indices_survive_growth_and_runs() {
        let mut d = DictText::new(false);
        let mut n = DictNum::<u64>::new();
        let vals: Vec<String> = (0..5000).map(|i| format!("v{}", (i * 7919) % 1000)).collect();
        for v in &vals {
            for _ in 0..2 {
                d.push(Some(v.as_bytes()));
                n.push(Some(v.len() as u64 * 1000 + v.as_bytes()[1] as u64));
            }
        }
        for (r, v) in vals.iter().enumerate() {
            assert_eq!(d.get(2 * r + 1), Some(v.as_bytes()));
            assert_eq!(n.get(2 * r), Some(v.len() as u64 * 1000 + v.as_bytes()[1] as u64));
        }
        assert_eq!(d.ends.len(), 1000);
        d.clear();
        n.clear();
        assert_eq!((d.len(), n.len()), (0, 0));
        d.push(Some(b"again"));
        assert_eq!(d.get(0), Some(&b"again"[..]));
    }
}
