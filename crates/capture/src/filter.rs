//! tcpdump filters on packets read from files (`read -f`): the expression is
//! compiled by libpcap (see [`crate::bpf`]) once per link type met, and the
//! classic BPF program is run here, in Rust, on each packet: no call into C
//! per packet.
//!
//! The interpreter follows libpcap's `pcap_offline_filter` (what `tcpdump -r`
//! runs): loads past the captured bytes reject the packet, `len` is the
//! length on the wire, division by zero rejects. Programs are checked once
//! when loaded (opcodes known, jumps inside the program, scratch slots in
//! range, the last instruction a return), so running one cannot fail and
//! always ends: classic BPF jumps only forward.

use crate::bpf::{compile_dlt, dlt_of_linktype};
use crate::{CaptureError, ErrorKind};

/// What one instruction does, decoded once from the opcode so the packet loop
/// does a single match per instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    LdImm,
    LdAbsW,
    LdAbsH,
    LdAbsB,
    LdIndW,
    LdIndH,
    LdIndB,
    LdLen,
    LdMem,
    LdxImm,
    LdxMem,
    LdxLen,
    LdxMsh,
    St,
    Stx,
    Alu(Alu, Src),
    Neg,
    Ja,
    // The comparisons with a constant, what libpcap emits almost always,
    // each its own variant: one dispatch per instruction.
    JeqK,
    JgtK,
    JgeK,
    JsetK,
    JmpX(Cond),
    RetK,
    RetA,
    Tax,
    Txa,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Alu {
    Add,
    Sub,
    Mul,
    Div,
    Or,
    And,
    Lsh,
    Rsh,
    Mod,
    Xor,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cond {
    Eq,
    Gt,
    Ge,
    Set,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Src {
    K,
    X,
}

#[derive(Debug, Clone, Copy)]
struct Insn {
    op: Op,
    jt: u8,
    jf: u8,
    k: u32,
}

/// A checked classic BPF program.
#[derive(Debug, Clone)]
pub struct Program {
    insns: Box<[Insn]>,
}

const MEM_WORDS: u32 = 16;

impl Program {
    /// Checks and decodes a program as libpcap's `bpf_validate` does.
    pub fn new(code: &[libc::sock_filter]) -> Result<Program, String> {
        if code.is_empty() {
            return Err("empty program".into());
        }
        let n = code.len();
        let mut insns = Vec::with_capacity(n);
        for (pc, i) in code.iter().enumerate() {
            let src = if i.code & 0x08 != 0 { Src::X } else { Src::K };
            let bad = || format!("instruction {pc}: unsupported opcode {:#06x}", i.code);
            let op = match i.code & 0x07 {
                0x00 => match i.code & 0xe0 {
                    0x00 => Op::LdImm,
                    0x20 => match i.code & 0x18 {
                        0x00 => Op::LdAbsW,
                        0x08 => Op::LdAbsH,
                        0x10 => Op::LdAbsB,
                        _ => return Err(bad()),
                    },
                    0x40 => match i.code & 0x18 {
                        0x00 => Op::LdIndW,
                        0x08 => Op::LdIndH,
                        0x10 => Op::LdIndB,
                        _ => return Err(bad()),
                    },
                    0x60 => Op::LdMem,
                    0x80 => Op::LdLen,
                    _ => return Err(bad()),
                },
                0x01 => match i.code & 0xe0 {
                    0x00 => Op::LdxImm,
                    0x60 => Op::LdxMem,
                    0x80 => Op::LdxLen,
                    0xa0 => Op::LdxMsh,
                    _ => return Err(bad()),
                },
                0x02 => Op::St,
                0x03 => Op::Stx,
                0x04 => {
                    let alu = match i.code & 0xf0 {
                        0x00 => Alu::Add,
                        0x10 => Alu::Sub,
                        0x20 => Alu::Mul,
                        0x30 => Alu::Div,
                        0x40 => Alu::Or,
                        0x50 => Alu::And,
                        0x60 => Alu::Lsh,
                        0x70 => Alu::Rsh,
                        0x80 => {
                            insns.push(Insn {
                                op: Op::Neg,
                                jt: 0,
                                jf: 0,
                                k: 0,
                            });
                            continue;
                        }
                        0x90 => Alu::Mod,
                        0xa0 => Alu::Xor,
                        _ => return Err(bad()),
                    };
                    if src == Src::K && i.k == 0 && matches!(alu, Alu::Div | Alu::Mod) {
                        return Err(format!("instruction {pc}: division by constant zero"));
                    }
                    Op::Alu(alu, src)
                }
                0x05 => {
                    let cond = match i.code & 0xf0 {
                        0x00 => {
                            if (i.k as usize) >= n - pc - 1 {
                                return Err(format!("instruction {pc}: jump out of the program"));
                            }
                            insns.push(Insn {
                                op: Op::Ja,
                                jt: 0,
                                jf: 0,
                                k: i.k,
                            });
                            continue;
                        }
                        0x10 => Cond::Eq,
                        0x20 => Cond::Gt,
                        0x30 => Cond::Ge,
                        0x40 => Cond::Set,
                        _ => return Err(bad()),
                    };
                    if pc + 1 + i.jt.max(i.jf) as usize >= n {
                        return Err(format!("instruction {pc}: jump out of the program"));
                    }
                    match (cond, src) {
                        (Cond::Eq, Src::K) => Op::JeqK,
                        (Cond::Gt, Src::K) => Op::JgtK,
                        (Cond::Ge, Src::K) => Op::JgeK,
                        (Cond::Set, Src::K) => Op::JsetK,
                        (c, Src::X) => Op::JmpX(c),
                    }
                }
                0x06 => match i.code & 0x18 {
                    0x00 => Op::RetK,
                    0x10 => Op::RetA,
                    _ => return Err(bad()),
                },
                _ => match i.code & 0xf8 {
                    0x00 => Op::Tax,
                    0x80 => Op::Txa,
                    _ => return Err(bad()),
                },
            };
            if matches!(op, Op::LdMem | Op::LdxMem | Op::St | Op::Stx) && i.k >= MEM_WORDS {
                return Err(format!(
                    "instruction {pc}: scratch slot {} out of range",
                    i.k
                ));
            }
            insns.push(Insn {
                op,
                jt: i.jt,
                jf: i.jf,
                k: i.k,
            });
        }
        if !matches!(insns[n - 1].op, Op::RetK | Op::RetA) {
            return Err("the program does not end with a return".into());
        }
        Ok(Program {
            insns: insns.into_boxed_slice(),
        })
    }

    /// Runs the program on a packet's captured bytes (`wire_len`: its length
    /// on the wire, what `len` loads): non-zero keeps the packet.
    #[inline]
    pub fn run(&self, pkt: &[u8], wire_len: u32) -> u32 {
        let (mut a, mut x) = (0u32, 0u32);
        let mut mem = [0u32; MEM_WORDS as usize];
        let insns = &*self.insns;
        let mut pc = 0usize;
        loop {
            // In range: checked by `new` (forward jumps, last is a return).
            let i = insns[pc];
            pc += 1;
            match i.op {
                Op::LdImm => a = i.k,
                Op::LdAbsW => match load::<4>(pkt, i.k as usize) {
                    Some(v) => a = v,
                    None => return 0,
                },
                Op::LdAbsH => match load::<2>(pkt, i.k as usize) {
                    Some(v) => a = v,
                    None => return 0,
                },
                Op::LdAbsB => match pkt.get(i.k as usize) {
                    Some(&v) => a = v as u32,
                    None => return 0,
                },
                Op::LdIndW => match load::<4>(pkt, x as usize + i.k as usize) {
                    Some(v) => a = v,
                    None => return 0,
                },
                Op::LdIndH => match load::<2>(pkt, x as usize + i.k as usize) {
                    Some(v) => a = v,
                    None => return 0,
                },
                Op::LdIndB => match pkt.get(x as usize + i.k as usize) {
                    Some(&v) => a = v as u32,
                    None => return 0,
                },
                Op::LdLen => a = wire_len,
                Op::LdMem => a = mem[(i.k & (MEM_WORDS - 1)) as usize],
                Op::LdxImm => x = i.k,
                Op::LdxMem => x = mem[(i.k & (MEM_WORDS - 1)) as usize],
                Op::LdxLen => x = wire_len,
                Op::LdxMsh => match pkt.get(i.k as usize) {
                    Some(&b) => x = ((b & 0x0f) as u32) << 2,
                    None => return 0,
                },
                Op::St => mem[(i.k & (MEM_WORDS - 1)) as usize] = a,
                Op::Stx => mem[(i.k & (MEM_WORDS - 1)) as usize] = x,
                Op::Alu(op, src) => {
                    let v = if src == Src::X { x } else { i.k };
                    a = match op {
                        Alu::Add => a.wrapping_add(v),
                        Alu::Sub => a.wrapping_sub(v),
                        Alu::Mul => a.wrapping_mul(v),
                        Alu::Div if v == 0 => return 0,
                        Alu::Div => a / v,
                        Alu::Mod if v == 0 => return 0,
                        Alu::Mod => a % v,
                        Alu::Or => a | v,
                        Alu::And => a & v,
                        Alu::Xor => a ^ v,
                        Alu::Lsh => a.checked_shl(v).unwrap_or(0),
                        Alu::Rsh => a.checked_shr(v).unwrap_or(0),
                    }
                }
                Op::Neg => a = a.wrapping_neg(),
                Op::Ja => pc += i.k as usize,
                Op::JeqK => pc += if a == i.k { i.jt } else { i.jf } as usize,
                Op::JgtK => pc += if a > i.k { i.jt } else { i.jf } as usize,
                Op::JgeK => pc += if a >= i.k { i.jt } else { i.jf } as usize,
                Op::JsetK => pc += if a & i.k != 0 { i.jt } else { i.jf } as usize,
                Op::JmpX(cond) => {
                    let taken = match cond {
                        Cond::Eq => a == x,
                        Cond::Gt => a > x,
                        Cond::Ge => a >= x,
                        Cond::Set => a & x != 0,
                    };
                    pc += if taken { i.jt } else { i.jf } as usize;
                }
                Op::RetK => return i.k,
                Op::RetA => return a,
                Op::Tax => x = a,
                Op::Txa => a = x,
            }
        }
    }
}

/// A big-endian load of N (2 or 4) bytes at `off`, None past the captured bytes.
#[inline(always)]
fn load<const N: usize>(pkt: &[u8], off: usize) -> Option<u32> {
    let b: &[u8; N] = pkt.get(off..off.checked_add(N)?)?.try_into().ok()?;
    Some(b.iter().fold(0u32, |v, &c| (v << 8) | c as u32))
}

/// Snaplen given to libpcap when compiling: the accept value only, which a
/// file filter does not use beyond "non-zero".
const COMPILE_SNAPLEN: u32 = 262_144;

/// One tcpdump expression for packets of any link type: compiled the first
/// time a link type is met (pcapng files may mix them).
#[derive(Debug)]
pub struct FileFilter {
    expr: String,
    /// Per LINKTYPE_* value, the program or why the expression does not
    /// apply to that link type (its packets then never match).
    programs: Vec<(u32, Result<Program, String>)>,
    /// Index into `programs` of the last link type seen.
    last: usize,
}

impl FileFilter {
    /// Checks that libpcap is there and the expression parses (for Ethernet).
    pub fn new(expr: &str) -> Result<FileFilter, CaptureError> {
        let mut f = FileFilter {
            expr: expr.trim().to_string(),
            programs: Vec::new(),
            last: 0,
        };
        if f.expr.is_empty() {
            return Err(CaptureError::new(
                ErrorKind::Filter,
                "empty filter expression",
            ));
        }
        f.prepare(1)?;
        Ok(f)
    }

    pub fn expression(&self) -> &str {
        &self.expr
    }

    /// Compiles the expression for a link type; the error says why it does
    /// not apply (e.g. `ether host` on raw IP packets).
    pub fn prepare(&mut self, linktype: u32) -> Result<(), CaptureError> {
        let i = self.index(linktype);
        match &self.programs[i].1 {
            Ok(_) => Ok(()),
            Err(m) => Err(CaptureError::new(ErrorKind::Filter, m.clone())),
        }
    }

    /// Link types met whose packets the expression could not be compiled
    /// for, with libpcap's reason.
    pub fn failures(&self) -> impl Iterator<Item = (u32, &str)> {
        self.programs
            .iter()
            .filter_map(|(lt, r)| r.as_ref().err().map(|m| (*lt, m.as_str())))
    }

    fn index(&mut self, linktype: u32) -> usize {
        if let Some(i) = self.programs.iter().position(|(lt, _)| *lt == linktype) {
            return i;
        }
        let prog = compile_dlt(&self.expr, dlt_of_linktype(linktype), COMPILE_SNAPLEN)
            .map_err(|e| format!("{} (link type {linktype})", e.message))
            .and_then(|code| {
                Program::new(&code)
                    .map_err(|m| format!("filter '{}': libpcap's program: {m}", self.expr))
            });
        self.programs.push((linktype, prog));
        self.programs.len() - 1
    }

    /// Whether the packet passes the filter.
    #[inline]
    pub fn matches(&mut self, linktype: u32, pkt: &[u8], wire_len: u32) -> bool {
        if self
            .programs
            .get(self.last)
            .is_none_or(|(lt, _)| *lt != linktype)
        {
            self.last = self.index(linktype);
        }
        match &self.programs[self.last].1 {
            Ok(p) => p.run(pkt, wire_len) != 0,
            Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf;

    fn ins(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
        libc::sock_filter { code, jt, jf, k }
    }

    #[test]
    fn rejects_what_bpf_validate_rejects() {
        assert!(Program::new(&[]).is_err());
        // ld #1 with no return.
        assert!(Program::new(&[ins(0x00, 0, 0, 1)]).is_err());
        // jeq jumping past the end.
        assert!(Program::new(&[ins(0x15, 5, 0, 1), ins(0x06, 0, 0, 1)]).is_err());
        // ja past the end.
        assert!(Program::new(&[ins(0x05, 0, 0, 1), ins(0x06, 0, 0, 1)]).is_err());
        // st M[16].
        assert!(Program::new(&[ins(0x02, 0, 0, 16), ins(0x06, 0, 0, 1)]).is_err());
        // div #0.
        assert!(Program::new(&[ins(0x34, 0, 0, 0), ins(0x06, 0, 0, 1)]).is_err());
        // An opcode class 7 with unknown bits.
        assert!(Program::new(&[ins(0x07 | 0x40, 0, 0, 0), ins(0x06, 0, 0, 1)]).is_err());
    }

    #[test]
    fn loads_past_the_captured_bytes_reject_and_len_is_the_wire_length() {
        // ld [10]; ret a
        let p = Program::new(&[ins(0x20, 0, 0, 10), ins(0x16, 0, 0, 0)]).unwrap();
        assert_eq!(p.run(&[0u8; 13], 100), 0, "needs bytes 10..14");
        let mut pkt = [0u8; 14];
        pkt[10..14].copy_from_slice(&7u32.to_be_bytes());
        assert_eq!(p.run(&pkt, 100), 7);
        // ld len; ret a
        let p = Program::new(&[ins(0x80, 0, 0, 0), ins(0x16, 0, 0, 0)]).unwrap();
        assert_eq!(p.run(&[0u8; 10], 1500), 1500);
        // ldx #0; div x; ret #1: division by zero rejects.
        let p =
            Program::new(&[ins(0x01, 0, 0, 0), ins(0x3c, 0, 0, 0), ins(0x06, 0, 0, 1)]).unwrap();
        assert_eq!(p.run(&[], 0), 0);
    }

    #[test]
    fn agrees_with_the_reference_interpreter() {
        let exprs = [
            "tcp port 80",
            "udp and len > 100",
            "ip[8] < 64",
            "tcp[tcpflags] & tcp-syn != 0",
        ];
        let mut frames: Vec<Vec<u8>> = Vec::new();
        for seed in 0u32..64 {
            let mut f = vec![0u8; 12];
            f.extend_from_slice(&0x0800u16.to_be_bytes());
            let proto = if seed % 2 == 0 { 6 } else { 17 };
            f.extend_from_slice(&[
                0x45,
                0,
                0,
                60,
                0,
                0,
                0,
                0,
                (seed * 7) as u8,
                proto,
                0,
                0,
                10,
                0,
                0,
                1,
                10,
                0,
                0,
                2,
            ]);
            f.extend_from_slice(&((1000 + seed) as u16).to_be_bytes());
            f.extend_from_slice(&(if seed % 3 == 0 { 80u16 } else { 443 }).to_be_bytes());
            f.extend_from_slice(&[
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0x50,
                (seed % 32) as u8,
                0,
                0,
                0,
                0,
                0,
                0,
            ]);
            f.resize(14 + 40 + (seed as usize * 5) % 90, 0);
            frames.push(f);
        }
        for e in exprs {
            let Ok(code) = bpf::compile_dlt(e, 1, COMPILE_SNAPLEN) else {
                eprintln!("SKIPPED: libpcap not installed");
                return;
            };
            let p = Program::new(&code).unwrap();
            for f in &frames {
                for cut in [f.len(), 30, 14] {
                    let got = p.run(&f[..cut], f.len() as u32);
                    let want = bpf::run(&code, &f[..cut]);
                    // The reference loads `len` as the captured length.
                    if cut == f.len() {
                        assert_eq!(got, want, "{e}");
                    } else {
                        assert!(want == 0 || got != 0 || e.contains("len"), "{e}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_filter_that_does_not_fit_a_link_type_matches_none_of_its_packets() {
        let Ok(mut f) = FileFilter::new("ether host 00:11:22:33:44:55") else {
            eprintln!("SKIPPED: libpcap not installed");
            return;
        };
        assert!(f.prepare(101).is_err(), "no Ethernet header on raw IP");
        assert!(!f.matches(101, &[0x45; 40], 40));
        assert_eq!(f.failures().count(), 1);
        assert!(FileFilter::new("port eighty").is_err());
        assert!(FileFilter::new("  ").is_err());
    }
}
