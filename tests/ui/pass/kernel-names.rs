// A kernel by its extern "C" name, its demangled name without parameters
// (spacing free), its symbol, or a unique base name; on a method too.
use occ::launch_config;

#[path = "support/expect.rs"]
mod expect;

#[launch_config(kernel = "blur::box<float, 5>")]
fn demangled() -> &'static str {
    KERNEL_NAME
}

#[launch_config(kernel = "blur::box<float,5>")]
fn squashed() -> &'static str {
    KERNEL_NAME
}

#[launch_config(kernel = "_ZN4blur3boxIdLi5EEEvPKT_PS1_i")]
fn symbol() -> &'static str {
    KERNEL_NAME
}

#[launch_config(kernel = "tiled")]
fn extern_c() -> &'static str {
    KERNEL_NAME
}

struct Blur;

impl Blur {
    #[launch_config(kernel = "blur::box<float, 5>", block_multiple = 64)]
    fn launch(&self, n: u32) -> (&'static str, u32, u32) {
        (KERNEL_NAME, grid_for(n), BLOCK_SIZE)
    }
}

fn main() {
    assert_eq!(demangled(), "_ZN4blur3boxIfLi5EEEvPKT_PS1_i");
    assert_eq!(squashed(), demangled());
    assert_eq!(symbol(), "_ZN4blur3boxIdLi5EEEvPKT_PS1_i");
    assert_eq!(extern_c(), "tiled");
    let (name, grid, block) = Blur.launch(1 << 20);
    assert_eq!(name, demangled());
    assert_eq!(block % 64, 0);
    assert_eq!(grid, (1u32 << 20).div_ceil(block));
}
