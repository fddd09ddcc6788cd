//! `measured::cubin_hash` on real cubins: nvcc 13.5's
//! sm_90 build of `tests/fixtures/cu/lines/tmpl.cu` (spills, templates,
//! noinline calls) with and without `-lineinfo`. Made in a scratch folder:
//!
//! ```text
//! nvcc --cubin -gencode arch=compute_90,code=sm_90 [-lineinfo] kernels/tmpl.cu -o …
//! ```
//!
//! The line table names that folder and shifts every symbol index; ptxas
//! put the section headers at an offset that is not a multiple of 8.

use occ_model::schema::measured::{content_hash, cubin_hash};

const WITH_LINES: &[u8] = include_bytes!("../fixtures/tmpl.lineinfo.sm_90.cubin");
const WITHOUT_LINES: &[u8] = include_bytes!("../fixtures/tmpl.sm_90.cubin");

#[test]
fn line_info_does_not_change_a_real_cubins_hash() {
    assert_ne!(WITH_LINES, WITHOUT_LINES);
    assert_eq!(cubin_hash(WITH_LINES), cubin_hash(WITHOUT_LINES));
}

#[test]
fn a_real_cubin_is_read_as_elf_not_hashed_whole() {
    // Whole-file hashing would count the line table and the folder in it.
    assert_ne!(cubin_hash(WITH_LINES), content_hash(WITH_LINES));
    assert_ne!(cubin_hash(WITHOUT_LINES), content_hash(WITHOUT_LINES));
}

/// The file offset and size of each section whose name starts with
/// `prefix` (a 64-bit little-endian ELF file's section headers).
fn sections(bytes: &[u8], prefix: &[u8]) -> Vec<(usize, usize)> {
    let u16_at = |at: usize| usize::from(u16::from_le_bytes([bytes[at], bytes[at + 1]]));
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
    let (table, entry, count, names) = (u64_at(0x28), u16_at(0x3a), u16_at(0x3c), u16_at(0x3e));
    let names = u64_at(table + names * entry + 24);
    (0..count)
        .map(|i| table + i * entry)
        .filter(|&h| bytes[names + u32_at(h)..].starts_with(prefix))
        .map(|h| (u64_at(h + 24), u64_at(h + 32)))
        .collect()
}

#[test]
fn a_changed_instruction_changes_the_hash() {
    let texts = sections(WITHOUT_LINES, b".text.");
    assert!(texts.len() >= 2, "{texts:?}");
    for (offset, size) in texts {
        let mut bytes = WITHOUT_LINES.to_vec();
        bytes[offset + size / 2] ^= 0x10;
        assert_ne!(cubin_hash(&bytes), cubin_hash(WITHOUT_LINES));
    }
}
