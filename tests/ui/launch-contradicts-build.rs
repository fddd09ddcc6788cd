use occ::launch_config;

// build.rs declares transpose_tiled at (32, 8) (tests/tests/ui.rs).
#[launch_config(kernel = "transpose_tiled", block = (16, 16))]
fn other_shape() -> (u32, u32, u32) {
    BLOCK
}

#[launch_config(kernel = "transpose_tiled", block = (16, _))]
fn other_width() -> (u32, u32, u32) {
    BLOCK
}

#[launch_config(kernel = "transpose_tiled", dynamic_smem = 1024)]
fn other_smem() -> u32 {
    DYNAMIC_SMEM
}

#[launch_config(kernel = "transpose_tiled", max_block_size = 128)]
fn capped() -> u32 {
    BLOCK_SIZE
}

fn main() {
    let _ = (other_shape(), other_width(), other_smem(), capped());
}
