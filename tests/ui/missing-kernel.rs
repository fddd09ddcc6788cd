use occ::launch_config;

#[launch_config(max_block_size = 256)]
fn launch(n: u32) -> (u32, u32) {
    (grid_for(n), BLOCK_SIZE)
}

fn main() {
    let _ = launch(1 << 20);
}
