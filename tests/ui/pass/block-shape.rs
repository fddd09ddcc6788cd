// `block = (x, y)`: a fixed 2-D shape is build.rs's (saying it again is
// allowed); `(x, _)` leaves y to the tuner, every size a multiple of x.
use occ::launch_config;
use occ_model::model::suggest::TuneRequest;

#[path = "support/expect.rs"]
mod expect;

#[launch_config(kernel = "transpose_tiled", block = (32, 8))]
fn tile() -> ((u32, u32, u32), u32, u32, occ::Baked) {
    (BLOCK, BLOCK_SIZE, ACTIVE_BLOCKS_PER_SM, LAUNCH)
}

#[launch_config(kernel = "axpy", block = (32, _))]
fn rows_of_a_warp() -> ((u32, u32, u32), u32) {
    (BLOCK, BLOCK_SIZE)
}

#[launch_config(kernel = "hoarder", block = (8, 4, _))]
fn bounded() -> (u32, u32, u32) {
    BLOCK
}

// A free z stays within CUDA's 64.
#[launch_config(kernel = "axpy", block = (1, 1, _))]
fn column() -> (u32, u32, u32) {
    BLOCK
}

fn main() {
    for arch in ["sm_80", "sm_90"] {
        let want = expect::best(
            "transpose_tiled",
            arch,
            TuneRequest { max_block_size: Some(256), block_multiple: Some(256), ..TuneRequest::default() },
        );
        let (shape, threads, blocks, baked) = tile();
        assert_eq!((shape, threads), ((32, 8, 1), 256));
        let row = baked.on(arch).expect("row");
        assert_eq!(row.block, (32, 8, 1));
        assert_eq!(row.active_blocks_per_sm, want.occupancy.active_blocks_per_sm, "{arch}");
        if arch == "sm_80" {
            assert_eq!(blocks, want.occupancy.active_blocks_per_sm);
        }
    }
    let want = expect::best(
        "axpy",
        "sm_80",
        TuneRequest { block_multiple: Some(32), ..TuneRequest::default() },
    );
    let (shape, threads) = rows_of_a_warp();
    assert_eq!(threads, want.block_size);
    assert_eq!(shape, (32, want.block_size / 32, 1));

    // __launch_bounds__(128): 8 x 4 x z threads with z at most 4.
    let want = expect::best(
        "hoarder",
        "sm_80",
        TuneRequest { block_multiple: Some(32), ..TuneRequest::default() },
    );
    let (x, y, z) = bounded();
    assert_eq!((x, y), (8, 4));
    assert_eq!(x * y * z, want.block_size);
    assert!(want.block_size <= 128);

    let want = expect::best(
        "axpy",
        "sm_80",
        TuneRequest { max_block_size: Some(64), block_multiple: Some(1), ..TuneRequest::default() },
    );
    assert_eq!(column(), (1, 1, want.block_size));
    assert!(want.block_size <= 64);
}
