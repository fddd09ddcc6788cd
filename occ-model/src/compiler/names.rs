//! Kernel names: demangling, display forms, Rust identifiers, and the one
//! rule for what a name occ writes may hold.
//!
//! **What a name may hold** ([`check`]): a source path, a kernel name, a
//! device name, a package name — anything occ copies into `kernels.rs`,
//! SARIF, workflow commands, Markdown, HTML or a terminal table — holds no
//! character that [`is_refused`]: C0 and C1 controls and DEL (a newline
//! ends a line of Rust, a table row, a cargo directive), the line and
//! paragraph separators, and the bidirectional controls (which make text
//! read in another order than it runs). Such a name is refused where it
//! enters occ (a source path in occ-build's inputs, a name read back from a
//! manifest, a lock or a results file), with [`Unwritable`]'s words. Every
//! writer still escapes by its own format's rules (a Rust string literal,
//! a percent-encoded SARIF URI, Markdown and HTML escapes), and shows what
//! it cannot write as it is with [`shown`], so a name that got past the
//! rule breaks no output either.
//!
//! ```
//! use occ_model::compiler::names;
//! let n = names::kernel_name("_ZN2ns5inner5tkernIdLi128EEEvPT_PKS2_");
//! assert_eq!(n.demangled, "ns::inner::tkern<double, 128>(double*, double const*)");
//! assert_eq!(n.base, "ns::inner::tkern<double, 128>");
//! assert_eq!(n.short, "tkern");
//! assert_eq!(names::rust_ident("_ZN2ns5inner5tkernIdLi128EEEvPT_PKS2_"), "ns_inner_tkern_double_128");
//! assert_eq!(names::rust_ident("saxpy"), "saxpy");
//! ```

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use cpp_demangle::{DemangleOptions, Symbol};
use serde::{Deserialize, Serialize};

/// The kernel with the symbol `name` among `kernels`: the one from
/// `source`, else the only one with that symbol (its file moved); `key`
/// gives an item's (symbol, source). A kernel's identity is its symbol; its
/// source is a detail. The rule of [`crate::schema::lock::Lock::find`] and
/// [`crate::schema::manifest::Manifest::find`].
pub fn find_kernel<'a, K>(
    kernels: &'a [K],
    name: &str,
    source: &str,
    key: impl Fn(&K) -> (&str, &str),
) -> Option<&'a K> {
    if let Some(k) = kernels.iter().find(|k| key(k) == (name, source)) {
        return Some(k);
    }
    let mut same_symbol = kernels.iter().filter(|k| key(k).0 == name);
    match (same_symbol.next(), same_symbol.next()) {
        (Some(k), None) => Some(k),
        _ => None,
    }
}

/// Whether no name occ writes may hold `c`: a control character (C0, DEL,
/// C1), a line or paragraph separator (U+2028, U+2029), or a
/// bidirectional control (U+061C, U+200E, U+200F, U+202A..U+202E,
/// U+2066..U+2069). The one rule of the module doc.
pub fn is_refused(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}'
                | '\u{2029}'
                | '\u{061C}'
                | '\u{200E}'
                | '\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{2069}'
        )
}

/// A name that holds a character no output can hold as it is
/// ([`is_refused`]): the name, the character and its byte offset.
/// Displays as `"kernels/a\nb.cu" holds a control character (U+000A) at
/// byte 9`, the name escaped; whoever refuses it says what the name is
/// and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unwritable {
    /// The name as it came.
    pub name: String,
    /// The first refused character.
    pub refused: char,
    /// Its byte offset in `name`.
    pub at: usize,
}

impl fmt::Display for Unwritable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.refused.is_control() {
            "a control character"
        } else if matches!(self.refused, '\u{2028}' | '\u{2029}') {
            "a line separator"
        } else {
            "a bidirectional control character"
        };
        write!(
            f,
            "{:?} holds {kind} (U+{:04X}) at byte {}",
            self.name, self.refused as u32, self.at
        )
    }
}

/// `Ok` when `name` may be written everywhere occ writes names, else the
/// first character it may not hold ([`is_refused`]).
pub fn check(name: &str) -> Result<(), Unwritable> {
    match name.char_indices().find(|(_, c)| is_refused(*c)) {
        None => Ok(()),
        Some((at, refused)) => Err(Unwritable {
            name: name.to_string(),
            refused,
            at,
        }),
    }
}

/// `name` with each character [`is_refused`] written as Rust writes it in
/// a string (`\n`, `\u{202e}`): what every writer shows of a name that
/// got past [`check`], so that none of them breaks a line, a row or a
/// reading order.
pub fn shown(name: &str) -> Cow<'_, str> {
    if !name.chars().any(is_refused) {
        return Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len() + 8);
    for c in name.chars() {
        if is_refused(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The bytes a C string literal's body `quoted` stands for (the text
/// between its quotes): `\\`, `\"`, `\'`, `\?`, `\a` `\b` `\f` `\n`
/// `\r` `\t` `\v`, `\ooo` (one to three octal digits) and `\xHH`.
/// `None` when a backslash starts no such escape (or ends the text): the
/// text is not a C string. How the preprocessor writes a file name in a
/// line marker and nvdisasm a path in its line table
/// ([`crate::compiler::lines::unescape`]).
pub fn unescape_c(quoted: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(quoted.len());
    let mut i = 0;
    while i < quoted.len() {
        if quoted[i] != b'\\' {
            out.push(quoted[i]);
            i += 1;
            continue;
        }
        let rest = &quoted[i + 1..];
        let octal = rest
            .iter()
            .take(3)
            .take_while(|b| (b'0'..=b'7').contains(b))
            .count();
        if octal > 0 {
            let value = rest[..octal]
                .iter()
                .fold(0u32, |v, b| v * 8 + u32::from(b - b'0'));
            out.push(u8::try_from(value).ok()?);
            i += 1 + octal;
            continue;
        }
        let (byte, len) = match *rest.first()? {
            b'x' => {
                let hex = rest[1..]
                    .iter()
                    .take(2)
                    .take_while(|b| b.is_ascii_hexdigit())
                    .count();
                let digits = std::str::from_utf8(&rest[1..1 + hex]).ok()?;
                (u8::from_str_radix(digits, 16).ok()?, 1 + hex)
            }
            b'n' => (b'\n', 1),
            b't' => (b'\t', 1),
            b'r' => (b'\r', 1),
            b'a' => (0x07, 1),
            b'b' => (0x08, 1),
            b'f' => (0x0c, 1),
            b'v' => (0x0b, 1),
            c @ (b'\\' | b'"' | b'\'' | b'?') => (c, 1),
            _ => return None,
        };
        out.push(byte);
        i += 1 + len;
    }
    Some(out)
}

/// The display forms of one kernel name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KernelName {
    /// As ptxas prints it (`_ZN2ns5inner5tkernIdLi128EEEvPT_PKS2_`, or `saxpy`).
    pub mangled: String,
    /// Demangled, without the return type: `ns::inner::tkern<double, 128>(double*, double const*)`.
    /// The mangled name itself for `extern "C"` kernels and names that do not demangle.
    pub demangled: String,
    /// [`KernelName::demangled`] without the parameter list: `ns::inner::tkern<double, 128>`.
    pub base: String,
    /// The unqualified name without template arguments: `tkern`.
    pub short: String,
}

/// Demangles `mangled` into its display forms. Never fails: a name that is not an
/// Itanium C++ mangled name (an `extern "C"` kernel) is used as it is.
///
/// Internal-linkage namespaces (`_GLOBAL__N__<hash>`) read `(anonymous namespace)`, and
/// the `__nv_static_<n>_<module>_` prefix nvcc puts on internal kernels in `-rdc` mode
/// is dropped.
pub fn kernel_name(mangled: &str) -> KernelName {
    let inner = strip_nv_static(mangled);
    let demangled = demangle_with(inner, DemangleOptions::new().no_return_type());
    let base = demangle_with(inner, DemangleOptions::new().no_params().no_return_type());
    let (demangled, base) = match (demangled, base) {
        (Some(d), Some(b)) => (d, b),
        _ => (inner.to_string(), inner.to_string()),
    };
    let short = short_name(&base).to_string();
    KernelName {
        mangled: mangled.to_string(),
        demangled,
        base,
        short,
    }
}

/// The full demangled name (see [`KernelName::demangled`]).
pub fn demangle(mangled: &str) -> String {
    kernel_name(mangled).demangled
}

fn demangle_with(mangled: &str, opts: DemangleOptions) -> Option<String> {
    if !mangled.starts_with("_Z") {
        return None;
    }
    let sym = Symbol::new(mangled.as_bytes()).ok()?;
    let s = sym.demangle(&opts.recursion_limit(1024)).ok()?;
    if s.is_empty() {
        return None;
    }
    Some(s.replace("(anonymous namespace)", ANON))
}

const ANON: &str = "(anonymous namespace)";

/// `__nv_static_29__d3eb3599_10_kernels_cu_saxpy__ZN...` -> `_ZN...`.
fn strip_nv_static(name: &str) -> &str {
    let Some(rest) = name.strip_prefix("__nv_static_") else {
        return name;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let Ok(len) = rest[..digits].parse::<usize>() else {
        return name;
    };
    // `<len>_` then `len` bytes of module id, then `_`, then the name.
    let after = &rest[digits..];
    let Some(after) = after.strip_prefix('_') else {
        return name;
    };
    match after.get(len..).and_then(|s| s.strip_prefix('_')) {
        Some(inner) if !inner.is_empty() => inner,
        _ => name,
    }
}

/// Position of the `<` matching the `>` that ends `s`, skipping nested brackets.
fn template_start(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    if b.last() != Some(&b'>') {
        return None;
    }
    let mut depth = 0usize;
    for i in (0..b.len()).rev() {
        match b[i] {
            b'>' => depth += 1,
            b'<' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `ns::inner::tkern<double, 128>` -> `tkern`.
fn short_name(base: &str) -> &str {
    let mut s = base;
    if let Some(p) = template_start(s) {
        s = &s[..p];
    }
    // The last `::` outside brackets and parentheses.
    let b = s.as_bytes();
    let mut depth = 0i32;
    let mut i = b.len();
    while i > 0 {
        i -= 1;
        match b[i] {
            b'>' | b')' => depth += 1,
            b'<' | b'(' => depth -= 1,
            b':' if depth == 0 && i > 0 && b[i - 1] == b':' => return &s[i + 1..],
            _ => {}
        }
    }
    s
}

/// Rust keywords that occ never writes as identifiers: the strict and
/// reserved ones of the 2021 edition, `gen` (reserved in 2024, and a user
/// crate may be of either edition) and the weak `union` (refused too, so
/// that a name means one thing everywhere). `Self` included. The one list
/// every generated Rust name is checked against ([`is_keyword`]).
pub const KEYWORDS: &[&str] = &[
    "Self", "abstract", "as", "async", "await", "become", "box", "break", "const", "continue",
    "crate", "do", "dyn", "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if",
    "impl", "in", "let", "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub",
    "ref", "return", "self", "static", "struct", "super", "trait", "true", "try", "type", "typeof",
    "union", "unsafe", "unsized", "use", "virtual", "where", "while", "yield",
];

/// Whether `word` is a Rust keyword ([`KEYWORDS`]): as an identifier it
/// needs a suffix.
pub fn is_keyword(word: &str) -> bool {
    KEYWORDS.contains(&word)
}

/// Whether occ may write `s` as a Rust identifier: ASCII (occ writes no
/// other, and rustc lints other names in the user's crate), not `_`, no
/// [`KEYWORDS`] word (syn lets the weak keyword `union` and the 2024
/// edition's `gen` through; occ suffixes them like any keyword), and an
/// identifier by syn's rule: `[A-Za-z_][A-Za-z0-9_]*`, or that after `r#`
/// (a raw identifier) unless it is `_`, `crate`, `self`, `super` or `Self`.
/// A test holds this to `syn::parse_str::<syn::Ident>`, which the crate
/// does not link: cargo-occ installs without a second syn. The one rule
/// for every name occ generates or reads back: kernel modules, parameters.
pub fn is_rust_ident(s: &str) -> bool {
    let word = |w: &str| {
        w.bytes()
            .enumerate()
            .all(|(i, b)| b == b'_' || b.is_ascii_alphabetic() || (i > 0 && b.is_ascii_digit()))
            && !w.is_empty()
    };
    let syn_ident = match s.strip_prefix("r#") {
        Some(raw) => word(raw) && !matches!(raw, "_" | "crate" | "self" | "super" | "Self"),
        None => word(s),
    };
    s.is_ascii() && s != "_" && !is_keyword(s) && syn_ident
}

/// Identifiers longer than this are shortened and given a hash suffix.
const MAX_IDENT: usize = 64;

/// A valid snake_case Rust identifier for the kernel `mangled`.
///
/// Built from the qualified name with each template argument reduced to its last path
/// component without nested arguments: `ns::inner::tkern<double, 128>` gives
/// `ns_inner_tkern_double_128`, `(anonymous namespace)::k` gives `anon_k`. `extern "C"`
/// names are snake-cased (`mySaxpy` gives `my_saxpy`). Keywords get a trailing `_`, a
/// leading digit a `k_` prefix. When that is longer than 64 characters, the namespaces
/// are dropped, the rest is cut to 55 characters and `_<short_hash(mangled)>` is added
/// (`device_radix_sort_onesweep_kernel_policy_selector_from_1e2d97ef`). Deterministic, but not unique: use
/// [`unique_idents`] for a set of kernels.
pub fn rust_ident(mangled: &str) -> String {
    let name = kernel_name(mangled);
    let base = name.base.replace(ANON, "anon");
    let (path, args) = match template_start(&base) {
        Some(p) => (&base[..p], Some(&base[p + 1..base.len() - 1])),
        None => (base.as_str(), None),
    };
    // Namespaces, the unqualified name, the simplified template arguments.
    let path = strip_nested(path);
    let (scope, short) = match path.rsplit_once("::") {
        Some((scope, short)) => (scope, short),
        None => ("", path.as_str()),
    };
    let mut scope_words = Vec::new();
    words_of(scope, &mut scope_words);
    let mut words = Vec::new();
    words_of(short, &mut words);
    if let Some(args) = args {
        for arg in split_top_level(args) {
            let arg = strip_nested(arg);
            let last = arg.rsplit("::").next().unwrap_or("").trim();
            let last = match last.strip_prefix('-') {
                Some(n) => format!("neg{n}"),
                None => last.to_string(),
            };
            words_of(&last, &mut words);
        }
    }
    let full: Vec<&String> = scope_words.iter().chain(&words).collect();
    let mut ident = finish_ident(&full);
    if ident.len() > MAX_IDENT {
        // Too long: drop the namespaces, keep as much of the rest as fits, and add a
        // hash of the mangled name.
        let budget = MAX_IDENT - 9;
        let mut cut = finish_ident(&words.iter().collect::<Vec<_>>());
        if cut.len() > budget {
            let mut at = budget;
            while !cut.is_char_boundary(at) {
                at -= 1;
            }
            cut.truncate(at);
            let trimmed = cut.trim_end_matches('_').len();
            cut.truncate(trimmed);
        }
        ident = format!("{cut}_{}", short_hash(mangled));
    }
    if is_keyword(&ident) {
        ident.push('_');
    }
    ident
}

/// Joins words with `_`; `kernel` when there are none, a `k_` prefix before a digit.
fn finish_ident(words: &[&String]) -> String {
    let mut ident = words
        .iter()
        .map(|w| w.as_str())
        .collect::<Vec<_>>()
        .join("_");
    if ident.is_empty() {
        ident.push_str("kernel");
    }
    if ident.starts_with(|c: char| c.is_ascii_digit()) {
        ident.insert_str(0, "k_");
    }
    ident
}

/// Drops everything inside nested `<...>` and `(...)`.
fn strip_nested(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut depth = 0usize;
    for c in s.chars() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// Splits template arguments on commas outside nested brackets.
fn split_top_level(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// Appends the snake_case words of `s` (ASCII alphanumeric runs, split at case changes).
fn words_of(s: &str, out: &mut Vec<String>) {
    for run in s.split(|c: char| !c.is_ascii_alphanumeric()) {
        if run.is_empty() {
            continue;
        }
        let b = run.as_bytes();
        let mut word = String::new();
        for (i, &c) in b.iter().enumerate() {
            let prev = if i > 0 { Some(b[i - 1]) } else { None };
            let next = b.get(i + 1).copied();
            let boundary = c.is_ascii_uppercase()
                && match prev {
                    Some(p) if p.is_ascii_lowercase() || p.is_ascii_digit() => true,
                    Some(p) if p.is_ascii_uppercase() => {
                        next.is_some_and(|n| n.is_ascii_lowercase())
                    }
                    _ => false,
                };
            if boundary && !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            word.push(c.to_ascii_lowercase() as char);
        }
        if !word.is_empty() {
            out.push(word);
        }
    }
}

/// The most characters a kernel's name takes in a table before
/// [`table_name`] shortens it.
pub const TABLE_NAME_MAX: usize = 60;

/// A kernel's name as tables show it: its base name (`base`,
/// [`KernelName::base`]) with every namespace and class qualifier dropped,
/// at any depth (`cub::_V_300500_SM_800::detail::reduce::DeviceReduceKernel<…,
/// cuda::std::__4::plus<void>, …>` reads `DeviceReduceKernel<…, plus<void>,
/// …>`), and when that is still longer than [`TABLE_NAME_MAX`]
/// characters, the template arguments nested in others written `<…>`, then
/// the arguments cut with `…`. A name that lost more than qualifiers ends
/// with ` #` and six hex digits of a hash of `base`; `cargo occ explain`
/// takes that name, and shows the full one. A name that fits is only
/// unqualified (`transpose<float, 32>`). Two kernels of other namespaces
/// can read the same here: a table names its kernels with
/// [`table_names`], which tells them apart.
///
/// ```
/// use occ_model::compiler::names::table_name;
/// assert_eq!(table_name("linalg::transpose<float, 32>"), "transpose<float, 32>");
/// assert_eq!(table_name("(anonymous namespace)::rows_k<64>"), "rows_k<64>");
/// let long = "cub::_V_300500_SM_800::detail::reduce::DeviceReduceKernel<cub::_V_300500_SM_800::\
///             detail::reduce::policy_selector_from_types<float, unsigned int, \
///             cuda::std::__4::plus<void>>, true, float*, float*, unsigned int>";
/// let shown = table_name(long);
/// assert!(shown.starts_with("DeviceReduceKernel<policy_selector_from_types<…>, true, …> #"), "{shown}");
/// assert!(shown.chars().count() <= 60 + 8, "{shown}");
/// ```
pub fn table_name(base: &str) -> String {
    let plain = unqualified(base);
    // Nothing left but qualifiers (`::`, `ns::`): not a C++ name to shorten.
    let plain = if plain.trim().is_empty() {
        base.to_string()
    } else {
        plain
    };
    if plain.chars().count() <= TABLE_NAME_MAX {
        return plain;
    }
    let mut shown = nested_elided(&plain);
    if shown.chars().count() > TABLE_NAME_MAX {
        shown = cut_arguments(&shown);
    }
    format!("{shown} #{}", table_hash(base))
}

/// The six hex digits a shortened table name ends with (` #3ee948`): the
/// start of `base`'s [`short_hash`], what `Manifest::lookup` matches.
pub(crate) fn table_hash(base: &str) -> String {
    short_hash(base)[..6].to_string()
}

/// The [`table_name`] of each of `bases` (the kernels one table shows),
/// where two distinct names that read the same both end with the hash of
/// their full name, so no two distinct names of a table read the same
/// (one name defined in two files reads the same, as it did in full: the
/// table's source column, or `source:name`, tells them apart).
pub fn table_names<'a>(
    bases: impl IntoIterator<Item = &'a str>,
) -> std::collections::HashMap<&'a str, String> {
    let mut names: std::collections::HashMap<&str, String> = std::collections::HashMap::new();
    for base in bases {
        names.entry(base).or_insert_with(|| table_name(base));
    }
    let mut readers: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for shown in names.values() {
        *readers.entry(shown.as_str()).or_default() += 1;
    }
    let shared: std::collections::HashSet<String> = readers
        .into_iter()
        .filter(|&(_, n)| n > 1)
        .map(|(shown, _)| shown.to_string())
        .collect();
    for (base, shown) in &mut names {
        if shared.contains(shown.as_str()) {
            *shown = format!("{shown} #{}", table_hash(base));
        }
    }
    names
}

/// `base` with each qualifier (`ns::`, `Class::`, `(anonymous namespace)::`,
/// a leading `::`) dropped, at every depth of template arguments and casts.
fn unqualified(base: &str) -> String {
    let mut out = String::with_capacity(base.len());
    let mut rest = base;
    while let Some(at) = rest.find("::") {
        out.push_str(&rest[..at]);
        // Drop the qualifier just written: an identifier, or the anonymous
        // namespace's parenthesised words.
        if out.ends_with(ANON) {
            out.truncate(out.len() - ANON.len());
        } else {
            // A class template's arguments go with it (`Outer<int>::`).
            if let Some(open) = template_start(&out) {
                out.truncate(open);
            }
            let keep = out
                .trim_end_matches(|c: char| c.is_alphanumeric() || c == '_')
                .len();
            out.truncate(keep);
        }
        rest = &rest[at + 2..];
    }
    out.push_str(rest);
    out
}

/// `name` cut to at most [`TABLE_NAME_MAX`] characters: its first
/// template arguments that fit, then `…>` (`k<a, b, …>`); a name longer
/// than that without its arguments, cut with `…`.
fn cut_arguments(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let Some(open) = chars.iter().position(|&c| c == '<') else {
        return chars[..TABLE_NAME_MAX - 1]
            .iter()
            .chain(['…'].iter())
            .collect();
    };
    // The ends of the first-level arguments that leave room for `, …>`.
    let mut depth = 0usize;
    let mut keep = None;
    for (i, &c) in chars.iter().enumerate().skip(open) {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth = depth.saturating_sub(1),
            // `, …>` is four characters.
            ',' if depth == 1 && i + 4 <= TABLE_NAME_MAX => keep = Some(i),
            _ => {}
        }
    }
    match keep {
        Some(end) => chars[..end].iter().collect::<String>() + ", …>",
        None if open + 3 <= TABLE_NAME_MAX => chars[..open].iter().collect::<String>() + "<…>",
        None => chars[..TABLE_NAME_MAX - 1]
            .iter()
            .chain(['…'].iter())
            .collect(),
    }
}

/// `k<a<b>, c<d<e>>>` → `k<a<…>, c<…>>`: template arguments below the
/// first level written `<…>`.
fn nested_elided(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut depth = 0usize;
    for c in name.chars() {
        match c {
            '<' => {
                depth += 1;
                if depth <= 2 {
                    out.push('<');
                }
                if depth == 2 {
                    out.push('…');
                }
            }
            '>' => {
                if depth <= 2 {
                    out.push('>');
                }
                depth = depth.saturating_sub(1);
            }
            _ if depth <= 1 => out.push(c),
            _ => {}
        }
    }
    out
}

/// 8 hex digits of the 64-bit FNV-1a hash of `s`, folded to 32 bits. Stable across
/// platforms and Rust versions.
pub fn short_hash(s: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in s.as_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{:08x}", (h ^ (h >> 32)) as u32)
}

/// A unique Rust identifier for each distinct mangled name, keyed by mangled name.
///
/// Each name gets [`rust_ident`]; when several names share one, every one of them gets
/// `_<short_hash(mangled)>` appended (a 16-digit hash if even that collides), so the
/// result does not depend on the order of the input.
pub fn unique_idents<'a, I>(mangled: I) -> BTreeMap<String, String>
where
    I: IntoIterator<Item = &'a str>,
{
    let mut out: BTreeMap<String, String> = mangled
        .into_iter()
        .map(|m| (m.to_string(), rust_ident(m)))
        .collect();
    for round in 0..2 {
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        for ident in out.values() {
            *count.entry(ident.as_str()).or_insert(0) += 1;
        }
        let clashing: Vec<String> = out
            .iter()
            .filter(|(_, i)| count.get(i.as_str()).copied().unwrap_or(0) > 1)
            .map(|(m, _)| m.clone())
            .collect();
        if clashing.is_empty() {
            break;
        }
        for m in clashing {
            let base = rust_ident(&m);
            let suffix = if round == 0 {
                short_hash(&m)
            } else {
                format!("{}{}", short_hash(&m), short_hash(&format!("{m}\u{0}")))
            };
            out.insert(m, format!("{}_{suffix}", base.trim_end_matches('_')));
        }
    }
    out
}

#[cfg(test)]
mod tests {

    #[test]
    fn table_names_are_unqualified_short_and_never_shared() {
        assert_eq!(table_name("saxpy"), "saxpy");
        // Never an empty name.
        assert_eq!(table_name("::"), "::");
        assert_eq!(table_name("ns::"), "ns::");
        assert_eq!(table_name("ns::Outer<int>::inner<3>"), "inner<3>");
        assert_eq!(
            table_name("k<(cuda::execution::determinism::__determinism_t)1>"),
            "k<(__determinism_t)1>"
        );
        let long = |last: &str| {
            format!(
                "cub::detail::reduce::DeviceReduceKernel<cub::detail::policy<float, cuda::std::plus<void>>, true, float*, float*, unsigned int, unsigned int, {last}>"
            )
        };
        let (a, b) = (table_name(&long("float")), table_name(&long("double")));
        // Cut where they differ, yet told apart by the hash of the full name.
        assert_ne!(a, b);
        assert!(
            a.starts_with("DeviceReduceKernel<policy<…>, true, float*, float*, …> #"),
            "{a}"
        );
        for n in [&a, &b] {
            let (name, hash) = n.rsplit_once(" #").expect("a hash");
            assert!(name.chars().count() <= TABLE_NAME_MAX, "{n}");
            assert_eq!(hash.len(), 6, "{n}");
        }
        // Unqualified alike: a table tells them apart; alone, it does not need to.
        let t = table_names(["a::k<1>", "b::k<1>", "c::only"]);
        assert_ne!(t["a::k<1>"], t["b::k<1>"]);
        assert!(t["a::k<1>"].starts_with("k<1> #"), "{t:?}");
        assert_eq!(t["c::only"], "only");
    }
    use super::*;

    #[test]
    fn one_keyword_list_holds_both_spellings_that_differed() {
        // `Self` (a type keyword) and `union` (a contextual one) were each
        // missing from one of two lists; every Rust name checks this one.
        assert!(is_keyword("Self") && is_keyword("self") && is_keyword("union"));
        assert!(!is_keyword("kernel") && !is_keyword("self_"));
        let mut sorted = KEYWORDS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, KEYWORDS, "sorted and unique");
        for word in KEYWORDS
            .iter()
            .filter(|w| !["union", "gen", "macro"].contains(w))
        {
            // A strict or reserved keyword is no identifier for syn either;
            // syn lets the weak `union`, the 2024 edition's `gen` and the
            // reserved `macro` through, and occ refuses them all the same.
            assert!(syn::parse_str::<syn::Ident>(word).is_err(), "{word}");
        }
    }

    #[test]
    fn identifier_rule_is_syns_on_ascii_words() {
        let syn_rule = |s: &str| {
            s.is_ascii()
                && s != "_"
                && !is_keyword(s)
                && syn::parse_str::<syn::Ident>(s).is_ok_and(|ident| ident == s)
        };
        let mut words: Vec<String> = [
            "", "_", "__", "a", "_k", "k2", "2k", "a b", " a", "a ", "a/*c*/", "//a", "a-b", "a.b",
            "a::b", "a#b", "r#", "r#a", "r#_", "r#_a", "r#2", "r#fn", "r#union", "r#r#a",
            "r#crate", "r#self", "r#super", "r#Self", "r#gen", "R#a", "r", "br", "b'a'", "'a",
            "a'", "größe", "é", "self_", "union_", "Self_", "_0", "a\u{30}",
        ]
        .iter()
        .map(|w| w.to_string())
        .collect();
        words.extend(KEYWORDS.iter().map(|k| k.to_string()));
        words.extend(KEYWORDS.iter().map(|k| format!("r#{k}")));
        for w in &words {
            assert_eq!(is_rust_ident(w), syn_rule(w), "{w:?}");
        }
    }

    #[test]
    fn one_identifier_rule_refuses_what_syn_lets_through() {
        for ok in ["saxpy", "_k", "k2", "self_", "union_"] {
            assert!(is_rust_ident(ok), "{ok}");
        }
        // syn parses `union` and `gen` as identifiers (a weak keyword, a
        // 2024-edition one); occ refuses them, and non-ASCII names, which
        // it never writes.
        for bad in [
            "union", "gen", "macro", "größe", "_", "2k", "fn", "a b", "a/*c*/", "",
        ] {
            assert!(!is_rust_ident(bad), "{bad}");
        }
    }

    #[test]
    fn a_control_separator_or_bidi_character_is_refused_with_its_place() {
        for ok in ["kernels/hot ü.cu", "a#b%c|d<e`f.cu", "RTX 4090 😀", ""] {
            assert_eq!(check(ok), Ok(()), "{ok}");
            assert_eq!(shown(ok), ok);
        }
        for (bad, refused, at) in [
            ("kernels/a\nb.cu", '\n', 9),
            ("x\ry", '\r', 1),
            ("\u{1b}[31mred", '\u{1b}', 0),
            ("del\u{7f}", '\u{7f}', 3),
            ("nel\u{85}", '\u{85}', 3),
            ("ü\u{2028}", '\u{2028}', 2),
            ("abc\u{202e}txt.cu", '\u{202e}', 3),
        ] {
            let e = check(bad).expect_err(bad);
            assert_eq!((e.refused, e.at), (refused, at), "{bad:?}");
            let said = e.to_string();
            assert!(!said.chars().any(is_refused), "{said:?}");
            assert!(
                said.contains(&format!("(U+{:04X}) at byte {at}", refused as u32)),
                "{said}"
            );
        }
        assert_eq!(
            check("kernels/a\nb.cu").expect_err("a newline").to_string(),
            "\"kernels/a\\nb.cu\" holds a control character (U+000A) at byte 9"
        );
        assert_eq!(shown("a\nb\u{202e}c"), "a\\nb\\u{202e}c");
    }

    #[test]
    fn c_escapes_read_as_the_preprocessor_and_nvdisasm_write_them() {
        let read =
            |s: &str| unescape_c(s.as_bytes()).map(|b| String::from_utf8_lossy(&b).into_owned());
        // cpp's line markers: `\n` is a newline, not `n`.
        assert_eq!(read("nl\\nx.cu").as_deref(), Some("nl\nx.cu"));
        assert_eq!(read(r"back\\slash.cu").as_deref(), Some(r"back\slash.cu"));
        assert_eq!(read(r#"a \"b\" c"#).as_deref(), Some("a \"b\" c"));
        assert_eq!(read(r"j\303\274rgen\x21\t").as_deref(), Some("jürgen!\t"));
        for not_c in [r"back\/slash", "trailing\\", r"\q", r"\x", r"\777"] {
            assert_eq!(read(not_c), None, "{not_c}");
        }
    }

    #[test]
    fn display_forms() {
        let n = kernel_name("_ZN40_GLOBAL__N__d3eb3599_10_kernels_cu_saxpy11anon_kernelEPi");
        assert_eq!(n.demangled, "(anonymous namespace)::anon_kernel(int*)");
        assert_eq!(n.short, "anon_kernel");
        let n = kernel_name(
            "__nv_static_29__d3eb3599_10_kernels_cu_saxpy__ZN40_GLOBAL__N__d3eb3599_10_kernels_cu_saxpy11anon_kernelEPi",
        );
        assert_eq!(n.base, "(anonymous namespace)::anon_kernel");
        let n = kernel_name("_Z12spill_kernelPKfPfi");
        assert_eq!(n.demangled, "spill_kernel(float const*, float*, int)");
        assert_eq!(
            (n.base.as_str(), n.short.as_str()),
            ("spill_kernel", "spill_kernel")
        );
        let n = kernel_name("use_constant");
        assert_eq!(
            (n.demangled.as_str(), n.short.as_str()),
            ("use_constant", "use_constant")
        );
        let n = kernel_name("_Zgarbage");
        assert_eq!(n.demangled, "_Zgarbage");
    }

    #[test]
    fn idents() {
        assert_eq!(
            rust_ident("_ZN40_GLOBAL__N__d3eb3599_10_kernels_cu_saxpy11anon_kernelEPi"),
            "anon_anon_kernel"
        );
        assert_eq!(rust_ident("mySaxpy"), "my_saxpy");
        assert_eq!(rust_ident("HTTPKernel2D"), "http_kernel2_d");
        assert_eq!(rust_ident("type"), "type_");
        assert_eq!(rust_ident("2fast"), "k_2fast");
        assert_eq!(rust_ident(""), "kernel");
        // template<int N> __global__ void k(); k<-1>
        assert_eq!(rust_ident("_Z1kILin1EEvv"), "k_neg1");
        let long = "a".repeat(200);
        let id = rust_ident(&long);
        assert!(id.len() <= MAX_IDENT, "{id}");
        assert!(id.ends_with(&short_hash(&long)));
    }

    #[test]
    fn long_names_keep_the_kernel_name() {
        let m = "_ZN3cub33_V_300500_SM_750_800_860_900_12006detail10radix_sort29DeviceRadixSortOnesweepKernelINS2_26policy_selector_from_typesIfijEELNS0_9SortOrderE0EfijiiNS1_21identity_decomposer_tEEEvPT5_S9_PT3_PKSA_PT1_PKSE_PT2_PKSI_T4_iiT6_";
        let n = kernel_name(m);
        assert_eq!(n.short, "DeviceRadixSortOnesweepKernel");
        assert!(n.base.starts_with("cub::_V_300500_SM_750_800_860_900_1200::detail::radix_sort::DeviceRadixSortOnesweepKernel<"));
        let id = rust_ident(m);
        assert!(
            id.starts_with("device_radix_sort_onesweep_kernel_policy_selector_from_"),
            "{id}"
        );
        assert!(id.ends_with(&short_hash(m)), "{id}");
        assert!(id.len() <= MAX_IDENT);
    }

    #[test]
    fn idents_are_valid_rust() {
        for m in [
            "_ZN2ns5inner5tkernIdLi128EEEvPT_PKS2_",
            "_Z1kILin1EEvv",
            "type",
            "self",
            "9lives",
            "_Z3fooIPFviEEvT_",
        ] {
            let id = rust_ident(m);
            assert!(is_rust_ident(&id), "{m} -> {id}");
        }
    }

    #[test]
    fn unique_on_collision() {
        // float* and float both reduce to `float`.
        let a = "_Z1kIfEvv";
        let b = "_Z1kIPfEvv";
        let c = "saxpy";
        let ids = unique_idents([a, b, c, a]);
        assert_eq!(ids.len(), 3);
        assert_eq!(ids[c], "saxpy");
        assert_ne!(ids[a], ids[b]);
        assert_eq!(ids[a], format!("k_float_{}", short_hash(a)));
        assert_eq!(unique_idents([b, a, c]), ids);
    }

    mod props {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn any_name_gives_a_valid_ident(s in "\\PC{0,80}|_Z[0-9A-Za-z_]{0,40}") {
                let id = rust_ident(&s);
                prop_assert!(is_rust_ident(&id), "{} -> {}", s, id);
                let _ = kernel_name(&s);
            }
        }
    }
}
