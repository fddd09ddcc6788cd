//! `Lock::from_text` on any bytes: no panic; a lock it accepts can stand in
//! for a build (manifest and `kernels.rs`, no panic) and serializes back to
//! itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use occ_model::schema::lock::Lock;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("fuzz/occ.lock");
    let Ok(lock) = Lock::from_text(text, path) else {
        return;
    };
    if let Ok(manifest) = occ_model::assemble::lock_manifest(&lock, &lock.archs, path) {
        let _ = occ_model::render::kernels_rs::kernels_rs(&manifest);
    }
    let again = Lock::from_text(&lock.to_text(), path);
    assert!(again.is_ok(), "a lock that was read must read back: {again:?}");
});
