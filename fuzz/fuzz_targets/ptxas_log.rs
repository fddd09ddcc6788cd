//! `ptxas::parse_log` (and the kernel naming that follows it in a build) on
//! any bytes: no panic, no hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use occ_model::{compiler::names, compiler::ptxas};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(mut log) = ptxas::parse_log(&text) {
        let linked = log.linked.clone();
        log.apply_linked(&linked);
        for k in &log.kernels {
            let _ = k.stack_size();
            let _ = k.warnings().count();
            let _ = names::kernel_name(&k.name);
            let _ = names::rust_ident(&k.name);
        }
        let _ = names::unique_idents(log.kernels.iter().map(|k| k.name.as_str()));
    }
});
