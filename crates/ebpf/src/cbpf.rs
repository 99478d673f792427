//! Classic BPF (`struct sock_filter`, what libpcap compiles a tcpdump
//! expression to) translated to eBPF, so that one eBPF socket filter can
//! run the user's `-f` expression and more.
//!
//! The mapping is the kernel's own, read from `net/core/filter.c`
//! (`bpf_convert_filter`, Linux 6.x; the comments below name its cases):
//! `A` lives in `r0` and `X` in `r7`; the 32-bit ALU operations map to
//! `BPF_ALU` (32-bit) with the same opcode; `M[k]` is the stack word at
//! `r10 - 4k - 4`; `A = K`/`X = K` are 32-bit moves; `TAX`/`TXA` moves;
//! `LEN` reads `skb->len`; `DIV`/`MOD` by `X` return 0 when `X` is 0
//! ("For cBPF programs, this was always return 0"); `ldxb 4*([k]&0xf)`
//! (MSH) is a byte load, `& 0xf`, `<< 2`, with `A` kept through it in the
//! temporary `r2`. Where we differ from the kernel, and why:
//!
//! - Packet loads use the socket-filter instructions `BPF_LD | BPF_ABS` and
//!   `BPF_LD | BPF_IND` (which the verifier admits for this program type
//!   and rewrites into its own bounded loads; a load outside the packet
//!   ends the program with 0, as in classic BPF), not the kernel's
//!   internal `skb->data` loads, which a loaded program may not do.
//! - Conditional jumps are `BPF_JMP32`: they compare the low 32 bits, so an
//!   immediate with its top bit set needs no move into a temporary (the
//!   kernel's `(int) fp->k < 0` case), the comparison being unsigned on
//!   32 bits as in classic BPF. The kernel's shapes are kept: one jump when
//!   `jf` is 0; the inverted condition when `jt` is 0 (`JEQ`/`JGT`/`JGE`
//!   to `JNE`/`JLE`/`JLT`); else the jump and a `JA`.
//! - Every `M[k]` that is read is zeroed first, and `A` and `X` are set to
//!   0 (the kernel's prologue does the latter): the verifier refuses reads
//!   of registers and stack it cannot prove written, and classic programs
//!   pass the classic checker's `check_load_and_stores` anyway.
//! - Ancillary loads (`SKF_AD_OFF + n`: protocol, VLAN tag, ...) are not
//!   translated: libpcap emits them only on live handles, and wirelog
//!   compiles on dead ones (see `capture::bpf`). They are an error naming
//!   the instruction.
//! - A `RET` does not exit: it sets `r0` and jumps past the block, so the
//!   block can be followed by more code ([`translate`]); [`program`] adds
//!   the exit for a stand-alone filter.

use crate::insn::{Alu, Cond, Insn, Reg, Size};
use crate::AsmError;

/// A classic instruction as `linux/filter.h` declares it.
pub type SockFilter = libc::sock_filter;

// Classic instruction classes and fields (`linux/bpf_common.h`).
const C_LD: u16 = 0x00;
const C_LDX: u16 = 0x01;
const C_ST: u16 = 0x02;
const C_STX: u16 = 0x03;
const C_ALU: u16 = 0x04;
const C_JMP: u16 = 0x05;
const C_RET: u16 = 0x06;
const C_MISC: u16 = 0x07;
const M_IMM: u16 = 0x00;
const M_ABS: u16 = 0x20;
const M_IND: u16 = 0x40;
const M_MEM: u16 = 0x60;
const M_LEN: u16 = 0x80;
const M_MSH: u16 = 0xa0;
const SRC_X: u16 = 0x08;
/// `BPF_RVAL`: `BPF_A` as the returned value.
const RET_A: u16 = 0x10;
/// `SKF_AD_OFF`: absolute loads at or above it are ancillary data.
const SKF_AD_OFF: i32 = -0x1000;
/// Classic scratch memory: 16 words.
pub const MEMWORDS: u32 = 16;
/// The largest classic program the kernel takes (`BPF_MAXINSNS`).
pub const MAXINSNS: usize = 4096;

/// `struct __sk_buff` `len`, the only context field the translation reads.
const SKB_LEN: i16 = 0;

const A: Reg = Reg::R0;
const X: Reg = Reg::R7;
const TMP: Reg = Reg::R2;

/// Where a translated jump goes: a classic instruction, or past the block.
#[derive(Clone, Copy)]
enum Target {
    Classic(usize),
    End,
}

/// The stack offset of `M[k]` (as the kernel places it).
fn mem_off(k: u32) -> i16 {
    -(k as i16) * 4 - 4
}

fn size_of(code: u16) -> Size {
    match code & 0x18 {
        0x00 => Size::W,
        0x08 => Size::H,
        _ => Size::B,
    }
}

/// Translates `prog` into a block of eBPF instructions that expects the
/// socket buffer (`struct __sk_buff *`) in `r6`, clobbers `r0`-`r5`, `r7`
/// and the 64 bytes of stack below `r10`, and ends (falling through past
/// its last instruction) with the classic program's return value in `r0`:
/// 0 to drop the packet, else the bytes to keep. A packet load outside
/// the packet ends the whole program with 0, as in classic BPF.
pub fn translate(prog: &[SockFilter]) -> Result<Vec<Insn>, AsmError> {
    if prog.is_empty() || prog.len() > MAXINSNS {
        return Err(AsmError(format!("a classic BPF program of {} instructions (1 to {MAXINSNS})", prog.len())));
    }
    let bad = |at: usize, why: &str| {
        let i = &prog[at];
        AsmError(format!("classic BPF instruction {at} {{ code: {:#06x}, jt: {}, jf: {}, k: {:#x} }}: {why}", i.code, i.jt, i.jf, i.k))
    };
    if prog[prog.len() - 1].code & 0x07 != C_RET {
        return Err(bad(prog.len() - 1, "the last instruction is not a return"));
    }
    let mut out: Vec<Insn> = Vec::with_capacity(prog.len() * 2 + 8);
    // Prologue: A = X = 0; every scratch word that is read, zeroed.
    out.push(Insn::alu32_imm(Alu::Mov, A, 0));
    out.push(Insn::alu32_imm(Alu::Mov, X, 0));
    let mut read = 0u16;
    for (at, i) in prog.iter().enumerate() {
        let is_mem_load = matches!(i.code, c if c == C_LD | M_MEM || c == C_LDX | M_MEM);
        let is_mem = is_mem_load || i.code == C_ST || i.code == C_STX;
        if is_mem && i.k >= MEMWORDS {
            return Err(bad(at, "scratch memory beyond M[15]"));
        }
        if is_mem_load {
            read |= 1 << i.k;
        }
    }
    for k in 0..MEMWORDS {
        if read & (1 << k) != 0 {
            out.push(Insn::store_imm(Size::W, Reg::R10, mem_off(k), 0));
        }
    }
    let mut start = vec![0usize; prog.len()];
    // (slot of a jump, where it goes)
    let mut fixups: Vec<(usize, Target)> = Vec::new();
    let jump_to = |at: usize, rel: u32| -> Result<Target, AsmError> {
        let t = at as u64 + 1 + rel as u64;
        if t >= prog.len() as u64 {
            return Err(bad(at, "a jump past the end of the program"));
        }
        Ok(Target::Classic(t as usize))
    };
    // Instructions no path reaches are left out (the verifier refuses
    // unreachable code; libpcap's optimizer leaves none). Classic jumps
    // only go forward, so one pass finds them.
    let mut reached = vec![false; prog.len()];
    reached[0] = true;
    for (at, i) in prog.iter().enumerate() {
        if !reached[at] {
            continue;
        }
        let mut reach = |rel: u32| {
            if let Some(r) = reached.get_mut(at + 1 + rel as usize) {
                *r = true;
            }
        };
        match (i.code & 0x07, i.code & 0xf0) {
            (C_RET, _) => {}
            (C_JMP, 0x00) => reach(i.k),
            (C_JMP, _) => {
                reach(i.jt as u32);
                reach(i.jf as u32);
            }
            _ => reach(0),
        }
    }
    for (at, i) in prog.iter().enumerate() {
        start[at] = out.len();
        if !reached[at] {
            continue;
        }
        let code = i.code;
        let k = i.k as i32;
        match code & 0x07 {
            C_LD | C_LDX => {
                let dst = if code & 0x07 == C_LD { A } else { X };
                match (code & 0x07, code & 0xe0) {
                    // "A = K or X = K"
                    (_, M_IMM) if code & 0x18 == 0 => out.push(Insn::alu32_imm(Alu::Mov, dst, k)),
                    // "Load from stack"
                    (_, M_MEM) if code & 0x18 == 0 => out.push(Insn::load(Size::W, dst, Reg::R10, mem_off(i.k))),
                    // "A = skb->len or X = skb->len"
                    (_, M_LEN) if code & 0x18 == 0 => out.push(Insn::load(Size::W, dst, Reg::R6, SKB_LEN)),
                    (C_LD, M_ABS) | (C_LD, M_IND) if code & 0x18 != 0x18 => {
                        if code & 0xe0 == M_ABS && (SKF_AD_OFF..0).contains(&k) {
                            return Err(bad(at, "an ancillary load (SKF_AD_OFF), which is not translated"));
                        }
                        out.push(if code & 0xe0 == M_ABS { Insn::ld_abs(size_of(code), k) } else { Insn::ld_ind(size_of(code), X, k) });
                    }
                    // "ldxb 4 * ([k] & 0xf)": A is kept in TMP across the load.
                    (C_LDX, M_MSH) if code & 0x18 == 0x10 => {
                        if (SKF_AD_OFF..0).contains(&k) {
                            return Err(bad(at, "an ancillary load (SKF_AD_OFF), which is not translated"));
                        }
                        out.push(Insn::mov64_reg(X, A));
                        out.push(Insn::ld_abs(Size::B, k));
                        out.push(Insn::alu32_imm(Alu::And, A, 0xf));
                        out.push(Insn::alu32_imm(Alu::Lsh, A, 2));
                        out.push(Insn::mov64_reg(TMP, X));
                        out.push(Insn::mov64_reg(X, A));
                        out.push(Insn::mov64_reg(A, TMP));
                    }
                    _ => return Err(bad(at, "not a classic BPF load")),
                }
            }
            // "Store to stack"
            C_ST | C_STX if code & 0xf8 == 0 => {
                let src = if code == C_ST { A } else { X };
                out.push(Insn::store_reg(Size::W, Reg::R10, mem_off(i.k), src));
            }
            C_ALU => {
                let op = code & 0xf0;
                let by_x = code & SRC_X != 0;
                let alu = match op {
                    0x00 => Alu::Add,
                    0x10 => Alu::Sub,
                    0x20 => Alu::Mul,
                    0x30 => Alu::Div,
                    0x40 => Alu::Or,
                    0x50 => Alu::And,
                    0x60 => Alu::Lsh,
                    0x70 => Alu::Rsh,
                    0x80 => Alu::Neg,
                    0x90 => Alu::Mod,
                    0xa0 => Alu::Xor,
                    _ => return Err(bad(at, "not a classic BPF ALU operation")),
                };
                match alu {
                    Alu::Neg if by_x => return Err(bad(at, "not a classic BPF ALU operation")),
                    Alu::Neg => out.push(Insn::alu32_imm(Alu::Neg, A, 0)),
                    Alu::Div | Alu::Mod if !by_x && i.k == 0 => return Err(bad(at, "division by zero")),
                    Alu::Lsh | Alu::Rsh if !by_x && i.k >= 32 => return Err(bad(at, "a shift by 32 or more")),
                    // "Error with exception code on div/mod by 0": return 0.
                    Alu::Div | Alu::Mod if by_x => {
                        out.push(Insn::jmp32_imm(Cond::Ne, X, 0, 2));
                        out.push(Insn::alu32_imm(Alu::Mov, A, 0));
                        fixups.push((out.len(), Target::End));
                        out.push(Insn::jmp_imm(Cond::Ja, Reg::R0, 0, 0));
                        out.push(Insn::alu32_reg(alu, A, X));
                    }
                    _ if by_x => out.push(Insn::alu32_reg(alu, A, X)),
                    _ => out.push(Insn::alu32_imm(alu, A, k)),
                }
            }
            C_JMP => {
                let op = code & 0xf0;
                let by_x = code & SRC_X != 0;
                if op == 0x00 {
                    if by_x {
                        return Err(bad(at, "not a classic BPF jump"));
                    }
                    fixups.push((out.len(), jump_to(at, i.k)?));
                    out.push(Insn::jmp_imm(Cond::Ja, Reg::R0, 0, 0));
                    continue;
                }
                let (cond, inverse) = match op {
                    0x10 => (Cond::Eq, Some(Cond::Ne)),
                    0x20 => (Cond::Gt, Some(Cond::Le)),
                    0x30 => (Cond::Ge, Some(Cond::Lt)),
                    0x40 => (Cond::Set, None),
                    _ => return Err(bad(at, "not a classic BPF jump")),
                };
                let cmp = |c: Cond| if by_x { Insn::jmp32_reg(c, A, X, 0) } else { Insn::jmp32_imm(c, A, k, 0) };
                let (jt, jf) = (jump_to(at, i.jt as u32)?, jump_to(at, i.jf as u32)?);
                match (i.jt, i.jf, inverse) {
                    (_, 0, _) => {
                        fixups.push((out.len(), jt));
                        out.push(cmp(cond));
                    }
                    (0, _, Some(inv)) => {
                        fixups.push((out.len(), jf));
                        out.push(cmp(inv));
                    }
                    _ => {
                        fixups.push((out.len(), jt));
                        out.push(cmp(cond));
                        fixups.push((out.len(), jf));
                        out.push(Insn::jmp_imm(Cond::Ja, Reg::R0, 0, 0));
                    }
                }
            }
            C_RET => {
                match code {
                    0x06 => out.push(Insn::alu32_imm(Alu::Mov, A, k)),
                    c if c == C_RET | RET_A => {}
                    _ => return Err(bad(at, "not a classic BPF return")),
                }
                if reached[at + 1..].iter().any(|r| *r) {
                    fixups.push((out.len(), Target::End));
                    out.push(Insn::jmp_imm(Cond::Ja, Reg::R0, 0, 0));
                }
            }
            C_MISC => match code {
                // TAX, TXA
                0x07 => out.push(Insn::mov64_reg(X, A)),
                0x87 => out.push(Insn::mov64_reg(A, X)),
                _ => return Err(bad(at, "not a classic BPF TAX/TXA")),
            },
            _ => return Err(bad(at, "not a classic BPF instruction")),
        }
    }
    let end = out.len();
    for (slot, target) in fixups {
        let to = match target {
            Target::Classic(t) => start[t],
            Target::End => end,
        };
        let off = to as i64 - slot as i64 - 1;
        out[slot].off = i16::try_from(off).map_err(|_| AsmError(format!("a translated jump of {off} instructions")))?;
    }
    Ok(out)
}

/// A stand-alone socket filter: the context moved to `r6`, the translated
/// block, and an exit with its value.
pub fn program(prog: &[SockFilter]) -> Result<Vec<Insn>, AsmError> {
    let mut out = vec![Insn::mov64_reg(Reg::R6, Reg::R1)];
    out.extend(translate(prog)?);
    out.push(Insn::exit());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ProgType, Program};

    fn f(code: u16, jt: u8, jf: u8, k: u32) -> SockFilter {
        SockFilter { code, jt, jf, k }
    }

    /// Runs the translated program on `pkt` (as the socket filter sees it
    /// in `BPF_PROG_TEST_RUN`: from the network header on, the 14 bytes of
    /// Ethernet header before it taken off).
    fn run(prog: &[SockFilter], pkt: &[u8]) -> u32 {
        let insns = program(prog).unwrap_or_else(|e| panic!("{e}"));
        let p = Program::load(ProgType::SocketFilter, "wl_cbpf_test", &insns, "GPL").unwrap_or_else(|e| panic!("{e}: {}", e.log));
        p.test_run(&frame(pkt)).unwrap()
    }

    /// An Ethernet frame of an experimental EtherType carrying `pkt` (the
    /// kernel's test run wants a whole header for IP).
    fn frame(pkt: &[u8]) -> Vec<u8> {
        let mut frame = vec![0u8; 12];
        frame.extend_from_slice(&0x88b5u16.to_be_bytes());
        frame.extend_from_slice(pkt);
        frame
    }

    // Classic opcodes (`linux/filter.h` / `bpf_common.h` values).
    const LD_IMM: u16 = 0x00;
    const LDX_IMM: u16 = 0x01;
    const LD_W_ABS: u16 = 0x20;
    const LD_H_ABS: u16 = 0x28;
    const LD_B_ABS: u16 = 0x30;
    const LD_W_IND: u16 = 0x40;
    const LD_H_IND: u16 = 0x48;
    const LD_B_IND: u16 = 0x50;
    const LD_MEM: u16 = 0x60;
    const LDX_MEM: u16 = 0x61;
    const LD_LEN: u16 = 0x80;
    const LDX_LEN: u16 = 0x81;
    const LDX_MSH: u16 = 0xb1;
    const ST: u16 = 0x02;
    const STX: u16 = 0x03;
    const RET_K: u16 = 0x06;
    const RET_A: u16 = 0x16;
    const TAX: u16 = 0x07;
    const TXA: u16 = 0x87;
    const JA: u16 = 0x05;
    const JEQ_K: u16 = 0x15;
    const JGT_K: u16 = 0x25;
    const JGE_K: u16 = 0x35;
    const JSET_K: u16 = 0x45;
    const JEQ_X: u16 = 0x1d;
    const JGT_X: u16 = 0x2d;
    const JGE_X: u16 = 0x3d;
    const JSET_X: u16 = 0x4d;

    const PKT: [u8; 8] = [0x45, 0x10, 0x20, 0x30, 0x81, 0x92, 0xa3, 0xb4];

    #[test]
    fn translation_checks_what_the_classic_checker_checks() {
        let e = |p: &[SockFilter]| translate(p).unwrap_err().0;
        assert!(e(&[]).contains("0 instructions"));
        assert!(e(&[f(LD_IMM, 0, 0, 1)]).contains("not a return"));
        assert!(e(&[f(0x34, 0, 0, 0), f(RET_A, 0, 0, 0)]).contains("division by zero"));
        assert!(e(&[f(0x64, 0, 0, 32), f(RET_A, 0, 0, 0)]).contains("shift by 32"));
        assert!(e(&[f(LD_MEM, 0, 0, 16), f(RET_A, 0, 0, 0)]).contains("M[15]"));
        assert!(e(&[f(JEQ_K, 5, 0, 1), f(RET_A, 0, 0, 0)]).contains("past the end"));
        // SKF_AD_OFF + SKF_AD_PROTOCOL
        let anc = e(&[f(LD_H_ABS, 0, 0, (-0x1000i32) as u32), f(RET_A, 0, 0, 0)]);
        assert!(anc.contains("instruction 0") && anc.contains("ancillary"), "{anc}");
        assert!(e(&[f(0xf4, 0, 0, 0), f(RET_A, 0, 0, 0)]).contains("ALU"));
    }

    #[test]
    fn loads_stores_and_returns() {
        if !crate::tests_can_load() {
            return;
        }
        let ret_a = f(RET_A, 0, 0, 0);
        assert_eq!(run(&[f(RET_K, 0, 0, 0xfffe_0001)], &PKT), 0xfffe_0001);
        assert_eq!(run(&[f(LD_IMM, 0, 0, 77), ret_a], &PKT), 77);
        assert_eq!(run(&[f(LD_W_ABS, 0, 0, 0), ret_a], &PKT), 0x4510_2030);
        assert_eq!(run(&[f(LD_H_ABS, 0, 0, 4), ret_a], &PKT), 0x8192);
        assert_eq!(run(&[f(LD_B_ABS, 0, 0, 7), ret_a], &PKT), 0xb4);
        // Out of the packet: 0, whatever follows.
        assert_eq!(run(&[f(LD_W_ABS, 0, 0, 6), f(RET_K, 0, 0, 9)], &PKT), 0);
        assert_eq!(run(&[f(LDX_IMM, 0, 0, 2), f(LD_W_IND, 0, 0, 1), ret_a], &PKT), 0x3081_92a3);
        assert_eq!(run(&[f(LDX_IMM, 0, 0, 2), f(LD_H_IND, 0, 0, 4), ret_a], &PKT), 0xa3b4);
        assert_eq!(run(&[f(LDX_IMM, 0, 0, 2), f(LD_B_IND, 0, 0, 1), ret_a], &PKT), 0x30);
        assert_eq!(run(&[f(LDX_IMM, 0, 0, 7), f(LD_B_IND, 0, 0, 1), f(RET_K, 0, 0, 9)], &PKT), 0);
        assert_eq!(run(&[f(LD_LEN, 0, 0, 0), ret_a], &PKT), 8);
        assert_eq!(run(&[f(LDX_LEN, 0, 0, 0), f(TXA, 0, 0, 0), ret_a], &PKT), 8);
        // MSH: X = 4 * (P[0] & 0xf) = 20; A is kept.
        assert_eq!(run(&[f(LD_IMM, 0, 0, 3), f(LDX_MSH, 0, 0, 0), f(0x0c, 0, 0, 0), ret_a], &PKT), 23);
        // M[]: ST/STX then LD/LDX MEM, in every word.
        for m in 0..MEMWORDS {
            let p = [f(LD_IMM, 0, 0, 100 + m), f(ST, 0, 0, m), f(LDX_IMM, 0, 0, 5), f(STX, 0, 0, 15 - m), f(LD_MEM, 0, 0, m), f(LDX_MEM, 0, 0, 15 - m), f(0x0c, 0, 0, 0), ret_a];
            assert_eq!(run(&p, &PKT), 105 + m, "M[{m}]");
        }
        assert_eq!(run(&[f(LD_IMM, 0, 0, 4), f(TAX, 0, 0, 0), f(LD_IMM, 0, 0, 0), f(TXA, 0, 0, 0), ret_a], &PKT), 4);
    }

    #[test]
    fn every_alu_operation() {
        if !crate::tests_can_load() {
            return;
        }
        // (op, A, operand, A after), each by K and by X; 32-bit wrapping.
        let cases: &[(u16, u32, u32, u32)] = &[
            (0x00, 0xffff_fff0, 0x20, 0x10),
            (0x10, 5, 7, 0xffff_fffe),
            (0x20, 0x1_0001, 0x1_0001, 0x2_0001),
            (0x30, 100, 7, 14),
            (0x40, 0xf0, 0x0f, 0xff),
            (0x50, 0xf0f0, 0x0ff0, 0x00f0),
            (0x60, 0x8000_0001, 4, 0x10),
            (0x70, 0x8000_0000, 31, 1),
            (0x90, 100, 7, 2),
            (0xa0, 0xff00, 0x0ff0, 0xf0f0),
        ];
        for &(op, a, v, want) in cases {
            let by_k = [f(LD_IMM, 0, 0, a), f(0x04 | op, 0, 0, v), f(RET_A, 0, 0, 0)];
            assert_eq!(run(&by_k, &PKT), want, "op {op:#x} K");
            let by_x = [f(LDX_IMM, 0, 0, v), f(LD_IMM, 0, 0, a), f(0x0c | op, 0, 0, 0), f(RET_A, 0, 0, 0)];
            assert_eq!(run(&by_x, &PKT), want, "op {op:#x} X");
        }
        assert_eq!(run(&[f(LD_IMM, 0, 0, 1), f(0x84, 0, 0, 0), f(RET_A, 0, 0, 0)], &PKT), 0xffff_ffff);
        // Division and remainder by X = 0 return 0 from the program.
        for op in [0x3c, 0x9c] {
            assert_eq!(run(&[f(LD_IMM, 0, 0, 9), f(op, 0, 0, 0), f(RET_K, 0, 0, 5)], &PKT), 0, "op {op:#x} by 0");
        }
    }

    #[test]
    fn every_jump_in_every_shape() {
        if !crate::tests_can_load() {
            return;
        }
        // (op, A, operand, taken?) with the top bit set where it matters.
        let cases: &[(u16, u32, u32, bool)] = &[
            (JEQ_K, 0x8000_0001, 0x8000_0001, true),
            (JEQ_K, 1, 2, false),
            (JGT_K, 0x8000_0000, 1, true),
            (JGT_K, 1, 0x8000_0000, false),
            (JGE_K, 0xffff_ffff, 0xffff_ffff, true),
            (JGE_K, 2, 3, false),
            (JSET_K, 0x8000_0010, 0x8000_0000, true),
            (JSET_K, 0x10, 0x01, false),
        ];
        for &(op, a, v, taken) in cases {
            for by_x in [false, true] {
                let code = if by_x { op | 0x08 } else { op };
                assert!([JEQ_X, JGT_X, JGE_X, JSET_X].contains(&(op | 0x08)));
                let k = if by_x { 0 } else { v };
                // jt and jf both set; jf 0 (one jump); jt 0 (inverted).
                for (jt, jf) in [(1, 2), (0, 2), (1, 0)] {
                    let mut p = vec![f(LDX_IMM, 0, 0, v), f(LD_IMM, 0, 0, a), f(code, jt, jf, k)];
                    p.extend([f(RET_K, 0, 0, 10), f(RET_K, 0, 0, 11), f(RET_K, 0, 0, 12)]);
                    let want = 10 + if taken { jt } else { jf } as u32;
                    assert_eq!(run(&p, &PKT), want, "op {code:#x} jt {jt} jf {jf} A {a:#x} v {v:#x}");
                }
            }
        }
        let p = [f(JA, 0, 0, 1), f(RET_K, 0, 0, 1), f(RET_K, 0, 0, 2)];
        assert_eq!(run(&p, &PKT), 2);
    }

    #[test]
    fn a_block_falls_through_with_its_value() {
        if !crate::tests_can_load() {
            return;
        }
        // The block, then r0 + 1000: a return inside the block jumps past it.
        let mut insns = vec![Insn::mov64_reg(Reg::R6, Reg::R1)];
        insns.extend(translate(&[f(LD_B_ABS, 0, 0, 0), f(JEQ_K, 0, 1, 0x45), f(RET_K, 0, 0, 7), f(RET_K, 0, 0, 8)]).unwrap());
        insns.push(Insn::alu64_imm(Alu::Add, Reg::R0, 1000));
        insns.push(Insn::exit());
        let p = Program::load(ProgType::SocketFilter, "wl_cbpf_block", &insns, "GPL").unwrap();
        let mut frame = frame(&PKT);
        assert_eq!(p.test_run(&frame).unwrap(), 1007);
        frame[14] = 0x46;
        assert_eq!(p.test_run(&frame).unwrap(), 1008);
    }
}
