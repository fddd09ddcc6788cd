//! Reading a crate's sources as code, for the checks that read `src/`
//! (`layers.rs`, `purity.rs`): what is library code, with tests, comments
//! and literals blanked, and which files there are.

// These checks read the sources; the purity rules are for src/.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, at any depth, in path order.
pub fn rs_files(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read a source folder")
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    let mut out = Vec::new();
    for path in entries {
        if path.is_dir() {
            out.extend(rs_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// A source's library code: its inline test modules (from the marker to
/// the matching brace, so that code after one still counts), comments and
/// the contents of string and character literals blanked (a `crate::x` in
/// a message names no import), lines and byte offsets kept.
pub fn library(text: &str) -> String {
    let mut code = code_only(text);
    for marker in ["#[cfg(test)]\nmod ", "#[cfg(test)]\npub(crate) mod "] {
        let mut from = 0;
        while let Some(at) = code[from..].find(marker).map(|i| from + i) {
            // Only an inline module: `mod name {`, not `mod name;`.
            let after = at + marker.len();
            let name_end = code[after..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .map_or(code.len(), |i| after + i);
            if !code[name_end..].trim_start().starts_with('{') {
                from = name_end;
                continue;
            }
            let open = name_end + code[name_end..].find('{').unwrap_or(0);
            let mut depth = 0usize;
            let mut end = code.len();
            for (i, c) in code[open..].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = open + i + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let blank: String = code[at..end]
                .chars()
                .map(|c| {
                    if c == '\n' {
                        "\n".into()
                    } else {
                        " ".repeat(c.len_utf8())
                    }
                })
                .collect();
            code.replace_range(at..end, &blank);
            from = end;
        }
    }
    code
}

/// `text` with comments, string literals (raw ones too) and character
/// literals replaced by spaces, lines kept.
pub fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let blank = |out: &mut Vec<u8>, part: &[u8]| {
        out.extend(part.iter().map(|&c| if c == b'\n' { c } else { b' ' }));
    };
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        let end = if rest.starts_with(b"//") {
            rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len())
        } else if rest.starts_with(b"/*") {
            rest.windows(2)
                .position(|w| w == b"*/")
                .map_or(rest.len(), |p| p + 2)
        } else if rest[0] == b'"' {
            let mut k = 1;
            while k < rest.len() && rest[k] != b'"' {
                k += if rest[k] == b'\\' { 2 } else { 1 };
            }
            (k + 1).min(rest.len())
        } else if rest[0] == b'r'
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
            && rest[1..].iter().take_while(|&&c| c == b'#').count() + 1 < rest.len()
            && rest[1 + rest[1..].iter().take_while(|&&c| c == b'#').count()] == b'"'
        {
            let hashes = rest[1..].iter().take_while(|&&c| c == b'#').count();
            let mut close = vec![b'"'];
            close.extend(std::iter::repeat_n(b'#', hashes));
            rest[hashes + 2..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(rest.len(), |p| hashes + 2 + p + close.len())
        } else if rest[0] == b'\'' && rest.get(2) == Some(&b'\'') {
            3
        } else if rest[0] == b'\'' && rest.get(1) == Some(&b'\\') {
            rest[2..]
                .iter()
                .position(|&c| c == b'\'')
                .map_or(rest.len(), |p| p + 3)
        } else {
            out.push(rest[0]);
            i += 1;
            continue;
        };
        blank(&mut out, &rest[..end]);
        i += end;
    }
    String::from_utf8_lossy(&out).into_owned()
}
