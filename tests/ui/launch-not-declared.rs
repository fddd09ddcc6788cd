use occ::launch_config;

// build.rs declares no launch for axpy: the gate judges it at its best block.
#[launch_config(kernel = "axpy", block = (32, 8))]
fn tile() -> (u32, u32, u32) {
    BLOCK
}

#[launch_config(kernel = "tiled", block = 128, dynamic_smem = 512, min_occupancy = 0.25)]
fn with_smem() -> (u32, u32, u32) {
    BLOCK
}

fn main() {
    let _ = (tile(), with_smem());
}
