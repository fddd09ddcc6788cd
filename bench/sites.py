#!/usr/bin/env python3
"""`#[launch_config]` against hand-written constants (issue 25 item 4).

Written apart from bench/builds.py (its `launch_config_sites()`), so that the
macro is not measured only on the generator it was tuned on. Two scratch
crates under $SITES_DIR (default /tmp/occ-sites), each a `[workspace]` of its
own, sharing one CARGO_TARGET_DIR, with default profiles (a new user's crate:
build script and proc macro at opt-level 0) and the same build.rs: occ-build
over one .cu file of 10 kernels for sm_80 and sm_90.

- `sites`: src/main.rs has 500 functions, site i launching kernel i % 10,
  each `#[occ::launch_config(kernel = ...)]` with the options a user writes
  (none, `max_block_size`, `block_multiple`, `min_occupancy`,
  `dynamic_smem`, `arch`; three kernels' blocks declared in build.rs, as
  the macro requires of a fixed block), whose body reads `BLOCK_SIZE` and
  calls `grid_for(n)`.

OCC_ROOT=<tree> builds both crates against another occ tree (its
occ-build and macro), so that two trees are timed by this generator.
- `hand`: the same functions, each with `const BLOCK_SIZE: u32 = N;` written
  in its body and the grid as `n.div_ceil(BLOCK_SIZE)`: what a user writes
  without the macro. N is what the macro baked: the `sites` binary prints
  every site's numbers and the `hand` binary must print the same (checked).

Then `touch src/main.rs; cargo build` of each, interleaved (sites, hand,
sites, hand, ...), REPS times (default 7): rustc on the crate alone. Prints
each run, best and median of each, their ratios and /proc/loadavg before
and after.

    python3 bench/sites.py            # build, check, measure
    REPS=9 python3 bench/sites.py
    SITES_ONLY=1 python3 bench/sites.py   # generate and build only
    EXPANDED=1 python3 bench/sites.py     # a third crate: the expansion written
                                          # out, no macro (rustc's share)
"""

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The occ tree the crates depend on (OCC_ROOT; default this checkout), so
# that two trees' macros are timed by one generator.
OCC = Path(os.environ.get("OCC_ROOT", ROOT)).resolve()
DIR = Path(os.environ.get("SITES_DIR", "/tmp/occ-sites"))
TARGET = DIR / "target"
REPS = int(os.environ.get("REPS", "7"))
SITES = int(os.environ.get("SITES", "500"))

# Ten kernels of different shapes: plain, __launch_bounds__ with and without
# a minimum of blocks, static shared memory, dynamic shared memory, a
# register-heavy loop, a templated C++ one (named by its base name).
KERNELS_CU = r"""
#include <cstdint>

extern "C" __global__ void scale(float a, float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}

extern "C" __global__ void __launch_bounds__(256) add3(const float* a, const float* b,
                                                      const float* c, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i] + c[i];
}

extern "C" __global__ void __launch_bounds__(128, 4) dot_partial(const float* a,
                                                                const float* b,
                                                                float* out, int n) {
    __shared__ float acc[128];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    acc[threadIdx.x] = i < n ? a[i] * b[i] : 0.0f;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) acc[threadIdx.x] += acc[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = acc[0];
}

extern "C" __global__ void tile_transpose(const float* in, float* out, int w, int h) {
    __shared__ float tile[32][33];
    int x = blockIdx.x * 32 + threadIdx.x;
    int y = blockIdx.y * 32 + threadIdx.y;
    if (x < w && y < h) tile[threadIdx.y][threadIdx.x] = in[y * w + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x;
    y = blockIdx.x * 32 + threadIdx.y;
    if (x < h && y < w) out[y * h + x] = tile[threadIdx.x][threadIdx.y];
}

extern "C" __global__ void histogram(const uint8_t* in, unsigned* bins, int n) {
    extern __shared__ unsigned local[];
    for (int b = threadIdx.x; b < 256; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&local[in[i]], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += blockDim.x) atomicAdd(&bins[b], local[b]);
}

extern "C" __global__ void polynomial(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i], r = 0.0f, p = 1.0f;
    float c[16];
#pragma unroll
    for (int k = 0; k < 16; ++k) c[k] = 1.0f / (k + 1);
#pragma unroll
    for (int k = 0; k < 16; ++k) { r += c[k] * p; p *= v; }
    y[i] = r;
}

extern "C" __global__ void __launch_bounds__(512, 2) stencil5(const float* in, float* out,
                                                             int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= 2 && i < n - 2)
        out[i] = 0.1f * in[i - 2] + 0.2f * in[i - 1] + 0.4f * in[i] + 0.2f * in[i + 1]
                 + 0.1f * in[i + 2];
}

extern "C" __global__ void saxpy_u64(float a, const float* x, float* y, uint64_t n) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        y[i] = a * x[i] + y[i];
}

template <typename T>
__global__ void fill(T* out, T value, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = value;
}
template __global__ void fill<int>(int*, int, int);

extern "C" __global__ void __launch_bounds__(1024) softmax_row(const float* in, float* out,
                                                              int cols) {
    __shared__ float red[32];
    const float* row = in + blockIdx.x * cols;
    float m = -1e30f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    m = red[0];
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        out[blockIdx.x * cols + c] = __expf(row[c] - m);
}
"""

KERNELS = ["scale", "add3", "dot_partial", "tile_transpose", "histogram",
           "polynomial", "stencil5", "saxpy_u64", "fill", "softmax_row"]

# Options per kernel, cycled over its sites: what users of each would write.
OPTIONS = {
    "scale": ["", "max_block_size = 512", "min_occupancy = 0.25", "block_multiple = 64"],
    "add3": ["", "min_occupancy = 0.5", "max_block_size = 128"],
    # Declared in build.rs (BUILD_RS): a site launches there (issue 25's
    # rule: a site may not fix a block build.rs does not declare).
    "dot_partial": ["", "arch = \"sm_80\""],
    "tile_transpose": ["", "arch = \"sm_90\""],
    "histogram": ["dynamic_smem = 1024", "dynamic_smem = 1024, max_block_size = 256", ""],
    "polynomial": ["", "arch = \"sm_90\"", "block_multiple = 128"],
    "stencil5": ["", "min_occupancy = 0.5", "max_block_size = 256"],
    "saxpy_u64": ["", "max_block_size = 1024, block_multiple = 32", "min_occupancy = 0.5"],
    "fill": ["", "min_occupancy = 0.1"],
    "softmax_row": ["", "arch = \"sm_90\""],
}

BUILD_RS = """use occ_build::Launch;

fn main() {
    occ_build::Build::new()
        .file("kernels/kernels.cu")
        .archs(["sm_80", "sm_90"])
        .launch("dot_partial", Launch::block(128))
        .launch("tile_transpose", Launch::block_2d(32, 8))
        .launch("softmax_row", Launch::block(1024))
        .compile();
}
"""


def cargo_toml(name):
    occ_build = OCC / "occ-build"
    occ = OCC / "occ"
    return (f'[package]\nname = "{name}"\nversion = "0.1.0"\nedition = "2021"\n\n'
            f'[workspace]\n\n[dependencies]\nocc = {{ path = "{occ}" }}\n\n'
            f'[build-dependencies]\nocc-build = {{ path = "{occ_build}" }}\n')


def site(i):
    """(kernel, options, body) of site i; the body reads BLOCK_SIZE and the grid."""
    kernel = KERNELS[i % len(KERNELS)]
    opts = OPTIONS[kernel]
    opt = opts[(i // len(KERNELS)) % len(opts)]
    # Bodies differ in shape the way launch helpers do.
    shape = i % 4
    if shape == 0:
        body = "    let grid = grid_for(n);\n    (grid, BLOCK_SIZE)\n"
    elif shape == 1:
        body = ("    let blocks = grid_for(n.max(1));\n"
                "    let threads = BLOCK_SIZE;\n    (blocks, threads)\n")
    elif shape == 2:
        body = ("    if n == 0 {\n        return (0, BLOCK_SIZE);\n    }\n"
                "    (grid_for(n), BLOCK_SIZE)\n")
    else:
        body = ("    let per_block = BLOCK_SIZE;\n    let grid = grid_for(n);\n"
                "    debug_assert!(grid * per_block >= n);\n    (grid, per_block)\n")
    return kernel, opt, body


def main_rs(macro, baked=None, expanded=False):
    out = ["// @generated by bench/sites.py", ""]
    if expanded:
        out.append('const _: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/occ/manifest.json"));')
        out.append('const _: Option<&str> = option_env!("OCC_MANIFEST");')
        out.append("")
    for i in range(SITES):
        kernel, opt, body = site(i)
        if macro:
            args = f'kernel = "{kernel}"' + (f", {opt}" if opt else "")
            out.append(f"#[occ::launch_config({args})]")
            out.append(f"fn launch_{i}(n: u32) -> (u32, u32) {{")
            out.append(body.rstrip("\n"))
        elif expanded:
            # What the macro injects today, written out (occ-macros' expand.rs).
            out.append(f"fn launch_{i}(n: u32) -> (u32, u32) {{")
            out.append(f"    #[allow(dead_code)]\n    const BLOCK_SIZE: u32 = {baked[i]};")
            out.append("    #[allow(dead_code)]\n    const fn grid_for(n: u32) -> u32 {\n"
                       "        n.div_ceil(BLOCK_SIZE)\n    }")
            out.append(body.rstrip("\n"))
        else:
            out.append(f"fn launch_{i}(n: u32) -> (u32, u32) {{")
            out.append(f"    const BLOCK_SIZE: u32 = {baked[i]};")
            out.append(body.replace("grid_for(", "div_ceil_of(").replace(
                "div_ceil_of(n.max(1))", "n.max(1).div_ceil(BLOCK_SIZE)").replace(
                "div_ceil_of(n)", "n.div_ceil(BLOCK_SIZE)").rstrip("\n"))
        out.append("}")
        out.append("")
    out.append("fn main() {")
    out.append("    let n: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1 << 20);")
    for i in range(SITES):
        out.append(f'    println!("{i} {{:?}}", launch_{i}(n));')
    out.append("}")
    return "\n".join(out) + "\n"


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def env():
    e = {k: v for k, v in os.environ.items()
         if not (k.startswith("CARGO_") and k != "CARGO_HOME") and not k.startswith("OCC_")
         and k not in ("RUSTFLAGS", "OUT_DIR")}
    e["CARGO_TARGET_DIR"] = str(TARGET)
    nvcc = (ROOT / ".cuda/cu13/nvidia/cu13/bin/nvcc").resolve()
    e.setdefault("NVCC", str(nvcc))
    return e


def cargo(crate, *args):
    start = time.monotonic()
    p = subprocess.run(["cargo", *args, "--offline"], cwd=crate, env=env(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    secs = time.monotonic() - start
    if p.returncode != 0:
        sys.exit(f"cargo {' '.join(args)} failed in {crate}:\n{p.stdout}\n{p.stderr}")
    return secs


def run_bin(name):
    p = subprocess.run([str(TARGET / "debug" / name)], stdout=subprocess.PIPE, text=True,
                       check=True)
    return p.stdout.splitlines()


def crate(name, main):
    path = DIR / name
    write(path / "Cargo.toml", cargo_toml(name))
    write(path / "build.rs", BUILD_RS)
    write(path / "kernels/kernels.cu", KERNELS_CU)
    write(path / "src/main.rs", main)
    return path


def loadavg():
    return Path("/proc/loadavg").read_text().split()[:3]


def main():
    sites = crate("sites", main_rs(True))
    cargo(sites, "build")
    lines = run_bin("sites")
    baked = [int(line.split("(")[1].split(",")[1].strip(" )")) for line in lines]
    hand = crate("hand", main_rs(False, baked))
    cargo(hand, "build")
    if run_bin("hand") != lines:
        sys.exit("the hand-written crate's numbers differ from the macro's")
    crates = [("sites", sites), ("hand", hand)]
    if os.environ.get("EXPANDED") == "1":
        expanded = crate("expanded", main_rs(False, baked, expanded=True))
        cargo(expanded, "build")
        if run_bin("expanded") != lines:
            sys.exit("the expanded crate's numbers differ from the macro's")
        crates.append(("expanded", expanded))
    sizes = sorted(set(baked))
    print(f"{SITES} sites over {len(KERNELS)} kernels; block sizes baked: {sizes}; "
          "hand-written crate prints the same numbers")
    if os.environ.get("SITES_ONLY") == "1":
        return
    # Warm both once more, then measure interleaved.
    for _, c in crates:
        os.utime(c / "src/main.rs")
        cargo(c, "build")
    before = loadavg()
    times = {name: [] for name, _ in crates}
    for _ in range(REPS):
        for name, c in crates:
            os.utime(c / "src/main.rs")
            times[name].append(cargo(c, "build"))
    after = loadavg()
    print(f"load before {' '.join(before)}, after {' '.join(after)}; REPS={REPS}")
    print("| crate | best (s) | median (s) | runs |\n|---|---|---|---|")
    for name, ts in times.items():
        runs = ", ".join(f"{t:.3f}" for t in ts)
        print(f"| {name} | {min(ts):.3f} | {statistics.median(ts):.3f} | {runs} |")
    s, h = times["sites"], times["hand"]
    pairs = sorted(a / b for a, b in zip(s, h))
    print(f"ratio sites/hand: best {min(s) / min(h):.3f}x, median "
          f"{statistics.median(s) / statistics.median(h):.3f}x, per pair median "
          f"{statistics.median(pairs):.3f}x (range {pairs[0]:.2f}-{pairs[-1]:.2f})")
    if "expanded" in times:
        e = times["expanded"]
        print(f"expanded/hand: best {min(e) / min(h):.3f}x, median "
              f"{statistics.median(e) / statistics.median(h):.3f}x (rustc's work on what is "
              "injected); sites - expanded = the macro's own run")


if __name__ == "__main__":
    main()
