//! Group-by keys packed into a fixed number of 64-bit words.
//!
//! Each group-by field gets a fixed place in the key: an address takes two
//! whole words, a 64-bit value (counter, time, time-series interval) one whole
//! word, and the small ones (ports, protocol, interned strings, booleans, and
//! the "value is set" flag of optional fields) share words bit by bit. The
//! default flow key (client, server, server_port, proto) is 35 bytes in 5
//! words. A key is built column by column for a whole batch, so the loop for
//! each field is monomorphic; hashing and comparing a key is then a handful of
//! word operations, never a walk over dynamic values.

use std::cmp::Ordering;

use wirelog_store::{Batch, Column};

use crate::error::{SchemaError, SchemaProblem};
use crate::field::{Field, Ty};
use crate::filter::column;
use crate::hash::{fast_map, hash_bytes, mix, FastMap, K1};

/// The widest key: 16 words (1024 bits), e.g. eight addresses.
pub(crate) const MAX_WORDS: usize = 16;

/// Flipping the sign bit makes unsigned word order equal signed order.
const SIGN: u64 = 1 << 63;

/// One component of a group key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    Field(Field),
    /// The start of the `every`-ns interval the row's time falls in.
    Bucket {
        time: Field,
        every: i64,
    },
}

impl Part {
    fn field(self) -> Field {
        match self {
            Part::Field(f) | Part::Bucket { time: f, .. } => f,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Enc {
    Ip,
    UInt,
    /// i64 with the sign bit flipped.
    Signed,
    /// Index into the slot's string dictionary.
    Str,
    Bool,
}

#[derive(Debug, Clone, Copy)]
struct Piece {
    word: usize,
    shift: u32,
    bits: u32,
}

impl Piece {
    #[inline(always)]
    fn mask(self) -> u64 {
        if self.bits == 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        }
    }

    #[inline(always)]
    fn put(self, key: &mut [u64], v: u64) {
        key[self.word] |= (v & self.mask()) << self.shift;
    }

    #[inline(always)]
    fn get(self, key: &[u64]) -> u64 {
        (key[self.word] >> self.shift) & self.mask()
    }
}

#[derive(Debug)]
struct Slot {
    part: Part,
    enc: Enc,
    /// For `Ip`, the first of two whole words.
    val: Piece,
    /// A 1-bit "value is set" flag for nullable fields.
    present: Option<Piece>,
    /// For `Str`: which dictionary.
    dict: usize,
}

/// A group-by value, decoded from a key for output.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KeyValue {
    /// Unset (Zeek's `-`).
    Null,
    Bool(bool),
    UInt(u64),
    /// Times and durations, ns.
    Int(i64),
    Ip([u8; 16]),
    Str(String),
}

/// Strings of one group-by field, interned to dense ids.
#[derive(Debug)]
pub(crate) struct StrDict {
    map: FastMap<Box<str>, u32>,
    pub(crate) names: Vec<Box<str>>,
}

impl StrDict {
    fn new() -> StrDict {
        StrDict {
            map: fast_map(),
            names: Vec::new(),
        }
    }

    #[inline]
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.map.get(s) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(s.into());
        self.map.insert(s.into(), id);
        id
    }
}

/// Where each key component lives in the packed words.
#[derive(Debug)]
pub(crate) struct Layout {
    slots: Vec<Slot>,
    pub(crate) words: usize,
    pub(crate) dicts: Vec<StrDict>,
}

struct Alloc {
    words: usize,
    partial: Vec<(usize, u32)>,
}

impl Alloc {
    fn whole(&mut self, n: usize) -> Piece {
        let w = self.words;
        self.words += n;
        Piece {
            word: w,
            shift: 0,
            bits: 64,
        }
    }

    fn small(&mut self, bits: u32) -> Piece {
        for p in &mut self.partial {
            if p.1 + bits <= 64 {
                let piece = Piece {
                    word: p.0,
                    shift: p.1,
                    bits,
                };
                p.1 += bits;
                return piece;
            }
        }
        let w = self.whole(1).word;
        self.partial.push((w, bits));
        Piece {
            word: w,
            shift: 0,
            bits,
        }
    }
}

impl Layout {
    /// Lays out `parts`; `Err(words)` when the key would need more than
    /// `MAX_WORDS`.
    pub(crate) fn new(parts: &[Part]) -> Result<Layout, usize> {
        let shape = |p: &Part| -> (Enc, u32) {
            match p {
                Part::Bucket { .. } => (Enc::Signed, 64),
                Part::Field(f) => match f.ty() {
                    Ty::Ip => (Enc::Ip, 128),
                    Ty::UInt { bits, .. } => (Enc::UInt, bits as u32),
                    Ty::Time | Ty::Duration => (Enc::Signed, 64),
                    Ty::Str => (Enc::Str, 32),
                    Ty::Bool => (Enc::Bool, 1),
                },
            }
        };
        let mut a = Alloc {
            words: 0,
            partial: Vec::new(),
        };
        let mut pieces: Vec<Option<Piece>> = vec![None; parts.len()];
        // Whole words first so the small pieces can share what is left.
        for want in [128, 64] {
            for (i, p) in parts.iter().enumerate() {
                if shape(p).1 == want {
                    pieces[i] = Some(a.whole(want as usize / 64));
                }
            }
        }
        let mut slots = Vec::with_capacity(parts.len());
        let mut n_dicts = 0;
        for (i, p) in parts.iter().enumerate() {
            let (enc, bits) = shape(p);
            let val = pieces[i].unwrap_or_else(|| a.small(bits));
            let present = matches!(p, Part::Field(f) if f.nullable()).then(|| a.small(1));
            let dict = if enc == Enc::Str {
                n_dicts += 1;
                n_dicts - 1
            } else {
                0
            };
            slots.push(Slot {
                part: *p,
                enc,
                val,
                present,
                dict,
            });
        }
        if a.words > MAX_WORDS {
            return Err(a.words);
        }
        Ok(Layout {
            slots,
            words: a.words.max(1),
            dicts: (0..n_dicts).map(|_| StrDict::new()).collect(),
        })
    }

    /// The word holding the time-series interval, if any.
    pub(crate) fn bucket_word(&self) -> Option<usize> {
        self.slots
            .iter()
            .find(|s| matches!(s.part, Part::Bucket { .. }))
            .map(|s| s.val.word)
    }

    /// Fills `keys[i]` from row `sel[i]` of `batch`; `keys` must be zeroed.
    pub(crate) fn write<const N: usize>(
        &mut self,
        keys: &mut [[u64; N]],
        batch: &Batch,
        sel: &[u32],
    ) -> Result<(), SchemaError> {
        for slot in &self.slots {
            let name = slot.part.field().name();
            let col = column(batch, name)?;
            let (val, present) = (slot.val, slot.present);
            match (slot.enc, slot.part, col) {
                (Enc::Ip, _, Column::Ip(src)) => {
                    let w = val.word;
                    for (k, &r) in keys.iter_mut().zip(sel) {
                        let a = &src[r as usize];
                        k[w] = u64::from_be_bytes(a[..8].try_into().unwrap());
                        k[w + 1] = u64::from_be_bytes(a[8..].try_into().unwrap());
                    }
                }
                (Enc::UInt, _, Column::U8(s)) => {
                    put_all(keys, sel, s, val, present, |x| Some(x as u64))
                }
                (Enc::UInt, _, Column::U16(s)) => {
                    put_all(keys, sel, s, val, present, |x| Some(x as u64))
                }
                (Enc::UInt, _, Column::U32(s)) => {
                    put_all(keys, sel, s, val, present, |x| Some(x as u64))
                }
                (Enc::UInt, _, Column::U64(s)) => put_all(keys, sel, s, val, present, Some),
                (Enc::UInt, _, Column::OptU64(s)) => put_all(keys, sel, s, val, present, |x| x),
                (Enc::Signed, Part::Bucket { every, .. }, Column::I64(src)) => {
                    // Rows come roughly in time order: reuse the last interval
                    // instead of dividing for every row.
                    let (mut lo, mut hi) = (1i64, 0i64);
                    for (k, &r) in keys.iter_mut().zip(sel) {
                        let t = src[r as usize];
                        if t < lo || t >= hi {
                            lo = t.div_euclid(every) * every;
                            hi = lo.saturating_add(every);
                        }
                        val.put(k, lo as u64 ^ SIGN);
                    }
                }
                (Enc::Signed, Part::Field(_), Column::I64(s)) => {
                    put_all(keys, sel, s, val, present, |x| Some(x as u64 ^ SIGN))
                }
                (Enc::Signed, Part::Field(_), Column::OptI64(s)) => {
                    put_all(keys, sel, s, val, present, |x| x.map(|x| x as u64 ^ SIGN))
                }
                (Enc::Str, _, Column::Str(src)) => {
                    let dict = &mut self.dicts[slot.dict];
                    // Runs of equal strings (an interface, a state) skip the map.
                    let mut last: Option<(&str, u32)> = None;
                    for (k, &r) in keys.iter_mut().zip(sel) {
                        let s = src[r as usize].as_str();
                        let id = match last {
                            Some((ls, id)) if ls == s => id,
                            _ => {
                                let id = dict.id(s);
                                last = Some((s, id));
                                id
                            }
                        };
                        val.put(k, id as u64);
                    }
                }
                (Enc::Bool, _, Column::Bool(s)) => {
                    put_all(keys, sel, s, val, present, |x| Some(x as u64))
                }
                _ => {
                    return Err(SchemaError {
                        column: name,
                        problem: SchemaProblem::WrongType,
                    })
                }
            }
        }
        Ok(())
    }

    /// Mixes the group-by values of row `sel[i]` of `batch` into
    /// `hashes[i]`, without interning strings (their bytes are hashed):
    /// rows with equal keys get equal hashes, so rows with different hashes
    /// have different keys. What [`crate::engine`]'s record top-k uses to
    /// know that every row is a group of its own.
    pub(crate) fn hash_rows(&self, hashes: &mut [u64], batch: &Batch, sel: &[u32]) -> Result<(), SchemaError> {
        for slot in &self.slots {
            let Part::Field(f) = slot.part else { continue };
            let name = f.name();
            let col = column(batch, name)?;
            let nullable = slot.present.is_some();
            macro_rules! each {
                ($src:expr, $f:expr) => {{
                    let f = $f;
                    for (h, &r) in hashes.iter_mut().zip(sel) {
                        let v: Option<u64> = f(&$src[r as usize]);
                        // A required field keys an unset value as 0 (see `put_all`).
                        let w = match (v, nullable) {
                            (Some(v), true) => mix(v, K1) ^ 1,
                            (None, true) => 0,
                            (v, false) => v.unwrap_or(0),
                        };
                        *h = mix(*h ^ w, K1);
                    }
                }};
            }
            match (slot.enc, col) {
                (Enc::Ip, Column::Ip(src)) => {
                    for (h, &r) in hashes.iter_mut().zip(sel) {
                        let a = &src[r as usize];
                        let x = mix(*h ^ u64::from_be_bytes(a[..8].try_into().unwrap()), K1);
                        *h = mix(x ^ u64::from_be_bytes(a[8..].try_into().unwrap()), K1);
                    }
                }
                (Enc::UInt, Column::U8(s)) => each!(s, |x: &u8| Some(*x as u64)),
                (Enc::UInt, Column::U16(s)) => each!(s, |x: &u16| Some(*x as u64)),
                (Enc::UInt, Column::U32(s)) => each!(s, |x: &u32| Some(*x as u64)),
                (Enc::UInt, Column::U64(s)) => each!(s, |x: &u64| Some(*x)),
                (Enc::UInt, Column::OptU64(s)) => each!(s, |x: &Option<u64>| *x),
                (Enc::Signed, Column::I64(s)) => each!(s, |x: &i64| Some(*x as u64)),
                (Enc::Signed, Column::OptI64(s)) => each!(s, |x: &Option<i64>| x.map(|x| x as u64)),
                (Enc::Bool, Column::Bool(s)) => each!(s, |x: &bool| Some(*x as u64)),
                (Enc::Str, Column::Str(src)) => {
                    for (h, &r) in hashes.iter_mut().zip(sel) {
                        *h = mix(*h ^ hash_bytes(src[r as usize].as_bytes()), K1);
                    }
                }
                _ => {
                    return Err(SchemaError {
                        column: name,
                        problem: SchemaProblem::WrongType,
                    })
                }
            }
        }
        Ok(())
    }

    /// The interval start of a time-series key.
    pub(crate) fn bucket(&self, key: &[u64]) -> Option<i64> {
        self.slots
            .iter()
            .find(|s| matches!(s.part, Part::Bucket { .. }))
            .map(|s| (s.val.get(key) ^ SIGN) as i64)
    }

    /// The group-by values of a key (time-series interval left out), in
    /// `--by` order.
    pub(crate) fn decode(&self, key: &[u64]) -> Vec<KeyValue> {
        // Sized once: a filtered iterator would grow the vector from 4
        // (a record page's 16 fields: two reallocations per row).
        let mut out = Vec::with_capacity(self.slots.len());
        out.extend(self.slots
            .iter()
            .filter(|s| matches!(s.part, Part::Field(_)))
            .map(|s| {
                if let Some(p) = s.present {
                    if p.get(key) == 0 {
                        return KeyValue::Null;
                    }
                }
                let v = s.val.get(key);
                match s.enc {
                    Enc::Ip => {
                        let mut a = [0u8; 16];
                        a[..8].copy_from_slice(&key[s.val.word].to_be_bytes());
                        a[8..].copy_from_slice(&key[s.val.word + 1].to_be_bytes());
                        KeyValue::Ip(a)
                    }
                    Enc::UInt => KeyValue::UInt(v),
                    Enc::Signed => KeyValue::Int((v ^ SIGN) as i64),
                    Enc::Str => KeyValue::Str(self.dicts[s.dict].names[v as usize].to_string()),
                    Enc::Bool => KeyValue::Bool(v != 0),
                }
            }));
        out
    }

    /// Index of the slot holding `f`, for sorting by a group-by field.
    pub(crate) fn slot_of(&self, f: Field) -> Option<usize> {
        self.slots.iter().position(|s| s.part == Part::Field(f))
    }

    /// Compares one component of two keys the way `KeyValue`s compare.
    #[inline]
    pub(crate) fn cmp_slot(&self, i: usize, a: &[u64], b: &[u64]) -> Ordering {
        let s = &self.slots[i];
        if let Some(p) = s.present {
            let o = p.get(a).cmp(&p.get(b));
            if o != Ordering::Equal || p.get(a) == 0 {
                return o;
            }
        }
        match s.enc {
            Enc::Ip => (a[s.val.word], a[s.val.word + 1]).cmp(&(b[s.val.word], b[s.val.word + 1])),
            Enc::Str => {
                let (x, y) = (s.val.get(a), s.val.get(b));
                if x == y {
                    Ordering::Equal
                } else {
                    let names = &self.dicts[s.dict].names;
                    names[x as usize].cmp(&names[y as usize])
                }
            }
            _ => s.val.get(a).cmp(&s.val.get(b)),
        }
    }

    /// Compares the group-by fields of two keys in `--by` order (the
    /// time-series interval left out): the tie-breaker of every sort, so
    /// output order never depends on hashing.
    pub(crate) fn cmp_fields(&self, a: &[u64], b: &[u64]) -> Ordering {
        for (i, s) in self.slots.iter().enumerate() {
            if matches!(s.part, Part::Field(_)) {
                let o = self.cmp_slot(i, a, b);
                if o != Ordering::Equal {
                    return o;
                }
            }
        }
        Ordering::Equal
    }
}

#[inline(always)]
fn put_all<const N: usize, T: Copy>(
    keys: &mut [[u64; N]],
    sel: &[u32],
    src: &[T],
    val: Piece,
    present: Option<Piece>,
    f: impl Fn(T) -> Option<u64>,
) {
    match present {
        None => {
            for (k, &r) in keys.iter_mut().zip(sel) {
                // An unset value in a column the schema calls required keys as 0.
                val.put(k, f(src[r as usize]).unwrap_or(0));
            }
        }
        Some(p) => {
            for (k, &r) in keys.iter_mut().zip(sel) {
                if let Some(v) = f(src[r as usize]) {
                    val.put(k, v);
                    p.put(k, 1);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirelog_store::Kind;

    #[test]
    fn default_flow_key_is_five_words() {
        let parts: Vec<Part> = ["client", "server", "server_port", "proto"]
            .iter()
            .map(|n| Part::Field(Field::col(Kind::Flows, n)))
            .collect();
        let l = Layout::new(&parts).unwrap();
        assert_eq!(l.words, 5);
        let parts: Vec<Part> = [
            "orig_h",
            "resp_h",
            "resp_p",
            "proto",
            "vlan",
            "duration",
            "local_orig",
        ]
        .iter()
        .map(|n| Part::Field(Field::col(Kind::Conns, n)))
        .collect();
        // 2 + 2 addresses, 1 duration, then port 16 + proto id 32 + vlan 16+1 + flags in one word... and a spill.
        let l = Layout::new(&parts).unwrap();
        assert!(l.words <= 7, "{}", l.words);
        let all: Vec<Part> = Field::all(Kind::Conns).map(Part::Field).collect();
        assert!(Layout::new(&all).is_err());
    }
}
