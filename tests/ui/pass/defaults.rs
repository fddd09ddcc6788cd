// No options: the build's first arch, no dynamic shared memory, and a table
// and selector over every arch of the build.
use occ_macros::launch_config;

#[path = "support/expect.rs"]
mod expect;

#[launch_config(kernel = "axpy")]
fn launch(n: u32) -> (u32, u32, u32) {
    (grid_for(n), BLOCK_SIZE, DYNAMIC_SMEM_BYTES)
}

#[launch_config(kernel = "axpy")]
fn table() -> (&'static str, &'static str, u32, f32, &'static [(&'static str, u32, u32, u32, u32, u32)]) {
    (KERNEL_NAME, ARCH, BLOCKS_PER_SM, OCCUPANCY, LAUNCH_CONFIGS)
}

#[launch_config(kernel = "axpy")]
fn pick(major: u32, minor: u32) -> Option<(u32, u32)> {
    launch_for(major, minor)
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
    assert_eq!(expect::kernel_arch("axpy", "sm_80").best.block_size, block);

    let (name, arch, blocks, occupancy, rows) = table();
    assert_eq!(name, "axpy");
    assert_eq!(arch, "sm_80");
    assert_eq!(blocks, sm80.occupancy.active_blocks);
    assert_eq!(occupancy, sm80.occupancy.occupancy as f32);
    assert_eq!(
        rows,
        [
            ("sm_80", 8, 0, sm80.block_size, 0, sm80.occupancy.active_blocks),
            ("sm_90", 9, 0, sm90.block_size, 0, sm90.occupancy.active_blocks),
        ]
    );

    // A cubin for sm_XY runs on X.Z with Z >= Y, and only on major X.
    assert_eq!(pick(8, 0), Some((sm80.block_size, 0)));
    assert_eq!(pick(8, 6), Some((sm80.block_size, 0)));
    assert_eq!(pick(8, 9), Some((sm80.block_size, 0)));
    assert_eq!(pick(9, 0), Some((sm90.block_size, 0)));
    assert_eq!(pick(7, 5), None);
    assert_eq!(pick(10, 0), None);
    assert_eq!(pick(12, 0), None);
}
