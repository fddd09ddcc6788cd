use occ::launch_config;

// `hoarder` has __launch_bounds__(128): a 16 x 16 block cannot launch.
#[launch_config(kernel = "hoarder", block = (16, 16))]
fn too_big() -> (u32, u32, u32) {
    BLOCK
}

// A fixed shape and a cap that excludes it.
#[launch_config(kernel = "axpy", block = (16, 16), max_block_size = 128)]
fn capped() -> (u32, u32, u32) {
    BLOCK
}

// Only the last dimension may be left free.
#[launch_config(kernel = "axpy", block = (_, 16))]
fn free_x() -> (u32, u32, u32) {
    BLOCK
}

// CUDA's limits on every GPU: z at most 64, a block at most 1024 threads.
#[launch_config(kernel = "axpy", block = (1, 1, 128))]
fn deep() -> (u32, u32, u32) {
    BLOCK
}

#[launch_config(kernel = "axpy", block = (64, 32))]
fn huge() -> (u32, u32, u32) {
    BLOCK
}

// A free dimension after more fixed threads than the cap.
#[launch_config(kernel = "axpy", block = (64, _), max_block_size = 32)]
fn capped_free() -> (u32, u32, u32) {
    BLOCK
}

fn main() {
    let _ = (too_big(), capped(), free_x(), deep(), huge(), capped_free());
}
