//! Launch bounds and cluster dimensions of each `.entry` of a PTX module.
//!
//! `ptxas -v` never prints `__launch_bounds__`, `__maxnreg__` or `__cluster_dims__`;
//! the PTX carries them as performance-tuning directives between an entry's parameter
//! list and its body:
//!
//! ```text
//! .visible .entry _Z9lb_kernelPf(.param .u64 _Z9lb_kernelPf_param_0)
//! .maxntid 256, 1, 1
//! .minnctapersm 2
//! {
//! ```
//!
//! [`parse_entries`] finds every entry definition (`.visible .entry`, `.weak .entry`,
//! `.entry`), skipping `//` and `/* */` comments and `.extern` declarations. It is a
//! single forward scan (tens of MB per second even unoptimised) and never panics; text
//! it cannot read is skipped.
//!
//! ```
//! let ptx = ".visible .entry k(\n.param .u64 k_param_0\n)\n.maxntid 256, 1, 1\n.minnctapersm 2\n{\nret;\n}\n";
//! let e = &occ_model::compiler::ptx::parse_entries(ptx)[0];
//! assert_eq!(e.name, "k");
//! assert_eq!(e.maxntid, Some([256, 1, 1]));
//! assert_eq!(e.minnctapersm, Some(2));
//! ```

use serde::{Deserialize, Serialize};

/// How an entry is visible outside its module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Linkage {
    /// `.visible .entry`: what nvcc emits for every `__global__` function.
    Visible,
    /// `.weak .entry`.
    Weak,
    /// `.entry` without a linkage directive (hand-written PTX).
    Internal,
}

/// One `.entry` definition and its tuning directives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PtxEntry {
    /// Mangled name.
    pub name: String,
    /// `.visible`, `.weak` or neither.
    pub linkage: Linkage,
    /// `.maxntid x, y, z` (`__launch_bounds__` first argument); missing dims are 1.
    pub maxntid: Option<[u32; 3]>,
    /// `.reqntid x, y, z` (required block size); missing dims are 1.
    pub reqntid: Option<[u32; 3]>,
    /// `.minnctapersm n` (`__launch_bounds__` second argument).
    pub minnctapersm: Option<u32>,
    /// `.maxnreg n` (`__maxnreg__`).
    pub maxnreg: Option<u32>,
    /// `.maxclusterrank n` (`__launch_bounds__` third argument).
    pub maxclusterrank: Option<u32>,
    /// `.reqnctapercluster x, y, z` (`__cluster_dims__`); missing dims are 1.
    pub reqnctapercluster: Option<[u32; 3]>,
    /// `.explicitcluster`: the kernel must be launched with clusters.
    pub explicitcluster: bool,
    /// The parameter list: each one's PTX type, size and alignment.
    #[serde(default)]
    pub params: Vec<crate::compiler::params::PtxParam>,
}

impl PtxEntry {
    fn new(name: String, linkage: Linkage) -> Self {
        PtxEntry {
            name,
            linkage,
            maxntid: None,
            reqntid: None,
            minnctapersm: None,
            maxnreg: None,
            maxclusterrank: None,
            reqnctapercluster: None,
            explicitcluster: false,
            params: Vec::new(),
        }
    }
}

/// The `.target` of a PTX module (`sm_90a`, or `sm_80, debug`'s first item), if any.
pub fn target(ptx: &str) -> Option<&str> {
    let mut s = Scanner::new(ptx.as_bytes());
    while let Some(at) = s.find_directive(b".target") {
        s.pos = at + b".target".len();
        s.skip_trivia();
        let name = s.ident();
        if !name.is_empty() {
            return std::str::from_utf8(name).ok();
        }
    }
    None
}

/// Every `.entry` definition in `ptx`, in file order, with its tuning directives.
///
/// Declarations (`.extern .entry ...;`) are left out. Directives other than the seven
/// read here (`.noreturn`, `.pragma`, ...) are skipped. Never panics.
pub fn parse_entries(ptx: &str) -> Vec<PtxEntry> {
    let mut out = Vec::new();
    let mut s = Scanner::new(ptx.as_bytes());
    while let Some(at) = s.find_directive(b".entry") {
        let linkage = linkage_before(&s.b[..at]);
        s.pos = at + b".entry".len();
        if linkage.is_none() {
            // `.extern .entry`: a declaration.
            continue;
        }
        s.skip_trivia();
        let name = s.ident();
        if name.is_empty() {
            continue;
        }
        let Ok(name) = std::str::from_utf8(name) else {
            continue;
        };
        let mut e = PtxEntry::new(name.to_string(), linkage.unwrap_or(Linkage::Internal));
        s.skip_trivia();
        if s.peek() == Some(b'(') {
            let open = s.pos;
            if !s.skip_parens() {
                break;
            }
            let list = &ptx[open + 1..s.pos - 1];
            e.params = crate::compiler::params::parse_ptx_params(&strip_comments(list));
        }
        if s.directives(&mut e) {
            out.push(e);
        }
    }
    out
}

/// Where the definition of entry `name` lies in a PTX text: byte offsets of
/// its `.entry` keyword, of the end of its parameter list (after `)`, or
/// after the name when it has none), and of the `{` that opens its body.
/// Comments and strings are skipped as [`parse_entries`] skips them;
/// declarations (`.extern .entry`) are not definitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntrySpan {
    /// The `.entry` keyword.
    pub header: usize,
    /// Just after the parameter list.
    pub params_end: usize,
    /// The `{` of the body.
    pub body: usize,
}

/// The [`EntrySpan`] of the definition of `name`, if `ptx` has one.
pub fn entry_span(ptx: &str, name: &str) -> Option<EntrySpan> {
    let mut s = Scanner::new(ptx.as_bytes());
    while let Some(at) = s.find_directive(b".entry") {
        let linkage = linkage_before(&s.b[..at]);
        s.pos = at + b".entry".len();
        if linkage.is_none() {
            continue;
        }
        s.skip_trivia();
        if s.ident() != name.as_bytes() {
            continue;
        }
        s.skip_trivia();
        if s.peek() == Some(b'(') && !s.skip_parens() {
            return None;
        }
        let params_end = s.pos;
        let body = s.find_directive(b"{")?;
        return Some(EntrySpan {
            header: at,
            params_end,
            body,
        });
    }
    None
}

/// `text` without `//` and `/* */` comments (a parameter list's).
fn strip_comments(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains('/') {
        return std::borrow::Cow::Borrowed(text);
    }
    let s = Scanner::new(text.as_bytes());
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        let b = text.as_bytes()[i];
        if b == b'/' && matches!(text.as_bytes().get(i + 1), Some(b'/' | b'*')) {
            i = s.skip_comment_or_string(i);
            out.push(' ');
        } else {
            let next = text[i..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&text[i..i + next]);
            i += next;
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The linkage written before `.entry` on the same logical line; `None` for `.extern`.
fn linkage_before(before: &[u8]) -> Option<Linkage> {
    let start = before
        .iter()
        .rposition(|&c| c == b'\n' || c == b';' || c == b'}')
        .map_or(0, |p| p + 1);
    let mut linkage = Linkage::Internal;
    for word in before[start..].split(|c| c.is_ascii_whitespace()) {
        match word {
            b".visible" => linkage = Linkage::Visible,
            b".weak" => linkage = Linkage::Weak,
            b".extern" => return None,
            _ => {}
        }
    }
    Some(linkage)
}

struct Scanner<'a> {
    b: &'a [u8],
    pos: usize,
    /// Everything before `clean` has been checked for comments and strings.
    clean: usize,
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'%' | b'.')
}

impl<'a> Scanner<'a> {
    fn new(b: &'a [u8]) -> Self {
        Scanner {
            b,
            pos: 0,
            clean: 0,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    /// Position of the next `word` at or after `pos` that is a whole token outside
    /// comments and strings.
    fn find_directive(&mut self, word: &[u8]) -> Option<usize> {
        let finder = memchr::memmem::Finder::new(word);
        loop {
            let at = self.pos + finder.find(self.b.get(self.pos..)?)?;
            // Walk comments and strings up to `at`.
            if self.clean < self.pos {
                self.clean = self.pos;
            }
            let mut swallowed = false;
            while self.clean < at {
                let Some(off) = memchr::memchr2(b'/', b'"', &self.b[self.clean..at]) else {
                    self.clean = at;
                    break;
                };
                let p = self.clean + off;
                let end = self.skip_comment_or_string(p);
                self.clean = end;
                if end > at {
                    swallowed = true;
                }
            }
            if swallowed {
                self.pos = self.clean;
                continue;
            }
            let end = at + word.len();
            let before_ok = at == 0 || !is_ident(self.b[at - 1]);
            let after_ok = self.b.get(end).is_none_or(|&c| !is_ident(c));
            if before_ok && after_ok {
                return Some(at);
            }
            self.pos = end;
        }
    }

    /// End of the comment or string starting at `p`, or `p + 1` when there is none.
    fn skip_comment_or_string(&self, p: usize) -> usize {
        let b = self.b;
        match (b[p], b.get(p + 1)) {
            (b'/', Some(b'/')) => memchr::memchr(b'\n', &b[p..]).map_or(b.len(), |o| p + o),
            (b'/', Some(b'*')) => {
                memchr::memmem::find(&b[p + 2..], b"*/").map_or(b.len(), |o| p + 2 + o + 2)
            }
            (b'"', _) => {
                let mut q = p + 1;
                while q < b.len() {
                    match b[q] {
                        b'\\' => q += 2,
                        b'"' => return q + 1,
                        b'\n' => return q,
                        _ => q += 1,
                    }
                }
                b.len()
            }
            _ => p + 1,
        }
    }

    /// Skips whitespace and comments.
    fn skip_trivia(&mut self) {
        while let Some(c) = self.peek() {
            if c.is_ascii_whitespace() {
                self.pos += 1;
            } else if c == b'/' && matches!(self.b.get(self.pos + 1), Some(b'/' | b'*')) {
                self.pos = self.skip_comment_or_string(self.pos);
            } else {
                break;
            }
        }
    }

    fn ident(&mut self) -> &'a [u8] {
        let start = self.pos;
        while self.peek().is_some_and(is_ident) {
            self.pos += 1;
        }
        &self.b[start..self.pos]
    }

    /// Skips a parenthesised parameter list; false when it never closes.
    fn skip_parens(&mut self) -> bool {
        let mut depth = 0usize;
        while let Some(c) = self.peek() {
            match c {
                b'(' => depth += 1,
                b')' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        self.pos += 1;
                        return true;
                    }
                }
                b'/' | b'"' => {
                    let end = self.skip_comment_or_string(self.pos);
                    self.pos = end;
                    continue;
                }
                _ => {}
            }
            self.pos += 1;
        }
        false
    }

    /// A decimal or `0x` number; `None` when there is none or it overflows u32.
    fn number(&mut self) -> Option<u32> {
        let start = self.pos;
        let (radix, digits_at) =
            if self.b[start..].starts_with(b"0x") || self.b[start..].starts_with(b"0X") {
                (16, start + 2)
            } else {
                (10, start)
            };
        let mut end = digits_at;
        while self.b.get(end).is_some_and(|c| c.is_ascii_hexdigit()) {
            end += 1;
        }
        if end == digits_at {
            return None;
        }
        self.pos = end;
        let text = std::str::from_utf8(&self.b[digits_at..end]).ok()?;
        u32::from_str_radix(text, radix).ok()
    }

    /// Up to three comma-separated numbers; missing dims are 1.
    fn dims(&mut self) -> Option<[u32; 3]> {
        let mut out = [1u32; 3];
        for (i, slot) in out.iter_mut().enumerate() {
            if i > 0 {
                self.skip_trivia();
                if self.peek() != Some(b',') {
                    break;
                }
                self.pos += 1;
            }
            self.skip_trivia();
            *slot = self.number()?;
        }
        Some(out)
    }

    fn one(&mut self) -> Option<u32> {
        self.skip_trivia();
        self.number()
    }

    /// Reads directives up to the body. True for a definition (`{`), false for a
    /// declaration (`;`) or the end of the text.
    fn directives(&mut self, e: &mut PtxEntry) -> bool {
        loop {
            self.skip_trivia();
            match self.peek() {
                None => return false,
                Some(b'{') => {
                    self.pos += 1;
                    return true;
                }
                Some(b';') => {
                    self.pos += 1;
                    return false;
                }
                Some(b'.') => {
                    let name = self.ident();
                    match name {
                        b".maxntid" => e.maxntid = self.dims_after(),
                        b".reqntid" => e.reqntid = self.dims_after(),
                        b".reqnctapercluster" => e.reqnctapercluster = self.dims_after(),
                        b".minnctapersm" => e.minnctapersm = self.one(),
                        b".maxnreg" => e.maxnreg = self.one(),
                        b".maxclusterrank" => e.maxclusterrank = self.one(),
                        b".explicitcluster" => e.explicitcluster = true,
                        b".entry" | b".func" | b".visible" | b".weak" | b".extern" => {
                            // The next function started without a body: give up on this one.
                            self.pos -= name.len();
                            return false;
                        }
                        _ => self.skip_arguments(),
                    }
                }
                Some(b'"') | Some(b'/') => self.pos = self.skip_comment_or_string(self.pos),
                Some(_) => self.pos += 1,
            }
        }
    }

    fn dims_after(&mut self) -> Option<[u32; 3]> {
        self.skip_trivia();
        self.dims()
    }

    /// Skips the arguments of an unknown directive: up to the next `.`-directive, `{` or `;`.
    fn skip_arguments(&mut self) {
        while let Some(c) = self.peek() {
            match c {
                b'{' | b'.' => return,
                b';' => {
                    self.pos += 1;
                    return;
                }
                b'"' | b'/' => self.pos = self.skip_comment_or_string(self.pos),
                _ => self.pos += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"
//
// Generated by NVIDIA NVVM Compiler
.version 9.5
.target sm_90a
.address_size 64

	// .globl	_Z9lb_kernelPf
.extern .func  (.param .b32 func_retval0) vprintf
(
	.param .b64 vprintf_param_0,
	.param .b64 vprintf_param_1
)
;
.extern .entry declared_only(.param .u64 p);
// .visible .entry commented_out(
/* .visible .entry also_commented(
) { } */
.global .align 1 .b8 $str[4] = {65, 66, 67, 0};
.visible .entry _Z9lb_kernelPf(
	.param .u64 _Z9lb_kernelPf_param_0
)
.maxntid 256, 1, 1
.minnctapersm 2
{
	ret;
}
.visible .entry _Z10lb3_kernelPf(
	.param .u64 _Z10lb3_kernelPf_param_0
) // trailing comment
.maxntid 128, 1, 1
.minnctapersm 1
.maxclusterrank 4
{
	ret;
}
.visible .entry _Z14maxnreg_kernelPf(.param .u64 p)
.maxnreg 40
{ ret; }
.weak .entry _Z14cluster_kernelPi(
	.param .u64 _Z14cluster_kernelPi_param_0
)
.explicitcluster
.reqnctapercluster 2, 1, 1
{
	ret;
}
.entry reqk(.param .u64 p) .reqntid 128 /* c */ , 2 .pragma "nounroll"; .noreturn
{
	ret;
}
.visible .entry plain()
{
	ret;
}
"#;

    #[test]
    fn reads_every_directive() {
        let es = parse_entries(SAMPLE);
        let names: Vec<&str> = es.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "_Z9lb_kernelPf",
                "_Z10lb3_kernelPf",
                "_Z14maxnreg_kernelPf",
                "_Z14cluster_kernelPi",
                "reqk",
                "plain"
            ]
        );
        assert_eq!(es[0].maxntid, Some([256, 1, 1]));
        assert_eq!(es[0].minnctapersm, Some(2));
        assert_eq!(es[0].linkage, Linkage::Visible);
        assert_eq!(es[1].maxclusterrank, Some(4));
        assert_eq!(es[2].maxnreg, Some(40));
        assert_eq!(es[2].maxntid, None);
        assert!(es[3].explicitcluster);
        assert_eq!(es[3].reqnctapercluster, Some([2, 1, 1]));
        assert_eq!(es[3].linkage, Linkage::Weak);
        assert_eq!(es[4].reqntid, Some([128, 2, 1]));
        assert_eq!(es[4].linkage, Linkage::Internal);
        assert_eq!(es[5], PtxEntry::new("plain".into(), Linkage::Visible));
        assert_eq!(target(SAMPLE), Some("sm_90a"));
    }

    #[test]
    fn truncated_text_keeps_complete_entries() {
        let cut = SAMPLE.find(".maxnreg 40").unwrap();
        let es = parse_entries(&SAMPLE[..cut]);
        assert_eq!(es.len(), 2);
        assert!(parse_entries("").is_empty());
        assert!(parse_entries(".entry").is_empty());
        assert!(parse_entries(".visible .entry k(").is_empty());
    }

    mod props {
        use super::super::parse_entries;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn never_panics_on_arbitrary_text(s in "\\PC*") {
                let _ = parse_entries(&s);
            }

            #[test]
            fn never_panics_on_ptx_like_text(
                parts in proptest::collection::vec(
                    "(\\.visible |\\.weak |\\.extern )?\\.entry|[a-z_0-9]{0,5}|\\(|\\)|\\{|\\}|;|//|/\\*|\\*/|\"|\n| |,|\\.maxntid|\\.reqntid|\\.minnctapersm|\\.maxnreg|\\.explicitcluster|\\.reqnctapercluster|\\.maxclusterrank|[0-9]{1,12}|0x",
                    0..40),
            ) {
                let text = parts.concat();
                prop_assert_eq!(parse_entries(&text), parse_entries(&text));
            }

            #[test]
            fn never_panics_on_mutated_sample(
                cuts in proptest::collection::vec((0usize..1500, 0usize..40, "\\PC{0,6}"), 1..6),
            ) {
                let mut text = super::SAMPLE.to_string();
                for (at, len, with) in cuts {
                    let mut at = at.min(text.len());
                    while !text.is_char_boundary(at) { at -= 1; }
                    let mut end = (at + len).min(text.len());
                    while !text.is_char_boundary(end) { end -= 1; }
                    text.replace_range(at..end, &with);
                }
                let _ = parse_entries(&text);
            }
        }
    }
}
