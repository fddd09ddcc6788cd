// `arch = ...` picks the arch of the plain consts, and the table holds it alone.
use occ::launch_config;

#[path = "support/expect.rs"]
mod expect;

#[launch_config(kernel = "axpy", arch = "sm_90")]
fn on_hopper() -> (&'static str, u32, occ::Baked) {
    (ARCH, BLOCK_SIZE, LAUNCH)
}

// Other spellings of the same arch.
#[launch_config(kernel = "axpy", arch = "90")]
fn short_spelling() -> &'static str {
    ARCH
}

#[launch_config(kernel = "axpy", arch = "9.0")]
fn dotted_spelling() -> &'static str {
    ARCH
}

fn main() {
    let sm90 = expect::plain("axpy", "sm_90");
    let (arch, block, baked) = on_hopper();
    let rows = expect::rows(&baked);
    let on_ampere = expect::pick(&baked, 8, 0);
    assert_eq!(arch, "sm_90");
    assert_eq!(block, sm90.block_size);
    assert_eq!(rows, [("sm_90", 9, 0, sm90.block_size, 0, sm90.occupancy.active_blocks_per_sm)]);
    assert_eq!(on_ampere, None);
    assert_eq!(short_spelling(), "sm_90");
    assert_eq!(dotted_spelling(), "sm_90");
}
