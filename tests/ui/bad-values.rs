use occ::launch_config;

#[launch_config(kernel = axpy)]
fn not_a_string() -> u32 {
    BLOCK_SIZE
}

#[launch_config(kernel = "axpy", min_occupancy = 1.5)]
fn above_one() -> u32 {
    BLOCK_SIZE
}

#[launch_config(kernel = "axpy", block_multiple = 0)]
fn zero_multiple() -> u32 {
    BLOCK_SIZE
}

#[launch_config(kernel = "tiled", dynamic_smem = "lots")]
fn not_a_size() -> u32 {
    DYNAMIC_SMEM
}

#[launch_config(kernel = "tiled", dynamic_smem = -1)]
fn negative() -> u32 {
    DYNAMIC_SMEM
}

#[launch_config(kernel = "spilly", allow_spills = true)]
fn flag_with_value() -> u32 {
    BLOCK_SIZE
}

#[launch_config(kernel = "axpy", kernel = "tiled")]
fn twice() -> u32 {
    BLOCK_SIZE
}

fn main() {
    let _ = (not_a_string(), above_one(), zero_multiple(), not_a_size(), negative(), flag_with_value(), twice());
}
