//! A finding's reasons as typed values: each a [`Reason`] variant carrying
//! the figures it speaks of (registers before and after, the threshold,
//! the launches), from which its cause ([`Reason::cause`]) and its words
//! (`Display`) are formatted. No view parses a reason's words: each reads
//! the fields (a table's note is `table`'s), or formats them here.

use super::Cause;
use crate::render::units::percent;
use crate::schema::manifest::{DeclaredBy, Launch};
use serde::{Deserialize, Serialize};
use std::fmt;

/// One change the comparison found, with its figures.
///
/// As JSON (`cargo occ diff --format json`) a reason is one object: its
/// cause (`"cause": "registers_past_threshold"`, the [`Cause`]'s name),
/// its figures by name, and `text`, its words (see `Finding`'s JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cause", rename_all = "snake_case")]
pub enum Reason {
    /// Fewer resident warps (or a lower occupancy) where the gate judged
    /// the kernel: `occupancy 100.0% -> 50.0% at block 1024`.
    OccupancyDown {
        /// Before, at the launch the lock records.
        before: Resident,
        /// After, at this build's launch.
        after: Resident,
        /// Where each was judged.
        at: JudgedAt,
    },
    /// Spills where there were none: `new spills: 16 bytes`.
    NewSpills {
        /// Spilled bytes (stores and loads) now.
        bytes: u32,
    },
    /// More spilled bytes: `spills 8 -> 16 bytes`.
    MoreSpills {
        /// Spilled bytes before.
        before: u32,
        /// Spilled bytes after.
        after: u32,
    },
    /// Registers up by more than the threshold:
    /// `registers 32 -> 41 (+9, threshold 8)`.
    RegistersPastThreshold {
        /// Registers per thread before.
        before: u32,
        /// Registers per thread after.
        after: u32,
        /// The threshold that applied to the kernel.
        threshold: u32,
    },
    /// In the lock, not in the build: `kernel gone`.
    Gone,
    /// The launch build.rs declared, which the lock records, is declared
    /// no more: its sites now launch at the best block.
    LaunchRemoved {
        /// The launch the lock records.
        launch: Launch,
        /// The best block the kernel's sites now launch at; `None` when it
        /// cannot launch at any.
        best_block_size: Option<u32>,
    },
    /// More resident warps: `occupancy 68.8% -> 100.0% at block 704 -> 1024`.
    OccupancyUp {
        /// Before, at the launch the lock records.
        before: Resident,
        /// After, at this build's launch.
        after: Resident,
        /// Where each was judged.
        at: JudgedAt,
    },
    /// Fewer spilled bytes: `spills 96 -> 0 bytes`.
    FewerSpills {
        /// Spilled bytes before.
        before: u32,
        /// Spilled bytes after.
        after: u32,
    },
    /// Fewer registers: `registers 64 -> 32`.
    FewerRegisters {
        /// Registers per thread before.
        before: u32,
        /// Registers per thread after.
        after: u32,
    },
    /// In the build, not in the lock: `new kernel`.
    NewKernel,
    /// The kernel is in the lock, but not for this arch, which the lock
    /// does not record: `new arch sm_90`.
    NewArch {
        /// The arch.
        arch: String,
    },
    /// Registers up within the threshold:
    /// `registers 32 -> 34 (within threshold 8)`.
    RegistersWithinThreshold {
        /// Registers per thread before.
        before: u32,
        /// Registers per thread after.
        after: u32,
        /// The threshold that applied to the kernel.
        threshold: u32,
    },
    /// The change left the kernel within the cliff margin of losing a
    /// resident block: `1 register from an occupancy cliff at block 256
    /// (+1 costs 2 blocks: 8 -> 6 blocks per SM)`.
    NearCliff {
        /// Registers per thread more that cost a block.
        registers: u32,
        /// Threads per block of the launch judged.
        block_size: u32,
        /// Resident blocks per SM now.
        active_blocks_per_sm: u32,
        /// Resident blocks per SM with `registers` more.
        blocks_past: u32,
    },
    /// Static shared memory changed: `static smem 0 -> 4096 bytes`.
    StaticSmem {
        /// Bytes per block before.
        before: u32,
        /// Bytes per block after.
        after: u32,
    },
    /// The best block size changed: `best block 256 -> 512` (`None`:
    /// the kernel cannot launch, `best block 256 -> none (cannot launch)`).
    BestBlock {
        /// Threads per block before.
        before: Option<u32>,
        /// Threads per block after.
        after: Option<u32>,
    },
    /// The declared launch the lock records changed or went, with the
    /// same occupancy: `launch 32x8 -> 32x16`.
    LaunchChanged {
        /// How.
        change: LaunchChange,
    },
    /// The kernel's file moved: `moved from k.cu`.
    Moved {
        /// The source the lock records.
        from: String,
    },
    /// Something else the lock records changed, each field named with its
    /// values: `declared launch none -> 32x22`, `maxrregcount none -> 64;
    /// stack frame 0 -> 16 bytes`; `derived numbers changed (the same
    /// recorded facts)` only when no field the lock records tells the two
    /// apart (another occ's model derived them).
    Details {
        /// The declared launch before and after, when that changed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        declared: Option<DeclaredChange>,
        /// The other recorded fields that changed, in the lock's order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        fields: Vec<FieldChange>,
    },
    /// A kernel gone beside a new one: ``renamed? `a` -> `b` ``.
    Renamed {
        /// The kernel gone.
        from: String,
        /// The new kernel.
        to: String,
    },
}

/// Resident warps per SM and the occupancy they make, as the gate compares
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Resident {
    /// Resident warps / the SM's maximum, 0..=1.
    pub occupancy: f64,
    /// Resident warps per SM.
    pub active_warps_per_sm: u32,
}

/// The launch a kernel × arch's occupancy was judged at, before and after
/// (`compare`'s `judged_occupancy`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum JudgedAt {
    /// Both at their best block (nothing is said).
    Best,
    /// Both at one declared launch: `at block 1024`, or for a launch of
    /// the C++ host code `launched at 256 from kernels/scale.cu:42`.
    Launch {
        /// The launch.
        launch: Launch,
        /// Where the C++ host code writes it, when it declares it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<String>,
    },
    /// Before at the launch the lock records, after at another:
    /// `at block 32x8 -> 32x22`, `at block 32x8 -> best block 1024`.
    Changed {
        /// How the launch changed.
        change: LaunchChange,
    },
}

/// How a declared launch the lock records changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LaunchChange {
    /// Another launch: `launch 32x8 -> 32x22`, each declarer named when
    /// they differ (`launch 256 (__launch_bounds__) -> 32x8 (build.rs `t`)`).
    Other {
        /// The launch the lock records.
        before: Launch,
        /// Who declared it.
        before_by: DeclaredBy,
        /// This build's launch.
        after: Launch,
        /// Who declared it.
        after_by: DeclaredBy,
    },
    /// No launch any more; judged at the best block: `declared launch
    /// 32x8 removed: judged at its best block 1024`.
    Removed {
        /// The launch the lock records.
        before: Launch,
        /// This build's best block; `None` when it cannot launch at any.
        best_block_size: Option<u32>,
    },
}

/// One recorded field that changed, by name, its values in words:
/// `maxrregcount none -> 64` (`none`: not recorded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldChange {
    /// The field, as the reports name it (`maxrregcount`, `stack frame`).
    pub field: String,
    /// Its value in the lock.
    pub before: String,
    /// Its value in this build.
    pub after: String,
}

impl fmt::Display for FieldChange {
    /// `maxrregcount none -> 64`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} -> {}", self.field, self.before, self.after)
    }
}

/// The declared launch before and after (`None`: none declared).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeclaredChange {
    /// The launch the lock records.
    pub before: Option<Launch>,
    /// This build's.
    pub after: Option<Launch>,
}

impl Reason {
    /// What the reason says, without its numbers.
    pub fn cause(&self) -> Cause {
        match self {
            Reason::OccupancyDown { .. } => Cause::OccupancyDown,
            Reason::NewSpills { .. } => Cause::NewSpills,
            Reason::MoreSpills { .. } => Cause::MoreSpills,
            Reason::RegistersPastThreshold { .. } => Cause::RegistersPastThreshold,
            Reason::Gone => Cause::Gone,
            Reason::LaunchRemoved { .. } => Cause::LaunchRemoved,
            Reason::OccupancyUp { .. } => Cause::OccupancyUp,
            Reason::FewerSpills { .. } => Cause::FewerSpills,
            Reason::FewerRegisters { .. } => Cause::FewerRegisters,
            Reason::NewKernel => Cause::NewKernel,
            Reason::NewArch { .. } => Cause::NewArch,
            Reason::RegistersWithinThreshold { .. } => Cause::RegistersWithinThreshold,
            Reason::NearCliff { .. } => Cause::NearCliff,
            Reason::StaticSmem { .. } => Cause::StaticSmem,
            Reason::BestBlock { .. } => Cause::BestBlock,
            Reason::LaunchChanged { .. } => Cause::LaunchChanged,
            Reason::Moved { .. } => Cause::Moved,
            Reason::Details { .. } => Cause::Details,
            Reason::Renamed { .. } => Cause::Renamed,
        }
    }

    /// Whether the change is for the better (more warps, fewer spills or
    /// registers): beside a regression it is listed as `... (better)`.
    pub fn is_better(&self) -> bool {
        matches!(
            self,
            Reason::OccupancyUp { .. } | Reason::FewerSpills { .. } | Reason::FewerRegisters { .. }
        )
    }
}

impl fmt::Display for Reason {
    /// The change in words (`registers 32 -> 41 (+9, threshold 8)`). Long
    /// because it is one arm per variant, each a line or two of words:
    /// kept together, the wording of every reason reads in one place.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::OccupancyDown { before, after, at }
            | Reason::OccupancyUp { before, after, at } => {
                write!(
                    f,
                    "occupancy {} -> {}",
                    percent(before.occupancy),
                    percent(after.occupancy)
                )?;
                if *at != JudgedAt::Best {
                    write!(f, " {at}")?;
                }
                Ok(())
            }
            Reason::NewSpills { bytes } => write!(f, "new spills: {bytes} bytes"),
            Reason::MoreSpills { before, after } | Reason::FewerSpills { before, after } => {
                write!(f, "spills {before} -> {after} bytes")
            }
            Reason::RegistersPastThreshold {
                before,
                after,
                threshold,
            } => write!(
                f,
                "registers {before} -> {after} (+{}, threshold {threshold})",
                after - before
            ),
            Reason::FewerRegisters { before, after } => write!(f, "registers {before} -> {after}"),
            Reason::RegistersWithinThreshold {
                before,
                after,
                threshold,
            } => write!(
                f,
                "registers {before} -> {after} (within threshold {threshold})"
            ),
            Reason::Gone => f.write_str(Cause::Gone.phrase()),
            Reason::NewKernel => f.write_str(Cause::NewKernel.phrase()),
            Reason::NewArch { arch } => write!(f, "new arch {arch}"),
            Reason::LaunchRemoved {
                launch,
                best_block_size,
            } => write!(
                f,
                "declared launch {} removed from build.rs: its sites now launch at the best \
                 block {}; declare it again (`.launch(..)`, or `.dynamic_smem(..)` for its \
                 dynamic shared memory), or bless if the kernel takes any block",
                launch.describe(),
                block(*best_block_size)
            ),
            Reason::NearCliff {
                registers,
                block_size,
                active_blocks_per_sm: blocks,
                blocks_past,
            } => {
                let lost = blocks - blocks_past;
                write!(
                    f,
                    "{registers} register{} from an occupancy cliff at block {block_size} \
                     (+{registers} costs {}: {blocks} -> {blocks_past} blocks per SM)",
                    if *registers == 1 { "" } else { "s" },
                    if lost == 1 {
                        "a block".to_string()
                    } else {
                        format!("{lost} blocks")
                    },
                )
            }
            Reason::StaticSmem { before, after } => {
                write!(f, "static smem {before} -> {after} bytes")
            }
            Reason::BestBlock { before, after } => {
                write!(f, "best block {} -> {}", block(*before), block(*after))
            }
            Reason::LaunchChanged { change } => write!(f, "{change}"),
            Reason::Moved { from } => write!(f, "moved from {from}"),
            Reason::Details { declared, fields } => {
                let show = |l: &Option<Launch>| l.map_or_else(|| "none".into(), |l| l.describe());
                let mut said: Vec<String> = declared
                    .iter()
                    .map(|d| format!("declared launch {} -> {}", show(&d.before), show(&d.after)))
                    .collect();
                said.extend(fields.iter().map(FieldChange::to_string));
                if said.is_empty() {
                    f.write_str("derived numbers changed (the same recorded facts)")
                } else {
                    f.write_str(&said.join("; "))
                }
            }
            Reason::Renamed { from, to } => write!(f, "renamed? `{from}` -> `{to}`"),
        }
    }
}

impl JudgedAt {
    /// At a declared launch, named by where the C++ host code writes it
    /// when the code declares it.
    pub fn launch(d: &crate::schema::manifest::Declared) -> Self {
        JudgedAt::Launch {
            launch: d.launch,
            from: match &d.by {
                DeclaredBy::Code { at } => Some(at.clone()),
                _ => None,
            },
        }
    }
}

impl fmt::Display for JudgedAt {
    /// Where, in words: `at block 1024`, `at block 32x8 -> 32x22`, `at
    /// block 32x8 -> best block 1024`; nothing for [`JudgedAt::Best`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JudgedAt::Best => Ok(()),
            JudgedAt::Launch { launch, from: None } => {
                write!(f, "at block {}", launch.describe())
            }
            JudgedAt::Launch {
                launch,
                from: Some(at),
            } => write!(f, "launched at {} from {at}", launch.describe()),
            JudgedAt::Changed {
                change: LaunchChange::Other { before, after, .. },
            } => write!(f, "at block {} -> {}", before.describe(), after.describe()),
            JudgedAt::Changed {
                change:
                    LaunchChange::Removed {
                        before,
                        best_block_size,
                    },
            } => write!(
                f,
                "at block {} -> best block {}",
                before.describe(),
                block(*best_block_size)
            ),
        }
    }
}

/// A best block size in a reason's words: its threads, or `none (cannot
/// launch)`.
fn block(best: Option<u32>) -> String {
    best.map_or_else(|| "none (cannot launch)".into(), |n| n.to_string())
}

impl fmt::Display for LaunchChange {
    /// The change: `launch 32x8 -> 32x22`, `launch 256 (__launch_bounds__)
    /// -> 32x8 (build.rs `t`)`, `declared launch 32x8 removed: judged at its
    /// best block 1024`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LaunchChange::Other {
                before,
                before_by,
                after,
                after_by,
            } => {
                let (was, is) = (before.describe(), after.describe());
                if before_by == after_by {
                    write!(f, "launch {was} -> {is}")
                } else {
                    write!(
                        f,
                        "launch {was} ({}) -> {is} ({})",
                        before_by.describe(),
                        after_by.describe()
                    )
                }
            }
            LaunchChange::Removed {
                before,
                best_block_size,
            } => write!(
                f,
                "declared launch {} removed: judged at its best block {}",
                before.describe(),
                block(*best_block_size)
            ),
        }
    }
}
