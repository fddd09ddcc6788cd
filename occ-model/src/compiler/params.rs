//! A kernel's parameter list, for launchers whose argument types rustc
//! checks.
//!
//! Three sources, each giving what the others cannot:
//!
//! - the PTX `.entry` list ([`crate::compiler::ptx::PtxEntry::params`]): how many
//!   parameters, each one's PTX type, size and alignment (the ABI, always
//!   known);
//! - the C++ types, from the demangled symbol of a C++ kernel, or for an
//!   `extern "C"` kernel from the host stub nvcc writes for it
//!   (`__device_stub__Z5saxpyfPKfPfi` in `<stem>.cudafe1.stub.c`: the stub
//!   is a C++ function, so its name encodes the parameter types even when
//!   the kernel's does not); this is what tells a `const float*` from an
//!   `unsigned long long`;
//! - the parameter names, from the `__global__` declarations of the
//!   preprocessed source (`<stem>.cpp1.ii`, macros expanded), matched by
//!   the kernel's unqualified name and parameter count; a name that cannot
//!   be matched to one declaration is left empty.
//!
//! [`scan_stubs`] and [`scan_decls`] read the two nvcc files (the build
//! shell hands over their text); [`kernel_params`] joins the three.

use crate::compiler::names;

/// The manifest schema's type this module fills (defined in [`crate::schema::manifest`]).
pub use crate::schema::manifest::Param;
use serde::{Deserialize, Serialize};

/// One parameter of a PTX `.entry`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PtxParam {
    /// The PTX type without its dot (`u32`, `f32`, `b8`).
    pub ty: String,
    /// Bytes (an array's element size times its length).
    pub size: u32,
    /// Alignment, bytes (`.align N`, else the element size).
    pub align: u32,
}

/// What a host launcher takes for a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RustArg {
    /// A Rust scalar of the same size and meaning (`f32` for `float`).
    Scalar(&'static str),
    /// A device pointer; `mutable` unless the pointee is `const`; the
    /// pointee's Rust type when it is a scalar.
    Pointer {
        /// `T*` rather than `const T*`.
        mutable: bool,
        /// `f32` for `float*`; `None` for a struct, `void` or a pointer.
        pointee: Option<&'static str>,
    },
    /// Any plain value of this size and alignment (a struct by value, or a
    /// parameter whose C++ type is not known).
    Bytes {
        /// Bytes.
        size: u32,
        /// Alignment, bytes.
        align: u32,
    },
}

impl Param {
    /// What a launcher takes for this parameter. The C++ type decides when
    /// it is known and agrees with the PTX size; else the PTX type does
    /// (`f32`/`f64` are exact, an integer only gives its size).
    pub fn rust(&self) -> RustArg {
        let bytes = RustArg::Bytes {
            size: self.size,
            align: self.align,
        };
        if !self.c_type.is_empty() {
            let ty = self.c_type.trim();
            if let Some(pointee) = pointee(ty) {
                if self.size != 8 {
                    return bytes;
                }
                let (is_const, base) = strip_cv(pointee);
                return RustArg::Pointer {
                    mutable: !is_const,
                    pointee: scalar(&base).map(|(rust, _)| rust),
                };
            }
            return match scalar(&strip_cv(ty).1) {
                Some((rust, size)) if size == self.size => RustArg::Scalar(rust),
                _ => bytes,
            };
        }
        match (self.ptx.as_str(), self.size) {
            ("f32", 4) => RustArg::Scalar("f32"),
            ("f64", 8) => RustArg::Scalar("f64"),
            _ => bytes,
        }
    }

    /// `float const* x`, `int n`, or the PTX type when nothing else is known.
    pub fn describe(&self) -> String {
        let ty = if self.c_type.is_empty() {
            format!(".{} ({} B)", self.ptx, self.size)
        } else {
            self.c_type.clone()
        };
        if self.name.is_empty() {
            ty
        } else {
            format!("{ty} {}", self.name)
        }
    }
}

/// The pointee of a pointer type (`float const` of `float const* restrict`).
fn pointee(ty: &str) -> Option<&str> {
    let mut t = ty.trim_end();
    loop {
        let before = t;
        for q in [
            "restrict",
            "__restrict__",
            "__restrict",
            "const",
            "volatile",
        ] {
            if let Some(rest) = t.strip_suffix(q) {
                if rest.ends_with([' ', '*']) {
                    t = rest.trim_end();
                }
            }
        }
        if t == before {
            break;
        }
    }
    t.strip_suffix('*').map(str::trim_end)
}

/// The pointee of a pointer type without its qualifiers (`__half` for
/// `__half const* restrict`), the key that tells two pointer parameters of
/// one element type; empty when `ty` is no pointer or not known.
pub fn pointee_key(ty: &str) -> String {
    pointee(ty.trim())
        .map(|p| strip_cv(p).1)
        .unwrap_or_default()
}

/// Whether `ty` is `const`, and `ty` without `const`/`volatile`, words
/// single-spaced.
fn strip_cv(ty: &str) -> (bool, String) {
    let mut is_const = false;
    let words: Vec<&str> = ty
        .split_whitespace()
        .filter(|w| match *w {
            "const" => {
                is_const = true;
                false
            }
            "volatile" => false,
            _ => true,
        })
        .collect();
    (is_const, words.join(" "))
}

/// The Rust scalar of a C++ scalar type (as cpp_demangle prints it) and its
/// size on the 64-bit Linux ABI nvcc compiles device code for.
fn scalar(ty: &str) -> Option<(&'static str, u32)> {
    Some(match ty {
        "float" => ("f32", 4),
        "double" => ("f64", 8),
        "bool" => ("bool", 1),
        "char" | "signed char" => ("i8", 1),
        "unsigned char" => ("u8", 1),
        "short" | "short int" => ("i16", 2),
        "unsigned short" | "unsigned short int" => ("u16", 2),
        "int" => ("i32", 4),
        "unsigned int" | "unsigned" => ("u32", 4),
        "long" | "long int" | "long long" | "long long int" => ("i64", 8),
        "unsigned long" | "unsigned long int" | "unsigned long long" | "unsigned long long int" => {
            ("u64", 8)
        }
        _ => return None,
    })
}

/// The parameters of a PTX `.entry`'s list: the text between its
/// parentheses (`.param .u64 k_param_0, .param .align 4 .b8 k_param_1[12]`).
/// A parameter whose type is not a PTX type gets size 0.
pub fn parse_ptx_params(list: &str) -> Vec<PtxParam> {
    let list = list.trim();
    if list.is_empty() {
        return Vec::new();
    }
    list.split(',')
        .map(|p| {
            let mut ty = String::new();
            let mut align = None;
            let mut words = p.split_whitespace().peekable();
            let mut count = 1u32;
            while let Some(w) = words.next() {
                match w {
                    ".param" | ".ptr" | ".global" | ".const" | ".shared" | ".local" => {}
                    ".align" => align = words.next().and_then(|n| n.parse::<u32>().ok()),
                    _ if w.starts_with('.') && ty.is_empty() => ty = w[1..].to_string(),
                    _ => {
                        // The name, perhaps with `[N]`.
                        if let Some(open) = w.find('[') {
                            let n = w[open + 1..].trim_end_matches(']');
                            count = n.parse().unwrap_or(1);
                        }
                    }
                }
            }
            let elem = ptx_size(&ty);
            PtxParam {
                size: elem.saturating_mul(count),
                align: align.unwrap_or(elem),
                ty,
            }
        })
        .collect()
}

/// The size of a PTX fundamental type, bytes (0 when it is none).
fn ptx_size(ty: &str) -> u32 {
    match ty {
        "b8" | "u8" | "s8" | "pred" => 1,
        "b16" | "u16" | "s16" | "f16" | "bf16" => 2,
        "b32" | "u32" | "s32" | "f32" | "f16x2" | "bf16x2" => 4,
        "b64" | "u64" | "s64" | "f64" => 8,
        "b128" => 16,
        _ => 0,
    }
}

/// What nvcc's intermediate files say about a job's kernels' signatures
/// (recorded with the job's result, so a cached build has it too).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signatures {
    /// The C++ mangled names of the host stubs (`_Z5saxpyfPKfPfi`), one
    /// per `__global__` function the file defines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stubs: Vec<String>,
    /// The `__global__` declarations that name their parameters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decls: Vec<Decl>,
}

/// A `__global__` declaration in the preprocessed source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decl {
    /// The function's unqualified name (`saxpy`, `stencil1d`).
    pub name: String,
    /// Each parameter's name; empty where it has none.
    pub params: Vec<String>,
}

const STUB: &str = "__device_stub_";

/// The mangled names of the host stubs in a `<stem>.cudafe1.stub.c`,
/// sorted and deduplicated.
pub fn scan_stubs(stub_c: &str) -> Vec<String> {
    let mut out: Vec<String> = memchr::memmem::find_iter(stub_c.as_bytes(), STUB)
        .filter_map(|at| {
            let rest = &stub_c[at + STUB.len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            let name = &rest[..end];
            name.starts_with("_Z").then(|| name.to_string())
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Every `__global__` declaration of a preprocessed source that names at
/// least one parameter, sorted and deduplicated. nvcc's preprocessor
/// writes `__global__` as `__attribute__((global))`. A declaration this
/// reader cannot follow is skipped; never panics.
pub fn scan_decls(ii: &[u8]) -> Vec<Decl> {
    let mut out = Vec::new();
    for marker in [
        &b"__attribute__((global))"[..],
        b"__attribute__((__global__))",
    ] {
        for at in memchr::memmem::find_iter(ii, marker) {
            let start = at + marker.len();
            let end = (start + 8192).min(ii.len());
            // A window cut inside a multi-byte character loses only that.
            let window = String::from_utf8_lossy(&ii[start..end]);
            if let Some(d) = declaration(&window) {
                out.push(d);
            }
        }
    }
    out.retain(|d: &Decl| d.params.iter().any(|p| !p.is_empty()));
    out.sort_by(|a, b| (&a.name, &a.params).cmp(&(&b.name, &b.params)));
    out.dedup();
    out
}

/// The declaration that follows `__attribute__((global))`: the last
/// identifier before the first parenthesis that is not an attribute's,
/// then the parameter list.
fn declaration(text: &str) -> Option<Decl> {
    let b = text.as_bytes();
    let mut i = 0;
    let mut name: Option<&str> = None;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'#' && (i == 0 || b[i - 1] == b'\n') {
            // A line marker.
            i = text[i..].find('\n').map_or(b.len(), |o| i + o);
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let word = &text[s..i];
            if word == "__attribute__" || word == "__declspec" || word == "__launch_bounds__" {
                i = skip_group(b, skip_ws(b, i), b'(', b')')?;
            } else {
                name = Some(word);
            }
        } else if c == b':' {
            // `ns::name`: keep the last component.
            i += 1;
        } else if c == b'<' {
            // Explicit template arguments after the name.
            i = skip_group(b, i, b'<', b'>')?;
        } else if c == b'(' {
            let close = skip_group(b, i, b'(', b')')?;
            let params = split_top(&text[i + 1..close - 1])
                .into_iter()
                .map(param_name)
                .collect();
            return Some(Decl {
                name: name?.to_string(),
                params,
            });
        } else if c == b'*' || c == b'&' {
            i += 1;
        } else {
            // `;`, `{`, `=`: not a function declaration this reader follows.
            return None;
        }
    }
    None
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// Just past the group that opens at `i` with `open` (nested groups of
/// every bracket kind inside), or `None` when it never closes.
fn skip_group(b: &[u8], i: usize, open: u8, close: u8) -> Option<usize> {
    if b.get(i) != Some(&open) {
        return None;
    }
    let mut depth = 0usize;
    let mut j = i;
    while j < b.len() {
        match b[j] {
            c if c == open => depth += 1,
            c if c == close => {
                depth -= 1;
                if depth == 0 {
                    return Some(j + 1);
                }
            }
            b'(' => j = skip_group(b, j, b'(', b')')? - 1,
            b';' | b'{' | b'}' => return None,
            _ => {}
        }
        j += 1;
    }
    None
}

/// Splits at commas outside brackets.
fn split_top(s: &str) -> Vec<&str> {
    if s.trim().is_empty() || s.trim() == "void" {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' | '<' | '[' => depth += 1,
            ')' | '>' | ']' => depth -= 1,
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

/// Words that end a type, never a parameter's name.
const TYPE_WORDS: [&str; 21] = [
    "int",
    "float",
    "double",
    "char",
    "short",
    "long",
    "unsigned",
    "signed",
    "bool",
    "void",
    "const",
    "volatile",
    "__restrict__",
    "__restrict",
    "restrict",
    "struct",
    "class",
    "union",
    "enum",
    "typename",
    "size_t",
];

/// The name a declared parameter gives itself (`x` of
/// `const float* __restrict__ x`), or empty.
fn param_name(p: &str) -> String {
    let p = p.split('=').next().unwrap_or("");
    let p = p.split('[').next().unwrap_or("");
    let tokens: Vec<&str> = p
        .split(|c: char| c.is_whitespace() || c == '*' || c == '&')
        .filter(|t| !t.is_empty())
        .collect();
    let Some((&last, before)) = tokens.split_last() else {
        return String::new();
    };
    let is_ident = last
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && last.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !is_ident || TYPE_WORDS.contains(&last) || last.contains("::") {
        return String::new();
    }
    // `const T` names no parameter: a type needs a word that is not a qualifier.
    let typed = before.iter().any(|t| {
        !matches!(
            *t,
            "const" | "volatile" | "__restrict__" | "__restrict" | "restrict"
        )
    });
    // `T* p`: a pointer declarator with one type word.
    let pointer = p
        .trim_end()
        .trim_end_matches(last)
        .trim_end()
        .ends_with(['*', '&']);
    if typed || (pointer && !before.is_empty()) {
        last.to_string()
    } else {
        String::new()
    }
}

/// The C++ parameter types of a mangled function name, as demangled
/// (`["float", "float const*", "int"]`), or `None` when it does not
/// demangle to a function.
pub fn c_param_types(mangled: &str) -> Option<Vec<String>> {
    let demangled = names::demangle(mangled);
    let b = demangled.as_bytes();
    if !demangled.ends_with(')') {
        return None;
    }
    // The `(` that matches the final `)`.
    let mut depth = 0i32;
    let mut open = None;
    for i in (0..b.len()).rev() {
        match b[i] {
            b')' => depth += 1,
            b'(' => {
                depth -= 1;
                if depth == 0 {
                    open = Some(i);
                    break;
                }
            }
            _ => {}
        }
    }
    let list = &demangled[open? + 1..demangled.len() - 1];
    Some(
        split_top(list)
            .into_iter()
            .map(|t| t.trim().to_string())
            .collect(),
    )
}

/// The host stubs of one job's [`Signatures`] with their names demangled
/// once: a file of 2,000 `extern "C"` kernels would otherwise demangle
/// every stub for every kernel (4 million demangles).
#[derive(Debug, Default)]
pub struct StubNames<'a> {
    /// (short name, base name, stub) per stub, in the order of `stubs`.
    stubs: Vec<(String, String, &'a str)>,
}

impl<'a> StubNames<'a> {
    /// Demangles each stub of `sigs`.
    pub fn of(sigs: &'a Signatures) -> Self {
        let stubs = sigs
            .stubs
            .iter()
            .map(|stub| {
                let n = names::kernel_name(stub);
                (n.short, n.base, stub.as_str())
            })
            .collect();
        StubNames { stubs }
    }
}

/// A kernel's parameters: the PTX list, with the C++ types of its symbol
/// (or of the host stub of an `extern "C"` kernel, from `stubs`, the
/// job's [`StubNames`]) and the names of its declaration when each matches
/// the PTX list one to one.
pub fn kernel_params(
    symbol: &str,
    short_name: &str,
    ptx: &[PtxParam],
    sigs: &Signatures,
    stubs: &StubNames<'_>,
) -> Vec<Param> {
    let types = if symbol.starts_with("_Z") {
        c_param_types(symbol)
    } else {
        // The stubs of this name and arity; used only when they agree. A
        // function with C linkage is no template: the stub of a template
        // instantiation of the same name (`relu<double>`) is another kernel's.
        let mut found = stubs.stubs.iter().filter_map(|(short, base, stub)| {
            (!base.ends_with('>') && (short == short_name || base == symbol))
                .then(|| c_param_types(stub))
                .flatten()
                .filter(|t| t.len() == ptx.len())
        });
        match (found.next(), found.next()) {
            (Some(t), None) => Some(t),
            (Some(t), Some(u)) if t == u => Some(t),
            _ => None,
        }
    };
    let types = types.filter(|t| t.len() == ptx.len());
    let mut decls = sigs
        .decls
        .iter()
        .filter(|d| d.name == short_name && d.params.len() == ptx.len())
        .map(|d| &d.params);
    let param_names = match (decls.next(), decls.next()) {
        (Some(d), None) => Some(d),
        _ => None,
    };
    ptx.iter()
        .enumerate()
        .map(|(i, p)| Param {
            name: param_names
                .and_then(|n| n.get(i))
                .cloned()
                .unwrap_or_default(),
            c_type: types
                .as_ref()
                .and_then(|t| t.get(i))
                .cloned()
                .unwrap_or_default(),
            ptx: p.ty.clone(),
            size: p.size,
            align: p.align,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptx_lists() {
        let p = parse_ptx_params(
            ".param .f32 k_param_0, .param .u64 .ptr .global .align 4 k_param_1,\n\t.param .align 4 .b8 k_param_2[12], .param .u8 k_param_3",
        );
        let got: Vec<(&str, u32, u32)> =
            p.iter().map(|p| (p.ty.as_str(), p.size, p.align)).collect();
        assert_eq!(
            got,
            [("f32", 4, 4), ("u64", 8, 4), ("b8", 12, 4), ("u8", 1, 1)]
        );
        assert!(parse_ptx_params("  ").is_empty());
    }

    #[test]
    fn stub_types_of_an_extern_c_kernel() {
        let stub = "extern void __device_stub__Z5saxpyfPKfPfi(float, const float *, float *, int);\nvoid __device_stub__Z5saxpyfPKfPfi(float __par0){}";
        let stubs = scan_stubs(stub);
        assert_eq!(stubs, ["_Z5saxpyfPKfPfi"]);
        let types = c_param_types(&stubs[0]).unwrap();
        assert_eq!(types, ["float", "float const*", "float*", "int"]);
    }

    #[test]
    fn declarations_name_parameters() {
        let ii = br#"
extern "C" __attribute__((global)) void saxpy(float a, const float* __restrict__ x, float *y, int n) {
template <typename T, int N> __attribute__((global)) void __attribute__((launch_bounds(256))) tk(const T* x, T* y, unsigned n) { }
template __attribute__((global)) void tk<float,3>(const float*, float*, unsigned);
__attribute__((global)) void anon(int, const MyType, unsigned int);
"#;
        let decls = scan_decls(ii);
        let by = |n: &str| decls.iter().find(|d| d.name == n).map(|d| d.params.clone());
        assert_eq!(by("saxpy").unwrap(), ["a", "x", "y", "n"]);
        assert_eq!(by("tk").unwrap(), ["x", "y", "n"]);
        // Nothing named: not recorded.
        assert_eq!(by("anon"), None);
        assert_eq!(decls.len(), 2);
    }

    #[test]
    fn rust_types() {
        let p = |c: &str, ptx: &str, size: u32| Param {
            name: String::new(),
            c_type: c.into(),
            ptx: ptx.into(),
            size,
            align: size,
        };
        assert_eq!(p("float", "f32", 4).rust(), RustArg::Scalar("f32"));
        assert_eq!(p("unsigned long", "u64", 8).rust(), RustArg::Scalar("u64"));
        assert_eq!(
            p("float const* restrict", "u64", 8).rust(),
            RustArg::Pointer {
                mutable: false,
                pointee: Some("f32")
            }
        );
        assert_eq!(
            p("P*", "u64", 8).rust(),
            RustArg::Pointer {
                mutable: true,
                pointee: None
            }
        );
        assert_eq!(
            p("P", "b8", 12).rust(),
            RustArg::Bytes {
                size: 12,
                align: 12
            }
        );
        // A C type whose size disagrees with the PTX: only the size is trusted.
        assert_eq!(
            p("int", "u64", 8).rust(),
            RustArg::Bytes { size: 8, align: 8 }
        );
        assert_eq!(p("", "f64", 8).rust(), RustArg::Scalar("f64"));
        assert_eq!(p("", "u32", 4).rust(), RustArg::Bytes { size: 4, align: 4 });
    }

    #[test]
    fn pointee_keys() {
        assert_eq!(pointee_key("__half const* restrict"), "__half");
        assert_eq!(pointee_key("__half*"), "__half");
        assert_eq!(pointee_key("float4 const*"), "float4");
        assert_eq!(pointee_key("int"), "");
        assert_eq!(pointee_key(""), "");
    }

    #[test]
    fn joined() {
        let ptx = parse_ptx_params(".param .f32 a, .param .u64 b, .param .u32 c");
        let sigs = Signatures {
            stubs: vec!["_Z5saxpyfPKfi".into(), "_Z5otherv".into()],
            decls: vec![Decl {
                name: "saxpy".into(),
                params: vec!["a".into(), "x".into(), "n".into()],
            }],
        };
        let got = kernel_params("saxpy", "saxpy", &ptx, &sigs, &StubNames::of(&sigs));
        let d: Vec<String> = got.iter().map(Param::describe).collect();
        assert_eq!(d, ["float a", "float const* x", "int n"]);
        // Two declarations of one name and arity: names unknown, types kept.
        let mut two = sigs.clone();
        two.decls.push(Decl {
            name: "saxpy".into(),
            params: vec!["b".into(), "y".into(), "m".into()],
        });
        let got = kernel_params("saxpy", "saxpy", &ptx, &two, &StubNames::of(&two));
        assert!(got
            .iter()
            .all(|p| p.name.is_empty() && !p.c_type.is_empty()));
        // A template of the same name beside the extern "C" kernel: its
        // stub is not the kernel's, and does not make the types ambiguous.
        let mut beside = sigs.clone();
        beside.stubs.push("_Z5saxpyIdEvdPKdi".into());
        let got = kernel_params("saxpy", "saxpy", &ptx, &beside, &StubNames::of(&beside));
        assert_eq!(got[1].describe(), "float const* x");
        // Two non-template stubs of that name and arity that disagree: no types.
        beside.stubs.push("_ZN2ns5saxpyEdPKdi".into());
        let got = kernel_params("saxpy", "saxpy", &ptx, &beside, &StubNames::of(&beside));
        assert!(got.iter().all(|p| p.c_type.is_empty()));
        // No stub: the PTX alone.
        let got = kernel_params(
            "saxpy",
            "saxpy",
            &ptx,
            &Signatures::default(),
            &StubNames::default(),
        );
        assert_eq!(got[0].describe(), ".f32 (4 B)");
    }
}
