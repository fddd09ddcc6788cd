//! Launch tuning on top of the occupancy model.
//!
//! - [`best_block_size`][]: `cudaOccMaxPotentialOccupancyBlockSize` (and its
//!   `VariableSMem` form) with the header's exact search: candidates from the
//!   limit down in steps of 32, the first being the limit itself even when it
//!   is not a multiple of 32; a candidate wins only with strictly more
//!   resident threads, so ties keep the larger block; the search stops early
//!   at full occupancy. The limit is the smallest of the arch's maximum, the
//!   kernel's `__launch_bounds__` and an optional user maximum. As an occ
//!   extension, [`TuneRequest::block_multiple`] restricts the candidates to
//!   multiples of N.
//! - [`candidates`][]: the block sizes worth timing for a request: each
//!   occupancy plateau's (blocks per SM) smallest and largest, 128/256/512
//!   and the best block size.
//! - [`available_dynamic_smem`][]: `cudaOccAvailableDynamicSMemPerBlock`
//!   (CUDA 13.5, which subtracts the 1 KB reserve on 8.0+).
//! - [`min_carveout`][]: the smallest carveout that keeps a launch's occupancy.
//! - [`what_if`][]: the fewest registers to drop, or shared-memory bytes to
//!   shed, to reach the next occupancy step, and whether
//!   `__launch_bounds__(N, minBlocks)` would get there.
//! - [`register_steps`][]: the register counts at which the register limit
//!   steps, for an arch and block size.
//!
//! ```
//! use occ_model::{model::arch, model::occupancy::KernelResources, model::suggest::*};
//! let sm80 = arch::lookup("sm_80").unwrap();
//! let kernel = KernelResources { registers: 40, ..Default::default() };
//! let best = best_block_size(sm80, &kernel, &TuneRequest::default()).unwrap().unwrap();
//! assert_eq!(best.block_size, 768);
//! assert_eq!(best.occupancy.active_blocks_per_sm, 2);
//! ```

mod block;
mod headroom;
mod hints;
mod steps;

pub use block::*;
pub use headroom::*;
pub use hints::*;
pub use steps::*;

/// The manifest schema's types this module fills (defined in [`crate::schema::manifest`]).
pub use crate::schema::manifest::{DynamicSmem, LaunchBoundsHint, RegisterHint, SmemHint};

impl Default for DynamicSmem {
    fn default() -> Self {
        DynamicSmem::Fixed(0)
    }
}

impl DynamicSmem {
    /// Bytes for a block of `block_size` threads.
    pub fn bytes(&self, block_size: u32) -> u64 {
        match *self {
            DynamicSmem::Fixed(b) => u64::from(b),
            DynamicSmem::PerThread { per_thread, fixed } => {
                u64::from(per_thread) * u64::from(block_size) + u64::from(fixed)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::block::candidate;
    use super::*;
    use crate::model::arch::lookup;
    use crate::model::occupancy::*;

    fn k(registers: u32) -> KernelResources {
        KernelResources {
            registers,
            ..Default::default()
        }
    }

    #[test]
    fn shaped_candidates_keep_the_declared_dimensionality() {
        for arch_name in ["sm_80", "sm_90"] {
            let a = lookup(arch_name).unwrap();
            for registers in [32, 64, 128] {
                let kk = KernelResources {
                    static_smem: 4224,
                    ..k(registers)
                };
                let req = TuneRequest::default();
                // 32x8: x stays 32, y varies; each is `candidates`' at its
                // threads, among the multiples of 32 up to 1024.
                let shaped = shaped_candidates(a, &kk, &req, [32, 8, 1]).unwrap();
                let plain = candidates(a, &kk, &req).unwrap();
                assert!(!shaped.is_empty());
                for s in &shaped {
                    let [x, y, z] = s.block;
                    assert_eq!((x, z), (32, 1), "{s:?}");
                    assert_eq!(x * y, s.candidate.block_size);
                    let (o, _) = candidate(a, &kk, &req, s.candidate.block_size);
                    assert_eq!(o, s.candidate.occupancy);
                    if let Some(p) = plain.iter().find(|p| p.block_size == x * y) {
                        assert_eq!(p.occupancy, s.candidate.occupancy);
                    }
                }
                let declared = shaped.iter().find(|s| s.block == [32, 8, 1]).unwrap();
                assert!(declared.candidate.why.contains(&CandidateWhy::Declared));
                // 8x8x4: z varies, at most 16 (1024 threads).
                let deep = shaped_candidates(a, &kk, &req, [8, 8, 4]).unwrap();
                assert!(deep
                    .iter()
                    .all(|s| s.block[..2] == [8, 8] && s.block[2] <= 16));
                assert!(deep.iter().any(|s| s.block == [8, 8, 4]));
                // 16x3 (48 threads, not whole warps): still offered, as declared.
                let odd = shaped_candidates(a, &kk, &req, [16, 3, 1]).unwrap();
                assert!(odd
                    .iter()
                    .any(|s| s.block == [16, 3, 1] && s.candidate.why == [CandidateWhy::Declared]));
                assert!(odd
                    .iter()
                    .all(|s| s.block[0] == 16
                        && (s.block[1] == 3 || s.candidate.block_size % 32 == 0)));
                // 1-D: `candidates` as they are.
                let flat = shaped_candidates(a, &kk, &req, [256, 1, 1]).unwrap();
                assert_eq!(
                    flat.iter().map(|s| s.candidate.clone()).collect::<Vec<_>>(),
                    plain
                );
            }
        }
    }

    #[test]
    fn doc_vectors_best_block() {
        let a = lookup("sm_80").unwrap();
        let kk = KernelResources {
            static_smem: 16384,
            ..k(40)
        };
        let b = best_block_size(a, &kk, &TuneRequest::default())
            .unwrap()
            .unwrap();
        assert_eq!((b.block_size, b.active_blocks_per_sm()), (768, 2));
        assert_eq!(b.min_grid_size(108), 216);
        let h = lookup("sm_90").unwrap();
        let b = best_block_size(h, &k(32), &TuneRequest::default())
            .unwrap()
            .unwrap();
        assert_eq!((b.block_size, b.active_blocks_per_sm()), (1024, 2));
        let ga = lookup("sm_86").unwrap();
        let kk = KernelResources {
            static_smem: 48 * 1024,
            ..k(64)
        };
        let b = best_block_size(ga, &kk, &TuneRequest::default())
            .unwrap()
            .unwrap();
        assert_eq!((b.block_size, b.active_blocks_per_sm()), (1024, 1));
    }

    #[test]
    fn v17_first_candidate_is_the_limit() {
        let a = lookup("sm_80").unwrap();
        let kk = KernelResources {
            max_threads_per_block: Some(200),
            ..k(40)
        };
        let b = best_block_size(a, &kk, &TuneRequest::default())
            .unwrap()
            .unwrap();
        assert_eq!(b.block_size, 192);
        // One block fits at any size (100 KB static): the limit itself wins,
        // although it is not a multiple of 32.
        let kk = KernelResources {
            max_threads_per_block: Some(1000),
            static_smem: 100 * 1024,
            ..k(16)
        };
        let b = best_block_size(a, &kk, &TuneRequest::default())
            .unwrap()
            .unwrap();
        assert_eq!((b.block_size, b.active_blocks_per_sm()), (1000, 1));
        // The user cap works the same way.
        let req = TuneRequest {
            max_block_size: Some(200),
            ..Default::default()
        };
        assert_eq!(
            best_block_size(a, &k(40), &req)
                .unwrap()
                .unwrap()
                .block_size,
            192
        );
    }

    #[test]
    fn v18_variable_smem() {
        let a = lookup("sm_80").unwrap();
        let req = TuneRequest {
            dynamic_smem: DynamicSmem::PerThread {
                per_thread: 64,
                fixed: 0,
            },
            ..Default::default()
        };
        // The vector used the runtime's default attribute (48 KB dynamic):
        // 1024 × 64 B does not fit, and 512 threads × 4 blocks fill the SM.
        let runtime_default = KernelResources {
            max_dynamic_smem: Some(48 * 1024),
            ..k(32)
        };
        let b = best_block_size(a, &runtime_default, &req).unwrap().unwrap();
        assert_eq!((b.block_size, b.active_blocks_per_sm()), (512, 4));
        assert_eq!(b.dynamic_smem, 64 * 512);
        // Opted in to the maximum, 1024 × 2 blocks already fills the SM.
        let b = best_block_size(a, &k(32), &req).unwrap().unwrap();
        assert_eq!((b.block_size, b.active_blocks_per_sm()), (1024, 2));
    }

    #[test]
    fn nothing_fits_and_block_multiple() {
        let a = lookup("sm_80").unwrap();
        assert_eq!(
            best_block_size(
                a,
                &k(255),
                &TuneRequest {
                    dynamic_smem: DynamicSmem::Fixed(200_000),
                    ..Default::default()
                }
            )
            .unwrap(),
            None
        );
        let req = TuneRequest {
            block_multiple: Some(96),
            ..Default::default()
        };
        let b = best_block_size(a, &k(40), &req).unwrap().unwrap();
        assert_eq!(b.block_size % 96, 0);
        // Brute force over multiples of 96: most threads, then larger block.
        let best = (1..=10)
            .map(|m| m * 96)
            .map(|s| {
                (
                    s * compute(a, &k(40), &BlockLaunch::new(s)).active_blocks_per_sm,
                    s,
                )
            })
            .max()
            .unwrap();
        assert_eq!(b.block_size, best.1);
        assert!(matches!(
            best_block_size(
                a,
                &k(40),
                &TuneRequest {
                    block_multiple: Some(0),
                    ..Default::default()
                }
            ),
            Err(OccupancyError::BlockMultiple)
        ));
    }

    /// Every request shape the candidate tests try.
    fn requests() -> Vec<TuneRequest> {
        vec![
            TuneRequest::default(),
            TuneRequest {
                block_multiple: Some(96),
                ..Default::default()
            },
            TuneRequest {
                max_block_size: Some(200),
                ..Default::default()
            },
            TuneRequest {
                dynamic_smem: DynamicSmem::PerThread {
                    per_thread: 96,
                    fixed: 1024,
                },
                ..Default::default()
            },
            TuneRequest {
                dynamic_smem: DynamicSmem::Fixed(40 * 1024),
                ..Default::default()
            },
        ]
    }

    #[test]
    fn candidates_cover_every_plateau_and_all_launch() {
        let mut checked = 0;
        for arch_name in ["sm_61", "sm_80", "sm_86", "sm_90", "sm_120"] {
            let a = lookup(arch_name).unwrap();
            for registers in [16, 32, 40, 64, 72, 128, 255] {
                for static_smem in [0, 12 * 1024, 48 * 1024] {
                    for bounds in [None, Some(256), Some(1000)] {
                        let kk = KernelResources {
                            static_smem,
                            max_threads_per_block: bounds,
                            ..k(registers)
                        };
                        for req in requests() {
                            let Ok(cands) = candidates(a, &kk, &req) else {
                                continue;
                            };
                            checked += 1;
                            // Brute force: every block size 1..=1024 the
                            // request allows, and its occupancy.
                            let limit = 1024
                                .min(a.max_threads_per_block)
                                .min(bounds.unwrap_or(u32::MAX))
                                .min(req.max_block_size.unwrap_or(u32::MAX));
                            let allowed = |s: u32| match req.block_multiple {
                                Some(m) => s.is_multiple_of(m),
                                None => s.is_multiple_of(32) || s == limit,
                            };
                            let brute: Vec<(u32, Occupancy)> = (1..=limit)
                                .filter(|&s| allowed(s))
                                .map(|s| (s, candidate(a, &kk, &req, s).0))
                                .filter(|(_, o)| o.active_blocks_per_sm > 0)
                                .collect();
                            // Sorted, each size once, each one launches.
                            assert!(cands.windows(2).all(|w| w[0].block_size < w[1].block_size));
                            for c in &cands {
                                let (o, _) = candidate(a, &kk, &req, c.block_size);
                                assert!(o.active_blocks_per_sm > 0, "{arch_name} {c:?}");
                                assert_eq!(o, c.occupancy);
                                assert!(allowed(c.block_size), "{c:?} {req:?}");
                            }
                            // Each plateau's smallest and largest size is a
                            // candidate; a plateau is one run of sizes.
                            let levels: std::collections::BTreeSet<u32> =
                                brute.iter().map(|(_, o)| o.active_blocks_per_sm).collect();
                            for level in &levels {
                                let at: Vec<u32> = brute
                                    .iter()
                                    .filter(|(_, o)| o.active_blocks_per_sm == *level)
                                    .map(|(s, _)| *s)
                                    .collect();
                                let run = brute
                                    .iter()
                                    .skip_while(|(s, _)| *s != at[0])
                                    .take(at.len())
                                    .all(|(_, o)| o.active_blocks_per_sm == *level);
                                assert!(run, "{arch_name} r{registers}: plateau {level} is split");
                                for s in [at[0], at[at.len() - 1]] {
                                    assert!(
                                        cands.iter().any(|c| c.block_size == s),
                                        "{arch_name} r{registers} level {level}: {s} missing"
                                    );
                                }
                            }
                            // Nothing else but the usual sizes and the best.
                            let best = best_block_size(a, &kk, &req).unwrap();
                            assert_eq!(best.is_none(), cands.is_empty());
                            for c in &cands {
                                let extreme = brute
                                    .iter()
                                    .filter(|(_, o)| {
                                        o.active_blocks_per_sm == c.occupancy.active_blocks_per_sm
                                    })
                                    .map(|(s, _)| *s)
                                    .fold((u32::MAX, 0), |(lo, hi), s| (lo.min(s), hi.max(s)));
                                assert!(
                                    c.block_size == extreme.0
                                        || c.block_size == extreme.1
                                        || USUAL_BLOCK_SIZES.contains(&c.block_size)
                                        || best.is_some_and(|b| b.block_size == c.block_size),
                                    "{c:?}"
                                );
                            }
                            for usual in USUAL_BLOCK_SIZES {
                                assert_eq!(
                                    brute.iter().any(|(s, _)| *s == usual),
                                    cands.iter().any(|c| c.block_size == usual),
                                    "{arch_name} {usual} {req:?}"
                                );
                            }
                            if let Some(b) = best {
                                let c = cands.iter().find(|c| c.block_size == b.block_size);
                                assert!(
                                    c.is_some_and(|c| c.why.contains(&CandidateWhy::MaxOccupancy))
                                );
                            }
                        }
                    }
                }
            }
        }
        assert!(checked > 400, "{checked}");
    }

    #[test]
    fn at_block_size_is_a_candidate_evaluation_or_none() {
        let a = lookup("sm_80").unwrap();
        let kk = KernelResources {
            max_threads_per_block: Some(512),
            ..k(40)
        };
        let req = TuneRequest::default();
        for c in candidates(a, &kk, &req).unwrap() {
            let at = at_block_size(a, &kk, &req, c.block_size).unwrap().unwrap();
            assert_eq!(
                (at.occupancy, at.dynamic_smem),
                (c.occupancy, c.dynamic_smem)
            );
        }
        // Above the bounds, off the warp multiple, or unlaunchable: none.
        assert_eq!(at_block_size(a, &kk, &req, 1024).unwrap(), None);
        assert_eq!(at_block_size(a, &kk, &req, 100).unwrap(), None);
        let big = TuneRequest {
            dynamic_smem: DynamicSmem::PerThread {
                per_thread: 400,
                fixed: 0,
            },
            ..Default::default()
        };
        assert_eq!(at_block_size(a, &kk, &big, 512).unwrap(), None);
        assert!(at_block_size(a, &kk, &big, 256).unwrap().is_some());
    }

    #[test]
    fn a_required_block_is_the_only_candidate() {
        let a = lookup("sm_80").unwrap();
        let req = TuneRequest {
            max_block_size: Some(384),
            block_multiple: Some(384),
            ..Default::default()
        };
        let c = candidates(a, &k(32), &req).unwrap();
        assert_eq!(
            c.iter().map(|c| c.block_size).collect::<Vec<_>>(),
            vec![384]
        );
        // Nothing launches: no candidate.
        let req = TuneRequest {
            dynamic_smem: DynamicSmem::Fixed(200_000),
            ..Default::default()
        };
        assert!(candidates(a, &k(32), &req).unwrap().is_empty());
        assert!(matches!(
            candidates(
                a,
                &k(32),
                &TuneRequest {
                    block_multiple: Some(0),
                    ..Default::default()
                }
            ),
            Err(OccupancyError::BlockMultiple)
        ));
    }

    #[test]
    fn v19_available_dynamic_smem() {
        let h = lookup("sm_90").unwrap();
        let l = BlockLaunch::new(128);
        assert_eq!(available_dynamic_smem(h, &k(0), &l, 1).unwrap(), 232448);
        assert_eq!(available_dynamic_smem(h, &k(0), &l, 2).unwrap(), 115712);
        assert!(matches!(
            available_dynamic_smem(h, &k(0), &l, 0),
            Err(OccupancyError::NumBlocks { .. })
        ));
        assert!(available_dynamic_smem(h, &k(0), &l, 17).is_err());
        // sm_80, 1 block: 166912 in 13.5.
        let a = lookup("sm_80").unwrap();
        assert_eq!(available_dynamic_smem(a, &k(0), &l, 1).unwrap(), 166912);
    }

    #[test]
    fn carveout_hint_keeps_occupancy() {
        let a = lookup("sm_80").unwrap();
        let kk = KernelResources {
            static_smem: 16384,
            ..k(40)
        };
        let l = BlockLaunch::new(256);
        let hint = min_carveout(a, &kk, &l).unwrap().unwrap();
        // 6 blocks × 17408 B = 104448 B → the 132 KB carveout.
        assert_eq!(hint.smem_per_sm, 132 * 1024);
        let with = compute(a, &kk, &l.with_carveout(hint.percent)).active_blocks_per_sm;
        assert_eq!(with, 6);
        if hint.percent > 0 {
            let less = compute(a, &kk, &l.with_carveout(hint.percent - 1)).active_blocks_per_sm;
            assert!(less < 6);
        }
        assert_eq!(
            min_carveout(lookup("sm_61").unwrap(), &kk, &l).unwrap(),
            None
        );
    }

    #[test]
    fn launch_bounds_caps_follow_the_register_file() {
        let a = lookup("sm_80").unwrap();
        // 64 Ki registers: 1024 threads x 2 blocks leave 32 each, 1 block 64.
        assert_eq!(launch_bounds_register_cap(a, 1024, 2), Some(32));
        assert_eq!(launch_bounds_register_cap(a, 1024, 1), Some(64));
        assert_eq!(launch_bounds_register_cap(a, 1024, 0), Some(64));
        // Small blocks: the ISA's 255, never the header's 256.
        assert_eq!(launch_bounds_register_cap(a, 32, 1), Some(255));
        // Each cap is the largest that fits: one more register does not.
        for (threads, blocks) in [(256, 3), (384, 2), (1024, 2), (96, 7)] {
            let cap = launch_bounds_register_cap(a, threads, blocks).unwrap();
            assert!(register_limit(a, cap, threads).is_none_or(|b| b >= blocks));
            assert!(register_limit(a, cap + 1, threads).is_some_and(|b| b < blocks));
        }
        // 64 blocks of 1024 threads cannot fit at any register count.
        assert_eq!(launch_bounds_register_cap(a, 1024, 64), None);
    }

    #[test]
    fn what_if_registers_and_smem() {
        let a = lookup("sm_80").unwrap();
        let kk = KernelResources {
            static_smem: 16384,
            ..k(40)
        };
        let w = what_if(a, &kk, &BlockLaunch::new(256)).unwrap();
        assert_eq!((w.active_blocks_per_sm, w.target_blocks), (6, 7));
        // 7 blocks of 8 warps need ≤ 32 registers (Rw = 1024 → 16 warps/SP).
        assert_eq!(
            w.registers,
            Some(RegisterHint {
                max_registers: 32,
                drop: 8
            })
        );
        // Shared memory is not the limiter: shedding cannot help.
        assert_eq!(w.shared_memory, None);
        let lb = w.launch_bounds.unwrap();
        assert_eq!(
            (lb.max_threads, lb.min_blocks_per_sm, lb.register_cap),
            (256, 7, 32)
        );
        assert!(lb.reaches_target);

        // Shared-memory bound kernel.
        let ga = lookup("sm_86").unwrap();
        let kk = KernelResources {
            static_smem: 48 * 1024,
            ..k(64)
        };
        let w = what_if(ga, &kk, &BlockLaunch::new(128)).unwrap();
        let s = w.shared_memory.unwrap();
        // 3 blocks in 100 KB: roundUp(x + 1 KB, 128) ≤ 34133 → x ≤ 33024.
        assert_eq!(s.max_bytes, 33024);
        assert_eq!(s.shed, 48 * 1024 - 33024);
        assert!(!w.launch_bounds.unwrap().reaches_target);
    }

    #[test]
    fn register_steps_match_limits() {
        let a = lookup("sm_80").unwrap();
        let steps: Vec<_> = register_steps(a, 256).collect();
        assert!(steps.windows(2).all(|w| w[0].blocks > w[1].blocks));
        assert!(steps
            .windows(2)
            .all(|w| w[0].max_registers < w[1].max_registers));
        for s in &steps {
            assert_eq!(register_limit(a, s.max_registers, 256), Some(s.blocks));
            if s.max_registers < 256 {
                assert!(register_limit(a, s.max_registers + 1, 256).unwrap() < s.blocks);
            }
        }
        // 40 regs → 6 blocks: the 6-block step ends at 40.
        assert!(steps.contains(&RegisterStep {
            max_registers: 40,
            blocks: 6
        }));
        assert_eq!(steps.last().unwrap().max_registers, 256);
    }
}
