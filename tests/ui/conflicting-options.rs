use occ::launch_config;

#[launch_config(kernel = "tiled", dynamic_smem = 1024, smem_per_thread = 8)]
fn two_smem_sizes() -> u32 {
    DYNAMIC_SMEM
}

#[launch_config(kernel = "tiled", smem_fixed = 1024)]
fn fixed_alone() -> u32 {
    DYNAMIC_SMEM
}

#[launch_config(kernel = "spilly", allow_spills, max_spill_bytes = 64)]
fn two_spill_policies() -> u32 {
    BLOCK_SIZE
}

fn main() {
    let _ = (two_smem_sizes(), fixed_alone(), two_spill_policies());
}
