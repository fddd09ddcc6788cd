// No options: the build's first arch, no dynamic shared memory, and a table
// and selector over every arch of the build.
use occ::launch_config;

#[path = "support/expect.rs"]
mod expect;

#[launch_config(kernel = "axpy")]
fn launch(n: u32) -> (u32, u32, u32) {
    (grid_for(n), BLOCK_SIZE, DYNAMIC_SMEM)
}

#[launch_config(kernel = "axpy")]
fn table() -> (&'static str, &'static str, u32, f32, (u32, u32, u32), occ::Baked) {
    (KERNEL_NAME, ARCH, ACTIVE_BLOCKS_PER_SM, OCCUPANCY, BLOCK, LAUNCH)
}

// The expansion injects the names the body uses; a body that reaches them
// through a macro of its own gets every name.
macro_rules! block_of_the_site {
    () => {
        (BLOCK_SIZE, OCCUPANCY)
    };
}

#[launch_config(kernel = "axpy")]
fn through_a_macro() -> (u32, f32) {
    block_of_the_site!()
}

// A format string's captured names count as uses.
#[launch_config(kernel = "axpy")]
fn captured() -> String {
    format!("{BLOCK_SIZE} {DYNAMIC_SMEM}")
}

fn main() {
    let m = expect::manifest();
    assert_eq!(m.archs, ["sm_80", "sm_90"]);
    let sm80 = expect::plain("axpy", "sm_80");
    let sm90 = expect::plain("axpy", "sm_90");
    let (grid, block, smem) = launch(100_000);
    assert_eq!(block, sm80.block_size);
    assert_eq!(grid, 100_000u32.div_ceil(sm80.block_size));
    assert_eq!(smem, 0);
    // The manifest's own best block size agrees with the tuner.
    assert_eq!(expect::kernel_arch("axpy", "sm_80").best.as_ref().expect("a best launch").block_size, block);

    let (name, arch, blocks, occupancy, shape, baked) = table();
    assert_eq!(through_a_macro(), (sm80.block_size, occupancy));
    assert_eq!(captured(), format!("{} 0", sm80.block_size));
    assert_eq!(shape, (sm80.block_size, 1, 1));
    assert_eq!(baked.kernel, "axpy");
    let rows = expect::rows(&baked);
    assert_eq!(name, "axpy");
    assert_eq!(arch, "sm_80");
    assert_eq!(blocks, sm80.occupancy.active_blocks_per_sm);
    assert_eq!(occupancy, sm80.occupancy.occupancy as f32);
    assert_eq!(
        rows,
        [
            ("sm_80", 8, 0, sm80.block_size, 0, sm80.occupancy.active_blocks_per_sm),
            ("sm_90", 9, 0, sm90.block_size, 0, sm90.occupancy.active_blocks_per_sm),
        ]
    );

    // A cubin for sm_XY runs on X.Z with Z >= Y, and only on major X;
    // else the newest PTX at most the GPU's is JIT-compiled.
    use occ::select::How::{Jit, Sass};
    let pick = |major, minor| expect::pick(&baked, major, minor);
    assert_eq!(pick(8, 0), Some((Sass, sm80.block_size, 0)));
    assert_eq!(pick(8, 6), Some((Sass, sm80.block_size, 0)));
    assert_eq!(pick(8, 9), Some((Sass, sm80.block_size, 0)));
    assert_eq!(pick(9, 0), Some((Sass, sm90.block_size, 0)));
    assert_eq!(pick(7, 5), None);
    assert_eq!(pick(10, 0), Some((Jit, sm90.block_size, 0)));
    assert_eq!(pick(12, 0), Some((Jit, sm90.block_size, 0)));
}
