//! Step 3: check the site against the manifest and run the tuner for each
//! arch the site launches on. The launch comes from the one rule the
//! build's manifest, `kernels.rs` and the gate use too,
//! [`occ_model::model::declared::decide`] on
//! [`occ_model::compiler::analyze::model_of`]: a site with no option that
//! shapes its launch ([`crate::declared::shapes_launch`]) asks it exactly at
//! the launch its kernel is judged at
//! ([`occ_model::schema::manifest::Resources::judged`]: the declared launch,
//! else the best block); one with options, at build.rs's launch
//! ([`crate::declared`]), else for the best block its options allow.

use crate::args::{Args, DynamicSmemArg, Errors};
use crate::declared;
use occ_model::model::arch;
use occ_model::model::declared::DeclaredBy;
use occ_model::model::occupancy::{BlockLaunch, KernelResources};
use occ_model::model::suggest::{self, BestBlock, DynamicSmem, TuneRequest};
use occ_model::schema::manifest::{describe_candidates, Kernel, KernelArch, Lookup, Manifest};
use occ_model::schema::measured::{self, Measured, Staleness};
use proc_macro2::Span;

/// The launch of one arch.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The arch as built (`sm_90a`).
    pub arch: String,
    /// Compute capability, major.
    pub major: u32,
    /// Compute capability, minor.
    pub minor: u32,
    /// Threads per block.
    pub block_size: u32,
    /// The block's shape (x, y, z); its product is `block_size`.
    pub block: [u32; 3],
    /// Dynamic shared memory per block, bytes.
    pub dynamic_smem: u32,
    /// Resident blocks per SM.
    pub active_blocks_per_sm: u32,
    /// Resident warps / the SM's maximum.
    pub occupancy: f64,
    /// Whether the block is the one measured on a GPU (`tuned`), not the
    /// model's.
    pub measured: bool,
}

/// What the expansion bakes in.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The kernel's symbol.
    pub kernel_name: String,
    /// One row per arch, in build order; the first is the plain consts'.
    pub rows: Vec<Row>,
}

/// Checks the site and computes its launches; every error is collected.
///
/// Long because it gathers every arch's row and every error of a site before
/// one expansion.
pub fn plan(args: &Args, manifest: &Manifest, errors: &mut Errors) -> Option<Plan> {
    let site = Span::call_site();
    check_options(args, errors);
    let Some(kernel_arg) = &args.kernel else {
        if !errors.is_empty() {
            // A bad `kernel = ...` was already reported.
            return None;
        }
        errors.at(
            site,
            "missing `kernel = \"...\"`; name the kernel to configure: #[launch_config(kernel = \"saxpy\")]",
        );
        return None;
    };
    let kernel = match manifest.lookup(&kernel_arg.value) {
        Lookup::Found(k) => k,
        Lookup::Ambiguous(candidates) => {
            errors.at(
                kernel_arg.span,
                format!(
                    "kernel name `{}` is ambiguous; it matches {}; write the name of the one you mean",
                    kernel_arg.value,
                    describe_candidates(&candidates)
                ),
            );
            return None;
        }
        Lookup::Unknown(close) => {
            errors.at(
                kernel_arg.span,
                unknown_kernel(&kernel_arg.value, &close, manifest),
            );
            return None;
        }
    };
    let archs = site_archs(args, manifest, kernel, errors)?;
    if !errors.is_empty() {
        return None;
    }
    check_spills(args, kernel, &archs, errors);
    if let Some(decl) = declared::of_kernel(kernel) {
        declared::check(args, kernel, decl, errors);
        if !errors.is_empty() {
            return None;
        }
    }
    let mut rows = Vec::new();
    let mut failures: Vec<Failure> = Vec::new();
    if let (Some(bucket), None) = (&args.bucket, &args.tuned) {
        errors.at(
            bucket.span,
            "`bucket` picks which measurement `tuned` bakes, and `tuned` is missing; add `tuned = true`",
        );
        return None;
    }
    for (name, ka) in &archs {
        let measured = args
            .tuned
            .and_then(|_| measurement(args, manifest, kernel, name, ka));
        match tune_arch(args, kernel, name, ka, measured) {
            Ok(row) => rows.push(row),
            Err(f) => match failures
                .iter_mut()
                .find(|g| g.head == f.head && g.tail == f.tail)
            {
                Some(group) => group.parts.extend(f.parts),
                None => failures.push(f),
            },
        }
    }
    for f in failures {
        let parts: Vec<String> = f.parts.into_iter().filter(|p| !p.is_empty()).collect();
        let middle = if parts.is_empty() {
            String::new()
        } else {
            format!(" {}", parts.join(" and "))
        };
        errors.at(f.span, format!("{}{middle}{}", f.head, f.tail));
    }
    if !errors.is_empty() || rows.is_empty() {
        return None;
    }
    Some(Plan {
        kernel_name: kernel.name.clone(),
        rows,
    })
}

fn check_options(args: &Args, errors: &mut Errors) {
    if let (Some(_), Some(pt)) = (&args.dynamic_smem, &args.smem_per_thread) {
        errors.at(
            pt.span,
            "`smem_per_thread` and `dynamic_smem` both size the dynamic shared memory; keep one (smem_fixed adds bytes per block to smem_per_thread)",
        );
    }
    if let (Some(fixed), None) = (&args.smem_fixed, &args.smem_per_thread) {
        errors.at(
            fixed.span,
            "`smem_fixed` adds to `smem_per_thread`, which is missing; for the same bytes at every block size write `dynamic_smem = N`",
        );
    }
    if let (Some(_), Some(budget)) = (&args.allow_spills, &args.max_spill_bytes) {
        errors.at(
            budget.span,
            "`allow_spills` allows any spill and `max_spill_bytes` sets a budget; keep one",
        );
    }
}

fn unknown_kernel(query: &str, close: &[String], manifest: &Manifest) -> String {
    let mut msg = format!("unknown kernel `{query}`");
    if let Some(best) = close.first() {
        msg.push_str(&format!("; did you mean `{best}`?"));
    }
    let mut known: Vec<&str> = manifest
        .kernels
        .iter()
        .map(|k| k.base_name.as_str())
        .collect();
    known.sort_unstable();
    known.dedup();
    if known.is_empty() {
        msg.push_str(
            " the build's .cu files define no kernel; add them to occ_build::Build in build.rs",
        );
    } else {
        let shown = known.len().min(12);
        let more = if known.len() > shown {
            format!(
                " and {} more (cargo occ report lists them)",
                known.len() - shown
            )
        } else {
            String::new()
        };
        msg.push_str(&format!(
            " the build knows: {}{more}",
            known[..shown]
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    msg
}

/// The archs the site launches on: `arch = ...` alone, or every arch of the build.
fn site_archs<'m>(
    args: &Args,
    manifest: &Manifest,
    kernel: &'m Kernel,
    errors: &mut Errors,
) -> Option<Vec<(String, &'m KernelArch)>> {
    let built = || {
        manifest
            .archs
            .iter()
            .map(|a| format!("`{a}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(wanted) = &args.arch {
        let canonical = match arch::canonical_name(&wanted.value) {
            Ok(c) => c,
            Err(e) => {
                errors.at(wanted.span, e);
                return None;
            }
        };
        match kernel.archs.get(&canonical) {
            Some(ka) => Some(vec![(canonical, ka)]),
            None => {
                errors.at(
                    wanted.span,
                    format!(
                        "kernel `{}` was not built for {canonical}; the build's archs are {}; add {canonical} to .archs([...]) in build.rs or pick one of those",
                        kernel.base_name,
                        built()
                    ),
                );
                None
            }
        }
    } else {
        let rows: Vec<(String, &KernelArch)> = manifest
            .archs
            .iter()
            .filter_map(|a| kernel.archs.get(a).map(|ka| (a.clone(), ka)))
            .collect();
        if rows.is_empty() {
            let span = args.kernel.as_ref().map_or(Span::call_site(), |k| k.span);
            errors.at(
                span,
                format!(
                    "kernel `{}` has no resources for any arch of the build ({}); rebuild",
                    kernel.base_name,
                    built()
                ),
            );
            return None;
        }
        Some(rows)
    }
}

fn check_spills(
    args: &Args,
    kernel: &Kernel,
    archs: &[(String, &KernelArch)],
    errors: &mut Errors,
) {
    if args.allow_spills.is_some() {
        return;
    }
    let budget = args.max_spill_bytes.as_ref().map_or(0, |b| b.value);
    // Located spills are phrases of their own (`..., peak pressure 255
    // at :151`): `;` keeps the archs apart.
    let located = archs
        .iter()
        .any(|(_, ka)| ka.lines.as_ref().is_some_and(|l| !l.describe().is_empty()));
    let over: Vec<String> = archs
        .iter()
        .filter(|(_, ka)| ka.facts.spill_bytes() > budget)
        .map(|(a, ka)| {
            // `at kernels/q.cu:142 (loop at :130), peak pressure 255 at :151`
            // when the build located the spills (nvdisasm).
            let at = match ka.lines.as_ref().map(|l| l.describe()) {
                Some(at) if !at.is_empty() => format!(" {at}"),
                _ => String::new(),
            };
            format!(
                "{a} ({} bytes: {} bytes spill stores, {} bytes spill loads){at}",
                ka.facts.spill_bytes(),
                ka.facts.spill_stores,
                ka.facts.spill_loads
            )
        })
        .collect();
    if over.is_empty() {
        return;
    }
    let span = args.kernel.as_ref().map_or(Span::call_site(), |k| k.span);
    let (what, budget_text) = match &args.max_spill_bytes {
        Some(b) => (
            "spills more than max_spill_bytes allows",
            format!(" (max_spill_bytes = {})", b.value),
        ),
        None => ("spills registers to local memory", String::new()),
    };
    errors.at(
        span,
        format!(
            "kernel `{}` {what}{budget_text} on {}; try a __launch_bounds__ that leaves it more registers (a lower minimum of blocks per SM), fewer live values per thread, or accept the spills here with `allow_spills` or `max_spill_bytes = N`",
            kernel.base_name,
            over.join(if located { "; on " } else { " and on " })
        ),
    );
}

/// One arch's failure: `head parts… tail`; failures with the same head and
/// tail on several archs become one message.
struct Failure {
    span: Span,
    head: String,
    parts: Vec<String>,
    tail: String,
}

impl Failure {
    fn new(span: Span, head: String, part: String, tail: String) -> Self {
        Failure {
            span,
            head,
            parts: vec![part],
            tail,
        }
    }
}

/// The measurement `tuned` bakes for a kernel × arch: the site's bucket
/// (else [`measured::DEFAULT_BUCKET`]), taken on this build's cubin (a
/// build from the lock has the lock's hash). A stale one, or one the build
/// has no hash to compare with, is not baked; the build script warns about
/// it once (`occ_build`'s gate).
fn measurement<'m>(
    args: &Args,
    manifest: &'m Manifest,
    kernel: &Kernel,
    arch_name: &str,
    ka: &KernelArch,
) -> Option<&'m Measured> {
    let bucket = args
        .bucket
        .as_ref()
        .map_or(measured::DEFAULT_BUCKET, |b| b.value.as_str());
    let key = (
        kernel.name.as_str(),
        kernel.source.as_str(),
        arch_name,
        bucket,
    );
    manifest
        .measured
        .iter()
        .find(|m| m.key() == key)
        .filter(|m| {
            !matches!(
                m.staleness(ka.cubin_hash.as_deref()),
                Staleness::Stale { .. }
            )
        })
}

/// The fastest measured block the site's request allows and the kernel can
/// launch (`decide`'s `Ask::Measured`, the rule the build's gate asks
/// of the lock's measured best too), if any.
fn measured_best(
    m: &Measured,
    limits: &arch::Arch,
    resources: &KernelResources,
    request: &TuneRequest,
) -> Option<BestBlock> {
    let mut timings: Vec<&measured::Timing> = m.timings.iter().collect();
    timings.sort_by(|a, b| {
        a.median_us
            .total_cmp(&b.median_us)
            .then(b.block_size.cmp(&a.block_size))
    });
    timings.into_iter().find_map(|t| {
        occ_model::model::declared::decide(
            limits,
            resources,
            occ_model::model::declared::Ask::Measured(request, t.block_size),
        )
        .ok()
        .flatten()
    })
}

/// One arch's row of a site: the request the site's options make (or
/// build.rs's declared launch), the block (the fastest measured one the
/// site allows when `tuned`, else the model's best), its dynamic shared
/// memory, and the floor `min_occupancy` sets.
fn tune_arch(
    args: &Args,
    kernel: &Kernel,
    arch_name: &str,
    ka: &KernelArch,
    measured: Option<&Measured>,
) -> Result<Row, Failure> {
    let kernel_span = args.kernel.as_ref().map_or(Span::call_site(), |k| k.span);
    let target = match arch::parse_target(arch_name) {
        Ok(t) => t,
        Err(e) => {
            return Err(Failure::new(
                kernel_span,
                format!("the manifest names an arch occ does not know: {e}"),
                String::new(),
                String::new(),
            ));
        }
    };
    let limits = target.arch;
    let resources = occ_model::compiler::analyze::model_of(&ka.facts);
    let by_build = declared::by_build(ka);
    let request = arch_request(args, kernel, ka, by_build)?;
    let from_measurement = measured.and_then(|m| measured_best(m, limits, &resources, &request));
    let was_measured = from_measurement.is_some();
    // The one rule the build's manifest, kernels.rs and the gate use too: a
    // site with no option that shapes its launch bakes the launch the
    // kernel is judged at (`Resources::judged`: its declared launch, else
    // its best block), exactly; one with options, build.rs's launch, else
    // the best its options allow.
    let judged = ka.judged().map(|j| (j.at(), j.declared));
    let bare = !declared::shapes_launch(args);
    let ask = match (bare, &judged, by_build) {
        (true, Some((launch, _)), _) => occ_model::model::declared::Ask::At(launch),
        (true, None, _) => {
            return Err(no_block_fits(args, kernel, arch_name, ka, &request, limits));
        }
        (false, _, Some(decl)) => occ_model::model::declared::Ask::At(decl.launch),
        (false, _, None) => occ_model::model::declared::Ask::Best(&request),
    };
    let best = match from_measurement.map_or_else(
        || occ_model::model::declared::decide(limits, &resources, ask),
        |b| Ok(Some(b)),
    ) {
        Ok(Some(best)) => best,
        Ok(None) => return Err(no_block_fits(args, kernel, arch_name, ka, &request, limits)),
        Err(e) => {
            return Err(Failure::new(
                kernel_span,
                format!("kernel `{}` on {arch_name}: {e}", kernel.base_name),
                String::new(),
                String::new(),
            ));
        }
    };
    let occ = &best.occupancy;
    let dynamic_smem = dynamic_smem_at(args, kernel, arch_name, limits, &resources, &best)?;
    if by_build.is_none() && smem_by_build(ka).is_none() {
        undeclared_dynamic_smem(args, kernel, arch_name, limits, &resources, &best)?;
    }
    let judged_by = judged.as_ref().and_then(|(_, d)| d.map(|d| &d.by));
    let launch_words = launch_words(was_measured, by_build.is_some(), bare, judged_by);
    check_min_occupancy(args, kernel, arch_name, &best, was_measured, launch_words)?;
    let block = match (by_build, bare, &judged, &args.block) {
        (Some(decl), _, _, _) => decl.launch.block,
        (None, true, Some((launch, _)), _) => launch.block,
        (None, _, _, Some(shape)) => shape.value.with_threads(best.block_size),
        (None, _, _, None) => match ka.facts.launch_bounds.req_threads {
            Some(req) => req.map(|d| d.max(1)),
            None => [best.block_size, 1, 1],
        },
    };
    Ok(Row {
        arch: arch_name.to_string(),
        major: target.cc / 10,
        minor: target.cc % 10,
        block_size: best.block_size,
        block,
        dynamic_smem,
        active_blocks_per_sm: occ.active_blocks_per_sm,
        occupancy: occ.occupancy,
        measured: was_measured,
    })
}

/// Which launch a site's block is, for `min_occupancy`'s message: the
/// measured one, build.rs's, the kernel's own declaration (a site without
/// launch options bakes it), else the best.
fn launch_words(
    was_measured: bool,
    by_build: bool,
    bare: bool,
    judged_by: Option<&DeclaredBy>,
) -> &'static str {
    match (was_measured, by_build, bare, judged_by) {
        (true, _, _, _) => "fastest measured block size (tuned)",
        (false, true, _, _) | (false, false, true, Some(DeclaredBy::Build { .. })) => {
            "block size declared in build.rs"
        }
        (false, false, true, Some(DeclaredBy::LaunchBounds)) => {
            "block size declared by __launch_bounds__"
        }
        (false, false, true, Some(DeclaredBy::Reqntid)) => "block size declared by .reqntid",
        (false, false, true, Some(DeclaredBy::Best)) => {
            "best block size at build.rs's dynamic shared memory"
        }
        (false, false, _, _) => "best block size",
    }
}

/// What the tuner searches on one arch: build.rs's declared launch alone
/// (`declared::check` found the site agrees with it), else the site's
/// options narrowed by the kernel's `.reqntid` and the site's block shape;
/// a fixed shape build.rs does not declare is an error.
fn arch_request(
    args: &Args,
    kernel: &Kernel,
    ka: &KernelArch,
    by_build: Option<declared::ByBuild<'_>>,
) -> Result<TuneRequest, Failure> {
    if let Some(decl) = by_build {
        return Ok(decl.launch.request());
    }
    let mut request = site_request(args);
    if let Some((rule, pattern)) = smem_by_build(ka) {
        if let Some((span, said)) = site_smem(args).filter(|(_, said)| *said != Some(rule)) {
            return Err(Failure::new(
                span,
                format!(
                    "build.rs declares the dynamic shared memory of `{}`, `.dynamic_smem(\"{pattern}\", {})`, which the gate, the reports and kernels.rs judge it at{}",
                    kernel.base_name,
                    rule.in_rust(),
                    match said {
                        Some(said) => format!(", not {}", said.describe()),
                        None => String::new(),
                    }
                ),
                String::new(),
                "; drop it here (the site launches with build.rs's) or change build.rs's".into(),
            ));
        }
        request.dynamic_smem = rule;
    }
    require_block(args, kernel, ka, &mut request)?;
    if let Some(shape) = &args.block {
        apply_shape(kernel, ka, shape, args, &mut request)?;
    }
    if let Some(message) = declared::undeclared_shape(args, kernel, ka) {
        let kernel_span = args.kernel.as_ref().map_or(Span::call_site(), |k| k.span);
        let span = args.block.as_ref().map_or(kernel_span, |b| b.span);
        return Err(Failure::new(span, message, String::new(), String::new()));
    }
    Ok(request)
}

/// The dynamic shared memory build.rs declares for the kernel on this
/// arch (`Build::dynamic_smem`) and its pattern.
fn smem_by_build(ka: &KernelArch) -> Option<(DynamicSmem, &str)> {
    let d = ka.judged()?.declared?;
    Some((d.launch.dynamic_smem, d.smem_pattern.as_deref()?))
}

/// The site's own dynamic shared memory option, where it gives one: its
/// span, and the rule (`None` for `dynamic_smem = "max"`).
fn site_smem(args: &Args) -> Option<(Span, Option<DynamicSmem>)> {
    match (&args.dynamic_smem, &args.smem_per_thread, &args.smem_fixed) {
        (Some(d), _, _) => Some((
            d.span,
            match d.value {
                DynamicSmemArg::Bytes(b) => Some(DynamicSmem::Fixed(b)),
                DynamicSmemArg::Max => None,
            },
        )),
        (None, Some(p), f) => Some((
            p.span,
            Some(DynamicSmem::PerThread {
                per_thread: p.value,
                fixed: f.as_ref().map_or(0, |f| f.value),
            }),
        )),
        (None, None, Some(f)) => Some((f.span, Some(DynamicSmem::Fixed(f.value)))),
        (None, None, None) => None,
    }
}

/// One truth for dynamic shared memory, as for blocks: a site's own
/// dynamic shared memory on a kernel build.rs declares none for is
/// invisible to the gate, the reports and kernels.rs. Where it costs
/// occupancy at the block the site launches, the site is refused, with
/// the build.rs line that makes all of them judge it; where it costs
/// nothing there (`dynamic_smem = "max"` never does), what they judge is
/// what the site gets.
fn undeclared_dynamic_smem(
    args: &Args,
    kernel: &Kernel,
    arch_name: &str,
    limits: &arch::Arch,
    resources: &KernelResources,
    best: &BestBlock,
) -> Result<(), Failure> {
    let Some((span, Some(rule))) = site_smem(args) else {
        return Ok(());
    };
    let without = occ_model::model::occupancy::occupancy(
        limits,
        resources,
        &BlockLaunch::new(best.block_size),
    );
    let Ok(without) = without else {
        return Ok(());
    };
    if best.occupancy.active_warps_per_sm >= without.active_warps_per_sm {
        return Ok(());
    }
    Err(Failure::new(
        span,
        format!(
            "this site launches `{}` with {} of dynamic shared memory, which the gate, the reports and kernels.rs do not see:",
            kernel.base_name,
            rule.describe()
        ),
        format!(
            "{} at block {} on {arch_name}, where they judge it without",
            occ_model::render::units::percent(best.occupancy.occupancy),
            best.block_size,
        ),
        format!(
            "; declare it once in build.rs, `.dynamic_smem(\"{}\", {})`, and drop it here",
            kernel.short_name,
            rule.in_rust()
        ),
    ))
}

/// The tuning request of the site's options (dynamic shared memory, the
/// largest block, the block multiple).
fn site_request(args: &Args) -> TuneRequest {
    let dynamic = match (&args.dynamic_smem, &args.smem_per_thread) {
        (Some(d), _) => match d.value {
            DynamicSmemArg::Bytes(n) => DynamicSmem::Fixed(n),
            DynamicSmemArg::Max => DynamicSmem::Fixed(0),
        },
        (None, Some(pt)) => DynamicSmem::PerThread {
            per_thread: pt.value,
            fixed: args.smem_fixed.as_ref().map_or(0, |f| f.value),
        },
        (None, None) => DynamicSmem::Fixed(0),
    };
    TuneRequest {
        dynamic_smem: dynamic,
        max_block_size: args.max_block_size.as_ref().map(|m| m.value),
        block_multiple: args.block_multiple.as_ref().map(|m| m.value),
        ..TuneRequest::default()
    }
}

/// A `.reqntid` kernel launches with exactly that many threads: the
/// request allows only that, and the site's options must allow it too.
fn require_block(
    args: &Args,
    kernel: &Kernel,
    ka: &KernelArch,
    request: &mut TuneRequest,
) -> Result<(), Failure> {
    if let Some(required) = ka.facts.launch_bounds.required_block_size() {
        // A `.reqntid` kernel launches with exactly that many threads.
        if let Some(max) = &args.max_block_size {
            if max.value < required {
                return Err(Failure::new(
                    max.span,
                    format!(
                        "kernel `{}` requires blocks of exactly {required} threads (.reqntid), more than max_block_size = {}; raise it or drop it",
                        kernel.base_name, max.value
                    ),
                    String::new(),
                    String::new(),
                ));
            }
        }
        if let Some(m) = &args.block_multiple {
            if required % m.value != 0 {
                return Err(Failure::new(
                    m.span,
                    format!(
                        "kernel `{}` requires blocks of exactly {required} threads (.reqntid), not a multiple of block_multiple = {}; drop block_multiple",
                        kernel.base_name, m.value
                    ),
                    String::new(),
                    String::new(),
                ));
            }
        }
    }
    *request = occ_model::model::declared::within_bounds(&ka.facts.launch_bounds, *request);
    Ok(())
}

/// The error of a site whose options leave no block size that launches,
/// spanned on the option that narrowed it most.
fn no_block_fits(
    args: &Args,
    kernel: &Kernel,
    arch_name: &str,
    ka: &KernelArch,
    request: &TuneRequest,
    limits: &arch::Arch,
) -> Failure {
    let kernel_span = args.kernel.as_ref().map_or(Span::call_site(), |k| k.span);
    let span = args
        .dynamic_smem
        .as_ref()
        .map(|d| d.span)
        .or(args.block.as_ref().map(|d| d.span))
        .or(args.smem_per_thread.as_ref().map(|d| d.span))
        .or(args.block_multiple.as_ref().map(|d| d.span))
        .or(args.max_block_size.as_ref().map(|d| d.span))
        .unwrap_or(kernel_span);
    let sizes = match (&args.max_block_size, &args.block_multiple) {
        (Some(m), Some(b)) => format!(
            "no block size up to {} that is a multiple of {}",
            m.value, b.value
        ),
        (Some(m), None) => format!("no block size up to {}", m.value),
        (None, Some(b)) => format!("no block size that is a multiple of {}", b.value),
        (None, None) => "no block size".to_string(),
    };
    let sizes = match &args.block {
        Some(b) if !b.value.has_free() => {
            format!("no block but {} threads (`block`)", b.value.fixed_threads())
        }
        Some(b) => format!(
            "{sizes} (with block's fixed dimensions, a multiple of {})",
            b.value.fixed_threads()
        ),
        None => sizes,
    };
    Failure::new(
        span,
        format!("kernel `{}` cannot launch with these options:", kernel.base_name),
        format!(
            "on {arch_name} ({} registers, {} bytes of static shared memory, {}{} bytes of shared memory per block at most)",
            ka.facts.registers,
            ka.facts.static_smem,
            match request.dynamic_smem {
                DynamicSmem::Fixed(0) => String::new(),
                d => format!("{} bytes of dynamic shared memory at 1 thread, ", d.bytes(1)),
            },
            limits.smem_per_block_optin,
        ),
        format!("; {sizes} fits; ask for less dynamic shared memory or allow more block sizes"),
    )
}

/// The dynamic shared memory the site bakes: with `dynamic_smem = max`,
/// all that still lets the block's resident count stand.
fn dynamic_smem_at(
    args: &Args,
    kernel: &Kernel,
    arch_name: &str,
    limits: &arch::Arch,
    resources: &KernelResources,
    best: &BestBlock,
) -> Result<u32, Failure> {
    let kernel_span = args.kernel.as_ref().map_or(Span::call_site(), |k| k.span);
    let occ = &best.occupancy;
    Ok(match args.dynamic_smem.as_ref().map(|d| d.value) {
        Some(DynamicSmemArg::Max) => {
            let launch = BlockLaunch::new(best.block_size);
            match suggest::available_dynamic_smem(
                limits,
                resources,
                &launch,
                occ.active_blocks_per_sm.max(1),
            ) {
                Ok(bytes) => bytes,
                Err(e) => {
                    return Err(Failure::new(
                        kernel_span,
                        format!("kernel `{}` on {arch_name}: {e}", kernel.base_name),
                        String::new(),
                        String::new(),
                    ));
                }
            }
        }
        _ => best.dynamic_smem,
    })
}

/// The site's `min_occupancy` floor, at the block it launches.
fn check_min_occupancy(
    args: &Args,
    kernel: &Kernel,
    arch_name: &str,
    best: &BestBlock,
    was_measured: bool,
    launch_words: &str,
) -> Result<(), Failure> {
    let occ = &best.occupancy;
    if let Some(min) = &args.min_occupancy {
        if occ.occupancy + 1e-9 < min.value {
            return Err(Failure::new(
                min.span,
                format!("kernel `{}` reaches occupancy", kernel.base_name),
                format!(
                    "{:.3} on {arch_name} ({} of {} warps per SM at its {} {}, limited by {})",
                    occ.occupancy,
                    occ.active_warps_per_sm,
                    occ.max_warps_per_sm,
                    launch_words,
                    best.block_size,
                    occ.limiters
                ),
                if was_measured {
                    format!(
                        ", below min_occupancy = {}; the floor holds for the measured block too: lower min_occupancy to launch it, or drop `tuned` to launch the model's block",
                        min.value
                    )
                } else {
                    format!(
                        ", below min_occupancy = {}; use fewer registers per thread (__launch_bounds__) or less shared memory per block (cargo occ explain shows what each step needs), or lower min_occupancy",
                        min.value
                    )
                },
            ));
        }
    }
    Ok(())
}

/// Narrows `request` to the site's `block = (...)`: a fixed shape is the
/// one block size tried; a free last dimension makes every size a multiple
/// of the fixed ones. A kernel with a required shape (`.reqntid`) must
/// agree with it.
///
/// Long because each way a block shape can disagree with the kernel or the
/// other options is its own spanned error.
fn apply_shape(
    kernel: &Kernel,
    ka: &KernelArch,
    shape: &crate::args::At<crate::args::BlockShape>,
    args: &Args,
    request: &mut TuneRequest,
) -> Result<(), Failure> {
    let fail = |span: Span, msg: String| Err(Failure::new(span, msg, String::new(), String::new()));
    let sh = shape.value;
    let written = |dims: [Option<u32>; 3]| {
        let d: Vec<String> = dims
            .iter()
            .map(|d| d.map_or("_".to_string(), |d| d.to_string()))
            .collect();
        format!("({})", d.join(", "))
    };
    if let Some(req) = ka.facts.launch_bounds.req_threads {
        let agrees = sh
            .dims
            .iter()
            .zip(req)
            .all(|(d, r)| d.is_none_or(|d| d == r.max(1)));
        if !agrees {
            return fail(
                shape.span,
                format!(
                    "kernel `{}` requires blocks of exactly ({}, {}, {}) threads (.reqntid), not block = {}; match it or drop `block`",
                    kernel.base_name, req[0], req[1], req[2], written(sh.dims)
                ),
            );
        }
    }
    let fixed = sh.fixed_threads();
    if let Some(max) = ka.facts.launch_bounds.max_threads_per_block() {
        if fixed > max {
            return fail(
                shape.span,
                format!(
                    "kernel `{}` takes at most {max} threads per block (__launch_bounds__), and block = {} has {fixed}{}; make the block smaller or raise the bound",
                    kernel.base_name,
                    written(sh.dims),
                    if sh.has_free() { " before its free dimension" } else { "" }
                ),
            );
        }
    }
    if !sh.has_free() {
        if let Some(max) = &args.max_block_size {
            if max.value < fixed {
                return fail(
                    max.span,
                    format!(
                        "block = {} has {fixed} threads, more than max_block_size = {}; drop one of them",
                        written(sh.dims),
                        max.value
                    ),
                );
            }
        }
        if let Some(m) = &args.block_multiple {
            if !fixed.is_multiple_of(m.value) {
                return fail(
                    m.span,
                    format!(
                        "block = {} has {fixed} threads, not a multiple of block_multiple = {}; drop one of them",
                        written(sh.dims),
                        m.value
                    ),
                );
            }
        }
        request.max_block_size = Some(request.max_block_size.map_or(fixed, |m| m.min(fixed)));
        request.block_multiple = Some(fixed);
    } else {
        if let Some(max) = &args.max_block_size {
            if max.value < fixed {
                return fail(
                    max.span,
                    format!(
                        "block = {} has {fixed} threads before its free dimension, more than max_block_size = {}; drop one of them",
                        written(sh.dims),
                        max.value
                    ),
                );
            }
        }
        let multiple = request.block_multiple.unwrap_or(1);
        request.block_multiple = Some(lcm(multiple, fixed));
        // The free dimension stays within CUDA's limit for it (z: 64).
        let free = sh.dims.iter().position(Option::is_none).unwrap_or(0);
        let cap = fixed.saturating_mul(crate::args::MAX_BLOCK_DIMS[free]);
        request.max_block_size = Some(request.max_block_size.map_or(cap, |m| m.min(cap)));
    }
    Ok(())
}

fn lcm(a: u32, b: u32) -> u32 {
    fn gcd(a: u32, b: u32) -> u32 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let g = gcd(a.max(1), b.max(1));
    (a.max(1) / g).saturating_mul(b.max(1))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::args;
    use occ_model::assemble::{self, Assembly, Compiled, Contribution};
    use occ_model::model::declared::Launch;
    use occ_model::schema::manifest::{Facts, LaunchBounds, Origin};
    use quote::quote;

    /// The manifest a build assembles for one kernel `k` on sm_80 with
    /// `registers` registers, the launch bounds `bounds` and build.rs's
    /// `launches`: the numbers kernels.rs records and the gate judges.
    pub(crate) fn manifest(
        registers: u32,
        bounds: LaunchBounds,
        launches: &[(String, Launch)],
    ) -> Manifest {
        manifest_with(registers, bounds, launches, &[])
    }

    /// [`manifest`] with build.rs's `dynamic_smem` too.
    fn manifest_with(
        registers: u32,
        bounds: LaunchBounds,
        launches: &[(String, Launch)],
        dynamic_smem: &[(String, DynamicSmem)],
    ) -> Manifest {
        let facts = Facts {
            registers,
            static_smem: 0,
            spill_stores: 0,
            spill_loads: 0,
            stack_frame: 0,
            cumulative_stack: None,
            barriers: None,
            launch_bounds: bounds,
            maxrregcount: None,
        };
        let jobs = [Contribution {
            source: "kernels/k.cu".into(),
            arch: "sm_80".into(),
            kernels: vec![Compiled {
                name: "k".into(),
                demangled: "k".into(),
                base_name: "k".into(),
                short_name: "k".into(),
                params: Vec::new(),
                facts,
                cmem: Default::default(),
                warnings: Vec::new(),
                cubin: None,
                ptx: None,
                cubin_hash: None,
            }],
            launches: Vec::new(),
        }];
        let archs = ["sm_80".to_string()];
        let assembly = Assembly {
            package: "p",
            origin: Origin::Nvcc,
            nvcc: "V13.5.37",
            archs: &archs,
            jobs: &jobs,
            launches,
            dynamic_smem,
            measured: &[],
            device_code: &[],
            others: None,
        };
        assemble::manifest(&assembly).unwrap_or_else(|e| panic!("assembly: {e}"))
    }

    fn bounded(max_threads: u32) -> LaunchBounds {
        LaunchBounds {
            max_threads: Some([max_threads, 1, 1]),
            ..LaunchBounds::default()
        }
    }

    /// The site's sm_80 row.
    fn row(attr: proc_macro2::TokenStream, m: &Manifest) -> Row {
        let (a, mut errors) = args::parse(attr);
        let plan = plan(&a, m, &mut errors);
        assert!(errors.is_empty(), "the site has errors");
        plan.expect("a plan").rows.remove(0)
    }

    /// What kernels.rs records and the gate judges on sm_80.
    fn judged(m: &Manifest) -> (u32, [u32; 3], u32, u32, f64) {
        let j = m.kernels[0].archs["sm_80"].judged().expect("launchable");
        (
            j.block_size,
            j.at().block,
            j.dynamic_smem,
            j.active_blocks_per_sm,
            j.occupancy,
        )
    }

    fn baked(r: &Row) -> (u32, [u32; 3], u32, u32, f64) {
        (
            r.block_size,
            r.block,
            r.dynamic_smem,
            r.active_blocks_per_sm,
            r.occupancy,
        )
    }

    #[test]
    fn a_site_without_launch_options_bakes_the_launch_the_kernel_is_judged_at() {
        // 40 registers under `__launch_bounds__(1024)`: the best block is
        // 768 (2 blocks, 75 %), the gate judges the declared 1024 (50 %).
        let m = manifest(40, bounded(1024), &[]);
        let ka = &m.kernels[0].archs["sm_80"];
        let best = ka.best.as_ref().expect("a best launch");
        assert_eq!(best.block_size, 768, "the case needs best != bound");
        assert_eq!(judged(&m), (1024, [1024, 1, 1], 0, 1, 0.5));
        for attr in [
            quote!(kernel = "k"),
            quote!(kernel = "k", arch = "sm_80"),
            quote!(kernel = "k", min_occupancy = 0.5),
            quote!(kernel = "k", allow_spills),
        ] {
            assert_eq!(baked(&row(attr.clone(), &m)), judged(&m), "{attr}");
        }
        // Options that shape the launch tune within them and the bound.
        let tuned = row(quote!(kernel = "k", max_block_size = 1024), &m);
        assert_eq!(tuned.block_size, 768);
        let tuned = row(quote!(kernel = "k", block_multiple = 128), &m);
        assert_eq!(tuned.block_size, 768);

        // No declaration: the best block; build.rs's launch: exactly it.
        let free = manifest(40, LaunchBounds::default(), &[]);
        assert_eq!(baked(&row(quote!(kernel = "k"), &free)), judged(&free));
        assert_eq!(judged(&free).0, 768);
        let by_build = manifest(40, bounded(1024), &[("k".into(), Launch::block_2d(32, 8))]);
        assert_eq!(judged(&by_build).1, [32, 8, 1]);
        assert_eq!(
            baked(&row(quote!(kernel = "k"), &by_build)),
            judged(&by_build)
        );
        // `.reqntid`: its shape.
        let req = manifest(
            40,
            LaunchBounds {
                req_threads: Some([32, 4, 1]),
                ..LaunchBounds::default()
            },
            &[],
        );
        assert_eq!(judged(&req).1, [32, 4, 1]);
        assert_eq!(baked(&row(quote!(kernel = "k"), &req)), judged(&req));
    }

    /// The site's error, for an attribute the macro refuses.
    fn refused(attr: proc_macro2::TokenStream, m: &Manifest) -> String {
        let (a, mut errors) = args::parse(attr.clone());
        let plan = plan(&a, m, &mut errors);
        assert!(plan.is_none() || !errors.is_empty(), "{attr} was accepted");
        errors.into_error().expect("an error").to_string()
    }

    /// Fails unless `said` holds every one of `needles`.
    fn says(said: &str, needles: &[&str]) {
        for needle in needles {
            assert!(said.contains(needle), "{needle:?} not in: {said}");
        }
    }

    #[test]
    fn a_sites_dynamic_shared_memory_the_gate_does_not_see_is_refused_where_it_costs_occupancy() {
        // 32 registers, nothing declared: judged at its best block, 100 %,
        // with no dynamic shared memory.
        let m = manifest(32, LaunchBounds::default(), &[]);
        assert_eq!(judged(&m).4, 1.0);
        // 100 KiB per block leaves fewer warps resident than the gate says.
        let said = refused(quote!(kernel = "k", dynamic_smem = 102400), &m);
        says(
            &said,
            &[
                "this site launches `k` with 102400 B of dynamic shared memory",
                "which the gate, the reports and kernels.rs do not see",
                "on sm_80",
                "`.dynamic_smem(\"k\", DynamicSmem::up_to(102400))`",
            ],
        );
        let said = refused(quote!(kernel = "k", smem_per_thread = 128), &m);
        assert!(said.contains("DynamicSmem::per_thread(128))`"), "{said}");
        // What costs nothing at the site's block is what the gate judges
        // (48 KiB: two blocks of 1,024 threads still fit, as the
        // registers allow).
        for attr in [
            quote!(kernel = "k", dynamic_smem = 49152),
            quote!(kernel = "k", dynamic_smem = 1024),
            quote!(kernel = "k", dynamic_smem = "max"),
        ] {
            let r = row(attr.clone(), &m);
            assert_eq!(r.occupancy, judged(&m).4, "{attr}");
        }
    }

    #[test]
    fn dynamic_shared_memory_build_rs_declares_is_what_every_site_launches_with() {
        let rule = DynamicSmem::PerThread {
            per_thread: 128,
            fixed: 0,
        };
        let m = manifest_with(32, LaunchBounds::default(), &[], &[("k".into(), rule)]);
        let (block, _, smem, _, occupancy) = judged(&m);
        assert_eq!(smem, 128 * block);
        assert!(occupancy < 1.0, "{occupancy}");
        // A site with no option bakes exactly the judged launch; one that
        // tunes its block tunes it at build.rs's dynamic shared memory.
        assert_eq!(baked(&row(quote!(kernel = "k"), &m)), judged(&m));
        let small = row(quote!(kernel = "k", max_block_size = 128), &m);
        assert_eq!(small.dynamic_smem, 128 * small.block_size);
        // The same amount named at the site is the same launch.
        let same = row(quote!(kernel = "k", smem_per_thread = 128), &m);
        assert_eq!(same.dynamic_smem, 128 * same.block_size);
        // Another amount is refused, naming build.rs's line.
        let said = refused(quote!(kernel = "k", dynamic_smem = 1024), &m);
        says(
            &said,
            &[
                "build.rs declares the dynamic shared memory of `k`",
                "`.dynamic_smem(\"k\", DynamicSmem::per_thread(128))`",
                "not 1024 B",
                "drop it here",
            ],
        );
    }
}
