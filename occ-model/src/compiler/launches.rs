//! The `<<<...>>>` launches of a crate's own C++ host code, read from the
//! preprocessed source (`<stem>.cpp1.ii` or a host-code library's
//! `<stem>.cpp4.ii`, which nvcc's `-keep` leaves anyway), so that macros
//! have been expanded by the preprocessor itself.
//!
//! [`read`] finds each launch written in the job's own `.cu` file (by the
//! `# N "file"` line markers; launches in headers are not read), its
//! kernel expression as written (`rows_k<64>`, `ns::scale`), its line, and
//! its block and dynamic shared memory where they are compile-time
//! constants. [`matched`] finds the kernel of the build a launch names.
//!
//! A constant is only what this module can evaluate exactly as C++ does,
//! never a guess:
//!
//! - integer literals (decimal, hex, octal, binary, `'` separators, any
//!   suffix), `+ - * / % << >> & | ^`, unary `+ -`, parentheses;
//! - casts to an integer type (`(int)`, `static_cast<unsigned>(..)`,
//!   `size_t(..)`) of a value the type holds unchanged;
//! - `dim3(x[, y[, z]])` and `dim3{..}` as the whole block argument.
//!
//! Every intermediate value must fit an `int` (so `int`, `unsigned`, `long`
//! arithmetic agree with the mathematics), and `/`, `%`, `<<`, `>>`, `&`,
//! `|`, `^` take no negative operand (where signed and unsigned C++ differ).
//! A name (`kBlock`, `block`, `threads`) is not evaluated: a `constexpr`
//! constant is left as run time, said with its expression. An absent
//! dynamic shared memory argument is 0. Anything else makes the launch
//! one "known only at run time" ([`CodeLaunch::why`]).
//!
//! The device-side text is preprocessed with `__CUDA_ARCH__` defined: the
//! assembly takes a launch as constant only where every arch's text gives
//! it the same numbers (`merge`), else it is run time.

use crate::schema::manifest::{CodeLaunch, DeclaredBy, DynamicSmem, Kernel, Launch, Manifest};
use std::collections::BTreeMap;

/// The launches written in `source` (as its line markers name it: any of
/// `names`, e.g. the crate-relative and the absolute path) in the
/// preprocessed text, in order. Launches inside string literals are
/// skipped (the text has no comments left).
pub fn read(text: &str, source: &str, names: &[&str]) -> Vec<CodeLaunch> {
    let tokens = tokenize(text, names);
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        if t.text != "<<<" {
            i += 1;
            continue;
        }
        let kernel = kernel_before(&tokens[..i]);
        let Some((args, end)) = config_after(&tokens, i + 1) else {
            i += 1;
            continue;
        };
        out.push(launch(source, t.line, kernel, &args));
        i = end;
    }
    out
}

/// One launch from its kernel expression and its configuration's
/// arguments (each a list of tokens).
fn launch(source: &str, line: u32, kernel: String, args: &[Vec<&str>]) -> CodeLaunch {
    // What the code wrote, escaped where a name could not hold it.
    let shown = |arg: &[&str]| crate::compiler::names::shown(&arg.join(" ")).into_owned();
    let kernel = crate::compiler::names::shown(&kernel).into_owned();
    let mut why = None;
    let block = match args.get(1) {
        Some(arg) if args.len() <= 4 => {
            let b = block_of(arg);
            if b.is_none() {
                why = Some(format!("block `{}`", shown(arg)));
            }
            b
        }
        _ => {
            why = Some("a launch configuration occ does not read".to_string());
            None
        }
    };
    let dynamic_smem = match args.get(2) {
        None => Some(0),
        Some(arg) => {
            let v = value_of(arg).and_then(|v| u32::try_from(v).ok());
            if v.is_none() && why.is_none() {
                why = Some(format!("dynamic shared memory `{}`", shown(arg)));
            }
            v
        }
    };
    CodeLaunch {
        source: source.to_string(),
        line,
        kernel,
        block,
        dynamic_smem,
        why,
    }
}

/// A token of the source's own text, with its line.
#[derive(Debug, Clone, Copy)]
struct Token<'a> {
    text: &'a str,
    line: u32,
}

/// Splits the parts of preprocessed C++ that came from a file of `names`
/// into tokens (identifiers and numbers whole, `<<<`, `>>>`, `<<`, `>>`,
/// `::` whole, other punctuation one character), dropping string and
/// character literals and directives, and following the line markers
/// (`# 42 "kernels/a.cu" 2`).
fn tokenize<'a>(text: &'a str, names: &[&str]) -> Vec<Token<'a>> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let (mut own, mut line) = (false, 1u32);
    let mut at_line_start = true;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'\n' {
            line = line.saturating_add(1);
            at_line_start = true;
            i += 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'#' && at_line_start {
            let end = memchr::memchr(b'\n', &bytes[i..]).map_or(bytes.len(), |n| i + n);
            if let Some((n, f)) = marker(&text[i..end]) {
                // The marker names the line that follows it.
                own = names.iter().any(|name| *name == f);
                line = n.saturating_sub(1);
            }
            i = end;
            continue;
        }
        at_line_start = false;
        let start = i;
        if c == b'"' || c == b'\'' || (c == b'R' && bytes.get(i + 1) == Some(&b'"')) {
            i = skip_literal(bytes, i);
            line = line.saturating_add(count_newlines(&bytes[start..i]));
            continue;
        }
        if c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80 {
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric()
                    || bytes[i] == b'_'
                    || bytes[i] >= 0x80
                    || (bytes[i] == b'\'' && c.is_ascii_digit()))
            {
                i += 1;
            }
            // A raw or prefixed string (`u8"..."`, `LR"(...)"`).
            if i < bytes.len() && bytes[i] == b'"' && !c.is_ascii_digit() {
                let raw = bytes[start..i].ends_with(b"R");
                i = if raw {
                    skip_literal(bytes, i - 1)
                } else {
                    skip_literal(bytes, i)
                };
                line = line.saturating_add(count_newlines(&bytes[start..i]));
                continue;
            }
        } else {
            let rest = &text[i..];
            let len = ["<<<", ">>>", "<<", ">>", "::"]
                .iter()
                .find(|p| rest.starts_with(**p))
                .map_or_else(
                    || rest.chars().next().map_or(1, char::len_utf8),
                    |p| p.len(),
                );
            i += len;
        }
        if let Some(t) = text.get(start..i).filter(|_| own) {
            tokens.push(Token { text: t, line });
        }
    }
    tokens
}

fn count_newlines(b: &[u8]) -> u32 {
    u32::try_from(memchr::memchr_iter(b'\n', b).count()).unwrap_or(u32::MAX)
}

/// The end of the string or character literal at `i` (a `"`, a `'`, or
/// the `R` of a raw string).
fn skip_literal(b: &[u8], i: usize) -> usize {
    if b[i] == b'R' {
        // R"delim( ... )delim"
        let open = i + 2;
        let Some(paren) = memchr::memchr(b'(', &b[open..]).map(|n| open + n) else {
            return b.len();
        };
        let mut close = Vec::with_capacity(paren - open + 2);
        close.push(b')');
        close.extend_from_slice(&b[open..paren]);
        close.push(b'"');
        return memchr::memmem::find(&b[paren..], &close)
            .map_or(b.len(), |n| paren + n + close.len());
    }
    let quote = b[i];
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            c if c == quote => return j + 1,
            b'\n' => return j,
            _ => j += 1,
        }
    }
    b.len()
}

/// A line marker's line and file: `# 42 "kernels/a.cu" 2`, `#line 42 "f"`.
fn marker(directive: &str) -> Option<(u32, String)> {
    let rest = directive.strip_prefix('#')?.trim_start();
    let rest = rest.strip_prefix("line").unwrap_or(rest).trim_start();
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let n: u32 = rest[..digits].parse().ok()?;
    let quoted = rest[digits..].trim_start();
    let inner = quoted.strip_prefix('"')?;
    let end = inner.rfind('"')?;
    let name = crate::compiler::names::unescape_c(&inner.as_bytes()[..end])?;
    Some((n, String::from_utf8_lossy(&name).into_owned()))
}

/// The kernel expression before a `<<<`: identifiers joined by `::`, each
/// with its template arguments (balanced `<...>`), as written without
/// spaces; what precedes it otherwise (a `)`, a pointer) as written too,
/// which then matches no kernel.
fn kernel_before(tokens: &[Token<'_>]) -> String {
    let mut parts: Vec<&str> = Vec::new();
    let mut i = tokens.len();
    loop {
        // Template arguments, balanced backwards.
        if i > 0 && matches!(tokens[i - 1].text, ">" | ">>") {
            let mut depth = 0i32;
            let mut j = i;
            while j > 0 {
                j -= 1;
                match tokens[j].text {
                    ">" => depth += 1,
                    ">>" => depth += 2,
                    "<" => depth -= 1,
                    "<<" => depth -= 2,
                    ";" | "{" | "}" => break,
                    _ => {}
                }
                if depth <= 0 {
                    break;
                }
            }
            if depth != 0 {
                break;
            }
            parts.extend(tokens[j..i].iter().rev().map(|t| t.text));
            i = j;
        }
        if i > 0 && is_ident(tokens[i - 1].text) {
            parts.push(tokens[i - 1].text);
            i -= 1;
        } else {
            break;
        }
        if i > 0 && tokens[i - 1].text == "::" {
            parts.push("::");
            i -= 1;
            continue;
        }
        break;
    }
    if parts.is_empty() {
        return tokens.last().map_or(String::new(), |t| t.text.to_string());
    }
    parts.reverse();
    parts.concat()
}

fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
}

/// The arguments between `<<<` and its `>>>` (split at top-level commas),
/// and the index after the `>>>`.
fn config_after<'t>(tokens: &'t [Token<'t>], from: usize) -> Option<(Vec<Vec<&'t str>>, usize)> {
    let mut args: Vec<Vec<&str>> = vec![Vec::new()];
    let mut depth = 0i32;
    // Open `static_cast<`s: their `<…>` holds a type, not commas.
    let mut casts = 0i32;
    for (i, t) in tokens.iter().enumerate().skip(from) {
        let after_cast = i > 0 && tokens[i - 1].text == "static_cast";
        match t.text {
            "<" if after_cast => casts += 1,
            ">" if casts > 0 => casts -= 1,
            // Any other `<` or `>` outside brackets may open a template
            // argument list (`grid<float, 4>(n)`), whose commas are not
            // the configuration's: the launch is one occ does not read.
            "<" | ">" if depth == 0 => return Some((Vec::new(), skip_to_end(tokens, i)?)),
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => {
                depth -= 1;
                if depth < 0 {
                    return None;
                }
            }
            ";" => return None,
            ">>>" if depth == 0 => return Some((args, i + 1)),
            "," if depth == 0 => {
                args.push(Vec::new());
                continue;
            }
            _ => {}
        }
        args.last_mut()?.push(t.text);
    }
    None
}

/// The index after the `>>>` that closes the configuration `tokens[from..]`
/// is in (`None` at a `;` first).
fn skip_to_end(tokens: &[Token<'_>], from: usize) -> Option<usize> {
    tokens
        .iter()
        .enumerate()
        .skip(from)
        .take_while(|(_, t)| t.text != ";")
        .find(|(_, t)| t.text == ">>>")
        .map(|(i, _)| i + 1)
}

/// The block of a launch: `dim3(x, y, z)`, `dim3{x}` or one value.
fn block_of(arg: &[&str]) -> Option<[u32; 3]> {
    let dim = |v: i64| u32::try_from(v).ok();
    if let [first, open, inner @ .., close] = arg {
        let paired = matches!((*open, *close), ("(", ")") | ("{", "}"));
        if (*first == "dim3" || *first == "::dim3") && paired {
            let mut dims = [1u32; 3];
            let parts = split_commas(inner)?;
            if parts.is_empty() || parts.len() > 3 {
                return None;
            }
            for (d, part) in dims.iter_mut().zip(&parts) {
                *d = dim(value_of(part)?)?;
            }
            return Some(dims);
        }
    }
    Some([dim(value_of(arg)?)?, 1, 1])
}

fn split_commas<'a>(tokens: &[&'a str]) -> Option<Vec<Vec<&'a str>>> {
    let mut out = vec![Vec::new()];
    let mut depth = 0i32;
    for &t in tokens {
        match t {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => depth -= 1,
            "," if depth == 0 => {
                out.push(Vec::new());
                continue;
            }
            _ => {}
        }
        out.last_mut()?.push(t);
    }
    Some(out)
}

/// The value of an integer constant expression, where [`Eval`] can be
/// sure of it.
fn value_of(tokens: &[&str]) -> Option<i64> {
    let mut e = Eval { t: tokens, i: 0 };
    let v = e.expr(0)?;
    (e.i == tokens.len()).then_some(v)
}

/// A recursive-descent evaluator of the constant expressions the module
/// doc lists; `None` for anything else.
struct Eval<'a, 'b> {
    t: &'b [&'a str],
    i: usize,
}

/// The range every intermediate value must lie in (an `int`'s).
fn in_int(v: i64) -> Option<i64> {
    (i64::from(i32::MIN)..=i64::from(i32::MAX))
        .contains(&v)
        .then_some(v)
}

/// The integer types a cast may name, and the range of each.
fn int_type(words: &[&str]) -> Option<(i64, i64)> {
    let text = words.join(" ");
    let t = text.strip_prefix("std :: ").unwrap_or(&text);
    Some(match t {
        "char" | "signed char" | "int8_t" => (-128, 127),
        "unsigned char" | "uint8_t" => (0, 255),
        "short" | "short int" | "signed short" | "int16_t" => (-32768, 32767),
        "unsigned short" | "unsigned short int" | "uint16_t" => (0, 65535),
        "int" | "signed" | "signed int" | "int32_t" | "long" | "long int" | "long long"
        | "long long int" | "int64_t" | "ptrdiff_t" | "intptr_t" => (i64::MIN, i64::MAX),
        "unsigned" | "unsigned int" | "uint32_t" => (0, i64::from(u32::MAX)),
        "unsigned long"
        | "unsigned long int"
        | "unsigned long long"
        | "unsigned long long int"
        | "uint64_t"
        | "size_t"
        | "uintptr_t" => (0, i64::MAX),
        _ => return None,
    })
}

impl<'a> Eval<'a, '_> {
    fn peek(&self) -> Option<&'a str> {
        self.t.get(self.i).copied()
    }

    fn eat(&mut self, s: &str) -> bool {
        if self.peek() == Some(s) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    /// Binary operators by C++ precedence (higher binds tighter).
    fn precedence(op: &str) -> Option<u8> {
        Some(match op {
            "|" => 1,
            "^" => 2,
            "&" => 3,
            "<<" | ">>" => 4,
            "+" | "-" => 5,
            "*" | "/" | "%" => 6,
            _ => return None,
        })
    }

    fn expr(&mut self, min: u8) -> Option<i64> {
        let mut lhs = self.unary()?;
        while let Some(op) = self.peek() {
            let Some(p) = Self::precedence(op).filter(|p| *p > min) else {
                break;
            };
            self.i += 1;
            let rhs = self.expr(p)?;
            lhs = in_int(Self::apply(op, lhs, rhs)?)?;
        }
        Some(lhs)
    }

    fn apply(op: &str, a: i64, b: i64) -> Option<i64> {
        let plain = a >= 0 && b >= 0;
        match op {
            "+" => a.checked_add(b),
            "-" => a.checked_sub(b),
            "*" => a.checked_mul(b),
            "/" if plain && b > 0 => Some(a / b),
            "%" if plain && b > 0 => Some(a % b),
            "<<" if plain && b < 31 => a.checked_shl(u32::try_from(b).ok()?),
            ">>" if plain && b < 31 => Some(a >> b),
            "&" if plain => Some(a & b),
            "|" if plain => Some(a | b),
            "^" if plain => Some(a ^ b),
            _ => None,
        }
    }

    fn unary(&mut self) -> Option<i64> {
        if self.eat("+") {
            return self.unary();
        }
        if self.eat("-") {
            return in_int(self.unary()?.checked_neg()?);
        }
        if self.eat("(") {
            // A cast `(unsigned int) x`, else a parenthesized expression.
            let close = self.t[self.i..].iter().position(|t| *t == ")");
            if let Some(range) = close.and_then(|n| int_type(&self.t[self.i..self.i + n])) {
                self.i += close? + 1;
                return Self::cast(range, self.unary()?);
            }
            let v = self.expr(0)?;
            return self.eat(")").then_some(v);
        }
        if matches!(self.peek(), Some("static_cast")) {
            self.i += 1;
            if !self.eat("<") {
                return None;
            }
            let n = self.t[self.i..].iter().position(|t| *t == ">")?;
            let range = int_type(&self.t[self.i..self.i + n])?;
            self.i += n + 1;
            if !self.eat("(") {
                return None;
            }
            let v = self.expr(0)?;
            return if self.eat(")") {
                Self::cast(range, v)
            } else {
                None
            };
        }
        let word = self.peek()?;
        if word.starts_with(|c: char| c.is_ascii_digit()) {
            self.i += 1;
            return in_int(literal(word)?);
        }
        // A functional cast: `size_t(256)`, `unsigned(x)`.
        let n = self.t[self.i..].iter().position(|t| *t == "(")?;
        let range = int_type(&self.t[self.i..self.i + n])?;
        self.i += n + 1;
        let v = self.expr(0)?;
        if self.eat(")") {
            Self::cast(range, v)
        } else {
            None
        }
    }

    /// A cast of a value its type holds unchanged (no truncation guessed).
    fn cast((lo, hi): (i64, i64), v: i64) -> Option<i64> {
        (lo..=hi).contains(&v).then_some(v)
    }
}

/// An integer literal's value: `256`, `0x100`, `0400`, `0b1`, `1'024`,
/// with any suffix (`u`, `l`, `ull`, `z`).
fn literal(word: &str) -> Option<i64> {
    let digits: String = word.chars().filter(|c| *c != '\'').collect();
    let lower = digits.to_ascii_lowercase();
    let (radix, body) = if let Some(h) = lower.strip_prefix("0x") {
        (16, h)
    } else if let Some(b) = lower.strip_prefix("0b") {
        (2, b)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    let body = body.trim_end_matches(['u', 'l', 'z']);
    if body.is_empty() {
        return (radix == 8).then_some(0);
    }
    i64::from_str_radix(body, radix).ok()
}

/// What a launch's kernel expression names among the kernels of its
/// source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Match<'k> {
    /// This kernel, by its symbol.
    Kernel(&'k str),
    /// None of them: the reason, for the report.
    Unresolved(String),
}

/// The kernel of `kernels` (those compiled from the launch's source) that
/// `launch` names: its base name as the demangler writes it
/// (`ns::rows_k<64>`), spaces and integer suffixes aside, equal to the
/// expression or ending in `::` and it; else, for an expression without
/// template arguments, the one kernel whose name without them is the
/// expression (a call whose template arguments are deduced). Two kernels
/// that fit (overloads, one name in two namespaces) are ambiguous.
pub fn matched<'k>(launch: &CodeLaunch, kernels: &[&'k Kernel<impl Sized>]) -> Match<'k> {
    let want = normalize(launch.kernel.trim_start_matches("::"));
    if want.is_empty() || !is_ident(&want) {
        return Match::Unresolved(format!("`{}` is not a kernel's name", launch.kernel));
    }
    let fits = |name: &str| name == want || name.ends_with(&format!("::{want}"));
    let of_source = kernels.iter().filter(|k| k.source == launch.source);
    let mut hits: Vec<&'k Kernel<_>> = of_source
        .clone()
        .filter(|k| fits(&normalize(&k.base_name)))
        .copied()
        .collect();
    if hits.is_empty() && !want.contains('<') {
        hits = of_source
            .filter(|k| fits(&without_args(&normalize(&k.base_name))))
            .copied()
            .collect();
    }
    match hits.as_slice() {
        [one] => Match::Kernel(&one.name),
        [] => Match::Unresolved(format!(
            "`{}` names no kernel this build compiled from {}",
            launch.kernel, launch.source
        )),
        several => Match::Unresolved(format!(
            "`{}` could be any of {} kernels ({})",
            launch.kernel,
            several.len(),
            several
                .iter()
                .map(|k| k.demangled.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// A name as compared: no spaces, integer literals without suffixes.
fn normalize(name: &str) -> String {
    let squeezed: String = name.chars().filter(|c| !c.is_whitespace()).collect();
    let squeezed = without_integer_casts(&squeezed);
    let mut out = String::with_capacity(squeezed.len());
    let b = squeezed.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        out.push(char::from(c));
        let starts_number = c.is_ascii_digit()
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'));
        i += 1;
        if starts_number {
            while i < b.len() && b[i].is_ascii_alphanumeric() {
                if !matches!(b[i], b'u' | b'U' | b'l' | b'L') {
                    out.push(char::from(b[i]));
                }
                i += 1;
            }
        }
    }
    out
}

/// `name` (without spaces) less the casts the demangler writes before an
/// integer template argument of a type other than `int`: `uk<(unsignedint)64>`
/// → `uk<64>`, as the launch writes it (`uk<64>`, `uk<64u>`).
fn without_integer_casts(name: &str) -> String {
    const TYPES: [&str; 10] = [
        "(unsignedint)",
        "(unsignedlong)",
        "(unsignedlonglong)",
        "(long)",
        "(longlong)",
        "(unsignedshort)",
        "(short)",
        "(unsignedchar)",
        "(signedchar)",
        "(char)",
    ];
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while !rest.is_empty() {
        let cast = TYPES.iter().find(|t| {
            rest.strip_prefix(**t)
                .is_some_and(|after| after.starts_with(|c: char| c.is_ascii_digit() || c == '-'))
        });
        match cast {
            Some(t) => rest = &rest[t.len()..],
            None => {
                let mut chars = rest.chars();
                if let Some(c) = chars.next() {
                    out.push(c);
                }
                rest = chars.as_str();
            }
        }
    }
    out
}

/// A name less its last template argument list (`ns::k<64>` → `ns::k`).
fn without_args(name: &str) -> String {
    match name.strip_suffix('>') {
        Some(_) => {
            let mut depth = 0i32;
            for (i, c) in name.char_indices().rev() {
                match c {
                    '>' => depth += 1,
                    '<' => {
                        depth -= 1;
                        if depth == 0 {
                            return name[..i].to_string();
                        }
                    }
                    _ => {}
                }
            }
            name.to_string()
        }
        None => name.to_string(),
    }
}

/// A launch of the code whose block is a compile-time constant, as
/// [`crate::model::declared::judge_facts`] takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeBlock {
    /// The launch; its dynamic shared memory 0 where that is known only at
    /// run time.
    pub launch: Launch,
    /// Where it is written: `kernels/scale.cu:42`.
    pub at: String,
    /// Whether its dynamic shared memory is a compile-time constant too. A
    /// launch whose bytes are known only at run time declares its block
    /// only with build.rs's bound for them (`Build::dynamic_smem`), never
    /// at a guessed 0.
    pub smem_known: bool,
}

/// Each kernel's launches with a constant block among `code`, by its
/// `(symbol, source)`: those [`matched`] finds naming it, in order. The
/// one rule the assembly and the lock's reader judge by.
pub fn by_kernel(
    code: &[CodeLaunch],
    kernels: &[&Kernel<impl Sized>],
) -> BTreeMap<(String, String), Vec<CodeBlock>> {
    let mut out: BTreeMap<(String, String), Vec<CodeBlock>> = BTreeMap::new();
    for l in code {
        let (Some(block), Match::Kernel(symbol)) = (l.block, matched(l, kernels)) else {
            continue;
        };
        let (launch, smem_known) = match l.constant() {
            Some(launch) => (launch, true),
            None => (
                Launch {
                    block,
                    dynamic_smem: DynamicSmem::Fixed(0),
                },
                false,
            ),
        };
        out.entry((symbol.to_string(), l.source.clone()))
            .or_default()
            .push(CodeBlock {
                launch,
                at: l.at(),
                smem_known,
            });
    }
    out
}

/// The launches of `m` that name `kernel` ([`matched`]), in order.
pub fn of_kernel<'m>(m: &'m Manifest, kernel: &Kernel) -> Vec<&'m CodeLaunch> {
    let kernels: Vec<&Kernel> = m.kernels.iter().collect();
    m.launches
        .iter()
        .filter(|l| l.source == kernel.source)
        .filter(|l| matches!(matched(l, &kernels), Match::Kernel(s) if s == kernel.name))
        .collect()
}

/// A launch in words: `launched at 256 from kernels/scale.cu:42`, or
/// ``launched at run time from kernels/scale.cu:50 (block `n`)``.
pub fn describe(l: &CodeLaunch) -> String {
    match (l.constant(), &l.why) {
        (Some(launch), _) => format!("launched at {} from {}", launch.describe(), l.at()),
        (None, why) => format!(
            "launched at run time from {} ({})",
            l.at(),
            why.as_deref().unwrap_or("not a constant")
        ),
    }
}

/// Where build.rs's `.launch` contradicts a constant launch of the code,
/// one sentence each, over every kernel ([`contradicting`]).
pub fn contradictions(m: &Manifest) -> Vec<String> {
    m.kernels.iter().flat_map(|k| contradicting(m, k)).collect()
}

/// Where build.rs's `.launch` of `kernel` contradicts a constant launch
/// of the code that names it, one sentence each: build.rs wins, and says
/// so.
pub fn contradicting(m: &Manifest, kernel: &Kernel) -> Vec<String> {
    let Some((pattern, launch)) = kernel.archs.values().find_map(|a| {
        let d = a.declared.as_ref()?;
        match &d.by {
            DeclaredBy::Build { pattern } => Some((pattern, d.launch)),
            _ => None,
        }
    }) else {
        return Vec::new();
    };
    of_kernel(m, kernel)
        .into_iter()
        .filter_map(|l| {
            let code = l.constant().filter(|c| *c != launch)?;
            Some(format!(
                "build.rs `{pattern}` declares {} at {}, but {} launches it at {}; \
                 occ judges build.rs's launch",
                kernel.base_name,
                launch.describe(),
                l.at(),
                code.describe()
            ))
        })
        .collect()
}

/// One launch per place across a source's jobs (one per arch): a launch is
/// constant only where every arch's text gives it the same numbers (the
/// device side is preprocessed with `__CUDA_ARCH__` defined, so a block
/// that differs between archs is not one the host code is sure to use);
/// a launch some arch's text lacks is run time too.
pub fn merge(per_arch: &[&[CodeLaunch]]) -> Vec<CodeLaunch> {
    let Some((first, rest)) = per_arch.split_first() else {
        return Vec::new();
    };
    let key = |l: &CodeLaunch| (l.source.clone(), l.line, l.kernel.clone());
    first
        .iter()
        .enumerate()
        .map(|(n, l)| {
            let nth = first[..n].iter().filter(|o| key(o) == key(l)).count();
            let same = rest.iter().all(|other| {
                other
                    .iter()
                    .filter(|o| key(o) == key(l))
                    .nth(nth)
                    .is_some_and(|o| o == l)
            });
            if same || l.why.is_some() {
                l.clone()
            } else {
                CodeLaunch {
                    block: None,
                    dynamic_smem: None,
                    why: Some(
                        "numbers that differ between the archs' preprocessed sources \
                         (__CUDA_ARCH__)"
                            .to_string(),
                    ),
                    ..l.clone()
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(src: &str) -> CodeLaunch {
        let text = format!("# 1 \"k.cu\"\n{src}\n");
        let mut all = read(&text, "k.cu", &["k.cu"]);
        assert_eq!(all.len(), 1, "{src}: {all:?}");
        all.remove(0)
    }

    /// nvcc 13.5's preprocessed text of `tests/fixtures/cu/code_launches/k.cu`
    /// (`tests/fixtures/regen.sh` has the command): the `#define`d block
    /// resolved, the template launched by its own name, the run-time block.
    #[test]
    fn nvccs_preprocessed_text_gives_each_launch_its_line_and_block() {
        let text = include_str!("../../../tests/fixtures/cpp1-13.5-code-launches.ii");
        type Read = (u32, String, Option<[u32; 3]>, Option<String>);
        let got: Vec<Read> = read(text, "kernels/k.cu", &["k.cu"])
            .into_iter()
            .map(|l| (l.line, l.kernel, l.block, l.why))
            .collect();
        let run_time = Some("block `threads`".to_string());
        assert_eq!(
            got,
            vec![
                (29, "scale".into(), Some([256, 1, 1]), None),
                (30, "rows_k<64>".into(), Some([64, 1, 1]), None),
                (31, "saxpy".into(), None, run_time),
                (32, "fill".into(), Some([512, 1, 1]), None),
            ]
        );
        // Another file's name reads nothing.
        assert!(read(text, "kernels/k.cu", &["other.cu"]).is_empty());
    }

    #[test]
    fn constant_blocks_are_evaluated_as_cpp_does() {
        for (src, block, smem) in [
            ("k<<<g, 256>>>(x);", [256, 1, 1], 0),
            ("k<<<g, 0x100u, 1'024>>>(x);", [256, 1, 1], 1024),
            (
                "k<<<g, (128 + 2 * 64), 4 * 256, s>>>(x);",
                [256, 1, 1],
                1024,
            ),
            ("k<<<g, dim3(32, 8)>>>(x);", [32, 8, 1], 0),
            ("k<<<g, dim3{16, 4, 2}, 0>>>(x);", [16, 4, 2], 0),
            ("k<<<g, (unsigned int)(1 << 8)>>>(x);", [256, 1, 1], 0),
            ("k<<<g, static_cast<int>(512 / 2)>>>(x);", [256, 1, 1], 0),
            ("k<<<g, size_t(0400)>>>(x);", [256, 1, 1], 0),
            (
                "k<<<dim3(n / 256 + 1), 0b100000000ULL>>>(x);",
                [256, 1, 1],
                0,
            ),
        ] {
            let l = one(src);
            assert_eq!(
                (l.block, l.dynamic_smem, &l.why),
                (Some(block), Some(smem), &None),
                "{src}"
            );
        }
    }

    #[test]
    fn what_is_not_sure_is_run_time_and_says_what() {
        for (src, why) in [
            ("k<<<g, n>>>(x);", "block `n`"),
            ("k<<<g, kBlock>>>(x);", "block `kBlock`"),
            ("k<<<g, 256, n * 4>>>(x);", "dynamic shared memory `n * 4`"),
            (
                "k<<<g, (unsigned char)300>>>(x);",
                "block `( unsigned char ) 300`",
            ),
            ("k<<<g, -1 / 2u>>>(x);", "block `- 1 / 2u`"),
            ("k<<<g, 65536 * 65536>>>(x);", "block `65536 * 65536`"),
            // A `>` outside brackets could close a template's arguments.
            (
                "k<<<g, 256 > 1 ? 256 : 128>>>(x);",
                "a launch configuration occ does not read",
            ),
            (
                "k<<<g, (256 > 1 ? 256 : 128)>>>(x);",
                "block `( 256 > 1 ? 256 : 128 )`",
            ),
            (
                "k<<<g, sizeof(int) * 64>>>(x);",
                "block `sizeof ( int ) * 64`",
            ),
        ] {
            let l = one(src);
            assert_eq!(l.why.as_deref(), Some(why), "{src}");
            assert!(l.block.is_none() || l.dynamic_smem.is_none(), "{src}");
        }
    }

    #[test]
    fn the_kernel_is_the_expression_before_the_launch_with_its_template_arguments() {
        assert_eq!(one("rows_k<64><<<g, 64>>>(x);").kernel, "rows_k<64>");
        assert_eq!(one("ns::k<a<1>><<<g, 64>>>(x);").kernel, "ns::k<a<1>>");
        assert_eq!(one("::ns::scale<<<g, 64>>>(x);").kernel, "::ns::scale");
        assert_eq!(one("(*p)<<<g, 64>>>(x);").kernel, ")");
    }

    #[test]
    fn lines_follow_the_markers_and_other_files_and_strings_are_skipped() {
        let text = "# 1 \"k.cu\"\nvoid f() {\n# 1 \"h.cuh\" 1\n k<<<1, 32>>>(x);\n# 4 \"k.cu\" 2\n\
                    const char* s = \"a<<<1, 2>>>\"; char c = '<';\n\n  k<<<1,\n 64>>>(x);\n";
        let got = read(text, "k.cu", &["k.cu"]);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!((got[0].line, got[0].block), (6, Some([64, 1, 1])));
    }

    /// A template call in the configuration has commas of its own: the
    /// launch is one occ does not read, never a block taken from them.
    #[test]
    fn a_template_call_in_the_configuration_is_not_read_as_its_arguments() {
        let got = one("tg<<<grid3<float, 1024, 1>(n), 128>>>(x);");
        assert_eq!(got.block, None, "{got:?}");
        assert!(
            got.why
                .as_deref()
                .is_some_and(|w| w.contains("does not read")),
            "{got:?}"
        );
        // Shifts and comparisons inside parentheses still read.
        let shifted = one("k<<<(n + 255) >> 8, 1 << 8>>>(x);");
        assert_eq!(shifted.block, Some([256, 1, 1]), "{shifted:?}");
    }

    #[test]
    fn names_match_kernels_by_base_name_and_overloads_are_ambiguous() {
        let kernel = |name: &str, base: &str| Kernel::<()> {
            name: name.into(),
            demangled: format!("void {base}(float*)"),
            base_name: base.into(),
            short_name: String::new(),
            ident: String::new(),
            source: "k.cu".into(),
            params: Vec::new(),
            archs: Default::default(),
        };
        let ks = [
            kernel("a", "rows_k<64u>"),
            kernel("b", "rows_k<128u>"),
            kernel("c", "ns::scale"),
            kernel("d", "over"),
            kernel("e", "over"),
            kernel("f", "only<float>"),
        ];
        let refs: Vec<&Kernel<()>> = ks.iter().collect();
        let at = |k: &str| matched(&one(&format!("{k}<<<1, 32>>>(x);")), &refs);
        assert_eq!(at("rows_k<64>"), Match::Kernel("a"));
        assert_eq!(at("rows_k< 128 >"), Match::Kernel("b"));
        assert_eq!(at("scale"), Match::Kernel("c"));
        assert_eq!(at("::ns::scale"), Match::Kernel("c"));
        assert_eq!(at("only"), Match::Kernel("f"));
        assert!(matches!(at("over"), Match::Unresolved(w) if w.contains("any of 2")));
        assert!(matches!(at("rows_k"), Match::Unresolved(w) if w.contains("any of 2")));
        assert!(matches!(at("rows_k<32>"), Match::Unresolved(w) if w.contains("no kernel")));
        // As the demangler writes an `unsigned` or `long` argument:
        // `uk<(unsigned int)64>`, launched as `uk<64>` or `uk<64u>`.
        let demangled = |symbol: &str| crate::compiler::names::kernel_name(symbol).base;
        let (uk, lk) = (demangled("_Z2ukILj64EEvPf"), demangled("_Z2lkILl32EEvPf"));
        assert_eq!(uk, "uk<(unsigned int)64>", "the demangler's form");
        let ks = [kernel("g", &uk), kernel("h", &lk)];
        let refs: Vec<&Kernel<()>> = ks.iter().collect();
        let at = |k: &str| matched(&one(&format!("{k}<<<1, 32>>>(x);")), &refs);
        assert_eq!(at("uk<64>"), Match::Kernel("g"));
        assert_eq!(at("uk<64u>"), Match::Kernel("g"));
        assert_eq!(at("lk<32>"), Match::Kernel("h"));
    }

    proptest::proptest! {
        /// Any text, and any soup of the tokens launches are made of,
        /// reads without a panic, and a launch read is constant exactly
        /// when no reason says it is known only at run time.
        #[test]
        fn any_text_reads_without_a_panic(
            text in "(# [0-9]{1,3} \"k.cu\"\n)?[ -~\n\u{e9}\u{202e}]{0,200}",
            soup in proptest::collection::vec(
                proptest::sample::select(vec![
                    "k", "<", ">", "<<<", ">>>", ">>", "<<", "(", ")", "{", "}", ",", "1", "0x10u",
                    "-", "*", "/", "%", "dim3", "(int)", "static_cast<int>", "\"s\"", "'c'",
                    "R\"(x)\"", "::", ";", "\n", "# 3 \"k.cu\"\n",
                ]),
                0..40,
            ),
        ) {
            let _ = read(&text, "k.cu", &["k.cu"]);
            let soup = format!("# 1 \"k.cu\"\n{}", soup.join(" "));
            for l in read(&soup, "k.cu", &["k.cu"]) {
                proptest::prop_assert_eq!(l.constant().is_some(), l.why.is_none());
            }
        }
    }

    #[test]
    fn a_launch_is_constant_only_where_every_arch_agrees() {
        let a = one("k<<<1, 256>>>(x);");
        let b = one("k<<<1, 128>>>(x);");
        let same = merge(&[std::slice::from_ref(&a), std::slice::from_ref(&a)]);
        assert_eq!(same, vec![a.clone()]);
        let differ = merge(&[std::slice::from_ref(&a), std::slice::from_ref(&b)]);
        assert!(differ[0]
            .why
            .as_deref()
            .is_some_and(|w| w.contains("__CUDA_ARCH__")));
        assert_eq!(differ[0].block, None);
    }
}
