// min_occupancy that the launch reaches; spills accepted by allow_spills or a budget.
use occ::launch_config;

#[path = "support/expect.rs"]
mod expect;

#[launch_config(kernel = "axpy", min_occupancy = 1.0)]
fn full() -> f32 {
    OCCUPANCY
}

#[launch_config(kernel = "hoarder", min_occupancy = 0.1)]
fn low_but_enough() -> f32 {
    OCCUPANCY
}

#[launch_config(kernel = "spilly", allow_spills)]
fn spills_allowed() -> u32 {
    BLOCK_SIZE
}

// The budget covers both archs' spill stores + loads (tens of KB).
#[launch_config(kernel = "spilly", max_spill_bytes = 64 * 1024)]
fn spills_within_budget() -> u32 {
    BLOCK_SIZE
}

fn main() {
    assert_eq!(full(), 1.0);
    // Sites without launch options bake the launch the gate judges: these
    // kernels' `__launch_bounds__` block.
    let judged = |name: &str| {
        let ka = expect::kernel_arch(name, "sm_80");
        let j = ka.judged().expect("launchable");
        (j.block_size, j.occupancy as f32)
    };
    assert_eq!(low_but_enough(), judged("hoarder").1);
    let spilly = expect::kernel_arch("spilly", "sm_80");
    assert!(spilly.facts.spills() && spilly.facts.spill_bytes() <= 64 * 1024);
    assert!(expect::kernel_arch("spilly", "sm_90").facts.spill_bytes() <= 64 * 1024);
    assert_eq!(spills_allowed(), judged("spilly").0);
    assert_eq!(spills_within_budget(), spills_allowed());
}
