#!/usr/bin/env python3
"""Whole-build benchmarks of occ-build (BENCHMARKS.md items 1, 2, 5 and 6).

Generates scratch crates under $BENCH_DIR (default /tmp/occ-bench), each with
`[workspace]` of its own and one shared CARGO_TARGET_DIR there, so occ-build
and its dependencies compile once, before anything is timed. Every nvcc call is
counted through a wrapper script (`OCC_NVCC_LAUNCHER` for occ-build, `NVCC`
for the hand-written build scripts). Prints Markdown tables; also writes them
to $BENCH_DIR/results.md and the raw figures to $BENCH_DIR/results.json.

1. clean build of the kernels: occ-build against a hand-written build.rs that
   runs nvcc once per (file, arch) in sequence (same cubins), and against the
   `cc` crate with `.cuda(true)`. "Clean" = `cargo clean -p <crate>` (the
   crate's own build script, its OUT_DIR and its binary; no dependency), then
   `cargo build`: build.rs compile + run + main.rs compile.
2. rebuilds: no-op, touch one .cu, edit one .cu, edit a shared header.
5. 500 `#[launch_config]` sites against 500 hand-written constant sets: touch
   src/main.rs, `cargo build` (only rustc on the crate itself).
6. peak RSS of the build script on a 200-kernel build.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(os.environ.get("BENCH_DIR", "/tmp/occ-bench"))
TARGET = BENCH / "target"
REPS = int(os.environ.get("REPS", "2"))
# The cc-crate baseline compiles host code too (nvcc -c): set BASELINE_CC=1.
BASELINE_CC = os.environ.get("BASELINE_CC") == "1"
ARCHS = ["sm_80", "sm_90"]
FILES = 8  # .cu files of the clean-build crates (x 2 archs = 16 nvcc jobs)
INCLUDERS = 4  # of them include kernels/common.cuh
SITES = 500
BIG_FILES, BIG_KERNELS_PER_FILE = 10, 15  # item 6: 10 x 20 = 200 kernels, sm_90


def nvcc_path():
    if os.environ.get("NVCC"):
        return str(Path(os.environ["NVCC"]).resolve())
    return str((ROOT / ".cuda/cu13/nvidia/cu13/bin/nvcc").resolve())


NVCC = nvcc_path()
COUNT_LOG = BENCH / "nvcc-calls.log"
LAUNCHER = BENCH / "count-nvcc.sh"  # OCC_NVCC_LAUNCHER: wrapper, then "$@"
WRAPPED_NVCC = BENCH / "nvcc-counted.sh"  # NVCC for the hand-written crates


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def setup_wrappers():
    BENCH.mkdir(parents=True, exist_ok=True)
    write(LAUNCHER, f'#!/bin/sh\necho "$*" >> \'{COUNT_LOG}\'\nexec "$@"\n')
    write(WRAPPED_NVCC, f'#!/bin/sh\necho "$*" >> \'{COUNT_LOG}\'\nexec \'{NVCC}\' "$@"\n')
    LAUNCHER.chmod(0o755)
    WRAPPED_NVCC.chmod(0o755)


def calls():
    try:
        return len(COUNT_LOG.read_text().splitlines())
    except FileNotFoundError:
        return 0


def env():
    e = {k: v for k, v in os.environ.items()
         if not (k.startswith("CARGO_") and k != "CARGO_HOME") and not k.startswith("OCC_")
         and k not in ("RUSTFLAGS", "OUT_DIR", "NVCC")}
    e["CARGO_TARGET_DIR"] = str(TARGET)
    e["OCC_NVCC_LAUNCHER"] = str(LAUNCHER)
    e["NVCC"] = NVCC
    e["PATH"] = str(Path(NVCC).parent) + os.pathsep + e.get("PATH", "")
    return e


def cargo(crate, *args, nvcc=None, check=True):
    e = env()
    if nvcc:
        e["NVCC"] = nvcc
    start = time.monotonic()
    p = subprocess.run(["cargo", *args, "--offline"], cwd=crate, env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    secs = time.monotonic() - start
    if check and p.returncode != 0:
        sys.exit(f"cargo {' '.join(args)} failed in {crate}:\n{p.stdout}\n{p.stderr}")
    return secs


# ---- kernels --------------------------------------------------------------

COMMON = """#pragma once
// Shared by the first files: a header edit reruns exactly its includers.
#define OCC_BENCH_SCALE 2.0f
template <typename T> __device__ __forceinline__ T occ_bench_clamp(T v, T lo, T hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}
"""


def kernel_file(i, kernels=3, common=False):
    """Realistic small kernels: a block reduction with shared memory, a 1-D
    stencil, and a math-heavy loop; `kernels` of them per file."""
    out = ['#include "common.cuh"\n' if common else "", f"// file {i}\n"]
    for k in range(kernels):
        name = f"f{i}_k{k}"
        kind = k % 3
        if kind == 0:
            out.append(f"""
template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK) reduce_{name}(const T* in, T* out, int n) {{
  __shared__ T s[BLOCK];
  T acc = 0;
  for (int i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += gridDim.x * BLOCK) acc += in[i] * T({i + k + 1});
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int w = BLOCK / 2; w > 0; w >>= 1) {{
    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }}
  if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}}
template __global__ void reduce_{name}<float, 256>(const float*, float*, int);
template __global__ void reduce_{name}<double, 128>(const double*, double*, int);
""")
        elif kind == 1:
            out.append(f"""
extern "C" __global__ void stencil_{name}(const float* in, float* out, int n) {{
  __shared__ float s[256 + 2 * {k + 2}];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x + {k + 2}] = i < n ? in[i] : 0.0f;
  if (threadIdx.x < {k + 2}) {{
    s[threadIdx.x] = i >= {k + 2} ? in[i - {k + 2}] : 0.0f;
    s[threadIdx.x + 256 + {k + 2}] = i + 256 < n ? in[i + 256] : 0.0f;
  }}
  __syncthreads();
  float acc = 0.0f;
  #pragma unroll
  for (int r = -{k + 2}; r <= {k + 2}; ++r) acc += s[threadIdx.x + {k + 2} + r] * (1.0f + r * 0.5f);
  if (i < n) out[i] = acc;
}}
""")
        else:
            body = "occ_bench_clamp(x * OCC_BENCH_SCALE, -1e3f, 1e3f)" if common else "x * 2.0f"
            out.append(f"""
extern "C" __global__ void math_{name}(float* p, int n, int iters) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = p[i], y = {i}.5f, z = {k}.25f;
  for (int t = 0; t < iters; ++t) {{
    x = sinf(x) * cosf(y) + expf(-z * x) + {body};
    y = fmaf(y, x, z) - sqrtf(fabsf(x) + 1.0f);
    z = rsqrtf(y * y + 1.0f) + logf(fabsf(z) + 2.0f);
  }}
  p[i] = x + y + z;
}}
""")
    return "".join(out)


def write_kernels(crate, files, kernels=3):
    for stale in sorted(crate.glob("kernels/k*.cu"))[files:]:
        stale.unlink()
    for i in range(files):
        write(crate / f"kernels/k{i:03}.cu", kernel_file(i, kernels, common=i < INCLUDERS))
    write(crate / "kernels/common.cuh", COMMON)


def manifest(name, build_deps="", deps=""):
    """A new user's Cargo.toml: default profiles, so build scripts and proc
    macros (and occ-build in them) are compiled at opt-level 0."""
    return (f'[package]\nname = "{name}"\nversion = "0.1.0"\nedition = "2021"\n\n'
            f"[workspace]\n\n[dependencies]\n{deps}\n[build-dependencies]\n{build_deps}")


def path_dep(name):
    return f'{name} = {{ path = "{ROOT / name}" }}\n'


ARCH_LIST = ", ".join(f'"{a}"' for a in ARCHS)
OCC_BUILD_RS = f"""fn main() {{
    occ_build::Build::new()
        .glob("kernels/*.cu")
        .include("kernels")
        .archs([{ARCH_LIST}])
        
        .compile();
}}
"""

# What a typical hand-written build.rs does: nvcc once per (file, arch), in
# sequence, writing cubins to OUT_DIR for include_bytes!.
NVCC_BUILD_RS = f"""use std::path::PathBuf;
use std::process::Command;

fn main() {{
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let nvcc = std::env::var("NVCC").unwrap_or_else(|_| "nvcc".into());
    println!("cargo:rerun-if-changed=kernels");
    println!("cargo:rerun-if-env-changed=NVCC");
    let mut files: Vec<PathBuf> = std::fs::read_dir("kernels")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .collect();
    files.sort();
    for file in &files {{
        for arch in [{ARCH_LIST}] {{
            let stem = file.file_stem().unwrap().to_str().unwrap();
            let virt = arch.replace("sm_", "compute_");
            let status = Command::new(&nvcc)
                .args(["--cubin", "-gencode", &format!("arch={{virt}},code={{arch}}"), "-Ikernels", "-o"])
                .arg(out.join(format!("{{stem}}.{{arch}}.cubin")))
                .arg(file)
                .status()
                .expect("run nvcc");
            assert!(status.success(), "nvcc failed on {{}}", file.display());
        }}
    }}
}}
"""

CC_BUILD_RS = f"""fn main() {{
    println!("cargo:rerun-if-changed=kernels");
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir("kernels")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .collect();
    files.sort();
    let mut build = cc::Build::new();
    build.cuda(true).cudart("none").include("kernels").files(&files);
    for arch in [{ARCH_LIST}] {{
        build.flag("-gencode").flag(format!("arch={{}},code={{arch}}", arch.replace("sm_", "compute_")));
    }}
    build.compile("kernels");
}}
"""

MAIN_RS = 'fn main() {\n    println!("built");\n}\n'


def make_clean_build_crates():
    crates = {}
    occ = BENCH / "occ_kernels"
    write(occ / "Cargo.toml", manifest("occbench_occ", path_dep("occ-build")))
    write(occ / "build.rs", OCC_BUILD_RS)
    write(occ / "src/main.rs", MAIN_RS)
    write_kernels(occ, FILES)
    crates["occ-build (parallel, cached)"] = (occ, "occbench_occ", None)
    hand = BENCH / "nvcc_kernels"
    write(hand / "Cargo.toml", manifest("occbench_nvcc"))
    write(hand / "build.rs", NVCC_BUILD_RS)
    write(hand / "src/main.rs", MAIN_RS)
    write_kernels(hand, FILES)
    crates["hand-written build.rs (nvcc in sequence)"] = (hand, "occbench_nvcc", str(WRAPPED_NVCC))
    if not BASELINE_CC:
        return crates
    cc = BENCH / "cc_kernels"
    write(cc / "Cargo.toml", manifest("occbench_cc", 'cc = "1"\n'))
    write(cc / "build.rs", CC_BUILD_RS)
    write(cc / "src/main.rs", MAIN_RS)
    write_kernels(cc, FILES)
    crates["cc crate, .cuda(true)"] = (cc, "occbench_cc", str(WRAPPED_NVCC))
    return crates


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def clean_builds(crates):
    """Item 1: `cargo clean -p`, then `cargo build`, interleaved across crates."""
    for crate, _, nvcc in crates.values():
        cargo(crate, "build", nvcc=nvcc)  # dependencies (and a first run)
    times = {label: [] for label in crates}
    direct = {label: [] for label in crates}
    runs = {}
    for _ in range(REPS):
        for label, (crate, pkg, nvcc) in crates.items():
            cargo(crate, "clean", "-p", pkg)
            before = calls()
            times[label].append(cargo(crate, "build", nvcc=nvcc))
            runs[label] = calls() - before
            # The build script alone, run as cargo runs it, into a fresh
            # OUT_DIR: the kernels' part of the build, without rustc.
            out_dir = BENCH / f"direct-{pkg}"
            shutil.rmtree(out_dir, ignore_errors=True)
            out_dir.mkdir(parents=True)
            direct[label].append(run_script(build_script_binary(pkg), crate, out_dir, pkg, nvcc)[0])
    return times, direct, runs


def rebuilds(crates):
    """Item 2: no-op, touch (mtime only), edit one .cu, edit the shared header."""
    results = {}
    for label, (crate, _, nvcc) in crates.items():
        if "cc crate" in label:
            continue
        rows = {}
        cargo(crate, "build", nvcc=nvcc)
        steps = [
            ("no-op rebuild", lambda: None),
            ("touch one .cu (mtime only)", lambda: os.utime(crate / f"kernels/k{FILES - 1:03}.cu")),
            ("edit one .cu", lambda: append(crate / f"kernels/k{FILES - 1:03}.cu")),
            (f"edit a header ({INCLUDERS} of {FILES} include it)",
             lambda: append(crate / "kernels/common.cuh")),
        ]
        if "occ-build" not in label:
            # No cache: an edit reruns the whole script, as a touch does.
            steps = steps[:2]
        for name, change in steps:
            walls, counts = [], []
            for _ in range(REPS):
                change()
                before = calls()
                walls.append(cargo(crate, "build", nvcc=nvcc))
                counts.append(calls() - before)
            rows[name] = (median(walls), counts)
        results[label] = rows
    return results


EDITS = [0]


def append(path):
    EDITS[0] += 1
    with open(path, "a") as f:
        f.write(f"// edit {EDITS[0]} {time.time()}\n")


# ---- item 5: #[launch_config] sites ---------------------------------------

SITE_KERNELS = 10


def site_kernels():
    out = []
    for k in range(SITE_KERNELS):
        out.append(f"""extern "C" __global__ void site_k{k}(float* p, int n) {{
  __shared__ float s[{64 * (k + 1)}];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x % {64 * (k + 1)}] = i < n ? p[i] : 0.0f;
  __syncthreads();
  if (i < n) p[i] = s[(threadIdx.x + 1) % {64 * (k + 1)}] * {k + 1}.0f;
}}
""")
    return "".join(out)


# What #[launch_config] injects at one of these sites (occ-macros/src/expand.rs:
# the names the body uses), written out by hand: separates rustc's cost of the
# injected code from the macro's own.
EXPANSION = """    #[allow(dead_code)]
    const BLOCK_SIZE: u32 = {block};
    #[allow(dead_code)]
    const DYNAMIC_SMEM: u32 = 0;
    #[allow(dead_code)]
    const fn grid_for(n: u32) -> u32 {{
        n.div_ceil(BLOCK_SIZE)
    }}
"""
# The manifest tracking the macro adds to its first site of a crate only.
TRACKING = """    const _: &[u8] = ::core::include_bytes!(::core::concat!(::core::env!("OUT_DIR"), "/occ/manifest.json"));
    const _: ::core::option::Option<&str> = ::core::option_env!("OCC_MANIFEST");
"""


def sites_main(macro):
    out = ["#![allow(clippy::all)]\n"]
    if macro is True:
        out.append("use occ::launch_config;\n")
    for i in range(SITES):
        k = i % SITE_KERNELS
        if macro == "expansion":
            out.append(f"\nfn launch_{i}(n: u32) -> (u32, u32, u32) {{\n"
                       + EXPANSION.format(k=k, block=128 + 32 * (i % 8))
                       + (TRACKING if i == 0 else "")
                       + "    (grid_for(n), BLOCK_SIZE, DYNAMIC_SMEM)\n}\n")
        elif macro:
            out.append(f'\n#[launch_config(kernel = "site_k{k}")]\n'
                       f"fn launch_{i}(n: u32) -> (u32, u32, u32) {{\n"
                       f"    (grid_for(n), BLOCK_SIZE, DYNAMIC_SMEM)\n}}\n")
        else:
            out.append(f"\nfn launch_{i}(n: u32) -> (u32, u32, u32) {{\n"
                       f'    #[allow(dead_code)]\n    const KERNEL_NAME: &str = "site_k{k}";\n'
                       f"    const BLOCK_SIZE: u32 = {128 + 32 * (i % 8)};\n"
                       f"    const DYNAMIC_SMEM: u32 = 0;\n"
                       f"    #[allow(dead_code)]\n    const ACTIVE_BLOCKS_PER_SM: u32 = 8;\n"
                       f"    const fn grid_for(n: u32) -> u32 {{\n        n.div_ceil(BLOCK_SIZE)\n    }}\n"
                       f"    (grid_for(n), BLOCK_SIZE, DYNAMIC_SMEM)\n}}\n")
    out.append("\nfn main() {\n    let mut sum = 0u64;\n")
    for i in range(SITES):
        out.append(f"    sum += u64::from(launch_{i}(1 << 20).0);\n")
    out.append('    println!("{sum}");\n}\n')
    return "".join(out)


def launch_config_sites():
    crates = {}
    for label, pkg, macro in [("500 #[launch_config] sites", "occbench_sites", True),
                              ("500 hand-written const sets", "occbench_hand", False),
                              ("500 copies of the expansion, no macro", "occbench_expanded",
                               "expansion")]:
        crate = BENCH / pkg
        write(crate / "Cargo.toml",
              manifest(pkg, path_dep("occ-build"), path_dep("occ")))
        write(crate / "build.rs", OCC_BUILD_RS.replace(f"[{ARCH_LIST}]", '["sm_90"]'))
        write(crate / "kernels/sites.cu", site_kernels())
        write(crate / "kernels/common.cuh", COMMON)
        write(crate / "src/main.rs", sites_main(macro))
        cargo(crate, "build")
        crates[label] = crate
    times = {label: [] for label in crates}
    for _ in range(REPS):
        for label, crate in crates.items():
            os.utime(crate / "src/main.rs")
            times[label].append(cargo(crate, "build"))
    return times


# ---- item 6: peak RSS of the build script ---------------------------------

def build_script_binary(pkg):
    found = sorted(TARGET.glob(f"debug/build/{pkg}-*/build-script-build"),
                   key=lambda p: p.stat().st_mtime)
    if not found:
        sys.exit(f"no build-script-build for {pkg} under {TARGET}")
    return found[-1]


def run_script(binary, crate, out_dir, pkg, nvcc=None):
    """Runs a build script as cargo does; returns (wall s, its own VmHWM KiB
    polled, max RSS KiB of it and its children from wait4, nvcc calls)."""
    e = env()
    e.update({"OUT_DIR": str(out_dir), "CARGO_MANIFEST_DIR": str(crate),
              "CARGO_PKG_NAME": pkg, "NUM_JOBS": str(os.cpu_count()),
              "TARGET": "x86_64-unknown-linux-gnu", "HOST": "x86_64-unknown-linux-gnu",
              "PROFILE": "debug", "OPT_LEVEL": "0", "DEBUG": "true"})
    if nvcc:
        e["NVCC"] = nvcc
    before = calls()
    start = time.monotonic()
    p = subprocess.Popen([str(binary)], cwd=crate, env=e,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    hwm = 0
    while True:
        try:
            for line in Path(f"/proc/{p.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    hwm = max(hwm, int(line.split()[1]))
        except (FileNotFoundError, ProcessLookupError):
            pass
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        time.sleep(0.002)
    wall = time.monotonic() - start
    if status != 0:
        sys.exit(f"{binary} failed ({status})")
    return wall, hwm, usage.ru_maxrss, calls() - before


def peak_rss():
    crate = BENCH / "occbench_big"
    pkg = "occbench_big"
    write(crate / "Cargo.toml", manifest(pkg, path_dep("occ-build")))
    write(crate / "build.rs", OCC_BUILD_RS.replace(f"[{ARCH_LIST}]", '["sm_90"]'))
    write(crate / "src/main.rs", MAIN_RS)
    write_kernels(crate, BIG_FILES, BIG_KERNELS_PER_FILE)
    cargo(crate, "build")
    binary = build_script_binary(pkg)
    out_dir = BENCH / "big-out"
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    clean = run_script(binary, crate, out_dir, pkg)
    cached = run_script(binary, crate, out_dir, pkg)
    man = json.loads((out_dir / "occ/manifest.json").read_text())
    kernels = len(man["kernels"])
    return {"kernels": kernels, "archs": 1, "clean": clean, "cached": cached}


# ---- report ---------------------------------------------------------------

def fmt_ratio(x, target, lower_is_better=True):
    ok = x <= target if lower_is_better else x >= target
    return f"{x:.2f}× ({'meets' if ok else 'MISSES'} ≤ {target:.2f}×)"


def sites_only():
    """`bench/builds.py --sites`: item 5 alone, printed as its BENCHMARKS.md table."""
    setup_wrappers()
    load = open("/proc/loadavg").read().split()[:3]
    st = launch_config_sites()
    a, b, c = (median(v) for v in st.values())
    print(f"load at start {' '.join(load)}, at end {' '.join(open('/proc/loadavg').read().split()[:3])}; REPS={REPS}")
    print("| crate | wall (s) | runs |\n|---|---|---|")
    for label, walls in st.items():
        print(f"| {label} | {median(walls):.2f} | {', '.join(f'{w:.2f}' for w in walls)} |")
    print(f"ratio sites / hand-written: {a / b:.2f}x (target 1.10x); expansion copy / hand-written "
          f"{c / b:.2f}x; macro itself {a - c:.2f} s")


def main():
    if "--sites" in sys.argv:
        return sites_only()
    setup_wrappers()
    load = open("/proc/loadavg").read().split()[:3]
    out = [f"Load average at start: {' '.join(load)}; REPS={REPS}; nvcc {NVCC}\n"]
    res = {"load_start": load, "reps": REPS}

    print("item 1/2: building crates ...", file=sys.stderr, flush=True)
    crates = make_clean_build_crates()
    times, direct, runs = clean_builds(crates)
    res["clean"] = {k: {"walls": v, "script_walls": direct[k], "nvcc": runs[k]}
                    for k, v in times.items()}
    occ_label = next(iter(crates))
    hand = "hand-written build.rs (nvcc in sequence)"
    out.append(f"\n### 1. Clean build of the kernels ({FILES} .cu × {len(ARCHS)} archs, median of {REPS})\n")
    out.append("| build | nvcc runs | `cargo build` wall (s) | runs | occ / this | "
               "build script alone (s) | runs | occ / this |\n|---|---|---|---|---|---|---|---|\n")
    for label, walls in times.items():
        ratio = median(times[occ_label]) / median(walls)
        dratio = median(direct[occ_label]) / median(direct[label])
        out.append(f"| {label} | {runs[label]} | {median(walls):.1f} | "
                   f"{', '.join(f'{w:.1f}' for w in walls)} | {ratio:.2f}× | "
                   f"{median(direct[label]):.1f} | {', '.join(f'{w:.1f}' for w in direct[label])} | "
                   f"{dratio:.2f}× |\n")
    out.append(f"\nTarget: occ-build ≤ 1.05× the hand-written build: `cargo build` "
               f"{fmt_ratio(median(times[occ_label]) / median(times[hand]), 1.05)}; "
               f"build script alone {fmt_ratio(median(direct[occ_label]) / median(direct[hand]), 1.05)}\n")

    re = rebuilds(crates)
    res["rebuilds"] = re
    out.append(f"\n### 2. Rebuilds (nvcc runs per rebuild, median wall of {REPS})\n")
    labels = list(re)
    out.append("| change | " + " | ".join(f"{l}: nvcc runs | wall (s)" for l in labels) + " |\n")
    out.append("|---|" + "---|---|" * len(labels) + "\n")
    for step in re[labels[0]]:
        cells = []
        for l in labels:
            if step not in re[l]:
                cells.append("as touch | as touch")
                continue
            wall, counts = re[l][step]
            cells.append(f"{'/'.join(map(str, counts))} | {wall:.1f}")
        out.append(f"| {step} | " + " | ".join(cells) + " |\n")

    print("item 5: launch_config sites ...", file=sys.stderr, flush=True)
    st = launch_config_sites()
    res["sites"] = st
    a, b, c = (median(v) for v in st.values())
    out.append(f"\n### 5. {SITES} #[launch_config] sites vs hand-written constants "
               f"(touch src/main.rs; cargo build; median of {REPS})\n")
    out.append("| crate | wall (s) | runs |\n|---|---|---|\n")
    for label, walls in st.items():
        out.append(f"| {label} | {median(walls):.2f} | {', '.join(f'{w:.2f}' for w in walls)} |\n")
    out.append(f"\nRatio (sites / hand-written): {fmt_ratio(a / b, 1.10)}. Of the "
               f"{a - b:.2f} s extra, rustc on the injected code takes {c - b:.2f} s "
               f"(expansion copy / hand-written = {c / b:.2f}×), the macro itself "
               f"(expansion at opt-level 0) {a - c:.2f} s.\n")

    print("item 6: peak RSS ...", file=sys.stderr, flush=True)
    rss = peak_rss()
    res["rss"] = rss
    out.append(f"\n### 6. Build script memory, {rss['kernels']} kernels × {rss['archs']} archs "
               f"({BIG_FILES} files)\n")
    out.append("| run | wall (s) | nvcc runs | build script VmHWM (MiB) | max RSS incl. nvcc children (MiB) |\n"
               "|---|---|---|---|---|\n")
    for name in ("clean", "cached"):
        wall, hwm, maxrss, n = rss[name]
        out.append(f"| {name} | {wall:.1f} | {n} | {hwm / 1024:.1f} | {maxrss / 1024:.1f} |\n")

    load = open("/proc/loadavg").read().split()[:3]
    res["load_end"] = load
    out.append(f"\nLoad average at end: {' '.join(load)}\n")
    text = "".join(out)
    print(text)
    (BENCH / "results.md").write_text(text)
    (BENCH / "results.json").write_text(json.dumps(res, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
