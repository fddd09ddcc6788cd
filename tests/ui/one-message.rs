use occ::launch_config;

// One mistake, one message: every injected name still exists, so the body
// below gives no second error.
#[launch_config(kernel = "saxpy")]
fn launch(n: u32) -> (&'static str, u32, u32, (u32, u32, u32), u32, u32, f32, usize, bool) {
    (
        KERNEL_NAME,
        grid_for(n),
        BLOCK_SIZE,
        BLOCK,
        DYNAMIC_SMEM,
        ACTIVE_BLOCKS_PER_SM,
        OCCUPANCY,
        LAUNCH.archs.len(),
        LAUNCH.for_device(8, 0).is_some(),
    )
}

fn main() {
    let _ = launch(1 << 20);
}
