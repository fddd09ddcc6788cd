use occ::launch_config;

// `box` is both blur::box<float, 5> and blur::box<double, 5>.
#[launch_config(kernel = "box")]
fn launch(n: u32) -> (u32, u32) {
    (grid_for(n), BLOCK_SIZE)
}

fn main() {
    let _ = launch(1 << 20);
}
