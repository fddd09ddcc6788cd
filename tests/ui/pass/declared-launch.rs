// build.rs declares `transpose_tiled`'s launch, 32x8
// (`.launch("transpose_tiled", Launch::block_2d(32, 8))`): a site that
// names no block launches at it, with the numbers the gate judged there
// (the manifest's `declared`); one whose options agree with it, too.
use occ::launch_config;

#[path = "support/expect.rs"]
mod expect;

#[launch_config(kernel = "transpose_tiled")]
fn plain() -> ((u32, u32, u32), u32, u32, u32, u32, occ::Baked) {
    (BLOCK, BLOCK_SIZE, DYNAMIC_SMEM, ACTIVE_BLOCKS_PER_SM, grid_for(1000), LAUNCH)
}

#[launch_config(kernel = "transpose_tiled", block = (32, _), max_block_size = 512, block_multiple = 64)]
fn agreeing() -> (u32, u32, u32) {
    BLOCK
}

// "max": the most dynamic shared memory that keeps the declared launch's
// resident blocks, so the gate's numbers still hold.
#[launch_config(kernel = "transpose_tiled", dynamic_smem = "max", tuned = true)]
fn headroom() -> (u32, u32, u32) {
    (BLOCK_SIZE, DYNAMIC_SMEM, ACTIVE_BLOCKS_PER_SM)
}

fn main() {
    let (block, threads, smem, blocks, grid, baked) = plain();
    assert_eq!((block, threads, smem), ((32, 8, 1), 256, 0));
    assert_eq!(grid, 1000_u32.div_ceil(256));
    for arch in ["sm_80", "sm_90"] {
        let ka = expect::kernel_arch("transpose_tiled", arch);
        let d = ka.declared.as_ref().expect("declared by build.rs");
        assert_eq!(d.launch.block, [32, 8, 1]);
        assert_eq!(ka.judged().expect("launchable").block_size, 256);
        let row = baked.on(arch).expect("row");
        assert_eq!((row.block, row.dynamic_smem), ((32, 8, 1), 0), "{arch}");
        assert_eq!(row.active_blocks_per_sm, d.active_blocks_per_sm, "{arch}");
        if arch == "sm_80" {
            assert_eq!(blocks, d.active_blocks_per_sm);
        }
    }
    assert_eq!(agreeing(), (32, 8, 1));
    let at = expect::best(
        "transpose_tiled",
        "sm_80",
        occ_model::model::suggest::TuneRequest {
            max_block_size: Some(256),
            block_multiple: Some(256),
            ..Default::default()
        },
    );
    let (threads, smem, blocks) = headroom();
    assert_eq!((threads, blocks), (256, at.occupancy.active_blocks_per_sm));
    assert_eq!(smem, expect::headroom("transpose_tiled", "sm_80", &at));
}
