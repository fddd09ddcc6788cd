//! What occ-build embeds: the device code it analysed, less its line
//! information.
//!
//! The jobs compile with `-lineinfo` so that nvdisasm can name each
//! instruction's source line, and `-lineinfo` leaves the machine code
//! alone (`tests/tests/it/lineinfo.rs`). What it adds is not for shipping:
//! a line table per cubin that names the crate's absolute folder (so the
//! same crate built in two folders embedded different bytes) and about
//! twice the size. So what is embedded is the analysed output with the
//! line information taken out, not a second compile:
//!
//! - [`cubin_without_lines`]: the cubin with its line sections emptied and
//!   their bytes cut out of the file; every other section, the symbol table
//!   and the program headers are the analysed file's, byte for byte (the
//!   function checks that [`crate::schema::measured::cubin_hash`], which covers
//!   the code, constants, resources and symbols, is unchanged).
//! - [`ptx_without_lines`]: the PTX less its `.loc` and `.file` directives
//!   and its `.debug_*` sections, which is the PTX nvcc writes without
//!   `-lineinfo`, byte for byte (checked over the test corpus).
//!
//! The ELF editing is written here, on the bounds-checked reading of
//! `code_hash`, because no crate rewrites a cubin without
//! renumbering its symbols: the `.nv.info` sections refer to symbols by
//! index, so the symbol table must stay as it is. Sections are not removed
//! (their indices are referred to by the others) but emptied, and what
//! stays is laid out again without their bytes.

use crate::code_hash::{code_bytes, u16_at, u32_at, u64_at};

/// `SHT_NOBITS`.
const SHT_NOBITS: u32 = 8;

/// Whether a section holds line information that `-lineinfo` added:
/// `.debug_line`, `.debug_str` (the names of inlined functions),
/// `.nv_debug_line_sass` (SASS addresses to PTX lines) and
/// `.nv_debug_ptx_txt` (the PTX text itself), their relocations, and on
/// sm_100 and later the same in the Mercury tables (`.nv.merc.` first).
/// `.debug_frame`, which every cubin has, stays.
pub fn is_line_section(name: &[u8]) -> bool {
    let name = name.strip_prefix(b".nv.merc").unwrap_or(name);
    let name = name
        .strip_prefix(b".rela")
        .or_else(|| name.strip_prefix(b".rel"))
        .unwrap_or(name);
    matches!(
        name,
        b".debug_line" | b".debug_str" | b".nv_debug_line_sass" | b".nv_debug_ptx_txt"
    )
}

/// A section header: where it is in the file and what it covers.
struct Header {
    /// Offset of the header itself.
    at: usize,
    kind: u32,
    offset: u64,
    size: u64,
    align: u64,
    line: bool,
    /// `.debug_info`: the cubin was built for a debugger (`-G`).
    debug_info: bool,
}

/// `cubin` with its line sections ([`is_line_section`]) emptied and their
/// bytes cut out; the same bytes when it has none, or when it was built
/// for a debugger (`-G`: it has `.debug_info`, whose lines it keeps). `None` when it is not a
/// little-endian 64-bit ELF file whose line sections can be cut out
/// without changing anything else.
///
/// The bytes that stay are laid out again in their order, each at the next
/// offset its alignment allows (the header tables as ptxas leaves them,
/// unaligned), so the result depends on what stays only: the same code
/// built in two folders, whose line sections differ in length, gives the
/// same file, laid out by the rule ptxas's own cubins follow. Each program
/// header (a segment the driver loads) covers
/// the same sections as before, in the same order, at their new offsets;
/// one that covered part of a section gives `None`.
///
/// Long because its steps (lay out, place the headers, place the segments,
/// check every byte) share one table of what moved where, and each
/// step's `None` must stop the whole edit: read it top to bottom.
pub fn cubin_without_lines(cubin: &[u8]) -> Option<Vec<u8>> {
    if cubin.get(..4)? != b"\x7fELF" || cubin.get(4)? != &2 || cubin.get(5)? != &1 {
        return None;
    }
    let headers = headers(cubin)?;
    // A cubin built for a debugger keeps its line table: it belongs to the
    // debug information the build asked for.
    if !headers.iter().any(|h| h.line) || headers.iter().any(|h| h.debug_info) {
        return Some(cubin.to_vec());
    }
    let ph_offset = u64_at(cubin, 0x20)?;
    let ph_entry = u64::from(u16_at(cubin, 0x36)?);
    let ph_count = u64::from(u16_at(cubin, 0x38)?);
    let sh_offset = u64_at(cubin, 0x28)?;
    let sh_size = u64::from(u16_at(cubin, 0x3a)?) * u64::from(u16_at(cubin, 0x3c)?);

    // What stays, by its old offset: (old offset, size, alignment) of the
    // two header tables and every other section's bytes.
    let mut items: Vec<(u64, u64, u64)> = vec![(sh_offset, sh_size, 1)];
    if ph_count > 0 {
        items.push((ph_offset, ph_entry.checked_mul(ph_count)?, 1));
    }
    for h in &headers {
        if !h.line && h.kind != SHT_NOBITS && h.size > 0 {
            items.push((h.offset, h.size, h.align));
        }
    }
    items.sort_by_key(|&(offset, ..)| offset);
    // Things that share bytes (on sm_100 and later ptxas lays some
    // `.nv.merc.*` sections over others: `.nv.constant4`,
    // `.nv.global.init`, even the section table) move together, as one
    // block: (old start, old end, largest alignment, members).
    let mut blocks: Vec<Block> = Vec::new();
    for &(old, size, align) in &items {
        let end = old.checked_add(size)?;
        match blocks.last_mut() {
            Some(block) if old < block.1 => {
                block.1 = block.1.max(end);
                block.2 = block.2.max(align);
                block.3.push((old, align));
            }
            _ => blocks.push((old, end, align, vec![(old, align)])),
        }
    }
    // New offsets, and the bytes in their new places: each block at the
    // next offset its alignment allows, or, when a member starts inside
    // it at an offset that would then be misaligned, at the next offset
    // that keeps the block's old offset modulo its alignment.
    let mut out = cubin.get(..64)?.to_vec();
    let mut moved: Vec<(u64, u64, u64)> = Vec::new(); // (old, new, size)
    if blocks.first().is_some_and(|b| b.0 < 64) {
        return None; // something over the ELF header: not a layout to edit
    }
    for (start, end, align, members) in &blocks {
        let cursor = out.len() as u64;
        let mut new = cursor.next_multiple_of(*align);
        if !members
            .iter()
            .all(|&(old, a)| (new + (old - start)).is_multiple_of(a))
        {
            new = cursor + (start % align + align - cursor % align) % align;
        }
        out.resize(usize::try_from(new).ok()?, 0);
        let from = usize::try_from(*start).ok()?;
        let to = usize::try_from(*end).ok()?;
        out.extend_from_slice(cubin.get(from..to)?);
        moved.push((*start, new, end - start));
    }
    // Where an old offset is now. At or inside what stays: moved with it.
    // Elsewhere (padding, or a line section's old place): for the start of
    // a segment, the next thing that stays; for the end of one, and for an
    // empty thing (`NOBITS`, an emptied section), the end of the last
    // thing before it, where ptxas puts such things.
    let place_start = |offset: u64| -> u64 {
        moved
            .iter()
            .find(|&&(old, _, size)| offset >= old && offset < old + size)
            .or_else(|| moved.iter().find(|&&(old, ..)| old >= offset))
            .map_or(out.len() as u64, |&(old, new, _)| {
                new + offset.saturating_sub(old)
            })
    };
    let place_end = |offset: u64| -> u64 {
        moved
            .iter()
            .find(|&&(old, _, size)| offset > old && offset <= old + size)
            .map(|&(old, new, _)| new + (offset - old))
            .or_else(|| {
                moved
                    .iter()
                    .rev()
                    .find(|&&(old, _, size)| old + size <= offset)
                    .map(|&(_, new, size)| new + size)
            })
            .unwrap_or(offset.min(64))
    };
    let put = |out: &mut Vec<u8>, at: u64, value: u64| -> Option<()> {
        let at = usize::try_from(at).ok()?;
        out.get_mut(at..at.checked_add(8)?)?
            .copy_from_slice(&value.to_le_bytes());
        Some(())
    };
    let new_of = |offset: u64| {
        moved
            .iter()
            .find(|&&(old, _, size)| offset >= old && offset < old + size)
            .map(|&(old, new, _)| new + (offset - old))
    };
    let new_sh = new_of(sh_offset)?;
    let new_ph = if ph_count > 0 {
        new_of(ph_offset)?
    } else {
        ph_offset
    };
    let mut fields = vec![(0x20, new_ph), (0x28, new_sh)];
    for h in &headers {
        let at = new_sh + (h.at as u64 - sh_offset);
        let stays = !h.line && h.kind != SHT_NOBITS && h.size > 0;
        let offset = if stays {
            new_of(h.offset)?
        } else {
            place_end(h.offset)
        };
        fields.push((at + 24, offset));
        if h.line {
            fields.push((at + 32, 0));
        }
    }
    // Each segment covers what it covered: whole things that stay, which
    // keep their order; its size in the file is their new extent.
    for i in 0..ph_count {
        let at = usize::try_from(ph_offset + i * ph_entry).ok()?;
        let offset = u64_at(cubin, at + 8)?;
        let file_size = u64_at(cubin, at + 32)?;
        let memory_size = u64_at(cubin, at + 40)?;
        let end = offset.checked_add(file_size)?;
        let cut = moved.iter().any(|&(old, _, size)| {
            old < end && offset < old + size && (old < offset || old + size > end)
        });
        if cut || memory_size < file_size {
            return None;
        }
        let (start, new_end) = if file_size > 0 {
            (place_start(offset), place_end(end))
        } else {
            (place_end(offset), place_end(offset))
        };
        let new_size = new_end.checked_sub(start)?;
        let entry = new_ph + i * ph_entry;
        fields.push((entry + 8, start));
        fields.push((entry + 32, new_size));
        fields.push((entry + 40, new_size + (memory_size - file_size)));
    }
    for (at, value) in fields {
        put(&mut out, at, value)?;
    }
    // Every section that stays has its bytes, byte for byte, where its
    // header now says (the tables of names and the Mercury copies too,
    // which the code's hash leaves out) ...
    for h in headers
        .iter()
        .filter(|h| !h.line && h.kind != SHT_NOBITS && h.size > 0)
    {
        let new = usize::try_from(new_of(h.offset)?).ok()?;
        let old = usize::try_from(h.offset).ok()?;
        let size = usize::try_from(h.size).ok()?;
        if out.get(new..new.checked_add(size)?)? != cubin.get(old..old.checked_add(size)?)? {
            return None;
        }
    }
    // ... and the proof that nothing else changed: the same code,
    // constants, resources and symbols.
    (code_bytes(&out)? == code_bytes(cubin)?).then_some(out)
}

/// Bytes that move together: old start, old end, the largest alignment of
/// its members, and each member's (old offset, alignment).
type Block = (u64, u64, u64, Vec<(u64, u64)>);

/// The section headers of `cubin` (a little-endian 64-bit ELF file).
fn headers(cubin: &[u8]) -> Option<Vec<Header>> {
    let offset = usize::try_from(u64_at(cubin, 0x28)?).ok()?;
    let entry = usize::from(u16_at(cubin, 0x3a)?);
    let count = usize::from(u16_at(cubin, 0x3c)?);
    if entry < 64 {
        return None;
    }
    let names_at = offset.checked_add(usize::from(u16_at(cubin, 0x3e)?).checked_mul(entry)?)?;
    let names_offset = usize::try_from(u64_at(cubin, names_at + 24)?).ok()?;
    let names_size = usize::try_from(u64_at(cubin, names_at + 32)?).ok()?;
    let names = cubin.get(names_offset..names_offset.checked_add(names_size)?)?;
    (0..count)
        .map(|i| {
            let at = offset.checked_add(i.checked_mul(entry)?)?;
            let name = usize::try_from(u32_at(cubin, at)?).ok()?;
            let name = names.get(name..)?;
            let name = name.split(|&b| b == 0).next()?;
            Some(Header {
                at,
                kind: u32_at(cubin, at + 4)?,
                offset: u64_at(cubin, at + 24)?,
                size: u64_at(cubin, at + 32)?,
                align: u64_at(cubin, at + 48)?.max(1),
                line: is_line_section(name),
                debug_info: name.strip_prefix(b".nv.merc").unwrap_or(name) == b".debug_info",
            })
        })
        .collect()
}

/// `ptx` less its line information: the `.loc` and `.file` directives and
/// the `.section .debug_*` blocks (the names of inlined functions that
/// `.loc … inlined_at` lines refer to), never inside a `/* */` comment
/// (an inline `asm` may hold one). The blank lines of such a block stay:
/// nvcc writes the module's last blank line inside it. PTX built for a
/// debugger (`-G`: a `.debug_info` section) is left as it is.
///
/// What is left is the PTX nvcc writes without `-lineinfo`, up to blank
/// lines at the end of inline `asm` blocks, which `-lineinfo` adds for some
/// targets (sm_120) and PTX ignores.
pub fn ptx_without_lines(ptx: &str) -> String {
    if ptx
        .lines()
        .any(|l| directive(l.trim(), ".section").is_some_and(|rest| rest.trim() == ".debug_info"))
    {
        return ptx.to_string();
    }
    let mut out = String::with_capacity(ptx.len());
    let mut in_debug = false;
    let mut in_comment = false;
    for line in ptx.split_inclusive('\n') {
        let text = line.trim();
        if in_debug {
            if text == "}" {
                in_debug = false;
            } else if text.is_empty() {
                out.push_str(line);
            }
            continue;
        }
        let starts_in_comment = in_comment;
        in_comment = ends_in_comment(line, in_comment);
        if !starts_in_comment {
            if directive(text, ".loc").is_some() || directive(text, ".file").is_some() {
                continue;
            }
            if directive(text, ".section")
                .is_some_and(|rest| rest.trim_start().starts_with(".debug"))
            {
                in_debug = true;
                continue;
            }
        }
        out.push_str(line);
    }
    out
}

/// Whether a `/* */` comment is open at the end of `line`, given whether
/// one was at its start (a `//` outside one ends the line's code).
fn ends_in_comment(line: &str, mut open: bool) -> bool {
    let mut rest = line;
    loop {
        if open {
            match rest.find("*/") {
                Some(at) => {
                    open = false;
                    rest = &rest[at + 2..];
                }
                None => return true,
            }
        } else {
            let block = rest.find("/*");
            let to_end = rest.find("//");
            match (block, to_end) {
                (Some(b), Some(l)) if l < b => return false,
                (Some(b), _) => {
                    open = true;
                    rest = &rest[b + 2..];
                }
                (None, _) => return false,
            }
        }
    }
}

/// The rest of `line` after the directive `name` and the white space that
/// follows it; `None` when the line is another directive.
fn directive<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(name)?;
    rest.starts_with([' ', '\t']).then_some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_sections_by_name() {
        for name in [
            ".debug_line",
            ".rela.debug_line",
            ".rel.nv_debug_line_sass",
            ".nv_debug_ptx_txt",
            ".nv.merc.debug_line",
            ".nv.merc.rela.nv_debug_line_sass",
            ".nv.merc.nv_debug_ptx_txt",
        ] {
            assert!(is_line_section(name.as_bytes()), "{name}");
        }
        for name in [
            ".debug_frame",
            ".rela.debug_frame",
            ".nv.info",
            ".text.k",
            ".nv.merc.debug_frame",
            ".debug_line_x",
        ] {
            assert!(!is_line_section(name.as_bytes()), "{name}");
        }
    }

    #[test]
    fn ptx_loses_its_line_directives_and_debug_sections() {
        let with = "\t.loc\t1 2 0\n\tld.param.u64 \t%rd1, [k_param_0];\n\t.loc\t1 1 73, function_name $L__info_string0, inlined_at 1 2 44\n\tret;\n\n}\n\t.file\t1 \"/home/me/crate/k.cu\"\n\t.section\t.debug_str\n\t{\n$L__info_string0:\n.b8 95,90,0\n\n\t}\n";
        assert_eq!(
            ptx_without_lines(with),
            "\tld.param.u64 \t%rd1, [k_param_0];\n\tret;\n\n}\n\n"
        );
        // A `.loc` or `.file` inside a comment of an inline asm is the
        // user's text, not line information.
        let comment =
            "\t/* see\n.loc 1 2 3 */\n\tadd.s32 %r1, %r1, 1;\n\t// .loc 1 2 3\n\t.loc\t1 5 3\n";
        assert_eq!(
            ptx_without_lines(comment),
            "\t/* see\n.loc 1 2 3 */\n\tadd.s32 %r1, %r1, 1;\n\t// .loc 1 2 3\n"
        );
        // PTX built for a debugger keeps everything.
        let debug = "\t.loc\t1 2 0\n\t.section\t.debug_info\n\t{\n\t}\n";
        assert_eq!(ptx_without_lines(debug), debug);
        // A `.location`-like word or a data section is not line information.
        let other = "\t.local .align 4 .b8 __local_depot0[8];\n\t.section .nv.constant0\n";
        assert_eq!(ptx_without_lines(other), other);
    }

    #[test]
    fn a_file_that_is_not_a_cubin_is_refused() {
        assert_eq!(cubin_without_lines(b"not an elf file"), None);
        assert_eq!(cubin_without_lines(b"\x7fELF\x01\x01"), None);
    }
}
