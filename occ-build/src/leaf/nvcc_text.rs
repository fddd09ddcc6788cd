//! Pure readers of what nvcc prints and leaves: the class of a failed run
//! from its log ([`classify`]), nvcc's own warnings to show ([`warnings`]),
//! the files a preprocessed source was made from, from its line markers
//! ([`deps_from_preprocessed`]), and the settings and programs of a
//! `--dryrun` ([`dryrun_settings`], [`dryrun_programs`]), from which the
//! cache identifies the toolkit.
//!
//! No process, file or environment access: `compile` runs nvcc, reads the
//! files and turns a [`Failure`] into the [`crate::Error`] a user acts on.

use std::path::{Path, PathBuf};

/// What a failed nvcc run's log says went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// nvcc could not use the host compiler; `detail` is the first lines
    /// nvcc printed, joined by ` / `.
    HostCompiler {
        /// `nvcc said: …`.
        detail: String,
    },
    /// The disk (or a quota) is full; `line` is the line that says so.
    DiskFull {
        /// nvcc's line, trimmed.
        line: String,
    },
    /// The arch is not one this nvcc builds; `line` is nvcc's line.
    UnsupportedArch {
        /// nvcc's line, trimmed.
        line: String,
    },
    /// A compile error: nvcc's diagnostics with their context lines, less
    /// noise ([`is_noise`]), at most [`MAX_DIAGNOSTICS`] lines (then one
    /// line counting the rest); empty when nvcc printed nothing but
    /// ptxas's information lines.
    Diagnostics(Vec<String>),
}

/// The most lines of a compile error kept in its message.
pub(crate) const MAX_DIAGNOSTICS: usize = 40;

/// Classifies the log of an nvcc run that exited with a status.
pub(crate) fn classify(log: &str) -> Failure {
    let lower = log.to_ascii_lowercase();
    if [
        "failed to preprocess host compiler properties",
        "cannot find compiler",
        "host compiler targets unsupported",
        "unsupported gnu version",
        "unsupported clang version",
    ]
    .iter()
    .any(|s| lower.contains(s))
    {
        let detail: Vec<&str> = log
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("ptxas"))
            .take(4)
            .collect();
        return Failure::HostCompiler {
            detail: format!("nvcc said: {}", detail.join(" / ")),
        };
    }
    let line_with = |needles: &[&str]| {
        log.lines().find(|l| {
            let l = l.to_ascii_lowercase();
            needles.iter().any(|n| l.contains(n))
        })
    };
    if let Some(line) = line_with(&["no space left on device", "disk quota exceeded"]) {
        return Failure::DiskFull {
            line: line.trim().to_string(),
        };
    }
    if lower.contains("unsupported gpu architecture")
        || (lower.contains("is not defined for option") && lower.contains("gpu-name"))
    {
        let line = line_with(&["unsupported gpu architecture", "is not defined for option"])
            .unwrap_or("unsupported gpu architecture");
        return Failure::UnsupportedArch {
            line: line.trim().to_string(),
        };
    }
    let mut diagnostics: Vec<String> = log
        .lines()
        .map(str::trim_end)
        .filter(|l| !is_noise(l))
        .map(str::to_string)
        .collect();
    if diagnostics.len() > MAX_DIAGNOSTICS {
        let more = diagnostics.len() - MAX_DIAGNOSTICS;
        diagnostics.truncate(MAX_DIAGNOSTICS);
        diagnostics.push(format!("... and {more} more lines"));
    }
    Failure::Diagnostics(diagnostics)
}

/// Whether a line of a failed run's log (its end trimmed) is noise, left
/// out of the error: ptxas's resource report (its `info` lines and the
/// indented `N bytes stack frame` line after each `Function properties`),
/// which describes what compiled, not what failed; and blank lines, which
/// would each become an empty `cargo::error=` line. Everything else is
/// kept as nvcc printed it, indentation included: the source line and its
/// caret, `detected during:` and each `instantiation of "…" [with T=half]
/// at line 21 of …`, `In file included from …` and its `from …` lines,
/// `N errors detected in the compilation of …`, and `compilation
/// terminated.` (gcc's: it stopped at this fatal error, so none after it
/// was looked for; one line, and it explains why there is only one error).
fn is_noise(line: &str) -> bool {
    line.is_empty()
        || line.starts_with("ptxas info")
        || (line.starts_with("    ") && line.trim_start().contains(" bytes stack frame"))
}

/// The `-ccbin` of nvcc arguments, if any (the last one wins).
pub(crate) fn ccbin(args: &[String]) -> Option<String> {
    let mut iter = args.iter();
    let mut found = None;
    while let Some(a) = iter.next() {
        if a == "-ccbin" || a == "--compiler-bindir" {
            found = iter.next().cloned();
        } else if let Some(v) = a
            .strip_prefix("-ccbin=")
            .or_else(|| a.strip_prefix("--compiler-bindir="))
        {
            found = Some(v.to_string());
        }
    }
    found
}

/// Every file a preprocessed source (`.ii`) was made from, from its line
/// markers, as absolute paths (relative ones are taken from `root`),
/// sorted: the main file (the first marker's) and every file the
/// preprocessor entered (`# 1 "kernels/common.cuh" 1`: flag 1). A marker
/// without flag 1 that names a new file comes from a `#line` directive
/// (generated sources name their grammar or template that way), which reads
/// no file; `<built-in>` and the like are skipped. The same set as nvcc's
/// `-MD` gives, without its second preprocessor pass.
pub(crate) fn deps_from_preprocessed(text: &[u8], root: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut main_seen = false;
    let mut rest = text;
    loop {
        let line_end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        let line = &rest[..line_end];
        if let Some((name, flags)) = marker(line) {
            if !name.starts_with(b"<")
                && (!main_seen || flags.split(|b| *b == b' ').any(|f| f == b"1"))
            {
                main_seen = true;
                let path = unescape(name);
                out.push(if path.is_absolute() {
                    path
                } else {
                    root.join(path)
                });
            }
        }
        if line_end >= rest.len() {
            break;
        }
        rest = &rest[line_end + 1..];
    }
    out.sort();
    out.dedup();
    out
}

/// `# 12 "file" 1 3` (or `#line 12 "file"`) → (`file`, still escaped; the
/// flags after it).
fn marker(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let rest = line.strip_prefix(b"#")?;
    let rest = rest.strip_prefix(b"line").unwrap_or(rest);
    let rest = rest.strip_prefix(b" ")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let rest = rest[digits..].strip_prefix(b" \"")?;
    let mut i = 0;
    while i < rest.len() {
        match rest[i] {
            b'\\' => i += 2,
            b'"' => {
                let flags = rest.get(i + 1..).unwrap_or(b"");
                return Some((&rest[..i], flags.trim_ascii()));
            }
            _ => i += 1,
        }
    }
    None
}

/// A line marker's file name as the file system names it: the
/// preprocessor's C escapes read (`\n` a newline, `\\` a backslash, `\ooo`
/// a byte; `occ_model::compiler::names::unescape_c`), a name that is not a C string
/// taken as it is; on Unix the bytes as they are.
fn unescape(name: &[u8]) -> PathBuf {
    let bytes = occ_model::compiler::names::unescape_c(name).unwrap_or_else(|| name.to_vec());
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt as _;
        PathBuf::from(std::ffi::OsString::from_vec(bytes))
    }
    #[cfg(not(unix))]
    {
        PathBuf::from(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// The most nvcc warnings shown as cargo warnings per build; the rest are
/// counted in one line.
const MAX_WARNINGS: usize = 10;

/// nvcc's own warnings (front end and host compiler, not ptxas's, which the
/// manifest records per kernel), one line each, deduplicated across archs
/// and files, in job order (`logs`: each job's log), at most
/// [`MAX_WARNINGS`] plus a count of the rest.
pub(crate) fn warnings<'a>(logs: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut seen: Vec<&str> = Vec::new();
    for log in logs {
        for line in log.lines() {
            let line = line.trim_end();
            let lower = line.to_ascii_lowercase();
            if lower.starts_with("ptxas") || !lower.contains("warning") {
                continue;
            }
            if !seen.contains(&line) {
                seen.push(line);
            }
        }
    }
    let mut out: Vec<String> = seen
        .iter()
        .take(MAX_WARNINGS)
        .map(|l| format!("nvcc: {l}"))
        .collect();
    if seen.len() > MAX_WARNINGS {
        out.push(format!(
            "nvcc: {} more warnings not shown (build the file with nvcc by hand to see them all)",
            seen.len() - MAX_WARNINGS
        ));
    }
    out
}

/// The `#$ NAME=value` lines of a dry run.
pub(crate) fn dryrun_settings(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.strip_prefix("#$ "))
        .filter_map(|l| {
            let (name, value) = l.split_once('=')?;
            let plain =
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            plain.then(|| (name.to_string(), value.trim().to_string()))
        })
        .collect()
}

/// The program of each command line of a dry run (`gcc`, `"$CICC_PATH/cicc"`, `ptxas`).
pub(crate) fn dryrun_programs(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("#$ "))
        .filter(|l| {
            let first = l.split_whitespace().next().unwrap_or("");
            !first.contains('=') || first.starts_with('"')
        })
        .filter_map(|l| {
            let l = l.trim_start();
            if let Some(rest) = l.strip_prefix('"') {
                rest.split('"').next().map(str::to_string)
            } else {
                l.split_whitespace().next().map(str::to_string)
            }
        })
        .filter(|p| !p.is_empty())
        .collect()
}

/// `$NAME` and `$(NAME)` replaced by the dry run's settings.
pub(crate) fn expand(word: &str, settings: &[(String, String)]) -> String {
    let mut out = word.to_string();
    for (name, value) in settings {
        out = out
            .replace(&format!("$({name})"), value)
            .replace(&format!("${name}"), value);
    }
    out
}

/// The `-L` folders of a dry run's `LIBRARIES` setting, as nvcc wrote
/// them (quoted words whole, the rest split at spaces).
pub(crate) fn dryrun_library_dirs(text: &str) -> Vec<String> {
    setting_words(text, "LIBRARIES")
        .filter_map(|w| w.strip_prefix("-L"))
        .map(str::to_string)
        .collect()
}

/// The include folders of a dry run's `INCLUDES` and `SYSTEM_INCLUDES`
/// settings (`-I<dir>`, `-isystem <dir>`): the toolkit's part of every
/// job's include search, as its profile expanded it.
pub(crate) fn dryrun_include_dirs(text: &str) -> Vec<String> {
    let mut dirs = Vec::new();
    for name in ["INCLUDES", "SYSTEM_INCLUDES"] {
        let mut words = setting_words(text, name);
        while let Some(word) = words.next() {
            if word == "-isystem" || word == "-I" {
                dirs.extend(words.next().map(str::to_string));
            } else if let Some(dir) = word.strip_prefix("-isystem").or(word.strip_prefix("-I")) {
                dirs.push(dir.to_string());
            }
        }
    }
    dirs
}

/// The words of a dry run's setting `name`, of every line that sets it
/// (nvcc prints `INCLUDES` once from the environment and again once its
/// profile's `+=` added to it), quoted words whole, the rest split at
/// spaces.
fn setting_words<'a>(text: &'a str, name: &'a str) -> impl Iterator<Item = &'a str> {
    text.lines()
        .filter_map(|l| l.strip_prefix("#$ "))
        .filter_map(move |l| l.strip_prefix(name).and_then(|r| r.strip_prefix('=')))
        .flat_map(|value| {
            // Quoted words (odd pieces) are whole; the rest split at spaces.
            value
                .split('"')
                .enumerate()
                .flat_map(|(i, piece)| {
                    if i % 2 == 1 {
                        vec![piece]
                    } else {
                        piece.split_whitespace().collect()
                    }
                })
                .filter(|w| !w.is_empty())
        })
}

/// The environment variables an `nvcc.profile` can take a value from:
/// every name it sets (`NAME = ...` is overridden by nothing, but
/// `NAME += ...` and `NAME =+ ...` extend the environment's value) and
/// every `$(NAME)` it expands, less nvcc's own built-ins (`_HERE_`,
/// `_SPACE_`, ...: a leading and a trailing underscore) and `PATH` and
/// `LD_LIBRARY_PATH`, which pick programs the toolkit's identity already
/// resolves. Sorted, each once.
pub(crate) fn profile_variables(profile: &str) -> Vec<String> {
    let plain = |n: &str| {
        !n.is_empty()
            && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !(n.len() > 1 && n.starts_with('_') && n.ends_with('_'))
            && n != "PATH"
            && n != "LD_LIBRARY_PATH"
    };
    let mut names = Vec::new();
    for line in profile.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        if let Some(at) = line.find('=') {
            let name = line[..at].trim_end_matches(['+', '?']).trim();
            if plain(name) {
                names.push(name.to_string());
            }
        }
        let mut rest = line;
        while let Some(at) = rest.find("$(") {
            rest = &rest[at + 2..];
            if let Some(end) = rest.find(')') {
                if plain(&rest[..end]) {
                    names.push(rest[..end].to_string());
                }
                rest = &rest[end..];
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    const DRYRUN: &str = "#$ _NVVM_BRANCH_=nvvm\n#$ _SPACE_= \n#$ _HERE_=/cuda/bin\n\
#$ TOP=/cuda/bin/..\n#$ CICC_PATH=/cuda/bin/../nvvm/bin\n\
#$ NVVMIR_LIBRARY_DIR=/cuda/bin/../nvvm/libdevice\n#$ PATH=/cuda/bin/../nvvm/bin:/cuda/bin:/usr/bin\n\
#$ INCLUDES=\"-I/cuda/bin/../include\"  \n#$ SYSTEM_INCLUDES=\"-isystem\" \"/cuda/bin/../include/cccl\"  \n\
#$ gcc -D__CUDA_ARCH__=800 -E -x c++ \"k.cu\" -o \"/t/k.cpp1.ii\" \n\
#$ \"$CICC_PATH/cicc\" --c++17 \"/t/k.cpp1.ii\" -o \"/t/k.ptx\"\n\
#$ ptxas -arch=sm_80 -m64 -v  \"/t/k.ptx\"  -o \"/t/o.cubin\" \n\
#$ LIBRARIES=  \"-L/cuda/bin/../lib\" -L/cuda/lib/stubs\n";

    #[test]
    fn a_dry_run_names_its_programs_and_settings() {
        let settings = dryrun_settings(DRYRUN);
        assert!(settings.contains(&("_HERE_".into(), "/cuda/bin".into())));
        let programs: Vec<String> = dryrun_programs(DRYRUN)
            .iter()
            .map(|p| expand(p, &settings))
            .collect();
        assert_eq!(programs, ["gcc", "/cuda/bin/../nvvm/bin/cicc", "ptxas"]);
        assert_eq!(
            dryrun_library_dirs(DRYRUN),
            ["/cuda/bin/../lib", "/cuda/lib/stubs"]
        );
        assert_eq!(
            dryrun_include_dirs(DRYRUN),
            ["/cuda/bin/../include", "/cuda/bin/../include/cccl"]
        );
        // A profile's `INCLUDES += "-I$(MY_INC)"`: nvcc prints the setting
        // again, with the folder added; every line counts.
        let twice = format!("{DRYRUN}#$ INCLUDES=\"-I/cuda/bin/../include\" \"-I/my/inc\"  \n");
        assert_eq!(
            dryrun_include_dirs(&twice),
            [
                "/cuda/bin/../include",
                "/cuda/bin/../include",
                "/my/inc",
                "/cuda/bin/../include/cccl"
            ]
        );
    }

    #[test]
    fn a_profile_names_the_variables_it_reads() {
        // nvcc 13.5's own profile (the wheels'), with a user's line added.
        let profile = "\nTOP              = $(_HERE_)/..\n\nCICC_PATH        = $(TOP)/nvvm/bin\n\
            LD_LIBRARY_PATH += $(TOP)/lib:\nPATH            += $(CICC_PATH):$(_HERE_):\n\
            INCLUDES        +=  \"-I$(TOP)/include\" $(_SPACE_)\n\
            INCLUDES        +=  \"-I$(MY_INC)\" $(_SPACE_)\n\
            LIBRARIES        =+ $(_SPACE_) \"-L$(TOP)/lib/stubs\"\nPTXAS_FLAGS     +=\n# $(COMMENTED)\n";
        assert_eq!(
            profile_variables(profile),
            [
                "CICC_PATH",
                "INCLUDES",
                "LIBRARIES",
                "MY_INC",
                "PTXAS_FLAGS",
                "TOP"
            ]
        );
    }

    #[test]
    fn deps_from_line_markers() {
        let text = b"# 1 \"kernels/k.cu\"\n# 1 \"<built-in>\"\n# 1 \"<command-line>\"\n\
            # 1 \"/usr/include/stdc-predef.h\" 1 3 4\n# 1 \"kernels/k.cu\"\nint x;\n\
            # 1 \"kernels/common.cuh\" 1\n#pragma once\n# 3 \"kernels/k.cu\" 2\n\
            # 7 \"/opt/a \\\"q\\\" \\\\b.h\" 1\n#line 4 \"inc/x.cuh\"\n";
        let deps = deps_from_preprocessed(text, Path::new("/crate"));
        // `#line 4 "inc/x.cuh"` names a file the preprocessor never read.
        assert_eq!(
            deps,
            vec![
                PathBuf::from("/crate/kernels/common.cuh"),
                PathBuf::from("/crate/kernels/k.cu"),
                PathBuf::from("/opt/a \"q\" \\b.h"),
                PathBuf::from("/usr/include/stdc-predef.h"),
            ]
        );
    }

    #[test]
    fn markers_are_read_with_their_flags_and_escapes() {
        assert_eq!(
            marker(b"# 12 \"a \\\"b\\\".h\" 1 3"),
            Some((&b"a \\\"b\\\".h"[..], &b"1 3"[..]))
        );
        assert_eq!(
            marker(b"#line 4 \"x.cuh\""),
            Some((&b"x.cuh"[..], &b""[..]))
        );
        assert_eq!(marker(b"#pragma once"), None);
        assert_eq!(marker(b"# \"no line\""), None);
        assert_eq!(marker(b"# 3 \"unterminated"), None);
        assert_eq!(unescape(b"a \\\"b\\\" \\\\c"), Path::new("a \"b\" \\c"));
        // What cpp (nvcc 13.5) writes for a header named `nl<newline>x.cuh`
        // and one named `back\slash.cuh`: a newline, not an `n`.
        let ii = b"# 1 \"k.cu\"\n# 1 \"nl\\nx.cuh\" 1\n# 1 \"back\\\\slash.cuh\" 1\n# 1 \"e\xe2\x82\xac.cuh\" 1\n";
        assert_eq!(
            deps_from_preprocessed(ii, Path::new("/c")),
            ["/c/back\\slash.cuh", "/c/e€.cuh", "/c/k.cu", "/c/nl\nx.cuh"].map(PathBuf::from)
        );
        // Without markers, nothing is known.
        assert!(deps_from_preprocessed(b"int x;\n", Path::new("/crate")).is_empty());
    }

    #[test]
    fn host_compiler_failures_are_recognised() {
        let log = "\nnvcc fatal   : Failed to preprocess host compiler properties.\n\
                   ptxas info : x\n  second line\n";
        assert_eq!(
            classify(log),
            Failure::HostCompiler {
                detail: "nvcc said: nvcc fatal   : Failed to preprocess host compiler \
                         properties. / second line"
                    .into()
            }
        );
        let log = "error -- unsupported GNU version! gcc versions later than 14 are not supported!";
        assert!(matches!(classify(log), Failure::HostCompiler { .. }));
    }

    #[test]
    fn a_full_disk_is_recognised() {
        let log = "k.cu(1): warning: x\n  /tmp/x: No space left on device  \n";
        assert_eq!(
            classify(log),
            Failure::DiskFull {
                line: "/tmp/x: No space left on device".into()
            }
        );
        assert!(matches!(
            classify("write: Disk quota exceeded"),
            Failure::DiskFull { .. }
        ));
    }

    #[test]
    fn unsupported_archs_are_recognised() {
        let log = "nvcc fatal   : Unsupported gpu architecture 'compute_52'\n";
        assert_eq!(
            classify(log),
            Failure::UnsupportedArch {
                line: "nvcc fatal   : Unsupported gpu architecture 'compute_52'".into()
            }
        );
        let log = "ptxas fatal : Value 'sm_52' is not defined for option 'gpu-name'\n";
        assert!(matches!(classify(log), Failure::UnsupportedArch { .. }));
    }

    /// The lines of a failed run's log as [`classify`] gives them.
    fn diagnostics(log: &str) -> Vec<String> {
        match classify(log) {
            Failure::Diagnostics(lines) => lines,
            other => panic!("a compile error, not {other:?}"),
        }
    }

    /// nvcc 13.5, `nvcc -cubin -arch=sm_80 -Xptxas -v
    /// src/errors/template.cu` in tests/fixtures (regen.sh).
    const TEMPLATE_ERROR: &str =
        include_str!("../../../tests/fixtures/nvcc-13.5-template-error.log");

    #[test]
    fn a_template_error_keeps_its_caret_and_instantiation_chain() {
        assert_eq!(
            diagnostics(TEMPLATE_ERROR),
            [
                "src/errors/ops.cuh(8): error: class \"__half\" has no member \"no_such_member\"",
                "      return x.no_such_member * 2;",
                "               ^",
                "          detected during:",
                "            instantiation of \"T twice(T) [with T=half]\" at line 6 of src/errors/template.cu",
                "            instantiation of \"void scale(T *, int) [with T=half]\" at line 9 of src/errors/template.cu",
                "1 error detected in the compilation of \"src/errors/template.cu\".",
            ]
        );
    }

    /// nvcc 13.5, `nvcc -cubin -arch=sm_80 -Xptxas -v
    /// src/errors/include.cu` in tests/fixtures (regen.sh).
    #[test]
    fn a_missing_header_keeps_its_include_chain_and_source_line() {
        let log = include_str!("../../../tests/fixtures/nvcc-13.5-include-error.log");
        assert_eq!(
            diagnostics(log),
            [
                "In file included from src/errors/wrap.cuh:4,",
                "                 from src/errors/include.cu:1:",
                "src/errors/helpers.cuh:2:10: fatal error: missing_helpers.cuh: No such file or directory",
                "    2 | #include \"missing_helpers.cuh\"",
                "      |          ^~~~~~~~~~~~~~~~~~~~~",
                "compilation terminated.",
            ]
        );
    }

    /// nvcc 13.5, `nvcc -cubin -arch=sm_80 -Xptxas -v src/errors/smem.cu`
    /// in tests/fixtures (regen.sh): ptxas's error among its report.
    #[test]
    fn diagnostics_drop_ptxas_resource_report_and_are_bounded() {
        let log = include_str!("../../../tests/fixtures/nvcc-13.5-smem-error.log");
        assert_eq!(
            diagnostics(log),
            ["ptxas error   : Entry function '_Z3bigPf' uses too much shared data (0x10000 bytes, 0xc000 max)"]
        );
        assert_eq!(classify("ptxas info : x\n"), Failure::Diagnostics(vec![]));
        let long: String = (0..45).map(|i| format!("k.cu({i}): error: e\n")).collect();
        let lines = diagnostics(&long);
        assert_eq!(lines.len(), MAX_DIAGNOSTICS + 1);
        assert_eq!(lines[MAX_DIAGNOSTICS], "... and 5 more lines");
    }

    #[test]
    fn the_last_ccbin_wins_in_every_spelling() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(ccbin(&args(&["-O3"])), None);
        assert_eq!(ccbin(&args(&["-ccbin", "g++-12"])), Some("g++-12".into()));
        assert_eq!(
            ccbin(&args(&["-ccbin=a", "--compiler-bindir", "b"])),
            Some("b".into())
        );
        assert_eq!(
            ccbin(&args(&["--compiler-bindir=/usr/bin/clang"])),
            Some("/usr/bin/clang".into())
        );
    }

    #[test]
    fn warnings_are_nvccs_own_once_each_in_order() {
        let sm80 =
            "kernels/k.cu(3): warning #177-D: variable \"x\" was declared but never referenced\n\
                    ptxas info    : Used 32 registers\n\
                    ptxas warning : Registers are spilled to local memory\n\
                    kernels/k.cu(9): Warning: host compiler says so\n";
        let sm90 =
            "kernels/k.cu(3): warning #177-D: variable \"x\" was declared but never referenced\n\
                    an unrelated line\n";
        assert_eq!(
            warnings([sm80, sm90]),
            [
                "nvcc: kernels/k.cu(3): warning #177-D: variable \"x\" was declared but never referenced",
                "nvcc: kernels/k.cu(9): Warning: host compiler says so",
            ]
        );
        assert!(warnings(["ptxas info    : Used 8 registers\n"]).is_empty());
    }

    #[test]
    fn warnings_past_the_limit_are_counted() {
        let log: String = (0..MAX_WARNINGS + 3)
            .map(|i| format!("k.cu({i}): warning: w{i}\n"))
            .collect();
        let shown = warnings([log.as_str(), log.as_str()]);
        assert_eq!(shown.len(), MAX_WARNINGS + 1, "{shown:#?}");
        assert_eq!(shown[0], "nvcc: k.cu(0): warning: w0");
        assert_eq!(
            shown[MAX_WARNINGS],
            "nvcc: 3 more warnings not shown (build the file with nvcc by hand to see them all)"
        );
    }
}
