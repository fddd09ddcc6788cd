//! `Manifest::from_json` on any bytes: no panic; a manifest it accepts can be
//! turned into `kernels.rs` (no panic), and serializes back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use occ_model::schema::manifest::Manifest;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(manifest) = Manifest::from_json(text, Path::new("fuzz/manifest.json")) else {
        return;
    };
    let _ = occ_model::render::kernels_rs::kernels_rs(&manifest);
    let _ = manifest.lookup("saxpy");
    let json = manifest.to_json();
    let again = Manifest::from_json(&json, Path::new("fuzz/manifest.json"));
    assert!(
        again.is_ok(),
        "a manifest that was read must read back: {again:?}"
    );
});
