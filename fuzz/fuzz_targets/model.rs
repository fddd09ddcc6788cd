//! The occupancy model's entry points (what `cargo occ calc` and the tuner
//! call) on arbitrary inputs: no panic, no hang, and results within bounds.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use occ_model::model::arch;
use occ_model::model::occupancy::{occupancy, CachePref, KernelResources, BlockLaunch, PartitionedGc};
use occ_model::model::suggest::{self, DynamicSmem, TuneRequest};

#[derive(Debug, Arbitrary)]
struct Input {
    arch: u8,
    registers: u32,
    static_smem: u32,
    barriers: u32,
    max_threads: Option<u32>,
    virtual_resources: u32,
    max_dynamic_smem: Option<u32>,
    block_size: u32,
    dynamic_smem: u32,
    carveout: Option<u8>,
    cache_pref: u8,
    gc: u8,
    per_thread: Option<(u32, u32)>,
    max_block_size: Option<u32>,
    block_multiple: Option<u32>,
    num_blocks: u32,
}

fuzz_target!(|input: Input| {
    let archs = arch::all();
    let arch = &archs[usize::from(input.arch) % archs.len()];
    let kernel = KernelResources {
        registers: input.registers,
        static_smem: input.static_smem,
        barriers: input.barriers,
        max_threads_per_block: input.max_threads,
        virtual_resources: input.virtual_resources,
        max_dynamic_smem: input.max_dynamic_smem,
    };
    let cache_pref = match input.cache_pref % 4 {
        0 => CachePref::None,
        1 => CachePref::Shared,
        2 => CachePref::L1,
        _ => CachePref::Equal,
    };
    let partitioned_gc = match input.gc % 3 {
        0 => PartitionedGc::Off,
        1 => PartitionedGc::On,
        _ => PartitionedGc::OnStrict,
    };
    let launch = BlockLaunch {
        block_size: input.block_size,
        dynamic_smem: input.dynamic_smem,
        carveout: input.carveout,
        cache_pref,
        partitioned_gc,
    };
    if let Ok(occ) = occupancy(arch, &kernel, &launch) {
        assert!(occ.active_warps_per_sm <= arch.max_warps_per_sm());
        assert!((0.0..=1.0).contains(&occ.occupancy));
    }
    let _ = suggest::available_dynamic_smem(arch, &kernel, &launch, input.num_blocks);
    let request = TuneRequest {
        dynamic_smem: match input.per_thread {
            Some((per_thread, fixed)) => DynamicSmem::PerThread { per_thread, fixed },
            None => DynamicSmem::Fixed(input.dynamic_smem),
        },
        // A tiny multiple makes the search take up to 1024 steps; still bounded.
        max_block_size: input.max_block_size,
        block_multiple: input.block_multiple,
        carveout: input.carveout,
        cache_pref,
        partitioned_gc,
    };
    if let Ok(Some(best)) = suggest::best_block_size(arch, &kernel, &request) {
        assert!(best.block_size > 0 && best.block_size <= arch.max_threads_per_block);
        assert!(best.occupancy.active_warps_per_sm <= arch.max_warps_per_sm());
    }
    let _ = suggest::what_if(arch, &kernel, &launch);
});
