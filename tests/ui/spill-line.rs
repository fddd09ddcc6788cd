use occ_macros::launch_config;

// `loopspill` (tests/ui/kernels/loop.cu) spills inside a loop: the error
// names the line, the loop and the point of peak register pressure.
#[launch_config(kernel = "loopspill")]
fn launch(n: u32) -> (u32, u32) {
    (grid_for(n), BLOCK_SIZE)
}

fn main() {
    let _ = launch(1 << 20);
}
