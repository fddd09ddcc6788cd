// smem_per_thread (+ smem_fixed): dynamic shared memory that grows with the block.
use occ::launch_config;
use occ_model::model::suggest::{DynamicSmem, TuneRequest};

#[path = "support/expect.rs"]
mod expect;

#[launch_config(kernel = "tiled", smem_per_thread = 96, smem_fixed = 2048)]
fn per_thread() -> (u32, u32) {
    (BLOCK_SIZE, DYNAMIC_SMEM)
}

#[launch_config(kernel = "tiled", smem_per_thread = 4)]
fn per_thread_only() -> (u32, u32) {
    (BLOCK_SIZE, DYNAMIC_SMEM)
}

fn main() {
    let request = |per_thread, fixed| TuneRequest {
        dynamic_smem: DynamicSmem::PerThread { per_thread, fixed },
        ..TuneRequest::default()
    };
    let want = expect::best("tiled", "sm_80", request(96, 2048));
    let (block, smem) = per_thread();
    assert_eq!(block, want.block_size);
    assert_eq!(smem, 96 * block + 2048);
    let want = expect::best("tiled", "sm_80", request(4, 0));
    assert_eq!(per_thread_only(), (want.block_size, 4 * want.block_size));
}
