//! Where a function lives in a shared library or executable file, for a
//! uprobe: the symbol's address from the ELF symbol tables (`.dynsym`, then
//! `.symtab`), turned into a file offset through the loadable segment that
//! holds it (the kernel's uprobe takes the offset in the file, not the
//! address the dynamic linker maps it at).
//!
//! Only what that needs is read: 64-bit little-endian ELF, section and
//! program headers, symbol tables and their string tables (layouts from the
//! System V gABI, `elf.h`'s `Elf64_Ehdr`, `Elf64_Phdr`, `Elf64_Shdr`,
//! `Elf64_Sym`). Every offset is checked against the file's length: a bad
//! file is an error naming the file, never a panic.

use std::collections::HashMap;
use std::path::Path;

use crate::Error;

const PT_LOAD: u32 = 1;
const PF_X: u32 = 1;
const SHT_SYMTAB: u32 = 2;
const SHT_DYNSYM: u32 = 11;
const STT_FUNC: u8 = 2;
const STT_GNU_IFUNC: u8 = 10;
const SYM_SIZE: usize = 24;

/// The function symbols of one ELF file, by name, as file offsets.
#[derive(Debug, Clone)]
pub struct ElfSymbols {
    offsets: HashMap<String, u64>,
}

impl ElfSymbols {
    /// Reads `path`'s function symbols (defined ones, with an address).
    pub fn read(path: &Path) -> Result<ElfSymbols, Error> {
        let data = std::fs::read(path).map_err(|e| Error::sys(format!("reading {}", path.display()), e))?;
        ElfSymbols::parse(&data).map_err(|why| Error::other(format!("{}: {why}", path.display())))
    }

    /// The same from the file's bytes; the error says what is wrong.
    pub fn parse(d: &[u8]) -> Result<ElfSymbols, String> {
        if d.len() < 64 || &d[..4] != b"\x7fELF" {
            return Err("not an ELF file".into());
        }
        if d[4] != 2 || d[5] != 1 {
            return Err("not a 64-bit little-endian ELF file".into());
        }
        let phoff = u64_at(d, 32)? as usize;
        let shoff = u64_at(d, 40)? as usize;
        let phentsize = u16_at(d, 54)? as usize;
        let phnum = u16_at(d, 56)? as usize;
        let shentsize = u16_at(d, 58)? as usize;
        let shnum = u16_at(d, 60)? as usize;
        if phentsize < 56 || (shnum > 0 && shentsize < 64) {
            return Err("header entry sizes too small".into());
        }
        // Executable loadable segments: (vaddr, memsz, file offset).
        let mut loads = Vec::new();
        for i in 0..phnum {
            let p = phoff + i * phentsize;
            if u32_at(d, p)? == PT_LOAD && u32_at(d, p + 4)? & PF_X != 0 {
                loads.push((u64_at(d, p + 16)?, u64_at(d, p + 40)?, u64_at(d, p + 8)?));
            }
        }
        let section = |i: usize| -> Result<(u32, u64, u64, u32), String> {
            let s = shoff + i * shentsize;
            Ok((u32_at(d, s + 4)?, u64_at(d, s + 24)?, u64_at(d, s + 32)?, u32_at(d, s + 40)?))
        };
        let mut offsets = HashMap::new();
        // .dynsym first: what a shared library exports; .symtab adds local
        // and unexported functions when the file was not stripped.
        for want in [SHT_DYNSYM, SHT_SYMTAB] {
            for i in 0..shnum {
                let (kind, off, size, link) = section(i)?;
                if kind != want {
                    continue;
                }
                let (_, str_off, str_size, _) = section(link as usize)?;
                let strtab = slice(d, str_off as usize, str_size as usize)?;
                let syms = slice(d, off as usize, size as usize)?;
                for s in syms.chunks_exact(SYM_SIZE) {
                    let name = u32::from_le_bytes(s[0..4].try_into().expect("4 bytes")) as usize;
                    let kind = s[4] & 0xf;
                    let shndx = u16::from_le_bytes(s[6..8].try_into().expect("2 bytes"));
                    let value = u64::from_le_bytes(s[8..16].try_into().expect("8 bytes"));
                    if (kind != STT_FUNC && kind != STT_GNU_IFUNC) || shndx == 0 || value == 0 {
                        continue;
                    }
                    let Some(name) = strtab.get(name..).and_then(|t| t.split(|&b| b == 0).next()) else { continue };
                    let Ok(name) = std::str::from_utf8(name) else { continue };
                    // `SSL_read@@OPENSSL_3.0.0` in some tables: the name is before the '@'.
                    let name = name.split('@').next().unwrap_or(name);
                    let Some(&(vaddr, _, foff)) = loads.iter().find(|(v, sz, _)| value >= *v && value < v + sz) else {
                        continue;
                    };
                    offsets.entry(name.to_string()).or_insert(value - vaddr + foff);
                }
            }
        }
        Ok(ElfSymbols { offsets })
    }

    /// The file offset of function `name`, for a uprobe.
    pub fn offset(&self, name: &str) -> Option<u64> {
        self.offsets.get(name).copied()
    }
}

fn slice(d: &[u8], at: usize, len: usize) -> Result<&[u8], String> {
    at.checked_add(len).and_then(|end| d.get(at..end)).ok_or_else(|| format!("{len} bytes at offset {at} past the file's end"))
}

fn u16_at(d: &[u8], at: usize) -> Result<u16, String> {
    Ok(u16::from_le_bytes(slice(d, at, 2)?.try_into().expect("2 bytes")))
}

fn u32_at(d: &[u8], at: usize) -> Result<u32, String> {
    Ok(u32::from_le_bytes(slice(d, at, 4)?.try_into().expect("4 bytes")))
}

fn u64_at(d: &[u8], at: usize) -> Result<u64, String> {
    Ok(u64::from_le_bytes(slice(d, at, 8)?.try_into().expect("8 bytes")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_files_are_errors_not_panics() {
        assert!(ElfSymbols::parse(b"hello").unwrap_err().contains("not an ELF"));
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        // Program headers said to be far past the end.
        h[32..40].copy_from_slice(&1_000_000u64.to_le_bytes());
        h[54..56].copy_from_slice(&56u16.to_le_bytes());
        h[56..58].copy_from_slice(&1u16.to_le_bytes());
        h[58..60].copy_from_slice(&64u16.to_le_bytes());
        assert!(ElfSymbols::parse(&h).unwrap_err().contains("past the file's end"));
        // Every truncation of a real file is refused or read, never a panic.
        let exe = std::fs::read("/proc/self/exe").unwrap();
        for cut in [0, 10, 63, 64, 100, 4096, exe.len() / 2, exe.len() - 1] {
            let _ = ElfSymbols::parse(&exe[..cut]);
        }
    }

    #[test]
    fn a_function_of_this_test_binary_is_found_at_its_file_offset() {
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let syms = ElfSymbols::parse(&exe).unwrap();
        let off = syms.offset("wl_elf_test_target").expect("the test function's symbol") as usize;
        // The function's machine code is at that offset in the file: it is
        // the code that runs (compare with the mapped function's bytes).
        let f = wl_elf_test_target as *const u8;
        // SAFETY: reading the first 16 bytes of a function's own code.
        let code = unsafe { std::slice::from_raw_parts(f, 16) };
        assert_eq!(&exe[off..off + 16], code);
        assert_eq!(wl_elf_test_target(2), 5);
    }

    #[no_mangle]
    #[inline(never)]
    extern "C" fn wl_elf_test_target(x: u64) -> u64 {
        std::hint::black_box(x * 2 + 1)
    }

    #[test]
    fn openssl_exports_its_read_and_write_functions() {
        let path = Path::new("/usr/lib/x86_64-linux-gnu/libssl.so.3");
        if !path.exists() {
            eprintln!("SKIPPED: no {}", path.display());
            return;
        }
        let syms = ElfSymbols::read(path).unwrap();
        for f in ["SSL_read", "SSL_write", "SSL_read_ex", "SSL_write_ex"] {
            let off = syms.offset(f).unwrap_or_else(|| panic!("{f}"));
            assert!(off > 0 && off < std::fs::metadata(path).unwrap().len(), "{f} at {off}");
        }
        assert_ne!(syms.offset("SSL_read"), syms.offset("SSL_write"));
    }
}
