//! `occ.lock`'s text: what a lock records, and only that.
//!
//! The file holds the facts a build stands on and nothing that follows
//! from them: per kernel its symbol (and, for a C++ kernel, its demangled
//! name, the one a reader needs), its source and its parameters; per
//! kernel × arch what ptxas reported (registers; shared memory, spills,
//! stack and launch bounds where they are not zero or absent), the launch
//! build.rs declared for it (its pattern and launch) and the cubin's hash.
//! The other names (base name, short name, Rust identifier) and every
//! occupancy number (the best launch, the declared launch's occupancy and
//! lift, and the launch a kernel's own bounds declare) are worked out when
//! the lock is read, by the rules a build uses ([`names::kernel_name`],
//! [`analyze::idents`], [`declared::judge_facts`]), so the lock, the build
//! from it, `diff`, the gate and `#[launch_config]` cannot disagree, and a
//! hand edit of a derived number has nowhere to go. A C++ kernel's
//! `demangled` is checked against its symbol.
//!
//! A parameter is one string, as a reader would write it:
//! `name: C type (PTX type[, N bytes][, align N])`, the size written where
//! it is not the PTX type's width and the alignment where it is not the
//! size (`p: float* (u64, align 1)`, `n: int (u32)`, `args: Args (b8, 16
//! bytes, align 8)`).
//!
//! Beside them, what ptxas said of a kernel × arch where it said
//! anything ([`super::Noted`]): its constant memory per bank (`cmem`) and
//! its warnings, as ptxas's words (`warnings`), typed again on reading by
//! the rule that types a log's ([`ptxas::warning`]).
//!
//! A key is refused where it appears twice in one object (serde's maps
//! keep the last): an arch listed twice in a kernel's `archs` is refused
//! naming the kernel, the arch and the line.
//!
//! Older schemas read as today's ([`upgrade`]): their derived numbers are
//! dropped, and recomputed.

use super::{Lock, LockKernel, NoteKey, Noted, LOCK_SCHEMA};
use crate::compiler::{analyze, launches, names, ptxas};
use crate::error::{Error, Result};
use crate::model::declared;
use crate::schema::manifest::{
    self, CodeLaunch, DynamicSmem, Facts, Kernel, Launch, LaunchBounds, Param, Resources,
};
use crate::schema::measured::Measured;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// The most registers per thread any arch gives a thread (ptxas's limit).
const MAX_REGISTERS: u32 = 255;

/// What to do about a lock that does not read.
const RESTORE: &str = "restore it from version control, or delete it and run `cargo occ bless`";

/// The file, as written.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LockFile {
    schema: u32,
    package: String,
    nvcc: String,
    archs: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    flags: Option<BTreeMap<String, Vec<String>>>,
    kernels: Vec<KernelLine>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    parts: BTreeMap<String, Vec<String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    measured: Vec<Measured>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    launches: Vec<CodeLaunch>,
}

/// One kernel's line.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KernelLine {
    name: String,
    /// Written where it is not the symbol (a C++ kernel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    demangled: Option<String>,
    source: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    params: Vec<String>,
    archs: BTreeMap<String, ArchLine>,
}

/// One kernel × arch's line: ptxas's facts, build.rs's launch, the hash.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ArchLine {
    registers: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    static_smem: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    spill_stores: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    spill_loads: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    stack_frame: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cumulative_stack: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    barriers: Option<u32>,
    #[serde(default, skip_serializing_if = "BoundsLine::is_none")]
    launch_bounds: BoundsLine,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    maxrregcount: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    launch: Option<BuildLaunch>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dynamic_smem: Option<BuildSmem>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cubin_hash: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    cmem: BTreeMap<String, u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
}

/// [`LaunchBounds`], each directive written only where the kernel has it.
#[derive(Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BoundsLine {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_threads: Option<[u32; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    req_threads: Option<[u32; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    min_blocks_per_sm: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_registers: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_cluster_rank: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cluster_dims: Option<[u32; 3]>,
    #[serde(default, skip_serializing_if = "is_false")]
    explicit_cluster: bool,
}

/// The launch build.rs declared for a kernel (`Build::launch`).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BuildLaunch {
    pattern: String,
    block: [u32; 3],
    #[serde(default, skip_serializing_if = "no_smem")]
    dynamic_smem: DynamicSmem,
}

/// The dynamic shared memory build.rs declared for a kernel
/// (`Build::dynamic_smem`): `{"pattern": "k", "per_thread": 128}`, or
/// `{"pattern": "k", "bytes": 49152}` for a bound per block.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BuildSmem {
    pattern: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    per_thread: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    bytes: u32,
}

impl BuildSmem {
    fn rule(&self) -> DynamicSmem {
        match self.per_thread {
            0 => DynamicSmem::Fixed(self.bytes),
            per_thread => DynamicSmem::PerThread {
                per_thread,
                fixed: self.bytes,
            },
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn no_smem(d: &DynamicSmem) -> bool {
    *d == DynamicSmem::default()
}

impl BoundsLine {
    fn is_none(&self) -> bool {
        self.max_threads.is_none()
            && self.req_threads.is_none()
            && self.min_blocks_per_sm.is_none()
            && self.max_registers.is_none()
            && self.max_cluster_rank.is_none()
            && self.cluster_dims.is_none()
            && !self.explicit_cluster
    }
}

impl From<&LaunchBounds> for BoundsLine {
    fn from(b: &LaunchBounds) -> Self {
        BoundsLine {
            max_threads: b.max_threads,
            req_threads: b.req_threads,
            min_blocks_per_sm: b.min_blocks_per_sm,
            max_registers: b.max_registers,
            max_cluster_rank: b.max_cluster_rank,
            cluster_dims: b.cluster_dims,
            explicit_cluster: b.explicit_cluster,
        }
    }
}

impl From<&BoundsLine> for LaunchBounds {
    fn from(b: &BoundsLine) -> Self {
        LaunchBounds {
            max_threads: b.max_threads,
            req_threads: b.req_threads,
            min_blocks_per_sm: b.min_blocks_per_sm,
            max_registers: b.max_registers,
            max_cluster_rank: b.max_cluster_rank,
            cluster_dims: b.cluster_dims,
            explicit_cluster: b.explicit_cluster,
        }
    }
}

/// The lock's text (see [`Lock::to_text`]).
pub(super) fn write(lock: &Lock) -> String {
    let file = LockFile {
        schema: LOCK_SCHEMA,
        package: lock.package.clone(),
        nvcc: lock.nvcc.clone(),
        archs: lock.archs.clone(),
        flags: lock.flags.clone(),
        kernels: lock
            .kernels
            .iter()
            .map(|k| kernel_line(k, &lock.noted))
            .collect(),
        parts: lock.parts.clone(),
        measured: lock.measured.clone(),
        launches: lock.launches.clone(),
    };
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, LockFormatter::default());
    // Plain data with string keys, into memory: serializing cannot fail.
    if file.serialize(&mut ser).is_err() {
        return manifest::to_json_pretty(&file);
    }
    let mut text = String::from_utf8(out).unwrap_or_default();
    text.push('\n');
    text
}

fn kernel_line(k: &LockKernel, noted: &BTreeMap<NoteKey, Noted>) -> KernelLine {
    KernelLine {
        name: k.name.clone(),
        demangled: (k.demangled != k.name).then(|| k.demangled.clone()),
        source: k.source.clone(),
        params: k.params.iter().map(param_text).collect(),
        archs: k
            .archs
            .iter()
            .map(|(arch, r)| {
                let key = (k.name.clone(), k.source.clone(), arch.clone());
                (arch.clone(), arch_line(r, noted.get(&key)))
            })
            .collect(),
    }
}

fn arch_line(r: &Resources, noted: Option<&Noted>) -> ArchLine {
    let f = &r.facts;
    let (stated, smem) = r.declared.as_ref().map_or((None, None), |d| d.by_build());
    let launch = stated.map(|(launch, pattern)| BuildLaunch {
        pattern,
        block: launch.block,
        dynamic_smem: launch.dynamic_smem,
    });
    let dynamic_smem = smem.map(|(rule, pattern)| {
        let (per_thread, bytes) = match rule {
            DynamicSmem::Fixed(b) => (0, b),
            DynamicSmem::PerThread { per_thread, fixed } => (per_thread, fixed),
        };
        BuildSmem {
            pattern,
            per_thread,
            bytes,
        }
    });
    ArchLine {
        registers: f.registers,
        static_smem: f.static_smem,
        spill_stores: f.spill_stores,
        spill_loads: f.spill_loads,
        stack_frame: f.stack_frame,
        cumulative_stack: f.cumulative_stack,
        barriers: f.barriers,
        launch_bounds: BoundsLine::from(&f.launch_bounds),
        maxrregcount: f.maxrregcount,
        launch,
        dynamic_smem,
        cubin_hash: r.cubin_hash.clone(),
        cmem: noted.map(|n| n.cmem.clone()).unwrap_or_default(),
        warnings: noted
            .map(|n| n.warnings.iter().map(|w| w.text.clone()).collect())
            .unwrap_or_default(),
    }
}

/// Reads a lock (see [`Lock::from_text`]).
pub(super) fn read(text: &str, path: &Path) -> Result<Lock> {
    let corrupt = |detail: String| Error::Corrupt {
        path: path.to_path_buf(),
        detail,
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    // A key twice in one object, which serde would read as its last: the
    // text's own syntax errors are the readers' below to report.
    if let Err(e) = serde_json::from_str::<unique::Unique>(text) {
        if e.is_data() {
            return Err(corrupt(format!("not an occ lock ({e}); {RESTORE}")));
        }
    }
    // Today's schema reads straight from the text (its errors say where);
    // anything else goes through `upgrade` first.
    let direct = serde_json::from_str::<LockFile>(text);
    let file = match direct {
        Ok(file) if file.schema == LOCK_SCHEMA => file,
        direct => {
            let value: Value = serde_json::from_str(text)
                .map_err(|e| corrupt(format!("not valid JSON ({e}); {RESTORE}")))?;
            let was = value.get("schema").and_then(Value::as_u64);
            let value = upgrade(value);
            manifest::check_schema(&value, path, LOCK_SCHEMA, RESTORE)?;
            let read = match direct {
                Err(e) if was == Some(u64::from(LOCK_SCHEMA)) => Err(e),
                _ => serde_json::from_value::<LockFile>(value),
            };
            read.map_err(|e| corrupt(format!("not an occ lock ({e}); {RESTORE}")))?
        }
    };
    let lock = derive(file).map_err(|detail| corrupt(format!("{detail}; {RESTORE}")))?;
    lock.validate()
        .map_err(|detail| corrupt(format!("{detail}; {RESTORE}")))?;
    Ok(lock)
}

/// The lock a file records, with every name and number that follows from
/// it worked out as a build works it out.
fn derive(file: LockFile) -> std::result::Result<Lock, String> {
    // A lock is read on its own (`cargo occ check`, a threshold or a
    // launch's pattern naming a kernel by its identifier), so it names its
    // kernels by the assembly's rule, over the same set of kernels.
    let idents = analyze::idents(
        file.kernels
            .iter()
            .map(|k| (k.name.as_str(), k.source.as_str())),
    );
    // The C++ launches judge the kernels they name, by the assembly's rule.
    let named: Vec<Kernel<()>> = file
        .kernels
        .iter()
        .map(|line| {
            let names = names::kernel_name(&line.name);
            Kernel {
                name: line.name.clone(),
                demangled: names.demangled,
                base_name: names.base,
                short_name: names.short,
                ident: String::new(),
                source: line.source.clone(),
                params: Vec::new(),
                archs: BTreeMap::new(),
            }
        })
        .collect();
    let named: Vec<&Kernel<()>> = named.iter().collect();
    let by_code = launches::by_kernel(&file.launches, &named);
    let kernels = file
        .kernels
        .iter()
        .map(|line| {
            let ident = idents[&(line.name.as_str(), line.source.as_str())].clone();
            let code = by_code
                .get(&(line.name.clone(), line.source.clone()))
                .map_or(&[][..], Vec::as_slice);
            kernel_of(line, ident, code)
        })
        .collect::<std::result::Result<Vec<_>, String>>()?;
    let noted = file
        .kernels
        .iter()
        .flat_map(|k| k.archs.iter().map(move |(arch, a)| (k, arch, a)))
        .map(|(k, arch, a)| {
            let noted = Noted {
                cmem: a.cmem.clone(),
                warnings: a.warnings.iter().map(|w| ptxas::warning(w)).collect(),
            };
            ((k.name.clone(), k.source.clone(), arch.clone()), noted)
        })
        .filter(|(_, noted)| !noted.is_empty())
        .collect();
    Ok(Lock {
        schema: LOCK_SCHEMA,
        package: file.package,
        nvcc: file.nvcc,
        archs: file.archs,
        flags: file.flags,
        kernels,
        parts: file.parts,
        measured: file.measured,
        noted,
        launches: file.launches,
    })
}

fn kernel_of(
    line: &KernelLine,
    ident: String,
    by_code: &[launches::CodeBlock],
) -> std::result::Result<LockKernel, String> {
    if line.name.is_empty() {
        return Err(format!("a kernel of {} has no symbol", line.source));
    }
    let names = names::kernel_name(&line.name);
    if let Some(written) = &line.demangled {
        if *written != names.demangled {
            return Err(format!(
                "kernel {:?}'s demangled name is {written:?}, but its symbol demangles to {:?}",
                line.name, names.demangled
            ));
        }
    }
    let params = line
        .params
        .iter()
        .map(|p| {
            parse_param(p).map_err(|e| format!("kernel {:?}'s parameter {p:?} {e}", line.name))
        })
        .collect::<std::result::Result<Vec<_>, String>>()?;
    let archs = line
        .archs
        .iter()
        .map(|(arch, a)| Ok((arch.clone(), resources_of(&line.name, arch, a, by_code)?)))
        .collect::<std::result::Result<BTreeMap<_, _>, String>>()?;
    // A recorded launch was build.rs's for this kernel: its pattern names it.
    let all = [
        line.name.as_str(),
        names.base.as_str(),
        names.short.as_str(),
        ident.as_str(),
    ];
    if let Some(l) = line
        .archs
        .values()
        .filter_map(|a| a.launch.as_ref())
        .find(|l| {
            manifest::writable("a launch's pattern", &l.pattern).is_err()
                || !all.iter().any(|n| declared::matches(&l.pattern, n))
        })
    {
        return Err(format!(
            "kernel {:?} records a launch of build.rs's pattern {:?}, which does not name it",
            line.name, l.pattern
        ));
    }
    Ok(Kernel {
        name: line.name.clone(),
        demangled: names.demangled,
        base_name: names.base,
        short_name: names.short,
        params,
        ident,
        source: line.source.clone(),
        archs,
    })
}

/// One kernel × arch as a build judges it ([`declared::judge_facts`]).
fn resources_of(
    kernel: &str,
    arch: &str,
    a: &ArchLine,
    by_code: &[launches::CodeBlock],
) -> std::result::Result<Resources, String> {
    // Facts no ptxas reports: refused before the model sees them.
    if a.registers > MAX_REGISTERS {
        return Err(format!(
            "kernel {kernel:?} on {arch} records {} registers per thread; no arch allows more \
             than {MAX_REGISTERS}",
            a.registers
        ));
    }
    let b = &a.launch_bounds;
    for (directive, dims) in [
        (".maxntid", b.max_threads),
        (".reqntid", b.req_threads),
        (".reqnctapercluster", b.cluster_dims),
    ] {
        if dims.is_some_and(|d| d.contains(&0)) {
            return Err(format!(
                "kernel {kernel:?} on {arch} records {directive} with a dimension of 0; each is \
                 at least 1"
            ));
        }
    }
    let facts = Facts {
        registers: a.registers,
        static_smem: a.static_smem,
        spill_stores: a.spill_stores,
        spill_loads: a.spill_loads,
        stack_frame: a.stack_frame,
        cumulative_stack: a.cumulative_stack,
        barriers: a.barriers,
        launch_bounds: LaunchBounds::from(&a.launch_bounds),
        maxrregcount: a.maxrregcount,
    };
    let by_build = a.launch.as_ref().map(|l| {
        (
            Launch {
                block: l.block,
                dynamic_smem: l.dynamic_smem,
            },
            l.pattern.clone(),
        )
    });
    let smem = a
        .dynamic_smem
        .as_ref()
        .map(|d| (d.rule(), d.pattern.clone()));
    let (best, declared) =
        declared::judge_facts(arch, &facts, by_build, by_code, smem).map_err(|e| {
            let detail = match e {
                declared::Judging::Best(detail) | declared::Judging::Declared { detail, .. } => {
                    detail
                }
            };
            format!("kernel {kernel:?} on {arch}: {detail}")
        })?;
    Ok(Resources {
        facts,
        best,
        declared,
        cubin_hash: a.cubin_hash.clone().filter(|h| !h.is_empty()),
    })
}

/// `name: C type (PTX type[, N bytes][, align N])` (the module's form).
pub(super) fn param_text(p: &Param) -> String {
    let mut abi = p.ptx.clone();
    if Some(p.size) != width(&p.ptx) {
        abi.push_str(&format!(", {} bytes", p.size));
    }
    if p.align != p.size {
        abi.push_str(&format!(", align {}", p.align));
    }
    match p.c_type.is_empty() {
        true => format!("{}: ({abi})", p.name),
        false => format!("{}: {} ({abi})", p.name, p.c_type),
    }
}

/// The bytes of a PTX type named by its width (`u64`: 8, `b8`: 1).
fn width(ptx: &str) -> Option<u32> {
    let digits = ptx.trim_start_matches(|c: char| c.is_ascii_alphabetic());
    digits.parse::<u32>().ok().map(|bits| bits / 8)
}

/// The most bytes of parameters a kernel takes (CUDA 12.1+ on Volta and
/// newer): no one parameter is larger.
const MAX_PARAM_BYTES: u32 = 32_764;

/// Reads [`param_text`]'s form back; the error says what is wrong.
fn parse_param(text: &str) -> std::result::Result<Param, String> {
    const FORM: &str = "is not `name: C type (PTX type[, N bytes][, align N])`";
    let bad = |what: &str| format!("{FORM}: {what}");
    let inner = text
        .strip_suffix(')')
        .ok_or_else(|| bad("it does not end with the PTX type in parentheses"))?;
    let open = inner
        .rfind('(')
        .ok_or_else(|| bad("it has no PTX type in parentheses"))?;
    let (decl, abi) = (inner[..open].trim_end(), &inner[open + 1..]);
    let (name, c_type) = decl
        .split_once(':')
        .ok_or_else(|| bad("it has no `:` after the name"))?;
    let mut abi = abi.split(", ");
    let ptx = abi.next().unwrap_or_default().to_string();
    if ptx.is_empty() || !ptx.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(bad("the PTX type is not a word like u64"));
    }
    let (mut size, mut align) = (None, None);
    for part in abi {
        let number = |s: &str| {
            s.parse::<u32>()
                .map_err(|_| bad(&format!("{part:?} is not a number of bytes")))
        };
        if let Some(n) = part.strip_suffix(" bytes") {
            size = Some(number(n)?);
        } else if let Some(n) = part.strip_prefix("align ") {
            align = Some(number(n)?);
        } else {
            return Err(bad(&format!("{part:?} is neither `N bytes` nor `align N`")));
        }
    }
    let size = size
        .or_else(|| width(&ptx))
        .ok_or_else(|| bad(&format!("{ptx} has no width: say its size (`N bytes`)")))?;
    if size == 0 || size > MAX_PARAM_BYTES {
        return Err(bad(&format!(
            "a parameter has 1 to {MAX_PARAM_BYTES} bytes, not {size}"
        )));
    }
    let align = align.unwrap_or(size);
    if !align.is_power_of_two() || align > size {
        return Err(bad(&format!(
            "its alignment, {align}, is not a power of two of at most its size ({size})"
        )));
    }
    Ok(Param {
        name: name.trim().to_string(),
        c_type: c_type.trim().to_string(),
        ptx,
        size,
        align,
    })
}

/// A lock of an older schema as today's: schema 1 renamed three keys on
/// its way to 2 (a lift's `launch_bounds.min_blocks` is
/// `min_blocks_per_sm`, a measured line's `cc` and `sms` are
/// `compute_capability` and `sm_count`); schema 2 wrote every name and
/// derived number, which 3 leaves out ([`upgrade_2`]). So a committed
/// lock keeps gating across an upgrade, and the next `cargo occ bless`
/// writes it anew. Any other value is returned as it is.
fn upgrade(mut value: Value) -> Value {
    if value.get("schema").and_then(Value::as_u64) == Some(1) {
        upgrade_1(&mut value);
    }
    if value.get("schema").and_then(Value::as_u64) == Some(2) {
        upgrade_2(&mut value);
    }
    value
}

fn upgrade_1(value: &mut Value) {
    fn rename(object: Option<&mut Value>, from: &str, to: &str) {
        if let Some(Value::Object(map)) = object {
            if let Some(v) = map.remove(from) {
                map.insert(to.to_string(), v);
            }
        }
    }
    if let Some(Value::Array(kernels)) = value.get_mut("kernels") {
        for kernel in kernels {
            if let Some(Value::Object(archs)) = kernel.get_mut("archs") {
                for arch in archs.values_mut() {
                    let bounds = arch
                        .get_mut("declared")
                        .and_then(|d| d.get_mut("lift"))
                        .and_then(|l| l.get_mut("launch_bounds"));
                    rename(bounds, "min_blocks", "min_blocks_per_sm");
                }
            }
        }
    }
    if let Some(Value::Array(measured)) = value.get_mut("measured") {
        for line in measured {
            rename(Some(&mut *line), "cc", "compute_capability");
            rename(Some(line), "sms", "sm_count");
        }
    }
    value["schema"] = Value::from(2);
}

/// Schema 2 as 3: per kernel, the names that follow from the symbol
/// dropped (the demangled name kept where it differs) and each parameter
/// as one string; per kernel × arch, the derived numbers (`best`, the
/// declared launch's occupancy) dropped and build.rs's launch kept as
/// `launch`. A value that is not what schema 2 wrote is left for the
/// reader to refuse.
fn upgrade_2(value: &mut Value) {
    if let Some(Value::Array(kernels)) = value.get_mut("kernels") {
        for kernel in kernels.iter_mut().filter_map(Value::as_object_mut) {
            for derived in ["base_name", "short_name", "ident"] {
                kernel.remove(derived);
            }
            if kernel.get("demangled") == kernel.get("name") {
                kernel.remove("demangled");
            }
            if let Some(Value::Array(params)) = kernel.get_mut("params") {
                for p in params.iter_mut() {
                    if let Ok(param) = serde_json::from_value::<Param>(p.clone()) {
                        *p = Value::from(param_text(&param));
                    }
                }
            }
            let Some(Value::Object(archs)) = kernel.get_mut("archs") else {
                continue;
            };
            for arch in archs.values_mut().filter_map(Value::as_object_mut) {
                arch.remove("best");
                if arch.get("cubin_hash") == Some(&Value::from("")) {
                    arch.remove("cubin_hash");
                }
                let Some(declared) = arch.remove("declared") else {
                    continue;
                };
                let pattern = declared.pointer("/by/build/pattern").cloned();
                if let (Some(pattern), Some(Value::Object(launch))) =
                    (pattern, declared.get("launch").cloned())
                {
                    let mut line = serde_json::Map::new();
                    line.insert("pattern".into(), pattern);
                    line.extend(launch);
                    arch.insert("launch".into(), Value::Object(line));
                }
            }
        }
    }
    value["schema"] = Value::from(3);
}

/// The lock's layout: the lock object (depth 1), the maps in it (depth 2:
/// `flags` and `parts`, one part a line) and each kernel's `archs` map
/// (depth 4) have one entry per line, and so has every array at depth 2
/// (`archs`, `kernels`, `measured`); everything else is written on one
/// line, with a space after each `:` and `,`.
#[derive(Default)]
struct LockFormatter {
    /// Per open object or array: whether its entries go on lines of their
    /// own, and whether it had any.
    open: Vec<(bool, bool)>,
}

impl LockFormatter {
    /// Object depths whose entries go on lines of their own.
    const OBJECTS: [usize; 3] = [1, 2, 4];
    /// Array depths whose values go on lines of their own.
    const ARRAYS: [usize; 1] = [2];

    fn open<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        bracket: &[u8],
        broken_at: &[usize],
    ) -> std::io::Result<()> {
        self.open
            .push((broken_at.contains(&(self.open.len() + 1)), false));
        w.write_all(bracket)
    }

    /// The indent of a line: two spaces per enclosing container that is
    /// broken into lines (a container on one line adds none).
    fn indent<W: ?Sized + std::io::Write>(&self, w: &mut W) -> std::io::Result<()> {
        let broken = self.open.iter().filter(|(broken, _)| *broken).count();
        w.write_all(&b"  ".repeat(broken))
    }

    fn entry<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        let Some((broken, any)) = self.open.last_mut() else {
            return Ok(());
        };
        *any = true;
        let broken = *broken;
        if !first {
            w.write_all(b",")?;
        }
        if broken {
            w.write_all(b"\n")?;
            self.indent(w)
        } else if !first {
            w.write_all(b" ")
        } else {
            Ok(())
        }
    }

    fn close<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        bracket: &[u8],
    ) -> std::io::Result<()> {
        if let Some((true, true)) = self.open.pop() {
            w.write_all(b"\n")?;
            self.indent(w)?;
        }
        w.write_all(bracket)
    }
}

impl serde_json::ser::Formatter for LockFormatter {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"[", &Self::ARRAYS)
    }

    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"]")
    }

    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.entry(w, first)
    }

    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, _: &mut W) -> std::io::Result<()> {
        Ok(())
    }

    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"{", &Self::OBJECTS)
    }

    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"}")
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.entry(w, first)
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, _: &mut W) -> std::io::Result<()> {
        Ok(())
    }
}

/// The check that no object of a lock's text holds a key twice.
mod unique {
    use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
    use std::collections::BTreeSet;
    use std::fmt;

    /// A JSON document none of whose objects holds a key twice; reading
    /// one that does fails naming the key (an arch of a kernel's `archs`
    /// with the kernel) at its line.
    pub(super) struct Unique;

    impl<'de> serde::Deserialize<'de> for Unique {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            Walk(Place::Top).deserialize(d).map(|()| Unique)
        }
    }

    /// Where in the lock a value is: what a repeated key is called.
    #[derive(Clone, Copy)]
    enum Place<'a> {
        /// The lock object.
        Top,
        /// The `kernels` array.
        Kernels,
        /// One kernel's object.
        Kernel,
        /// A kernel's `archs`, with its symbol when read before them.
        Archs(Option<&'a str>),
        /// Anywhere else.
        Other,
    }

    struct Walk<'a>(Place<'a>);

    impl<'de> DeserializeSeed<'de> for Walk<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }

    /// A kernel's `name`, read while walking it.
    struct Name;

    impl<'de> DeserializeSeed<'de> for Name {
        type Value = Option<String>;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<String>, D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Name {
        type Value = Option<String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a kernel's symbol")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Option<String>, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Option<String>, E> {
            Ok(None)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Option<String>, E> {
            Ok(None)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Option<String>, E> {
            Ok(None)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Option<String>, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Option<String>, E> {
            Ok(None)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Option<String>, A::Error> {
            Walk(Place::Other).visit_seq(seq).map(|()| None)
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Option<String>, A::Error> {
            Walk(Place::Other).visit_map(map).map(|()| None)
        }
    }

    impl<'de> Visitor<'de> for Walk<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E: de::Error>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            let each = match self.0 {
                Place::Kernels => Place::Kernel,
                _ => Place::Other,
            };
            while seq.next_element_seed(Walk(each))?.is_some() {}
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut keys = BTreeSet::new();
            let mut name: Option<String> = None;
            while let Some(key) = map.next_key::<String>()? {
                if keys.contains(&key) {
                    return Err(de::Error::custom(match self.0 {
                        Place::Archs(Some(kernel)) => {
                            format!("kernel {kernel:?} lists arch {key} twice")
                        }
                        Place::Archs(None) => format!("a kernel lists arch {key} twice"),
                        _ => format!("key {key:?} appears twice in one object"),
                    }));
                }
                match (self.0, key.as_str()) {
                    (Place::Top, "kernels") => map.next_value_seed(Walk(Place::Kernels))?,
                    (Place::Kernel, "name") => name = map.next_value_seed(Name)?,
                    (Place::Kernel, "archs") => {
                        map.next_value_seed(Walk(Place::Archs(name.as_deref())))?
                    }
                    _ => map.next_value_seed(Walk(Place::Other))?,
                }
                keys.insert(key);
            }
            Ok(())
        }
    }
}
