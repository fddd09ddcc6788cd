//! Occupancy cliffs and headroom at a kernel's launch: how many more
//! registers per thread, or bytes of shared memory per block, the kernel
//! can take before it loses a resident block (the cliff ahead), and how
//! many it must drop to gain one (the step up).
//!
//! Exact for `cuda_occupancy.h`: the register side reads the register
//! limit's steps ([`suggest::register_steps`]: the per-warp allocation rounded
//! to the arch's allocation unit, split over sub-partitions, the hardware's
//! per-block check) and the step up is [`suggest::what_if`]'s. The
//! shared-memory side walks the allocation granules: a block's footprint,
//! `roundUp(static + dynamic + reserve, granularity)`, changes only at a
//! granule's first byte, so the first granule with fewer blocks is the
//! cliff. Static and dynamic shared memory weigh the same there (the model
//! opts every kernel in to the arch's maximum dynamic size), so the bytes
//! are per block, static plus dynamic. Above the arch's opt-in maximum no
//! block launches, and above its per-thread register cap neither: those
//! are the last cliffs (0 blocks).
//!
//! ```
//! use occ_model::{model::arch, model::cliff, model::occupancy::{KernelResources, BlockLaunch}};
//! let sm80 = arch::lookup("sm_80").unwrap();
//! let k = KernelResources { registers: 40, static_smem: 16384, ..Default::default() };
//! let c = cliff::cliffs(sm80, &k, &BlockLaunch::new(256)).unwrap();
//! assert_eq!(c.active_blocks_per_sm, 6);
//! // 41 registers allocate 48 per thread: 5 blocks.
//! assert_eq!(c.registers.down.map(|s| (s.at, s.active_blocks_per_sm)), Some((41, 5)));
//! // At most 32 registers give 8 blocks.
//! assert_eq!(c.registers.up.map(|s| (s.at, s.active_blocks_per_sm)), Some((32, 8)));
//! ```

use crate::model::arch::{self, Arch};
use crate::model::occupancy::{occupancy, BlockLaunch, KernelResources, Limiter, OccupancyError};
use crate::model::suggest;
use crate::schema::manifest::{KernelArch, Resources};

/// The manifest schema's types this module fills (defined in [`crate::schema::manifest`]).
pub use crate::schema::manifest::{Cliff, Cliffs, Step, NEAR_CLIFF};

impl Cliff {
    /// How much more the kernel can take and keep its blocks: one less than
    /// the distance to the cliff (`Some(1)` for "+2 registers cost a
    /// block"); `None` without a cliff.
    pub fn headroom(&self) -> Option<u32> {
        self.down.map(|d| d.at - self.now - 1)
    }

    /// How much to drop for the next step up, `None` when nothing does.
    pub fn to_gain(&self) -> Option<u32> {
        self.up.map(|u| self.now - u.at)
    }

    /// Whether the cliff ahead is at most `margin` away (`now + margin`
    /// or less loses a block).
    pub fn within(&self, margin: u32) -> bool {
        self.down.is_some_and(|d| d.at - self.now <= margin)
    }

    /// `+2 costs a block (6 -> 5, 75.0% -> 62.5%)`, `-8 gains a block (…)`:
    /// both steps in words, `unit` after each number (`" registers"`, `" B"`).
    pub fn describe(&self, unit: &str, blocks: u32, occupancy: f64) -> String {
        let pct = crate::render::units::percent;
        let count = |n: u32| {
            if n == 1 {
                "a block".to_string()
            } else {
                format!("{n} blocks")
            }
        };
        let mut parts = Vec::new();
        match self.down {
            Some(d) => parts.push(format!(
                "+{}{unit} costs {} ({blocks} -> {}, {} -> {})",
                d.at - self.now,
                count(blocks - d.active_blocks_per_sm),
                d.active_blocks_per_sm,
                pct(occupancy),
                pct(d.occupancy)
            )),
            None => parts.push("no block to lose".into()),
        }
        if let Some(u) = self.up {
            parts.push(format!(
                "-{}{unit} gains {} ({blocks} -> {}, {} -> {})",
                self.now - u.at,
                count(u.active_blocks_per_sm - blocks),
                u.active_blocks_per_sm,
                pct(occupancy),
                pct(u.occupancy)
            ));
        }
        parts.join("; ")
    }
}

impl Cliffs {
    /// The occupancy at the launch (resident warps over the SM's maximum).
    pub fn occupancy(&self, arch: &Arch) -> f64 {
        fraction(arch, self.active_blocks_per_sm, self.block_size)
    }

    /// One line: `registers 40: +1 costs a block (…); -8 gains a block (…);
    /// smem 17408 B: +…`.
    pub fn describe(&self, arch: &Arch) -> String {
        let occ = self.occupancy(arch);
        format!(
            "registers {}: {}; smem {} B/block: {}",
            self.registers.now,
            self.registers.describe("", self.active_blocks_per_sm, occ),
            self.shared_memory.now,
            self.shared_memory
                .describe(" B", self.active_blocks_per_sm, occ)
        )
    }
}

/// Occupancy of `blocks` blocks of `block_size` threads.
fn fraction(arch: &Arch, blocks: u32, block_size: u32) -> f64 {
    let max = arch.max_threads_per_sm / arch.warp_size;
    let warps = (blocks * block_size.div_ceil(arch.warp_size)).min(max);
    f64::from(warps) / f64::from(max.max(1))
}

/// The cliffs of `kernel` at `launch` on `arch` (errors as [`occupancy`]'s).
pub fn cliffs(
    arch: &'static Arch,
    kernel: &KernelResources,
    launch: &BlockLaunch,
) -> Result<Cliffs, OccupancyError> {
    let now = occupancy(arch, kernel, launch)?;
    let blocks = now.active_blocks_per_sm;
    let hints = suggest::what_if(arch, kernel, launch)?;
    let step = |at: u32, blocks: u32| Step {
        at,
        active_blocks_per_sm: blocks,
        occupancy: fraction(arch, blocks, launch.block_size),
    };
    let with_registers = |r: u32| {
        let k = KernelResources {
            registers: r,
            ..*kernel
        };
        crate::model::occupancy::compute(arch, &k, launch).active_blocks_per_sm
    };
    // Shared memory per block `t` (static + dynamic): the extra bytes are
    // dynamic, the same footprint as static ones.
    let total = kernel.static_smem + launch.dynamic_smem;
    let with_total = |t: u32| {
        if t > arch.smem_per_block_optin {
            return 0;
        }
        let l = BlockLaunch {
            dynamic_smem: t - kernel.static_smem.min(t),
            ..*launch
        };
        let k = KernelResources {
            static_smem: kernel.static_smem.min(t),
            ..*kernel
        };
        crate::model::occupancy::compute(arch, &k, &l).active_blocks_per_sm
    };
    let registers = Cliff {
        now: kernel.registers,
        down: (blocks > 0)
            .then(|| register_cliff(arch, kernel.registers, launch.block_size, blocks))
            .map(|at| step(at, with_registers(at))),
        up: hints
            .registers
            .map(|r| step(r.max_registers, with_registers(r.max_registers))),
    };
    let shared_memory = Cliff {
        now: total,
        down: (blocks > 0)
            .then(|| smem_cliff(arch, kernel, launch, blocks, &with_total))
            .map(|at| step(at, with_total(at))),
        up: hints
            .shared_memory
            .map(|s| step(s.max_bytes, with_total(s.max_bytes))),
    };
    Ok(Cliffs {
        block_size: launch.block_size,
        dynamic_smem: launch.dynamic_smem,
        active_blocks_per_sm: blocks,
        registers,
        shared_memory,
    })
}

/// The fewest registers above `registers` whose register limit alone is
/// below `blocks` (the other limits do not depend on registers): the first
/// count of the first step of [`suggest::register_steps`] that allows fewer,
/// else one above the arch's cap (no block launches).
fn register_cliff(arch: &'static Arch, registers: u32, block_size: u32, blocks: u32) -> u32 {
    let mut start = 1;
    for s in suggest::register_steps(arch, block_size) {
        if s.max_registers > registers && s.blocks < blocks {
            return start.max(registers + 1);
        }
        start = s.max_registers + 1;
    }
    arch.max_regs_per_thread.max(registers) + 1
}

/// The fewest bytes per block above today's with fewer than `blocks`
/// blocks: the first byte of the first granule that holds fewer, or one
/// above the opt-in maximum.
fn smem_cliff(
    arch: &Arch,
    kernel: &KernelResources,
    launch: &BlockLaunch,
    blocks: u32,
    with_total: &dyn Fn(u32) -> u32,
) -> u32 {
    let g = arch.smem_granularity;
    // The header adds the reserve on every arch (it is 0 before 8.0).
    let reserve = arch.reserved_smem_per_block;
    let total = kernel.static_smem + launch.dynamic_smem;
    // The footprint is roundUp(total + reserve, g): it next grows at the
    // byte after today's granule.
    let footprint = (total + reserve).div_ceil(g) * g;
    let mut t = (footprint + 1).saturating_sub(reserve).max(total + 1);
    while t <= arch.smem_per_block_optin {
        if with_total(t) < blocks {
            return t;
        }
        t += g;
    }
    arch.smem_per_block_optin + 1
}

/// The cliffs of a manifest entry at the launch it is judged at (the
/// declared launch, else the best block size); `None` for a kernel that
/// cannot launch. An error (a message) for an unknown arch or numbers no
/// launch could have.
pub fn at_judged(arch_name: &str, r: &Resources) -> Result<Option<Cliffs>, String> {
    let a = arch::lookup(arch_name).map_err(|e| e.to_string())?;
    let Some(judged) = r.judged() else {
        return Ok(None);
    };
    let launch = BlockLaunch::new(judged.block_size).with_dynamic_smem(judged.dynamic_smem);
    cliffs(a, &crate::compiler::analyze::model_of(&r.facts), &launch)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// Whether a kernel's registers matter on an arch, so that where they
/// spill or peak is worth locating by source line: it spills, fewer
/// registers would gain a resident block at the launch it is judged at
/// (registers limit it), or the register cliff ahead is at most
/// [`NEAR_CLIFF`] registers away. Registers that merely tie with another
/// limit (24 registers at 1,024 threads, two blocks either way) do not
/// matter: no change of registers up to the cliff changes the occupancy.
/// Without cliffs (a kernel that cannot launch), registers among the
/// judged limiters.
pub fn registers_matter(a: &KernelArch) -> bool {
    registers_matter_at(&a.resources, a.cliffs.as_ref())
}

/// [`registers_matter`] of a record and its cliffs.
pub fn registers_matter_at(r: &Resources, cliffs: Option<&Cliffs>) -> bool {
    if r.facts.spills() {
        return true;
    }
    match cliffs {
        Some(c) => c.registers.up.is_some() || c.registers.within(NEAR_CLIFF),
        None => r
            .judged()
            .is_some_and(|j| j.limiters.iter().any(|l| l == Limiter::Registers.as_str())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::occupancy::compute;
    use crate::schema::manifest::Facts;

    #[test]
    fn registers_matter_where_a_register_changes_the_occupancy() {
        let resources = |registers: u32, spill_stores: u32| Resources {
            facts: Facts {
                registers,
                static_smem: 0,
                spill_stores,
                spill_loads: 0,
                stack_frame: 0,
                cumulative_stack: None,
                barriers: None,
                launch_bounds: Default::default(),
                maxrregcount: None,
            },
            best: Default::default(),
            declared: None,
            cubin_hash: None,
        };
        let matter = |registers: u32, spill_stores: u32| {
            let mut r = resources(registers, spill_stores);
            r.best = crate::model::declared::best_launch("sm_80", &r.facts).expect("a best launch");
            let mut a = KernelArch::from_resources(r);
            a.cliffs = at_judged("sm_80", &a).expect("cliffs");
            registers_matter(&a)
        };
        // 24 registers at 1,024 threads: two blocks, which the warps allow
        // too (registers tie as a limiter), and nothing up to 32 changes
        // that.
        assert!(!matter(24, 0));
        // The same kernel spilling.
        assert!(matter(24, 8));
        // 31: two more registers cost a block.
        assert!(matter(31, 0));
        // 40: registers alone limit it, fewer would gain a block.
        assert!(matter(40, 0));
        // Without cliffs, registers among the judged limiters.
        let mut r = resources(24, 0);
        r.best = crate::model::declared::best_launch("sm_80", &r.facts).expect("a best launch");
        assert!(registers_matter(&KernelArch::from_resources(r)));
    }

    /// A small deterministic generator (xorshift), so a failure names its seed.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u32) -> u32 {
            (self.next() % u64::from(n.max(1))) as u32
        }
    }

    fn blocks(a: &Arch, k: &KernelResources, l: &BlockLaunch) -> u32 {
        if u64::from(k.static_smem) + u64::from(l.dynamic_smem) > u64::from(a.smem_per_block_optin)
        {
            return 0;
        }
        compute(a, k, l).active_blocks_per_sm
    }

    /// Brute force: step registers one at a time from today's, up to the
    /// first count with fewer blocks and down to the first with more, and
    /// compare with the computed cliffs (blocks and occupancy there too).
    #[test]
    fn register_cliffs_are_where_stepping_one_register_at_a_time_first_changes_occupancy() {
        let seed = 0x0ccc_011f;
        let mut rng = Rng(seed);
        let archs = arch::all();
        for case in 0..3000 {
            let a = &archs[rng.below(archs.len() as u32) as usize];
            let block = 1 + rng.below(a.max_threads_per_block);
            let k = KernelResources {
                registers: rng.below(a.max_regs_per_thread + 1),
                static_smem: if rng.below(2) == 0 {
                    0
                } else {
                    rng.below(a.smem_per_block)
                },
                ..Default::default()
            };
            let l = BlockLaunch::new(block);
            let Ok(c) = cliffs(a, &k, &l) else { continue };
            let at = |r: u32| {
                if r > a.max_regs_per_thread {
                    return 0;
                }
                blocks(a, &KernelResources { registers: r, ..k }, &l)
            };
            let now = at(k.registers);
            assert_eq!(c.active_blocks_per_sm, now, "seed {seed:#x} case {case}");
            let down = (k.registers + 1..=a.max_regs_per_thread + 1).find(|&r| at(r) < now);
            let want = if now == 0 { None } else { down };
            assert_eq!(
                c.registers.down.map(|s| s.at),
                want,
                "seed {seed:#x} case {case}: {} {k:?} block {block}",
                a.name
            );
            if let Some(d) = c.registers.down {
                assert_eq!(d.active_blocks_per_sm, at(d.at), "case {case}");
                assert!((d.occupancy - fraction(a, d.active_blocks_per_sm, block)).abs() < 1e-12);
            }
            let up = (0..k.registers).rev().find(|&r| at(r) > now);
            assert_eq!(
                c.registers.up.map(|s| s.at),
                up,
                "seed {seed:#x} case {case}: {} {k:?} block {block}",
                a.name
            );
            if let Some(u) = c.registers.up {
                assert_eq!(u.active_blocks_per_sm, at(u.at), "case {case}");
            }
        }
    }

    /// The same for shared memory, one byte at a time (dynamic bytes on
    /// top of the static ones; static ones weigh the same).
    #[test]
    fn smem_cliffs_are_where_stepping_one_byte_at_a_time_first_changes_occupancy() {
        let seed = 0x05ee_d0cc;
        let mut rng = Rng(seed);
        let archs = arch::all();
        for case in 0..400 {
            let a = &archs[rng.below(archs.len() as u32) as usize];
            let block = 32 * (1 + rng.below(a.max_threads_per_block / 32));
            let static_smem = rng.below(a.smem_per_block_optin / 4);
            let dynamic = rng.below(a.smem_per_block_optin / 4);
            let k = KernelResources {
                registers: rng.below(64),
                static_smem,
                ..Default::default()
            };
            let l = BlockLaunch::new(block).with_dynamic_smem(dynamic);
            let Ok(c) = cliffs(a, &k, &l) else { continue };
            let at = |t: u32| {
                let dynamic = t.saturating_sub(static_smem);
                let k = KernelResources {
                    static_smem: static_smem.min(t),
                    ..k
                };
                blocks(a, &k, &l.with_dynamic_smem(dynamic))
            };
            let total = static_smem + dynamic;
            let now = at(total);
            assert_eq!(c.shared_memory.now, total);
            let down = (total + 1..=a.smem_per_block_optin + 1).find(|&t| at(t) < now);
            let want = if now == 0 { None } else { down };
            assert_eq!(
                c.shared_memory.down.map(|s| s.at),
                want,
                "seed {seed:#x} case {case}: {} {k:?} {l:?}",
                a.name
            );
            if let Some(d) = c.shared_memory.down {
                assert_eq!(d.active_blocks_per_sm, at(d.at), "case {case}");
            }
            let up = (0..total).rev().find(|&t| at(t) > now);
            assert_eq!(
                c.shared_memory.up.map(|s| s.at),
                up,
                "seed {seed:#x} case {case}: {} {k:?} {l:?}",
                a.name
            );
        }
    }

    #[test]
    fn the_smem_headroom_is_the_tuners_dynamic_headroom_at_the_best_block() {
        let a = arch::lookup("sm_80").unwrap();
        for (registers, static_smem) in [(40, 16384), (32, 0), (64, 48 * 1024), (128, 1000)] {
            let k = KernelResources {
                registers,
                static_smem,
                ..Default::default()
            };
            let best = suggest::best_block_size(a, &k, &suggest::TuneRequest::default())
                .unwrap()
                .unwrap();
            let l = BlockLaunch::new(best.block_size);
            let c = cliffs(a, &k, &l).unwrap();
            let headroom =
                suggest::available_dynamic_smem(a, &k, &l, best.occupancy.active_blocks_per_sm)
                    .unwrap();
            assert_eq!(c.shared_memory.headroom(), Some(headroom), "{k:?}");
        }
    }

    #[test]
    fn describe_says_what_a_step_costs() {
        let a = arch::lookup("sm_80").unwrap();
        let k = KernelResources {
            registers: 40,
            static_smem: 16384,
            ..Default::default()
        };
        let c = cliffs(a, &k, &BlockLaunch::new(256)).unwrap();
        assert_eq!(c.registers.headroom(), Some(0));
        assert!(c.registers.within(1) && !c.registers.within(0));
        assert_eq!(c.registers.to_gain(), Some(8));
        let text = c.describe(a);
        assert!(
            text.starts_with(
                "registers 40: +1 costs a block (6 -> 5, 75.0% -> 62.5%); -8 gains 2 blocks (6 -> 8, 75.0% -> 100.0%); \
                 smem 16384 B/block: +10497 B costs a block"
            ),
            "{text}"
        );
    }
}
