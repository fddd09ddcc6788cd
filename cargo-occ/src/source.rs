//! What to write in CUDA source for a kernel's directives and register caps:
//! the `__launch_bounds__`, `__maxnreg__` and `__cluster_dims__` text that
//! `explain` and `sweep` print. nvcc refuses `__maxnreg__` beside
//! `__launch_bounds__` ("cannot be applied to the same kernel"), and ptxas
//! ignores `-maxrregcount` for a kernel with either.

use occ_model::model::arch::Arch;
use occ_model::model::suggest;
use occ_model::schema::manifest::LaunchBounds;

/// Whether the kernel has `__launch_bounds__` (`.maxntid`, `.reqntid` or
/// `.minnctapersm`), which nvcc refuses beside `__maxnreg__`.
pub fn has_bounds(lb: &LaunchBounds) -> bool {
    lb.max_threads.is_some() || lb.req_threads.is_some() || lb.min_blocks_per_sm.is_some()
}

/// The kernel's directives as they are written in the source
/// (`__launch_bounds__(1024, 2)`, `__maxnreg__(40)`, `__cluster_dims__(2, 1, 1)`;
/// `.reqntid`, which has no CUDA C++ spelling, as PTX), or `None`.
pub fn written(lb: &LaunchBounds) -> Option<String> {
    let dims = |d: &[u32; 3]| format!("{}, {}, {}", d[0], d[1], d[2]);
    let mut out = Vec::new();
    if let Some(max) = lb.max_threads.as_ref() {
        let product = max.iter().fold(1u32, |a, &b| a.saturating_mul(b.max(1)));
        let mut args = vec![product.to_string()];
        match (lb.min_blocks_per_sm, lb.max_cluster_rank) {
            (Some(m), Some(c)) => args.extend([m.to_string(), c.to_string()]),
            (None, Some(c)) => args.extend(["0".to_string(), c.to_string()]),
            (Some(m), None) => args.push(m.to_string()),
            (None, None) => {}
        }
        out.push(format!("__launch_bounds__({})", args.join(", ")));
    } else if let Some(m) = lb.min_blocks_per_sm {
        out.push(format!(".minnctapersm {m}"));
    }
    if let Some(r) = lb.req_threads.as_ref() {
        out.push(format!(".reqntid {}", dims(r)));
    }
    if let Some(n) = lb.max_registers {
        out.push(format!("__maxnreg__({n})"));
    }
    if let Some(c) = lb.cluster_dims.as_ref() {
        out.push(format!("__cluster_dims__({})", dims(c)));
    }
    (!out.is_empty()).then(|| out.join(" "))
}

/// The min-blocks argument `M` for which `__launch_bounds__(max_threads, M)`
/// caps registers at exactly `cap`, if one does: the largest such `M`, the
/// blocks per SM that the register file allows at that cap.
pub fn min_blocks_for(a: &Arch, max_threads: u32, cap: u32) -> Option<u32> {
    (1..=a.max_blocks_per_sm)
        .map_while(|m| suggest::launch_bounds_register_cap(a, max_threads, m).map(|c| (m, c)))
        .filter(|&(_, c)| c == cap)
        .last()
        .map(|(m, _)| m)
}
