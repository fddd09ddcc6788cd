//! Each kernel of the example is held back, at its launch site, by the
//! limiter it claims, as occ's model computes it from the manifest this
//! build wrote: no number here is written by hand.

use example_app::kernels;
use example_app::launches::{Site, SITES};
use occ_model::model::occupancy::Limiter;

fn manifest() -> occ_model::schema::manifest::Manifest {
    match example_app::manifest() {
        Ok(m) => m,
        Err(e) => panic!("{e:#}"),
    }
}

fn plan(site: &Site, arch: &str) -> example_app::launches::LaunchPlan {
    let m = manifest();
    let k = site.resources(&m, arch).unwrap_or_else(|e| panic!("{e:#}"));
    site.plan(arch, k).unwrap_or_else(|e| panic!("{e:#}"))
}

#[test]
fn every_kernel_is_bound_by_its_claimed_limiter_alone() {
    for site in SITES {
        let p = plan(&site, site.arch);
        assert_eq!(
            p.limiters,
            vec![site.limiter],
            "{} on {} at block {} (dyn smem {}): bound by {:?}, the site claims {:?}",
            site.ident,
            site.arch,
            p.block_size,
            p.dynamic_smem,
            p.limiters,
            site.limiter
        );
        assert!(
            p.active_blocks_per_sm > 0,
            "{} cannot launch on {}",
            site.ident,
            site.arch
        );
    }
}

#[test]
fn the_sites_cover_warps_registers_shared_memory_and_barriers() {
    let mut claimed: Vec<Limiter> = SITES.iter().map(|s| s.limiter).collect();
    claimed.sort();
    claimed.dedup();
    assert_eq!(
        claimed,
        vec![
            Limiter::Warps,
            Limiter::Registers,
            Limiter::SharedMemory,
            Limiter::Barriers
        ]
    );
    // Both shared-memory kernels: one through dynamic, one through static smem.
    let m = manifest();
    let smem: Vec<&Site> = SITES
        .iter()
        .filter(|s| s.limiter == Limiter::SharedMemory)
        .collect();
    assert!(smem.iter().any(|s| s.smem_per_thread > 0
        && s.resources(&m, s.arch)
            .is_ok_and(|k| k.facts.static_smem == 0)));
    assert!(smem.iter().any(|s| s.smem_per_thread == 0
        && s.resources(&m, s.arch)
            .is_ok_and(|k| k.facts.static_smem > 0)));
}

#[test]
fn dynamic_smem_is_what_binds_block_sum() {
    // Without its per-thread shared memory the reduction would be bound by
    // warps: the limiter comes from the launch, not from the kernel alone.
    let site = example_app::launches::BLOCK_SUM;
    let bare = Site {
        smem_per_thread: 0,
        ..site
    };
    let with = plan(&site, site.arch);
    let without = plan(&bare, site.arch);
    assert_eq!(with.dynamic_smem, with.block_size * site.smem_per_thread);
    assert!(without.limiters.contains(&Limiter::Warps), "{without:?}");
    assert!(
        with.active_blocks_per_sm * with.block_size
            < without.active_blocks_per_sm * without.block_size,
        "{with:?} vs {without:?}"
    );
}

#[test]
fn row_softmax_uses_several_named_barriers_and_only_sm_90_counts_them() {
    let m = manifest();
    let site = example_app::launches::ROW_SOFTMAX;
    for arch in &m.archs {
        let k = site.resources(&m, arch).unwrap_or_else(|e| panic!("{e:#}"));
        let bars = k.facts.barriers.unwrap_or(0);
        assert!(
            bars > 1,
            "row_softmax on {arch}: ptxas reported {bars} barriers"
        );
        let p = plan(&site, arch);
        assert_eq!(
            p.limiters.contains(&Limiter::Barriers),
            arch.as_str() >= "sm_90",
            "{arch}: {p:?}"
        );
    }
}

#[test]
fn sites_without_a_policy_launch_at_the_baked_best_block() {
    // With no dynamic smem and no cap, the launch is the manifest's best and
    // the constant kernels.rs bakes.
    let m = manifest();
    let baked = [
        (
            "saxpy",
            kernels::saxpy::KERNEL
                .on("sm_80")
                .expect("built for sm_80")
                .best
                .expect("launchable")
                .block_size,
        ),
        (
            "nbody_forces",
            kernels::nbody_forces::KERNEL
                .on("sm_80")
                .expect("built for sm_80")
                .best
                .expect("launchable")
                .block_size,
        ),
        (
            "row_softmax",
            kernels::row_softmax::KERNEL
                .on("sm_80")
                .expect("built for sm_80")
                .best
                .expect("launchable")
                .block_size,
        ),
    ];
    for (ident, constant) in baked {
        let site = SITES.iter().find(|s| s.ident == ident).copied();
        let site = site.unwrap_or_else(|| panic!("no site for {ident}"));
        assert_eq!(site.smem_per_thread, 0);
        assert_eq!(site.max_block_size, None);
        let k = site
            .resources(&m, "sm_80")
            .unwrap_or_else(|e| panic!("{e:#}"));
        let p = plan(&site, "sm_80");
        let best = k.best.as_ref().expect("a best launch");
        assert_eq!(p.block_size, best.block_size, "{ident}");
        assert_eq!(p.block_size, constant, "{ident}");
        assert_eq!(p.active_blocks_per_sm, best.active_blocks_per_sm, "{ident}");
    }
}

#[test]
fn the_plan_renders_every_kernel_on_every_arch() {
    let m = manifest();
    let text = example_app::plan::render(&m).unwrap_or_else(|e| panic!("{e:#}"));
    let rows = text.lines().filter(|l| l.contains(" sm_")).count();
    assert!(rows >= SITES.len() * m.archs.len(), "{text}");
    for arch in ["sm_80", "sm_86", "sm_90"] {
        assert!(m.archs.iter().any(|a| a == arch), "{arch} is not built");
    }
}

/// example-app's occ.lock, as committed.
fn lock() -> occ_model::schema::lock::Lock {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("occ.lock");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    occ_model::schema::lock::Lock::from_text(&text, &path).unwrap_or_else(|e| panic!("{e}"))
}

/// The lock's measured block of `site` on `arch`, if it has one.
fn measured(
    lock: &occ_model::schema::lock::Lock,
    m: &occ_model::schema::manifest::Manifest,
    site: &Site,
    arch: &str,
) -> Option<u32> {
    let k = m.kernels.iter().find(|k| k.ident == site.ident)?;
    let key = (
        k.name.as_str(),
        k.source.as_str(),
        arch,
        occ_model::schema::measured::DEFAULT_BUCKET,
    );
    lock.measured
        .iter()
        .find(|e| e.key() == key)
        .map(|e| e.best)
}

#[test]
fn launch_config_bakes_the_models_launch_or_the_measured_block_on_every_arch() {
    let m = manifest();
    let lock = lock();
    let mut tuned_rows = 0;
    for site in SITES {
        let baked = (site.baked)();
        assert_eq!(baked.archs.len(), m.archs.len(), "{}", site.ident);
        for arch in &m.archs {
            let p = plan(&site, arch);
            let want = match measured(&lock, &m, &site, arch).filter(|_| site.tuned) {
                None => (p.block_size, p.dynamic_smem, p.active_blocks_per_sm),
                Some(block) => {
                    tuned_rows += 1;
                    let k = site.resources(&m, arch).unwrap_or_else(|e| panic!("{e:#}"));
                    let at = site.at(arch, k, block).unwrap_or_else(|e| panic!("{e:#}"));
                    (block, at.dynamic_smem, at.active_blocks_per_sm)
                }
            };
            assert_eq!(
                baked
                    .on(arch)
                    .map(|r| (r.threads(), r.dynamic_smem, r.active_blocks_per_sm)),
                Some(want),
                "{} on {arch}: #[launch_config] vs the model with the site's policy, or the block occ.lock measured",
                site.ident
            );
        }
    }
    assert!(tuned_rows > 0, "no site bakes a measured block");
}

#[test]
fn the_sites_are_tuned_where_the_measured_block_is_not_the_models() {
    // The H200 timings in occ.lock (BENCHMARKS.md section 10): a site bakes
    // them exactly where the fastest block differs from max occupancy.
    let m = manifest();
    let lock = lock();
    for site in SITES {
        for arch in &m.archs {
            if let Some(block) = measured(&lock, &m, &site, arch) {
                assert_eq!(
                    site.tuned,
                    block != plan(&site, arch).block_size,
                    "{} on {arch}: measured {block}",
                    site.ident
                );
            }
        }
    }
}

#[test]
fn the_baked_table_picks_the_newest_cubin_that_runs_else_jit() {
    use occ::select::How;
    let baked = (example_app::launches::BLOCK_SUM.baked)();
    let pick = |major, minor| baked.pick(major, minor).map(|(how, r)| (how, r.arch));
    assert_eq!(pick(9, 0), Some((How::Sass, "sm_90")));
    assert_eq!(pick(8, 9), Some((How::Sass, "sm_86")));
    assert_eq!(pick(8, 0), Some((How::Sass, "sm_80")));
    assert_eq!(pick(7, 5), None);
    // Blackwell: no cubin of this build runs there; sm_90's PTX is JIT-compiled.
    assert_eq!(pick(10, 0), Some((How::Jit, "sm_90")));
}

#[test]
fn the_transpose_block_is_32_wide() {
    let baked = (example_app::launches::TRANSPOSE.baked)();
    for row in baked.archs {
        assert_eq!(row.block.0, 32, "{}", row.arch);
        assert_eq!(row.block.0 * row.block.1, row.threads(), "{}", row.arch);
    }
}

#[test]
fn the_plan_shows_each_baked_launch_at_its_own_occupancy() {
    // A tuned row's occupancy and limiters are those of the measured block,
    // not of the model's (which a row printing one beside the other would
    // get wrong).
    let m = manifest();
    let rows = example_app::plan::rows(&m).unwrap_or_else(|e| panic!("{e:#}"));
    let mut differ = 0;
    for r in &rows {
        let spec = occ_model::model::arch::lookup(&r.arch).unwrap_or_else(|e| panic!("{e}"));
        let warps = r.baked.block_size.div_ceil(spec.warp_size) * r.baked.active_blocks_per_sm;
        let want = f64::from(warps) / f64::from(spec.max_threads_per_sm / spec.warp_size);
        assert!(
            (r.baked.occupancy - want).abs() < 1e-9,
            "{} on {}: {} at block {} x {} blocks",
            r.site.ident,
            r.arch,
            r.baked.occupancy,
            r.baked.block_size,
            r.baked.active_blocks_per_sm
        );
        if !r.agrees() {
            differ += 1;
            assert!(r.site.tuned, "{} on {}", r.site.ident, r.arch);
        }
    }
    assert!(differ > 0, "no row bakes a measured block");
}
