use occ_macros::launch_config;

// One mistake, one message: every injected name still exists, so the body
// below gives no second error.
#[launch_config(kernel = "saxpy")]
fn launch(n: u32) -> (&'static str, u32, u32, u32, u32, f32, usize, Option<(u32, u32)>) {
    (
        KERNEL_NAME,
        grid_for(n),
        BLOCK_SIZE,
        DYNAMIC_SMEM_BYTES,
        BLOCKS_PER_SM,
        OCCUPANCY,
        LAUNCH_CONFIGS.len(),
        launch_for(8, 0),
    )
}

fn main() {
    let _ = launch(1 << 20);
}
