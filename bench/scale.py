#!/usr/bin/env python3
"""What an edit of one small file costs the build script beside many cached
kernels (BENCHMARKS.md section 15), before and after, in one run.

A generated crate: KERNELS kernels (bench/candle.py's `big_cu`) in FILES
`.cu` files, plus `kernels/small.cu` (one kernel), for ARCHS (default
sm_80,sm_90,sm_100). Its build script is compiled by `cargo build` at the
default dev profile (occ-build at opt-level 0, as a user's build script
is) once per tree: TREES (default "before,after"), before = OCC_BEFORE (a
folder holding an occ checkout, e.g. `git archive` of the base commit),
after = this tree (or OCC_AFTER). The scripts run directly with cargo's
variables, each tree into an OUT_DIR of its own; the after OUT_DIR starts
as a copy of the before one, so every nvcc job is compiled once (cold,
blessed: OCC_BLESS=1 writes occ.lock, as a user's crate has one), and one
more untimed run follows.

Timed: REPS runs per tree, interleaved, each after a comment appended to
small.cu: its ARCHS jobs run nvcc, every other job is cached, the memo
misses. A launcher (OCC_NVCC_LAUNCHER) logs each nvcc call's start and
end; "beyond nvcc" is the wall less the union of the nvcc calls' spans.
CPU is the script's and its children's (getrusage). A tree whose build
script prints `occ-time <stage> <seconds>` lines on stderr (timings added
for a profile, never committed) has them kept per run in the JSON. PERF=1 runs the after
script once more under `perf record -g` into $BENCH_DIR/perf-<tree>.data.

Also prints report.txt's size in each OUT_DIR, and the candidate lock's
(`occ.lock.new`, what bless writes) bytes per kernel × arch. Prints a Markdown table,
writes $BENCH_DIR/scale-results.{json,md}.
"""

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
AFTER = Path(os.environ.get("OCC_AFTER", HERE)).resolve()
BEFORE = Path(os.environ.get("OCC_BEFORE", HERE)).resolve()
KERNELS = int(os.environ.get("KERNELS", "2000"))
FILES = int(os.environ.get("FILES", "20"))
ARCHS = os.environ.get("ARCHS", "sm_80,sm_90,sm_100").split(",")
BENCH = Path(os.environ.get("BENCH_DIR", f"/tmp/occ-bench/scale-{KERNELS}x{len(ARCHS)}")).resolve()
REPS = int(os.environ.get("REPS", "3"))
NVCC = str((HERE / ".cuda/cu13/nvidia/cu13/bin/nvcc").resolve())
LAUNCHER = BENCH / "bin/timed-launcher.sh"
NVCC_LOG = BENCH / "nvcc-times.log"
TREES = {k: v for k, v in {"before": BEFORE, "after": AFTER}.items()
         if k in os.environ.get("TREES", "before,after").split(",")}

sys.path.insert(0, str(HERE / "bench"))
from candle import big_cu, write  # noqa: E402


def say(msg):
    print(msg, file=sys.stderr, flush=True)


def clean_env():
    return {k: v for k, v in os.environ.items()
            if not k.startswith("CARGO_") and not k.startswith("OCC_")
            and k not in ("RUSTFLAGS", "OUT_DIR", "NVCC", "CUDA_COMPUTE_CAP")}


def crate():
    path = BENCH / "crate"
    write(path / "build.rs", "fn main() {\n    occ_build::Build::new()\n"
          '        .glob("kernels/*.cu")\n        .arch("sm_80")\n        .compile();\n}\n')
    for f in range(FILES):
        write(path / f"kernels/many{f:03}.cu",
              big_cu(KERNELS // FILES).replace("big_", f"k{f:03}_"))
    write(path / "kernels/small.cu",
          'extern "C" __global__ void small_one(float* p, int n) {\n'
          "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) p[i] *= 2.0f;\n}\n")
    write(path / "src/lib.rs", "")
    if not (path / "Cargo.lock").exists():
        shutil.copy(AFTER / "Cargo.lock", path / "Cargo.lock")
    return path


def script_of(path, tree):
    write(path / "Cargo.toml", f'[package]\nname = "scale"\nversion = "0.0.0"\nedition = "2021"\n\n'
          f'[workspace]\n\n[build-dependencies]\nocc-build = {{ path = "{TREES[tree] / "occ-build"}" }}\n')
    e = clean_env()
    e.update({"CARGO_TARGET_DIR": str(BENCH / f"target-{tree}"), "CARGO_INCREMENTAL": "0",
              "CARGO_BUILD_JOBS": os.environ.get("CARGO_BUILD_JOBS", "1"), "NVCC": NVCC,
              "OCC_ARCHS": "none"})
    p = subprocess.run(["nice", "cargo", "build", "--offline", "--message-format=json"], cwd=path,
                       env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            m = json.loads(line)
            if (m.get("reason") == "compiler-artifact" and "scale" in m.get("package_id", "")
                    and "custom-build" in m["target"]["kind"]):
                exe = Path(next(f for f in m["filenames"] if f.endswith("build-script-build")))
                kept = BENCH / f"script-{tree}"
                shutil.copy2(exe, kept)  # the next tree's build replaces the crate's script
                return kept
    sys.exit(f"no build script ({tree}):\n{p.stderr[-4000:]}")


def nvcc_span(since):
    rows = [l.split() for l in NVCC_LOG.read_text().splitlines()[since:]] if NVCC_LOG.exists() else []
    spans = sorted((float(r[0]), float(r[1])) for r in rows)
    total, end = 0.0, None
    for s, e in spans:  # union of the intervals
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return len(rows), total


def run(path, script, out, bless=False, edit=None, prefix=()):
    if edit is not None:
        with open(path / "kernels/small.cu", "a") as f:
            f.write(f"// bench edit {edit} {time.time()}\n")
    e = clean_env()
    e.update({"OUT_DIR": str(out), "CARGO_MANIFEST_DIR": str(path), "CARGO_PKG_NAME": "scale",
              "CARGO_PKG_VERSION": "0.0.0", "NUM_JOBS": "1",
              "TARGET": "x86_64-unknown-linux-gnu", "HOST": "x86_64-unknown-linux-gnu",
              "PROFILE": "debug", "OPT_LEVEL": "0", "DEBUG": "true", "RUSTC": "rustc",
              "NVCC": NVCC, "OCC_NVCC_LAUNCHER": str(LAUNCHER), "OCC_ARCHS": ",".join(ARCHS)})
    if bless:
        e["OCC_BLESS"] = "1"
    since = len(NVCC_LOG.read_text().splitlines()) if NVCC_LOG.exists() else 0
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    p = subprocess.run(["nice", *prefix, str(script)], cwd=path, env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0 or "cargo::error" in p.stdout:
        sys.exit(f"{script} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    runs, span = nvcc_span(since)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    report = out / "occ/report.txt"
    return {"wall": wall, "cpu": cpu, "nvcc": runs, "span": span, "beyond": wall - span,
            "report_bytes": report.stat().st_size if report.exists() else None,
            "lock_per_kernel_arch": lock_size(out),
            "stages": [l for l in p.stderr.splitlines() if l.startswith("occ-time")],
            "stderr_tail": p.stderr[-2000:]}


def lock_size(out):
    """The candidate lock's bytes per kernel × arch (what `cargo occ bless`
    writes: `$OUT_DIR/occ/occ.lock.new`)."""
    lock = out / "occ/occ.lock.new"
    if not lock.exists():
        return None
    n = sum(len(k["archs"]) for k in json.loads(lock.read_text())["kernels"])
    return round(lock.stat().st_size / n, 1) if n else None


def main():
    BENCH.mkdir(parents=True, exist_ok=True)
    write(LAUNCHER, f"#!/bin/sh\ns=$(date +%s.%N)\n\"$@\"\nrc=$?\n"
          f"echo \"$s $(date +%s.%N)\" >> '{NVCC_LOG}'\nexit $rc\n", 0o755)
    path = crate()
    scripts = {tree: script_of(path, tree) for tree in TREES}
    load_start = open("/proc/loadavg").read().split()[:3]
    outs, seed = {}, None
    for tree in TREES:
        out = BENCH / f"out-{tree}"
        if not (out / "occ/manifest.json").exists():
            shutil.rmtree(out, ignore_errors=True)
            if seed:
                shutil.copytree(seed, out, symlinks=True)
            start = time.monotonic()
            r = run(path, scripts[tree], out, bless=True)
            say(f"{tree}: cold (blessed) {r['wall']:.1f} s, nvcc {r['nvcc']}")
        run(path, scripts[tree], out)
        outs[tree] = seed = out
    results = {}
    for rep in range(REPS):
        for tree in TREES:
            r = run(path, scripts[tree], outs[tree], edit=rep)
            results.setdefault(tree, []).append(r)
            say(f"{tree} edit {rep}: wall {r['wall']:.2f} cpu {r['cpu']:.2f} nvcc {r['nvcc']} "
                f"span {r['span']:.2f} beyond {r['beyond']:.2f} report {r['report_bytes']}")
    if os.environ.get("PERF") == "1":
        for tree in TREES:
            run(path, scripts[tree], outs[tree], edit="perf",
                prefix=("perf", "record", "-g", "-F", "499", "-o", str(BENCH / f"perf-{tree}.data")))
    load_end = open("/proc/loadavg").read().split()[:3]
    (BENCH / "scale-results.json").write_text(json.dumps(results, indent=1))
    med = statistics.median
    rows = [f"{KERNELS} kernels in {FILES} files + small.cu x {len(ARCHS)} archs; "
            f"load {' '.join(load_start)} -> {' '.join(load_end)}; REPS={REPS}\n\n",
            "| tree | wall (s) | CPU (s) | nvcc runs | nvcc span (s) | beyond nvcc (s) | report.txt (bytes) | occ.lock (B per kernel × arch) |\n",
            "|---|---|---|---|---|---|---|---|\n"]
    for tree, rs in results.items():
        def f(k):
            return "**%.2f** (%s)" % (med(r[k] for r in rs), ", ".join("%.2f" % r[k] for r in rs))
        rows.append(f"| {tree} | {f('wall')} | {f('cpu')} | {'/'.join(str(r['nvcc']) for r in rs)} | "
                    f"{f('span')} | {f('beyond')} | {rs[-1]['report_bytes']} | {rs[-1]['lock_per_kernel_arch']} |\n")
    text = "".join(rows)
    print(text)
    (BENCH / "scale-results.md").write_text(text)


if __name__ == "__main__":
    main()
