#!/usr/bin/env python3
"""candle-kernels built three ways, side by side (BENCHMARKS.md item 8).

Called by bench/candle.sh. Nothing of candle is committed: a scratch crate
under $BENCH_DIR (default /tmp/occ-bench/candle) depends on `candle-kernels`
(the newest version cargo resolves), `cargo fetch` downloads it, and its
source is copied from cargo's registry folder
(~/.cargo/registry/src/*/candle-kernels-<version>/) into three crates:

 (a) candle's own crate, its build.rs unchanged (cudaforge), run with
     CUDA_COMPUTE_CAP=80 and the nvcc of .cuda/ (NVCC, CUDA_HOME, PATH);
 (b) a copy whose build.rs uses only occ-build for the PTX part, embedding
     PTX for sm_80 (`.embed(Embed::Ptx)`);
 (c) the same with occ-build's default embed, a fatbin per file, for sm_80
     and sm_90.
 (a') candle's crate with the library part cut from its build.rs: the
     PTX part alone, the same nvcc work as (b) without libmoe.

(b) and (c) keep candle's Rust API: the generated src/lib.rs takes candle's
own lib.rs and replaces its `mod ptx` (cudaforge's ptx.rs) with constants
read from occ's kernels.rs (`kernels::DEVICE_CODE` by source, in a const
fn), and exposes the kernel table as `candle_kernels::occ` (`occ::get(name)`).
When the occ-build tree has `Build::static_lib`, their build.rs also
builds libmoe.a from candle's host-code files with a second `Build` (a
part named by its library, in the same OUT_DIR; with an occ-build that has
no `Build::name`, in its own out dir with its own lock file), and a small
binary that looks kernels up by name and references one of libmoe's host
launchers is linked against (b); MOE=0 or MOE=1 forces the choice.
VARIANTS (default "apbc") picks the crates, ITEM3=0 skips the kernels.rs
figures.

For each crate, REPS repetitions interleaved (a, b, c, a, b, c, ...): clean
build (`cargo clean -p candle-kernels`, then `cargo
build`; dependencies are built beforehand by a crate with the same
build-dependency and an empty build.rs, into the same target dir), no-op
rebuild, header-edit rebuild (a comment appended to binary_op_macros.cuh,
which only binary.cu includes; whether binary.cu was recompiled, and for
cudaforge whether its binary.ptx was rewritten), `touch src/lib.rs`
rebuild; once: a release binary (`cargo build --release` of a small bin
taking every module's device code, RELEASE=0 skips it), rlib size, the
rustc time and peak RSS of the crate itself (a RUSTC_WRAPPER that runs
/usr/bin/time on `--crate-name candle_kernels`), nvcc runs (counted by a
wrapper: NVCC for cudaforge, OCC_NVCC_LAUNCHER for occ-build), kernels and
spills (occ: manifest.json; cudaforge: `.entry` lines in its PTX, which has
no ptxas numbers).

Then the kernels.rs targets of issue 14 item 3, on (c) (candle's size,
sm_80 + sm_90) and on a generated crate of 2000 kernels in one .cu for
three archs: rustc time and memory with and without `include!`ing
kernels.rs (the same blobs embedded by `include_bytes!` directly), the
rlib's overhead over the embedded bytes, and the build script run directly
with cargo's variables into its existing OUT_DIR (everything cached).

CANDLE_CORE=1 then builds candle-core (crates.io, the same version,
unchanged, `cuda` feature) against each crate but (a) through
`[patch.crates-io]` in a scratch workspace (`cargo build`, no GPU needed;
CUDARC_CUDA_VERSION=13040 by default, since cudarc 0.19.10 has no
bindings for the 13.5 nvcc on PATH); SIDE=0 skips the side by side.

Prints Markdown tables; also writes $BENCH_DIR/results.md and results.json.
"""

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OCC = Path(os.environ.get("OCC_ROOT", ROOT)).resolve()  # the occ tree to build against
BENCH = Path(os.environ.get("BENCH_DIR", "/tmp/occ-bench/candle")).resolve()
TARGET = BENCH / "target"
REPS = int(os.environ.get("REPS", "1"))
CUDA = (ROOT / ".cuda/cu13/nvidia/cu13").resolve()
NVCC = str(Path(os.environ["NVCC"]).resolve()) if os.environ.get("NVCC") else str(CUDA / "bin/nvcc")
HEADER = "src/binary_op_macros.cuh"  # included by binary.cu only
HEADER_INCLUDERS = ["binary.cu"]
# SMOKE=1: a quick check of the script itself (two PTX files, no cudaforge
# crate, 200 kernels instead of 2000); its figures mean nothing.
SMOKE = os.environ.get("SMOKE") == "1"
BIG_KERNELS = 200 if SMOKE else 2000
# VARIANTS: which of the crates to build (default "apbc": a, a' = p, b, c);
# ITEM3=0 skips the
# kernels.rs figures (item 3 needs crate c).
VARIANTS = os.environ.get("VARIANTS", "apbc")
ITEM3 = os.environ.get("ITEM3", "1") == "1"
# SIDE=0 skips the side by side (with CANDLE_CORE=1: only candle-core);
# RELEASE=0 skips the release binaries; CANDLE_CORE=1 builds candle-core
# against each crate (issue 25 item 6).
SIDE = os.environ.get("SIDE", "1") == "1"
RELEASE = os.environ.get("RELEASE", "1") == "1"
CANDLE_CORE = os.environ.get("CANDLE_CORE", "0") == "1"
BIG_ARCHS = ["sm_80", "sm_90", "sm_100"]
# candle's build.rs: the PTX part is source_dir("src") minus these patterns
# (on file names); the library part is its list of host-code files.
PTX_EXCLUDE = [r"moe_.*\.cu", r"mmvq_gguf\.cu", r"mmq_.*\.cu"]
FLAGS = ["--expt-relaxed-constexpr", "-std=c++17", "-O3"]

NVCC_LOG = BENCH / "nvcc-calls.log"
RUSTC_LOG = BENCH / "rustc-times.log"
LAUNCHER = BENCH / "bin/count-launcher.sh"  # OCC_NVCC_LAUNCHER: log, then "$@"
COUNTED_NVCC = BENCH / "bin/nvcc-counted.sh"  # NVCC for cudaforge
RUSTC_WRAPPER = BENCH / "bin/rustc-timed.sh"


def say(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def write(path, text, mode=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    if mode:
        path.chmod(mode)


def setup_wrappers():
    write(LAUNCHER, f'#!/bin/sh\necho "$*" >> \'{NVCC_LOG}\'\nexec "$@"\n', 0o755)
    write(COUNTED_NVCC, f'#!/bin/sh\necho "{NVCC} $*" >> \'{NVCC_LOG}\'\nexec \'{NVCC}\' "$@"\n', 0o755)
    # rustc on the crate itself: wall and peak RSS from /usr/bin/time.
    write(RUSTC_WRAPPER, f"""#!/bin/sh
case " $* " in
  *" --crate-name candle_kernels "*|*" --crate-name occbench_big "*)
    case " $* " in *" --crate-type lib "*)
      exec /usr/bin/time -a -o '{RUSTC_LOG}' -f '%e %M' "$@";;
    esac;;
esac
exec "$@"
""", 0o755)


def lines(path):
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


def env(variant_env=None):
    e = {k: v for k, v in os.environ.items()
         if not (k.startswith("CARGO_") and k != "CARGO_HOME") and not k.startswith("OCC_")
         and k not in ("RUSTFLAGS", "OUT_DIR", "NVCC", "CUDA_COMPUTE_CAP", "RUSTC_WRAPPER")}
    e["CARGO_TARGET_DIR"] = str(TARGET)
    e["CARGO_INCREMENTAL"] = "0"
    e["RUSTC_WRAPPER"] = str(RUSTC_WRAPPER)
    e["PATH"] = str(Path(NVCC).parent) + os.pathsep + e.get("PATH", "")
    e.update(variant_env or {})
    return e


def is_pkg(package_id, name):
    """Whether a cargo package id (`path+file:///dir#name@1.0`, or
    `path+file:///name#1.0` when the folder has the package's name) is `name`'s."""
    return f"#{name}@" in package_id or f"/{name}#" in package_id


class Run:
    """One cargo invocation: wall, nvcc runs, rustc runs of the crate, and
    the JSON messages (artifacts, build-script out dirs)."""

    def __init__(self, crate, args, variant_env, check=True, offline=True):
        before_nvcc, before_rustc = len(lines(NVCC_LOG)), len(lines(RUSTC_LOG))
        cmd = ["nice", "cargo", *args] + (["--offline"] if offline else [])
        if args[0] == "build":
            cmd.append("--message-format=json-render-diagnostics")
        start = time.monotonic()
        p = subprocess.run(cmd, cwd=crate, env=env(variant_env),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.wall = time.monotonic() - start
        if check and p.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed in {crate}:\n{p.stdout[-4000:]}\n{p.stderr[-8000:]}")
        self.ok = p.returncode == 0
        self.stderr = p.stderr
        # Compile runs only: a `.cu` among the arguments (cudaforge also runs
        # `nvcc --version` per builder and `nvcc --lib` to archive).
        self.nvcc = [c for c in lines(NVCC_LOG)[before_nvcc:]
                     if any(a.endswith(".cu") for a in c.split())]
        self.rustc = [tuple(float(x) for x in l.split()) for l in lines(RUSTC_LOG)[before_rustc:]
                      if re.fullmatch(r"[\d.]+ \d+", l.strip())]
        self.messages = []
        for line in p.stdout.splitlines():
            if line.startswith("{"):
                try:
                    self.messages.append(json.loads(line))
                except json.JSONDecodeError:
                    pass

    def artifact(self, kind, suffix, pkg=("candle-kernels", "occbench_big", "candle-user")):
        for m in self.messages:
            if (m.get("reason") == "compiler-artifact" and kind in m["target"]["kind"]
                    and any(is_pkg(m["package_id"], p) for p in pkg)):
                for f in m["filenames"]:
                    if f.endswith(suffix):
                        return Path(f)
        return None

    def out_dir(self):
        for m in self.messages:
            if m.get("reason") == "build-script-executed" and any(
                    is_pkg(m["package_id"], p) for p in ("candle-kernels", "occbench_big")):
                return Path(m["out_dir"])
        return None

    def rustc_wall(self):
        return self.rustc[-1][0] if self.rustc else None

    def rustc_mib(self):
        return self.rustc[-1][1] / 1024 if self.rustc else None


# ---- candle-kernels from crates.io ----------------------------------------

def fetch_candle():
    probe = BENCH / "fetch"
    write(probe / "Cargo.toml", '[package]\nname = "candle-fetch"\nversion = "0.0.0"\n'
          'edition = "2021"\npublish = false\n\n[workspace]\n\n[dependencies]\n'
          'candle-kernels = "*"\n')
    write(probe / "src/lib.rs", "")
    p = subprocess.run(["cargo", "fetch"], cwd=probe, env=env(), text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        sys.exit(f"cargo fetch failed (needs crates.io):\n{p.stderr}")
    lock = (probe / "Cargo.lock").read_text()
    version = re.search(r'name = "candle-kernels"\nversion = "([^"]+)"', lock).group(1)
    home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    found = sorted(home.glob(f"registry/src/*/candle-kernels-{version}"))
    if not found:
        sys.exit(f"candle-kernels {version} not in {home}/registry/src after cargo fetch")
    return version, found[0], probe / "Cargo.lock"


def ptx_files(src):
    """candle's PTX part: `.cu` under src/ whose name matches no exclude."""
    out = []
    for f in sorted(src.rglob("*.cu")):
        if not any(re.fullmatch(p, f.name) for p in PTX_EXCLUDE):
            out.append(f.relative_to(src.parent).as_posix())
    return out


def moe_files(src):
    """candle's library part, read from its build.rs (the `moe_sources` list)."""
    text = (src.parent / "build.rs").read_text()
    block = re.search(r"let mut moe_sources = vec!\[(.*?)\];", text, re.S)
    if not block:
        sys.exit("candle's build.rs has no `moe_sources` list: update bench/candle.py")
    return re.findall(r'"([^"]+\.cu)"', block.group(1))


def copy_source(src_root, dest):
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(src_root, dest)
    for f in dest.rglob("*"):
        f.chmod(0o755 if f.is_dir() else 0o644)


def has_static_lib():
    forced = os.environ.get("MOE")
    if forced in ("0", "1"):
        return forced == "1"
    builder = OCC / "occ-build/src/builder.rs"
    return "pub fn static_lib(" in builder.read_text()


def occ_cargo_toml(version):
    return (f'[package]\nname = "candle-kernels"\nversion = "{version}"\nedition = "2021"\n'
            f'description = "candle-kernels {version} built with occ-build (bench/candle.sh)"\n'
            f'license = "MIT OR Apache-2.0"\nbuild = "build.rs"\n\n[workspace]\n\n'
            f'[lib]\nname = "candle_kernels"\npath = "src/lib.rs"\n\n[features]\ncutile = []\n\n'
            f'[dependencies]\n'
            # kernels.rs names the table's types as `::occ::table::…`.
            f'occ = {{ path = "{OCC / "occ"}", default-features = false }}\n\n[build-dependencies]\n'
            f'occ-build = {{ path = "{OCC / "occ-build"}" }}\n')


def rust_list(items, indent="    "):
    return "".join(f"{indent}{json.dumps(i)},\n" for i in items)


def has_parts():
    """Whether occ-build has several Builds per script in one OUT_DIR
    (`Build::name`; a static_lib is a part named by its library)."""
    return "pub fn name(" in (OCC / "occ-build/src/builder.rs").read_text()


def occ_build_rs(ptx, moe, archs, embed, with_moe):
    embed_line = f"\n    ptx.embed(occ_build::Embed::{embed});" if embed else ""
    text = f"""//! candle-kernels' build script on occ-build alone (generated by occ's
//! bench/candle.py; candle's own build.rs uses cudaforge).

/// candle's PTX part: `source_dir("src")` minus its `exclude` list.
const PTX_FILES: &[&str] = &[
{rust_list(ptx)}];

/// candle's library part: the files with host code (`moe_sources`).
#[allow(dead_code)]
const MOE_FILES: &[&str] = &[
{rust_list(moe)}];

const ARCHS: &[&str] = &[{", ".join(json.dumps(a) for a in archs)}];

const FLAGS: &[&str] = &[{", ".join(json.dumps(f) for f in FLAGS)}];

fn main() {{
    let mut ptx = occ_build::Build::new();
    ptx.files(PTX_FILES).archs(ARCHS.iter().copied());{embed_line}
    for flag in FLAGS {{
        ptx.flag(*flag);
    }}
    ptx.compile();
"""
    if with_moe and has_parts():
        text += """
    // The static library (candle's libmoe.a): a second Build, a part named
    // by its library; kernels.rs and occ.lock hold both parts' kernels.
    let mut moe = occ_build::Build::new();
    moe.files(MOE_FILES).archs(ARCHS.iter().copied()).static_lib("moe");
"""
    elif with_moe:
        text += """
    // The static library (candle's libmoe.a) from a second Build, in its own
    // out dir and with its own lock so that the two builds' files never meet
    // (this occ-build has no Build::name for several parts in one OUT_DIR).
    let out_dir = std::path::PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    let mut moe = occ_build::Build::new();
    moe.files(MOE_FILES)
        .archs(ARCHS.iter().copied())
        .out_dir(out_dir.join("moe"))
        .lock_file("occ-moe.lock")
        .static_lib("moe");
"""
    if with_moe:
        text += """    for flag in FLAGS {
        moe.flag(*flag);
    }
    // As candle's build.rs: no bf16 WMMA kernels below sm_80.
    let below_80 = ARCHS
        .iter()
        .any(|a| a.trim_start_matches("sm_").trim_end_matches('a').parse::<u32>().is_ok_and(|n| n < 80));
    if below_80 {
        moe.define("NO_BF16_KERNEL", None);
    }
    if std::env::var("TARGET").is_ok_and(|t| t.contains("msvc")) {
        moe.define("_USE_MATH_DEFINES", None);
    }
    moe.compile();
"""
    return text + "}\n"


PTX_MOD = re.compile(r'mod ptx \{\s*include!\(concat!\(env!\("OUT_DIR"\), "/ptx\.rs"\)\);\s*\}\n')


def occ_lib_rs(candle_lib, ptx, kind, include_kernels=True, blob_files=None, modules=None):
    """candle's lib.rs with its `mod ptx` taken from occ's kernels.rs.

    occ embeds each blob as an assembler symbol (`occ::__device_code!`:
    `global_asm!` with `.incbin`, out of the rmeta), which a `const` may
    not point to, so candle's `pub const AFFINE: Module` keeps its type
    but its `ptx` field becomes a function that finds the blob in
    `occ::DEVICE_CODE` at run time (by source and kind).
    kind "Ptx": `Module::ptx() -> &str` as candle's, the file's PTX.
    kind "Fatbin": each module is the file's fatbin; `Module::ptx()`
    becomes `Module::image() -> &[u8]` (for cuModuleLoadData).
    Without include_kernels the same blobs are embedded by include_bytes!
    of the files in $OUT_DIR/occ (blob_files: source -> file), the baseline
    for kernels.rs's own cost."""
    if not PTX_MOD.search(candle_lib):
        sys.exit("candle's lib.rs has no `mod ptx { include!(.../ptx.rs) }`: update bench/candle.py")
    consts = []
    for f in modules or ptx:
        name = Path(f).stem.upper()
        if f not in ptx:  # SMOKE: a module not built
            value = "&[]"
        elif include_kernels:
            value = f"blob({json.dumps(f)})"
        else:
            value = f'include_bytes!(concat!(env!("OUT_DIR"), "/occ/{blob_files[f]}"))'
        consts.append(f"    pub const {name}: fn() -> &'static [u8] = || {value};\n")
    helpers = ""
    if include_kernels:
        helpers = f"""    /// The blob of `source` in occ's table (one per file in this build).
    fn blob(source: &str) -> &'static [u8] {{
        super::occ::DEVICE_CODE
            .iter()
            .find(|code| code.source == source && matches!(code.kind, super::occ::CodeKind::{kind}))
            .map_or(&[], |code| code.bytes)
    }}

"""
    if kind == "Ptx":
        # nvcc's PTX is ASCII; `ptx_is_text` below checks it in the
        # crate's tests, so `Module::ptx()` skips the check per call.
        helpers += """    pub(crate) fn text(bytes: &'static [u8]) -> &'static str {
        // SAFETY: nvcc writes PTX as ASCII text (checked by `ptx_is_text`).
        unsafe { core::str::from_utf8_unchecked(bytes) }
    }

    #[test]
    fn ptx_is_text() {
        for code in super::occ::DEVICE_CODE {
            assert!(core::str::from_utf8(code.bytes).is_ok(), "{}", code.source);
        }
    }

"""
    module = ""
    if include_kernels:
        module = ("/// occ's kernel table: `occ::get(\"affine_f32\")`, `occ::KERNELS`, "
                  "`occ::DEVICE_CODE`.\n"
                  "pub mod occ {\n    include!(concat!(env!(\"OUT_DIR\"), \"/occ/kernels.rs\"));\n}\n\n")
    module += "mod ptx {\n" + helpers + "".join(consts) + "}\n"
    lib = PTX_MOD.sub(module, candle_lib, count=1)
    accessor = "pub fn ptx(&self) -> &'static str {\n        self.ptx\n    }"
    if kind == "Ptx":
        new_accessor = "pub fn ptx(&self) -> &'static str {\n        ptx::text((self.ptx)())\n    }"
    else:
        new_accessor = ("/// The module's fatbin, for `cuModuleLoadData`.\n    "
                        "pub fn image(&self) -> &'static [u8] {\n        (self.ptx)()\n    }")
    for old, new in [("ptx: &'static str,", "ptx: fn() -> &'static [u8],"), (accessor, new_accessor)]:
        if old not in lib:
            sys.exit(f"candle's lib.rs has no `{old}`: update bench/candle.py")
        lib = lib.replace(old, new, 1)
    return lib


USER_MAIN = """//! A candle user of the occ-built candle-kernels: looks kernels up by name
//! and references one of libmoe's host launchers (so the link needs libmoe).
fn main() {
    for dtype in ["f32", "f16", "bf16"] {
        let name = format!("affine_{dtype}");
        match candle_kernels::occ::get(&name) {
            Some(k) => println!("{name}: {} on {} archs, best block {}", k.source, k.archs.len(),
                                k.archs[0].best_block_size),
            None => println!("{name}: not found"),
        }
    }
    println!("kernels: {}", candle_kernels::occ::KERNELS.len());
    LAUNCHER
}
"""


# ---- measuring ------------------------------------------------------------

def warm_deps(name, build_dep, lock, dep=""):
    """Builds the crate's build-dependency (and `dep`, a normal one) into
    TARGET, untimed."""
    crate = BENCH / f"deps-{name}"
    write(crate / "Cargo.toml", f'[package]\nname = "deps-{name}"\nversion = "0.0.0"\n'
          f'edition = "2021"\n\n[workspace]\n\n[dependencies]\n{dep}\n\n'
          f'[build-dependencies]\n{build_dep}\n')
    write(crate / "build.rs", "fn main() {}\n")
    write(crate / "src/lib.rs", "")
    if lock and not (crate / "Cargo.lock").exists():
        shutil.copy(lock, crate / "Cargo.lock")
    Run(crate, ["build"], {})


def append(path, n):
    with open(path, "a") as f:
        f.write(f"// bench edit {n} {time.time()}\n")


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def nvcc_files(calls):
    return sorted({Path(a).name for c in calls for a in c.split() if a.endswith(".cu")})


def count_entries(out_dir):
    n = 0
    for f in sorted(out_dir.glob("*.ptx")):
        n += len(re.findall(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s", f.read_text(errors="replace"), re.M))
    return n


def occ_counts(out_dir):
    man = json.loads((out_dir / "occ/manifest.json").read_text())
    spilling = sorted({k["name"] for k in man["kernels"] for a in k["archs"].values()
                       if a["spill_stores"] or a["spill_loads"]})
    pairs = sum(len(k["archs"]) for k in man["kernels"])
    blobs = {d["source"]: d["file"] for d in man["device_code"]}
    blob_bytes = sum((out_dir / "occ" / d["file"]).stat().st_size for d in man["device_code"] if d["file"])
    krs = out_dir / "occ/kernels.rs"
    return {"kernels": len(man["kernels"]), "pairs": pairs, "spilling": spilling,
            "blobs": blobs, "blob_bytes": blob_bytes,
            "kernels_rs_bytes": krs.stat().st_size,
            "kernels_rs_lines": len(krs.read_text().splitlines())}


def measure_rep(r, crate, venv, is_occ, rep):
    """One repetition on one crate, appended to `r`: clean build, no-op,
    header edit (and whether what includes the header was recompiled),
    `touch src/lib.rs` (rustc of the crate). main() interleaves the
    crates per repetition (a, b, c, a, b, c, ...)."""
    label = r["label"]
    say(f"{label}: rep {rep + 1}/{REPS}: clean build")
    Run(crate, ["clean", "-p", "candle-kernels"], venv)
    clean = Run(crate, ["build"], venv)
    out_dir = clean.out_dir()
    c = r.setdefault("clean", {"walls": [], "nvcc": [], "rustc": [], "rustc_mib": []})
    c["walls"].append(clean.wall)
    c["nvcc"].append(len(clean.nvcc))
    c["rustc"].append(clean.rustc_wall())
    c["rustc_mib"].append(clean.rustc_mib())
    rlib = clean.artifact("lib", ".rlib")
    r["rlib_bytes"] = rlib.stat().st_size if rlib else None
    r["out_dir"] = str(out_dir)
    r["script"] = str(clean.artifact("custom-build", "build-script-build"))
    if is_occ:
        r["counts"] = occ_counts(out_dir)
    else:
        entries = count_entries(out_dir)
        r["counts"] = {"kernels": entries, "pairs": entries, "spilling": None,
                       "blob_bytes": sum(f.stat().st_size for f in out_dir.glob("*.ptx"))}
    say(f"{label}: no-op")
    noop = Run(crate, ["build"], venv)
    n = r.setdefault("noop", {"walls": [], "nvcc": []})
    n["walls"].append(noop.wall)
    n["nvcc"].append(len(noop.nvcc))
    say(f"{label}: header edit")
    # cudaforge's output for binary.cu: does the edit reach it?
    stale_probe = None if is_occ else out_dir / "binary.ptx"
    before = stale_probe.stat().st_mtime_ns if stale_probe and stale_probe.exists() else None
    append(crate / HEADER, rep)
    edit = Run(crate, ["build"], venv)
    files = nvcc_files(edit.nvcc)
    h = r.setdefault("header", {"walls": [], "nvcc": [], "files": [], "rebuilt": [], "output_rewritten": []})
    h["walls"].append(edit.wall)
    h["nvcc"].append(len(edit.nvcc))
    h["files"] = files
    h["rebuilt"].append(all(f in files for f in HEADER_INCLUDERS))
    if stale_probe:
        h["output_rewritten"].append(stale_probe.exists() and stale_probe.stat().st_mtime_ns != before)
    say(f"{label}: touch src/lib.rs")
    os.utime(crate / "src/lib.rs")
    touch = Run(crate, ["build"], venv)
    tt = r.setdefault("touch", {"walls": [], "nvcc": [], "rustc": [], "rustc_mib": []})
    tt["walls"].append(touch.wall)
    tt["nvcc"].append(len(touch.nvcc))
    tt["rustc"].append(touch.rustc_wall())
    tt["rustc_mib"].append(touch.rustc_mib())
    return r


def modules_of(candle_lib):
    """candle's module constants (`mdl!(AFFINE, Affine);` ...)."""
    return re.findall(r"^mdl!\((\w+), \w+\);", candle_lib, re.M)


def release_binary(key, crate, venv, accessor, modules):
    """A small binary depending on `crate` that takes every module's
    device code (`Module::ptx()` or `::image()`), built with `cargo build
    --release` (its own clean release build of the crate): (binary bytes,
    wall of the release build, what it printed)."""
    user = BENCH / f"release-{key}"
    name = f"release-{key.replace('_', '-')}"  # the package and its binary: one file per crate
    body = "".join(f"    total += std::hint::black_box(candle_kernels::{m}.{accessor}()).len();\n"
                   for m in modules)
    write(user / "Cargo.toml", f'[package]\nname = "{name}"\nversion = "0.0.0"\n'
          f'edition = "2021"\n\n[workspace]\n\n'
          f'[dependencies]\ncandle-kernels = {{ path = "{crate}" }}\n')
    write(user / "src/main.rs", "//! Every module's device code, as candle-core loads it.\nfn main() {\n"
          "    let mut total = 0usize;\n" + body +
          "    println!(\"device code: {total} bytes\");\n}\n")
    shutil.copy(crate / "Cargo.lock", user / "Cargo.lock")
    say(f"{key}: release binary")
    run = Run(user, ["build", "--release"], venv, check=False)
    if not run.ok:
        return {"ok": False, "error": " ".join(run.stderr.strip().splitlines()[-6:]), "wall": run.wall}
    binary = run.artifact("bin", name, pkg=(name,))
    p = subprocess.run([str(binary)], capture_output=True, text=True)
    return {"ok": True, "bytes": binary.stat().st_size, "wall": run.wall,
            "nvcc": len(run.nvcc), "printed": p.stdout.strip(), "rc": p.returncode}


def candle_core(key, crate, version, venv):
    """candle-core from crates.io, unchanged, `cuda` feature, built
    (`cargo build`, no GPU needed) against `crate` through
    `[patch.crates-io]` in a scratch workspace of its own."""
    ws = BENCH / f"core-{key}"
    write(ws / "Cargo.toml", f'[package]\nname = "core-{key.replace("_", "-")}"\nversion = "0.0.0"\n'
          f'edition = "2021"\npublish = false\n\n[workspace]\n\n[dependencies]\n'
          f'candle-core = {{ version = "={version}", features = ["cuda"] }}\n\n'
          f'[patch.crates-io]\ncandle-kernels = {{ path = "{crate}" }}\n')
    write(ws / "src/lib.rs", "//! candle-core with the patched candle-kernels.\npub use candle_core;\n")
    e = dict(venv)
    # cudarc 0.19.10 (candle-core's `cuda-version-from-build-system`)
    # knows CUDA up to 13.4 and panics on the 13.5 nvcc on PATH.
    e["CUDARC_CUDA_VERSION"] = os.environ.get("CUDARC_CUDA_VERSION", "13040")
    e["CARGO_TARGET_DIR"] = str(BENCH / "target-core")
    say(f"{key}: candle-core {version} (cuda) against it")
    run = Run(ws, ["build"], e, check=False, offline=False)
    lock = (ws / "Cargo.lock").read_text() if (ws / "Cargo.lock").exists() else ""
    entry = re.search(r'name = "candle-kernels"\nversion = "[^"]+"\n(source = "[^"]+")?', lock)
    errors = sorted({l.strip() for l in run.stderr.splitlines() if re.match(r"\s*error(\[E\d+\])?:", l)})
    return {"ok": run.ok, "wall": run.wall, "patched": bool(entry) and not entry.group(1),
            "errors": errors[:8], "env": {"CUDARC_CUDA_VERSION": e["CUDARC_CUDA_VERSION"]},
            "tail": "" if run.ok else "\n".join(run.stderr.strip().splitlines()[-25:])}


def script_env(crate, out_dir, pkg, venv):
    e = env(venv)
    e.update({"OUT_DIR": str(out_dir), "CARGO_MANIFEST_DIR": str(crate), "CARGO_PKG_NAME": pkg,
              "CARGO_PKG_VERSION": "0.0.0", "NUM_JOBS": str(os.cpu_count()),
              "TARGET": "x86_64-unknown-linux-gnu", "HOST": "x86_64-unknown-linux-gnu",
              "PROFILE": "debug", "OPT_LEVEL": "0", "DEBUG": "false", "RUSTC": "rustc"})
    return e


def cached_script(crate, script, out_dir, pkg, venv, reps=3):
    """The build script run directly into its existing OUT_DIR: one untimed
    run, then `reps` timed; every job cached (nvcc runs counted)."""
    e = script_env(crate, out_dir, pkg, venv)
    walls = []
    def compiles():
        return sum(1 for c in lines(NVCC_LOG) if any(a.endswith(".cu") for a in c.split()))

    before = compiles()
    for i in range(reps + 1):
        start = time.monotonic()
        p = subprocess.run(["nice", script], cwd=crate, env=e,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            sys.exit(f"{script} failed:\n{p.stderr}")
        if i:
            walls.append(time.monotonic() - start)
    return walls, compiles() - before


def kernels_rs_cost(crate, venv, with_lib, without_lib, reps=3):
    """rustc on the crate with lib.rs `with_lib` (includes kernels.rs) and
    `without_lib` (the same blobs by include_bytes!): (wall s, MiB, rlib) each."""
    out = {}
    original = (crate / "src/lib.rs").read_text()
    try:
        for name, text in (("without", without_lib), ("with", with_lib)):
            write(crate / "src/lib.rs", text)
            walls, mibs = [], []
            for _ in range(reps):
                os.utime(crate / "src/lib.rs")
                run = Run(crate, ["build"], venv)
                walls.append(run.rustc_wall())
                mibs.append(run.rustc_mib())
            rlib = run.artifact("lib", ".rlib")
            meta, objs = rlib_parts(rlib)
            out[name] = {"walls": walls, "mibs": mibs, "rlib": rlib.stat().st_size,
                         "rmeta": meta, "objects": objs}
    finally:
        write(crate / "src/lib.rs", original)
    return out


# ---- 2000 kernels ---------------------------------------------------------

def big_cu(n):
    out = ["// generated by occ's bench/candle.py: many small kernels in one file\n"]
    for i in range(n):
        out.append(f'extern "C" __global__ void big_{i:04}(float* p, const float* q, int n) {{\n'
                   f"  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                   f"  if (i < n) p[i] = p[i] * {i % 97 + 1}.0f + q[(i + {i}) % n];\n}}\n")
    return "".join(out)


BIG_LIB_WITH = """pub mod occ {
    include!(concat!(env!("OUT_DIR"), "/occ/kernels.rs"));
}

pub fn lookup(name: &str) -> Option<usize> {
    occ::get(name).map(|k| k.archs.len())
}
"""
BIG_LIB_WITHOUT = """pub static FATBIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/occ/BLOB"));
"""


def rlib_parts(rlib):
    """(metadata bytes, object-code bytes) of an rlib's members (`ar tv`):
    rustc keeps a static's value in lib.rmeta as well as in the object."""
    p = subprocess.run(["ar", "tv", str(rlib)], capture_output=True, text=True)
    meta = objs = 0
    for line in p.stdout.splitlines():
        fields = line.split()
        size, name = int(fields[2]), fields[-1]
        if name.endswith(".rmeta"):
            meta += size
        elif name.endswith(".o"):
            objs += size
    return meta, objs


def big_crate(lock):
    crate = BENCH / "occbench_big"
    write(crate / "Cargo.toml", '[package]\nname = "occbench_big"\nversion = "0.0.0"\nedition = "2021"\n\n'
          f'[workspace]\n\n[build-dependencies]\nocc-build = {{ path = "{OCC / "occ-build"}" }}\n')
    write(crate / "build.rs", "fn main() {\n    occ_build::Build::new()\n"
          f'        .file("kernels/many.cu")\n        .archs([{", ".join(json.dumps(a) for a in BIG_ARCHS)}])\n'
          "        .compile();\n}\n")
    write(crate / "kernels/many.cu", big_cu(BIG_KERNELS))
    write(crate / "src/lib.rs", BIG_LIB_WITH)
    if not (crate / "Cargo.lock").exists():
        shutil.copy(lock, crate / "Cargo.lock")
    return crate


def big(lock):
    crate = big_crate(lock)
    venv = {"OCC_NVCC_LAUNCHER": str(LAUNCHER), "NVCC": NVCC}
    say(f"{BIG_KERNELS} kernels x {len(BIG_ARCHS)} archs: clean build")
    Run(crate, ["clean", "-p", "occbench_big"], venv)
    clean = Run(crate, ["build"], venv)
    out_dir = clean.out_dir()
    counts = occ_counts(out_dir)
    script = clean.artifact("custom-build", "build-script-build")
    say(f"{BIG_KERNELS} kernels: cached build script")
    walls, nvcc = cached_script(crate, script, out_dir, "occbench_big", venv)
    blob = next(iter(counts["blobs"].values()))
    cost = kernels_rs_cost(crate, venv, BIG_LIB_WITH, BIG_LIB_WITHOUT.replace("BLOB", blob))
    return {"clean": clean.wall, "nvcc": len(clean.nvcc), "counts": counts,
            "script_walls": walls, "script_nvcc": nvcc, "cost": cost}


# ---- report ---------------------------------------------------------------

def s(x, digits=1):
    return "—" if x is None else f"{x:.{digits}f}"


def runs(xs, digits=1):
    return ", ".join(s(x, digits) for x in xs)


def mm(xs, digits=1):
    """median (min–max) of the runs, or the one run."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return "—"
    if len(xs) == 1:
        return s(xs[0], digits)
    return f"{s(median(xs), digits)} ({s(min(xs), digits)}–{s(max(xs), digits)})"


def mb(n):
    return "—" if n is None else f"{n / 1e6:.1f}"


def report(meta, results, c3, bigr):
    out = [f"candle-kernels {meta['version']} (crates.io, {meta['source']}); occ tree {meta['occ']}; "
           f"nvcc {NVCC}; REPS={REPS}; libmoe with occ-build: {meta['moe']}\n",
           f"Start {meta['start']}, load {meta['load_start']}; end {meta['end']}, load {meta['load_end']}\n",
           f"PTX part: {len(meta['ptx'])} files; library part (libmoe): {len(meta['moe_files'])} files\n"]
    out.append(f"\n### 8. candle-kernels: cudaforge vs occ-build (REPS={REPS}, interleaved; "
               "median (min–max))\n")
    side = [r for r in results if "clean" in r]
    if side:  # none with SIDE=0
        out.append("| figure | " + " | ".join(r["label"] for r in side) + " |\n")
        out.append("|---|" + "---|" * len(side) + "\n")

    def row(name, f):
        if side:
            out.append(f"| {name} | " + " | ".join(f(r) for r in side) + " |\n")

    def rel(r, key, base=None):
        base = base or (side[0] if side else None)
        if not base or r is base:
            return ""
        x, y = median(r[key]["walls"]), median(base[key]["walls"])
        return f"; **{x / y:.2f}×** {base['label'].split()[0]}" if x and y else ""

    row("clean `cargo build` (s)", lambda r: mm(r["clean"]["walls"]) + rel(r, "clean"))
    row("nvcc compile runs, clean", lambda r: "/".join(map(str, r["clean"]["nvcc"])))
    row("rustc of the crate in the clean build (s)", lambda r: mm(r["clean"]["rustc"], 2))
    row("no-op rebuild (s); nvcc runs", lambda r: mm(r["noop"]["walls"], 2) + "; " + "/".join(map(str, r["noop"]["nvcc"])))
    row(f"edit `{HEADER}` (binary.cu includes it) (s)", lambda r: mm(r["header"]["walls"]))
    row("nvcc runs, header edit (files)",
        lambda r: "/".join(map(str, r["header"]["nvcc"])) + f" ({', '.join(r['header']['files']) or 'none'})")
    row("rebuilt what it must (binary.cu)", lambda r: (
        "yes" if all(r["header"]["rebuilt"]) else
        "**no: stale**" + (" (binary.ptx " + ("rewritten" if any(r["header"]["output_rewritten"])
                                              else "untouched") + ")" if r["header"]["output_rewritten"] else "")))
    row("`touch src/lib.rs` rebuild (s); nvcc runs",
        lambda r: mm(r["touch"]["walls"], 2) + "; " + "/".join(map(str, r["touch"]["nvcc"])))
    row("rustc of the crate, touch (s)", lambda r: mm(r["touch"]["rustc"], 2) + (
        f"; +{median(r['touch']['rustc']) - median(side[0]['touch']['rustc']):.2f} over {side[0]['label'].split()[0]}"
        if r is not side[0] and median(r["touch"]["rustc"]) and median(side[0]["touch"]["rustc"]) else ""))
    row("rustc peak RSS (MiB)", lambda r: mm([x for x in r["touch"]["rustc_mib"]], 0))
    row("rlib (MB)", lambda r: mb(r["rlib_bytes"]))
    row("embedded device code (MB)", lambda r: mb(r["counts"]["blob_bytes"]))
    row("release binary (MB; `cargo build --release` s)", lambda r: "—" if "release" not in r else (
        f"{mb(r['release']['bytes'])}; {s(r['release']['wall'])} ({r['release']['printed']})"
        if r["release"]["ok"] else f"FAILED: {r['release']['error']}"))
    row("kernels (kernel × arch)", lambda r: f"{r['counts']['kernels']} ({r['counts']['pairs']})")
    row("spilling kernels", lambda r: "n/a (PTX only, no ptxas)" if r["counts"]["spilling"] is None
        else f"{len(r['counts']['spilling'])}" + (f": {', '.join(r['counts']['spilling'][:4])}"
                                                 + (" …" if len(r['counts']['spilling']) > 4 else "")
                                                 if r["counts"]["spilling"] else ""))
    row("kernels.rs (MB, lines)", lambda r: "—" if "kernels_rs_bytes" not in r["counts"]
        else f"{mb(r['counts']['kernels_rs_bytes'])}, {r['counts']['kernels_rs_lines']}")

    core = [r for r in results if "candle_core" in r]
    if core:
        out.append("\n### candle-core (crates.io, unchanged, `cuda`) against each crate via `[patch.crates-io]`\n")
        out.append("| crate | `cargo build` | wall (s) | patched in | errors |\n|---|---|---|---|---|\n")
        for r in core:
            c = r["candle_core"]
            out.append(f"| {r['label']} | {'**builds**' if c['ok'] else '**fails**'} | {s(c['wall'])} | "
                       f"{'yes' if c['patched'] else 'NO'} | {'; '.join(c['errors']) or '—'} |\n")
        out.append(f"\nEnvironment: {core[0]['candle_core']['env']}\n")

    if meta.get("user"):
        out.append(f"\nA candle user binary (looks kernels up by name{', references libmoe' if meta['moe'] else ''}): "
                   f"{meta['user']}\n")

    if not c3:
        return "".join(out)
    out.append("\n### 3. kernels.rs targets (issue 14 item 3)\n")
    out.append("| crate | rustc without kernels.rs (s) | with (s) | added (target ≤ 0.3 s) | "
               "peak RSS without / with (MiB) | added (target ≤ 150 MB) | embedded (MB) | "
               "rlib without / with (MB) | rlib over embedded (target ≤ 5 %) | "
               "cached build script (s) | target ≤ 0.5 s at 2000 × 3 |\n")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|\n")
    for label, d in c3:
        cost = d["cost"]
        w0, w1 = median(cost["without"]["walls"]), median(cost["with"]["walls"])
        m0, m1 = median(cost["without"]["mibs"]), median(cost["with"]["mibs"])
        emb = d["counts"]["blob_bytes"]
        over = (cost["with"]["rlib"] - emb) / emb * 100
        over0 = (cost["without"]["rlib"] - emb) / emb * 100
        objs = (cost["with"]["objects"] - emb) / emb * 100
        objs0 = (cost["without"]["objects"] - emb) / emb * 100
        sw = median(d["script_walls"])
        out.append(f"| {label} | {s(w0, 2)} ({runs(cost['without']['walls'], 2)}) | "
                   f"{s(w1, 2)} ({runs(cost['with']['walls'], 2)}) | **{s(w1 - w0, 2)}** | "
                   f"{s(m0, 0)} / {s(m1, 0)} | **{s((m1 - m0) * 1.048576, 0)} MB** | {mb(emb)} | "
                   f"{mb(cost['without']['rlib'])} / {mb(cost['with']['rlib'])} | "
                   f"**{over:.1f} %** (without kernels.rs {over0:.1f} %); object code alone "
                   f"{objs:.1f} % (without {objs0:.1f} %), lib.rmeta {mb(cost['with']['rmeta'])} MB | "
                   f"{s(sw, 2)} ({runs(d['script_walls'], 2)}; {d['script_nvcc']} nvcc) | "
                   f"{'meets' if label.startswith(str(BIG_KERNELS)) and sw <= 0.5 else ('MISSES' if label.startswith(str(BIG_KERNELS)) else '—')} |\n")
    if bigr:
        out.append(f"\n{BIG_KERNELS}-kernel crate: clean build {s(bigr['clean'])} s, {bigr['nvcc']} nvcc runs, "
                   f"{bigr['counts']['kernels']} kernels ({bigr['counts']['pairs']} kernel × arch), "
                   f"kernels.rs {mb(bigr['counts']['kernels_rs_bytes'])} MB / {bigr['counts']['kernels_rs_lines']} lines\n")
    return "".join(out)


def main():
    BENCH.mkdir(parents=True, exist_ok=True)
    setup_wrappers()
    meta = {"start": time.strftime("%F %T UTC", time.gmtime()),
            "load_start": open("/proc/loadavg").read().split()[:3],
            "occ": subprocess.run(["git", "-C", str(OCC), "rev-parse", "--short", "HEAD"],
                                  capture_output=True, text=True).stdout.strip()}
    version, src_root, fetched_lock = fetch_candle()
    say(f"candle-kernels {version} from {src_root}")
    meta.update(version=version, source=str(src_root))
    ptx = all_ptx = ptx_files(src_root / "src")
    if SMOKE:
        ptx = [f for f in all_ptx if Path(f).name in ("affine.cu", "binary.cu")]
    moe = moe_files(src_root / "src")
    with_moe = has_static_lib()
    meta.update(ptx=ptx, moe_files=moe, moe=with_moe)
    candle_lib = (src_root / "src/lib.rs").read_text()
    occ_lock = OCC / "Cargo.lock"

    # (a) candle's own crate.
    a = BENCH / "a_cudaforge"
    copy_source(src_root, a)
    with open(a / "Cargo.toml", "a") as f:
        f.write("\n[workspace]\n")
    shutil.copy(fetched_lock, a / "Cargo.lock")
    a_env = {"NVCC": str(COUNTED_NVCC), "CUDA_HOME": str(CUDA), "CUDA_COMPUTE_CAP": "80"}
    # (a') the same with the library part cut from candle's build.rs: its
    # PTX part alone, the same work as (b) does without libmoe.
    a_ptx = BENCH / "a_cudaforge_ptx_only"
    copy_source(src_root, a_ptx)
    with open(a_ptx / "Cargo.toml", "a") as f:
        f.write("\n[workspace]\n")
    shutil.copy(fetched_lock, a_ptx / "Cargo.lock")
    build_rs = (src_root / "build.rs").read_text()
    cut = build_rs.find("    let mut moe_sources")
    if cut < 0:
        sys.exit("candle's build.rs has no `let mut moe_sources`: update bench/candle.py")
    write(a_ptx / "build.rs", build_rs[:cut] + "    Ok(())\n}\n")
    # (b), (c): the same source, build.rs and lib.rs generated.
    crates = {}
    for key, archs, embed in (("b_occ_ptx_sm80", ["sm_80"], "Ptx"),
                              ("c_occ_fatbin_sm80_sm90", ["sm_80", "sm_90"], None)):
        crate = BENCH / key
        copy_source(src_root, crate)
        (crate / "Cargo.toml.orig").unlink(missing_ok=True)
        write(crate / "Cargo.toml", occ_cargo_toml(version))
        write(crate / "build.rs", occ_build_rs(ptx, moe, archs, embed, with_moe))
        write(crate / "src/lib.rs", occ_lib_rs(candle_lib, ptx, embed or "Fatbin", modules=all_ptx))
        shutil.copy(occ_lock, crate / "Cargo.lock")
        crates[key] = crate
    occ_env = {"OCC_NVCC_LAUNCHER": str(LAUNCHER), "NVCC": NVCC}

    say("dependencies (untimed)")
    warm_deps("cudaforge", 'cudaforge = "0.1.2"', fetched_lock)
    warm_deps("occ", f'occ-build = {{ path = "{OCC / "occ-build"}" }}', occ_lock,
              f'occ = {{ path = "{OCC / "occ"}", default-features = false }}')

    plan = []  # (key, label, crate, env, is_occ, accessor)
    if "a" in VARIANTS and not SMOKE:
        plan.append(("a_cudaforge", "(a) candle build.rs (cudaforge), sm_80 PTX + libmoe", a, a_env, False, "ptx"))
    if "p" in VARIANTS and not SMOKE:
        plan.append(("a_cudaforge_ptx_only", "(a′) candle build.rs (cudaforge), PTX part only, sm_80",
                     a_ptx, a_env, False, "ptx"))
    if "b" in VARIANTS:
        plan.append(("b_occ_ptx_sm80", "(b) occ-build, PTX sm_80", crates["b_occ_ptx_sm80"], occ_env, True, "ptx"))
    if "c" in VARIANTS:
        plan.append(("c_occ_fatbin_sm80_sm90", "(c) occ-build, fatbin sm_80+sm_90",
                     crates["c_occ_fatbin_sm80_sm90"], occ_env, True, "image"))
    results = [{"label": label, "key": key} for key, label, *_ in plan]
    # Interleaved: a, b, c, a, b, c, ... so that a change of the machine's
    # load falls on every crate alike.
    for rep in range(REPS if SIDE else 0):
        for r, (key, label, crate, venv, is_occ, _) in zip(results, plan):
            measure_rep(r, crate, venv, is_occ, rep)
        say(f"rep {rep + 1}: load {' '.join(open('/proc/loadavg').read().split()[:3])}")
        (BENCH / "results-partial.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    modules = modules_of(candle_lib)
    for r, (key, label, crate, venv, is_occ, accessor) in zip(results, plan):
        if RELEASE and SIDE:
            r["release"] = release_binary(key, crate, venv, accessor, modules)
    if CANDLE_CORE:
        for r, (key, label, crate, venv, is_occ, accessor) in zip(results, plan):
            if key != "a_cudaforge":  # its libmoe: 15 min more for the same result
                r["candle_core"] = candle_core(key, crate, version, venv)
    results = [r for r in results if "clean" in r or "candle_core" in r]
    c3, bigr = [], None
    if "c" in VARIANTS and ITEM3 and SIDE:
        c3 = item3_candle(crates["c_occ_fatbin_sm80_sm90"], results[-1], candle_lib, ptx, all_ptx, occ_env)
    if "b" in VARIANTS:
        meta["user"] = user_binary(crates["b_occ_ptx_sm80"], with_moe, occ_env)
    if ITEM3:
        bigr = big(occ_lock)
        c3.append((f"{BIG_KERNELS} kernels × {len(BIG_ARCHS)} archs (one .cu)", {
            "cost": bigr["cost"], "counts": bigr["counts"], "script_walls": bigr["script_walls"],
            "script_nvcc": bigr["script_nvcc"]}))

    meta["end"] = time.strftime("%F %T UTC", time.gmtime())
    meta["load_end"] = open("/proc/loadavg").read().split()[:3]
    text = report(meta, results, c3, bigr)
    print(text)
    (BENCH / "results.md").write_text(text)
    (BENCH / "results.json").write_text(json.dumps(
        {"meta": meta, "results": results, "item3": c3, "big": bigr}, indent=1, default=str) + "\n")


def item3_candle(c, rc, candle_lib, ptx, all_ptx, occ_env):
    """Item 3 at candle's size: crate (c)."""
    say("item 3 on (c): cached build script, rustc with and without kernels.rs")
    walls, n = cached_script(c, Path(rc["script"]), Path(rc["out_dir"]), "candle-kernels", occ_env)
    cost = kernels_rs_cost(c, occ_env, occ_lib_rs(candle_lib, ptx, "Fatbin", modules=all_ptx),
                           occ_lib_rs(candle_lib, ptx, "Fatbin", False, rc["counts"]["blobs"], all_ptx))
    return [(f"candle (c): {rc['counts']['kernels']} kernels × 2 archs", {
        "cost": cost, "counts": rc["counts"], "script_walls": walls, "script_nvcc": n})]


def user_binary(crate, with_moe, occ_env):
    """A user binary of the crate: lookup by name; with libmoe, a host launcher too."""
    user = BENCH / "candle_user"
    launcher = ("let launcher = candle_kernels::ffi::moe_gemm_wmma as *const ();\n"
                "    println!(\"libmoe launcher moe_gemm_wmma at {launcher:p}\");") if with_moe else ""
    write(user / "Cargo.toml", '[package]\nname = "candle-user"\nversion = "0.0.0"\nedition = "2021"\n\n'
          f'[workspace]\n\n[dependencies]\ncandle-kernels = {{ path = "{crate}" }}\n')
    write(user / "src/main.rs", USER_MAIN.replace("LAUNCHER", launcher))
    # The crate's own lock: the same dependency versions, so cargo reuses
    # the crate's build (its OUT_DIR) instead of building it again.
    shutil.copy(crate / "Cargo.lock", user / "Cargo.lock")
    say("candle user binary")
    ur = Run(user, ["build"], occ_env, check=False)
    if ur.ok:
        binary = ur.artifact("bin", "candle-user")
        p = subprocess.run([str(binary)], capture_output=True, text=True)
        return f"`{' / '.join(p.stdout.strip().splitlines())}` (exit {p.returncode})"
    return "FAILED to build: " + " ".join(ur.stderr.strip().splitlines()[-6:])


if __name__ == "__main__":
    main()
