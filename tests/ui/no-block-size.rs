use occ::launch_config;

// hoarder's __launch_bounds__(128) leaves no multiple of 192.
#[launch_config(kernel = "hoarder", block_multiple = 192)]
fn launch(n: u32) -> (u32, u32) {
    (grid_for(n), BLOCK_SIZE)
}

fn main() {
    let _ = launch(1 << 20);
}
