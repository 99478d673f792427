//! The eBPF instruction set as Rust values, and an assembler with named
//! labels, so programs are written in Rust source and assembled at run time.
//!
//! Encodings follow `include/uapi/linux/bpf.h` and `bpf_common.h`: an
//! instruction is 8 bytes, `code` (class | size/op | mode/source), the
//! registers (`dst` in the low nibble, `src` in the high one, on
//! little-endian hosts), a signed 16-bit offset and a signed 32-bit
//! immediate. A 64-bit immediate load (`lddw`) takes two slots.

use std::collections::HashMap;

/// Registers: `R0` return value, `R1`..`R5` arguments (clobbered by calls),
/// `R6`..`R9` kept across calls, `R10` the read-only frame pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Reg {
    R0 = 0,
    R1,
    R2,
    R3,
    R4,
    R5,
    R6,
    R7,
    R8,
    R9,
    R10,
}

// Instruction classes.
pub(crate) const LD: u8 = 0x00;
pub(crate) const LDX: u8 = 0x01;
pub(crate) const ST: u8 = 0x02;
pub(crate) const STX: u8 = 0x03;
pub(crate) const ALU: u8 = 0x04;
pub(crate) const JMP: u8 = 0x05;
pub(crate) const JMP32: u8 = 0x06;
pub(crate) const ALU64: u8 = 0x07;
// Modes of loads and stores.
pub(crate) const IMM: u8 = 0x00;
pub(crate) const MEM: u8 = 0x60;
/// Packet loads of socket filters: absolute and indirect.
pub(crate) const ABS: u8 = 0x20;
pub(crate) const IND: u8 = 0x40;
/// `BPF_ATOMIC` mode of a store; the operation is in the immediate.
const ATOMIC: u8 = 0xc0;
/// `BPF_END`: byte swap; with `BPF_TO_BE` it converts to big-endian.
const END: u8 = 0xd0;
const TO_BE: u8 = 0x08;
// Operand source: the immediate or a register.
pub(crate) const K: u8 = 0x00;
pub(crate) const X: u8 = 0x08;
const CALL: u8 = 0x80;
pub(crate) const EXIT: u8 = 0x90;
/// `src` of an `lddw` whose immediate is a map's file descriptor.
pub const PSEUDO_MAP_FD: u8 = 1;

/// Access width of loads and stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Size {
    W = 0x00,
    H = 0x08,
    B = 0x10,
    DW = 0x18,
}

impl Size {
    /// The width for a field of `bytes` bytes.
    pub fn of(bytes: usize) -> Option<Size> {
        match bytes {
            1 => Some(Size::B),
            2 => Some(Size::H),
            4 => Some(Size::W),
            8 => Some(Size::DW),
            _ => None,
        }
    }
}

/// Arithmetic operations (`BPF_ALU`/`BPF_ALU64` op field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Alu {
    Add = 0x00,
    Sub = 0x10,
    Mul = 0x20,
    Div = 0x30,
    Or = 0x40,
    And = 0x50,
    Lsh = 0x60,
    Rsh = 0x70,
    Neg = 0x80,
    Mod = 0x90,
    Xor = 0xa0,
    Mov = 0xb0,
    Arsh = 0xc0,
}

/// Conditions of jumps (`BPF_JMP` op field); `Ja` is unconditional.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Cond {
    Ja = 0x00,
    Eq = 0x10,
    Gt = 0x20,
    Ge = 0x30,
    Set = 0x40,
    Ne = 0x50,
    Sgt = 0x60,
    Sge = 0x70,
    Lt = 0xa0,
    Le = 0xb0,
    Slt = 0xc0,
    Sle = 0xd0,
}

/// Helper functions by their number in `enum bpf_func_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Helper {
    MapLookupElem = 1,
    MapUpdateElem = 2,
    MapDeleteElem = 3,
    KtimeGetNs = 5,
    SkbLoadBytes = 26,
    GetCurrentPidTgid = 14,
    GetCurrentUidGid = 15,
    GetCurrentComm = 16,
    GetCurrentTask = 35,
    GetCurrentCgroupId = 80,
    GetSmpProcessorId = 8,
    ProbeReadUser = 112,
    ProbeReadKernel = 113,
    RingbufOutput = 130,
}

/// One 8-byte instruction slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct Insn {
    pub code: u8,
    /// `dst` in bits 0-3, `src` in bits 4-7.
    pub regs: u8,
    pub off: i16,
    pub imm: i32,
}

impl Insn {
    pub fn new(code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> Insn {
        Insn { code, regs: (dst as u8) | ((src as u8) << 4), off, imm }
    }

    /// The instruction as the kernel reads it.
    pub fn to_bytes(self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[0] = self.code;
        b[1] = self.regs;
        b[2..4].copy_from_slice(&self.off.to_le_bytes());
        b[4..8].copy_from_slice(&self.imm.to_le_bytes());
        b
    }

    pub fn alu64_imm(op: Alu, dst: Reg, imm: i32) -> Insn {
        Insn::new(ALU64 | op as u8 | K, dst, Reg::R0, 0, imm)
    }
    pub fn alu64_reg(op: Alu, dst: Reg, src: Reg) -> Insn {
        Insn::new(ALU64 | op as u8 | X, dst, src, 0, 0)
    }
    pub fn alu32_imm(op: Alu, dst: Reg, imm: i32) -> Insn {
        Insn::new(ALU | op as u8 | K, dst, Reg::R0, 0, imm)
    }
    pub fn alu32_reg(op: Alu, dst: Reg, src: Reg) -> Insn {
        Insn::new(ALU | op as u8 | X, dst, src, 0, 0)
    }
    pub fn mov64_imm(dst: Reg, imm: i32) -> Insn {
        Insn::alu64_imm(Alu::Mov, dst, imm)
    }
    pub fn mov64_reg(dst: Reg, src: Reg) -> Insn {
        Insn::alu64_reg(Alu::Mov, dst, src)
    }
    /// `dst = *(size *)(src + off)`
    pub fn load(size: Size, dst: Reg, src: Reg, off: i16) -> Insn {
        Insn::new(LDX | size as u8 | MEM, dst, src, off, 0)
    }
    /// `*(size *)(dst + off) = src`
    pub fn store_reg(size: Size, dst: Reg, off: i16, src: Reg) -> Insn {
        Insn::new(STX | size as u8 | MEM, dst, src, off, 0)
    }
    /// `*(size *)(dst + off) = imm`
    pub fn store_imm(size: Size, dst: Reg, off: i16, imm: i32) -> Insn {
        Insn::new(ST | size as u8 | MEM, dst, Reg::R0, off, imm)
    }
    /// `*(size *)(dst + off) += src`, atomically (`BPF_ATOMIC` with
    /// `BPF_ADD`; W or DW only).
    pub fn atomic_add(size: Size, dst: Reg, off: i16, src: Reg) -> Insn {
        Insn::new(STX | size as u8 | ATOMIC, dst, src, off, 0)
    }
    /// `dst = htobe{bits}(dst)`: network order to host order and back (a
    /// swap on little-endian hosts), the upper bits cleared.
    pub fn to_be(dst: Reg, bits: i32) -> Insn {
        Insn::new(ALU | END | TO_BE, dst, Reg::R0, 0, bits)
    }
    /// A jump of `off` slots past the next one, on `dst cond imm`.
    pub fn jmp_imm(cond: Cond, dst: Reg, imm: i32, off: i16) -> Insn {
        Insn::new(JMP | cond as u8 | K, dst, Reg::R0, off, imm)
    }
    pub fn jmp_reg(cond: Cond, dst: Reg, src: Reg, off: i16) -> Insn {
        Insn::new(JMP | cond as u8 | X, dst, src, off, 0)
    }
    /// The same on the low 32 bits of the registers.
    pub fn jmp32_reg(cond: Cond, dst: Reg, src: Reg, off: i16) -> Insn {
        Insn::new(JMP32 | cond as u8 | X, dst, src, off, 0)
    }
    /// `r0 = ntoh(*(size *)(skb->data + imm))`: the socket filters' packet
    /// load (`BPF_LD | BPF_ABS`), which needs the context in `r6`, clobbers
    /// `r1`-`r5`, and ends the program with 0 when the bytes are not there.
    pub fn ld_abs(size: Size, imm: i32) -> Insn {
        Insn::new(LD | size as u8 | ABS, Reg::R0, Reg::R0, 0, imm)
    }
    /// The same at `src + imm` (`BPF_LD | BPF_IND`).
    pub fn ld_ind(size: Size, src: Reg, imm: i32) -> Insn {
        Insn::new(LD | size as u8 | IND, Reg::R0, src, 0, imm)
    }
    /// The same on the low 32 bits of the registers.
    pub fn jmp32_imm(cond: Cond, dst: Reg, imm: i32, off: i16) -> Insn {
        Insn::new(JMP32 | cond as u8 | K, dst, Reg::R0, off, imm)
    }
    pub fn call(h: Helper) -> Insn {
        Insn::new(JMP | CALL, Reg::R0, Reg::R0, 0, h as i32)
    }
    pub fn exit() -> Insn {
        Insn::new(JMP | EXIT, Reg::R0, Reg::R0, 0, 0)
    }
    /// `dst = imm64`: two slots.
    pub fn load_imm64(dst: Reg, src: u8, imm: u64) -> [Insn; 2] {
        let lo = Insn { code: LD | Size::DW as u8 | IMM, regs: dst as u8 | (src << 4), off: 0, imm: imm as u32 as i32 };
        let hi = Insn { code: 0, regs: 0, off: 0, imm: (imm >> 32) as u32 as i32 };
        [lo, hi]
    }
    /// `dst = map` for the map whose file descriptor is `fd`: the kernel
    /// replaces it with the map's address when the program loads.
    pub fn load_map_fd(dst: Reg, fd: i32) -> [Insn; 2] {
        Insn::load_imm64(dst, PSEUDO_MAP_FD, fd as u32 as u64)
    }
}

/// A program being written: instructions plus jumps to named labels,
/// resolved by [`Asm::finish`].
#[derive(Debug, Default)]
pub struct Asm {
    insns: Vec<Insn>,
    labels: HashMap<&'static str, usize>,
    /// (slot of a jump, label it goes to)
    fixups: Vec<(usize, &'static str)>,
}

/// A jump to a label that was never placed, or one too far for 16 bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsmError(pub String);

impl std::fmt::Display for AsmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "eBPF assembly: {}", self.0)
    }
}

impl std::error::Error for AsmError {}

impl Asm {
    pub fn new() -> Asm {
        Asm::default()
    }

    pub fn push(&mut self, i: Insn) -> &mut Asm {
        self.insns.push(i);
        self
    }

    pub fn push_all(&mut self, is: impl IntoIterator<Item = Insn>) -> &mut Asm {
        self.insns.extend(is);
        self
    }

    /// Places `name` at the next instruction.
    pub fn label(&mut self, name: &'static str) -> &mut Asm {
        let at = self.insns.len();
        assert!(self.labels.insert(name, at).is_none(), "label {name} placed twice");
        self
    }

    /// A conditional jump to `label` on `dst cond imm`.
    pub fn jmp_imm(&mut self, cond: Cond, dst: Reg, imm: i32, label: &'static str) -> &mut Asm {
        self.fixups.push((self.insns.len(), label));
        self.push(Insn::jmp_imm(cond, dst, imm, 0))
    }

    pub fn jmp_reg(&mut self, cond: Cond, dst: Reg, src: Reg, label: &'static str) -> &mut Asm {
        self.fixups.push((self.insns.len(), label));
        self.push(Insn::jmp_reg(cond, dst, src, 0))
    }

    pub fn ja(&mut self, label: &'static str) -> &mut Asm {
        self.jmp_imm(Cond::Ja, Reg::R0, 0, label)
    }

    /// The instructions with every jump's offset filled in.
    pub fn finish(mut self) -> Result<Vec<Insn>, AsmError> {
        for &(at, label) in &self.fixups {
            let to = *self.labels.get(label).ok_or_else(|| AsmError(format!("jump to label {label} never placed")))?;
            let off = to as i64 - at as i64 - 1;
            self.insns[at].off =
                i16::try_from(off).map_err(|_| AsmError(format!("jump to {label} is {off} slots away")))?;
        }
        Ok(self.insns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Reg::*;

    // Expected bytes are written from the uapi definitions: e.g. 0xb7 is
    // BPF_ALU64 (0x07) | BPF_MOV (0xb0) | BPF_K (0x00).
    #[test]
    fn encodings_match_the_uapi_opcodes() {
        let cases: &[(Insn, [u8; 8])] = &[
            (Insn::mov64_imm(R0, 0), [0xb7, 0x00, 0, 0, 0, 0, 0, 0]),
            (Insn::mov64_imm(R2, -1), [0xb7, 0x02, 0, 0, 0xff, 0xff, 0xff, 0xff]),
            (Insn::mov64_reg(R6, R1), [0xbf, 0x16, 0, 0, 0, 0, 0, 0]),
            (Insn::alu64_imm(Alu::Add, R2, -8), [0x07, 0x02, 0, 0, 0xf8, 0xff, 0xff, 0xff]),
            (Insn::alu64_imm(Alu::Rsh, R0, 32), [0x77, 0x00, 0, 0, 32, 0, 0, 0]),
            (Insn::alu64_reg(Alu::Add, R1, R7), [0x0f, 0x71, 0, 0, 0, 0, 0, 0]),
            (Insn::alu32_imm(Alu::And, R3, 0xff), [0x54, 0x03, 0, 0, 0xff, 0, 0, 0]),
            (Insn::alu32_reg(Alu::Mov, R3, R4), [0xbc, 0x43, 0, 0, 0, 0, 0, 0]),
            // BPF_LDX | BPF_MEM (0x60) | BPF_W (0x00) = 0x61, r2 = *(u32 *)(r1 + 4)
            (Insn::load(Size::W, R2, R1, 4), [0x61, 0x12, 4, 0, 0, 0, 0, 0]),
            (Insn::load(Size::H, R2, R1, 24), [0x69, 0x12, 24, 0, 0, 0, 0, 0]),
            (Insn::load(Size::B, R2, R1, 1), [0x71, 0x12, 1, 0, 0, 0, 0, 0]),
            (Insn::load(Size::DW, R7, R1, 8), [0x79, 0x17, 8, 0, 0, 0, 0, 0]),
            // *(u64 *)(r10 - 8) = r1
            (Insn::store_reg(Size::DW, R10, -8, R1), [0x7b, 0x1a, 0xf8, 0xff, 0, 0, 0, 0]),
            (Insn::store_reg(Size::W, R10, -4, R0), [0x63, 0x0a, 0xfc, 0xff, 0, 0, 0, 0]),
            (Insn::store_imm(Size::DW, R10, -16, 0), [0x7a, 0x0a, 0xf0, 0xff, 0, 0, 0, 0]),
            (Insn::store_imm(Size::H, R10, -2, 7), [0x6a, 0x0a, 0xfe, 0xff, 7, 0, 0, 0]),
            // BPF_JMP | BPF_JNE | BPF_K = 0x55
            (Insn::jmp_imm(Cond::Ne, R7, 6, 3), [0x55, 0x07, 3, 0, 6, 0, 0, 0]),
            (Insn::jmp_imm(Cond::Eq, R0, 0, -2), [0x15, 0x00, 0xfe, 0xff, 0, 0, 0, 0]),
            (Insn::jmp_reg(Cond::Gt, R1, R2, 1), [0x2d, 0x21, 1, 0, 0, 0, 0, 0]),
            (Insn::jmp32_imm(Cond::Ne, R1, 2, 5), [0x56, 0x01, 5, 0, 2, 0, 0, 0]),
            // BPF_JMP32 | BPF_JGT | BPF_X = 0x2e
            (Insn::jmp32_reg(Cond::Gt, R0, R7, 1), [0x2e, 0x70, 1, 0, 0, 0, 0, 0]),
            // BPF_LD | BPF_ABS | BPF_H = 0x28, BPF_LD | BPF_IND | BPF_B = 0x50
            (Insn::ld_abs(Size::H, 12), [0x28, 0x00, 0, 0, 12, 0, 0, 0]),
            (Insn::ld_ind(Size::B, R7, 14), [0x50, 0x70, 0, 0, 14, 0, 0, 0]),
            (Insn::jmp_imm(Cond::Ja, R0, 0, 4), [0x05, 0x00, 4, 0, 0, 0, 0, 0]),
            (Insn::call(Helper::MapLookupElem), [0x85, 0x00, 0, 0, 1, 0, 0, 0]),
            (Insn::call(Helper::ProbeReadKernel), [0x85, 0x00, 0, 0, 113, 0, 0, 0]),
            // BPF_STX | BPF_DW | BPF_ATOMIC = 0xdb, imm BPF_ADD = 0: lock *(u64 *)(r8 + 8) += r1
            (Insn::atomic_add(Size::DW, R8, 8, R1), [0xdb, 0x18, 8, 0, 0, 0, 0, 0]),
            // BPF_ALU | BPF_END | BPF_TO_BE = 0xdc, imm 16
            (Insn::to_be(R2, 16), [0xdc, 0x02, 0, 0, 16, 0, 0, 0]),
            (Insn::exit(), [0x95, 0x00, 0, 0, 0, 0, 0, 0]),
        ];
        for (i, want) in cases {
            assert_eq!(&i.to_bytes(), want, "{i:?}");
        }
    }

    #[test]
    fn wide_immediates_and_map_fds_take_two_slots() {
        // BPF_LD | BPF_DW | BPF_IMM = 0x18; src 1 = BPF_PSEUDO_MAP_FD.
        let [a, b] = Insn::load_map_fd(R1, 5);
        assert_eq!(a.to_bytes(), [0x18, 0x11, 0, 0, 5, 0, 0, 0]);
        assert_eq!(b.to_bytes(), [0; 8]);
        let [a, b] = Insn::load_imm64(R3, 0, 0x1122_3344_5566_7788);
        assert_eq!(a.to_bytes(), [0x18, 0x03, 0, 0, 0x88, 0x77, 0x66, 0x55]);
        assert_eq!(b.to_bytes(), [0, 0, 0, 0, 0x44, 0x33, 0x22, 0x11]);
    }

    #[test]
    fn labels_resolve_forward_and_backward() {
        let mut a = Asm::new();
        a.label("top")
            .push(Insn::mov64_imm(R0, 0))
            .jmp_imm(Cond::Eq, R1, 0, "out")
            .push(Insn::mov64_imm(R0, 1))
            .jmp_imm(Cond::Ne, R0, 1, "top")
            .label("out")
            .push(Insn::exit());
        let p = a.finish().unwrap();
        assert_eq!(p[1].off, 2, "forward: over two slots");
        assert_eq!(p[3].off, -4, "backward: to the first slot");
        let mut bad = Asm::new();
        bad.ja("nowhere");
        assert!(bad.finish().unwrap_err().0.contains("nowhere"));
    }
}
