"""What source lines cost a clean build (BENCHMARKS.md section 12.5).

Five of candle-kernels' files (affine, binary, fill, reduce, unary) for
sm_80 and sm_90, interleaved, REPS times (default 3):

  (n) the same 10 nvcc jobs occ runs (`-cubin -Xptxas -v`, one per file and
      arch), run by `xargs -P<cores>`: plain parallel nvcc, no occ;
  (o) occ-build, source lines on (its default: `-lineinfo`, nvdisasm);
  (f) occ-build with `.source_lines(false)`.

occ-build runs from a small binary built in dev profile (opt-level 0, as a
user's build-dependency is), into a fresh out dir each time, so every job
runs; `NUM_JOBS` is the core count, as cargo sets it. Prints the walls,
the CPU seconds (user + system of everything each run started, which the
machine's load moves little) and the ratios to (n), then the lines stage
alone: the last (o) build run again with its jobs cached and the stage's
records removed.

    python3 bench/lines_cost.py

CORPUS=<folder> takes every `.cu` of a folder instead (BENCHMARKS.md
section 19: `python3 bench/near_cliff.py <folder>` writes one whose kernels
mostly sit at a register cliff); BEFORE=<a checkout of occ> adds its
occ-build with lines on, interleaved; RUNNER_TARGET=<folder> keeps the
runners' cargo target between runs.

Needs cargo's registry copy of candle-kernels (cargo fetch of a crate that
depends on it) and the nvcc of .cuda/ (scripts/cuda-toolkit) or NVCC=.
"""

import os
import resource
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
    for f in a[4].split(',') {
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


def runner(work, occ_build=ROOT / "occ-build", name="runner"):
    crate = work / name
    (crate / "src").mkdir(parents=True)
    (crate / "Cargo.toml").write_text(
        '[package]\nname = "occ-lines-cost"\nversion = "0.0.0"\nedition = "2021"\n\n'
        f'[workspace]\n\n[dependencies]\nocc-build = {{ path = "{occ_build}" }}\n')
    (crate / "src/main.rs").write_text(RUNNER)
    target = Path(os.environ.get("RUNNER_TARGET", work / "target")) / name
    subprocess.run(["cargo", "build", "-q"], cwd=crate, check=True,
                   env={**os.environ, "CARGO_TARGET_DIR": str(target)})
    return target / "debug/occ-lines-cost"


def timed(cmd, **kw):
    """Wall seconds and CPU seconds (user + system of the command and all
    it ran): the CPU figure moves little with the machine's load."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def corpus():
    """The folder of `.cu` files and their stems: CORPUS= (every `.cu` of
    that folder, as `bench/near_cliff.py` writes them) or candle's five."""
    if "CORPUS" in os.environ:
        src = Path(os.environ["CORPUS"]).resolve()
        files = sorted(p.stem for p in src.glob("*.cu"))
        if not files:
            sys.exit(f"no .cu file in {src}")
        return src, files
    return candle_src(), FILES


def main():
    src, files = corpus()
    work = Path(tempfile.mkdtemp(prefix="occ-lines-cost-"))
    exe = runner(work)
    # BEFORE=<a checkout>: its occ-build with lines on, as kind "b".
    before = os.environ.get("BEFORE")
    exe_before = runner(work, Path(before) / "occ-build", "before") if before else None
    kinds = "nobf" if before else "nof"
    jobs = "\n".join(f"{f} {a}" for f in files for a in ARCHS)
    nvcc_cmd = (f'"{NVCC}" -cubin -arch=$2 -Xptxas -v -I"{src}" '
                f'-o "{work}/n/$1.$2.cubin" "{src}/$1.cu"')
    env = {**os.environ, "NVCC": NVCC, "NUM_JOBS": str(CORES)}
    walls = {k: [] for k in "nobf"}
    cpus = {k: [] for k in "nobf"}
    print(f"# {src}: {len(files)} files x {', '.join(ARCHS)}, {CORES} cores, REPS={REPS}, "
          f"load before {open('/proc/loadavg').read().split()[:3]}", flush=True)
    for rep in range(REPS):
        for kind in kinds:
            out = work / kind
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            if kind == "n":
                wall, cpu = timed(["xargs", "-P", str(CORES), "-L", "1", "sh", "-c", nvcc_cmd, "_"],
                                  input=jobs.encode())
            else:
                which = exe_before if kind == "b" else exe
                wall, cpu = timed([which, src, out, "off" if kind == "f" else "on", ",".join(files)],
                                  env=env)
            walls[kind].append(wall)
            cpus[kind].append(cpu)
            print(f"rep {rep + 1} {kind}: {wall:.1f} s wall, {cpu:.1f} s CPU", flush=True)
    # The lines stage alone: the last "o" build again with every nvcc job
    # cached and the stage's records removed, so that only nvdisasm runs.
    shutil.rmtree(work / "o" / "occ" / "cache" / "lines", ignore_errors=True)
    shutil.rmtree(work / "o" / "occ" / "cache" / "memo", ignore_errors=True)
    stage_wall, stage_cpu = timed([exe, src, work / "o", "on", ",".join(files)], env=env)
    print(f"the lines stage alone (jobs cached): {stage_wall:.1f} s wall, {stage_cpu:.1f} s CPU")
    n = statistics.median(walls["n"])
    print(f"load after {open('/proc/loadavg').read().split()[:3]}")
    c = statistics.median(cpus["n"])
    print("| run | walls (s) | median | × plain nvcc | CPU (s) | median | × plain nvcc |")
    print("|---|---|---:|---:|---|---:|---:|")
    for kind, label in (("n", "plain nvcc, `xargs -P`"), ("o", "occ-build, lines on (default)"),
                        ("b", "occ-build of BEFORE, lines on"),
                        ("f", "occ-build, `.source_lines(false)`")):
        if not walls[kind]:
            continue
        m = statistics.median(walls[kind])
        mc = statistics.median(cpus[kind])
        print(f"| {label} | {', '.join(f'{w:.1f}' for w in walls[kind])} | {m:.1f} | {m / n:.2f} "
              f"| {', '.join(f'{w:.1f}' for w in cpus[kind])} | {mc:.1f} | {mc / c:.2f} |")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
