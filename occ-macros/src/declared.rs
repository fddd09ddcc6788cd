//! Step 3, one truth for a launch: the launch a kernel is judged at (the
//! gate, the reports and `cargo occ` judge it there, and `kernels.rs`
//! records it) is the one a site with no option that shapes its launch
//! ([`shapes_launch`]) bakes, by one rule, occ-model's
//! `Resources::judged`: the kernel's declared launch (build.rs's
//! `Build::launch(pattern, Launch::block_2d(32, 8))`, else its `.reqntid`
//! or `__launch_bounds__(N)`, recorded in the manifest as its `declared`
//! launch), else its best block.
//!
//! build.rs's launch binds every site of the kernel: its block shape and
//! dynamic shared memory. What the site states besides must agree with it
//! ([`check`]); a site that fixes a block shape build.rs does not declare
//! is refused with the line that declares it ([`undeclared_shape`]). A
//! kernel's own `__launch_bounds__(N)` binds only a site that states no
//! launch of its own: one that states tuning options (`max_block_size`,
//! `block_multiple`, `dynamic_smem`, `(32, _)`, `tuned`, ...) tunes within
//! them and below the bound, as a cap allows. A `.reqntid` shape is the
//! launch either way (the site's options must allow it).

use crate::args::{Args, BlockShape, DynamicSmemArg, Errors};
use occ_model::model::declared::{DeclaredBy, Launch};
use occ_model::model::suggest::DynamicSmem;
use occ_model::schema::manifest::{Kernel, KernelArch};

/// The launch build.rs declares for a kernel, and the pattern of the
/// `.launch(..)` that declares it (the same on every arch: build.rs's list
/// applies to all).
#[derive(Debug, Clone, Copy)]
pub struct ByBuild<'m> {
    /// The launch.
    pub launch: &'m Launch,
    /// The pattern of `.launch(pattern, ..)`.
    pub pattern: &'m str,
}

/// build.rs's declared launch of `ka`, if build.rs declares one.
pub fn by_build(ka: &KernelArch) -> Option<ByBuild<'_>> {
    let d = ka.declared.as_ref()?;
    match &d.by {
        DeclaredBy::Build { pattern } => Some(ByBuild {
            launch: &d.launch,
            pattern,
        }),
        DeclaredBy::LaunchBounds
        | DeclaredBy::Reqntid
        | DeclaredBy::Code { .. }
        | DeclaredBy::Best => None,
    }
}

/// build.rs's declared launch of `kernel` on any of its archs.
pub fn of_kernel(kernel: &Kernel) -> Option<ByBuild<'_>> {
    kernel.archs.values().find_map(by_build)
}

/// Whether the site states an option that shapes its launch: its block
/// (`block`, `max_block_size`, `block_multiple`), its dynamic shared memory
/// (`dynamic_smem`, `smem_per_thread`, `smem_fixed`) or a measured block
/// (`tuned`). A site that states none bakes the launch its kernel is
/// judged at (`Resources::judged`).
pub fn shapes_launch(args: &Args) -> bool {
    args.block.is_some()
        || args.max_block_size.is_some()
        || args.block_multiple.is_some()
        || args.dynamic_smem.is_some()
        || args.smem_per_thread.is_some()
        || args.smem_fixed.is_some()
        || args.tuned.is_some()
}

/// Checks the site's options against build.rs's declared launch: each one
/// that states the block or its dynamic shared memory must agree with it
/// (saying it again is allowed); each error names both and what to keep.
pub fn check(args: &Args, kernel: &Kernel, decl: ByBuild<'_>, errors: &mut Errors) {
    let name = &kernel.base_name;
    let declared = shape_text(decl.launch.block);
    let threads = decl.launch.threads();
    let by = format!("`.launch(\"{}\", ..)`", decl.pattern);
    let keep = |what: &str| {
        format!("keep one: drop `{what}` here (the site then launches at build.rs's launch) or change build.rs")
    };
    if let Some(shape) = &args.block {
        let agrees = shape
            .value
            .dims
            .iter()
            .zip(decl.launch.block)
            .all(|(d, b)| d.is_none_or(|d| d == b));
        if !agrees {
            errors.at(
                shape.span,
                format!(
                    "this site launches `{name}` at block {} but build.rs declares block {declared} with {by}; {}",
                    written(&shape.value),
                    keep("block")
                ),
            );
        }
    }
    let bytes = decl.launch.dynamic_smem_bytes();
    let smem = |site: u64, what: &str| {
        format!(
            "this site launches `{name}` with {site} bytes of dynamic shared memory but build.rs declares {bytes} bytes at block {declared} with {by}; {}",
            keep(what)
        )
    };
    match (&args.dynamic_smem, &args.smem_per_thread) {
        (Some(d), _) => {
            if let DynamicSmemArg::Bytes(n) = d.value {
                if u64::from(n) != bytes {
                    errors.at(d.span, smem(u64::from(n), "dynamic_smem"));
                }
            }
        }
        (None, Some(pt)) => {
            let fixed = args.smem_fixed.as_ref().map_or(0, |f| f.value);
            let site = DynamicSmem::PerThread {
                per_thread: pt.value,
                fixed,
            }
            .bytes(threads);
            if site != bytes {
                errors.at(pt.span, smem(site, "smem_per_thread"));
            }
        }
        (None, None) => {}
    }
    if let Some(max) = args.max_block_size.as_ref().filter(|m| m.value < threads) {
        errors.at(
            max.span,
            format!(
                "build.rs declares `{name}`'s block as {declared} ({threads} threads) with {by}, more than max_block_size = {}; {}",
                max.value,
                keep("max_block_size")
            ),
        );
    }
    if let Some(m) = args
        .block_multiple
        .as_ref()
        .filter(|m| !threads.is_multiple_of(m.value))
    {
        errors.at(
            m.span,
            format!(
                "build.rs declares `{name}`'s block as {declared} ({threads} threads) with {by}, not a multiple of block_multiple = {}; {}",
                m.value,
                keep("block_multiple")
            ),
        );
    }
}

/// The error of a site that fixes every dimension of its block for a
/// kernel build.rs declares no launch for (the gate and the reports judge
/// it at another block): the `.launch(..)` line that declares it, and the
/// site without it. `None` when the shape is free in one dimension, or is
/// the kernel's own `.reqntid`.
pub fn undeclared_shape(args: &Args, kernel: &Kernel, ka: &KernelArch) -> Option<String> {
    let shape = args.block.as_ref()?.value;
    if shape.has_free() {
        return None;
    }
    let block = shape.with_threads(shape.fixed_threads());
    if ka
        .facts
        .launch_bounds
        .req_threads
        .map(|r| r.map(|d| d.max(1)))
        == Some(block)
    {
        return None;
    }
    let mut launch = match block {
        [x, 1, 1] => format!("Launch::block({x})"),
        [x, y, 1] => format!("Launch::block_2d({x}, {y})"),
        [x, y, z] => format!("Launch::block_3d({x}, {y}, {z})"),
    };
    let mut dropped = vec!["block"];
    match (&args.dynamic_smem, &args.smem_per_thread) {
        (Some(d), _) => {
            if let DynamicSmemArg::Bytes(n) = d.value {
                dropped.push("dynamic_smem");
                if n > 0 {
                    launch.push_str(&format!(".dynamic_smem({n})"));
                }
            }
        }
        (None, Some(pt)) => {
            dropped.push("smem_per_thread");
            launch.push_str(&format!(".dynamic_smem_per_thread({})", pt.value));
            if let Some(f) = &args.smem_fixed {
                dropped.push("smem_fixed");
                if f.value > 0 {
                    launch.push_str(&format!(".dynamic_smem({})", f.value));
                }
            }
        }
        (None, None) => {}
    }
    let name = &kernel.base_name;
    let kernel_arg = args.kernel.as_ref().map_or(name, |k| &k.value);
    Some(format!(
        "this site launches `{name}` at block {} but build.rs declares no launch for it, so the gate and `cargo occ` judge it at another launch; declare it once in build.rs, `.launch(\"{name}\", {launch})`, and write the site without {}: #[launch_config(kernel = \"{kernel_arg}\"{})]",
        shape_text(block),
        listed(&dropped),
        if others(args) { ", ..." } else { "" }
    ))
}

/// Whether the site has options other than `kernel` and those
/// [`undeclared_shape`] moves to build.rs.
fn others(args: &Args) -> bool {
    args.arch.is_some()
        || args.max_block_size.is_some()
        || args.block_multiple.is_some()
        || args.min_occupancy.is_some()
        || args.allow_spills.is_some()
        || args.max_spill_bytes.is_some()
        || args.tuned.is_some()
        || args.bucket.is_some()
        || matches!(
            args.dynamic_smem.as_ref().map(|d| d.value),
            Some(DynamicSmemArg::Max)
        )
}

/// `a`, `a` and `b`, `a`, `b` and `c`, each in backquotes.
fn listed(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => quoted.join(""),
    }
}

/// A block as a site writes it: `256`, `(32, 8)`, `(8, 8, 4)`.
pub fn shape_text(block: [u32; 3]) -> String {
    match block {
        [x, 1, 1] => x.to_string(),
        [x, y, 1] => format!("({x}, {y})"),
        [x, y, z] => format!("({x}, {y}, {z})"),
    }
}

/// The site's `block = (..)` as written, `_` for the free dimension.
fn written(shape: &BlockShape) -> String {
    if !shape.has_free() {
        return shape_text(shape.with_threads(shape.fixed_threads()));
    }
    let mut dims: Vec<String> = shape
        .dims
        .iter()
        .map(|d| d.map_or("_".to_string(), |d| d.to_string()))
        .collect();
    while dims.len() > 2 && dims.last().is_some_and(|d| d == "1") {
        dims.pop();
    }
    format!("({})", dims.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_read_as_written() {
        assert_eq!(shape_text([256, 1, 1]), "256");
        assert_eq!(shape_text([32, 8, 1]), "(32, 8)");
        assert_eq!(shape_text([8, 8, 4]), "(8, 8, 4)");
        let free = BlockShape {
            dims: [Some(32), None, Some(1)],
        };
        assert_eq!(written(&free), "(32, _)");
        let fixed = BlockShape {
            dims: [Some(16), Some(16), Some(1)],
        };
        assert_eq!(written(&fixed), "(16, 16)");
        assert_eq!(listed(&["block"]), "`block`");
        assert_eq!(listed(&["a", "b", "c"]), "`a`, `b` and `c`");
    }
}
