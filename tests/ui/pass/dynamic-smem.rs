// dynamic_smem = BYTES (a literal or a constant expression) and "max".
use occ::launch_config;

#[path = "support/expect.rs"]
mod expect;

#[launch_config(kernel = "tiled", dynamic_smem = 40 * 1024)]
fn fixed() -> (u32, u32, Vec<(&'static str, u32, u32, u32, u32, u32)>) {
    (BLOCK_SIZE, DYNAMIC_SMEM, expect::rows(&LAUNCH))
}

#[launch_config(kernel = "tiled", dynamic_smem = 4096)]
fn small() -> (u32, u32) {
    (BLOCK_SIZE, DYNAMIC_SMEM)
}

#[launch_config(kernel = "hoarder", dynamic_smem = "max")]
fn max() -> (u32, u32, u32, Vec<(&'static str, u32, u32, u32, u32, u32)>) {
    (BLOCK_SIZE, DYNAMIC_SMEM, ACTIVE_BLOCKS_PER_SM, expect::rows(&LAUNCH))
}

fn main() {
    for (arch, i) in [("sm_80", 0), ("sm_90", 1)] {
        let want = expect::best("tiled", arch, expect::fixed(40 * 1024));
        let (block, smem, rows) = fixed();
        if i == 0 {
            assert_eq!((block, smem), (want.block_size, 40 * 1024));
        }
        assert_eq!((rows[i].3, rows[i].4), (want.block_size, 40 * 1024), "{arch}");
        assert_eq!(rows[i].5, want.occupancy.active_blocks_per_sm, "{arch}");
    }
    let want = expect::best("tiled", "sm_80", expect::fixed(4096));
    assert_eq!(small(), (want.block_size, 4096));

    let plain = expect::plain("hoarder", "sm_80");
    let room = expect::headroom("hoarder", "sm_80", &plain);
    let (block, smem, blocks, rows) = max();
    assert_eq!((block, smem, blocks), (plain.block_size, room, plain.occupancy.active_blocks_per_sm));
    // "max" keeps the occupancy: with that much, the same blocks still fit.
    let with = expect::best("hoarder", "sm_80", expect::fixed(room));
    assert_eq!(with.occupancy.active_blocks_per_sm, blocks);
    let plain90 = expect::plain("hoarder", "sm_90");
    assert_eq!(rows[1].4, expect::headroom("hoarder", "sm_90", &plain90));
}
