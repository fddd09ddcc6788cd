//! The register counts at which the register limit steps.

use crate::model::arch::Arch;
use crate::model::occupancy::{compute, BlockLaunch, KernelResources};

/// The register limit alone (blocks per SM) for `registers` per thread and
/// `block_size` threads, with partitioned global caching off; `None` for 0
/// registers (no limit).
pub fn register_limit(arch: &Arch, registers: u32, block_size: u32) -> Option<u32> {
    let k = KernelResources {
        registers,
        ..Default::default()
    };
    compute(arch, &k, &BlockLaunch::new(block_size.max(1)))
        .limits
        .registers
}

/// One step of the register limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RegisterStep {
    /// The most registers per thread that still give `blocks`.
    pub max_registers: u32,
    /// Blocks per SM the register file allows up to `max_registers`.
    pub blocks: u32,
}

/// Iterator returned by [`register_steps`].
#[derive(Debug, Clone)]
pub struct RegisterSteps {
    arch: &'static Arch,
    block_size: u32,
    next: u32,
}

impl Iterator for RegisterSteps {
    type Item = RegisterStep;

    fn next(&mut self) -> Option<RegisterStep> {
        let max = self.arch.max_regs_per_thread;
        while self.next <= max {
            let r = self.next;
            self.next += 1;
            let here = register_limit(self.arch, r, self.block_size).unwrap_or(u32::MAX);
            let after = if r == max {
                None
            } else {
                register_limit(self.arch, r + 1, self.block_size)
            };
            if after != Some(here) {
                return Some(RegisterStep {
                    max_registers: r,
                    blocks: here,
                });
            }
        }
        None
    }
}

/// The register counts (1 up to the arch's per-thread cap) at which the
/// register limit for `block_size` threads changes, each with the blocks per
/// SM it allows: the last count before each drop, and the cap itself.
pub fn register_steps(arch: &'static Arch, block_size: u32) -> RegisterSteps {
    RegisterSteps {
        arch,
        block_size,
        next: 1,
    }
}
