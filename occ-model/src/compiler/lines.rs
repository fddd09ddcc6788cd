//! Where a kernel spills and where its register pressure peaks, by source
//! line.
//!
//! The inputs are two texts of NVIDIA's disassembler over a cubin built with
//! `-lineinfo`, read line by line (they can be far larger than the cubin):
//!
//! - `nvdisasm -c -g` ([`LineInfo`]): every instruction with its offset, a
//!   `//## File "<path>", line <n>` line before each run of instructions
//!   from one source line (the innermost one: code inlined from a header or
//!   instantiated from a template names the header's line), and spill and
//!   refill instructions marked `(*"SpillRefill"*)`;
//! - `nvdisasm -c -plr -lrm count` ([`LifeRanges`]): the same instructions,
//!   each with the number of live general-purpose registers in a trailing
//!   `// | GPR | PRED | ... |` column (`-plr` ignores `-g`, hence two runs).
//!
//! The build runs nvdisasm once: [`LineInfo::from_cubin`] reads the line
//! table `-g` prints from the cubin's `.debug_line` section (DWARF, by
//! hand beside the crate's other ELF reading: the `object` crate refuses
//! sm_90 cubins, whose section headers are misaligned), and
//! [`LineInfo::line`] then reads the spill marks and branches from the
//! `-plr` text, which carries them too (`tests/tests/it/lines.rs` checks
//! that the two readings agree).
//!
//! [`source_lines`] joins them per function (one `.text.<symbol>` section
//! each) into [`SourceLines`]: the spill sites (file, line, bytes stored and
//! loaded, the innermost loop around them) and the point of peak pressure.
//! A loop is a backward branch: the instructions from its target to the
//! branch; its line is the first line of its code in the branch's file (a
//! `for` or `while` statement's line).
//!
//! ```
//! use occ_model::compiler::lines::{source_lines, LifeRanges, LineInfo};
//!
//! let mut info = LineInfo::default();
//! for line in [
//!     "\t.section\t.text.k,\"ax\",@progbits",
//!     ".L_x_1:",
//!     "\t//## File \"/src/app/kernels/k.cu\", line 7",
//!     "        /*0010*/                   STL [R1+0x4], R2   (*\"SpillRefill\"*);",
//!     "\t//## File \"/src/app/kernels/k.cu\", line 5",
//!     "        /*0020*/              @P0 BRA `(.L_x_1) ;",
//! ] {
//!     info.line(line);
//! }
//! let mut ranges = LifeRanges::default();
//! for line in [
//!     "\t.section\t.text.k,\"ax\",@progbits",
//!     "   // | GPR   | PRED   |",
//!     "        /*0010*/  STL [R1+0x4], R2 ;   // |  12   |        |",
//!     "        /*0020*/  @P0 BRA `(.L_x_1) ;  // |   3   |   1    |",
//! ] {
//!     ranges.line(line);
//! }
//! let lines = source_lines(&info, &ranges, &["/src/app"]);
//! let k = &lines["k"];
//! assert_eq!(k.spills[0].file, "kernels/k.cu");
//! assert_eq!((k.spills[0].line, k.spills[0].loop_line), (7, Some(5)));
//! assert_eq!(k.spills[0].stores, 4);
//! assert_eq!(k.describe(), "at kernels/k.cu:7 (loop at :5), peak pressure 12 at :7");
//! ```

use std::collections::{BTreeMap, HashMap};

/// The manifest schema's types this module fills (defined in [`crate::schema::manifest`]).
pub use crate::schema::manifest::{PressurePoint, SourceLines, SpillSite};

impl SpillSite {
    /// Stores plus loads, bytes.
    pub fn bytes(&self) -> u32 {
        self.stores.saturating_add(self.loads)
    }
}

impl SourceLines {
    /// The site with the most bytes (the first in order among equals).
    pub fn worst(&self) -> Option<&SpillSite> {
        self.spills.iter().rev().max_by_key(|s| s.bytes())
    }

    /// Whether there is nothing to say.
    pub fn is_empty(&self) -> bool {
        self.spills.is_empty() && self.peak_pressure.is_none()
    }

    /// One phrase for messages: `at kernels/q.cu:142 (loop at :130) and 2
    /// more lines, peak pressure 255 at :151` (a file is named again only
    /// when it differs from the site's); `peak pressure 40 at kernels/q.cu:9`
    /// without spills; empty when there is nothing to say.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        let worst = self.worst();
        if let Some(site) = worst {
            out.push_str(&format!("at {}:{}", site.file, site.line));
            if let Some(l) = site.loop_line {
                out.push_str(&format!(" (loop at :{l})"));
            }
            match self.spills.len() - 1 {
                0 => {}
                1 => out.push_str(" and 1 more line"),
                n => out.push_str(&format!(" and {n} more lines")),
            }
        }
        if let Some(p) = &self.peak_pressure {
            if !out.is_empty() {
                out.push_str(", ");
            }
            let file = match worst {
                Some(site) if site.file == p.file => String::new(),
                _ => p.file.clone(),
            };
            out.push_str(&format!(
                "peak pressure {} at {file}:{}",
                p.registers, p.line
            ));
        }
        out
    }
}

/// A source location: an index into [`LineInfo`]'s file names, and a line.
type Location = (usize, u32);

/// What `nvdisasm -c -g` says about each function of a cubin; feed it the
/// output one line at a time with [`LineInfo::line`]. Lines of other shapes
/// are skipped, so a newer nvdisasm's additions do no harm.
#[derive(Debug, Clone, Default)]
pub struct LineInfo {
    files: Vec<String>,
    file_ids: HashMap<String, usize>,
    functions: BTreeMap<String, Code>,
    current: Option<String>,
    /// A `//## File` line waiting for its first instruction.
    pending: Option<Location>,
    /// The last `//## File` line read. nvdisasm prints one only where the
    /// location changes, also from one section to the next: a function
    /// whose first instruction is at the line where the one before it
    /// ended (two instantiations of a one-line template) has none.
    last: Option<Location>,
    /// Labels waiting for the offset of the next instruction.
    labels: Vec<String>,
    /// Whether the locations came from the cubin's line table
    /// ([`LineInfo::from_cubin`]): `//## File` lines are then ignored.
    located: bool,
}

/// One function's instructions, as far as the analysis needs them.
#[derive(Debug, Clone, Default)]
struct Code {
    /// (offset of the first instruction, its location): each location
    /// holds until the next entry.
    runs: Vec<(u32, Location)>,
    labels: HashMap<String, u32>,
    /// (offset, target label) of each branch.
    jumps: Vec<(u32, String)>,
    /// (offset, store?, bytes) of each spill or refill instruction.
    spills: Vec<(u32, bool, u32)>,
}

impl Code {
    fn location(&self, offset: u32) -> Option<Location> {
        let i = self.runs.partition_point(|(start, _)| *start <= offset);
        i.checked_sub(1).map(|i| self.runs[i].1)
    }

    /// The line of the loop from `start` to its backward branch at `end`:
    /// the first line of its code in the branch's file. The branch carries
    /// the loop's condition, which ptxas may give the `for` line or the
    /// body's last (sm_120 does); the `for` statement precedes its body.
    fn loop_line(&self, start: u32, end: u32) -> Option<Location> {
        let (file, _) = self.location(end)?;
        let first = self
            .runs
            .partition_point(|(s, _)| *s <= start)
            .saturating_sub(1);
        self.runs[first..]
            .iter()
            .take_while(|(s, _)| *s <= end)
            .filter(|(_, (f, _))| *f == file)
            .map(|(_, location)| *location)
            .min_by_key(|(_, line)| *line)
    }
}

impl LineInfo {
    /// The locations of a cubin built with `-lineinfo`, read from its
    /// `.debug_line` section (the table `nvdisasm -g` prints as `//## File`
    /// lines), with no instruction yet: feed it `nvdisasm -c -plr -lrm
    /// count` output with [`LineInfo::line`] for the spill marks and the
    /// branches, so that one nvdisasm run gives what two gave. `None` when
    /// the cubin is not an ELF file with a line table this reader knows
    /// (DWARF versions 2 to 4, the 32- and 64-bit formats).
    pub fn from_cubin(cubin: &[u8]) -> Option<LineInfo> {
        let (data, functions) = crate::code_hash::debug_line(cubin)?;
        let mut info = LineInfo {
            located: true,
            ..LineInfo::default()
        };
        for row in line_program(data, &functions)? {
            let path = normalize(&unescape(&row.path));
            let id = match info.file_ids.get(&path) {
                Some(id) => *id,
                None => {
                    info.files.push(path.clone());
                    info.file_ids.insert(path, info.files.len() - 1);
                    info.files.len() - 1
                }
            };
            info.functions
                .entry(row.function)
                .or_default()
                .runs
                .push((row.offset, (id, row.line)));
        }
        for code in info.functions.values_mut() {
            code.runs.sort_by_key(|(offset, _)| *offset);
        }
        Some(info)
    }

    /// Reads one line of `nvdisasm -c -g` output (without its newline), or
    /// of `nvdisasm -c -plr` output into a [`LineInfo::from_cubin`] (the
    /// live-register columns after `// |` are left aside).
    pub fn line(&mut self, line: &str) {
        let line = match line.find("// |") {
            Some(at) => line[..at].trim_end(),
            None => line,
        };
        if let Some(section) = section(line) {
            self.current = section.map(str::to_string);
            if let Some(name) = section {
                self.functions.entry(name.to_string()).or_default();
            }
            self.pending = self.last;
            self.labels.clear();
            return;
        }
        let Some(name) = &self.current else {
            return;
        };
        let trimmed = line.trim();
        if self.located && trimmed.starts_with("//## File \"") {
            return;
        }
        if let Some(rest) = trimmed.strip_prefix("//## File \"") {
            if let Some((path, tail)) = rest.split_once("\", line ") {
                let digits: String = tail.chars().take_while(char::is_ascii_digit).collect();
                if let Ok(n) = digits.parse::<u32>() {
                    // One id per file however the line table spells it;
                    // nvdisasm escapes bytes outside ASCII (`j\303\274rgen`).
                    let path = normalize(&unescape(path));
                    let id = match self.file_ids.get(&path) {
                        Some(id) => *id,
                        None => {
                            self.files.push(path.clone());
                            self.file_ids.insert(path, self.files.len() - 1);
                            self.files.len() - 1
                        }
                    };
                    self.pending = Some((id, n));
                    self.last = self.pending;
                }
            }
            return;
        }
        let Some(code) = self.functions.get_mut(name) else {
            return;
        };
        if let Some((offset, text)) = instruction(line) {
            if let Some(location) = self.pending.take() {
                code.runs.push((offset, location));
            }
            for label in self.labels.drain(..) {
                code.labels.insert(label, offset);
            }
            let opcode = opcode(text);
            if text.contains("(*\"SpillRefill\"*)") {
                if opcode.starts_with("STL") {
                    code.spills.push((offset, true, width(opcode)));
                } else if opcode.starts_with("LDL") {
                    code.spills.push((offset, false, width(opcode)));
                }
            }
            let base = opcode.split('.').next().unwrap_or("");
            if matches!(base, "BRA" | "JMP" | "BRX" | "JMX") || opcode.starts_with("CALL.REL.NOINC")
            {
                if let Some(target) = text
                    .split_once("`(")
                    .and_then(|(_, rest)| rest.split_once(')'))
                    .map(|(target, _)| target.trim())
                {
                    code.jumps.push((offset, target.to_string()));
                }
            }
        } else if let Some(label) = line.strip_suffix(':') {
            if !label.is_empty() && !label.starts_with(char::is_whitespace) {
                self.labels.push(label.to_string());
            }
        }
    }

    /// The functions read so far (their symbols), sorted.
    pub fn functions(&self) -> impl Iterator<Item = &str> {
        self.functions.keys().map(String::as_str)
    }
}

/// One row of a line table: the function, the offset in its code, the
/// file as the table names it (folder and name joined by `/`, as
/// nvdisasm prints it) and the line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    function: String,
    offset: u32,
    path: String,
    line: u32,
}

/// A reader of a DWARF section, bounds-checked: each read is `None` past
/// the end.
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn u8(&mut self) -> Option<u8> {
        let b = *self.data.get(self.at)?;
        self.at += 1;
        Some(b)
    }
    fn bytes(&mut self, n: usize) -> Option<&[u8]> {
        let b = self.data.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(b)
    }
    fn uint(&mut self, n: usize) -> Option<u64> {
        let b = self.bytes(n)?;
        Some(
            b.iter()
                .rev()
                .fold(0u64, |v, byte| (v << 8) | u64::from(*byte)),
        )
    }
    fn uleb(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }
    fn sleb(&mut self) -> Option<i64> {
        let mut value = 0i64;
        let mut shift = 0;
        loop {
            let b = self.u8()?;
            if shift < 64 {
                value |= i64::from(b & 0x7f) << shift;
            }
            shift += 7;
            if b & 0x80 == 0 {
                if shift < 64 && b & 0x40 != 0 {
                    value |= -1i64 << shift;
                }
                return Some(value);
            }
        }
    }
    fn string(&mut self) -> Option<&[u8]> {
        let rest = self.data.get(self.at..)?;
        let end = rest.iter().position(|b| *b == 0)?;
        self.at += end + 1;
        Some(&rest[..end])
    }
}

/// The rows of a `.debug_line` section (DWARF versions 2 to 4, the
/// 32- and 64-bit formats; ptxas 13.5 writes version 3), each sequence
/// given to the function `functions` names for the section offset of its
/// `DW_LNE_set_address` operand (the relocation's symbol; a sequence
/// without one is skipped). `None` on a unit this reader does not know.
///
/// Long because it is one state machine, the DWARF standard's section
/// 6.2, read in one pass.
fn line_program(data: &[u8], functions: &crate::code_hash::Relocated) -> Option<Vec<Row>> {
    let mut rows = Vec::new();
    let mut r = Reader { data, at: 0 };
    while r.at < data.len() {
        let (length, offset_size) = match r.uint(4)? {
            0xffff_ffff => (r.uint(8)?, 8),
            n => (n, 4),
        };
        let end = r.at.checked_add(usize::try_from(length).ok()?)?;
        if end > data.len() {
            return None;
        }
        let version = r.uint(2)?;
        if !(2..=4).contains(&version) {
            return None;
        }
        let header_length = usize::try_from(r.uint(offset_size)?).ok()?;
        let program = r.at.checked_add(header_length)?;
        let min_length = u64::from(r.u8()?);
        if version >= 4 {
            r.u8()?; // maximum_operations_per_instruction (1 for GPUs)
        }
        r.u8()?; // default_is_stmt: nvdisasm -g prints every row
        let line_base = i64::from(r.u8()? as i8);
        let line_range = u64::from(r.u8()?);
        let opcode_base = r.u8()?;
        if line_range == 0 || opcode_base == 0 {
            return None;
        }
        let lengths = r.bytes(usize::from(opcode_base - 1))?.to_vec();
        let mut dirs: Vec<String> = Vec::new();
        loop {
            let dir = r.string()?;
            if dir.is_empty() {
                break;
            }
            dirs.push(String::from_utf8_lossy(dir).into_owned());
        }
        let mut files: Vec<String> = Vec::new();
        let file_entry = |r: &mut Reader<'_>, name: &[u8], dirs: &[String]| -> Option<String> {
            let dir = r.uleb()?;
            r.uleb()?; // modification time
            r.uleb()?; // length
            let name = String::from_utf8_lossy(name).into_owned();
            let folder = usize::try_from(dir)
                .ok()
                .and_then(|d| d.checked_sub(1))
                .and_then(|d| dirs.get(d));
            Some(match folder {
                Some(folder) if !name.starts_with('/') => format!("{folder}/{name}"),
                _ => name,
            })
        };
        loop {
            let name = r.string()?.to_vec();
            if name.is_empty() {
                break;
            }
            let file = file_entry(&mut r, &name, &dirs)?;
            files.push(file);
        }
        r.at = program;
        let (mut address, mut file, mut line) = (0u64, 1u64, 1i64);
        let mut function: Option<&String> = None;
        let emit = |rows: &mut Vec<Row>,
                    files: &[String],
                    function: Option<&String>,
                    address: u64,
                    file: u64,
                    line: i64| {
            let (Some(function), Ok(offset), Ok(line)) =
                (function, u32::try_from(address), u32::try_from(line))
            else {
                return;
            };
            let path = usize::try_from(file)
                .ok()
                .and_then(|f| f.checked_sub(1))
                .and_then(|f| files.get(f));
            if let Some(path) = path {
                rows.push(Row {
                    function: function.clone(),
                    offset,
                    path: path.clone(),
                    line,
                });
            }
        };
        while r.at < end {
            let opcode = r.u8()?;
            if opcode >= opcode_base {
                let adjusted = u64::from(opcode - opcode_base);
                address = address.wrapping_add(adjusted / line_range * min_length);
                line = line
                    .saturating_add(line_base)
                    .saturating_add(i64::try_from(adjusted % line_range).ok()?);
                emit(&mut rows, &files, function, address, file, line);
                continue;
            }
            match opcode {
                0 => {
                    let size = usize::try_from(r.uleb()?).ok()?;
                    let next = r.at.checked_add(size)?;
                    match r.u8()? {
                        // DW_LNE_end_sequence
                        1 => {
                            (address, file, line) = (0, 1, 1);
                            function = None;
                        }
                        // DW_LNE_set_address: its operand is what the
                        // relocation names.
                        2 => {
                            let operand = u64::try_from(r.at).ok()?;
                            let value = r.uint(size.checked_sub(1)?)?;
                            let relocated = functions.get(&operand);
                            function = relocated.map(|(name, _)| name);
                            address = value.wrapping_add(relocated.map_or(0, |(_, a)| *a));
                        }
                        // DW_LNE_define_file
                        3 => {
                            let name = r.string()?.to_vec();
                            let file = file_entry(&mut r, &name, &dirs)?;
                            files.push(file);
                        }
                        _ => {}
                    }
                    r.at = next;
                }
                1 => emit(&mut rows, &files, function, address, file, line),
                2 => address = address.wrapping_add(r.uleb()?.wrapping_mul(min_length)),
                3 => line = line.saturating_add(r.sleb()?),
                4 => file = r.uleb()?,
                8 => {
                    let adjusted = u64::from(255 - opcode_base);
                    address = address.wrapping_add(adjusted / line_range * min_length);
                }
                9 => address = address.wrapping_add(r.uint(2)?),
                _ => {
                    for _ in 0..*lengths.get(usize::from(opcode - 1))? {
                        r.uleb()?;
                    }
                }
            }
        }
        r.at = end;
    }
    Some(rows)
}

/// Live registers per instruction, from `nvdisasm -c -plr -lrm count`; feed
/// it the output one line at a time with [`LifeRanges::line`].
#[derive(Debug, Clone, Default)]
pub struct LifeRanges {
    functions: BTreeMap<String, Peak>,
    current: Option<String>,
    /// The column of `GPR` in the current section's table.
    gpr: Option<usize>,
}

/// The most live registers in a function, and every offset where that
/// many are live, in order.
#[derive(Debug, Clone, Default)]
struct Peak {
    registers: u32,
    offsets: Vec<u32>,
}

impl LifeRanges {
    /// Reads one line of `nvdisasm -c -plr -lrm count` output.
    pub fn line(&mut self, line: &str) {
        if let Some(section) = section(line) {
            self.current = section.map(str::to_string);
            if let Some(name) = section {
                self.functions.entry(name.to_string()).or_default();
            }
            self.gpr = None;
            return;
        }
        let Some(name) = &self.current else {
            return;
        };
        let Some(at) = line.rfind("// |") else {
            return;
        };
        let columns: Vec<&str> = line[at + 3..].split('|').map(str::trim).collect();
        let Some((offset, _)) = instruction(&line[..at]) else {
            if let Some(i) = columns.iter().position(|c| *c == "GPR") {
                self.gpr = Some(i);
            }
            return;
        };
        let Some(live) = self
            .gpr
            .and_then(|i| columns.get(i))
            .and_then(|c| c.parse::<u32>().ok())
        else {
            return;
        };
        let Some(peak) = self.functions.get_mut(name) else {
            return;
        };
        if live > peak.registers || peak.offsets.is_empty() {
            peak.registers = live;
            peak.offsets.clear();
        }
        if live == peak.registers {
            peak.offsets.push(offset);
        }
    }
}

/// Joins the two disassemblies of one cubin: each function's
/// A path as nvdisasm prints it in `//## File "…"`, decoded.
///
/// nvcc writes the PTX `.file` name as a C string (each byte outside
/// ASCII as `\ooo`: `hot \303\274.cu` for `hot ü.cu`). ptxas keeps that
/// text as it is and splits it into the line table's folder and file name
/// at its last `/` *or backslash*, so the backslash of the last escape is
/// taken for a separator; nvdisasm joins the two with `/` (nvcc 13.5):
///
/// | file | nvdisasm prints |
/// |---|---|
/// | `kernels/hot ü.cu` | `kernels/hot \303/274.cu` |
/// | `dür/kö.cu` | `d\303\274r/k\303/266.cu` |
/// | `back\slash.cu` | `back\/slash.cu` |
/// | `dür/k.cu` | `d\303\274r/k.cu` (the last separator is a `/`) |
///
/// So the path is read as printed when that is a C string of UTF-8, else
/// with its last `/` as the backslash it was; a name that is neither (not
/// UTF-8) is read lossily. The reading as printed wins where both read:
/// only a name whose last escape is a control character's (`\n`) or a
/// double quote's can read both ways, and occ refuses both
/// ([`crate::compiler::names::check`]; a `"` is no nvcc argument).
pub fn unescape(printed: &str) -> String {
    let as_c = |text: &str| {
        crate::compiler::names::unescape_c(text.as_bytes()).and_then(|b| String::from_utf8(b).ok())
    };
    if let Some(path) = as_c(printed) {
        return path;
    }
    let split = printed
        .rsplit_once('/')
        .and_then(|(dir, file)| as_c(&format!("{dir}\\{file}")));
    split.unwrap_or_else(|| {
        let bytes = crate::compiler::names::unescape_c(printed.as_bytes());
        String::from_utf8_lossy(bytes.as_deref().unwrap_or(printed.as_bytes())).into_owned()
    })
}

/// The index of each function symbol of a cubin's symbol table, by name:
/// what `nvdisasm -fun` takes to disassemble only those functions (their
/// `.text` sections). `None` when `cubin` is not a 64-bit ELF file.
pub fn function_indices(cubin: &[u8]) -> Option<BTreeMap<String, u32>> {
    crate::code_hash::function_indices(cubin)
}

/// [`SourceLines`], by symbol. `roots` are the crate root as spelled
/// (and as the OS resolves it): a file below one is named relative to it.
pub fn source_lines(
    info: &LineInfo,
    ranges: &LifeRanges,
    roots: &[&str],
) -> BTreeMap<String, SourceLines> {
    let file = |id: usize| relative_path(&info.files[id], roots);
    let mut out = BTreeMap::new();
    for (name, code) in &info.functions {
        // Loops: the backward branches, as (start, end, the loop's line).
        let loops: Vec<(u32, u32, Option<Location>)> = code
            .jumps
            .iter()
            .filter_map(|(offset, target)| {
                let start = *code.labels.get(target)?;
                (start <= *offset).then(|| (start, *offset, code.loop_line(start, *offset)))
            })
            .collect();
        let mut sites: BTreeMap<(String, u32, Option<u32>), (u32, u32)> = BTreeMap::new();
        for &(offset, store, bytes) in &code.spills {
            let Some((id, line)) = code.location(offset) else {
                continue;
            };
            let innermost = loops
                .iter()
                .filter(|(start, end, _)| *start <= offset && offset <= *end)
                .min_by_key(|(start, end, _)| end - start);
            let loop_line = innermost
                .and_then(|(_, _, at)| *at)
                .filter(|(loop_file, _)| *loop_file == id)
                .map(|(_, l)| l);
            let entry = sites.entry((file(id), line, loop_line)).or_default();
            if store {
                entry.0 = entry.0.saturating_add(bytes);
            } else {
                entry.1 = entry.1.saturating_add(bytes);
            }
        }
        let spills = sites
            .into_iter()
            .map(|((file, line, loop_line), (stores, loads))| SpillSite {
                file,
                line,
                loop_line,
                stores,
                loads,
            })
            .collect();
        let peak_pressure = ranges.functions.get(name).and_then(|peak| {
            peak.offsets.iter().find_map(|o| {
                code.location(*o).map(|(id, line)| PressurePoint {
                    file: file(id),
                    line,
                    registers: peak.registers,
                })
            })
        });
        out.insert(
            name.clone(),
            SourceLines {
                spills,
                peak_pressure,
            },
        );
    }
    out
}

/// `path` with `.` and `..` resolved (as text), relative to the first of
/// `roots` it lies below, with `/` separators; absolute (or as given, when
/// relative) otherwise.
pub fn relative_path(path: &str, roots: &[&str]) -> String {
    let path = normalize(path);
    for root in roots {
        let root = normalize(root);
        let root = root.trim_end_matches('/');
        if root.is_empty() {
            continue;
        }
        if let Some(rest) = path.strip_prefix(root).and_then(|r| r.strip_prefix('/')) {
            if !rest.is_empty() {
                return rest.to_string();
            }
        }
    }
    path
}

/// `path` with `.` and `..` taken away by text; a Windows path's
/// backslashes (`C:\w\k.cu`, `\\host\k.cu`) read as `/`, while
/// elsewhere a backslash is a character of the name (`back\slash.cu`).
fn normalize(path: &str) -> String {
    let b = path.as_bytes();
    let windows =
        (b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':') || path.starts_with("\\\\");
    let path = if windows {
        path.replace('\\', "/")
    } else {
        path.to_string()
    };
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !absolute {
                    parts.push("..");
                }
            }
            p => parts.push(p),
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

/// A `.section` line: `Some(Some(name))` for a function's
/// (`\t.section\t.text.<name>,"ax",@progbits`), `Some(None)` for any other.
fn section(line: &str) -> Option<Option<&str>> {
    let rest = line.trim_start().strip_prefix(".section")?;
    // Not `.sectioninfo`, `.sectionflags`: they belong to the section.
    if !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let name = rest
        .trim_start()
        .strip_prefix(".text.")
        .and_then(|rest| rest.split(',').next())
        .map(str::trim)
        .filter(|name| !name.is_empty());
    Some(name)
}

/// `        /*01f0*/   @P0 STL [R1+0x4], R2 ;` → (0x1f0, `@P0 STL [R1+0x4], R2 ;`).
fn instruction(line: &str) -> Option<(u32, &str)> {
    let rest = line.trim_start().strip_prefix("/*")?;
    let (hex, text) = rest.split_once("*/")?;
    let offset = u32::from_str_radix(hex, 16).ok()?;
    Some((offset, text.trim()))
}

/// The opcode of an instruction's text (after its predicate, if any).
fn opcode(text: &str) -> &str {
    let mut words = text.split_whitespace();
    match words.next() {
        Some(w) if w.starts_with('@') => words.next().unwrap_or(""),
        Some(w) => w,
        None => "",
    }
    .trim_end_matches(';')
}

/// The bytes an `STL`/`LDL` moves, from its opcode's size suffix.
fn width(opcode: &str) -> u32 {
    let mut bytes = 4;
    for part in opcode.split('.').skip(1) {
        bytes = match part {
            "U8" | "S8" => 1,
            "U16" | "S16" => 2,
            "64" => 8,
            "128" => 16,
            _ => bytes,
        };
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(text: &str) -> LineInfo {
        let mut info = LineInfo::default();
        for line in text.lines() {
            info.line(line);
        }
        info
    }

    fn ranges(text: &str) -> LifeRanges {
        let mut r = LifeRanges::default();
        for line in text.lines() {
            r.line(line);
        }
        r
    }

    const TWO_LOOPS: &str = "\t.section\t.text.k,\"ax\",@progbits
\t.sectioninfo\t@\"SHI_REGISTERS=26\"
\t.sectionflags\t@\"\"
k:
.text.k:
\t//## File \"/crate/kernels/k.cu\", line 3
        /*0000*/                   IMAD.MOV.U32 R1, RZ, RZ, c[0x0][0x28] ;
.L_x_0:
\t//## File \"/crate/kernels/../kernels/k.cu\", line 6
        /*0010*/                   STL.64 [R1+0x8], R4          (*\"SpillRefill\"*);
.L_x_1:
\t//## File \"/crate/kernels/k.cu\", line 8
        /*0020*/              @!P0 LDL.LU R4, [R1+0x8]          (*\"SpillRefill\"*);
        /*0030*/                   LDL R6, [R1+0x10] ;
\t//## File \"/crate/kernels/k.cu\", line 7
        /*0040*/               @P1 BRA `(.L_x_1) ;
\t//## File \"/opt/cuda/include/h.cuh\", line 40
        /*0050*/                   STL [R1+0x4], R2              (*\"SpillRefill\"*);
\t//## File \"/crate/kernels/k.cu\", line 5
        /*0060*/               @P2 BRA `(.L_x_0) ;
        /*0070*/                   STL.128 [R1], R8              (*\"SpillRefill\"*);
        /*0080*/                   BRA `(.L_x_2);
.L_x_2:
        /*0090*/                   EXIT ;
\t.section\t.text.other,\"ax\",@progbits
        /*0000*/                   EXIT ;
";

    #[test]
    fn spill_sites_with_their_innermost_loops() {
        let lines = source_lines(&info(TWO_LOOPS), &LifeRanges::default(), &["/crate/"]);
        let k = &lines["k"];
        let sites: Vec<(&str, u32, Option<u32>, u32, u32)> = k
            .spills
            .iter()
            .map(|s| (s.file.as_str(), s.line, s.loop_line, s.stores, s.loads))
            .collect();
        assert_eq!(
            sites,
            vec![
                // The header's line: its loop's line is in k.cu, not in the header.
                ("/opt/cuda/include/h.cuh", 40, None, 4, 0),
                // After the outer loop's branch (a forward branch is no loop).
                ("kernels/k.cu", 5, None, 16, 0),
                ("kernels/k.cu", 6, Some(5), 8, 0),
                // The plain LDL is a local array, not a refill.
                ("kernels/k.cu", 8, Some(7), 0, 4),
            ]
        );
        assert_eq!(k.worst().map(|s| s.line), Some(5));
        assert_eq!(lines["other"], SourceLines::default());
        assert!(lines["other"].is_empty());
    }

    #[test]
    fn a_loop_is_at_its_first_line_even_when_its_branch_is_at_the_last() {
        // sm_120 gives the backward branch the body's last line.
        let text = "\t.section\t.text.k,\"ax\",@progbits
.L_x_1:
\t//## File \"/c/k.cu\", line 9
        /*0000*/                   ISETP.GE.AND P0, PT, R2, R3, PT ;
\t//## File \"/c/k.cu\", line 12
        /*0010*/                   STL [R1], R4              (*\"SpillRefill\"*);
\t//## File \"/c/k.cu\", line 14
        /*0020*/                   BRA.U UP0, `(.L_x_1) ;
";
        let lines = source_lines(&info(text), &LifeRanges::default(), &["/c"]);
        assert_eq!(lines["k"].spills[0].loop_line, Some(9));
    }

    #[test]
    fn a_location_carries_over_into_the_next_function() {
        // nvdisasm 13.5 over `fill<32>` and `fill<128>` of a one-line
        // template: the second section has no `//## File` line of its own.
        let text = "\t.section\t.text.a,\"ax\",@progbits
\t//## File \"/c/t.cu\", line 2
        /*0000*/                   IMAD.MOV.U32 R1, RZ, RZ, c[0x0][0x28] ;
        /*0010*/                   STL [R1], R4              (*\"SpillRefill\"*);
\t.section\t.text.b,\"ax\",@progbits
        /*0000*/                   IMAD.MOV.U32 R1, RZ, RZ, c[0x0][0x28] ;
        /*0010*/                   STL [R1], R4              (*\"SpillRefill\"*);
";
        let lines = source_lines(&info(text), &LifeRanges::default(), &["/c"]);
        for f in ["a", "b"] {
            assert_eq!(lines[f].spills.len(), 1, "{f}: {lines:?}");
            assert_eq!(
                (lines[f].spills[0].file.as_str(), lines[f].spills[0].line),
                ("t.cu", 2),
                "{f}"
            );
        }
    }

    #[test]
    fn peak_pressure_is_the_first_peak_with_a_line() {
        let plr = "\t.section\t.text.k,\"ax\",@progbits
              // +-------+--------+
              // | PRED  | GPR    |
              // |   #   |   #    |
        .global k                              // |       |        |
        /*0000*/  IMAD.MOV.U32 R1, RZ ;       // |       |   1    |
        /*0010*/  STL.64 ;                    // |   1   |   9    |
        /*0020*/  LDL.LU R4 ;                 // |       |   9    |
        /*0030*/  LDL R6 ;                    // |       |   2    |
";
        let lines = source_lines(&info(TWO_LOOPS), &ranges(plr), &["/crate"]);
        assert_eq!(
            lines["k"].peak_pressure,
            Some(PressurePoint {
                file: "kernels/k.cu".into(),
                line: 6,
                registers: 9
            })
        );
        assert_eq!(
            lines["k"].describe(),
            "at kernels/k.cu:5 and 3 more lines, peak pressure 9 at :6"
        );
    }

    #[test]
    fn describe_names_another_file() {
        let lines = SourceLines {
            spills: vec![SpillSite {
                file: "kernels/a.cu".into(),
                line: 3,
                loop_line: Some(2),
                stores: 4,
                loads: 4,
            }],
            peak_pressure: Some(PressurePoint {
                file: "kernels/h.cuh".into(),
                line: 9,
                registers: 255,
            }),
        };
        assert_eq!(
            lines.describe(),
            "at kernels/a.cu:3 (loop at :2), peak pressure 255 at kernels/h.cuh:9"
        );
        let no_spills = SourceLines {
            spills: Vec::new(),
            ..lines
        };
        assert_eq!(no_spills.describe(), "peak pressure 255 at kernels/h.cuh:9");
        assert_eq!(SourceLines::default().describe(), "");
    }

    #[test]
    fn escaped_non_ascii_paths_are_decoded_and_made_relative() {
        // nvdisasm writes `ü` as `\303\274`.
        let quoted = "/home/j\\303\\274rgen/sp ace/kernels/k.cu";
        assert_eq!(unescape(quoted), "/home/jürgen/sp ace/kernels/k.cu");
        assert_eq!(
            relative_path(&unescape(quoted), &["/home/jürgen/sp ace"]),
            "kernels/k.cu"
        );
        assert_eq!(unescape(r#"a\"b\\c"#), r#"a"b\c"#);
        assert_eq!(unescape("plain/k.cu"), "plain/k.cu");
        assert_eq!(unescape("trailing\\"), "trailing\\");
    }

    #[test]
    fn a_path_whose_last_escape_ptxas_split_at_is_decoded_whole() {
        // What nvdisasm 13.5 printed (`//## File "…"`) for files compiled
        // by nvcc 13.5 with -lineinfo: ptxas splits the PTX's escaped name
        // at its last backslash, nvdisasm joins folder and file with `/`.
        for (printed, file) in [
            (
                r"/tmp/nm/kernels/hot \303/274.cu",
                "/tmp/nm/kernels/hot ü.cu",
            ),
            (r"/tmp/nm/d\303\274r/k\303/266.cu", "/tmp/nm/dür/kö.cu"),
            (r"/tmp/nm/e\342\202/254.cu", "/tmp/nm/e€.cu"),
            (r"/tmp/nm/x\360\237\230/200y.cu", "/tmp/nm/x😀y.cu"),
            (r"/tmp/nm/back\/slash.cu", r"/tmp/nm/back\slash.cu"),
            (r"/tmp/nm/\303\266\/.cu", r"/tmp/nm/ö\.cu"),
            (r"/tmp/nm/d\303\274r/k.cu", "/tmp/nm/dür/k.cu"),
            ("/tmp/nm/ab#%|<'.cu", "/tmp/nm/ab#%|<'.cu"),
        ] {
            assert_eq!(unescape(printed), file, "{printed}");
            assert_eq!(
                relative_path(&unescape(printed), &["/tmp/nm"]),
                file["/tmp/nm/".len()..]
            );
        }
        // A real folder ending in a non-ASCII name, holding a file whose
        // name starts with digits, reads as printed.
        assert_eq!(unescape(r"/w/d\303\251/251.cu"), "/w/dé/251.cu");
    }

    #[test]
    fn paths_relative_to_a_root() {
        assert_eq!(
            relative_path("/w/app/kernels/./x.cu", &["/w/app"]),
            "kernels/x.cu"
        );
        assert_eq!(
            relative_path("/w/app/../lib/y.cuh", &["/w/app"]),
            "/w/lib/y.cuh"
        );
        assert_eq!(
            relative_path("/real/app/k.cu", &["/link/app", "/real/app/"]),
            "k.cu"
        );
        assert_eq!(
            relative_path("/w/application/k.cu", &["/w/app"]),
            "/w/application/k.cu"
        );
        assert_eq!(relative_path("kernels/../k.cu", &[]), "k.cu");
        assert_eq!(relative_path("C:\\w\\app\\k.cu", &["C:\\w\\app"]), "k.cu");
    }

    #[test]
    fn widths() {
        for (op, bytes) in [
            ("STL", 4),
            ("STL.64", 8),
            ("LDL.LU.128", 16),
            ("STL.U8", 1),
            ("LDL.S16", 2),
            ("LDL.LU", 4),
        ] {
            assert_eq!(width(op), bytes, "{op}");
        }
    }

    #[test]
    fn a_line_table_that_is_not_one_reads_as_none() {
        // Not ELF; an ELF header alone (no sections).
        assert!(LineInfo::from_cubin(b"not a cubin").is_none());
        let mut header = b"\x7fELF\x02\x01".to_vec();
        header.resize(64, 0);
        header[0x3a] = 64;
        assert!(LineInfo::from_cubin(&header).is_none());
        // A unit of an unknown version, and one cut short, are refused.
        let none = BTreeMap::new();
        assert!(line_program(&[8, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0], &none).is_none());
        assert!(line_program(&[200, 0, 0, 0, 3, 0], &none).is_none());
        assert_eq!(line_program(&[], &none), Some(Vec::new()));
    }

    #[test]
    fn odd_lines_are_skipped() {
        let odd = "garbage\n/*zz*/ STL\n\t//## File \"x\", line q\n\t.section\t.text.,\n";
        let info = info(odd);
        assert_eq!(info.functions().count(), 0);
        let lines = source_lines(&info, &ranges(odd), &[]);
        assert!(lines.is_empty());
    }
}
