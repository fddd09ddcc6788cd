//! Parser for the resource report of `nvcc -Xptxas -v` (and `nvcc -dlink -Xnvlink -v`).
//!
//! [`parse_log`] reads the text nvcc prints to stderr and returns a [`Log`]: one
//! [`KernelRecord`] per entry function and target architecture, the non-entry
//! functions (`__noinline__`, recursive callees) separately, the module headers
//! (`N bytes gmem, N bytes cmem[3]`), the nvlink records of an `-rdc` link, and every
//! warning, error and fatal line as a [`Diagnostic`].
//!
//! It accepts the formats of CUDA 11.x (no barriers, no compile time), 12.x and 13.x,
//! `-G` and `-rdc` ordering, `--threads` logs whose per-arch blocks arrive in any order,
//! and the very old `60+56 bytes lmem` pairs and `Compiling entry function` lines
//! without a `for 'sm_XX'`. Unknown fields are ignored; a line that has the shape of a
//! resource line but does not parse is a [`ParseError`] that quotes the line.
//!
//! ```
//! let log = occ_model::compiler::ptxas::parse_log(
//!     "ptxas info    : 0 bytes gmem\n\
//!      ptxas info    : Compiling entry function 'saxpy' for 'sm_90'\n\
//!      ptxas info    : Function properties for saxpy\n    \
//!      0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
//!      ptxas info    : Used 10 registers, used 0 barriers\n",
//! )?;
//! assert_eq!(log.kernels[0].name, "saxpy");
//! assert_eq!(log.kernels[0].arch.as_deref(), Some("sm_90"));
//! assert_eq!(log.kernels[0].registers, Some(10));
//! assert_eq!(log.kernels[0].barriers, Some(0));
//! # Ok::<(), occ_model::compiler::ptxas::ParseError>(())
//! ```

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde::{Deserialize, Serialize};

pub use crate::schema::manifest::{Warning, WarningKind};

/// Everything read from one log.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Log {
    /// One record per entry function and target architecture, in log order.
    /// Where the log also holds nvlink figures for the entry, they have been applied
    /// (see [`KernelRecord::linked`]).
    pub kernels: Vec<KernelRecord>,
    /// Non-entry functions (`__noinline__`, recursive or `-rdc` callees), in log order.
    pub functions: Vec<FunctionRecord>,
    /// Module headers (`N bytes gmem[, N bytes cmem[b]]*`), one per ptxas run, in log order.
    pub modules: Vec<ModuleRecord>,
    /// Per-entry figures printed by nvlink at an `-rdc` device link, in log order.
    pub linked: Vec<LinkedRecord>,
    /// Every warning, error and fatal line, and the info lines that are not resource
    /// lines (such as `Overriding maximum register limit ...`), in log order.
    pub diagnostics: Vec<Diagnostic>,
}

/// Resources of one entry function (kernel) for one target architecture.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelRecord {
    /// Mangled name as printed (`_Z5saxpyfPKfPfi`, or `saxpy` for `extern "C"`).
    pub name: String,
    /// Target as printed (`sm_90a`); `None` for very old logs without `for 'sm_XX'`.
    pub arch: Option<String>,
    /// Registers per thread (`Used N registers`, or nvlink's `used N
    /// registers` after an `-rdc` link); `None` until that line is read: a
    /// log that lost it (a launcher that filtered nvcc's stderr, a log cut
    /// after nvlink's `Function properties for` line) has no count for the
    /// kernel, never a count of 0.
    pub registers: Option<u32>,
    /// Whether its `N bytes stack frame, N bytes spill stores, ...` line was
    /// seen: without it, no spill would show.
    #[serde(default)]
    pub framed: bool,
    /// Named barriers (`used N barriers`); `None` before CUDA 12.8, which does not print it.
    pub barriers: Option<u32>,
    /// Static shared memory in bytes (`N bytes smem`; 0 when absent). Dynamic shared
    /// memory never appears in the log.
    pub static_smem: u64,
    /// Constant memory per bank in bytes (`N bytes cmem[b]`). Empty for sm_90 and later,
    /// where ptxas does not print it.
    pub cmem: BTreeMap<u32, u64>,
    /// Stack frame in bytes (`N bytes stack frame`; 0 when the log has none).
    pub stack_frame: u64,
    /// Stack of the whole call chain (`N bytes cumulative stack size`, or nvlink's
    /// `N stack`); `None` when not printed (0, recursive, or `-rdc` before linking).
    pub cumulative_stack: Option<u64>,
    /// Bytes of register spill stores.
    pub spill_stores: u64,
    /// Bytes of register spill loads.
    pub spill_loads: u64,
    /// Local memory in bytes where the log prints it (very old toolkits, nvlink).
    pub lmem: Option<u64>,
    /// Global memory of the module the kernel belongs to (`N bytes gmem`).
    pub gmem: u64,
    /// True when nvlink figures (registers, barriers, stack, smem, cmem, lmem) from an
    /// `-rdc` device link replaced the ptxas figures.
    pub linked: bool,
    /// Warnings, errors and notes that name this kernel, and the warnings
    /// of its ptxas run that name no kernel (see [`Diagnostic`]), in log order.
    pub diagnostics: Vec<Diagnostic>,
    /// 1-based line of the `Compiling entry function` line.
    pub line: usize,
}

/// A non-entry function: only its stack frame and spills are printed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionRecord {
    /// Mangled name as printed.
    pub name: String,
    /// Target of the ptxas run it was printed in, taken from the entries of the same run;
    /// `None` when that run compiled no entry (an `-rdc` object with only device functions).
    pub arch: Option<String>,
    /// Stack frame in bytes.
    pub stack_frame: u64,
    /// Bytes of register spill stores.
    pub spill_stores: u64,
    /// Bytes of register spill loads.
    pub spill_loads: u64,
    /// 1-based line of the `Function properties for` line.
    pub line: usize,
}

/// The header line of one ptxas run: module-level global and constant memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleRecord {
    /// Target of the run, taken from its entries; `None` when it compiled no entry.
    pub arch: Option<String>,
    /// Global memory in bytes (`__device__` variables).
    pub gmem: u64,
    /// Module constant memory per bank (bank 3: `__constant__` variables; 4: printf and
    /// similar). Empty for sm_90 and later.
    pub cmem: BTreeMap<u32, u64>,
    /// 1-based line of the header.
    pub line: usize,
}

/// Figures nvlink prints for an entry after an `-rdc` device link. They include the
/// callees linked in from other objects, so they are the ones the launch will see.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkedRecord {
    /// Mangled name.
    pub name: String,
    /// Target from the `(target: sm_XX)` suffix; `None` for a one-arch link, which prints none.
    pub arch: Option<String>,
    /// Registers per thread (`used N registers`); `None` when the log ends
    /// (or moves on) before that line, and then the record's other figures
    /// were not read either.
    pub registers: Option<u32>,
    /// Named barriers.
    pub barriers: Option<u32>,
    /// Stack of the whole call chain in bytes (`N stack`).
    pub stack: u64,
    /// Static shared memory in bytes.
    pub static_smem: u64,
    /// Constant memory per bank in bytes (printed even for sm_90 and later).
    pub cmem: BTreeMap<u32, u64>,
    /// Local memory in bytes.
    pub lmem: Option<u64>,
    /// 1-based line of the `Function properties for` line.
    pub line: usize,
}

/// How serious a [`Diagnostic`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// An `info` line that is not a resource line (`Overriding maximum register limit ...`).
    Info,
    /// A `warning` line.
    Warning,
    /// An `error` line: the build failed.
    Error,
    /// A `fatal` line: the tool gave up.
    Fatal,
}

/// A warning, error, fatal or note line of ptxas or nvlink.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// The tool that printed it: `ptxas` or `nvlink`.
    pub tool: String,
    /// How serious it is.
    pub severity: Severity,
    /// The text after the `ptxas warning : ` prefix.
    pub message: String,
    /// The function or kernel the message names (`'<id>'`, or `entry <id>`), if any.
    pub symbol: Option<String>,
    /// The target of the kernel it was attached to, if it was attached to one.
    pub arch: Option<String>,
    /// 1-based line in the log.
    pub line: usize,
}

/// What an `Overriding ...` note of ptxas says overrode a register limit
/// ([`Diagnostic::overriding`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overriding {
    /// `Overriding global maxrregcount 24 with entry-specific value 32`:
    /// the kernel's own limit (`.maxnreg`, `.minnctapersm`) won over
    /// `-maxrregcount`, which therefore did not apply.
    GlobalMaxrregcount,
    /// Any other `Overriding ...` note, such as `Overriding maximum register
    /// limit 256 for 'k' with 24 of maxrregcount option` (the cap applied).
    Other,
}

/// A line that has the shape of a ptxas or nvlink resource line but cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// The line (shortened to 300 characters).
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot read ptxas log line {}: {}: `{}`; pass the unmodified stderr of one \
             `nvcc -Xptxas -v` run (builds run in parallel interleave their lines)",
            self.line, self.reason, self.text
        )
    }
}

impl std::error::Error for ParseError {}

impl KernelRecord {
    /// The stack each thread needs as far as the log tells: the cumulative stack of the
    /// call chain when printed, else the entry's own frame. It equals the `STACK` of
    /// `cuobjdump --dump-resource-usage` for every kernel in the project's fixtures and
    /// corpus. For recursive kernels ptxas cannot know it; this is then only the frame.
    pub fn stack_size(&self) -> u64 {
        self.cumulative_stack.unwrap_or(self.stack_frame)
    }

    /// Warnings (not notes or errors) attached to this kernel.
    pub fn warnings(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Warning)
    }
}

impl Diagnostic {
    /// What this warning says, typed; `None` when it is not a warning. A
    /// shape occ does not know is [`WarningKind::Other`]: every warning
    /// has one, with its words.
    pub fn warning(&self) -> Option<Warning> {
        (self.severity == Severity::Warning).then(|| warning(&self.message))
    }

    /// The register cap ptxas applied to the kernel this note names, from
    /// `Overriding maximum register limit 256 for 'k' with  24 of
    /// maxrregcount option` (24: `-maxrregcount` as ptxas adjusted it to
    /// the arch's bounds); `None` for any other line.
    pub fn register_cap(&self) -> Option<u32> {
        if self.severity != Severity::Info {
            return None;
        }
        let rest = self
            .message
            .strip_prefix("Overriding maximum register limit ")?;
        let (_, rest) = rest.split_once("' with ")?;
        let cap = rest.trim_start().strip_suffix(" of maxrregcount option")?;
        u32::try_from(num(cap.trim())?).ok()
    }

    /// The override of a register limit this note reports, if it is an
    /// `Overriding ...` note.
    pub fn overriding(&self) -> Option<Overriding> {
        if self.message.starts_with("Overriding global maxrregcount") {
            Some(Overriding::GlobalMaxrregcount)
        } else if self.message.starts_with("Overriding") {
            Some(Overriding::Other)
        } else {
            None
        }
    }
}

impl Log {
    /// Errors and fatal lines anywhere in the log; a build whose log has any failed.
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics
            .iter()
            .filter(|d| d.severity >= Severity::Error)
    }

    /// Replaces the ptxas figures of each kernel by the nvlink figures of `linked`
    /// (registers, barriers, stack, smem, cmem, lmem) and sets [`KernelRecord::linked`].
    /// A record whose `used N registers` line never came leaves its kernel with no
    /// count (`registers: None`): the ptxas figures are not the linked ones.
    ///
    /// A record with a target applies to the kernel of the same name and target. A record
    /// without one (a one-arch link) applies to the kernels of that name only when they
    /// all have the same target; otherwise it is ambiguous and left out. [`parse_log`]
    /// already applies the nvlink records of its own text; call this when the compile
    /// and the device link were logged separately.
    pub fn apply_linked(&mut self, linked: &[LinkedRecord]) {
        if linked.is_empty() {
            return;
        }
        let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, k) in self.kernels.iter().enumerate() {
            by_name.entry(k.name.clone()).or_default().push(i);
        }
        for rec in linked {
            let same: &[usize] = by_name.get(&rec.name).map_or(&[], Vec::as_slice);
            let targets: Vec<usize> = match &rec.arch {
                Some(a) => same
                    .iter()
                    .copied()
                    .filter(|&i| self.kernels[i].arch.as_deref() == Some(a))
                    .collect(),
                None => {
                    let first_arch = same.first().map(|&i| &self.kernels[i].arch);
                    if same
                        .iter()
                        .all(|&i| Some(&self.kernels[i].arch) == first_arch)
                    {
                        same.to_vec()
                    } else {
                        Vec::new()
                    }
                }
            };
            for i in targets {
                let k = &mut self.kernels[i];
                k.linked = true;
                // A record without its `used N registers` line (a cut log):
                // the ptxas count is not what the link made, so the kernel
                // has no count (`accounted` in `analyze` reports it).
                k.registers = rec.registers;
                if rec.registers.is_none() {
                    continue;
                }
                if rec.barriers.is_some() {
                    k.barriers = rec.barriers;
                }
                k.cumulative_stack = Some(rec.stack);
                k.static_smem = rec.static_smem;
                k.cmem = rec.cmem.clone();
                if rec.lmem.is_some() {
                    k.lmem = rec.lmem;
                }
            }
        }
    }
}

/// Parses the stderr of `nvcc -Xptxas -v` (or `ptxas -v`, or `nvcc -dlink -Xnvlink -v`).
///
/// Deterministic; never panics. Lines that are not from ptxas or nvlink are skipped, so
/// a whole build log can be passed. nvlink figures in the same text are applied to the
/// kernels with [`Log::apply_linked`].
///
/// Diagnostics that name a kernel are attached to the first record of that kernel that
/// follows them (ptxas prints its warnings before the entries of each run), else to the
/// last one before them. Warnings that name no kernel (`For profile sm_80
/// adjusting per thread register count of 16 to lower bound of 24`) are
/// about their whole ptxas run and go to every kernel of it. All are also
/// kept, in order, in [`Log::diagnostics`].
///
/// # Errors
/// A [`ParseError`] quoting the line when a resource line (`Compiling entry function`,
/// `Function properties for`, `Used N registers`, `N bytes stack frame`, `N bytes gmem`)
/// is malformed or has no function to belong to.
pub fn parse_log(text: &str) -> Result<Log, ParseError> {
    let mut p = Parser::default();
    for (i, raw) in text.split('\n').enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        p.line(i + 1, line)?;
    }
    Ok(p.finish())
}

/// Where the next `N bytes stack frame` line goes.
#[derive(Debug, Clone, Copy)]
enum Props {
    Kernel(usize),
    Function(usize),
}

#[derive(Debug, Clone, Copy)]
struct Cur {
    kernel: usize,
    /// Its `Used` line was seen.
    used: bool,
    /// Its `Function properties` line was seen.
    props: bool,
}

#[derive(Default)]
struct Parser {
    log: Log,
    /// Most recent entry of the current ptxas run.
    cur: Option<Cur>,
    props: Option<Props>,
    /// Current ptxas run: index of its module and of its first kernel/function.
    run_module: Option<usize>,
    run_kernels: usize,
    run_functions: usize,
    gmem: u64,
    /// Open nvlink record.
    linked_open: Option<usize>,
}

fn err(line: usize, text: &str, reason: impl Into<String>) -> ParseError {
    let mut t: String = text.chars().take(300).collect();
    if t.len() < text.len() {
        t.push('…');
    }
    ParseError {
        line,
        text: t,
        reason: reason.into(),
    }
}

/// Splits `ptxas info    : rest` into (tool, severity word, rest).
fn split_prefix(line: &str) -> Option<(&str, &str, &str)> {
    let (tool, rest) = if let Some(r) = line.strip_prefix("ptxas") {
        ("ptxas", r)
    } else if let Some(r) = line.strip_prefix("nvlink") {
        ("nvlink", r)
    } else {
        return None;
    };
    // `ptxas info    : ...`, `ptxas warning : ...`; also gpgpu-sim's `ptxas <file>, line N; warning ...`.
    let rest = rest.strip_prefix(' ')?;
    let (word, tail) = rest.split_once(':')?;
    let word = word.trim();
    if !matches!(word, "info" | "warning" | "error" | "fatal") {
        return Some((tool, "other", rest));
    }
    Some((tool, word, tail.strip_prefix(' ').unwrap_or(tail)))
}

/// Parses a decimal number that must be the whole of `s`.
fn num(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 19 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `N` or `N+M` (old declared+system pairs) as their sum.
fn num_pair(s: &str) -> Option<u64> {
    match s.split_once('+') {
        Some((a, b)) => num(a)?.checked_add(num(b)?),
        None => num(s),
    }
}

/// `cmem[3]` -> 3.
fn bank(s: &str) -> Option<u32> {
    let b = s.strip_prefix("cmem[")?.strip_suffix(']')?;
    u32::try_from(num(b)?).ok()
}

/// Resource fields of `Used ...` (ptxas) and `used ...` (nvlink) lines and module headers.
#[derive(Default)]
struct Fields {
    registers: Option<u32>,
    barriers: Option<u32>,
    smem: Option<u64>,
    lmem: Option<u64>,
    gmem: Option<u64>,
    cmem: BTreeMap<u32, u64>,
    cumulative_stack: Option<u64>,
    stack: Option<u64>,
}

/// Reads the `, `-separated fields; unknown fields are ignored. Returns the reason when
/// a known field has a malformed number.
fn fields(s: &str) -> Result<Fields, String> {
    let mut f = Fields::default();
    for field in s.split(',') {
        let field = field.trim();
        if field.is_empty() {
            continue;
        }
        let mut words = field.split(' ').filter(|w| !w.is_empty());
        let w0 = words.next().unwrap_or("");
        let w1 = words.next().unwrap_or("");
        let w2 = words.next().unwrap_or("");
        let w3 = words.next();
        let bad = || format!("cannot read the number in `{field}`");
        if w0.eq_ignore_ascii_case("used") && (w2 == "registers" || w2 == "register") {
            let n = num(w1)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(bad)?;
            f.registers = Some(n);
        } else if w0 == "used" && (w2 == "barriers" || w2 == "barrier") {
            let n = num(w1)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(bad)?;
            f.barriers = Some(n);
        } else if w1 == "bytes" && w2 == "cumulative" {
            f.cumulative_stack = Some(num(w0).ok_or_else(bad)?);
        } else if w1 == "stack" && w2.is_empty() {
            f.stack = Some(num(w0).ok_or_else(bad)?);
        } else if w1 == "bytes" && w3.is_none() {
            let n = || num_pair(w0).ok_or_else(bad);
            match w2 {
                "smem" => f.smem = Some(n()?),
                "lmem" => f.lmem = Some(n()?),
                "gmem" => f.gmem = Some(n()?),
                _ => {
                    if let Some(b) = bank(w2) {
                        let v = n()?;
                        let slot = f.cmem.entry(b).or_insert(0);
                        *slot = slot.saturating_add(v);
                    }
                }
            }
        }
    }
    Ok(f)
}

/// The first `'quoted'` name, else the word after `entry ` / `function `.
fn named_symbol(msg: &str) -> Option<String> {
    if let Some((_, rest)) = msg.split_once('\'') {
        if let Some((name, _)) = rest.split_once('\'') {
            if !name.is_empty() {
                return Some(name.to_string());
            }
        }
    }
    for key in ["entry ", "function "] {
        if let Some((_, rest)) = msg.split_once(key) {
            let name: &str = rest.split([' ', ',', ':']).next().unwrap_or("");
            if !name.is_empty() && name != "function" {
                return Some(name.to_string());
            }
        }
    }
    None
}

impl Parser {
    fn line(&mut self, n: usize, line: &str) -> Result<(), ParseError> {
        if let Some((tool, sev, rest)) = split_prefix(line) {
            if tool == "nvlink" {
                return self.nvlink(n, line, sev, rest);
            }
            return match sev {
                "info" => self.info(n, line, rest),
                "warning" => {
                    self.diag(n, tool, Severity::Warning, rest);
                    Ok(())
                }
                "error" => {
                    self.diag(n, tool, Severity::Error, rest);
                    Ok(())
                }
                "fatal" => {
                    self.diag(n, tool, Severity::Fatal, rest);
                    Ok(())
                }
                _ => {
                    let sev = if rest.contains("error") {
                        Severity::Error
                    } else {
                        Severity::Warning
                    };
                    self.diag(n, tool, sev, rest.trim());
                    Ok(())
                }
            };
        }
        // `    N bytes stack frame, N bytes spill stores, N bytes spill loads`
        let t = line.trim_start();
        if t.len() != line.len() && t.contains("bytes stack frame") {
            return self.stack_line(n, line, t);
        }
        Ok(())
    }

    fn diag(&mut self, n: usize, tool: &str, severity: Severity, msg: &str) {
        let message = msg.trim_end();
        // Strip nvlink's `(target: sm_XX)` suffix into the arch.
        let (message, arch) = split_target(message);
        self.log.diagnostics.push(Diagnostic {
            tool: tool.to_string(),
            severity,
            message: message.to_string(),
            symbol: named_symbol(message),
            arch: arch.map(str::to_string),
            line: n,
        });
    }

    fn info(&mut self, n: usize, line: &str, rest: &str) -> Result<(), ParseError> {
        let rest = rest.trim_end();
        if let Some(r) = rest.strip_prefix("Compiling entry function") {
            return self.entry(n, line, r);
        }
        if let Some(r) = rest.strip_prefix("Function properties for") {
            let name = r.trim();
            let name = name
                .strip_prefix('\'')
                .and_then(|s| s.strip_suffix('\''))
                .unwrap_or(name);
            if name.is_empty() || name.contains(' ') {
                return Err(err(
                    n,
                    line,
                    "no function name after `Function properties for`",
                ));
            }
            self.properties(n, name);
            return Ok(());
        }
        if rest.starts_with("Used ") {
            return self.used(n, line, rest);
        }
        if rest.starts_with("Compile time") {
            return Ok(());
        }
        if rest.ends_with(" gmem") || rest.contains(" gmem,") {
            let f = fields(rest).map_err(|r| err(n, line, r))?;
            let gmem = f
                .gmem
                .ok_or_else(|| err(n, line, "cannot read the `N bytes gmem` header"))?;
            self.start_run(n, gmem, f.cmem);
            return Ok(());
        }
        self.diag(n, "ptxas", Severity::Info, rest);
        Ok(())
    }

    fn start_run(&mut self, n: usize, gmem: u64, cmem: BTreeMap<u32, u64>) {
        self.close_run();
        self.log.modules.push(ModuleRecord {
            arch: None,
            gmem,
            cmem,
            line: n,
        });
        self.run_module = Some(self.log.modules.len() - 1);
        self.gmem = gmem;
        self.cur = None;
        self.props = None;
    }

    /// Gives the module and non-entry functions of the run that ends the target of its
    /// entries.
    fn close_run(&mut self) {
        let kernels = &self.log.kernels[self.run_kernels.min(self.log.kernels.len())..];
        let arch = kernels.iter().find_map(|k| k.arch.clone());
        if let Some(arch) = arch {
            if let Some(m) = self.run_module.and_then(|m| self.log.modules.get_mut(m)) {
                if m.arch.is_none() {
                    m.arch = Some(arch.clone());
                }
            }
            let start = self.run_functions.min(self.log.functions.len());
            for f in &mut self.log.functions[start..] {
                if f.arch.is_none() {
                    f.arch = Some(arch.clone());
                }
            }
        }
        self.run_kernels = self.log.kernels.len();
        self.run_functions = self.log.functions.len();
        self.run_module = None;
    }

    fn entry(&mut self, n: usize, line: &str, r: &str) -> Result<(), ParseError> {
        // ` '<id>' for 'sm_90a'` or ` '<id>'`
        let r = r.trim();
        let bad = || {
            err(
                n,
                line,
                "expected `Compiling entry function '<name>' for 'sm_XX'`",
            )
        };
        let body = r.strip_prefix('\'').ok_or_else(bad)?;
        let (name, arch) = match body.rsplit_once("' for '") {
            Some((name, tail)) => {
                let arch = tail.strip_suffix('\'').ok_or_else(bad)?;
                if arch.is_empty() || arch.contains(char::is_whitespace) {
                    return Err(bad());
                }
                (name, Some(arch.to_string()))
            }
            None => (body.strip_suffix('\'').ok_or_else(bad)?, None),
        };
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(bad());
        }
        self.log.kernels.push(KernelRecord {
            name: name.to_string(),
            arch,
            registers: None,
            framed: false,
            barriers: None,
            static_smem: 0,
            cmem: BTreeMap::new(),
            stack_frame: 0,
            cumulative_stack: None,
            spill_stores: 0,
            spill_loads: 0,
            lmem: None,
            gmem: self.gmem,
            linked: false,
            diagnostics: Vec::new(),
            line: n,
        });
        self.cur = Some(Cur {
            kernel: self.log.kernels.len() - 1,
            used: false,
            props: false,
        });
        self.props = None;
        Ok(())
    }

    fn properties(&mut self, n: usize, name: &str) {
        if let Some(cur) = &mut self.cur {
            if !cur.props && self.log.kernels[cur.kernel].name == name {
                cur.props = true;
                self.props = Some(Props::Kernel(cur.kernel));
                return;
            }
        }
        self.log.functions.push(FunctionRecord {
            name: name.to_string(),
            arch: None,
            stack_frame: 0,
            spill_stores: 0,
            spill_loads: 0,
            line: n,
        });
        self.props = Some(Props::Function(self.log.functions.len() - 1));
    }

    fn stack_line(&mut self, n: usize, line: &str, t: &str) -> Result<(), ParseError> {
        let mut frame = None;
        let mut stores = None;
        let mut loads = None;
        for field in t.trim_end().split(", ") {
            let (v, what) = field
                .split_once(" bytes ")
                .ok_or_else(|| err(n, line, format!("cannot read `{field}`")))?;
            let v = num(v.trim())
                .ok_or_else(|| err(n, line, format!("cannot read the number in `{field}`")))?;
            match what.trim() {
                "stack frame" => frame = Some(v),
                "spill stores" => stores = Some(v),
                "spill loads" => loads = Some(v),
                _ => {}
            }
        }
        let frame = frame.ok_or_else(|| err(n, line, "no `N bytes stack frame`"))?;
        match self.props.take() {
            Some(Props::Kernel(k)) => {
                let k = &mut self.log.kernels[k];
                k.framed = true;
                k.stack_frame = frame;
                k.spill_stores = stores.unwrap_or(0);
                k.spill_loads = loads.unwrap_or(0);
            }
            Some(Props::Function(f)) => {
                let f = &mut self.log.functions[f];
                f.stack_frame = frame;
                f.spill_stores = stores.unwrap_or(0);
                f.spill_loads = loads.unwrap_or(0);
            }
            None => {
                return Err(err(
                    n,
                    line,
                    "stack frame line without a `Function properties for` line before it",
                ))
            }
        }
        Ok(())
    }

    fn used(&mut self, n: usize, line: &str, rest: &str) -> Result<(), ParseError> {
        let f = fields(rest).map_err(|r| err(n, line, r))?;
        let regs = f
            .registers
            .ok_or_else(|| err(n, line, "cannot read `Used N registers`"))?;
        let k = match &mut self.cur {
            Some(cur) if !cur.used => {
                cur.used = true;
                cur.kernel
            }
            _ => {
                return Err(err(
                    n,
                    line,
                    "`Used N registers` without a `Compiling entry function` line before it",
                ))
            }
        };
        let k = &mut self.log.kernels[k];
        k.registers = Some(regs);
        k.barriers = f.barriers;
        k.static_smem = f.smem.unwrap_or(0);
        k.cmem = f.cmem;
        k.cumulative_stack = f.cumulative_stack;
        k.lmem = f.lmem;
        Ok(())
    }

    fn nvlink(&mut self, n: usize, line: &str, sev: &str, rest: &str) -> Result<(), ParseError> {
        match sev {
            "info" => {}
            "warning" => {
                self.diag(n, "nvlink", Severity::Warning, rest);
                return Ok(());
            }
            "error" => {
                self.diag(n, "nvlink", Severity::Error, rest);
                return Ok(());
            }
            "fatal" => {
                self.diag(n, "nvlink", Severity::Fatal, rest);
                return Ok(());
            }
            _ => {
                self.diag(n, "nvlink", Severity::Warning, rest.trim());
                return Ok(());
            }
        }
        let (rest, arch) = split_target(rest.trim_end());
        if let Some(r) = rest.strip_prefix("Function properties for") {
            let name = r.trim().trim_end_matches(':').trim();
            let name = name
                .strip_prefix('\'')
                .and_then(|s| s.strip_suffix('\''))
                .unwrap_or(name);
            if name.is_empty() || name.contains(' ') {
                return Err(err(
                    n,
                    line,
                    "no function name after `Function properties for`",
                ));
            }
            self.log.linked.push(LinkedRecord {
                name: name.to_string(),
                arch: arch.map(str::to_string),
                registers: None,
                barriers: None,
                stack: 0,
                static_smem: 0,
                cmem: BTreeMap::new(),
                lmem: None,
                line: n,
            });
            self.linked_open = Some(self.log.linked.len() - 1);
            return Ok(());
        }
        if rest.starts_with("used ") {
            let f = fields(rest).map_err(|r| err(n, line, r))?;
            let regs = f
                .registers
                .ok_or_else(|| err(n, line, "cannot read `used N registers`"))?;
            let i = self.linked_open.take().ok_or_else(|| {
                err(
                    n,
                    line,
                    "`used N registers` without a `Function properties for` line before it",
                )
            })?;
            let r = &mut self.log.linked[i];
            r.registers = Some(regs);
            r.barriers = f.barriers;
            r.stack = f.stack.or(f.cumulative_stack).unwrap_or(0);
            r.static_smem = f.smem.unwrap_or(0);
            r.cmem = f.cmem;
            r.lmem = f.lmem;
            return Ok(());
        }
        if rest.ends_with(" gmem") || rest.contains(" gmem,") {
            fields(rest).map_err(|r| err(n, line, r))?;
            self.linked_open = None;
            return Ok(());
        }
        self.diag(n, "nvlink", Severity::Info, rest);
        Ok(())
    }

    fn finish(mut self) -> Log {
        self.close_run();
        let mut log = self.log;
        // Attach diagnostics that name a kernel (kernels are in line order).
        let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, k) in log.kernels.iter().enumerate() {
            by_name.entry(k.name.as_str()).or_default().push(i);
        }
        let mut attach: Vec<(usize, usize)> = Vec::new();
        for (di, d) in log.diagnostics.iter().enumerate() {
            let Some(cands) = d.symbol.as_deref().and_then(|s| by_name.get(s)) else {
                continue;
            };
            let kernels = &log.kernels;
            let same_arch = |&&i: &&usize| d.arch.is_none() || kernels[i].arch == d.arch;
            let target = cands
                .iter()
                .filter(same_arch)
                .find(|&&i| kernels[i].line > d.line)
                .or_else(|| {
                    cands
                        .iter()
                        .filter(same_arch)
                        .rev()
                        .find(|&&i| kernels[i].line < d.line)
                });
            if let Some(&t) = target {
                attach.push((di, t));
            }
        }
        drop(by_name);
        attach.extend(run_warnings(&log));
        for (di, t) in attach {
            let arch = log.kernels[t].arch.clone();
            let d = &mut log.diagnostics[di];
            d.arch = arch;
            let d = d.clone();
            log.kernels[t].diagnostics.push(d);
        }
        for k in &mut log.kernels {
            k.diagnostics.sort_by_key(|d| d.line);
        }
        let linked = std::mem::take(&mut log.linked);
        log.apply_linked(&linked);
        log.linked = linked;
        log
    }
}

/// (diagnostic, kernel) pairs for the ptxas warnings that name no kernel
/// (`For profile sm_80 adjusting per thread register count of 16 to lower
/// bound of 24`): they are about a whole ptxas run, so each goes to every
/// kernel of its run. ptxas prints a run's warnings before its `N bytes
/// gmem` header, so a warning's run is the first whose header follows it,
/// else the last run. A log without headers attaches none.
fn run_warnings(log: &Log) -> Vec<(usize, usize)> {
    let headers: Vec<usize> = log.modules.iter().map(|m| m.line).collect();
    let Some(last) = headers.len().checked_sub(1) else {
        return Vec::new();
    };
    // The run a kernel's `Compiling entry function` line is in.
    let run_of = |line: usize| headers.partition_point(|&h| h < line).checked_sub(1);
    let mut out = Vec::new();
    for (di, d) in log.diagnostics.iter().enumerate() {
        if d.tool != "ptxas" || d.severity != Severity::Warning || d.symbol.is_some() {
            continue;
        }
        let run = headers.partition_point(|&h| h < d.line).min(last);
        for (ki, k) in log.kernels.iter().enumerate() {
            if run_of(k.line) == Some(run) {
                out.push((di, ki));
            }
        }
    }
    out
}

/// A warning of ptxas's `words` (after `ptxas warning : `), typed by
/// their shape: how a log's warnings are read, and a lock's read back
/// (it keeps the words alone).
pub fn warning(words: &str) -> Warning {
    Warning {
        kind: warning_kind(words),
        text: words.to_string(),
    }
}

/// What a warning's words (after `ptxas warning : `) say. Each shape is
/// one ptxas 13.5 prints (`docs`' ptxas-output reference, the fixtures of
/// `tests/fixtures`); anything else is [`WarningKind::Other`].
fn warning_kind(message: &str) -> WarningKind {
    let words: Vec<&str> = message.split_whitespace().collect();
    let number_after = |word: &str| {
        let i = words.iter().position(|w| *w == word)?;
        let n = words.get(i + 1)?.trim_end_matches([',', ':']);
        num(n)
    };
    let cap = |n: Option<u64>| n.and_then(|n| u32::try_from(n).ok());
    if message.contains("adjusting per thread register count of") {
        // `For profile sm_80 adjusting per thread register count of 16 to lower bound of 24`
        let requested = cap(number_after("of"));
        let applied = words.last().and_then(|w| cap(num(w)));
        if let (Some(requested), Some(applied)) = (requested, applied) {
            return WarningKind::RegisterCapAdjusted { requested, applied };
        }
    } else if let Some(rest) = message.strip_prefix("Too big maxrregcount value specified ") {
        if let Some(requested) = cap(rest.split(',').next().and_then(|n| num(n.trim()))) {
            return WarningKind::RegisterCapIgnored { requested };
        }
    } else if message.starts_with("Too many maxnreg specified") {
        return WarningKind::MaxnregIgnored;
    } else if message.contains(".minnctapersm will be ignored") {
        return WarningKind::MinBlocksIgnored;
    } else if message.starts_with("Stack size for entry function")
        && message.ends_with("cannot be statically determined")
    {
        return WarningKind::StackUnknown;
    } else if message.starts_with("Registers are spilled to local memory") {
        let bytes = |what: &str| {
            message
                .split(", ")
                .find_map(|f| num(f.strip_suffix(what)?.strip_suffix(" bytes ")?.trim()))
        };
        if let (Some(stores), Some(loads)) = (bytes("spill stores"), bytes("spill loads")) {
            return WarningKind::Spills { stores, loads };
        }
    } else if message.starts_with("Local memory used for function") {
        if let Some(frame) = number_after("frame:") {
            return WarningKind::LocalMemory { frame };
        }
    }
    WarningKind::Other
}

/// Splits nvlink's ` (target: sm_80)` suffix off.
fn split_target(s: &str) -> (&str, Option<&str>) {
    if let Some(body) = s.strip_suffix(')') {
        if let Some((head, arch)) = body.rsplit_once("(target: ") {
            return (head.trim_end(), Some(arch.trim()));
        }
    }
    (s, None)
}

/// ptxas's refusal of a kernel's static shared memory: `Entry function
/// 'k' uses too much shared data (0xf400 bytes, 0xc000 max)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooMuchShared {
    /// The kernel's symbol.
    pub kernel: String,
    /// Its static shared memory, bytes.
    pub bytes: u64,
    /// The most a block may hold statically (48 KiB), bytes.
    pub max: u64,
}

/// Reads a [`TooMuchShared`] error line of a ptxas log; `None` for any
/// other line.
pub fn too_much_shared(line: &str) -> Option<TooMuchShared> {
    let rest = line.split_once("Entry function '")?.1;
    let (kernel, rest) = rest.split_once("' uses too much shared data (0x")?;
    let (bytes, rest) = rest.split_once(" bytes, 0x")?;
    let max = rest.split_once(" max)")?.0;
    Some(TooMuchShared {
        kernel: kernel.to_string(),
        bytes: u64::from_str_radix(bytes, 16).ok()?,
        max: u64::from_str_radix(max, 16).ok()?,
    })
}

/// Splits the log of one nvcc run that compiled several archs (`nvcc -c
/// -Xptxas -v -gencode … -gencode …`) into one log per arch of `archs`, in
/// that order, each as if nvcc had compiled that arch alone.
///
/// nvcc runs ptxas once per real arch, one after another in the order of
/// its `-gencode` options; each run prints its warnings, then an `N bytes
/// gmem` header, then its entries. So a run starts at a header, with the
/// ptxas lines that came after the previous run's last resource line and
/// before it (its warnings). A run belongs to the arch its `Compiling entry
/// function '…' for 'sm_XX'` lines name; a run that names none (a file
/// without kernels) takes the first arch of `archs` no run named, in order.
/// Lines that are not ptxas's (nvcc's, the front end's and the host
/// compiler's warnings, printed once per run of the front end) go to the
/// first arch's log, so that each is reported once.
///
/// Returns `None` when the runs do not match `archs` (more runs than archs,
/// or a run naming an arch not in `archs`), which a caller reports as a
/// log it cannot read.
///
/// Long because it walks the log once, line by line, naming each run by its
/// arch.
pub fn split_by_arch(text: &str, archs: &[String]) -> Option<Vec<String>> {
    // Lines before the first header, and after the last resource line of
    // a run, wait here for the next run (or the current one, at the end).
    let mut pending: Vec<&str> = Vec::new();
    let mut others: Vec<&str> = Vec::new();
    let mut runs: Vec<Vec<&str>> = Vec::new();
    for raw in text.split_inclusive('\n') {
        let line = raw.trim_end_matches(['\n', '\r']);
        let ptxas = split_prefix(line).filter(|(tool, _, _)| *tool == "ptxas");
        let indented = line.starts_with("    ") && line.contains("bytes stack frame");
        match ptxas {
            Some((_, "info", rest)) if rest.ends_with(" gmem") || rest.contains(" gmem,") => {
                let mut run = std::mem::take(&mut pending);
                run.push(raw);
                runs.push(run);
            }
            Some((_, "info", rest))
                if rest.starts_with("Compiling entry function")
                    || rest.starts_with("Function properties for")
                    || rest.starts_with("Used ")
                    || rest.starts_with("Compile time") =>
            {
                match runs.last_mut() {
                    Some(run) => {
                        run.append(&mut pending);
                        run.push(raw);
                    }
                    None => pending.push(raw),
                }
            }
            Some(_) => pending.push(raw),
            None if indented => match runs.last_mut() {
                Some(run) => {
                    run.append(&mut pending);
                    run.push(raw);
                }
                None => pending.push(raw),
            },
            None => others.push(raw),
        }
    }
    if let Some(run) = runs.last_mut() {
        run.append(&mut pending);
    } else if !pending.is_empty() {
        runs.push(pending);
    }
    if runs.len() > archs.len() {
        return None;
    }
    let named = |run: &Vec<&str>| {
        run.iter().find_map(|l| {
            let (_, _, rest) = split_prefix(l.trim_end())?;
            let body = rest.strip_prefix("Compiling entry function ")?;
            let (_, tail) = body.rsplit_once("' for '")?;
            Some(tail.trim_end().strip_suffix('\'')?.to_string())
        })
    };
    let mut slots: Vec<Option<String>> = vec![None; archs.len()];
    let mut unnamed = Vec::new();
    for run in &runs {
        let text: String = run.concat();
        match named(run) {
            Some(arch) => {
                let i = archs.iter().position(|a| *a == arch)?;
                if slots[i].is_some() {
                    return None;
                }
                slots[i] = Some(text);
            }
            None => unnamed.push(text),
        }
    }
    let mut unnamed = unnamed.into_iter();
    for slot in slots.iter_mut().filter(|s| s.is_none()) {
        *slot = unnamed.next();
    }
    let mut out: Vec<String> = slots.into_iter().map(Option::unwrap_or_default).collect();
    if let Some(first) = out.first_mut() {
        let mut text: String = others.concat();
        text.push_str(first);
        *first = text;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// nvcc 13.5, `-c -Xptxas -v -gencode arch=compute_80,code=sm_80
    /// -gencode arch=compute_86,code=[sm_86,compute_86]`, verbatim: the
    /// `__launch_bounds__(1024, 2)` warning is sm_86's (printed before its
    /// header), and a host compiler warning sits among the runs.
    const TWO_ARCH_LOG: &str = "ptxas info    : 0 bytes gmem\n\
ptxas info    : Compiling entry function 'narrow' for 'sm_80'\n\
ptxas info    : Function properties for narrow\n\
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Used 8 registers, used 0 barriers, 360 bytes cmem[0]\n\
ptxas info    : Compile time = 2.487 ms\n\
ptxas info    : Compiling entry function '_Z4widePf' for 'sm_80'\n\
ptxas info    : Function properties for _Z4widePf\n\
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Used 8 registers, used 0 barriers, 360 bytes cmem[0]\n\
ptxas info    : Compile time = 1.191 ms\n\
ptxas warning : Value of threads per SM for entry _Z4widePf is out of range. .minnctapersm will be ignored\n\
ptxas info    : 0 bytes gmem\n\
ptxas info    : Compiling entry function 'narrow' for 'sm_86'\n\
ptxas info    : Function properties for narrow\n\
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Used 8 registers, used 0 barriers, 360 bytes cmem[0]\n\
ptxas info    : Compile time = 2.085 ms\n\
ptxas info    : Compiling entry function '_Z4widePf' for 'sm_86'\n\
ptxas info    : Function properties for _Z4widePf\n\
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Used 8 registers, used 0 barriers, 360 bytes cmem[0]\n\
ptxas info    : Compile time = 1.009 ms\n\
";

    #[test]
    fn a_multi_arch_log_splits_into_one_log_per_arch() {
        let archs = ["sm_80".to_string(), "sm_86".to_string()];
        let log = TWO_ARCH_LOG.replacen(
            "ptxas warning",
            "lb.cu(2): warning #177-D: variable \"y\" was declared but never referenced\nptxas warning",
            1,
        );
        let parts = split_by_arch(&log, &archs).expect("two runs, two archs");
        assert_eq!(parts.len(), 2);
        for (part, arch) in parts.iter().zip(&archs) {
            let parsed = parse_log(part).expect("a per-arch log parses");
            assert_eq!(parsed.modules.len(), 1, "{part}");
            let names: Vec<&str> = parsed.kernels.iter().map(|k| k.name.as_str()).collect();
            assert_eq!(names, ["narrow", "_Z4widePf"], "{part}");
            assert!(parsed
                .kernels
                .iter()
                .all(|k| k.arch.as_deref() == Some(arch.as_str())));
        }
        let wide = |part: &str| {
            let parsed = parse_log(part).expect("parses");
            parsed.kernels[1].warnings().count()
        };
        assert_eq!((wide(&parts[0]), wide(&parts[1])), (0, 1));
        assert!(parts[0].contains("warning #177-D") && !parts[1].contains("#177-D"));
        // Nothing is lost or repeated.
        let total: usize = parts.iter().map(|p| p.lines().count()).sum();
        assert_eq!(total, log.lines().count());
        // The runs are matched by the arch they name, not by position.
        let reversed = ["sm_86".to_string(), "sm_80".to_string()];
        let swapped = split_by_arch(&log, &reversed).expect("two runs");
        assert_eq!(
            swapped[0].lines().filter(|l| l.contains("sm_86")).count(),
            2
        );
        // A run naming an arch that was not asked for is not guessed.
        assert!(split_by_arch(&log, &["sm_80".to_string(), "sm_90".to_string()]).is_none());
        assert!(split_by_arch(&log, &["sm_80".to_string()]).is_none());
    }

    #[test]
    fn runs_without_kernels_take_the_archs_in_order() {
        let archs = ["sm_80".to_string(), "sm_90".to_string()];
        let log = "ptxas info    : 0 bytes gmem\nptxas info    : 0 bytes gmem\n";
        let parts = split_by_arch(log, &archs).expect("two runs");
        assert_eq!(parts, ["ptxas info    : 0 bytes gmem\n"; 2]);
        assert_eq!(split_by_arch("", &archs).expect("no runs"), ["", ""]);
    }

    const SAMPLE: &str = "\
ptxas warning : Stack size for entry function '_Z15calls_recursivePi' cannot be statically determined
ptxas info    : 4022 bytes gmem, 32 bytes cmem[3], 32 bytes cmem[4]
ptxas info    : Compiling entry function '_Z15calls_recursivePi' for 'sm_80'
ptxas info    : Function properties for _Z15calls_recursivePi
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 24 registers, used 0 barriers, 360 bytes cmem[0]
ptxas info    : Compile time = 1.615 ms
ptxas info    : Function properties for _Z3fibi
    24 bytes stack frame, 20 bytes spill stores, 20 bytes spill loads
ptxas info    : Compiling entry function '_Z12spill_kernelPKfPfi' for 'sm_80'
ptxas info    : Function properties for _Z12spill_kernelPKfPfi
    1064 bytes stack frame, 2152 bytes spill stores, 2420 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 1064 bytes cumulative stack size, 372 bytes cmem[0]
ptxas info    : Compile time = 113.890 ms
ptxas info    : Compiling entry function 'saxpy' for 'sm_80'
ptxas info    : Function properties for saxpy
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 1 barriers, 1024 bytes smem, 380 bytes cmem[0]
";

    #[test]
    fn entries_functions_and_module() {
        let log = parse_log(SAMPLE).unwrap();
        assert_eq!(log.kernels.len(), 3);
        let rec = &log.kernels[0];
        assert_eq!(rec.name, "_Z15calls_recursivePi");
        assert_eq!(rec.arch.as_deref(), Some("sm_80"));
        assert_eq!(rec.registers, Some(24));
        assert_eq!(rec.cmem, BTreeMap::from([(0, 360)]));
        assert_eq!(rec.gmem, 4022);
        assert_eq!(rec.diagnostics.len(), 1);
        assert_eq!(rec.cumulative_stack, None);
        let spill = &log.kernels[1];
        assert_eq!(
            (spill.stack_frame, spill.spill_stores, spill.spill_loads),
            (1064, 2152, 2420)
        );
        assert_eq!(spill.cumulative_stack, Some(1064));
        let saxpy = &log.kernels[2];
        assert_eq!((saxpy.static_smem, saxpy.barriers), (1024, Some(1)));
        assert_eq!(log.functions.len(), 1);
        assert_eq!(log.functions[0].name, "_Z3fibi");
        assert_eq!(log.functions[0].arch.as_deref(), Some("sm_80"));
        assert_eq!(log.functions[0].stack_frame, 24);
        assert_eq!(log.modules.len(), 1);
        assert_eq!(log.modules[0].cmem, BTreeMap::from([(3, 32), (4, 32)]));
        assert_eq!(log.modules[0].arch.as_deref(), Some("sm_80"));
        assert_eq!(
            log.diagnostics[0].symbol.as_deref(),
            Some("_Z15calls_recursivePi")
        );
    }

    #[test]
    fn old_formats() {
        let log = parse_log(
            "ptxas info    : Compiling entry function 'acos_main'\n\
             ptxas info    : Used 4 registers, 60+56 bytes lmem, 44+40 bytes smem, 20 bytes cmem[1], 12 bytes cmem[14], 3 textures\n\
             ptxas info    : Compiling entry function '_Z1kv' for 'sm_52'\n\
             ptxas info    : Used 46 registers, 360 bytes cmem[0], 12 bytes cmem[2]\r\n",
        )
        .unwrap();
        let k = &log.kernels[0];
        assert_eq!(k.arch, None);
        assert_eq!(
            (k.registers, k.lmem, k.static_smem),
            (Some(4), Some(116), 84)
        );
        assert_eq!(k.cmem, BTreeMap::from([(1, 20), (14, 12)]));
        assert_eq!(k.barriers, None);
        assert_eq!(log.kernels[1].cmem, BTreeMap::from([(0, 360), (2, 12)]));
    }

    #[test]
    fn non_entries_before_entries_get_the_run_arch() {
        let log = parse_log(
            "ptxas info    : 0 bytes gmem\n\
             ptxas info    : Function properties for _Z6helperfi\n    \
             64 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
             ptxas info    : Compile time = 2.504 ms\n\
             ptxas info    : Compiling entry function '_Z12calls_helperPfi' for 'sm_90a'\n\
             ptxas info    : Used 12 registers, used 0 barriers\n\
             ptxas info    : 0 bytes gmem\n\
             ptxas info    : Function properties for _Z6helperfi\n    \
             8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n",
        )
        .unwrap();
        assert_eq!(log.functions[0].arch.as_deref(), Some("sm_90a"));
        assert_eq!(log.functions[0].stack_frame, 64);
        assert_eq!(log.functions[1].arch, None);
        assert_eq!(log.kernels[0].stack_frame, 0);
    }

    #[test]
    fn nvlink_figures_win() {
        let log = parse_log(
            "ptxas info    : 0 bytes gmem\n\
             ptxas info    : Compiling entry function '_Z9calls_farPfi' for 'sm_80'\n\
             ptxas info    : Used 24 registers, used 0 barriers, 364 bytes cmem[0]\n\
             ptxas info    : 0 bytes gmem\n\
             ptxas info    : Compiling entry function '_Z9calls_farPfi' for 'sm_90'\n\
             ptxas info    : Used 24 registers, used 0 barriers\n\
             nvlink info    : 0 bytes gmem (target: sm_90)\n\
             nvlink info    : Function properties for '_Z9calls_farPfi': (target: sm_90)\n\
             nvlink info    : used 67 registers, used 0 barriers, 16 stack, 0 bytes smem, 540 bytes cmem[0], 0 bytes lmem (target: sm_90)\n",
        )
        .unwrap();
        assert_eq!(log.kernels[0].registers, Some(24));
        assert!(!log.kernels[0].linked);
        let k = &log.kernels[1];
        assert_eq!(
            (k.registers, k.linked, k.cumulative_stack),
            (Some(67), true, Some(16))
        );
        assert_eq!(k.cmem, BTreeMap::from([(0, 540)]));
        assert_eq!(log.linked.len(), 1);
        assert_eq!(log.linked[0].arch.as_deref(), Some("sm_90"));
    }

    #[test]
    fn one_arch_nvlink_record_applies_when_unambiguous() {
        let text = "ptxas info    : Compiling entry function 'k' for 'sm_80'\n\
                    ptxas info    : Used 24 registers, used 0 barriers\n\
                    nvlink info    : Function properties for 'k':\n\
                    nvlink info    : used 46 registers, used 0 barriers, 72 stack, 0 bytes smem, 540 bytes cmem[0], 0 bytes lmem\n";
        let log = parse_log(text).unwrap();
        assert_eq!(log.kernels[0].registers, Some(46));
        let two = format!(
            "ptxas info    : Compiling entry function 'k' for 'sm_90'\n\
             ptxas info    : Used 20 registers, used 0 barriers\n{text}"
        );
        let log = parse_log(&two).unwrap();
        assert_eq!(log.kernels[0].registers, Some(20));
        assert_eq!(log.kernels[1].registers, Some(24));
    }

    #[test]
    fn diagnostics_are_collected_and_attached() {
        let log = parse_log(
            "ptxas info    : Overriding maximum register limit 256 for 'k' with  24 of maxrregcount option\n\
             ptxas warning : Value of threads per SM for entry k is out of range. .minnctapersm will be ignored\n\
             ptxas warning : Registers are spilled to local memory in function '_Z3fibi', 20 bytes spill stores, 20 bytes spill loads\n\
             ptxas error   : Entry function 'k' uses too much shared data (0x10400 bytes, 0xc000 max)\n\
             ptxas fatal   : Ptx assembly aborted due to errors\n\
             ptxas info    : 0 bytes gmem\n\
             ptxas info    : Compiling entry function 'k' for 'sm_86'\n\
             ptxas info    : Used 8 registers, used 0 barriers\n",
        )
        .unwrap();
        let overridings: Vec<_> = log.diagnostics.iter().map(Diagnostic::overriding).collect();
        assert_eq!(
            overridings,
            [Some(Overriding::Other), None, None, None, None]
        );
        let global = parse_log(
            "ptxas info    : Overriding global maxrregcount 24 with entry-specific value 32\n",
        )
        .unwrap();
        assert_eq!(
            global.diagnostics[0].overriding(),
            Some(Overriding::GlobalMaxrregcount)
        );
        let k = &log.kernels[0];
        assert_eq!(k.diagnostics.len(), 3);
        assert_eq!(k.warnings().count(), 1);
        assert!(k
            .diagnostics
            .iter()
            .all(|d| d.arch.as_deref() == Some("sm_86")));
        assert_eq!(log.diagnostics.len(), 5);
        assert_eq!(log.errors().count(), 2);
        assert_eq!(log.diagnostics[2].symbol.as_deref(), Some("_Z3fibi"));
        assert_eq!(log.diagnostics[4].symbol, None);
    }

    /// nvcc 13.5, `-cubin -arch=sm_80 -maxrregcount=16 -Xptxas -v
    /// kernels.cu` (tests/fixtures/regen.sh).
    const CAP_16: &str =
        include_str!("../../../tests/fixtures/ptxas-13.5-maxrregcount16-sm_80.log");

    /// nvcc 13.5, `-cubin -arch=sm_90 -maxrregcount=300 -Xptxas -v
    /// kernels.cu` (tests/fixtures/regen.sh).
    const CAP_300: &str =
        include_str!("../../../tests/fixtures/ptxas-13.5-maxrregcount300-sm_90.log");

    #[test]
    fn a_warning_that_names_no_kernel_goes_to_every_kernel_of_its_run() {
        let log = parse_log(CAP_16).unwrap();
        let adjusted = Warning {
            kind: WarningKind::RegisterCapAdjusted {
                requested: 16,
                applied: 24,
            },
            text:
                "For profile sm_80 adjusting per thread register count of 16 to lower bound of 24"
                    .into(),
        };
        assert_eq!(log.kernels.len(), 13);
        for k in &log.kernels {
            let warnings: Vec<Warning> = k
                .diagnostics
                .iter()
                .filter_map(Diagnostic::warning)
                .collect();
            assert_eq!(warnings.first(), Some(&adjusted), "{}", k.name);
            assert!(k
                .diagnostics
                .iter()
                .all(|d| d.arch.as_deref() == Some("sm_80")));
            // In log order: the run's warning (line 1) before the kernel's notes.
            assert!(k.diagnostics.windows(2).all(|w| w[0].line < w[1].line));
        }
        // Two runs: each run's own warning goes to its kernels only.
        let two = parse_log(
            "ptxas warning : For profile sm_80 adjusting per thread register count of 16 to lower bound of 24\n\
             ptxas info    : 0 bytes gmem\n\
             ptxas info    : Compiling entry function 'k' for 'sm_80'\n\
             ptxas info    : Used 8 registers, used 0 barriers\n\
             ptxas warning : Too big maxrregcount value specified 300, will be ignored\n\
             ptxas info    : 0 bytes gmem\n\
             ptxas info    : Compiling entry function 'k' for 'sm_90'\n\
             ptxas info    : Used 8 registers, used 0 barriers\n",
        )
        .unwrap();
        let kinds = |k: &KernelRecord| -> Vec<WarningKind> {
            k.diagnostics
                .iter()
                .filter_map(Diagnostic::warning)
                .map(|w| w.kind)
                .collect()
        };
        assert_eq!(
            kinds(&two.kernels[0]),
            [WarningKind::RegisterCapAdjusted {
                requested: 16,
                applied: 24
            }]
        );
        assert_eq!(
            kinds(&two.kernels[1]),
            [WarningKind::RegisterCapIgnored { requested: 300 }]
        );
        assert_eq!(two.diagnostics[1].arch.as_deref(), Some("sm_90"));
    }

    #[test]
    fn the_register_cap_ptxas_applied_is_read_from_its_note() {
        let log = parse_log(CAP_16).unwrap();
        let cap = |name: &str| {
            let k = log.kernels.iter().find(|k| k.name == name).unwrap();
            k.diagnostics.iter().find_map(Diagnostic::register_cap)
        };
        assert_eq!(cap("saxpy"), Some(24));
        // `__launch_bounds__` overrides -maxrregcount: no note names it.
        assert_eq!(cap("_Z9lb_kernelPf"), None);
        let log = parse_log(CAP_300).unwrap();
        let k = log.kernels.iter().find(|k| k.name == "saxpy").unwrap();
        assert_eq!(
            k.diagnostics.iter().find_map(Diagnostic::register_cap),
            Some(255)
        );
        assert!(k
            .diagnostics
            .iter()
            .filter_map(Diagnostic::warning)
            .any(|w| w.kind == WarningKind::RegisterCapIgnored { requested: 300 }));
    }

    #[test]
    fn every_warning_shape_is_typed_and_an_unknown_one_keeps_its_words() {
        let read = |line: &str| {
            let log = parse_log(line).unwrap();
            log.diagnostics[0].warning().unwrap()
        };
        // The shapes of docs' ptxas-output reference (W1..W6), as 13.5 prints them.
        let cases = [
            ("Stack size for entry function '_Z15calls_recursivePi' cannot be statically determined", WarningKind::StackUnknown),
            ("Value of threads per SM for entry _Z12spill_kernelPKfPfi is out of range. .minnctapersm will be ignored", WarningKind::MinBlocksIgnored),
            ("Registers are spilled to local memory in function '_Z3fibi', 20 bytes spill stores, 20 bytes spill loads", WarningKind::Spills { stores: 20, loads: 20 }),
            ("Local memory used for function '_Z3fibi', size of stack frame: 24 bytes", WarningKind::LocalMemory { frame: 24 }),
            ("Too big maxrregcount value specified 300, will be ignored", WarningKind::RegisterCapIgnored { requested: 300 }),
            ("Too many maxnreg specified for entry _Z1bPf, will be ignored", WarningKind::MaxnregIgnored),
            ("For profile sm_90 adjusting per thread register count of 16 to lower bound of 24", WarningKind::RegisterCapAdjusted { requested: 16, applied: 24 }),
            ("Something new in CUDA 14 for entry k", WarningKind::Other),
        ];
        for (text, kind) in cases {
            let w = read(&format!("ptxas warning : {text}\n"));
            assert_eq!((w.kind, w.text.as_str()), (kind, text));
        }
        // Every warning of the captured 13.5 logs has a known shape.
        for log in [
            include_str!("../../../tests/fixtures/ptxas-13.5-warnings-sm_86.log"),
            include_str!("../../../tests/fixtures/ptxas-13.5-sm_80.log"),
            CAP_16,
            CAP_300,
        ] {
            for d in &parse_log(log).unwrap().diagnostics {
                if let Some(w) = d.warning() {
                    assert_ne!(w.kind, WarningKind::Other, "{}", w.text);
                }
            }
        }
        // Notes and errors are not warnings.
        let log = parse_log(CAP_16).unwrap();
        assert!(log
            .diagnostics
            .iter()
            .filter(|d| d.severity != Severity::Warning)
            .all(|d| d.warning().is_none()));
    }

    #[test]
    fn too_much_static_shared_memory_is_read() {
        assert_eq!(
            too_much_shared(
                "ptxas error   : Entry function '_Z3bigPf' uses too much shared data (0xf400 bytes, 0xc000 max)"
            ),
            Some(TooMuchShared {
                kernel: "_Z3bigPf".into(),
                bytes: 0xf400,
                max: 0xc000,
            })
        );
        assert_eq!(
            too_much_shared("ptxas fatal   : Ptx assembly aborted due to errors"),
            None
        );
        assert_eq!(
            too_much_shared(
                "Entry function 'k' uses too much shared data (0xzz bytes, 0xc000 max)"
            ),
            None
        );
    }

    #[test]
    fn warnings_go_to_the_next_record_of_their_kernel() {
        let log = parse_log(
            "ptxas warning : Stack size for entry function 'k' cannot be statically determined\n\
             ptxas info    : 0 bytes gmem\n\
             ptxas info    : Compiling entry function 'k' for 'sm_80'\n\
             ptxas info    : Used 8 registers, used 0 barriers\n\
             ptxas warning : Stack size for entry function 'k' cannot be statically determined\n\
             ptxas info    : 0 bytes gmem\n\
             ptxas info    : Compiling entry function 'k' for 'sm_90'\n\
             ptxas info    : Used 8 registers, used 0 barriers\n",
        )
        .unwrap();
        assert_eq!(log.kernels[0].diagnostics[0].line, 1);
        assert_eq!(log.kernels[1].diagnostics[0].line, 5);
    }

    #[test]
    fn malformed_resource_lines_are_errors() {
        for (text, line) in [
            ("ptxas info    : Used x registers, used 0 barriers\n", 1),
            ("ptxas info    : Compiling entry function 'k' for 'sm_80'\nptxas info    : Used 99999999999 registers\n", 2),
            ("ptxas info    : Compiling entry function k for sm_80\n", 1),
            ("ptxas info    : Used 8 registers\n", 1),
            ("ptxas info    : Compiling entry function 'k' for 'sm_80'\n    x bytes stack frame, 0 bytes spill stores\n", 2),
            ("\n    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n", 2),
            ("ptxas info    : abc bytes gmem\n", 1),
            ("nvlink info    : used 1 registers\n", 1),
        ] {
            let e = parse_log(text).unwrap_err();
            assert_eq!(e.line, line, "{text}");
            let msg = e.to_string();
            assert!(msg.starts_with("cannot read ptxas log line"), "{msg}");
        }
    }

    #[test]
    fn gpgpu_sim_era_diagnostics() {
        let log = parse_log(
            "ptxas /tmp/tmpxft_1.ptx, line 5; warning : Double is not supported. Demoting to float\n\
             ptxas /tmp/tmpxft_1.ptx, line 9; error   : Duplicate definition of function 'k'\n\
             ptxas fatal   : Ptx assembly aborted due to errors\n",
        )
        .unwrap();
        let sev: Vec<Severity> = log.diagnostics.iter().map(|d| d.severity).collect();
        assert_eq!(sev, [Severity::Warning, Severity::Error, Severity::Fatal]);
        assert_eq!(log.diagnostics[1].symbol.as_deref(), Some("k"));
        assert!(log.kernels.is_empty());
    }

    #[test]
    fn unrelated_lines_and_unknown_fields_are_ignored() {
        let log = parse_log(
            "nvcc warning : The 'compute_75' target is deprecated\n\
             kernels.cu(3): warning #177-D: variable declared but never referenced\n\
             ptxas info    : Compiling entry function 'k' for 'sm_80'\n\
             ptxas info    : Used 8 registers, used 0 barriers, 7 widgets, 3 textures\n",
        )
        .unwrap();
        assert_eq!(log.kernels.len(), 1);
        assert_eq!(log.kernels[0].registers, Some(8));
        assert!(log.diagnostics.is_empty());
    }

    mod props {
        use super::super::parse_log;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn never_panics_on_arbitrary_text(s in "\\PC*") {
                let _ = parse_log(&s);
            }

            #[test]
            fn never_panics_on_ptxas_like_text(
                lines in proptest::collection::vec(
                    "(ptxas|nvlink) (info|warning|error|fatal) *: ?(Used|used|Compiling entry function|Function properties for)? ?'?[a-z_0-9]{0,4}'?( for '?sm_[0-9]{0,3}'?)?(, ?[0-9+]{0,4} ?(bytes|stack|registers|barriers)? ?(smem|cmem\\[[0-9]{0,2}\\]?|gmem|lmem|cumulative stack size)?){0,3}( \\(target: sm_80\\))?:?|    [0-9]{0,3} bytes stack frame(, [0-9]{0,3} bytes spill (stores|loads)){0,2}",
                    0..12),
            ) {
                let text = lines.join("\n");
                let a = parse_log(&text);
                let b = parse_log(&text);
                prop_assert_eq!(a, b);
            }

            #[test]
            fn never_panics_on_mutated_sample(
                cuts in proptest::collection::vec((0usize..2000, 0usize..40, "\\PC{0,6}"), 1..6),
            ) {
                let mut text = super::SAMPLE.to_string();
                for (at, len, with) in cuts {
                    let mut at = at.min(text.len());
                    while !text.is_char_boundary(at) { at -= 1; }
                    let mut end = (at + len).min(text.len());
                    while !text.is_char_boundary(end) { end -= 1; }
                    text.replace_range(at..end, &with);
                }
                let _ = parse_log(&text);
            }
        }
    }
}
