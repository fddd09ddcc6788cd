"""What source lines cost a clean build (BENCHMARKS.md section 12.5).

Five of candle-kernels' files (affine, binary, fill, reduce, unary) for
sm_80 and sm_90, interleaved, REPS times (default 3):

  (n) the same 10 nvcc jobs occ runs (`-cubin -Xptxas -v`, one per file and
      arch), run by `xargs -P<cores>`: plain parallel nvcc, no occ;
  (o) occ-build, source lines on (its default: `-lineinfo`, nvdisasm);
  (f) occ-build with `.source_lines(false)`.

occ-build runs from a small binary built in dev profile (opt-level 0, as a
user's build-dependency is), into a fresh out dir each time, so every job
runs; `NUM_JOBS` is the core count, as cargo sets it. Prints the walls and
the ratios to (n).

    python3 bench/lines_cost.py

Needs cargo's registry copy of candle-kernels (cargo fetch of a crate that
depends on it) and the nvcc of .cuda/ (scripts/cuda-toolkit) or NVCC=.
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NVCC = os.environ.get("NVCC", str(ROOT / ".cuda/cu13/nvidia/cu13/bin/nvcc"))
REPS = int(os.environ.get("REPS", "3"))
FILES = ["affine", "binary", "fill", "reduce", "unary"]
ARCHS = ["sm_80", "sm_90"]
CORES = os.cpu_count() or 2

RUNNER = """
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let mut b = occ_build::Build::new();
    b.root(&a[1]).out_dir(&a[2]).archs(["sm_80", "sm_90"]).include(&a[1]);
    for f in ["affine", "binary", "fill", "reduce", "unary"] {
        b.file(format!("{f}.cu"));
    }
    if a[3] == "off" {
        b.source_lines(false);
    }
    if let Err(e) = b.try_compile() {
        eprintln!("{e}");
        std::process::exit(1);
    }
}
"""


def candle_src():
    home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    found = sorted(home.glob("registry/src/*/candle-kernels-*/src"))
    if not found:
        sys.exit("no candle-kernels in cargo's registry folder: cargo fetch a crate that depends on it")
    return found[-1]


def runner(work):
    crate = work / "runner"
    (crate / "src").mkdir(parents=True)
    (crate / "Cargo.toml").write_text(
        '[package]\nname = "occ-lines-cost"\nversion = "0.0.0"\nedition = "2021"\n\n'
        f'[workspace]\n\n[dependencies]\nocc-build = {{ path = "{ROOT / "occ-build"}" }}\n')
    (crate / "src/main.rs").write_text(RUNNER)
    subprocess.run(["cargo", "build", "-q"], cwd=crate, check=True,
                   env={**os.environ, "CARGO_TARGET_DIR": str(work / "target")})
    return work / "target/debug/occ-lines-cost"


def timed(cmd, **kw):
    start = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    return time.monotonic() - start


def main():
    src = candle_src()
    work = Path(tempfile.mkdtemp(prefix="occ-lines-cost-"))
    exe = runner(work)
    jobs = "\n".join(f"{f} {a}" for f in FILES for a in ARCHS)
    nvcc_cmd = (f'"{NVCC}" -cubin -arch=$2 -Xptxas -v -I"{src}" '
                f'-o "{work}/n/$1.$2.cubin" "{src}/$1.cu"')
    env = {**os.environ, "NVCC": NVCC, "NUM_JOBS": str(CORES)}
    walls = {"n": [], "o": [], "f": []}
    print(f"# {len(FILES)} files x {', '.join(ARCHS)}, {CORES} cores, REPS={REPS}, "
          f"load before {open('/proc/loadavg').read().split()[:3]}", flush=True)
    for rep in range(REPS):
        for kind in "nof":
            out = work / kind
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            if kind == "n":
                wall = timed(["xargs", "-P", str(CORES), "-L", "1", "sh", "-c", nvcc_cmd, "_"],
                             input=jobs.encode())
            else:
                wall = timed([exe, src, out, "on" if kind == "o" else "off"], env=env)
            walls[kind].append(wall)
            print(f"rep {rep + 1} {kind}: {wall:.1f} s", flush=True)
    n = statistics.median(walls["n"])
    print(f"load after {open('/proc/loadavg').read().split()[:3]}")
    print("| run | walls (s) | median | × plain nvcc |")
    print("|---|---|---:|---:|")
    for kind, label in (("n", "plain nvcc, `xargs -P`"), ("o", "occ-build, lines on (default)"),
                        ("f", "occ-build, `.source_lines(false)`")):
        m = statistics.median(walls[kind])
        print(f"| {label} | {', '.join(f'{w:.1f}' for w in walls[kind])} | {m:.1f} | {m / n:.2f} |")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
