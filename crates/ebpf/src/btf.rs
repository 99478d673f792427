//! Offsets of kernel struct members from the kernel's own type information
//! (BTF, /sys/kernel/btf/vmlinux), so a program that reads kernel memory
//! follows this kernel's layout instead of a hard-coded one.
//!
//! Only what offsets need is read: the type section's structs and unions
//! and their members; other kinds are skipped by their known sizes
//! (`include/uapi/linux/btf.h`).

use std::collections::HashMap;

use crate::Error;

const MAGIC: u16 = 0xeb9f;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_TYPEDEF: u32 = 8;

#[derive(Debug, Clone)]
struct Member {
    name: String,
    type_id: u32,
    /// Offset from the start of the enclosing type, in bits.
    bit_offset: u32,
}

#[derive(Debug, Clone)]
enum Type {
    Composite { members: Vec<Member> },
    Typedef { to: u32 },
    Other,
}

/// The structs and unions of one BTF blob.
pub struct Btf {
    /// Index = type id (0 is `void`).
    types: Vec<Type>,
    by_name: HashMap<String, u32>,
}

impl Btf {
    /// The running kernel's types.
    pub fn kernel() -> Result<Btf, Error> {
        let path = "/sys/kernel/btf/vmlinux";
        let data = std::fs::read(path).map_err(|e| Error::sys(format!("reading {path} (kernel without BTF?)"), e))?;
        Btf::parse(&data).map_err(|e| Error::other(format!("{path}: {e}")))
    }

    pub fn parse(data: &[u8]) -> Result<Btf, String> {
        let u16_at = |o: usize| data.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
        let u32_at = |o: usize| data.get(o..o + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        if u16_at(0) != Some(MAGIC) {
            return Err("not little-endian BTF (bad magic)".into());
        }
        let field = |o| u32_at(o).ok_or("short header").map(|v| v as usize);
        let hdr_len = field(4)?;
        let (type_off, type_len, str_off, str_len) = (field(8)?, field(12)?, field(16)?, field(20)?);
        let types_at = hdr_len + type_off;
        let strs_at = hdr_len + str_off;
        if data.len() < types_at + type_len || data.len() < strs_at + str_len {
            return Err("sections beyond the end of the data".into());
        }
        let strs = &data[strs_at..strs_at + str_len];
        let name = |off: u32| -> String {
            let s = strs.get(off as usize..).unwrap_or(&[]);
            let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
            String::from_utf8_lossy(&s[..end]).into_owned()
        };
        let mut types = vec![Type::Other];
        let mut by_name = HashMap::new();
        let mut typedefs = HashMap::new();
        let mut o = types_at;
        let end = types_at + type_len;
        while o + 12 <= end {
            let name_off = u32_at(o).unwrap();
            let info = u32_at(o + 4).unwrap();
            let size_or_type = u32_at(o + 8).unwrap();
            let vlen = (info & 0xffff) as usize;
            let kind = (info >> 24) & 0x1f;
            let kind_flag = info >> 31 == 1;
            o += 12;
            let extra = match kind {
                1 | 14 | 17 => 4,         // int, var, decl_tag
                3 => 12,                  // array
                4 | 5 => 12 * vlen,       // struct, union: members
                6 | 13 => 8 * vlen,       // enum, func_proto
                15 | 19 => 12 * vlen,     // datasec, enum64
                2 | 7..=12 | 16 | 18 => 0, // ptr, fwd, typedef, qualifiers, func, float, type_tag
                k => return Err(format!("unknown BTF kind {k} at type {}", types.len())),
            };
            if o + extra > end {
                return Err("a type runs past the type section".into());
            }
            let t = match kind {
                KIND_STRUCT | KIND_UNION => {
                    let members = (0..vlen)
                        .map(|i| {
                            let m = o + 12 * i;
                            let off = u32_at(m + 8).unwrap();
                            Member {
                                name: name(u32_at(m).unwrap()),
                                type_id: u32_at(m + 4).unwrap(),
                                // With kind_flag the top 8 bits are a bitfield's size.
                                bit_offset: if kind_flag { off & 0xff_ffff } else { off },
                            }
                        })
                        .collect();
                    let n = name(name_off);
                    if !n.is_empty() {
                        // The first definition wins (names are unique in vmlinux).
                        by_name.entry(n).or_insert(types.len() as u32);
                    }
                    Type::Composite { members }
                }
                KIND_TYPEDEF => {
                    // `typedef struct { ... } possible_net_t;`: found by the
                    // typedef's name when no struct has it.
                    let n = name(name_off);
                    if !n.is_empty() {
                        typedefs.entry(n).or_insert(types.len() as u32);
                    }
                    Type::Typedef { to: size_or_type }
                }
                _ => Type::Other,
            };
            types.push(t);
            o += extra;
        }
        for (n, id) in typedefs {
            by_name.entry(n).or_insert(id);
        }
        Ok(Btf { types, by_name })
    }

    /// Byte offset of `member` in struct or union `ty`, looking inside
    /// anonymous struct/union members (`sock_common`'s unions) as C does.
    pub fn member_offset(&self, ty: &str, member: &str) -> Result<usize, Error> {
        let id = *self.by_name.get(ty).ok_or_else(|| Error::other(format!("kernel BTF has no struct {ty}")))?;
        self.find(id, member)
            .map(|bits| bits as usize / 8)
            .ok_or_else(|| Error::other(format!("kernel BTF: struct {ty} has no member {member}")))
    }

    fn find(&self, id: u32, member: &str) -> Option<u32> {
        let mut id = id;
        while let Some(Type::Typedef { to }) = self.types.get(id as usize) {
            id = *to;
        }
        let Some(Type::Composite { members, .. }) = self.types.get(id as usize) else {
            return None;
        };
        for m in members {
            if m.name == member {
                return Some(m.bit_offset);
            }
        }
        for m in members.iter().filter(|m| m.name.is_empty()) {
            if let Some(inner) = self.find(m.type_id, member) {
                return Some(m.bit_offset + inner);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-made blob: `struct outer { int a; union { int b; int c; }; }`
    /// with `c` at bit 32 + 0 and `a` at 0.
    fn blob() -> Vec<u8> {
        let strs = b"\0int\0outer\0a\0b\0c\0".to_vec();
        let (int, outer, a, b, c) = (1u32, 5u32, 11u32, 13u32, 15u32);
        let mut t = Vec::new();
        let push = |t: &mut Vec<u8>, vals: &[u32]| vals.iter().for_each(|v| t.extend_from_slice(&v.to_le_bytes()));
        // 1: int (kind 1), 4 bytes, encoding word
        push(&mut t, &[int, 1 << 24, 4, 32]);
        // 2: anonymous union (kind 5), 2 members b, c at 0
        push(&mut t, &[0, (5 << 24) | 2, 4, b, 1, 0, c, 1, 0]);
        // 3: struct outer (kind 4), members a at 0, anonymous union at 32 bits
        push(&mut t, &[outer, (4 << 24) | 2, 8, a, 1, 0, 0, 2, 32]);
        // 4: typedef "a" -> 3 (kind 8)
        push(&mut t, &[a, 8 << 24, 3]);
        let mut d = Vec::new();
        d.extend_from_slice(&MAGIC.to_le_bytes());
        d.extend_from_slice(&[1, 0]);
        for v in [24u32, 0, t.len() as u32, t.len() as u32, strs.len() as u32] {
            d.extend_from_slice(&v.to_le_bytes());
        }
        d.extend_from_slice(&t);
        d.extend_from_slice(&strs);
        d
    }

    #[test]
    fn members_are_found_in_anonymous_unions() {
        let b = Btf::parse(&blob()).unwrap();
        assert_eq!(b.member_offset("outer", "a").unwrap(), 0);
        assert_eq!(b.member_offset("outer", "c").unwrap(), 4);
        assert!(b.member_offset("outer", "d").is_err());
        assert_eq!(b.member_offset("a", "c").unwrap(), 4, "through the typedef");
        assert!(b.member_offset("inner", "a").is_err());
        assert!(Btf::parse(&[0, 0, 0, 0]).is_err());
    }

    #[test]
    fn the_running_kernel_describes_sockets() {
        let Ok(b) = Btf::kernel() else {
            eprintln!("SKIPPED: no /sys/kernel/btf/vmlinux");
            return;
        };
        // `skc_net` follows the address pair, hash, ports, family, state,
        // flags, bound interface, bind node and protocol on every 64-bit
        // kernel since 4.x.
        assert_eq!(b.member_offset("sock_common", "skc_net").unwrap(), 48);
        assert_eq!(b.member_offset("sock_common", "skc_dport").unwrap(), 12);
        assert!(b.member_offset("ns_common", "inum").is_ok());
        assert_eq!(b.member_offset("possible_net_t", "net").unwrap(), 0, "a typedef of an anonymous struct");
    }
}
