#!/usr/bin/env python3
"""The cached build script before and after the build memo (issue 25 item 2),
side by side in one run.

Two occ trees: BEFORE (a folder holding an occ checkout, e.g. `git archive`
of the base commit; OCC_BEFORE) and AFTER (this one, or OCC_AFTER). Two
generated crates (bench/candle.py's `big_cu` kernels):

  big    2,000 kernels in one .cu (source lines on, unless LINES=0)
  split  2,000 kernels in SPLIT files (2000/SPLIT each)

Each crate's build script is compiled once per tree by `cargo build` at the
default dev profile (occ-build at opt-level 0; OCC_ARCHS=none makes that
run stop at once). The scripts then run directly, with cargo's variables,
each tree into an OUT_DIR of its own, the archs given by OCC_ARCHS:

  big x1    sm_80, a `touch` of the .cu (same bytes): every job cached
  big x3    sm_80 + sm_90 + sm_100, the same
  split x1  sm_80, a comment appended to one .cu: its nvcc job runs; a
            timing launcher (OCC_NVCC_LAUNCHER) logs each nvcc call, and
            "beyond nvcc" is the wall less the nvcc span

The 2,000 x 3 figure of BENCHMARKS.md 12.2: `TREES=after CASES="big x3"
KERNELS=2000 REPS=5 python3 bench/memo.py` (KEEP=1 to time again without
the ~5 min cold build). Anything that changes a toolkit binary's stat
between the runs (a `chmod`, a reinstall) is a new toolkit to every occ
job cache; `scripts/cuda-toolkit` no longer does (it once chmod'ed every
tool on each call).

SEED_BIG / SEED_SPLIT name an earlier OUT_DIR of the crate (same folder) to
start the first before OUT_DIR from. Each OUT_DIR is prepared untimed: blessed (an occ.lock, as a user's crate
has one; OCC_BLESS=1), then one run. The after OUT_DIR starts as a copy of
the before one, so nvdisasm's records (keyed by the cubin's bytes and the
crate root, shared by both trees' runs) are computed once. Then REPS
timed runs, before and after interleaved. Prints a Markdown table and
writes $BENCH_DIR/memo-results.{json,md}.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
AFTER = Path(os.environ.get("OCC_AFTER", HERE)).resolve()
BEFORE = Path(os.environ.get("OCC_BEFORE", HERE)).resolve()  # unused with TREES=after
BENCH = Path(os.environ.get("BENCH_DIR", "/tmp/occ-bench/memo")).resolve()
REPS = int(os.environ.get("REPS", "3"))
KERNELS = int(os.environ.get("KERNELS", "2000"))
SPLIT = int(os.environ.get("SPLIT", "20"))
# Source lines (nvdisasm) on, as by default; LINES=0 turns them off: a cold
# nvdisasm of 2,000 kernels costs the build script minutes per arch at
# opt-level 0, and the memo's hit path reads no line record either way.
LINES = os.environ.get("LINES", "1") == "1"
NVCC = str((HERE / ".cuda/cu13/nvidia/cu13/bin/nvcc").resolve())
LAUNCHER = BENCH / "bin/timed-launcher.sh"
NVCC_LOG = BENCH / "nvcc-times.log"
# KEEP=1: an OUT_DIR an earlier run prepared is kept (one untimed run,
# then the timed ones) instead of being prepared again from nothing.
KEEP = os.environ.get("KEEP") == "1"
# TREES=after measures the after tree alone (OCC_BEFORE is then not needed).
TREES = {k: v for k, v in {"before": BEFORE, "after": AFTER}.items()
         if k in os.environ.get("TREES", "before,after").split(",")}

sys.path.insert(0, str(HERE / "bench"))
from candle import big_cu, write  # noqa: E402  (the kernels of BENCHMARKS.md item 8)


def say(msg):
    print(msg, file=sys.stderr, flush=True)


def env(tree):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("CARGO_") and not k.startswith("OCC_")
         and k not in ("RUSTFLAGS", "OUT_DIR", "NVCC", "CUDA_COMPUTE_CAP")}
    e["CARGO_TARGET_DIR"] = str(BENCH / f"target-{tree}")
    e["CARGO_INCREMENTAL"] = "0"
    e["NVCC"] = NVCC
    e["OCC_NVCC_LAUNCHER"] = str(LAUNCHER)
    return e


def crate(name, files):
    path = BENCH / name
    lines = "" if LINES else "\n        .source_lines(false)"
    write(path / "build.rs", "fn main() {\n    occ_build::Build::new()\n"
          f'        .glob("kernels/*.cu")\n        .arch("sm_80"){lines}\n        .compile();\n}}\n')
    for f in range(files):
        text = big_cu(KERNELS // files).replace("big_", f"k{f:02}_") if files > 1 else big_cu(KERNELS)
        write(path / f"kernels/many{f:02}.cu", text)
    write(path / "src/lib.rs", "")
    if not (path / "Cargo.lock").exists():
        shutil.copy(AFTER / "Cargo.lock", path / "Cargo.lock")
    return path


def script_of(path, tree):
    """The crate's build script compiled against `tree` (its run stops at
    once: OCC_ARCHS names no arch)."""
    write(path / "Cargo.toml", f'[package]\nname = "{path.name}"\nversion = "0.0.0"\nedition = "2021"\n\n'
          f'[workspace]\n\n[build-dependencies]\nocc-build = {{ path = "{TREES[tree] / "occ-build"}" }}\n')
    e = env(tree)
    e["OCC_ARCHS"] = "none"
    p = subprocess.run(["nice", "cargo", "build", "--offline", "--message-format=json"], cwd=path,
                       env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            m = json.loads(line)
            pid = m.get("package_id", "")
            mine = f"#{path.name}@" in pid or f"/{path.name}#" in pid
            if m.get("reason") == "compiler-artifact" and mine and "custom-build" in m["target"]["kind"]:
                return Path(next(f for f in m["filenames"] if f.endswith("build-script-build")))
    sys.exit(f"no build script for {path} ({tree}):\n{p.stderr[-4000:]}")


def nvcc_span(since):
    rows = [l.split() for l in NVCC_LOG.read_text().splitlines()[since:]] if NVCC_LOG.exists() else []
    if not rows:
        return 0, 0.0
    return len(rows), max(float(r[1]) for r in rows) - min(float(r[0]) for r in rows)


def run(path, script, out, archs, edit=None, bless=False):
    if edit is None:
        os.utime(path / "kernels/many00.cu")
    else:
        with open(path / "kernels/many00.cu", "a") as f:
            f.write(f"// bench edit {edit} {time.time()}\n")
    e = env("after")
    e.pop("CARGO_TARGET_DIR")
    e.update({"OUT_DIR": str(out), "CARGO_MANIFEST_DIR": str(path), "CARGO_PKG_NAME": path.name,
              "CARGO_PKG_VERSION": "0.0.0", "NUM_JOBS": str(os.cpu_count()),
              "TARGET": "x86_64-unknown-linux-gnu", "HOST": "x86_64-unknown-linux-gnu",
              "PROFILE": "debug", "OPT_LEVEL": "0", "DEBUG": "true", "RUSTC": "rustc",
              "OCC_ARCHS": ",".join(archs)})
    if bless:
        e["OCC_BLESS"] = "1"
    since = len(NVCC_LOG.read_text().splitlines()) if NVCC_LOG.exists() else 0
    start = time.monotonic()
    p = subprocess.run(["nice", str(script)], cwd=path, env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - start
    if p.returncode != 0 or "cargo::error" in p.stdout:
        sys.exit(f"{script} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    runs, span = nvcc_span(since)
    return {"wall": wall, "nvcc": runs, "span": span}


def main():
    BENCH.mkdir(parents=True, exist_ok=True)
    write(LAUNCHER, f"#!/bin/sh\ns=$(date +%s.%N)\n\"$@\"\nrc=$?\n"
          f"echo \"$s $(date +%s.%N)\" >> '{NVCC_LOG}'\nexit $rc\n", 0o755)
    load_start = open("/proc/loadavg").read().split()[:3]
    cases = [("big", 1, ["sm_80"], "touch", None),
             ("big", 1, ["sm_80", "sm_90", "sm_100"], "touch", "big x1"),
             ("split", SPLIT, ["sm_80"], "edit", None)]
    cases = [c for c in cases if f"{c[0]} x{len(c[2])}" in os.environ.get("CASES", "big x1,big x3,split x1")]
    scripts = {}
    results = {}
    outs = {}
    for name, files, archs, kind, seed in cases:
        path = crate(name, files)
        for tree in TREES:
            if (name, tree) not in scripts:
                scripts[(name, tree)] = script_of(path, tree)
        label = f"{name} x{len(archs)}"
        for tree in TREES:
            out = BENCH / "out" / f"{label.replace(' ', '')}-{tree}"
            if KEEP and (out / "occ/manifest.json").exists():
                run(path, scripts[(name, tree)], out, archs)  # untimed: a hit from here on
                say(f"{label} {tree}: kept {out}")
                outs[(label, tree)] = out
                continue
            shutil.rmtree(out, ignore_errors=True)
            source = outs.get((seed, "before")) if tree == "before" else outs.get((label, "before"))
            if tree == "before" and source is None and os.environ.get(f"SEED_{name.upper().replace('-', '_')}"):
                source = Path(os.environ[f"SEED_{name.upper().replace('-', '_')}"])  # an earlier OUT_DIR of this crate
            if source:
                shutil.copytree(source, out, symlinks=True)
            start = time.monotonic()
            run(path, scripts[(name, tree)], out, archs, bless=True)
            run(path, scripts[(name, tree)], out, archs)
            say(f"{label} {tree}: prepared in {time.monotonic() - start:.0f} s")
            outs[(label, tree)] = out
        for rep in range(REPS):
            for tree in TREES:
                r = run(path, scripts[(name, tree)], outs[(label, tree)], archs,
                        edit=rep if kind == "edit" else None)
                results.setdefault(f"{label} {tree}", []).append(r)
                say(f"{label} {tree} {kind}: {r}")
        (BENCH / "memo-results.json").write_text(json.dumps(results, indent=1))
    load_end = open("/proc/loadavg").read().split()[:3]
    med = statistics.median
    out = [f"load at start {' '.join(load_start)}, at end {' '.join(load_end)}; REPS={REPS}\n\n",
           "| case | before: wall (s) | after: wall (s) | nvcc runs (before vs after) | "
           "before: beyond nvcc (s) | after: beyond nvcc (s) |\n",
           "|---|---|---|---|---|---|\n"]
    for name, files, archs, kind, _ in cases:
        label = f"{name} x{len(archs)}"
        b, a = results.get(f"{label} before", []), results.get(f"{label} after", [])

        def walls(rs):
            if not rs:
                return "—"
            return "**%.2f** (%s)" % (med([r["wall"] for r in rs]), ", ".join("%.2f" % r["wall"] for r in rs))

        def beyond(rs):
            return "%.2f" % med([r["wall"] - r["span"] for r in rs]) if kind == "edit" and rs else "—"
        out.append(f"| {KERNELS} kernels in {files} file{'s' if files > 1 else ''} × {len(archs)} arch"
                   f"{'s' if len(archs) > 1 else ''}, {kind} | {walls(b)} | {walls(a)} | "
                   f"{'/'.join(str(r['nvcc']) for r in b)} vs {'/'.join(str(r['nvcc']) for r in a)} | "
                   f"{beyond(b)} | {beyond(a)} |\n")
    text = "".join(out)
    print(text)
    (BENCH / "memo-results.md").write_text(text)


if __name__ == "__main__":
    main()
