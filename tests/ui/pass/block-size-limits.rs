// max_block_size and block_multiple narrow the search.
use occ::launch_config;
use occ_model::model::suggest::TuneRequest;

#[path = "support/expect.rs"]
mod expect;

#[launch_config(kernel = "axpy", max_block_size = 200)]
fn capped() -> u32 {
    BLOCK_SIZE
}

#[launch_config(kernel = "blur::box<double, 5>", block_multiple = 96)]
fn multiple() -> u32 {
    BLOCK_SIZE
}

#[launch_config(kernel = "axpy", max_block_size = 500, block_multiple = 100)]
fn both() -> u32 {
    BLOCK_SIZE
}

fn main() {
    let req = |max, multiple| TuneRequest {
        max_block_size: max,
        block_multiple: multiple,
        ..TuneRequest::default()
    };
    let want = expect::best("axpy", "sm_80", req(Some(200), None)).block_size;
    assert!(want <= 200);
    assert_eq!(capped(), want);
    let want = expect::best("blur::box<double, 5>", "sm_80", req(None, Some(96))).block_size;
    assert_eq!(want % 96, 0);
    assert_eq!(multiple(), want);
    let want = expect::best("axpy", "sm_80", req(Some(500), Some(100))).block_size;
    assert!(want <= 500 && want % 100 == 0);
    assert_eq!(both(), want);
}
