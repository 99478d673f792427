//! The Thrift compact protocol, write side only: what the Parquet footer
//! and page headers are encoded in.
//!
//! Rules as written in Apache Thrift's `doc/specs/thrift-compact-protocol.md`:
//! a struct is a sequence of fields ended by a 0 byte; a field header is
//! one byte `delta << 4 | type` when the field id is 1..=15 above the
//! previous one (else the type byte and the id as a zigzag varint); a
//! boolean field carries its value in the type (1 true, 2 false); i16/i32/
//! i64 are zigzag varints; binary and strings are a varint length and the
//! bytes; a list is one byte `size << 4 | element type` when it has fewer
//! than 15 elements (else `0xF0 | type` and the size as a varint).

/// Compact-protocol type ids (the spec's table).
#[derive(Clone, Copy)]
#[repr(u8)]
pub(crate) enum Ty {
    True = 1,
    False = 2,
    I8 = 3,
    I16 = 4,
    I32 = 5,
    I64 = 6,
    Binary = 8,
    List = 9,
    Struct = 12,
}

/// Writes compact-protocol values into a growing buffer. Structs nest: each
/// `begin` remembers the enclosing struct's last field id until its `end`.
pub(crate) struct Writer<'a> {
    out: &'a mut Vec<u8>,
    last: i16,
    stack: Vec<i16>,
}

impl<'a> Writer<'a> {
    pub(crate) fn new(out: &'a mut Vec<u8>) -> Writer<'a> {
        Writer { out, last: 0, stack: Vec::new() }
    }

    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.out.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.out.push(v as u8);
    }

    fn zigzag(&mut self, v: i64) {
        self.varint(((v << 1) ^ (v >> 63)) as u64);
    }

    fn field(&mut self, id: i16, ty: u8) {
        let delta = id - self.last;
        if (1..=15).contains(&delta) {
            self.out.push(((delta as u8) << 4) | ty);
        } else {
            self.out.push(ty);
            self.zigzag(id as i64);
        }
        self.last = id;
    }

    pub(crate) fn i32(&mut self, id: i16, v: i32) {
        self.field(id, Ty::I32 as u8);
        self.zigzag(v as i64);
    }

    pub(crate) fn i64(&mut self, id: i16, v: i64) {
        self.field(id, Ty::I64 as u8);
        self.zigzag(v);
    }

    pub(crate) fn i8(&mut self, id: i16, v: i8) {
        self.field(id, Ty::I8 as u8);
        self.out.push(v as u8);
    }

    pub(crate) fn i16(&mut self, id: i16, v: i16) {
        self.field(id, Ty::I16 as u8);
        self.zigzag(v as i64);
    }

    pub(crate) fn bool(&mut self, id: i16, v: bool) {
        self.field(id, if v { Ty::True } else { Ty::False } as u8);
    }

    pub(crate) fn binary(&mut self, id: i16, v: &[u8]) {
        self.field(id, Ty::Binary as u8);
        self.varint(v.len() as u64);
        self.out.extend_from_slice(v);
    }

    /// Opens a struct-valued field; its fields follow, then [`Writer::end`].
    pub(crate) fn begin(&mut self, id: i16) {
        self.field(id, Ty::Struct as u8);
        self.open();
    }

    /// Opens a struct that is an element of a list.
    pub(crate) fn open(&mut self) {
        self.stack.push(self.last);
        self.last = 0;
    }

    /// Ends the innermost open struct.
    pub(crate) fn end(&mut self) {
        self.out.push(0);
        self.last = self.stack.pop().unwrap_or(0);
    }

    /// A list-valued field's header: `n` elements of type `elem` follow
    /// (written with the `elem_*` methods, or `open`/`end` for structs).
    pub(crate) fn list(&mut self, id: i16, elem: Ty, n: usize) {
        self.field(id, Ty::List as u8);
        if n < 15 {
            self.out.push(((n as u8) << 4) | elem as u8);
        } else {
            self.out.push(0xF0 | elem as u8);
            self.varint(n as u64);
        }
    }

    pub(crate) fn elem_i32(&mut self, v: i32) {
        self.zigzag(v as i64);
    }

    pub(crate) fn elem_binary(&mut self, v: &[u8]) {
        self.varint(v.len() as u64);
        self.out.extend_from_slice(v);
    }

    /// Ends the top-level struct.
    pub(crate) fn finish(mut self) {
        self.out.push(0);
        self.last = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Byte for byte what the compact protocol specifies.
    #[test]
    fn encodes_as_the_spec_says() {
        let mut out = Vec::new();
        let mut w = Writer::new(&mut out);
        w.i32(1, 3); // delta 1, type 5, zigzag(3) = 6
        w.i64(3, -1); // delta 2, type 6, zigzag(-1) = 1
        w.bool(4, true); // delta 1, type 1
        w.binary(20, b"ab"); // delta 16: long form, id zigzag(20) = 40
        w.begin(21); // delta 1, struct
        w.i32(1, 64); // zigzag(64) = 128: two varint bytes
        w.end();
        w.list(22, Ty::I32, 2);
        w.elem_i32(0);
        w.elem_i32(-2);
        w.list(23, Ty::Binary, 15); // long list header
        for _ in 0..15 {
            w.elem_binary(b"");
        }
        w.finish();
        let mut want = vec![0x15, 6, 0x26, 1, 0x11, 0x08, 40, 2, b'a', b'b', 0x1C, 0x15, 0x80, 0x01, 0, 0x19, 0x25, 0, 3];
        want.extend([0x19, 0xF8, 15]);
        want.extend([0u8; 15]);
        want.push(0);
        assert_eq!(out, want);
    }
}
