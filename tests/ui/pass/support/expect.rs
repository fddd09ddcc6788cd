// Expected launches, computed independently of the macro's expansion: the
// tuner of occ-build on the resources of the manifest that OCC_MANIFEST names.
#![allow(dead_code)]

use occ_model::schema::manifest::{KernelArch, Lookup, Manifest};
use occ_model::model::occupancy::BlockLaunch;
use occ_model::model::suggest::{self, BestBlock, DynamicSmem, TuneRequest};
use occ_model::{compiler::analyze, model::arch};
use std::path::Path;

pub fn manifest() -> Manifest {
    occ_shell::files::read_manifest(Path::new(env!("OCC_MANIFEST"))).expect("read the ui manifest")
}

pub fn kernel_arch(name: &str, arch_name: &str) -> KernelArch {
    let m = manifest();
    match m.lookup(name) {
        Lookup::Found(k) => k.archs[arch_name].clone(),
        other => panic!("{name}: {other:?}"),
    }
}

pub fn best(name: &str, arch_name: &str, request: TuneRequest) -> BestBlock {
    let ka = kernel_arch(name, arch_name);
    let limits = arch::lookup(arch_name).expect("arch");
    suggest::best_block_size(limits, &analyze::model_of(&ka.facts), &request)
        .expect("tune")
        .expect("a launch")
}

pub fn plain(name: &str, arch_name: &str) -> BestBlock {
    best(name, arch_name, TuneRequest::default())
}

pub fn fixed(bytes: u32) -> TuneRequest {
    TuneRequest {
        dynamic_smem: DynamicSmem::Fixed(bytes),
        ..TuneRequest::default()
    }
}

pub fn headroom(name: &str, arch_name: &str, b: &BestBlock) -> u32 {
    let ka = kernel_arch(name, arch_name);
    let limits = arch::lookup(arch_name).expect("arch");
    suggest::available_dynamic_smem(
        limits,
        &analyze::model_of(&ka.facts),
        &BlockLaunch::new(b.block_size),
        b.occupancy.active_blocks_per_sm,
    )
    .expect("headroom")
}

/// The baked table as `(arch, major, minor, threads, dynamic smem, blocks per SM)` rows.
pub fn rows(baked: &occ::Baked) -> Vec<(&'static str, u32, u32, u32, u32, u32)> {
    baked
        .archs
        .iter()
        .map(|r| (r.arch, r.major, r.minor, r.threads(), r.dynamic_smem, r.active_blocks_per_sm))
        .collect()
}

/// `(how, threads, dynamic smem)` of the row the table picks for a GPU.
pub fn pick(baked: &occ::Baked, major: u32, minor: u32) -> Option<(occ::select::How, u32, u32)> {
    baked
        .pick(major, minor)
        .map(|(how, r)| (how, r.threads(), r.dynamic_smem))
}
