//! What a cubin runs, as bytes to hash: the same with and without line
//! information, in any folder.
//!
//! `-lineinfo` adds debug sections (which name the crate's folder), their
//! section symbols, their names in the string tables and the toolkit note's
//! record of the options; every symbol after the new ones moves, and the
//! sections that refer to symbols by index (`.nv.info`, relocations, the
//! call graph) change with them although the code is the same. So the
//! sections are taken by name, less the debug ones and the tables of
//! names; symbols are listed by name with their section by name; and each
//! reference to a symbol by index is replaced by the symbol's name. What is
//! left is the machine code, its constant banks, shared and local sizes,
//! the per-kernel attributes the driver reads (registers, stack, parameter
//! layout) and the symbols.
//!
//! The ELF reading is written here, bounds-checked, rather than taken
//! from the `object` crate, which refuses a table at an offset that is not
//! a multiple of its alignment: ptxas puts sm_90 cubins' section headers at
//! such offsets (`e_shoff` ≡ 4 mod 8). The NVIDIA sections' layout
//! (`.nv.info` records, the call graph) is not read by any crate: `.nv.info`
//! is a run of records of a format byte, an attribute byte and either a
//! 2-byte value or a 2-byte size and that many bytes.

use std::collections::BTreeMap;

/// `SHT_SYMTAB`, `SHT_STRTAB`, `SHT_RELA`, `SHT_NOBITS`, `SHT_REL`.
const SHT_SYMTAB: u32 = 2;
const SHT_STRTAB: u32 = 3;
const SHT_RELA: u32 = 4;
const SHT_NOBITS: u32 = 8;
const SHT_REL: u32 = 9;
/// `STT_FUNC`, `STT_SECTION`.
const STT_FUNC: u8 = 2;
const STT_SECTION: u8 = 3;

/// `.nv.info` attributes whose value starts with a symbol index:
/// `EIATTR_PARAM_CBANK` (0x0a), `EIATTR_FRAME_SIZE` (0x11),
/// `EIATTR_MIN_STACK_SIZE` (0x12), `EIATTR_MAX_STACK_SIZE` (0x23),
/// `EIATTR_REGCOUNT` (0x2f), as cuobjdump -elf names them.
const SYMBOL_FIRST: [u8; 5] = [0x0a, 0x11, 0x12, 0x23, 0x2f];
/// `EIATTR_EXTERNS`: a list of symbol indices.
const EXTERNS: u8 = 0x0f;
/// The `.nv.info` record format with a size and a value of that size.
const EIFMT_SVAL: u8 = 4;

/// A section header's fields that matter here.
struct Section {
    name: u32,
    kind: u32,
    offset: u64,
    size: u64,
    link: u32,
}

impl Section {
    /// Its bytes in the file (none for `SHT_NOBITS`); `None` when they lie
    /// outside it.
    fn data<'a>(&self, bytes: &'a [u8]) -> Option<&'a [u8]> {
        if self.kind == SHT_NOBITS {
            return Some(&[]);
        }
        let start = usize::try_from(self.offset).ok()?;
        let end = start.checked_add(usize::try_from(self.size).ok()?)?;
        bytes.get(start..end)
    }
}

/// A symbol's fields.
struct Symbol {
    name: u32,
    info: u8,
    other: u8,
    section: u16,
    value: u64,
    size: u64,
}

/// The section headers of a little-endian 64-bit ELF file.
fn section_headers(bytes: &[u8]) -> Option<Vec<Section>> {
    if bytes.get(..4)? != b"\x7fELF" || bytes.get(4)? != &2 || bytes.get(5)? != &1 {
        return None;
    }
    let offset = usize::try_from(u64_at(bytes, 0x28)?).ok()?;
    let entry = usize::from(u16_at(bytes, 0x3a)?);
    let count = usize::from(u16_at(bytes, 0x3c)?);
    if entry < 64 {
        return None;
    }
    (0..count)
        .map(|i| {
            let at = offset.checked_add(i.checked_mul(entry)?)?;
            Some(Section {
                name: u32_at(bytes, at)?,
                kind: u32_at(bytes, at + 4)?,
                offset: u64_at(bytes, at + 24)?,
                size: u64_at(bytes, at + 32)?,
                link: u32_at(bytes, at + 40)?,
            })
        })
        .collect()
}

/// The longest name read (symbol names of real cubins are far shorter): a
/// crafted table without NULs cannot make each key a copy of the file.
const MAX_NAME: usize = 4096;

/// The NUL-terminated string at `at` of `table`, at most [`MAX_NAME`] bytes.
fn string_at(table: &[u8], at: u32) -> &[u8] {
    let rest = usize::try_from(at)
        .ok()
        .and_then(|at| table.get(at..))
        .unwrap_or_default();
    let name = rest.split(|&b| b == 0).next().unwrap_or_default();
    &name[..name.len().min(MAX_NAME)]
}

/// The symbols of the first symbol table `which` picks, and its strings;
/// none when there is no such table or it lies outside the file.
fn symbol_table<'a>(
    bytes: &'a [u8],
    sections: &[Section],
    which: impl Fn(&Section) -> bool,
) -> (Vec<Symbol>, &'a [u8]) {
    sections
        .iter()
        .find(|s| which(s))
        .and_then(|table| {
            let data = table.data(bytes)?;
            let strings = sections
                .get(usize::try_from(table.link).ok()?)?
                .data(bytes)?;
            let symbols = data
                .chunks_exact(24)
                .map(|e| Symbol {
                    name: u32_at(e, 0).unwrap_or_default(),
                    info: e[4],
                    other: e[5],
                    section: u16_at(e, 6).unwrap_or_default(),
                    value: u64_at(e, 8).unwrap_or_default(),
                    size: u64_at(e, 16).unwrap_or_default(),
                })
                .collect();
            Some((symbols, strings))
        })
        .unwrap_or_default()
}

/// The index of each function symbol of a cubin's `.symtab` (what
/// `nvdisasm -fun` takes), by name; `None` when `bytes` is not a
/// little-endian 64-bit ELF file. sm_100's second table (`.nv.merc.symtab`)
/// numbers its symbols its own way and is not read.
pub(crate) fn function_indices(bytes: &[u8]) -> Option<BTreeMap<String, u32>> {
    let sections = section_headers(bytes)?;
    let names_at = usize::from(u16_at(bytes, 0x3e)?);
    let names_table = sections.get(names_at)?.data(bytes)?;
    let (symbols, strings) = symbol_table(bytes, &sections, |s| {
        s.kind == SHT_SYMTAB && string_at(names_table, s.name) == b".symtab"
    });
    Some(
        symbols
            .iter()
            .enumerate()
            .filter(|(_, sym)| sym.info & 0xf == STT_FUNC)
            .filter_map(|(i, sym)| {
                let name = String::from_utf8(string_at(strings, sym.name).to_vec()).ok()?;
                Some((name, u32::try_from(i).ok()?))
            })
            .collect(),
    )
}

/// Offsets in a debug section that a relocation names, each with the
/// function its symbol's section holds and the relocation's addend.
pub(crate) type Relocated = BTreeMap<u64, (String, u64)>;

/// The `.debug_line` section of a cubin built with `-lineinfo` and, for
/// each place in it that `.rel.debug_line` or `.rela.debug_line` (sm_90
/// and later) relocates (a line program's `DW_LNE_set_address` operand),
/// the function whose code the address is in, by the name of the section
/// of the relocation's symbol less `.text.`, and the addend (0 for REL).
/// `None` when `bytes` is not a little-endian 64-bit ELF file or has no
/// `.debug_line`.
pub(crate) fn debug_line(bytes: &[u8]) -> Option<(&[u8], Relocated)> {
    let sections = section_headers(bytes)?;
    let names_at = usize::from(u16_at(bytes, 0x3e)?);
    let names_table = sections.get(names_at)?.data(bytes)?;
    let named = |name: &[u8]| {
        sections
            .iter()
            .find(|s| string_at(names_table, s.name) == name)
    };
    let data = named(b".debug_line")?.data(bytes)?;
    let (symbols, _) = symbol_table(bytes, &sections, |s| {
        s.kind == SHT_SYMTAB && string_at(names_table, s.name) == b".symtab"
    });
    let mut functions = BTreeMap::new();
    for (name, kind, size) in [
        (&b".rel.debug_line"[..], SHT_REL, 16),
        (&b".rela.debug_line"[..], SHT_RELA, 24),
    ] {
        let relocated = named(name)
            .filter(|s| s.kind == kind)
            .and_then(|s| s.data(bytes))
            .unwrap_or_default();
        for entry in relocated.chunks_exact(size) {
            let (Some(offset), Some(info)) = (u64_at(entry, 0), u64_at(entry, 8)) else {
                continue;
            };
            let addend = if size == 24 {
                u64_at(entry, 16)
            } else {
                Some(0)
            };
            let function = usize::try_from(info >> 32)
                .ok()
                .and_then(|i| symbols.get(i))
                .and_then(|sym| sections.get(usize::from(sym.section)))
                .map(|section| string_at(names_table, section.name))
                .and_then(|name| name.strip_prefix(b".text."))
                .and_then(|name| String::from_utf8(name.to_vec()).ok());
            if let (Some(function), Some(addend)) = (function, addend) {
                functions.insert(offset, (function, addend));
            }
        }
    }
    Some((data, functions))
}

/// The bytes of what `bytes` (a cubin) runs; `None` when it is not a
/// little-endian 64-bit ELF file.
///
/// Long because it reads the ELF header, the section table and the symbol table
/// in one pass, by hand.
pub(crate) fn code_bytes(bytes: &[u8]) -> Option<Vec<u8>> {
    let sections = section_headers(bytes)?;
    let names_at = usize::from(u16_at(bytes, 0x3e)?);
    let names_table = sections.get(names_at)?.data(bytes)?;
    let names: Vec<&[u8]> = sections
        .iter()
        .map(|s| string_at(names_table, s.name))
        .collect();
    let section_name = |index: usize| names.get(index).copied().unwrap_or_default();
    let (symbols, strings) = symbol_table(bytes, &sections, |s| s.kind == SHT_SYMTAB);
    // What each symbol index names: a section symbol its section, any other
    // symbol its name.
    let keys: Vec<Vec<u8>> = symbols
        .iter()
        .map(|sym| {
            if sym.info & 0xf == STT_SECTION {
                [b"section ", section_name(usize::from(sym.section))].concat()
            } else {
                string_at(strings, sym.name).to_vec()
            }
        })
        .collect();
    let key = |index: u64| -> Vec<u8> {
        usize::try_from(index)
            .ok()
            .and_then(|i| keys.get(i))
            .cloned()
            .unwrap_or_else(|| format!("#{index}").into_bytes())
    };
    let mut parts: Vec<Vec<u8>> = Vec::new();
    for (sym, key) in symbols.iter().zip(&keys).skip(1) {
        let section = usize::from(sym.section);
        if is_debug_section(section_name(section)) {
            continue;
        }
        let mut part = b"symbol ".to_vec();
        part.extend_from_slice(key);
        part.push(0);
        part.push(sym.info);
        part.push(sym.other);
        part.extend_from_slice(&sym.value.to_le_bytes());
        part.extend_from_slice(&sym.size.to_le_bytes());
        if section == 0 || section >= names.len() {
            part.extend_from_slice(&(section as u64).to_le_bytes());
        } else {
            part.extend_from_slice(section_name(section));
        }
        parts.push(part);
    }
    for (i, section) in sections.iter().enumerate() {
        let name = section_name(i);
        let kind = section.kind;
        if is_debug_section(name)
            || kind == SHT_SYMTAB
            || kind == SHT_STRTAB
            || name == b".note.nv.tkinfo"
        {
            continue;
        }
        let data = section.data(bytes)?;
        let data = if name.starts_with(b".nv.info") {
            nv_info(data, &key)
        } else if kind == SHT_REL || kind == SHT_RELA {
            relocations(data, kind == SHT_RELA, &key)
        } else if name == b".nv.callgraph" {
            callgraph(data, &key)
        } else if name.starts_with(b".nv.capmerc.") && data.len() >= 4 {
            // sm_100+: the Mercury copy of a kernel's code, which starts
            // with the index of its `.text` section.
            let index = u32_at(data, 0).map_or(usize::MAX, |i| i as usize);
            let mut canonical = b"section ".to_vec();
            canonical.extend_from_slice(section_name(index));
            canonical.push(0);
            canonical.extend_from_slice(&data[4..]);
            canonical
        } else {
            data.to_vec()
        };
        // Name, kind and sizes first, so that two sections cannot run
        // together (a section without bytes in the file has a size).
        let mut part = b"section ".to_vec();
        part.extend_from_slice(name);
        part.push(0);
        part.extend_from_slice(&kind.to_le_bytes());
        part.extend_from_slice(&section.size.to_le_bytes());
        part.extend_from_slice(&(data.len() as u64).to_le_bytes());
        part.extend_from_slice(&data);
        parts.push(part);
    }
    // By name, not by place: line info puts its sections and symbols
    // among the others.
    parts.sort();
    let mut out = Vec::new();
    for part in parts {
        out.extend_from_slice(&(part.len() as u64).to_le_bytes());
        out.extend_from_slice(&part);
    }
    Some(out)
}

/// The sections left out: debug ones (`.debug_line`, `.nv_debug_line_sass`,
/// `.rela.debug_frame`, ...), and on sm_100 and later the `.nv.merc.*`
/// ones, a second copy of the file's tables in the Mercury encoding (their
/// own symbol table, `.nv.info`, relocations and debug sections, which
/// refer to their own symbol numbering and change with line info and the
/// folder). The code they describe is the `.text.*` sections', which are
/// hashed, as are the `.nv.capmerc.*` sections (that code in Mercury form,
/// each led by its `.text` section's index, which is taken by name).
fn is_debug_section(name: &[u8]) -> bool {
    if name.starts_with(b".nv.merc.") {
        return true;
    }
    let name = name
        .strip_prefix(b".rela")
        .or_else(|| name.strip_prefix(b".rel"))
        .unwrap_or(name);
    name.starts_with(b".debug") || name.starts_with(b".nv_debug")
}

pub(crate) fn u16_at(data: &[u8], at: usize) -> Option<u16> {
    data.get(at..at + 2)
        .and_then(|b| b.try_into().ok())
        .map(u16::from_le_bytes)
}

pub(crate) fn u32_at(data: &[u8], at: usize) -> Option<u32> {
    data.get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_le_bytes)
}

pub(crate) fn u64_at(data: &[u8], at: usize) -> Option<u64> {
    data.get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
}

/// `.nv.info` records with each symbol index replaced by its key; the
/// bytes as they are when they are not a run of records.
fn nv_info(data: &[u8], key: &dyn Fn(u64) -> Vec<u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut at = 0;
    while at < data.len() {
        let Some(head) = data.get(at..at + 4) else {
            return data.to_vec();
        };
        let (format, attribute) = (head[0], head[1]);
        out.extend_from_slice(&head[..2]);
        if format != EIFMT_SVAL {
            out.extend_from_slice(&head[2..]);
            at += 4;
            continue;
        }
        let size = usize::from(u16::from_le_bytes([head[2], head[3]]));
        let Some(value) = data.get(at + 4..at + 4 + size) else {
            return data.to_vec();
        };
        let words = if attribute == EXTERNS {
            size / 4
        } else if SYMBOL_FIRST.contains(&attribute) && size >= 4 {
            1
        } else {
            0
        };
        for word in 0..words {
            let index = u32_at(value, word * 4).unwrap_or_default();
            let name = key(u64::from(index));
            out.extend_from_slice(&(name.len() as u64).to_le_bytes());
            out.extend_from_slice(&name);
        }
        out.extend_from_slice(&value[words * 4..]);
        at += 4 + size;
    }
    out
}

/// Relocation entries (`r_offset`, `r_info`, with `rela` an addend) with
/// the symbol of each by its key.
fn relocations(data: &[u8], rela: bool, key: &dyn Fn(u64) -> Vec<u8>) -> Vec<u8> {
    let size = if rela { 24 } else { 16 };
    if !data.len().is_multiple_of(size) {
        return data.to_vec();
    }
    let mut out = Vec::with_capacity(data.len());
    for entry in data.chunks_exact(size) {
        let info = u64_at(entry, 8).unwrap_or_default();
        out.extend_from_slice(&entry[..8]);
        out.extend_from_slice(&(info & 0xffff_ffff).to_le_bytes());
        let name = key(info >> 32);
        out.extend_from_slice(&(name.len() as u64).to_le_bytes());
        out.extend_from_slice(&name);
        out.extend_from_slice(&entry[16..]);
    }
    out
}

/// The call graph: pairs of symbol indices (negative values mark calls
/// through pointers and the like), each index by its key.
fn callgraph(data: &[u8], key: &dyn Fn(u64) -> Vec<u8>) -> Vec<u8> {
    if !data.len().is_multiple_of(4) {
        return data.to_vec();
    }
    let mut out = Vec::with_capacity(data.len());
    for word in data.chunks_exact(4) {
        let value = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        if (value as i32) < 0 {
            out.extend_from_slice(word);
        } else {
            let name = key(u64::from(value));
            out.extend_from_slice(&(name.len() as u64).to_le_bytes());
            out.extend_from_slice(&name);
        }
    }
    out
}
