//! `ptx::parse_entries` and `ptx::target` on any bytes: no panic, no hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use occ_model::compiler::ptx;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = ptx::target(&text);
    for entry in ptx::parse_entries(&text) {
        // Every name is a substring of the input.
        assert!(text.contains(entry.name.as_str()));
    }
});
