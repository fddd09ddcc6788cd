use occ::launch_config;

#[launch_config(kernel = "tiled", dynamic_smem = 300 * 1024)]
fn launch(n: u32) -> (u32, u32, u32) {
    (grid_for(n), BLOCK_SIZE, DYNAMIC_SMEM)
}

fn main() {
    let _ = launch(1 << 20);
}
