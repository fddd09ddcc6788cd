#!/usr/bin/env python3
"""What proving a cached job costs (issue 37 item 1), side by side in one run.

A cached job's result is *proven* by preprocessing the job again (`nvcc
-E`) and comparing the text's hash with the record's (occ-build/src/leaf/cache.rs).
Under `CI` and with `OCC_CACHE=verify` every hit is proven; the default
(`OCC_CACHE=direct`) trusts unchanged stats, and above it the build memo
answers a build in which nothing changed without reading a record.

The crates (nothing of candle is committed):

  candle x1   candle-kernels from crates.io (bench/candle.py's `fetch_candle`:
              a scratch crate, `cargo fetch`, the source copied from cargo's
              registry folder), its PTX part (11 files) on occ-build alone
              (candle.py's `occ_build_rs`, crate (b)): sm_80, `Embed::Ptx`
  candle x2   the same, sm_80 + sm_90, occ's default embed (crate (c))
  big x3      bench/memo.py's `big`: KERNELS kernels in one .cu, sm_80 +
              sm_90 + sm_100 (OCC_ARCHS)
  split x3    bench/memo.py's `split`: KERNELS kernels in SPLIT files, the
              same archs
  lib x1      one small host-code file as a static library (`static_lib`),
              sm_80: a host-code library has no proof (cache.rs), so a hit
              that must be proven is compiled again (the nvcc column shows
              it)

libmoe (candle's 15 host-code files) is left out of the candle crates
(MOE=0 as in BENCHMARKS 12.6): its clean build is 10-15 min here; `lib x1`
shows what verify does to such a part.

Each crate's build script is compiled once by `cargo build` at the default
dev profile (memo.py's `script_of`: occ-build at opt-level 0), then run
directly with cargo's variables (cargo's own overhead is out) into an
OUT_DIR of its own:

  cold      the first run, into an empty OUT_DIR, with OCC_BLESS=1 (it
            writes occ.lock, as a user's crate has one; CI needs a baseline
            for every kernel x arch): every job compiled. Then one untimed
            run.
  memo      the default (direct) mode: the build memo answers
  direct    the default mode with the memo removed (`cache/memo/`): every
            job's direct check (stats), no proof
  verify    OCC_CACHE=verify: every hit proven by `nvcc -E`
  ci        CI=true (every hit proven, and the gate against occ.lock)

Each OUT_DIR lies inside the crate root by default (LAYOUT=inside:
<crate>/target/proof-out/, as a lone crate's target/ does). LAYOUT=outside
puts it beside the crate (<BENCH_DIR>/out/, as memo.py does, and as a
workspace member's `../target` or a CARGO_TARGET_DIR elsewhere is). At
1d23b09 that layout made every default-mode hit a proof and the memo never
answer (the anchor's folder, `$OUT_DIR/occ/cache`, named through
`<root>/./../`, escaped the filter that keeps occ's own folders out of a
record's folders); 6bb7393 fixed it. LAYOUT=outside checks the fix: the
default mode's figures match those inside (BENCHMARKS.md section 14).

Before each timed run one source is touched (same bytes, as memo.py's
"touch" case: cargo reruns the script on the new mtime). REPS repetitions,
the modes interleaved in each (verify, ci, direct, memo: the memo run
follows a direct run with the same variables, so the memo it reads is
that run's). Wall (monotonic) and CPU (user + system of the script and
every process it waited for: getrusage(RUSAGE_CHILDREN) around the run),
and nvcc compile runs (a launcher, OCC_NVCC_LAUNCHER, logs each; the proof
runs nvcc without the launcher, so it is not counted). A run that printed
"did not hold" (a disproved hit) or compiled anything is flagged.

Variables: CASES (default "candle x1,candle x2,big x3,split x3,lib x1"),
MODES (default "verify,ci,direct,memo"), REPS (3), KERNELS (2000), SPLIT
(20), KEEP=1 (reuse an OUT_DIR an earlier run prepared: no cold build),
SMOKE=1 (two candle files, 50 kernels: a check of the script, figures mean
nothing), LAYOUT (inside), BENCH_DIR (default /tmp/occ-bench/proof). Prints Markdown tables
and writes $BENCH_DIR/proof-results.{json,md}.
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
os.environ.setdefault("BENCH_DIR", "/tmp/occ-bench/proof")  # read by candle.py and memo.py
SMOKE = os.environ.get("SMOKE") == "1"
if SMOKE:
    os.environ.setdefault("KERNELS", "50")
sys.path.insert(0, str(HERE / "bench"))
import candle  # noqa: E402
import memo  # noqa: E402
from candle import write  # noqa: E402

BENCH = memo.BENCH
REPS = int(os.environ.get("REPS", "3"))
KERNELS = memo.KERNELS
SPLIT = memo.SPLIT
KEEP = os.environ.get("KEEP") == "1"
# Where each OUT_DIR lies: "inside" the crate root (<crate>/target/proof-out/,
# as a lone crate's target/ is), or "outside" (<BENCH_DIR>/out/, as memo.py
# puts it, and as a workspace member's `../target` or a CARGO_TARGET_DIR
# elsewhere is).
LAYOUT = os.environ.get("LAYOUT", "inside")
CASES = [c.strip() for c in os.environ.get(
    "CASES", "candle x1,candle x2,big x3,split x3,lib x1").split(",") if c.strip()]
MODES = [m.strip() for m in os.environ.get("MODES", "verify,ci,direct,memo").split(",") if m.strip()]
ARCHS3 = ["sm_80", "sm_90", "sm_100"]
RESULTS = BENCH / "proof-results.json"


def say(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def load():
    return " ".join(open("/proc/loadavg").read().split()[:3])


# ---- the crates -----------------------------------------------------------

def candle_crate(name, archs, embed):
    """candle-kernels' PTX part on occ-build alone (candle.py's crates (b)
    and (c), without libmoe); its lib.rs is empty: only the build script
    runs here."""
    version, src_root, _ = candle.fetch_candle()
    path = BENCH / name
    ptx = candle.ptx_files(src_root / "src")
    if SMOKE:
        ptx = [f for f in ptx if Path(f).name in ("affine.cu", "binary.cu")]
    if not (path / "build.rs").exists() or "occ-build alone" not in (path / "build.rs").read_text():
        candle.copy_source(src_root, path)
        (path / "Cargo.toml.orig").unlink(missing_ok=True)
    write(path / "build.rs", candle.occ_build_rs(ptx, [], archs, embed, False))
    write(path / "src/lib.rs", "")
    shutil.copy(HERE / "Cargo.lock", path / "Cargo.lock")
    return path, version, len(ptx), ptx[0]


def lib_crate():
    """One host-code file (a kernel and its host launcher) as a static library."""
    path = BENCH / "hostlib"
    write(path / "build.rs", "fn main() {\n    occ_build::Build::new()\n"
          '        .file("kernels/launch.cu")\n        .arch("sm_80")\n'
          '        .static_lib("launch")\n        .compile();\n}\n')
    write(path / "kernels/launch.cu", "// generated by occ's bench/proof.py\n"
          "__global__ void scale(float* p, float a, int n) {\n"
          "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) p[i] *= a;\n}\n"
          'extern "C" void launch_scale(float* p, float a, int n) {\n'
          "  scale<<<(n + 255) / 256, 256>>>(p, a, n);\n}\n")
    write(path / "src/lib.rs", "")
    if not (path / "Cargo.lock").exists():
        shutil.copy(HERE / "Cargo.lock", path / "Cargo.lock")
    return path


def cases():
    out = []
    for case in CASES:
        if case == "candle x1":
            path, version, n, first = candle_crate("candle_sm80", ["sm_80"], "Ptx")
            out.append({"label": case, "path": path, "archs": None, "touch": first,
                        "what": f"candle-kernels {version}, PTX part ({n} files), sm_80, PTX embedded"})
        elif case == "candle x2":
            path, version, n, first = candle_crate("candle_sm80_sm90", ["sm_80", "sm_90"], None)
            out.append({"label": case, "path": path, "archs": None, "touch": first,
                        "what": f"candle-kernels {version}, PTX part ({n} files), sm_80 + sm_90, fatbin"})
        elif case == "big x3":
            out.append({"label": case, "path": memo.crate("big", 1), "archs": ARCHS3,
                        "touch": "kernels/many00.cu", "what": f"{KERNELS} kernels in 1 file × 3 archs"})
        elif case == "split x3":
            out.append({"label": case, "path": memo.crate("split", SPLIT), "archs": ARCHS3,
                        "touch": "kernels/many00.cu",
                        "what": f"{KERNELS} kernels in {SPLIT} files × 3 archs"})
        elif case == "lib x1":
            out.append({"label": case, "path": lib_crate(), "archs": None, "touch": "kernels/launch.cu",
                        "what": "1 host-code file as a static library, sm_80"})
        else:
            sys.exit(f"unknown case {case!r}")
    return out


# ---- running the script ---------------------------------------------------

def compiles(since):
    return len(memo.NVCC_LOG.read_text().splitlines()[since:]) if memo.NVCC_LOG.exists() else 0


def run(case, script, out, mode, bless=False):
    """The build script run directly with cargo's variables (memo.py's
    `run`, plus the mode's variables and CPU time)."""
    path = case["path"]
    os.utime(path / case["touch"])
    e = memo.env("after")
    e.pop("CARGO_TARGET_DIR")
    for k in ("CI", "GITHUB_ACTIONS"):
        e.pop(k, None)
    e.update({"OUT_DIR": str(out), "CARGO_MANIFEST_DIR": str(path), "CARGO_PKG_NAME": path.name,
              "CARGO_PKG_VERSION": "0.0.0", "NUM_JOBS": str(os.cpu_count()),
              "TARGET": "x86_64-unknown-linux-gnu", "HOST": "x86_64-unknown-linux-gnu",
              "PROFILE": "debug", "OPT_LEVEL": "0", "DEBUG": "true", "RUSTC": "rustc"})
    if case["archs"]:
        e["OCC_ARCHS"] = ",".join(case["archs"])
    if bless:
        e["OCC_BLESS"] = "1"
    if mode == "verify":
        e["OCC_CACHE"] = "verify"
    elif mode == "ci":
        e["CI"] = "true"
    elif mode == "direct":
        shutil.rmtree(out / "occ/cache/memo", ignore_errors=True)
    since = compiles(0)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    p = subprocess.run(["nice", str(script)], cwd=path, env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0 or "cargo::error" in p.stdout:
        sys.exit(f"{script} ({mode}) failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "nvcc": compiles(since),
            "disproved": p.stdout.count("did not hold"), "load": load()}


def main():
    BENCH.mkdir(parents=True, exist_ok=True)
    candle.setup_wrappers()  # candle.env()'s RUSTC_WRAPPER, for `cargo fetch`
    write(memo.LAUNCHER, f"#!/bin/sh\ns=$(date +%s.%N)\n\"$@\"\nrc=$?\n"
          f"echo \"$s $(date +%s.%N) $*\" >> '{memo.NVCC_LOG}'\nexit $rc\n", 0o755)
    meta = {"start": time.strftime("%F %T UTC", time.gmtime()), "load_start": load(),
            "occ": subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"],
                                  capture_output=True, text=True).stdout.strip(),
            "reps": REPS, "kernels": KERNELS, "split": SPLIT, "smoke": SMOKE, "layout": LAYOUT,
            "nproc": os.cpu_count()}
    results = json.loads(RESULTS.read_text()) if KEEP and RESULTS.exists() else {}
    plan = cases()
    for case in plan:
        label = case["label"]
        say(f"{label}: {case['what']}: build script (cargo build)")
        script = memo.script_of(case["path"], "after")
        out = (case["path"] / "target/proof-out" if LAYOUT == "inside" else BENCH / "out") / label.replace(" ", "")
        r = results.setdefault(label, {})
        r["what"] = case["what"]
        if KEEP and (out / "occ/manifest.json").exists() and "cold" in r:
            say(f"{label}: kept {out} (cold build from the earlier run)")
        else:
            shutil.rmtree(out, ignore_errors=True)
            (case["path"] / "occ.lock").unlink(missing_ok=True)
            say(f"{label}: cold build, blessed (load {load()})")
            r["cold"] = run(case, script, out, "cold", bless=True)
            say(f"{label}: cold {r['cold']}")
        run(case, script, out, "memo")  # untimed: writes the memo
        for m in MODES:
            r[m] = []
        for rep in range(REPS):
            for m in MODES:
                x = run(case, script, out, m)
                r[m].append(x)
                say(f"{label} rep {rep + 1} {m}: wall {x['wall']:.2f} s, cpu {x['cpu']:.2f} s, "
                    f"nvcc {x['nvcc']}, disproved {x['disproved']}, load {x['load']}")
        RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    meta["end"] = time.strftime("%F %T UTC", time.gmtime())
    meta["load_end"] = load()
    text = report(meta, results, [c["label"] for c in plan])
    print(text)
    (BENCH / "proof-results.md").write_text(text)
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    (BENCH / "proof-meta.json").write_text(json.dumps(meta, indent=1) + "\n")


# ---- report ---------------------------------------------------------------

def med(rs, key):
    return statistics.median(x[key] for x in rs)


def cell(rs, key, digits=2):
    return f"**{med(rs, key):.{digits}f}** ({', '.join(f'{x[key]:.{digits}f}' for x in rs)})"


def report(meta, results, labels):
    out = [f"occ {meta['occ']}; nproc {meta['nproc']}; REPS={meta['reps']}; "
           f"OUT_DIR {meta['layout']} the crate root; start {meta['start']}, load {meta['load_start']}; end {meta['end']}, load {meta['load_end']}"
           f"{'; SMOKE (figures mean nothing)' if meta['smoke'] else ''}\n\n",
           "| case | mode | wall (s), median (runs) | CPU (s), median (runs) | nvcc compiles | "
           "disproved | wall ÷ direct | wall ÷ cold |\n",
           "|---|---|---|---|---|---|---|---|\n"]
    for label in labels:
        r = results[label]
        cold = r.get("cold")
        direct = med(r["direct"], "wall") if r.get("direct") else None
        if cold:
            times = "%.0f×" % (cold["wall"] / direct) if direct else "—"
            out.append(f"| {r['what']} | cold (blessed, empty OUT_DIR) | **{cold['wall']:.1f}** | "
                       f"**{cold['cpu']:.1f}** | {cold['nvcc']} | — | {times} | 1 |\n")
        for m in MODES:
            rs = r.get(m)
            if not rs:
                continue
            w = med(rs, "wall")
            of_direct = "%.2f" % (w / direct) if direct else "—"
            of_cold = "%.3f" % (w / cold["wall"]) if cold else "—"
            out.append(f"| | {m} | {cell(rs, 'wall')} | {cell(rs, 'cpu')} | "
                       f"{'/'.join(str(x['nvcc']) for x in rs)} | "
                       f"{'/'.join(str(x['disproved']) for x in rs)} | "
                       f"{of_direct} | {of_cold} |\n")
    out.append("\nRatios per repetition (the modes of one repetition run back to back):\n\n"
               "| case | verify ÷ direct (wall) | verify ÷ direct (CPU) | verify ÷ memo (wall) | "
               "ci ÷ verify (wall) | verify ÷ cold (wall) | verify ÷ cold (CPU) |\n"
               "|---|---|---|---|---|---|---|\n")
    for label in labels:
        r = results[label]
        if not (r.get("verify") and r.get("direct") and r.get("cold")):
            continue

        def per(a, b, key, digits=2):
            if not r.get(a) or not r.get(b):
                return "—"
            xs = [x[key] / y[key] for x, y in zip(r[a], r[b]) if y[key]]
            return (f"**{med(r[a], key) / med(r[b], key):.{digits}f}** ("
                    + ", ".join(f"{x:.{digits}f}" for x in xs) + ")")

        v = r["verify"]
        out.append(f"| {r['what']} | {per('verify', 'direct', 'wall')} | {per('verify', 'direct', 'cpu')} | "
                   f"{per('verify', 'memo', 'wall', 0)} | {per('ci', 'verify', 'wall')} | "
                   f"**{med(v, 'wall') / r['cold']['wall']:.3f}** | "
                   f"**{med(v, 'cpu') / r['cold']['cpu']:.3f}** |\n")
    return "".join(out)


if __name__ == "__main__":
    main()
