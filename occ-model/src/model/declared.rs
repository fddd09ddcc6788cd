//! Declared launches: the block shape and dynamic shared memory a kernel is
//! launched with, stated in `build.rs` (`Build::launch("reduce_*",
//! Launch::block(1024))`) or by the kernel itself (`__launch_bounds__`,
//! `.reqntid`), and the kernel's occupancy at that launch with what would
//! lift it to the next step ([`Declared`], recorded per kernel × arch in the
//! manifest and the lock).
//!
//! [`Launch`] here is what a kernel is written for (a shape and a rule for
//! its dynamic shared memory); [`crate::model::occupancy::BlockLaunch`] is one
//! configuration the model evaluates ([`Launch::at`] gives it).
//!
//! ```
//! use occ_model::model::declared::Launch;
//! let l = Launch::block_2d(16, 16).dynamic_smem_per_thread(8).dynamic_smem(512);
//! assert_eq!(l.threads(), 256);
//! assert_eq!(l.dynamic_smem_bytes(), 256 * 8 + 512);
//! ```

use crate::compiler::launches::CodeBlock;
use crate::error::{Error, Result};
use crate::model::occupancy::{self, occupancy};
use crate::model::suggest::{self, DynamicSmem};
use crate::schema::manifest::{Best, Facts, LaunchBounds};
use crate::{compiler::analyze, model::arch};

/// The manifest schema's types this module fills (defined in [`crate::schema::manifest`]).
pub use crate::schema::manifest::{Declared, DeclaredBy, Launch, Lift};

impl Launch {
    /// A 1-D block of `x` threads, no dynamic shared memory.
    pub const fn block(x: u32) -> Self {
        Self::block_3d(x, 1, 1)
    }

    /// A 2-D block of `x × y` threads.
    pub const fn block_2d(x: u32, y: u32) -> Self {
        Self::block_3d(x, y, 1)
    }

    /// A 3-D block of `x × y × z` threads.
    pub const fn block_3d(x: u32, y: u32, z: u32) -> Self {
        Launch {
            block: [x, y, z],
            dynamic_smem: DynamicSmem::Fixed(0),
        }
    }

    /// `bytes` of dynamic shared memory per block (on top of any
    /// [`Launch::dynamic_smem_per_thread`]).
    pub const fn dynamic_smem(mut self, bytes: u32) -> Self {
        self.dynamic_smem = match self.dynamic_smem {
            DynamicSmem::PerThread { per_thread, .. } => DynamicSmem::PerThread {
                per_thread,
                fixed: bytes,
            },
            DynamicSmem::Fixed(_) => DynamicSmem::Fixed(bytes),
        };
        self
    }

    /// `bytes` of dynamic shared memory per thread of the block (on top of
    /// any [`Launch::dynamic_smem`]).
    pub const fn dynamic_smem_per_thread(mut self, bytes: u32) -> Self {
        let fixed = match self.dynamic_smem {
            DynamicSmem::PerThread { fixed, .. } | DynamicSmem::Fixed(fixed) => fixed,
        };
        self.dynamic_smem = DynamicSmem::PerThread {
            per_thread: bytes,
            fixed,
        };
        self
    }

    /// Threads per block (`x × y × z`, saturating).
    pub fn threads(&self) -> u32 {
        self.block.iter().fold(1u32, |a, &b| a.saturating_mul(b))
    }

    /// Dynamic shared memory per block, bytes.
    pub fn dynamic_smem_bytes(&self) -> u64 {
        self.dynamic_smem.bytes(self.threads())
    }

    /// The configuration the occupancy model evaluates (dynamic shared
    /// memory above `u32::MAX` saturates, and the model refuses it).
    pub fn at(&self) -> occupancy::BlockLaunch {
        let bytes = u32::try_from(self.dynamic_smem_bytes()).unwrap_or(u32::MAX);
        occupancy::BlockLaunch::new(self.threads()).with_dynamic_smem(bytes)
    }

    /// The tuning request that allows this launch alone: its one block
    /// size and its dynamic shared memory rule (what a measurement of a
    /// declared launch must fit).
    pub fn request(&self) -> suggest::TuneRequest {
        let threads = self.threads();
        suggest::TuneRequest {
            dynamic_smem: self.dynamic_smem,
            max_block_size: Some(threads),
            block_multiple: Some(threads),
            ..suggest::TuneRequest::default()
        }
    }

    /// The launch in words, for messages: `a block of 256 threads with
    /// 300000 bytes of dynamic shared memory`, `a 32x8 block (256 threads)`.
    pub fn in_words(&self) -> String {
        let [x, y, z] = self.block;
        let threads = u64::from(x) * u64::from(y) * u64::from(z);
        let mut out = if y > 1 || z > 1 {
            format!("a {} block ({threads} threads)", self.describe_block())
        } else {
            format!("a block of {x} threads")
        };
        match self.dynamic_smem {
            DynamicSmem::Fixed(0) => {}
            DynamicSmem::Fixed(b) => {
                out.push_str(&format!(" with {b} bytes of dynamic shared memory"));
            }
            DynamicSmem::PerThread { .. } => out.push_str(&format!(
                " with {} bytes of dynamic shared memory ({})",
                self.dynamic_smem_bytes(),
                self.describe()
                    .split_once(" + ")
                    .map_or("", |(_, smem)| smem)
            )),
        }
        out
    }

    /// The block as written: `256`, `32x8`, `8x8x4`.
    fn describe_block(&self) -> String {
        let [x, y, z] = self.block;
        if z > 1 {
            format!("{x}x{y}x{z}")
        } else if y > 1 {
            format!("{x}x{y}")
        } else {
            x.to_string()
        }
    }

    /// The shape as written: `1024`, `16x16`, `8x8x4`, plus the dynamic
    /// shared memory when there is some (`256 + 4 B/thread + 512 B smem`).
    pub fn describe(&self) -> String {
        let [x, y, z] = self.block;
        let mut out = if z > 1 {
            format!("{x}x{y}x{z}")
        } else if y > 1 {
            format!("{x}x{y}")
        } else {
            x.to_string()
        };
        match self.dynamic_smem {
            DynamicSmem::Fixed(0) => {}
            DynamicSmem::Fixed(b) => out.push_str(&format!(" + {b} B smem")),
            DynamicSmem::PerThread { per_thread, fixed } => {
                out.push_str(&format!(" + {per_thread} B/thread"));
                if fixed > 0 {
                    out.push_str(&format!(" + {fixed} B"));
                }
                out.push_str(" smem");
            }
        }
        out
    }
}

impl DeclaredBy {
    /// A phrase for reports: ``build.rs `reduce_*` ``, `__launch_bounds__`, `.reqntid`.
    pub fn describe(&self) -> String {
        match self {
            DeclaredBy::Build { pattern } => format!("build.rs `{pattern}`"),
            DeclaredBy::LaunchBounds => "__launch_bounds__".into(),
            DeclaredBy::Reqntid => ".reqntid".into(),
            DeclaredBy::Code { at } => format!("the launch at {at}"),
            DeclaredBy::Best => "the best block at build.rs's dynamic shared memory".into(),
        }
    }
}

/// What build.rs stated for a launch ([`Declared::by_build`]): `.launch`'s
/// launch and pattern, `.dynamic_smem`'s rule and pattern.
pub type Stated = (Option<(Launch, String)>, Option<(DynamicSmem, String)>);

impl Declared {
    /// What build.rs stated for this launch: `.launch`'s launch and
    /// pattern (less the bytes `.dynamic_smem` gave it), and
    /// `.dynamic_smem`'s rule and pattern; what the lock records and
    /// [`judge_facts`] takes back.
    pub fn by_build(&self) -> Stated {
        let smem = self
            .smem_pattern
            .clone()
            .map(|pattern| (self.launch.dynamic_smem, pattern));
        let launch = match &self.by {
            DeclaredBy::Build { pattern } => {
                let mut launch = self.launch;
                if smem.is_some() {
                    launch.dynamic_smem = DynamicSmem::Fixed(0);
                }
                Some((launch, pattern.clone()))
            }
            DeclaredBy::LaunchBounds
            | DeclaredBy::Reqntid
            | DeclaredBy::Code { .. }
            | DeclaredBy::Best => None,
        };
        (launch, smem)
    }
}

impl DynamicSmem {
    /// At most `bytes` per block, whatever the block size: the bound of a
    /// size known only at run time, judged at that worst case
    /// (`Build::dynamic_smem("softmax", DynamicSmem::up_to(48 * 1024))`).
    pub const fn up_to(bytes: u32) -> Self {
        DynamicSmem::Fixed(bytes)
    }

    /// `bytes` per thread of the block (`DynamicSmem::per_thread(8)`: 2 KiB
    /// at 256 threads).
    pub const fn per_thread(bytes: u32) -> Self {
        DynamicSmem::PerThread {
            per_thread: bytes,
            fixed: 0,
        }
    }

    /// `bytes` per block more.
    pub const fn plus(self, bytes: u32) -> Self {
        match self {
            DynamicSmem::Fixed(b) => DynamicSmem::Fixed(b.saturating_add(bytes)),
            DynamicSmem::PerThread { per_thread, fixed } => DynamicSmem::PerThread {
                per_thread,
                fixed: fixed.saturating_add(bytes),
            },
        }
    }

    /// In words: `49152 B`, `128 B/thread`, `8 B/thread + 512 B`.
    pub fn describe(&self) -> String {
        match *self {
            DynamicSmem::Fixed(b) => format!("{b} B"),
            DynamicSmem::PerThread {
                per_thread,
                fixed: 0,
            } => format!("{per_thread} B/thread"),
            DynamicSmem::PerThread { per_thread, fixed } => {
                format!("{per_thread} B/thread + {fixed} B")
            }
        }
    }

    /// The expression that builds it, for a message's build.rs line:
    /// `DynamicSmem::per_thread(128).plus(512)`.
    pub fn in_rust(&self) -> String {
        match *self {
            DynamicSmem::Fixed(b) => format!("DynamicSmem::up_to({b})"),
            DynamicSmem::PerThread {
                per_thread,
                fixed: 0,
            } => {
                format!("DynamicSmem::per_thread({per_thread})")
            }
            DynamicSmem::PerThread { per_thread, fixed } => {
                format!("DynamicSmem::per_thread({per_thread}).plus({fixed})")
            }
        }
    }
}

impl Lift {
    /// One line: `2 fewer registers (at most 32), or __launch_bounds__(1024, 2) -> 100.0%`;
    /// `None` when no single change reaches the next step.
    pub fn describe(&self) -> Option<String> {
        let mut ways = Vec::new();
        if let Some(r) = self.registers {
            ways.push(format!(
                "{} fewer register{} (at most {})",
                r.drop,
                if r.drop == 1 { "" } else { "s" },
                r.max_registers
            ));
        }
        if let Some(lb) = self.launch_bounds.filter(|lb| lb.reaches_target) {
            ways.push(format!(
                "__launch_bounds__({}, {})",
                lb.max_threads, lb.min_blocks_per_sm
            ));
        }
        if let Some(s) = self.shared_memory {
            ways.push(format!("{} B less shared memory", s.shed));
        }
        (!ways.is_empty()).then(|| {
            format!(
                "{} -> {}",
                ways.join(", or "),
                crate::render::units::percent(self.occupancy)
            )
        })
    }
}

/// The launch a kernel declares itself: its `.reqntid` shape, else its
/// `__launch_bounds__` max threads (as a 1-D block of that many).
pub fn from_bounds(lb: &LaunchBounds) -> Option<(Launch, DeclaredBy)> {
    if let Some([x, y, z]) = lb.req_threads {
        return Some((Launch::block_3d(x, y, z), DeclaredBy::Reqntid));
    }
    lb.max_threads_per_block()
        .map(|n| (Launch::block(n), DeclaredBy::LaunchBounds))
}

/// What a launch is worked out for.
#[derive(Debug, Clone, Copy)]
pub enum Ask<'a> {
    /// Exactly this launch (build.rs's, or the kernel's `.reqntid` or
    /// `__launch_bounds__`): its block and dynamic shared memory.
    At(&'a Launch),
    /// The best block size this request allows.
    Best(&'a suggest::TuneRequest),
    /// A block size a measurement timed (the `measured` lines' best, or
    /// one of its timings), with the dynamic shared memory the request
    /// gives it; none when the request does not allow it or it cannot run.
    Measured(&'a suggest::TuneRequest, u32),
}

/// The launch a kernel × arch runs at, by one rule for every reader: the
/// manifest's `declared` ([`declared_for`]) and `best`
/// ([`best_launch`]), which `kernels.rs` records and the gate and the
/// reports judge (at `Resources::judged`: the declared launch, else the
/// best), and each `#[launch_config]` site's row (occ-macros), which asks
/// it at exactly that judged launch for a site with no option that shapes
/// its launch, and otherwise at build.rs's launch, for the best its
/// options allow within the kernel's bounds, or at the fastest measured
/// block size when `tuned`; the gate asks whether the lock's measured best
/// still runs.
/// `Ok(None)` when no block size can run (for [`Ask::At`], when the
/// launch asked for leaves no block resident: the driver would refuse it).
pub fn decide(
    arch: &arch::Arch,
    res: &occupancy::KernelResources,
    ask: Ask<'_>,
) -> std::result::Result<Option<suggest::BestBlock>, occupancy::OccupancyError> {
    match ask {
        Ask::At(launch) => {
            let at = launch.at();
            let occ = occupancy(arch, res, &at)?;
            // No block resident: the driver refuses the launch, as the
            // other asks say (`None`), never "0% occupancy".
            Ok(
                (occ.active_blocks_per_sm > 0).then_some(suggest::BestBlock {
                    block_size: at.block_size,
                    dynamic_smem: at.dynamic_smem,
                    occupancy: occ,
                }),
            )
        }
        Ask::Best(request) => suggest::best_block_size(arch, res, request),
        Ask::Measured(request, block_size) => {
            suggest::at_block_size(arch, res, request, block_size)
        }
    }
}

/// `request` narrowed to the block sizes a kernel's launch bounds allow:
/// a `.reqntid` kernel launches with exactly that many threads, so that
/// size alone (its `.maxntid` is the model's own limit,
/// `KernelResources::max_threads_per_block`). The one rule behind the
/// manifest's best launch, a `#[launch_config]` site's request, the
/// tuner's candidates and the gate's check of a measured block: with a cap
/// alone, a light `.reqntid(96)` kernel's best was 64 (a block it refuses),
/// while its sites baked 96.
pub fn within_bounds(bounds: &LaunchBounds, request: suggest::TuneRequest) -> suggest::TuneRequest {
    match bounds.required_block_size() {
        Some(required) => suggest::TuneRequest {
            max_block_size: Some(required),
            block_multiple: Some(required),
            ..request
        },
        None => request,
    }
}

/// The best launch with no dynamic shared memory, and the dynamic shared
/// memory a block can still take at that occupancy; `Ok(None)` when the
/// kernel cannot launch on the arch at any block size. An error (a
/// message) for an unknown arch or numbers the model refuses.
pub fn best_launch(arch_name: &str, k: &Facts) -> std::result::Result<Option<Best>, String> {
    let arch = arch::lookup(arch_name).map_err(|e| e.to_string())?;
    let res = analyze::model_of(k);
    let request = within_bounds(&k.launch_bounds, suggest::TuneRequest::default());
    let best = decide(arch, &res, Ask::Best(&request)).map_err(|e| e.to_string())?;
    let Some(best) = best else {
        return Ok(None);
    };
    let occ = &best.occupancy;
    let launch = occupancy::BlockLaunch::new(best.block_size);
    let headroom =
        suggest::available_dynamic_smem(arch, &res, &launch, occ.active_blocks_per_sm.max(1))
            .unwrap_or(0);
    Ok(Some(Best {
        block_size: best.block_size,
        active_blocks_per_sm: occ.active_blocks_per_sm,
        active_warps_per_sm: occ.active_warps_per_sm,
        occupancy: occ.occupancy,
        limiters: occ
            .binding_limiters()
            .iter()
            .map(|l| l.to_string())
            .collect(),
        dynamic_smem_headroom: headroom,
    }))
}

/// Why [`judge_facts`] could not judge a kernel × arch.
#[derive(Debug, Clone, PartialEq)]
pub enum Judging {
    /// The model refuses the numbers: no best launch (the message).
    Best(String),
    /// The declared launch cannot run the kernel.
    Declared {
        /// The launch.
        launch: Launch,
        /// Who declared it.
        by: DeclaredBy,
        /// Why not (the message of [`declared_for`]).
        detail: String,
    },
}

/// The one rule that judges a kernel × arch from its compiler's numbers:
/// the best launch (`None`: it cannot launch at any block size), and the
/// declared launch, which is build.rs's
/// (`by_build`: the launch and the pattern that stated it) where it
/// states one, else the C++ host code's constant launches of the kernel
/// (`by_code`: each launch and where it is written; each is judged, and
/// the one of lowest occupancy, the first of equals, is the declared
/// one), else the one the kernel's launch bounds declare
/// ([`from_bounds`]), else none. build.rs's dynamic shared memory
/// (`smem_by_build`: the rule and its pattern) is that launch's where it
/// states none of its own, or with no block declared, the best block's at
/// it (`DeclaredBy::Best`): judged at its worst case either way. The
/// assembly and the lock's check of its derived numbers both call it. A
/// launch that cannot run the kernel is an error ([`Judging::Declared`]),
/// build.rs's or the code's, and so is dynamic shared memory declared
/// twice, differently.
pub fn judge_facts(
    arch_name: &str,
    facts: &Facts,
    by_build: Option<(Launch, String)>,
    by_code: &[CodeBlock],
    smem_by_build: Option<(DynamicSmem, String)>,
) -> std::result::Result<(Option<Best>, Option<Declared>), Judging> {
    let best = best_launch(arch_name, facts).map_err(Judging::Best)?;
    // A launch whose bytes are known only at run time declares its block
    // only with build.rs's bound for them.
    let by_code: Vec<&CodeBlock> = by_code
        .iter()
        .filter(|c| c.smem_known || smem_by_build.is_some())
        .collect();
    // Each declared block, and whether its line states the dynamic shared
    // memory itself: a C++ launch whose bytes are constant keeps them
    // (`<<<g, 256>>>` launches with none, whatever build.rs bounds).
    let blocks: Vec<(Launch, DeclaredBy, bool)> = match by_build {
        Some((launch, pattern)) => vec![(launch, DeclaredBy::Build { pattern }, false)],
        None if !by_code.is_empty() => by_code
            .iter()
            .map(|c| {
                (
                    c.launch,
                    DeclaredBy::Code { at: c.at.clone() },
                    c.smem_known,
                )
            })
            .collect(),
        None => from_bounds(&facts.launch_bounds)
            .into_iter()
            .map(|(l, by)| (l, by, false))
            .collect(),
    };
    let choices: Vec<(Launch, DeclaredBy, Option<String>)> = match smem_by_build {
        None => blocks.into_iter().map(|(l, by, _)| (l, by, None)).collect(),
        Some((rule, pattern)) if blocks.is_empty() => {
            vec![best_at_smem(arch_name, facts, rule, pattern)?]
        }
        Some((rule, pattern)) => {
            let mut choices = Vec::with_capacity(blocks.len());
            for (mut launch, by, states_its_own) in blocks {
                if states_its_own {
                    choices.push((launch, by, None));
                    continue;
                }
                let stated = launch.dynamic_smem;
                if stated != DynamicSmem::Fixed(0) && stated != rule {
                    let detail = format!(
                        "build.rs's `.dynamic_smem(\"{pattern}\", {})` gives it {} of dynamic \
                         shared memory too; declare it once",
                        rule.in_rust(),
                        rule.describe()
                    );
                    return Err(Judging::Declared { launch, by, detail });
                }
                launch.dynamic_smem = rule;
                choices.push((launch, by, Some(pattern.clone())));
            }
            choices
        }
    };
    let mut worst: Option<Declared> = None;
    for (launch, by, smem_pattern) in choices {
        let d = Declared {
            smem_pattern,
            ..declared_for(arch_name, facts, &launch, by.clone())
                .map_err(|detail| Judging::Declared { launch, by, detail })?
        };
        if worst.as_ref().is_none_or(|w| d.occupancy < w.occupancy) {
            worst = Some(d);
        }
    }
    Ok((best, worst))
}

/// No block declared, dynamic shared memory by build.rs: the best block at
/// it, within the kernel's bounds.
fn best_at_smem(
    arch_name: &str,
    facts: &Facts,
    rule: DynamicSmem,
    pattern: String,
) -> std::result::Result<(Launch, DeclaredBy, Option<String>), Judging> {
    let arch = arch::lookup(arch_name).map_err(|e| Judging::Best(e.to_string()))?;
    let res = analyze::model_of(facts);
    let request = within_bounds(
        &facts.launch_bounds,
        suggest::TuneRequest {
            dynamic_smem: rule,
            ..suggest::TuneRequest::default()
        },
    );
    let launch = |block: u32| Launch {
        block: [block, 1, 1],
        dynamic_smem: rule,
    };
    match decide(arch, &res, Ask::Best(&request)) {
        Ok(Some(b)) => Ok((launch(b.block_size), DeclaredBy::Best, Some(pattern))),
        Ok(None) => Err(Judging::Declared {
            launch: launch(0),
            by: DeclaredBy::Best,
            detail: format!(
                "no block size runs it with build.rs's `.dynamic_smem(\"{pattern}\", {})`",
                rule.in_rust()
            ),
        }),
        Err(e) => Err(Judging::Best(e.to_string())),
    }
}

/// The kernel's occupancy at `launch` on `arch_name`, and its lift. An
/// error (a message) when the launch cannot run the kernel: a block above
/// the arch's or the kernel's limit, a shape other than its `.reqntid`,
/// or more shared memory than a block can have.
pub fn declared_for(
    arch_name: &str,
    r: &Facts,
    launch: &Launch,
    by: DeclaredBy,
) -> std::result::Result<Declared, String> {
    let a = arch::lookup(arch_name).map_err(|e| e.to_string())?;
    let [x, y, z] = launch.block;
    if x == 0 || y == 0 || z == 0 {
        return Err(format!("block {} has a zero dimension", launch.describe()));
    }
    // The CUDA limits on each dimension (the product is checked below).
    if x > 1024 || y > 1024 || z > 64 {
        return Err(format!(
            "block {} exceeds CUDA's per-dimension limits (1024, 1024, 64)",
            launch.describe()
        ));
    }
    if let Some(req) = r.launch_bounds.req_threads {
        if req != launch.block {
            return Err(format!(
                "the kernel requires a block of exactly {}x{}x{} (.reqntid), not {}",
                req[0],
                req[1],
                req[2],
                launch.describe()
            ));
        }
    }
    let res = analyze::model_of(r);
    let at = launch.at();
    let occ = match decide(a, &res, Ask::At(launch)).map_err(|e| e.to_string())? {
        Some(decided) => decided.occupancy,
        None => return Err(format!("no block of {} runs", launch.describe())),
    };
    let lift = if occ.active_warps_per_sm < occ.max_warps_per_sm {
        let w = suggest::what_if(a, &res, &at).map_err(|e| e.to_string())?;
        let warps_per_block = at.block_size.div_ceil(a.warp_size);
        let target_warps = (w.target_blocks * warps_per_block).min(occ.max_warps_per_sm);
        Some(Lift {
            target_blocks: w.target_blocks,
            occupancy: f64::from(target_warps) / f64::from(occ.max_warps_per_sm.max(1)),
            registers: w.registers,
            shared_memory: w.shared_memory,
            launch_bounds: w.launch_bounds.filter(|lb| lb.register_cap < r.registers),
        })
    } else {
        None
    };
    Ok(Declared {
        launch: *launch,
        by,
        smem_pattern: None,
        block_size: at.block_size,
        dynamic_smem: at.dynamic_smem,
        active_blocks_per_sm: occ.active_blocks_per_sm,
        active_warps_per_sm: occ.active_warps_per_sm,
        occupancy: occ.occupancy,
        limiters: occ
            .binding_limiters()
            .iter()
            .map(|l| l.to_string())
            .collect(),
        lift,
    })
}

/// Whether `pattern` (`*` any run of characters, `?` one) matches all of `name`.
pub fn matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Iterative wildcard match with one backtrack point (the last `*`).
    let (mut pi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// The `(pattern, launch)` of `stated` (build.rs's, in order) that
/// declares the kernel called `kernel` with these `names`, if any: a
/// pattern without wildcards (`*`, `?`) that equals one of the names wins
/// over every pattern with wildcards, whatever their order. Two matching
/// patterns of the kind that wins that give different launches are an
/// error; the same launch twice is not (the last of them is returned).
pub fn by_build<'a, T: PartialEq>(
    kernel: &str,
    names: &[String],
    stated: &'a [(String, T)],
    words: impl Fn(&T) -> String,
) -> Result<Option<&'a (String, T)>> {
    let exact = |pattern: &str| !pattern.contains(['*', '?']);
    let hits = |want_exact: bool| -> Vec<&'a (String, T)> {
        stated
            .iter()
            .filter(|(p, _)| exact(p) == want_exact && names.iter().any(|n| matches(p, n)))
            .collect()
    };
    let winners = match hits(true) {
        exact_hits if !exact_hits.is_empty() => exact_hits,
        _ => hits(false),
    };
    let Some(&first) = winners.first() else {
        return Ok(None);
    };
    if let Some(&second) = winners.iter().find(|(_, l)| *l != first.1) {
        let said = |(p, l): &(String, T)| (p.clone(), words(l));
        return Err(Error::ConflictingLaunches {
            kernel: kernel.to_string(),
            first: said(first),
            second: said(second),
        });
    }
    Ok(winners.last().copied())
}

/// Refuses a pattern of `stated` that matches none of the kernels, each
/// given by its names (symbol, name without parameters, short name, Rust
/// identifier), naming the builder `method` that gave it and the kernels
/// closest to it.
pub fn check_patterns<T>(
    method: &'static str,
    kernels: &[[&str; 4]],
    stated: &[(String, T)],
) -> Result<()> {
    for (pattern, _) in stated {
        if !kernels.iter().flatten().any(|n| matches(pattern, n)) {
            return Err(Error::UnmatchedLaunch {
                method,
                pattern: pattern.clone(),
                closest: closest(kernels, pattern),
            });
        }
    }
    Ok(())
}

/// The kernels closest to a pattern that matched none: by similarity of
/// the pattern (without wildcards) to their short and base names, best
/// first, at most three; the first three kernels when none is close.
fn closest(kernels: &[[&str; 4]], pattern: &str) -> Vec<String> {
    let bare: String = pattern
        .chars()
        .filter(|c| !matches!(c, '*' | '?'))
        .collect();
    let mut scored: Vec<(f64, &str)> = kernels
        .iter()
        .flat_map(|[_, base, short, _]| [*short, *base])
        .map(|name| (strsim::jaro_winkler(&bare, name), name))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    let mut out: Vec<String> = Vec::new();
    for (_, name) in scored {
        if !out.iter().any(|n| n == name) {
            out.push(name.to_string());
        }
        if out.len() == 3 {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::tests::arch as resources;

    /// The manifest assembled from `lock`'s records with build.rs's
    /// `stated` launches (`assemble::judge` applies them).
    fn declare(
        lock: &crate::schema::lock::Lock,
        stated: &[(String, Launch)],
    ) -> Result<crate::schema::manifest::Manifest> {
        let path = std::path::Path::new("occ.lock");
        let sources: Vec<String> = lock.kernels.iter().map(|k| k.source.clone()).collect();
        let jobs = lock.contributions(&[], &sources, path)?;
        crate::assemble::manifest(&crate::assemble::Assembly {
            package: &lock.package,
            origin: crate::schema::manifest::Origin::Lock,
            nvcc: &lock.nvcc,
            archs: &lock.archs,
            jobs: &jobs,
            launches: stated,
            dynamic_smem: &[],
            measured: &[],
            device_code: &[],
            others: None,
        })
    }

    /// The code's constant launches are each judged and the one of lowest
    /// occupancy is declared; build.rs's launch wins over them; one the
    /// kernel cannot run (above its `__launch_bounds__`, or no block
    /// resident) is an error naming where the code writes it.
    #[test]
    fn the_codes_worst_launch_is_declared_below_build_rs_and_one_that_cannot_run_is_refused() {
        // 80 registers on sm_80: 24 warps at 256 threads, 16 at 512, none at 1024.
        let facts = resources(80, 8, 0).facts;
        let code = |launches: &[(u32, &str)]| -> Vec<CodeBlock> {
            launches
                .iter()
                .map(|(n, at)| CodeBlock {
                    launch: Launch::block(*n),
                    at: at.to_string(),
                    smem_known: true,
                })
                .collect()
        };
        let worst = judge_facts(
            "sm_80",
            &facts,
            None,
            &code(&[(256, "k.cu:3"), (512, "k.cu:4")]),
            None,
        )
        .expect("both run")
        .1
        .expect("declared");
        assert_eq!(
            (worst.block_size, worst.active_warps_per_sm, &worst.by),
            (
                512,
                16,
                &DeclaredBy::Code {
                    at: "k.cu:4".into()
                }
            )
        );
        let build = Some((Launch::block(128), "k".to_string()));
        let won = judge_facts("sm_80", &facts, build, &code(&[(512, "k.cu:4")]), None)
            .expect("build.rs's runs")
            .1
            .expect("declared");
        assert_eq!(
            won.by,
            DeclaredBy::Build {
                pattern: "k".into()
            }
        );
        let none = judge_facts(
            "sm_80",
            &facts,
            None,
            &code(&[(256, "k.cu:3"), (1024, "k.cu:5")]),
            None,
        );
        assert!(
            matches!(&none, Err(Judging::Declared { by: DeclaredBy::Code { at }, .. }) if at == "k.cu:5"),
            "{none:?}"
        );
        let mut bounded = facts.clone();
        bounded.launch_bounds.max_threads = Some([256, 1, 1]);
        let above = judge_facts("sm_80", &bounded, None, &code(&[(512, "k.cu:4")]), None);
        assert!(
            matches!(&above, Err(Judging::Declared { by: DeclaredBy::Code { at }, .. }) if at == "k.cu:4"),
            "{above:?}"
        );
    }

    /// A launch build.rs declares that leaves no block resident (255
    /// registers × 1,024 threads is four times an sm_80 SM's registers:
    /// the driver refuses it) is an error naming the launch, in the one
    /// rule every launch decision goes through, never a launch at 0%; the
    /// same kernel at 128 threads runs.
    #[test]
    fn a_declared_launch_no_block_of_which_is_resident_is_refused() {
        let facts = resources(255, 8, 0).facts;
        let by = DeclaredBy::Build {
            pattern: "k".into(),
        };
        let err = declared_for("sm_80", &facts, &Launch::block(1024), by.clone())
            .expect_err("1024 threads of 255 registers");
        assert!(err.contains("no block of 1024"), "{err}");
        let a = arch::lookup("sm_80").expect("sm_80");
        let res = analyze::model_of(&facts);
        assert!(decide(a, &res, Ask::At(&Launch::block(1024)))
            .expect("the model takes these numbers")
            .is_none());
        let runs = declared_for("sm_80", &facts, &Launch::block(128), by).expect("128 runs");
        assert!(runs.active_blocks_per_sm > 0);
    }

    /// Dynamic shared memory build.rs declares without a block is judged at
    /// occ's best block for it, lower than the kernel's best without any;
    /// with a block declared (build.rs's or the kernel's bounds'), at that
    /// block; given twice, differently, it is refused.
    #[test]
    fn declared_dynamic_smem_is_judged_at_its_worst_case() {
        let facts = resources(32, 0, 0).facts;
        let smem = |rule| Some((rule, "k".to_string()));
        let (best, none) = judge_facts("sm_80", &facts, None, &[], None).expect("the model");
        let best = best.expect("a best launch");
        assert_eq!((best.occupancy, none), (1.0, None));
        let (_, declared) = judge_facts(
            "sm_80",
            &facts,
            None,
            &[],
            smem(DynamicSmem::per_thread(128)),
        )
        .expect("the model");
        let d = declared.expect("declared");
        assert_eq!(d.by, DeclaredBy::Best);
        assert_eq!(d.smem_pattern.as_deref(), Some("k"));
        assert_eq!(d.dynamic_smem, 128 * d.block_size);
        assert!(
            d.occupancy < best.occupancy,
            "{} at {}",
            d.occupancy,
            d.block_size
        );
        // The bound of a run-time size: judged at it, at the bounds' block.
        let mut bounded = facts.clone();
        bounded.launch_bounds.max_threads = Some([256, 1, 1]);
        let (_, declared) = judge_facts(
            "sm_80",
            &bounded,
            None,
            &[],
            smem(DynamicSmem::up_to(49152)),
        )
        .expect("the model");
        let d = declared.expect("declared");
        assert_eq!(
            (d.by, d.block_size, d.dynamic_smem),
            (DeclaredBy::LaunchBounds, 256, 49152)
        );
        assert!(d.occupancy < 0.5, "{}", d.occupancy);
        // build.rs's `.launch` with its own dynamic shared memory, and a
        // different `dynamic_smem`: declared twice.
        let launch = Some((Launch::block(256).dynamic_smem(1024), "k".to_string()));
        let twice = judge_facts("sm_80", &facts, launch, &[], smem(DynamicSmem::up_to(2048)));
        match twice {
            Err(Judging::Declared { detail, .. }) => {
                assert!(detail.contains("declare it once"), "{detail}");
                assert!(detail.contains("DynamicSmem::up_to(2048)"), "{detail}");
            }
            other => panic!("{other:?}"),
        }
        // The same amount stated both ways is one declaration.
        let launch = Some((Launch::block(256).dynamic_smem(1024), "k".to_string()));
        let (_, same) = judge_facts("sm_80", &facts, launch, &[], smem(DynamicSmem::up_to(1024)))
            .expect("the same dynamic shared memory");
        assert_eq!(same.map(|d| d.dynamic_smem), Some(1024));
        assert_eq!(
            DynamicSmem::per_thread(8).plus(512).in_rust(),
            "DynamicSmem::per_thread(8).plus(512)"
        );
    }

    /// A C++ launch at a constant block whose dynamic shared memory is
    /// known only at run time (`softmax<<<rows, 256, cols * 4>>>`) is no
    /// declared launch (never judged at a guessed 0 bytes) until build.rs
    /// bounds its bytes; then it is judged at its block with the bound.
    #[test]
    fn a_code_launch_with_run_time_bytes_is_judged_with_build_rs_bound() {
        let facts = resources(32, 0, 0).facts;
        let code = [CodeBlock {
            launch: Launch::block(256),
            at: "k.cu:7".into(),
            smem_known: false,
        }];
        let (_, none) = judge_facts("sm_80", &facts, None, &code, None).expect("the model");
        assert_eq!(none, None);
        let bound = Some((DynamicSmem::up_to(49152), "softmax".to_string()));
        let (_, declared) = judge_facts("sm_80", &facts, None, &code, bound).expect("the model");
        let d = declared.expect("declared");
        assert_eq!(
            (
                d.by,
                d.block_size,
                d.dynamic_smem,
                d.smem_pattern.as_deref()
            ),
            (
                DeclaredBy::Code {
                    at: "k.cu:7".into()
                },
                256,
                49152,
                Some("softmax")
            )
        );
        assert!(d.occupancy < 1.0, "{}", d.occupancy);
        // A launch that states its bytes (`<<<g, 256>>>`: none) keeps them;
        // the worst of the two is the one with build.rs's bound.
        let both = [
            CodeBlock {
                launch: Launch::block(256),
                at: "k.cu:9".into(),
                smem_known: true,
            },
            code[0].clone(),
        ];
        let bound = Some((DynamicSmem::up_to(49152), "softmax".to_string()));
        let (_, declared) = judge_facts("sm_80", &facts, None, &both, bound).expect("the model");
        let d = declared.expect("declared");
        assert_eq!(
            (d.dynamic_smem, d.by),
            (
                49152,
                DeclaredBy::Code {
                    at: "k.cu:7".into()
                }
            )
        );
        let alone = [both[0].clone()];
        let bound = Some((DynamicSmem::up_to(49152), "softmax".to_string()));
        let (_, declared) = judge_facts("sm_80", &facts, None, &alone, bound).expect("the model");
        assert_eq!(
            declared.map(|d| (d.dynamic_smem, d.smem_pattern)),
            Some((0, None))
        );
    }

    /// A `.reqntid` kernel's best launch is its required block, also where
    /// a smaller block would hold more warps (64 threads: 32 blocks, 64
    /// warps on sm_80; 96: 21 blocks, 63 warps).
    #[test]
    fn a_reqntid_kernels_best_launch_is_its_required_block() {
        let facts = Facts {
            registers: 16,
            static_smem: 0,
            spill_stores: 0,
            spill_loads: 0,
            stack_frame: 0,
            cumulative_stack: None,
            barriers: Some(1),
            launch_bounds: LaunchBounds {
                req_threads: Some([96, 1, 1]),
                ..LaunchBounds::default()
            },
            maxrregcount: None,
        };
        let best = best_launch("sm_80", &facts)
            .expect("the model takes these numbers")
            .expect("the kernel launches");
        assert_eq!(best.block_size, 96);
        let free = Facts {
            launch_bounds: LaunchBounds::default(),
            ..facts
        };
        let capped = suggest::TuneRequest {
            max_block_size: Some(96),
            ..suggest::TuneRequest::default()
        };
        let res = analyze::model_of(&free);
        let a = arch::lookup("sm_80").expect("sm_80");
        let under_a_cap = decide(a, &res, Ask::Best(&capped))
            .expect("the model takes these numbers")
            .expect("a block fits");
        assert_eq!(
            under_a_cap.block_size, 64,
            "a cap alone picks another block"
        );
    }

    #[test]
    fn wildcards() {
        assert!(matches("fast_argmin_*", "fast_argmin_i64"));
        assert!(matches("*argmin*", "fast_argmin_i64"));
        assert!(matches("fast_?rgmin_i64", "fast_argmin_i64"));
        assert!(matches("k", "k"));
        assert!(!matches("fast_argmin_*", "fast_argmax_i64"));
        assert!(!matches("k", "kk"));
        assert!(matches("a*b*c", "aXbYbc"));
        assert!(!matches("a*b*c", "aXbYbd"));
    }

    /// `by_build` for a kernel `transpose` (symbol `_Z9transposePfPKf`)
    /// given these `(pattern, launch)`s: the pattern it picks, or the
    /// error's message.
    fn pick(stated: &[(&str, Launch)]) -> std::result::Result<Option<String>, String> {
        let names = ["_Z9transposePfPKf", "transpose", "transpose", "transpose"].map(String::from);
        let stated: Vec<(String, Launch)> =
            stated.iter().map(|(p, l)| (p.to_string(), *l)).collect();
        by_build("transpose", &names, &stated, Launch::in_words)
            .map(|hit| hit.map(|(p, l)| format!("{p} {}", l.describe())))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn an_exact_name_wins_over_any_wildcard_in_either_order() {
        let t = ("transpose", Launch::block_2d(32, 8));
        let all = ("*", Launch::block(256));
        let trans = ("trans*", Launch::block_2d(16, 16));
        let one = ("transpos?", Launch::block(64));
        let want = Ok(Some("transpose 32x8".to_string()));
        assert_eq!(pick(&[t, all]), want);
        assert_eq!(
            pick(&[all, t]),
            want,
            "the review's build.rs: `*` after the exact name"
        );
        assert_eq!(pick(&[t, trans]), want);
        assert_eq!(pick(&[trans, all, one, t]), want);
        // The symbol is a name too, and exact.
        let sym = ("_Z9transposePfPKf", Launch::block_2d(8, 8));
        assert_eq!(pick(&[all, sym]), Ok(Some("_Z9transposePfPKf 8x8".into())));
        // Nothing matches: no launch from build.rs.
        assert_eq!(pick(&[("reduce*", Launch::block(128))]), Ok(None));
        assert_eq!(pick(&[]), Ok(None));
    }

    #[test]
    fn two_wildcards_with_different_launches_are_refused() {
        let e = pick(&[
            ("trans*", Launch::block_2d(32, 8)),
            ("*", Launch::block(256)),
        ])
        .expect_err("two wildcards disagree");
        assert_eq!(
            e,
            "kernel `transpose` is given two launches in build.rs: launch(\"trans*\", ..) \
             declares a 32x8 block (256 threads) and launch(\"*\", ..) declares a block of 256 \
             threads; keep one, or make the one meant for it exact, launch(\"transpose\", ..): \
             an exact name wins over every pattern with `*` or `?`"
        );
        // Dynamic shared memory alone makes two launches differ.
        let e = pick(&[
            ("*", Launch::block(256)),
            ("t*", Launch::block(256).dynamic_smem(1024)),
        ])
        .expect_err("the smem differs");
        assert!(e.contains("a block of 256 threads with 1024 bytes"), "{e}");
        // A wildcard that disagrees is no conflict once an exact name decides.
        assert_eq!(
            pick(&[
                ("trans*", Launch::block_2d(32, 8)),
                ("*", Launch::block(256)),
                ("transpose", Launch::block(128)),
            ]),
            Ok(Some("transpose 128".into()))
        );
    }

    #[test]
    fn two_exact_names_with_different_launches_are_refused() {
        let e = pick(&[
            ("transpose", Launch::block_2d(32, 8)),
            ("*", Launch::block(256)),
            ("_Z9transposePfPKf", Launch::block_2d(16, 16)),
        ])
        .expect_err("two exact names disagree");
        assert!(
            e.starts_with(
                "kernel `transpose` is given two launches in build.rs: launch(\"transpose\", ..) \
                 declares a 32x8 block (256 threads) and launch(\"_Z9transposePfPKf\", ..)"
            ),
            "{e}"
        );
        assert!(e.ends_with("; keep one of the two"), "{e}");
    }

    #[test]
    fn the_same_launch_twice_is_fine_and_the_last_pattern_is_recorded() {
        let l = Launch::block_2d(32, 8).dynamic_smem_per_thread(4);
        assert_eq!(
            pick(&[("t*", l), ("*", l)]),
            Ok(Some("* 32x8 + 4 B/thread smem".into()))
        );
        assert_eq!(
            pick(&[("transpose", l), ("*", Launch::block(64)), ("transpose", l)]),
            Ok(Some("transpose 32x8 + 4 B/thread smem".into()))
        );
    }

    #[test]
    fn declare_applies_the_precedence_to_the_manifest() {
        let lock = crate::compare::tests::lock(&[
            ("hot", resources(32, 0, 0)),
            ("cold", resources(32, 0, 0)),
        ]);
        let m = declare(
            &lock,
            &[
                ("hot".into(), Launch::block_2d(32, 8)),
                ("*".into(), Launch::block(128)),
            ],
        )
        .expect("an exact name and a wildcard do not conflict");
        let launch_of = |name: &str| {
            let k = m.kernels.iter().find(|k| k.base_name == name).expect(name);
            let d = k
                .archs
                .values()
                .next()
                .and_then(|a| a.resources.declared.clone());
            d.map(|d| (d.launch, d.by))
        };
        assert_eq!(
            launch_of("hot"),
            Some((
                Launch::block_2d(32, 8),
                DeclaredBy::Build {
                    pattern: "hot".into()
                }
            ))
        );
        assert_eq!(
            launch_of("cold"),
            Some((
                Launch::block(128),
                DeclaredBy::Build {
                    pattern: "*".into()
                }
            ))
        );
        let e = declare(
            &lock,
            &[
                ("h*".into(), Launch::block_2d(32, 8)),
                ("*".into(), Launch::block(128)),
            ],
        )
        .expect_err("two wildcards give `hot` different launches");
        assert!(
            matches!(&e, Error::ConflictingLaunches { kernel, .. } if kernel == "hot"),
            "{e}"
        );
    }

    #[test]
    fn dynamic_smem_adds_up() {
        let l = Launch::block(128)
            .dynamic_smem(100)
            .dynamic_smem_per_thread(4);
        assert_eq!(l.dynamic_smem_bytes(), 128 * 4 + 100);
        assert_eq!(l.at().dynamic_smem, 612);
        assert_eq!(l.describe(), "128 + 4 B/thread + 100 B smem");
        assert_eq!(Launch::block_3d(8, 8, 4).describe(), "8x8x4");
    }

    #[test]
    fn the_lift_at_a_fixed_block_names_registers_and_launch_bounds() {
        // 34 registers at 1024 threads on sm_80: 34 x 1024 > 32 Ki, so one
        // block (50%); 32 registers or __launch_bounds__(1024, 2) give two.
        let r = resources(34, 0, 0);
        let d = declared_for(
            "sm_80",
            &r.facts,
            &Launch::block(1024),
            DeclaredBy::Build {
                pattern: "k".into(),
            },
        )
        .expect("runs");
        let a = arch::lookup("sm_80").unwrap();
        let model = occupancy(
            a,
            &analyze::model_of(&r.facts),
            &occupancy::BlockLaunch::new(1024),
        )
        .unwrap();
        assert_eq!(d.active_blocks_per_sm, model.active_blocks_per_sm);
        assert_eq!(d.occupancy, model.occupancy);
        assert_eq!((d.active_blocks_per_sm, d.occupancy), (1, 0.5));
        let lift = d.lift.expect("below full occupancy");
        assert_eq!((lift.target_blocks, lift.occupancy), (2, 1.0));
        assert_eq!(
            lift.registers.map(|h| (h.drop, h.max_registers)),
            Some((2, 32))
        );
        let lb = lift.launch_bounds.expect("a launch bound caps registers");
        assert_eq!(
            (lb.max_threads, lb.min_blocks_per_sm, lb.register_cap),
            (1024, 2, 32)
        );
        assert_eq!(
            lift.describe().as_deref(),
            Some("2 fewer registers (at most 32), or __launch_bounds__(1024, 2) -> 100.0%")
        );
    }

    #[test]
    fn a_launch_that_cannot_run_says_what_was_declared_in_words() {
        // Not "(256 + 300000 B smem threads)".
        let lock = crate::compare::tests::lock(&[("hot", resources(32, 0, 0))]);
        let e = declare(
            &lock,
            &[("hot".into(), Launch::block(256).dynamic_smem(300_000))],
        )
        .expect_err("300000 bytes are more than sm_80 has");
        let msg = e.to_string();
        assert!(
            msg.starts_with(
                "kernel `hot` cannot launch on sm_80 as declared (a block of 256 threads with \
                 300000 bytes of dynamic shared memory, declared by build.rs `hot`): "
            ),
            "{msg}"
        );
        assert!(!msg.contains("smem threads"), "{msg}");
        assert_eq!(
            Launch::block_2d(32, 8)
                .dynamic_smem_per_thread(4)
                .in_words(),
            "a 32x8 block (256 threads) with 1024 bytes of dynamic shared memory (4 B/thread smem)"
        );
    }

    #[test]
    fn a_launch_the_kernel_cannot_take_is_refused() {
        let mut r = resources(32, 0, 0);
        r.facts.launch_bounds.max_threads = Some([256, 1, 1]);
        let by = || DeclaredBy::LaunchBounds;
        let e =
            declared_for("sm_80", &r.facts, &Launch::block(512), by()).expect_err("above bounds");
        assert!(e.contains("256") || e.contains("launch bounds"), "{e}");
        assert!(declared_for("sm_80", &r.facts, &Launch::block_2d(16, 16), by()).is_ok());
        assert!(declared_for("sm_80", &r.facts, &Launch::block_3d(1, 1, 128), by()).is_err());
        r.facts.launch_bounds.req_threads = Some([16, 16, 1]);
        let e = declared_for("sm_80", &r.facts, &Launch::block(256), by()).expect_err("shape");
        assert!(e.contains("16x16x1"), "{e}");
    }
}
