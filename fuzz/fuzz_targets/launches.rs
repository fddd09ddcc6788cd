//! `compiler::launches::read` on any preprocessed text: no panic, and each
//! launch read is constant exactly when no reason says it is known only at
//! run time.
#![no_main]

use libfuzzer_sys::fuzz_target;
use occ_model::compiler::launches;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for l in launches::read(&text, "k.cu", &["k.cu"]) {
        assert_eq!(l.constant().is_some(), l.why.is_none(), "{l:?}");
    }
});
