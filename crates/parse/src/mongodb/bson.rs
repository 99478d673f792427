//! BSON (bsonspec.org) read in place: a document is a view over the
//! message's bytes, its elements are read one at a time on demand, and
//! nothing is allocated per field. A document cut short (the parser keeps
//! only the first part of a very large message) reads the elements that are
//! wholly there and says it was cut.

/// A document: the bytes of its element list (after its length, without
/// its closing 0), as far as they are present.
#[derive(Clone, Copy, Debug)]
pub struct Doc<'a> {
    elems: &'a [u8],
    /// The declared length reaches past the bytes there are.
    cut: bool,
}

/// One element: its name, type byte and value bytes.
#[derive(Clone, Copy, Debug)]
pub struct Elem<'a> {
    pub name: &'a [u8],
    pub ty: u8,
    pub val: &'a [u8],
}

impl<'a> Doc<'a> {
    /// The document at the start of `b`, and its declared length; `None`
    /// when `b` cannot hold a length or the length is below BSON's minimum
    /// (5: the length and the closing 0).
    pub fn at(b: &'a [u8]) -> Option<(Doc<'a>, usize)> {
        let len = i32::from_le_bytes(b.get(..4)?.try_into().ok()?);
        if len < 5 {
            return None;
        }
        let len = len as usize;
        let doc = if b.len() >= len { Doc { elems: &b[4..len - 1], cut: false } } else { Doc { elems: &b[4..], cut: true } };
        Some((doc, len))
    }

    pub fn iter(&self) -> Elems<'a> {
        Elems { rest: self.elems, cut: self.cut }
    }

    /// The first element (a command document's first key is the command).
    pub fn first(&self) -> Option<Elem<'a>> {
        self.iter().next()
    }

    /// The element named `name` (the first of that name).
    pub fn get(&self, name: &str) -> Option<Elem<'a>> {
        self.iter().find(|e| e.name == name.as_bytes())
    }

    /// Its number of elements, or `None` when the document is cut (the
    /// count would be short).
    pub fn len(&self) -> Option<u64> {
        let mut it = self.iter();
        let n = it.by_ref().count() as u64;
        (!it.cut).then_some(n)
    }

    pub fn is_empty(&self) -> bool {
        self.elems.first().is_none_or(|&t| t == 0)
    }
}

/// The elements of a [`Doc`], in order; stops at the first one that is
/// malformed or not wholly present (then [`Elems::cut`] is set).
pub struct Elems<'a> {
    rest: &'a [u8],
    pub cut: bool,
}

fn i32_at(b: &[u8], at: usize) -> Option<usize> {
    let v = i32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?);
    usize::try_from(v).ok()
}

/// Bytes of a value of type `ty` at the start of `b` (`None`: malformed or
/// not wholly present).
fn value_len(ty: u8, b: &[u8]) -> Option<usize> {
    let n = match ty {
        0x01 | 0x09 | 0x11 | 0x12 => 8,
        0x02 | 0x0D | 0x0E => 4 + i32_at(b, 0)?,
        0x03 | 0x04 | 0x0F => i32_at(b, 0)?,
        0x05 => 5 + i32_at(b, 0)?,
        0x06 | 0x0A | 0x7F | 0xFF => 0,
        0x07 => 12,
        0x08 => 1,
        0x0B => {
            let a = b.iter().position(|&c| c == 0)? + 1;
            a + b.get(a..)?.iter().position(|&c| c == 0)? + 1
        }
        0x0C => 4 + i32_at(b, 0)? + 12,
        0x10 => 4,
        0x13 => 16,
        _ => return None,
    };
    (n <= b.len()).then_some(n)
}

impl<'a> Iterator for Elems<'a> {
    type Item = Elem<'a>;

    fn next(&mut self) -> Option<Elem<'a>> {
        let (&ty, rest) = self.rest.split_first()?;
        if ty == 0 {
            self.rest = &[];
            return None;
        }
        let Some(end) = rest.iter().position(|&c| c == 0) else {
            self.cut = true;
            self.rest = &[];
            return None;
        };
        let name = &rest[..end];
        let rest = &rest[end + 1..];
        let Some(n) = value_len(ty, rest) else {
            self.cut = true;
            self.rest = &[];
            return None;
        };
        self.rest = &rest[n..];
        Some(Elem { name, ty, val: &rest[..n] })
    }
}

impl<'a> Elem<'a> {
    /// A string's text (without its closing 0), when valid UTF-8.
    pub fn as_str(&self) -> Option<&'a str> {
        if self.ty != 0x02 {
            return None;
        }
        let s = self.val.get(4..)?;
        std::str::from_utf8(s.strip_suffix(b"\0")?).ok()
    }

    /// An embedded document or array.
    pub fn as_doc(&self) -> Option<Doc<'a>> {
        if !matches!(self.ty, 0x03 | 0x04) {
            return None;
        }
        Doc::at(self.val).map(|(d, _)| d)
    }

    /// A number (double, int32, int64) as an integer; a boolean as 0/1.
    pub fn as_i64(&self) -> Option<i64> {
        Some(match self.ty {
            0x01 => f64::from_le_bytes(self.val.try_into().ok()?) as i64,
            0x10 => i32::from_le_bytes(self.val.try_into().ok()?) as i64,
            0x12 => i64::from_le_bytes(self.val.try_into().ok()?),
            0x08 => self.val[0] as i64,
            _ => return None,
        })
    }

    pub fn is_array(&self) -> bool {
        self.ty == 0x04
    }
}

/// Writes the shape of `doc` to `out`: its keys (operators included) with
/// every literal replaced by `?` (`{name: ?, age: {$gt: ?}}`). An array
/// is written as its first item's shape (`[?]`, `[{a: ?}]`), so `$in` with
/// one value or with ten has the same shape, as a SQL fingerprint folds
/// an `IN` list. Depth and length are bounded: deeper documents are `{…}`,
/// and writing stops past `max` bytes (on a character boundary).
pub fn shape(doc: Doc<'_>, array: bool, out: &mut String, max: usize, depth: u8) {
    if out.len() >= max {
        return;
    }
    if depth >= 16 {
        out.push_str(if array { "[…]" } else { "{…}" });
        return;
    }
    if array {
        out.push('[');
        if let Some(e) = doc.first() {
            elem_shape(e, out, max, depth);
        }
        out.push(']');
        return;
    }
    out.push('{');
    for (i, e) in doc.iter().enumerate() {
        if out.len() >= max {
            break;
        }
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&String::from_utf8_lossy(e.name));
        out.push_str(": ");
        elem_shape(e, out, max, depth);
    }
    out.push('}');
}

fn elem_shape(e: Elem<'_>, out: &mut String, max: usize, depth: u8) {
    match e.as_doc() {
        Some(d) => shape(d, e.is_array(), out, max, depth + 1),
        None => out.push('?'),
    }
}

#[cfg(test)]
pub(crate) mod build {
    //! A small BSON writer for tests.

    pub enum V<'a> {
        Str(&'a str),
        I32(i32),
        I64(i64),
        F64(f64),
        Bool(bool),
        Doc(Vec<(&'a str, V<'a>)>),
        Arr(Vec<V<'a>>),
    }

    pub fn doc(fields: &[(&str, V<'_>)]) -> Vec<u8> {
        let mut b = vec![0; 4];
        for (k, v) in fields {
            elem(&mut b, k, v);
        }
        b.push(0);
        let n = b.len() as i32;
        b[..4].copy_from_slice(&n.to_le_bytes());
        b
    }

    fn elem(b: &mut Vec<u8>, k: &str, v: &V<'_>) {
        let (ty, body): (u8, Vec<u8>) = match v {
            V::Str(s) => {
                let mut x = ((s.len() + 1) as i32).to_le_bytes().to_vec();
                x.extend_from_slice(s.as_bytes());
                x.push(0);
                (2, x)
            }
            V::I32(i) => (0x10, i.to_le_bytes().to_vec()),
            V::I64(i) => (0x12, i.to_le_bytes().to_vec()),
            V::F64(f) => (1, f.to_le_bytes().to_vec()),
            V::Bool(t) => (8, vec![*t as u8]),
            V::Doc(f) => (3, doc_of(f)),
            V::Arr(items) => {
                let keys: Vec<String> = (0..items.len()).map(|i| i.to_string()).collect();
                let mut x = vec![0; 4];
                for (k, v) in keys.iter().zip(items) {
                    elem(&mut x, k, v);
                }
                x.push(0);
                let n = x.len() as i32;
                x[..4].copy_from_slice(&n.to_le_bytes());
                (4, x)
            }
        };
        b.push(ty);
        b.extend_from_slice(k.as_bytes());
        b.push(0);
        b.extend_from_slice(&body);
    }

    fn doc_of(f: &[(&str, V<'_>)]) -> Vec<u8> {
        let mut b = vec![0; 4];
        for (k, v) in f {
            elem(&mut b, k, v);
        }
        b.push(0);
        let n = b.len() as i32;
        b[..4].copy_from_slice(&n.to_le_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::build::{doc, V};
    use super::*;

    #[test]
    fn reads_elements_in_place() {
        let b = doc(&[("find", V::Str("users")), ("filter", V::Doc(vec![("age", V::Doc(vec![("$gt", V::I32(30))])), ("name", V::Str("bo"))])), ("limit", V::I64(5)), ("$db", V::Str("app"))]);
        let (d, len) = Doc::at(&b).unwrap();
        assert_eq!(len, b.len());
        let first = d.first().unwrap();
        assert_eq!(first.name, b"find");
        assert_eq!(first.as_str(), Some("users"));
        assert_eq!(d.get("$db").and_then(|e| e.as_str()), Some("app"));
        assert_eq!(d.get("limit").and_then(|e| e.as_i64()), Some(5));
        assert_eq!(d.len(), Some(4));
        let mut s = String::new();
        shape(d.get("filter").unwrap().as_doc().unwrap(), false, &mut s, 4096, 0);
        assert_eq!(s, "{age: {$gt: ?}, name: ?}");
    }

    #[test]
    fn arrays_fold_to_their_first_item() {
        let one = doc(&[("x", V::Doc(vec![("$in", V::Arr(vec![V::I32(1)]))]))]);
        let many = doc(&[("x", V::Doc(vec![("$in", V::Arr(vec![V::I32(1), V::I32(2), V::F64(3.5)]))]))]);
        let (mut a, mut b) = (String::new(), String::new());
        shape(Doc::at(&one).unwrap().0, false, &mut a, 4096, 0);
        shape(Doc::at(&many).unwrap().0, false, &mut b, 4096, 0);
        assert_eq!(a, "{x: {$in: [?]}}");
        assert_eq!(a, b);
    }

    #[test]
    fn a_cut_document_reads_what_is_there() {
        let b = doc(&[("a", V::I32(1)), ("b", V::Str("long enough text")), ("c", V::Bool(true))]);
        let (d, _) = Doc::at(&b[..20]).unwrap();
        assert_eq!(d.first().unwrap().name, b"a");
        assert_eq!(d.len(), None, "cut: no count");
        assert!(d.get("c").is_none());
        // Below the minimum length, or a negative one: no document.
        assert!(Doc::at(&[4, 0, 0, 0, 0]).is_none());
        assert!(Doc::at(&[0xff, 0xff, 0xff, 0xff, 0]).is_none());
        assert!(Doc::at(&[1, 2]).is_none());
    }

    #[test]
    fn malformed_elements_stop_the_walk() {
        // A string whose length runs past the document.
        let mut b = doc(&[("s", V::Str("abc"))]);
        b[7] = 0x7f;
        let (d, _) = Doc::at(&b).unwrap();
        let mut it = d.iter();
        assert!(it.next().is_none());
        assert!(it.cut);
        // An unknown type byte.
        let mut b = doc(&[("s", V::I32(1))]);
        b[4] = 0x42;
        assert_eq!(Doc::at(&b).unwrap().0.len(), None);
    }
}
