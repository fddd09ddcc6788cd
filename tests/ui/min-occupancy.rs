use occ::launch_config;

#[launch_config(kernel = "hoarder", min_occupancy = 0.5)]
fn launch(n: u32) -> (u32, u32) {
    (grid_for(n), BLOCK_SIZE)
}

fn main() {
    let _ = launch(1 << 20);
}
